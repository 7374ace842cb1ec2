/*
 * tma_graph.h: graphs for link prediction.  A tma_graph_t is one graph in
 * memory: the training graph as CSR (both directions of every undirected
 * training edge), node features (float32, or float16 / bfloat16 that every
 * reader widens to float32), optional labels, the validation and test
 * edges, and the fixed evaluation negatives.  It is read from and written
 * to `.tmag` files (docs/formats.md), which are laid out for mmap: opening
 * a file maps it and points the arrays into the map.
 *
 * A shard (a partition's piece) is a tma_graph_t of kind TMA_GRAPH_SHARD:
 * the induced training subgraph over local ids 0..n-1, plus global_ids[]
 * mapping them back, and no evaluation edges.
 *
 * Thread-safety: a graph is immutable once built or opened; any number of
 * threads may read it.  Building one is single-owner.
 */
#ifndef TMA_GRAPH_H
#define TMA_GRAPH_H

#include <stdint.h>

#include "tma_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The newest .tmag version this tma writes and reads.  Version 1 files
 * (untyped graphs) are still read, and an untyped graph is still written as
 * version 1; version 2 adds node types and relations (docs/formats.md). */
#define TMA_TMAG_VERSION 2
#define TMA_TMAG_VERSION_UNTYPED 1

/* Limits of typed graphs. */
#define TMA_GRAPH_MAX_NODE_TYPES (1 << 16)
#define TMA_GRAPH_MAX_RELATIONS (1 << 19) /* base relations; relation ids go to twice this */
/* The relation id of a block's self-loop entry (it has no relation). */
#define TMA_GRAPH_REL_SELF (-1)

typedef enum {
    TMA_GRAPH_FULL = 0,  /* a whole graph with its split */
    TMA_GRAPH_SHARD = 1, /* one shard of a partition */
} tma_graph_kind_t;

struct tma_graph_store; /* private: the mapping or the owned buffers */

typedef struct tma_graph {
    tma_graph_kind_t kind;
    int typed_header; /* tma_graph_open_header of a typed file: typed, with no arrays */
    int64_t num_nodes;
    /* Undirected edges of the cleaned graph (training + validation + test);
     * for a shard, its undirected training edges. */
    int64_t num_edges;
    /* Undirected training edges; the CSR holds 2 * num_train_edges entries. */
    int64_t num_train_edges;
    const int64_t *indptr;  /* [num_nodes + 1], indptr[0] = 0 */
    const int64_t *indices; /* [2 * num_train_edges], sorted within each row */

    int32_t feature_dim;
    /* [num_nodes * feature_dim], row-major, elements of feat_dtype: read
     * them through tma_graph_feat_rows (widened to float32), or cast to
     * const float * only where feat_dtype is TMA_FEAT_F32. */
    const void *features;
    tma_feat_dtype_t feat_dtype;

    int32_t num_classes;   /* 0 when there are no labels */
    const int32_t *labels; /* [num_nodes] in [0, num_classes), or NULL */

    int64_t num_val, num_test;
    const int64_t *val_edges;  /* [2 * num_val]: (u, v) pairs */
    const int64_t *test_edges; /* [2 * num_test] */
    int32_t num_negatives;     /* fixed negative tails per evaluation edge */
    const int64_t *val_neg;    /* [num_val * num_negatives] */
    const int64_t *test_neg;   /* [num_test * num_negatives] */

    /* Shards only: local id -> id in the parent graph; and which shard. */
    const int64_t *global_ids; /* [num_nodes] */
    int32_t shard_index, num_shards;

    uint64_t split_seed; /* the seed the split and negatives were drawn with */
    /* 1 when the split and its negatives came with the dataset (an OGB
     * split/ folder) and are kept as given: a negative may then be the
     * head, a neighbour of it, or the positive tail itself (OGB draws them
     * uniformly).  0: tma drew them (never the head or a neighbour). */
    int given_split;
    /* Identifies a full graph's content; a shard carries its parent's id. */
    uint64_t graph_id;

    /*
     * Types (version 2 files).  An untyped graph has num_node_types = 1,
     * num_relations = 1 and every typed array NULL: every node is of type 0
     * and every entry of relation id 0.
     *
     * A typed graph (node_type != NULL) has num_relations R base relations
     * and relation ids in [0, 2R): id r < R is relation r in its stored
     * direction (u -> v), id r + R its inverse (v -> u); so every
     * undirected training edge is stored as u -> v with id r in u's row and
     * as v -> u with id r + R in v's row (tma_graph_rel_inverse).
     */
    int32_t num_node_types;       /* >= 1 */
    int32_t num_relations;        /* R >= 1: base relations (without inverses) */
    const int32_t *node_type;     /* [num_nodes] in [0, num_node_types), or NULL */
    /* [2 * num_train_edges], aligned with indices: entry e of row u (to
     * v = indices[e]) is the directed edge u -> v of relation id edge_rel[e]. */
    const int32_t *edge_rel;
    /* The real feature width of each node type: a node of type t has its
     * features in columns [0, type_feat_dim[t]) and zeros up to feature_dim
     * (per-type widths zero-padded into one width).  [num_node_types]. */
    const int32_t *type_feat_dim;
    /* Each evaluation edge's relation id: val_edges[i] = (u, v) is u -> v of
     * id val_rel[i] (a forward id < R for tma's own split).  Its negatives
     * are nodes of node_type[v]. */
    const int32_t *val_rel;  /* [num_val] */
    const int32_t *test_rel; /* [num_test] */
    /* The names: num_node_types node type names, then num_relations relation
     * names, each NUL-terminated, back to back (names_bytes in all); or NULL. */
    const char *names;
    int64_t names_bytes;

    struct tma_graph_store *store;
} tma_graph_t;

/* ------------------------------------------------------------------ lifetime */

/* An empty graph whose arrays the caller fills with tma_graph_alloc(). */
tma_status_t tma_graph_create(tma_graph_t **g_p);
/* Allocates `bytes` (64-byte aligned) owned by the graph and freed with it;
 * NULL on failure (logged). */
