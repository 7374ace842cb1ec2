/* test_gen.c: the synthetic graphs: SBM homophily close to H, balanced
 * classes and class-correlated features; R-MAT's skewed degrees and node
 * bounds; determinism for a seed on 1 or 2 threads; refusal of bad
 * options. */
#include "tma_test.h"
#include "tma_graph.h"

#include <omp.h>
#include <string.h>

static tma_graph_build_opts_t build_opts(uint64_t seed)
{
    tma_graph_build_opts_t b;
    tma_graph_build_opts_init(&b);
    b.negatives = 10;
    b.seed = seed;
    return b;
}

/* The graph a generator made (st), once it passed tma_graph_validate. */
static tma_graph_t *validated(tma_status_t st, tma_graph_t *const *g_p, const char *what)
{
    CHECK_OK(st);
    CHECK_OK(tma_graph_validate(*g_p, what));
    return *g_p;
}

static tma_graph_t *sbm(int64_t n, int32_t k, double deg, double h, int32_t f, double noise, uint64_t seed,
                        tma_gen_report_t *rep)
{
    tma_gen_sbm_opts_t o = {n, k, deg, h, f, noise, seed, TMA_FEAT_F32};
    tma_graph_build_opts_t b = build_opts(seed);
    tma_graph_t *g = NULL;
    tma_gen_report_t r;
    return validated(tma_graph_gen_sbm(&o, &b, &g, rep ? rep : &r), &g, "sbm");
}

