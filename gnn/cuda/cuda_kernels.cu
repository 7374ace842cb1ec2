/*
 * cuda_kernels.cu: the CUDA backend's kernels and their launchers (see
 * cuda_int.h).  Plain CUDA C++ with no library beyond the runtime, written
 * to be read next to the CPU kernels (gnn/cpu/cpu_kernels.c), whose float
 * arithmetic they follow op for op.
 *
 * Shapes of work: element-wise ops are grid-stride loops over at most
 * CUK_MAX_GRID blocks; row-wise ops (LayerNorm, CSR aggregation, gathers)
 * give each row to one warp (the weighted row sums give a row of more than
 * CUK_SPMM_HEAVY edges to a whole block instead), whose lanes take the columns (so a warp reads
 * a row's consecutive floats together) and reduce with shuffles; column
 * reductions give each column to a lane of a 32 x 8 block over a range of
 * rows, then sum the ranges' partials in range order.
 *
 * Determinism: reductions sum fixed ranges in a fixed order, so results
 * depend only on the shapes, never on timing.  The scatters (the
 * transposed product without the transposed block, pair_mul_bwd, the
 * gradient of CSR features; of the heterogeneous ops, the RGCN dT without
 * the transposed block, the RGCN dcoef and DistMult's backward) add with
 * atomics and may differ in the last bits from run to run; the trainer
 * takes the gather path (it samples the transposed blocks).
 */
#include "cuda_int.h"
#include "gnn_backend.h"

#define FULL_MASK 0xffffffffu
#define WARPS (CUK_THREADS / 32)

/* ------------------------------------------------------------------ helpers */

static unsigned grid_for(int64_t n, int64_t per_block)
{
    int64_t g = (n + per_block - 1) / per_block;
    if (g < 1)
        g = 1;
    if (g > CUK_MAX_GRID)
        g = CUK_MAX_GRID;
    return (unsigned)g;
}

/* Blocks for one warp per row. */
static unsigned grid_rows(int64_t rows) { return grid_for(rows, WARPS); }

static cudaError_t launched(void) { return cudaGetLastError(); }

/* Every lane gets the warp's sum (a butterfly: each lane adds the same
 * values pairwise, and IEEE addition commutes, so all lanes agree bit for bit). */
template <class T> __device__ __forceinline__ T warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

/* The sum of v over the block's threads (tid in 0..nthreads-1, nthreads a
 * multiple of 32, at most 1024), valid in thread 0.  Uses `ws` (32 doubles
 * of shared memory); the caller syncs before reusing it. */
__device__ double block_sum(double v, int tid, int nthreads, double *ws)
{
    const int lane = tid & 31, w = tid >> 5;
    v = warp_sum(v);
    if (lane == 0)
        ws[w] = v;
    __syncthreads();
    v = 0;
    if (w == 0) {
        v = lane < (nthreads >> 5) ? ws[lane] : 0.0;
        v = warp_sum(v);
    }
    return v;
}

#define GRID_STRIDE(i, n)                                                                          \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

/* The warp's lane, and the rows it takes: row0, row0 + nwarps, ... */
#define WARP_ROWS(i, rows)                                                                         \
    const int lane = threadIdx.x & 31;                                                             \
    const int64_t nwarps_ = ((int64_t)gridDim.x * blockDim.x) >> 5;                                \
    for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < (rows); i += nwarps_)

/* Sums n partials in a fixed order into result (double) and/or out (float). */
__global__ void k_final_sum(const double *part, int64_t n, double *result, float *out)
{
    __shared__ double ws[32];
    double v = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        v += part[i];
    v = block_sum(v, threadIdx.x, blockDim.x, ws);
    if (threadIdx.x == 0) {
        if (result)
            *result = v;
        if (out)
            *out = (float)v;
    }
}

static cudaError_t final_sum(cudaStream_t s, const double *part, int64_t n, double *result, float *out)
{
    k_final_sum<<<1, CUK_THREADS, 0, s>>>(part, n, result, out);
    return launched();
}

/* ------------------------------------------------------------------ element-wise */

__global__ void k_fill(float *x, int64_t n, float v)
{
    GRID_STRIDE(i, n)
    x[i] = v;
}

cudaError_t cuk_fill(cudaStream_t s, float *x, int64_t n, float v)
{
    if (n <= 0)
        return cudaSuccess;
    k_fill<<<grid_for(n, CUK_THREADS), CUK_THREADS, 0, s>>>(x, n, v);
    return launched();
}

__global__ void k_scale(float *x, int64_t n, float v)
{
    GRID_STRIDE(i, n)
    x[i] *= v;
}

__global__ void k_dropout(const float *x, int64_t n, float scale, uint64_t key, uint32_t thresh, float *y)
{
    GRID_STRIDE(i, n)
    y[i] = gnn_dropout_keep(key, i, thresh) ? x[i] * scale : 0.0f;
}

cudaError_t cuk_dropout(cudaStream_t s, const float *x, int64_t n, float p, uint64_t key, uint32_t thresh, float *y)
{
    if (n <= 0)
        return cudaSuccess;
    k_dropout<<<grid_for(n, CUK_THREADS), CUK_THREADS, 0, s>>>(x, n, 1.0f / (1.0f - p), key, thresh, y);
    return launched();
}

cudaError_t cuk_scale(cudaStream_t s, float *x, int64_t n, float v)
{
    if (n <= 0)
        return cudaSuccess;
    k_scale<<<grid_for(n, CUK_THREADS), CUK_THREADS, 0, s>>>(x, n, v);
    return launched();
}

/* mode 0: Z += bias; 1: then Y = PReLU(Z); 2: Y = PReLU(Z) alone. */
__global__ void k_bias_act(int mode, float *Z, int64_t rows, int64_t d, const float *bias, const float *a, float *Y)
{
    const float s = mode ? *a : 0.0f;
    GRID_STRIDE(i, rows * d)
    {
        float v = Z[i];
        if (mode != 2) {
            v += bias[i % d];
            Z[i] = v;
        }
        if (mode)
            Y[i] = v * (v > 0 ? 1.0f : s);
    }
}

cudaError_t cuk_add_bias(cudaStream_t s, float *Z, int64_t rows, int64_t d, const float *bias)
{
    if (rows * d <= 0)
        return cudaSuccess;
    k_bias_act<<<grid_for(rows * d, CUK_THREADS), CUK_THREADS, 0, s>>>(0, Z, rows, d, bias, (const float *)nullptr, (float *)nullptr);
    return launched();
}

cudaError_t cuk_bias_prelu(cudaStream_t s, float *Z, int64_t rows, int64_t d, const float *bias, const float *a,
                           float *Y)
{
    if (rows * d <= 0)
        return cudaSuccess;
    k_bias_act<<<grid_for(rows * d, CUK_THREADS), CUK_THREADS, 0, s>>>(bias ? 1 : 2, Z, rows, d, bias, a, Y);
    return launched();
}

