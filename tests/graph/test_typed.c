/* test_typed.c: typed graphs (.tmag version 2): the round trip, version 1
 * files, the refusal of each broken typed field, the typed SBM, the
 * MovieLens and generic typed importers, partitions that keep the types,
 * and the sampler's relation ids and node types. */
#include "tma_test.h"
#include "tma_graph.h"
#include "../gnn/gnn_testutil.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static void write_text(const char *dir, const char *name, const char *text)
{
    char *p = tma_path_join(dir, name);
    FILE *f = fopen(p, "w");
    ASSERT_NOT_NULL(f);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    free(p);
}

/* A typed SBM: 3 node types, 2 relations, widths 8, 7, 6. */
static tma_graph_t *typed_sbm(int64_t nodes, uint64_t seed)
{
    tma_gen_sbm_opts_t o = {nodes, 2, 8, 0.8, 8, 0.5, seed, TMA_FEAT_F32};
    tma_gen_typed_opts_t to = {3, 2};
    tma_graph_build_opts_t b;
    tma_graph_build_opts_init(&b);
    b.seed = seed;
    b.negatives = 20;
    tma_graph_t *g;
    CHECK_OK(tma_graph_gen_sbm_typed(&o, &to, &b, &g, NULL));
    return g;
}

/* The relation id of entry u -> w, or -1. */
static int32_t rel_of(const tma_graph_t *g, int64_t u, int64_t w)
{
    for (int64_t e = g->indptr[u]; e < g->indptr[u + 1]; e++)
        if (g->indices[e] == w)
            return g->edge_rel[e];
    return -1;
}

static void check_typed_invariants(const tma_graph_t *g)
{
    CHECK(tma_graph_is_typed(g));
    for (int64_t v = 0; v < g->num_nodes; v++)
        for (int64_t e = g->indptr[v]; e < g->indptr[v + 1]; e++)
            ASSERT_EQ(rel_of(g, g->indices[e], v), tma_graph_rel_inverse(g, g->edge_rel[e]));
    const int64_t *ev[2] = {g->val_edges, g->test_edges}, *nv[2] = {g->val_neg, g->test_neg};
    const int32_t *rv[2] = {g->val_rel, g->test_rel};
    const int64_t cnt[2] = {g->num_val, g->num_test};
    for (int s = 0; s < 2; s++)
        for (int64_t i = 0; i < cnt[s]; i++) {
            ASSERT_GE(rv[s][i], 0);
            ASSERT_LT(rv[s][i], g->num_relations); /* forward ids */
            for (int32_t j = 0; j < g->num_negatives; j++)
                ASSERT_EQ(g->node_type[nv[s][i * g->num_negatives + j]], g->node_type[ev[s][2 * i + 1]]);
        }
}


/* The .tmag file `bytes` with the 4 bytes at `off` set to v and its header
 * CRC fixed up, written to path: opening it fails with `want`. */
static void patched_refused(const char *path, char *bytes, size_t len, size_t off, uint32_t v, tma_status_t want)
{
    memcpy(bytes + off, &v, 4);
    uint32_t crc = tma_crc32c(0, bytes, 4092);
    memcpy(bytes + 4092, &crc, 4);
    CHECK_OK(tma_file_write_atomic(path, bytes, len));
    tma_graph_t *g = NULL;
    CHECK_STATUS(tma_graph_open(path, 0, &g), want);
}