static tma_graph_t *rmat(int64_t nodes, int32_t scale, int64_t edges, uint64_t seed, tma_gen_report_t *rep)
{
    tma_gen_rmat_opts_t o = {nodes, scale, edges, 8, seed, TMA_FEAT_F32};
    tma_graph_build_opts_t b = build_opts(seed);
    tma_graph_t *g = NULL;
    tma_gen_report_t r;
    return validated(tma_graph_gen_rmat(&o, &b, &g, rep ? rep : &r), &g, "rmat");
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);

    /* Measured homophily tracks H. */
    const double hs[] = {0.9, 0.5, 0.2};
    for (int i = 0; i < 3; i++) {
        tma_gen_report_t r;
        tma_graph_t *g = sbm(6000, 4, 12, hs[i], 8, 1.0, 11, &r);
        CHECK_NEAR(r.homophily, hs[i], 0.02);
        CHECK_NEAR(tma_graph_homophily(g), r.homophily, 1e-12);
        /* n*deg/2 edges drawn, a few duplicates dropped. */
        ASSERT_EQ(r.build.input_edges, 36000);
        ASSERT_GT(r.build.edges, 35800);
        ASSERT_LE(r.build.edges, 36000);
        ASSERT_EQ(r.build.edges, r.build.input_edges - r.build.duplicates - r.build.self_loops);
        tma_graph_destroy(g);
    }

    /* Balanced classes; without noise every node carries its class centroid,
     * and different classes have different centroids. */
    {
        tma_graph_t *g = sbm(1003, 3, 6, 0.9, 5, 0.0, 2, NULL);
        const float *feat = g->features;
        int64_t count[3] = {0, 0, 0};
        int64_t first[3] = {-1, -1, -1};
        int same = 1;
        for (int64_t v = 0; v < g->num_nodes; v++) {
            int32_t c = g->labels[v];
            count[c]++;
            if (first[c] < 0)
                first[c] = v;
            same &= memcmp(feat + v * 5, feat + first[c] * 5, 5 * 4) == 0;
        }
        ASSERT_EQ(count[0], 335);
        ASSERT_EQ(count[1], 334);
        ASSERT_EQ(count[2], 334);
        CHECK(same);
        ASSERT_NE(memcmp(feat + first[0] * 5, feat + first[1] * 5, 5 * 4), 0);
        tma_graph_destroy(g);
    }

    /* Determinism: same seed on 1 and 2 threads, different seed differs. */
    omp_set_num_threads(1);
    tma_graph_t *a = sbm(4000, 4, 8, 0.8, 8, 0.5, 5, NULL);
    tma_graph_t *ra = rmat(0, 12, 40000, 5, NULL);
    omp_set_num_threads(2);
    tma_graph_t *b = sbm(4000, 4, 8, 0.8, 8, 0.5, 5, NULL);
    tma_graph_t *rb = rmat(0, 12, 40000, 5, NULL);
    tma_graph_t *c = sbm(4000, 4, 8, 0.8, 8, 0.5, 6, NULL);
    ASSERT_EQ(tma_graph_content_id(a), tma_graph_content_id(b));
    ASSERT_EQ(tma_graph_content_id(ra), tma_graph_content_id(rb));
    ASSERT_NE(tma_graph_content_id(a), tma_graph_content_id(c));
    tma_graph_destroy(a);
    tma_graph_destroy(b);
    tma_graph_destroy(c);

    /* R-MAT: 2^12 nodes, a heavy-tailed degree distribution, duplicates
     * dropped. */
    {
        int64_t max_deg = 0;
        for (int64_t v = 0; v < ra->num_nodes; v++)
            max_deg = TMA_MAX(max_deg, tma_graph_degree(ra, v));
        double avg = 2.0 * (double)ra->num_train_edges / (double)ra->num_nodes;
        ASSERT_EQ(ra->num_nodes, 4096);
        ASSERT_NULL(ra->labels);
        ASSERT_EQ(ra->feature_dim, 8);
        CHECK_MSG(max_deg > 20 * avg, "max degree %lld, average %.1f", (long long)max_deg, avg);
        ASSERT_LT(ra->num_edges, 40000);
    }
    tma_graph_destroy(ra);
    tma_graph_destroy(rb);
    {
        /* --nodes not a power of two: every id stays below it. */
        tma_gen_report_t r;
        tma_graph_t *g = rmat(3000, 0, 20000, 1, &r);
        ASSERT_EQ(g->num_nodes, 3000);
        ASSERT_EQ(r.build.input_edges, 20000);
        tma_graph_destroy(g);
    }

    /* Bad options are refused. */
    tma_graph_t *g = NULL;
    tma_graph_build_opts_t bo = build_opts(1);
    tma_gen_sbm_opts_t s1 = {100, 1, 4, 0.5, 4, 1, 1, TMA_FEAT_F32}; /* one class needs h = 1 */
    CHECK_STATUS(tma_graph_gen_sbm(&s1, &bo, &g, NULL), TMA_ERR_INVALID);
    tma_gen_sbm_opts_t s2 = {3, 4, 4, 0.5, 4, 1, 1, TMA_FEAT_F32}; /* fewer nodes than classes */
    CHECK_STATUS(tma_graph_gen_sbm(&s2, &bo, &g, NULL), TMA_ERR_INVALID);
    tma_gen_sbm_opts_t s3 = {100, 2, 4, 1.5, 4, 1, 1, TMA_FEAT_F32};
    CHECK_STATUS(tma_graph_gen_sbm(&s3, &bo, &g, NULL), TMA_ERR_INVALID);
    tma_gen_rmat_opts_t r1 = {5000, 12, 100, 4, 1, TMA_FEAT_F32}; /* 5000 > 2^12 */
    CHECK_STATUS(tma_graph_gen_rmat(&r1, &bo, &g, NULL), TMA_ERR_INVALID);
    tma_gen_rmat_opts_t r2 = {0, 10, 0, 4, 1, TMA_FEAT_F32};
    CHECK_STATUS(tma_graph_gen_rmat(&r2, &bo, &g, NULL), TMA_ERR_INVALID);
    tma_gen_rmat_opts_t r3 = {0, 10, 100, 0, 1, TMA_FEAT_F32};
    CHECK_STATUS(tma_graph_gen_rmat(&r3, &bo, &g, NULL), TMA_ERR_INVALID);
    return tma_test_done();
}
