#!/bin/bash
# test_torch_model.sh: tma.torch_model rebuilds an exported model in
# PyTorch and embeds the nodes of a graph the model never saw.  For GCN,
# SAGE, MLP and GAT (MLP and dot decoders; GAT with several heads,
# concatenated and averaged, and with one) on an untyped graph and RGCN +
# DistMult and GCN + DistMult on a typed one: train on graph A, export, then
# embed graph B, another graph of the same feature width (and node types and
# relations) with more nodes, generated from another seed.  Every node of B
# is held back from training (ids past A's last node do not exist in A at
# all), and every validation and test score of B must equal `tma eval B
# --scores` within 1e-5 of the split's largest |score|.  Embedding A itself
# must give the export's embeddings.npy.  Runs /usr/bin/python3 (Debian's
# python3-torch and python3-numpy).
. "$TMA_SRCDIR/tests/lib.sh"
PY=/usr/bin/python3
need_py "$PY" torch python3-torch
need_py "$PY" numpy python3-numpy
cd "$TMP_ROOT" || hard "cd"
export PYTHONPATH=$TMA_SRCDIR/python PYTHONDONTWRITEBYTECODE=1
W="$TMA_BUILDDIR/tests/gnn/write_test_graph"
"$W" a.tmag 300 16 0 3 || hard "cannot write graph A"
"$W" b.tmag 450 16 1 8 || hard "cannot write graph B"   # sparse features: tma's project-first path
typed() { # OUT NODES SEED
  "$TMA_BIN" gen sbm -o "$1" --nodes "$2" --classes 10 --noise 3 --node-types 2 --relations 3 --feat-dim 12 \
    --seed "$3" --val 40 --test 40 --negatives 20 > /dev/null || hard "cannot generate $1"
}
typed ta.tmag 400 5
typed tb.tmag 550 9

# check NAME A B MODEL-JSON [FANOUTS]: train on A, export, compare on B.
check() {
  local name=$1 a=$2 b=$3
  printf '{"model": %s, "train": {"batch_size": 64, "fanouts": %s, "lr": 0.01, "threads": 2, "seed": 4}}\n' \
    "$4" "${5:-[5, 5]}" > "$name.json"
  "$TMA_BIN" train "$a" --config "$name.json" --steps 40 --eval-every-seconds 1000 -o "$name" -q > /dev/null ||
    fail "$name: tma train"
  "$TMA_BIN" export "$name" > /dev/null || fail "$name: tma export"
  for split in val test; do
    "$TMA_BIN" eval "$b" "$name/best.tmaw" --split $split --scores "$name-$split.npz" > /dev/null ||
      fail "$name: tma eval --scores on $b ($split)"
  done
  "$PY" - "$name" "$a" "$b" <<'PY' || fail "$name: the PyTorch module disagrees with tma"
import sys
import numpy as np, torch
import tma
name, a, b = sys.argv[1:]
m = tma.torch_model(name + "/export")
assert isinstance(m, torch.nn.Module)
# The graph it was trained on: the export's embeddings.
mine, want = m.embed(a).numpy(), np.load(name + "/export/embeddings.npy")
err = np.abs(mine - want).max() / np.abs(want).max()
assert err < 1e-5, ("embeddings of A", err)
# Graph B: held-back nodes, scored as tma eval scores them.
gb = tma.open_graph(b)
assert gb.num_nodes > tma.open_graph(a).num_nodes
m.embed(gb)
for split in ("val", "test"):
    s = np.load("%s-%s.npz" % (name, split))
    rels = getattr(gb, split + "_rels")
    rels = None if rels is None else torch.from_numpy(np.array(rels, dtype=np.int64))[:, None]
    mine = m.score(torch.from_numpy(s["head"])[:, None], torch.from_numpy(s["tail"]), rels).numpy()
    err = np.abs(mine - s["score"]).max() / np.abs(s["score"]).max()
    assert mine.shape == s["score"].shape and err < 1e-5, (split, err)
    n_a = tma.open_graph(a).num_nodes
    new = int(((s["tail"] >= n_a) | (s["head"][:, None] >= n_a)).sum())
    assert new > 0, "no score touches a node past A's"
    print("%s %s: %d scores within %.1e relative (%d pairs with a node past A's)" % (name, split, mine.size, err, new))
PY
}

check gcn a.tmag b.tmag '{"encoder": "gcn", "hidden": 16, "decoder_hidden": 8}'
check sage a.tmag b.tmag '{"encoder": "sage", "layers": 3, "hidden": 16, "decoder_layers": 3, "decoder_hidden": 8}' \
  '[5, 5, 5]'
check mlp a.tmag b.tmag '{"encoder": "mlp", "hidden": 16, "decoder": "dot"}'
check gat a.tmag b.tmag '{"encoder": "gat", "heads": 4, "hidden": 16, "decoder_hidden": 8}'
check gat3 a.tmag b.tmag '{"encoder": "gat", "layers": 3, "heads": 2, "hidden": 16, "decoder": "dot"}' '[5, 5, 5]'
check gat1 a.tmag b.tmag '{"encoder": "gat", "layers": 1, "heads": 1, "hidden": 16, "decoder_hidden": 8}' '[5]'
# One head: the attention vectors are still [heads, C], as GATConv's less the leading 1.
"$PY" -c 'import numpy as np; m = np.load("gat1/export/model.npz"); assert m["encoder.0.att_src"].shape == (1, 16) and m["encoder.0.att_dst"].shape == (1, 16), m["encoder.0.att_src"].shape' ||
  fail "gat1: the attention vectors of one head are not [1, C]"
check rgcn ta.tmag tb.tmag '{"encoder": "rgcn", "decoder": "distmult", "hidden": 16, "bases": 2}'
check gcn-dm ta.tmag tb.tmag '{"encoder": "gcn", "decoder": "distmult", "hidden": 16}'

# Without torch the package still imports, and torch_model says what it needs.
"$PY" - <<'PY' || fail "tma without torch"
import sys
sys.modules["torch"] = None  # as if PyTorch were not installed
import tma
try:
    tma.torch_model("gcn/export")
except ImportError as e:
    assert "python3-torch" in str(e), e
else:
    raise SystemExit("torch_model worked without torch")
PY
echo ok
