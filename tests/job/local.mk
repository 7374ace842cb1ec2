check_PROGRAMS += tests/job/test_job_unit
tests_job_test_job_unit_LDADD = $(TMA_TEST_LDADD)
TESTS += tests/job/test_job_unit
check_PROGRAMS += tests/job/test_job_view
tests_job_test_job_view_LDADD = $(TMA_TEST_LDADD)
TESTS += tests/job/test_job_view
