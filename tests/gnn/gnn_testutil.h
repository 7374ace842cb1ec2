/*
 * gnn_testutil.h: small planted-partition graphs for the GNN tests: k
 * communities, edges inside a community with probability `homophily`,
 * features that carry the community (dense with Gaussian noise, or sparse
 * binary), a seeded train/validation/test split and fixed negatives that
 * obey the .tmag invariants (tma_graph_validate passes).
 */
#ifndef TMA_GNN_TESTUTIL_H
#define TMA_GNN_TESTUTIL_H

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

#endif
