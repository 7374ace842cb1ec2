#!/bin/bash
# test_launch_negatives.sh: train.negatives and the dot decoder in a
# distributed job: tma launch, two workers, RandomTMA in step mode, a sage +
# dot model with 3 negatives a positive on cora.  The job's config carries
# both keys to the workers; two launches write the same best weights (step
# mode stays deterministic) and differ from the same job with one negative;
# the weights evaluate to the reported test MRR and AUC.
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
cd "$TMP_ROOT"
make_graph g.tmag
job() { # NAME NEGATIVES
  cat > $1.json <<JSON
{"job": "$1", "variant": "randomtma", "workers": 2, "graph": "g.tmag",
 "aggregation": {"interval_steps": 5}, "duration": {"rounds": 3},
 "model": {"encoder": "sage", "decoder": "dot", "hidden": 16},
 "train": {"batch_size": 64, "fanouts": [5, 3], "lr": 0.01, "threads": 1, "seed": 3, "negatives": $2},
 "eval": {"threads": 1}}
JSON
  timeout 300 "$TMA" launch $1.json -o $1 -q > $1.out 2>&1 || { cat $1.out >&2; fail "tma launch of $1 failed"; }
  check_run $1 > /dev/null || fail "run folder $1 invalid"
}
job a 3
job b 3
job one 1
cmp -s a/best.tmaw b/best.tmaw || fail "two launches of one job in step mode wrote different weights"
cmp -s a/best.tmaw one/best.tmaw && fail "train.negatives 3 made no difference to the job"
"$TMA" eval g.tmag a/best.tmaw --json > ev.json || fail "tma eval of the job's weights"
python3 - ev.json a/result.json a <<'PY' || fail "bad result"
import glob, json, sys
e, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert abs(e["mrr"] - r["test_mrr"]) < 1e-9 and abs(e["auc"] - r["test_auc"]) < 1e-9, (e, r)
# The resolved job config in the run folder names both keys.
conf = [json.load(open(f)) for f in glob.glob(sys.argv[3] + "/*.json") if "train" in json.load(open(f))]
assert conf and all(c["train"]["negatives"] == 3 and c["model"]["decoder"] == "dot" for c in conf), conf
PY
echo "launch: sage + dot, 3 negatives, 2 workers, step mode: test MRR $(json a/result.json 'd["test_mrr"]')"
