/*
 * import.c: `tma import`'s library side: detects a dataset's layout, reads
 * it (edges.txt + features.txt or features.npy + labels.txt; OGB raw/ gzip
 * CSVs; .npz in gnn-benchmark's, scipy's and PyG's array names:
 * import_npz.c), checks every id against the node count, has the features
 * and labels made (import_feat.c) and hands the edges to the builder, or
 * streams an edge list into the out-of-core builder (tma_graph_import_file).
 * The files of the dataset folder that no reader used are named in the
 * report.  An OGB dataset's official split is kept as given (import_ogb.c).
 *
 * Every reading error is logged once, naming the file and line (or the npz
 * array).  tma_graph_import writes nothing: the caller writes the graph
 * atomically; tma_graph_import_file writes it as it is built.
 */
#include "graph_int.h"
#include "import_int.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define COMP "import"


static void src_free(src_data_t *s)
{
    tma_edge_list_free(&s->edges);
    free(s->nodes_from);
    free(s->fnode);
    free(s->fcol);
    free(s->fval);
    free(s->dense);
    free(s->labels);
    free(s->labels_from);
    free(s->ogb_root);
    tma_mmap_close(&s->npy_map);
    free(s->npy_path);
    for (int64_t i = 0; i < s->n_used; i++)
        free(s->used[i]);
    free(s->used);
}

tma_status_t src_use(src_data_t *s, const char *path)
{
    if (s->n_used == s->cap_used) {
        int64_t cap = s->cap_used ? 2 * s->cap_used : 8;
        char **u = realloc(s->used, (size_t)cap * sizeof *u);
        if (!u)
            return TMA_ERR_NOMEM;
        s->used = u;
        s->cap_used = cap;
    }
    if (!(s->used[s->n_used] = strdup(path)))
        return TMA_ERR_NOMEM;
    s->n_used++;
    return TMA_OK;
}

static int src_used(const src_data_t *s, const char *path)
{
    for (int64_t i = 0; i < s->n_used; i++)
        if (strcmp(s->used[i], path) == 0)
            return 1;
    return 0;
}

void tma_graph_import_opts_init(tma_graph_import_opts_t *o)
{
    memset(o, 0, sizeof *o);
    tma_graph_build_opts_init(&o->build);
}

/* ------------------------------------------------------------------ checks shared by the readers */

/* A node id read at tr's current line. */
static tma_status_t check_id(src_data_t *s, const graph_text_reader_t *tr, int64_t id)
{
    if (s->nodes >= 0 && id >= s->nodes) {
        tma_log_error(COMP, "%s:%" PRId64 ": node id %" PRId64 " is beyond the node count %" PRId64 " (from %s)",
                      tr->path, tr->line, id, s->nodes, s->nodes_from);
        return TMA_ERR_RANGE;
    }
    if (id > s->max_id)
        s->max_id = id;
    return TMA_OK;
}

tma_status_t src_push_feature(src_data_t *s, int64_t node, int64_t col, float val)
{
    if (s->fcount == s->fcap) {
        int64_t cap = s->fcap ? 2 * s->fcap : 4096;
        int64_t *a = realloc(s->fnode, (size_t)cap * sizeof *a);
        if (a)
            s->fnode = a;
        int32_t *b = realloc(s->fcol, (size_t)cap * sizeof *b);
        if (b)
            s->fcol = b;
        float *c = realloc(s->fval, (size_t)cap * sizeof *c);
        if (c)
            s->fval = c;
        if (!a || !b || !c) {
            tma_log_error(COMP, "out of memory reading features");
            return TMA_ERR_NOMEM;
        }
        s->fcap = cap;
    }
    s->fnode[s->fcount] = node;
    s->fcol[s->fcount] = (int32_t)col;
    s->fval[s->fcount] = val;
    s->fcount++;
    return TMA_OK;
}

/* Records node's label; a node labelled twice differently is an error. */
tma_status_t src_set_label(src_data_t *s, const graph_text_reader_t *tr, const char *where, int64_t node,
                            int64_t label)
{
    if (label > (1 << 24)) {
        tma_log_error(COMP, "%s:%" PRId64 ": label %" PRId64 " is too large (labels are class numbers from 0)",
                      tr ? tr->path : where, tr ? tr->line : 0, label);
        return TMA_ERR_RANGE;
    }
    if (node >= s->labels_cap) {
        int64_t cap = s->labels_cap ? s->labels_cap : 1024;
        while (cap <= node)
            cap *= 2;
        int32_t *l = realloc(s->labels, (size_t)cap * sizeof *l);
        if (!l) {
            tma_log_error(COMP, "out of memory reading labels");
            return TMA_ERR_NOMEM;
        }
        for (int64_t i = s->labels_cap; i < cap; i++)
            l[i] = -1;
        s->labels = l;
        s->labels_cap = cap;
    }
    if (s->labels[node] >= 0 && s->labels[node] != label) {
        tma_log_error(COMP, "%s:%" PRId64 ": node %" PRId64 " is labelled twice (%d, then %" PRId64 ")",
                      tr ? tr->path : where, tr ? tr->line : 0, node, s->labels[node], label);
        return TMA_ERR_FORMAT;
    }
    s->labels[node] = (int32_t)label;
    if (label + 1 > s->classes)
        s->classes = (int32_t)(label + 1);
    return TMA_OK;
}

/* Skips blank lines and '#' / '%' comment lines. */
static int data_line(const char *line)
{
    while (*line == ' ' || *line == '\t')
        line++;
    return *line && *line != '#' && *line != '%';
}

