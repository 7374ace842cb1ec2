/*
 * cuda_backend.cu: the CUDA backend's ops table (gnn_backend.h): device
 * memory, the dense products through cuBLAS and the rest through the
 * kernels of cuda_kernels.cu, all queued on one stream per backend.
 *
 * Errors: every CUDA and cuBLAS call is checked; a failure becomes a
 * status (TMA_ERR_NO_DEVICE when there is no usable GPU,
 * TMA_ERR_DEVICE_NOMEM when device memory runs out, with the sizes,
 * TMA_ERR_DEVICE for the rest) logged with the device, the call and CUDA's
 * own words; nothing aborts.  A kernel's own failure is reported by the
 * next call that waits for the device (a download, a reduction, `wait`).
 *
 * Memory: tensors are cudaMalloc'd when the trainer or evaluator is
 * created, never per step; so are cuBLAS's workspace, the reduction
 * scratch and the features.  Host staging (host_alloc) is page-locked, so
 * uploads from it are asynchronous DMA on the stream; the backend keeps the
 * list of those buffers, and an upload from any other host memory waits
 * until the copy is done (the caller may reuse that memory at once).
 *
 * Threads: a backend is used by one thread at a time, but that thread may
 * change (the coordinator creates its evaluator in one thread and runs it
 * in another), and the CUDA runtime's current device is per thread: every
 * op sets the device first (cheap when it is already current).
 */
#include "cuda_int.h"
#include "gnn_backend.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COMP "gnn-cuda"

/* cuBLAS workspace: what cuBLAS asks for on Hopper (32 MiB), given up front
 * so it never allocates during a step. */
#define BLAS_WORKSPACE ((size_t)32 << 20)
/* Host staging buffers whose uploads may stay asynchronous. */
#define MAX_PINNED 128
/* Dense features: rows gathered for one sgemm (up to 4 Mi floats, as the CPU). */
#define GATHER_FLOATS ((int64_t)4 << 20)
/* Features are stored as CSR when at most this share of entries is non-zero
 * (the CPU backend's rule, so both take the same layer-0 path). */
#define SPARSE_DENSITY 0.10

typedef struct pinned {
    const char *p;
    size_t bytes;
} pinned_t;

typedef struct cuda_state {
    int dev;
    cudaStream_t stream;
    cublasHandle_t blas;
    void *blas_ws;
    cuk_scratch_t sc;
    double *h_result; /* page-locked [4] */
    pinned_t pinned[MAX_PINNED];
    int npinned;
} cuda_state_t;

#define S(b) ((cuda_state_t *)(b)->impl)
#define F(t) ((float *)(t)->data)
#define CF(t) ((const float *)(t)->data)
#define CI32(t) ((const int32_t *)(t)->data)
#define CI64(t) ((const int64_t *)(t)->data)

/* ------------------------------------------------------------------ errors */

static tma_status_t cuda_status(cudaError_t e)
{
    switch (e) {
    case cudaErrorMemoryAllocation:
        return TMA_ERR_DEVICE_NOMEM;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
        return TMA_ERR_NO_DEVICE;
    default:
        return TMA_ERR_DEVICE;
    }
}

static tma_status_t cuda_fail(const tma_gnn_backend_t *b, cudaError_t e, const char *call, const char *op)
{
    tma_log_error(COMP, "device %s: %s: %s failed: %s (%s)", b->device, op, call, cudaGetErrorString(e),
                  cudaGetErrorName(e));
    return cuda_status(e);
}

static const char *blas_str(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "an unknown cuBLAS status";
    }
}

static tma_status_t blas_fail(const tma_gnn_backend_t *b, cublasStatus_t s, const char *call, const char *op)
{
    tma_log_error(COMP, "device %s: %s: %s failed: %s (%d)", b->device, op, call, blas_str(s), (int)s);
    return s == CUBLAS_STATUS_ALLOC_FAILED ? TMA_ERR_DEVICE_NOMEM : TMA_ERR_DEVICE;
}

/* Checked calls inside an op (`b` in scope); __func__ names the op. */
#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return cuda_fail(b, e_, #call, __func__);                                              \
    } while (0)

#define BLAS(call)                                                                                 \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                           \
            return blas_fail(b, s_, #call, __func__);                                              \
    } while (0)

/* Every op starts here: the backend's GPU becomes the thread's current device. */
#define ENTER(b) CU(cudaSetDevice(S(b)->dev))

/* Reports an out-of-memory with the size asked for and what the device has left. */
static tma_status_t device_alloc(tma_gnn_backend_t *b, size_t bytes, void **p_p, const char *what)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e == cudaSuccess) {
        *p_p = p;
        return TMA_OK;
    }
    (void)cudaGetLastError(); /* an allocation failure is not sticky: clear it */
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
        free_b = total_b = 0;
    (void)cudaGetLastError();
    if (e == cudaErrorMemoryAllocation) {
        tma_log_error(COMP, "device %s: out of GPU memory allocating %zu bytes (%.1f MiB) for %s; %.1f MiB free of %.1f MiB",
                      b->device, bytes, (double)bytes / 1048576.0, what, (double)free_b / 1048576.0,
                      (double)total_b / 1048576.0);
        return TMA_ERR_DEVICE_NOMEM;
    }
    return cuda_fail(b, e, "cudaMalloc", what);
}

/* ------------------------------------------------------------------ lifetime */

