/*
 * gnn_int.h: what the trainer and the evaluator share inside gnn/: the
 * parameter views over a block, the encoder layer and decoder forward
 * passes, and hooks that tests use to look inside a trainer.
 */
#ifndef TMA_GNN_INT_H
#define TMA_GNN_INT_H

#include "gnn_backend.h"

#define GNN_MAX_DECODER_LAYERS 16
#define GNN_LN_EPS 1e-5f

/* Views into a parameter (or gradient) block, by role.  Unused views are
 * zeroed (W for SAGE, W_self/W_neigh otherwise, LayerNorm/PReLU of the last
 * encoder layer, PReLU of the last decoder layer). */
typedef struct gnn_enc_params {
    tensor_t W, W_self, W_neigh, b, ln_w, ln_b, prelu;
} gnn_enc_params_t;

typedef struct gnn_dec_params {
    tensor_t W, b, prelu;
} gnn_dec_params_t;

typedef struct gnn_params {
    gnn_enc_params_t enc[TMA_GNN_MAX_LAYERS];
    gnn_dec_params_t dec[GNN_MAX_DECODER_LAYERS];
} gnn_params_t;

/* Binds views of `block` (a tensor of layout->total floats) by the layout's names. */
tma_status_t gnn_params_bind(const tma_gnn_config_t *cfg, const tma_gnn_layout_t *layout, const tensor_t *block,
                             gnn_params_t *p_p);

/* A layer's source rows: node features (layer 0: feat with ids giving the
 * rows) or a dense tensor H of the previous layer's output. */
typedef struct gnn_src {
    tma_gnn_feat_t *feat;
    const tensor_t *ids; /* i64; with feat */
    const tensor_t *H;   /* without feat */
} gnn_src_t;

/* 1 when layer l multiplies by its weight before aggregating (layer 0 of
 * GCN/SAGE on sparse features); otherwise it aggregates first. */
int gnn_layer_project_first(const tma_gnn_config_t *cfg, int l, const tma_gnn_feat_info_t *fi);
/* T = src[0:n] W (W_neigh for SAGE): the projection of project-first layers. */
tma_status_t gnn_layer_project(const tma_gnn_config_t *cfg, const gnn_params_t *P, int l, const gnn_src_t *src,
                               int64_t n, tensor_t *T);
/*
 * Z = the pre-activation output of layer l for the block's destination rows.
 * blk is NULL for the MLP.  The destination rows' own source rows (SAGE and
 * MLP self terms) are src rows [self0, self0 + Z->rows).  T is the
 * projection (project-first) or NULL; A receives the aggregated input
 * (aggregate-first, kept for backward).
 */
tma_status_t gnn_layer_combine(const tma_gnn_config_t *cfg, const gnn_params_t *P, int l,
                               const tma_gnn_block_t *blk, const gnn_src_t *src, int64_t self0, const tensor_t *T,
                               tensor_t *A, tensor_t *Z);
/* H = PReLU(LayerNorm(Z)), keeping the LayerNorm's mean and rstd (H may be Z). */
tma_status_t gnn_layer_activate(const gnn_params_t *P, int l, const tensor_t *Z, tensor_t *mean, tensor_t *rstd,
                                tensor_t *H);
/*
 * The decoder on pairs (hi[p], ti[p]) of rows of R: E[0] = R[hi] ⊙ R[ti];
 * D[k] = E[k] W_k + b_k; E[k+1] = PReLU(D[k]); the logits are D[K-1].
 * E[k+1] may be the same tensor as D[k] when D[k] is not needed later.
 */
tma_status_t gnn_decoder_forward(const tma_gnn_config_t *cfg, const gnn_params_t *P, const tensor_t *R,
                                 const tensor_t *hi, const tensor_t *ti, tensor_t *E, tensor_t *D);

/* ------------------------------------------------------------------ trainer hooks (tests) */

/* The last batch a trainer sampled (host view, valid until the next step):
 * which graph, the sample, and the decoder pairs (2B of them: B positives
 * then B negatives, as local ids of the sample's seeds). */
typedef struct gnn_batch_view {
    int graph_index;
    const tma_graph_sample_t *sample;
    int64_t num_pairs;
    const int32_t *head, *tail;
    const int64_t *seeds; /* the 3B seeds asked for: u..., v..., negative tails... */
} gnn_batch_view_t;

void gnn_trainer_last_batch(const tma_gnn_trainer_t *tr, gnn_batch_view_t *view_p);
/* Forward and backward again on the last batch with the current parameters. */
tma_status_t gnn_trainer_recompute(tma_gnn_trainer_t *tr, double *loss_p);
/* Creates a trainer on a named backend ("cpu", "ref", ...). */
tma_status_t gnn_trainer_create_on(const char *device, const tma_gnn_config_t *cfg, tma_graph_t *const *graphs,
                                   int num_graphs, tma_gnn_trainer_t **tr_p);
/* Evaluator hooks: the chunk size of layer-wise inference (tests force
 * several chunks on small graphs), and the final embeddings of all nodes
 * (N x hidden floats, host) for `params`. */
void gnn_evaluator_set_chunk_rows(tma_gnn_evaluator_t *ev, int64_t rows);
/* Creates an evaluator on a named backend. */
tma_status_t gnn_evaluator_create_on(const char *device, const tma_gnn_config_t *cfg, const tma_graph_t *g,
                                     tma_gnn_evaluator_t **ev_p);

#endif