__global__ void k_prelu_bwd(const float *dY, const float *X, const float *a, int64_t n, float *dX, double *part)
{
    __shared__ double ws[32];
    const float s = *a;
    double acc = 0;
    GRID_STRIDE(i, n)
    {
        const float x = X[i], g = dY[i];
        const int pos = x > 0;
        acc += pos ? 0.0 : (double)x * g;
        dX[i] = g * (pos ? 1.0f : s);
    }
    acc = block_sum(acc, threadIdx.x, blockDim.x, ws);
    if (threadIdx.x == 0)
        part[blockIdx.x] = acc;
}

cudaError_t cuk_prelu_bwd(cudaStream_t s, const cuk_scratch_t *sc, const float *dY, const float *X, const float *a,
                          int64_t n, float *dX, float *da)
{
    const unsigned g = grid_for(n, CUK_THREADS);
    k_prelu_bwd<<<g, CUK_THREADS, 0, s>>>(dY, X, a, n, dX, sc->parts);
    cudaError_t e = launched();
    return e != cudaSuccess ? e : final_sum(s, sc->parts, g, (double *)nullptr, da);
}

/* PyTorch's single-tensor Adam in float32, as cpu_adam computes it. */
__global__ void k_adam(float *p, const float *g, float *m, float *v, int64_t n, float b1, float b2, float c1, float c2,
                       float step_size, float bc2_sqrt, float eps)
{
    GRID_STRIDE(i, n)
    {
        const float gi = g[i];
        const float mi = m[i] * b1 + gi * c1;
        const float vi = v[i] * b2 + gi * gi * c2;
        m[i] = mi;
        v[i] = vi;
        const float denom = sqrtf(vi) / bc2_sqrt + eps;
        p[i] = p[i] - step_size * (mi / denom);
    }
}

cudaError_t cuk_adam(cudaStream_t s, float *p, const float *g, float *m, float *v, int64_t n, float beta1, float beta2,
                     float step_size, float bc2_sqrt, float eps)
{
    if (n <= 0)
        return cudaSuccess;
    k_adam<<<grid_for(n, CUK_THREADS), CUK_THREADS, 0, s>>>(p, g, m, v, n, beta1, beta2, 1.0f - beta1, 1.0f - beta2, step_size, bc2_sqrt, eps);
    return launched();
}

/* ------------------------------------------------------------------ scalar reductions */

__global__ void k_sumsq(const float *x, int64_t n, double *part)
{
    __shared__ double ws[32];
    double acc = 0;
    GRID_STRIDE(i, n)
    acc += (double)x[i] * x[i];
    acc = block_sum(acc, threadIdx.x, blockDim.x, ws);
    if (threadIdx.x == 0)
        part[blockIdx.x] = acc;
}

cudaError_t cuk_sumsq(cudaStream_t s, const cuk_scratch_t *sc, const float *x, int64_t n)
{
    const unsigned g = grid_for(n, CUK_THREADS);
    k_sumsq<<<g, CUK_THREADS, 0, s>>>(x, n, sc->parts);
    cudaError_t e = launched();
    return e != cudaSuccess ? e : final_sum(s, sc->parts, g, sc->result, (float *)nullptr);
}

/* The loss and its gradient in double, as the CPU computes them. */
__global__ void k_bce(const float *x, const float *y, int64_t n, float *dl, double *part)
{
    __shared__ double ws[32];
    double acc = 0;
    GRID_STRIDE(i, n)
    {
        const double xi = x[i], yi = y[i];
        acc += (xi > 0 ? xi : 0) - xi * yi + log1p(exp(-fabs(xi)));
        dl[i] = (float)((1.0 / (1.0 + exp(-xi)) - yi) / (double)n);
    }
    acc = block_sum(acc, threadIdx.x, blockDim.x, ws);
    if (threadIdx.x == 0)
        part[blockIdx.x] = acc / (double)n;
}

cudaError_t cuk_bce(cudaStream_t s, const cuk_scratch_t *sc, const float *x, const float *y, int64_t n, float *dl)
{
    const unsigned g = grid_for(n, CUK_THREADS);
    k_bce<<<g, CUK_THREADS, 0, s>>>(x, y, n, dl, sc->parts);
    cudaError_t e = launched();
    return e != cudaSuccess ? e : final_sum(s, sc->parts, g, sc->result, (float *)nullptr);
}

/* One row of scores a thread: rank = 1 + #{j >= 1 : !(s[j] < s[0])}. */
__global__ void k_mrr(const float *scores, int64_t n, int64_t per, double *part)
{
    __shared__ double ws[32];
    double acc = 0;
    GRID_STRIDE(i, n)
    {
        const float *r = scores + i * per;
        const float s0 = r[0];
        int64_t rank = 1;
        for (int64_t j = 1; j < per; j++)
            rank += !(r[j] < s0);
        acc += 1.0 / (double)rank;
    }
    acc = block_sum(acc, threadIdx.x, blockDim.x, ws);
    if (threadIdx.x == 0)
        part[blockIdx.x] = acc;
}

cudaError_t cuk_mrr(cudaStream_t s, const cuk_scratch_t *sc, const float *scores, int64_t n, int64_t per)
{
    const unsigned g = grid_for(n, CUK_THREADS);
    k_mrr<<<g, CUK_THREADS, 0, s>>>(scores, n, per, sc->parts);
    cudaError_t e = launched();
    return e != cudaSuccess ? e : final_sum(s, sc->parts, g, sc->result, (float *)nullptr);
}

/* ------------------------------------------------------------------ column reductions */

/*
 * A 32 x 8 block sums its 32 columns over row range blockIdx.y.
 *   mode 0: s0 = sum X                      (colsum)
 *   mode 1: s0 = sum dY xhat, s1 = sum dY    (LayerNorm: dgamma, dbeta)
 *   mode 2: as 1 with dY PReLU'(y) in place of dY, y = xhat gamma + beta,
 *           and sa = sum over y <= 0 of y dY (the slope's gradient)
 * With one range the sums go to out0/out1, else to the partials.
 */
