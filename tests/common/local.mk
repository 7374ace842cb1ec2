check_PROGRAMS += tests/common/test_common
tests_common_test_common_LDADD = $(TMA_TEST_LDADD)
TESTS += tests/common/test_common
