/*
 * cpu_gemm.c: single-precision products written for AVX-512 (see
 * cpu_gemm_int.h).  OpenBLAS packs both operands of every product into
 * panels before its kernel runs; for a layer's product (tens of thousands
 * of rows times a 256 x 256 weight) that copy of the tall operand is 9 % of
 * a SAGE training step.  Here the tall operand is read in place: a tile of
 * 6 rows of C by 64 columns lives in 24 registers, and for each k the
 * kernel broadcasts A's 6 entries against 4 vectors of the packed weight
 * row (64 KiB a panel, from L2).  For A^T B the rows are summed in blocks
 * of GEMM_KC, whose slices of A and B stay in L2 while every tile of C
 * passes over them.  Single-threaded: the backend splits the work.
 */
#include "cpu_gemm_int.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GEMM512_BUILT 1
#endif

#ifdef GEMM512_BUILT

#define MR 6        /* rows of a tile */
#define NR 64       /* columns of a tile and of a packed panel */
#define NV 4        /* vectors of 16 floats across a tile */
#define GEMM_KC 128 /* rows of A and B a tile of A^T B sums at a time */

/* These two run on any processor: compiled before the AVX-512 target. */
int tma_gnn_gemm512_available(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

size_t tma_gnn_gemm512_packed_floats(int64_t k, int64_t n)
{
    return (size_t)k * (size_t)((n + NR - 1) / NR * NR);
}

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC target("avx512f,avx2,fma")
#endif
#include <immintrin.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

void tma_gnn_gemm512_pack(int tb, const float *B, int64_t ldb, int64_t k, int64_t n, float *Bp)
{
    for (int64_t p = 0; p < n; p += NR) {
        const int64_t w = n - p < NR ? n - p : NR;
        float *panel = Bp + p * k;
        for (int64_t kk = 0; kk < k; kk++) {
            float *row = panel + kk * NR;
            if (tb)
                for (int64_t j = 0; j < w; j++)
                    row[j] = B[(p + j) * ldb + kk];
            else
                memcpy(row, B + kk * ldb + p, (size_t)w * sizeof(float));
            if (w < NR)
                memset(row + w, 0, (size_t)(NR - w) * sizeof(float));
        }
    }
}

/* The lanes of a tile's last vector that hold columns: w columns in nv vectors. */
static ALWAYS_INLINE __mmask16 last_mask(int nv, int64_t w)
{
    const int64_t tail = w - 16 * (int64_t)(nv - 1);
    return tail >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << tail) - 1u);
}

/* One tile of C (+)= A op(B), or with at A^T B: mr rows, w columns in nv
 * vectors, summed over k; A's entries A[r][kk] (A[kk][r] with at), B's rows
 * ldb apart (a packed panel's NR); then epi (NULL: a plain store), whose
 * bias and dot start at column col0 and whose out at row row0 (the tile's
 * place in the whole product).  mr, nv and at are constants in each
 * instance below, so the loops unroll and the tile stays in registers. */
static ALWAYS_INLINE void tile(const int at, const int mr, const int nv, int64_t w, int64_t k, const float *A,
                               int64_t lda, const float *B, int64_t ldb, int accumulate, float *C, int64_t ldc,
                               const tma_gnn_gemm512_epilogue_t *epi, int64_t row0, int64_t col0)
{
    __m512 c[MR][NV];
    __mmask16 m[NV];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++)
        m[v] = v == nv - 1 ? last_mask(nv, w) : (__mmask16)0xFFFF;
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            c[r][v] = accumulate ? _mm512_maskz_loadu_ps(m[v], C + r * ldc + 16 * v) : _mm512_setzero_ps();
    for (int64_t kk = 0; kk < k; kk++) {
        __m512 bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            bv[v] = at ? _mm512_maskz_loadu_ps(m[v], B + kk * ldb + 16 * v) /* (a packed panel is padded) */
                       : _mm512_load_ps(B + kk * ldb + 16 * v);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            const __m512 a = _mm512_set1_ps(at ? A[kk * lda + r] : A[r * lda + kk]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                c[r][v] = _mm512_fmadd_ps(a, bv[v], c[r][v]);
        }
    }
    if (!epi) {
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                _mm512_mask_storeu_ps(C + r * ldc + 16 * v, m[v], c[r][v]);
        return;
    }
    /* The epilogue: bias, PReLU, then a store or the dot with epi->dot. */
    const __m512 zero = _mm512_setzero_ps(), slope = _mm512_set1_ps(epi->slope);
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        __m512 acc = zero;
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            __m512 x = c[r][v];
            if (epi->bias)
                x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m[v], epi->bias + col0 + 16 * v));
            if (epi->prelu) /* z * (z > 0 ? 1 : slope): NaN takes the slope too */
                x = _mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_NGT_UQ), x, slope);
            if (epi->dot)
                acc = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m[v], epi->dot + col0 + 16 * v), acc);
            else
                _mm512_mask_storeu_ps(C + r * ldc + 16 * v, m[v], x);
        }
        if (epi->dot)
            epi->out[row0 + r] += _mm512_reduce_add_ps(acc);
    }
}

typedef void (*tile_fn)(int64_t w, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,
                        int accumulate, float *C, int64_t ldc, const tma_gnn_gemm512_epilogue_t *epi, int64_t row0,
                        int64_t col0);

