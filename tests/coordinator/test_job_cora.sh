#!/bin/bash
# test_job_cora.sh: an M = 3 RandomTMA job on cora with real etcd, UCX and
# processes: it finishes, validation MRR ends well above the untrained
# model's, every round is recorded once, `stop` ends every worker, and
# tma status shows the job while it runs.
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
cd "$TMP_ROOT"
etcd_start 1
make_graph g.tmag
"$TMA" partition g.tmag --scheme random --shards 3 --seed 1 -o part >/dev/null || fail "partition"
cat > job.json <<JSON
{"job": "cora3", "variant": "randomtma", "workers": 3, "graph": "g.tmag", "partition": {"dir": "part"},
 "aggregation": {"interval_steps": 40}, "duration": {"rounds": 12},
 "model": {"hidden": 64, "decoder_hidden": 64}, "train": {"batch_size": 256, "threads": 1},
 "fault": {"start_timeout": 60}}
JSON
start_job job.json cora3
# A live job shows up in tma status with its three members: both in one
# snapshot, polled while it trains (a second status call after the phase
# check could land after the last round, when the workers have left).  40
# steps a round keep it training for about 2 s on an idle machine, longer
# than a few polls.
live_status() {
  "$TMA" status --etcd "$ETCD_ENDPOINTS" --job cora3 --json > status.json &&
    json status.json 'd.get("phase") == "training" and len(d["members"]) == 3' | grep -qx True
}
wait_for 60 live_status ||
  { cat status.json >&2; dump_logs coord.log w0.log; fail "tma status never showed the job training with its three members"; }
wait_exit "$COORD_PID" 180; rc=$?
[ "$rc" -eq 0 ] || { dump_logs coord.log w0.log w1.log w2.log; fail "coordinator exited with $rc"; }
for p in "${WORKER_PIDS[@]}"; do
  wait_exit "$p" 30; rc=$?
  [ "$rc" -eq 0 ] || { dump_logs w0.log w1.log w2.log; fail "a worker did not stop cleanly after stop (exit $rc)"; }
done
last=$(check_run run) || { dump_logs coord.log; fail "run folder invalid"; }
[ "$last" -eq 12 ] || fail "expected 12 rounds, metrics.jsonl ends at $last"
untrained=$(python3 -c 'import json; print(json.loads(open("run/metrics.jsonl").readline())["val_mrr"])')
best=$(json run/result.json 'd["best_val_mrr"]')
python3 -c "import sys; u, b = $untrained, $best; sys.exit(0 if b > 3 * u and b > 0.1 else 1)" ||
  fail "validation MRR $best is not well above the untrained model's $untrained"
# Every round has the three workers' steps (40 each).
python3 - <<'PY' || fail "per-round steps"
import json
for l in open("run/metrics.jsonl"):
    r = json.loads(l)
    if r["round"] == 0:
        continue
    steps = sorted(w["steps"] for w in r["workers"])
    assert steps == [40, 40, 40], (r["round"], steps)
PY
echo "cora M=3: untrained $untrained -> best validation MRR $best, test $(json run/result.json 'd["test_mrr"]')"
