/*
 * gpu_testutil.h: the GPU tests' skip decision.  A test that needs the CUDA
 * backend calls gpu_test_require(): it returns when a "cuda" backend can be
 * created here and otherwise exits 77 (skipped) saying why: this build has
 * no CUDA backend, or the machine has no usable GPU.  test_cuda_nodev checks
 * on every machine that this decision is the right one.
 */
#ifndef TMA_GPU_TESTUTIL_H
#define TMA_GPU_TESTUTIL_H

#include "tma_gnn.h"

/* 1 when the machine shows an NVIDIA GPU to this process, judged without
 * the CUDA runtime (the device files of the NVIDIA driver), so the tests
 * can check the backend's own answer against it. */
int gpu_test_gpu_visible(void);
/* Returns when the "cuda" backend starts here; else exits 77 with the reason. */
void gpu_test_require(void);

#endif
