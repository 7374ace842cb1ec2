check_PROGRAMS += tests/job/test_job_unit
TESTS += tests/job/test_job_unit
check_PROGRAMS += tests/job/test_job_view
TESTS += tests/job/test_job_view
# The run folder's files (job/run.c): metrics lines whole or not at all.
check_PROGRAMS += tests/job/test_runfiles
TESTS += tests/job/test_runfiles
# The meta block's and the ready record's fuzz target, built with clang and run for 20 s.
dist_check_SCRIPTS += tests/job/test_fuzz_wire.sh
TESTS += tests/job/test_fuzz_wire.sh
EXTRA_DIST += tests/fuzz/fuzz_job_wire.c tests/fuzz/corpus/job