static tma_status_t no_more_fields(const graph_text_reader_t *tr, char **p, const char *expected)
{
    char *extra = graph_text_field(p);
    if (extra) {
        tma_log_error(COMP, "%s:%" PRId64 ": unexpected field '%s': expected %s", tr->path, tr->line, extra,
                      expected);
        return TMA_ERR_FORMAT;
    }
    return TMA_OK;
}

static tma_status_t need_field(const graph_text_reader_t *tr, char *tok, const char *expected)
{
    if (!tok) {
        tma_log_error(COMP, "%s:%" PRId64 ": too few fields: expected %s", tr->path, tr->line, expected);
        return TMA_ERR_FORMAT;
    }
    return TMA_OK;
}

static tma_status_t empty_file(const graph_text_reader_t *tr, const char *what)
{
    tma_log_error(COMP, "%s: empty file: no %s in it", tr->path, what);
    return TMA_ERR_FORMAT;
}

/* ------------------------------------------------------------------ text readers */

/* A file's lines in turn; `each` handles one data line (blank and comment
 * lines are skipped).  An empty file is an error naming `what`. */
typedef tma_status_t (*line_fn)(src_data_t *s, graph_text_reader_t *tr, char *line);

static tma_status_t read_lines(src_data_t *s, const char *path, const char *what, line_fn each)
{
    graph_text_reader_t tr;
    tma_status_t st = graph_text_open(&tr, path);
    if (st != TMA_OK)
        return st;
    if ((st = src_use(s, path)) != TMA_OK) {
        graph_text_close(&tr);
        return st;
    }
    char *line;
    size_t len;
    int64_t rows = 0;
    int r;
    while ((r = graph_text_next(&tr, &line, &len)) > 0) {
        if (!data_line(line))
            continue;
        if ((st = each(s, &tr, line)) != TMA_OK)
            break;
        rows++;
    }
    if (st == TMA_OK && r < 0)
        st = r;
    if (st == TMA_OK && rows == 0)
        st = empty_file(&tr, what);
    graph_text_close(&tr);
    return st;
}

/* A field that cannot start a number: a column name. */
static int is_name(const char *tok)
{
    return tok && !(*tok >= '0' && *tok <= '9') && *tok != '+' && *tok != '-' && *tok != '.';
}

/* 'u v' or 'u v w' (every line alike).  A first line of column names (a CSV
 * header such as "src,dst") is skipped.  A weight must be a positive number:
 * every line becomes an edge of the unweighted graph, so a zero or negative
 * weight would be misread and is refused. */
static tma_status_t edge_line(src_data_t *s, graph_text_reader_t *tr, char *line)
{
    static const char want[] = "two node ids and an optional weight, 'u v' or 'u v w'";
    char head[128];
    if (!s->edge_fields && !s->edge_header)
        snprintf(head, sizeof head, "%s", line);
    char *p = line, *a = graph_text_field(&p), *b = graph_text_field(&p), *w = graph_text_field(&p);
    int64_t u, v;
    float weight;
    tma_status_t st;
    if (!s->edge_fields && !s->edge_header && is_name(a) && is_name(b) && (!w || is_name(w))) {
        s->edge_header = 1;
        tma_log_info(COMP, "%s:%" PRId64 ": header line '%s' skipped", tr->path, tr->line, head);
        return TMA_OK;
    }
    if ((st = need_field(tr, b, want)) != TMA_OK || (st = no_more_fields(tr, &p, want)) != TMA_OK)
        return st;
    const int fields = w ? 3 : 2;
    if (!s->edge_fields) {
        s->edge_fields = fields;
        s->edge_fields_line = tr->line;
        if (w)
            tma_log_warn(COMP, "%s: 'u v w' lines: the weights are not used (tma trains on the unweighted graph)",
                         tr->path);
    } else if (fields != s->edge_fields) {
        tma_log_error(COMP, "%s:%" PRId64 ": %d fields, but line %" PRId64 " has %d: every line is 'u v', or every "
                      "line 'u v w'",
                      tr->path, tr->line, fields, s->edge_fields_line, s->edge_fields);
        return TMA_ERR_FORMAT;
    }
    if ((st = graph_text_parse_id(tr, a, "node id", &u)) != TMA_OK ||
        (st = graph_text_parse_id(tr, b, "node id", &v)) != TMA_OK ||
        (w && (st = graph_text_parse_float(tr, w, "edge weight", &weight)) != TMA_OK) ||
        (st = check_id(s, tr, u)) != TMA_OK || (st = check_id(s, tr, v)) != TMA_OK)
        return st;
    if (w && !(weight > 0.0f)) {
        tma_log_error(COMP, "%s:%" PRId64 ": edge weight %s: every line is read as an edge of the unweighted graph, "
                      "so weights must be positive: drop the lines of absent edges",
                      tr->path, tr->line, w);
        return TMA_ERR_FORMAT;
    }
    return tma_edge_list_push(&s->edges, u, v);
}

