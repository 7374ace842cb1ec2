# bench/gpu/: the cuBLAS sgemm peak that tests/gpu/run.sh sets the CUDA backend's
# dense products against (built by `make bench` in a CUDA build).
EXTRA_DIST += bench/gpu/bench_sgemm.c
if HAVE_CUDA
EXTRA_PROGRAMS += bench/gpu/bench_sgemm
bench_gpu_bench_sgemm_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
# cuBLAS itself, linked directly (the backend reaches it through tma-cuda.so).
bench_gpu_bench_sgemm_LDADD = $(TMA_BENCH_LDADD) $(CUDA_LIBS)
endif
