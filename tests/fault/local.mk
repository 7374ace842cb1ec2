check_PROGRAMS += tests/fault/test_fault_unit
TESTS += tests/fault/test_fault_unit
EXTRA_DIST += tests/fault/fault_lib.sh
TESTS += tests/fault/test_fault_kill_worker.sh
TESTS += tests/fault/test_fault_kill_in_round.sh tests/fault/test_fault_pause.sh \
	tests/fault/test_fault_never_starts.sh tests/fault/test_fault_join.sh tests/fault/test_fault_slow.sh
TESTS += tests/fault/test_fault_coordinator.sh
TESTS += tests/fault/test_fault_etcd.sh
TESTS += tests/fault/test_fault_partition.sh
TESTS += tests/fault/test_fault_chaos.sh
TESTS += tests/fault/test_fault_checkpoint.sh tests/fault/test_fault_budget.sh tests/fault/test_fault_fenced.sh \
	tests/fault/test_fault_disk.sh tests/fault/test_fault_stop_restart.sh
# the scripts ship in the release tarball (make distcheck runs them)
FAULT_SCRIPT_FILES = tests/fault/test_fault_kill_worker.sh tests/fault/test_fault_kill_in_round.sh \
	tests/fault/test_fault_pause.sh tests/fault/test_fault_never_starts.sh tests/fault/test_fault_join.sh \
	tests/fault/test_fault_slow.sh tests/fault/test_fault_coordinator.sh tests/fault/test_fault_etcd.sh \
	tests/fault/test_fault_partition.sh tests/fault/test_fault_chaos.sh tests/fault/test_fault_checkpoint.sh \
	tests/fault/test_fault_budget.sh tests/fault/test_fault_fenced.sh tests/fault/test_fault_disk.sh \
	tests/fault/test_fault_stop_restart.sh
EXTRA_DIST += $(FAULT_SCRIPT_FILES)
# issue 13, the worker's side of failover
FAULT_WORKER_TESTS = tests/fault/test_fault_round_again.sh tests/fault/test_fault_start_stop.sh \
	tests/fault/test_fault_bad_keys.sh tests/fault/test_fault_poison.sh tests/fault/test_fault_many_shards.sh \
	tests/fault/test_fault_unreachable.sh tests/fault/test_fault_etcd_cut.sh tests/fault/test_fault_shard_missing.sh
TESTS += $(FAULT_WORKER_TESTS)
FAULT_SCRIPT_FILES += $(FAULT_WORKER_TESTS)

# 20 chaos runs in a loop (not part of make check: about 11 minutes; figures in docs/faults.md).
check-chaos: all tests/harness.sh
	CHAOS_RUNS=20 TMA_TEST_TIMEOUT=3600 $(top_builddir)/tests/harness.sh $(top_srcdir)/tests/fault/test_fault_chaos.sh
.PHONY: check-chaos
# issue 30, failover that keeps the model (step mode, GGS)
FAULT_MODEL_TESTS = tests/fault/test_fault_step_restart.sh tests/fault/test_fault_ggs_restart.sh \
	tests/fault/test_fault_pause_points.sh tests/fault/test_fault_bad_state.sh tests/fault/test_fault_step_standby.sh \
	tests/fault/test_fault_bad_record.sh tests/fault/test_fault_restart_round0.sh \
	tests/fault/test_fault_etcd_freeze.sh tests/fault/test_fault_etcd_member_step.sh tests/fault/test_fault_ggs_standby.sh \
	tests/fault/test_fault_unleased_record.sh tests/fault/test_fault_shards_lost.sh
TESTS += $(FAULT_MODEL_TESTS)
FAULT_SCRIPT_FILES += $(FAULT_MODEL_TESTS)
# issue 28, a distributed evaluation's failures
FAULT_EVAL_TESTS = tests/fault/test_fault_eval_rank.sh tests/fault/test_fault_lost_start.sh \
	tests/fault/test_fault_lost_rows.sh
TESTS += $(FAULT_EVAL_TESTS)
FAULT_SCRIPT_FILES += $(FAULT_EVAL_TESTS)
