/*
 * sampler.c: GraphSAGE neighbour sampling into message-flow blocks, and the
 * full-neighbourhood blocks that layer-wise inference uses.  Both compute
 * their edge weights with the same two helpers below, so a block sampled
 * with every neighbour is the block inference sees.  See tma_graph.h for the
 * weighting (mean or GCN) and the layout of a sample.
 */
#include "tma_graph.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define COMP "sampler"

struct tma_graph_sampler {
    const tma_graph_t *g;
    tma_graph_sampler_opts_t o;
    tma_graph_sample_bounds_t bounds;
    int32_t *local_of;    /* [num_nodes] local id in the current sample, or -1 */
    uint8_t *flagged;     /* [num_nodes] 1 for an endpoint of an excluded edge */
    int64_t *excl_table;  /* open addressing: pairs (a, b), a < b; a = -1 empty */
    uint64_t excl_mask;   /* slots - 1 */
    int64_t *cand;        /* [threads][max degree] candidate positions of a flagged row */
    int64_t *chosen;      /* [threads][largest finite fanout] positions picked by Floyd */
    int64_t cand_stride, chosen_stride;
    int64_t *row_count;   /* [largest block's destinations] edges per row */
    int64_t *pick_node;   /* [largest block's edges] picked node ids (-1: self-loop) */
    int threads;
    int64_t max_degree;
};

/* ------------------------------------------------------------------ weights */

/* d = degree + 1: the self-loop is counted, as in GCN's D~ = D + I. */
static inline double gcn_dtilde(const tma_graph_t *g, int64_t v)
{
    return (double)(tma_graph_degree(g, v) + 1);
}

/* Per-row factor: c/k for GCN (the sampled sum is rescaled to the whole
 * neighbourhood), 1/(k + self) for the mean over the k sampled neighbours
 * (and the node itself when self-loops are asked for). */
static inline double row_scale(tma_graph_norm_t norm, int64_t c, int64_t k, int self_loops)
{
    if (norm == TMA_GRAPH_NORM_GCN)
        return k > 0 ? (double)c / (double)k : 0.0;
    int64_t terms = k + (self_loops ? 1 : 0);
    return terms > 0 ? 1.0 / (double)terms : 0.0;
}

/* Weight of neighbour j in row i (di = d_i for GCN). */
static inline float edge_weight(const tma_graph_t *g, tma_graph_norm_t norm, double scale, double di,
                                int64_t j)
{
    if (norm == TMA_GRAPH_NORM_GCN)
        return (float)(scale / sqrt(di * gcn_dtilde(g, j)));
    return (float)scale;
}

static inline float self_weight(tma_graph_norm_t norm, double scale, double di)
{
    return norm == TMA_GRAPH_NORM_GCN ? (float)(1.0 / di) : (float)scale;
}

/* The relation id of the message along CSR entry e (row v -> neighbour u):
 * it travels u -> v, the inverse of the entry's id; 0 when untyped. */
static inline int32_t message_rel(const tma_graph_t *g, int64_t e)
{
    return g->edge_rel ? tma_graph_rel_inverse(g, g->edge_rel[e]) : 0;
}

/* ------------------------------------------------------------------ excluded edges */

static inline uint64_t pair_hash(int64_t a, int64_t b)
{
    return tma_hash64((uint64_t)a * 0x9e3779b97f4a7c15ull ^ (uint64_t)b);
}

static void excl_insert(tma_graph_sampler_t *s, int64_t u, int64_t v)
{
    int64_t a = u < v ? u : v, b = u < v ? v : u;
    uint64_t h = pair_hash(a, b) & s->excl_mask;
    for (;;) {
        int64_t *slot = s->excl_table + 2 * h;
        if (slot[0] < 0) {
            slot[0] = a;
            slot[1] = b;
            return;
        }
        if (slot[0] == a && slot[1] == b)
            return;
        h = (h + 1) & s->excl_mask;
    }
}

