/* test_tmag.c: the .tmag format: round trip, and refusal of truncated,
 * corrupted and inconsistent files. */
#include "tma_test.h"
#include "tma_graph.h"
#include "graph_int.h"

#include <dirent.h>

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A small graph: a ring of n nodes plus chords, 2 validation and 1 test edge
 * (removed from the ring), 3 negatives each. */
static tma_graph_t *make_graph(void)
{
    tma_graph_t *g;
    CHECK_OK(tma_graph_create(&g));
    const int64_t n = 10;
    /* training edges: ring i-(i+1) for i=0..9 except (0,1),(2,3),(4,5) held out */
    int64_t adj[10][10];
    int deg[10] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t j = (i + 1) % n;
        if ((i == 0 || i == 2 || i == 4))
            continue;
        adj[i][deg[i]++] = j;
        adj[j][deg[j]++] = i;
    }
    int64_t *indptr = tma_graph_alloc(g, (n + 1) * 8);
    int64_t m2 = 0;
    for (int i = 0; i < n; i++)
        m2 += deg[i];
    int64_t *indices = tma_graph_alloc(g, m2 * 8);
    indptr[0] = 0;
    for (int i = 0; i < n; i++) {
        /* sort row */
        for (int a = 0; a < deg[i]; a++)
            for (int b = a + 1; b < deg[i]; b++)
                if (adj[i][b] < adj[i][a]) {
                    int64_t t = adj[i][a];
                    adj[i][a] = adj[i][b];
                    adj[i][b] = t;
                }
        memcpy(indices + indptr[i], adj[i], deg[i] * 8);
        indptr[i + 1] = indptr[i] + deg[i];
    }
    g->num_nodes = n;
    g->num_train_edges = m2 / 2;
    g->num_edges = m2 / 2 + 3;
    g->indptr = indptr;
    g->indices = indices;
    g->feature_dim = 3;
    float *f = tma_graph_alloc(g, n * 3 * 4);
    for (int i = 0; i < n * 3; i++)
        f[i] = (float)i * 0.5f;
    g->features = f;
    int32_t *lab = tma_graph_alloc(g, n * 4);
    for (int i = 0; i < n; i++)
        lab[i] = i % 2;
    g->labels = lab;
    g->num_classes = 2;
    int64_t *ve = tma_graph_alloc(g, 4 * 8), *te = tma_graph_alloc(g, 2 * 8);
    ve[0] = 0; ve[1] = 1; ve[2] = 2; ve[3] = 3;
    te[0] = 4; te[1] = 5;
    g->val_edges = ve;
    g->test_edges = te;
    g->num_val = 2;
    g->num_test = 1;
    g->num_negatives = 3;
    int64_t *vn = tma_graph_alloc(g, 6 * 8), *tn = tma_graph_alloc(g, 3 * 8);
    int64_t vneg[6] = {5, 6, 7, 6, 7, 8}, tneg[3] = {7, 8, 1};
    memcpy(vn, vneg, sizeof vneg);
    memcpy(tn, tneg, sizeof tneg);
    g->val_neg = vn;
    g->test_neg = tn;
    g->split_seed = 99;
    return g;
}

/* Writes g's sections through the streaming writer in blocks of `block`
 * bytes (the section order of tma_graph_write). */
