# tests/worker/: the worker's private pieces (worker_int.h) in one process.
WORKER_UNIT_TESTS = tests/worker/test_shards tests/worker/test_evalrank
check_PROGRAMS += $(WORKER_UNIT_TESTS)
TESTS += $(WORKER_UNIT_TESTS)
