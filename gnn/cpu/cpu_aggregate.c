/*
 * cpu_aggregate.c: the CPU backend's aggregation: the sparse products with a block, the node features
 * (dense or CSR) with their products and aggregates, and the fused inference layer. Compiled twice,
 * for AVX2 and for the baseline ISA (see cpu_int.h).
 */
#include "cpu_int.h"

/* ------------------------------------------------------------------ sparse */

/* y = sum over edges e in [e0, e1) of w[e] times source row ix[e] (row u
 * of x, or row id[u] where id is given); the first edge initialises the
 * row, so there is no separate zeroing pass. */
static inline void sum_row(float *restrict y, const float *x, const int64_t *id, int64_t d, int32_t e0, int32_t e1,
                           const int32_t *ix, const float *w, int64_t nnz)
{
#define SRC_ROW_(e) (x + (id ? id[ix[e]] : (int64_t)ix[e]) * d)
    if (e0 == e1) {
        row_zero(y, d);
        return;
    }
    {
        const float *xr = SRC_ROW_(e0);
        const float we = w[e0];
#pragma omp simd
        for (int64_t j = 0; j < d; j++)
            y[j] = we * xr[j];
    }
    for (int32_t e = e0 + 1; e < e1; e++) {
        if (e + PREFETCH_AHEAD < nnz)
            prefetch_row(SRC_ROW_(e + PREFETCH_AHEAD), d);
        row_axpy(y, SRC_ROW_(e), w[e], d);
    }
#undef SRC_ROW_
}

tma_status_t cpu_spmm(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *X, tensor_t *Y)
{
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices);
    const float *w = CF(&blk->weights), *x = CF(X);
    float *y = F(Y);
    const int64_t d = Y->cols, nnz = blk->num_edges;
#pragma omp parallel for num_threads(NT(b)) schedule(dynamic, 64) if (blk->num_edges * d > PAR_MIN)
    for (int64_t i = 0; i < blk->num_dst; i++)
        sum_row(y + i * d, x, NULL, d, ip[i], ip[i + 1], ix, w, nnz);
    return TMA_OK;
}

/* dX = A^T dY.  With the transposed block: a gather per source row (each
 * row written once).  Without: a scatter where threads split the columns, so
 * each element is summed by one thread in edge order.  Both are
 * deterministic and need no atomics. */
tma_status_t cpu_spmm_t(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *dY,
                               tensor_t *dX)
{
    if (blk->has_transpose) {
        const int32_t *tp = CI32(&blk->t_indptr), *ti = CI32(&blk->t_indices);
        const float *tw = CF(&blk->t_weights), *dy = CF(dY);
        float *dx = F(dX);
        const int64_t d = dY->cols;
#pragma omp parallel for num_threads(NT(b)) schedule(dynamic, 64) if (blk->num_edges * d > PAR_MIN)
        for (int64_t j = 0; j < blk->num_src; j++) {
            float *xj = dx + j * d;
            int32_t e0 = tp[j], e1 = tp[j + 1];
            if (e0 == e1) {
                row_zero(xj, d);
                continue;
            }
            const float *g = dy + (int64_t)ti[e0] * d;
            const float we = tw[e0];
#pragma omp simd
            for (int64_t q = 0; q < d; q++)
                xj[q] = we * g[q];
            for (int32_t e = e0 + 1; e < e1; e++) {
                if (e + PREFETCH_AHEAD < blk->num_edges)
                    prefetch_row(dy + (int64_t)ti[e + PREFETCH_AHEAD] * d, d);
                row_axpy(xj, dy + (int64_t)ti[e] * d, tw[e], d);
            }
        }
        return TMA_OK;
    }
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices);
    const float *w = CF(&blk->weights), *dy = CF(dY);
    float *dx = F(dX);
    const int64_t d = dY->cols, nsrc = dX->rows, ndst = blk->num_dst;
    int64_t cw;
    int nch = col_chunks(d, NT(b), &cw);
