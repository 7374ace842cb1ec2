/*
 * cpu_kernels.c: the CPU backend's ops: dense products on OpenBLAS sgemm
 * or, for the tall ones on a processor with AVX-512F, on the own kernels
 * of cpu_gemm.c; OpenMP for sparse aggregation and element-wise work.
 * This file is compiled twice, by cpu_avx2.c (AVX2 + FMA, with the own
 * kernels: CPU_OWN_GEMM) and cpu_generic.c (the baseline x86-64 ISA,
 * OpenBLAS only); tma_gnn_backend_create (gnn/backend.c) picks one at run
 * time.  It expects CPU_OPS_NAME (the table to define) and CPU_OPS_LABEL.
 *
 * Determinism: every result is computed in an order that depends only on
 * the inputs, never on the thread count: rows are independent; scatters
 * (the transposed products) split the columns between threads so each
 * output element is summed by one thread in edge order; reductions sum 64
 * fixed chunks and then the chunks in order.  Only OpenBLAS's sgemm may
 * differ with the thread count.
 *
 * Threads: OpenMP regions use the backend's thread count; OpenBLAS gets the
 * same count.  libgomp's idle threads should not spin while OpenBLAS runs
 * (OMP_WAIT_POLICY=passive; `tma` sets it, see cli/main.c).
 */
#include "cpu_gemm_int.h"
#include "gnn_backend.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define COMP "gnn-cpu"

#define F(t) ((float *)(t)->data)
#define CF(t) ((const float *)(t)->data)
#define CI32(t) ((const int32_t *)(t)->data)
#define CI64(t) ((const int64_t *)(t)->data)

/* Below this many elements an op runs on one thread. */
#define PAR_MIN 16384
#define NCHUNK 64
/* Columns a thread sums at once in a column reduction (double accumulators). */
#define SUBW 256

#define NT(b) ((b)->threads)

/* Column reductions (bias and LayerNorm gradients) sum NCHUNK fixed row
 * chunks into per-chunk partials, then the partials in order: one pass over
 * the rows, all threads busy, and a result that does not depend on the
 * thread count.  The partials live in scratch reserved when the backend is
 * created, for up to SCRATCH_COLS columns (wider falls back to splitting
 * the columns between threads). */
#define SCRATCH_COLS TMA_GNN_MAX_HIDDEN
/* A weight gradient (A^T B over many rows) sums at most this many slices,
 * each slice's partial product at most MM_PART_FLOATS floats. */
#define MM_MAX_SLICES 8
#define MM_PART_FLOATS ((int64_t)1 << 18)
/* The largest weight the own products pack (k x n, n rounded up to 64). */
#define GEMM_PACK_FLOATS ((size_t)1 << 18)
typedef struct cpu_state {
    double *part;   /* [2][NCHUNK][SCRATCH_COLS] */
    float *mm_part; /* [MM_MAX_SLICES - 1][MM_PART_FLOATS]: sgemm_tn's partial products */
    float *pack;    /* [GEMM_PACK_FLOATS]: a weight packed for cpu_gemm.c; NULL: OpenBLAS only */
} cpu_state_t;

static double *partials(tma_gnn_backend_t *b, int which)
{
    return ((cpu_state_t *)b->impl)->part + (size_t)which * NCHUNK * SCRATCH_COLS;
}

/* out[j] = sum over chunks of part[c][j], in chunk order. */
static void combine_partials(const double *part, int64_t d, float *out)
{
    for (int64_t j = 0; j < d; j++) {
        double s = 0;
        for (int c = 0; c < NCHUNK; c++)
            s += part[(size_t)c * SCRATCH_COLS + j];
        out[j] = (float)s;
    }
}

/* ------------------------------------------------------------------ helpers */

/* Splits d columns into chunks of a multiple of 16 floats, about one per
 * thread, for scatters that must not race. */
static int col_chunks(int64_t d, int threads, int64_t *cw_p)
{
    int64_t cw = (d + threads - 1) / threads;
    cw = (cw + 15) / 16 * 16;
    if (cw < 16)
        cw = 16;
    *cw_p = cw;
    return (int)((d + cw - 1) / cw);
}

static inline void row_axpy(float *restrict y, const float *restrict x, float w, int64_t n)
{
#pragma omp simd
    for (int64_t j = 0; j < n; j++)
        y[j] += w * x[j];
}

static inline float row_dot(const float *restrict x, const float *restrict y, int64_t n)
{
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; j++)
        s += x[j] * y[j];
    return s;
}

static inline void row_zero(float *restrict y, int64_t n)
{
    memset(y, 0, (size_t)n * sizeof *y);
}

