/*
 * order.c: label propagation with a cap on a group's size, behind a
 * cache-friendly order of the nodes for layer-wise inference and behind the
 * streaming clusterer (`tma partition --clusterer lp`).
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
 *
 * The clusterer packs those groups into a given number of parts, largest
 * group first into the lightest part: METIS's partitions without METIS's
 * limits.  It reads the mapped adjacency a sweep at a time and holds 16
 * bytes a node (labels, sizes, counts and the result) beside it, where
 * METIS copies the whole graph with 32-bit ids (so it refuses a graph of
 * 2^31 adjacency entries or more) and coarsens it.
 */
#include "tma_graph.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define COMP "graph"

/* Sweeps at most; fewer once under one node in LP_QUIET changed its label. */
#define LP_SWEEPS 6
#define LP_QUIET 200

/* The tie-break among labels equally common around a node: a fixed hash. */
static inline uint32_t tie_hash(int32_t label, int sweep, uint32_t seed)
{
    uint32_t x = (uint32_t)label * 0x9E3779B1u + (uint32_t)sweep * 0x85EBCA77u + seed * 0xC2B2AE3Du;
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    return x ^ (x >> 12);
}

/* One node's new label: the most common among its neighbours' labels that
 * have room (its own counts as having room), its own kept on a tie. */
static int32_t best_label(const tma_graph_t *g, int64_t v, const int32_t *label, const int32_t *size,
                          int64_t max_cluster, int32_t *count, int32_t *touched, int sweep, uint32_t seed)
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
        const uint32_t h = tie_hash(l, sweep, seed);
        if (c > best_count || (best != own && h < best_hash)) {
            best = l;
            best_count = c;
            best_hash = h;
        }
    }
    count[own] = 0;
    return best;
}

/* The labels of label propagation with groups of at most max_cluster
 * nodes: label[v] in [0, N).  size[] (N + 1 entries) ends holding each
 * label's node count; count[] (N, zeroed) and touched[] (the largest
 * degree) are work space. */
