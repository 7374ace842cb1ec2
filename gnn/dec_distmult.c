/*
 * dec_distmult.c: the DistMult decoder: the logit of a pair is
 * sum_k R[hi][k] w_rel[k] R[ti][k], one diagonal per relation id.
 */
#include "gnn_int.h"

static tma_status_t distmult_params(gnn_walk_t *w, const tma_gnn_config_t *cfg, int64_t in, gnn_params_t *p)
{
    return gnn_walk_param(w, &p->rel_diag, cfg->num_rel_ids, in, "dec", -1, "relation");
}

static tma_status_t distmult_forward(const tma_gnn_config_t *cfg, const gnn_params_t *P, const tensor_t *R,
                                     const tensor_t *hi, const tensor_t *ti, const tensor_t *rel, tensor_t *E,
                                     tensor_t *D)
{
    (void)cfg, (void)E;
    return tma_gnn_op_distmult(R, hi, ti, rel, &P->rel_diag, &D[0]);
}

static tma_status_t distmult_backward(const tma_gnn_config_t *cfg, const gnn_params_t *P, gnn_params_t *G,
                                      const tensor_t *R, const tensor_t *hi, const tensor_t *ti, const tensor_t *rel,
                                      const tensor_t *E, const tensor_t *D, tensor_t *gd, tensor_t *dlogits,
                                      tensor_t *dZ)
{
    (void)cfg, (void)E, (void)D, (void)gd;
    tensor_t dD = tma_gnn_tensor_shape(dlogits, hi->rows, 1);
    return tma_gnn_op_distmult_bwd(&dD, R, hi, ti, rel, &P->rel_diag, dZ, &G->rel_diag);
}

const gnn_decoder_desc_t gnn_decoder_distmult = {
    .name = "distmult", .relational = 1, .single = 1, .params = distmult_params, .forward = distmult_forward,
    .backward = distmult_backward,
};
