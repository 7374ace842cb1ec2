/* test_npy.c: node features from a features.npy beside edges.txt.  The
 * .npy files are written here (the format's header and raw little-endian
 * bytes): float32 in C order (used in place from the map), float32 in
 * Fortran order and float16 (values chosen exactly representable: normal,
 * subnormal, signed zeros, the largest half) in both orders, each imported
 * features equal to the array bit for bit, through the library and through
 * a written and reopened .tmag; the projection of a float16 file equals that
 * of the same values in float32.  Then every bad file through `tma import`:
 * its exit status 1, an error naming the file and nothing written; and the
 * folder's unused files named in the report (library, text and --json). */
#include "tma_test.h"
#include "tma_graph.h"

#include <dirent.h>
#include <inttypes.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { NODES = 5, WIDTH = 3 };

/* The exactly representable float16 values and their bit patterns. */
static const uint16_t half_bits[NODES * WIDTH] = {0x0000, 0x8000, 0x3C00, 0xC000, 0x3800,
                                                  0x3D00, 0x7BFF, 0x0001, 0x03FF, 0xC380,
                                                  0x6400, 0x0400, 0x3555, 0xBBFF, 0x5640};
static const float half_vals[NODES * WIDTH] = {0.0f,    -0.0f,  1.0f,      -2.0f,          0.5f,
                                               1.25f,   65504,  0x1p-24f,  1023 * 0x1p-24f, -3.75f,
                                               1024.0f, 0x1p-14f, 0.333251953125f, -0.99951171875f, 100.0f};

/* Writes an .npy (version 1.0) of `ndim` dims with the raw data given. */
static void write_npy(const char *path, const char *descr, int fortran, const int64_t *shape, int ndim,
                      const void *data, size_t bytes)
{
    char dict[256];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': (", descr,
                       fortran ? "True" : "False");
    for (int i = 0; i < ndim; i++)
        len += snprintf(dict + len, sizeof dict - (size_t)len, "%" PRId64 "%s", shape[i],
                        ndim == 1 || i + 1 < ndim ? ", " : "");
    len += snprintf(dict + len, sizeof dict - (size_t)len, "), }");
    /* numpy pads with spaces and a newline so the data starts at a multiple of 64. */
    while ((10 + len + 1) % 64)
        dict[len++] = ' ';
    dict[len++] = '\n';
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        exit(1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff),
                             (unsigned char)(len >> 8)};
    CHECK(fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)len, f) == (size_t)len &&
          fwrite(data, 1, bytes, f) == bytes);
    CHECK(fclose(f) == 0);
}

/* A dataset folder: a 5-node graph (node 4 only on one edge), and
 * features.npy when descr is given. */
static char *dataset(const char *descr, int fortran, const int64_t *shape, int ndim, const void *data, size_t bytes)
{
    char *dir = tma_test_tmpdir("npy");
    char *p = tma_path_join(dir, "edges.txt");
    static const char edges[] = "0 1\n1 2\n2 3\n3 0\n0 2\n3 4\n";
    CHECK_OK(tma_file_write_atomic(p, edges, sizeof edges - 1));
    free(p);
    if (descr) {
        p = tma_path_join(dir, "features.npy");
        write_npy(p, descr, fortran, shape, ndim, data, bytes);
        free(p);
    }
    return dir;
}

static void add_file(const char *dir, const char *name, const char *text)
{
    char *p = tma_path_join(dir, name);
    CHECK_OK(tma_file_write_atomic(p, text, strlen(text)));
    free(p);
}

static tma_status_t import(const char *dir, int32_t feat_dim, tma_graph_t **g_p, tma_graph_import_report_t *rep)
{
    tma_graph_import_opts_t o;
    tma_graph_import_opts_init(&o);
    o.feat_dim = feat_dim;
    o.build.val = 1;
    o.build.test = 1;
    o.build.negatives = 1;
    return tma_graph_import(dir, &o, g_p, rep);
}

