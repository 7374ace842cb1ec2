/*
 * ref_backend.c: the reference backend.  Every op written as the plain
 * definition, one thread, sums in double.  It is slow on purpose and exists
 * to check the real backends (tests/gnn/test_ops.c runs each op on both and
 * compares); it also lets a whole model run without OpenBLAS.
 */
#include "gnn_backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define F(t) ((float *)(t)->data)
#define CF(t) ((const float *)(t)->data)
#define CI32(t) ((const int32_t *)(t)->data)
#define CI64(t) ((const int64_t *)(t)->data)

struct tma_gnn_feat {
    const void *x; /* elements of dt */
    tma_feat_dtype_t dt;
    int64_t n, dim;
};

/* Feature element (row r, column q), widened. */
static float feat_x(const tma_gnn_feat_t *f, int64_t r, int64_t q)
{
    const int64_t i = r * f->dim + q;
    switch (f->dt) {
    case TMA_FEAT_F16: return tma_f16_to_f32(((const uint16_t *)f->x)[i]);
    case TMA_FEAT_BF16: return tma_bf16_to_f32(((const uint16_t *)f->x)[i]);
    case TMA_FEAT_F32: break;
    }
    return ((const float *)f->x)[i];
}

static tma_status_t ref_alloc(tma_gnn_backend_t *b, size_t bytes, void **p_p)
{
    void *p = tma_alloc_aligned(bytes);
    if (!p)
        return TMA_ERR_NOMEM;
    *p_p = p;
    return TMA_OK;
}

static void ref_free(tma_gnn_backend_t *b, void *p) { tma_free_aligned(p); }

static tma_status_t ref_memcpy(tma_gnn_backend_t *b, void *dst, const void *src, size_t bytes)
{
    if (dst != src)
        memmove(dst, src, bytes);
    return TMA_OK;
}

static tma_status_t ref_fill(tma_gnn_backend_t *b, tensor_t *x, float v)
{
    int64_t n = tma_gnn_tensor_numel(x);
    for (int64_t i = 0; i < n; i++)
        F(x)[i] = v;
    return TMA_OK;
}

static inline float at(const tensor_t *t, int trans, int64_t i, int64_t j)
{
    return trans ? CF(t)[j * t->cols + i] : CF(t)[i * t->cols + j];
}

static tma_status_t ref_matmul(tma_gnn_backend_t *b, const tensor_t *A, int ta, const tensor_t *B, int tb,
                               float alpha, float beta, tensor_t *C)
{
    int64_t m = C->rows, n = C->cols, k = ta ? A->rows : A->cols;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t q = 0; q < k; q++)
                s += (double)at(A, ta, i, q) * at(B, tb, q, j);
            double prev = beta == 0.0f ? 0.0 : (double)beta * F(C)[i * n + j];
            F(C)[i * n + j] = (float)(alpha * s + prev);
        }
    }
    return TMA_OK;
}

static tma_status_t ref_add_bias(tma_gnn_backend_t *b, tensor_t *Z, const tensor_t *bias)
{
    for (int64_t i = 0; i < Z->rows; i++)
        for (int64_t j = 0; j < Z->cols; j++)
            F(Z)[i * Z->cols + j] += CF(bias)[j];
    return TMA_OK;
}

static tma_status_t ref_colsum(tma_gnn_backend_t *b, const tensor_t *X, tensor_t *out)
{
    for (int64_t j = 0; j < X->cols; j++) {
        double s = 0;
        for (int64_t i = 0; i < X->rows; i++)
            s += CF(X)[i * X->cols + j];
        F(out)[j] = (float)s;
    }
    return TMA_OK;
}

static tma_status_t ref_spmm(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *X, tensor_t *Y)
{
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices);
    const float *w = CF(&blk->weights);
    int64_t d = Y->cols;
    for (int64_t i = 0; i < blk->num_dst; i++) {
        for (int64_t j = 0; j < d; j++) {
            double s = 0;
            for (int32_t e = ip[i]; e < ip[i + 1]; e++)
                s += (double)w[e] * CF(X)[(int64_t)ix[e] * d + j];
            F(Y)[i * d + j] = (float)s;
        }
    }
    return TMA_OK;
}

