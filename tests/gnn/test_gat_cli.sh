#!/bin/bash
# test_gat_cli.sh: `tma train` with the GAT encoder on a small graph: it learns (test MRR
# well above the untrained model's), step mode repeats byte for byte, and `tma eval`
# of its weights (full-neighbourhood attention) gives the MRR the run recorded.
. "$TMA_SRCDIR/tests/lib.sh"

W="$TMA_BUILDDIR/tests/gnn/write_test_graph"
G=$TMP_ROOT/g.tmag
"$W" "$G" 500 32 0 1 || hard "cannot write the test graph"
cat > "$TMP_ROOT/gat.json" <<'JSON'
{"model": {"encoder": "gat", "heads": 4, "hidden": 16, "decoder_hidden": 16},
 "train": {"batch_size": 64, "fanouts": [5, 5], "lr": 0.01, "threads": 2, "seed": 3}}
JSON
train() { "$TMA_BIN" train "$G" --config "$TMP_ROOT/gat.json" "$@" > /dev/null 2> "$TMP_ROOT/err" ||
            { cat "$TMP_ROOT/err"; fail "tma train $* failed"; }; }
mrr() { json "$1/result.json" "d['test_mrr']"; }

train --steps 300 -o "$TMP_ROOT/run"
train --steps 2 --lr 1e-30 -o "$TMP_ROOT/untrained"
python3 - "$(mrr "$TMP_ROOT/run")" "$(mrr "$TMP_ROOT/untrained")" <<'PY' || fail "GAT did not learn"
import sys
trained, untrained = map(float, sys.argv[1:])
print(f"gat test MRR {trained:.4f}, untrained {untrained:.4f}")
assert trained > untrained + 0.1 and trained > 1.5 * untrained, (trained, untrained)
PY
want=$(json "$TMP_ROOT/run/result.json" "'%.6f' % d['test_mrr']")
got=$("$TMA_BIN" eval "$G" "$TMP_ROOT/run/best.tmaw" | awk '/^test_mrr/ {print $2}')
[ "$want" = "$got" ] || fail "tma eval of the GAT weights gave $got, the run recorded $want"

# tma export: GATConv's names and shapes, and the embeddings of full-neighbourhood inference
"$TMA_BIN" export "$TMP_ROOT/run" -o "$TMP_ROOT/exp" > /dev/null 2>&1 || fail "tma export of a GAT run failed"
need_py "${TMA_TORCH_PYTHON:-}" numpy python3-numpy
"$TMA_TORCH_PYTHON" - "$TMP_ROOT/exp" <<'PY' || fail "the exported GAT model has the wrong tensors"
import sys, numpy as np
m = np.load(sys.argv[1] + "/model.npz")
assert m["encoder.0.lin.weight"].shape == (16, 32), m["encoder.0.lin.weight"].shape  # 4 heads of 4
assert m["encoder.0.att_src"].shape == (4, 4) and m["encoder.0.att_dst"].shape == (4, 4)
assert m["encoder.1.lin.weight"].shape == (64, 16)  # the last layer: 4 heads of 16, averaged
assert np.load(sys.argv[1] + "/embeddings.npy").shape == (500, 16)
PY

# step mode: one seed, the same weights
train --steps 40 -o "$TMP_ROOT/a"
train --steps 40 -o "$TMP_ROOT/b"
cmp -s "$TMP_ROOT/a/best.tmaw" "$TMP_ROOT/b/best.tmaw" || fail "two GAT runs with one seed wrote different weights"

# heads refused by name with its range
expect_fail 2 "heads\" = 0 is out of range \\[1, 64\\]" -- "$TMA_BIN" train "$G" --encoder gat --config <(echo '{"model": {"encoder": "gat", "heads": 0}}') --steps 5 -o "$TMP_ROOT/x"
echo "gat: learns, repeats, evaluates"
