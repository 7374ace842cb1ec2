/*
 * import_npz.c: the .npz layouts of `tma import`: gnn-benchmark's CSR arrays
 * (adj_*, attr_*, labels), scipy.sparse.save_npz's (indptr, indices, data,
 * shape, format) and PyG-style arrays (edge_index, x, y), stored or deflated
 * (graph/npz.c reads the archive).  Each array is checked against the node
 * count and its neighbours before anything is kept; errors name the array.
 */
#include "graph_int.h"
#include "import_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define COMP "import"

static tma_status_t npz_int_array(graph_npz_t *z, const char *name, int required, int ndim, graph_npy_t *a)
{
    tma_status_t st = graph_npz_get(z, name, required, a);
    if (st != TMA_OK)
        return st;
    if (a->ndim != ndim) {
        tma_log_error(COMP, "%s: array %s has %d dimensions, expected %d", graph_npz_path(z), name, a->ndim, ndim);
        return TMA_ERR_FORMAT;
    }
    return graph_npy_check_int(z, a);
}

/* A CSR pair (indptr over `rows` rows, indices) checked for shape and
 * monotonicity; errors name the arrays. */
static tma_status_t npz_csr(graph_npz_t *z, const graph_npy_t *ptr, const graph_npy_t *idx, int64_t rows)
{
    const char *path = graph_npz_path(z);
    if (ptr->count != rows + 1) {
        tma_log_error(COMP, "%s: array %s has %" PRId64 " entries, expected %" PRId64 " (rows + 1)", path, ptr->name,
                      ptr->count, rows + 1);
        return TMA_ERR_FORMAT;
    }
    int64_t prev = 0;
    for (int64_t i = 0; i <= rows; i++) {
        int64_t x = graph_npy_int(ptr, i);
        if ((i == 0 && x != 0) || x < prev || x > idx->count || (i == rows && x != idx->count)) {
            tma_log_error(COMP, "%s: array %s: entry %" PRId64 " = %" PRId64 " breaks the CSR row pointers (must start at 0, "
                          "not decrease, and end at %" PRId64 ", the length of %s)",
                          path, ptr->name, i, x, idx->count, idx->name);
            return TMA_ERR_FORMAT;
        }
        prev = x;
    }
    return TMA_OK;
}

/* Dense features: the 2-D array a (attr_matrix, PyG's x), one row a node. */
static tma_status_t npz_dense_features(src_data_t *s, graph_npz_t *z, const graph_npy_t *a, int64_t n)
{
    const char *path = graph_npz_path(z);
    if (a->ndim != 2 || a->shape[0] != n || a->shape[1] <= 0 || a->shape[1] > (1 << 24)) {
        tma_log_error(COMP, "%s: array %s must have shape (%" PRId64 ", D), one row a node, with 0 < D <= 2^24", path,
                      a->name, n);
        return TMA_ERR_FORMAT;
    }
    s->fdim = (int32_t)a->shape[1];
    s->dense = malloc((size_t)a->count * sizeof(float));
    if (!s->dense) {
        tma_log_error(COMP, "%s: out of memory reading %s", path, a->name);
        return TMA_ERR_NOMEM;
    }
    for (int64_t i = 0; i < a->count; i++)
        s->dense[i] = graph_npy_float(a, i);
    s->dense_rows = n;
    return TMA_OK;
}

/* Optional labels: a 1-D integer array, one class number a node. */
static tma_status_t npz_labels(src_data_t *s, graph_npz_t *z, const char *name, int64_t n)
{
    const char *path = graph_npz_path(z);
    graph_npy_t a;
    tma_status_t st = npz_int_array(z, name, 0, 1, &a);
    if (st == TMA_ERR_NOT_FOUND)
        return TMA_OK;
    if (st != TMA_OK)
        return st;
    if (a.count != n) {
        tma_log_error(COMP, "%s: array %s has %" PRId64 " entries, expected %" PRId64 " (one per node)", path, name,
                      a.count, n);
        return TMA_ERR_FORMAT;
    }
    char *where = tma_strdup_printf("%s: array %s", path, name);
    for (int64_t v = 0; v < n && st == TMA_OK; v++) {
        int64_t l = graph_npy_int(&a, v);
        if (l < 0) {
            tma_log_error(COMP, "%s: entry %" PRId64 " = %" PRId64 " is negative (labels are class numbers from 0)",
                          where, v, l);
            st = TMA_ERR_RANGE;
        } else {
            st = src_set_label(s, NULL, where, v, l);
        }
    }
    free(s->labels_from);
    s->labels_from = where;
    return st;
}