__global__ void k_colred(int mode, const float *X, const float *dY, const float *mean, const float *rstd,
                         const float *gamma, const float *beta, const float *a, int64_t n, int64_t d, int64_t per_part,
                         double *part0, double *part1, double *parta, float *out0, float *out1)
{
    __shared__ double sh0[8][33], sh1[8][33];
    __shared__ double ws[32];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t j = (int64_t)blockIdx.x * 32 + tx;
    const int64_t i0 = (int64_t)blockIdx.y * per_part;
    const int64_t i1 = i0 + per_part < n ? i0 + per_part : n;
    double s0 = 0, s1 = 0, sa = 0;
    if (j < d) {
        const float slope = mode == 2 ? *a : 0.0f;
        const float g = mode == 2 ? gamma[j] : 0.0f, bt = mode == 2 ? beta[j] : 0.0f;
        for (int64_t i = i0 + ty; i < i1; i += 8) {
            if (mode == 0) {
                s0 += X[i * d + j];
                continue;
            }
            const float xh = (X[i * d + j] - mean[i]) * rstd[i];
            float gy = dY[i * d + j];
            if (mode == 2) {
                const float y = xh * g + bt;
                const int pos = y > 0;
                sa += pos ? 0.0 : (double)y * gy;
                gy = gy * (pos ? 1.0f : slope);
            }
            s0 += (double)gy * xh;
            s1 += gy;
        }
    }
    sh0[ty][tx] = s0;
    sh1[ty][tx] = s1;
    __syncthreads();
    if (ty == 0 && j < d) {
        for (int k = 1; k < 8; k++) {
            s0 += sh0[k][tx];
            s1 += sh1[k][tx];
        }
        if (gridDim.y == 1) {
            out0[j] = (float)s0;
            if (mode)
                out1[j] = (float)s1;
        } else {
            part0[blockIdx.y * d + j] = s0;
            if (mode)
                part1[blockIdx.y * d + j] = s1;
        }
    }
    if (mode == 2) {
        sa = block_sum(sa, ty * 32 + tx, 256, ws);
        if (ty == 0 && tx == 0)
            parta[(int64_t)blockIdx.y * gridDim.x + blockIdx.x] = sa;
    }
}

/* out[j] = sum over the R ranges of part[r][j], in range order. */
__global__ void k_colcombine(const double *part0, const double *part1, int R, int64_t d, float *out0, float *out1)
{
    GRID_STRIDE(j, d)
    {
        double s0 = 0, s1 = 0;
        for (int r = 0; r < R; r++) {
            s0 += part0[r * d + j];
            if (part1)
                s1 += part1[r * d + j];
        }
        out0[j] = (float)s0;
        if (part1)
            out1[j] = (float)s1;
    }
}

static cudaError_t colred(cudaStream_t s, const cuk_scratch_t *sc, int mode, const float *X, const float *dY,
                          const float *mean, const float *rstd, const float *gamma, const float *beta, const float *a,
                          int64_t n, int64_t d, float *out0, float *out1, float *da)
{
    if (d <= 0)
        return cudaSuccess;
    /* About 256 rows a range, at most CUK_MAX_PARTS ranges and CUK_PART_DOUBLES partials. */
    int64_t R = (n + 255) / 256;
    if (R > CUK_MAX_PARTS)
        R = CUK_MAX_PARTS;
    if (R > CUK_PART_DOUBLES / d)
        R = CUK_PART_DOUBLES / d;
    if (R < 1)
        R = 1;
    const int64_t per_part = n > 0 ? (n + R - 1) / R : 1;
    const int64_t gx = (d + 31) / 32;
    if (mode == 2 && gx * R > (int64_t)CUK_MAX_GRID * CUK_MAX_PARTS)
        return cudaErrorInvalidValue;
    dim3 grid((unsigned)gx, (unsigned)R), block(32, 8);
    k_colred<<<grid, block, 0, s>>>(mode, X, dY, mean, rstd, gamma, beta, a, n, d, per_part, sc->part0, sc->part1, sc->parts, out0, out1);
    cudaError_t e = launched();
    if (e == cudaSuccess && R > 1) {
        k_colcombine<<<grid_for(d, CUK_THREADS), CUK_THREADS, 0, s>>>(sc->part0, mode ? sc->part1 : nullptr, (int)R, d, out0, out1);
        e = launched();
    }
    if (e == cudaSuccess && mode == 2)
        e = final_sum(s, sc->parts, gx * R, (double *)nullptr, da);
    return e;
}

cudaError_t cuk_colsum(cudaStream_t s, const cuk_scratch_t *sc, const float *X, int64_t n, int64_t d, float *out)
{
    return colred(s, sc, 0, X, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, n, d, out, nullptr, nullptr);
}

/* ------------------------------------------------------------------ LayerNorm */

/* One warp a row: mean, variance (two passes, as the CPU), then the output. */
__global__ void k_ln_fwd(const float *X, const float *gamma, const float *beta, const float *a, float eps, int64_t n,
                         int64_t d, float *Y, float *mean, float *rstd)
{
    const float s = a ? *a : 0.0f;
    WARP_ROWS(i, n)
    {
        const float *x = X + i * d;
        float sum = 0;
        for (int64_t j = lane; j < d; j += 32)
            sum += x[j];
        const float mu = warp_sum(sum) / (float)d;
        float v = 0;
        for (int64_t j = lane; j < d; j += 32)
            v += (x[j] - mu) * (x[j] - mu);
        const float rs = 1.0f / sqrtf(warp_sum(v) / (float)d + eps);
        float *y = Y + i * d;
        for (int64_t j = lane; j < d; j += 32) {
            float t = (x[j] - mu) * rs * gamma[j] + beta[j];
            y[j] = a ? t * (t > 0 ? 1.0f : s) : t;
        }
        if (lane == 0) {
            mean[i] = mu;
            rstd[i] = rs;
        }
    }
}

cudaError_t cuk_ln_fwd(cudaStream_t s, const float *X, const float *gamma, const float *beta, const float *a,
                       float eps, int64_t n, int64_t d, float *Y, float *mean, float *rstd)
{
    if (n <= 0 || d <= 0)
        return cudaSuccess;
    k_ln_fwd<<<grid_rows(n), CUK_THREADS, 0, s>>>(X, gamma, beta, a, eps, n, d, Y, mean, rstd);
    return launched();
}

/* dX of one row a warp: every lane reads its columns of dY before any
 * lane writes dX (the warp sums in between), so dX may be dY. */
__global__ void k_ln_bwd_rows(const float *dY, const float *X, const float *gamma, const float *beta, const float *a,
                              const float *mean, const float *rstd, int64_t n, int64_t d, float *dX)
{
    const float s = a ? *a : 0.0f;
    WARP_ROWS(i, n)
    {
        const float *x = X + i * d, *dy = dY + i * d;
        const float m = mean[i], r = rstd[i];
        float m1 = 0, m2 = 0;
        for (int64_t j = lane; j < d; j += 32) {
            const float xh = (x[j] - m) * r;
            float gy = dy[j];
            if (a)
                gy = gy * (xh * gamma[j] + beta[j] > 0 ? 1.0f : s);
            const float gg = gy * gamma[j];
            m1 += gg;
            m2 += gg * xh;
        }
        m1 = warp_sum(m1) / (float)d;
        m2 = warp_sum(m2) / (float)d;
        float *dx = dX + i * d;
        for (int64_t j = lane; j < d; j += 32) {
            const float xh = (x[j] - m) * r;
            float gy = dy[j];
            if (a)
                gy = gy * (xh * gamma[j] + beta[j] > 0 ? 1.0f : s);
            dx[j] = r * (gy * gamma[j] - m1 - xh * m2);
        }
    }
}

