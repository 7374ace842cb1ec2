/* test_sampler.c: the neighbour sampler and the full-neighbourhood blocks:
 * structure, exclusions, weights, determinism, uniformity and bad input. */
#include "tma_test.h"
#include "../gnn/gnn_testutil.h"

#include <math.h>
#include <string.h>

static int excluded(const int64_t *ex, int64_t n, int64_t a, int64_t b)
{
    for (int64_t i = 0; i < n; i++)
        if ((ex[2 * i] == a && ex[2 * i + 1] == b) || (ex[2 * i] == b && ex[2 * i + 1] == a))
            return 1;
    return 0;
}

static int64_t eligible(const tma_graph_t *g, int64_t v, const int64_t *ex, int64_t nex)
{
    int64_t c = 0;
    for (int64_t p = g->indptr[v]; p < g->indptr[v + 1]; p++)
        c += !excluded(ex, nex, v, g->indices[p]);
    return c;
}

/* Checks every structural promise of a sample. */
static void check_sample(const tma_graph_t *g, const tma_graph_sampler_opts_t *o, const tma_graph_sample_t *s,
                         const int64_t *seeds, int64_t nseeds, const int64_t *ex, int64_t nex)
{
    const int L = o->num_layers;
    for (int64_t i = 0; i < nseeds; i++)
        CHECK_MSG(s->seed_local[i] >= 0 && s->seed_local[i] < s->num_seeds && s->nodes[s->seed_local[i]] == seeds[i],
                  "seed %lld (node %lld) at local row %lld of %lld", (long long)i, (long long)seeds[i],
                  (long long)s->seed_local[i], (long long)s->num_seeds);
    for (int64_t i = 0; i < s->num_nodes; i++)
        for (int64_t j = i + 1; j < s->num_nodes; j++)
            ASSERT_NE(s->nodes[i], s->nodes[j]);
    if (L == 0) {
        ASSERT_EQ(s->num_nodes, s->num_seeds);
        return;
    }
    ASSERT_EQ(s->blocks[L - 1].num_dst, s->num_seeds);
    ASSERT_EQ(s->blocks[0].num_src, s->num_nodes);
    for (int l = 0; l + 1 < L; l++)
        ASSERT_EQ(s->blocks[l + 1].num_src, s->blocks[l].num_dst);
    for (int l = 0; l < L; l++) {
        const tma_graph_block_t *b = &s->blocks[l];
        const int hop = L - 1 - l, fan = o->fanouts[hop];
        ASSERT_EQ(b->indptr[0], 0);
        ASSERT_EQ(b->indptr[b->num_dst], b->num_edges);
        for (int64_t i = 0; i < b->num_dst; i++) {
            int64_t v = s->nodes[i];
            int32_t e0 = b->indptr[i], e1 = b->indptr[i + 1];
            int self = o->self_loops ? 1 : 0;
            int64_t c = eligible(g, v, ex, nex), k = (fan < 0 || c <= fan) ? c : fan;
            CHECK_MSG(e1 - e0 == k + self, "row %lld of block %d: %d entries, want %lld", (long long)i, l, e1 - e0,
                      (long long)(k + self));
            double di = (double)tma_graph_degree(g, v) + 1;
            if (self) {
                ASSERT_EQ(b->indices[e0], i);
                if (o->norm == TMA_GRAPH_NORM_GCN)
                    CHECK_NEAR(b->weights[e0], 1.0 / di, 1e-7);
                else
                    CHECK_NEAR(b->weights[e0], 1.0 / (double)(k + 1), 1e-7);
            }
            for (int32_t e = e0 + self; e < e1; e++) {
                int32_t j = b->indices[e];
                ASSERT_GE(j, 0);
                ASSERT_LT(j, b->num_src);
                int64_t u = s->nodes[j];
                CHECK(tma_graph_has_edge(g, v, u));
                CHECK(!excluded(ex, nex, v, u));
                for (int32_t q = e0 + self; q < e; q++)
                    ASSERT_NE(b->indices[q], j);
                double want = o->norm == TMA_GRAPH_NORM_GCN
                                  ? ((double)c / (double)k) / sqrt(di * ((double)tma_graph_degree(g, u) + 1))
                                  : 1.0 / (double)(k + self);
                CHECK_NEAR(b->weights[e], want, 1e-6 * want);
            }
        }
        if (!o->transpose)
            continue;
        if (l < o->transpose_from) {
            /* Not transposed: its t_* arrays (zeroed) are left alone. */
            ASSERT_EQ(b->t_indptr[b->num_src], 0);
            continue;
        }
        /* The transpose holds every edge once, by source, rows increasing. */
        ASSERT_EQ(b->t_indptr[0], 0);
        ASSERT_EQ(b->t_indptr[b->num_src], b->num_edges);
        for (int64_t j = 0; j < b->num_src; j++) {
            for (int32_t q = b->t_indptr[j]; q < b->t_indptr[j + 1]; q++) {
                int32_t i = b->t_indices[q];
                ASSERT_GE(i, 0);
                ASSERT_LT(i, b->num_dst);
                CHECK_MSG(q == b->t_indptr[j] || b->t_indices[q - 1] <= i, "row %d of the transpose: %d after %d",
                          (int)j, (int)i, (int)b->t_indices[q - 1]);
                int found = 0;
                for (int32_t e = b->indptr[i]; e < b->indptr[i + 1]; e++)
                    found += b->indices[e] == j && b->weights[e] == b->t_weights[q];
                ASSERT_GE(found, 1);
            }
        }
    }
}