static tma_status_t sparse_feature_line(src_data_t *s, graph_text_reader_t *tr, char *line)
{
    static const char want[] = "'node feature value'";
    char *p = line, *a = graph_text_field(&p), *b = graph_text_field(&p), *c = graph_text_field(&p);
    int64_t node, col;
    float val;
    tma_status_t st;
    if ((st = need_field(tr, c, want)) != TMA_OK || (st = no_more_fields(tr, &p, want)) != TMA_OK ||
        (st = graph_text_parse_id(tr, a, "node id", &node)) != TMA_OK ||
        (st = graph_text_parse_id(tr, b, "feature index", &col)) != TMA_OK ||
        (st = graph_text_parse_float(tr, c, "feature value", &val)) != TMA_OK || (st = check_id(s, tr, node)) != TMA_OK)
        return st;
    if ((s->fdim_declared && col >= s->fdim) || col >= (1 << 24)) {
        tma_log_error(COMP, "%s:%" PRId64 ": feature index %" PRId64 " is beyond the feature dimension %d%s", tr->path,
                      tr->line, col, s->fdim_declared ? s->fdim : (1 << 24),
                      s->fdim_declared ? " (from meta.txt)" : "");
        return TMA_ERR_RANGE;
    }
    if (!s->fdim_declared && col + 1 > s->fdim)
        s->fdim = (int32_t)(col + 1);
    return src_push_feature(s, node, col, val);
}

static tma_status_t label_line(src_data_t *s, graph_text_reader_t *tr, char *line)
{
    static const char want[] = "'node label'";
    char *p = line, *a = graph_text_field(&p), *b = graph_text_field(&p);
    int64_t node, label;
    tma_status_t st;
    if ((st = need_field(tr, b, want)) != TMA_OK || (st = no_more_fields(tr, &p, want)) != TMA_OK ||
        (st = graph_text_parse_id(tr, a, "node id", &node)) != TMA_OK ||
        (st = graph_text_parse_id(tr, b, "label", &label)) != TMA_OK || (st = check_id(s, tr, node)) != TMA_OK)
        return st;
    return src_set_label(s, tr, NULL, node, label);
}

/* OGB node-label.csv: one label a line, line i for node i. */
static tma_status_t label_row_line(src_data_t *s, graph_text_reader_t *tr, char *line)
{
    char *p = line, *a = graph_text_field(&p);
    int64_t label, node = tr->line - 1;
    tma_status_t st;
    if ((st = no_more_fields(tr, &p, "one label a line")) != TMA_OK ||
        (st = graph_text_parse_id(tr, a, "label", &label)) != TMA_OK || (st = check_id(s, tr, node)) != TMA_OK)
        return st;
    return src_set_label(s, tr, NULL, node, label);
}

/* OGB node-feat.csv: one node a line, comma-separated floats, every line as
 * wide as the first. */
static tma_status_t dense_feature_line(src_data_t *s, graph_text_reader_t *tr, char *line)
{
    int64_t node = tr->line - 1;
    tma_status_t st = check_id(s, tr, node);
    if (st != TMA_OK)
        return st;
    if (node != s->dense_rows) {
        tma_log_error(COMP, "%s:%" PRId64 ": blank or comment line inside the feature rows (line i is node i-1)",
                      tr->path, tr->line);
        return TMA_ERR_FORMAT;
    }
    char *p = line, *tok;
    int64_t width = 0;
    while ((tok = graph_text_field(&p)) != NULL) {
        if (s->fdim && width >= s->fdim) {
            width++;
            while (graph_text_field(&p))
                width++;
            break;
        }
        if ((s->dense_rows + 1) * (int64_t)(s->fdim ? s->fdim : width + 1) > s->dense_cap) {
            int64_t cap = s->dense_cap ? 2 * s->dense_cap : 1 << 16;
            float *d = realloc(s->dense, (size_t)cap * sizeof *d);
            if (!d) {
                tma_log_error(COMP, "%s: out of memory reading features", tr->path);
                return TMA_ERR_NOMEM;
            }
            s->dense = d;
            s->dense_cap = cap;
        }
        float v;
        if ((st = graph_text_parse_float(tr, tok, "feature value", &v)) != TMA_OK)
            return st;
        s->dense[s->dense_rows * (s->fdim ? s->fdim : 0) + width] = v;
        width++;
    }
    if (!s->fdim) {
        if (width > (1 << 24)) {
            tma_log_error(COMP, "%s:%" PRId64 ": %" PRId64 " features in a row is too many", tr->path, tr->line, width);
            return TMA_ERR_FORMAT;
        }
        s->fdim = (int32_t)width;
    } else if (width != s->fdim) {
        tma_log_error(COMP, "%s:%" PRId64 ": feature row has %" PRId64 " values, expected %d (the width of line 1)",
                      tr->path, tr->line, width, s->fdim);
        return TMA_ERR_FORMAT;
    }
    s->dense_rows++;
    return TMA_OK;
}

static tma_status_t set_nodes(src_data_t *s, graph_text_reader_t *tr, const char *val)
{
    int64_t v;
    tma_status_t st = graph_text_parse_id(tr, val, "node count", &v);
    if (st != TMA_OK)
        return st;
    if (v == 0 || v >= ((int64_t)1 << 40)) {
        tma_log_error(COMP, "%s:%" PRId64 ": node count %" PRId64 " is out of range", tr->path, tr->line, v);
        return TMA_ERR_RANGE;
    }
    s->nodes = v;
    free(s->nodes_from);
    s->nodes_from = strdup(tr->path);
    return TMA_OK;
}

/* meta.txt: "nodes N", "feature_dim D"; other keys (edge counts, label
 * names) are informational and skipped. */
