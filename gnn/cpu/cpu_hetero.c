/*
 * cpu_hetero.c: the CPU backend's heterogeneous ops: RGCN aggregation and its backward, DistMult, row
 * gather and scatter. Compiled twice, for AVX2 and for the baseline ISA (see cpu_int.h).
 */
#include "cpu_int.h"

/* ------------------------------------------------------------------ heterogeneous ops */

/* RGCN aggregation after the basis projection: one row of Y per thread
 * step, the row's edges in order, each adding its B basis slices of T
 * scaled by w[e] a[rel[e], b] (so W_r is never formed). */
tma_status_t cpu_rgcn_aggregate(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *rel,
                                       const tensor_t *T, const tensor_t *coef, tensor_t *Y)
{
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices), *r = CI32(rel);
    const float *w = CF(&blk->weights), *t = CF(T), *a = CF(coef);
    float *y = F(Y);
    const int64_t d = Y->cols, nb = coef->cols, tc = T->cols;
#pragma omp parallel for num_threads(NT(b)) schedule(dynamic, 64) if (blk->num_edges * tc > PAR_MIN)
    for (int64_t i = 0; i < blk->num_dst; i++) {
        float *yi = y + i * d;
        row_zero(yi, d);
        for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
            if (e + PREFETCH_AHEAD < blk->num_edges)
                prefetch_row(t + (int64_t)ix[e + PREFETCH_AHEAD] * tc, tc);
            const float *tu = t + (int64_t)ix[e] * tc, *ar = a + (int64_t)r[e] * nb;
            for (int64_t q = 0; q < nb; q++)
                row_axpy(yi, tu + q * d, w[e] * ar[q], d);
        }
    }
    return TMA_OK;
}

/* dT as spmm_t does it (a gather per source row through the transpose, or
 * a scatter with the columns split between threads), then dcoef as a
 * reduction over NCHUNK fixed chunks of destination rows into double
 * partials of R x B (at most TMA_GNN_RGCN_MAX_COEF <= SCRATCH_COLS), summed
 * in chunk order: deterministic for any thread count. */
tma_status_t cpu_rgcn_aggregate_bwd(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *rel,
                                           const tensor_t *t_rel, const tensor_t *dY, const tensor_t *T,
                                           const tensor_t *coef, tensor_t *dT, tensor_t *dcoef)
{
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices), *r = CI32(rel);
    const float *w = CF(&blk->weights), *t = CF(T), *a = CF(coef), *dy = CF(dY);
    float *dt = F(dT);
    const int64_t d = dY->cols, nb = coef->cols, tc = T->cols, nc = tma_gnn_tensor_numel(coef);
    const int64_t ndst = blk->num_dst, nsrc = blk->num_src;
    const int par = blk->num_edges * tc > PAR_MIN;
    if (blk->has_transpose) {
        const int32_t *tp = CI32(&blk->t_indptr), *ti = CI32(&blk->t_indices), *tr = CI32(t_rel);
        const float *tw = CF(&blk->t_weights);
#pragma omp parallel for num_threads(NT(b)) schedule(dynamic, 64) if (par)
        for (int64_t u = 0; u < nsrc; u++) {
            float *du = dt + u * tc;
            row_zero(du, tc);
            for (int32_t e = tp[u]; e < tp[u + 1]; e++) {
                const float *g = dy + (int64_t)ti[e] * d, *ar = a + (int64_t)tr[e] * nb;
                for (int64_t q = 0; q < nb; q++)
                    row_axpy(du + q * d, g, tw[e] * ar[q], d);
            }
        }
    } else {
        int64_t cw;
        int nch = col_chunks(d, NT(b), &cw);
#pragma omp parallel num_threads(NT(b)) if (par)
        {
#pragma omp for schedule(static)
            for (int64_t u = 0; u < nsrc; u++)
                row_zero(dt + u * tc, tc);
#pragma omp for schedule(static, 1)
            for (int c = 0; c < nch; c++) {
                int64_t j0 = c * cw, len = TMA_MIN(d, j0 + cw) - j0;
                for (int64_t i = 0; i < ndst; i++) {
                    const float *g = dy + i * d + j0;
                    for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
                        const float *ar = a + (int64_t)r[e] * nb;
                        float *du = dt + (int64_t)ix[e] * tc + j0;
                        for (int64_t q = 0; q < nb; q++)
                            row_axpy(du + q * d, g, w[e] * ar[q], len);
                    }
                }
            }
        }
    }
    double *part = partials(b, 0);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (par)
    for (int c = 0; c < NCHUNK; c++) {
        double *acc = part + (size_t)c * SCRATCH_COLS;
        for (int64_t k = 0; k < nc; k++)
            acc[k] = 0;
        for (int64_t i = ndst * c / NCHUNK; i < ndst * (c + 1) / NCHUNK; i++) {
            const float *g = dy + i * d;
            for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
                const float *tu = t + (int64_t)ix[e] * tc;
                double *ar = acc + (int64_t)r[e] * nb;
                for (int64_t q = 0; q < nb; q++) {
                    ar[q] += (double)w[e] * row_dot(g, tu + q * d, d);
                }
            }
        }
    }
    combine_partials(part, nc, F(dcoef));
    return TMA_OK;
}

