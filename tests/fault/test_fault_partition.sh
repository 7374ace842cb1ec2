#!/bin/bash
# test_fault_partition.sh (scenario 8): a network partition between one worker
# and the rest.  The worker runs in a network namespace of its own, joined to
# the others' namespace by a veth pair on a bridge; its link is cut for
# longer than its lease, then restored.  The coordinator declares it lost and
# goes on; the cut-off worker finds its lease gone, drops its state and joins
# again as a new member.  Skips (77) where namespaces cannot be made.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
netns_start p m p

cd "$TMP_ROOT"
fault_graph
netns_etcd m "$NET.1" p
TRAIN=30 write_job j.json kn "\"transport\": {\"host\": \"$NET.1\"}, \"fault\": {\"lease_ttl\": 3, \"round_deadline\": 4, \"start_timeout\": 20}"
netns_cut_job kn
wait_round run 3 || { dump_logs coord.log cut.log; fail "no round 3"; }
old=$(sed -n 's/.*joined job kn as member \([0-9]*\).*/\1/p' cut.log | head -n1)
ip link set "$(netns_link p)" down                   # the partition
wait_for 30 grep -q "member $old is gone" coord.log || { dump_logs coord.log; fail "the cut-off worker was not declared lost"; }
sleep 2
ip link set "$(netns_link p)" up                     # healed
wait_for 30 grep -q "was fenced" cut.log || { dump_logs cut.log; fail "the cut-off worker did not notice it was fenced"; }
wait_for 30 sh -c "grep 'joined job kn as member' cut.log | grep -qv 'member $old '" ||
  { dump_logs cut.log; fail "the cut-off worker did not join again"; }
finish_job coord.log w0.log w1.log cut.log
check_run run >/dev/null || { dump_logs coord.log; fail "run folder invalid"; }
new=$(sed -n 's/.*joined job kn as member \([0-9]*\).*/\1/p' cut.log | tail -n1)
rounds_check run "(lambda L: all($old not in [w['id'] for w in r['workers']] for r in R if r['round'] >= L))(next(r['round'] for r in R if $old in r['lost']))" \
  "the cut-off member's weights were counted after it was lost" || fail "stale weights"
rounds_check run "$new in [w['id'] for w in R[-1]['workers']] and len(R[-1]['workers']) == 3" \
  "the healed worker did not train again" || fail "rejoin"
rounds_check run "max(r['agg_seconds'] for r in R) < 10" "a round waited too long on the cut-off worker" || fail "deadline"
echo "partitioned member $old was declared lost, fenced itself, and came back as member $new"
