#!/bin/bash
# test_fault_restart_round0.sh: a step-mode job whose coordinator dies before
# its evaluator wrote round 0 (pause=eval@0 stops it there; then SIGKILL).
# Round 0's record must be in etcd already, written with the "training"
# state as every later round's is: the coordinator restarted with `--job`
# rebuilds metrics.jsonl with round 0 (its evaluation "lost"), redoes the
# rounds, and ends with the undisturbed run's rounds and test MRR (within
# 0.005: member ids may pair with other shards, so sums differ by rounding).
# Before the fix the restarted run's metrics.jsonl began at round 1 (seen in
# CI under load, when round 0's evaluation had not finished by round 4).
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

ROUNDS=4
FAULT='"fault": {"lease_ttl": 4, "round_deadline": 5, "start_timeout": 20}'
TMA_FAULT=pause=eval@0 step_pair s "$FAULT" f-c1.log
first=$FIRST
faulted_workers s
wait_for 60 grep -q "injected pause at eval in round 0" f-c1.log || { dump_logs f-c1.log; fail "no pause at eval"; }
wait_for 10 eval '[ "$(awk "{print \$3}" /proc/$first/stat 2>/dev/null)" = T ]' || fail "the coordinator is not stopped"
kill -KILL "$first"
wait_exit "$first" 10 >/dev/null
restart_faulted sf
grep -q "took over job sf at round 0" f-c2.log || { dump_logs f-c2.log; fail "did not take over at round 0"; }
rounds_check f-run "[r['round'] for r in R] == list(range($ROUNDS + 1)) and R[0]['eval'] == 'lost'" \
  "round 0 is not the first line, its evaluation lost" || fail "rounds"
rounds_check f-run "all(len(r['workers']) == 3 and r['missed'] == [] for r in R[1:])" \
  "a round of the restarted job lacked a worker's weights" || { dump_logs f-c2.log; fail "rounds"; }
same_model u-run f-run 0.005 || fail "the model of the faulted run is not the undisturbed one's"
echo "the coordinator killed before round 0 was evaluated: its successor kept round 0 and reached round $ROUNDS"
