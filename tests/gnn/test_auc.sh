#!/bin/bash
# test_auc.sh: tma's ROC AUC (each evaluation edge's positive against its
# own negatives, ties one half, averaged over the edges) against
# scikit-learn's roc_auc_score on the same scores: the scores tma eval
# writes, and the same scores rounded to integers so that many tie (through ogb_rank,
# the metrics code the evaluator runs).  Also that it is recorded beside
# MRR and Hits@K: tma eval's text and --json, result.json's test_auc and
# metrics.jsonl's val_auc.
. "$TMA_SRCDIR/tests/lib.sh"
PY=/usr/bin/python3
need_py "$PY" sklearn python3-sklearn
need_py "$PY" numpy python3-numpy
W="$TMA_BUILDDIR/tests/gnn/write_test_graph"
RANK="$TMA_BUILDDIR/tests/gnn/ogb_rank"
cd "$TMP_ROOT" || hard "cd"
"$W" g.tmag 400 24 0 3 > /dev/null || hard "cannot write the test graph"
cat > c.json <<'JSON'
{"model": {"encoder": "sage", "hidden": 16, "decoder_hidden": 8},
 "train": {"batch_size": 64, "fanouts": [5, 5], "threads": 2, "seed": 5}}
JSON
"$TMA_BIN" train g.tmag --config c.json --steps 80 --eval-every-seconds 0.05 -o run -q > /dev/null ||
  fail "tma train"
"$TMA_BIN" eval g.tmag run/best.tmaw --scores test.npz --json > test.json || fail "tma eval --scores"
"$TMA_BIN" eval g.tmag run/best.tmaw --split val --scores val.npz --json > val.json || fail "tma eval --split val"
"$TMA_BIN" eval g.tmag run/best.tmaw > test.txt || fail "tma eval"
timeout 120 "$PY" - "$RANK" <<'PY' || fail "tma's AUC differs from scikit-learn's"
import json, subprocess, sys
import numpy as np
from sklearn.metrics import roc_auc_score

def sk_auc(score):
    labels = np.zeros(score.shape[1]); labels[0] = 1
    return float(np.mean([roc_auc_score(labels, row) for row in score]))

for split in ("test", "val"):
    s, e = np.load(f"{split}.npz")["score"], json.load(open(f"{split}.json"))
    want = sk_auc(s)
    assert abs(e["auc"] - want) < 1e-12, (split, e["auc"], want)
    assert 0.5 < want < 1, want  # a trained model, not a constant one
    print(f"{split}: auc {e['auc']:.6f} = scikit-learn's over {s.shape[0]} edges x {s.shape[1] - 1} negatives")

# Many ties: the test scores rounded to integers, ranked by tma's metrics.
s = np.round(np.load("test.npz")["score"].astype(np.float64)).astype(np.float32)
ties = int((s[:, 1:] == s[:, :1]).sum())
assert ties > s.shape[0], ties
s.tofile("rounded.f32")
got = json.loads(subprocess.run([sys.argv[1], "rounded.f32", str(s.shape[0]), str(s.shape[1]), "mean", "10"],
                                check=True, capture_output=True, text=True).stdout)
want = sk_auc(s)
assert abs(got["auc"] - want) < 1e-12, (got["auc"], want)
print(f"rounded, {ties} ties with the positive: auc {got['auc']:.6f} = scikit-learn's")

# Recorded where MRR and Hits@K are.
res, t = json.load(open("run/result.json")), json.load(open("test.json"))
assert abs(res["test_auc"] - t["auc"]) < 1e-12 and "test_hits@10" in res, (res, t)
text = dict(l.split() for l in open("test.txt"))
assert text["test_auc"] == "%.6f" % t["auc"] and "test_hits@10" in text, text
lines = [json.loads(l) for l in open("run/metrics.jsonl")]
assert lines and all("val_auc" in l and "val_hits@10" in l for l in lines), lines[0]
best = max(lines, key=lambda l: l["val_mrr"])
assert abs(best["val_auc"] - json.load(open("val.json"))["auc"]) < 1e-12, (best, open("val.json").read())
PY
echo ok
