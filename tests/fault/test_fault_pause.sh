#!/bin/bash
# test_fault_pause.sh (scenario 3): a worker is SIGSTOPped past its lease,
# then SIGCONTed.  It notices it was fenced, drops its state and registers
# again as a new member (which takes its orphaned shard back); its stale
# weights are never averaged: the old member id appears in no round after
# it was lost, and the coordinator refuses anything it still sends.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1
TRAIN=25 write_job j.json kp '"fault": {"on_failure": "continue", "lease_ttl": 3, "round_deadline": 5, "start_timeout": 20}'
start_job j.json kp
victim=${WORKER_PIDS[1]}
wait_round run 3 || { dump_logs coord.log; fail "no round 3"; }
old=$(sed -n 's/.*joined job kp as member \([0-9]*\).*/\1/p' w1.log | head -n1)
kill -STOP "$victim"
wait_for 20 grep -q "member $old is gone" coord.log || { kill -CONT "$victim"; dump_logs coord.log; fail "the paused worker was never declared lost"; }
sleep 1   # stay paused a little past the loss, as a long GC pause would
kill -CONT "$victim"
wait_for 20 grep -q "was fenced" w1.log || { dump_logs w1.log; fail "the worker did not notice it was fenced"; }
wait_for 20 sh -c "grep 'joined job kp as member' w1.log | grep -qv 'member $old '" ||
  { dump_logs w1.log; fail "the fenced worker did not register again"; }
new=$(sed -n 's/.*joined job kp as member \([0-9]*\).*/\1/p' w1.log | tail -n1)
finish_job coord.log w0.log w1.log w2.log
check_run run >/dev/null || fail "run folder invalid"
[ "$new" != "$old" ] || fail "the worker came back under its old id $old"
# Never averaged after the loss: find the round that recorded the loss.
rounds_check run "(lambda L: L is not None and all($old not in [w['id'] for w in r['workers']] for r in R if r['round'] >= L))(next((r['round'] for r in R if $old in r['lost']), None))" \
  "the old member's weights were counted after it was lost" || fail "stale weights counted"
rounds_check run "any($new in [w['id'] for w in r['workers']] for r in R)" \
  "the re-registered member never trained" || fail "no rejoin"
echo "paused member $old was fenced and came back as member $new; its stale weights were never counted"
