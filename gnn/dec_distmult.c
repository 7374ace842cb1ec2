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

const gnn_decoder_desc_t gnn_decoder_distmult = {
    .name = "distmult", .relational = 1, .single = 1, .params = distmult_params, .forward = distmult_forward,
};