void *tma_graph_alloc(tma_graph_t *g, size_t bytes);
/* Frees the graph and everything it owns or maps; accepts NULL. */
void tma_graph_destroy(tma_graph_t *g);

/* ------------------------------------------------------------------ .tmag files */

enum {
    TMA_GRAPH_OPEN_NO_VERIFY = 1, /* skip the section checksums (structure is still checked) */
};

/* A graph's header alone (its counts, ids and, typed, its node types'
 * feature widths and names), read without mapping the file: for a
 * coordinator that evaluates on ranks (eval.where "workers").  Its arrays
 * (rows, features, split) are NULL. */
tma_status_t tma_graph_open_header(const char *path, tma_graph_t **g_p);

/* Maps a .tmag file.  Refuses, with an error naming the file and what is
 * wrong, a file that is truncated, has a bad magic/version, a checksum
 * mismatch, or arrays that break the format's invariants (ids out of range,
 * a non-monotone indptr, ...).  The graph owns the mapping. */
tma_status_t tma_graph_open(const char *path, unsigned flags, tma_graph_t **g_p);
/* Writes the graph atomically (temp file, fsync, rename).  Computes and
 * stores g->graph_id for a full graph (the id is a hash of the content).
 * Checks the invariants first and refuses to write a broken graph. */
tma_status_t tma_graph_write(tma_graph_t *g, const char *path);
/* Checks every invariant of the format on an in-memory graph; `what` names
 * it in errors.  O(nodes + edges + negatives). */
tma_status_t tma_graph_validate(const tma_graph_t *g, const char *what);
/* The content id that tma_graph_write stores for a full graph. */
uint64_t tma_graph_content_id(const tma_graph_t *g);

/* ------------------------------------------------------------------ queries */

static inline int64_t tma_graph_degree(const tma_graph_t *g, int64_t v)
{
    return g->indptr[v + 1] - g->indptr[v];
}
/* Bytes of one node's feature row. */
static inline size_t tma_graph_feat_row_bytes(const tma_graph_t *g)
{
    return (size_t)g->feature_dim * tma_feat_dtype_size(g->feat_dtype);
}
/* Feature rows [first, first + count) widened to float32 into
 * out[0 .. count * feature_dim). */
void tma_graph_feat_rows(const tma_graph_t *g, int64_t first, int64_t count, float *out);
/* Feature element i (row-major index) widened to float32. */
float tma_graph_feat_at(const tma_graph_t *g, int64_t i);

/* 1 when u-v is a training edge (binary search in u's sorted row). */
int tma_graph_has_edge(const tma_graph_t *g, int64_t u, int64_t v);

/* 1 for a typed (version 2) graph. */
static inline int tma_graph_is_typed(const tma_graph_t *g)
{
    return g->node_type != NULL || g->typed_header;
}
/* The number of relation ids an entry can carry: 2R for a typed graph
 * (forward and inverse), 1 for an untyped one (every entry is id 0). */
static inline int32_t tma_graph_num_rel_ids(const tma_graph_t *g)
{
    return tma_graph_is_typed(g) ? 2 * g->num_relations : 1;
}
/* The inverse of relation id r (typed graphs). */
static inline int32_t tma_graph_rel_inverse(const tma_graph_t *g, int32_t r)
{
    return r < g->num_relations ? r + g->num_relations : r - g->num_relations;
}
static inline int32_t tma_graph_node_type(const tma_graph_t *g, int64_t v)
{
    return g->node_type ? g->node_type[v] : 0;
}
/* The name of node type t, or of base relation r, written into buf (the
 * stored name, else "type<t>" / "rel<r>"); returns buf. */
const char *tma_graph_node_type_name(const tma_graph_t *g, int32_t t, char *buf, size_t size);
const char *tma_graph_relation_name(const tma_graph_t *g, int32_t r, char *buf, size_t size);

/* Summary for `tma info --json`: nodes, edges, feature_dim, train_edges,
 * val_edges, test_edges, has_labels, num_classes, negatives, kind, degree
 * statistics, graph_id (hex).  Caller owns the object. */
cJSON *tma_graph_info_json(const tma_graph_t *g);

/* ==================================================================
 * Building graphs: edge lists, the shared builder (split and negatives),
 * importers and synthetic generators (graph/build.c, import.c, npz.c,
 * gen.c, feat.c).  docs/graphs.md describes the behaviour in prose.
 * ================================================================== */

/* Defaults of the builder and importers. */
#define TMA_GRAPH_DEFAULT_NEGATIVES 1000
#define TMA_GRAPH_DEFAULT_EVAL_FRACTION 0.05 /* of the cleaned edges, each for val and test */
#define TMA_GRAPH_DEFAULT_EVAL_MAX 2000      /* ... but at most this many edges each */
#define TMA_GRAPH_DEFAULT_FEAT_DIM 64        /* graphs without features */
/* Seeds are kept below 2^53 so that they survive JSON (partition.json). */
#define TMA_GRAPH_MAX_SEED ((int64_t)1 << 53)

/* A growable list of undirected edges as interleaved (u, v) int64 pairs.
 * Zero-initialise it; free with tma_edge_list_free(). */
typedef struct tma_edge_list {
    int64_t *pairs; /* [2 * cap] */
    int64_t count, cap;
    /* [cap]: each edge's base relation (u -> v), for a typed graph; NULL
     * for an untyped list.  Filled by tma_edge_list_push_rel. */
    int32_t *rels;
} tma_edge_list_t;

