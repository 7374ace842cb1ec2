#!/bin/bash
# test_eval_ranks.sh: a distributed evaluation (eval.where "workers") gives
# the single evaluator's numbers.  Each model runs twice under tma launch in
# step mode with the same seed, once evaluated by the coordinator and once
# by evaluator ranks on the three workers (four shards: one worker holds
# two); every round both evaluated has the same validation MRR and Hits@K,
# and the test MRR the ranks give the best weights is what tma eval gives.
# GCN + MLP on cora; RGCN + DistMult on a typed SBM.  The coordinator of the
# ranked run reads only the graph's header (it logs so), and the ranks
# connect to each other (the workers log their rows fetched).
source "$TMA_SRCDIR/tests/lib.sh"
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
cd "$TMP_ROOT"
make_graph g.tmag
"$TMA" gen sbm -o typed.tmag --nodes 1200 --classes 12 --noise 2 --node-types 2 --relations 3 --feat-dim 12 \
  --seed 4 --negatives 20 > /dev/null || fail "gen typed sbm"

run() { # NAME GRAPH WHERE MODEL
  cat > $1.json <<JSON
{"job": "$1", "variant": "randomtma", "workers": 3, "graph": "$2", "partition": {"shards": 4, "seed": 3},
 "aggregation": {"interval_steps": 6}, "duration": {"rounds": 4},
 "model": $4, "train": {"batch_size": 64, "fanouts": [5, 3], "lr": 0.01, "threads": 1, "seed": 9},
 "eval": {"threads": 1, "where": "$3", "rank_timeout": 60}}
JSON
  timeout 300 "$TMA" launch $1.json -o $1-run > $1.out 2>&1 || { tail -n 40 $1.out >&2; fail "tma launch $1 failed"; }
  check_run $1-run >/dev/null || { tail -n 40 $1.out >&2; fail "$1: run folder invalid"; }
}

compare() { # A B GRAPH
  python3 - $1-run $2-run <<'PY' || fail "$1 and $2 disagree"
import json, sys
a, b = ([json.loads(l) for l in open(r + "/metrics.jsonl")] for r in sys.argv[1:3])
both = [(x, y) for x, y in zip(a, b) if x.get("eval") == "ok" and y.get("eval") == "ok"]
assert len(both) >= 2, "fewer than two rounds evaluated by both: %s %s" % (
    [x.get("eval") for x in a], [y.get("eval") for y in b])
for x, y in both:
    for k in x:
        if k.startswith("val_"):
            assert abs(x[k] - y[k]) <= 1e-9, (x["round"], k, x[k], y[k])
bad = [y for y in b if y.get("eval") not in ("ok", "skipped") or (y.get("eval") == "skipped" and "eval_reason" in y)]
assert not bad, "the ranks failed an evaluation: %s" % bad
ra, rb = (json.load(open(r + "/result.json")) for r in sys.argv[1:3])
# Which rounds were evaluated depends on timing (a busy evaluator skips to
# the newest model), so the best rounds may differ; on the same one the
# test MRR is the same (and tma eval checks the ranked one's below).
if ra["best_round"] == rb["best_round"]:
    assert abs(ra["test_mrr"] - rb["test_mrr"]) <= 1e-9, (ra["test_mrr"], rb["test_mrr"])
print("%d rounds evaluated by both agree; test MRR %.6f" % (len(both), rb["test_mrr"]))
PY
  "$TMA" eval $3 $2-run/best.tmaw --split test --json --threads 1 > $2-ev.json || fail "tma eval of $2's weights"
  python3 - $2-ev.json $2-run/result.json <<'PY' || fail "tma eval disagrees with $2's test MRR"
import json, sys
e, r = (json.load(open(f)) for f in sys.argv[1:])
assert abs(e["mrr"] - r["test_mrr"]) < 1e-9, (e["mrr"], r["test_mrr"])
PY
  grep -q "reads the graph's header, not the graph" $2-run/logs/coordinator.log ||
    { tail -n 20 $2-run/logs/coordinator.log >&2; fail "$2: the coordinator read more than the graph's header"; }
  [ "$(cat $2-run/logs/worker-*.log | grep -c "evaluator rank listening")" -eq 3 ] || fail "$2: not three evaluator ranks"
}

run gc g.tmag coordinator '{"hidden": 32, "decoder_hidden": 32}'
run gw g.tmag workers '{"hidden": 32, "decoder_hidden": 32}'
compare gc gw g.tmag
run hc typed.tmag coordinator '{"encoder": "rgcn", "decoder": "distmult", "hidden": 16, "bases": 2}'
run hw typed.tmag workers '{"encoder": "rgcn", "decoder": "distmult", "hidden": 16, "bases": 2}'
compare hc hw typed.tmag
echo "evaluator ranks: the single evaluator's MRR and Hits@K for gcn+mlp and rgcn+distmult"
