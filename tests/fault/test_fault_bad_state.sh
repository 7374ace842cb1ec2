#!/bin/bash
# test_fault_bad_state.sh (issue 30, item 4): a job's `state` in etcd is
# damaged (not JSON) while its coordinator is down.  A coordinator restarted
# with --job, and a standby, must not treat the job as new (deal shards
# afresh, train from new weights, rewrite the run folder): each exits with
# an error naming the key and --fresh, and leaves `state` and metrics.jsonl
# as they were.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

STEPS=10 ROUNDS=400 step_job j.json bs '"fault": {"lease_ttl": 3, "round_deadline": 5, "start_timeout": 20}'
start_coordinator c1.log --config j.json --run-dir run
first=$COORD_PID
for i in 0 1 2; do start_worker w$i.log --job bs --name w$i; done
wait_round run 2 || { dump_logs c1.log; fail "no round 2"; }
kill -KILL "$first"
wait_exit "$first" 10 >/dev/null
etcdctl put /tma/bs/state 'not a state {' >/dev/null || hard "etcdctl put"
cp run/metrics.jsonl metrics.before
for mode in job standby; do
  args=(--job bs)
  [ "$mode" = standby ] && args+=(--standby)
  start_coordinator c-$mode.log "${args[@]}"
  wait_exit "$COORD_PID" 60
  rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { dump_logs c-$mode.log; fail "--$mode: exit $rc with a damaged state"; }
  grep -q "/tma/bs/state is present but cannot be read" c-$mode.log && grep -q -- "--fresh" c-$mode.log ||
    { dump_logs c-$mode.log; fail "--$mode: the error does not name the key and --fresh"; }
  [ "$(etcdctl get --print-value-only /tma/bs/state)" = "not a state {" ] || fail "--$mode: state was rewritten"
  cmp -s metrics.before run/metrics.jsonl || fail "--$mode: metrics.jsonl was rewritten"
done
echo "a damaged state stops --job and --standby with an error naming /tma/bs/state and --fresh"