static void cuda_fini(tma_gnn_backend_t *b)
{
    cuda_state_t *cs = S(b);
    if (!cs)
        return;
    if (cudaSetDevice(cs->dev) == cudaSuccess) {
        if (cs->stream)
            (void)cudaStreamSynchronize(cs->stream);
        if (cs->blas)
            (void)cublasDestroy(cs->blas);
        (void)cudaFree(cs->blas_ws);
        (void)cudaFree(cs->sc.part0);
        (void)cudaFree(cs->sc.part1);
        (void)cudaFree(cs->sc.parts);
        (void)cudaFree(cs->sc.result);
        (void)cudaFreeHost(cs->h_result);
        if (cs->stream)
            (void)cudaStreamDestroy(cs->stream);
        (void)cudaGetLastError();
    }
    free(cs);
    b->impl = NULL;
}

/* "cuda" -> 0, "cuda:3" -> 3; -1 if malformed (tma_gnn_device_parse's rule). */
static int device_index(const char *device)
{
    int gpu = -1;
    return tma_gnn_device_parse(device, &gpu) == TMA_OK ? gpu : -1;
}

static tma_status_t cuda_init(tma_gnn_backend_t *b, const char *device)
{
    const int idx = device_index(device);
    if (idx < 0) {
        tma_log_error(COMP, "device \"%s\": expected cuda or cuda:N with N a GPU index", device);
        return TMA_ERR_INVALID;
    }
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        tma_log_error(COMP, "device %s: no usable GPU: cudaGetDeviceCount failed: %s (%s, error %d); use --device cpu",
                      device, cudaGetErrorString(e), cudaGetErrorName(e), (int)e);
        return TMA_ERR_NO_DEVICE;
    }
    if (count < 1) {
        tma_log_error(COMP, "device %s: no usable GPU: the CUDA runtime sees no device; use --device cpu", device);
        return TMA_ERR_NO_DEVICE;
    }
    if (idx >= count) {
        tma_log_error(COMP, "device %s: no usable GPU of that index: this machine has %d GPU(s), cuda:0 to cuda:%d",
                      device, count, count - 1);
        return TMA_ERR_NO_DEVICE;
    }
    cuda_state_t *cs = (cuda_state_t *)calloc(1, sizeof *cs);
    if (!cs)
        return TMA_ERR_NOMEM;
    cs->dev = idx;
    b->impl = cs;
    tma_status_t st = TMA_OK;
    cudaDeviceProp prop;
#define INIT_CU(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            st = cuda_fail(b, e_, #call, "starting the backend");                                  \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)
#define INIT_BLAS(call)                                                                            \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            st = blas_fail(b, s_, #call, "starting the backend");                                  \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)
    INIT_CU(cudaSetDevice(idx));
    INIT_CU(cudaGetDeviceProperties(&prop, idx));
    INIT_CU(cudaStreamCreateWithFlags(&cs->stream, cudaStreamNonBlocking));
    INIT_BLAS(cublasCreate(&cs->blas));
    INIT_BLAS(cublasSetStream(cs->blas, cs->stream));
    /* Plain FP32 products: no TF32 (the results must match the CPU to 1e-5). */
    INIT_BLAS(cublasSetMathMode(cs->blas, CUBLAS_DEFAULT_MATH));
    if ((st = device_alloc(b, BLAS_WORKSPACE, &cs->blas_ws, "the cuBLAS workspace")) != TMA_OK)
        goto fail;
    INIT_BLAS(cublasSetWorkspace(cs->blas, cs->blas_ws, BLAS_WORKSPACE));
    if ((st = device_alloc(b, CUK_PART_DOUBLES * sizeof(double), (void **)&cs->sc.part0, "reduction scratch")) ||
        (st = device_alloc(b, CUK_PART_DOUBLES * sizeof(double), (void **)&cs->sc.part1, "reduction scratch")) ||
        (st = device_alloc(b, (size_t)CUK_MAX_GRID * CUK_MAX_PARTS * sizeof(double), (void **)&cs->sc.parts,
                           "reduction scratch")) ||
        (st = device_alloc(b, 4 * sizeof(double), (void **)&cs->sc.result, "reduction scratch")))
        goto fail;
    INIT_CU(cudaMallocHost((void **)&cs->h_result, 4 * sizeof(double)));
    tma_log_info(COMP, "device %s: %s, compute capability %d.%d, %d multiprocessors, %.1f GiB", device, prop.name,
                 prop.major, prop.minor, prop.multiProcessorCount, (double)prop.totalGlobalMem / 1073741824.0);
    return TMA_OK;
fail:
#undef INIT_CU
#undef INIT_BLAS
    cuda_fini(b);
    return st;
}

/* ------------------------------------------------------------------ memory */

static tma_status_t cuda_alloc(tma_gnn_backend_t *b, size_t bytes, void **p_p)
{
    ENTER(b);
    return device_alloc(b, bytes, p_p, "a tensor");
}

static void cuda_free(tma_gnn_backend_t *b, void *p)
{
    if (cudaSetDevice(S(b)->dev) != cudaSuccess || cudaFree(p) != cudaSuccess) {
        cudaError_t e = cudaGetLastError();
        tma_log_warn(COMP, "device %s: cudaFree failed: %s", b->device, cudaGetErrorString(e));
    }
}