/* The locality order: a permutation with its inverse, the same every time,
 * and local: on a planted-partition graph whose communities interleave in id
 * order (community = id mod k), most edges join nodes close in the order. */
static void check_locality_order(void)
{
    gnn_test_graph_opts_t go;
    gnn_test_graph_defaults(&go);
    go.nodes = 4000;
    go.communities = 8;
    go.avg_degree = 12;
    go.homophily = 0.95;
    tma_graph_t *g = gnn_test_graph(&go);
    const int64_t N = g->num_nodes, cap = 256;
    int32_t *node = malloc((size_t)N * 4), *pos = malloc((size_t)N * 4);
    int32_t *node2 = malloc((size_t)N * 4), *pos2 = malloc((size_t)N * 4);
    CHECK_OK(tma_graph_locality_order(g, cap, node, pos));
    int64_t fixed = 0;
    for (int64_t v = 0; v < N; v++) {
        ASSERT_GE(pos[v], 0);
        ASSERT_LT(pos[v], N);
        ASSERT_EQ(node[pos[v]], v);
        fixed += pos[v] == v;
    }
    CHECK_MSG(fixed < N / 2, "the order leaves %lld of %lld nodes in place", (long long)fixed, (long long)N);
    CHECK_OK(tma_graph_locality_order(g, cap, node2, pos2));
    ASSERT_EQ(memcmp(node, node2, (size_t)N * 4), 0);
    /* Edges within a group's reach: in id order about 2 cap / N of them (13 %). */
    int64_t near_ord = 0, near_id = 0, edges = g->indptr[N];
    for (int64_t v = 0; v < N; v++)
        for (int64_t p = g->indptr[v]; p < g->indptr[v + 1]; p++) {
            int64_t u = g->indices[p];
            near_ord += llabs((long long)pos[u] - pos[v]) < cap;
            near_id += llabs((long long)(u - v)) < cap;
        }
    double f_ord = (double)near_ord / (double)edges, f_id = (double)near_id / (double)edges;
    fprintf(stderr, "locality order: %.3f of edges within %lld positions (id order %.3f)\n", f_ord, (long long)cap,
            f_id);
    CHECK_MSG(f_ord > 0.45 && f_ord > 3 * f_id, "the order is not local: %.3f of edges near (id order %.3f)", f_ord,
              f_id);
    /* The whole graph's block over the order on two threads is the one thread's, row for row. */
    {
        const int64_t ne = tma_graph_block_full_edges(g, 0, N, 1);
        ASSERT_GT(ne, 16384); /* enough to run on both threads */
        tma_graph_block_t b[2];
        for (int t = 0; t < 2; t++) {
            memset(&b[t], 0, sizeof b[t]);
            b[t].indptr = calloc((size_t)N + 1, 4);
            b[t].indices = calloc((size_t)ne, 4);
            b[t].weights = calloc((size_t)ne, 4);
            CHECK_OK(tma_graph_block_full_ordered(g, TMA_GRAPH_NORM_GCN, 1, node, pos, 0, N, 1 + t, &b[t]));
            ASSERT_EQ(b[t].num_edges, ne);
        }
        ASSERT_EQ(memcmp(b[0].indptr, b[1].indptr, (size_t)(N + 1) * 4), 0);
        ASSERT_EQ(memcmp(b[0].indices, b[1].indices, (size_t)ne * 4), 0);
        ASSERT_EQ(memcmp(b[0].weights, b[1].weights, (size_t)ne * 4), 0);
        /* No order (both NULL) is id order: tma_graph_block_full's block. */
        CHECK_OK(tma_graph_block_full_ordered(g, TMA_GRAPH_NORM_GCN, 1, NULL, NULL, 0, N, 2, &b[1]));
        CHECK_OK(tma_graph_block_full(g, TMA_GRAPH_NORM_GCN, 1, 0, N, &b[0]));
        ASSERT_EQ(memcmp(b[0].indices, b[1].indices, (size_t)ne * 4), 0);
        ASSERT_EQ(memcmp(b[0].weights, b[1].weights, (size_t)ne * 4), 0);
        for (int t = 0; t < 2; t++) {
            free(b[t].indptr);
            free(b[t].indices);
            free(b[t].weights);
        }
    }
    CHECK_STATUS(tma_graph_locality_order(g, 0, node, pos), TMA_ERR_INVALID);
    CHECK_STATUS(tma_graph_locality_order(g, cap, NULL, pos), TMA_ERR_INVALID);
    free(node);
    free(pos);
    free(node2);
    free(pos2);
    tma_graph_destroy(g);
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);
    gnn_test_graph_opts_t go;
    gnn_test_graph_defaults(&go);
    go.avg_degree = 14;
    tma_graph_t *g = gnn_test_graph(&go);

    /* Seeds with duplicates; exclude the first training edges of some seeds. */
    int64_t seeds[40], ex[2 * 10];
    for (int i = 0; i < 40; i++)
        seeds[i] = (i * 37) % g->num_nodes;
    seeds[5] = seeds[1];
    int64_t nex = 0;
    for (int64_t v = 0; v < g->num_nodes && nex < 10; v += 7) {
        if (tma_graph_degree(g, v) > 0) {
            ex[2 * nex] = v;
            ex[2 * nex + 1] = g->indices[g->indptr[v]];
            nex++;
        }
    }
    seeds[6] = ex[0];
    seeds[7] = ex[1];

    /* Mode 4: as 1, with block 0 not transposed (transpose_from 1). */
    for (int mode = 0; mode < 5; mode++) {
        tma_graph_sampler_opts_t o;
        memset(&o, 0, sizeof o);
        o.num_layers = mode == 3 ? 0 : 2;
        o.fanouts[0] = mode == 2 ? -1 : 5;
        o.fanouts[1] = 3;
        o.norm = mode == 1 || mode == 4 ? TMA_GRAPH_NORM_GCN : TMA_GRAPH_NORM_MEAN;
        o.self_loops = mode == 1 || mode == 4;
        o.transpose = mode == 1 || mode == 2 || mode == 4;
        o.transpose_from = mode == 4;
        if (mode == 4) {
            tma_graph_sampler_t *bad;
            o.transpose_from = 3;
            CHECK_STATUS(tma_graph_sampler_create(g, &o, &bad), TMA_ERR_CONFIG);
            o.transpose_from = -1;
            CHECK_STATUS(tma_graph_sampler_create(g, &o, &bad), TMA_ERR_CONFIG);
            o.transpose_from = 1;
        }
        o.max_seeds = 40;
        o.max_excluded = 10;
        tma_graph_sampler_t *sp;
        CHECK_OK(tma_graph_sampler_create(g, &o, &sp));
        tma_graph_sample_t a, b;
        gnn_test_sample_alloc(sp, o.num_layers, 40, 0, &a);
        gnn_test_sample_alloc(sp, o.num_layers, 40, 0, &b);
        CHECK_OK(tma_graph_sampler_sample(sp, seeds, 40, ex, nex, 12345, &a));
        check_sample(g, &o, &a, seeds, 40, ex, nex);
        /* Same seed, same sample; the sampler's bookkeeping is reset between calls. */
        CHECK_OK(tma_graph_sampler_sample(sp, seeds, 40, ex, nex, 12345, &b));
        ASSERT_EQ(a.num_nodes, b.num_nodes);
        ASSERT_EQ(memcmp(a.nodes, b.nodes, a.num_nodes * 8), 0);
        for (int l = 0; l < o.num_layers; l++) {
            ASSERT_EQ(a.blocks[l].num_edges, b.blocks[l].num_edges);
            ASSERT_EQ(memcmp(a.blocks[l].indices, b.blocks[l].indices,
                             a.blocks[l].num_edges * 4),
                      0);
            ASSERT_EQ(memcmp(a.blocks[l].weights, b.blocks[l].weights,
                             a.blocks[l].num_edges * 4),
                      0);
        }
        if (mode == 0) {
            /* Another seed gives another sample. */
            CHECK_OK(tma_graph_sampler_sample(sp, seeds, 40, ex, nex, 999, &b));
            check_sample(g, &o, &b, seeds, 40, ex, nex);
            CHECK(b.num_nodes != a.num_nodes ||
                  memcmp(a.blocks[0].indices, b.blocks[0].indices, a.blocks[0].num_edges * 4) != 0);
            /* Without exclusions the excluded edges do appear somewhere. */
            CHECK_OK(tma_graph_sampler_sample(sp, seeds, 40, NULL, 0, 12345, &b));
            check_sample(g, &o, &b, seeds, 40, NULL, 0);
            /* Bad input. */
            int64_t bad = g->num_nodes;
            CHECK_STATUS(tma_graph_sampler_sample(sp, &bad, 1, NULL, 0, 1, &b), TMA_ERR_RANGE);
            CHECK_STATUS(tma_graph_sampler_sample(sp, seeds, 41, NULL, 0, 1, &b), TMA_ERR_RANGE);
            CHECK_STATUS(tma_graph_sampler_sample(sp, seeds, 4, ex, 11, 1, &b), TMA_ERR_RANGE);
            int64_t badex[2] = {0, -1};
            CHECK_STATUS(tma_graph_sampler_sample(sp, seeds, 4, badex, 1, 1, &b), TMA_ERR_RANGE);
            /* ... and the sampler still works after refusing. */
            CHECK_OK(tma_graph_sampler_sample(sp, seeds, 40, ex, nex, 12345, &b));
            ASSERT_EQ(memcmp(a.nodes, b.nodes, a.num_nodes * 8), 0);
        }
        gnn_test_sample_free(&a);
        gnn_test_sample_free(&b);
        tma_graph_sampler_destroy(sp);
    }

    /* Full neighbourhoods: a GCN sample with fanout -1 equals the full block rows. */
    {
        tma_graph_sampler_opts_t o;
        memset(&o, 0, sizeof o);
        o.num_layers = 1;
        o.fanouts[0] = -1;
        o.norm = TMA_GRAPH_NORM_GCN;
        o.self_loops = 1;
        o.max_seeds = g->num_nodes;
        tma_graph_sampler_t *sp;
        CHECK_OK(tma_graph_sampler_create(g, &o, &sp));
        tma_graph_sample_t a;
        gnn_test_sample_alloc(sp, 1, g->num_nodes, 0, &a);
        int64_t *all = malloc((size_t)g->num_nodes * 8);
        for (int64_t v = 0; v < g->num_nodes; v++)
            all[v] = v;
        CHECK_OK(tma_graph_sampler_sample(sp, all, g->num_nodes, NULL, 0, 5, &a));
        int64_t ne = tma_graph_block_full_edges(g, 0, g->num_nodes, 1);
        tma_graph_block_t fb = {0};
        fb.indptr = calloc((size_t)g->num_nodes + 1, 4);
        fb.indices = calloc((size_t)ne, 4);
        fb.weights = calloc((size_t)ne, 4);
        CHECK_OK(tma_graph_block_full(g, TMA_GRAPH_NORM_GCN, 1, 0, g->num_nodes, &fb));
        ASSERT_EQ(fb.num_edges, a.blocks[0].num_edges);
        ASSERT_EQ(fb.num_edges, ne);
        /* Sum of weights of each row (orders may differ). */
        for (int64_t v = 0; v < g->num_nodes; v++) {
            double s1 = 0, s2 = 0;
            for (int32_t e = fb.indptr[v]; e < fb.indptr[v + 1]; e++)
                s1 += fb.weights[e] * (double)(fb.indices[e] + 1);
            for (int32_t e = a.blocks[0].indptr[v]; e < a.blocks[0].indptr[v + 1]; e++)
                s2 += a.blocks[0].weights[e] * (double)(a.nodes[a.blocks[0].indices[e]] + 1);
            CHECK_NEAR(s1, s2, 1e-6 * s1);
        }
        /* The symmetric normalisation: w(u,v) == w(v,u). */
        for (int64_t v = 0; v < g->num_nodes; v++)
            for (int32_t e = fb.indptr[v] + 1; e < fb.indptr[v + 1]; e++) {
                int64_t u = fb.indices[e];
                for (int32_t q = fb.indptr[u] + 1; q < fb.indptr[u + 1]; q++)
                    if (fb.indices[q] == v)
                        CHECK_NEAR(fb.weights[e], fb.weights[q], 1e-7);
            }
        /* A slice of rows matches the same rows of the whole. */
        tma_graph_block_t sb = {0};
        sb.indptr = calloc(11, 4);
        sb.indices = calloc((size_t)ne, 4);
        sb.weights = calloc((size_t)ne, 4);
        CHECK_OK(tma_graph_block_full(g, TMA_GRAPH_NORM_GCN, 1, 20, 30, &sb));
        ASSERT_EQ(sb.num_dst, 10);
        ASSERT_EQ(sb.num_src, g->num_nodes);
        ASSERT_EQ(memcmp(sb.indices, fb.indices + fb.indptr[20], sb.num_edges * 4), 0);
        ASSERT_EQ(memcmp(sb.weights, fb.weights + fb.indptr[20], sb.num_edges * 4), 0);
        CHECK_STATUS(tma_graph_block_full(g, TMA_GRAPH_NORM_GCN, 1, 30, 20, &sb), TMA_ERR_RANGE);
        /* Over an order: rows r0..r1 of it are the rows of their nodes, sources renamed to positions. */
        {
            const int64_t N = g->num_nodes;
            int32_t *node = malloc((size_t)N * 4), *pos = malloc((size_t)N * 4);
            for (int64_t r = 0; r < N; r++)
                node[r] = (int32_t)((r * 7 + 3) % N); /* N is not a multiple of 7 */
            for (int64_t r = 0; r < N; r++)
                pos[node[r]] = (int32_t)r;
            ASSERT_NE(N % 7, 0);
            CHECK_OK(tma_graph_block_full_ordered(g, TMA_GRAPH_NORM_GCN, 1, node, pos, 20, 30, 2, &sb));
            ASSERT_EQ(sb.num_dst, 10);
            ASSERT_EQ(sb.num_src, N);
            for (int64_t r = 20; r < 30; r++) {
                const int64_t v = node[r];
                const int32_t *e0 = sb.indices + sb.indptr[r - 20];
                ASSERT_EQ(sb.indptr[r - 20 + 1] - sb.indptr[r - 20], fb.indptr[v + 1] - fb.indptr[v]);
                for (int32_t k = 0; k < fb.indptr[v + 1] - fb.indptr[v]; k++) {
                    /* the self-loop is the row's own position */
                    ASSERT_EQ(e0[k], pos[fb.indices[fb.indptr[v] + k]]);
                    ASSERT_EQ(sb.weights[sb.indptr[r - 20] + k], fb.weights[fb.indptr[v] + k]);
                }
            }
            CHECK_STATUS(tma_graph_block_full_ordered(g, TMA_GRAPH_NORM_GCN, 1, node, pos, 0, N + 1, 2, &sb),
                         TMA_ERR_RANGE);
            CHECK_STATUS(tma_graph_block_full_ordered(g, TMA_GRAPH_NORM_GCN, 1, NULL, pos, 0, 1, 2, &sb),
                         TMA_ERR_INVALID);
            free(node);
            free(pos);
        }
        free(sb.indptr);
        free(sb.indices);
        free(sb.weights);
        free(fb.indptr);
        free(fb.indices);
        free(fb.weights);
        free(all);
        gnn_test_sample_free(&a);
        tma_graph_sampler_destroy(sp);
    }

    /* Uniformity: each neighbour of a high-degree node is picked about f/d of the time. */
    {
        int64_t hub = 0;
        for (int64_t v = 0; v < g->num_nodes; v++)
            if (tma_graph_degree(g, v) > tma_graph_degree(g, hub))
                hub = v;
        const int f = 3;
        const int64_t d = tma_graph_degree(g, hub);
        ASSERT_GT(d, 2 * f);
        tma_graph_sampler_opts_t o;
        memset(&o, 0, sizeof o);
        o.num_layers = 1;
        o.fanouts[0] = f;
        o.max_seeds = 1;
        tma_graph_sampler_t *sp;
        CHECK_OK(tma_graph_sampler_create(g, &o, &sp));
        tma_graph_sample_t a;
        gnn_test_sample_alloc(sp, 1, 1, 0, &a);
        int counts[256] = {0};
        const int trials = 20000;
        for (int t = 0; t < trials; t++) {
            CHECK_OK(tma_graph_sampler_sample(sp, &hub, 1, NULL, 0, (uint64_t)t, &a));
            for (int32_t e = 0; e < a.blocks[0].num_edges; e++) {
                int64_t u = a.nodes[a.blocks[0].indices[e]];
                for (int64_t p = 0; p < d; p++)
                    if (g->indices[g->indptr[hub] + p] == u)
                        counts[p]++;
            }
        }
        double expect = (double)trials * f / (double)d, chi2 = 0;
        for (int64_t p = 0; p < d; p++)
            chi2 += (counts[p] - expect) * (counts[p] - expect) / expect;
        /* d-1 degrees of freedom; 3x the mean is far in the tail. */
        CHECK_MSG(chi2 < 3.0 * (double)(d - 1) + 10, "chi2 %.1f for %lld neighbours", chi2, (long long)d);
        gnn_test_sample_free(&a);
        tma_graph_sampler_destroy(sp);
    }

    /* Threads: a big enough sample runs its rows in parallel, and gives the
     * same blocks as one thread. */
    {
        gnn_test_graph_opts_t bo;
        gnn_test_graph_defaults(&bo);
        bo.nodes = 6000;
        bo.avg_degree = 12;
        bo.val = bo.test = 20;
        tma_graph_t *bg = gnn_test_graph(&bo);
        int64_t *bs = malloc(3000 * sizeof *bs), bex[2 * 50];
        for (int i = 0; i < 3000; i++)
            bs[i] = (i * 7919) % bg->num_nodes;
        for (int i = 0; i < 50; i++) {
            bex[2 * i] = bs[i];
            bex[2 * i + 1] = bg->indices[bg->indptr[bs[i]]];
        }
        tma_graph_sample_t r[2];
        tma_graph_sampler_t *sp[2];
        for (int t = 0; t < 2; t++) {
            tma_graph_sampler_opts_t o;
            memset(&o, 0, sizeof o);
            o.num_layers = 2;
            o.fanouts[0] = 5;
            o.fanouts[1] = 3;
            o.norm = TMA_GRAPH_NORM_GCN;
            o.self_loops = 1;
            o.transpose = 1;
            o.max_seeds = 3000;
            o.max_excluded = 50;
            o.threads = t ? 3 : 1;
            CHECK_OK(tma_graph_sampler_create(bg, &o, &sp[t]));
            gnn_test_sample_alloc(sp[t], 2, 3000, 0, &r[t]);
            CHECK_OK(tma_graph_sampler_sample(sp[t], bs, 3000, bex, 50, 77, &r[t]));
            if (t)
                check_sample(bg, &o, &r[t], bs, 3000, bex, 50);
        }
        ASSERT_EQ(r[0].num_nodes, r[1].num_nodes);
        ASSERT_GT(r[0].blocks[1].num_dst, 2048);
        ASSERT_EQ(memcmp(r[0].nodes, r[1].nodes, (size_t)r[0].num_nodes * 8), 0);
        for (int l = 0; l < 2; l++) {
            const tma_graph_block_t *x = &r[0].blocks[l], *y = &r[1].blocks[l];
            ASSERT_EQ(x->num_edges, y->num_edges);
            ASSERT_EQ(memcmp(x->indptr, y->indptr, (size_t)(x->num_dst + 1) * 4), 0);
            ASSERT_EQ(memcmp(x->indices, y->indices, (size_t)x->num_edges * 4), 0);
            ASSERT_EQ(memcmp(x->weights, y->weights, (size_t)x->num_edges * 4), 0);
            ASSERT_EQ(memcmp(x->t_indices, y->t_indices, (size_t)x->num_edges * 4), 0);
        }
        for (int t = 0; t < 2; t++) {
            gnn_test_sample_free(&r[t]);
            tma_graph_sampler_destroy(sp[t]);
        }
        free(bs);
        tma_graph_destroy(bg);
    }

    /* Bad options. */
    {
        tma_graph_sampler_opts_t o;
        memset(&o, 0, sizeof o);
        o.num_layers = 2;
        o.fanouts[0] = 0;
        o.fanouts[1] = 3;
        o.max_seeds = 4;
        tma_graph_sampler_t *sp = NULL;
        CHECK_STATUS(tma_graph_sampler_create(g, &o, &sp), TMA_ERR_CONFIG);
        o.fanouts[0] = 2;
        o.num_layers = TMA_GRAPH_MAX_LAYERS + 1;
        CHECK_STATUS(tma_graph_sampler_create(g, &o, &sp), TMA_ERR_CONFIG);
        o.num_layers = 2;
        o.max_seeds = 0;
        CHECK_STATUS(tma_graph_sampler_create(g, &o, &sp), TMA_ERR_CONFIG);
        ASSERT_NULL(sp);
    }

    tma_graph_destroy(g);
    check_locality_order();
    return tma_test_done();
}