/* Entry e of array `name` is the node id v: in [0, n) when n >= 0. */
static tma_status_t npz_check_id(src_data_t *s, graph_npz_t *z, const char *name, int64_t e, int64_t v, int64_t n)
{
    if (v < 0 || (n >= 0 && v >= n)) {
        tma_log_error(COMP, "%s: array %s: entry %" PRId64 " = %" PRId64 " is %s the node count %" PRId64,
                      graph_npz_path(z), name, e, v, v < 0 ? "negative, outside" : "beyond", n);
        return TMA_ERR_RANGE;
    }
    if (v > s->max_id)
        s->max_id = v;
    return TMA_OK;
}

/* The square (n, n) shape of an adjacency matrix in array `name`. */
static tma_status_t npz_square_shape(src_data_t *s, graph_npz_t *z, const char *name, int required, int64_t *n_p)
{
    graph_npy_t shape;
    tma_status_t st = npz_int_array(z, name, required, 1, &shape);
    if (st != TMA_OK)
        return st;
    if (shape.count != 2 || graph_npy_int(&shape, 0) != graph_npy_int(&shape, 1) || graph_npy_int(&shape, 0) <= 0) {
        tma_log_error(COMP, "%s: array %s must be (n, n) for a square adjacency matrix", graph_npz_path(z), name);
        return TMA_ERR_FORMAT;
    }
    *n_p = graph_npy_int(&shape, 0);
    s->nodes = *n_p;
    free(s->nodes_from);
    s->nodes_from = tma_strdup_printf("%s: %s", graph_npz_path(z), name);
    return TMA_OK;
}

/* The rows of a CSR adjacency (ptr over n rows, idx) as edges; entries
 * whose value in `data` is zero are not edges (skip with data NULL). */
static tma_status_t npz_csr_edges(src_data_t *s, graph_npz_t *z, const graph_npy_t *ptr, const graph_npy_t *idx,
                                  const graph_npy_t *data, int64_t n)
{
    tma_status_t st = tma_edge_list_reserve(&s->edges, idx->count);
    for (int64_t u = 0; u < n && st == TMA_OK; u++) {
        for (int64_t e = graph_npy_int(ptr, u); e < graph_npy_int(ptr, u + 1) && st == TMA_OK; e++) {
            int64_t v = graph_npy_int(idx, e);
            if ((st = npz_check_id(s, z, idx->name, e, v, n)) == TMA_OK && (!data || graph_npy_float(data, e) != 0.0f))
                st = tma_edge_list_push(&s->edges, u, v);
        }
    }
    s->max_id = n - 1;
    return st;
}

