#!/bin/bash
# test_fault_pause_points.sh (issue 30, item 7): pause=POINT@ROUND stops the
# process at a worker's point (send) and at the coordinator's (aggregate),
# not only at eval: each logs the injected pause, is seen stopped (state T
# in /proc), and once continued the job finishes.  (The unit test checks
# every point for crash and pause; this one checks that the points are
# reached in real processes.)
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

stopped() { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = T ]; }
# paused LOG PID POINT ROUND: PID logged the pause at POINT in ROUND and is stopped; continue it.
paused() {
  wait_for 60 grep -q "injected pause at $3 in round $4" "$1" || { dump_logs "$1"; fail "no pause at $3 in round $4"; }
  wait_for 10 stopped "$2" || fail "the process that paused at $3 is not stopped"
  kill -CONT "$2"
}

STEPS=10 ROUNDS=4 step_job j.json pp '"fault": {"lease_ttl": 30, "round_deadline": 30, "start_timeout": 20}'
TMA_FAULT=pause=aggregate@3 start_coordinator c.log --config j.json --run-dir run
coord=$COORD_PID
TMA_FAULT=pause=send@2 start_worker w0.log --job pp --name w0
w0=$!
for i in 1 2; do start_worker w$i.log --job pp --name w$i; done
paused w0.log "$w0" send 2
paused c.log "$coord" aggregate 3
finish_job c.log w0.log w1.log w2.log
check_run run >/dev/null || { dump_logs c.log; fail "run folder invalid"; }
rounds_check run "len(R) == 5 and all(len(r['workers']) == 3 for r in R[1:])" "a round lacked a worker" || fail "rounds"
echo "pause=send@2 stopped a worker and pause=aggregate@3 the coordinator; continued, the job finished"