/* Makes room for `cap` edges in all; TMA_ERR_NOMEM (logged) on failure. */
tma_status_t tma_edge_list_reserve(tma_edge_list_t *el, int64_t cap);
/* Frees the storage and zeroes the list; accepts a zeroed list. */
void tma_edge_list_free(tma_edge_list_t *el);
/* Appends one edge, growing the list geometrically. */
static inline tma_status_t tma_edge_list_push(tma_edge_list_t *el, int64_t u, int64_t v)
{
    if (el->count == el->cap) {
        tma_status_t st = tma_edge_list_reserve(el, el->cap < 1024 ? 1024 : el->cap * 2);
        if (st != TMA_OK)
            return st;
    }
    el->pairs[2 * el->count] = u;
    el->pairs[2 * el->count + 1] = v;
    el->count++;
    return TMA_OK;
}

/* Appends edge u -> v of base relation r to a typed list (one that is
 * empty or was filled only by this function). */
tma_status_t tma_edge_list_push_rel(tma_edge_list_t *el, int64_t u, int64_t v, int32_t r);

/* How the builder splits and draws negatives. */
typedef struct tma_graph_build_opts {
    /* Validation and test edges: < 0 the default (5% of the cleaned edges,
     * at most 2000); in [0, 1) a fraction of the cleaned edges (rounded);
     * >= 1 a count (must be a whole number). */
    double val, test;
    int32_t negatives; /* fixed negative tails per evaluation edge (default 1000) */
    uint64_t seed;     /* < TMA_GRAPH_MAX_SEED */
} tma_graph_build_opts_t;

/* Sets the defaults above, seed 0. */
void tma_graph_build_opts_init(tma_graph_build_opts_t *o);

/* What the builder did. */
typedef struct tma_graph_build_report {
    int64_t input_edges; /* edges given */
    int64_t self_loops;  /* dropped */
    int64_t duplicates;  /* dropped: repeats of an undirected edge, in either direction */
    int64_t edges;       /* undirected edges after cleaning */
    int64_t train_edges, val_edges, test_edges;
    int32_t negatives;
    double seconds_adjacency, seconds_split, seconds_negatives;
    /* Out of core only: the graph was written as it was built. */
    int out_of_core;
    double seconds_write;
    int64_t spilled_runs; /* sorted runs spilled to temporary files */
} tma_graph_build_report_t;

/*
 * Fills a full graph from an undirected edge list.  `g` must come from
 * tma_graph_create() with num_nodes set (features and labels, when there are
 * any, already in place); the builder adds the training CSR, the split and
 * the negatives, and sets num_edges, split_seed and friends.
 *
 * Self-loops and duplicate edges (u-v given twice, in either direction) are
 * dropped and counted.  The validation and test edges are drawn uniformly
 * from the cleaned edges without replacement, with a random orientation
 * (head, tail), and removed from the training graph.  Each gets
 * o->negatives tails drawn uniformly (with replacement) from the nodes that
 * are neither the head nor a neighbour of it in the FULL graph.
 *
 * Typed graphs: when el->rels is set, g must also carry num_node_types,
 * node_type, num_relations (R, every rels[i] in [0, R)) and type_feat_dim
 * (names optional).  Each edge u -> v of relation r becomes id r in u's row
 * and r + R in v's row.  A pair given twice (in any direction, with any
 * relation) keeps the relation whose id seen from its lower end is the
 * smallest, and counts as a duplicate.  Evaluation edges are kept in their
 * forward direction (u -> v, id r < R) and their negatives are drawn from
 * the nodes of v's type only (neither u nor a neighbour of u).
 *
 * Consumes `el`: its storage is freed on return, success or not.
 * Deterministic for o->seed whatever the OpenMP thread count.
 * Errors: TMA_ERR_RANGE (a node id outside [0, num_nodes), named with the
 * edge's index), TMA_ERR_INVALID (no edges, or a split that leaves no
 * training edge, or a head adjacent to every node), TMA_ERR_NOMEM.
 */
tma_status_t tma_graph_build(tma_graph_t *g, tma_edge_list_t *el, const tma_graph_build_opts_t *o,
                             tma_graph_build_report_t *rep_p);

/* How features are produced on import and generation. */
typedef enum {
    TMA_FEAT_STORED = 0,    /* the input's features, densified */
    TMA_FEAT_PROJECTED = 1, /* the input's features through the seeded random projection */
    TMA_FEAT_DEFAULT = 2,   /* no input features: the projection of one-hot node ids */
    TMA_FEAT_GENERATED = 3, /* a generator's own features (SBM centroids + noise) */
} tma_feat_source_t;

/* A short name ("stored", "projected", "default", "generated"). */
const char *tma_feat_source_str(tma_feat_source_t s);

typedef struct tma_graph_import_opts {
    tma_graph_build_opts_t build;
    /* 0: store the features as they are (graphs without features get
     * TMA_GRAPH_DEFAULT_FEAT_DIM); > 0: this many dense dimensions, by the
     * seeded random projection when the input's dimension differs. */
    int32_t feat_dim;
    /* How the features are stored: TMA_FEAT_F32 (the default), or rounded
     * to nearest even into float16 / bfloat16.  A float16 features.npy
     * read with TMA_FEAT_F16 is kept as it is (mapped in place when in C
     * order). */
    tma_feat_dtype_t feat_dtype;
    /* OGB datasets with a split/<name>/ folder beside raw/: the program that
     * converts its .pt files (tma-ogb-split, docs/graphs.md); NULL refuses
     * such a dataset with an error naming the folder.  split_name picks one
     * of several splits (NULL: the only one).  resplit ignores the folder
     * and draws a seeded split as for any other layout. */
    const char *ogb_split_tool;
    const char *ogb_split_python; /* runs the tool when set (else its #! line: python3 on the PATH) */
    const char *split_name;
    int resplit;
} tma_graph_import_opts_t;

void tma_graph_import_opts_init(tma_graph_import_opts_t *o);

