#!/bin/bash
# test_fault_slow.sh (scenario 9): a slow worker (an injected delay after every
# step) does not hold the rounds back: they happen on time, and its step
# counts show it (far fewer steps a round than the others).
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1
INTERVAL=2 TRAIN=14 write_job j.json ks '"fault": {"lease_ttl": 3, "round_deadline": 10, "start_timeout": 20}'
start_coordinator coord.log --config j.json --run-dir run
start_worker w0.log --job ks --name w0
start_worker w1.log --job ks --name w1
TMA_FAULT=delay_step=0.2 start_worker w2.log --job ks --name slow
finish_job coord.log w0.log w1.log w2.log
check_run run >/dev/null || fail "run folder invalid"
slow=$(sed -n 's/.*joined job ks as member \([0-9]*\).*/\1/p' w2.log | head -n1)
# On time: round t closes within a second of t * 2 s (aggregation waits at most one slow step).
rounds_check run "all(abs(r['time'] - 2 * r['round']) < 1.5 for r in R[1:]) and len(R) == 8" \
  "rounds were late" || fail "rounds not on time"
rounds_check run "all(len(r['workers']) == 3 for r in R[1:])" "the slow worker missed rounds" || fail "missed"
rounds_check run "all([w['steps'] for w in r['workers'] if w['id'] == $slow][0] * 3 < min(w['steps'] for w in r['workers'] if w['id'] != $slow) for r in R[1:])" \
  "the slow worker's step counts do not show it" || fail "steps"
echo "rounds on time with a worker 0.2 s slower a step; its steps per round show it"
