/*
 * cpu_gat.c: the CPU backend's GAT ops: the attention scores, the
 * attention-weighted aggregation and its backward.  Straightforward loops
 * parallelised with OpenMP over destination rows (or, where a scatter
 * over source rows would race, over ranges of source rows, each part
 * walking every edge), so every result is the same for any thread count.  Compiled twice, for AVX2 and for the baseline ISA
 * (see cpu_int.h).
 */
#include "cpu_int.h"

#include <math.h>

static inline float gat_leaky(float x) { return x > 0 ? x : TMA_GNN_GAT_SLOPE * x; }

tma_status_t cpu_gat_scores(tma_gnn_backend_t *b, const tensor_t *T, const tensor_t *a_src, const tensor_t *a_dst,
                            tensor_t *S)
{
    const int64_t K = a_src->rows, C = a_src->cols, n = T->rows;
    const float *t = CF(T), *as = CF(a_src), *ad = CF(a_dst);
    float *s = F(S);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n * K * C > PAR_MIN)
    for (int64_t u = 0; u < n; u++)
        for (int64_t k = 0; k < K; k++) {
            const float *tu = t + u * K * C + k * C;
            float x = 0, y = 0;
            for (int64_t c = 0; c < C; c++) {
                x += tu[c] * as[k * C + c];
                y += tu[c] * ad[k * C + c];
            }
            s[u * 2 * K + k] = x;
            s[u * 2 * K + K + k] = y;
        }
    return TMA_OK;
}

tma_status_t cpu_gat_aggregate(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *T,
                               const tensor_t *S, int64_t self0, tensor_t *alpha, tensor_t *Y)
{
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices);
    const int64_t K = S->cols / 2, KC = T->cols, C = KC / K, d = Y->cols;
    const int mean = d != KC;
    const float *t = CF(T), *s = CF(S);
    float *al = F(alpha), *y = F(Y);
#pragma omp parallel for num_threads(NT(b)) schedule(dynamic, 64) if (blk->num_edges * KC > PAR_MIN)
    for (int64_t i = 0; i < blk->num_dst; i++) {
        float *yi = y + i * d;
        row_zero(yi, d);
        for (int64_t k = 0; k < K; k++) {
            const float sd = s[(self0 + i) * 2 * K + K + k];
            float m = -INFINITY, z = 0;
            for (int32_t e = ip[i]; e < ip[i + 1]; e++)
                m = fmaxf(m, gat_leaky(s[(int64_t)ix[e] * 2 * K + k] + sd));
            for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
                float w = expf(gat_leaky(s[(int64_t)ix[e] * 2 * K + k] + sd) - m);
                al[(int64_t)e * K + k] = w;
                z += w;
            }
            for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
                float a = al[(int64_t)e * K + k] / z;
                al[(int64_t)e * K + k] = a;
                row_axpy(mean ? yi : yi + k * C, t + (int64_t)ix[e] * KC + k * C, mean ? a / (float)K : a, C);
            }
        }
    }
    return TMA_OK;
}

tma_status_t cpu_gat_aggregate_bwd(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *T,
                                   const tensor_t *S, const tensor_t *alpha, const tensor_t *a_src,
                                   const tensor_t *a_dst, const tensor_t *dY, tensor_t *dE, tensor_t *dS,
                                   tensor_t *dT, tensor_t *da_src, tensor_t *da_dst)
{
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices);
    const int64_t K = a_src->rows, C = a_src->cols, KC = T->cols, n = T->rows, nd = blk->num_dst, d = dY->cols;
    const int mean = d != KC;
    const float scale = mean ? 1.0f / (float)K : 1.0f;
    const float *t = CF(T), *s = CF(S), *al = CF(alpha), *dy = CF(dY), *as = CF(a_src), *ad = CF(a_dst);
    float *de = F(dE), *ds = F(dS), *dt = F(dT);
    const int par = blk->num_edges * KC > PAR_MIN;

    /* 1: each edge's gradient through the softmax and the LeakyReLU, and
     * the destination scores' (row i's own), one destination row a step;
     * every head of an edge while its source row is at hand. */
