# bench/: benchmark programs (built by `make bench`, not by `make` or `make check`).
EXTRA_PROGRAMS += bench/bench_partition
bench_bench_partition_SOURCES = bench/bench_partition.c
bench_bench_partition_LDADD = $(TMA_ALL_LIBS) $(TMA_DEP_LIBS)
CLEANFILES += bench/bench_partition
bench: bench/bench_partition
.PHONY: bench
EXTRA_DIST += bench/partition_quality.sh bench/partition_speed.sh bench/gen_rmat_100m.sh bench/scale_rmat.sh
EXTRA_DIST += bench/paper/run.sh bench/paper/tables.py bench/fault/detect.sh bench/graph/ooc.sh bench/graph/feat_dtype.sh bench/prom_scrape.sh