static tma_status_t meta_line(src_data_t *s, graph_text_reader_t *tr, char *line)
{
    char *p = line, *key = graph_text_field(&p), *val = graph_text_field(&p);
    tma_status_t st;
    if (!val) {
        tma_log_error(COMP, "%s:%" PRId64 ": expected 'key value'", tr->path, tr->line);
        return TMA_ERR_FORMAT;
    }
    if (strcmp(key, "nodes") == 0)
        return set_nodes(s, tr, val);
    if (strcmp(key, "feature_dim") == 0) {
        int64_t v;
        if ((st = graph_text_parse_id(tr, val, "feature dimension", &v)) != TMA_OK)
            return st;
        if (v == 0 || v > (1 << 24)) {
            tma_log_error(COMP, "%s:%" PRId64 ": feature dimension %" PRId64 " is out of range", tr->path, tr->line, v);
            return TMA_ERR_RANGE;
        }
        s->fdim = (int32_t)v;
        s->fdim_declared = 1;
    }
    return TMA_OK;
}

/* OGB num-node-list.csv: the node count alone; a second line would be a
 * second graph. */
static tma_status_t num_nodes_line(src_data_t *s, graph_text_reader_t *tr, char *line)
{
    char *p = line, *val = graph_text_field(&p);
    tma_status_t st = no_more_fields(tr, &p, "one node count");
    if (st != TMA_OK)
        return st;
    if (s->nodes >= 0) {
        tma_log_error(COMP, "%s:%" PRId64 ": a second node count: the file describes several graphs; tma imports one",
                      tr->path, tr->line);
        return TMA_ERR_FORMAT;
    }
    return set_nodes(s, tr, val);
}

/* The file `base` in `dir` when it exists (else NULL); malloc'd. */
static char *existing(const char *dir, const char *base)
{
    char *p = tma_path_join(dir, base);
    if (p && tma_file_exists(p))
        return p;
    free(p);
    return NULL;
}

/* "(3, 4)" */
static void shape_str(const graph_npy_t *a, char *buf, size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < a->ndim && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%" PRId64, i ? ", " : "", a->shape[i]);
    if (len < size)
        snprintf(buf + len, size - len, a->ndim == 1 ? ",)" : ")");
}

/* features.npy: a 2-d (nodes, F) float32 or float16 array in C or Fortran
 * order, mapped and kept for fill_features.  Its rows fix the node count
 * unless meta.txt does (then they must agree); it is read before edges.txt
 * so that an edge beyond its rows is an error naming both. */
static tma_status_t read_npy_features(src_data_t *s, const char *path)
{
    tma_status_t st = graph_npy_open(path, &s->npy_map, &s->npy);
    if (st != TMA_OK)
        return st;
    const graph_npy_t *a = &s->npy;
    char shape[128];
    shape_str(a, shape, sizeof shape);
    if ((st = src_use(s, path)) != TMA_OK || !(s->npy_path = strdup(path)))
        return TMA_ERR_NOMEM;
    if (a->kind != NPY_FLOAT || a->itemsize == 8) {
        tma_log_error(COMP, "%s: dtype '%s' cannot be node features: tma reads little-endian float32 ('<f4') and "
                      "float16 ('<f2'): save a.astype(np.float32)", path, a->descr);
        return TMA_ERR_UNSUPPORTED;
    }
    if (a->ndim != 2) {
        tma_log_error(COMP, "%s: shape %s is %d-d: node features are a 2-d array (nodes, features)", path, shape,
                      a->ndim);
        return TMA_ERR_FORMAT;
    }
    const int64_t rows = a->shape[0], width = a->shape[1];
    if (rows < 1 || rows >= ((int64_t)1 << 40) || width < 1 || width > (1 << 24)) {
        tma_log_error(COMP, "%s: shape %s: expected (nodes, features) with 0 < nodes < 2^40 and 0 < features <= 2^24",
                      path, shape);
        return TMA_ERR_FORMAT;
    }
    if (s->fdim_declared && width != s->fdim) {
        tma_log_error(COMP, "%s: shape %s: %" PRId64 " features a node, but meta.txt says feature_dim %d", path, shape,
                      width, s->fdim);
        return TMA_ERR_FORMAT;
    }
    if (s->nodes >= 0 && rows != s->nodes) {
        tma_log_error(COMP, "%s: shape %s: %" PRId64 " rows, but the graph has %" PRId64 " nodes (from %s): one row a "
                      "node", path, shape, rows, s->nodes, s->nodes_from);
        return TMA_ERR_FORMAT;
    }
    if (s->nodes < 0) {
        s->nodes = rows;
        if (!(s->nodes_from = strdup(path)))
            return TMA_ERR_NOMEM;
    }
    /* NaN or infinity would poison training: refused, as in features.txt. */
    int64_t bad = INT64_MAX;
#pragma omp parallel for schedule(static) reduction(min : bad)
    for (int64_t i = 0; i < a->count; i++)
        if (i < bad && !isfinite(graph_npy_float(a, i)))
            bad = i;
    if (bad != INT64_MAX) {
        int64_t row = a->fortran ? bad % rows : bad / width, col = a->fortran ? bad / rows : bad % width;
        tma_log_error(COMP, "%s: node %" PRId64 ", feature %" PRId64 " is %g: features must be finite numbers", path,
                      row, col, (double)graph_npy_float(a, bad));
        return TMA_ERR_FORMAT;
    }
    s->fdim = (int32_t)width;
    s->dense_rows = rows;
    return TMA_OK;
}

/* The edge-list layout's files (NULL: absent; edges is always named). */
typedef struct edge_list_files {
    char *meta, *edges, *feats, *labels, *npy;
} edge_list_files_t;