static inline int excl_has(const tma_graph_sampler_t *s, int64_t u, int64_t v)
{
    int64_t a = u < v ? u : v, b = u < v ? v : u;
    uint64_t h = pair_hash(a, b) & s->excl_mask;
    for (;;) {
        const int64_t *slot = s->excl_table + 2 * h;
        if (slot[0] < 0)
            return 0;
        if (slot[0] == a && slot[1] == b)
            return 1;
        h = (h + 1) & s->excl_mask;
    }
}

/* ------------------------------------------------------------------ lifetime */

static int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

static tma_status_t compute_bounds(tma_graph_sampler_t *s)
{
    const tma_graph_t *g = s->g;
    const tma_graph_sampler_opts_t *o = &s->o;
    int64_t n = TMA_MIN(g->num_nodes, o->max_seeds);
    int64_t directed = 2 * g->num_train_edges;
    for (int h = 0; h < o->num_layers; h++) {
        int64_t per = o->fanouts[h] < 0 ? s->max_degree : TMA_MIN((int64_t)o->fanouts[h], s->max_degree);
        int64_t sampled = TMA_MIN(sat_mul(n, per), directed);
        int64_t edges = sat_add(sampled, o->self_loops ? n : 0);
        int b = o->num_layers - 1 - h;
        s->bounds.max_dst[b] = n;
        s->bounds.max_edges[b] = edges;
        if (b + 1 < o->num_layers)
            s->bounds.max_src[b + 1] = n;
        if (edges > INT32_MAX) {
            tma_log_error(COMP, "hop %d of a sample could hold %lld edges, more than a block's int32 "
                          "offsets allow; lower the batch size or fanouts[%d] (%d)",
                          h + 1, (long long)edges, h, o->fanouts[h]);
            return TMA_ERR_CONFIG;
        }
        n = TMA_MIN(g->num_nodes, sat_add(n, sampled));
    }
    s->bounds.max_nodes = n;
    if (o->num_layers > 0)
        s->bounds.max_src[0] = n;
    return TMA_OK;
}

