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
 * Excluded edges (a mini-batch's own positive edges) are removed, in both
 * directions, from every hop's candidates.  Sampling without replacement
 * (Floyd's algorithm) is seeded per call and per node, so a sample depends
 * only on the graph, the options, the seeds, the exclusions and rng_seed.
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
} tma_graph_block_t;

typedef struct tma_graph_sample {
    int num_layers;
    tma_graph_block_t blocks[TMA_GRAPH_MAX_LAYERS]; /* blocks[0]: the input layer */
    int64_t *nodes;      /* [num_nodes] ids in the graph; seeds first */
    int64_t num_nodes;   /* == blocks[0].num_src */
    int64_t num_seeds;   /* distinct seeds == blocks[L-1].num_dst */
    int32_t *seed_local; /* [number of seeds asked for]: each one's local id */
} tma_graph_sample_t;

typedef struct tma_graph_sampler_opts {
    int num_layers;                        /* 0..TMA_GRAPH_MAX_LAYERS (0: only deduplicate the seeds) */
    int fanouts[TMA_GRAPH_MAX_LAYERS];     /* per hop from the seeds; -1 = all neighbours */
    tma_graph_norm_t norm;
    int self_loops;                        /* add (i, i) to every row */
    int64_t max_seeds;                     /* most seeds per call (duplicates included) */
    int64_t max_excluded;                  /* most excluded edges per call */
} tma_graph_sampler_opts_t;

/* Worst-case sizes of a sample's arrays for this sampler. */
typedef struct tma_graph_sample_bounds {
    int64_t max_nodes;
    int64_t max_dst[TMA_GRAPH_MAX_LAYERS];   /* per block, in block order */
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
 * nodes, seed_local, and each block's indptr, indices and weights; the
 * counts are filled in.  TMA_ERR_RANGE for an id out of range or too many
 * seeds or exclusions.
 */
tma_status_t tma_graph_sampler_sample(tma_graph_sampler_t *s, const int64_t *seeds, int64_t n_seeds,
                                      const int64_t *excluded, int64_t n_excluded, uint64_t rng_seed,
                                      tma_graph_sample_t *out);

/*
 * The full-neighbourhood block of destination rows [r0, r1) of g, for
 * layer-wise inference: source ids are node ids of g (so num_src is
 * g->num_nodes and ids must fit int32), weights as for the sampler with
 * every neighbour taken.  out->indptr needs r1 - r0 + 1 entries, indices and
 * weights tma_graph_block_full_edges(g, r0, r1, self_loops) entries.
 */
int64_t tma_graph_block_full_edges(const tma_graph_t *g, int64_t r0, int64_t r1, int self_loops);
tma_status_t tma_graph_block_full(const tma_graph_t *g, tma_graph_norm_t norm, int self_loops, int64_t r0,
                                  int64_t r1, tma_graph_block_t *out);

#ifdef __cplusplus
}
#endif
#endif /* TMA_GRAPH_H */