static void *cuda_host_alloc(tma_gnn_backend_t *b, size_t bytes)
{
    cuda_state_t *cs = S(b);
    void *p = NULL;
    if (cudaSetDevice(cs->dev) != cudaSuccess || cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaError_t e = cudaGetLastError();
        tma_log_error(COMP, "device %s: could not allocate %zu bytes of page-locked host memory: %s", b->device,
                      bytes, cudaGetErrorString(e));
        return NULL;
    }
    if (cs->npinned < MAX_PINNED) {
        cs->pinned[cs->npinned].p = (const char *)p;
        cs->pinned[cs->npinned].bytes = bytes;
        cs->npinned++;
    }
    return p;
}

static void cuda_host_free(tma_gnn_backend_t *b, void *p)
{
    cuda_state_t *cs = S(b);
    for (int i = 0; i < cs->npinned; i++) {
        if (cs->pinned[i].p == p) {
            cs->pinned[i] = cs->pinned[--cs->npinned];
            break;
        }
    }
    /* The device may still be reading it. */
    (void)cudaSetDevice(cs->dev);
    (void)cudaStreamSynchronize(cs->stream);
    if (cudaFreeHost(p) != cudaSuccess)
        (void)cudaGetLastError();
}

/* 1 when [p, p + bytes) lies in one of our page-locked buffers. */
static int is_pinned(const cuda_state_t *cs, const void *p, size_t bytes)
{
    const char *c = (const char *)p;
    for (int i = 0; i < cs->npinned; i++)
        if (c >= cs->pinned[i].p && c + bytes <= cs->pinned[i].p + cs->pinned[i].bytes)
            return 1;
    return 0;
}

static tma_status_t cuda_wait(tma_gnn_backend_t *b)
{
    ENTER(b);
    CU(cudaStreamSynchronize(S(b)->stream));
    return TMA_OK;
}

static tma_status_t cuda_upload(tma_gnn_backend_t *b, void *dst, const void *host, size_t bytes)
{
    ENTER(b);
    cuda_state_t *cs = S(b);
    CU(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, cs->stream));
    /* From pageable memory the caller may rewrite or free `host` on return. */
    if (!is_pinned(cs, host, bytes))
        CU(cudaStreamSynchronize(cs->stream));
    return TMA_OK;
}

static tma_status_t cuda_download(tma_gnn_backend_t *b, void *host, const void *src, size_t bytes)
{
    ENTER(b);
    CU(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, S(b)->stream));
    CU(cudaStreamSynchronize(S(b)->stream));
    return TMA_OK;
}

static tma_status_t cuda_fill(tma_gnn_backend_t *b, tensor_t *x, float v)
{
    ENTER(b);
    const int64_t n = tma_gnn_tensor_numel(x);
    if (v == 0.0f && !signbit(v))
        CU(cudaMemsetAsync(x->data, 0, (size_t)n * sizeof(float), S(b)->stream));
    else
        CU(cuk_fill(S(b)->stream, F(x), n, v));
    return TMA_OK;
}

/* A scalar the last reduction left in result[0], brought to the host. */
static tma_status_t fetch_result(tma_gnn_backend_t *b, double *out_p)
{
    cuda_state_t *cs = S(b);
    CU(cudaMemcpyAsync(cs->h_result, cs->sc.result, sizeof(double), cudaMemcpyDeviceToHost, cs->stream));
    CU(cudaStreamSynchronize(cs->stream));
    *out_p = cs->h_result[0];
    return TMA_OK;
}

/* ------------------------------------------------------------------ dense */

/* Row-major C (m x n) = alpha op(A) op(B) + beta C through column-major
 * cuBLAS: a row-major matrix is its transpose in column-major order, so it
 * computes C^T = op(B)^T op(A)^T, i.e. sgemm(op_b, op_a, n, m, k) on B
 * then A with the row lengths as leading dimensions. */
static tma_status_t gemm_rm(tma_gnn_backend_t *b, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                            const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX) {
        tma_log_error(COMP, "device %s: a %lld x %lld x %lld product is beyond cuBLAS's 32-bit sizes", b->device,
                      (long long)m, (long long)n, (long long)k);
        return TMA_ERR_UNSUPPORTED;
    }
    BLAS(cublasSgemm(S(b)->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
                     (int)k, &alpha, B, (int)ldb, A, (int)lda, &beta, C, (int)ldc));
    return TMA_OK;
}

static tma_status_t cuda_matmul(tma_gnn_backend_t *b, const tensor_t *A, int ta, const tensor_t *B, int tb,
                                float alpha, float beta, tensor_t *C)
{
    ENTER(b);
    const int64_t m = C->rows, n = C->cols, k = ta ? A->rows : A->cols;
    if (k == 0) {
        /* Nothing to sum: C = beta C. */
        if (beta == 0.0f)
            CU(cudaMemsetAsync(C->data, 0, (size_t)(m * n) * sizeof(float), S(b)->stream));
        else
            CU(cuk_scale(S(b)->stream, F(C), m * n, beta));
        return TMA_OK;
    }
    return gemm_rm(b, ta, tb, m, n, k, alpha, CF(A), A->cols, CF(B), B->cols, beta, F(C), n);
}

static tma_status_t cuda_add_bias(tma_gnn_backend_t *b, tensor_t *Z, const tensor_t *bias)
{
    ENTER(b);
    CU(cuk_add_bias(S(b)->stream, F(Z), Z->rows, Z->cols, CF(bias)));
    return TMA_OK;
}

