/*
 * cuda_int.h: what the CUDA backend's two sources share: the CUDA headers,
 * the kernel launchers of cuda_kernels.cu and their limits.
 *
 * Every launcher queues its kernels on `stream` and returns the launch's
 * error (cudaGetLastError); errors of the kernels themselves surface at the
 * next synchronising call.  None allocates: the scratch they take is sized
 * by the limits below and reserved by cuda_backend.cu when a backend starts.
 */
#ifndef TMA_GNN_CUDA_INT_H
#define TMA_GNN_CUDA_INT_H

#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

/* Grid-stride kernels use at most this many blocks of CUK_THREADS threads
 * (about two blocks' worth of threads per multiprocessor of an H100), so a
 * scalar reduction has at most CUK_MAX_GRID block partials. */
#define CUK_THREADS 256
#define CUK_MAX_GRID 2048
/* Column reductions (colsum, LayerNorm's parameter gradients) sum up to
 * CUK_MAX_PARTS row ranges into partials of at most CUK_PART_DOUBLES
 * doubles each array (wider matrices take fewer ranges, at least one). */
#define CUK_MAX_PARTS 64
#define CUK_PART_DOUBLES (CUK_MAX_PARTS * 4096)
/* Columns a warp keeps in registers per pass of a row (32 lanes x 8). */
#define CUK_TILE 256

/* Device scratch every launcher that reduces may use (one backend, one stream). */
typedef struct cuk_scratch {
    double *part0, *part1; /* [CUK_PART_DOUBLES] each */
    double *parts;         /* [CUK_MAX_GRID * CUK_MAX_PARTS]: scalar partials */
    double *result;        /* [4] */
} cuk_scratch_t;

/* Element-wise. */
cudaError_t cuk_fill(cudaStream_t s, float *x, int64_t n, float v);
cudaError_t cuk_scale(cudaStream_t s, float *x, int64_t n, float v);
/* y[i] = x[i] / (1 - p) or 0 by gnn_dropout_keep(key, i, thresh); y may be x. */
cudaError_t cuk_dropout(cudaStream_t s, const float *x, int64_t n, float p, uint64_t key, uint32_t thresh, float *y);
cudaError_t cuk_add_bias(cudaStream_t s, float *Z, int64_t rows, int64_t d, const float *bias);
/* Z += bias (when bias), then Y = PReLU(Z) with slope *a (Y may be Z). */
cudaError_t cuk_bias_prelu(cudaStream_t s, float *Z, int64_t rows, int64_t d, const float *bias, const float *a,
                           float *Y);
/* dX = dY PReLU'(X) (dX may be dY); *da = sum over x <= 0 of x dY. */
cudaError_t cuk_prelu_bwd(cudaStream_t s, const cuk_scratch_t *sc, const float *dY, const float *X, const float *a,
                          int64_t n, float *dX, float *da);
cudaError_t cuk_adam(cudaStream_t s, float *p, const float *g, float *m, float *v, int64_t n, float beta1, float beta2,
                     float step_size, float bc2_sqrt, float eps);

/* Scalar reductions into sc->result[0] (device memory). */
cudaError_t cuk_sumsq(cudaStream_t s, const cuk_scratch_t *sc, const float *x, int64_t n);
/* Mean BCE with logits into result[0]; dl = its gradient. */
cudaError_t cuk_bce(cudaStream_t s, const cuk_scratch_t *sc, const float *x, const float *y, int64_t n, float *dl);
/* Sum of reciprocal ranks of n rows of `per` scores into result[0]. */
cudaError_t cuk_mrr(cudaStream_t s, const cuk_scratch_t *sc, const float *scores, int64_t n, int64_t per);

/* out[j] = sum_i X[i, j]. */
cudaError_t cuk_colsum(cudaStream_t s, const cuk_scratch_t *sc, const float *X, int64_t n, int64_t d, float *out);
/* Row-wise LayerNorm of X (n x d), then PReLU with slope *a when a is not
 * NULL; Y may be X. */
cudaError_t cuk_ln_fwd(cudaStream_t s, const float *X, const float *gamma, const float *beta, const float *a,
                       float eps, int64_t n, int64_t d, float *Y, float *mean, float *rstd);
/* LayerNorm backward (a == NULL) or LayerNorm+PReLU backward from the
 * saved mean and rstd: dX (may be dY), dgamma, dbeta and (with a) *da. */
cudaError_t cuk_ln_bwd(cudaStream_t s, const cuk_scratch_t *sc, const float *dY, const float *X, const float *gamma,
                       const float *beta, const float *a, const float *mean, const float *rstd, int64_t n, int64_t d,
                       float *dX, float *dgamma, float *dbeta, float *da);

/* Y[i] = sum_e w[e] X[src(e)] over CSR rows (ip, ix, w; `edges` of them):
 * src(e) = ix[e], or ids[ix[e]] when ids is given.  Each row written once
 * (rows without edges become 0); deterministic.  Rows of more than
 * CUK_SPMM_HEAVY edges are summed by a block each (uses sc's partials). */
#define CUK_SPMM_HEAVY 1024
cudaError_t cuk_spmm(cudaStream_t s, const cuk_scratch_t *sc, const int32_t *ip, const int32_t *ix, const float *w,
                     const int64_t *ids, const float *X, int64_t rows, int64_t d, int64_t edges, float *Y);
