/*
 * cpu_score.c: the CPU backend's scoring: the decoder input (pair products), the fused MLP scorer, the
 * loss. Compiled twice, for AVX2 and for the baseline ISA (see cpu_int.h).
 */
#include "cpu_int.h"

/* ------------------------------------------------------------------ decoder input */

/* A pair's row is short work (d products): asking for the tail row twice
 * PREFETCH_AHEAD pairs ahead measured 4-10 % faster scoring on the SBM. */
#define PAIR_PREFETCH_AHEAD (2 * PREFETCH_AHEAD)

/* ep = H[u[p]] * H[v[p]] (pair p of np), asking for a tail row a few pairs ahead. */
static inline void pair_row(const float *h, int64_t d, const int32_t *u, const int32_t *v, int64_t p, int64_t np,
                            float *restrict ep)
{
    const float *hu = h + (int64_t)u[p] * d, *hv = h + (int64_t)v[p] * d;
    if (p + PAIR_PREFETCH_AHEAD < np)
        prefetch_row(h + (int64_t)v[p + PAIR_PREFETCH_AHEAD] * d, d);
#pragma omp simd
    for (int64_t j = 0; j < d; j++)
        ep[j] = hu[j] * hv[j];
}

tma_status_t cpu_pair_mul(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
                                 tensor_t *E)
{
    const int64_t d = H->cols, np = E->rows;
    const float *h = CF(H);
    const int32_t *u = CI32(hi), *v = CI32(ti);
    float *e = F(E);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (np * d > PAR_MIN)
    for (int64_t p = 0; p < np; p++)
        pair_row(h, d, u, v, p, np, e + p * d);
    return TMA_OK;
}

/* Rows a thread scores at once in score_mlp: with 256-wide layers its two
 * blocks (256 KiB each) stay in the core's L2 cache, and one sgemm of 256
 * rows still runs near OpenBLAS's full rate. */
#define SCORE_ROWS 256
/* The hidden layers of a decoder whose weights score_mlp packs. */
#define SCORE_MAX_LAYERS 4

/* The MLP decoder's logits (see score_mlp in gnn_backend.h): each thread
 * takes blocks of rows and runs the whole decoder on one block (gather and
 * multiply, then each layer's single-threaded sgemm and bias + PReLU) while
 * it is in cache; with the own kernels bias and PReLU run on the tiles in
 * registers and the last hidden layer's tiles end in their logits (that
 * layer's output is never stored).  A row's result depends only on its
 * inputs. */
