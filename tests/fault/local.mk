check_PROGRAMS += tests/fault/test_fault_unit
tests_fault_test_fault_unit_LDADD = $(TMA_TEST_LDADD)
TESTS += tests/fault/test_fault_unit
EXTRA_DIST += tests/fault/fault_lib.sh
TESTS += tests/fault/test_fault_kill_worker.sh
TESTS += tests/fault/test_fault_kill_in_round.sh tests/fault/test_fault_pause.sh \
	tests/fault/test_fault_never_starts.sh tests/fault/test_fault_join.sh tests/fault/test_fault_slow.sh