static tma_status_t cuda_colsum(tma_gnn_backend_t *b, const tensor_t *X, tensor_t *out)
{
    ENTER(b);
    CU(cuk_colsum(S(b)->stream, &S(b)->sc, CF(X), X->rows, X->cols, F(out)));
    return TMA_OK;
}

/* ------------------------------------------------------------------ sparse */

static tma_status_t cuda_spmm(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *X, tensor_t *Y)
{
    ENTER(b);
    CU(cuk_spmm(S(b)->stream, &S(b)->sc, CI32(&blk->indptr), CI32(&blk->indices), CF(&blk->weights), NULL, CF(X),
                blk->num_dst, Y->cols, blk->num_edges, F(Y)));
    return TMA_OK;
}

/* dX = A^T dY: with the transposed block a gather per source row (each row
 * written once, deterministic), else a scatter with atomics. */
static tma_status_t cuda_spmm_t(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *dY, tensor_t *dX)
{
    ENTER(b);
    if (blk->has_transpose)
        CU(cuk_spmm(S(b)->stream, &S(b)->sc, CI32(&blk->t_indptr), CI32(&blk->t_indices), CF(&blk->t_weights), NULL,
                    CF(dY), blk->num_src, dY->cols, blk->num_edges, F(dX)));
    else
        CU(cuk_spmm_scatter(S(b)->stream, CI32(&blk->indptr), CI32(&blk->indices), CF(&blk->weights), CF(dY),
                            blk->num_dst, dY->cols, F(dX), dX->rows));
    return TMA_OK;
}

/* ------------------------------------------------------------------ LayerNorm, PReLU */

static tma_status_t cuda_ln_prelu_fwd(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *gamma,
                                      const tensor_t *beta, const tensor_t *a, float eps, tensor_t *H, tensor_t *mean,
                                      tensor_t *rstd)
{
    ENTER(b);
    CU(cuk_ln_fwd(S(b)->stream, CF(X), CF(gamma), CF(beta), CF(a), eps, X->rows, X->cols, F(H), F(mean), F(rstd)));
    return TMA_OK;
}

static tma_status_t cuda_ln_prelu_bwd(tma_gnn_backend_t *b, const tensor_t *dH, const tensor_t *X,
                                      const tensor_t *gamma, const tensor_t *beta, const tensor_t *a,
                                      const tensor_t *mean, const tensor_t *rstd, tensor_t *dX, tensor_t *dgamma,
                                      tensor_t *dbeta, tensor_t *da)
{
    ENTER(b);
    CU(cuk_ln_bwd(S(b)->stream, &S(b)->sc, CF(dH), CF(X), CF(gamma), CF(beta), CF(a), CF(mean), CF(rstd), X->rows,
                  X->cols, F(dX), F(dgamma), F(dbeta), F(da)));
    return TMA_OK;
}

static tma_status_t cuda_prelu_bwd(tma_gnn_backend_t *b, const tensor_t *dY, const tensor_t *X, const tensor_t *a,
                                   tensor_t *dX, tensor_t *da)
{
    ENTER(b);
    CU(cuk_prelu_bwd(S(b)->stream, &S(b)->sc, CF(dY), CF(X), CF(a), tma_gnn_tensor_numel(X), F(dX), F(da)));
    return TMA_OK;
}

static tma_status_t cuda_bias_prelu(tma_gnn_backend_t *b, tensor_t *Z, const tensor_t *bias, const tensor_t *a,
                                    tensor_t *Y)
{
    ENTER(b);
    CU(cuk_bias_prelu(S(b)->stream, F(Z), Z->rows, Z->cols, CF(bias), CF(a), F(Y)));
    return TMA_OK;
}

/* ------------------------------------------------------------------ decoder, loss, optimizer */

static tma_status_t cuda_pair_mul(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
                                  tensor_t *E)
{
    ENTER(b);
    CU(cuk_pair_mul(S(b)->stream, CF(H), CI32(hi), CI32(ti), E->rows, H->cols, F(E)));
    return TMA_OK;
}

static tma_status_t cuda_pair_mul_bwd(tma_gnn_backend_t *b, const tensor_t *dE, const tensor_t *H, const tensor_t *hi,
                                      const tensor_t *ti, tensor_t *dH)
{
    ENTER(b);
    CU(cuk_pair_mul_bwd(S(b)->stream, CF(dE), CF(H), CI32(hi), CI32(ti), dE->rows, H->cols, F(dH), dH->rows));
    return TMA_OK;
}

static tma_status_t cuda_bce_logits(tma_gnn_backend_t *b, const tensor_t *logits, const tensor_t *labels,
                                    double *loss_p, tensor_t *dlogits)
{
    ENTER(b);
    CU(cuk_bce(S(b)->stream, &S(b)->sc, CF(logits), CF(labels), tma_gnn_tensor_numel(logits), F(dlogits)));
    return fetch_result(b, loss_p);
}

static tma_status_t cuda_sumsq(tma_gnn_backend_t *b, const tensor_t *x, double *out_p)
{
    ENTER(b);
    CU(cuk_sumsq(S(b)->stream, &S(b)->sc, CF(x), tma_gnn_tensor_numel(x)));
    return fetch_result(b, out_p);
}

static tma_status_t cuda_scale(tma_gnn_backend_t *b, tensor_t *x, float s)
{
    ENTER(b);
    CU(cuk_scale(S(b)->stream, F(x), tma_gnn_tensor_numel(x), s));
    return TMA_OK;
}

