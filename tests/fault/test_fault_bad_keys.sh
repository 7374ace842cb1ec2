#!/bin/bash
# test_fault_bad_keys.sh (issue 13, item 10): a shards/<k> key with k beyond
# the partition is refused (the worker never reads past its shard paths and
# trains on), and a standby exits 0 once the leader it stood by for has
# finished the job normally.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

TRAIN=20 INTERVAL=1 write_job j.json bk '"fault": {"lease_ttl": 3, "round_deadline": 5, "start_timeout": 20}'
start_job j.json bk
leader=$COORD_PID
wait_for 20 grep -q "leading job bk" coord.log || fail "no leader"
start_coordinator standby.log --job bk --standby
standby=$COORD_PID
wait_for 20 grep -q "standing by" standby.log || { dump_logs standby.log; fail "the standby did not stand by"; }
wait_round run 1 || { dump_logs coord.log; fail "no round 1"; }
id=$(sed -n 's/.*joined job bk as member \([0-9]*\).*/\1/p' w0.log | head -n1)
epoch=$(etcdctl get /tma/bk/coordinator -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)["kvs"][0]["create_revision"])') ||
  fail "no coordinator key"
# shard 7 of a 3-shard partition, given to member $id under the leader's epoch
etcdctl put /tma/bk/shards/00000007 "{\"shard\": 7, \"owner\": $id, \"epoch\": $epoch, \"since_round\": 2}" >/dev/null ||
  fail "etcdctl put"
echo "shards/00000007 written at $(date +%T.%N)" >&2
wait_for 20 grep -q "refused shards/00000007" w0.log || { dump_logs coord.log w0.log; fail "the out-of-range shard key was not refused"; }
COORD_PID=$leader
finish_job coord.log w0.log w1.log w2.log
wait_exit "$leader" 1 >/dev/null || { dump_logs coord.log; fail "the leader failed"; }
check_run run >/dev/null || { dump_logs coord.log; fail "run folder invalid"; }
rounds_check run "len(R[-1]['workers']) == 3 and $id in [w['id'] for w in R[-1]['workers']]" \
  "member $id stopped training after the bad shard key" || fail "the worker was lost"
wait_exit "$standby" 30 >/dev/null
rc=$?
[ "$rc" -ne 124 ] || { dump_logs standby.log; fail "the standby still runs after the job finished"; }
[ "$rc" -eq 0 ] || { dump_logs standby.log; fail "the standby exited $rc after the leader finished normally"; }
echo "shards/00000007 was refused by member $id, which trained to the end; the standby exited 0"
