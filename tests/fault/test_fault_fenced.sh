#!/bin/bash
# test_fault_fenced.sh (issue 13, item 5): a fenced coordinator writes nothing.
# The leader pauses itself (pause=commit@3: SIGSTOP, every thread) the
# moment round 3 is committed, before its evaluation is queued, so round 3
# is pending in etcd at any load.  (It paused at round 3's evaluation
# before, pause=eval@3: an evaluator that fell behind under load skipped
# round 3, and the pause never came.)  A standby takes over once the
# leader's lease lapses and rebuilds metrics.jsonl; then the old leader is
# resumed, queues round 3's evaluation and finds itself fenced.  It must
# stop without writing anything: no metrics/<t> or `best` in etcd, no line
# in metrics.jsonl, no best.tmaw.  The job finishes under the standby with
# every round once and best.tmaw matching result.json.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1
TRAIN=16 INTERVAL=2 write_job j.json fe '"fault": {"lease_ttl": 3, "round_deadline": 4, "start_timeout": 20}'
TMA_FAULT=pause=commit@3 start_coordinator old.log --config j.json --run-dir run
old=$COORD_PID
for i in 0 1 2; do start_worker w$i.log --job fe --name w$i; done
logs=(old.log new.log w0.log w1.log w2.log)
wait_for 20 grep -q "leading job fe" old.log || fail "no leader"
start_coordinator new.log --job fe --standby
new=$COORD_PID
paused() { grep -q "injected pause at commit in round 3" old.log && ps -o stat= -p "$old" | grep -q T; }
wait_for 60 paused || { dump_logs "${logs[@]}"; fail "the leader never paused at round 3's commit"; }
rec=$(etcdctl get /tma/fe/metrics/00000003 --print-value-only)
python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(r["eval"] != "pending")' "$rec" ||
  fail "round 3 was not committed as pending before the pause: $rec"
wait_for 30 grep -q "took over job fe at round 3 " new.log || { dump_logs new.log; fail "the standby did not take over at round 3"; }

kill -CONT "$old"
wait_exit "$old" 30
rc=$?
[ $rc -ne 124 ] || { dump_logs old.log; fail "the fenced coordinator did not stop"; }
[ $rc -ne 0 ] || { dump_logs old.log; fail "the fenced coordinator exited 0"; }
grep -q "fenced" old.log || { dump_logs old.log; fail "the old coordinator does not say it was fenced"; }
rec=$(etcdctl get /tma/fe/metrics/00000003 --print-value-only)
python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(r["eval"] != "pending")' "$rec" ||
  fail "the fenced coordinator rewrote metrics/3 after the takeover: $rec"
COORD_PID=$new
finish_job "${logs[@]}"
check_run run >/dev/null || { dump_logs "${logs[@]}"; fail "run folder invalid"; }
rounds_check run "R[3]['eval'] == 'lost' and R[4]['epoch'] != R[3]['epoch']" \
  "round 3's evaluation was not lost with the old leader, or round 4 not led by the standby" || fail "rounds"
echo "the paused leader was fenced at round 3 and wrote nothing"