#pragma omp parallel for num_threads(NT(b)) schedule(dynamic, 64) if (par)
    for (int64_t i = 0; i < n; i++) {
        float sum[TMA_GNN_MAX_HEADS] = {0}, gd[TMA_GNN_MAX_HEADS] = {0};
        for (int32_t e = i < nd ? ip[i] : 0; i < nd && e < ip[i + 1]; e++) {
            const float *tu = t + (int64_t)ix[e] * KC;
            for (int64_t k = 0; k < K; k++) {
                const float *go = mean ? dy + i * d : dy + i * d + k * C;
                float g = 0;
                for (int64_t c = 0; c < C; c++)
                    g += go[c] * tu[k * C + c];
                de[(int64_t)e * K + k] = g * scale;
                sum[k] += al[(int64_t)e * K + k] * g * scale;
            }
        }
        for (int32_t e = i < nd ? ip[i] : 0; i < nd && e < ip[i + 1]; e++)
            for (int64_t k = 0; k < K; k++) {
                const float x = s[(int64_t)ix[e] * 2 * K + k] + s[i * 2 * K + K + k];
                const float g = al[(int64_t)e * K + k] * (de[(int64_t)e * K + k] - sum[k]) * (x > 0 ? 1.0f : TMA_GNN_GAT_SLOPE);
                de[(int64_t)e * K + k] = g;
                gd[k] += g;
            }
        for (int64_t k = 0; k < K; k++) {
            ds[i * 2 * K + K + k] = gd[k];
            ds[i * 2 * K + k] = 0;
        }
    }
    /* 2: the source scores' gradients: a scatter over the edges in order. */
    for (int64_t i = 0; i < nd; i++)
        for (int32_t e = ip[i]; e < ip[i + 1]; e++)
            for (int64_t k = 0; k < K; k++)
                ds[(int64_t)ix[e] * 2 * K + k] += de[(int64_t)e * K + k];
    /* 3: dT, the source rows split into ranges between threads: each part
     * walks every edge in order and scatters whole rows into its own range,
     * so a row sums its edges in edge order for any split; then the scores'
     * share.  (Splitting the columns instead sent every edge's row to memory
     * once per 16 columns: most of a GAT step.) */
    const int64_t parts = par ? 4 * (int64_t)NT(b) : 1;
#pragma omp parallel for num_threads(NT(b)) schedule(dynamic, 1) if (par)
    for (int64_t p = 0; p < parts; p++) {
        const int64_t u0 = n * p / parts, u1 = n * (p + 1) / parts;
        for (int64_t u = u0; u < u1; u++)
            row_zero(dt + u * KC, KC);
        for (int64_t i = 0; i < nd; i++)
            for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
                if (ix[e] < u0 || ix[e] >= u1)
                    continue;
                float *du = dt + (int64_t)ix[e] * KC;
                for (int64_t k = 0; k < K; k++) {
                    const float a = al[(int64_t)e * K + k] * scale, *g = dy + i * d + (mean ? 0 : k * C);
                    for (int64_t c = 0; c < C; c++)
                        du[k * C + c] += a * g[c];
                }
            }
        for (int64_t u = u0; u < u1; u++)
            for (int64_t k = 0; k < K; k++) {
                const float gs = ds[u * 2 * K + k], gdst = ds[u * 2 * K + K + k];
                for (int64_t c = 0; c < C; c++)
                    dt[u * KC + k * C + c] += gs * as[k * C + c] + gdst * ad[k * C + c];
            }
    }
    /* 4: the attention vectors' gradients, double sums over the rows in
     * order, 16 columns of one head a thread's block (row-major reads). */
    const int64_t per_head = (C + 15) / 16, nblk = K * per_head;
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n * KC > PAR_MIN)
    for (int64_t cb = 0; cb < nblk; cb++) {
        const int64_t k = cb / per_head, c0 = (cb % per_head) * 16, w = TMA_MIN(C, c0 + 16) - c0, col = k * C + c0;
        double x[16] = {0}, y[16] = {0};
        for (int64_t u = 0; u < n; u++) {
            const double gs = ds[u * 2 * K + k], gd = ds[u * 2 * K + K + k];
            const float *tu = t + u * KC + col;
            for (int64_t j = 0; j < w; j++) {
                x[j] += gs * tu[j];
                y[j] += gd * tu[j];
            }
        }
        for (int64_t j = 0; j < w; j++) {
            F(da_src)[col + j] = (float)x[j];
            F(da_dst)[col + j] = (float)y[j];
        }
    }
    return TMA_OK;
}

CPU_ISA_END
