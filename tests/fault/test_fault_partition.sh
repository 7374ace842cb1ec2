#!/bin/bash
# test_fault_partition.sh (scenario 8): a network partition between one worker
# and the rest.  The worker runs in a network namespace of its own, joined to
# the others' namespace by a veth pair on a bridge; its link is cut for
# longer than its lease, then restored.  The coordinator declares it lost and
# goes on; the cut-off worker finds its lease gone, drops its state and joins
# again as a new member.  Skips (77) where namespaces cannot be made.
source "$TMA_SRCDIR/tests/lib.sh"
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
need ip iproute2
sfx=$(( $$ % 100000 ))
ip netns add "tmaprobe$sfx" 2>/dev/null || skip "network namespaces cannot be made here (needs root)"
ip netns del "tmaprobe$sfx"
br="tmapb$sfx"; roles=(m p)
a=$(( (sfx % 200) + 20 )); b=$(( (sfx / 200) % 250 )); net="10.$a.$b"
netns_setup "tmap$sfx" "$br" "$net" "${roles[@]}"

cd "$TMP_ROOT"
fault_graph
netns_etcd m "$net.1" p
TRAIN=30 write_job j.json kn "\"transport\": {\"host\": \"$net.1\"}, \"fault\": {\"lease_ttl\": 3, \"round_deadline\": 4, \"start_timeout\": 20}"
bg_ns m "$TMA" coordinator --etcd "$ETCD_ENDPOINTS" --config j.json --run-dir run --etcd-timeout 2 >coord.log 2>&1
COORD_PID=$!; track $COORD_PID
for w in 0 1; do
  bg_ns m "$TMA" worker --etcd "$ETCD_ENDPOINTS" --job kn --name w$w --threads 1 >w$w.log 2>&1
  WORKER_PIDS+=($!); track $!
done
bg_ns p "$TMA" worker --etcd "$ETCD_ENDPOINTS" --job kn --name cut --threads 1 --etcd-timeout 2 >cut.log 2>&1
WORKER_PIDS+=($!); track $!
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