cudaError_t cuk_ln_bwd(cudaStream_t s, const cuk_scratch_t *sc, const float *dY, const float *X, const float *gamma,
                       const float *beta, const float *a, const float *mean, const float *rstd, int64_t n, int64_t d,
                       float *dX, float *dgamma, float *dbeta, float *da)
{
    /* The parameter gradients first: they read dY, which dX may overwrite. */
    cudaError_t e = colred(s, sc, a ? 2 : 1, X, dY, mean, rstd, gamma, beta, a, n, d, dgamma, dbeta, da);
    if (e != cudaSuccess || n <= 0 || d <= 0)
        return e;
    k_ln_bwd_rows<<<grid_rows(n), CUK_THREADS, 0, s>>>(dY, X, gamma, beta, a, mean, rstd, n, d, dX);
    return launched();
}

/* ------------------------------------------------------------------ sparse */

/* One warp a row; per pass a lane keeps 8 columns (j0 + lane + 32 v) in
 * registers while the row's edges go by in order. */
/* Sums edges [e0, e0 + step, e0 + 2 step, ...) below e1 of columns
 * [j0, j0 + CUK_TILE) into the lane's acc (columns lane + 32 v). */
__device__ __forceinline__ void spmm_tile(const int32_t *ix, const float *w, const int64_t *ids, const float *X,
                                          int64_t d, int64_t j0, int32_t e0, int32_t e1, int32_t step, int lane,
                                          float acc[8])
{
#pragma unroll
    for (int v = 0; v < 8; v++)
        acc[v] = 0.0f;
    for (int32_t e = e0; e < e1; e += step) {
        const int64_t src = ids ? ids[ix[e]] : (int64_t)ix[e];
        const float *xr = X + src * d + j0;
        const float we = w[e];
#pragma unroll
        for (int v = 0; v < 8; v++) {
            const int64_t j = lane + 32 * v;
            if (j0 + j < d)
                acc[v] += we * xr[j];
        }
    }
}

/* A warp a row; a row of more than `heavy` edges is only listed (its
 * number appended to heavy_rows, *heavy_count counting them) for
 * k_spmm_heavy, where a whole block sums it: one warp walking the edges of
 * a hub (tens of thousands in a power-law graph) held up the whole product. */
__global__ void k_spmm(const int32_t *ip, const int32_t *ix, const float *w, const int64_t *ids, const float *X,
                       int64_t rows, int64_t d, float *Y, int32_t heavy, unsigned *heavy_count, int32_t *heavy_rows)
{
    WARP_ROWS(i, rows)
    {
        const int32_t e0 = ip[i], e1 = ip[i + 1];
        if (e1 - e0 > heavy) {
            if (lane == 0)
                heavy_rows[atomicAdd(heavy_count, 1u)] = (int32_t)i;
            continue;
        }
        for (int64_t j0 = 0; j0 < d; j0 += CUK_TILE) {
            float acc[8];
            spmm_tile(ix, w, ids, X, d, j0, e0, e1, 1, lane, acc);
            float *y = Y + i * d + j0;
#pragma unroll
            for (int v = 0; v < 8; v++) {
                const int64_t j = lane + 32 * v;
                if (j0 + j < d)
                    y[j] = acc[v];
            }
        }
    }
}

/* The listed rows, a block of CUK_HEAVY_THREADS a row: warp k sums edges
 * e0 + k, e0 + k + W, ... (W warps), then the warps' sums are added in warp
 * order, so the result depends on the row alone, not on the list's order. */
#define CUK_HEAVY_THREADS 1024
__global__ void __launch_bounds__(CUK_HEAVY_THREADS)
    k_spmm_heavy(const int32_t *ip, const int32_t *ix, const float *w, const int64_t *ids, const float *X, int64_t d,
                 float *Y, const unsigned *heavy_count, const int32_t *heavy_rows)
{
    __shared__ float part[CUK_HEAVY_THREADS / 32][CUK_TILE];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = CUK_HEAVY_THREADS / 32;
    const unsigned n = *heavy_count;
    for (unsigned h = blockIdx.x; h < n; h += gridDim.x) {
        const int64_t i = heavy_rows[h];
        const int32_t e0 = ip[i], e1 = ip[i + 1];
        for (int64_t j0 = 0; j0 < d; j0 += CUK_TILE) {
            float acc[8];
            spmm_tile(ix, w, ids, X, d, j0, e0 + warp, e1, nw, lane, acc);
#pragma unroll
            for (int v = 0; v < 8; v++)
                part[warp][lane + 32 * v] = acc[v];
            __syncthreads();
            for (int64_t j = threadIdx.x; j < CUK_TILE && j0 + j < d; j += CUK_HEAVY_THREADS) {
                float sum = 0.0f;
                for (int k = 0; k < nw; k++)
                    sum += part[k][j];
                Y[i * d + j0 + j] = sum;
            }
            __syncthreads();
        }
    }
}

cudaError_t cuk_spmm(cudaStream_t s, const cuk_scratch_t *sc, const int32_t *ip, const int32_t *ix, const float *w,
                     const int64_t *ids, const float *X, int64_t rows, int64_t d, int64_t edges, float *Y)
{
    if (rows <= 0 || d <= 0)
        return cudaSuccess;
    /* The list of heavy rows lives in the scalar partials' scratch; the
     * threshold grows with the edges so that it always fits. */
    const int64_t cap = (int64_t)CUK_MAX_GRID * CUK_MAX_PARTS * (int64_t)(sizeof(double) / sizeof(int32_t));
    const int64_t heavy = edges / cap + 1 > CUK_SPMM_HEAVY ? edges / cap + 1 : CUK_SPMM_HEAVY;
    unsigned *count = (unsigned *)(sc->result + 3);
    int32_t *list = (int32_t *)sc->parts;
    cudaError_t e = cudaMemsetAsync(count, 0, sizeof *count, s);
    if (e != cudaSuccess)
        return e;
    k_spmm<<<grid_rows(rows), CUK_THREADS, 0, s>>>(ip, ix, w, ids, X, rows, d, Y, (int32_t)heavy, count, list);
    if ((e = launched()) != cudaSuccess)
        return e;
    /* At most edges / heavy rows can be heavy: that many blocks at most. */
    k_spmm_heavy<<<grid_for(edges / heavy + 1, 1), CUK_HEAVY_THREADS, 0, s>>>(ip, ix, w, ids, X, d, Y, count, list);
    return launched();
}

__global__ void k_spmm_scatter(const int32_t *ip, const int32_t *ix, const float *w, const float *dY, int64_t rows,
                               int64_t d, float *dX)
{
    WARP_ROWS(i, rows)
    {
        const float *g = dY + i * d;
        for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
            float *dst = dX + (int64_t)ix[e] * d;
            const float we = w[e];
            for (int64_t j = lane; j < d; j += 32)
                atomicAdd(dst + j, we * g[j]);
        }
    }
}

cudaError_t cuk_spmm_scatter(cudaStream_t s, const int32_t *ip, const int32_t *ix, const float *w, const float *dY,
                             int64_t rows, int64_t d, float *dX, int64_t n_src)
{
    if (n_src * d <= 0)
        return cudaSuccess;
    cudaError_t e = cudaMemsetAsync(dX, 0, (size_t)(n_src * d) * sizeof(float), s);
    if (e != cudaSuccess || rows <= 0)
        return e;
    k_spmm_scatter<<<grid_rows(rows), CUK_THREADS, 0, s>>>(ip, ix, w, dY, rows, d, dX);
    return launched();
}

