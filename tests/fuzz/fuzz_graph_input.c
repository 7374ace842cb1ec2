/*
 * fuzz_graph_input.c: libFuzzer target for the graph importers' parsers:
 * the .npz reader (zip end record and central directory, ZIP64 extras,
 * local headers, stored and deflated members, CRC-32, .npy headers and
 * dtypes, byte strings; graph/npz.c) under the array names of every layout
 * tma reads (gnn-benchmark, scipy.sparse.save_npz, PyG), and the line
 * reader over plain or gzip text with the id and float field parsers
 * (graph/text.c), and a whole .npy file (graph_npy_open: features.npy).
 * The first input byte picks the parser ('n': npz, 'y': npy, else text);
 * the rest is written to a temporary file, because all three read files.
 * Beyond "no crash, no read past the data" (ASan), it checks that an array
 * the reader accepts matches its shape and is no larger than deflate can
 * make from the file.
 * Built and run by tests/graph/fuzz_input.sh.
 */
#include "graph_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* A plain write (no fsync): this runs thousands of times a second. */
static void put_file(const char *path, const unsigned char *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
}

static char *tmp_path(const char *ext)
{
    static char path[256];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/tma-fuzz-graph-%d%s", dir && *dir ? dir : "/tmp", (int)getpid(), ext);
    return path;
}

/* An accepted array matches its shape, is no larger than deflate can make
 * from `size` bytes, and every element is readable. */
static void check_array(const graph_npy_t *a, size_t size, int ints)
{
    int64_t count = 1;
    for (int d = 0; d < a->ndim; d++)
        count *= a->shape[d];
    if (count != a->count || a->itemsize < 1 || a->itemsize > 8 || a->count < 0 ||
        (size_t)a->count * (size_t)a->itemsize > 1032 * size + 1032)
        abort();
    volatile double sum = 0;
    for (int64_t k = 0; k < a->count; k++)
        sum += ints ? (double)graph_npy_int(a, k) : (double)graph_npy_float(a, k);
}

static void fuzz_npy(const unsigned char *data, size_t size)
{
    const char *path = tmp_path(".npy");
    put_file(path, data, size);
    tma_mmap_t map;
    graph_npy_t a;
    if (graph_npy_open(path, &map, &a) == TMA_OK) {
        /* The data ends exactly where the file does. */
        if ((const char *)a.data + a.count * a.itemsize != (const char *)map.data + map.size)
            abort();
        if (a.kind != NPY_BYTES)
            check_array(&a, size, a.kind != NPY_FLOAT);
        tma_mmap_close(&map);
    }
    unlink(path);
}

static void fuzz_npz(const unsigned char *data, size_t size)
{
    const char *path = tmp_path(".npz");
    put_file(path, data, size);
    graph_npz_t *z;
    if (graph_npz_open(path, &z) == TMA_OK) {
        static const char *names[] = {"adj_indptr", "adj_indices", "adj_shape", "attr_indptr", "attr_indices",
                                      "attr_data", "attr_shape", "attr_matrix", "labels", "indptr", "indices",
                                      "data", "shape", "row", "col", "edge_index", "x", "y"};
        char fmt[16];
        if (graph_npz_get_string(z, "format", fmt, sizeof fmt) == TMA_OK && strlen(fmt) >= sizeof fmt)
            abort();
        free(graph_npz_names(z));
        (void)graph_npz_has(z, "edge_index");
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            graph_npy_t a;
            if (graph_npz_get(z, names[i], 0, &a) != TMA_OK)
                continue;
            check_array(&a, size, graph_npy_check_int(z, &a) == TMA_OK);
        }
        graph_npz_close(z);
    }
    unlink(path);
}

static void fuzz_text(const unsigned char *data, size_t size)
{
    const char *path = tmp_path(".txt");
    put_file(path, data, size);
    graph_text_reader_t tr;
    if (graph_text_open(&tr, path) == TMA_OK) {
        char *line;
        size_t len;
        int64_t lines = 0;
        while (graph_text_next(&tr, &line, &len) > 0) {
            if (strlen(line) != len || ++lines != tr.line)
                abort();
            char *p = line, *tok;
            int field = 0;
            while ((tok = graph_text_field(&p)) != NULL) {
                int64_t id;
                float f;
                if (field++ % 2)
                    (void)graph_text_parse_float(&tr, tok, "value", &f);
                else if (graph_text_parse_id(&tr, tok, "id", &id) == TMA_OK && id < 0)
                    abort();
            }
        }
        graph_text_close(&tr);
    }
    unlink(path);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        tma_log_set_level(TMA_LOG_ERROR);
        tma_log_set_stream(fopen("/dev/null", "w"));
        quiet = 1;
    }
    if (size < 1)
        return 0;
    if (data[0] == 'n')
        fuzz_npz(data + 1, size - 1);
    else if (data[0] == 'y')
        fuzz_npy(data + 1, size - 1);
    else
        fuzz_text(data + 1, size - 1);
    return 0;
}