static tma_status_t write_streamed(const tma_graph_t *g, const char *path, size_t block)
{
    struct {
        uint32_t id, size;
        const void *p;
        uint64_t n;
    } s[] = {
        {SEC_INDPTR, 8, g->indptr, (uint64_t)g->num_nodes + 1},
        {SEC_INDICES, 8, g->indices, 2 * (uint64_t)g->num_train_edges},
        {SEC_FEATURES, 4, g->features, (uint64_t)(g->num_nodes * g->feature_dim)},
        {SEC_LABELS, 4, g->labels, g->labels ? (uint64_t)g->num_nodes : 0},
        {SEC_VAL_EDGES, 8, g->val_edges, 2 * (uint64_t)g->num_val},
        {SEC_TEST_EDGES, 8, g->test_edges, 2 * (uint64_t)g->num_test},
        {SEC_VAL_NEG, 8, g->val_neg, (uint64_t)(g->num_val * g->num_negatives)},
        {SEC_TEST_NEG, 8, g->test_neg, (uint64_t)(g->num_test * g->num_negatives)},
    };
    tmag_writer_t *w;
    tma_status_t st = tmag_writer_begin(g, path, &w);
    if (st != TMA_OK)
        return st;
    for (size_t i = 0; i < sizeof s / sizeof s[0] && st == TMA_OK; i++) {
        if (s[i].id == SEC_LABELS && !g->labels)
            continue;
        st = tmag_writer_section_begin(w, s[i].id, s[i].size);
        size_t bytes = s[i].n * s[i].size;
        for (size_t off = 0; off < bytes && st == TMA_OK; off += block)
            st = tmag_writer_append(w, (const char *)s[i].p + off, bytes - off < block ? bytes - off : block);
        if (st == TMA_OK)
            st = tmag_writer_section_end(w);
    }
    if (st != TMA_OK) {
        tmag_writer_abort(w);
        return st;
    }
    return tmag_writer_end(w, NULL);
}

/* The streaming writer gives tma_graph_write's bytes, whatever the block
 * size, and an unfinished or aborted write leaves no file behind. */
static void check_streamed(const char *dir, tma_graph_t *g, size_t block)
{
    char *a = tma_path_join(dir, "mem.tmag"), *b = tma_path_join(dir, "stream.tmag");
    CHECK_OK(tma_graph_write(g, a));
    CHECK_OK(write_streamed(g, b, block));
    char *x, *y;
    size_t nx, ny;
    CHECK_OK(tma_file_read_all(a, &x, &nx));
    CHECK_OK(tma_file_read_all(b, &y, &ny));
    CHECK_MSG(nx == ny && memcmp(x, y, nx) == 0, "streamed file (blocks of %zu) differs", block);
    tma_graph_t *r;
    CHECK_OK(tma_graph_open(b, 0, &r)); /* every section checksum verified */
    ASSERT_EQ(r->graph_id, g->graph_id);
    tma_graph_destroy(r);
    free(x);
    free(y);
    unlink(a);
    unlink(b);
    free(a);
    free(b);
}

