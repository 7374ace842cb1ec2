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

/* W is the aggregate's weight (its gradient gW), Ws the self weight or NULL. */
static tma_status_t aggregate_backward(const tensor_t *W, tensor_t *gW, const tensor_t *Ws, tensor_t *gWs,
                                       const gnn_layer_bwd_t *b, const tensor_t *dZ)
{
    const int64_t H = dZ->cols;
    tma_status_t st;
    if (b->concat) {
        /* [dW_self; dW_neigh] = [X_dst | A]^T dZ (the forward's product);
         * layer 0: no input gradient for features */
        tensor_t XA = tma_gnn_tensor_shape(b->A, b->n_dst, 2 * b->d_in);
        tensor_t dW = tma_gnn_tensor_view(gWs, 0, 2 * b->d_in, H);
        return tma_gnn_op_matmul(&XA, 1, dZ, 0, 1.0f, 0.0f, &dW);
    }
    if (b->project_first) {
        /* dT = A^T dZ, dW = X^T dT, dX = dT W^T */
        tensor_t dT = tma_gnn_tensor_shape(b->g_src, b->n_src, H);
        st = tma_gnn_op_spmm_t(b->blk, dZ, &dT);
        st = st ? st : gnn_src_matmul_grad(b->src, 0, &dT, gW);
        if (st == TMA_OK && b->dH)
            st = tma_gnn_op_matmul(&dT, 0, W, 1, 1.0f, 0.0f, b->dH);
    } else {
        tensor_t A = tma_gnn_tensor_shape(b->A, b->n_dst, b->d_in);
        st = tma_gnn_op_matmul(&A, 1, dZ, 0, 1.0f, 0.0f, gW);
        if (st == TMA_OK && b->dH) {
            tensor_t dA = tma_gnn_tensor_shape(b->g_a, b->n_dst, b->d_in);
            st = tma_gnn_op_matmul(dZ, 0, W, 1, 1.0f, 0.0f, &dA);
            st = st ? st : tma_gnn_op_spmm_t(b->blk, &dA, b->dH);
        }
    }
    if (st == TMA_OK && Ws) {
        st = gnn_src_matmul_grad(b->src, 0, dZ, gWs);
        if (st == TMA_OK && b->dH) {
            tensor_t dHself = tma_gnn_tensor_view(b->dH, 0, b->n_dst, b->dH->cols);
            st = tma_gnn_op_matmul(dZ, 0, Ws, 1, 1.0f, 1.0f, &dHself);
        }
    }
    return st;
}

static tma_status_t gcn_backward(const gnn_enc_params_t *e, gnn_enc_params_t *g, const gnn_layer_bwd_t *b,
                                 const tensor_t *dZ)
{
    return aggregate_backward(&e->W, &g->W, NULL, NULL, b, dZ);
}

static tma_status_t sage_backward(const gnn_enc_params_t *e, gnn_enc_params_t *g, const gnn_layer_bwd_t *b,
                                  const tensor_t *dZ)
{
    return aggregate_backward(&e->W_neigh, &g->W_neigh, &e->W_self, &g->W_self, b, dZ);
}

const gnn_encoder_desc_t gnn_encoder_gcn = {
    .name = "gcn", .neighbours = 1, .whole_graph = 1, .self_loops = 1, .norm = TMA_GRAPH_NORM_GCN,
    .params = gcn_params, .combine = gcn_combine, .backward = gcn_backward,
    .agg_weight = offsetof(gnn_enc_params_t, W),
};

const gnn_encoder_desc_t gnn_encoder_sage = {
    .name = "sage", .neighbours = 1, .whole_graph = 1, .concat_self = 1, .norm = TMA_GRAPH_NORM_MEAN,
    .params = sage_params, .combine = sage_combine, .backward = sage_backward,
    .agg_weight = offsetof(gnn_enc_params_t, W_neigh),
    .self_term = 1,
};
