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

tma_status_t gnn_walk_param(gnn_walk_t *w, tensor_t *view, int64_t rows, int64_t cols, const char *part, int i,
                            const char *role)
{
    char name[sizeof w->bind->params[0].name];
    if (i < 0)
        snprintf(name, sizeof name, "%s.%s", part, role);
    else
        snprintf(name, sizeof name, "%s.%d.%s", part, i, role);
    if (w->lay) {
        tma_gnn_layout_t *lay = w->lay;
        if (lay->count >= TMA_GNN_MAX_PARAMS)
            return TMA_ERR_INTERNAL;
        tma_gnn_param_info_t *p = &lay->params[lay->count++];
        snprintf(p->name, sizeof p->name, "%s", name);
        p->rows = rows;
        p->cols = cols;
        p->offset = lay->total;
        lay->total += (rows * cols + 15) / 16 * 16;
        return TMA_OK;
    }
    const tma_gnn_param_info_t *p = w->next < w->bind->count ? &w->bind->params[w->next] : NULL;
    if (!p || strcmp(p->name, name) != 0 || p->rows != rows || p->cols != cols) {
        tma_log_error(COMP, "parameter %s (%lld x %lld) is not the layout's entry %d", name, (long long)rows,
                      (long long)cols, w->next);
        return TMA_ERR_INTERNAL;
    }
    w->next++;
    *view = tma_gnn_tensor_view(w->block, p->offset, p->rows, p->cols);
    return TMA_OK;
}

tma_status_t gnn_params_walk(const tma_gnn_config_t *cfg, gnn_walk_t *w, gnn_params_t *p)
{
    memset(p, 0, sizeof *p);
    const gnn_encoder_desc_t *enc = gnn_encoder_of(cfg);
    tma_status_t st = TMA_OK;
    int64_t in = cfg->feature_dim;
    for (int t = 0; t < cfg->num_node_types && st == TMA_OK; t++) {
        st = gnn_walk_param(w, &p->in_W[t], cfg->type_dims[t], cfg->hidden, "in", t, "weight");
        st = st ? st : gnn_walk_param(w, &p->in_b[t], 1, cfg->hidden, "in", t, "bias");
        in = cfg->hidden;
    }
    for (int l = 0; l < cfg->layers && st == TMA_OK; l++) {
        gnn_enc_params_t *e = &p->enc[l];
        const int64_t out = cfg->hidden;
        st = enc->params(w, cfg, l, in, out, e);
        st = st ? st : gnn_walk_param(w, &e->b, 1, out, "enc", l, "bias");
        if (l < cfg->layers - 1) {
            st = st ? st : gnn_walk_param(w, &e->ln_w, 1, out, "enc", l, "ln_weight");
            st = st ? st : gnn_walk_param(w, &e->ln_b, 1, out, "enc", l, "ln_bias");
            st = st ? st : gnn_walk_param(w, &e->prelu, 1, 1, "enc", l, "prelu");
        }
        in = out;
    }
    return st ? st : gnn_decoder_of(cfg)->params(w, cfg, in, p);
}

tma_status_t gnn_params_bind(const tma_gnn_config_t *cfg, const tma_gnn_layout_t *lay, const tensor_t *block,
                             gnn_params_t *p_p)
{
    gnn_params_t p;
    gnn_walk_t w = {.bind = lay, .block = block};
    tma_status_t st = gnn_params_walk(cfg, &w, &p);
    if (st == TMA_OK && w.next != lay->count) {
        tma_log_error(COMP, "the layout has %d parameters, the model %d", lay->count, w.next);
        st = TMA_ERR_INTERNAL;
    }
    if (st == TMA_OK)
        *p_p = p;
    return st;
}

int gnn_layer_project_first(const tma_gnn_config_t *cfg, int l, const tma_gnn_feat_info_t *fi)
{
    const gnn_encoder_desc_t *enc = gnn_encoder_of(cfg);
    if (enc->always_project)
        return 1;
    return enc->neighbours && l == 0 && fi && fi->sparse;
}

int gnn_layer_eval_project_first(const tma_gnn_config_t *cfg, int l, const tma_gnn_feat_info_t *fi)
{
    const gnn_encoder_desc_t *enc = gnn_encoder_of(cfg);
    if (gnn_layer_project_first(cfg, l, fi))
        return 1;
    return l == 0 && enc->neighbours && !enc->relational && cfg->num_node_types == 0 &&
           cfg->feature_dim > GNN_EVAL_WIDE * gnn_layer_proj_cols(cfg, 0);
}

tma_status_t gnn_src_matmul(const gnn_src_t *src, int64_t r0, const tensor_t *W, float beta, tensor_t *out)
{
    if (src->feat) {
        tensor_t ids = tma_gnn_tensor_view(src->ids, r0, out->rows, 1);
        return tma_gnn_op_feat_matmul(src->feat, &ids, W, beta, out);
    }
    tensor_t h = tma_gnn_tensor_view(src->H, r0 * src->H->cols, out->rows, src->H->cols);
    return tma_gnn_op_matmul(&h, 0, W, 0, 1.0f, beta, out);
}

