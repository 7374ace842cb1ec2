# tests/job/: the pure parts of job/ (records, meta block, keys, variants,
# configs), the job view against a real etcd, and the run folder's files
# (job/run.c: metrics lines whole or not at all).
JOB_UNIT_TESTS = tests/job/test_job_unit tests/job/test_job_view tests/job/test_runfiles
check_PROGRAMS += $(JOB_UNIT_TESTS)
TESTS += $(JOB_UNIT_TESTS)
# The meta block's and the ready record's fuzz target, built with clang and run for 20 s.
dist_check_SCRIPTS += tests/job/test_fuzz_wire.sh
TESTS += tests/job/test_fuzz_wire.sh
EXTRA_DIST += tests/fuzz/fuzz_job_wire.c tests/fuzz/corpus/job