/* ------------------------------------------------------------------ decoder input */

__global__ void k_pair_mul(const float *H, const int32_t *hi, const int32_t *ti, int64_t np, int64_t d, float *E)
{
    WARP_ROWS(p, np)
    {
        const float *hu = H + (int64_t)hi[p] * d, *hv = H + (int64_t)ti[p] * d;
        float *e = E + p * d;
        for (int64_t j = lane; j < d; j += 32)
            e[j] = hu[j] * hv[j];
    }
}

cudaError_t cuk_pair_mul(cudaStream_t s, const float *H, const int32_t *hi, const int32_t *ti, int64_t np, int64_t d,
                         float *E)
{
    if (np <= 0 || d <= 0)
        return cudaSuccess;
    k_pair_mul<<<grid_rows(np), CUK_THREADS, 0, s>>>(H, hi, ti, np, d, E);
    return launched();
}

__global__ void k_pair_mul_bwd(const float *dE, const float *H, const int32_t *hi, const int32_t *ti, int64_t np,
                               int64_t d, float *dH)
{
    WARP_ROWS(p, np)
    {
        const int64_t u = hi[p], v = ti[p];
        const float *g = dE + p * d, *hu = H + u * d, *hv = H + v * d;
        float *du = dH + u * d, *dv = dH + v * d;
        for (int64_t j = lane; j < d; j += 32) {
            atomicAdd(du + j, g[j] * hv[j]);
            atomicAdd(dv + j, g[j] * hu[j]);
        }
    }
}

cudaError_t cuk_pair_mul_bwd(cudaStream_t s, const float *dE, const float *H, const int32_t *hi, const int32_t *ti,
                             int64_t np, int64_t d, float *dH, int64_t n_h)
{
    if (n_h * d <= 0)
        return cudaSuccess;
    cudaError_t e = cudaMemsetAsync(dH, 0, (size_t)(n_h * d) * sizeof(float), s);
    if (e != cudaSuccess || np <= 0)
        return e;
    k_pair_mul_bwd<<<grid_rows(np), CUK_THREADS, 0, s>>>(dE, H, hi, ti, np, d, dH);
    return launched();
}

/* ------------------------------------------------------------------ features */

__global__ void k_gather_rows(const float *X, const int64_t *ids, int64_t n, int64_t dim, float *out)
{
    WARP_ROWS(i, n)
    {
        const float *src = X + ids[i] * dim;
        float *dst = out + i * dim;
        for (int64_t j = lane; j < dim; j += 32)
            dst[j] = src[j];
    }
}

cudaError_t cuk_gather_rows(cudaStream_t s, const float *X, const int64_t *ids, int64_t n, int64_t dim, float *out)
{
    if (n <= 0 || dim <= 0)
        return cudaSuccess;
    k_gather_rows<<<grid_rows(n), CUK_THREADS, 0, s>>>(X, ids, n, dim, out);
    return launched();
}

__global__ void k_csr_matmul(const int64_t *rowptr, const int32_t *col, const float *val, const int64_t *ids, int64_t n,
                             const float *W, int64_t d, float beta, float *out)
{
    WARP_ROWS(i, n)
    {
        const int64_t q0 = rowptr[ids[i]], q1 = rowptr[ids[i] + 1];
        float *o = out + i * d;
        for (int64_t j0 = 0; j0 < d; j0 += CUK_TILE) {
            float acc[8];
#pragma unroll
            for (int v = 0; v < 8; v++) {
                const int64_t j = j0 + lane + 32 * v;
                acc[v] = beta == 0.0f || j >= d ? 0.0f : beta * o[j];
            }
            for (int64_t q = q0; q < q1; q++) {
                const float *wr = W + (int64_t)col[q] * d + j0;
                const float x = val[q];
#pragma unroll
                for (int v = 0; v < 8; v++) {
                    const int64_t j = lane + 32 * v;
                    if (j0 + j < d)
                        acc[v] += x * wr[j];
                }
            }
#pragma unroll
            for (int v = 0; v < 8; v++) {
                const int64_t j = j0 + lane + 32 * v;
                if (j < d)
                    o[j] = acc[v];
            }
        }
    }
}

cudaError_t cuk_csr_matmul(cudaStream_t s, const int64_t *rowptr, const int32_t *col, const float *val,
                           const int64_t *ids, int64_t n, const float *W, int64_t d, float beta, float *out)
{
    if (n <= 0 || d <= 0)
        return cudaSuccess;
    k_csr_matmul<<<grid_rows(n), CUK_THREADS, 0, s>>>(rowptr, col, val, ids, n, W, d, beta, out);
    return launched();
}

__global__ void k_csr_matmul_grad(const int64_t *rowptr, const int32_t *col, const float *val, const int64_t *ids,
                                  int64_t n, const float *dOut, int64_t d, float *dW)
{
    WARP_ROWS(i, n)
    {
        const float *g = dOut + i * d;
        for (int64_t q = rowptr[ids[i]]; q < rowptr[ids[i] + 1]; q++) {
            float *dst = dW + (int64_t)col[q] * d;
            const float x = val[q];
            for (int64_t j = lane; j < d; j += 32)
                atomicAdd(dst + j, x * g[j]);
        }
    }
}

cudaError_t cuk_csr_matmul_grad(cudaStream_t s, const int64_t *rowptr, const int32_t *col, const float *val,
                                const int64_t *ids, int64_t n, const float *dOut, int64_t d, float *dW, int64_t dim)
{
    if (dim * d <= 0)
        return cudaSuccess;
    cudaError_t e = cudaMemsetAsync(dW, 0, (size_t)(dim * d) * sizeof(float), s);
    if (e != cudaSuccess || n <= 0)
        return e;
    k_csr_matmul_grad<<<grid_rows(n), CUK_THREADS, 0, s>>>(rowptr, col, val, ids, n, dOut, d, dW);
    return launched();
}

/* One warp a destination row: the row is zeroed, then each edge's source
 * row of non-zeros is added with the lanes on different non-zeros (their
 * columns differ within a row, so no two lanes write one element at once;
 * __syncwarp orders one edge's writes before the next edge's). */
__global__ void k_csr_aggregate(const int64_t *rowptr, const int32_t *col, const float *val, const int64_t *ids,
                                const int32_t *ip, const int32_t *ix, const float *w, int64_t rows, int64_t dim,
                                float *out)
{
    WARP_ROWS(i, rows)
    {
        float *o = out + i * dim;
        for (int64_t j = lane; j < dim; j += 32)
            o[j] = 0.0f;
        __syncwarp();
        for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
            const int64_t v = ids[ix[e]];
            const float we = w[e];
            for (int64_t q = rowptr[v] + lane; q < rowptr[v + 1]; q += 32)
                o[col[q]] += we * val[q];
            __syncwarp();
        }
    }
}