tma_status_t gnn_src_aggregate(const gnn_src_t *src, const tma_gnn_block_t *blk, tensor_t *A)
{
    if (src->feat)
        return tma_gnn_op_feat_aggregate(src->feat, src->ids, blk, A);
    return tma_gnn_op_spmm(blk, src->H, A);
}

tma_status_t gnn_src_matmul_grad(const gnn_src_t *src, int64_t r0, const tensor_t *dY, tensor_t *G)
{
    if (src->feat) {
        tensor_t ids = tma_gnn_tensor_view(src->ids, r0, dY->rows, 1);
        return tma_gnn_op_feat_matmul_grad(src->feat, &ids, dY, G);
    }
    tensor_t h = tma_gnn_tensor_view(src->H, r0 * src->H->cols, dY->rows, src->H->cols);
    return tma_gnn_op_matmul(&h, 1, dY, 0, 1.0f, 0.0f, G);
}

int64_t gnn_layer_proj_cols(const tma_gnn_config_t *cfg, int l)
{
    const gnn_encoder_desc_t *enc = gnn_encoder_of(cfg);
    return enc->proj_cols ? enc->proj_cols(cfg, l) : cfg->hidden;
}

int64_t gnn_layer_proj_floats(const tma_gnn_config_t *cfg, int l, int64_t n)
{
    const gnn_encoder_desc_t *enc = gnn_encoder_of(cfg);
    return n * (gnn_layer_proj_cols(cfg, l) + (enc->proj_tail ? enc->proj_tail(cfg) : 0));
}

int64_t gnn_layer_edge_cols(const tma_gnn_config_t *cfg)
{
    const gnn_encoder_desc_t *enc = gnn_encoder_of(cfg);
    return enc->edge_cols ? enc->edge_cols(cfg) : 0;
}

tma_status_t gnn_encoder_check_backend(const tma_gnn_config_t *cfg, const tma_gnn_backend_t *b)
{
    const gnn_encoder_desc_t *enc = gnn_encoder_of(cfg);
    if (enc->attention && !(b->ops->gat_scores && b->ops->gat_aggregate && b->ops->gat_aggregate_bwd)) {
        tma_log_error(COMP, "model.encoder \"%s\" has no ops on the %s backend (device %s): train and evaluate it "
                      "on a cpu device", enc->name, b->ops->name, b->device);
        return TMA_ERR_CONFIG;
    }
    return TMA_OK;
}

tma_status_t gnn_layer_project(const tma_gnn_config_t *cfg, const gnn_params_t *P, int l, const gnn_src_t *src,
                               int64_t n, tensor_t *T)
{
    const gnn_encoder_desc_t *enc = gnn_encoder_of(cfg);
    const tensor_t *W = gnn_enc_agg_weight(enc, &P->enc[l]);
    tensor_t t = tma_gnn_tensor_shape(T, n, W->cols);
    tma_status_t st = gnn_src_matmul(src, 0, W, 0.0f, &t);
    return st || !enc->project ? st : enc->project(&P->enc[l], &t);
}

tma_status_t gnn_layer_combine(const tma_gnn_config_t *cfg, const gnn_params_t *P, int l,
                               const tma_gnn_block_t *blk, const gnn_src_t *src, int64_t self0, const tensor_t *T,
                               const tensor_t *rel, tensor_t *A, tensor_t *Z)
{
    return gnn_encoder_of(cfg)->combine(&P->enc[l], blk, src, self0, T, rel, A, Z);
}

int gnn_layer_fusable(const tma_gnn_config_t *cfg, const gnn_params_t *P, int l, int src_sparse, int pf,
                      const tensor_t *scratch)
{
    const gnn_encoder_desc_t *enc = gnn_encoder_of(cfg);
    tma_gnn_backend_t *b = scratch->backend;
    if (!b || !b->ops->layer_infer || pf || !enc->whole_graph || src_sparse)
        return 0;
    const int64_t d_in = gnn_enc_agg_weight(enc, &P->enc[l])->rows; /* the op's input width */
    return scratch->capacity >= (2 * d_in + cfg->hidden) * tma_gnn_backend_threads(b);
}

tma_status_t gnn_layer_infer_fused(const tma_gnn_config_t *cfg, const gnn_params_t *P, int l,
                                   const tma_gnn_block_t *blk, const gnn_src_t *src, int64_t self0, tensor_t *scratch,
                                   tensor_t *Y)
{
    const gnn_encoder_desc_t *enc = gnn_encoder_of(cfg);
    const gnn_enc_params_t *e = &P->enc[l];
    tma_gnn_layer_infer_t L = {
        .blk = blk, .X = src->H, .feat = src->feat, .ids = src->ids,
        .W = gnn_enc_agg_weight(enc, e), .W_self = enc->self_term ? &e->W_self : NULL, .self0 = self0,
        .bias = &e->b, .gamma = &e->ln_w, .beta = &e->ln_b, .a = l == cfg->layers - 1 ? NULL : &e->prelu,
        .eps = GNN_LN_EPS};
    tensor_t all = tma_gnn_tensor_shape(scratch, scratch->capacity, 1);
    return tma_gnn_op_layer_infer(&L, &all, Y);
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
    return gnn_decoder_of(cfg)->forward(cfg, P, R, hi, ti, rel, E, D);
}
