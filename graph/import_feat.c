/*
 * import_feat.c: the features and labels a layout reader collected, into
 * the graph: dense rows (text or features.npy, float32 used in place when
 * its layout allows), sparse (node, feature, value) entries, projected to
 * --feat-dim or stored as they are, or the default random features; and
 * every node's label.  Rows are made by a plan, all at once in memory or
 * block by block for the out-of-core import.
 */
#include "graph_int.h"
#include "import_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP "import"

/* ------------------------------------------------------------------ features and labels into the graph */

/* Input feature (v, j) of dense features: the text rows, or features.npy
 * (float32 or float16, C or Fortran order) read in place. */
static inline float dense_at(const src_data_t *s, int64_t v, int32_t j)
{
    const graph_npy_t *a = &s->npy;
    if (!a->data)
        return s->dense[v * s->fdim + j];
    return graph_npy_float(a, a->fortran ? (int64_t)j * a->shape[0] + v : v * a->shape[1] + j);
}


void graph_import_plan_features(const src_data_t *s, int32_t want, uint64_t seed, feat_plan_t *p)
{
    const int has = s->fcount > 0 || s->dense_rows > 0;
    memset(p, 0, sizeof *p);
    p->s = s;
    p->dim = want > 0 ? want : (has ? s->fdim : TMA_GRAPH_DEFAULT_FEAT_DIM);
    p->src = !has ? TMA_FEAT_DEFAULT : p->dim == s->fdim ? TMA_FEAT_STORED : TMA_FEAT_PROJECTED;
    p->pseed = graph_feat_seed(seed);
}

/* Rows [first, first + count) into out[0 .. count * dim). */
void graph_import_feature_rows(feat_plan_t *p, int64_t first, int64_t count, float *out)
{
    const src_data_t *s = p->s;
    const int32_t dim = p->dim;
    const graph_npy_t *a = &s->npy;
    if (p->src == TMA_FEAT_DEFAULT) {
        graph_feat_random_rows(out, first, count, dim, p->pseed);
    } else if (s->dense_rows > 0) {
        const int32_t din = s->fdim;
        /* Row by row: a float16 or Fortran-order features.npy is widened or
         * gathered here, from the map. */
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < count; i++) {
            const int64_t v = first + i;
            float *row = out + i * dim;
            if (p->src == TMA_FEAT_STORED && !a->data) {
                memcpy(row, s->dense + v * din, (size_t)dim * sizeof(float));
            } else if (p->src == TMA_FEAT_STORED) {
                for (int32_t j = 0; j < din; j++)
                    row[j] = dense_at(s, v, j);
            } else {
                memset(row, 0, (size_t)dim * sizeof(float));
                for (int32_t j = 0; j < din; j++) {
                    float x = dense_at(s, v, j);
                    if (x != 0.0f)
                        graph_feat_project_add(row, dim, j, x, p->pseed);
                }
            }
        }
    } else {
        memset(out, 0, (size_t)count * (size_t)dim * sizeof(float));
        /* Repeated (node, feature) entries add up, in both cases. */
        int64_t i = p->order ? p->cursor : 0;
        for (; i < s->fcount; i++) {
            int64_t e = p->order ? p->order[i] : i;
            if (p->order && s->fnode[e] >= first + count)
                break;
            float *row = out + (s->fnode[e] - first) * dim;
            if (p->src == TMA_FEAT_STORED)
                row[s->fcol[e]] += s->fval[e];
            else
                graph_feat_project_add(row, dim, s->fcol[e], s->fval[e], p->pseed);
        }
        p->cursor = i;
    }
}

tma_status_t graph_import_check_dense_rows(const src_data_t *s, int64_t n)
{
    if (s->dense_rows > 0 && s->dense_rows != n) {
        tma_log_error(COMP, "%" PRId64 " feature rows for %" PRId64 " nodes: every node needs a row", s->dense_rows, n);
        return TMA_ERR_FORMAT;
    }
    return TMA_OK;
}

