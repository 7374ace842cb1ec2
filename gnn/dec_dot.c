/*
 * dec_dot.c: the dot-product decoder: the logit of a pair is
 * sum_k R[hi][k] R[ti][k].  No parameters; it runs as the DistMult op with
 * every diagonal ones (rel and Wr NULL), so every backend has it.
 */
#include "gnn_int.h"

static tma_status_t dot_params(gnn_walk_t *w, const tma_gnn_config_t *cfg, int64_t in, gnn_params_t *p)
{
    (void)w, (void)cfg, (void)in, (void)p;
    return TMA_OK;
}

static tma_status_t dot_forward(const tma_gnn_config_t *cfg, const gnn_params_t *P, const tensor_t *R,
                                const tensor_t *hi, const tensor_t *ti, const tensor_t *rel, tensor_t *E, tensor_t *D)
{
    (void)cfg, (void)P, (void)rel, (void)E;
    return tma_gnn_op_distmult(R, hi, ti, NULL, NULL, &D[0]);
}

static tma_status_t dot_backward(const tma_gnn_config_t *cfg, const gnn_params_t *P, gnn_params_t *G,
                                 const tensor_t *R, const tensor_t *hi, const tensor_t *ti, const tensor_t *rel,
                                 const tensor_t *E, const tensor_t *D, tensor_t *gd, tensor_t *dlogits, tensor_t *dZ)
{
    (void)cfg, (void)P, (void)G, (void)rel, (void)E, (void)D, (void)gd;
    tensor_t dD = tma_gnn_tensor_shape(dlogits, hi->rows, 1);
    return tma_gnn_op_distmult_bwd(&dD, R, hi, ti, NULL, NULL, dZ, NULL);
}

const gnn_decoder_desc_t gnn_decoder_dot = {
    .name = "dot", .single = 1, .params = dot_params, .forward = dot_forward, .backward = dot_backward,
};