typedef struct tma_graph_import_report {
    const char *layout; /* "edge-list", "ogb", "npz", "movielens", "typed" (constant strings) */
    char split_from[512]; /* the given split's folder ("" when tma drew the split) */
    int64_t split_train_edges; /* the training edges the given split lists */
    int64_t nodes;
    int32_t input_feature_dim; /* 0 without input features */
    int32_t feature_dim;
    tma_feat_source_t features;
    tma_feat_dtype_t feat_dtype; /* how they are stored */
    int32_t num_classes; /* 0 without labels */
    int32_t num_node_types, num_relations; /* 1 and 1 for an untyped graph */
    int features_mapped; /* the features point into the mapped input (features.npy, float32, C order) */
    /* The entries of the dataset folder (and of an OGB raw/ folder) that the
     * import did not read, so a user sees what was left out: sorted names,
     * each NUL-terminated, back to back; "raw/" before raw/'s entries, "/"
     * after a folder's name; dot files are not listed.  num_ignored names
     * are in the buffer, ignored_more did not fit.  Empty for a .npz file. */
    char ignored[4096];
    int32_t num_ignored, ignored_more;
    tma_graph_build_report_t build;
    double seconds_read; /* parsing the input */
    double seconds;      /* the whole import, without writing */
} tma_graph_import_report_t;

/* An evaluation split given by the dataset (OGB's split/<name>/ folder),
 * taken as it is: no edge drawn, none dropped, negatives not redrawn. */
typedef struct tma_graph_given_split {
    int64_t num_val, num_test;
    const int64_t *val_edges, *test_edges; /* (head, tail) pairs */
    int32_t negatives;                     /* per evaluation edge */
    const int64_t *val_neg, *test_neg;     /* [num_* x negatives] */
} tma_graph_given_split_t;

/*
 * Fills a full graph from its training edges and a given split: `el` (the
 * training graph, cleaned as by tma_graph_build) becomes the CSR; the
 * evaluation edges and their negatives are copied as they are and
 * g->given_split is set.  Consumes `el`.  `what` names the split in errors.
 * TMA_ERR_FORMAT (logged) when an evaluation edge is out of range, a
 * self-loop or a training edge, or a negative is out of range.
 */
tma_status_t tma_graph_build_given(tma_graph_t *g, tma_edge_list_t *el, const tma_graph_given_split_t *sp,
                                   uint64_t seed, const char *what, tma_graph_build_report_t *rep_p);

/*
 * Reads a dataset into a full graph (not written).  `src` is one of:
 *   - a folder with edges.txt (+ optional features.txt or features.npy,
 *     labels.txt, meta.txt); a float32 C-order features.npy is mapped and the
 *     graph's features point into it (the graph unmaps it when destroyed);
 *   - an OGB dataset folder, or its raw/ folder, with edge.csv.gz (+ optional
 *     num-node-list.csv.gz, node-feat.csv.gz, node-label.csv.gz); with a
 *     split/<name>/ folder beside raw/, its split and negatives are taken as
 *     given (o->ogb_split_tool converts them; tma_graph_build_given) unless
 *     o->resplit;
 *   - a .npz file of CSR arrays (or a folder holding exactly one .npz).
 * Every error is logged once naming the file and line (or the npz array) at
 * fault: TMA_ERR_NOT_FOUND (missing file or unknown layout), TMA_ERR_FORMAT
 * (malformed text, gzip, zip or npy; a features.npy that is truncated, not
 * 2-d, or whose rows disagree with the node count), TMA_ERR_RANGE (an id
 * beyond the node count), TMA_ERR_UNSUPPORTED (other zip methods, Fortran
 * order inside a .npz, big-endian data, a dtype tma does not read).  The
 * caller owns *g_p.
 */
tma_status_t tma_graph_import(const char *src, const tma_graph_import_opts_t *o, tma_graph_t **g_p,
                              tma_graph_import_report_t *rep_p);
/* Out of core (graph/build_ooc.c): the edge-list layout (a folder with
 * edges.txt; tma_graph_import_streams says whether src is one) imported and
 * written to `out` with at most `budget` bytes of working memory beside what
 * the reader holds (labels, sparse or text features), the same bytes as
 * tma_graph_import then tma_graph_write.  edges.txt is read in blocks;
 * temporary files go beside `out`. */
int tma_graph_import_streams(const char *src);
tma_status_t tma_graph_import_file(const char *src, const tma_graph_import_opts_t *o, uint64_t budget,
                                   const char *out, tma_graph_import_report_t *rep_p, uint64_t *graph_id_p);
/* About the peak memory of tma_graph_import on the edge-list layout at src,
 * from its files' sizes (an estimate: text lines vary). */
uint64_t tma_graph_import_peak_bytes(const char *src, int32_t feat_dim);

/* The stochastic block model of the paper's Lemma 1, generalised to k
 * classes: an edge's endpoints share a class with probability `homophily`;
 * features are the class centroid (N(0, I)) plus noise * N(0, I). */
typedef struct tma_gen_sbm_opts {
    int64_t nodes;
    int32_t classes;
    double avg_degree; /* edges drawn: round(nodes * avg_degree / 2) */
    double homophily;  /* in [0, 1]; must be 1 with one class */
    int32_t feat_dim;
    double noise;
    uint64_t seed;
    tma_feat_dtype_t feat_dtype; /* features stored as (rounded to nearest even) */
} tma_gen_sbm_opts_t;

/* The typed SBM's additions (tma_graph_gen_sbm_typed): node v is of type
 * v mod node_types, each edge gets a seeded uniform relation in
 * [0, relations) (stored with its inverse), and type t keeps
 * max(1, feat_dim - t) real feature columns (zeros after). */
typedef struct tma_gen_typed_opts {
    int32_t node_types; /* 1 .. TMA_GRAPH_MAX_NODE_TYPES, at most the nodes */
    int32_t relations;  /* 1 .. TMA_GRAPH_MAX_RELATIONS */
} tma_gen_typed_opts_t;

/* R-MAT (Chakrabarti et al.) with a = 0.57, b = c = 0.19, d = 0.05 over
 * 2^scale ids (endpoints >= nodes are redrawn); random features (the same
 * default as an import without features). */