tma_status_t cpu_score_mlp(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
                                  int layers, const tensor_t *const *W, const tensor_t *const *bias,
                                  const tensor_t *const *a, tensor_t *scratch, tensor_t *logits)
{
    const int64_t d = H->cols, np = logits->rows;
    int64_t widest = d;
    for (int k = 0; k < layers; k++)
        widest = TMA_MAX(widest, W[k]->cols);
    const int nt = NT(b);
    const int64_t rows = TMA_MIN((int64_t)SCORE_ROWS, tma_gnn_tensor_numel(scratch) / (2 * widest * nt));
    const int64_t nblk = (np + rows - 1) / rows;
    const float *h = CF(H);
    const int32_t *u = CI32(hi), *v = CI32(ti);
    float *out = F(logits);
    /* Each thread's products run on that thread alone: the own kernels on
     * the decoder's weights packed once here, or single-threaded OpenBLAS. */
    const float *wp[SCORE_MAX_LAYERS];
    const int own = layers - 1 <= SCORE_MAX_LAYERS && own_pack_many(b, layers - 1, W, wp);
    blas_one_thread();
#pragma omp parallel num_threads(nt) if (nblk > 1)
    {
        float *E = F(scratch) + (size_t)omp_get_thread_num() * 2 * rows * widest, *D = E + rows * widest;
#pragma omp for schedule(dynamic, 1)
        for (int64_t blk = 0; blk < nblk; blk++) {
            const int64_t r0 = blk * rows, n = TMA_MIN(rows, np - r0);
            for (int64_t i = 0; i < n; i++)
                pair_row(h, d, u, v, r0 + i, np, E + i * d);
            float *x = E, *y = D;
            int64_t in = d;
            const float *w = CF(W[layers - 1]), b0 = CF(bias[layers - 1])[0];
            for (int k = 0; k < layers - 1; k++) {
                const int64_t o = W[k]->cols;
                const float *bb = CF(bias[k]), s = CF(a[k])[0];
                if (own) {
                    /* Bias and PReLU on the tiles in registers; the last
                     * hidden layer's rows go straight into their logits. */
                    const int last = k == layers - 2;
                    const tma_gnn_gemm512_epilogue_t epi = {bb, 1, s, last ? w : NULL, last ? out + r0 : NULL};
                    tma_gnn_gemm512_nn_epilogue(n, o, in, x, in, wp[k], 0, last ? NULL : y, o, &epi);
                    if (last)
                        break;
                } else {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)o, (int)in, 1.0f, x, (int)in,
                                CF(W[k]), (int)o, 0.0f, y, (int)o);
                    for (int64_t i = 0; i < n; i++) {
                        float *yi = y + i * o;
#pragma omp simd
                        for (int64_t j = 0; j < o; j++) {
                            float z = yi[j] + bb[j];
                            yi[j] = z * (z > 0 ? 1.0f : s);
                        }
                    }
                }
                float *t = x;
                x = y;
                y = t;
                in = o;
            }
            if (own && layers > 1)
                for (int64_t i = 0; i < n; i++)
                    out[r0 + i] += b0;
            else
                for (int64_t i = 0; i < n; i++)
                    out[r0 + i] = row_dot(x + i * in, w, in) + b0;
        }
    }
    return TMA_OK;
}

tma_status_t cpu_pair_mul_bwd(tma_gnn_backend_t *b, const tensor_t *dE, const tensor_t *H,
                                     const tensor_t *hi, const tensor_t *ti, tensor_t *dH)
{
    const int64_t d = H->cols, np = dE->rows, nh = dH->rows;
    const float *h = CF(H), *de = CF(dE);
    const int32_t *u = CI32(hi), *v = CI32(ti);
    float *dh = F(dH);
    int64_t cw;
    int nch = col_chunks(d, NT(b), &cw);
#pragma omp parallel num_threads(NT(b)) if (np * d > PAR_MIN)
    {
#pragma omp for schedule(static)
        for (int64_t r = 0; r < nh; r++)
            row_zero(dh + r * d, d);
#pragma omp for schedule(static, 1)
        for (int c = 0; c < nch; c++) {
            int64_t j0 = c * cw, len = TMA_MIN(d, j0 + cw) - j0;
            for (int64_t p = 0; p < np; p++) {
                const float *g = de + p * d + j0;
                const float *hu = h + (int64_t)u[p] * d + j0, *hv = h + (int64_t)v[p] * d + j0;
                float *du = dh + (int64_t)u[p] * d + j0, *dv = dh + (int64_t)v[p] * d + j0;
                /* u == v is possible (a self pair): two plain loops stay correct. */
                for (int64_t j = 0; j < len; j++)
                    du[j] += g[j] * hv[j];
                for (int64_t j = 0; j < len; j++)
                    dv[j] += g[j] * hu[j];
            }
        }
    }
    return TMA_OK;
}

/* ------------------------------------------------------------------ loss */

tma_status_t cpu_bce_logits(tma_gnn_backend_t *b, const tensor_t *logits, const tensor_t *labels,
                                   double *loss_p, tensor_t *dlogits)
{
    const int64_t n = tma_gnn_tensor_numel(logits);
    const float *x = CF(logits), *y = CF(labels);
    float *dl = F(dlogits);
    double loss = 0;
    for (int64_t i = 0; i < n; i++) {
        double xi = x[i], yi = y[i];
        loss += (xi > 0 ? xi : 0) - xi * yi + log1p(exp(-fabs(xi)));
        dl[i] = (float)((1.0 / (1.0 + exp(-xi)) - yi) / (double)n);
    }
    *loss_p = loss / (double)n;
    return TMA_OK;
}

CPU_ISA_END