#pragma omp parallel num_threads(NT(b)) if (blk->num_edges * d > PAR_MIN)
    {
#pragma omp for schedule(static)
        for (int64_t r = 0; r < nsrc; r++)
            row_zero(dx + r * d, d);
#pragma omp for schedule(static, 1)
        for (int c = 0; c < nch; c++) {
            int64_t j0 = c * cw, len = TMA_MIN(d, j0 + cw) - j0;
            for (int64_t i = 0; i < ndst; i++) {
                const float *src = dy + i * d + j0;
                for (int32_t e = ip[i]; e < ip[i + 1]; e++)
                    row_axpy(dx + (int64_t)ix[e] * d + j0, src, w[e], len);
            }
        }
    }
    return TMA_OK;
}

/* ------------------------------------------------------------------ features */

/* Features as given (dense, usually a read-only map of the graph file) or as
 * CSR when at most CPU_SPARSE_DENSITY of the entries are non-zero.  Dense
 * 16-bit features (f16, bf16) stay as stored, read through `raw`: each row
 * is widened as it is read (into `gather` for the products, on the fly in
 * the neighbour sums), never the whole table. */
struct tma_gnn_feat {
    int64_t n, dim;
    int sparse;
    const float *dense; /* f32 features; NULL for 16-bit ones */
    const void *raw;
    tma_feat_dtype_t dtype;
    float *wrow; /* 16-bit: a widened row per thread, [threads x dim], for the CSR scan */
    int64_t *rowptr; /* CSR, [n + 1] */
    int32_t *col;
    float *val;
    int64_t nnz;
    float *gather; /* dense: rows gathered for one sgemm, [chunk_rows x dim] */
    int64_t chunk_rows;
};

#define CPU_SPARSE_DENSITY 0.10

static void feat_free(tma_gnn_feat_t *f)
{
    if (!f)
        return;
    free(f->rowptr);
    free(f->col);
    free(f->val);
    tma_free_aligned(f->gather);
    tma_free_aligned(f->wrow);
    free(f);
}

/* Row r widened into dst[0 .. dim). */
static inline void feat_row(const tma_gnn_feat_t *f, int64_t r, float *dst)
{
    tma_feat_widen((const char *)f->raw + (size_t)(r * f->dim) * tma_feat_dtype_size(f->dtype), f->dtype,
                   (size_t)f->dim, dst);
}

/* y = w x (first) or y += w x, x 16-bit feature row r widened on the fly
 * (one pass, in SIMD lanes: the widenings have no branches). */
static inline void feat_axpy(float *restrict y, const tma_gnn_feat_t *f, int64_t r, float w, int first)
{
    const int64_t d = f->dim;
    const uint16_t *restrict x = (const uint16_t *)f->raw + r * d;
    if (f->dtype == TMA_FEAT_F16 && first) {
#pragma omp simd
        for (int64_t j = 0; j < d; j++)
            y[j] = w * tma_f16_to_f32(x[j]);
    } else if (f->dtype == TMA_FEAT_F16) {
#pragma omp simd
        for (int64_t j = 0; j < d; j++)
            y[j] += w * tma_f16_to_f32(x[j]);
    } else if (first) {
#pragma omp simd
        for (int64_t j = 0; j < d; j++)
            y[j] = w * tma_bf16_to_f32(x[j]);
    } else {
#pragma omp simd
        for (int64_t j = 0; j < d; j++)
            y[j] += w * tma_bf16_to_f32(x[j]);
    }
}

/* The weighted sum of feature rows as sum_row, for 16-bit features. */
static void sum_row_feat(float *restrict y, const tma_gnn_feat_t *f, const int64_t *id, int32_t e0, int32_t e1,
                         const int32_t *ix, const float *w)
{
    if (e0 == e1)
        row_zero(y, f->dim);
    for (int32_t e = e0; e < e1; e++)
        feat_axpy(y, f, id ? id[ix[e]] : (int64_t)ix[e], w[e], e == e0);
}

