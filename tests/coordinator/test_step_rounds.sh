#!/bin/bash
# test_step_rounds.sh: in step mode (aggregation.interval_steps) a round whose
# steps take longer than fault.round_deadline still counts every worker's
# weights: the deadline runs from the first tensor of the round, not from
# its start.  (Before, every worker missed every such round and the model
# never left its initial weights; a 500-step interval on a 4M-edge graph hit
# it.)  And the deadline still bounds a round: a worker that drops its
# weights in round 1 is missed by round_deadline after the others arrived.
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
cd "$TMP_ROOT"
etcd_start 1
make_graph g.tmag
"$TMA" partition g.tmag --scheme random --shards 3 --seed 4 -o part >/dev/null || fail "partition"

# run_job NAME [TMA_FAULT of worker 2]: 2 rounds of 20 steps, each step
# delayed 0.1 s (a round takes over 2 s), with a 1 s round deadline.
run_job() {
  cat > $1.json <<JSON
{"job": "$1", "graph": "g.tmag", "partition": {"dir": "part"}, "workers": 3,
 "aggregation": {"interval_steps": 20}, "duration": {"rounds": 2, "train_seconds": 120},
 "fault": {"round_deadline": 1},
 "model": {"hidden": 16, "decoder_hidden": 16}, "train": {"batch_size": 64, "threads": 1, "seed": 3}}
JSON
  WORKER_PIDS=()
  start_coordinator $1-coord.log --config $1.json --run-dir $1-run
  for i in 0 1; do TMA_FAULT=delay_step=0.1 start_worker $1-w$i.log --job $1; done
  TMA_FAULT=delay_step=0.1${2:+,$2} start_worker $1-w2.log --job $1
  job_done $1 $1-coord.log $1-w0.log
}

# rounds RUN: "round: got=N missed=[...] seconds=S" for rounds 1 and 2.
rounds() {
  python3 - "$1/metrics.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["round"] >= 1:
        got = [w["id"] for w in r.get("workers", []) if w.get("steps", 0) > 0]
        print(f'{r["round"]}: got={len(got)} missed={r["missed"]} seconds={r["agg_seconds"]:.1f}')
PY
}

run_job slow
rounds slow-run > slow.rounds
cat slow.rounds >&2
grep -q '^1: got=3 missed=\[\]' slow.rounds && grep -q '^2: got=3 missed=\[\]' slow.rounds ||
  { dump_logs slow-coord.log; fail "a round slower than the deadline lost workers' weights: $(tr '\n' ' ' < slow.rounds)"; }

run_job drop drop=weights@1
rounds drop-run > drop.rounds
cat drop.rounds >&2
grep -qE '^1: got=2 missed=\[[0-9]+\]' drop.rounds ||
  { dump_logs drop-coord.log; fail "round 1 did not go on without the worker that dropped its weights: $(tr '\n' ' ' < drop.rounds)"; }
# The round waited about the deadline past the others' weights, not for the training time.
python3 - drop-run/metrics.jsonl <<'PY' || fail "round 1 with a dropped worker took too long"
import json, sys
r1 = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["round"] == 1][0]
sys.exit(0 if r1["agg_seconds"] < 20 else f"round 1 took {r1['agg_seconds']:.1f} s")
PY
grep -q '^2: got=3 missed=\[\]' drop.rounds || fail "round 2 after the drop: $(tr '\n' ' ' < drop.rounds)"
echo "step-mode rounds: slower than the deadline and all counted; a dropped worker missed after the deadline"