static tma_status_t cuda_dropout(tma_gnn_backend_t *b, const tensor_t *x, float p, uint64_t key, tensor_t *y)
{
    ENTER(b);
    CU(cuk_dropout(S(b)->stream, CF(x), tma_gnn_tensor_numel(x), p, key, gnn_dropout_threshold(p), F(y)));
    return TMA_OK;
}

static tma_status_t cuda_adam(tma_gnn_backend_t *b, tensor_t *p, const tensor_t *g, tensor_t *m, tensor_t *v,
                              const tma_gnn_adam_t *h)
{
    ENTER(b);
    /* The bias corrections in double on the host, as the CPU backend. */
    const double bc1 = 1.0 - pow(h->beta1, (double)h->step), bc2 = 1.0 - pow(h->beta2, (double)h->step);
    CU(cuk_adam(S(b)->stream, F(p), CF(g), F(m), F(v), tma_gnn_tensor_numel(p), h->beta1, h->beta2,
                (float)(h->lr / bc1), (float)sqrt(bc2), h->eps));
    return TMA_OK;
}

static tma_status_t cuda_mrr_sum(tma_gnn_backend_t *b, const tensor_t *scores, double *sum_p)
{
    ENTER(b);
    CU(cuk_mrr(S(b)->stream, &S(b)->sc, CF(scores), scores->rows, scores->cols));
    return fetch_result(b, sum_p);
}

/* ------------------------------------------------------------------ heterogeneous ops */

static tma_status_t cuda_rgcn_aggregate(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *rel,
                                        const tensor_t *T, const tensor_t *coef, tensor_t *Y)
{
    ENTER(b);
    CU(cuk_rgcn_agg(S(b)->stream, CI32(&blk->indptr), CI32(&blk->indices), CF(&blk->weights), CI32(rel), CF(coef),
                    coef->cols, CF(T), blk->num_dst, Y->cols, F(Y)));
    return TMA_OK;
}

/* dT through the transposed block (each row written once) when the block
 * has it, else by a scatter with atomics; dcoef with atomics. */
static tma_status_t cuda_rgcn_aggregate_bwd(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *rel,
                                            const tensor_t *t_rel, const tensor_t *dY, const tensor_t *T,
                                            const tensor_t *coef, tensor_t *dT, tensor_t *dcoef)
{
    ENTER(b);
    const int tr = blk->has_transpose;
    CU(cuk_rgcn_agg_bwd(S(b)->stream, CI32(&blk->indptr), CI32(&blk->indices), CF(&blk->weights), CI32(rel),
                        tr ? CI32(&blk->t_indptr) : NULL, tr ? CI32(&blk->t_indices) : NULL,
                        tr ? CF(&blk->t_weights) : NULL, tr ? CI32(t_rel) : NULL, CF(coef), coef->cols,
                        tma_gnn_tensor_numel(coef), CF(dY), CF(T), blk->num_dst, blk->num_src, dY->cols, F(dT),
                        F(dcoef)));
    return TMA_OK;
}

/* ------------------------------------------------------------------ GAT */

static tma_status_t cuda_gat_scores(tma_gnn_backend_t *b, const tensor_t *T, const tensor_t *a_src,
                                    const tensor_t *a_dst, tensor_t *Sc)
{
    ENTER(b);
    CU(cuk_gat_scores(S(b)->stream, CF(T), CF(a_src), CF(a_dst), T->rows, a_src->rows, a_src->cols, F(Sc)));
    return TMA_OK;
}

static tma_status_t cuda_gat_aggregate(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *T,
                                       const tensor_t *Sc, int64_t self0, tensor_t *alpha, tensor_t *Y)
{
    ENTER(b);
    const int64_t K = Sc->cols / 2;
    CU(cuk_gat_agg(S(b)->stream, CI32(&blk->indptr), CI32(&blk->indices), CF(T), CF(Sc), self0, blk->num_dst, K,
                   T->cols / K, Y->cols != T->cols, F(alpha), F(Y)));
    return TMA_OK;
}

/* The kernels give dE, dS and dT; the attention vectors' gradients are one
 * product a head and vector: da_src[k] = T[:, head k]^T dS[:, k] (and
 * da_dst with dS[:, K + k]), a cuBLAS gemv on T's column-major view. */
