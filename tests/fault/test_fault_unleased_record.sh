#!/bin/bash
# test_fault_unleased_record.sh (issue 30, found by the chaos loop): the
# leader of a step-mode job is SIGKILLed after round 3, and right after, its
# `coordinator` record is overwritten by a stray writer (a plain put, which
# binds the key to no lease).  No lease will ever lapse to remove that key:
# before, the standby waiting to take over waited for ever (and a restarted
# `tma coordinator --job` gave up with "another coordinator is running").
# A record bound to no lease for longer than the lease TTL (and 2 s) is
# nobody's: the standby removes it (guarded by its revision), leads, takes
# over from `state` and the job reaches all its rounds, all three workers in
# its last, and a test MRR within 0.01 of an undisturbed run of the same
# seed (the round in flight at the kill is redone; 0 apart when measured).
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

export ROUNDS=14
FAULT='"fault": {"lease_ttl": 3, "round_deadline": 5, "start_timeout": 20}'
step_pair s "$FAULT" f-c1.log
first=$FIRST
# 20 ms after each step (no effect on the model): the kill lands mid-job.
WORKER_FAULT=delay_step=0.02 faulted_workers s
wait_for 20 grep -q "leading job sf" f-c1.log || fail "no leader"
start_coordinator f-c2.log --job sf --standby
standby=$COORD_PID
wait_for 20 grep -q "standing by" f-c2.log || { dump_logs f-c2.log; fail "the standby did not stand by"; }
wait_round f-run 3 || { dump_logs f-c1.log; fail "no round 3"; }
kill -KILL "$first"
etcdctl put /tma/sf/coordinator '{"damaged": true}' >/dev/null || hard "etcdctl put"
wait_exit "$first" 10 >/dev/null
wait_for 40 grep -q "removed it to lead the job" f-c2.log ||
  { dump_logs f-c2.log; fail "the standby did not remove the record bound to no lease"; }
wait_for 30 grep -q "took over job sf" f-c2.log || { dump_logs f-c2.log; fail "the standby did not take over"; }
finish_pair "$standby"
rounds_check f-run "len(R) == $ROUNDS + 1 and all(len(r['workers']) == 3 for r in R[-3:])" \
  "the job did not end with all three workers" || { dump_logs f-c2.log f-w0.log; fail "rounds"; }
same_model u-run f-run 0.01 || fail "the final model is far from the undisturbed run's"
echo "a coordinator record bound to no lease was removed by the standby, which led the job to its end"
