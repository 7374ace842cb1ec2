# bench/transport: UCX transport throughput (bench/bench_transport.sh runs it next to ucx_perftest).
noinst_PROGRAMS += bench/bench_transport
bench_bench_transport_LDADD = $(TMA_ALL_LIBS) $(TMA_DEP_LIBS)
EXTRA_DIST += bench/bench_transport.sh bench/bench_transport_cpu.sh
