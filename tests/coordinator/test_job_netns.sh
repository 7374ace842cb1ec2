#!/bin/bash
# test_job_netns.sh: a job across "hosts": etcd, the coordinator and two
# workers each in its own network namespace with its own address on a
# bridge (veth pairs), so nothing relies on loopback.  Skips (77) where
# namespaces cannot be made (no root, no iproute2).
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
netns_start "" e c w1 w2

cd "$TMP_ROOT"
make_graph g.tmag
"$TMA" partition g.tmag --scheme random --shards 2 --seed 3 -o part >/dev/null || fail "partition"
netns_etcd e "$NET.1" c
cat > job.json <<JSON
{"job": "hosts", "graph": "g.tmag", "partition": {"dir": "part"}, "workers": 2,
 "aggregation": {"interval_steps": 5}, "duration": {"rounds": 5}, "transport": {"host": "$NET.2"},
 "model": {"hidden": 32, "decoder_hidden": 32}, "train": {"batch_size": 128, "threads": 1}}
JSON
bg_ns c "$TMA" coordinator --etcd "$ETCD_ENDPOINTS" --config job.json --run-dir run >coord.log 2>&1
COORD_PID=$!; track $COORD_PID
for w in w1 w2; do
  bg_ns $w "$TMA" worker --etcd "$ETCD_ENDPOINTS" --job hosts --threads 1 >$w.log 2>&1
  WORKER_PIDS+=($!); track $!
done
wait_exit "$COORD_PID" 120 || { dump_logs coord.log w1.log w2.log; fail "the coordinator did not finish"; }
for p in "${WORKER_PIDS[@]}"; do wait_exit "$p" 30 || { dump_logs w1.log w2.log; fail "a worker did not stop"; }; done
check_run run >/dev/null || fail "run folder invalid"
grep -q "leading job hosts .* at $NET.2:" coord.log || { dump_logs coord.log; fail "the coordinator did not listen on $NET.2"; }
grep -q "connected to the coordinator at $NET.2:" w1.log || { dump_logs w1.log; fail "worker w1 did not connect over the bridge"; }
python3 - <<'PY' || fail "rounds without both workers"
import json
for l in open("run/metrics.jsonl"):
    r = json.loads(l)
    if r["round"] > 0:
        assert len(r["workers"]) == 2, r
PY
echo "etcd, coordinator and 2 workers in 4 namespaces on $NET.0/24: the job finished"