static void edge_list_free(edge_list_files_t *f)
{
    free(f->meta);
    free(f->edges);
    free(f->feats);
    free(f->labels);
    free(f->npy);
}

/* Names the files and reads meta.txt and features.npy: what edges.txt is
 * checked against. */
static tma_status_t edge_list_begin(src_data_t *s, const char *dir, edge_list_files_t *f)
{
    *f = (edge_list_files_t){existing(dir, "meta.txt"), tma_path_join(dir, "edges.txt"), existing(dir, "features.txt"),
                             existing(dir, "labels.txt"), existing(dir, "features.npy")};
    tma_status_t st = f->edges ? TMA_OK : TMA_ERR_NOMEM;
    if (st == TMA_OK && f->meta)
        st = read_lines(s, f->meta, "'key value' lines", meta_line);
    if (st == TMA_OK && f->npy && f->feats) {
        tma_log_error(COMP, "%s holds both features.txt and features.npy: keep the one to import", dir);
        st = TMA_ERR_INVALID;
    }
    if (st == TMA_OK && f->npy)
        st = read_npy_features(s, f->npy);
    return st;
}

/* features.txt and labels.txt. */
static tma_status_t edge_list_side_files(src_data_t *s, const edge_list_files_t *f)
{
    tma_status_t st = TMA_OK;
    if (f->feats)
        st = read_lines(s, f->feats, "features", sparse_feature_line);
    if (st == TMA_OK && f->labels && (st = read_lines(s, f->labels, "labels", label_line)) == TMA_OK)
        st = (s->labels_from = strdup(f->labels)) ? TMA_OK : TMA_ERR_NOMEM;
    return st;
}

static tma_status_t read_edge_list_layout(src_data_t *s, const char *dir)
{
    edge_list_files_t f;
    tma_status_t st = edge_list_begin(s, dir, &f);
    if (st == TMA_OK)
        st = read_lines(s, f.edges, "edges", edge_line);
    if (st == TMA_OK && s->edges.count == 0) {
        tma_log_error(COMP, "%s: no edges in it, only a header line", f.edges);
        st = TMA_ERR_FORMAT;
    }
    if (st == TMA_OK)
        st = edge_list_side_files(s, &f);
    edge_list_free(&f);
    return st;
}

/* OGB: base.csv.gz, or base.csv uncompressed. */
static char *ogb_file(const char *raw, const char *base)
{
    char name[64];
    snprintf(name, sizeof name, "%s.csv.gz", base);
    char *p = existing(raw, name);
    if (!p) {
        snprintf(name, sizeof name, "%s.csv", base);
        p = existing(raw, name);
    }
    return p;
}

static tma_status_t read_ogb_layout(src_data_t *s, const char *raw)
{
    tma_status_t st = TMA_OK;
    char *nodes = ogb_file(raw, "num-node-list"), *edges = ogb_file(raw, "edge");
    char *feats = ogb_file(raw, "node-feat"), *labels = ogb_file(raw, "node-label");
    if (nodes)
        st = read_lines(s, nodes, "node count", num_nodes_line);
    if (st == TMA_OK)
        st = read_lines(s, edges, "edges", edge_line);
    if (st == TMA_OK && feats) {
        st = read_lines(s, feats, "feature rows", dense_feature_line);
        if (st == TMA_OK && s->nodes >= 0 && s->dense_rows != s->nodes) {
            tma_log_error(COMP, "%s: %" PRId64 " feature rows, but the graph has %" PRId64 " nodes (from %s)", feats,
                          s->dense_rows, s->nodes, s->nodes_from);
            st = TMA_ERR_FORMAT;
        }
    }
    if (st == TMA_OK && labels) {
        st = read_lines(s, labels, "labels", label_row_line);
        s->labels_from = strdup(labels);
    }
    free(nodes);
    free(edges);
    free(feats);
    free(labels);
    return st;
}

/* ------------------------------------------------------------------ layout detection */

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The single .npz in dir (malloc'd), NULL if none; TMA_ERR_INVALID when
 * there are several. */
static tma_status_t find_npz(const char *dir, char **path_p)
{
    *path_p = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return TMA_OK;
    struct dirent *e;
    tma_status_t st = TMA_OK;
    while ((e = readdir(d)) != NULL) {
        if (!ends_with(e->d_name, ".npz"))
            continue;
        if (*path_p) {
            tma_log_error(COMP, "%s holds several .npz files (%s, ...): name the one to import", dir, e->d_name);
            free(*path_p);
            *path_p = NULL;
            st = TMA_ERR_INVALID;
            break;
        }
        *path_p = tma_path_join(dir, e->d_name);
    }
    closedir(d);
    return st;
}

static tma_status_t read_source(src_data_t *s, const char *src, const char **layout_p)
{
    if (tma_file_exists(src)) {
        if (!ends_with(src, ".npz")) {
            tma_log_error(COMP, "%s is a file but not a .npz: give a dataset folder (edges.txt, OGB raw/) or a .npz file",
                          src);
            return TMA_ERR_NOT_FOUND;
        }
        *layout_p = "npz";
        return src_read_npz(s, src);
    }
    if (!tma_dir_exists(src)) {
        tma_log_error(COMP, "%s: no such file or folder", src);
        return TMA_ERR_NOT_FOUND;
    }
    tma_status_t st;
    char *p = tma_path_join(src, "edges.txt");
    if (p && tma_file_exists(p)) {
        free(p);
        *layout_p = "edge-list";
        return read_edge_list_layout(s, src);
    }
    free(p);
    char *raw = tma_path_join(src, "raw");
    char *e = raw ? ogb_file(raw, "edge") : NULL;
    if (e) {
        free(e);
        *layout_p = "ogb";
        st = src_use(s, raw);
        if (st == TMA_OK)
            st = read_ogb_layout(s, raw);
        free(raw);
        s->ogb_root = strdup(src);
        return st;
    }
    free(raw);
    if ((e = ogb_file(src, "edge")) != NULL) {
        free(e);
        *layout_p = "ogb";
        /* SRC is raw/ itself: its split/ would be a sibling. */
        s->ogb_root = tma_path_join(src, "..");
        return read_ogb_layout(s, src);
    }
    char *npz;
    if ((st = find_npz(src, &npz)) != TMA_OK)
        return st;
    if (npz) {
        *layout_p = "npz";
        st = src_use(s, npz);
        if (st == TMA_OK)
            st = src_read_npz(s, npz);
        free(npz);
        return st;
    }
    tma_log_error(COMP,
                  "%s: no known dataset layout: expected edges.txt (+ features.txt, labels.txt), an OGB "
                  "raw/edge.csv.gz, or a .npz file",
                  src);
    return TMA_ERR_NOT_FOUND;
}

/* ------------------------------------------------------------------ the files left out */

typedef struct name_list {
    char **v;
    size_t n, cap;
} name_list_t;

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Adds dir's entries that s did not use to l, as prefix + name (+ "/" for a
 * folder); dot files are skipped. */