typedef struct tma_gen_rmat_opts {
    int64_t nodes; /* 0: 2^scale */
    int32_t scale; /* 0: the smallest with 2^scale >= nodes */
    int64_t edges; /* drawn; self-loops and duplicates are then dropped */
    int32_t feat_dim;
    uint64_t seed;
    tma_feat_dtype_t feat_dtype; /* features stored as (rounded to nearest even) */
} tma_gen_rmat_opts_t;

typedef struct tma_gen_report {
    int64_t nodes;
    int32_t feature_dim;
    tma_feat_source_t features;
    tma_feat_dtype_t feat_dtype;
    int32_t num_classes;
    double homophily; /* measured over all cleaned edges; -1 without labels */
    tma_graph_build_report_t build;
    double seconds_generate, seconds;
} tma_gen_report_t;

/* Generate a graph and run it through tma_graph_build with `b` (whose seed
 * should normally equal the generator's).  Deterministic for the seeds
 * whatever the thread count.  TMA_ERR_INVALID for out-of-range options
 * (logged, naming the option). */
tma_status_t tma_graph_gen_sbm(const tma_gen_sbm_opts_t *o, const tma_graph_build_opts_t *b,
                               tma_graph_t **g_p, tma_gen_report_t *rep_p);
/* The typed SBM: as tma_graph_gen_sbm plus the types of `t` (NULL: the
 * untyped SBM, exactly tma_graph_gen_sbm). */
tma_status_t tma_graph_gen_sbm_typed(const tma_gen_sbm_opts_t *o, const tma_gen_typed_opts_t *t,
                                     const tma_graph_build_opts_t *b, tma_graph_t **g_p, tma_gen_report_t *rep_p);
tma_status_t tma_graph_gen_rmat(const tma_gen_rmat_opts_t *o, const tma_graph_build_opts_t *b,
                                tma_graph_t **g_p, tma_gen_report_t *rep_p);
/* The same graphs built out of core and written to `out` with at most
 * `budget` bytes of working memory (beside the SBM's per-node arrays, 12
 * bytes a node): the same bytes as the in-memory function followed by
 * tma_graph_write, for graphs of fewer than 2^31 nodes.  Temporary files go
 * beside `out` and never outlive the call; nothing is left under `out`
 * unless it succeeds.  Untyped SBM only. */
tma_status_t tma_graph_gen_sbm_file(const tma_gen_sbm_opts_t *o, const tma_graph_build_opts_t *b, uint64_t budget,
                                    const char *out, tma_gen_report_t *rep_p, uint64_t *graph_id_p);
tma_status_t tma_graph_gen_rmat_file(const tma_gen_rmat_opts_t *o, const tma_graph_build_opts_t *b,
                                     uint64_t budget, const char *out, tma_gen_report_t *rep_p, uint64_t *graph_id_p);
/* About the peak memory of the in-memory generators for a graph of `nodes`
 * nodes, `edges` drawn edges and `feat_dim` features (sbm: an SBM). */
uint64_t tma_graph_gen_peak_bytes(int64_t nodes, int64_t edges, int32_t feat_dim, int sbm);

/* Fraction of the graph's cleaned edges (training + validation + test)
 * whose endpoints share a label; -1 without labels or edges. */
double tma_graph_homophily(const tma_graph_t *g);

/* ==================================================================
 * Partitions (graph/partition.c): node assignments, shard files and the
 * partition folder (docs/formats.md, "Partition folders").
 * ================================================================== */

typedef enum {
    TMA_PARTITION_RANDOM = 0,    /* each node to a shard by a seeded hash */
    TMA_PARTITION_SUPERNODE = 1, /* METIS mini-clusters, shuffled, dealt to shards */
    TMA_PARTITION_METIS = 2,     /* METIS k-way into the shard count (PSGD-PA) */
} tma_partition_scheme_t;

/* What cuts the graph for the METIS-based schemes (supernode, metis). */
typedef enum {
    TMA_CLUSTERER_AUTO = 0,  /* METIS when it can take the graph within the budget, else lp */
    TMA_CLUSTERER_METIS = 1, /* METIS_PartGraphKway */
    TMA_CLUSTERER_LP = 2,    /* label propagation with capped groups, packed (graph/order.c) */
} tma_clusterer_t;

typedef struct tma_partition_opts {
    tma_partition_scheme_t scheme;
    int32_t num_shards;
    int64_t num_clusters; /* supernode only: N mini-clusters */
    uint64_t seed;        /* < TMA_GRAPH_MAX_SEED */
    uint64_t memory;      /* working-memory budget in bytes (0: none); see tma_partition_peak_bytes */
    tma_clusterer_t clusterer; /* supernode and metis; AUTO (0) by default */
} tma_partition_opts_t;

/* About the working memory tma_partition_run needs for g with o, beside the
 * mapped graph: per-node arrays (28 bytes a node) and block buffers, and for
 * METIS-based schemes METIS's graph and its coarsening copies (with METIS)
 * or 16 bytes a node (with lp). */
uint64_t tma_partition_peak_bytes(const tma_graph_t *g, const tma_partition_opts_t *o);

/* The clusterer o's scheme uses on g: METIS or LP (AUTO resolved: METIS
 * unless the graph is beyond its 32-bit ids or its estimate is over
 * o->memory while lp's is not); AUTO for the random scheme (none). */
tma_clusterer_t tma_partition_clusterer(const tma_graph_t *g, const tma_partition_opts_t *o);
/* "auto", "metis" or "lp"; parse: TMA_ERR_INVALID (not logged) otherwise. */
const char *tma_clusterer_str(tma_clusterer_t c);
tma_status_t tma_clusterer_parse(const char *s, tma_clusterer_t *c);

/* Parses "random", "metis" or "supernode:N" into o->scheme and
 * o->num_clusters; TMA_ERR_INVALID (not logged) otherwise. */
tma_status_t tma_partition_scheme_parse(const char *s, tma_partition_opts_t *o);
/* "random", "supernode" or "metis". */
const char *tma_partition_scheme_str(tma_partition_scheme_t s);

