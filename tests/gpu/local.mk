# tests/gpu/: the CUDA backend.  test_cuda_nodev and test_cuda_cli run on every
# machine (they check the no-GPU answers, or the GPU when there is one); the
# parity tests skip (77) without a GPU.  tests/gpu/run.sh runs them all on a GPU
# machine, with the GPU benchmark.
check_LIBRARIES += tests/gpu/libgpu_testutil.a
tests_gpu_libgpu_testutil_a_SOURCES = tests/gpu/gpu_testutil.c tests/gpu/gpu_testutil.h
TMA_GPU_TEST_LDADD = tests/gpu/libgpu_testutil.a $(TMA_GNN_TEST_LDADD)

check_PROGRAMS += tests/gpu/test_cuda_nodev
tests_gpu_test_cuda_nodev_LDADD = $(TMA_GPU_TEST_LDADD)
TESTS += tests/gpu/test_cuda_nodev

check_PROGRAMS += tests/gpu/test_cuda_step
tests_gpu_test_cuda_step_LDADD = $(TMA_GPU_TEST_LDADD)
TESTS += tests/gpu/test_cuda_step

dist_check_SCRIPTS += tests/gpu/test_cuda_ops.sh tests/gpu/test_cuda_cli.sh tests/gpu/test_cuda_roles.sh \
	tests/gpu/test_cuda_hetero.sh
TESTS += tests/gpu/test_cuda_ops.sh tests/gpu/test_cuda_cli.sh tests/gpu/test_cuda_roles.sh tests/gpu/test_cuda_hetero.sh
EXTRA_DIST += tests/gpu/run.sh tests/gpu/prepare.sh
