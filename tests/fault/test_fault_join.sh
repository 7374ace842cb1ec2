#!/bin/bash
# test_fault_join.sh (scenario 5): new workers join a running job.  continue:
# a worker dies, its shard is orphaned, and a newcomer takes it.  reassign
# (no backup): the dead worker's shard goes to a live worker, which then owns
# two; a newcomer takes one of them over.  The newcomers start from the
# current global weights.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1
for pol in continue reassign; do
  WORKER_PIDS=()
  TRAIN=22 write_job $pol.json j$pol "\"fault\": {\"on_failure\": \"$pol\", \"lease_ttl\": 3, \"round_deadline\": 5, \"start_timeout\": 20}"
  start_job $pol.json j$pol $pol-
  wait_round $pol-run 3 || { dump_logs $pol-coord.log; fail "$pol: no round 3"; }
  kill -KILL "${WORKER_PIDS[0]}"
  wait_for 20 grep -q "is gone" $pol-coord.log || fail "$pol: the dead worker was not declared lost"
  start_worker $pol-new.log --job j$pol --name newcomer
  wait_for 20 grep -q "training on 1 shard" $pol-new.log || { dump_logs $pol-coord.log $pol-new.log; fail "$pol: the newcomer never trained"; }
  grep -q "training on 1 shard(s) from global round [1-9]" $pol-new.log ||
    { dump_logs $pol-new.log; fail "$pol: the newcomer did not start from the current global weights"; }
  finish_job $pol-coord.log $pol-w1.log $pol-w2.log $pol-new.log
  check_run $pol-run >/dev/null || fail "$pol: run folder invalid"
  rounds_check $pol-run "R[-1]['owners'].count(-1) == 0 and len(set(R[-1]['owners'])) == 3 and any(m['reason'] == 'joined' for r in R for m in r['moves'])" \
    "$pol: the newcomer did not take a shard" || fail "$pol"
done
rounds_check reassign-run "any(m['reason'] == 'joined' and m['from'] >= 0 for r in R for m in r['moves'])" \
  "reassign: the newcomer did not take a shard from a worker that owned two" || fail "reassign: move"
rounds_check continue-run "any(m['reason'] == 'joined' and m['from'] == -1 for r in R for m in r['moves'])" \
  "continue: the newcomer did not take the orphaned shard" || fail "continue: orphan"
echo "a newcomer took the orphaned shard (continue) and a moved shard (reassign)"
