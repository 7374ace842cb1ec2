/*
 * bench_sgemm.c: the cuBLAS FP32 sgemm rate on large squares (no TF32:
 * the rate the CUDA backend's dense products can reach, since it keeps
 * CUBLAS_DEFAULT_MATH for parity with the CPU).  Prints one JSON object:
 * {"device": name, "sizes": [...], "tflops": [...], "peak_tflops": best}.
 *
 *   bench_sgemm [--device N] [--sizes 4096,8192] [--reps R]
 *
 * Each size: two warm-up products, then R timed ones between CUDA events;
 * the rate is 2 n^3 R / time.  Inputs are random (rates on zeros are
 * higher), filled on the device.
 */
#include "tma_common.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "bench_sgemm: %s failed: %s\n", #call, cudaGetErrorString(e_));        \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)
#define BL(call)                                                                                   \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "bench_sgemm: %s failed: cuBLAS status %d\n", #call, (int)s_);         \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    int64_t dev = 0, reps = 10;
    const char *sizes_arg = "4096,8192";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--device") == 0 && tma_parse_i64(argv[i + 1], &dev) == 0)
            continue;
        if (strcmp(argv[i], "--reps") == 0 && tma_parse_i64(argv[i + 1], &reps) == 0 && reps > 0)
            continue;
        if (strcmp(argv[i], "--sizes") == 0) {
            sizes_arg = argv[i + 1];
            continue;
        }
        fprintf(stderr, "usage: bench_sgemm [--device N] [--sizes 4096,8192] [--reps R]\n");
        return 2;
    }
    if (argc % 2 == 0) {
        fprintf(stderr, "usage: bench_sgemm [--device N] [--sizes 4096,8192] [--reps R]\n");
        return 2;
    }
    int64_t sizes[8];
    int nsizes = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", sizes_arg);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && nsizes < 8; t = strtok_r(NULL, ",", &save)) {
        if (tma_parse_i64(t, &sizes[nsizes]) != 0 || sizes[nsizes] < 64 || sizes[nsizes] > 32768) {
            fprintf(stderr, "bench_sgemm: --sizes: '%s' is not a size in 64..32768\n", t);
            return 2;
        }
        nsizes++;
    }
    CU(cudaSetDevice((int)dev));
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, (int)dev));
    cublasHandle_t h;
    BL(cublasCreate(&h));
    BL(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    double tflops[8], peak = 0;
    for (int s = 0; s < nsizes; s++) {
        const int n = (int)sizes[s];
        const size_t bytes = (size_t)n * (size_t)n * sizeof(float);
        float *host = malloc(bytes), *A, *B, *C;
        if (!host) {
            fprintf(stderr, "bench_sgemm: out of host memory\n");
            return 1;
        }
        tma_rng_t rng;
        tma_rng_seed(&rng, 1, (uint64_t)n);
        for (size_t i = 0; i < (size_t)n * (size_t)n; i++)
            host[i] = (float)(2.0 * tma_rng_uniform(&rng) - 1.0);
        CU(cudaMalloc((void **)&A, bytes));
        CU(cudaMalloc((void **)&B, bytes));
        CU(cudaMalloc((void **)&C, bytes));
        CU(cudaMemcpy(A, host, bytes, cudaMemcpyHostToDevice));
        CU(cudaMemcpy(B, host, bytes, cudaMemcpyHostToDevice));
        free(host);
        const float one = 1.0f, zero = 0.0f;
        for (int w = 0; w < 2; w++)
            BL(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, n, B, n, &zero, C, n));
        CU(cudaEventRecord(e0, 0));
        for (int64_t r = 0; r < reps; r++)
            BL(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, n, B, n, &zero, C, n));
        CU(cudaEventRecord(e1, 0));
        CU(cudaEventSynchronize(e1));
        float ms = 0;
        CU(cudaEventElapsedTime(&ms, e0, e1));
        tflops[s] = 2.0 * n * (double)n * n * (double)reps / (ms * 1e-3) * 1e-12;
        peak = TMA_MAX(peak, tflops[s]);
        CU(cudaFree(A));
        CU(cudaFree(B));
        CU(cudaFree(C));
    }
    printf("{\"device\": \"%s\", \"sizes\": [", prop.name);
    for (int s = 0; s < nsizes; s++)
        printf("%s%lld", s ? ", " : "", (long long)sizes[s]);
    printf("], \"tflops\": [");
    for (int s = 0; s < nsizes; s++)
        printf("%s%.3f", s ? ", " : "", tflops[s]);
    printf("], \"peak_tflops\": %.3f}\n", peak);
    cublasDestroy(h);
    return 0;
}
