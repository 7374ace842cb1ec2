/*
 * cpu_dense.c: the CPU backend's dense products: sgemm on OpenBLAS or, for the tall ones, the own
 * kernels of cpu_gemm.c; bias and column sums. Compiled twice, for AVX2 and for the baseline ISA (see
 * cpu_int.h).
 */
#include "cpu_int.h"

/* ------------------------------------------------------------------ dense */

/* The fewest rows a thread's slice of a tall product gets. */
#define MATMUL_SLICE_MIN 256

/*
 * C = alpha A op(B) + beta C for row-major A (m x k): tall products (a
 * layer's rows) in slices of rows, each slice's sgemm on one thread alone,
 * the threads taking slices in turn.  Handing the product to OpenBLAS's own
 * threads instead makes them share the cores with this backend's OpenMP
 * threads, which keep spinning for a while after each parallel region:
 * about 110 GFLOP/s against 170-190 on two cores.  Each row's numbers are the
 * same either way (a row is one slice's row, the sum over k in one order).
 */
/* The fewest columns a thread's share of a short product gets, and the
 * FLOPs under which a product is not worth a second thread. */
#define MATMUL_COLS_MIN 64
#define MATMUL_SERIAL_FLOPS 4.0e6

/* Each of `rows` rows (ldc apart) of C, n wide, set to v: a bias the
 * product then adds to (beta 1), in place of a pass of its own. */
static void fill_rows(float *C, int64_t ldc, int64_t rows, int64_t n, const float *v)
{
    for (int64_t i = 0; i < rows; i++)
        memcpy(C + i * ldc, v, (size_t)n * sizeof(float));
}

/* The single-threaded OpenBLAS every product of this backend runs on. */
void blas_one_thread(void)
{
    if (openblas_get_num_threads() != 1)
        openblas_set_num_threads(1);
}

/* How many threads share a product's `width` outputs (1: the calling thread
 * alone, for a product under MATMUL_SERIAL_FLOPS or too narrow), and each
 * share's width in *w_p: whole 16-output groups (one AVX-512 register). */
static int64_t output_shares(const tma_gnn_backend_t *b, double flops, int64_t width, int64_t *w_p)
{
    int64_t shares = flops < MATMUL_SERIAL_FLOPS ? 1 : width / MATMUL_COLS_MIN;
    shares = TMA_MAX(TMA_MIN(shares, (int64_t)NT(b)), 1);
    *w_p = shares > 1 ? ((width + shares - 1) / shares + 15) / 16 * 16 : width;
    return shares;
}

/*
 * C = alpha op(A) op(B) + beta C (row-major, m x n) for the products that
 * sgemm_rows and sgemm_tn do not slice (few rows, a short sum): the columns
 * of C in shares of at least MATMUL_COLS_MIN, one share a thread, each
 * share's sgemm on that thread alone; a small product on the calling thread.
 * OpenBLAS's own threads never run: after each call they keep spinning
 * (sched_yield) for a while, and did so through every training step, taking
 * a core's time from this backend's threads (3 % of a SAGE step's samples
 * under perf, from two decoder products a step).  An element's sum over k
 * does not depend on the columns beside it, so the shares change no result.
 */
static void sgemm_cols(tma_gnn_backend_t *b, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                       const float *bias)
{
    blas_one_thread();
    int64_t w;
    const int64_t shares = output_shares(b, 2.0 * (double)m * (double)n * (double)k, n, &w);
#pragma omp parallel for num_threads((int)shares) schedule(static, 1) if (shares > 1)
    for (int64_t s = 0; s < shares; s++) {
        const int64_t c0 = s * w, cn = TMA_MIN(w, n - c0);
        if (cn <= 0)
            continue;
        if (bias)
            fill_rows(C + c0, ldc, m, cn, bias + c0);
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)cn,
                    (int)k, alpha, A, (int)lda, tb ? B + c0 * ldb : B + c0, (int)ldb, bias ? 1.0f : beta, C + c0,
                    (int)ldc);
    }
}

/* y = alpha op(A) x + beta y for row-major A (rows x cols): the entries of y
 * in shares, one a thread (rows of A, or its columns when transposed), each
 * share's sgemv on that thread alone; a small product on the calling thread. */
