# bench/kv: etcd client latency (bench/kv_bench.sh runs it next to etcdctl and curl).
noinst_PROGRAMS += bench/kv_bench
bench_kv_bench_SOURCES = bench/kv_bench.c
bench_kv_bench_LDADD = $(TMA_ALL_LIBS) $(TMA_DEP_LIBS)
EXTRA_DIST += bench/kv_bench.sh