/* Imports dir and checks its features are exactly want[NODES x WIDTH]. */
static void check_exact(const char *dir, const float *want, int mapped, const char *what)
{
    tma_graph_t *g = NULL, *h = NULL;
    tma_graph_import_report_t r;
    CHECK_OK(import(dir, 0, &g, &r));
    ASSERT_EQ(g->num_nodes, NODES);
    ASSERT_EQ(g->feature_dim, WIDTH);
    ASSERT_EQ(r.features, TMA_FEAT_STORED);
    ASSERT_EQ(r.input_feature_dim, WIDTH);
    CHECK_MSG(r.features_mapped == mapped, "%s: mapped %d", what, r.features_mapped);
    CHECK_MSG(memcmp(g->features, want, sizeof(float) * NODES * WIDTH) == 0, "%s: features differ", what);
    /* The features written (from the map, when mapped) read back the same. */
    char *out = tma_path_join(dir, "g.tmag");
    CHECK_OK(tma_graph_write(g, out));
    CHECK_OK(tma_graph_open(out, 0, &h));
    CHECK_MSG(memcmp(h->features, want, sizeof(float) * NODES * WIDTH) == 0, "%s: written features differ", what);
    CHECK(unlink(out) == 0);
    free(out);
    tma_graph_destroy(h);
    tma_graph_destroy(g);
}

/* The column-major copy of a NODES x WIDTH row-major array of `size`-byte items. */
static void to_fortran(const void *in, void *out, size_t size)
{
    for (int v = 0; v < NODES; v++)
        for (int j = 0; j < WIDTH; j++)
            memcpy((char *)out + ((size_t)j * NODES + (size_t)v) * size, (const char *)in + ((size_t)v * WIDTH + (size_t)j) * size,
                   size);
}

/* The tma binary the harness names; NULL when run without it. */
static const char *tma_bin(void)
{
    const char *b = getenv("TMA_BIN");
    return b && *b && access(b, X_OK) == 0 ? b : NULL;
}

/* Runs `tma import dir -o dir/.out/g.tmag [extra]` (a dot folder: not
 * listed among the unused files); returns its exit status, its stdout and
 * stderr in *out_p and *err_p (malloc'd). */
