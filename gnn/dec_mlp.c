/*
 * dec_mlp.c: the MLP decoder: E[0] = R[hi] ⊙ R[ti]; D[k] = E[k] W_k + b_k;
 * E[k+1] = PReLU(D[k]); the logits are D[K-1].
 */
#include "gnn_int.h"

static tma_status_t mlp_params(gnn_walk_t *w, const tma_gnn_config_t *cfg, int64_t in, gnn_params_t *p)
{
    tma_status_t st = TMA_OK;
    for (int k = 0; k < cfg->decoder_layers && st == TMA_OK; k++) {
        gnn_dec_params_t *d = &p->dec[k];
        const int64_t out = k == cfg->decoder_layers - 1 ? 1 : cfg->decoder_hidden;
        st = gnn_walk_param(w, &d->W, in, out, "dec", k, "weight");
        st = st ? st : gnn_walk_param(w, &d->b, 1, out, "dec", k, "bias");
        if (k < cfg->decoder_layers - 1)
            st = st ? st : gnn_walk_param(w, &d->prelu, 1, 1, "dec", k, "prelu");
        in = out;
    }
    return st;
}

static tma_status_t mlp_forward(const tma_gnn_config_t *cfg, const gnn_params_t *P, const tensor_t *R,
                                const tensor_t *hi, const tensor_t *ti, const tensor_t *rel, tensor_t *E, tensor_t *D)
{
    (void)rel;
    tma_status_t st = tma_gnn_op_pair_mul(R, hi, ti, &E[0]);
    for (int k = 0; k < cfg->decoder_layers && st == TMA_OK; k++) {
        const gnn_dec_params_t *d = &P->dec[k];
        st = tma_gnn_op_matmul(&E[k], 0, &d->W, 0, 1.0f, 0.0f, &D[k]);
        if (st == TMA_OK && k < cfg->decoder_layers - 1)
            st = tma_gnn_op_bias_prelu(&D[k], &d->b, &d->prelu, &E[k + 1]);
        else if (st == TMA_OK)
            st = tma_gnn_op_add_bias(&D[k], &d->b);
    }
    return st;
}

const gnn_decoder_desc_t gnn_decoder_mlp = {
    .name = "mlp", .params = mlp_params, .forward = mlp_forward,
};
