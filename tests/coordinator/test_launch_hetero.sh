#!/bin/bash
# test_launch_hetero.sh: a distributed job with a heterogeneous model: tma
# launch, two workers, RandomTMA in step mode, rgcn + distmult on a typed
# SBM; it finishes with a valid run folder whose model records the graph's
# relation ids, and its best weights evaluate to the reported test MRR.
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
cd "$TMP_ROOT"
"$TMA" gen sbm -o typed.tmag --nodes 1500 --classes 20 --noise 2 --node-types 2 --relations 3 --feat-dim 12 \
  --seed 4 --negatives 20 > /dev/null || fail "gen typed sbm"
cat > job.json <<'JSON'
{"job": "hetero", "variant": "randomtma", "workers": 2, "graph": "typed.tmag",
 "aggregation": {"interval_steps": 10}, "duration": {"rounds": 4},
 "model": {"encoder": "rgcn", "decoder": "distmult", "hidden": 16, "bases": 2},
 "train": {"batch_size": 64, "fanouts": [5, 3], "lr": 0.01, "threads": 1}, "eval": {"threads": 1}}
JSON
timeout 300 "$TMA" launch job.json -o run > out.txt 2>&1 || { cat out.txt >&2; fail "tma launch failed"; }
grep -q "^test MRR " out.txt || { cat out.txt >&2; fail "no test MRR printed"; }
check_run run >/dev/null || fail "run folder invalid"
python3 - run <<'PY' || fail "bad result"
import json, math, sys
res = json.load(open(sys.argv[1] + "/result.json"))
assert res["variant"] == "randomtma" and res["workers"] == 2, res
assert 0 < res["test_mrr"] <= 1 and math.isfinite(res["test_mrr"]), res
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
assert len(rows) >= 4, rows
PY
"$TMA" eval typed.tmag run/best.tmaw --json > ev.json || fail "tma eval of the job's weights"
python3 - ev.json run/result.json <<'PY' || fail "tma eval disagrees with the job's test MRR"
import json, sys
e, r = (json.load(open(f)) for f in sys.argv[1:])
assert abs(e["mrr"] - r["test_mrr"]) < 1e-9, (e["mrr"], r["test_mrr"])
assert e["encoder"] == "rgcn", e
PY
echo "launch: rgcn + distmult, 2 workers, randomtma in step mode: test MRR $(json run/result.json 'd["test_mrr"]')"
