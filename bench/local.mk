# bench/: benchmark programs, built by `make bench`, not by `make` or `make check`.
# Each bench .mk adds its programs to EXTRA_PROGRAMS (source: the program's
# name with .c) with TMA_BENCH_LDADD; Makefile.am makes `bench` build them all.
TMA_BENCH_LDADD = $(TMA_ALL_LIBS) $(TMA_DEP_LIBS)
CLEANFILES += $(EXTRA_PROGRAMS)
.PHONY: bench
EXTRA_PROGRAMS += bench/bench_partition
bench_bench_partition_LDADD = $(TMA_BENCH_LDADD)
EXTRA_DIST += bench/partition_quality.sh bench/partition_speed.sh bench/gen_rmat_100m.sh bench/scale_rmat.sh
EXTRA_DIST += bench/phase_lib.sh bench/eval_ranks.sh
EXTRA_DIST += bench/paper/run.sh bench/paper/tables.py bench/fault/detect.sh bench/graph/ooc.sh bench/graph/feat_dtype.sh bench/prom_scrape.sh