static tma_status_t ref_spmm_t(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *dY,
                               tensor_t *dX)
{
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices);
    const float *w = CF(&blk->weights);
    int64_t d = dY->cols, n = tma_gnn_tensor_numel(dX);
    double *acc = calloc((size_t)(n ? n : 1), sizeof *acc);
    if (!acc)
        return TMA_ERR_NOMEM;
    for (int64_t i = 0; i < blk->num_dst; i++)
        for (int32_t e = ip[i]; e < ip[i + 1]; e++)
            for (int64_t j = 0; j < d; j++)
                acc[(int64_t)ix[e] * d + j] += (double)w[e] * CF(dY)[i * d + j];
    for (int64_t q = 0; q < n; q++)
        F(dX)[q] = (float)acc[q];
    free(acc);
    return TMA_OK;
}

static tma_status_t ref_layernorm_fwd(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *gamma,
                                      const tensor_t *beta, float eps, tensor_t *Y, tensor_t *mean,
                                      tensor_t *rstd)
{
    int64_t d = X->cols;
    for (int64_t i = 0; i < X->rows; i++) {
        const float *x = CF(X) + i * d;
        double mu = 0, var = 0;
        for (int64_t j = 0; j < d; j++)
            mu += x[j];
        mu /= (double)d;
        for (int64_t j = 0; j < d; j++)
            var += (x[j] - mu) * (x[j] - mu);
        var /= (double)d;
        double rs = 1.0 / sqrt(var + eps);
        for (int64_t j = 0; j < d; j++)
            F(Y)[i * d + j] = (float)((x[j] - mu) * rs * CF(gamma)[j] + CF(beta)[j]);
        F(mean)[i] = (float)mu;
        F(rstd)[i] = (float)rs;
    }
    return TMA_OK;
}

static tma_status_t ref_layernorm_bwd(tma_gnn_backend_t *b, const tensor_t *dY, const tensor_t *X,
                                      const tensor_t *gamma, const tensor_t *mean, const tensor_t *rstd,
                                      tensor_t *dX, tensor_t *dgamma, tensor_t *dbeta)
{
    int64_t d = X->cols, n = X->rows;
    for (int64_t j = 0; j < d; j++) {
        double sg = 0, sb = 0;
        for (int64_t i = 0; i < n; i++) {
            double xh = (CF(X)[i * d + j] - (double)CF(mean)[i]) * CF(rstd)[i];
            sg += CF(dY)[i * d + j] * xh;
            sb += CF(dY)[i * d + j];
        }
        F(dgamma)[j] = (float)sg;
        F(dbeta)[j] = (float)sb;
    }
    for (int64_t i = 0; i < n; i++) {
        double mu = CF(mean)[i], rs = CF(rstd)[i], m1 = 0, m2 = 0;
        for (int64_t j = 0; j < d; j++) {
            double g = (double)CF(dY)[i * d + j] * CF(gamma)[j];
            double xh = (CF(X)[i * d + j] - mu) * rs;
            m1 += g;
            m2 += g * xh;
        }
        m1 /= (double)d;
        m2 /= (double)d;
        for (int64_t j = 0; j < d; j++) {
            double g = (double)CF(dY)[i * d + j] * CF(gamma)[j];
            double xh = (CF(X)[i * d + j] - mu) * rs;
            F(dX)[i * d + j] = (float)(rs * (g - m1 - xh * m2));
        }
    }
    return TMA_OK;
}

static tma_status_t ref_prelu_fwd(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *a, tensor_t *Y)
{
    float s = CF(a)[0];
    int64_t n = tma_gnn_tensor_numel(X);
    for (int64_t i = 0; i < n; i++)
        F(Y)[i] = CF(X)[i] > 0 ? CF(X)[i] : s * CF(X)[i];
    return TMA_OK;
}

