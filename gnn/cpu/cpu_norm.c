/*
 * cpu_norm.c: the CPU backend's normalisation and activation: LayerNorm + PReLU (one backward), bias +
 * PReLU, PReLU backward. Compiled twice, for AVX2 and for the baseline ISA (see cpu_int.h).
 */
#include "cpu_int.h"

/* ------------------------------------------------------------------ LayerNorm, PReLU */

tma_status_t cpu_ln_prelu_fwd(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *gamma,
                                     const tensor_t *beta, const tensor_t *a, float eps, tensor_t *H, tensor_t *mean,
                                     tensor_t *rstd)
{
    const int64_t n = X->rows, d = X->cols;
    const float *x = CF(X), *g = CF(gamma), *bt = CF(beta), s = CF(a)[0];
    float *h = F(H), *mu_out = F(mean), *rs_out = F(rstd);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n * d > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        ln_prelu_row(x + i * d, d, g, bt, s, eps, h + i * d, &mu_out[i], &rs_out[i]);
    return TMA_OK;
}

tma_status_t cpu_ln_prelu_bwd(tma_gnn_backend_t *b, const tensor_t *dH, const tensor_t *X,
                                     const tensor_t *gamma, const tensor_t *beta, const tensor_t *a,
                                     const tensor_t *mean, const tensor_t *rstd, tensor_t *dX, tensor_t *dgamma,
                                     tensor_t *dbeta, tensor_t *da)
{
    const int64_t n = X->rows, d = X->cols;
    if (d > SCRATCH_COLS) {
        /* model.hidden is at most TMA_GNN_MAX_HIDDEN (== SCRATCH_COLS) */
        tma_log_error(COMP, "ln_prelu_bwd: %lld columns is more than %d", (long long)d, SCRATCH_COLS);
        return TMA_ERR_UNSUPPORTED;
    }
    const float *x = CF(X), *dh = CF(dH), *g = CF(gamma), *bt = CF(beta), *mu = CF(mean), *rs = CF(rstd);
    const float s = CF(a)[0];
    float *dx = F(dX);
    double *pg = partials(b, 0), *pb = partials(b, 1), pa[NCHUNK];
    /* Per fixed row chunk: recompute y = LN(x), dy = dH PReLU'(y), the slope's
     * gradient, dX, and partial dgamma/dbeta.  dH is read before dX (which may
     * alias it) is written. */
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n * d > PAR_MIN)
    for (int c = 0; c < NCHUNK; c++) {
        double *ag = pg + (size_t)c * SCRATCH_COLS, *ab = pb + (size_t)c * SCRATCH_COLS;
        for (int64_t j = 0; j < d; j++)
            ag[j] = ab[j] = 0;
        float acc_a = 0;
        for (int64_t i = n * c / NCHUNK; i < n * (c + 1) / NCHUNK; i++) {
            const float *xi = x + i * d, *hi = dh + i * d;
            float *dxi = dx + i * d;
            const float m = mu[i], r = rs[i];
            float m1 = 0, m2 = 0, ra = 0;
#pragma omp simd reduction(+ : m1, m2, ra)
            for (int64_t j = 0; j < d; j++) {
                const float xh = (xi[j] - m) * r, y = xh * g[j] + bt[j];
                const int pos = y > 0;
                const float gy = hi[j] * (pos ? 1.0f : s);
                ra += (pos ? 0.0f : y) * hi[j];
                const float gg = gy * g[j];
                m1 += gg;
                m2 += gg * xh;
            }
            acc_a += ra;
            m1 /= (float)d;
            m2 /= (float)d;
#pragma omp simd
            for (int64_t j = 0; j < d; j++) {
                const float xh = (xi[j] - m) * r, y = xh * g[j] + bt[j];
                const float gy = hi[j] * (y > 0 ? 1.0f : s);
                ag[j] += gy * xh;
                ab[j] += gy;
                dxi[j] = r * (gy * g[j] - m1 - xh * m2);
            }
        }
        pa[c] = acc_a;
    }
    combine_partials(pg, d, F(dgamma));
    combine_partials(pb, d, F(dbeta));
    double sa = 0;
    for (int c = 0; c < NCHUNK; c++)
        sa += pa[c];
    F(da)[0] = (float)sa;
    return TMA_OK;
}

tma_status_t cpu_bias_prelu(tma_gnn_backend_t *b, tensor_t *Z, const tensor_t *bias, const tensor_t *a,
                                   tensor_t *Y)
{
    const int64_t n = Z->rows, d = Z->cols;
    const float s = CF(a)[0], *bb = CF(bias);
    float *z = F(Z), *y = F(Y);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n * d > PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float *zi = z + i * d, *yi = y + i * d;
#pragma omp simd
        for (int64_t j = 0; j < d; j++) {
            float v = zi[j] + bb[j];
            zi[j] = v;
            yi[j] = v * (v > 0 ? 1.0f : s);
        }
    }
    return TMA_OK;
}

tma_status_t cpu_prelu_bwd(tma_gnn_backend_t *b, const tensor_t *dY, const tensor_t *X,
                                  const tensor_t *a, tensor_t *dX, tensor_t *da)
{
    const int64_t n = tma_gnn_tensor_numel(X);
    const float s = CF(a)[0], *x = CF(X), *dy = CF(dY);
    float *dx = F(dX);
    double part[NCHUNK];
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n > PAR_MIN)
    for (int c = 0; c < NCHUNK; c++) {
        int64_t i0 = n * c / NCHUNK, i1 = n * (c + 1) / NCHUNK;
        float acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = i0; i < i1; i++) {
            float xi = x[i], gi = dy[i];
            int pos = xi > 0;
            acc += (pos ? 0.0f : xi) * gi;
            dx[i] = gi * (pos ? 1.0f : s);
        }
        part[c] = acc;
    }
    double sum = 0;
    for (int c = 0; c < NCHUNK; c++)
        sum += part[c];
    F(da)[0] = (float)sum;
    return TMA_OK;
}

CPU_ISA_END
