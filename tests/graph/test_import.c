/* test_import.c: the importers on Cora, kept in tests/data/ (counts and
 * homophily as its README gives them; its three layouts give the same
 * graph), the small fixtures in every dtype and layout (with CRLF line ends),
 * the split and negatives' invariants, features (stored, projected,
 * default), and determinism for a seed whatever the thread count.
 * `test_import --datasets` (make check-datasets) checks the same counts on
 * the shared datasets folder instead, and skips when it is missing. */
#include "tma_test.h"
#include "tma_graph.h"

#include <omp.h>
#include <string.h>

static tma_graph_t *import_as(const char *src, int32_t feat_dim, double val, double test, int32_t neg,
                              uint64_t seed, tma_graph_import_report_t *rep)
{
    tma_graph_import_opts_t o;
    tma_graph_import_opts_init(&o);
    o.feat_dim = feat_dim;
    o.build.val = val;
    o.build.test = test;
    o.build.negatives = neg;
    o.build.seed = seed;
    tma_graph_t *g = NULL;
    tma_graph_import_report_t r;
    tma_status_t st = tma_graph_import(src, &o, &g, rep ? rep : &r);
    CHECK_MSG(st == TMA_OK, "import %s: %s", src, tma_status_str(st));
    if (!g)
        exit(1);
    CHECK_OK(tma_graph_validate(g, src));
    return g;
}

static char *fixture(const char *name)
{
    return tma_strdup_printf("%s/tests/graph/data/%s", getenv("TMA_SRCDIR"), name);
}

/* Same adjacency, split and negatives (features and labels compared apart). */
static int same_structure(const tma_graph_t *a, const tma_graph_t *b)
{
    return a->num_nodes == b->num_nodes && a->num_edges == b->num_edges &&
           a->num_train_edges == b->num_train_edges && a->num_val == b->num_val && a->num_test == b->num_test &&
           a->num_negatives == b->num_negatives &&
           memcmp(a->indptr, b->indptr, (size_t)(a->num_nodes + 1) * 8) == 0 &&
           memcmp(a->indices, b->indices, (size_t)a->num_train_edges * 16) == 0 &&
           memcmp(a->val_edges, b->val_edges, (size_t)a->num_val * 16) == 0 &&
           memcmp(a->test_edges, b->test_edges, (size_t)a->num_test * 16) == 0 &&
           memcmp(a->val_neg, b->val_neg, (size_t)(a->num_val * a->num_negatives) * 8) == 0 &&
           memcmp(a->test_neg, b->test_neg, (size_t)(a->num_test * a->num_negatives) * 8) == 0;
}

static int same_features(const tma_graph_t *a, const tma_graph_t *b)
{
    return a->feature_dim == b->feature_dim &&
           memcmp(a->features, b->features, (size_t)a->num_nodes * a->feature_dim * 4) == 0;
}

/* 1 when u-v is an edge of the full graph: training or evaluation. */
static int full_edge(const tma_graph_t *g, int64_t u, int64_t v)
{
    if (tma_graph_has_edge(g, u, v))
        return 1;
    const int64_t *ev[2] = {g->val_edges, g->test_edges};
    const int64_t ec[2] = {g->num_val, g->num_test};
    for (int s = 0; s < 2; s++)
        for (int64_t i = 0; i < ec[s]; i++)
            if ((ev[s][2 * i] == u && ev[s][2 * i + 1] == v) || (ev[s][2 * i] == v && ev[s][2 * i + 1] == u))
                return 1;
    return 0;
}

/* Every negative avoids its head and the head's full-graph neighbours;
 * evaluation edges are distinct and not training edges. */
