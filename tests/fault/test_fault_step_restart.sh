#!/bin/bash
# test_fault_step_restart.sh (issue 30, item 1): a step-mode job
# (aggregation.interval_steps, duration.rounds) whose coordinator is killed
# inside round 4 (after the workers sent their weights, before it averaged
# them) and restarted with `tma coordinator --job` once every worker saw its
# connection end.  Each worker holds round 4's weights (no step more) until
# the new coordinator is there, which waits for them before it opens the
# round again: every round counts all three workers, the job reaches the
# same rounds as an undisturbed run of the same seed (and the partial
# weights files a coordinator killed mid-write leaves are removed), and its
# final test MRR is that run's, within 0.005 (the two runs sum the same tensors, but member ids
# are dealt in registration order, so shards may pair with other ids and the
# average adds them in another order: rounding only; a frozen model after
# the restart scores about half).
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

ROUNDS=8
FAULT='"fault": {"lease_ttl": 4, "round_deadline": 5, "start_timeout": 20}'
# The undisturbed run and the faulted one side by side (step mode does not
# depend on timing).
TMA_FAULT=crash=aggregate@4 step_pair s "$FAULT" f-c1.log
first=$FIRST
faulted_workers s
wait_exit "$first" 90 >/dev/null
grep -q "injected crash at aggregate in round 4" f-c1.log || { dump_logs f-c1.log; fail "no injected crash"; }
# What a coordinator killed while writing a checkpoint leaves behind.
touch f-run/checkpoint-r000004-e1.tmaw.tmp.Ab12Cd f-run/best.tmaw.tmp.Ef34Gh
restart_faulted sf
! ls f-run/*.tmaw.tmp.* 2>/dev/null || fail "partial weights files of the dead coordinator were left"
grep -q "took over job sf at round 3" f-c2.log || { dump_logs f-c2.log; fail "did not resume from round 3"; }
rounds_check f-run "len(R) == $ROUNDS + 1 and all(len(r['workers']) == 3 and r['missed'] == [] for r in R[1:])" \
  "a round of the restarted job lacked a worker's weights" || { dump_logs f-c2.log f-w0.log; fail "rounds"; }
rounds_check f-run "R[4]['epoch'] != R[3]['epoch']" "round 4 was not redone by the new coordinator" || fail "round 4"
same_model u-run f-run 0.005 || fail "the model of the faulted run is not the undisturbed one's"
echo "step mode: the restarted coordinator redid round 4 with all three workers and reached round $ROUNDS"