/* Node assignments over g's training graph; part[v] in [0, num_shards).
 * random: O(n), parallel, deterministic.  metis: METIS_PartGraphKway with
 * the seed.  supernode: METIS into `clusters` (written to cluster[] when not
 * NULL) by the clusterer given (METIS, or lp below), clusters shuffled by
 * the seed and dealt round-robin, so shards'
 * cluster counts differ by at most one.  METIS needs 32-bit ids: a graph
 * beyond 2^31 - 1 nodes or adjacency entries is refused (TMA_ERR_RANGE). */
tma_status_t tma_graph_partition_random(const tma_graph_t *g, int32_t shards, uint64_t seed,
                                        int32_t *part);
tma_status_t tma_graph_partition_metis(const tma_graph_t *g, int64_t parts, uint64_t seed,
                                       int32_t *part);
tma_status_t tma_graph_partition_supernode(const tma_graph_t *g, int64_t clusters, int32_t shards,
                                           uint64_t seed, tma_clusterer_t clusterer, int32_t *cluster,
                                           int32_t *part);
/* Label propagation (graph/order.c) with groups of at most a quarter of a
 * part (a whole part under 32 nodes), the groups packed largest first into
 * the lightest of `parts` parts: part[v] in [0, parts).  Deterministic for
 * a seed; reads the mapped adjacency, holds 16 bytes a node; any graph of
 * up to 2^31 - 1 nodes (TMA_ERR_RANGE beyond). */
tma_status_t tma_graph_partition_lp(const tma_graph_t *g, int64_t parts, uint64_t seed, int32_t *part);

/* What a partition run produced (also in partition.json). */
typedef struct tma_partition_result {
    tma_partition_opts_t opts;
    int64_t nodes, train_edges;
    double edge_ratio;        /* sum of shard edges / training edges */
    double label_tv;          /* mean over non-empty shards; -1 without labels */
    double feature_mean_dist; /* mean over non-empty shards */
    int64_t *shard_nodes, *shard_edges; /* [num_shards] */
    int64_t *shard_clusters;            /* [num_shards], supernode only (else NULL) */
    double *shard_label_tv;             /* [num_shards] (-1 without labels or nodes) */
    double *shard_feature_dist;         /* [num_shards] (-1 for an empty shard) */
    /* assign: node assignment; shards: everything after it, of which
     * extract is the layout (nodes grouped by shard, local ids, in-shard
     * degrees) and write is streaming each shard to its file a block of
     * nodes at a time (subgraph rows, copies, statistics, checksums, fsync). */
    double seconds_assign, seconds_shards, seconds_extract, seconds_write, seconds;
} tma_partition_result_t;

/*
 * Partitions g (a full graph opened from graph_path) and writes the folder
 * `dir`: shard-NNNNN.tmag files (TMA_GRAPH_SHARD: the induced training
 * subgraph, features, labels, global ids, the parent's graph_id), then
 * partition.json last, so a folder with partition.json is complete.  A
 * partition.json and shard files already in `dir` are removed first.  The
 * caller frees *res_p with tma_partition_result_destroy().
 */
tma_status_t tma_partition_run(const tma_graph_t *g, const char *graph_path,
                               const tma_partition_opts_t *o, const char *dir,
                               tma_partition_result_t **res_p);
void tma_partition_result_destroy(tma_partition_result_t *r);

/* A partition folder as the coordinator and workers see it. */
typedef struct tma_partition_info {
    char *dir;
    char *scheme;           /* "random", "supernode", "metis" */
    int64_t num_clusters;   /* supernode only, else 0 */
    int32_t num_shards;
    uint64_t seed;
    uint64_t graph_id;      /* the parent graph's id; every shard carries it */
    char *graph_path;       /* the parent graph's absolute path */
    int64_t nodes, train_edges;
    double edge_ratio;
    int64_t *shard_nodes;   /* [num_shards] */
    int64_t *shard_edges;   /* [num_shards] */
    char **shard_paths;     /* [num_shards]: dir joined with each file name */
    int inference;          /* the folder has each shard's inference file (partition.json "inference") */
} tma_partition_info_t;

/* Reads DIR/partition.json.  TMA_ERR_NOT_FOUND when it is missing (an
 * incomplete or absent partition), TMA_ERR_CONFIG for a missing or wrong
 * key (named in the log).  Neither opens nor looks for the shard files: a
 * node may hold only the shards it trains (tma_partition_shard_check).
 * Free with tma_partition_info_destroy. */
tma_status_t tma_partition_info_load(const char *dir, tma_partition_info_t **info_p);
void tma_partition_info_destroy(tma_partition_info_t *info);
/* Checks shard k's file on this node without mapping it: it exists, can be
 * read, and its header is intact and says it is shard k of num_shards of
 * the partition's graph_id.  TMA_ERR_NOT_FOUND when the file is missing,
 * TMA_ERR_IO when it cannot be read, TMA_ERR_FORMAT or TMA_ERR_CHECKSUM
 * for a damaged header, TMA_ERR_MISMATCH for a file of another partition,
 * TMA_ERR_RANGE for k outside the partition; each logged once, naming the
 * file and this node's hostname.  Thread-safe. */
tma_status_t tma_partition_shard_check(const tma_partition_info_t *info, int32_t k);

/* ------------------------------------------------------------------ a shard's inference file */

/* A node of a partition named by its shard and its local id in that shard. */
#define TMA_INFER_PACK(shard, local) ((int64_t)(shard) << 32 | (int64_t)(local))
#define TMA_INFER_SHARD(p) ((int32_t)((p) >> 32))
#define TMA_INFER_LOCAL(p) ((int64_t)((p) & 0xffffffffll))
/* Columns of a duty row before its negatives. */
enum { TMA_INFER_DUTY_EDGE, TMA_INFER_DUTY_REL, TMA_INFER_DUTY_HEAD, TMA_INFER_DUTY_TAIL, TMA_INFER_DUTY_COLS };