tma_status_t cpu_feat_create(tma_gnn_backend_t *b, const void *host, tma_feat_dtype_t dtype, int64_t n, int64_t dim,
                             unsigned flags, tma_gnn_feat_t **f_p)
{
    tma_gnn_feat_t *f = calloc(1, sizeof *f);
    if (!f)
        return TMA_ERR_NOMEM;
    f->n = n;
    f->dim = dim;
    f->raw = host;
    f->dtype = dtype;
    f->dense = dtype == TMA_FEAT_F32 ? host : NULL;
    int64_t *row_nnz = NULL;
    /* The rows widened one at a time (a thread's row) for the CSR scan. */
    if (dtype != TMA_FEAT_F32 && !(f->wrow = tma_alloc_aligned((size_t)(NT(b) * dim) * sizeof(float))))
        goto nomem;
    if (!(flags & TMA_GNN_FEAT_DENSE) && n > 0 && dim >= 16) {
        row_nnz = malloc((size_t)n * sizeof *row_nnz);
        if (!row_nnz)
            goto nomem;
        int64_t nnz = 0;
#pragma omp parallel for num_threads(NT(b)) schedule(static) reduction(+ : nnz)
        for (int64_t i = 0; i < n; i++) {
            const float *r = f->dense ? f->dense + i * dim : f->wrow + omp_get_thread_num() * dim;
            if (!f->dense)
                feat_row(f, i, (float *)r);
            int64_t c = 0;
            for (int64_t j = 0; j < dim; j++)
                c += r[j] != 0.0f;
            row_nnz[i] = c;
            nnz += c;
        }
        if ((double)nnz <= CPU_SPARSE_DENSITY * (double)n * (double)dim) {
            f->sparse = 1;
            f->nnz = nnz;
            f->rowptr = malloc((size_t)(n + 1) * sizeof *f->rowptr);
            f->col = malloc((size_t)(nnz ? nnz : 1) * sizeof *f->col);
            f->val = malloc((size_t)(nnz ? nnz : 1) * sizeof *f->val);
            if (!f->rowptr || !f->col || !f->val)
                goto nomem;
            f->rowptr[0] = 0;
            for (int64_t i = 0; i < n; i++)
                f->rowptr[i + 1] = f->rowptr[i] + row_nnz[i];
#pragma omp parallel for num_threads(NT(b)) schedule(static)
            for (int64_t i = 0; i < n; i++) {
                const float *r = f->dense ? f->dense + i * dim : f->wrow + omp_get_thread_num() * dim;
                if (!f->dense)
                    feat_row(f, i, (float *)r);
                int64_t o = f->rowptr[i];
                for (int64_t j = 0; j < dim; j++) {
                    if (r[j] != 0.0f) {
                        f->col[o] = (int32_t)j;
                        f->val[o] = r[j];
                        o++;
                    }
                }
            }
        }
        free(row_nnz);
        row_nnz = NULL;
    }
    if (!f->sparse) {
        /* Up to 4 Mi floats of gathered rows per sgemm. */
        f->chunk_rows = TMA_MAX((int64_t)1, TMA_MIN(TMA_MAX(n, (int64_t)1), ((int64_t)4 << 20) / dim));
        f->gather = tma_alloc_aligned((size_t)(f->chunk_rows * dim) * sizeof(float));
        if (!f->gather)
            goto nomem;
    }
    tma_log_debug(COMP, "features %lld x %lld stored %s (%lld non-zeros)", (long long)n, (long long)dim,
                  f->sparse ? "as CSR" : "dense", (long long)f->nnz);
    *f_p = f;
    return TMA_OK;
nomem:
    free(row_nnz);
    feat_free(f);
    tma_log_error(COMP, "out of memory preparing %lld x %lld features", (long long)n, (long long)dim);
    return TMA_ERR_NOMEM;
}

void cpu_feat_destroy(tma_gnn_backend_t *b, tma_gnn_feat_t *f) { feat_free(f); }

void cpu_feat_info(const tma_gnn_feat_t *f, tma_gnn_feat_info_t *info_p)
{
    info_p->num_nodes = f->n;
    info_p->dim = f->dim;
    info_p->sparse = f->sparse;
    info_p->nnz_per_row = f->sparse ? (f->n ? (double)f->nnz / (double)f->n : 0.0) : (double)f->dim;
}