static void propagate(const tma_graph_t *g, int64_t max_cluster, uint32_t seed, int32_t *label, int32_t *size,
                      int32_t *count, int32_t *touched)
{
    const int64_t N = g->num_nodes;
    for (int64_t v = 0; v < N; v++) {
        label[v] = (int32_t)v;
        size[v] = 1;
    }
    for (int sweep = 0; sweep < LP_SWEEPS; sweep++) {
        int64_t changed = 0;
        for (int64_t v = 0; v < N; v++) {
            int32_t l = best_label(g, v, label, size, max_cluster, count, touched, sweep, seed);
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
}

/* The work space of propagate(), or NULL (logged) when N is beyond 32-bit
 * labels or memory is short.  *touched_p is set. */
static int32_t *lp_alloc(const tma_graph_t *g, const char *what, int32_t **label_p, int32_t **size_p,
                         int32_t **touched_p)
{
    const int64_t N = g->num_nodes;
    if (N > INT32_MAX) {
        tma_log_error(COMP, "%s supports at most %d nodes, the graph has %" PRId64, what, INT32_MAX, N);
        return NULL;
    }
    int64_t maxdeg = 0;
    for (int64_t v = 0; v < N; v++)
        maxdeg = TMA_MAX(maxdeg, tma_graph_degree(g, v));
    int32_t *count = calloc((size_t)TMA_MAX(N, 1), sizeof *count);
    *label_p = malloc((size_t)TMA_MAX(N, 1) * sizeof **label_p);
    *size_p = malloc((size_t)(TMA_MAX(N, 1) + 1) * sizeof **size_p);
    *touched_p = malloc((size_t)TMA_MAX(maxdeg, 1) * sizeof **touched_p);
    if (!count || !*label_p || !*size_p || !*touched_p) {
        free(count);
        free(*label_p);
        free(*size_p);
        free(*touched_p);
        tma_log_error(COMP, "out of memory for %s over %" PRId64 " nodes", what, N);
        return NULL;
    }
    return count;
}

tma_status_t tma_graph_locality_order(const tma_graph_t *g, int64_t max_cluster, int32_t *node, int32_t *pos)
{
    if (!g || !node || !pos || max_cluster < 1)
        return TMA_ERR_INVALID;
    const int64_t N = g->num_nodes;
    int32_t *label, *size, *touched;
    int32_t *count = lp_alloc(g, "a locality order", &label, &size, &touched);
    if (!count)
        return N > INT32_MAX ? TMA_ERR_UNSUPPORTED : TMA_ERR_NOMEM;
    propagate(g, max_cluster, 0, label, size, count, touched);
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

/* Sorts label ids by size, largest first, ties by id: a counting sort
 * (sizes are at most the cap) into order[0 .. n_labels). */
static int64_t labels_by_size(const int32_t *size, int64_t N, int64_t cap, int32_t *order, int32_t *bucket)
{
    memset(bucket, 0, (size_t)(cap + 2) * sizeof *bucket);
    for (int64_t l = 0; l < N; l++)
        if (size[l] > 0)
            bucket[cap - size[l] + 1]++;
    for (int64_t b = 0; b <= cap; b++)
        bucket[b + 1] += bucket[b];
    for (int64_t l = 0; l < N; l++)
        if (size[l] > 0)
            order[bucket[cap - size[l]]++] = (int32_t)l;
    return bucket[cap];
}

/* The parts being filled: their loads, the lightest first in a binary
 * min-heap (ties: the lower part), and per part the edges to the group
 * being placed. */
typedef struct {
    int64_t n, *load, *edges;
    int32_t *heap, *pos, *touched;
} bins_t;

static int bin_less(const bins_t *b, int32_t x, int32_t y)
{
    return b->load[x] < b->load[y] || (b->load[x] == b->load[y] && x < y);
}

/* Part p's load grew: it sinks to its place. */
static void bin_sink(bins_t *b, int32_t p)
{
    int64_t i = b->pos[p];
    for (;;) {
        int64_t m = i, l = 2 * i + 1, r = l + 1;
        if (l < b->n && bin_less(b, b->heap[l], b->heap[m]))
            m = l;
        if (r < b->n && bin_less(b, b->heap[r], b->heap[m]))
            m = r;
        if (m == i)
            return;
        int32_t t = b->heap[i];
        b->heap[i] = b->heap[m];
        b->heap[m] = t;
        b->pos[b->heap[i]] = (int32_t)i;
        b->pos[b->heap[m]] = (int32_t)m;
        i = m;
    }
}

/* Adds node v's neighbours to b->edges by their part (unplaced ones, part
 * -1, left out), each part's first time to b->touched[nt ..]: the new nt. */
static int64_t tally_parts(const tma_graph_t *g, int64_t v, const int32_t *part, bins_t *b, int64_t nt)
{
    const int64_t *row = g->indices + g->indptr[v], deg = tma_graph_degree(g, v);
    for (int64_t k = 0; k < deg; k++) {
        const int32_t p = part[row[k]];
        if (p >= 0 && b->edges[p]++ == 0)
            b->touched[nt++] = p;
    }
    return nt;
}

/* The part for the group nodes[0 .. sz): of the parts with room for it,
 * the one its nodes have the most edges to (ties: the lighter); else the
 * lightest. */
static int32_t place_group(const tma_graph_t *g, const int32_t *nodes, int64_t sz, const int32_t *part,
                           int64_t room, bins_t *b)
{
    int64_t nt = 0;
    for (int64_t i = 0; i < sz; i++)
        nt = tally_parts(g, nodes[i], part, b, nt);
    int32_t best = b->heap[0];
    int64_t best_edges = 0;
    for (int64_t i = 0; i < nt; i++) {
        const int32_t p = b->touched[i];
        const int64_t e = b->edges[p];
        b->edges[p] = 0;
        if (b->load[p] + sz > room)
            continue;
        if (e > best_edges || (e == best_edges && bin_less(b, p, best))) {
            best = p;
            best_edges = e;
        }
    }
    return best;
}

/* Refinement sweeps over the packed parts: each node moves to the part
 * most of its neighbours are in, when that part has room and holds more of
 * them than its own.  Moves shrink the cut; loads stay under room. */
static void refine(const tma_graph_t *g, int32_t *part, int64_t room, bins_t *b)
{
    const int64_t N = g->num_nodes;
    for (int sweep = 0; sweep < LP_SWEEPS; sweep++) {
        int64_t moved = 0;
        for (int64_t v = 0; v < N; v++) {
            const int64_t nt = tally_parts(g, v, part, b, 0);
            const int32_t own = part[v];
            int32_t best = own;
            int64_t best_edges = b->edges[own];
            for (int64_t i = 0; i < nt; i++) {
                const int32_t p = b->touched[i];
                const int64_t e = b->edges[p];
                b->edges[p] = 0;
                if (p != own && b->load[p] + 1 <= room && (e > best_edges || (e == best_edges && best != own && p < best))) {
                    best = p;
                    best_edges = e;
                }
            }
            b->edges[own] = 0;
            if (best != own) {
                b->load[own]--;
                b->load[best]++;
                part[v] = best;
                moved++;
            }
        }
        if (moved * LP_QUIET < N)
            break;
    }
}

tma_status_t tma_graph_partition_lp(const tma_graph_t *g, int64_t parts, uint64_t seed, int32_t *part)
{
    const int64_t N = g->num_nodes;
    if (parts < 1 || parts > TMA_MAX(N, 1) || parts > INT32_MAX) {
        tma_log_error(COMP, "label propagation cannot cut %" PRId64 " nodes into %" PRId64 " parts", N, parts);
        return TMA_ERR_INVALID;
    }
    /* Groups of at most a quarter of a part (a whole part when parts are
     * small: mini-clusters of a few dozen nodes); a part takes groups up to
     * 1/32 over its share while one with room is linked to the group. */
    const int64_t per_part = (N + parts - 1) / parts;
    const int64_t cap = TMA_MAX(per_part < 32 ? per_part : per_part / 4, 1);
    const int64_t room = per_part + per_part / 32;
    int32_t *label, *size, *touched;
    int32_t *count = lp_alloc(g, "the label propagation clusterer", &label, &size, &touched);
    int32_t *bucket = malloc((size_t)(cap + 2) * sizeof *bucket);
    int32_t *nodes = malloc((size_t)TMA_MAX(N, 1) * sizeof *nodes);
    bins_t b = {parts, calloc((size_t)parts, sizeof *b.load), calloc((size_t)parts, sizeof *b.edges),
                malloc((size_t)parts * sizeof *b.heap), malloc((size_t)parts * sizeof *b.pos),
                malloc((size_t)parts * sizeof *b.touched)};
    tma_status_t st = TMA_OK;
    if (!count || !bucket || !nodes || !b.load || !b.heap || !b.pos || !b.edges || !b.touched) {
        if (count)
            tma_log_error(COMP, "out of memory for the label propagation clusterer");
        st = N > INT32_MAX ? TMA_ERR_RANGE : TMA_ERR_NOMEM;
        goto done;
    }
    propagate(g, cap, (uint32_t)(seed ^ (seed >> 32)), label, size, count, touched);
    /* count[] is free again: the groups by size, largest first.  Then
     * size[] becomes each group's end in nodes[], the nodes by group. */
    const int64_t n_groups = labels_by_size(size, N, cap, count, bucket);
    for (int64_t l = 0, at = 0; l < N; l++) {
        at += size[l];
        size[l] = (int32_t)at;
    }
    for (int64_t v = N - 1; v >= 0; v--)
        nodes[--size[label[v]]] = (int32_t)v;
    size[N] = (int32_t)N; /* size[l] is now group l's start, size[l + 1] its end */
    for (int64_t p = 0; p < parts; p++) {
        b.heap[p] = (int32_t)p;
        b.pos[p] = (int32_t)p;
    }
    for (int64_t v = 0; v < N; v++)
        part[v] = -1;
    for (int64_t i = 0; i < n_groups; i++) {
        const int32_t l = count[i];
        const int64_t from = size[l], sz = size[l + 1] - from;
        const int32_t p = place_group(g, nodes + from, sz, part, room, &b);
        for (int64_t k = 0; k < sz; k++)
            part[nodes[from + k]] = p;
        b.load[p] += sz;
        bin_sink(&b, p);
    }
    refine(g, part, room, &b);
    int64_t most = 0;
    for (int64_t p = 0; p < parts; p++)
        most = TMA_MAX(most, b.load[p]);
    tma_log_debug(COMP, "label propagation: %" PRId64 " groups of at most %" PRId64 " nodes into %" PRId64
                        " parts; the largest part %" PRId64 " nodes (%.2f of the mean)",
                  n_groups, cap, parts, most, N ? (double)most * (double)parts / (double)N : 0.0);
done:
    if (count) {
        free(label);
        free(size);
        free(count);
        free(touched);
    }
    free(bucket);
    free(nodes);
    free(b.load);
    free(b.heap);
    free(b.pos);
    free(b.edges);
    free(b.touched);
    return st;
}