tma_status_t tma_graph_sampler_create(const tma_graph_t *g, const tma_graph_sampler_opts_t *opts,
                                      tma_graph_sampler_t **s_p)
{
    if (!g || !opts || !s_p)
        return TMA_ERR_INVALID;
    if (opts->num_layers < 0 || opts->num_layers > TMA_GRAPH_MAX_LAYERS) {
        tma_log_error(COMP, "num_layers %d is out of range [0, %d]", opts->num_layers, TMA_GRAPH_MAX_LAYERS);
        return TMA_ERR_CONFIG;
    }
    if (opts->transpose_from < 0 || opts->transpose_from > opts->num_layers) {
        tma_log_error(COMP, "transpose_from %d is out of range [0, %d]", opts->transpose_from, opts->num_layers);
        return TMA_ERR_CONFIG;
    }
    int max_fanout = 1;
    for (int h = 0; h < opts->num_layers; h++) {
        if (opts->fanouts[h] == 0 || opts->fanouts[h] < -1) {
            tma_log_error(COMP, "fanouts[%d] = %d: a fanout is a positive count or -1 (all neighbours)", h,
                          opts->fanouts[h]);
            return TMA_ERR_CONFIG;
        }
        max_fanout = TMA_MAX(max_fanout, opts->fanouts[h]);
    }
    if (opts->max_seeds < 1 || opts->max_excluded < 0 || (opts->norm != TMA_GRAPH_NORM_MEAN &&
                                                          opts->norm != TMA_GRAPH_NORM_GCN)) {
        tma_log_error(COMP, "bad sampler options (max_seeds %lld, max_excluded %lld, norm %d)",
                      (long long)opts->max_seeds, (long long)opts->max_excluded, (int)opts->norm);
        return TMA_ERR_CONFIG;
    }
    if (g->num_nodes < 1 || g->num_nodes > INT32_MAX) {
        tma_log_error(COMP, "the graph has %lld nodes; the sampler needs 1 to %d", (long long)g->num_nodes,
                      INT32_MAX);
        return TMA_ERR_UNSUPPORTED;
    }

    tma_status_t st = TMA_ERR_NOMEM;
    tma_graph_sampler_t *s = calloc(1, sizeof *s);
    if (!s)
        goto fail;
    s->g = g;
    s->o = *opts;
    for (int64_t v = 0; v < g->num_nodes; v++)
        s->max_degree = TMA_MAX(s->max_degree, tma_graph_degree(g, v));
    uint64_t slots = 16;
    while (slots < 4 * (uint64_t)opts->max_excluded)
        slots <<= 1;
    s->excl_mask = slots - 1;
    s->threads = TMA_MAX(opts->threads, 1);
    s->cand_stride = TMA_MAX(s->max_degree, 1);
    s->chosen_stride = max_fanout;
    s->local_of = malloc((size_t)g->num_nodes * sizeof *s->local_of);
    s->flagged = calloc((size_t)g->num_nodes, 1);
    s->excl_table = malloc(slots * 2 * sizeof(int64_t));
    s->cand = malloc((size_t)s->threads * (size_t)s->cand_stride * sizeof(int64_t));
    s->chosen = malloc((size_t)s->threads * (size_t)s->chosen_stride * sizeof(int64_t));
    if (!s->local_of || !s->flagged || !s->excl_table || !s->cand || !s->chosen) {
        tma_log_error(COMP, "out of memory for a sampler over %lld nodes", (long long)g->num_nodes);
        goto fail;
    }
    memset(s->local_of, 0xff, (size_t)g->num_nodes * sizeof *s->local_of);
    memset(s->excl_table, 0xff, slots * 2 * sizeof(int64_t));
    st = compute_bounds(s);
    if (st != TMA_OK)
        goto fail;
    int64_t most_dst = 1, most_edges = 1;
    for (int l = 0; l < opts->num_layers; l++) {
        most_dst = TMA_MAX(most_dst, s->bounds.max_dst[l]);
        most_edges = TMA_MAX(most_edges, s->bounds.max_edges[l]);
    }
    s->row_count = malloc((size_t)most_dst * sizeof *s->row_count);
    s->pick_node = malloc((size_t)most_edges * sizeof *s->pick_node);
    if (!s->row_count || !s->pick_node) {
        tma_log_error(COMP, "out of memory for a sampler's %lld-edge blocks", (long long)most_edges);
        st = TMA_ERR_NOMEM;
        goto fail;
    }
    *s_p = s;
    return TMA_OK;
fail:
    tma_graph_sampler_destroy(s);
    return st;
}

void tma_graph_sampler_destroy(tma_graph_sampler_t *s)
{
    if (!s)
        return;
    free(s->local_of);
    free(s->flagged);
    free(s->excl_table);
    free(s->cand);
    free(s->chosen);
    free(s->row_count);
    free(s->pick_node);
    free(s);
}

void tma_graph_sampler_bounds(const tma_graph_sampler_t *s, tma_graph_sample_bounds_t *b_p)
{
    *b_p = s->bounds;
}

/* ------------------------------------------------------------------ sampling */

/* Floyd's algorithm: k distinct positions of [0, n), k < n, into chosen[]. */
static void floyd(tma_rng_t *rng, int64_t n, int64_t k, int64_t *chosen)
{
    int64_t m = 0;
    for (int64_t j = n - k; j < n; j++) {
        int64_t t = (int64_t)tma_rng_below(rng, (uint64_t)j + 1);
        int dup = 0;
        for (int64_t q = 0; q < m; q++) {
            if (chosen[q] == t) {
                dup = 1;
                break;
            }
        }
        chosen[m++] = dup ? j : t;
    }
}

static inline int32_t local_id(tma_graph_sample_t *out, int32_t *local_of, int64_t v)
{
    int32_t l = local_of[v];
    if (l < 0) {
        l = (int32_t)out->num_nodes++;
        local_of[v] = l;
        out->nodes[l] = v;
    }
    return l;
}

/* Candidates of row v: the positions of its neighbours, less the excluded
 * edges of a flagged node (written to cand); returns their count.  Without
 * exclusions cand is not written and the positions are 0..deg-1. */