static tma_status_t unused_entries(const src_data_t *s, const char *dir, const char *prefix, name_list_t *l)
{
    DIR *d = opendir(dir);
    if (!d)
        return TMA_OK;
    tma_status_t st = TMA_OK;
    struct dirent *e;
    while (st == TMA_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *path = tma_path_join(dir, e->d_name), *name = NULL;
        if (!path) {
            st = TMA_ERR_NOMEM;
            break;
        }
        if (!src_used(s, path)) {
            name = tma_strdup_printf("%s%s%s", prefix, e->d_name, tma_dir_exists(path) ? "/" : "");
            if (l->n == l->cap) {
                size_t cap = l->cap ? 2 * l->cap : 16;
                char **v = realloc(l->v, cap * sizeof *v);
                if (v) {
                    l->v = v;
                    l->cap = cap;
                }
            }
            if (name && l->n < l->cap)
                l->v[l->n++] = name;
            else
                st = TMA_ERR_NOMEM;
        }
        if (st != TMA_OK)
            free(name);
        free(path);
    }
    closedir(d);
    return st;
}

/* Names in rep->ignored the entries of the dataset folder `src` (and of its
 * raw/ for an OGB dataset) that the import did not read, and warns about a
 * .npy among them: features from .npy are read only as features.npy. */
static tma_status_t note_ignored(const src_data_t *s, const char *src, const char *layout,
                                 tma_graph_import_report_t *rep)
{
    if (!tma_dir_exists(src))
        return TMA_OK;
    name_list_t l = {NULL, 0, 0};
    tma_status_t st = unused_entries(s, src, "", &l);
    char *raw = tma_path_join(src, "raw");
    if (st == TMA_OK && raw && src_used(s, raw))
        st = unused_entries(s, raw, "raw/", &l);
    free(raw);
    if (l.n)
        qsort(l.v, l.n, sizeof *l.v, cmp_name);
    size_t off = 0;
    for (size_t i = 0; i < l.n; i++) {
        size_t len = strlen(l.v[i]) + 1;
        if (off + len <= sizeof rep->ignored) {
            memcpy(rep->ignored + off, l.v[i], len);
            off += len;
            rep->num_ignored++;
        } else {
            rep->ignored_more++;
        }
        if (ends_with(l.v[i], ".npy"))
            tma_log_warn(COMP, "%s/%s is not read: the %s layout takes no .npy%s", src, l.v[i], layout,
                         strcmp(layout, "edge-list") == 0 ? " but features.npy (node features, one row a node): "
                                                            "rename it if it holds them" : "");
        free(l.v[i]);
    }
    free(l.v);
    return st;
}

/* ------------------------------------------------------------------ import */