/* gnn-benchmark's layout: adj_* CSR, attr_* CSR or attr_matrix, labels. */
static tma_status_t read_npz_gnn_benchmark(src_data_t *s, graph_npz_t *z)
{
    const char *path = graph_npz_path(z);
    graph_npy_t ptr, idx, a;
    tma_status_t st;
    if ((st = npz_int_array(z, "adj_indptr", 1, 1, &ptr)) != TMA_OK ||
        (st = npz_int_array(z, "adj_indices", 1, 1, &idx)) != TMA_OK)
        return st;
    int64_t n = ptr.count - 1;
    st = npz_square_shape(s, z, "adj_shape", 0, &n);
    if (st != TMA_OK && st != TMA_ERR_NOT_FOUND)
        return st;
    if ((st = npz_csr(z, &ptr, &idx, n)) != TMA_OK || (st = npz_csr_edges(s, z, &ptr, &idx, NULL, n)) != TMA_OK)
        return st;

    /* Features: sparse attr_* CSR, or a dense attr_matrix. */
    graph_npy_t fptr, fidx, fdata, fshape;
    st = npz_int_array(z, "attr_indptr", 0, 1, &fptr);
    if (st == TMA_OK) {
        if ((st = npz_int_array(z, "attr_indices", 1, 1, &fidx)) != TMA_OK || (st = npz_csr(z, &fptr, &fidx, n)) != TMA_OK)
            return st;
        int have_data = (st = graph_npz_get(z, "attr_data", 0, &fdata)) == TMA_OK;
        if (st != TMA_OK && st != TMA_ERR_NOT_FOUND)
            return st;
        if (have_data && fdata.count != fidx.count) {
            tma_log_error(COMP, "%s: array attr_data has %" PRId64 " entries, attr_indices %" PRId64, path, fdata.count,
                          fidx.count);
            return TMA_ERR_FORMAT;
        }
        st = npz_int_array(z, "attr_shape", 0, 1, &fshape);
        if (st == TMA_OK) {
            int64_t d = fshape.count == 2 ? graph_npy_int(&fshape, 1) : -1;
            if (d <= 0 || d > (1 << 24) || graph_npy_int(&fshape, 0) != n) {
                tma_log_error(COMP, "%s: array attr_shape must be (%" PRId64 ", D) with 0 < D <= 2^24", path, n);
                return TMA_ERR_FORMAT;
            }
            s->fdim = (int32_t)d;
            s->fdim_declared = 1;
        } else if (st != TMA_ERR_NOT_FOUND) {
            return st;
        }
        for (int64_t u = 0; u < n; u++) {
            for (int64_t e = graph_npy_int(&fptr, u); e < graph_npy_int(&fptr, u + 1); e++) {
                int64_t col = graph_npy_int(&fidx, e);
                if (col < 0 || col >= (s->fdim_declared ? s->fdim : (1 << 24))) {
                    tma_log_error(COMP, "%s: array attr_indices: entry %" PRId64 " = %" PRId64 " is outside the feature "
                                  "dimension %d",
                                  path, e, col, s->fdim_declared ? s->fdim : (1 << 24));
                    return TMA_ERR_RANGE;
                }
                if (!s->fdim_declared && col + 1 > s->fdim)
                    s->fdim = (int32_t)(col + 1);
                if ((st = src_push_feature(s, u, col, have_data ? graph_npy_float(&fdata, e) : 1.0f)) != TMA_OK)
                    return st;
            }
        }
    } else if (st == TMA_ERR_NOT_FOUND) {
        st = graph_npz_get(z, "attr_matrix", 0, &a);
        if (st == TMA_OK)
            st = npz_dense_features(s, z, &a, n);
        else if (st == TMA_ERR_NOT_FOUND)
            st = TMA_OK;
        if (st != TMA_OK)
            return st;
    } else {
        return st;
    }
    return npz_labels(s, z, "labels", n);
}

/* PyG-style arrays: edge_index [2, E] (row 0 the sources, row 1 the
 * targets), optional x [N, F] (N is the node count) and y [N]. */
static tma_status_t read_npz_pyg(src_data_t *s, graph_npz_t *z)
{
    const char *path = graph_npz_path(z);
    graph_npy_t ei, x;
    tma_status_t st = npz_int_array(z, "edge_index", 1, 2, &ei);
    if (st != TMA_OK)
        return st;
    if (ei.shape[0] != 2) {
        tma_log_error(COMP, "%s: array edge_index has shape (%" PRId64 ", %" PRId64 "), expected (2, E): row 0 the "
                      "sources, row 1 the targets%s",
                      path, ei.shape[0], ei.shape[1], ei.shape[1] == 2 ? " (save edge_index, not its transpose)" : "");
        return TMA_ERR_FORMAT;
    }
    const int64_t m = ei.shape[1];
    if (m == 0) {
        tma_log_error(COMP, "%s: array edge_index holds no edges", path);
        return TMA_ERR_FORMAT;
    }
    int64_t n = -1;
    int have_x = (st = graph_npz_get(z, "x", 0, &x)) == TMA_OK;
    if (st != TMA_OK && st != TMA_ERR_NOT_FOUND)
        return st;
    if (have_x) {
        if (x.ndim != 2 || x.shape[0] <= 0) {
            tma_log_error(COMP, "%s: array x must have shape (N, F), one row a node", path);
            return TMA_ERR_FORMAT;
        }
        n = x.shape[0];
        s->nodes = n;
        s->nodes_from = tma_strdup_printf("%s: array x", path);
    }
    if ((st = tma_edge_list_reserve(&s->edges, m)) != TMA_OK)
        return st;
    for (int64_t e = 0; e < m; e++) {
        int64_t u = graph_npy_int(&ei, e), v = graph_npy_int(&ei, m + e);
        if ((st = npz_check_id(s, z, "edge_index", e, u, n)) != TMA_OK ||
            (st = npz_check_id(s, z, "edge_index", m + e, v, n)) != TMA_OK ||
            (st = tma_edge_list_push(&s->edges, u, v)) != TMA_OK)
            return st;
    }
    if (n < 0)
        n = s->max_id + 1;
    if (have_x && (st = npz_dense_features(s, z, &x, n)) != TMA_OK)
        return st;
    return npz_labels(s, z, "y", n);
}