/* Gathers read rows at random from tables bigger than the caches; asking
 * for a row a few edges ahead hides most of the memory latency. */
#define PREFETCH_AHEAD 4

static inline void prefetch_row(const float *row, int64_t n)
{
    for (int64_t j = 0; j < n; j += 16)
        __builtin_prefetch(row + j, 0, 1);
}

/* ------------------------------------------------------------------ memory */

static tma_status_t cpu_alloc(tma_gnn_backend_t *b, size_t bytes, void **p_p)
{
    void *p = tma_alloc_aligned(bytes);
    if (!p) {
        tma_log_error(COMP, "out of memory allocating %zu bytes", bytes);
        return TMA_ERR_NOMEM;
    }
    /* Tensors live as long as their trainer or evaluator, and ops gather
     * their rows at random (an embedding table, a layer's input). */
    tma_advise_huge(p, bytes);
    *p_p = p;
    return TMA_OK;
}

static void cpu_free(tma_gnn_backend_t *b, void *p) { tma_free_aligned(p); }

static tma_status_t cpu_memcpy(tma_gnn_backend_t *b, void *dst, const void *src, size_t bytes)
{
    if (dst != src)
        memcpy(dst, src, bytes);
    return TMA_OK;
}

static tma_status_t cpu_fill(tma_gnn_backend_t *b, tensor_t *x, float v)
{
    int64_t n = tma_gnn_tensor_numel(x);
    float *p = F(x);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        p[i] = v;
    return TMA_OK;
}

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
static void blas_one_thread(void)
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
static int own_pack_many(tma_gnn_backend_t *b, int count, const tensor_t *const *W, const float **Wp)
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

