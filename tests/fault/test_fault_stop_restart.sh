#!/bin/bash
# test_fault_stop_restart.sh (issue 13, item 10): the coordinator is killed
# right after it set `stop`, before result.json is written.  A restarted
# coordinator (tma coordinator --job NAME) must finish the job: write
# result.json, with no round added after the stop (the workers are gone).
source "$TMA_SRCDIR/tests/lib.sh"
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
cd "$TMP_ROOT"
etcd_start 1
fault_graph
TRAIN=5 INTERVAL=1 write_job j.json sr '"fault": {"lease_ttl": 3, "round_deadline": 4, "start_timeout": 20}'
on_put stopped sr/stop 'reason' KILL @first.pid
start_coordinator c1.log --config j.json --run-dir run
first=$COORD_PID
echo "$first" > first.pid
for i in 0 1 2; do start_worker w$i.log --job sr --name w$i; done
logs=(c1.log c2.log w0.log w1.log w2.log)
wait_for 60 test -e stopped || { dump_logs "${logs[@]}"; fail "stop was never set"; }
wait_exit "$first" 10 >/dev/null
[ ! -e run/result.json ] || hard "the coordinator wrote result.json before it could be killed: nothing to test"
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
