/* test_ooc_unit.c: the out-of-core builder (graph/build_ooc.c) on edges
 * given by a test source: the same file as tma_graph_build then
 * tma_graph_write, with self-loops, duplicates in both directions, isolated
 * nodes and a node count known only at the end of the edges; and a torn
 * temporary file (corrupted or cut short under the builder while the edges
 * stream in) is an error, with nothing written under the output name. */
#include "tma_test.h"
#include "graph_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 3000
#define M 900000
#define F 5

typedef enum { TEAR_NONE, TEAR_CORRUPT, TEAR_TRUNCATE } tear_t;

typedef struct src {
    int64_t drawn;
    uint64_t x;
    tear_t tear;
    int calls;
    int late_nodes; /* the node count only at the end */
} src_t;

/* Edge i: a skewed pair from a little LCG (duplicates and self-loops
 * included); node N - 1 appears in none, so N comes from meta, not edges. */
static void edge(src_t *s, int64_t *u, int64_t *v)
{
    s->x = s->x * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t r = s->x >> 17;
    *u = (int64_t)((r % 997) * (r % 997) % (N - 1));
    *v = (int64_t)((r >> 20) % (N - 1));
}

/* The descriptor of the first temporary file the builder opened (the runs),
 * found as a deleted .tma-spill-* in /proc/self/fd; -1 if none. */
static int runs_fd(void)
{
    DIR *d = opendir("/proc/self/fd");
    int best = -1;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300], target[512];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(path, target, sizeof target - 1);
        if (k <= 0)
            continue;
        target[k] = '\0';
        int fd = atoi(e->d_name);
        if (strstr(target, ".tma-spill-") && strstr(target, "(deleted)") && (best < 0 || fd < best))
            best = fd;
    }
    if (d)
        closedir(d);
    return best;
}

static int64_t next(void *ctx, int64_t *pairs, int64_t cap)
{
    src_t *s = ctx;
    int64_t got = M - s->drawn < cap ? M - s->drawn : cap;
    for (int64_t i = 0; i < got; i++)
        edge(s, &pairs[2 * i], &pairs[2 * i + 1]);
    s->drawn += got;
    /* Late in the stream (runs have been spilled by then), tear the file. */
    if (++s->calls == 12 && s->tear != TEAR_NONE) {
        int fd = runs_fd();
        CHECK_MSG(fd >= 0, "no spill file open at call %d", s->calls);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0) {
            CHECK_MSG(st.st_size > 4096, "the runs file holds %lld bytes: no run spilled yet", (long long)st.st_size);
            if (s->tear == TEAR_CORRUPT) {
                static const char junk[16] = "not a sorted run";
                CHECK(pwrite(fd, junk, sizeof junk, 1000) == (ssize_t)sizeof junk);
            } else {
                CHECK(ftruncate(fd, st.st_size / 2) == 0);
            }
        }
    }
    return got;
}

static int64_t final_nodes(void *ctx)
{
    (void)ctx;
    return N;
}

static void rows(void *ctx, int64_t first, int64_t count, float *out)
{
    (void)ctx;
    for (int64_t i = 0; i < count; i++)
        for (int j = 0; j < F; j++)
            out[i * F + j] = (float)((first + i) % 7) - (float)j * 0.25f;
}

static int32_t labels[N];

static tma_status_t build_ooc(src_t *s, const char *out, tma_graph_build_report_t *rep, uint64_t *id)
{
    graph_ooc_source_t src = {.num_nodes = s->late_nodes ? 0 : N,
                              .final_nodes = s->late_nodes ? final_nodes : NULL,
                              .next = next,
                              .block = 1,
                              .features = rows,
                              .ctx = s,
                              .feature_dim = F,
                              .num_classes = 3,
                              .labels = labels};
    tma_graph_build_opts_t o;
    tma_graph_build_opts_init(&o);
    o.negatives = 20;
    o.seed = 11;
    double h;
    return graph_build_ooc(&src, &o, (uint64_t)16 << 20, out, rep, id, &h);
}