static void sgemv_shares(tma_gnn_backend_t *b, int ta, int64_t rows, int64_t cols, float alpha, const float *A,
                         const float *x, float beta, float *y)
{
    blas_one_thread();
    const int64_t ny = ta ? cols : rows;
    int64_t w;
    const int64_t shares = output_shares(b, 2.0 * (double)rows * (double)cols, ny, &w);
#pragma omp parallel for num_threads((int)shares) schedule(static, 1) if (shares > 1)
    for (int64_t s = 0; s < shares; s++) {
        const int64_t i0 = s * w, in = TMA_MIN(w, ny - i0);
        if (in <= 0)
            continue;
        if (ta)
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)rows, (int)in, alpha, A + i0, (int)cols, x, 1, beta, y + i0,
                        1);
        else
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)in, (int)cols, alpha, A + i0 * cols, (int)cols, x, 1, beta,
                        y + i0, 1);
    }
}

/* The own products (cpu_gemm.c) take C = A op(B) and A^T B with alpha 1
 * and beta 0 or 1 (all the model asks for), a weight that fits the pack. */
static int own_gemm(const tma_gnn_backend_t *b, float alpha, float beta)
{
    return ((const cpu_state_t *)b->impl)->pack && alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
}

/* op(B) packed for tma_gnn_gemm512_nn, or NULL where OpenBLAS runs the product. */
static const float *own_pack(tma_gnn_backend_t *b, float alpha, float beta, int tb, const float *B, int64_t ldb,
                             int64_t k, int64_t n)
{
    if (!own_gemm(b, alpha, beta) || tma_gnn_gemm512_packed_floats(k, n) > GEMM_PACK_FLOATS)
        return NULL;
    float *bp = ((cpu_state_t *)b->impl)->pack;
    tma_gnn_gemm512_pack(tb, B, ldb, k, n, bp);
    return bp;
}

/* Weights W[0..count) (each k x n, untransposed) packed one after another
 * for tma_gnn_gemm512_nn, into Wp[q]: for ops whose threads each run their
 * own products with the same weights (score_mlp, layer_infer).  0 where
 * OpenBLAS runs them: the own products are off or the weights do not fit. */
int own_pack_many(tma_gnn_backend_t *b, int count, const tensor_t *const *W, const float **Wp)
{
    if (!own_gemm(b, 1.0f, 0.0f))
        return 0;
    size_t total = 0;
    for (int q = 0; q < count; q++)
        total += tma_gnn_gemm512_packed_floats(W[q]->rows, W[q]->cols);
    if (total > GEMM_PACK_FLOATS)
        return 0;
    float *bp = ((cpu_state_t *)b->impl)->pack;
    for (int q = 0; q < count; q++) {
        tma_gnn_gemm512_pack(0, CF(W[q]), W[q]->cols, W[q]->rows, W[q]->cols, bp);
        Wp[q] = bp;
        bp += tma_gnn_gemm512_packed_floats(W[q]->rows, W[q]->cols);
    }
    return 1;
}

/* The fewest rows a slice of an own product gets (8 tiles of 6 rows): it
 * reads A in place, so a slice costs no copy and can be short. */
#define OWN_SLICE_MIN 48

void sgemm_rows(tma_gnn_backend_t *b, int64_t m, int64_t n, int64_t k, float alpha, const float *A,
                       int64_t lda, int tb, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                       const float *bias)
{
    const int64_t nt = NT(b);
    /* Under OWN_SLICE_MIN rows the weight's packing would cost about as
     * much as the product: OpenBLAS runs it. */
    const float *bp = m >= OWN_SLICE_MIN ? own_pack(b, alpha, beta, tb, B, ldb, k, n) : NULL;
    int64_t slice;
    if (bp) {
        const double flops = 2.0 * (double)m * (double)n * (double)k;
        slice = nt <= 1 || flops < MATMUL_SERIAL_FLOPS ? m
                                                       : TMA_MAX((int64_t)OWN_SLICE_MIN, (m + 4 * nt - 1) / (4 * nt));
        slice = TMA_MAX((slice + 5) / 6 * 6, (int64_t)1);
    } else if (nt <= 1 || m < 2 * MATMUL_SLICE_MIN) {
        sgemm_cols(b, 0, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, bias);
        return;
    } else {
        slice = TMA_MAX((int64_t)MATMUL_SLICE_MIN, (m + 4 * nt - 1) / (4 * nt));
        blas_one_thread();
    }
    const int64_t nslice = (m + slice - 1) / slice;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nslice > 1)
    for (int64_t s = 0; s < nslice; s++) {
        const int64_t r0 = s * slice, rows = TMA_MIN(slice, m - r0);
        if (bp) {
            tma_gnn_gemm512_nn(rows, n, k, A + r0 * lda, lda, bp, beta == 1.0f, C + r0 * ldc, ldc, bias);
            continue;
        }
        if (bias)
            fill_rows(C + r0 * ldc, ldc, rows, n, bias);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)rows, (int)n, (int)k, alpha,
                    A + r0 * lda, (int)lda, B, (int)ldb, bias ? 1.0f : beta, C + r0 * ldc, (int)ldc);
    }
}