tma_status_t tma_graph_import(const char *src, const tma_graph_import_opts_t *o, tma_graph_t **g_p,
                              tma_graph_import_report_t *rep_p)
{
    tma_graph_import_report_t rep;
    memset(&rep, 0, sizeof rep);
    double t0 = tma_clock_now();
    src_data_t s;
    memset(&s, 0, sizeof s);
    s.nodes = -1;
    s.max_id = -1;
    tma_graph_t *g = NULL;
    char *split_dir = NULL;
    tma_status_t st;
    if (tma_dir_exists(src) && (graph_import_is_movielens(src) || graph_import_is_typed_text(src))) {
        /* The typed layouts read and build in one go. */
        int ml = graph_import_is_movielens(src);
        rep.layout = ml ? "movielens" : "typed";
        if (o->split_name) {
            tma_log_error(COMP, "%s: --split names an OGB split, but this is a %s dataset", src, rep.layout);
            return TMA_ERR_INVALID;
        }
        if ((st = tma_graph_create(&g)) != TMA_OK)
            return st;
        st = ml ? graph_import_movielens(src, o, g, &rep) : graph_import_typed_text(src, o, g, &rep);
        if (st == TMA_OK)
            st = graph_feat_store_as(g, NULL, o->feat_dtype);
        if (st != TMA_OK) {
            tma_graph_destroy(g);
            return st;
        }
        double built = rep.build.seconds_adjacency + rep.build.seconds_split + rep.build.seconds_negatives;
        rep.seconds_read = tma_clock_now() - t0 - built;
        static const char *const ml_files[] = {"u.data", "u.user", "u.item", "u.genre", "u.occupation", NULL};
        static const char *const typed_files[] = {"node_types.txt", "edges.txt", NULL};
        for (const char *const *f = ml ? ml_files : typed_files; *f && st == TMA_OK; f++) {
            char *p = tma_path_join(src, *f);
            st = p ? src_use(&s, p) : TMA_ERR_NOMEM;
            free(p);
        }
        if (st != TMA_OK)
            goto fail;
        goto done;
    }
    st = read_source(&s, src, &rep.layout);
    if (st != TMA_OK)
        goto fail;
    if (s.ogb_root && !o->resplit) {
        if ((st = graph_import_find_split(s.ogb_root, o->split_name, &split_dir)) != TMA_OK)
            goto fail;
        char *base = split_dir ? tma_path_join(s.ogb_root, "split") : NULL;
        st = split_dir && (!base || src_use(&s, base) != TMA_OK) ? TMA_ERR_NOMEM : TMA_OK;
        free(base);
        if (st != TMA_OK)
            goto fail;
        if (split_dir && (o->build.val >= 0 || o->build.test >= 0 || o->build.negatives != TMA_GRAPH_DEFAULT_NEGATIVES)) {
            tma_log_error(COMP, "%s is the dataset's official split: --val, --test and --negatives do not apply "
                          "(add --resplit to draw tma's own split instead)", split_dir);
            st = TMA_ERR_INVALID;
            goto fail;
        }
    } else if (o->split_name) {
        tma_log_error(COMP, "%s: --split names an OGB split, but %s", src,
                      o->resplit ? "--resplit ignores it" : "this is not an OGB dataset");
        st = TMA_ERR_INVALID;
        goto fail;
    }
    rep.seconds_read = tma_clock_now() - t0;
    if ((st = tma_graph_create(&g)) != TMA_OK)
        goto fail;
    g->num_nodes = s.nodes >= 0 ? s.nodes : s.max_id + 1;
    if ((st = graph_import_fill_features(&s, g, o->feat_dim, o->feat_dtype, o->build.seed, &rep)) != TMA_OK ||
        (st = graph_import_fill_labels(&s, g)) != TMA_OK)
        goto fail;
    rep.input_feature_dim = rep.features == TMA_FEAT_DEFAULT ? 0 : s.fdim;
    free(s.dense);
    s.dense = NULL;
    if (split_dir)
        st = graph_import_build_with_split(&s, g, split_dir, o, &rep);
    else
        st = tma_graph_build(g, &s.edges, &o->build, &rep.build);
    if (st != TMA_OK)
        goto fail;
done:
    if ((st = note_ignored(&s, src, rep.layout, &rep)) != TMA_OK)
        goto fail;
    src_free(&s);
    free(split_dir);
    rep.nodes = g->num_nodes;
    rep.num_node_types = g->num_node_types;
    rep.num_relations = g->num_relations;
    rep.feature_dim = g->feature_dim;
    rep.feat_dtype = g->feat_dtype;
    rep.num_classes = g->num_classes;
    rep.seconds = tma_clock_now() - t0;
    *g_p = g;
    if (rep_p)
        *rep_p = rep;
    return TMA_OK;
fail:
    src_free(&s);
    free(split_dir);
    tma_graph_destroy(g);
    return st;
}

/* ------------------------------------------------------------------ out of core */

/* The edge-list layout streamed into the out-of-core builder: edges.txt in
 * blocks of lines; the rest (meta.txt, features, labels) read first, as the
 * in-memory reader does. */
typedef struct import_stream {
    src_data_t *s;
    graph_text_reader_t tr;
    int64_t rows, edges, nodes;
    feat_plan_t plan;
} import_stream_t;

static int64_t stream_edges(void *ctx, int64_t *pairs, int64_t cap)
{
    import_stream_t *x = ctx;
    src_data_t *s = x->s;
    if (s->edges.cap < cap && tma_edge_list_reserve(&s->edges, cap) != TMA_OK)
        return -1;
    s->edges.count = 0;
    char *line;
    size_t len;
    int r = 1;
    while (s->edges.count < cap && (r = graph_text_next(&x->tr, &line, &len)) > 0) {
        if (!data_line(line))
            continue;
        if (edge_line(s, &x->tr, line) != TMA_OK)
            return -1;
        x->rows++;
    }
    if (r < 0)
        return -1;
    const int64_t got = s->edges.count;
    memcpy(pairs, s->edges.pairs, (size_t)got * 2 * sizeof *pairs);
    x->edges += got;
    if (got == 0 && x->edges == 0) {
        if (x->rows == 0)
            empty_file(&x->tr, "edges");
        else
            tma_log_error(COMP, "%s: no edges in it, only a header line", x->tr.path);
        return -1;
    }
    return got;
}

static int64_t stream_nodes(void *ctx)
{
    import_stream_t *x = ctx;
    const src_data_t *s = x->s;
    x->nodes = s->nodes >= 0 ? s->nodes : s->max_id + 1;
    if (graph_import_check_dense_rows(s, x->nodes) != TMA_OK || graph_import_check_labels(s, x->nodes) != TMA_OK)
        return -1;
    return x->nodes;
}

