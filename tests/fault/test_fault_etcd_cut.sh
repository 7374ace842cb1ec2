#!/bin/bash
# test_fault_etcd_cut.sh (issue 13, item 9): a worker cut off from etcd only,
# while the coordinator stays reachable.  Each role has a network namespace
# on one bridge (etcd, the coordinator with two workers, the cut worker); a
# blackhole route in the cut worker's namespace takes etcd's address away
# from it and nothing else.  After no answer from etcd for longer than its
# lease TTL the worker presumes its lease lost and stops training (its CPU
# falls idle); the coordinator declares it lost; when etcd answers again it
# finds its lease gone and joins again as a new member, which trains.  Cut
# off again until the job is over, it leaves once etcd answers.  Skips (77)
# where namespaces cannot be made.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
netns_start c e m p
cut() { in_ns p ip route "$1" blackhole "$NET.1/32"; }

cd "$TMP_ROOT"
fault_graph
netns_etcd e "$NET.1" p
TRAIN=48 write_job j.json kc "\"transport\": {\"host\": \"$NET.2\"}, \"fault\": {\"lease_ttl\": 3, \"round_deadline\": 4, \"start_timeout\": 20}"
netns_cut_job kc
cut_pid=$CUT_PID
wait_round run 3 || { dump_logs coord.log cut.log; fail "no round 3"; }
old=$(sed -n 's/.*joined job kc as member \([0-9]*\).*/\1/p' cut.log | head -n1)

cut add                                               # etcd away, the coordinator still there
wait_for 30 grep -q "member $old is gone" coord.log || { dump_logs coord.log; fail "the cut-off worker was not declared lost"; }
wait_for 30 grep -q "member $old: no answer from etcd for longer than its lease TTL" cut.log ||
  { dump_logs cut.log; fail "the cut-off worker did not presume its lease lost"; }
grep -q "member $old: the connection to the coordinator ended" cut.log &&
  { dump_logs cut.log; fail "the coordinator link was cut too: the test cuts nothing but etcd"; }
# It trains no more: over the next 6 s it uses under 0.6 s of CPU.
hz=$(getconf CLK_TCK)
t0=$(awk '{print $14 + $15}' "/proc/$cut_pid/stat")
sleep 6
t1=$(awk '{print $14 + $15}' "/proc/$cut_pid/stat")
(( (t1 - t0) * 10 < 6 * hz )) || { dump_logs cut.log; fail "the cut-off worker still trains ($((t1 - t0)) ticks of CPU in 6 s)"; }
cut del                                               # etcd answers again
wait_for 30 grep -q "was fenced" cut.log || { dump_logs cut.log; fail "the worker did not find its lease gone"; }
wait_for 30 sh -c "grep 'joined job kc as member' cut.log | grep -qv 'member $old '" ||
  { dump_logs cut.log; fail "the cut-off worker did not join again"; }
new=$(sed -n 's/.*joined job kc as member \([0-9]*\).*/\1/p' cut.log | tail -n1)
wait_for 40 python3 -c "
import json, sys
R = [json.loads(l) for l in open('run/metrics.jsonl') if l.strip()]
sys.exit(0 if any($new in [w['id'] for w in r['workers']] for r in R) else 1)" ||
  { dump_logs coord.log cut.log; fail "the rejoined member $new never counted in a round"; }

cut add                                               # cut off again until the job is over
wait_exit "$COORD_PID" 90 >/dev/null || { dump_logs coord.log; fail "the coordinator failed"; }
kill -0 "$cut_pid" 2>/dev/null || { dump_logs cut.log; fail "the cut-off worker left before etcd could tell it the job is over"; }
cut del
wait_exit "$cut_pid" 30 >/dev/null
[ $? -ne 124 ] || { dump_logs cut.log; fail "the worker did not leave once etcd answered that the job is over"; }
finish_job coord.log w0.log w1.log cut.log
check_run run >/dev/null || { dump_logs coord.log; fail "run folder invalid"; }
rounds_check run "(lambda L: all($old not in [w['id'] for w in r['workers']] for r in R if r['round'] >= L))(next(r['round'] for r in R if $old in r['lost']))" \
  "the cut-off member's weights were counted after it was lost" || fail "stale weights"
echo "member $old, cut off from etcd only, presumed its lease lost and stopped training; it came back as member $new and left when the job was over"