/* dX[ix[e]] += w[e] dY[i] for the CSR rows of dY (dX zeroed first, n_src rows). */
cudaError_t cuk_spmm_scatter(cudaStream_t s, const int32_t *ip, const int32_t *ix, const float *w, const float *dY,
                             int64_t rows, int64_t d, float *dX, int64_t n_src);
cudaError_t cuk_pair_mul(cudaStream_t s, const float *H, const int32_t *hi, const int32_t *ti, int64_t np, int64_t d,
                         float *E);
/* dH (n_h rows, zeroed first) from dE. */
cudaError_t cuk_pair_mul_bwd(cudaStream_t s, const float *dE, const float *H, const int32_t *hi, const int32_t *ti,
                             int64_t np, int64_t d, float *dH, int64_t n_h);

/* Features. */
/* out[i] = X[ids[i]] (dim floats a row). */
cudaError_t cuk_gather_rows(cudaStream_t s, const float *X, const int64_t *ids, int64_t n, int64_t dim, float *out);
/* out[i] = beta out[i] + sum over the CSR row ids[i] of val W[col] (d columns). */
cudaError_t cuk_csr_matmul(cudaStream_t s, const int64_t *rowptr, const int32_t *col, const float *val,
                           const int64_t *ids, int64_t n, const float *W, int64_t d, float beta, float *out);
/* dW (dim x d, zeroed first) = sum_i X[ids[i]]^T dOut[i]. */
cudaError_t cuk_csr_matmul_grad(cudaStream_t s, const int64_t *rowptr, const int32_t *col, const float *val,
                                const int64_t *ids, int64_t n, const float *dOut, int64_t d, float *dW, int64_t dim);
/* out[i] (dim floats) = sum_e w[e] X[ids[ix[e]]] with X in CSR. */
cudaError_t cuk_csr_aggregate(cudaStream_t s, const int64_t *rowptr, const int32_t *col, const float *val,
                              const int64_t *ids, const int32_t *ip, const int32_t *ix, const float *w, int64_t rows,
                              int64_t dim, float *out);

/* Heterogeneous ops (gnn_backend.h says what each computes). */
/* Y (rows x d) = the RGCN aggregation of T (B = nb slices of d columns a row). */
cudaError_t cuk_rgcn_agg(cudaStream_t s, const int32_t *ip, const int32_t *ix, const float *w, const int32_t *rel,
                         const float *a, int64_t nb, const float *T, int64_t rows, int64_t d, float *Y);
/* dT (through the transposed block when tp is not NULL, else by scatter
 * with atomics) and dcoef (nc = R x B <= 4096 floats: a block's shared
 * partials, added with atomics). */
cudaError_t cuk_rgcn_agg_bwd(cudaStream_t s, const int32_t *ip, const int32_t *ix, const float *w, const int32_t *rel,
                             const int32_t *tp, const int32_t *ti, const float *tw, const int32_t *trel,
                             const float *a, int64_t nb, int64_t nc, const float *dY, const float *T, int64_t n_dst,
                             int64_t n_src, int64_t d, float *dT, float *dcoef);
cudaError_t cuk_distmult(cudaStream_t s, const float *H, const int32_t *hi, const int32_t *ti, const int32_t *rel,
                         const float *Wr, int64_t np, int64_t d, float *score);
/* dH (n_h rows) and dWr (n_r rows), zeroed first, with atomics. */
cudaError_t cuk_distmult_bwd(cudaStream_t s, const float *ds, const float *H, const int32_t *hi, const int32_t *ti,
                             const int32_t *rel, const float *Wr, int64_t np, int64_t d, float *dH, int64_t n_h,
                             float *dWr, int64_t n_r);
/* GAT (gnn_backend.h says what each computes; K heads of C columns). */
cudaError_t cuk_gat_scores(cudaStream_t s, const float *T, const float *as, const float *ad, int64_t n, int64_t K,
                           int64_t C, float *S);
/* Y is rows x C (the heads' mean) when mean, else rows x K*C. */
cudaError_t cuk_gat_agg(cudaStream_t s, const int32_t *ip, const int32_t *ix, const float *T, const float *S,
                        int64_t self0, int64_t rows, int64_t K, int64_t C, int mean, float *alpha, float *Y);
/* dE, dS (n x 2K) and dT (n x K*C) for the n rows of T, nd of them
 * destinations; dT by scatter with atomics (its sums' order varies from
 * run to run).  The attention vectors' gradients are products: the caller's. */
cudaError_t cuk_gat_agg_bwd(cudaStream_t s, const int32_t *ip, const int32_t *ix, const float *T, const float *S,
                            const float *alpha, const float *as, const float *ad, const float *dY, int64_t n,
                            int64_t nd, int64_t K, int64_t C, int mean, float *dE, float *dS, float *dT);
/* Y[didx[i]] = X[sidx[i]] for i < n (a NULL index is the identity). */
cudaError_t cuk_rows_copy(cudaStream_t s, const float *X, const int32_t *sidx, const int32_t *didx, int64_t n,
                          int64_t d, float *Y);

#endif
