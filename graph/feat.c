/*
 * feat.c: the seeded random projection behind --feat-dim and behind the
 * default features of graphs that have none.
 *
 * R is an (input dim x D) matrix with entries +-1/sqrt(D) whose signs come
 * from tma_hash64 of (seed, row, 64-column block): any row is regenerated on
 * demand, so projecting a sparse input costs O(nonzeros x D) time and no
 * memory beyond the output.
 */
#include "graph_int.h"

#include <math.h>
#include <string.h>

#define SALT_FEAT 0x6665617475726573ull

uint64_t graph_feat_seed(uint64_t seed)
{
    return tma_hash64(seed ^ SALT_FEAT);
}

void graph_feat_project_add(float *row, int32_t dim, int64_t j, float x, uint64_t seed)
{
    const float s = x / sqrtf((float)dim);
    const int64_t blocks = (dim + 63) / 64;
    for (int64_t b = 0; b < blocks; b++) {
        uint64_t w = tma_hash64(seed ^ tma_hash64((uint64_t)j * (uint64_t)blocks + (uint64_t)b));
        int lim = dim - 64 * b < 64 ? (int)(dim - 64 * b) : 64;
        float *r = row + 64 * b;
        for (int i = 0; i < lim; i++)
            r[i] += ((w >> i) & 1) ? s : -s;
    }
}

void graph_feat_random_ids(float *features, int64_t n, int32_t dim, uint64_t seed)
{
    graph_feat_random_rows(features, 0, n, dim, seed);
}

void graph_feat_random_rows(float *rows, int64_t first, int64_t count, int32_t dim, uint64_t seed)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) {
        float *row = rows + i * dim;
        memset(row, 0, (size_t)dim * sizeof(float));
        graph_feat_project_add(row, dim, first + i, 1.0f, seed);
    }
}

const char *tma_feat_source_str(tma_feat_source_t s)
{
    switch (s) {
    case TMA_FEAT_STORED: return "stored";
    case TMA_FEAT_PROJECTED: return "projected";
    case TMA_FEAT_DEFAULT: return "default";
    case TMA_FEAT_GENERATED: return "generated";
    }
    return "?";
}