static tma_status_t cuda_gat_aggregate_bwd(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *T,
                                           const tensor_t *Sc, const tensor_t *alpha, const tensor_t *a_src,
                                           const tensor_t *a_dst, const tensor_t *dY, tensor_t *dE, tensor_t *dS,
                                           tensor_t *dT, tensor_t *da_src, tensor_t *da_dst)
{
    ENTER(b);
    const int64_t K = a_src->rows, C = a_src->cols, n = T->rows;
    CU(cuk_gat_agg_bwd(S(b)->stream, CI32(&blk->indptr), CI32(&blk->indices), CF(T), CF(Sc), CF(alpha), CF(a_src),
                       CF(a_dst), CF(dY), n, blk->num_dst, K, C, dY->cols != T->cols, F(dE), F(dS), F(dT)));
    CU(cudaMemsetAsync(da_src->data, 0, (size_t)(K * C) * sizeof(float), S(b)->stream));
    CU(cudaMemsetAsync(da_dst->data, 0, (size_t)(K * C) * sizeof(float), S(b)->stream));
    if (n == 0)
        return TMA_OK;
    if (n > INT_MAX || K * C > INT_MAX) {
        tma_log_error(COMP, "device %s: a GAT layer of %lld rows x %lld columns is beyond cuBLAS's 32-bit sizes",
                      b->device, (long long)n, (long long)(K * C));
        return TMA_ERR_UNSUPPORTED;
    }
    const float one = 1.0f, zero = 0.0f;
    for (int64_t k = 0; k < K; k++) {
        BLAS(cublasSgemv(S(b)->blas, CUBLAS_OP_N, (int)C, (int)n, &one, CF(T) + k * C, (int)(K * C), CF(dS) + k,
                         (int)(2 * K), &zero, F(da_src) + k * C, 1));
        BLAS(cublasSgemv(S(b)->blas, CUBLAS_OP_N, (int)C, (int)n, &one, CF(T) + k * C, (int)(K * C), CF(dS) + K + k,
                         (int)(2 * K), &zero, F(da_dst) + k * C, 1));
    }
    return TMA_OK;
}

static tma_status_t cuda_distmult(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
                                  const tensor_t *rel, const tensor_t *Wr, tensor_t *score)
{
    ENTER(b);
    /* rel and Wr NULL: the dot decoder (the kernel reads neither). */
    CU(cuk_distmult(S(b)->stream, CF(H), CI32(hi), CI32(ti), rel ? CI32(rel) : nullptr, Wr ? CF(Wr) : nullptr,
                    score->rows, H->cols, F(score)));
    return TMA_OK;
}

static tma_status_t cuda_distmult_bwd(tma_gnn_backend_t *b, const tensor_t *dscore, const tensor_t *H,
                                      const tensor_t *hi, const tensor_t *ti, const tensor_t *rel, const tensor_t *Wr,
                                      tensor_t *dH, tensor_t *dWr)
{
    ENTER(b);
    CU(cuk_distmult_bwd(S(b)->stream, CF(dscore), CF(H), CI32(hi), CI32(ti), rel ? CI32(rel) : nullptr,
                        Wr ? CF(Wr) : nullptr, dscore->rows, H->cols, F(dH), dH->rows, dWr ? F(dWr) : nullptr,
                        dWr ? dWr->rows : 0));
    return TMA_OK;
}

static tma_status_t cuda_rows_gather(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *idx, tensor_t *Y)
{
    ENTER(b);
    CU(cuk_rows_copy(S(b)->stream, CF(X), CI32(idx), NULL, Y->rows, Y->cols, F(Y)));
    return TMA_OK;
}

static tma_status_t cuda_rows_scatter(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *idx, tensor_t *Y)
{
    ENTER(b);
    CU(cuk_rows_copy(S(b)->stream, CF(X), NULL, CI32(idx), X->rows, X->cols, F(Y)));
    return TMA_OK;
}

/* ------------------------------------------------------------------ features */

/* Features in device memory: dense (num_nodes x dim) with a buffer for rows
 * gathered into one sgemm, or CSR when sparse enough. */
struct tma_gnn_feat {
    int64_t n, dim;
    int sparse;
    float *dense;
    int64_t *rowptr; /* CSR: [n + 1] */
    int32_t *col;
    float *val;
    int64_t nnz;
    float *gather; /* dense: [chunk_rows x dim] */
    int64_t chunk_rows;
};

static void feat_free(tma_gnn_backend_t *b, tma_gnn_feat_t *f)
{
    if (!f)
        return;
    void *ps[] = {f->dense, f->rowptr, f->col, f->val, f->gather};
    for (size_t i = 0; i < TMA_ARRAY_LEN(ps); i++)
        if (ps[i])
            cuda_free(b, ps[i]);
    free(f);
}

/* The CSR form of host features (host arrays, caller frees). */
/* Host feature element i (row-major) of type t, widened.  16-bit features
 * are widened on the host as they are uploaded: the device holds float32
 * (a correct path; not run here, no GPU in this project's CI). */
static float host_at(const void *host, tma_feat_dtype_t t, int64_t i)
{
    if (t == TMA_FEAT_F16)
        return tma_f16_to_f32(((const uint16_t *)host)[i]);
    if (t == TMA_FEAT_BF16)
        return tma_bf16_to_f32(((const uint16_t *)host)[i]);
    return ((const float *)host)[i];
}

static tma_status_t csr_build(const void *host, tma_feat_dtype_t t, int64_t n, int64_t dim, int64_t nnz,
                              int64_t **rowptr_p, int32_t **col_p, float **val_p)
{
    int64_t *rowptr = (int64_t *)malloc((size_t)(n + 1) * sizeof *rowptr);
    int32_t *col = (int32_t *)malloc((size_t)(nnz ? nnz : 1) * sizeof *col);
    float *val = (float *)malloc((size_t)(nnz ? nnz : 1) * sizeof *val);
    if (!rowptr || !col || !val) {
        free(rowptr);
        free(col);
        free(val);
        return TMA_ERR_NOMEM;
    }
    int64_t o = 0;
    for (int64_t i = 0; i < n; i++) {
        rowptr[i] = o;
        for (int64_t j = 0; j < dim; j++) {
            const float x = host_at(host, t, i * dim + j);
            if (x != 0.0f) {
                col[o] = (int32_t)j;
                val[o] = x;
                o++;
            }
        }
    }
    rowptr[n] = o;
    *rowptr_p = rowptr;
    *col_p = col;
    *val_p = val;
    return TMA_OK;
}

