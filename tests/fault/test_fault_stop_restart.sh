#!/bin/bash
# test_fault_stop_restart.sh (issue 13, item 10): the coordinator is killed
# right after it set `stop`, before result.json is written (the injection
# point crash=stop: a watch that killed it from outside lost the race to
# result.json on a fast machine).  A restarted coordinator (tma coordinator
# --job NAME) must finish the job: write result.json, with no round added
# after the stop (the workers are gone).
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1
TRAIN=5 INTERVAL=1 write_job j.json sr '"fault": {"lease_ttl": 3, "round_deadline": 4, "start_timeout": 20}'
TMA_FAULT=crash=stop@* start_coordinator c1.log --config j.json --run-dir run
first=$COORD_PID
for i in 0 1 2; do start_worker w$i.log --job sr --name w$i; done
logs=(c1.log c2.log w0.log w1.log w2.log)
wait_exit "$first" 60; rc=$?
[ "$rc" != 124 ] || { dump_logs "${logs[@]}"; fail "the coordinator did not reach the stop point in 60 s"; }
[ "$rc" = 137 ] || { dump_logs "${logs[@]}"; fail "the coordinator exited with $rc, not killed at stop"; }
grep -q "injected crash at stop" c1.log || { dump_logs c1.log; fail "the coordinator did not die at the stop point"; }
[ -n "$(etcdctl get /tma/sr/stop --print-value-only)" ] || fail "stop is not set in etcd"
[ ! -e run/result.json ] || fail "result.json was written before the crash point"
last=$(etcdctl get /tma/sr/state --print-value-only | python3 -c 'import json,sys; print(json.load(sys.stdin)["round"])')
start_coordinator c2.log --job sr
finish_job "${logs[@]}"
check_run run >/dev/null || { dump_logs "${logs[@]}"; fail "run folder invalid"; }
rounds_check run "R[-1]['round'] == $last" "a round was added after the stop (the last one before it was $last)" || fail "rounds"
[ "$(json run/result.json 'd["stopped"]')" = time ] || fail "result.json: stopped is $(json run/result.json 'd["stopped"]'), not time"
[ "$(json run/result.json 'd["rounds"]')" = "$last" ] || fail "result.json counts $(json run/result.json 'd["rounds"]') rounds, not $last"
phase=$(etcdctl get /tma/sr/state --print-value-only | python3 -c 'import json,sys; print(json.load(sys.stdin)["phase"])')
[ "$phase" = done ] || fail "the final state is $phase, not done"
echo "killed after stop at round $last; the restart finished the job without a new round"