/* The 24 instances of each kind of tile: rows 1..6 by vectors 1..4. */
#define TILE_INSTANCE(mr, nv)                                                                                        \
    static void nn_##mr##_##nv(int64_t w, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,      \
                               int accumulate, float *C, int64_t ldc, const tma_gnn_gemm512_epilogue_t *epi,        \
                               int64_t row0, int64_t col0)                                                          \
    {                                                                                                                \
        tile(0, mr, nv, w, k, A, lda, B, ldb, accumulate, C, ldc, epi, row0, col0);                                  \
    }                                                                                                                \
    static void tn_##mr##_##nv(int64_t w, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,      \
                               int accumulate, float *C, int64_t ldc, const tma_gnn_gemm512_epilogue_t *epi,        \
                               int64_t row0, int64_t col0)                                                          \
    {                                                                                                                \
        tile(1, mr, nv, w, k, A, lda, B, ldb, accumulate, C, ldc, NULL, row0, col0);                                 \
    }
#define TILE_ROW(mr) TILE_INSTANCE(mr, 1) TILE_INSTANCE(mr, 2) TILE_INSTANCE(mr, 3) TILE_INSTANCE(mr, 4)
TILE_ROW(1)
TILE_ROW(2)
TILE_ROW(3)
TILE_ROW(4)
TILE_ROW(5)
TILE_ROW(6)
#define TILE_FNS(kind, mr) {kind##_##mr##_1, kind##_##mr##_2, kind##_##mr##_3, kind##_##mr##_4}
static const tile_fn nn_fns[MR][NV] = {TILE_FNS(nn, 1), TILE_FNS(nn, 2), TILE_FNS(nn, 3),
                                       TILE_FNS(nn, 4), TILE_FNS(nn, 5), TILE_FNS(nn, 6)};
static const tile_fn tn_fns[MR][NV] = {TILE_FNS(tn, 1), TILE_FNS(tn, 2), TILE_FNS(tn, 3),
                                       TILE_FNS(tn, 4), TILE_FNS(tn, 5), TILE_FNS(tn, 6)};

void tma_gnn_gemm512_nn_epilogue(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *Bp,
                                 int accumulate, float *C, int64_t ldc, const tma_gnn_gemm512_epilogue_t *epi)
{
    if (epi && !epi->bias && !epi->prelu && !epi->dot)
        epi = NULL;
    if (epi && epi->dot)
        for (int64_t i = 0; i < m; i++)
            epi->out[i] = 0;
    /* A tile's 6 rows of A stay in L1 while it passes over every panel. */
    for (int64_t i = 0; i < m; i += MR) {
        const int mr = (int)(m - i < MR ? m - i : MR);
        for (int64_t p = 0; p < n; p += NR) {
            const int64_t w = n - p < NR ? n - p : NR;
            nn_fns[mr - 1][(w + 15) / 16 - 1](w, k, A + i * lda, lda, Bp + p * k, NR, accumulate,
                                              C ? C + i * ldc + p : NULL, ldc, epi, i, p);
        }
    }
}

void tma_gnn_gemm512_nn(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *Bp, int accumulate,
                        float *C, int64_t ldc, const float *bias)
{
    const tma_gnn_gemm512_epilogue_t epi = {.bias = bias};
    tma_gnn_gemm512_nn_epilogue(m, n, k, A, lda, Bp, accumulate, C, ldc, bias ? &epi : NULL);
}

void tma_gnn_gemm512_tn(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,
                        int accumulate, float *C, int64_t ldc)
{
    for (int64_t k0 = 0; k0 < k; k0 += GEMM_KC) {
        const int64_t kc = k - k0 < GEMM_KC ? k - k0 : GEMM_KC;
        const int acc = k0 > 0 || accumulate;
        for (int64_t i = 0; i < m; i += MR) {
            const int mr = (int)(m - i < MR ? m - i : MR);
            for (int64_t p = 0; p < n; p += NR) {
                const int64_t w = n - p < NR ? n - p : NR;
                tn_fns[mr - 1][(w + 15) / 16 - 1](w, kc, A + k0 * lda + i, lda, B + k0 * ldb + p, ldb, acc,
                                                  C + i * ldc + p, ldc, NULL, i, p);
            }
        }
    }
}

#if defined(__clang__)
#pragma clang attribute pop
#endif

#else /* no x86-64 or no compiler support: the backend never calls the kernels */

int tma_gnn_gemm512_available(void) { return 0; }
size_t tma_gnn_gemm512_packed_floats(int64_t k, int64_t n) { return (size_t)k * (size_t)n; }
void tma_gnn_gemm512_pack(int tb, const float *B, int64_t ldb, int64_t k, int64_t n, float *Bp) {}
void tma_gnn_gemm512_nn(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *Bp, int accumulate,
                        float *C, int64_t ldc, const float *bias)
{
}
void tma_gnn_gemm512_tn(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,
                        int accumulate, float *C, int64_t ldc)
{
}
void tma_gnn_gemm512_nn_epilogue(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *Bp,
                                 int accumulate, float *C, int64_t ldc, const tma_gnn_gemm512_epilogue_t *epi)
{
}

#endif
