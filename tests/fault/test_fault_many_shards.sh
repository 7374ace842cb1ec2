#!/bin/bash
# test_fault_many_shards.sh (issue 13, item 7): a worker may own any number
# of shards.  A 70-shard job (psgd-pa: METIS shards, so each keeps its
# edges) with 2 workers and policy reassign; one worker is SIGKILLed, so the
# survivor takes all 70 shards (more than the old limit of 40 a meta block
# could carry and 64 a ready record could).  It must train on all of them
# and every tensor it sends must count.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
cd "$TMP_ROOT"
etcd_start 1
"$TMA" gen sbm -o g.tmag --nodes 4000 --avg-degree 10 --negatives 100 >/dev/null || fail "tma gen"
"$TMA" partition g.tmag --scheme metis --shards 70 --seed 2 -o part >/dev/null || fail "partition"

WORKERS=2 TRAIN=16 INTERVAL=1 write_job j.json ms \
  '"variant": "psgd-pa", "fault": {"on_failure": "reassign", "lease_ttl": 3, "round_deadline": 5, "start_timeout": 30}'
start_coordinator coord.log --config j.json --run-dir run
start_worker w0.log --job ms --name w0
start_worker w1.log --job ms --name w1
victim=${WORKER_PIDS[1]}
wait_round run 2 || { dump_logs coord.log w0.log w1.log; fail "no round 2"; }
kill -KILL "$victim"
wait_exit "$victim" 5 >/dev/null
WORKER_PIDS=("${WORKER_PIDS[0]}")
finish_job coord.log w0.log
check_run run >/dev/null || { dump_logs coord.log w0.log; fail "run folder invalid"; }
id=$(sed -n 's/.*joined job ms as member \([0-9]*\).*/\1/p' w0.log | head -n1)
if grep -q "refused a tensor from member $id" coord.log; then
  dump_logs coord.log; fail "tensors of the survivor (member $id) were refused"
fi
rounds_check run "R[-1]['workers'] and R[-1]['workers'][0]['id'] == $id and sorted(R[-1]['workers'][0]['shards']) == list(range(70))" \
  "the survivor did not train on all 70 shards in the last round" || { dump_logs coord.log w0.log; fail "70 shards"; }
rounds_check run "all(len(r['workers']) == 1 for r in R if r['round'] > 2 and r['time'] > R[-1]['time'] - 4)" \
  "the survivor's late rounds did not count" || fail "rounds"
echo "after the reassignment, member $id trained on all 70 shards and every late round counted it"