/*
 * shard-NNNNN.infer.tmag (docs/formats.md), written by tma partition beside
 * each shard: what an evaluator rank needs to compute the embeddings of the
 * shard's nodes without the whole graph.  Row i is the shard's local node i
 * (global id global_ids[i]); its entries are ALL its neighbours in the full
 * training graph, in the graph's row order, each named by
 * TMA_INFER_PACK(shard, local) with that neighbour's degree (for GCN's
 * normalisation) and, typed, the entry's relation id.  The duties of a split
 * are the evaluation edges whose head is one of the shard's nodes, one row of
 * TMA_INFER_DUTY_COLS + negatives each: the edge's index in the split, its
 * relation id (0 untyped), the head's local id, the tail and each fixed
 * negative packed.  Read-only, mapped; free with tma_graph_infer_close.
 */
typedef struct tma_graph_infer {
    int32_t shard, num_shards;
    uint64_t graph_id;
    int64_t num_nodes, num_entries;
    const int64_t *indptr;     /* [num_nodes + 1] */
    const int64_t *nbr;        /* [num_entries], packed */
    const int32_t *nbr_deg;    /* [num_entries] */
    const int32_t *rel;        /* [num_entries], typed only (else NULL) */
    const int64_t *global_ids; /* [num_nodes] */
    const int32_t *node_type;  /* [num_nodes], typed only */
    int32_t num_negatives;
    int64_t num_duties[2];     /* [0] validation, [1] test */
    const int64_t *duties[2];  /* [num_duties * (TMA_INFER_DUTY_COLS + num_negatives)] */
    void *map_; /* private: the mapping */
} tma_graph_infer_t;

/* The file name of shard k's inference file in a partition folder (malloc'd). */
char *tma_partition_infer_name(int32_t k);
/* Opens and checks an inference file: header, sections, checksums (unless
 * TMA_GRAPH_OPEN_NO_VERIFY), that it is shard `shard` of `num_shards` of
 * graph `graph_id`, rows in range, every packed node in range of
 * shard_nodes[] (the partition's shard sizes), degrees >= 1.  Errors name
 * the file and what is wrong. */
tma_status_t tma_graph_infer_open(const char *path, unsigned flags, int32_t shard, int32_t num_shards,
                                  uint64_t graph_id, const int64_t *shard_nodes, tma_graph_infer_t **inf_p);
void tma_graph_infer_close(tma_graph_infer_t *inf);

/* ------------------------------------------------------------------ neighbour sampler */

/*
 * GraphSAGE neighbour sampling into message-flow graphs (blocks).  A sample
 * for an L-layer GNN is L blocks over one growing list of nodes: the seeds
 * come first, then the nodes each hop adds, so every layer's destination
 * nodes are a prefix of its source nodes.  blocks[0] feeds the first GNN
 * layer (its sources are all sampled nodes); blocks[L-1] has the seeds as
 * destinations.  Hop 1 (fanouts[0]) samples the seeds' neighbours.
 *
 * Each block is a CSR from destination rows to local source ids with a
 * weight per edge, so a GNN layer is one weighted sparse product:
 *   TMA_GRAPH_NORM_MEAN: weight 1/s_i on each of the s_i sampled neighbours
 *     of row i (GraphSAGE mean; rows with no neighbour are empty), or
 *     1/(s_i + 1) on them and on the self-loop when self-loops are asked for.
 *   TMA_GRAPH_NORM_GCN: symmetric normalisation with self-loops, estimated
 *     from the sample: the self-loop gets 1/d_i and a sampled neighbour j
 *     gets (c_i/s_i) / sqrt(d_i d_j), where d = degree + 1 in this graph and
 *     c_i is the number of neighbours of i that could be sampled.  With the
 *     whole neighbourhood (s_i = c_i = degree) this is exactly the GCN
 *     propagation matrix D^-1/2 (A + I) D^-1/2 that full inference uses, and
 *     a sampled row is an unbiased estimate of it.
 * Self-loops (option self_loops) come first in their row, with local id i.
 *
 * With option transpose, each block also carries its edges grouped by
 * source (CSC), which lets a backward pass gather instead of scatter.
 *
 * Excluded edges (a mini-batch's own positive edges) are removed, in both
 * directions, from every hop's candidates.  Sampling without replacement
 * (Floyd's algorithm) is seeded per call and per node, so a sample depends
 * only on the graph, the options, the seeds, the exclusions and rng_seed
 * (not on the thread count).
 *
 * Memory: the caller provides the output arrays, sized once from
 * tma_graph_sampler_bounds(); sampling itself never allocates.
 * Thread-safety: one sampler serves one thread at a time.
 */

#define TMA_GRAPH_MAX_LAYERS 8

typedef enum {
    TMA_GRAPH_NORM_MEAN = 0,
    TMA_GRAPH_NORM_GCN = 1,
} tma_graph_norm_t;

typedef struct tma_graph_block {
    int64_t num_dst, num_src, num_edges;
    int32_t *indptr;  /* [num_dst + 1], indptr[0] = 0 */
    int32_t *indices; /* [num_edges] local source ids */
    float *weights;   /* [num_edges] */
    /* Optional ([num_edges], filled when the caller provides it): the
     * relation id of the message each edge carries, source -> destination
     * (the inverse of the id stored in the destination's CSR row), in
     * [0, tma_graph_num_rel_ids(g)); 0 on an untyped graph;
     * TMA_GRAPH_REL_SELF on a self-loop. */
    int32_t *rel;
    int32_t *t_rel; /* [num_edges], option transpose: rel in t_indices order */
    /* The same edges grouped by source (option transpose; else unused):
     * source j's edges are t_indices[t_indptr[j] .. t_indptr[j + 1]), each a
     * destination row, in increasing row order, with its weight. */
    int32_t *t_indptr;  /* [num_src + 1] */
    int32_t *t_indices; /* [num_edges] destination rows */
    float *t_weights;   /* [num_edges] */
} tma_graph_block_t;