static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    ASSERT_NOT_NULL(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* A ring of n nodes with dim-wide features: a features section of several
 * 16 MiB checksum chunks. */
static tma_graph_t *make_ring(int64_t n, int dim)
{
    tma_graph_t *g;
    CHECK_OK(tma_graph_create(&g));
    int64_t *indptr = tma_graph_alloc(g, (n + 1) * 8), *ind = tma_graph_alloc(g, 2 * n * 8);
    float *f = tma_graph_alloc(g, (size_t)n * dim * 4);
    for (int64_t i = 0; i <= n; i++)
        indptr[i] = 2 * i;
    for (int64_t i = 0; i < n; i++) {
        int64_t a = (i + n - 1) % n, b = (i + 1) % n;
        ind[2 * i] = a < b ? a : b;
        ind[2 * i + 1] = a < b ? b : a;
    }
    for (int64_t i = 0; i < n * dim; i++)
        f[i] = (float)(i % 1000003) * 0.25f;
    g->num_nodes = n;
    g->num_edges = g->num_train_edges = n;
    g->indptr = indptr;
    g->indices = ind;
    g->features = f;
    g->feature_dim = dim;
    g->split_seed = 7;
    return g;
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);
    char *dir = tma_test_tmpdir("tmag");
    char *path = tma_path_join(dir, "g.tmag");
    tma_graph_t *g = make_graph();
    CHECK_OK(tma_graph_write(g, path));
    ASSERT_NE(g->graph_id, 0);

    tma_graph_t *r;
    CHECK_OK(tma_graph_open(path, 0, &r));
    ASSERT_EQ(r->num_nodes, g->num_nodes);
    ASSERT_EQ(r->num_train_edges, g->num_train_edges);
    ASSERT_EQ(r->num_edges, g->num_edges);
    ASSERT_EQ(r->feature_dim, 3);
    ASSERT_EQ(r->num_classes, 2);
    ASSERT_EQ(memcmp(r->indptr, g->indptr, (g->num_nodes + 1) * 8), 0);
    ASSERT_EQ(memcmp(r->indices, g->indices, 2 * g->num_train_edges * 8), 0);
    ASSERT_EQ(memcmp(r->features, g->features, g->num_nodes * 3 * 4), 0);
    ASSERT_EQ(memcmp(r->labels, g->labels, g->num_nodes * 4), 0);
    ASSERT_EQ(memcmp(r->val_edges, g->val_edges, 4 * 8), 0);
    ASSERT_EQ(memcmp(r->test_neg, g->test_neg, 3 * 8), 0);
    ASSERT_EQ(r->graph_id, g->graph_id);
    ASSERT_EQ(r->split_seed, 99);
    ASSERT_EQ(r->kind, TMA_GRAPH_FULL);
    CHECK(tma_graph_has_edge(r, 1, 2) && !tma_graph_has_edge(r, 0, 1));
    cJSON *info = tma_graph_info_json(r);
    ASSERT_EQ(cJSON_GetObjectItem(info, "nodes")->valuedouble, 10);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(info, "has_labels")));
    cJSON_Delete(info);
    tma_graph_destroy(r);

    /* The content id depends on the content. */
    float *f = (float *)g->features;
    uint64_t id0 = tma_graph_content_id(g);
    f[0] = 42.0f;
    ASSERT_NE(tma_graph_content_id(g), id0);

    /* Corruption and truncation are refused with the right status. */
    char *bytes;
    size_t len;
    CHECK_OK(tma_file_read_all(path, &bytes, &len));
    char *bad = tma_path_join(dir, "bad.tmag");
    for (size_t cut = 0; cut < len; cut += len / 7 + 1) {
        CHECK_OK(tma_file_write_atomic(bad, bytes, cut));
        CHECK_MSG(tma_graph_open(bad, 0, &r) != TMA_OK, "truncated at %zu opened", cut);
    }
    CHECK_OK(tma_file_write_atomic(bad, bytes, len - 1));
    CHECK_STATUS(tma_graph_open(bad, 0, &r), TMA_ERR_FORMAT);
    bytes[4100] ^= 1; /* inside the row pointer section */
    CHECK_OK(tma_file_write_atomic(bad, bytes, len));
    CHECK_STATUS(tma_graph_open(bad, 0, &r), TMA_ERR_CHECKSUM);
    bytes[4100] ^= 1;
    bytes[40] ^= 1; /* header */
    CHECK_OK(tma_file_write_atomic(bad, bytes, len));
    CHECK_STATUS(tma_graph_open(bad, 0, &r), TMA_ERR_CHECKSUM);
    bytes[40] ^= 1;
    bytes[0] = 'X';
    CHECK_OK(tma_file_write_atomic(bad, bytes, len));
    CHECK_STATUS(tma_graph_open(bad, 0, &r), TMA_ERR_FORMAT);
    CHECK_OK(tma_file_write_atomic(bad, "", 0));
    CHECK_STATUS(tma_graph_open(bad, 0, &r), TMA_ERR_FORMAT);
    CHECK_STATUS(tma_graph_open("/nonexistent.tmag", 0, &r), TMA_ERR_NOT_FOUND);
    free(bytes);

    /* Broken graphs are refused before anything is written. */
    int64_t *ind = (int64_t *)g->indices;
    int64_t keep = ind[0];
    ind[0] = 99;
    CHECK_STATUS(tma_graph_write(g, bad), TMA_ERR_FORMAT);
    ind[0] = keep;
    int64_t *vn = (int64_t *)g->val_neg;
    vn[0] = 1; /* head of val edge 0 is node 0; node 1 is fine */
    CHECK_OK(tma_graph_validate(g, "g"));
    vn[0] = 0; /* the head itself */
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    vn[0] = 9; /* a training neighbour of node 0 */
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    vn[0] = 5;
    int64_t *ve = (int64_t *)g->val_edges;
    ve[0] = 1; ve[1] = 2; /* a training edge as a validation edge */
    CHECK_STATUS(tma_graph_validate(g, "g"), TMA_ERR_FORMAT);
    ve[0] = 0; ve[1] = 1;
    CHECK_OK(tma_graph_validate(g, "g"));

    /* An adjacency whose rows are each fine but which is not symmetric
     * (0-2 and 2-1 are stored one way only) is refused, naming a node. */
    {
        tma_graph_t *a;
        CHECK_OK(tma_graph_create(&a));
        static const int64_t ip[4] = {0, 2, 3, 4}, ix[4] = {1, 2, 0, 1};
        static const float fa[3] = {0, 0, 0};
        a->num_nodes = 3;
        a->num_edges = a->num_train_edges = 2;
        a->indptr = ip;
        a->indices = ix;
        a->feature_dim = 1;
        a->features = fa;
        CHECK_STATUS(tma_graph_validate(a, "asym"), TMA_ERR_FORMAT);
        tma_graph_destroy(a);
    }

    /* A shard round-trips with its global ids. */
    g->kind = TMA_GRAPH_SHARD;
    g->num_val = g->num_test = 0;
    g->shard_index = 1;
    g->num_shards = 3;
    int64_t *gid = tma_graph_alloc(g, g->num_nodes * 8);
    for (int64_t i = 0; i < g->num_nodes; i++)
        gid[i] = 100 + i;
    g->global_ids = gid;
    g->graph_id = 1234;
    CHECK_OK(tma_graph_write(g, path));
    CHECK_OK(tma_graph_open(path, 0, &r));
    ASSERT_EQ(r->kind, TMA_GRAPH_SHARD);
    ASSERT_EQ(r->shard_index, 1);
    ASSERT_EQ(r->num_shards, 3);
    ASSERT_EQ(r->global_ids[3], 103);
    ASSERT_EQ(r->graph_id, 1234);
    tma_graph_destroy(r);

    /* Streaming: the same bytes in any block size, across 16 MiB chunks. */
    char *sdir = tma_path_join(dir, "stream");
    ASSERT_EQ(mkdir(sdir, 0755), 0);
    tma_graph_t *small = make_graph();
    for (size_t block = 1; block <= 9; block += 4)
        check_streamed(sdir, small, block);
    tma_graph_destroy(small);
    tma_graph_t *ring = make_ring(200000, 48); /* features: 38.4 MB, three chunks */
    check_streamed(sdir, ring, (1u << 20) + 3);
    check_streamed(sdir, ring, (size_t)40 << 20); /* whole chunks at once */
    /* An aborted write, or one ended with a section open, leaves nothing. */
    char *gone = tma_path_join(sdir, "gone.tmag");
    tmag_writer_t *w;
    CHECK_OK(tmag_writer_begin(ring, gone, &w));
    CHECK_OK(tmag_writer_section_begin(w, SEC_INDPTR, 8));
    CHECK_OK(tmag_writer_append(w, ring->indptr, 4096));
    tmag_writer_abort(w);
    ASSERT_NE(access(gone, F_OK), 0);
    ASSERT_EQ(dir_entries(sdir), 0);
    CHECK_OK(tmag_writer_begin(ring, gone, &w));
    CHECK_OK(tmag_writer_section_begin(w, SEC_INDPTR, 8));
    ASSERT_NE(tmag_writer_end(w, NULL), TMA_OK);
    ASSERT_NE(access(gone, F_OK), 0);
    ASSERT_EQ(dir_entries(sdir), 0);
    /* A section of a part element fails, and nothing is left. */
    CHECK_OK(tmag_writer_begin(ring, gone, &w));
    CHECK_OK(tmag_writer_section_begin(w, SEC_INDPTR, 8));
    CHECK_OK(tmag_writer_append(w, ring->indptr, 12));
    ASSERT_NE(tmag_writer_section_end(w), TMA_OK);
    ASSERT_NE(tmag_writer_end(w, NULL), TMA_OK);
    ASSERT_NE(access(gone, F_OK), 0);
    ASSERT_EQ(dir_entries(sdir), 0);
    free(gone);
    free(sdir);
    tma_graph_destroy(ring);

    tma_graph_destroy(g);
    free(bad);
    free(path);
    tma_test_cleanup_dir(dir);
    return tma_test_done();
}