static void stream_features(void *ctx, int64_t first, int64_t count, float *rows)
{
    import_stream_t *x = ctx;
    graph_import_feature_rows(&x->plan, first, count, rows);
}

int tma_graph_import_streams(const char *src)
{
    char *edges = tma_dir_exists(src) ? tma_path_join(src, "edges.txt") : NULL;
    int yes = edges && tma_file_exists(edges) && !graph_import_is_movielens(src) && !graph_import_is_typed_text(src);
    free(edges);
    return yes;
}

tma_status_t tma_graph_import_file(const char *src, const tma_graph_import_opts_t *o, uint64_t budget,
                                   const char *out, tma_graph_import_report_t *rep_p, uint64_t *graph_id_p)
{
    tma_graph_import_report_t rep;
    memset(&rep, 0, sizeof rep);
    double t0 = tma_clock_now();
    if (!tma_graph_import_streams(src)) {
        tma_log_error(COMP, "%s: only the edge-list layout (a folder with edges.txt) is imported out of core; "
                      "give a larger --memory to read it in memory", src);
        return TMA_ERR_UNSUPPORTED;
    }
    if (o->split_name) {
        tma_log_error(COMP, "%s: --split names an OGB split, but this is not an OGB dataset", src);
        return TMA_ERR_INVALID;
    }
    src_data_t s;
    memset(&s, 0, sizeof s);
    s.nodes = -1;
    s.max_id = -1;
    import_stream_t x = {.s = &s};
    edge_list_files_t f;
    int open = 0;
    tma_status_t st = edge_list_begin(&s, src, &f);
    if (st == TMA_OK)
        st = edge_list_side_files(&s, &f);
    if (st == TMA_OK && (st = src_use(&s, f.edges)) == TMA_OK && (st = graph_text_open(&x.tr, f.edges)) == TMA_OK)
        open = 1;
    graph_import_plan_features(&s, o->feat_dim, o->build.seed, &x.plan);
    if (st == TMA_OK)
        st = graph_import_group_sparse(&s, &x.plan.order);
    if (st != TMA_OK)
        goto done;
    /* What the reader holds comes out of the budget. */
    uint64_t held = (uint64_t)s.labels_cap * 4 + (uint64_t)s.fcount * 24 +
                    (uint64_t)s.dense_rows * (uint64_t)(s.dense ? s.fdim : 0) * 4;
    graph_ooc_source_t gs = {.num_nodes = s.nodes >= 0 ? s.nodes : 0,
                             .final_nodes = stream_nodes,
                             .next = stream_edges,
                             .block = 1,
                             .features = stream_features,
                             .ctx = &x,
                             .feature_dim = x.plan.dim,
                             .feat_dtype = o->feat_dtype,
                             .num_classes = s.classes,
                             .labels = s.labels};
    double homophily;
    rep.seconds_read = tma_clock_now() - t0;
    st = graph_build_ooc(&gs, &o->build, budget > held ? budget - held : 0, out, &rep.build, graph_id_p, &homophily);
    if (st != TMA_OK)
        goto done;
    rep.layout = "edge-list";
    rep.nodes = x.nodes;
    rep.num_node_types = 1;
    rep.num_relations = 1;
    rep.feature_dim = x.plan.dim;
    rep.feat_dtype = o->feat_dtype;
    rep.features = x.plan.src;
    rep.input_feature_dim = x.plan.src == TMA_FEAT_DEFAULT ? 0 : s.fdim;
    rep.num_classes = s.labels ? s.classes : 0;
    if ((st = note_ignored(&s, src, rep.layout, &rep)) != TMA_OK)
        goto done;
    rep.seconds = tma_clock_now() - t0;
    if (rep_p)
        *rep_p = rep;
done:
    if (open)
        graph_text_close(&x.tr);
    free(x.plan.order);
    src_free(&s);
    edge_list_free(&f);
    return st;
}

uint64_t tma_graph_import_peak_bytes(const char *src, int32_t feat_dim)
{
    /* Text: at most one edge in 4 bytes ("1 2\n"), one in 8 is usual; a
     * gzip file about 5 times its size.  Each edge costs 32 bytes in
     * memory (pairs and adjacency); the features twice their file's size,
     * or feat_dim floats for each node. */
    char *edges = tma_path_join(src, "edges.txt"), *npy = tma_path_join(src, "features.npy");
    char *feats = tma_path_join(src, "features.txt");
    struct stat st;
    double bytes = 0;
    if (edges && stat(edges, &st) == 0) {
        unsigned char magic[2] = {0, 0};
        FILE *f = fopen(edges, "rb");
        if (f) {
            if (fread(magic, 1, 2, f) != 2)
                magic[0] = 0;
            fclose(f);
        }
        double text = (double)st.st_size * (magic[0] == 0x1f && magic[1] == 0x8b ? 5 : 1);
        /* Without a node count to go by, as many nodes as edges: more than
         * most graphs have, so the estimate errs towards out of core. */
        bytes += text / 8 * 32 + text / 8 * (feat_dim > 0 ? feat_dim : TMA_GRAPH_DEFAULT_FEAT_DIM) * 4;
    }
    if (npy && stat(npy, &st) == 0)
        bytes += (double)st.st_size * 2;
    if (feats && stat(feats, &st) == 0)
        bytes += (double)st.st_size * 2;
    free(edges);
    free(npy);
    free(feats);
    return bytes > 1.8e19 ? UINT64_MAX : (uint64_t)bytes;
}