static void test_round_trip(const char *dir)
{
    tma_graph_t *g = typed_sbm(300, 3);
    check_typed_invariants(g);
    ASSERT_EQ(g->num_node_types, 3);
    ASSERT_EQ(g->num_relations, 2);
    ASSERT_EQ(g->type_feat_dim[2], 6);
    ASSERT_EQ(((const float *)g->features)[2 * 8 + 7], 0.0f);
    ASSERT_NE(((const float *)g->features)[2 * 8 + 5], 0.0f); /* node 2: type 2, 6 columns */
    char *path = tma_path_join(dir, "typed.tmag");
    CHECK_OK(tma_graph_write(g, path));
    tma_graph_t *r;
    CHECK_OK(tma_graph_open(path, 0, &r));
    ASSERT_EQ(r->num_node_types, 3);
    ASSERT_EQ(r->num_relations, 2);
    ASSERT_EQ(memcmp(r->node_type, g->node_type, (size_t)g->num_nodes * 4), 0);
    ASSERT_EQ(memcmp(r->edge_rel, g->edge_rel, (size_t)g->num_train_edges * 8), 0);
    ASSERT_EQ(memcmp(r->val_rel, g->val_rel, (size_t)g->num_val * 4), 0);
    ASSERT_EQ(memcmp(r->test_rel, g->test_rel, (size_t)g->num_test * 4), 0);
    ASSERT_EQ(memcmp(r->type_feat_dim, g->type_feat_dim, 3 * 4), 0);
    ASSERT_EQ(r->graph_id, g->graph_id);
    check_typed_invariants(r);
    cJSON *info = tma_graph_info_json(r);
    ASSERT_EQ(cJSON_GetObjectItem(info, "num_node_types")->valuedouble, 3);
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(info, "relations")), 2);
    cJSON_Delete(info);
    tma_graph_destroy(r);

    /* The header says version 2; an untyped graph is still written as version 1. */
    char *bytes;
    size_t len;
    uint32_t version;
    CHECK_OK(tma_file_read_all(path, &bytes, &len));
    memcpy(&version, bytes + 8, 4);
    ASSERT_EQ(version, 2u);
    free(bytes);
    tma_gen_sbm_opts_t uo = {200, 2, 6, 0.8, 4, 0.5, 1, TMA_FEAT_F32};
    tma_graph_build_opts_t b;
    tma_graph_build_opts_init(&b);
    b.negatives = 10;
    tma_graph_t *u;
    CHECK_OK(tma_graph_gen_sbm(&uo, &b, &u, NULL));
    CHECK(!tma_graph_is_typed(u));
    ASSERT_EQ(u->num_node_types, 1);
    ASSERT_EQ(u->num_relations, 1);
    char *upath = tma_path_join(dir, "untyped.tmag");
    CHECK_OK(tma_graph_write(u, upath));
    CHECK_OK(tma_file_read_all(upath, &bytes, &len));
    memcpy(&version, bytes + 8, 4);
    ASSERT_EQ(version, 1u);
    tma_graph_t *ur;
    CHECK_OK(tma_graph_open(upath, 0, &ur));
    CHECK(!tma_graph_is_typed(ur));
    ASSERT_EQ(ur->num_node_types, 1);
    ASSERT_EQ(ur->num_relations, 1);
    CHECK(!ur->edge_rel);
    ASSERT_EQ(tma_graph_num_rel_ids(ur), 1);
    tma_graph_destroy(ur);
    /* A version 1 file that claims types (node types at 112) is refused. */
    char *bad = tma_path_join(dir, "bad.tmag");
    patched_refused(bad, bytes, len, 112, 2, TMA_ERR_FORMAT);
    /* Version 3 is refused as a mismatch. */
    uint32_t zero = 0;
    memcpy(bytes + 112, &zero, 4);
    patched_refused(bad, bytes, len, 8, 3, TMA_ERR_MISMATCH);
    free(bytes);

    /* A typed file with zero node types in its header is refused. */
    CHECK_OK(tma_file_read_all(path, &bytes, &len));
    patched_refused(bad, bytes, len, 112, 0, TMA_ERR_FORMAT);
    free(bytes);
    tma_graph_destroy(u);
    free(upath);
    free(bad);
    free(path);
    tma_graph_destroy(g);
}

/* Each broken typed field is refused by tma_graph_validate (and so by the
 * writer and the reader). */