/*
 * C = alpha A^T B + beta C for row-major A (k x m) and B (k x n) summed over
 * many rows k (a weight's gradient): the rows in one slice a thread, each
 * slice's product on that thread alone into its own partial, then the
 * partials added in slice order, so that the result depends on the thread
 * count only (as a reduction over OpenBLAS's threads does) and not on
 * timing.  Few rows, a wide product or many threads: sgemm_cols.
 */
void sgemm_tn(tma_gnn_backend_t *b, int64_t m, int64_t n, int64_t k, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    const int64_t nt = NT(b);
    float *part = ((cpu_state_t *)b->impl)->mm_part;
    const int own = own_gemm(b, alpha, beta);
    if (own && (nt <= 1 || 2.0 * (double)m * (double)n * (double)k < MATMUL_SERIAL_FLOPS)) {
        tma_gnn_gemm512_tn(m, n, k, A, lda, B, ldb, beta == 1.0f, C, ldc);
        return;
    }
    if (nt <= 1 || nt > MM_MAX_SLICES || !part || k < nt * MATMUL_SLICE_MIN || m * n > MM_PART_FLOATS) {
        sgemm_cols(b, 1, 0, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
        return;
    }
    blas_one_thread();
    /* nt slices of at least MATMUL_SLICE_MIN rows each, whatever team OpenMP gives. */
    const int64_t slice = (k + nt - 1) / nt;
#pragma omp parallel num_threads(nt)
    {
#pragma omp for schedule(static, 1)
        for (int64_t s = 0; s < nt; s++) {
            const int64_t r0 = s * slice, rows = TMA_MIN(slice, k - r0);
            /* Slice 0 into C itself (with beta), the others into their partials. */
            float *out = s == 0 ? C : part + (s - 1) * MM_PART_FLOATS;
            if (own) {
                tma_gnn_gemm512_tn(m, n, rows, A + r0 * lda, lda, B + r0 * ldb, ldb, s == 0 && beta == 1.0f, out,
                                   s == 0 ? ldc : n);
                continue;
            }
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)rows, alpha, A + r0 * lda,
                        (int)lda, B + r0 * ldb, (int)ldb, s == 0 ? beta : 0.0f, out, (int)(s == 0 ? ldc : n));
        }
#pragma omp for schedule(static)
        for (int64_t i = 0; i < m; i++)
            for (int64_t q = 1; q < nt; q++)
                row_axpy(C + i * ldc, part + (q - 1) * MM_PART_FLOATS + i * n, 1.0f, n);
    }
}

tma_status_t cpu_matmul(tma_gnn_backend_t *b, const tensor_t *A, int ta, const tensor_t *B, int tb,
                               float alpha, float beta, tensor_t *C)
{
    int64_t m = C->rows, n = C->cols, k = ta ? A->rows : A->cols;
    if (k == 0) {
        /* Nothing to sum: C = beta C. */
        int64_t numel = m * n;
        float *c = F(C);
        for (int64_t i = 0; i < numel; i++)
            c[i] = beta == 0.0f ? 0.0f : beta * c[i];
        return TMA_OK;
    }
    if (!ta && n > 1) {
        sgemm_rows(b, m, n, k, alpha, CF(A), A->cols, tb, CF(B), B->cols, beta, F(C), C->cols, NULL);
        return TMA_OK;
    }
    if (ta && !tb && n > 1) {
        sgemm_tn(b, m, n, k, alpha, CF(A), A->cols, CF(B), B->cols, beta, F(C), C->cols);
        return TMA_OK;
    }
    if (n == 1) {
        /* One output column (the decoder's logits): a matrix-vector product.
         * B is k x 1 or, transposed, 1 x k: contiguous either way. */
        sgemv_shares(b, ta, A->rows, A->cols, alpha, CF(A), CF(B), beta, F(C));
        return TMA_OK;
    }
    sgemm_cols(b, ta, tb, m, n, k, alpha, CF(A), A->cols, CF(B), B->cols, beta, F(C), C->cols, NULL);
    return TMA_OK;
}

