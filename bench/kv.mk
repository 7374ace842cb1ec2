# bench/: etcd client latency (bench/bench_kv.sh runs it next to etcdctl and curl).
EXTRA_PROGRAMS += bench/bench_kv
bench_bench_kv_LDADD = $(TMA_BENCH_LDADD)
EXTRA_DIST += bench/bench_kv.sh

# The size of TensorBoard event files per 1,000 rounds (docs/benchmarks.md).
EXTRA_PROGRAMS += bench/bench_tfevents
bench_bench_tfevents_LDADD = $(TMA_BENCH_LDADD)