static tma_status_t ref_prelu_bwd(tma_gnn_backend_t *b, const tensor_t *dY, const tensor_t *X,
                                  const tensor_t *a, tensor_t *dX, tensor_t *da)
{
    float s = CF(a)[0];
    int64_t n = tma_gnn_tensor_numel(X);
    double acc = 0;
    for (int64_t i = 0; i < n; i++) {
        float x = CF(X)[i], g = CF(dY)[i];
        if (x > 0) {
            F(dX)[i] = g;
        } else {
            acc += (double)x * g;
            F(dX)[i] = s * g;
        }
    }
    F(da)[0] = (float)acc;
    return TMA_OK;
}

static tma_status_t ref_bias_prelu(tma_gnn_backend_t *b, tensor_t *Z, const tensor_t *bias, const tensor_t *a,
                                   tensor_t *Y)
{
    tma_status_t st = ref_add_bias(b, Z, bias);
    return st ? st : ref_prelu_fwd(b, Z, a, Y);
}

static tma_status_t ref_ln_prelu_fwd(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *gamma,
                                     const tensor_t *beta, const tensor_t *a, float eps, tensor_t *H, tensor_t *mean,
                                     tensor_t *rstd)
{
    tma_status_t st = ref_layernorm_fwd(b, X, gamma, beta, eps, H, mean, rstd);
    return st ? st : ref_prelu_fwd(b, H, a, H);
}

static tma_status_t ref_ln_prelu_bwd(tma_gnn_backend_t *b, const tensor_t *dH, const tensor_t *X,
                                     const tensor_t *gamma, const tensor_t *beta, const tensor_t *a,
                                     const tensor_t *mean, const tensor_t *rstd, tensor_t *dX, tensor_t *dgamma,
                                     tensor_t *dbeta, tensor_t *da)
{
    /* The LayerNorm output, recomputed, then the two backward passes. */
    int64_t n = tma_gnn_tensor_numel(X);
    tensor_t Y = *X, dY = *X;
    Y.data = malloc((size_t)(n ? n : 1) * sizeof(float));
    dY.data = malloc((size_t)(n ? n : 1) * sizeof(float));
    tma_status_t st = Y.data && dY.data ? TMA_OK : TMA_ERR_NOMEM;
    for (int64_t i = 0; i < X->rows && st == TMA_OK; i++)
        for (int64_t j = 0; j < X->cols; j++)
            F(&Y)[i * X->cols + j] =
                (float)(((double)CF(X)[i * X->cols + j] - CF(mean)[i]) * CF(rstd)[i] * CF(gamma)[j] + CF(beta)[j]);
    st = st ? st : ref_prelu_bwd(b, dH, &Y, a, &dY, da);
    st = st ? st : ref_layernorm_bwd(b, &dY, X, gamma, mean, rstd, dX, dgamma, dbeta);
    free(Y.data);
    free(dY.data);
    return st;
}

static tma_status_t ref_pair_mul(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
                                 tensor_t *E)
{
    int64_t d = H->cols;
    for (int64_t p = 0; p < E->rows; p++)
        for (int64_t j = 0; j < d; j++)
            F(E)[p * d + j] = CF(H)[(int64_t)CI32(hi)[p] * d + j] * CF(H)[(int64_t)CI32(ti)[p] * d + j];
    return TMA_OK;
}

static tma_status_t ref_pair_mul_bwd(tma_gnn_backend_t *b, const tensor_t *dE, const tensor_t *H,
                                     const tensor_t *hi, const tensor_t *ti, tensor_t *dH)
{
    int64_t d = H->cols, n = tma_gnn_tensor_numel(dH);
    double *acc = calloc((size_t)(n ? n : 1), sizeof *acc);
    if (!acc)
        return TMA_ERR_NOMEM;
    for (int64_t p = 0; p < dE->rows; p++) {
        int64_t u = CI32(hi)[p], v = CI32(ti)[p];
        for (int64_t j = 0; j < d; j++) {
            double g = CF(dE)[p * d + j];
            acc[u * d + j] += g * CF(H)[v * d + j];
            acc[v * d + j] += g * CF(H)[u * d + j];
        }
    }
    for (int64_t q = 0; q < n; q++)
        F(dH)[q] = (float)acc[q];
    free(acc);
    return TMA_OK;
}

