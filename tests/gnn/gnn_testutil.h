/*
 * gnn_testutil.h: small planted-partition graphs for the GNN tests: k
 * communities, edges inside a community with probability `homophily`,
 * features that carry the community (dense with Gaussian noise, or sparse
 * binary), a seeded train/validation/test split and fixed negatives that
 * obey the .tmag invariants (tma_graph_validate passes).
 */
#ifndef TMA_GNN_TESTUTIL_H
#define TMA_GNN_TESTUTIL_H

#include "tma_gnn.h"
#include "tma_graph.h"

typedef struct gnn_test_graph_opts {
    int64_t nodes;
    int communities;
    double avg_degree;
    double homophily;
    int feature_dim;
    int sparse;        /* binary features with ~5% density */
    int64_t val, test; /* evaluation edges */
    int negatives;
    uint64_t seed;
} gnn_test_graph_opts_t;

/* Fills sensible defaults: 300 nodes, 4 communities, degree 8, ... */
void gnn_test_graph_defaults(gnn_test_graph_opts_t *o);
/* Builds the graph (exits the test on failure). */
tma_graph_t *gnn_test_graph(const gnn_test_graph_opts_t *o);

/* gnn_test_graph of `nodes` nodes (the other options its defaults) written
 * to DIR/g.tmag and partitioned at random into `shards` shards with their
 * inference files in DIR/part; its partition info.  Exits 99 on failure. */
tma_partition_info_t *gnn_test_partition(const char *dir, int64_t nodes, int32_t shards, uint64_t seed);

/* A typed SBM (tma_graph_gen_sbm_typed): `nodes` nodes in `classes`
 * classes (homophily 0.9, degree 10), features the class centroid plus
 * noise * N(0, I), `types` node types and `relations` relations; val and
 * test edges with `negatives` negatives each.  Exits the test on failure. */
tma_graph_t *gnn_test_typed_graph(int64_t nodes, int classes, double noise, int types, int relations,
                                  int feature_dim, int64_t val, int negatives, uint64_t seed);

/* A small training config: the defaults with encoder enc, widths hidden and
 * decoder_hidden, batch_size, the two layers' fanouts f0 and f1, lr 0.01,
 * 2 threads and the seed. */
tma_gnn_config_t gnn_test_config(tma_gnn_encoder_t enc, int hidden, int decoder_hidden, int batch_size, int f0, int f1,
                                 uint64_t seed);

/* The transpose of a block's CSR (n_dst rows into n_src sources), grouped by
 * source, each source's edges in destination-row order: tp [n_src + 1],
 * ti (destination rows), and where given the edges' weights w into tw and
 * relation ids rel into trel (NULL skips either). */
void gnn_test_transpose(int64_t n_dst, int64_t n_src, const int32_t *ip, const int32_t *ix, const float *w,
                        const int32_t *rel, int32_t *tp, int32_t *ti, float *tw, int32_t *trel);
/* Zeroes *s and gives it the buffers of a sample of sp (as its bounds say)
 * with `layers` layers and up to max_seeds seeds, the transposed views
 * included; with `typed` also the node types and the edges' relation ids.
 * Free with gnn_test_sample_free. */
void gnn_test_sample_alloc(const tma_graph_sampler_t *sp, int layers, int64_t max_seeds, int typed,
                           tma_graph_sample_t *s);
void gnn_test_sample_free(tma_graph_sample_t *s);
/* Writes bytes to DIR/NAME (exits 99 when it cannot). */
void gnn_test_dump(const char *dir, const char *name, const void *data, size_t bytes);
/* Writes o as cJSON_Print prints it to DIR/NAME (exits 99 when it cannot). */
void gnn_test_dump_json(const char *dir, const char *name, const cJSON *o);

#endif
