#!/bin/bash
# test_fault_round_again.sh (issue 13, item 4): a round raised again by a new
# coordinator gets the workers' weights.  The coordinator is killed inside
# round 3 after the workers sent their weights (crash=aggregate); the state
# says round 2, so the restarted coordinator raises round 3 again.  A round
# is (epoch, round) on the worker side: every worker sends round 3 again to
# the new coordinator, so it completes with all three, nobody missed.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

TRAIN=12 write_job j.json ra '"fault": {"lease_ttl": 3, "round_deadline": 5, "start_timeout": 20}'
TMA_FAULT=crash=aggregate@3 start_coordinator c1.log --config j.json --run-dir run
first=$COORD_PID
for i in 0 1 2; do start_worker w$i.log --job ra --name w$i; done
wait_exit "$first" 60 >/dev/null
grep -q "injected crash at aggregate in round 3" c1.log || { dump_logs c1.log; fail "no injected crash"; }
start=$SECONDS
start_coordinator c2.log --job ra
finish_job c2.log w0.log w1.log w2.log
(( SECONDS - start < 90 )) || fail "the resumed job took $((SECONDS - start)) s"
grep -q "took over job ra at round 2" c2.log || { dump_logs c2.log; fail "did not resume from round 2"; }
check_run run >/dev/null || { dump_logs c2.log; fail "run folder invalid"; }
rounds_check run "R[3]['epoch'] != R[2]['epoch'] and len(R[3]['workers']) == 3 and R[3]['missed'] == []" \
  "round 3, raised again by the new coordinator, did not get every worker's weights" ||
  { dump_logs c2.log w0.log; fail "round 3 raised again got no weights"; }
rounds_check run "all(len(r['workers']) == 3 for r in R[1:])" "a round lacked a worker" || fail "rounds"
echo "round 3 raised again under a new epoch got the weights of all three workers"
