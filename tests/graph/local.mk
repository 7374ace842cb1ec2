check_PROGRAMS += tests/graph/test_tmag
TESTS += tests/graph/test_tmag
check_PROGRAMS += tests/graph/test_import tests/graph/test_gen tests/graph/test_partition tests/graph/test_typed \
	tests/graph/test_npy tests/graph/test_ooc_unit
TESTS += tests/graph/test_import tests/graph/test_gen tests/graph/test_partition tests/graph/test_typed \
	tests/graph/test_npy tests/graph/test_ooc_unit
# The sampler, on the planted-partition graphs of tests/gnn/gnn_testutil.c.
check_PROGRAMS += tests/graph/test_sampler
tests_graph_test_sampler_LDADD = tests/gnn/libgnn_testutil.a $(TMA_TEST_LDADD)
TESTS += tests/graph/test_sampler
dist_check_SCRIPTS += tests/graph/test_bad_input.sh tests/graph/test_cli_graph.sh tests/graph/fuzz_input.sh \
	tests/graph/test_npz_formats.sh tests/graph/test_ogb_split.sh tests/graph/test_typed_cli.sh tests/graph/test_ooc.sh \
	tests/graph/test_feat_dtype.sh tests/graph/test_clusterer.sh
TESTS += tests/graph/test_bad_input.sh tests/graph/test_cli_graph.sh tests/graph/fuzz_input.sh \
	tests/graph/test_npz_formats.sh tests/graph/test_ogb_split.sh tests/graph/test_typed_cli.sh tests/graph/test_ooc.sh \
	tests/graph/test_feat_dtype.sh tests/graph/test_clusterer.sh
EXTRA_DIST += tests/graph/bad tests/graph/data tests/graph/make_formats.py tests/fuzz/fuzz_graph_input.c \
	tests/fuzz/corpus/graph tests/graph/ogb_fixture.py

# The optional datasets folder (configure --with-datasets=DIR): the importers'
# counts, dims, classes and homophily on the real datasets.  Not part of make
# check; skips when the folder is missing.
check-datasets: all tests/harness.sh tests/graph/test_import
	@rc=0; $(top_builddir)/tests/harness.sh tests/graph/test_import --datasets || rc=$$?; \
	if test $$rc -eq 77; then echo "SKIP: check-datasets: no datasets folder at $(TMA_DATASETS)"; \
	elif test $$rc -ne 0; then echo "FAIL: check-datasets"; exit $$rc; else echo "PASS: check-datasets"; fi
.PHONY: check-datasets