static int64_t row_candidates(const tma_graph_sampler_t *s, int64_t v, int64_t *cand, int *listed_p)
{
    const tma_graph_t *g = s->g;
    const int64_t deg = tma_graph_degree(g, v);
    *listed_p = 0;
    if (!s->flagged[v])
        return deg;
    const int64_t *row = g->indices + g->indptr[v];
    int64_t c = 0;
    for (int64_t p = 0; p < deg; p++)
        if (!excl_has(s, v, row[p]))
            cand[c++] = p;
    *listed_p = 1;
    return c;
}

/*
 * Samples the rows of one hop (destination nodes [0, n_dst) of the list) in
 * three passes: counts per row (parallel), then the picks with their weights
 * as node ids (parallel; each row has its own RNG stream), then local ids in
 * edge order (sequential).  The result does not depend on the thread count.
 */
static void sample_hop(tma_graph_sampler_t *s, int hop, uint64_t rng_seed, tma_graph_block_t *blk,
                       tma_graph_sample_t *out)
{
    const tma_graph_t *g = s->g;
    const int fanout = s->o.fanouts[hop];
    const int64_t n_dst = out->num_nodes;
    const int self = s->o.self_loops ? 1 : 0;
    const int threads = s->threads;
    int32_t *ip = blk->indptr;

    /* 1: edges per row (k_i plus the self-loop), then row offsets. */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 512) if (threads > 1 && n_dst > 2048)
    for (int64_t i = 0; i < n_dst; i++) {
        int64_t *cand = s->cand + (size_t)omp_get_thread_num() * (size_t)s->cand_stride;
        int listed;
        int64_t c = row_candidates(s, out->nodes[i], cand, &listed);
        int64_t k = (fanout < 0 || c <= fanout) ? c : fanout;
        s->row_count[i] = k + self;
    }
    ip[0] = 0;
    for (int64_t i = 0; i < n_dst; i++)
        ip[i + 1] = ip[i] + (int32_t)s->row_count[i];

    /* 2: the picks (node ids; -1 marks the self-loop) and their weights. */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 512) if (threads > 1 && n_dst > 2048)
    for (int64_t i = 0; i < n_dst; i++) {
        const int tid = omp_get_thread_num();
        int64_t *cand = s->cand + (size_t)tid * (size_t)s->cand_stride;
        int64_t *chosen = s->chosen + (size_t)tid * (size_t)s->chosen_stride;
        const int64_t v = out->nodes[i];
        const int64_t *row = g->indices + g->indptr[v];
        const double di = gcn_dtilde(g, v);
        int listed;
        const int64_t c = row_candidates(s, v, cand, &listed);
        const int64_t k = (fanout < 0 || c <= fanout) ? c : fanout;
        const double scale = row_scale(s->o.norm, c, k, s->o.self_loops);
        int64_t e = ip[i];
        if (self) {
            s->pick_node[e] = -1;
            blk->weights[e] = self_weight(s->o.norm, scale, di);
            if (blk->rel)
                blk->rel[e] = TMA_GRAPH_REL_SELF;
            e++;
        }
        const int64_t *pick = NULL;
        if (k < c) {
            tma_rng_t rng;
            tma_rng_seed(&rng, rng_seed, (uint64_t)v * TMA_GRAPH_MAX_LAYERS + (uint64_t)hop);
            floyd(&rng, c, k, chosen);
            pick = chosen;
        }
        for (int64_t q = 0; q < k; q++) {
            int64_t p = pick ? pick[q] : q;
            if (listed)
                p = cand[p];
            int64_t u = row[p];
            s->pick_node[e] = u;
            blk->weights[e] = edge_weight(g, s->o.norm, scale, di, u);
            if (blk->rel)
                blk->rel[e] = message_rel(g, g->indptr[v] + p);
            e++;
        }
    }

    /* 3: local ids, in edge order, so new nodes are numbered deterministically. */
    const int64_t ne = ip[n_dst];
    for (int64_t i = 0, e = 0; i < n_dst; i++)
        for (; e < ip[i + 1]; e++)
            blk->indices[e] = s->pick_node[e] < 0 ? (int32_t)i : local_id(out, s->local_of, s->pick_node[e]);
    blk->num_dst = n_dst;
    blk->num_src = out->num_nodes;
    blk->num_edges = ne;
}

