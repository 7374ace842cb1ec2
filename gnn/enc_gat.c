/*
 * enc_gat.c: the graph attention encoder (GAT, PyG's GATConv with
 * add_self_loops): every layer projects its input for K heads (T = X W),
 * scores each head's source and destination rows against its attention
 * vectors once for all rows, and aggregates each destination's sampled
 * neighbours and itself (the sampler's self loop) weighted by the softmax
 * of the LeakyReLU of the two scores.  Hidden layers concatenate K heads of
 * hidden / K; the last averages K heads of hidden.  The bias follows.
 */
#include "gnn_int.h"

#include <stddef.h>

/* A head's width at layer l. */
static int64_t gat_head_cols(const tma_gnn_config_t *cfg, int l)
{
    return l < cfg->layers - 1 ? cfg->hidden / cfg->heads : cfg->hidden;
}

static int64_t gat_proj_cols(const tma_gnn_config_t *cfg, int l)
{
    return (int64_t)cfg->heads * gat_head_cols(cfg, l);
}

/* The scores after T's rows: a source and a destination score a head. */
static int64_t gat_two_per_head(const tma_gnn_config_t *cfg) { return 2 * (int64_t)cfg->heads; }

static int64_t gat_edge_cols(const tma_gnn_config_t *cfg) { return cfg->heads; }

static tma_status_t gat_params(gnn_walk_t *w, const tma_gnn_config_t *cfg, int l, int64_t in, int64_t out,
                               gnn_enc_params_t *e)
{
    (void)out;
    const int64_t C = gat_head_cols(cfg, l);
    tma_status_t st = gnn_walk_param(w, &e->W, in, cfg->heads * C, "enc", l, "weight");
    st = st ? st : gnn_walk_param(w, &e->att_src, cfg->heads, C, "enc", l, "att_src");
    return st ? st : gnn_walk_param(w, &e->att_dst, cfg->heads, C, "enc", l, "att_dst");
}

/* The scores of T's rows, kept in T's buffer after them. */
static tensor_t gat_scores_view(const tensor_t *T, int64_t K)
{
    return tma_gnn_tensor_view(T, T->rows * T->cols, T->rows, 2 * K);
}

static tma_status_t gat_project(const gnn_enc_params_t *e, tensor_t *T)
{
    tensor_t S = gat_scores_view(T, e->att_src.rows);
    return tma_gnn_op_gat_scores(T, &e->att_src, &e->att_dst, &S);
}

/* A: the attention the forward keeps (num_edges x heads). */
static tma_status_t gat_combine(const gnn_enc_params_t *e, const tma_gnn_block_t *blk, const gnn_src_t *src,
                                int64_t self0, const tensor_t *T, const tensor_t *rel, tensor_t *A, tensor_t *Z)
{
    (void)src, (void)rel;
    tensor_t S = gat_scores_view(T, e->att_src.rows);
    tma_status_t st = tma_gnn_op_gat_aggregate(blk, T, &S, self0, A, Z);
    return st ? st : tma_gnn_op_add_bias(Z, &e->b);
}

/* dT (with the scores' share) and the attention vectors' gradients from the
 * op, then dW = X^T dT and dH = dT W^T.  g_a holds the op's scratch: the
 * edges' gradients, then the scores'. */
static tma_status_t gat_backward(const gnn_enc_params_t *e, gnn_enc_params_t *g, const gnn_layer_bwd_t *b,
                                 const tensor_t *dZ)
{
    const int64_t K = e->att_src.rows, KC = e->W.cols, E = b->blk->num_edges;
    tensor_t T = tma_gnn_tensor_shape(b->T, b->n_src, KC), S = gat_scores_view(&T, K);
    tensor_t alpha = tma_gnn_tensor_shape(b->A, E, K), dT = tma_gnn_tensor_shape(b->g_T, b->n_src, KC);
    tensor_t dE = tma_gnn_tensor_view(b->g_a, 0, E, K), dS = tma_gnn_tensor_view(b->g_a, E * K, b->n_src, 2 * K);
    tma_status_t st = tma_gnn_op_gat_aggregate_bwd(b->blk, &T, &S, &alpha, &e->att_src, &e->att_dst, dZ, &dE, &dS,
                                                   &dT, &g->att_src, &g->att_dst);
    st = st ? st : gnn_src_matmul_grad(b->src, 0, &dT, &g->W);
    if (st == TMA_OK && b->dH)
        st = tma_gnn_op_matmul(&dT, 0, &e->W, 1, 1.0f, 0.0f, b->dH);
    return st;
}

const gnn_encoder_desc_t gnn_encoder_gat = {
    .name = "gat", .neighbours = 1, .always_project = 1, .self_loops = 1, .attention = 1,
    .norm = TMA_GRAPH_NORM_MEAN, .params = gat_params, .combine = gat_combine, .backward = gat_backward,
    .agg_weight = offsetof(gnn_enc_params_t, W), .proj_cols = gat_proj_cols, .proj_tail = gat_two_per_head,
    .project = gat_project, .edge_cols = gat_edge_cols,
};