static void test_validation(void)
{
    tma_graph_t *g = typed_sbm(300, 5);
    CHECK_OK(tma_graph_validate(g, "g"));
    int32_t *nt = (int32_t *)g->node_type, *er = (int32_t *)g->edge_rel, *vr = (int32_t *)g->val_rel;
    int32_t *tr = (int32_t *)g->test_rel, *w = (int32_t *)g->type_feat_dim;
    int64_t *vn = (int64_t *)g->val_neg;
    float *x = (float *)g->features;

    nt[7] = 3; /* out of range */
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    nt[7] = -1;
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    nt[7] = 7 % 3;

    int32_t keep = er[0];
    er[0] = 4; /* 2R = 4: out of range */
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    er[0] = keep < 2 ? 1 - keep : 5 - keep; /* a valid id, not the inverse of the reverse entry */
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    er[0] = tma_graph_rel_inverse(g, keep); /* forward and inverse swapped on one side */
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    er[0] = keep;
    CHECK_OK(tma_graph_validate(g, "g"));

    vr[0] = 4;
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    vr[0] = 0;
    tr[0] = -2;
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    tr[0] = 1;

    /* A negative of another type than the tail's. */
    int64_t tail = g->val_edges[1], head = g->val_edges[0], other = -1;
    for (int64_t v = 0; v < g->num_nodes && other < 0; v++)
        if (g->node_type[v] != g->node_type[tail] && v != head && !tma_graph_has_edge(g, head, v))
            other = v;
    int64_t keepn = vn[0];
    vn[0] = other;
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    vn[0] = keepn;

    w[1] = 9; /* wider than feature_dim */
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    w[1] = 7;
    int64_t v1 = 1; /* type 1: columns 7.. are padding */
    x[v1 * 8 + 7] = 1.0f;
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    x[v1 * 8 + 7] = 0.0f;

    static const char good[] = "a\0b\0c\0r\0s"; /* 3 types + 2 relations */
    static const char short_names[] = "a\0b\0c\0r";
    g->names = good;
    g->names_bytes = sizeof good;
    CHECK_OK(tma_graph_validate(g, "g"));
    char buf[32];
    ASSERT_STR_EQ(tma_graph_node_type_name(g, 2, buf, sizeof buf), "c");
    ASSERT_STR_EQ(tma_graph_relation_name(g, 1, buf, sizeof buf), "s");
    g->names = short_names;
    g->names_bytes = sizeof short_names;
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    g->names = NULL;
    g->names_bytes = 0;
    ASSERT_STR_EQ(tma_graph_relation_name(g, 1, buf, sizeof buf), "rel1");

    /* An untyped graph must not carry typed arrays. */
    const int32_t *types = g->node_type;
    g->node_type = NULL;
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    g->node_type = types;
    CHECK_OK(tma_graph_validate(g, "g"));
    tma_graph_destroy(g);
}

/* A corrupted typed section is caught by its checksum when opened. */
static void test_corrupt_file(const char *dir)
{
    tma_graph_t *g = typed_sbm(120, 9);
    char *path = tma_path_join(dir, "c.tmag"), *bad = tma_path_join(dir, "c-bad.tmag");
    CHECK_OK(tma_graph_write(g, path));
    char *bytes;
    size_t len;
    CHECK_OK(tma_file_read_all(path, &bytes, &len));
    /* The section table starts at 168, 32 bytes an entry: find section 11 (edge relations). */
    uint64_t off = 0;
    for (int i = 0; i < 16; i++) {
        uint32_t id;
        memcpy(&id, bytes + 168 + 32 * i, 4);
        if (id == 11)
            memcpy(&off, bytes + 168 + 32 * i + 8, 8);
    }
    ASSERT_GT(off, 0);
    bytes[off] ^= 1;
    CHECK_OK(tma_file_write_atomic(bad, bytes, len));
    tma_graph_t *r;
    CHECK_STATUS(tma_graph_open(bad, 0, &r), TMA_ERR_CHECKSUM);
    /* Without checksums the inverse check still catches it. */
    CHECK_STATUS(tma_graph_open(bad, TMA_GRAPH_OPEN_NO_VERIFY, &r), TMA_ERR_FORMAT);
    free(bytes);
    free(path);
    free(bad);
    tma_graph_destroy(g);
}