/* 1 when ids[0..n) are consecutive, so rows can be used in place. */
static int ids_contiguous(const int64_t *ids, int64_t n)
{
    for (int64_t i = 1; i < n; i++)
        if (ids[i] != ids[0] + i)
            return 0;
    return 1;
}

static void gather_rows(tma_gnn_backend_t *b, const tma_gnn_feat_t *f, const int64_t *ids, int64_t n, float *dst)
{
    const int64_t dim = f->dim;
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n * dim > PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        if (!f->dense) {
            feat_row(f, ids[i], dst + i * dim);
            continue;
        }
        if (i + PREFETCH_AHEAD < n)
            prefetch_row(f->dense + ids[i + PREFETCH_AHEAD] * dim, dim);
        memcpy(dst + i * dim, f->dense + ids[i] * dim, (size_t)dim * sizeof(float));
    }
}

tma_status_t cpu_feat_matmul(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                    const tensor_t *W, float beta, tensor_t *out)
{
    const int64_t n = out->rows, d = W->cols, dim = f->dim;
    const int64_t *id = CI64(ids);
    const float *w = CF(W);
    float *o = F(out);
    if (f->sparse) {
#pragma omp parallel for num_threads(NT(b)) schedule(dynamic, 64) if (n * d > PAR_MIN)
        for (int64_t i = 0; i < n; i++) {
            float *oi = o + i * d;
            if (beta == 0.0f)
                row_zero(oi, d);
            else if (beta != 1.0f)
                for (int64_t j = 0; j < d; j++)
                    oi[j] *= beta;
            const int64_t q1 = f->rowptr[id[i] + 1];
            for (int64_t q = f->rowptr[id[i]]; q < q1; q++) {
                if (q + PREFETCH_AHEAD < q1)
                    prefetch_row(w + (int64_t)f->col[q + PREFETCH_AHEAD] * d, d);
                row_axpy(oi, w + (int64_t)f->col[q] * d, f->val[q], d);
            }
        }
        return TMA_OK;
    }
    if (n > 0 && f->dense && ids_contiguous(id, n)) {
        sgemm_rows(b, n, d, dim, 1.0f, f->dense + id[0] * dim, dim, 0, w, d, beta, o, d, NULL);
        return TMA_OK;
    }
    for (int64_t r0 = 0; r0 < n; r0 += f->chunk_rows) {
        int64_t rn = TMA_MIN(f->chunk_rows, n - r0);
        gather_rows(b, f, id + r0, rn, f->gather);
        sgemm_rows(b, rn, d, dim, 1.0f, f->gather, dim, 0, w, d, beta, o + r0 * d, d, NULL);
    }
    return TMA_OK;
}

tma_status_t cpu_feat_matmul_grad(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                         const tensor_t *dOut, tensor_t *dW)
{
    const int64_t n = dOut->rows, d = dOut->cols, dim = f->dim;
    const int64_t *id = CI64(ids);
    const float *g = CF(dOut);
    float *dw = F(dW);
    if (f->sparse) {
        int64_t cw;
        int nch = col_chunks(d, NT(b), &cw);
#pragma omp parallel num_threads(NT(b)) if (dim * d > PAR_MIN)
        {
#pragma omp for schedule(static)
            for (int64_t r = 0; r < dim; r++)
                row_zero(dw + r * d, d);
#pragma omp for schedule(static, 1)
            for (int c = 0; c < nch; c++) {
                int64_t j0 = c * cw, len = TMA_MIN(d, j0 + cw) - j0;
                for (int64_t i = 0; i < n; i++) {
                    const float *gi = g + i * d + j0;
                    for (int64_t q = f->rowptr[id[i]]; q < f->rowptr[id[i] + 1]; q++)
                        row_axpy(dw + (int64_t)f->col[q] * d + j0, gi, f->val[q], len);
                }
            }
        }
        return TMA_OK;
    }
    if (n == 0) {
        memset(dw, 0, (size_t)(dim * d) * sizeof(float));
        return TMA_OK;
    }
    if (f->dense && ids_contiguous(id, n)) {
        sgemm_tn(b, dim, d, n, 1.0f, f->dense + id[0] * dim, dim, g, d, 0.0f, dw, d);
        return TMA_OK;
    }
    for (int64_t r0 = 0; r0 < n; r0 += f->chunk_rows) {
        int64_t rn = TMA_MIN(f->chunk_rows, n - r0);
        gather_rows(b, f, id + r0, rn, f->gather);
        sgemm_tn(b, dim, d, rn, 1.0f, f->gather, dim, g + r0 * d, d, r0 == 0 ? 0.0f : 1.0f, dw, d);
    }
    return TMA_OK;
}