static tma_status_t ref_bce_logits(tma_gnn_backend_t *b, const tensor_t *logits, const tensor_t *labels,
                                   double *loss_p, tensor_t *dlogits)
{
    int64_t n = tma_gnn_tensor_numel(logits);
    double loss = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = CF(logits)[i], y = CF(labels)[i];
        loss += (x > 0 ? x : 0) - x * y + log1p(exp(-fabs(x)));
        double sig = 1.0 / (1.0 + exp(-x));
        F(dlogits)[i] = (float)((sig - y) / (double)n);
    }
    *loss_p = loss / (double)n;
    return TMA_OK;
}

static tma_status_t ref_sumsq(tma_gnn_backend_t *b, const tensor_t *x, double *out_p)
{
    double s = 0;
    int64_t n = tma_gnn_tensor_numel(x);
    for (int64_t i = 0; i < n; i++)
        s += (double)CF(x)[i] * CF(x)[i];
    *out_p = s;
    return TMA_OK;
}

static tma_status_t ref_scale(tma_gnn_backend_t *b, tensor_t *x, float s)
{
    int64_t n = tma_gnn_tensor_numel(x);
    for (int64_t i = 0; i < n; i++)
        F(x)[i] *= s;
    return TMA_OK;
}

static tma_status_t ref_dropout(tma_gnn_backend_t *b, const tensor_t *x, float p, uint64_t key, tensor_t *y)
{
    const uint32_t thresh = gnn_dropout_threshold(p);
    const float s = 1.0f / (1.0f - p);
    int64_t n = tma_gnn_tensor_numel(x);
    for (int64_t i = 0; i < n; i++)
        F(y)[i] = gnn_dropout_keep(key, i, thresh) ? CF(x)[i] * s : 0.0f;
    return TMA_OK;
}

static tma_status_t ref_adam(tma_gnn_backend_t *b, tensor_t *p, const tensor_t *g, tensor_t *m, tensor_t *v,
                             const tma_gnn_adam_t *h)
{
    /* PyTorch's Adam (no weight decay, not amsgrad), term for term. */
    double bc1 = 1.0 - pow(h->beta1, (double)h->step), bc2 = 1.0 - pow(h->beta2, (double)h->step);
    double step_size = h->lr / bc1, bc2_sqrt = sqrt(bc2);
    int64_t n = tma_gnn_tensor_numel(p);
    for (int64_t i = 0; i < n; i++) {
        double gi = CF(g)[i];
        double mi = h->beta1 * (double)F(m)[i] + (1.0 - h->beta1) * gi;
        double vi = h->beta2 * (double)F(v)[i] + (1.0 - h->beta2) * gi * gi;
        F(m)[i] = (float)mi;
        F(v)[i] = (float)vi;
        double denom = sqrt(vi) / bc2_sqrt + h->eps;
        F(p)[i] = (float)(F(p)[i] - step_size * mi / denom);
    }
    return TMA_OK;
}

static tma_status_t ref_mrr_sum(tma_gnn_backend_t *b, const tensor_t *scores, double *sum_p)
{
    double sum = 0;
    for (int64_t i = 0; i < scores->rows; i++) {
        const float *s = CF(scores) + i * scores->cols;
        int64_t rank = 1;
        for (int64_t j = 1; j < scores->cols; j++)
            rank += !(s[j] < s[0]);
        sum += 1.0 / (double)rank;
    }
    *sum_p = sum;
    return TMA_OK;
}

static tma_status_t ref_feat_create(tma_gnn_backend_t *b, const void *host, tma_feat_dtype_t dtype,
                                    int64_t num_nodes, int64_t dim, unsigned flags, tma_gnn_feat_t **f_p)
{
    tma_gnn_feat_t *f = calloc(1, sizeof *f);
    if (!f)
        return TMA_ERR_NOMEM;
    f->x = host;
    f->dt = dtype;
    f->n = num_nodes;
    f->dim = dim;
    *f_p = f;
    return TMA_OK;
}

