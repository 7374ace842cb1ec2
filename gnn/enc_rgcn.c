/*
 * enc_rgcn.c: the relational GCN encoder with basis decomposition (typed
 * graphs): every layer projects its input onto all bases (T = X V, n x
 * bases*hidden) and the aggregation mixes them per edge by the edge's
 * relation (hetero.c's ops), plus the self term X_dst W_self.
 */
#include "gnn_int.h"

#include <stddef.h>

static tma_status_t rgcn_params(gnn_walk_t *w, const tma_gnn_config_t *cfg, int l, int64_t in, int64_t out,
                                gnn_enc_params_t *e)
{
    tma_status_t st = gnn_walk_param(w, &e->V, in, (int64_t)cfg->bases * out, "enc", l, "bases");
    st = st ? st : gnn_walk_param(w, &e->coef, cfg->num_rel_ids, cfg->bases, "enc", l, "coef");
    return st ? st : gnn_walk_param(w, &e->W_self, in, out, "enc", l, "weight_self");
}

static int64_t rgcn_proj_cols(const tma_gnn_config_t *cfg, int l)
{
    (void)l;
    return (int64_t)cfg->bases * cfg->hidden;
}

static tma_status_t rgcn_combine(const gnn_enc_params_t *e, const tma_gnn_block_t *blk, const gnn_src_t *src,
                                 int64_t self0, const tensor_t *T, const tensor_t *rel, tensor_t *A, tensor_t *Z)
{
    (void)A;
    tma_status_t st = tma_gnn_op_rgcn_aggregate(blk, rel, T, &e->coef, Z);
    if (st == TMA_OK)
        st = gnn_src_matmul(src, self0, &e->W_self, 1.0f, Z);
    return st ? st : tma_gnn_op_add_bias(Z, &e->b);
}

/* dT and dcoef from the aggregation (scattered: no transpose), then
 * dV = X^T dT, dW_self = X_dst^T dZ, dH = dT V^T + dZ W_self^T. */
static tma_status_t rgcn_backward(const gnn_enc_params_t *e, gnn_enc_params_t *g, const gnn_layer_bwd_t *b,
                                  const tensor_t *dZ)
{
    const int64_t BH = (int64_t)b->cfg->bases * b->cfg->hidden;
    tensor_t T = tma_gnn_tensor_shape(b->T, b->n_src, BH), dT = tma_gnn_tensor_shape(b->g_T, b->n_src, BH);
    tensor_t rel = tma_gnn_tensor_shape(b->rel, b->blk->num_edges, 1);
    tma_status_t st = tma_gnn_op_rgcn_aggregate_bwd(b->blk, &rel, NULL, dZ, &T, &e->coef, &dT, &g->coef);
    st = st ? st : gnn_src_matmul_grad(b->src, 0, &dT, &g->V);
    st = st ? st : gnn_src_matmul_grad(b->src, 0, dZ, &g->W_self);
    if (st == TMA_OK && b->dH) {
        tensor_t dHself = tma_gnn_tensor_view(b->dH, 0, b->n_dst, b->dH->cols);
        st = tma_gnn_op_matmul(&dT, 0, &e->V, 1, 1.0f, 0.0f, b->dH);
        st = st ? st : tma_gnn_op_matmul(dZ, 0, &e->W_self, 1, 1.0f, 1.0f, &dHself);
    }
    return st;
}

const gnn_encoder_desc_t gnn_encoder_rgcn = {
    .name = "rgcn", .neighbours = 1, .relational = 1, .node_types = 1, .always_project = 1,
    .norm = TMA_GRAPH_NORM_MEAN, .params = rgcn_params, .combine = rgcn_combine,
    .backward = rgcn_backward, .agg_weight = offsetof(gnn_enc_params_t, V), .self_term = 1,
    .proj_cols = rgcn_proj_cols,
};