static void test_movielens(void)
{
    char *src = tma_test_fixture("movielens-mini");
    tma_graph_import_opts_t o;
    tma_graph_import_opts_init(&o);
    o.build.val = 4;
    o.build.test = 4;
    o.build.negatives = 5;
    tma_graph_t *g;
    tma_graph_import_report_t rep;
    CHECK_OK(tma_graph_import(src, &o, &g, &rep));
    ASSERT_STR_EQ(rep.layout, "movielens");
    ASSERT_EQ(g->num_nodes, 14); /* 6 users + 8 movies */
    ASSERT_EQ(g->num_edges, 36);
    ASSERT_EQ(g->num_train_edges, 28);
    ASSERT_EQ(g->num_node_types, 2);
    ASSERT_EQ(g->num_relations, 5);
    /* Users: age, gender (2), 5 occupations = 8; movies: 19 genres + year = 20; padded to 20. */
    ASSERT_EQ(g->type_feat_dim[0], 8);
    ASSERT_EQ(g->type_feat_dim[1], 20);
    ASSERT_EQ(g->feature_dim, 20);
    check_typed_invariants(g);
    char buf[32];
    ASSERT_STR_EQ(tma_graph_node_type_name(g, 1, buf, sizeof buf), "movie");
    ASSERT_STR_EQ(tma_graph_relation_name(g, 4, buf, sizeof buf), "rating5");
    for (int64_t v = 0; v < 14; v++)
        ASSERT_EQ(g->node_type[v], v < 6 ? 0 : 1);
    /* Every edge joins a user and a movie; forward ids (< 5) go user -> movie. */
    int64_t per_rel[10] = {0};
    for (int64_t v = 0; v < 14; v++)
        for (int64_t e = g->indptr[v]; e < g->indptr[v + 1]; e++) {
            ASSERT_NE(g->node_type[v], g->node_type[g->indices[e]]);
            ASSERT_EQ((g->edge_rel[e] < 5), (g->node_type[v] == 0));
            per_rel[g->edge_rel[e]]++;
        }
    for (int r = 0; r < 5; r++)
        ASSERT_EQ(per_rel[r], per_rel[r + 5]);
    /* Evaluation edges: user -> movie; negatives are movies the user did not rate. */
    for (int64_t i = 0; i < g->num_val; i++) {
        ASSERT_EQ(g->node_type[g->val_edges[2 * i]], 0);
        ASSERT_EQ(g->node_type[g->val_edges[2 * i + 1]], 1);
        for (int j = 0; j < 5; j++) {
            int64_t t = g->val_neg[i * 5 + j];
            ASSERT_GE(t, 6);
            CHECK(!tma_graph_has_edge(g, g->val_edges[2 * i], t));
        }
    }
    /* u.data's rating counts (8, 5, 10, 3, 10), training plus evaluation edges. */
    int64_t total[5] = {0};
    for (int r = 0; r < 5; r++)
        total[r] = per_rel[r];
    for (int64_t i = 0; i < g->num_val; i++)
        total[g->val_rel[i]]++;
    for (int64_t i = 0; i < g->num_test; i++)
        total[g->test_rel[i]]++;
    ASSERT_EQ(total[0], 8);
    ASSERT_EQ(total[1], 5);
    ASSERT_EQ(total[2], 10);
    ASSERT_EQ(total[3], 3);
    ASSERT_EQ(total[4], 10);
    /* Features.  User 1 (node 0): 24 years old (ages 18..61), M, engineer (occupation 2). */
    const float *x = (const float *)g->features;
    ASSERT_NEAR(x[0], (24.0 - 18) / (61 - 18), 1e-6);
    ASSERT_EQ(x[1], 1);
    ASSERT_EQ(x[2], 0);
    ASSERT_EQ(x[3 + 2], 1);
    ASSERT_EQ(x[3], 0);
    for (int j = 8; j < 20; j++)
        ASSERT_EQ(x[j], 0);
    /* Movie 1 (node 6): genres 3, 4, 5, 1990 (years 1960..1998); movie 4 (node 9): unknown, no date. */
    const float *m1 = x + 6 * 20, *m4 = x + 9 * 20;
    ASSERT_EQ(m1[3], 1);
    ASSERT_EQ(m1[4], 1);
    ASSERT_EQ(m1[5], 1);
    ASSERT_EQ(m1[0], 0);
    ASSERT_EQ(m1[6], 0);
    ASSERT_NEAR(m1[19], (1990.0 - 1960) / (1998 - 1960), 1e-6);
    ASSERT_EQ(m4[0], 1);
    ASSERT_EQ(m4[19], 0);
    tma_graph_destroy(g);
    free(src);
}