cudaError_t cuk_csr_aggregate(cudaStream_t s, const int64_t *rowptr, const int32_t *col, const float *val,
                              const int64_t *ids, const int32_t *ip, const int32_t *ix, const float *w, int64_t rows,
                              int64_t dim, float *out)
{
    if (rows <= 0 || dim <= 0)
        return cudaSuccess;
    k_csr_aggregate<<<grid_rows(rows), CUK_THREADS, 0, s>>>(rowptr, col, val, ids, ip, ix, w, rows, dim, out);
    return launched();
}

/* ------------------------------------------------------------------ heterogeneous ops */

/* A lane's share of a CUK_TILE-column tile in registers: columns lane +
 * 32 v (v < 8) of the tile, those below `rem` (the columns left in the row
 * from the tile's start). */
__device__ __forceinline__ void tile_zero(float acc[8])
{
#pragma unroll
    for (int v = 0; v < 8; v++)
        acc[v] = 0.0f;
}

__device__ __forceinline__ void tile_axpy(float acc[8], float c, const float *x, int lane, int64_t rem)
{
#pragma unroll
    for (int v = 0; v < 8; v++)
        if (lane + 32 * v < rem)
            acc[v] += c * x[lane + 32 * v];
}

__device__ __forceinline__ void tile_store(float *y, const float acc[8], int lane, int64_t rem)
{
#pragma unroll
    for (int v = 0; v < 8; v++)
        if (lane + 32 * v < rem)
            y[lane + 32 * v] = acc[v];
}

/* RGCN aggregation after the basis projection: one warp a destination row,
 * per tile a lane keeps 8 columns in registers while the row's edges go by
 * in order, each adding its B basis slices of T scaled by w[e] a[rel[e], b]. */
__global__ void k_rgcn_agg(const int32_t *ip, const int32_t *ix, const float *w, const int32_t *rel, const float *a,
                           int64_t nb, const float *T, int64_t rows, int64_t d, float *Y)
{
    const int64_t tc = nb * d;
    WARP_ROWS(i, rows)
    {
        for (int64_t j0 = 0; j0 < d; j0 += CUK_TILE) {
            float acc[8];
            tile_zero(acc);
            for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
                const float *tu = T + (int64_t)ix[e] * tc + j0, *ar = a + (int64_t)rel[e] * nb;
                for (int64_t q = 0; q < nb; q++)
                    tile_axpy(acc, w[e] * ar[q], tu + q * d, lane, d - j0);
            }
            tile_store(Y + i * d + j0, acc, lane, d - j0);
        }
    }
}

cudaError_t cuk_rgcn_agg(cudaStream_t s, const int32_t *ip, const int32_t *ix, const float *w, const int32_t *rel,
                         const float *a, int64_t nb, const float *T, int64_t rows, int64_t d, float *Y)
{
    if (rows <= 0 || d <= 0)
        return cudaSuccess;
    k_rgcn_agg<<<grid_rows(rows), CUK_THREADS, 0, s>>>(ip, ix, w, rel, a, nb, T, rows, d, Y);
    return launched();
}

/* dT through the transposed block: one warp a source row u, which owns its
 * B slices: dT[u, b*d + j] = sum over u's edges of w a[rel, b] dY[dst, j]. */
__global__ void k_rgcn_gather(const int32_t *tp, const int32_t *ti, const float *tw, const int32_t *trel,
                              const float *a, int64_t nb, const float *dY, int64_t rows, int64_t d, float *dT)
{
    const int64_t tc = nb * d;
    WARP_ROWS(u, rows)
    {
        for (int64_t q = 0; q < nb; q++)
            for (int64_t j0 = 0; j0 < d; j0 += CUK_TILE) {
                float acc[8];
                tile_zero(acc);
                for (int32_t e = tp[u]; e < tp[u + 1]; e++)
                    tile_axpy(acc, tw[e] * a[(int64_t)trel[e] * nb + q], dY + (int64_t)ti[e] * d + j0, lane, d - j0);
                tile_store(dT + u * tc + q * d + j0, acc, lane, d - j0);
            }
    }
}

/* dT by scatter (no transposed block): one warp a destination row, adding
 * with atomics. */
__global__ void k_rgcn_scatter(const int32_t *ip, const int32_t *ix, const float *w, const int32_t *rel,
                               const float *a, int64_t nb, const float *dY, int64_t rows, int64_t d, float *dT)
{
    const int64_t tc = nb * d;
    WARP_ROWS(i, rows)
    {
        const float *g = dY + i * d;
        for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
            float *du = dT + (int64_t)ix[e] * tc;
            const float *ar = a + (int64_t)rel[e] * nb;
            for (int64_t q = 0; q < nb; q++) {
                const float c = w[e] * ar[q];
                for (int64_t j = lane; j < d; j += 32)
                    atomicAdd(du + q * d + j, c * g[j]);
            }
        }
    }
}

/* dcoef: one warp a destination row; each edge's B dot products reduce
 * across the warp into the block's shared copy of dcoef (nc <=
 * TMA_GNN_RGCN_MAX_COEF floats), which each block then adds to the
 * output: global atomics per block, not per edge. */
__global__ void k_rgcn_dcoef(const int32_t *ip, const int32_t *ix, const float *w, const int32_t *rel, int64_t nb,
                             const float *dY, const float *T, int64_t rows, int64_t d, int64_t nc, float *dcoef)
{
    extern __shared__ float sh[];
    for (int64_t k = threadIdx.x; k < nc; k += blockDim.x)
        sh[k] = 0.0f;
    __syncthreads();
    const int64_t tc = nb * d;
    WARP_ROWS(i, rows)
    {
        const float *g = dY + i * d;
        for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
            const float *tu = T + (int64_t)ix[e] * tc;
            for (int64_t q = 0; q < nb; q++) {
                float dot = 0.0f;
                for (int64_t j = lane; j < d; j += 32)
                    dot += g[j] * tu[q * d + j];
                dot = warp_sum(dot);
                if (lane == 0)
                    atomicAdd(sh + (int64_t)rel[e] * nb + q, w[e] * dot);
            }
        }
    }
    __syncthreads();
    for (int64_t k = threadIdx.x; k < nc; k += blockDim.x)
        if (sh[k] != 0.0f)
            atomicAdd(dcoef + k, sh[k]);
}

