/*
 * model.c: the forward pieces that the trainer and the evaluator share:
 * binding parameter views, one encoder layer (GCN, GraphSAGE-mean, MLP)
 * on a block, its LayerNorm + PReLU, and the decoder.
 *
 * A GCN or SAGE layer is a weighted sparse product with the block followed
 * by a dense product, done in whichever order is cheaper: on sparse input
 * features (layer 0) the features are projected first (T = X W costs
 * nnz(X) * out) and T is aggregated; otherwise the inputs are aggregated
 * first and the aggregate multiplied once per destination row.  Both give
 * the same function.
 */
#include "gnn_int.h"

#include <stdio.h>
#include <string.h>

#define COMP "gnn"

static tma_status_t find_param(const tma_gnn_layout_t *lay, const tensor_t *block, const char *name, tensor_t *t)
{
    for (int i = 0; i < lay->count; i++) {
        const tma_gnn_param_info_t *p = &lay->params[i];
        if (strcmp(p->name, name) == 0) {
            *t = tma_gnn_tensor_view(block, p->offset, p->rows, p->cols);
            return TMA_OK;
        }
    }
    tma_log_error(COMP, "parameter %s is missing from the layout", name);
    return TMA_ERR_INTERNAL;
}

tma_status_t gnn_params_bind(const tma_gnn_config_t *cfg, const tma_gnn_layout_t *lay, const tensor_t *block,
                             gnn_params_t *p_p)
{
    gnn_params_t p;
    memset(&p, 0, sizeof p);
    char name[32];
    tma_status_t st = TMA_OK;
    for (int t = 0; t < cfg->num_node_types && st == TMA_OK; t++) {
        snprintf(name, sizeof name, "in.%d.weight", t);
        st = find_param(lay, block, name, &p.in_W[t]);
        snprintf(name, sizeof name, "in.%d.bias", t);
        st = st ? st : find_param(lay, block, name, &p.in_b[t]);
    }
    for (int l = 0; l < cfg->layers && st == TMA_OK; l++) {
        gnn_enc_params_t *e = &p.enc[l];
        if (cfg->encoder == TMA_GNN_ENCODER_RGCN) {
            snprintf(name, sizeof name, "enc.%d.bases", l);
            st = find_param(lay, block, name, &e->V);
            snprintf(name, sizeof name, "enc.%d.coef", l);
            st = st ? st : find_param(lay, block, name, &e->coef);
            snprintf(name, sizeof name, "enc.%d.weight_self", l);
            st = st ? st : find_param(lay, block, name, &e->W_self);
        } else if (cfg->encoder == TMA_GNN_ENCODER_SAGE) {
            snprintf(name, sizeof name, "enc.%d.weight_self", l);
            st = find_param(lay, block, name, &e->W_self);
            snprintf(name, sizeof name, "enc.%d.weight_neigh", l);
            st = st ? st : find_param(lay, block, name, &e->W_neigh);
        } else {
            snprintf(name, sizeof name, "enc.%d.weight", l);
            st = find_param(lay, block, name, &e->W);
        }
        snprintf(name, sizeof name, "enc.%d.bias", l);
        st = st ? st : find_param(lay, block, name, &e->b);
        if (l < cfg->layers - 1) {
            snprintf(name, sizeof name, "enc.%d.ln_weight", l);
            st = st ? st : find_param(lay, block, name, &e->ln_w);
            snprintf(name, sizeof name, "enc.%d.ln_bias", l);
            st = st ? st : find_param(lay, block, name, &e->ln_b);
            snprintf(name, sizeof name, "enc.%d.prelu", l);
            st = st ? st : find_param(lay, block, name, &e->prelu);
        }
    }
    if (st == TMA_OK && cfg->decoder == TMA_GNN_DECODER_DISTMULT)
        st = find_param(lay, block, "dec.relation", &p.rel_diag);
    for (int k = 0; k < cfg->decoder_layers && st == TMA_OK && cfg->decoder == TMA_GNN_DECODER_MLP; k++) {
        gnn_dec_params_t *d = &p.dec[k];
        snprintf(name, sizeof name, "dec.%d.weight", k);
        st = find_param(lay, block, name, &d->W);
        snprintf(name, sizeof name, "dec.%d.bias", k);
        st = st ? st : find_param(lay, block, name, &d->b);
        if (k < cfg->decoder_layers - 1) {
            snprintf(name, sizeof name, "dec.%d.prelu", k);
            st = st ? st : find_param(lay, block, name, &d->prelu);
        }
    }
    if (st == TMA_OK)
        *p_p = p;
    return st;
}

