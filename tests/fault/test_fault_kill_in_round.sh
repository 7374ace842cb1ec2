#!/bin/bash
# test_fault_kill_in_round.sh (scenario 2): workers die inside an aggregation
# round: one just before sending its weights (crash=send@3), one after sending
# them, before the global weights came back (crash=recv@5).  Each round
# completes with the survivors within the round deadline, and the job goes on.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1
write_job j.json kr '"fault": {"on_failure": "continue", "lease_ttl": 3, "round_deadline": 8, "start_timeout": 20}'
start_coordinator coord.log --config j.json --run-dir run
start_worker w0.log --job kr --name w0
TMA_FAULT=crash=send@3 start_worker w1.log --job kr --name w1
TMA_FAULT=crash=recv@5 start_worker w2.log --job kr --name w2
finish_job coord.log w0.log w1.log w2.log
check_run run >/dev/null || fail "run folder invalid"
grep -q "injected crash at send in round 3" w1.log || fail "w1 did not crash where asked"
grep -q "injected crash at recv in round 5" w2.log || fail "w2 did not crash where asked"
# Round 3: two owners' weights, one missed, completed well before the deadline.
rounds_check run "len(R[3]['workers']) == 2 and len(R[3]['missed']) == 1 and R[3]['agg_seconds'] < 8" \
  "round 3 did not complete with the survivors" || fail "round 3"
# Round 5: w2's weights arrived before it died; from round 6 on only w0 trains.
rounds_check run "len(R[5]['workers']) == 2 and all(len(r['workers']) == 1 for r in R[7:])" \
  "rounds after the second crash" || fail "rounds 5+"
rounds_check run "len(R) >= 10" "the job stopped early" || fail "too few rounds"
echo "crash before sending (round 3) and after sending (round 5): rounds completed with the survivors"