/* C = A B + bias: each slice (or share of columns) of C is set to the bias
 * rows just before its product adds to it (beta 1), while it is in cache. */
tma_status_t cpu_matmul_bias(tma_gnn_backend_t *b, const tensor_t *A, const tensor_t *B, const tensor_t *bias,
                                    tensor_t *C)
{
    if (A->cols == 0) {
        fill_rows(F(C), C->cols, C->rows, C->cols, CF(bias));
        return TMA_OK;
    }
    sgemm_rows(b, C->rows, C->cols, A->cols, 1.0f, CF(A), A->cols, 0, CF(B), B->cols, 0.0f, F(C), C->cols, CF(bias));
    return TMA_OK;
}

tma_status_t cpu_add_bias(tma_gnn_backend_t *b, tensor_t *Z, const tensor_t *bias)
{
    const int64_t d = Z->cols;
    const float *bb = CF(bias);
    float *z = F(Z);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (Z->rows * d > PAR_MIN)
    for (int64_t i = 0; i < Z->rows; i++) {
        float *row = z + i * d;
#pragma omp simd
        for (int64_t j = 0; j < d; j++)
            row[j] += bb[j];
    }
    return TMA_OK;
}

tma_status_t cpu_colsum(tma_gnn_backend_t *b, const tensor_t *X, tensor_t *out)
{
    const int64_t n = X->rows, d = X->cols;
    const float *x = CF(X);
    float *o = F(out);
    if (d <= SCRATCH_COLS) {
        double *part = partials(b, 0);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n * d > PAR_MIN)
        for (int c = 0; c < NCHUNK; c++) {
            double *acc = part + (size_t)c * SCRATCH_COLS;
            for (int64_t j = 0; j < d; j++)
                acc[j] = 0;
            for (int64_t i = n * c / NCHUNK; i < n * (c + 1) / NCHUNK; i++) {
                const float *row = x + i * d;
#pragma omp simd
                for (int64_t j = 0; j < d; j++)
                    acc[j] += row[j];
            }
        }
        combine_partials(part, d, o);
        return TMA_OK;
    }
    if (d >= 16) {
        int64_t cw;
        int nch = col_chunks(d, NT(b), &cw);
#pragma omp parallel for num_threads(NT(b)) schedule(static, 1) if (n * d > PAR_MIN)
        for (int c = 0; c < nch; c++) {
            for (int64_t j0 = c * cw; j0 < TMA_MIN(d, (c + 1) * cw); j0 += SUBW) {
                int64_t len = TMA_MIN(TMA_MIN(d, (c + 1) * cw) - j0, (int64_t)SUBW);
                double acc[SUBW];
                for (int64_t j = 0; j < len; j++)
                    acc[j] = 0;
                for (int64_t i = 0; i < n; i++) {
                    const float *row = x + i * d + j0;
#pragma omp simd
                    for (int64_t j = 0; j < len; j++)
                        acc[j] += row[j];
                }
                for (int64_t j = 0; j < len; j++)
                    o[j0 + j] = (float)acc[j];
            }
        }
        return TMA_OK;
    }
    /* Few columns (a decoder's last bias): fixed row chunks, summed in order. */
    double part[NCHUNK][16];
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n * d > PAR_MIN)
    for (int c = 0; c < NCHUNK; c++) {
        int64_t i0 = n * c / NCHUNK, i1 = n * (c + 1) / NCHUNK;
        for (int64_t j = 0; j < d; j++)
            part[c][j] = 0;
        for (int64_t i = i0; i < i1; i++)
            for (int64_t j = 0; j < d; j++)
                part[c][j] += x[i * d + j];
    }
    for (int64_t j = 0; j < d; j++) {
        double s = 0;
        for (int c = 0; c < NCHUNK; c++)
            s += part[c][j];
        o[j] = (float)s;
    }
    return TMA_OK;
}

CPU_ISA_END
