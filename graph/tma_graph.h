/*
 * tma_graph.h: graphs for link prediction.  A tma_graph_t is one graph in
 * memory: the training graph as CSR (both directions of every undirected
 * training edge), float32 node features, optional labels, the validation and
 * test edges, and the fixed evaluation negatives.  It is read from and
 * written to `.tmag` files (docs/formats.md), which are laid out for mmap:
 * opening a file maps it and points the arrays into the map.
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

#define TMA_TMAG_VERSION 1

typedef enum {
    TMA_GRAPH_FULL = 0,  /* a whole graph with its split */
    TMA_GRAPH_SHARD = 1, /* one shard of a partition */
} tma_graph_kind_t;

struct tma_graph_store; /* private: the mapping or the owned buffers */

typedef struct tma_graph {
    tma_graph_kind_t kind;
    int64_t num_nodes;
    /* Undirected edges of the cleaned graph (training + validation + test);
     * for a shard, its undirected training edges. */
    int64_t num_edges;
    /* Undirected training edges; the CSR holds 2 * num_train_edges entries. */
    int64_t num_train_edges;
    const int64_t *indptr;  /* [num_nodes + 1], indptr[0] = 0 */
    const int64_t *indices; /* [2 * num_train_edges], sorted within each row */

    int32_t feature_dim;
    const float *features; /* [num_nodes * feature_dim], row-major */

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
    /* Identifies a full graph's content; a shard carries its parent's id. */
    uint64_t graph_id;

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
/* 1 when u-v is a training edge (binary search in u's sorted row). */
int tma_graph_has_edge(const tma_graph_t *g, int64_t u, int64_t v);

/* Summary for `tma info --json`: nodes, edges, feature_dim, train_edges,
 * val_edges, test_edges, has_labels, num_classes, negatives, kind, degree
 * statistics, graph_id (hex).  Caller owns the object. */
cJSON *tma_graph_info_json(const tma_graph_t *g);

#ifdef __cplusplus
}
#endif
#endif /* TMA_GRAPH_H */