/* A synchronous upload of setup data (pageable host memory). */
static tma_status_t setup_upload(tma_gnn_backend_t *b, void *dst, const void *host, size_t bytes)
{
    CU(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, S(b)->stream));
    CU(cudaStreamSynchronize(S(b)->stream));
    return TMA_OK;
}

/* The dense table uploaded: as it is (f32), or widened a block of rows at a
 * time through a pageable host buffer. */
static tma_status_t upload_widened(tma_gnn_backend_t *b, float *dst, const void *host, tma_feat_dtype_t t, int64_t n,
                                   int64_t dim)
{
    if (t == TMA_FEAT_F32)
        return setup_upload(b, dst, host, (size_t)(n * dim) * sizeof(float));
    const int64_t rows = TMA_MAX((int64_t)1, (int64_t)(GATHER_FLOATS / dim));
    float *buf = (float *)malloc((size_t)(rows * dim) * sizeof(float));
    if (!buf)
        return TMA_ERR_NOMEM;
    tma_status_t st = TMA_OK;
    const size_t esz = tma_feat_dtype_size(t);
    for (int64_t r0 = 0; r0 < n && st == TMA_OK; r0 += rows) {
        const int64_t k = TMA_MIN(rows, n - r0);
        tma_feat_widen((const char *)host + (size_t)(r0 * dim) * esz, t, (size_t)(k * dim), buf);
        st = setup_upload(b, dst + r0 * dim, buf, (size_t)(k * dim) * sizeof(float));
    }
    free(buf);
    return st;
}

static tma_status_t cuda_feat_create(tma_gnn_backend_t *b, const void *host, tma_feat_dtype_t dtype, int64_t n,
                                     int64_t dim, unsigned flags, tma_gnn_feat_t **f_p)
{
    ENTER(b);
    tma_gnn_feat_t *f = (tma_gnn_feat_t *)calloc(1, sizeof *f);
    if (!f)
        return TMA_ERR_NOMEM;
    f->n = n;
    f->dim = dim;
    tma_status_t st = TMA_OK;
    if (!(flags & TMA_GNN_FEAT_DENSE) && n > 0 && dim >= 16) {
        int64_t nnz = 0;
        for (int64_t i = 0; i < n * dim; i++)
            nnz += host_at(host, dtype, i) != 0.0f;
        if ((double)nnz <= SPARSE_DENSITY * (double)n * (double)dim) {
            int64_t *rowptr = NULL;
            int32_t *col = NULL;
            float *val = NULL;
            if ((st = csr_build(host, dtype, n, dim, nnz, &rowptr, &col, &val)) != TMA_OK)
                goto fail;
            f->sparse = 1;
            f->nnz = nnz;
            size_t nb = (size_t)(nnz ? nnz : 1);
            if ((st = device_alloc(b, (size_t)(n + 1) * sizeof(int64_t), (void **)&f->rowptr, "CSR features")) ||
                (st = device_alloc(b, nb * sizeof(int32_t), (void **)&f->col, "CSR features")) ||
                (st = device_alloc(b, nb * sizeof(float), (void **)&f->val, "CSR features")) ||
                (st = setup_upload(b, f->rowptr, rowptr, (size_t)(n + 1) * sizeof(int64_t))) ||
                (st = setup_upload(b, f->col, col, (size_t)nnz * sizeof(int32_t))) ||
                (st = setup_upload(b, f->val, val, (size_t)nnz * sizeof(float)))) {
                free(rowptr);
                free(col);
                free(val);
                goto fail;
            }
            free(rowptr);
            free(col);
            free(val);
        }
    }
    if (!f->sparse) {
        size_t bytes = (size_t)(n * dim) * sizeof(float);
        f->chunk_rows = TMA_MAX((int64_t)1, TMA_MIN(TMA_MAX(n, (int64_t)1), GATHER_FLOATS / dim));
        if ((st = device_alloc(b, bytes, (void **)&f->dense, "the node features")) ||
            (st = device_alloc(b, (size_t)(f->chunk_rows * dim) * sizeof(float), (void **)&f->gather,
                               "gathered feature rows")) ||
            (bytes && (st = upload_widened(b, f->dense, host, dtype, n, dim))))
            goto fail;
    }
    tma_log_debug(COMP, "device %s: features %lld x %lld stored %s (%lld non-zeros)", b->device, (long long)n,
                  (long long)dim, f->sparse ? "as CSR" : "dense", (long long)f->nnz);
    *f_p = f;
    return TMA_OK;
fail:
    feat_free(b, f);
    return st;
}

static void cuda_feat_destroy(tma_gnn_backend_t *b, tma_gnn_feat_t *f)
{
    (void)cudaSetDevice(S(b)->dev);
    (void)cudaStreamSynchronize(S(b)->stream);
    feat_free(b, f);
}

static void cuda_feat_info(const tma_gnn_feat_t *f, tma_gnn_feat_info_t *info_p)
{
    info_p->num_nodes = f->n;
    info_p->dim = f->dim;
    info_p->sparse = f->sparse;
    info_p->nnz_per_row = f->sparse ? (f->n ? (double)f->nnz / (double)f->n : 0.0) : (double)f->dim;
}