static void sgemm_rows(tma_gnn_backend_t *b, int64_t m, int64_t n, int64_t k, float alpha, const float *A,
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
static void sgemm_tn(tma_gnn_backend_t *b, int64_t m, int64_t n, int64_t k, float alpha, const float *A,
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

static tma_status_t cpu_matmul(tma_gnn_backend_t *b, const tensor_t *A, int ta, const tensor_t *B, int tb,
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
static tma_status_t cpu_matmul_bias(tma_gnn_backend_t *b, const tensor_t *A, const tensor_t *B, const tensor_t *bias,
                                    tensor_t *C)
{
    if (A->cols == 0) {
        fill_rows(F(C), C->cols, C->rows, C->cols, CF(bias));
        return TMA_OK;
    }
    sgemm_rows(b, C->rows, C->cols, A->cols, 1.0f, CF(A), A->cols, 0, CF(B), B->cols, 0.0f, F(C), C->cols, CF(bias));
    return TMA_OK;
}

static tma_status_t cpu_add_bias(tma_gnn_backend_t *b, tensor_t *Z, const tensor_t *bias)
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

static tma_status_t cpu_colsum(tma_gnn_backend_t *b, const tensor_t *X, tensor_t *out)
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

static tma_status_t cpu_spmm(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *X, tensor_t *Y)
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
static tma_status_t cpu_spmm_t(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *dY,
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

/* ------------------------------------------------------------------ LayerNorm, PReLU */

/* A row's mean and 1 / sqrt(variance + eps), LayerNorm's statistics. */
static inline void row_moments(const float *restrict xi, int64_t d, float eps, float *mu_p, float *rs_p)
{
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < d; j++)
        sum += xi[j];
    const float mu = sum / (float)d;
    float v = 0;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < d; j++)
        v += (xi[j] - mu) * (xi[j] - mu);
    *mu_p = mu;
    *rs_p = 1.0f / sqrtf(v / (float)d + eps);
}

/* One row of PReLU_s(LayerNorm(x)) into h, with the row's mean and 1/std. */
static inline void ln_prelu_row(const float *restrict xi, int64_t d, const float *restrict g,
                                const float *restrict bt, float s, float eps, float *restrict hi, float *mu_p,
                                float *rs_p)
{
    float mu, rs;
    row_moments(xi, d, eps, &mu, &rs);
#pragma omp simd
    for (int64_t j = 0; j < d; j++) {
        float y = (xi[j] - mu) * rs * g[j] + bt[j];
        hi[j] = y * (y > 0 ? 1.0f : s);
    }
    *mu_p = mu;
    *rs_p = rs;
}

static tma_status_t cpu_ln_prelu_fwd(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *gamma,
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

static tma_status_t cpu_ln_prelu_bwd(tma_gnn_backend_t *b, const tensor_t *dH, const tensor_t *X,
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

static tma_status_t cpu_bias_prelu(tma_gnn_backend_t *b, tensor_t *Z, const tensor_t *bias, const tensor_t *a,
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

static tma_status_t cpu_prelu_bwd(tma_gnn_backend_t *b, const tensor_t *dY, const tensor_t *X,
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

static tma_status_t cpu_pair_mul(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
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
static tma_status_t cpu_score_mlp(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
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

static tma_status_t cpu_pair_mul_bwd(tma_gnn_backend_t *b, const tensor_t *dE, const tensor_t *H,
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

static tma_status_t cpu_bce_logits(tma_gnn_backend_t *b, const tensor_t *logits, const tensor_t *labels,
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

/* ------------------------------------------------------------------ optimizer */

static tma_status_t cpu_sumsq(tma_gnn_backend_t *b, const tensor_t *t, double *out_p)
{
    const int64_t n = tma_gnn_tensor_numel(t);
    const float *x = CF(t);
    double part[NCHUNK];
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n > PAR_MIN)
    for (int c = 0; c < NCHUNK; c++) {
        int64_t i0 = n * c / NCHUNK, i1 = n * (c + 1) / NCHUNK;
        double acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = i0; i < i1; i++)
            acc += (double)x[i] * x[i];
        part[c] = acc;
    }
    double s = 0;
    for (int c = 0; c < NCHUNK; c++)
        s += part[c];
    *out_p = s;
    return TMA_OK;
}

static tma_status_t cpu_scale(tma_gnn_backend_t *b, tensor_t *t, float s)
{
    const int64_t n = tma_gnn_tensor_numel(t);
    float *x = F(t);
#pragma omp parallel for simd num_threads(NT(b)) schedule(static) if (parallel : n > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        x[i] *= s;
    return TMA_OK;
}

static tma_status_t cpu_adam(tma_gnn_backend_t *b, tensor_t *p, const tensor_t *g, tensor_t *m, tensor_t *v,
                             const tma_gnn_adam_t *h)
{
    /* PyTorch's single-tensor Adam, in float32 as it computes it. */
    const int64_t n = tma_gnn_tensor_numel(p);
    const double bc1 = 1.0 - pow(h->beta1, (double)h->step), bc2 = 1.0 - pow(h->beta2, (double)h->step);
    const float step_size = (float)(h->lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    const float b1 = h->beta1, b2 = h->beta2, c1 = 1.0f - h->beta1, c2 = 1.0f - h->beta2, eps = h->eps;
    float *pp = F(p), *mm = F(m), *vv = F(v);
    const float *gg = CF(g);
#pragma omp parallel for simd num_threads(NT(b)) schedule(static) if (parallel : n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float gi = gg[i];
        float mi = mm[i] * b1 + gi * c1;
        float vi = vv[i] * b2 + gi * gi * c2;
        mm[i] = mi;
        vv[i] = vi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        pp[i] = pp[i] - step_size * (mi / denom);
    }
    return TMA_OK;
}

/* ------------------------------------------------------------------ features */

/* Features as given (dense, usually a read-only map of the graph file) or as
 * CSR when at most CPU_SPARSE_DENSITY of the entries are non-zero. */
struct tma_gnn_feat {
    int64_t n, dim;
    int sparse;
    const float *dense;
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
    free(f);
}

static tma_status_t cpu_feat_create(tma_gnn_backend_t *b, const float *host, int64_t n, int64_t dim,
                                    unsigned flags, tma_gnn_feat_t **f_p)
{
    tma_gnn_feat_t *f = calloc(1, sizeof *f);
    if (!f)
        return TMA_ERR_NOMEM;
    f->n = n;
    f->dim = dim;
    f->dense = host;
    int64_t *row_nnz = NULL;
    if (!(flags & TMA_GNN_FEAT_DENSE) && n > 0 && dim >= 16) {
        row_nnz = malloc((size_t)n * sizeof *row_nnz);
        if (!row_nnz)
            goto nomem;
        int64_t nnz = 0;
#pragma omp parallel for num_threads(NT(b)) schedule(static) reduction(+ : nnz)
        for (int64_t i = 0; i < n; i++) {
            const float *r = host + i * dim;
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
                const float *r = host + i * dim;
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

static void cpu_feat_destroy(tma_gnn_backend_t *b, tma_gnn_feat_t *f) { feat_free(f); }

static void cpu_feat_info(const tma_gnn_feat_t *f, tma_gnn_feat_info_t *info_p)
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
        if (i + PREFETCH_AHEAD < n)
            prefetch_row(f->dense + ids[i + PREFETCH_AHEAD] * dim, dim);
        memcpy(dst + i * dim, f->dense + ids[i] * dim, (size_t)dim * sizeof(float));
    }
}

static tma_status_t cpu_feat_matmul(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
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
    if (n > 0 && ids_contiguous(id, n)) {
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

static tma_status_t cpu_feat_matmul_grad(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
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
    if (ids_contiguous(id, n)) {
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
        if (self && i + SELF_AHEAD < blk->num_dst)
            prefetch_row(f->dense + id[i + SELF_AHEAD] * dim, dim);
        if (self)
            memcpy(oi, f->dense + id[i] * dim, (size_t)dim * sizeof(float));
        sum_row(oi + width - dim, f->dense, id, dim, ip[i], ip[i + 1], ix, w, blk->num_edges);
    }
}

static tma_status_t cpu_feat_aggregate(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
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
static tma_status_t cpu_feat_self_aggregate(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
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
static tma_status_t cpu_layer_infer(tma_gnn_backend_t *b, const tma_gnn_layer_infer_t *L, tensor_t *scratch,
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
            for (int64_t i = 0; i < m; i++)
                sum_row(A + i * d, x, id, d, ip[r0 + i], ip[r0 + i + 1], ix, w, nnz);
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
                if (!id)
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

/* ------------------------------------------------------------------ heterogeneous ops */

/* RGCN aggregation after the basis projection: one row of Y per thread
 * step, the row's edges in order, each adding its B basis slices of T
 * scaled by w[e] a[rel[e], b] (so W_r is never formed). */
static tma_status_t cpu_rgcn_aggregate(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *rel,
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
static tma_status_t cpu_rgcn_aggregate_bwd(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *rel,
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

static tma_status_t cpu_distmult(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
                                 const tensor_t *rel, const tensor_t *Wr, tensor_t *score)
{
    const int64_t d = H->cols, np = score->rows;
    const float *h = CF(H), *wr = CF(Wr);
    const int32_t *u = CI32(hi), *v = CI32(ti), *r = CI32(rel);
    float *sc = F(score);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (np * d > PAR_MIN)
    for (int64_t p = 0; p < np; p++) {
        const float *hu = h + (int64_t)u[p] * d, *hv = h + (int64_t)v[p] * d, *w = wr + (int64_t)r[p] * d;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < d; j++)
            s += hu[j] * w[j] * hv[j];
        sc[p] = s;
    }
    return TMA_OK;
}

/* dH and dWr are scatters: threads split the columns (as pair_mul_bwd), so
 * every element is summed by one thread in pair order. */
static tma_status_t cpu_distmult_bwd(tma_gnn_backend_t *b, const tensor_t *dscore, const tensor_t *H,
                                     const tensor_t *hi, const tensor_t *ti, const tensor_t *rel, const tensor_t *Wr,
                                     tensor_t *dH, tensor_t *dWr)
{
    const int64_t d = H->cols, np = dscore->rows, nh = dH->rows, nr = dWr->rows;
    const float *h = CF(H), *wr = CF(Wr), *ds = CF(dscore);
    const int32_t *u = CI32(hi), *v = CI32(ti), *r = CI32(rel);
    float *dh = F(dH), *dw = F(dWr);
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
                const float *w = wr + (int64_t)r[p] * d + j0;
                float *du = dh + (int64_t)u[p] * d + j0, *dv = dh + (int64_t)v[p] * d + j0;
                float *dwr = dw + (int64_t)r[p] * d + j0;
                /* u == v is possible: separate loops stay correct. */
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

static tma_status_t cpu_rows_gather(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *idx, tensor_t *Y)
{
    const int64_t n = Y->rows, d = Y->cols;
    const int32_t *id = CI32(idx);
    const float *x = CF(X);
    float *y = F(Y);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n * d > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        memcpy(y + i * d, x + (int64_t)id[i] * d, (size_t)d * sizeof(float));
    return TMA_OK;
}

static tma_status_t cpu_rows_scatter(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *idx, tensor_t *Y)
{
    const int64_t n = X->rows, d = X->cols;
    const int32_t *id = CI32(idx);
    const float *x = CF(X);
    float *y = F(Y);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n * d > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        memcpy(y + (int64_t)id[i] * d, x + i * d, (size_t)d * sizeof(float));
    return TMA_OK;
}

/* ------------------------------------------------------------------ the table */

/*
 * Whether this backend runs the own products (cpu_gemm.c): the AVX2 build
 * does on a processor with AVX-512F unless TMA_CPU_GEMM=openblas (for
 * comparing the two); the baseline build never does.
 */
static tma_status_t own_gemm_init(cpu_state_t *cs)
{
    const char *env = getenv("TMA_CPU_GEMM");
    if (env && strcmp(env, "own") != 0 && strcmp(env, "openblas") != 0) {
        tma_log_error(COMP, "TMA_CPU_GEMM=\"%s\": expected own or openblas (unset: own where the processor has "
                            "AVX-512F)", env);
        return TMA_ERR_CONFIG;
    }
#ifdef CPU_OWN_GEMM
    if (env && strcmp(env, "openblas") == 0)
        return TMA_OK;
    if (!tma_gnn_gemm512_available()) {
        if (env)
            tma_log_info(COMP, "TMA_CPU_GEMM=own: this processor has no AVX-512F; OpenBLAS runs every product");
        return TMA_OK;
    }
    cs->pack = tma_alloc_aligned(GEMM_PACK_FLOATS * sizeof(float));
    if (!cs->pack) {
        tma_log_error(COMP, "out of memory for the CPU backend's packed weight");
        return TMA_ERR_NOMEM;
    }
    tma_log_debug(COMP, "products: own AVX-512 kernels for the tall ones, OpenBLAS for the rest");
#endif
    return TMA_OK;
}

static void cpu_fini(tma_gnn_backend_t *b);

static tma_status_t cpu_init(tma_gnn_backend_t *b, const char *device)
{
    cpu_state_t *cs = calloc(1, sizeof *cs);
    if (cs)
        cs->part = tma_alloc_aligned(2 * (size_t)NCHUNK * SCRATCH_COLS * sizeof(double));
    /* Reserved, not touched: a page is first written by the product that needs it. */
    if (cs && b->threads > 1 && b->threads <= MM_MAX_SLICES)
        cs->mm_part = tma_alloc_aligned((size_t)(b->threads - 1) * MM_PART_FLOATS * sizeof(float));
    if (!cs || !cs->part || (b->threads > 1 && b->threads <= MM_MAX_SLICES && !cs->mm_part)) {
        if (cs) {
            tma_free_aligned(cs->part);
            tma_free_aligned(cs->mm_part);
        }
        free(cs);
        tma_log_error(COMP, "out of memory for the CPU backend's scratch");
        return TMA_ERR_NOMEM;
    }
    b->impl = cs;
    blas_one_thread();
    const tma_status_t st = own_gemm_init(cs);
    if (st != TMA_OK)
        cpu_fini(b);
    return st;
}

static void cpu_fini(tma_gnn_backend_t *b)
{
    cpu_state_t *cs = b->impl;
    if (cs) {
        tma_free_aligned(cs->part);
        tma_free_aligned(cs->mm_part);
        tma_free_aligned(cs->pack);
    }
    free(cs);
    b->impl = NULL;
}

const tma_gnn_ops_t CPU_OPS_NAME = {
    .name = CPU_OPS_LABEL,
    .host_addressable = 1,
    .init = cpu_init,
    .fini = cpu_fini,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .fill = cpu_fill,
    .matmul = cpu_matmul,
    .add_bias = cpu_add_bias,
    .colsum = cpu_colsum,
    .spmm = cpu_spmm,
    .spmm_t = cpu_spmm_t,
    .prelu_bwd = cpu_prelu_bwd,
    .bias_prelu = cpu_bias_prelu,
    .ln_prelu_fwd = cpu_ln_prelu_fwd,
    .ln_prelu_bwd = cpu_ln_prelu_bwd,
    .pair_mul = cpu_pair_mul,
    .pair_mul_bwd = cpu_pair_mul_bwd,
    .score_mlp = cpu_score_mlp,
    .matmul_bias = cpu_matmul_bias,
    .layer_infer = cpu_layer_infer,
    .feat_self_aggregate = cpu_feat_self_aggregate,
    .bce_logits = cpu_bce_logits,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .adam = cpu_adam,
    .feat_create = cpu_feat_create,
    .feat_destroy = cpu_feat_destroy,
    .feat_info = cpu_feat_info,
    .feat_matmul = cpu_feat_matmul,
    .feat_matmul_grad = cpu_feat_matmul_grad,
    .feat_aggregate = cpu_feat_aggregate,
    .rgcn_aggregate = cpu_rgcn_aggregate,
    .rgcn_aggregate_bwd = cpu_rgcn_aggregate_bwd,
    .distmult = cpu_distmult,
    .distmult_bwd = cpu_distmult_bwd,
    .rows_gather = cpu_rows_gather,
    .rows_scatter = cpu_rows_scatter,
};
