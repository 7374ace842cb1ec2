#!/bin/bash
# test_fault_checkpoint.sh (issue 13, item 1): a checkpoint ahead of the state.
# (a) etcd dies while round 3 is collected (one worker is paused so the round
#     waits for its deadline): the coordinator writes round 3's checkpoint but
#     cannot commit `state` (still round 2); it is killed, etcd comes back, and
#     a restarted coordinator must resume from round 2's checkpoint (which the
#     state names) and redo round 3.
# (b) the checkpoint the state names is corrupted before the next restart: the
#     coordinator falls back to the previous one with a warning and finishes.
# Both: every round once and in order, result.json and best.tmaw agree.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1
TRAIN=14 INTERVAL=1 write_job j.json ck '"fault": {"lease_ttl": 5, "round_deadline": 6, "start_timeout": 20}'
# The workers wait for the job's config; the watches are in place before it starts.
for i in 0 1 2; do start_worker w$i.log --job ck --name w$i; done
w2=${WORKER_PIDS[2]}
logs=(c1.log c2.log c3.log w0.log w1.log w2.log)

# (a) w2 pauses once round 2 is committed; etcd dies 0.5 s into round 3.
on_put paused ck/metrics/00000002 '"round":2\b' STOP "$w2"
ON_PUT_DELAY=0.5 on_put etcd-down ck/agg '"round":3\b' KILL "${ETCD_PIDS[0]}"
start_coordinator c1.log --config j.json --run-dir run
first=$COORD_PID
wait_for 60 test -e etcd-down || { dump_logs "${logs[@]}"; fail "(a) round 3 was never raised"; }
ahead() { local f; for f in run/checkpoint*.tmaw; do [ "$(checkpoint_round "$f")" = 3 ] && return 0; done; return 1; }
wait_for 30 ahead || { dump_logs c1.log; fail "(a) no checkpoint of round 3 was written while etcd was down"; }
kill -KILL "$first"
wait_exit "$first" 10 >/dev/null
_etcd_spawn 0
_etcd_wait 0 || hard "etcd did not come back"
kill -CONT "$w2"
# (b) is set up now: c2 is killed the moment it commits round 5.
on_put c2-killed ck/state '"round":5,' KILL @c2.pid
start_coordinator c2.log --job ck
echo "$COORD_PID" > c2.pid
wait_for 40 grep -q "took over job ck at round" c2.log || { dump_logs c2.log; fail "(a) the restarted coordinator did not take over"; }
grep -q "took over job ck at round 2 " c2.log || { dump_logs c2.log; fail "(a) did not resume from round 2, the committed state"; }

# (b) c2 is killed once it commits round 5; the checkpoint its state names is corrupted.
wait_for 60 test -e c2-killed || { dump_logs c2.log; fail "(b) no round 5 after the restart"; }
wait_exit "$COORD_PID" 10 >/dev/null
named=$(etcdctl get /tma/ck/state --print-value-only | python3 -c 'import json,sys; print(json.load(sys.stdin)["checkpoint"])')
[ -f "$named" ] || fail "(b) the state names $named, which does not exist"
python3 - "$named" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-16, 2); b = f.read(1); f.seek(-16, 2); f.write(bytes([b[0] ^ 0xff]))
PY
start_coordinator c3.log --job ck
finish_job "${logs[@]}"
grep -q "cannot be used.*resuming from" c3.log || { dump_logs c3.log; fail "(b) no warning about the corrupt checkpoint"; }
check_run run >/dev/null || { dump_logs "${logs[@]}"; fail "run folder invalid"; }
rounds_check run "R[3]['epoch'] != R[2]['epoch'] and len(set(r['epoch'] for r in R)) == 3" \
  "round 3 was not redone after the restart, or the third coordinator did not carry on" ||
  { dump_logs "${logs[@]}"; fail "rounds"; }
n=$(ls run/checkpoint*.tmaw | wc -l)
[ "$n" -le 2 ] || fail "$n checkpoints left in the run folder (the newest and the one before it are kept)"
echo "(a) resumed from round 2 after a checkpoint of round 3 got ahead of the state; (b) fell back past a corrupt checkpoint"