static tma_status_t cuda_feat_matmul(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids, const tensor_t *W,
                                     float beta, tensor_t *out)
{
    ENTER(b);
    const int64_t n = out->rows, d = W->cols, dim = f->dim;
    cudaStream_t s = S(b)->stream;
    if (f->sparse) {
        CU(cuk_csr_matmul(s, f->rowptr, f->col, f->val, CI64(ids), n, CF(W), d, beta, F(out)));
        return TMA_OK;
    }
    /* Gathered rows, a chunk at a time, then one sgemm each. */
    for (int64_t r0 = 0; r0 < n; r0 += f->chunk_rows) {
        const int64_t rn = TMA_MIN(f->chunk_rows, n - r0);
        CU(cuk_gather_rows(s, f->dense, CI64(ids) + r0, rn, dim, f->gather));
        tma_status_t st = gemm_rm(b, 0, 0, rn, d, dim, 1.0f, f->gather, dim, CF(W), d, beta, F(out) + r0 * d, d);
        if (st != TMA_OK)
            return st;
    }
    return TMA_OK;
}

static tma_status_t cuda_feat_matmul_grad(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                          const tensor_t *dOut, tensor_t *dW)
{
    ENTER(b);
    const int64_t n = dOut->rows, d = dOut->cols, dim = f->dim;
    cudaStream_t s = S(b)->stream;
    if (f->sparse) {
        CU(cuk_csr_matmul_grad(s, f->rowptr, f->col, f->val, CI64(ids), n, CF(dOut), d, F(dW), dim));
        return TMA_OK;
    }
    if (n == 0) {
        CU(cudaMemsetAsync(dW->data, 0, (size_t)(dim * d) * sizeof(float), s));
        return TMA_OK;
    }
    for (int64_t r0 = 0; r0 < n; r0 += f->chunk_rows) {
        const int64_t rn = TMA_MIN(f->chunk_rows, n - r0);
        CU(cuk_gather_rows(s, f->dense, CI64(ids) + r0, rn, dim, f->gather));
        /* dW (+)= gathered^T dOut[r0 .. r0 + rn) */
        tma_status_t st = gemm_rm(b, 1, 0, dim, d, rn, 1.0f, f->gather, dim, CF(dOut) + r0 * d, d,
                                  r0 == 0 ? 0.0f : 1.0f, F(dW), d);
        if (st != TMA_OK)
            return st;
    }
    return TMA_OK;
}

static tma_status_t cuda_feat_aggregate(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                        const tma_gnn_block_t *blk, tensor_t *out)
{
    ENTER(b);
    cudaStream_t s = S(b)->stream;
    if (f->sparse)
        CU(cuk_csr_aggregate(s, f->rowptr, f->col, f->val, CI64(ids), CI32(&blk->indptr), CI32(&blk->indices),
                             CF(&blk->weights), blk->num_dst, f->dim, F(out)));
    else
        CU(cuk_spmm(s, &S(b)->sc, CI32(&blk->indptr), CI32(&blk->indices), CF(&blk->weights), CI64(ids), f->dense,
                    blk->num_dst, f->dim, blk->num_edges, F(out)));
    return TMA_OK;
}

/* ------------------------------------------------------------------ the GPUs */

/* The module's probe (cuda_module.c): 0 on any error, as "no GPU". */
extern "C" int cuda_device_count(void);

int cuda_device_count(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return count;
}

/* ------------------------------------------------------------------ the table */

/* C linkage, and extern: a namespace-scope const is internal in C++. */
extern "C" const tma_gnn_ops_t tma_gnn_cuda_ops;

const tma_gnn_ops_t tma_gnn_cuda_ops = {
    .name = "cuda",
    .host_addressable = 0,
    .init = cuda_init,
    .fini = cuda_fini,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .fill = cuda_fill,
    .matmul = cuda_matmul,
    .add_bias = cuda_add_bias,
    .colsum = cuda_colsum,
    .spmm = cuda_spmm,
    .spmm_t = cuda_spmm_t,
    .prelu_bwd = cuda_prelu_bwd,
    .ln_prelu_fwd = cuda_ln_prelu_fwd,
    .ln_prelu_bwd = cuda_ln_prelu_bwd,
    .bias_prelu = cuda_bias_prelu,
    .pair_mul = cuda_pair_mul,
    .pair_mul_bwd = cuda_pair_mul_bwd,
    .bce_logits = cuda_bce_logits,
    .sumsq = cuda_sumsq,
    .scale = cuda_scale,
    .dropout = cuda_dropout,
    .adam = cuda_adam,
    .feat_create = cuda_feat_create,
    .feat_destroy = cuda_feat_destroy,
    .feat_info = cuda_feat_info,
    .feat_matmul = cuda_feat_matmul,
    .feat_matmul_grad = cuda_feat_matmul_grad,
    .feat_aggregate = cuda_feat_aggregate,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .wait = cuda_wait,
    .mrr_sum = cuda_mrr_sum,
    .rgcn_aggregate = cuda_rgcn_aggregate,
    .rgcn_aggregate_bwd = cuda_rgcn_aggregate_bwd,
    .distmult = cuda_distmult,
    .distmult_bwd = cuda_distmult_bwd,
    .gat_scores = cuda_gat_scores,
    .gat_aggregate = cuda_gat_aggregate,
    .gat_aggregate_bwd = cuda_gat_aggregate_bwd,
    .rows_gather = cuda_rows_gather,
    .rows_scatter = cuda_rows_scatter,
};
