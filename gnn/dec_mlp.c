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

/* Layer by layer from the logits back to E[0] = R[hi] ⊙ R[ti] (dE ping-pongs
 * between gd[0] and gd[1]), then into R's rows. */
static tma_status_t mlp_backward(const tma_gnn_config_t *cfg, const gnn_params_t *P, gnn_params_t *G,
                                 const tensor_t *R, const tensor_t *hi, const tensor_t *ti, const tensor_t *rel,
                                 const tensor_t *E, const tensor_t *D, tensor_t *gd, tensor_t *dlogits, tensor_t *dZ)
{
    (void)rel;
    const int64_t np = hi->rows;
    tensor_t dD = tma_gnn_tensor_shape(dlogits, np, 1), dE = dD;
    tma_status_t st = TMA_OK;
    for (int k = cfg->decoder_layers - 1; k >= 0 && st == TMA_OK; k--) {
        const gnn_dec_params_t *w = &P->dec[k];
        gnn_dec_params_t *gw = &G->dec[k];
        tensor_t Ek = tma_gnn_tensor_shape(&E[k], np, w->W.rows);
        dE = tma_gnn_tensor_shape(&gd[k & 1], np, w->W.rows);
        st = tma_gnn_op_matmul(&Ek, 1, &dD, 0, 1.0f, 0.0f, &gw->W);
        st = st ? st : tma_gnn_op_colsum(&dD, &gw->b);
        st = st ? st : tma_gnn_op_matmul(&dD, 0, &w->W, 1, 1.0f, 0.0f, &dE);
        if (st == TMA_OK && k > 0) {
            /* Through the PReLU after layer k-1, in place. */
            tensor_t Dk1 = tma_gnn_tensor_shape(&D[k - 1], np, w->W.rows);
            st = tma_gnn_op_prelu_bwd(&dE, &Dk1, &P->dec[k - 1].prelu, &dE, &G->dec[k - 1].prelu);
            dD = dE;
        }
    }
    return st ? st : tma_gnn_op_pair_mul_bwd(&dE, R, hi, ti, dZ);
}

const gnn_decoder_desc_t gnn_decoder_mlp = {
    .name = "mlp", .params = mlp_params, .forward = mlp_forward, .backward = mlp_backward,
};
