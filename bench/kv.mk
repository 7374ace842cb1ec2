# bench/: etcd client latency (bench/bench_kv.sh runs it next to etcdctl and curl); built by `make bench`.
EXTRA_PROGRAMS += bench/bench_kv
bench_bench_kv_SOURCES = bench/bench_kv.c
bench_bench_kv_LDADD = $(TMA_ALL_LIBS) $(TMA_DEP_LIBS)
CLEANFILES += bench/bench_kv
bench: bench/bench_kv
EXTRA_DIST += bench/bench_kv.sh

# The size of TensorBoard event files per 1,000 rounds (docs/benchmarks.md); `make bench`.
EXTRA_PROGRAMS += bench/bench_tfevents
bench_bench_tfevents_SOURCES = bench/bench_tfevents.c
bench_bench_tfevents_LDADD = $(TMA_ALL_LIBS) $(TMA_DEP_LIBS)
CLEANFILES += bench/bench_tfevents
bench: bench/bench_tfevents
