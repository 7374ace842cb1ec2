check_PROGRAMS += tests/graph/test_tmag
tests_graph_test_tmag_LDADD = $(TMA_TEST_LDADD)
TESTS += tests/graph/test_tmag
