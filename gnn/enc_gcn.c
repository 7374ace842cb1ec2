/*
 * enc_gcn.c: the GCN and GraphSAGE-mean encoders.  A layer is a weighted
 * sparse product with the block and a dense product, in whichever order
 * is cheaper (project-first: T = X W then aggregate T; otherwise aggregate
 * X once and multiply); SAGE adds the self term X_dst W_self.
 */
#include "gnn_int.h"

#include <stddef.h>

static tma_status_t gcn_params(gnn_walk_t *w, const tma_gnn_config_t *cfg, int l, int64_t in, int64_t out,
                               gnn_enc_params_t *e)
{
    (void)cfg;
    return gnn_walk_param(w, &e->W, in, out, "enc", l, "weight");
}

static tma_status_t sage_params(gnn_walk_t *w, const tma_gnn_config_t *cfg, int l, int64_t in, int64_t out,
                                gnn_enc_params_t *e)
{
    (void)cfg;
    tma_status_t st = gnn_walk_param(w, &e->W_self, in, out, "enc", l, "weight_self");
    return st ? st : gnn_walk_param(w, &e->W_neigh, in, out, "enc", l, "weight_neigh");
}

/* W is the aggregate's weight, Ws the self weight or NULL. */
static tma_status_t aggregate_combine(const gnn_enc_params_t *e, const tensor_t *W, const tensor_t *Ws,
                                      const tma_gnn_block_t *blk, const gnn_src_t *src, int64_t self0,
                                      const tensor_t *T, tensor_t *A, tensor_t *Z)
{
    tma_status_t st;
    if (T) {
        st = tma_gnn_op_spmm(blk, T, Z);
        if (st == TMA_OK && Ws)
            st = gnn_src_matmul(src, self0, Ws, 1.0f, Z);
        return st ? st : tma_gnn_op_add_bias(Z, &e->b);
    }
    /* The bias goes in with the first product. */
    st = gnn_src_aggregate(src, blk, A);
    if (st == TMA_OK)
        st = tma_gnn_op_matmul_bias(A, W, &e->b, Z);
    if (st == TMA_OK && Ws)
        st = gnn_src_matmul(src, self0, Ws, 1.0f, Z);
    return st;
}

static tma_status_t gcn_combine(const gnn_enc_params_t *e, const tma_gnn_block_t *blk, const gnn_src_t *src,
                                int64_t self0, const tensor_t *T, const tensor_t *rel, tensor_t *A, tensor_t *Z)
{
    (void)rel;
    return aggregate_combine(e, &e->W, NULL, blk, src, self0, T, A, Z);
}

static tma_status_t sage_combine(const gnn_enc_params_t *e, const tma_gnn_block_t *blk, const gnn_src_t *src,
                                 int64_t self0, const tensor_t *T, const tensor_t *rel, tensor_t *A, tensor_t *Z)
{
    (void)rel;
    return aggregate_combine(e, &e->W_neigh, &e->W_self, blk, src, self0, T, A, Z);
}

const gnn_encoder_desc_t gnn_encoder_gcn = {
    .name = "gcn", .neighbours = 1, .whole_graph = 1, .self_loops = 1, .norm = TMA_GRAPH_NORM_GCN,
    .params = gcn_params, .combine = gcn_combine, .agg_weight = offsetof(gnn_enc_params_t, W),
};

const gnn_encoder_desc_t gnn_encoder_sage = {
    .name = "sage", .neighbours = 1, .whole_graph = 1, .concat_self = 1, .norm = TMA_GRAPH_NORM_MEAN,
    .params = sage_params, .combine = sage_combine, .agg_weight = offsetof(gnn_enc_params_t, W_neigh),
    .self_term = 1,
};
