# bench/transport: UCX transport throughput (bench/transport_bw.sh runs it next to ucx_perftest).
noinst_PROGRAMS += bench/transport_bw
bench_transport_bw_LDADD = $(TMA_ALL_LIBS) $(TMA_DEP_LIBS)
EXTRA_DIST += bench/transport_bw.sh
