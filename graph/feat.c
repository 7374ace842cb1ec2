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

void tma_graph_feat_rows(const tma_graph_t *g, int64_t first, int64_t count, float *out)
{
    const size_t D = (size_t)g->feature_dim;
    tma_feat_widen((const char *)g->features + (size_t)first * tma_graph_feat_row_bytes(g), g->feat_dtype,
                   (size_t)count * D, out);
}

float tma_graph_feat_at(const tma_graph_t *g, int64_t i)
{
    switch (g->feat_dtype) {
    case TMA_FEAT_F16: return tma_f16_to_f32(((const uint16_t *)g->features)[i]);
    case TMA_FEAT_BF16: return tma_bf16_to_f32(((const uint16_t *)g->features)[i]);
    case TMA_FEAT_F32: break;
    }
    return ((const float *)g->features)[i];
}

tma_status_t graph_feat_store_as(tma_graph_t *g, float *f32, tma_feat_dtype_t t)
{
    g->feat_dtype = t;
    if (t == TMA_FEAT_F32)
        return TMA_OK;
    const size_t n = (size_t)g->num_nodes * (size_t)g->feature_dim;
    void *dst = f32;
    if (!dst && !(dst = tma_graph_alloc(g, n ? n * tma_feat_dtype_size(t) : 1)))
        return TMA_ERR_NOMEM;
    tma_feat_narrow(g->features, n, t, dst);
    g->features = dst;
    return TMA_OK;
}
