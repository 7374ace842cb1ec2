check_PROGRAMS += tests/fault/test_fault_unit
tests_fault_test_fault_unit_LDADD = $(TMA_TEST_LDADD)
TESTS += tests/fault/test_fault_unit