static void ref_feat_destroy(tma_gnn_backend_t *b, tma_gnn_feat_t *f) { free(f); }

static void ref_feat_info(const tma_gnn_feat_t *f, tma_gnn_feat_info_t *info_p)
{
    info_p->num_nodes = f->n;
    info_p->dim = f->dim;
    info_p->sparse = 0;
    info_p->nnz_per_row = (double)f->dim;
}

static tma_status_t ref_feat_matmul(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                    const tensor_t *W, float beta, tensor_t *out)
{
    int64_t d = W->cols;
    for (int64_t i = 0; i < out->rows; i++) {
        const int64_t r = CI64(ids)[i];
        for (int64_t j = 0; j < d; j++) {
            double s = 0;
            for (int64_t q = 0; q < f->dim; q++)
                s += (double)feat_x(f, r, q) * CF(W)[q * d + j];
            double prev = beta == 0.0f ? 0.0 : (double)beta * F(out)[i * d + j];
            F(out)[i * d + j] = (float)(s + prev);
        }
    }
    return TMA_OK;
}

static tma_status_t ref_feat_matmul_grad(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                         const tensor_t *dOut, tensor_t *dW)
{
    int64_t d = dOut->cols;
    for (int64_t q = 0; q < f->dim; q++) {
        for (int64_t j = 0; j < d; j++) {
            double s = 0;
            for (int64_t i = 0; i < dOut->rows; i++)
                s += (double)feat_x(f, CI64(ids)[i], q) * CF(dOut)[i * d + j];
            F(dW)[q * d + j] = (float)s;
        }
    }
    return TMA_OK;
}

static tma_status_t ref_feat_aggregate(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                       const tma_gnn_block_t *blk, tensor_t *out)
{
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices);
    const float *w = CF(&blk->weights);
    for (int64_t i = 0; i < blk->num_dst; i++) {
        for (int64_t q = 0; q < f->dim; q++) {
            double s = 0;
            for (int32_t e = ip[i]; e < ip[i + 1]; e++)
                s += (double)w[e] * feat_x(f, CI64(ids)[ix[e]], q);
            F(out)[i * f->dim + q] = (float)s;
        }
    }
    return TMA_OK;
}

/* ------------------------------------------------------------------ heterogeneous ops */

/* ------------------------------------------------------------------ GAT */

static tma_status_t ref_gat_scores(tma_gnn_backend_t *b, const tensor_t *T, const tensor_t *a_src,
                                   const tensor_t *a_dst, tensor_t *S)
{
    (void)b;
    const int64_t K = a_src->rows, C = a_src->cols;
    for (int64_t u = 0; u < T->rows; u++)
        for (int64_t k = 0; k < K; k++) {
            double s = 0, d = 0;
            for (int64_t c = 0; c < C; c++) {
                double t = CF(T)[u * K * C + k * C + c];
                s += t * CF(a_src)[k * C + c];
                d += t * CF(a_dst)[k * C + c];
            }
            F(S)[u * 2 * K + k] = (float)s;
            F(S)[u * 2 * K + K + k] = (float)d;
        }
    return TMA_OK;
}

static double ref_gat_logit(const tensor_t *S, int64_t K, int64_t u, int64_t v, int64_t k)
{
    double x = (double)CF(S)[u * 2 * K + k] + (double)CF(S)[v * 2 * K + K + k];
    return x > 0 ? x : (double)TMA_GNN_GAT_SLOPE * x;
}

