/*
 * cpu_int.h: what the CPU backend's op files share: the includes, the
 * scratch state, the small row helpers, and the names of the ops and
 * helpers one file takes from another.  Every op file is compiled twice
 * (gnn/local.mk): with CPU_ISA_AVX2 (AVX2 + FMA, and the own AVX-512
 * products of cpu_gemm.c: CPU_OWN_GEMM) into tma_gnn_cpu_avx2_ops, and
 * without (the baseline x86-64 ISA, OpenBLAS only) into
 * tma_gnn_cpu_generic_ops; CPU_FN gives each build's functions their own
 * names.  tma_gnn_backend_create (gnn/backend.c) picks one at run time.
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
#ifndef TMA_GNN_CPU_INT_H
#define TMA_GNN_CPU_INT_H

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#ifdef CPU_ISA_AVX2
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma")
#define CPU_ISA_END
#elif defined(__x86_64__) && defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#define CPU_ISA_END _Pragma("clang attribute pop")
#else
#define CPU_ISA_END
#endif
/* This build runs the own AVX-512 products where the processor has them. */
#define CPU_OWN_GEMM 1
#define CPU_SUFFIX _avx2
#define CPU_OPS_NAME tma_gnn_cpu_avx2_ops
#define CPU_OPS_LABEL "cpu"
#else
#define CPU_ISA_END
#define CPU_SUFFIX _generic
#define CPU_OPS_NAME tma_gnn_cpu_generic_ops
#define CPU_OPS_LABEL "cpu-generic"
#endif
#define CPU_CAT2(a, b) a##b
#define CPU_CAT(a, b) CPU_CAT2(a, b)
#define CPU_FN(name) CPU_CAT(name, CPU_SUFFIX)

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

static inline double *partials(tma_gnn_backend_t *b, int which)
{
    return ((cpu_state_t *)b->impl)->part + (size_t)which * NCHUNK * SCRATCH_COLS;
}

/* out[j] = sum over chunks of part[c][j], in chunk order. */
static inline void combine_partials(const double *part, int64_t d, float *out)
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
static inline int col_chunks(int64_t d, int threads, int64_t *cw_p)
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

/* ------------------------------------------------------------------ shared between the op files */

#define blas_one_thread CPU_FN(blas_one_thread)
#define own_pack_many CPU_FN(own_pack_many)
#define sgemm_rows CPU_FN(sgemm_rows)
#define sgemm_tn CPU_FN(sgemm_tn)
#define cpu_matmul CPU_FN(cpu_matmul)
#define cpu_matmul_bias CPU_FN(cpu_matmul_bias)
#define cpu_add_bias CPU_FN(cpu_add_bias)
#define cpu_colsum CPU_FN(cpu_colsum)
#define cpu_spmm CPU_FN(cpu_spmm)
#define cpu_spmm_t CPU_FN(cpu_spmm_t)
#define cpu_feat_create CPU_FN(cpu_feat_create)
#define cpu_feat_destroy CPU_FN(cpu_feat_destroy)
#define cpu_feat_info CPU_FN(cpu_feat_info)
#define cpu_feat_matmul CPU_FN(cpu_feat_matmul)
#define cpu_feat_matmul_grad CPU_FN(cpu_feat_matmul_grad)
#define cpu_feat_aggregate CPU_FN(cpu_feat_aggregate)
#define cpu_feat_self_aggregate CPU_FN(cpu_feat_self_aggregate)
#define cpu_layer_infer CPU_FN(cpu_layer_infer)
#define cpu_ln_prelu_fwd CPU_FN(cpu_ln_prelu_fwd)
#define cpu_ln_prelu_bwd CPU_FN(cpu_ln_prelu_bwd)
#define cpu_bias_prelu CPU_FN(cpu_bias_prelu)
#define cpu_prelu_bwd CPU_FN(cpu_prelu_bwd)
#define cpu_pair_mul CPU_FN(cpu_pair_mul)
#define cpu_score_mlp CPU_FN(cpu_score_mlp)
#define cpu_pair_mul_bwd CPU_FN(cpu_pair_mul_bwd)
#define cpu_bce_logits CPU_FN(cpu_bce_logits)
#define cpu_rgcn_aggregate CPU_FN(cpu_rgcn_aggregate)
#define cpu_rgcn_aggregate_bwd CPU_FN(cpu_rgcn_aggregate_bwd)
#define cpu_gat_scores CPU_FN(cpu_gat_scores)
#define cpu_gat_aggregate CPU_FN(cpu_gat_aggregate)
#define cpu_gat_aggregate_bwd CPU_FN(cpu_gat_aggregate_bwd)
#define cpu_distmult CPU_FN(cpu_distmult)
#define cpu_distmult_bwd CPU_FN(cpu_distmult_bwd)
#define cpu_rows_gather CPU_FN(cpu_rows_gather)
#define cpu_rows_scatter CPU_FN(cpu_rows_scatter)

void blas_one_thread(void);
int own_pack_many(tma_gnn_backend_t *b, int count, const tensor_t *const *W, const float **Wp);
void sgemm_rows(tma_gnn_backend_t *b, int64_t m, int64_t n, int64_t k, float alpha, const float *A, int64_t lda,
                int tb, const float *B, int64_t ldb, float beta, float *C, int64_t ldc, const float *bias);