/* A copy of the fixture with one file replaced must fail with `want`. */
static void movielens_broken(const char *dir, const char *file, const char *text, tma_status_t want)
{
    char *src = tma_test_fixture("movielens-mini");
    static const char *const files[] = {"u.data", "u.user", "u.item", "u.genre", "u.occupation"};
    char *copy = tma_path_join(dir, "ml-broken");
    tma_mkdir_p(copy);
    for (size_t i = 0; i < 5; i++) {
        char *from = tma_path_join(src, files[i]), *data;
        size_t len;
        CHECK_OK(tma_file_read_all(from, &data, &len));
        char *to = tma_path_join(copy, files[i]);
        CHECK_OK(tma_file_write_atomic(to, data, len));
        free(data);
        free(from);
        free(to);
    }
    write_text(copy, file, text);
    tma_graph_import_opts_t o;
    tma_graph_import_opts_init(&o);
    o.build.val = 2;
    o.build.test = 2;
    o.build.negatives = 3;
    tma_graph_t *g = NULL;
    tma_status_t st = tma_graph_import(copy, &o, &g, NULL);
    CHECK_MSG(st == want, "%s '%s': got %d, want %d", file, text, st, want);
    if (st == TMA_OK)
        tma_graph_destroy(g);
    free(copy);
    free(src);
}

static void test_movielens_bad(const char *dir)
{
    movielens_broken(dir, "u.data", "1\t2\t6\t880000000\n", TMA_ERR_RANGE);  /* rating 6 */
    movielens_broken(dir, "u.data", "1\t9\t3\t880000000\n", TMA_ERR_RANGE);  /* movie 9 of 8 */
    movielens_broken(dir, "u.data", "1\t2\t3\n", TMA_ERR_FORMAT);             /* 3 fields */
    movielens_broken(dir, "u.data", "1\tx\t3\t1\n", TMA_ERR_FORMAT);         /* not a number */
    movielens_broken(dir, "u.data", "", TMA_ERR_FORMAT);                        /* empty */
    movielens_broken(dir, "u.user", "1|24|X|engineer|1\n", TMA_ERR_FORMAT);     /* gender */
    movielens_broken(dir, "u.user", "1|24|M|pilot|1\n", TMA_ERR_FORMAT);        /* occupation */
    movielens_broken(dir, "u.user", "1|24|M|engineer\n", TMA_ERR_FORMAT);       /* 4 fields */
    movielens_broken(dir, "u.user", "2|24|M|engineer|1\n", TMA_ERR_FORMAT);     /* user 1 missing */
    movielens_broken(dir, "u.item", "1|T|01-Jan-1990||u|0|1\n", TMA_ERR_FORMAT); /* too few genre flags */
    movielens_broken(dir, "u.genre", "unknown|0\nAction|5\n", TMA_ERR_FORMAT); /* index out of order */
}