static void check_split(const tma_graph_t *g)
{
    const int64_t *ev[2] = {g->val_edges, g->test_edges}, *nv[2] = {g->val_neg, g->test_neg};
    const int64_t ec[2] = {g->num_val, g->num_test};
    int bad_neg = 0, train = 0, dup = 0;
    for (int s = 0; s < 2; s++) {
        for (int64_t i = 0; i < ec[s]; i++) {
            int64_t u = ev[s][2 * i], v = ev[s][2 * i + 1];
            train += tma_graph_has_edge(g, u, v);
            for (int64_t j = 0; j < g->num_negatives; j++) {
                int64_t t = nv[s][i * g->num_negatives + j];
                bad_neg += t == u || full_edge(g, u, t);
            }
            for (int s2 = 0; s2 < 2; s2++)
                for (int64_t k = 0; k < ec[s2]; k++) {
                    if (s2 == s && k == i)
                        continue;
                    int64_t a = ev[s2][2 * k], b = ev[s2][2 * k + 1];
                    dup += (a == u && b == v) || (a == v && b == u);
                }
        }
    }
    CHECK_MSG(bad_neg == 0, "%d negatives hit the head or a full-graph neighbour", bad_neg);
    ASSERT_EQ(train, 0);
    ASSERT_EQ(dup, 0);
}

/* src: a dataset folder (malloc'd; freed here). */
static void check_dataset(char *src, int64_t nodes, int64_t edges, int32_t fdim, int32_t classes, double homophily,
                          int32_t want_dim)
{
    tma_graph_import_report_t r;
    tma_graph_t *g = import_as(src, want_dim, -1, -1, 20, 7, &r);
    CHECK_MSG(g->num_nodes == nodes, "%s: %lld nodes", src, (long long)g->num_nodes);
    CHECK_MSG(g->num_edges == edges, "%s: %lld edges", src, (long long)g->num_edges);
    ASSERT_EQ(r.input_feature_dim, fdim);
    ASSERT_EQ(g->feature_dim, (want_dim ? want_dim : fdim));
    ASSERT_EQ(r.features, (want_dim && want_dim != fdim ? TMA_FEAT_PROJECTED : TMA_FEAT_STORED));
    ASSERT_EQ(g->num_classes, classes);
    /* The default split: 5% each, at most 2000. */
    int64_t want = llround(0.05 * (double)edges);
    want = want > 2000 ? 2000 : want;
    ASSERT_EQ(g->num_val, want);
    ASSERT_EQ(g->num_test, want);
    ASSERT_EQ(g->num_train_edges, edges - 2 * want);
    if (homophily > 0)
        CHECK_NEAR(tma_graph_homophily(g), homophily, 0.006);
    check_split(g);
    tma_graph_destroy(g);
    free(src);
}

/* The shared datasets folder: counts, feature dims, classes and homophily
 * from its README. */
static int check_shared_datasets(void)
{
    check_dataset(tma_test_dataset("cora"), 2708, 5278, 1433, 7, 0.81, 0);
    check_dataset(tma_test_dataset("citeseer"), 3312, 4536, 3703, 6, 0.74, 0);
    check_dataset(tma_test_dataset("facebook-pages"), 22470, 170823, 4714, 4, 0.885, 64);
    check_dataset(tma_test_dataset("cora-ogb"), 2708, 5278, 1433, 0, 0, 0);
    return tma_test_done();
}