static int run_import(const char *dir, const char *extra, char **out_p, char **err_p)
{
    char *outdir = tma_path_join(dir, ".out"), *log = tma_path_join(dir, ".log");
    CHECK_OK(tma_mkdir_p(outdir));
    CHECK_OK(tma_mkdir_p(log));
    char *cmd = tma_strdup_printf("'%s' import '%s' -o '%s/g.tmag' %s >'%s/stdout' 2>'%s/stderr'", tma_bin(), dir,
                                  outdir, extra, log, log);
    int rc = system(cmd);
    free(cmd);
    char *p = tma_path_join(log, "stdout");
    size_t len;
    CHECK_OK(tma_file_read_all(p, out_p, &len));
    free(p);
    p = tma_path_join(log, "stderr");
    CHECK_OK(tma_file_read_all(p, err_p, &len));
    free(p);
    free(outdir);
    free(log);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Entries of dir/.out (0 when nothing was left there). */
static int out_entries(const char *dir)
{
    char *outdir = tma_path_join(dir, ".out");
    DIR *d = opendir(outdir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    free(outdir);
    return n;
}

/* A bad features.npy: the library's status, then (with the binary) exit 1,
 * the error on stderr naming the file, and nothing written. */
static void check_bad(const char *dir, tma_status_t want, const char *msg, const char *what)
{
    tma_graph_t *g = NULL;
    tma_graph_import_report_t r;
    CHECK_STATUS(import(dir, 0, &g, &r), want);
    ASSERT_NULL(g);
    if (!tma_bin())
        return;
    char *out, *err;
    int rc = run_import(dir, "", &out, &err);
    CHECK_MSG(rc == 1, "%s: exit %d, expected 1", what, rc);
    CHECK_MSG(strstr(err, msg) != NULL, "%s: stderr lacks '%s':\n%s", what, msg, err);
    CHECK_MSG(strstr(err, "features.npy") != NULL || strstr(err, "edges.txt") != NULL, "%s: no file named:\n%s",
              what, err);
    CHECK_MSG(out_entries(dir) == 0, "%s: files left in the output folder", what);
    free(out);
    free(err);
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);
    const int64_t shape[2] = {NODES, WIDTH};
    float f32[NODES * WIDTH], f32_fortran[NODES * WIDTH];
    uint16_t f16_fortran[NODES * WIDTH];
    for (int i = 0; i < NODES * WIDTH; i++)
        f32[i] = (float)(i * 37 % 11) * 0.3f - 1.1f + (float)i * 1e-7f;
    to_fortran(f32, f32_fortran, 4);
    to_fortran(half_bits, f16_fortran, 2);

    /* float32, C order: used in place, the unused files named. */
    {
        char *dir = dataset("<f4", 0, shape, 2, f32, sizeof f32);
        check_exact(dir, f32, 1, "f32 C order");
        add_file(dir, "README", "a dataset\n");
        add_file(dir, "feat.npy", "not read\n");
        char *sub = tma_path_join(dir, "extra");
        CHECK_OK(tma_mkdir_p(sub));
        free(sub);
        tma_graph_t *g = NULL;
        tma_graph_import_report_t r;
        CHECK_OK(import(dir, 0, &g, &r));
        ASSERT_EQ(r.num_ignored, 3);
        ASSERT_EQ(r.ignored_more, 0);
        const char *name = r.ignored;
        static const char *const want[] = {"README", "extra/", "feat.npy"};
        for (int i = 0; i < 3 && i < r.num_ignored; i++, name += strlen(name) + 1)
            ASSERT_STR_EQ(name, want[i]);
        tma_graph_destroy(g);
        if (tma_bin()) {
            char *out, *err;
            ASSERT_EQ(run_import(dir, "--val 1 --test 1 --negatives 1 --json", &out, &err), 0);
            CHECK_MSG(strstr(out, "\"ignored\":[\"README\",\"extra/\",\"feat.npy\"]") != NULL, "json: %s", out);
            CHECK_MSG(strstr(out, "\"features_mapped\":true") != NULL, "json: %s", out);
            CHECK_MSG(strstr(err, "feat.npy is not read") != NULL, "no warning about feat.npy: %s", err);
            free(out);
            free(err);
            ASSERT_EQ(run_import(dir, "--val 1 --test 1 --negatives 1", &out, &err), 0);
            CHECK_MSG(strstr(out, "  ignored (not read)     README, extra/, feat.npy\n") != NULL, "text: %s", out);
            free(out);
            free(err);
        }
        tma_test_cleanup_dir(dir);
    }
    /* float32, Fortran order: gathered row by row. */
    {
        char *dir = dataset("<f4", 1, shape, 2, f32_fortran, sizeof f32_fortran);
        check_exact(dir, f32, 0, "f32 Fortran order");
        tma_test_cleanup_dir(dir);
    }
    /* float16 in both orders: widened exactly. */
    {
        char *dir = dataset("<f2", 0, shape, 2, half_bits, sizeof half_bits);
        check_exact(dir, half_vals, 0, "f16 C order");
        tma_test_cleanup_dir(dir);
        dir = dataset("<f2", 1, shape, 2, f16_fortran, sizeof f16_fortran);
        check_exact(dir, half_vals, 0, "f16 Fortran order");
        tma_test_cleanup_dir(dir);
    }
    /* --feat-dim: the projection of float16 input is that of its float32 values. */
    {
        char *d16 = dataset("<f2", 1, shape, 2, f16_fortran, sizeof f16_fortran);
        char *d32 = dataset("<f4", 0, shape, 2, half_vals, sizeof half_vals);
        tma_graph_t *a = NULL, *b = NULL;
        tma_graph_import_report_t ra, rb;
        CHECK_OK(import(d16, 8, &a, &ra));
        CHECK_OK(import(d32, 8, &b, &rb));
        ASSERT_EQ(ra.features, TMA_FEAT_PROJECTED);
        ASSERT_EQ(rb.features_mapped, 0);
        ASSERT_EQ(a->feature_dim, 8);
        CHECK(memcmp(a->features, b->features, sizeof(float) * NODES * 8) == 0);
        tma_graph_destroy(a);
        tma_graph_destroy(b);
        tma_test_cleanup_dir(d16);
        tma_test_cleanup_dir(d32);
    }

    /* Bad files. */
    {
        const int64_t four[2] = {4, WIDTH}, flat[1] = {NODES * WIDTH}, cube[3] = {NODES, WIDTH, 1};
        char *dir = dataset("<f4", 0, four, 2, f32, 4 * WIDTH * 4);
        /* 4 rows: the edge to node 4 is beyond them. */
        check_bad(dir, TMA_ERR_RANGE, "node id 4 is beyond the node count 4 (from ", "rows < node ids");
        /* meta.txt says 5 nodes. */
        add_file(dir, "meta.txt", "nodes 5\n");
        check_bad(dir, TMA_ERR_FORMAT, "features.npy: shape (4, 3): 4 rows, but the graph has 5 nodes", "rows");
        tma_test_cleanup_dir(dir);
        dir = dataset("<f4", 0, shape, 2, f32, sizeof f32);
        add_file(dir, "meta.txt", "feature_dim 4\n");
        check_bad(dir, TMA_ERR_FORMAT, "3 features a node, but meta.txt says feature_dim 4", "width");
        tma_test_cleanup_dir(dir);
        /* One bad file each: shape, dtype, byte order. */
        double f64[NODES * WIDTH] = {0};
        const struct {
            const char *descr;
            const int64_t *shape;
            int ndim;
            const void *data;
            size_t bytes;
            tma_status_t want;
            const char *msg;
        } bad[] = {
            {"<f4", flat, 1, f32, sizeof f32, TMA_ERR_FORMAT,
             "features.npy: shape (15,) is 1-d: node features are a 2-d array"},
            {"<f4", cube, 3, f32, sizeof f32, TMA_ERR_FORMAT, "features.npy: shape (5, 3, 1) is 3-d"},
            {"<f8", shape, 2, f64, sizeof f64, TMA_ERR_UNSUPPORTED,
             "features.npy: dtype '<f8' cannot be node features: tma reads little-endian float32 ('<f4') and "
             "float16 ('<f2')"},
            {"<i4", shape, 2, f32, sizeof f32, TMA_ERR_UNSUPPORTED, "features.npy: dtype '<i4' cannot be node features"},
            {"<c8", shape, 2, f64, sizeof f64, TMA_ERR_UNSUPPORTED, "features.npy: dtype '<c8' is not supported"},
            {">f4", shape, 2, f32, sizeof f32, TMA_ERR_UNSUPPORTED,
             "features.npy: dtype '>f4' is big-endian; tma reads little-endian"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            dir = dataset(bad[i].descr, 0, bad[i].shape, bad[i].ndim, bad[i].data, bad[i].bytes);
            check_bad(dir, bad[i].want, bad[i].msg, bad[i].descr);
            tma_test_cleanup_dir(dir);
        }
        /* Truncated: in the data, then in the header. */
        dir = dataset("<f4", 0, shape, 2, f32, sizeof f32 - 20);
        check_bad(dir, TMA_ERR_FORMAT, "need 60 bytes of data, it holds 40 (truncated?)", "truncated data");
        char *p = tma_path_join(dir, "features.npy");
        CHECK(truncate(p, 30) == 0);
        check_bad(dir, TMA_ERR_FORMAT, "features.npy: truncated .npy header", "truncated header");
        CHECK(truncate(p, 0) == 0);
        check_bad(dir, TMA_ERR_FORMAT, "features.npy: not an .npy array", "empty");
        free(p);
        tma_test_cleanup_dir(dir);
        /* A NaN, named by node and feature. */
        float nan_f[NODES * WIDTH];
        memcpy(nan_f, f32, sizeof f32);
        nan_f[2 * WIDTH + 1] = NAN;
        dir = dataset("<f4", 0, shape, 2, nan_f, sizeof nan_f);
        check_bad(dir, TMA_ERR_FORMAT, "features.npy: node 2, feature 1 is nan: features must be finite", "nan");
        /* features.txt beside it. */
        add_file(dir, "features.txt", "0 0 1\n");
        check_bad(dir, TMA_ERR_INVALID, "holds both features.txt and features.npy", "both");
        tma_test_cleanup_dir(dir);
        /* An infinite float16, in Fortran order: row and column from the storage index. */
        uint16_t inf_h[NODES * WIDTH];
        memcpy(inf_h, f16_fortran, sizeof inf_h);
        inf_h[2 * NODES + 3] = 0x7C00; /* column 2, row 3 */
        dir = dataset("<f2", 1, shape, 2, inf_h, sizeof inf_h);
        check_bad(dir, TMA_ERR_FORMAT, "features.npy: node 3, feature 2 is inf", "inf");
        tma_test_cleanup_dir(dir);
    }
    if (!tma_bin())
        fprintf(stderr, "note: TMA_BIN is not set: the command-line checks were skipped\n");
    return tma_test_done();
}