typedef struct tma_graph_sample {
    int num_layers;
    tma_graph_block_t blocks[TMA_GRAPH_MAX_LAYERS]; /* blocks[0]: the input layer */
    int64_t *nodes;      /* [num_nodes] ids in the graph; seeds first */
    int64_t num_nodes;   /* == blocks[0].num_src */
    int64_t num_seeds;   /* distinct seeds == blocks[L-1].num_dst */
    int32_t *seed_local; /* [number of seeds asked for]: each one's local id */
    /* Optional ([num_nodes], filled when the caller provides it): each
     * sampled node's type (0 on an untyped graph). */
    int32_t *node_type;
} tma_graph_sample_t;

typedef struct tma_graph_sampler_opts {
    int num_layers;                        /* 0..TMA_GRAPH_MAX_LAYERS (0: only deduplicate the seeds) */
    int fanouts[TMA_GRAPH_MAX_LAYERS];     /* per hop from the seeds; -1 = all neighbours */
    tma_graph_norm_t norm;
    int self_loops;                        /* add (i, i) to every row */
    int transpose;                         /* also fill the blocks' t_* arrays */
    int transpose_from;                    /* ... of blocks transpose_from.. only (0: all; a trainer
                                              whose layer 0 needs no input gradient skips block 0) */
    int64_t max_seeds;                     /* most seeds per call (duplicates included) */
    int64_t max_excluded;                  /* most excluded edges per call */
    int threads;                           /* OpenMP threads for a hop's rows (<= 1: one) */
} tma_graph_sampler_opts_t;

/* Worst-case sizes of a sample's arrays for this sampler. */
typedef struct tma_graph_sample_bounds {
    int64_t max_nodes;
    int64_t max_dst[TMA_GRAPH_MAX_LAYERS];   /* per block, in block order */
    int64_t max_src[TMA_GRAPH_MAX_LAYERS];
    int64_t max_edges[TMA_GRAPH_MAX_LAYERS];
} tma_graph_sample_bounds_t;

typedef struct tma_graph_sampler tma_graph_sampler_t;

/* A sampler over g (which must outlive it).  Allocates O(nodes) bytes of
 * bookkeeping once.  TMA_ERR_CONFIG for bad options (named in the log). */
tma_status_t tma_graph_sampler_create(const tma_graph_t *g, const tma_graph_sampler_opts_t *opts,
                                      tma_graph_sampler_t **s_p);
void tma_graph_sampler_destroy(tma_graph_sampler_t *s);
void tma_graph_sampler_bounds(const tma_graph_sampler_t *s, tma_graph_sample_bounds_t *b_p);

/*
 * Samples the blocks for `seeds` (ids in the graph, duplicates allowed, at
 * most max_seeds).  `excluded` holds n_excluded (u, v) pairs removed from
 * the message-passing graph.  `out` must carry arrays of the bounds' sizes:
 * nodes, seed_local, and each block's indptr, indices and weights (and
 * t_indptr, t_indices, t_weights with option transpose); the counts are
 * filled in.  TMA_ERR_RANGE for an id out of range or too many
 * seeds or exclusions.  Typed graphs: each block's rel (and t_rel) and
 * out->node_type are filled when the caller sets them (same sizes as
 * indices and nodes); left NULL, nothing else changes.
 */
tma_status_t tma_graph_sampler_sample(tma_graph_sampler_t *s, const int64_t *seeds, int64_t n_seeds,
                                      const int64_t *excluded, int64_t n_excluded, uint64_t rng_seed,
                                      tma_graph_sample_t *out);

/*
 * The full-neighbourhood block of destination rows [r0, r1) of g, for
 * layer-wise inference: source ids are node ids of g (so num_src is
 * g->num_nodes and ids must fit int32), weights as for the sampler with
 * every neighbour taken.  out->indptr needs r1 - r0 + 1 entries, indices and
 * weights tma_graph_block_full_edges(g, r0, r1, self_loops) entries, and
 * so does out->rel when it is set (the relation ids, as for the sampler).
 */
int64_t tma_graph_block_full_edges(const tma_graph_t *g, int64_t r0, int64_t r1, int self_loops);
tma_status_t tma_graph_block_full(const tma_graph_t *g, tma_graph_norm_t norm, int self_loops, int64_t r0,
                                  int64_t r1, tma_graph_block_t *out);

/*
 * The same over an order of the nodes, on `threads` threads: the
 * destinations are node[r0 .. r1) and every source id is a position in the
 * order (pos[u] for node u), so the block reads and writes tables whose row
 * p holds node node[p].  node and pos are inverse permutations of
 * 0 .. num_nodes - 1, or both NULL for id order (the block
 * tma_graph_block_full builds); the edges are the sum of the rows' degrees
 * (plus one each with self_loops).
 */
tma_status_t tma_graph_block_full_ordered(const tma_graph_t *g, tma_graph_norm_t norm, int self_loops,
                                          const int32_t *node, const int32_t *pos, int64_t r0, int64_t r1,
                                          int threads, tma_graph_block_t *out);

/*
 * A cache-friendly order of the nodes for layer-wise inference: size-capped
 * label propagation (a few sweeps; each node takes the label most of its
 * neighbours have, among labels held by fewer than max_cluster nodes) groups
 * nodes with their neighbours, and the order lists the groups one after the
 * other (each in id order).  Inference that walks its destinations in this
 * order finds most of a group's neighbour rows still in cache.  Fills node
 * (position -> node) and pos (node -> position), num_nodes entries each;
 * deterministic.  The graph must have at most INT32_MAX nodes.
 */
tma_status_t tma_graph_locality_order(const tma_graph_t *g, int64_t max_cluster, int32_t *node, int32_t *pos);

#ifdef __cplusplus
}
#endif
#endif /* TMA_GRAPH_H */