cudaError_t cuk_rgcn_agg_bwd(cudaStream_t s, const int32_t *ip, const int32_t *ix, const float *w, const int32_t *rel,
                             const int32_t *tp, const int32_t *ti, const float *tw, const int32_t *trel,
                             const float *a, int64_t nb, int64_t nc, const float *dY, const float *T, int64_t n_dst,
                             int64_t n_src, int64_t d, float *dT, float *dcoef)
{
    cudaError_t e = cudaMemsetAsync(dcoef, 0, (size_t)nc * sizeof(float), s);
    if (e != cudaSuccess || d <= 0)
        return e;
    if (tp) {
        if (n_src > 0)
            k_rgcn_gather<<<grid_rows(n_src), CUK_THREADS, 0, s>>>(tp, ti, tw, trel, a, nb, dY, n_src, d, dT);
    } else {
        if (n_src > 0)
            e = cudaMemsetAsync(dT, 0, (size_t)(n_src * nb * d) * sizeof(float), s);
        if (e != cudaSuccess)
            return e;
        if (n_dst > 0)
            k_rgcn_scatter<<<grid_rows(n_dst), CUK_THREADS, 0, s>>>(ip, ix, w, rel, a, nb, dY, n_dst, d, dT);
    }
    if ((e = launched()) != cudaSuccess || n_dst <= 0)
        return e;
    k_rgcn_dcoef<<<grid_rows(n_dst), CUK_THREADS, (size_t)nc * sizeof(float), s>>>(ip, ix, w, rel, nb, dY, T, n_dst,
                                                                                    d, nc, dcoef);
    return launched();
}

/* DistMult: one warp a pair, the score reduced across the warp. */
__global__ void k_distmult(const float *H, const int32_t *hi, const int32_t *ti, const int32_t *rel, const float *Wr,
                           int64_t np, int64_t d, float *score)
{
    WARP_ROWS(p, np)
    {
        /* Wr NULL (and rel): the dot decoder, every diagonal ones. */
        const float *hu = H + (int64_t)hi[p] * d, *hv = H + (int64_t)ti[p] * d;
        const float *wr = Wr ? Wr + (int64_t)rel[p] * d : nullptr;
        float acc = 0.0f;
        for (int64_t j = lane; j < d; j += 32)
            acc += hu[j] * (wr ? wr[j] : 1.0f) * hv[j];
        acc = warp_sum(acc);
        if (lane == 0)
            score[p] = acc;
    }
}

cudaError_t cuk_distmult(cudaStream_t s, const float *H, const int32_t *hi, const int32_t *ti, const int32_t *rel,
                         const float *Wr, int64_t np, int64_t d, float *score)
{
    if (np <= 0)
        return cudaSuccess;
    k_distmult<<<grid_rows(np), CUK_THREADS, 0, s>>>(H, hi, ti, rel, Wr, np, d, score);
    return launched();
}

__global__ void k_distmult_bwd(const float *ds, const float *H, const int32_t *hi, const int32_t *ti,
                               const int32_t *rel, const float *Wr, int64_t np, int64_t d, float *dH, float *dWr)
{
    WARP_ROWS(p, np)
    {
        const int64_t u = hi[p], v = ti[p], r = Wr ? rel[p] : 0;
        const float g = ds[p];
        const float *hu = H + u * d, *hv = H + v * d, *wr = Wr ? Wr + r * d : nullptr;
        for (int64_t j = lane; j < d; j += 32) {
            const float w = wr ? wr[j] : 1.0f;
            atomicAdd(dH + u * d + j, g * w * hv[j]);
            atomicAdd(dH + v * d + j, g * w * hu[j]);
            if (dWr)
                atomicAdd(dWr + r * d + j, g * hu[j] * hv[j]);
        }
    }
}

cudaError_t cuk_distmult_bwd(cudaStream_t s, const float *ds, const float *H, const int32_t *hi, const int32_t *ti,
                             const int32_t *rel, const float *Wr, int64_t np, int64_t d, float *dH, int64_t n_h,
                             float *dWr, int64_t n_r)
{
    cudaError_t e = cudaMemsetAsync(dH, 0, (size_t)(n_h * d) * sizeof(float), s);
    if (e == cudaSuccess && dWr)
        e = cudaMemsetAsync(dWr, 0, (size_t)(n_r * d) * sizeof(float), s);
    if (e != cudaSuccess || np <= 0 || d <= 0)
        return e;
    k_distmult_bwd<<<grid_rows(np), CUK_THREADS, 0, s>>>(ds, H, hi, ti, rel, Wr, np, d, dH, dWr);
    return launched();
}

/* Y[dst(i)] = X[src(i)], src(i) = sidx[i] (or i when sidx is NULL), dst
 * likewise: the row gather and scatter by type. */
__global__ void k_rows_copy(const float *X, const int32_t *sidx, const int32_t *didx, int64_t n, int64_t d, float *Y)
{
    WARP_ROWS(i, n)
    {
        const float *x = X + (sidx ? (int64_t)sidx[i] : i) * d;
        float *y = Y + (didx ? (int64_t)didx[i] : i) * d;
        for (int64_t j = lane; j < d; j += 32)
            y[j] = x[j];
    }
}

cudaError_t cuk_rows_copy(cudaStream_t s, const float *X, const int32_t *sidx, const int32_t *didx, int64_t n,
                          int64_t d, float *Y)
{
    if (n <= 0 || d <= 0)
        return cudaSuccess;
    k_rows_copy<<<grid_rows(n), CUK_THREADS, 0, s>>>(X, sidx, didx, n, d, Y);
    return launched();
}

/* ------------------------------------------------------------------ GAT */

__device__ __forceinline__ float gat_leaky(float x) { return x > 0 ? x : TMA_GNN_GAT_SLOPE * x; }

/* Every lane gets the warp's maximum. */
__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

/* S[u, k] = T[u, head k] . a_src[k], S[u, K + k] likewise with a_dst: one
 * warp a row, a head at a time. */
__global__ void k_gat_scores(const float *T, const float *as, const float *ad, int64_t n, int64_t K, int64_t C,
                             float *S)
{
    WARP_ROWS(u, n)
    {
        const float *tu = T + u * K * C;
        for (int64_t k = 0; k < K; k++) {
            float x = 0.0f, y = 0.0f;
            for (int64_t c = lane; c < C; c += 32) {
                x += tu[k * C + c] * as[k * C + c];
                y += tu[k * C + c] * ad[k * C + c];
            }
            x = warp_sum(x);
            y = warp_sum(y);
            if (lane == 0) {
                S[u * 2 * K + k] = x;
                S[u * 2 * K + K + k] = y;
            }
        }
    }
}

cudaError_t cuk_gat_scores(cudaStream_t s, const float *T, const float *as, const float *ad, int64_t n, int64_t K,
                           int64_t C, float *S)
{
    if (n <= 0)
        return cudaSuccess;
    k_gat_scores<<<grid_rows(n), CUK_THREADS, 0, s>>>(T, as, ad, n, K, C, S);
    return launched();
}

/* One warp a destination row: per head the softmax over its edges (the
 * lanes take the edges), then the weighted sum of the sources' head rows
 * (the lanes take the columns of the head; each reads the attention of
 * other lanes' edges, and adds to columns other lanes zeroed, only after
 * __syncwarp). */
