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

static tma_status_t rgcn_combine(const gnn_enc_params_t *e, const tma_gnn_block_t *blk, const gnn_src_t *src,
                                 int64_t self0, const tensor_t *T, const tensor_t *rel, tensor_t *A, tensor_t *Z)
{
    (void)A;
    tma_status_t st = tma_gnn_op_rgcn_aggregate(blk, rel, T, &e->coef, Z);
    if (st == TMA_OK)
        st = gnn_src_matmul(src, self0, &e->W_self, 1.0f, Z);
    return st ? st : tma_gnn_op_add_bias(Z, &e->b);
}

const gnn_encoder_desc_t gnn_encoder_rgcn = {
    .name = "rgcn", .neighbours = 1, .relational = 1, .node_types = 1, .always_project = 1,
    .norm = TMA_GRAPH_NORM_MEAN, .params = rgcn_params, .combine = rgcn_combine,
    .agg_weight = offsetof(gnn_enc_params_t, V), .self_term = 1,
};