tma_status_t cpu_distmult(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
                                 const tensor_t *rel, const tensor_t *Wr, tensor_t *score)
{
    const int64_t d = H->cols, np = score->rows;
    const float *h = CF(H), *wr = Wr ? CF(Wr) : NULL;
    const int32_t *u = CI32(hi), *v = CI32(ti), *r = rel ? CI32(rel) : NULL;
    float *sc = F(score);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (np * d > PAR_MIN)
    for (int64_t p = 0; p < np; p++) {
        const float *hu = h + (int64_t)u[p] * d, *hv = h + (int64_t)v[p] * d;
        float s = 0;
        if (wr) {
            const float *w = wr + (int64_t)r[p] * d;
#pragma omp simd reduction(+ : s)
            for (int64_t j = 0; j < d; j++)
                s += hu[j] * w[j] * hv[j];
        } else {
            /* The dot decoder: every diagonal is ones. */
#pragma omp simd reduction(+ : s)
            for (int64_t j = 0; j < d; j++)
                s += hu[j] * hv[j];
        }
        sc[p] = s;
    }
    return TMA_OK;
}

/* dH and dWr are scatters: threads split the columns (as pair_mul_bwd), so
 * every element is summed by one thread in pair order. */
tma_status_t cpu_distmult_bwd(tma_gnn_backend_t *b, const tensor_t *dscore, const tensor_t *H,
                                     const tensor_t *hi, const tensor_t *ti, const tensor_t *rel, const tensor_t *Wr,
                                     tensor_t *dH, tensor_t *dWr)
{
    const int64_t d = H->cols, np = dscore->rows, nh = dH->rows, nr = dWr ? dWr->rows : 0;
    const float *h = CF(H), *wr = Wr ? CF(Wr) : NULL, *ds = CF(dscore);
    const int32_t *u = CI32(hi), *v = CI32(ti), *r = rel ? CI32(rel) : NULL;
    float *dh = F(dH), *dw = dWr ? F(dWr) : NULL;
    int64_t cw;
    int nch = col_chunks(d, NT(b), &cw);
#pragma omp parallel num_threads(NT(b)) if (np * d > PAR_MIN)
    {
#pragma omp for schedule(static)
        for (int64_t q = 0; q < nh; q++)
            row_zero(dh + q * d, d);
#pragma omp for schedule(static)
        for (int64_t q = 0; q < nr; q++)
            row_zero(dw + q * d, d);
#pragma omp for schedule(static, 1)
        for (int c = 0; c < nch; c++) {
            int64_t j0 = c * cw, len = TMA_MIN(d, j0 + cw) - j0;
            for (int64_t p = 0; p < np; p++) {
                const float g = ds[p];
                const float *hu = h + (int64_t)u[p] * d + j0, *hv = h + (int64_t)v[p] * d + j0;
                float *du = dh + (int64_t)u[p] * d + j0, *dv = dh + (int64_t)v[p] * d + j0;
                /* u == v is possible: separate loops stay correct. */
                if (!wr) {
                    /* The dot decoder: every diagonal is ones, no dWr. */
                    for (int64_t j = 0; j < len; j++)
                        du[j] += g * hv[j];
                    for (int64_t j = 0; j < len; j++)
                        dv[j] += g * hu[j];
                    continue;
                }
                const float *w = wr + (int64_t)r[p] * d + j0;
                float *dwr = dw + (int64_t)r[p] * d + j0;
                for (int64_t j = 0; j < len; j++)
                    du[j] += g * w[j] * hv[j];
                for (int64_t j = 0; j < len; j++)
                    dv[j] += g * w[j] * hu[j];
#pragma omp simd
                for (int64_t j = 0; j < len; j++)
                    dwr[j] += g * hu[j] * hv[j];
            }
        }
    }
    return TMA_OK;
}

/* Row copies through an index: a gather (Y[i] = X[id[i]]) or a scatter
 * (Y[id[i]] = X[i]); one row of the index a thread step. */
static tma_status_t rows_copy(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *idx, tensor_t *Y, int scatter)
{
    const int64_t n = scatter ? X->rows : Y->rows, d = X->cols;
    const int32_t *id = CI32(idx);
    const float *x = CF(X);
    float *y = F(Y);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n * d > PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const int64_t to = scatter ? id[i] : i, from = scatter ? i : id[i];
        memcpy(y + to * d, x + from * d, (size_t)d * sizeof(float));
    }
    return TMA_OK;
}

tma_status_t cpu_rows_gather(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *idx, tensor_t *Y)
{
    return rows_copy(b, X, idx, Y, 0);
}

tma_status_t cpu_rows_scatter(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *idx, tensor_t *Y)
{
    return rows_copy(b, X, idx, Y, 1);
}

CPU_ISA_END