__global__ void k_gat_agg(const int32_t *ip, const int32_t *ix, const float *T, const float *S, int64_t self0,
                          int64_t rows, int64_t K, int64_t C, int mean, float *alpha, float *Y)
{
    const int64_t KC = K * C, d = mean ? C : KC;
    WARP_ROWS(i, rows)
    {
        float *yi = Y + i * d;
        for (int64_t j = lane; j < d; j += 32)
            yi[j] = 0.0f;
        __syncwarp(); /* a head's columns start at k C: other lanes than those that zeroed them add to them */
        const int32_t e0 = ip[i], e1 = ip[i + 1];
        for (int64_t k = 0; k < K; k++) {
            const float sd = S[(self0 + i) * 2 * K + K + k];
            float m = -INFINITY, z = 0.0f;
            for (int32_t e = e0 + lane; e < e1; e += 32)
                m = fmaxf(m, gat_leaky(S[(int64_t)ix[e] * 2 * K + k] + sd));
            m = warp_max(m);
            for (int32_t e = e0 + lane; e < e1; e += 32) {
                const float w = expf(gat_leaky(S[(int64_t)ix[e] * 2 * K + k] + sd) - m);
                alpha[(int64_t)e * K + k] = w;
                z += w;
            }
            z = warp_sum(z);
            for (int32_t e = e0 + lane; e < e1; e += 32)
                alpha[(int64_t)e * K + k] /= z;
            __syncwarp();
            float *yk = mean ? yi : yi + k * C;
            for (int32_t e = e0; e < e1; e++) {
                const float a = mean ? alpha[(int64_t)e * K + k] / (float)K : alpha[(int64_t)e * K + k];
                const float *tu = T + (int64_t)ix[e] * KC + k * C;
                for (int64_t j = lane; j < C; j += 32)
                    yk[j] += a * tu[j];
            }
        }
    }
}

cudaError_t cuk_gat_agg(cudaStream_t s, const int32_t *ip, const int32_t *ix, const float *T, const float *S,
                        int64_t self0, int64_t rows, int64_t K, int64_t C, int mean, float *alpha, float *Y)
{
    if (rows <= 0)
        return cudaSuccess;
    k_gat_agg<<<grid_rows(rows), CUK_THREADS, 0, s>>>(ip, ix, T, S, self0, rows, K, C, mean, alpha, Y);
    return launched();
}

/* Backward 1: one warp a row of T.  Destination rows: each edge's gradient
 * through the softmax and the LeakyReLU into dE, their sum into the row's
 * destination score gradient dS[i, K + k]; every row's source score
 * gradient dS[u, k] starts at 0 (backward 2 adds to it). */
__global__ void k_gat_bwd_edges(const int32_t *ip, const int32_t *ix, const float *T, const float *S,
                                const float *alpha, const float *dY, int64_t n, int64_t nd, int64_t K, int64_t C,
                                int mean, float scale, float *dE, float *dS)
{
    const int64_t KC = K * C, d = mean ? C : KC;
    WARP_ROWS(i, n)
    {
        for (int64_t k = 0; k < K; k++) {
            float gd = 0.0f;
            if (i < nd) {
                const float *go = mean ? dY + i * d : dY + i * d + k * C;
                float sum = 0.0f;
                for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
                    const float *tu = T + (int64_t)ix[e] * KC + k * C;
                    float g = 0.0f;
                    for (int64_t c = lane; c < C; c += 32)
                        g += go[c] * tu[c];
                    g = warp_sum(g);
                    if (lane == 0)
                        dE[(int64_t)e * K + k] = g * scale;
                    sum += alpha[(int64_t)e * K + k] * g * scale;
                }
                __syncwarp();
                for (int32_t e = ip[i] + lane; e < ip[i + 1]; e += 32) {
                    const float x = S[(int64_t)ix[e] * 2 * K + k] + S[i * 2 * K + K + k];
                    const float g = alpha[(int64_t)e * K + k] * (dE[(int64_t)e * K + k] - sum) *
                                    (x > 0 ? 1.0f : TMA_GNN_GAT_SLOPE);
                    dE[(int64_t)e * K + k] = g;
                    gd += g;
                }
                gd = warp_sum(gd);
                __syncwarp();
            }
            if (lane == 0) {
                dS[i * 2 * K + K + k] = gd;
                dS[i * 2 * K + k] = 0.0f;
            }
        }
    }
}

/* Backward 2: the source score gradients, dS[src(e), k] += dE[e, k]; and dT
 * (zeroed first) += alpha[e, k] scale dY[i, head k], both with atomics:
 * one warp a destination row. */
__global__ void k_gat_bwd_scatter(const int32_t *ip, const int32_t *ix, const float *alpha, const float *dE,
                                  const float *dY, int64_t nd, int64_t K, int64_t C, int mean, float scale,
                                  float *dS, float *dT)
{
    const int64_t KC = K * C, d = mean ? C : KC;
    WARP_ROWS(i, nd)
    {
        for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
            const int64_t u = ix[e];
            for (int64_t k = lane; k < K; k += 32)
                atomicAdd(dS + u * 2 * K + k, dE[(int64_t)e * K + k]);
            for (int64_t k = 0; k < K; k++) {
                const float a = alpha[(int64_t)e * K + k] * scale, *g = dY + i * d + (mean ? 0 : k * C);
                for (int64_t c = lane; c < C; c += 32)
                    atomicAdd(dT + u * KC + k * C + c, a * g[c]);
            }
        }
    }
}

/* Backward 3: the scores' share of dT, dT[u, head k] += dS[u, k] a_src[k] +
 * dS[u, K + k] a_dst[k]: one warp a row. */
__global__ void k_gat_bwd_scores(const float *dS, const float *as, const float *ad, int64_t n, int64_t K, int64_t C,
                                 float *dT)
{
    WARP_ROWS(u, n)
    {
        for (int64_t k = 0; k < K; k++) {
            const float gs = dS[u * 2 * K + k], gd = dS[u * 2 * K + K + k];
            for (int64_t c = lane; c < C; c += 32)
                dT[u * K * C + k * C + c] += gs * as[k * C + c] + gd * ad[k * C + c];
        }
    }
}

cudaError_t cuk_gat_agg_bwd(cudaStream_t s, const int32_t *ip, const int32_t *ix, const float *T, const float *S,
                            const float *alpha, const float *as, const float *ad, const float *dY, int64_t n,
                            int64_t nd, int64_t K, int64_t C, int mean, float *dE, float *dS, float *dT)
{
    const float scale = mean ? 1.0f / (float)K : 1.0f;
    if (n <= 0)
        return cudaSuccess;
    cudaError_t e = cudaMemsetAsync(dT, 0, (size_t)(n * K * C) * sizeof(float), s);
    if (e != cudaSuccess)
        return e;
    k_gat_bwd_edges<<<grid_rows(n), CUK_THREADS, 0, s>>>(ip, ix, T, S, alpha, dY, n, nd, K, C, mean, scale, dE, dS);
    if ((e = launched()) != cudaSuccess)
        return e;
    if (nd > 0) {
        k_gat_bwd_scatter<<<grid_rows(nd), CUK_THREADS, 0, s>>>(ip, ix, alpha, dE, dY, nd, K, C, mean, scale, dS, dT);
        if ((e = launched()) != cudaSuccess)
            return e;
    }
    k_gat_bwd_scores<<<grid_rows(n), CUK_THREADS, 0, s>>>(dS, as, ad, n, K, C, dT);
    return launched();
}