int gnn_layer_project_first(const tma_gnn_config_t *cfg, int l, const tma_gnn_feat_info_t *fi)
{
    if (cfg->encoder == TMA_GNN_ENCODER_RGCN)
        return 1;
    return cfg->encoder != TMA_GNN_ENCODER_MLP && l == 0 && fi && fi->sparse;
}

/* out = src[r0 : r0 + out->rows] W + beta out */
static tma_status_t src_matmul(const gnn_src_t *src, int64_t r0, const tensor_t *W, float beta, tensor_t *out)
{
    if (src->feat) {
        tensor_t ids = tma_gnn_tensor_view(src->ids, r0, out->rows, 1);
        return tma_gnn_op_feat_matmul(src->feat, &ids, W, beta, out);
    }
    tensor_t h = tma_gnn_tensor_view(src->H, r0 * src->H->cols, out->rows, src->H->cols);
    return tma_gnn_op_matmul(&h, 0, W, 0, 1.0f, beta, out);
}

/* A = the block's weighted sum of src rows */
static tma_status_t src_aggregate(const gnn_src_t *src, const tma_gnn_block_t *blk, tensor_t *A)
{
    if (src->feat)
        return tma_gnn_op_feat_aggregate(src->feat, src->ids, blk, A);
    return tma_gnn_op_spmm(blk, src->H, A);
}

tma_status_t gnn_layer_project(const tma_gnn_config_t *cfg, const gnn_params_t *P, int l, const gnn_src_t *src,
                               int64_t n, tensor_t *T)
{
    const gnn_enc_params_t *e = &P->enc[l];
    const tensor_t *W = cfg->encoder == TMA_GNN_ENCODER_SAGE ? &e->W_neigh
                        : cfg->encoder == TMA_GNN_ENCODER_RGCN ? &e->V
                                                               : &e->W;
    tensor_t t = tma_gnn_tensor_shape(T, n, W->cols);
    return src_matmul(src, 0, W, 0.0f, &t);
}

tma_status_t gnn_layer_combine(const tma_gnn_config_t *cfg, const gnn_params_t *P, int l,
                               const tma_gnn_block_t *blk, const gnn_src_t *src, int64_t self0, const tensor_t *T,
                               const tensor_t *rel, tensor_t *A, tensor_t *Z)
{
    const gnn_enc_params_t *e = &P->enc[l];
    tma_status_t st = TMA_OK;
    switch (cfg->encoder) {
    case TMA_GNN_ENCODER_GCN:
    case TMA_GNN_ENCODER_SAGE: {
        const tensor_t *W = cfg->encoder == TMA_GNN_ENCODER_SAGE ? &e->W_neigh : &e->W;
        if (T) {
            st = tma_gnn_op_spmm(blk, T, Z);
            if (st == TMA_OK && cfg->encoder == TMA_GNN_ENCODER_SAGE)
                st = src_matmul(src, self0, &e->W_self, 1.0f, Z);
            break;
        }
        /* The bias goes in with the first product. */
        st = src_aggregate(src, blk, A);
        if (st == TMA_OK)
            st = tma_gnn_op_matmul_bias(A, W, &e->b, Z);
        if (st == TMA_OK && cfg->encoder == TMA_GNN_ENCODER_SAGE)
            st = src_matmul(src, self0, &e->W_self, 1.0f, Z);
        return st;
    }
    case TMA_GNN_ENCODER_MLP:
        st = src_matmul(src, self0, &e->W, 0.0f, Z);
        break;
    case TMA_GNN_ENCODER_RGCN:
        /* T = src V (all bases); the aggregation mixes them per edge by its relation. */
        st = tma_gnn_op_rgcn_aggregate(blk, rel, T, &e->coef, Z);
        if (st == TMA_OK)
            st = src_matmul(src, self0, &e->W_self, 1.0f, Z);
        break;
    }
    if (st == TMA_OK)
        st = tma_gnn_op_add_bias(Z, &e->b);
    return st;
}

tma_status_t gnn_layer_activate(const gnn_params_t *P, int l, const tensor_t *Z, tensor_t *mean, tensor_t *rstd,
                                tensor_t *H)
{
    const gnn_enc_params_t *e = &P->enc[l];
    return tma_gnn_op_ln_prelu_fwd(Z, &e->ln_w, &e->ln_b, &e->prelu, GNN_LN_EPS, H, mean, rstd);
}

tma_status_t gnn_decoder_forward(const tma_gnn_config_t *cfg, const gnn_params_t *P, const tensor_t *R,
                                 const tensor_t *hi, const tensor_t *ti, const tensor_t *rel, tensor_t *E,
                                 tensor_t *D)
{
    if (cfg->decoder == TMA_GNN_DECODER_DISTMULT)
        return tma_gnn_op_distmult(R, hi, ti, rel, &P->rel_diag, &D[0]);
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