/* The weighted neighbour sums of the block's rows over dense features, into
 * rows of o; with self, each row's own feature row first and its sum beside
 * it (rows 2 x dim wide: feat_self_aggregate). */
/* Rows ahead whose own feature row dense_sums asks for: each row's own row
 * is at random in the table too (side by side on the 2M-edge SBM's SAGE
 * step: feat_self_aggregate 33-38 ms -> 29-35 ms). */
#define SELF_AHEAD 2
static void dense_sums(tma_gnn_backend_t *b, const tma_gnn_feat_t *f, const int64_t *id, const tma_gnn_block_t *blk,
                       int self, float *o)
{
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices);
    const float *w = CF(&blk->weights);
    const int64_t dim = f->dim, width = self ? 2 * dim : dim;
#pragma omp parallel for num_threads(NT(b)) schedule(dynamic, 64) if (blk->num_edges * dim > PAR_MIN)
    for (int64_t i = 0; i < blk->num_dst; i++) {
        float *oi = o + i * width;
        if (!f->dense) {
            if (self)
                feat_row(f, id[i], oi);
            sum_row_feat(oi + width - dim, f, id, ip[i], ip[i + 1], ix, w);
            continue;
        }
        if (self && i + SELF_AHEAD < blk->num_dst)
            prefetch_row(f->dense + id[i + SELF_AHEAD] * dim, dim);
        if (self)
            memcpy(oi, f->dense + id[i] * dim, (size_t)dim * sizeof(float));
        sum_row(oi + width - dim, f->dense, id, dim, ip[i], ip[i + 1], ix, w, blk->num_edges);
    }
}

tma_status_t cpu_feat_aggregate(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                       const tma_gnn_block_t *blk, tensor_t *out)
{
    const int64_t *id = CI64(ids);
    if (!f->sparse) {
        dense_sums(b, f, id, blk, 0, F(out));
        return TMA_OK;
    }
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices);
    const float *w = CF(&blk->weights);
    const int64_t dim = f->dim;
    float *o = F(out);
#pragma omp parallel for num_threads(NT(b)) schedule(dynamic, 64) if (blk->num_edges * dim > PAR_MIN)
    for (int64_t i = 0; i < blk->num_dst; i++) {
        float *oi = o + i * dim;
        row_zero(oi, dim);
        for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
            const int64_t v = id[ix[e]];
            for (int64_t q = f->rowptr[v]; q < f->rowptr[v + 1]; q++)
                oi[f->col[q]] += w[e] * f->val[q];
        }
    }
    return TMA_OK;
}

/* Each row's own feature row, then its neighbours' weighted sum (see
 * feat_self_aggregate in gnn_backend.h), one pass over the rows. */
tma_status_t cpu_feat_self_aggregate(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                            const tma_gnn_block_t *blk, tensor_t *out)
{
    dense_sums(b, f, CI64(ids), blk, 1, F(out));
    return TMA_OK;
}

/* ------------------------------------------------------------------ fused inference layer */

/* Rows of a layer_infer tile: with d_in = d_out = 256 the tile's aggregate
 * and output (256 KiB) and the weight stay in a core's L2 and L3. */
#define INFER_ROWS 128

/* One encoder layer for a chunk of rows (see layer_infer in gnn_backend.h):
 * each thread takes tiles of rows and runs the aggregation, the products
 * (single-threaded sgemm), the bias and LayerNorm + PReLU on one tile while
 * it is in cache, instead of four passes over the chunk through memory and
 * a parallel region for each.  A row's sums are those of the separate
 * ops, in the same order (the products are OpenBLAS's, on a tile's rows
 * instead of a slice's). */