static tma_status_t ref_gat_aggregate(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *T,
                                      const tensor_t *S, int64_t self0, tensor_t *alpha, tensor_t *Y)
{
    (void)b;
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices);
    const int64_t K = S->cols / 2, KC = T->cols, C = KC / K, mean = Y->cols != KC;
    for (int64_t i = 0; i < blk->num_dst; i++) {
        for (int64_t k = 0; k < K; k++) {
            double m = -INFINITY, z = 0;
            for (int32_t e = ip[i]; e < ip[i + 1]; e++)
                m = fmax(m, ref_gat_logit(S, K, ix[e], self0 + i, k));
            for (int32_t e = ip[i]; e < ip[i + 1]; e++)
                z += exp(ref_gat_logit(S, K, ix[e], self0 + i, k) - m);
            for (int32_t e = ip[i]; e < ip[i + 1]; e++)
                F(alpha)[(int64_t)e * K + k] = (float)(exp(ref_gat_logit(S, K, ix[e], self0 + i, k) - m) / z);
        }
        for (int64_t j = 0; j < Y->cols; j++) {
            double y = 0;
            for (int64_t k = mean ? 0 : j / C; k < (mean ? K : j / C + 1); k++)
                for (int32_t e = ip[i]; e < ip[i + 1]; e++)
                    y += (double)CF(alpha)[(int64_t)e * K + k] * CF(T)[(int64_t)ix[e] * KC + k * C + j % C];
            F(Y)[i * Y->cols + j] = (float)(mean ? y / (double)K : y);
        }
    }
    return TMA_OK;
}

/* Sums in double; dE is not needed here (the sums are kept whole). */
static tma_status_t ref_gat_aggregate_bwd(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *T,
                                          const tensor_t *S, const tensor_t *alpha, const tensor_t *a_src,
                                          const tensor_t *a_dst, const tensor_t *dY, tensor_t *dE, tensor_t *dS,
                                          tensor_t *dT, tensor_t *da_src, tensor_t *da_dst)
{
    (void)b;
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices);
    const int64_t K = a_src->rows, C = a_src->cols, KC = T->cols, n = T->rows, mean = dY->cols != KC;
    double *gT = calloc((size_t)(n * KC > 0 ? n * KC : 1), sizeof *gT), *gS = calloc((size_t)(n ? 2 * n * K : 1), sizeof *gS);
    if (!gT || !gS) {
        free(gT);
        free(gS);
        return TMA_ERR_NOMEM;
    }
    for (int64_t i = 0; i < blk->num_dst; i++)
        for (int64_t k = 0; k < K; k++) {
            /* the output's gradient for head k of row i */
            double s = 0;
            for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
                const int64_t u = ix[e];
                const double a = CF(alpha)[(int64_t)e * K + k];
                double da = 0;
                for (int64_t c = 0; c < C; c++) {
                    double g = mean ? CF(dY)[i * C + c] / (double)K : CF(dY)[i * KC + k * C + c];
                    gT[u * KC + k * C + c] += a * g;
                    da += g * CF(T)[u * KC + k * C + c];
                }
                s += a * da;
            }
            for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
                const int64_t u = ix[e];
                const double a = CF(alpha)[(int64_t)e * K + k];
                const double x = (double)CF(S)[u * 2 * K + k] + (double)CF(S)[i * 2 * K + K + k];
                /* through the softmax, then the LeakyReLU; recomputing dalpha in double */
                double da = 0;
                for (int64_t c = 0; c < C; c++)
                    da += (mean ? CF(dY)[i * C + c] / (double)K : CF(dY)[i * KC + k * C + c]) *
                          CF(T)[u * KC + k * C + c];
                double g = a * (da - s) * (x > 0 ? 1.0 : (double)TMA_GNN_GAT_SLOPE);
                F(dE)[(int64_t)e * K + k] = (float)g;
                gS[u * 2 * K + k] += g;
                gS[i * 2 * K + K + k] += g;
            }
        }
    for (int64_t k = 0; k < K; k++)
        for (int64_t c = 0; c < C; c++) {
            double ss = 0, sd = 0;
            for (int64_t u = 0; u < n; u++) {
                const double t = CF(T)[u * KC + k * C + c];
                gT[u * KC + k * C + c] += gS[u * 2 * K + k] * CF(a_src)[k * C + c] + gS[u * 2 * K + K + k] * CF(a_dst)[k * C + c];
                ss += gS[u * 2 * K + k] * t;
                sd += gS[u * 2 * K + K + k] * t;
            }
            F(da_src)[k * C + c] = (float)ss;
            F(da_dst)[k * C + c] = (float)sd;
        }
    for (int64_t q = 0; q < n * KC; q++)
        F(dT)[q] = (float)gT[q];
    for (int64_t q = 0; q < 2 * n * K; q++)
        F(dS)[q] = (float)gS[q];
    free(gT);
    free(gS);
    return TMA_OK;
}