tma_status_t graph_import_fill_features(src_data_t *s, tma_graph_t *g, int32_t want, tma_feat_dtype_t t,
                                        uint64_t seed, tma_graph_import_report_t *rep)
{
    const int64_t n = g->num_nodes;
    feat_plan_t p;
    graph_import_plan_features(s, want, seed, &p);
    const int32_t dim = p.dim;
    const graph_npy_t *a = &s->npy;
    const int npy_is_t = (t == TMA_FEAT_F32 && a->itemsize == 4) || (t == TMA_FEAT_F16 && a->itemsize == 2);
    if (p.src == TMA_FEAT_STORED && a->data && !a->fortran && npy_is_t && (uintptr_t)a->data % a->itemsize == 0 &&
        a->shape[0] == n) {
        /* float32 (or float16 kept as it is) rows in C order are the
         * .tmag's layout: no copy. */
        g->features = a->data;
        g->feat_dtype = t;
        g->feature_dim = dim;
        rep->features = p.src;
        rep->features_mapped = 1;
        return graph_keep_map(g, &s->npy_map);
    }
    size_t bytes;
    if (tma_mul_overflow((size_t)n, (size_t)dim * sizeof(float), &bytes)) {
        tma_log_error(COMP, "%" PRId64 " x %d features overflow", n, dim);
        return TMA_ERR_NOMEM;
    }
    double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (ram > 0 && (double)bytes > 0.75 * ram) {
        tma_log_error(COMP, "%" PRId64 " nodes x %d features need %.1f GiB, more than this machine can hold; "
                      "reduce them with --feat-dim D",
                      n, dim, (double)bytes / (1 << 30));
        return TMA_ERR_NOMEM;
    }
    tma_status_t st = graph_import_check_dense_rows(s, n);
    if (st != TMA_OK)
        return st;
    float *f = tma_graph_alloc(g, bytes ? bytes : 1);
    if (!f)
        return TMA_ERR_NOMEM;
    graph_import_feature_rows(&p, 0, n, f);
    g->features = f;
    g->feature_dim = dim;
    rep->features = p.src;
    /* Narrowed in place: a float16 features.npy in Fortran order, widened
     * above, comes back to the same values. */
    return graph_feat_store_as(g, f, t);
}

/* Every one of the n nodes has a label, when any has. */
tma_status_t graph_import_check_labels(const src_data_t *s, int64_t n)
{
    for (int64_t v = 0; s->labels && v < n; v++) {
        if (v >= s->labels_cap || s->labels[v] < 0) {
            tma_log_error(COMP, "%s: node %" PRId64 " has no label (every one of the %" PRId64 " nodes needs one)",
                          s->labels_from, v, n);
            return TMA_ERR_FORMAT;
        }
    }
    return TMA_OK;
}

tma_status_t graph_import_fill_labels(src_data_t *s, tma_graph_t *g)
{
    if (!s->labels)
        return TMA_OK;
    const int64_t n = g->num_nodes;
    tma_status_t st = graph_import_check_labels(s, n);
    if (st != TMA_OK)
        return st;
    int32_t *l = tma_graph_alloc(g, (size_t)n * sizeof(int32_t));
    if (!l)
        return TMA_ERR_NOMEM;
    memcpy(l, s->labels, (size_t)n * sizeof(int32_t));
    g->labels = l;
    g->num_classes = s->classes;
    return TMA_OK;
}

/* Sparse features grouped by node, in file order within a node. */
tma_status_t graph_import_group_sparse(const src_data_t *s, int64_t **order_p)
{
    *order_p = NULL;
    if (s->fcount == 0)
        return TMA_OK;
    if (s->fcount >= ((int64_t)1 << 32)) {
        tma_log_error(COMP, "%" PRId64 " sparse feature entries are too many to import out of core (at most 2^32): "
                      "give features.npy instead", s->fcount);
        return TMA_ERR_UNSUPPORTED;
    }
    int64_t *o = malloc((size_t)s->fcount * sizeof *o);
    if (!o) {
        tma_log_error(COMP, "out of memory grouping %" PRId64 " sparse features", s->fcount);
        return TMA_ERR_NOMEM;
    }
    for (int64_t i = 0; i < s->fcount; i++)
        o[i] = s->fnode[i] << 32 | i;
    graph_sort_i64(o, s->fcount);
    for (int64_t i = 0; i < s->fcount; i++)
        o[i] &= 0xffffffff;
    *order_p = o;
    return TMA_OK;
}