/* The block's edges grouped by source: a counting sort, so each source's
 * edges keep the order of their destination rows. */
static void transpose_block(tma_graph_block_t *blk)
{
    int32_t *tp = blk->t_indptr;
    memset(tp, 0, (size_t)(blk->num_src + 1) * sizeof *tp);
    for (int64_t e = 0; e < blk->num_edges; e++)
        tp[blk->indices[e] + 1]++;
    for (int64_t j = 0; j < blk->num_src; j++)
        tp[j + 1] += tp[j];
    for (int64_t i = 0; i < blk->num_dst; i++) {
        for (int32_t e = blk->indptr[i]; e < blk->indptr[i + 1]; e++) {
            int32_t q = tp[blk->indices[e]]++;
            blk->t_indices[q] = (int32_t)i;
            blk->t_weights[q] = blk->weights[e];
            if (blk->rel && blk->t_rel)
                blk->t_rel[q] = blk->rel[e];
        }
    }
    /* tp[j] now holds the end of source j; shift back to starts. */
    for (int64_t j = blk->num_src; j > 0; j--)
        tp[j] = tp[j - 1];
    tp[0] = 0;
}

tma_status_t tma_graph_sampler_sample(tma_graph_sampler_t *s, const int64_t *seeds, int64_t n_seeds,
                                      const int64_t *excluded, int64_t n_excluded, uint64_t rng_seed,
                                      tma_graph_sample_t *out)
{
    const tma_graph_t *g = s->g;
    if (n_seeds < 1 || n_seeds > s->o.max_seeds || n_excluded < 0 || n_excluded > s->o.max_excluded) {
        tma_log_error(COMP, "sample of %lld seeds and %lld excluded edges is outside the sampler's limits "
                      "(1..%lld seeds, at most %lld excluded)", (long long)n_seeds, (long long)n_excluded,
                      (long long)s->o.max_seeds, (long long)s->o.max_excluded);
        return TMA_ERR_RANGE;
    }
    for (int64_t i = 0; i < n_seeds; i++) {
        if (seeds[i] < 0 || seeds[i] >= g->num_nodes) {
            tma_log_error(COMP, "seed %lld is not a node (the graph has %lld)", (long long)seeds[i],
                          (long long)g->num_nodes);
            return TMA_ERR_RANGE;
        }
    }
    for (int64_t i = 0; i < 2 * n_excluded; i++) {
        if (excluded[i] < 0 || excluded[i] >= g->num_nodes) {
            tma_log_error(COMP, "excluded edge endpoint %lld is not a node", (long long)excluded[i]);
            return TMA_ERR_RANGE;
        }
    }
    for (int64_t i = 0; i < n_excluded; i++) {
        s->flagged[excluded[2 * i]] = 1;
        s->flagged[excluded[2 * i + 1]] = 1;
        excl_insert(s, excluded[2 * i], excluded[2 * i + 1]);
    }

    out->num_layers = s->o.num_layers;
    out->num_nodes = 0;
    for (int64_t i = 0; i < n_seeds; i++)
        out->seed_local[i] = local_id(out, s->local_of, seeds[i]);
    out->num_seeds = out->num_nodes;
    for (int h = 0; h < s->o.num_layers; h++)
        sample_hop(s, h, rng_seed, &out->blocks[s->o.num_layers - 1 - h], out);
    if (s->o.transpose)
        for (int l = s->o.transpose_from; l < s->o.num_layers; l++)
            transpose_block(&out->blocks[l]);
    if (out->node_type)
        for (int64_t i = 0; i < out->num_nodes; i++)
            out->node_type[i] = tma_graph_node_type(g, out->nodes[i]);

    /* Leave the bookkeeping clean for the next call. */
    for (int64_t i = 0; i < out->num_nodes; i++)
        s->local_of[out->nodes[i]] = -1;
    for (int64_t i = 0; i < n_excluded; i++) {
        s->flagged[excluded[2 * i]] = 0;
        s->flagged[excluded[2 * i + 1]] = 0;
    }
    if (n_excluded)
        memset(s->excl_table, 0xff, (s->excl_mask + 1) * 2 * sizeof(int64_t));
    return TMA_OK;
}