/* The generic typed layout: node_types.txt and edges.txt with relation names. */
static void test_typed_text(const char *dir)
{
    char *src = tma_path_join(dir, "typed-text");
    tma_mkdir_p(src);
    /* Two types (q: 0..5, i: 6..11); relations click (q -> i) and similar (i -> i). */
    write_text(src, "node_types.txt", "# node type\n0 q\n1 q\n2 q\n3 q\n4 q\n5 q\n6 i\n7 i\n8 i\n9 i\n10 i\n11 i\n");
    write_text(src, "edges.txt",
               "0 6 click\n0 7 click\n1 7 click\n1 8 click\n2 8 click\n2 9 click\n3 9 click\n3 10 click\n"
               "4 10 click\n4 11 click\n5 11 click\n5 6 click\n6 7 similar\n8 9 similar\n10 11 similar\n"
               "7 8 similar\n");
    tma_graph_import_opts_t o;
    tma_graph_import_opts_init(&o);
    o.build.val = 2;
    o.build.test = 2;
    o.build.negatives = 3;
    o.feat_dim = 4;
    tma_graph_t *g;
    tma_graph_import_report_t rep;
    CHECK_OK(tma_graph_import(src, &o, &g, &rep));
    ASSERT_STR_EQ(rep.layout, "typed");
    ASSERT_EQ(g->num_nodes, 12);
    ASSERT_EQ(g->num_edges, 16);
    ASSERT_EQ(g->num_node_types, 2);
    ASSERT_EQ(g->num_relations, 2);
    ASSERT_EQ(g->feature_dim, 4);
    char buf[32];
    ASSERT_STR_EQ(tma_graph_node_type_name(g, 0, buf, sizeof buf), "q");
    ASSERT_STR_EQ(tma_graph_relation_name(g, 1, buf, sizeof buf), "similar");
    check_typed_invariants(g);
    for (int64_t v = 0; v < 12; v++)
        for (int64_t e = g->indptr[v]; e < g->indptr[v + 1]; e++) {
            int64_t w = g->indices[e];
            int32_t r = g->edge_rel[e];
            if (g->node_type[v] != g->node_type[w])
                ASSERT_EQ(r, (g->node_type[v] == 0 ? 0 : 2)); /* click, or its inverse from the item */
            else
                ASSERT_EQ(r, (v < w ? 1 : 3)); /* similar, stored u < v, and its inverse */
        }
    tma_graph_destroy(g);

    /* Bad lines fail the import (the log names file:line). */
    write_text(src, "edges.txt", "0 6 click\n0 7\n");
    CHECK_STATUS(tma_graph_import(src, &o, &g, NULL), TMA_ERR_FORMAT);
    write_text(src, "edges.txt", "0 6 click\n0 12 click\n");
    CHECK_STATUS(tma_graph_import(src, &o, &g, NULL), TMA_ERR_RANGE);
    write_text(src, "edges.txt", "0 6 click extra\n");
    CHECK_STATUS(tma_graph_import(src, &o, &g, NULL), TMA_ERR_FORMAT);
    write_text(src, "edges.txt", "0 6 click\n");
    write_text(src, "node_types.txt", "0 q\n0 i\n1 i\n");
    CHECK_STATUS(tma_graph_import(src, &o, &g, NULL), TMA_ERR_FORMAT);
    write_text(src, "node_types.txt", "0 q\n2 i\n");
    CHECK_STATUS(tma_graph_import(src, &o, &g, NULL), TMA_ERR_FORMAT); /* node 1 untyped */
    write_text(src, "node_types.txt", "-1 q\n");
    CHECK_STATUS(tma_graph_import(src, &o, &g, NULL), TMA_ERR_FORMAT);
    free(src);
}

/* A typed graph partitioned by each scheme: shards keep every node's type
 * and every entry's relation id. */
static void test_partition(const char *dir)
{
    tma_graph_t *g = typed_sbm(400, 11);
    char *gpath = tma_path_join(dir, "p.tmag");
    CHECK_OK(tma_graph_write(g, gpath));
    static const char *const schemes[] = {"random", "supernode:8", "metis"};
    for (int k = 0; k < 3; k++) {
        tma_partition_opts_t po = {0};
        CHECK_OK(tma_partition_scheme_parse(schemes[k], &po));
        po.num_shards = 3;
        po.seed = 4;
        char *pdir = tma_path_join(dir, "part");
        tma_partition_result_t *res;
        CHECK_OK(tma_partition_run(g, gpath, &po, pdir, &res));
        tma_partition_info_t *info;
        CHECK_OK(tma_partition_info_load(pdir, &info));
        int64_t nodes = 0;
        for (int32_t s = 0; s < 3; s++) {
            tma_graph_t *sg;
            CHECK_OK(tma_graph_open(info->shard_paths[s], 0, &sg));
            CHECK(tma_graph_is_typed(sg));
            ASSERT_EQ(sg->num_node_types, 3);
            ASSERT_EQ(sg->num_relations, 2);
            ASSERT_EQ(memcmp(sg->type_feat_dim, g->type_feat_dim, 3 * 4), 0);
            for (int64_t i = 0; i < sg->num_nodes; i++) {
                int64_t v = sg->global_ids[i];
                CHECK_MSG(sg->node_type[i] == g->node_type[v], "%s shard %d node %lld", schemes[k], s,
                          (long long)i);
                for (int64_t e = sg->indptr[i]; e < sg->indptr[i + 1]; e++)
                    ASSERT_EQ(sg->edge_rel[e], rel_of(g, v, sg->global_ids[sg->indices[e]]));
            }
            nodes += sg->num_nodes;
            tma_graph_destroy(sg);
        }
        ASSERT_EQ(nodes, g->num_nodes);
        tma_partition_info_destroy(info);
        tma_partition_result_destroy(res);
        free(pdir);
    }
    free(gpath);
    tma_graph_destroy(g);
}