void sgemm_tn(tma_gnn_backend_t *b, int64_t m, int64_t n, int64_t k, float alpha, const float *A, int64_t lda,
              const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
tma_status_t cpu_matmul(tma_gnn_backend_t *b, const tensor_t *A, int ta, const tensor_t *B, int tb, float alpha,
                        float beta, tensor_t *C);
tma_status_t cpu_matmul_bias(tma_gnn_backend_t *b, const tensor_t *A, const tensor_t *B, const tensor_t *bias,
                             tensor_t *C);
tma_status_t cpu_add_bias(tma_gnn_backend_t *b, tensor_t *Z, const tensor_t *bias);
tma_status_t cpu_colsum(tma_gnn_backend_t *b, const tensor_t *X, tensor_t *out);
tma_status_t cpu_spmm(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *X, tensor_t *Y);
tma_status_t cpu_spmm_t(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *dY, tensor_t *dX);
tma_status_t cpu_feat_create(tma_gnn_backend_t *b, const void *host, tma_feat_dtype_t dtype, int64_t n, int64_t dim,
                             unsigned flags,
                             tma_gnn_feat_t **f_p);
void cpu_feat_destroy(tma_gnn_backend_t *b, tma_gnn_feat_t *f);
void cpu_feat_info(const tma_gnn_feat_t *f, tma_gnn_feat_info_t *info_p);
tma_status_t cpu_feat_matmul(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids, const tensor_t *W,
                             float beta, tensor_t *out);
tma_status_t cpu_feat_matmul_grad(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids, const tensor_t *dOut,
                                  tensor_t *dW);
tma_status_t cpu_feat_aggregate(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                const tma_gnn_block_t *blk, tensor_t *out);
tma_status_t cpu_feat_self_aggregate(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                     const tma_gnn_block_t *blk, tensor_t *out);
tma_status_t cpu_layer_infer(tma_gnn_backend_t *b, const tma_gnn_layer_infer_t *L, tensor_t *scratch, tensor_t *Y);
tma_status_t cpu_ln_prelu_fwd(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *gamma, const tensor_t *beta,
                              const tensor_t *a, float eps, tensor_t *H, tensor_t *mean, tensor_t *rstd);
tma_status_t cpu_ln_prelu_bwd(tma_gnn_backend_t *b, const tensor_t *dH, const tensor_t *X, const tensor_t *gamma,
                              const tensor_t *beta, const tensor_t *a, const tensor_t *mean, const tensor_t *rstd,
                              tensor_t *dX, tensor_t *dgamma, tensor_t *dbeta, tensor_t *da);
tma_status_t cpu_bias_prelu(tma_gnn_backend_t *b, tensor_t *Z, const tensor_t *bias, const tensor_t *a, tensor_t *Y);
tma_status_t cpu_prelu_bwd(tma_gnn_backend_t *b, const tensor_t *dY, const tensor_t *X, const tensor_t *a,
                           tensor_t *dX, tensor_t *da);
tma_status_t cpu_pair_mul(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti, tensor_t *E);
tma_status_t cpu_score_mlp(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti, int layers,
                           const tensor_t *const *W, const tensor_t *const *bias, const tensor_t *const *a,
                           tensor_t *scratch, tensor_t *logits);
tma_status_t cpu_pair_mul_bwd(tma_gnn_backend_t *b, const tensor_t *dE, const tensor_t *H, const tensor_t *hi,
                              const tensor_t *ti, tensor_t *dH);
tma_status_t cpu_bce_logits(tma_gnn_backend_t *b, const tensor_t *logits, const tensor_t *labels, double *loss_p,
                            tensor_t *dlogits);
tma_status_t cpu_rgcn_aggregate(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *rel,
                                const tensor_t *T, const tensor_t *coef, tensor_t *Y);
tma_status_t cpu_rgcn_aggregate_bwd(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *rel,
                                    const tensor_t *t_rel, const tensor_t *dY, const tensor_t *T, const tensor_t *coef,
                                    tensor_t *dT, tensor_t *dcoef);
tma_status_t cpu_distmult(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
                          const tensor_t *rel, const tensor_t *Wr, tensor_t *score);
tma_status_t cpu_distmult_bwd(tma_gnn_backend_t *b, const tensor_t *dscore, const tensor_t *H, const tensor_t *hi,
                              const tensor_t *ti, const tensor_t *rel, const tensor_t *Wr, tensor_t *dH,
                              tensor_t *dWr);
tma_status_t cpu_gat_scores(tma_gnn_backend_t *b, const tensor_t *T, const tensor_t *a_src, const tensor_t *a_dst,
                            tensor_t *S);
tma_status_t cpu_gat_aggregate(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *T,
                               const tensor_t *S, int64_t self0, tensor_t *alpha, tensor_t *Y);
tma_status_t cpu_gat_aggregate_bwd(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *T,
                                   const tensor_t *S, const tensor_t *alpha, const tensor_t *a_src,
                                   const tensor_t *a_dst, const tensor_t *dY, tensor_t *dE, tensor_t *dS,
                                   tensor_t *dT, tensor_t *da_src, tensor_t *da_dst);
tma_status_t cpu_rows_gather(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *idx, tensor_t *Y);
tma_status_t cpu_rows_scatter(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *idx, tensor_t *Y);

#endif
