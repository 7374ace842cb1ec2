/*
 * cpu_gemm_int.h: the CPU backend's own single-precision products for
 * processors with AVX-512 (gnn/cpu/cpu_gemm.c), used in place of OpenBLAS
 * for the tall products of a training step: C = A op(B) with A's rows read
 * where they lie (no packed copy of the tall operand) and B, a layer's
 * weight, packed once per product; and C = A^T B summed over many rows.
 * All matrices are row-major float32; every function is reentrant (the
 * caller owns every buffer).
 */
#ifndef TMA_GNN_CPU_GEMM_INT_H
#define TMA_GNN_CPU_GEMM_INT_H

#include <stddef.h>
#include <stdint.h>

/* 1 when this build has the kernels and the processor runs AVX-512F. */
int tma_gnn_gemm512_available(void);

/* Floats a packed k x n operand takes (its columns in panels of 64). */
size_t tma_gnn_gemm512_packed_floats(int64_t k, int64_t n);

/* Packs op(B) (k x n: B itself, ldb apart, or with tb the transpose of the
 * n x k matrix B) into Bp, 64-byte aligned, of packed_floats(k, n). */
void tma_gnn_gemm512_pack(int tb, const float *B, int64_t ldb, int64_t k, int64_t n, float *Bp);

/* C = A op(B) (+ C when accumulate) (+ the row vector bias when not NULL)
 * for A m x k (lda apart) and op(B) packed by tma_gnn_gemm512_pack. Each
 * element's sum starts from C (when accumulating) and runs over k in order;
 * the bias is added last. */
void tma_gnn_gemm512_nn(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *Bp, int accumulate,
                        float *C, int64_t ldc, const float *bias);

/* What a product does with each row of its result before it stores it:
 * adds bias (n floats) when not NULL, then with prelu applies PReLU of
 * slope (z for z > 0, z * slope otherwise); then stores the row, or with dot
 * (n floats) not NULL stores only its dot product with dot, in out[i] for
 * row i (the row itself is never written, and C may be NULL when the
 * product does not accumulate). */
typedef struct {
    const float *bias;
    int prelu;
    float slope;
    const float *dot;
    float *out;
} tma_gnn_gemm512_epilogue_t;

/* tma_gnn_gemm512_nn with the epilogue epi (NULL: store as it is). */
void tma_gnn_gemm512_nn_epilogue(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *Bp,
                                 int accumulate, float *C, int64_t ldc, const tma_gnn_gemm512_epilogue_t *epi);

/* C = A^T B (+ C when accumulate) for A k x m and B k x n (lda, ldb apart):
 * a weight's gradient, summed over the k rows in blocks that stay in cache. */
void tma_gnn_gemm512_tn(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,
                        int accumulate, float *C, int64_t ldc);

#endif
