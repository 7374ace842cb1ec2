/*
 * import_int.h: what the layout readers of `tma import` share (import.c,
 * import_npz.c): the data a reader collects before the graph is built, and
 * the helpers that add a feature or a label to it.  Private to graph/.
 */
#ifndef TMA_IMPORT_INT_H
#define TMA_IMPORT_INT_H

#include "graph_int.h"

/* What a layout reader collects before the graph is built. */
typedef struct src_data {
    int64_t nodes;          /* declared node count, or -1 */
    char *nodes_from;       /* the file that declared it */
    int64_t max_id;         /* the largest node id seen, or -1 */
    tma_edge_list_t edges;
    int edge_fields;        /* 2 ('u v') or 3 ('u v w'), from the first edge line; 0 before */
    int64_t edge_fields_line;
    int edge_header;        /* the edge file's header line was skipped */
    /* sparse features: (node, column, value) triples */
    int64_t *fnode;
    int32_t *fcol;
    float *fval;
    int64_t fcount, fcap;
    /* dense features: one row per node, in node order */
    float *dense;
    int64_t dense_rows, dense_cap;
    int32_t fdim;           /* input feature dimension, 0 without features */
    int fdim_declared;
    /* labels, -1 where not given */
    int32_t *labels;
    int64_t labels_cap;
    int32_t classes;
    char *labels_from;
    char *ogb_root;         /* an OGB layout: the dataset folder that may hold split/ */
    /* dense features from features.npy: the mapped file and its array */
    tma_mmap_t npy_map;
    graph_npy_t npy;
    char *npy_path;
    /* the paths of the files and folders the reader used, so that the
     * others in the dataset folder are named in the report */
    char **used;
    int64_t n_used, cap_used;
} src_data_t;

/* Records that the reader used `path` (copied). */
tma_status_t src_use(src_data_t *s, const char *path);

/* Appends one sparse feature (node, column, value). */
tma_status_t src_push_feature(src_data_t *s, int64_t node, int64_t col, float val);
/* Records node's label; a node labelled twice differently is an error
 * (logged naming tr's file and line, or `where` when tr is NULL). */
tma_status_t src_set_label(src_data_t *s, const graph_text_reader_t *tr, const char *where, int64_t node,
                           int64_t label);
/* Reads a .npz file in any of the layouts import_npz.c knows. */
tma_status_t src_read_npz(src_data_t *s, const char *path);

/* The typed layouts (import_typed.c).  The is_* tests say whether a folder
 * holds one (MovieLens: u.data, u.user and u.item; the generic typed text
 * layout: node_types.txt).  The readers fill the typed graph `g` (fresh
 * from tma_graph_create) and build it with o->build; rep gets the build
 * report and the feature source. */
int graph_import_is_movielens(const char *dir);
int graph_import_is_typed_text(const char *dir);
tma_status_t graph_import_movielens(const char *dir, const tma_graph_import_opts_t *o, tma_graph_t *g,
                                  tma_graph_import_report_t *rep);
tma_status_t graph_import_typed_text(const char *dir, const tma_graph_import_opts_t *o, tma_graph_t *g,
                                   tma_graph_import_report_t *rep);

/* ------------------------------------------------------------------ features and labels (import_feat.c) */

/* How the feature rows are made from what the reader collected. */
typedef struct feat_plan {
    const src_data_t *s;
    int32_t dim;
    tma_feat_source_t src;
    uint64_t pseed;
    /* Sparse features grouped by node (file order within a node, so each
     * row sums its entries in the same order as file order does), and the
     * next one to use: rows are asked for in increasing blocks.  NULL: all
     * rows at once, in file order. */
    int64_t *order;
    int64_t cursor;
} feat_plan_t;

void graph_import_plan_features(const src_data_t *s, int32_t want, uint64_t seed, feat_plan_t *p);
/* Rows [first, first + count) into out[0 .. count * dim). */
void graph_import_feature_rows(feat_plan_t *p, int64_t first, int64_t count, float *out);
/* Sparse features grouped by node, in file order within a node (for rows
 * made block by block), in *order_p (NULL without sparse features). */
tma_status_t graph_import_group_sparse(const src_data_t *s, int64_t **order_p);
/* A row for each of the n nodes (dense features), every node labelled (when any is). */
tma_status_t graph_import_check_dense_rows(const src_data_t *s, int64_t n);
tma_status_t graph_import_check_labels(const src_data_t *s, int64_t n);
/* The features and labels into g (its num_nodes set); the features stored
 * as type t (a float16 features.npy kept as it is for TMA_FEAT_F16). */
tma_status_t graph_import_fill_features(src_data_t *s, tma_graph_t *g, int32_t want, tma_feat_dtype_t t,
                                        uint64_t seed, tma_graph_import_report_t *rep);
tma_status_t graph_import_fill_labels(src_data_t *s, tma_graph_t *g);

/* ------------------------------------------------------------------ an OGB split (import_ogb.c) */

/* The split folder of an OGB dataset: split/<name> under root (the only
 * one, or the one named), in *dir_p; NULL when root has no split/. */
tma_status_t graph_import_find_split(const char *root, const char *name, char **dir_p);
/* Converts DIR's .pt files in a private temporary folder and builds g from
 * the training edges in s and the split as given. */
tma_status_t graph_import_build_with_split(src_data_t *s, tma_graph_t *g, const char *dir,
                                           const tma_graph_import_opts_t *o, tma_graph_import_report_t *rep);

#endif