static tma_status_t ref_rgcn_aggregate(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *rel,
                                       const tensor_t *T, const tensor_t *coef, tensor_t *Y)
{
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices), *r = CI32(rel);
    const float *w = CF(&blk->weights);
    int64_t d = Y->cols, nb = coef->cols, tc = T->cols;
    for (int64_t i = 0; i < blk->num_dst; i++) {
        for (int64_t j = 0; j < d; j++) {
            double s = 0;
            for (int32_t e = ip[i]; e < ip[i + 1]; e++)
                for (int64_t q = 0; q < nb; q++)
                    s += (double)w[e] * CF(coef)[(int64_t)r[e] * nb + q] * CF(T)[(int64_t)ix[e] * tc + q * d + j];
            F(Y)[i * d + j] = (float)s;
        }
    }
    return TMA_OK;
}

/* The reference reads only the CSR order (rel), never the transpose. */
static tma_status_t ref_rgcn_aggregate_bwd(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *rel,
                                           const tensor_t *t_rel, const tensor_t *dY, const tensor_t *T,
                                           const tensor_t *coef, tensor_t *dT, tensor_t *dcoef)
{
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices), *r = CI32(rel);
    const float *w = CF(&blk->weights);
    int64_t d = dY->cols, nb = coef->cols, tc = T->cols, n = tma_gnn_tensor_numel(dT), nc = tma_gnn_tensor_numel(coef);
    double *acc = calloc((size_t)(n ? n : 1), sizeof *acc), *ac = calloc((size_t)nc, sizeof *ac);
    if (!acc || !ac) {
        free(acc);
        free(ac);
        return TMA_ERR_NOMEM;
    }
    for (int64_t i = 0; i < blk->num_dst; i++) {
        for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
            int64_t u = ix[e], re = r[e];
            for (int64_t q = 0; q < nb; q++) {
                double a = CF(coef)[re * nb + q], dot = 0;
                for (int64_t j = 0; j < d; j++) {
                    double g = CF(dY)[i * d + j];
                    acc[u * tc + q * d + j] += (double)w[e] * a * g;
                    dot += g * CF(T)[u * tc + q * d + j];
                }
                ac[re * nb + q] += (double)w[e] * dot;
            }
        }
    }
    for (int64_t q = 0; q < n; q++)
        F(dT)[q] = (float)acc[q];
    for (int64_t q = 0; q < nc; q++)
        F(dcoef)[q] = (float)ac[q];
    free(acc);
    free(ac);
    return TMA_OK;
}

static tma_status_t ref_distmult(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
                                 const tensor_t *rel, const tensor_t *Wr, tensor_t *score)
{
    int64_t d = H->cols;
    for (int64_t p = 0; p < score->rows; p++) {
        const float *hu = CF(H) + (int64_t)CI32(hi)[p] * d, *hv = CF(H) + (int64_t)CI32(ti)[p] * d;
        const float *wr = Wr ? CF(Wr) + (int64_t)CI32(rel)[p] * d : NULL;
        double s = 0;
        for (int64_t j = 0; j < d; j++)
            s += (double)hu[j] * (wr ? wr[j] : 1.0f) * hv[j];
        F(score)[p] = (float)s;
    }
    return TMA_OK;
}