/* scipy.sparse.save_npz: format (b'csr', b'csc' or b'coo'), shape (n, n),
 * indptr + indices or row + col, and data.  An entry is an edge when its
 * value is not zero; the values are not used further. */
static tma_status_t read_npz_scipy(src_data_t *s, graph_npz_t *z)
{
    const char *path = graph_npz_path(z);
    char fmt[16];
    int64_t n;
    graph_npy_t data, a, b;
    tma_status_t st;
    if ((st = graph_npz_get_string(z, "format", fmt, sizeof fmt)) != TMA_OK ||
        (st = npz_square_shape(s, z, "shape", 1, &n)) != TMA_OK)
        return st;
    const int coo = strcmp(fmt, "coo") == 0;
    if (!coo && strcmp(fmt, "csr") != 0 && strcmp(fmt, "csc") != 0) {
        tma_log_error(COMP, "%s: scipy sparse format '%s' is not read: save the adjacency as csr, csc or coo "
                      "(scipy.sparse.save_npz(path, A.tocsr()))",
                      path, fmt);
        return TMA_ERR_UNSUPPORTED;
    }
    if ((st = npz_int_array(z, coo ? "row" : "indptr", 1, 1, &a)) != TMA_OK ||
        (st = npz_int_array(z, coo ? "col" : "indices", 1, 1, &b)) != TMA_OK ||
        (st = graph_npz_get(z, "data", 1, &data)) != TMA_OK)
        return st;
    if (data.ndim != 1 || data.count != b.count || (coo && a.count != b.count)) {
        tma_log_error(COMP, "%s: arrays %s (%" PRId64 " entries), %s (%" PRId64 ") and data (%" PRId64 ") do not "
                      "match: one value a stored entry",
                      path, a.name, a.count, b.name, b.count, data.count);
        return TMA_ERR_FORMAT;
    }
    if (!coo) /* csc is the transpose's csr: the same undirected edges */
        return (st = npz_csr(z, &a, &b, n)) != TMA_OK ? st : npz_csr_edges(s, z, &a, &b, &data, n);
    if ((st = tma_edge_list_reserve(&s->edges, b.count)) != TMA_OK)
        return st;
    for (int64_t e = 0; e < b.count && st == TMA_OK; e++) {
        int64_t u = graph_npy_int(&a, e), v = graph_npy_int(&b, e);
        if ((st = npz_check_id(s, z, "row", e, u, n)) == TMA_OK && (st = npz_check_id(s, z, "col", e, v, n)) == TMA_OK &&
            graph_npy_float(&data, e) != 0.0f)
            st = tma_edge_list_push(&s->edges, u, v);
    }
    s->max_id = n - 1;
    return st;
}

/* An .npz: the layout is told by its array names. */
tma_status_t src_read_npz(src_data_t *s, const char *path)
{
    graph_npz_t *z;
    tma_status_t st = graph_npz_open(path, &z);
    if (st != TMA_OK)
        return st;
    if (graph_npz_has(z, "adj_indptr") || graph_npz_has(z, "adj_indices")) {
        st = read_npz_gnn_benchmark(s, z);
    } else if (graph_npz_has(z, "edge_index")) {
        st = read_npz_pyg(s, z);
    } else if (graph_npz_has(z, "format")) {
        st = read_npz_scipy(s, z);
    } else {
        char *names = graph_npz_names(z);
        tma_log_error(COMP,
                      "%s: no known arrays (it holds: %s): expected adj_indptr + adj_indices (gnn-benchmark), "
                      "edge_index (PyG) or format + shape + indptr/indices or row/col (scipy.sparse.save_npz)",
                      path, names ? names : "?");
        free(names);
        st = TMA_ERR_FORMAT;
    }
    graph_npz_close(z);
    return st;
}