/* The same graph in memory, written. */
static void build_in_memory(const char *out, tma_graph_build_report_t *rep)
{
    tma_graph_t *g;
    CHECK_OK(tma_graph_create(&g));
    g->num_nodes = N;
    float *f = tma_graph_alloc(g, (size_t)N * F * sizeof(float));
    int32_t *l = tma_graph_alloc(g, sizeof labels);
    ASSERT_NOT_NULL(f);
    ASSERT_NOT_NULL(l);
    rows(NULL, 0, N, f);
    memcpy(l, labels, sizeof labels);
    g->features = f;
    g->feature_dim = F;
    g->labels = l;
    g->num_classes = 3;
    tma_edge_list_t el = {0};
    src_t s = {0};
    for (int64_t i = 0; i < M; i++) {
        int64_t u, v;
        edge(&s, &u, &v);
        CHECK_OK(tma_edge_list_push(&el, u, v));
    }
    tma_graph_build_opts_t o;
    tma_graph_build_opts_init(&o);
    o.negatives = 20;
    o.seed = 11;
    CHECK_OK(tma_graph_build(g, &el, &o, rep));
    CHECK_OK(tma_graph_write(g, out));
    tma_graph_destroy(g);
}

static int same_file(const char *a, const char *b)
{
    char *x, *y;
    size_t nx, ny;
    if (tma_file_read_all(a, &x, &nx) != TMA_OK)
        return 0;
    if (tma_file_read_all(b, &y, &ny) != TMA_OK) {
        free(x);
        return 0;
    }
    int same = nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return same;
}

static int entries_in(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d)
        closedir(d);
    return n;
}

int main(void)
{
    char *dir = tma_test_tmpdir("ooc");
    for (int v = 0; v < N; v++)
        labels[v] = (v * 7) % 3;
    char mem[512], ooc[512], torn[512];
    snprintf(mem, sizeof mem, "%s/mem.tmag", dir);
    snprintf(ooc, sizeof ooc, "%s/ooc.tmag", dir);
    snprintf(torn, sizeof torn, "%s/torn.tmag", dir);

    tma_graph_build_report_t rm, ro;
    build_in_memory(mem, &rm);
    for (int late = 0; late < 2; late++) {
        src_t s = {.late_nodes = late};
        uint64_t id = 0;
        CHECK_OK(build_ooc(&s, ooc, &ro, &id));
        CHECK_MSG(same_file(mem, ooc), "out of core (late node count %d) differs from in memory", late);
        ASSERT_EQ(ro.self_loops, rm.self_loops);
        ASSERT_EQ(ro.duplicates, rm.duplicates);
        ASSERT_EQ(ro.edges, rm.edges);
        ASSERT_GT(ro.self_loops, 0);
        ASSERT_GT(ro.duplicates, 0);
        ASSERT_GT(ro.spilled_runs, 2);
        tma_graph_t *g;
        CHECK_OK(tma_graph_open(ooc, 1, &g));
        if (g) {
            ASSERT_EQ(g->graph_id, id);
            ASSERT_EQ(g->num_nodes, N);
            CHECK_OK(tma_graph_validate(g, ooc));
            tma_graph_destroy(g);
        }
        unlink(ooc);
    }

    /* A torn runs file: a corrupted run fails its checksum, a cut one reads
     * short; either way nothing is left in the folder but the in-memory file. */
    src_t c = {.tear = TEAR_CORRUPT};
    CHECK_STATUS(build_ooc(&c, torn, &ro, NULL), TMA_ERR_CHECKSUM);
    src_t t = {.tear = TEAR_TRUNCATE};
    tma_status_t st = build_ooc(&t, torn, &ro, NULL);
    /* Cut short, then written past the cut (a hole of zeros) or not. */
    CHECK_MSG(st == TMA_ERR_CHECKSUM || st == TMA_ERR_IO, "a cut runs file gave %s", tma_status_str(st));
    ASSERT_EQ(entries_in(dir), 1);
    ASSERT_EQ(runs_fd(), -1);

    unlink(mem);
    tma_test_cleanup_dir(dir);
    return tma_test_done();
}
