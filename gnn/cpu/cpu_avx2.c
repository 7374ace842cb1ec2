/*
 * cpu_avx2.c: the CPU kernels compiled for AVX2 + FMA (x86-64-v3); chosen at
 * run time by the registry when the processor has both.
 */
#include "gnn_backend.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma")
#elif defined(__x86_64__) && defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#define CPU_CLANG_ATTRIBUTE_PUSHED 1
#endif

/* This build runs the own AVX-512 products where the processor has them. */
#define CPU_OWN_GEMM 1
#define CPU_OPS_NAME tma_gnn_cpu_avx2_ops
#define CPU_OPS_LABEL "cpu"
#include "cpu_kernels.c"

#ifdef CPU_CLANG_ATTRIBUTE_PUSHED
#pragma clang attribute pop
#endif
