/*
 * order.c: a cache-friendly order of the nodes for layer-wise inference.
 *
 * Full-graph inference gathers, for every destination row, the rows of all
 * its neighbours from an N x d table far larger than the cache; in id order
 * those rows are random, and each gather is a trip to memory.  Walking the
 * destinations group by group, where a group holds nodes most of whose
 * neighbours are in the same group, brings a group's rows into the cache
 * once and reuses them for every edge inside it.  The groups come from label
 * propagation with a cap on a group's size (so that a group's rows fit in a
 * share of the cache, and a power-law graph does not collapse into one
 * label): each node in turn takes the label most of its neighbours hold,
 * among labels held by fewer than max_cluster nodes, for a few sweeps.
 */
#include "tma_graph.h"

#include <stdlib.h>
#include <string.h>

#define COMP "graph"

/* Sweeps at most; fewer once under one node in LP_QUIET changed its label. */
#define LP_SWEEPS 6
#define LP_QUIET 200

/* The tie-break among labels equally common around a node: a fixed hash. */
static inline uint32_t tie_hash(int32_t label, int sweep)
{
    uint32_t x = (uint32_t)label * 0x9E3779B1u + (uint32_t)sweep * 0x85EBCA77u;
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    return x ^ (x >> 12);
}

/* One node's new label: the most common among its neighbours' labels that
 * have room (its own counts as having room), its own kept on a tie. */
static int32_t best_label(const tma_graph_t *g, int64_t v, const int32_t *label, const int32_t *size,
                          int64_t max_cluster, int32_t *count, int32_t *touched, int sweep)
{
    const int64_t *row = g->indices + g->indptr[v];
    const int64_t deg = tma_graph_degree(g, v);
    int64_t nt = 0;
    for (int64_t p = 0; p < deg; p++) {
        int32_t l = label[row[p]];
        if (count[l]++ == 0)
            touched[nt++] = l;
    }
    const int32_t own = label[v];
    int32_t best = own, best_count = count[own];
    uint32_t best_hash = 0;
    for (int64_t i = 0; i < nt; i++) {
        const int32_t l = touched[i], c = count[l];
        count[l] = 0;
        if (l == own || size[l] >= max_cluster || c < best_count)
            continue;
        const uint32_t h = tie_hash(l, sweep);
        if (c > best_count || (best != own && h < best_hash)) {
            best = l;
            best_count = c;
            best_hash = h;
        }
    }
    count[own] = 0;
    return best;
}

tma_status_t tma_graph_locality_order(const tma_graph_t *g, int64_t max_cluster, int32_t *node, int32_t *pos)
{
    if (!g || !node || !pos || max_cluster < 1)
        return TMA_ERR_INVALID;
    const int64_t N = g->num_nodes;
    if (N > INT32_MAX) {
        tma_log_error(COMP, "a locality order supports at most %d nodes, the graph has %lld", INT32_MAX,
                      (long long)N);
        return TMA_ERR_UNSUPPORTED;
    }
    int64_t maxdeg = 0;
    for (int64_t v = 0; v < N; v++)
        maxdeg = TMA_MAX(maxdeg, tma_graph_degree(g, v));
    int32_t *label = malloc((size_t)TMA_MAX(N, 1) * sizeof *label);
    int32_t *size = malloc((size_t)(TMA_MAX(N, 1) + 1) * sizeof *size);
    int32_t *count = calloc((size_t)TMA_MAX(N, 1), sizeof *count);
    int32_t *touched = malloc((size_t)TMA_MAX(maxdeg, 1) * sizeof *touched);
    if (!label || !size || !count || !touched) {
        free(label);
        free(size);
        free(count);
        free(touched);
        tma_log_error(COMP, "out of memory ordering %lld nodes", (long long)N);
        return TMA_ERR_NOMEM;
    }
    for (int64_t v = 0; v < N; v++) {
        label[v] = (int32_t)v;
        size[v] = 1;
    }
    for (int sweep = 0; sweep < LP_SWEEPS; sweep++) {
        int64_t changed = 0;
        for (int64_t v = 0; v < N; v++) {
            int32_t l = best_label(g, v, label, size, max_cluster, count, touched, sweep);
            if (l != label[v]) {
                size[label[v]]--;
                size[l]++;
                label[v] = l;
                changed++;
            }
        }
        if (changed * LP_QUIET < N)
            break;
    }
    /* The groups one after the other, each in id order: a counting sort by label. */
    memset(size, 0, (size_t)(N + 1) * sizeof *size);
    for (int64_t v = 0; v < N; v++)
        size[label[v] + 1]++;
    for (int64_t l = 0; l < N; l++)
        size[l + 1] += size[l];
    for (int64_t v = 0; v < N; v++) {
        int32_t p = size[label[v]]++;
        node[p] = (int32_t)v;
        pos[v] = p;
    }
    free(label);
    free(size);
    free(count);
    free(touched);
    return TMA_OK;
}