/* ------------------------------------------------------------------ full neighbourhoods */

int64_t tma_graph_block_full_edges(const tma_graph_t *g, int64_t r0, int64_t r1, int self_loops)
{
    return g->indptr[r1] - g->indptr[r0] + (self_loops ? r1 - r0 : 0);
}

/* Row r of the order (node[r], or r itself without one) into its place in
 * out (from edge out->indptr[r - r0]); source ids are positions in the order
 * (pos[u], or u). */
static void block_full_row(const tma_graph_t *g, tma_graph_norm_t norm, int self_loops, const int32_t *node,
                           const int32_t *pos, int64_t r0, int64_t r, tma_graph_block_t *out)
{
    const int64_t v = node ? node[r] : r;
    const int64_t deg = tma_graph_degree(g, v);
    const int64_t *row = g->indices + g->indptr[v];
    const double di = gcn_dtilde(g, v);
    const double scale = row_scale(norm, deg, deg, self_loops);
    int64_t e = out->indptr[r - r0];
    if (self_loops) {
        out->indices[e] = (int32_t)r;
        out->weights[e] = self_weight(norm, scale, di);
        if (out->rel)
            out->rel[e] = TMA_GRAPH_REL_SELF;
        e++;
    }
    for (int64_t p = 0; p < deg; p++) {
        out->indices[e] = pos ? pos[row[p]] : (int32_t)row[p];
        out->weights[e] = edge_weight(g, norm, scale, di, row[p]);
        if (out->rel)
            out->rel[e] = message_rel(g, g->indptr[v] + p);
        e++;
    }
}

static tma_status_t block_full(const tma_graph_t *g, tma_graph_norm_t norm, int self_loops, const int32_t *node,
                               const int32_t *pos, int64_t r0, int64_t r1, int threads, tma_graph_block_t *out)
{
    if (r0 < 0 || r1 < r0 || r1 > g->num_nodes || g->num_nodes > INT32_MAX) {
        tma_log_error(COMP, "full block of rows [%lld, %lld) is out of range", (long long)r0, (long long)r1);
        return TMA_ERR_RANGE;
    }
    /* The rows' offsets first (refused past int32 before any row is
     * written), then the rows themselves on all threads. */
    int64_t e = 0;
    out->indptr[0] = 0;
    for (int64_t r = r0; r < r1; r++) {
        e += tma_graph_degree(g, node ? node[r] : r) + (self_loops ? 1 : 0);
        if (e > INT32_MAX) {
            tma_log_error(COMP, "full block of rows [%lld, %lld) has over %d edges", (long long)r0, (long long)r1,
                          INT32_MAX);
            return TMA_ERR_RANGE;
        }
        out->indptr[r - r0 + 1] = (int32_t)e;
    }
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(static, 256) if (threads > 1 && e > 16384)
    for (int64_t r = r0; r < r1; r++)
        block_full_row(g, norm, self_loops, node, pos, r0, r, out);
    out->num_dst = r1 - r0;
    out->num_src = g->num_nodes;
    out->num_edges = e;
    return TMA_OK;
}

tma_status_t tma_graph_block_full(const tma_graph_t *g, tma_graph_norm_t norm, int self_loops, int64_t r0,
                                  int64_t r1, tma_graph_block_t *out)
{
    return block_full(g, norm, self_loops, NULL, NULL, r0, r1, 1, out);
}

tma_status_t tma_graph_block_full_ordered(const tma_graph_t *g, tma_graph_norm_t norm, int self_loops,
                                          const int32_t *node, const int32_t *pos, int64_t r0, int64_t r1,
                                          int threads, tma_graph_block_t *out)
{
    if (!node != !pos)
        return TMA_ERR_INVALID;
    return block_full(g, norm, self_loops, node, pos, r0, r1, threads, out);
}