tma_status_t cpu_layer_infer(tma_gnn_backend_t *b, const tma_gnn_layer_infer_t *L, tensor_t *scratch,
                                    tensor_t *Y)
{
    const tma_gnn_block_t *blk = L->blk;
    const int64_t n = blk->num_dst, d = L->W->rows, h = L->W->cols, nnz = blk->num_edges;
    const int nt = NT(b);
    const int64_t rows = TMA_MIN((int64_t)INFER_ROWS, tma_gnn_tensor_numel(scratch) / ((2 * d + h) * nt));
    const int64_t ntile = (n + rows - 1) / rows;
    const int32_t *ip = CI32(&blk->indptr), *ix = CI32(&blk->indices);
    const float *w = CF(&blk->weights), *bias = CF(L->bias);
    const float *x = L->X ? CF(L->X) : L->feat->dense;
    const tma_gnn_feat_t *hf = x ? NULL : L->feat; /* 16-bit features, widened row by row */
    const int64_t *id = L->X ? NULL : CI64(L->ids);
    float *y = F(Y);
    /* The weights packed once for the own kernels (the bias added by the
     * tile's last product), or single-threaded OpenBLAS on each tile. */
    const tensor_t *const ws[2] = {L->W, L->W_self};
    const float *wp[2] = {NULL, NULL};
    const int own = own_pack_many(b, L->W_self ? 2 : 1, ws, wp);
    blas_one_thread();
#pragma omp parallel num_threads(nt) if (ntile > 1)
    {
        float *A = F(scratch) + (size_t)omp_get_thread_num() * rows * (2 * d + h), *S = A + rows * d,
              *Z = S + rows * d;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < ntile; t++) {
            const int64_t r0 = t * rows, m = TMA_MIN(rows, n - r0);
            for (int64_t i = 0; i < m; i++) {
                if (hf)
                    sum_row_feat(A + i * d, hf, id, ip[r0 + i], ip[r0 + i + 1], ix, w);
                else
                    sum_row(A + i * d, x, id, d, ip[r0 + i], ip[r0 + i + 1], ix, w, nnz);
            }
            /* Without activation the tile's output rows are Y's own. */
            float *out = L->a ? Z : y + r0 * h;
            if (own)
                tma_gnn_gemm512_nn(m, h, d, A, d, wp[0], 0, out, h, L->W_self ? NULL : bias);
            else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)h, (int)d, 1.0f, A, (int)d,
                            CF(L->W), (int)h, 0.0f, out, (int)h);
            if (L->W_self) {
                const int64_t s0 = L->self0 + r0;
                const float *self = S;
                if (hf)
                    for (int64_t i = 0; i < m; i++)
                        feat_row(hf, id[s0 + i], S + i * d);
                else if (!id)
                    self = x + s0 * d;
                else if (ids_contiguous(id + s0, m))
                    self = x + id[s0] * d;
                else
                    for (int64_t i = 0; i < m; i++)
                        memcpy(S + i * d, x + id[s0 + i] * d, (size_t)d * sizeof(float));
                if (own)
                    tma_gnn_gemm512_nn(m, h, d, self, d, wp[1], 1, out, h, bias);
                else
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)h, (int)d, 1.0f, self,
                                (int)d, CF(L->W_self), (int)h, 1.0f, out, (int)h);
            }
            for (int64_t i = 0; i < m; i++) {
                float *oi = out + i * h;
                if (!own) {
#pragma omp simd
                    for (int64_t j = 0; j < h; j++)
                        oi[j] += bias[j];
                }
                if (L->a) {
                    float mu, rs;
                    ln_prelu_row(oi, h, CF(L->gamma), CF(L->beta), CF(L->a)[0], L->eps, y + (r0 + i) * h, &mu,
                                 &rs);
                }
            }
        }
    }
    return TMA_OK;
}

CPU_ISA_END
