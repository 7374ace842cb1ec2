# bench/transport: UCX transport throughput (bench/bench_transport.sh runs it next to ucx_perftest).
EXTRA_PROGRAMS += bench/bench_transport
bench_bench_transport_LDADD = $(TMA_BENCH_LDADD)
EXTRA_DIST += bench/bench_transport.sh bench/bench_transport_cpu.sh bench/transport_lib.sh
# An LD_PRELOAD library for ucx_perftest (see bench/perftest_fill.c): a plain
# shared object, built here because the project does not use libtool.  Built
# without the sanitizer flags: it is preloaded into an uninstrumented program.
bench: bench/perftest_fill.so
CLEANFILES += bench/perftest_fill.so
EXTRA_DIST += bench/perftest_fill.c bench/transport_nocrc.patch bench/transport_experiment.patch
bench/perftest_fill.so: bench/perftest_fill.c
	@$(MKDIR_P) bench
	$(AM_V_CC)$(CC) -std=gnu11 -O2 $(WARN_CFLAGS) -fPIC -shared -o $@ $(srcdir)/bench/perftest_fill.c -ldl
# What the CRC costs plain UCP, and the CRC fused into UCX's copies (bench/bench_ucx_crc.sh).
EXTRA_PROGRAMS += bench/bench_ucx_crc
bench_bench_ucx_crc_LDADD = $(TMA_BENCH_LDADD)
EXTRA_DIST += bench/bench_ucx_crc.sh
