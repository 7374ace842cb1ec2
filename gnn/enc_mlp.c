/*
 * enc_mlp.c: the MLP encoder: Z = X W + b on each node's own features, no
 * neighbours (the baseline that tells what the graph adds).
 */
#include "gnn_int.h"

#include <stddef.h>

static tma_status_t mlp_params(gnn_walk_t *w, const tma_gnn_config_t *cfg, int l, int64_t in, int64_t out,
                               gnn_enc_params_t *e)
{
    (void)cfg;
    return gnn_walk_param(w, &e->W, in, out, "enc", l, "weight");
}

static tma_status_t mlp_combine(const gnn_enc_params_t *e, const tma_gnn_block_t *blk, const gnn_src_t *src,
                                int64_t self0, const tensor_t *T, const tensor_t *rel, tensor_t *A, tensor_t *Z)
{
    (void)blk, (void)T, (void)rel, (void)A;
    tma_status_t st = gnn_src_matmul(src, self0, &e->W, 0.0f, Z);
    return st ? st : tma_gnn_op_add_bias(Z, &e->b);
}

static tma_status_t mlp_backward(const gnn_enc_params_t *e, gnn_enc_params_t *g, const gnn_layer_bwd_t *b,
                                 const tensor_t *dZ)
{
    tma_status_t st = gnn_src_matmul_grad(b->src, 0, dZ, &g->W);
    if (st == TMA_OK && b->dH)
        st = tma_gnn_op_matmul(dZ, 0, &e->W, 1, 1.0f, 0.0f, b->dH);
    return st;
}

const gnn_encoder_desc_t gnn_encoder_mlp = {
    .name = "mlp", .norm = TMA_GRAPH_NORM_MEAN, .params = mlp_params, .combine = mlp_combine,
    .backward = mlp_backward, .agg_weight = offsetof(gnn_enc_params_t, W),
};