int main(int argc, char **argv)
{
    tma_log_set_level(TMA_LOG_ERROR);
    if (argc > 1 && strcmp(argv[1], "--datasets") == 0)
        return check_shared_datasets();

    /* Cora from tests/data/: counts, feature dim, classes and homophily;
     * sparse and dense features projected. */
    check_dataset(tma_test_fixture("cora"), 2708, 5278, 1433, 7, 0.81, 0);
    check_dataset(tma_test_fixture("cora"), 2708, 5278, 1433, 7, 0.81, 64);
    check_dataset(tma_test_fixture("cora-ogb"), 2708, 5278, 1433, 0, 0, 64);

    /* cora's three layouts are one graph; the OGB one has no labels. */
    char *cora = tma_test_fixture("cora"), *npz = tma_test_fixture("cora/cora.npz");
    char *ogb = tma_test_fixture("cora-ogb"), *ogb_raw = tma_test_fixture("cora-ogb/raw");
    tma_graph_import_report_t rt, rn;
    tma_graph_t *gt = import_as(cora, 0, -1, -1, 50, 3, &rt);
    tma_graph_t *gn = import_as(npz, 0, -1, -1, 50, 3, &rn);
    tma_graph_t *go = import_as(ogb, 0, -1, -1, 50, 3, NULL);
    tma_graph_t *gr = import_as(ogb_raw, 0, -1, -1, 50, 3, NULL);
    ASSERT_STR_EQ(rt.layout, "edge-list");
    ASSERT_STR_EQ(rn.layout, "npz");
    ASSERT_EQ(rt.build.duplicates, 0);
    ASSERT_EQ(rt.build.self_loops, 0);
    /* cora.npz stores 5429 one-directional entries: 151 repeat an edge. */
    ASSERT_EQ(rn.build.input_edges, 5429);
    ASSERT_EQ(rn.build.duplicates, 151);
    ASSERT_EQ(rn.build.self_loops, 0);
    CHECK(same_structure(gt, gn) && same_features(gt, gn));
    ASSERT_EQ(memcmp(gt->labels, gn->labels, 2708 * 4), 0);
    ASSERT_EQ(tma_graph_content_id(gt), tma_graph_content_id(gn));
    CHECK(same_structure(gt, go));
    CHECK(same_features(gt, go));
    ASSERT_NULL(go->labels);
    CHECK(same_structure(go, gr) && same_features(go, gr));

    /* Determinism: the same seed gives the same graph on 1 or 2 threads; a
     * different seed another split. */
    omp_set_num_threads(1);
    tma_graph_t *g1 = import_as(cora, 32, -1, -1, 50, 3, NULL);
    omp_set_num_threads(2);
    tma_graph_t *g2 = import_as(cora, 32, -1, -1, 50, 3, NULL);
    CHECK(same_structure(g1, g2) && same_features(g1, g2));
    ASSERT_EQ(tma_graph_content_id(g1), tma_graph_content_id(g2));
    tma_graph_t *g3 = import_as(cora, 32, -1, -1, 50, 4, NULL);
    CHECK(!same_structure(g1, g3));
    ASSERT_NE(memcmp(g1->val_edges, g3->val_edges, 16 * 10), 0);
    /* Projected features: 32 dims, not a copy of the input. */
    ASSERT_EQ(g1->feature_dim, 32);
    CHECK(!same_features(g1, gt));
    tma_graph_destroy(g1);
    tma_graph_destroy(g2);
    tma_graph_destroy(g3);

    /* --val/--test as fractions and counts. */
    tma_graph_t *gf = import_as(cora, 0, 0.1, 100, 5, 1, NULL);
    ASSERT_EQ(gf->num_val, 528);
    ASSERT_EQ(gf->num_test, 100);
    ASSERT_EQ(gf->num_train_edges, 5278 - 628);
    check_split(gf);
    tma_graph_destroy(gf);
    tma_graph_t *g0 = import_as(cora, 0, 0, 0, 5, 1, NULL);
    ASSERT_EQ(g0->num_val, 0);
    ASSERT_EQ(g0->num_test, 0);
    ASSERT_EQ(g0->num_train_edges, 5278);
    tma_graph_destroy(g0);

    /* The small fixtures: one 4-node graph in five layouts and every dtype
     * (bool, uint8/16, int8/32/64, float32/64), CRLF line ends, edges given
     * in either direction, a CSV edge list with a header and weights. */
    const char *small[] = {"small-edges", "small-dtypes.npz", "small-sparse.npz", "small-ogb", "small-weighted-csv"};
    enum { NSMALL = sizeof small / sizeof small[0] };
    tma_graph_t *sg[NSMALL];
    for (int i = 0; i < NSMALL; i++) {
        char *p = fixture(small[i]);
        sg[i] = import_as(p, 0, 1, 1, 1, 5, NULL);
        free(p);
        CHECK_MSG(sg[i]->num_nodes == 4 && sg[i]->num_edges == 4 && sg[i]->feature_dim == 3, "%s", small[i]);
        ASSERT_EQ(sg[i]->num_classes, 2);
        ASSERT_EQ(sg[i]->labels[1], 1);
        ASSERT_EQ(sg[i]->labels[3], 0);
        ASSERT_EQ(((const float *)sg[i]->features)[2 * 3 + 2], 0.5f);
        ASSERT_EQ(((const float *)sg[i]->features)[1 * 3 + 1], 2.0f);
        ASSERT_EQ(((const float *)sg[i]->features)[3 * 3 + 1], 1.0f);
        if (i > 0) {
            CHECK_MSG(same_structure(sg[0], sg[i]) && same_features(sg[0], sg[i]), "%s differs", small[i]);
            ASSERT_EQ(tma_graph_content_id(sg[0]), tma_graph_content_id(sg[i]));
        }
    }
    /* A 4-cycle with one validation and one test edge: each head has one
     * non-neighbour left, which every negative must be. */
    for (int s = 0; s < 2; s++) {
        const int64_t *e = s ? sg[0]->test_edges : sg[0]->val_edges;
        const int64_t *ng = s ? sg[0]->test_neg : sg[0]->val_neg;
        ASSERT_EQ(ng[0], (e[0] + 2) % 4);
    }
    for (int i = 0; i < NSMALL; i++)
        tma_graph_destroy(sg[i]);

    /* Default features for a graph without any: the projection of one-hot
     * ids, +-1/sqrt(64). */
    {
        char *dir = tma_test_tmpdir("import");
        char *edges = tma_path_join(dir, "edges.txt");
        CHECK_OK(tma_file_write_atomic(edges, "0 1\n1 2\n2 3\n3 0\n0 2\n", 20));
        tma_graph_import_report_t r;
        tma_graph_t *g = import_as(dir, 0, 1, 0, 0, 9, &r);
        ASSERT_EQ(r.features, TMA_FEAT_DEFAULT);
        ASSERT_EQ(g->feature_dim, TMA_GRAPH_DEFAULT_FEAT_DIM);
        int ok = 1;
        for (int64_t i = 0; i < 4 * 64; i++)
            ok &= fabsf(fabsf(((const float *)g->features)[i]) - 0.125f) < 1e-6f;
        CHECK(ok);
        ASSERT_NE(memcmp(g->features, ((const float *)g->features) + 64, 64 * 4), 0);
        tma_graph_destroy(g);
        free(edges);
        tma_test_cleanup_dir(dir);
    }

    /* Dense heads (K_10 minus a perfect matching): the only tail that is
     * neither u nor a neighbour is u's partner, found by enumeration. */
    {
        char *dir = tma_test_tmpdir("import");
        char *edges = tma_path_join(dir, "edges.txt");
        char buf[1024];
        size_t len = 0;
        for (int u = 0; u < 10; u++)
            for (int v = u + 1; v < 10; v++)
                if (v != (u ^ 1))
                    len += (size_t)snprintf(buf + len, sizeof buf - len, "%d %d\n", u, v);
        CHECK_OK(tma_file_write_atomic(edges, buf, len));
        tma_graph_t *g = import_as(dir, 0, 3, 3, 40, 2, NULL);
        ASSERT_EQ(g->num_edges, 40);
        ASSERT_EQ(g->num_train_edges, 34);
        int ok = 1;
        for (int64_t i = 0; i < 3; i++)
            for (int64_t j = 0; j < 40; j++)
                ok &= g->val_neg[i * 40 + j] == (g->val_edges[2 * i] ^ 1) &&
                      g->test_neg[i * 40 + j] == (g->test_edges[2 * i] ^ 1);
        CHECK(ok);
        tma_graph_destroy(g);
        free(edges);
        tma_test_cleanup_dir(dir);
    }

    tma_graph_destroy(gt);
    tma_graph_destroy(gn);
    tma_graph_destroy(go);
    tma_graph_destroy(gr);
    free(cora);
    free(npz);
    free(ogb);
    free(ogb_raw);
    return tma_test_done();
}