static tma_status_t ref_distmult_bwd(tma_gnn_backend_t *b, const tensor_t *dscore, const tensor_t *H,
                                     const tensor_t *hi, const tensor_t *ti, const tensor_t *rel, const tensor_t *Wr,
                                     tensor_t *dH, tensor_t *dWr)
{
    int64_t d = H->cols, nh = tma_gnn_tensor_numel(dH), nw = dWr ? tma_gnn_tensor_numel(dWr) : 0;
    double *ah = calloc((size_t)(nh ? nh : 1), sizeof *ah), *aw = calloc((size_t)(nw ? nw : 1), sizeof *aw);
    if (!ah || !aw) {
        free(ah);
        free(aw);
        return TMA_ERR_NOMEM;
    }
    for (int64_t p = 0; p < dscore->rows; p++) {
        int64_t u = CI32(hi)[p], v = CI32(ti)[p], r = Wr ? CI32(rel)[p] : 0;
        double g = CF(dscore)[p];
        for (int64_t j = 0; j < d; j++) {
            double hu = CF(H)[u * d + j], hv = CF(H)[v * d + j], wr = Wr ? CF(Wr)[r * d + j] : 1.0;
            ah[u * d + j] += g * wr * hv;
            ah[v * d + j] += g * wr * hu;
            if (Wr)
                aw[r * d + j] += g * hu * hv;
        }
    }
    for (int64_t q = 0; q < nh; q++)
        F(dH)[q] = (float)ah[q];
    for (int64_t q = 0; q < nw; q++)
        F(dWr)[q] = (float)aw[q];
    free(ah);
    free(aw);
    return TMA_OK;
}

static tma_status_t ref_rows_gather(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *idx, tensor_t *Y)
{
    for (int64_t i = 0; i < Y->rows; i++)
        for (int64_t j = 0; j < Y->cols; j++)
            F(Y)[i * Y->cols + j] = CF(X)[(int64_t)CI32(idx)[i] * X->cols + j];
    return TMA_OK;
}

static tma_status_t ref_rows_scatter(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *idx, tensor_t *Y)
{
    for (int64_t i = 0; i < X->rows; i++)
        for (int64_t j = 0; j < X->cols; j++)
            F(Y)[(int64_t)CI32(idx)[i] * Y->cols + j] = CF(X)[i * X->cols + j];
    return TMA_OK;
}

const tma_gnn_ops_t tma_gnn_ref_ops = {
    .name = "ref",
    .host_addressable = 1,
    .alloc = ref_alloc,
    .free = ref_free,
    .upload = ref_memcpy,
    .download = ref_memcpy,
    .fill = ref_fill,
    .matmul = ref_matmul,
    .add_bias = ref_add_bias,
    .colsum = ref_colsum,
    .spmm = ref_spmm,
    .spmm_t = ref_spmm_t,
    .prelu_bwd = ref_prelu_bwd,
    .bias_prelu = ref_bias_prelu,
    .ln_prelu_fwd = ref_ln_prelu_fwd,
    .ln_prelu_bwd = ref_ln_prelu_bwd,
    .pair_mul = ref_pair_mul,
    .pair_mul_bwd = ref_pair_mul_bwd,
    .bce_logits = ref_bce_logits,
    .sumsq = ref_sumsq,
    .scale = ref_scale,
    .dropout = ref_dropout,
    .adam = ref_adam,
    .feat_create = ref_feat_create,
    .feat_destroy = ref_feat_destroy,
    .feat_info = ref_feat_info,
    .feat_matmul = ref_feat_matmul,
    .feat_matmul_grad = ref_feat_matmul_grad,
    .feat_aggregate = ref_feat_aggregate,
    .mrr_sum = ref_mrr_sum,
    .rgcn_aggregate = ref_rgcn_aggregate,
    .rgcn_aggregate_bwd = ref_rgcn_aggregate_bwd,
    .distmult = ref_distmult,
    .distmult_bwd = ref_distmult_bwd,
    .gat_scores = ref_gat_scores,
    .gat_aggregate = ref_gat_aggregate,
    .gat_aggregate_bwd = ref_gat_aggregate_bwd,
    .rows_gather = ref_rows_gather,
    .rows_scatter = ref_rows_scatter,
};