/* The sampler's blocks carry each message's relation id (the inverse of
 * the destination row's entry, i.e. the source's entry toward the
 * destination) and each node's type; the full block too. */
static void test_sampler(void)
{
    tma_graph_t *g = typed_sbm(300, 13);
    const tma_graph_sampler_opts_t so = {.num_layers = 2, .fanouts = {4, 3}, .norm = TMA_GRAPH_NORM_MEAN,
                                         .self_loops = 1, .transpose = 1, .max_seeds = 16, .max_excluded = 4,
                                         .threads = 1};
    tma_graph_sampler_t *sp;
    CHECK_OK(tma_graph_sampler_create(g, &so, &sp));
    tma_graph_sample_t s;
    gnn_test_sample_alloc(sp, 2, 16, 1, &s);
    int64_t seeds[16];
    for (int i = 0; i < 16; i++)
        seeds[i] = i * 17 % 300;
    CHECK_OK(tma_graph_sampler_sample(sp, seeds, 16, NULL, 0, 77, &s));
    int64_t checked = 0;
    for (int l = 0; l < 2; l++) {
        const tma_graph_block_t *k = &s.blocks[l];
        for (int64_t i = 0; i < k->num_dst; i++)
            for (int32_t e = k->indptr[i]; e < k->indptr[i + 1]; e++) {
                int64_t dst = s.nodes[i], src = s.nodes[k->indices[e]];
                if (k->rel[e] == TMA_GRAPH_REL_SELF) {
                    ASSERT_EQ(src, dst);
                    continue;
                }
                ASSERT_EQ(k->rel[e], rel_of(g, src, dst));
                checked++;
            }
        /* The transposed view carries the same ids. */
        for (int64_t j = 0; j < k->num_src; j++)
            for (int32_t q = k->t_indptr[j]; q < k->t_indptr[j + 1]; q++) {
                int64_t dst = s.nodes[k->t_indices[q]], src = s.nodes[j];
                ASSERT_EQ(k->t_rel[q], (src == dst ? TMA_GRAPH_REL_SELF : rel_of(g, src, dst)));
            }
    }
    ASSERT_GT(checked, 0);
    for (int64_t i = 0; i < s.num_nodes; i++)
        ASSERT_EQ(s.node_type[i], g->node_type[s.nodes[i]]);

    /* The full block of rows [10, 20). */
    tma_graph_block_t fb = {0};
    int64_t ne = tma_graph_block_full_edges(g, 10, 20, 0);
    fb.indptr = calloc(11, sizeof(int32_t));
    fb.indices = calloc((size_t)ne + 1, sizeof(int32_t));
    fb.weights = calloc((size_t)ne + 1, sizeof(float));
    fb.rel = calloc((size_t)ne + 1, sizeof(int32_t));
    CHECK_OK(tma_graph_block_full(g, TMA_GRAPH_NORM_MEAN, 0, 10, 20, &fb));
    for (int64_t i = 0; i < 10; i++)
        for (int32_t e = fb.indptr[i]; e < fb.indptr[i + 1]; e++)
            ASSERT_EQ(fb.rel[e], rel_of(g, fb.indices[e], 10 + i));
    free(fb.indptr);
    free(fb.indices);
    free(fb.weights);
    free(fb.rel);

    gnn_test_sample_free(&s);
    tma_graph_sampler_destroy(sp);
    tma_graph_destroy(g);
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);
    char *dir = tma_test_tmpdir("typed");
    test_round_trip(dir);
    test_validation();
    test_corrupt_file(dir);
    test_movielens();
    test_movielens_bad(dir);
    test_typed_text(dir);
    test_partition(dir);
    test_sampler();
    tma_test_cleanup_dir(dir);
    return tma_test_done();
}
