#!/bin/bash
# test_export.sh: `tma export` of a run folder: model.npz has PyTorch
# state_dict names and shapes, embeddings.npy every node's embedding; the
# PyTorch lines docs/model.md shows load them, and the scores they give equal
# tma's (`tma eval --scores`) and so does the MRR.  Bad input is refused.
. "$TMA_SRCDIR/tests/lib.sh"
PY=${TMA_TORCH_PYTHON:-}
need_py "$PY" torch python3-torch   # the export is checked by loading it in PyTorch
W="$TMA_BUILDDIR/tests/gnn/write_test_graph"
cd "$TMP_ROOT" || hard "cd"
"$W" g.tmag 400 24 0 3 || hard "cannot write the test graph"
"$W" g2.tmag 300 12 0 2 || hard "cannot write the second test graph"
cat > sage.json <<'JSON'
{"model": {"encoder": "sage", "layers": 2, "hidden": 16, "decoder_layers": 3, "decoder_hidden": 8},
 "train": {"batch_size": 64, "fanouts": [5, 5], "threads": 2, "seed": 5}}
JSON
"$TMA_BIN" train g.tmag --config sage.json --steps 60 --eval-every-seconds 1000 -o run -q > /dev/null || fail "tma train"
# From another folder: the run's result.json names the graph.
mkdir elsewhere
(cd elsewhere && "$TMA_BIN" export ../run --json > ../export.json) || fail "tma export of a run folder"
[ "$(json export.json 'd["nodes"], d["dim"], d["dir"]')" = "400 16 ../run/export" ] || fail "export --json: $(cat export.json)"
"$TMA_BIN" eval g.tmag run/best.tmaw --scores scores.npz --json > eval.json || fail "tma eval --scores"

# The docs' block, pointed at this run, then the checks.
awk '/test_export.sh runs this block/ {on = 1; next} on && /^```python/ {inblk = 1; next}
     inblk && /^```/ {exit} inblk {print}' "$TMA_SRCDIR/docs/model.md" | sed "s|RUN/export|run/export|g" > load.py
[ -s load.py ] || fail "docs/model.md has no export example"
cat >> load.py <<'PY'

import json
want = {"encoder.0.lin_self.weight": (16, 24), "encoder.0.lin_neigh.weight": (16, 24), "encoder.0.bias": (16,),
        "encoder.0.norm.weight": (16,), "encoder.0.norm.bias": (16,), "encoder.0.act.weight": (1,),
        "encoder.1.lin_self.weight": (16, 16), "encoder.1.lin_neigh.weight": (16, 16), "encoder.1.bias": (16,),
        "decoder.0.weight": (8, 16), "decoder.0.bias": (8,), "decoder.1.weight": (1,),
        "decoder.2.weight": (8, 8), "decoder.2.bias": (8,), "decoder.3.weight": (1,),
        "decoder.4.weight": (1, 8), "decoder.4.bias": (1,)}
got = {k: v.shape for k, v in w.items()}
assert got == want, got
assert all(v.dtype == np.float32 for v in w.values())
assert tuple(r.shape) == (400, 16) and r.dtype == torch.float32, r.shape
# A trained model's LayerNorm and PReLU are not at their initial values.
assert not np.allclose(w["encoder.0.norm.weight"], 1.0) and w["decoder.1.weight"][0] != np.float32(0.25)
s = np.load("scores.npz")
head, tail, tma = s["head"], s["tail"], s["score"]
assert head.dtype == np.int64 and tail.shape == tma.shape and tma.shape[0] == head.shape[0] > 0, tail.shape
mine = score(torch.from_numpy(head)[:, None], torch.from_numpy(tail)).numpy()
diff = np.abs(mine - tma).max()
assert diff < 1e-4 * max(1.0, np.abs(tma).max()), diff
rank = 1 + (mine[:, 1:] >= mine[:, :1]).sum(1)
mrr = float((1.0 / rank).mean())
ev = json.load(open("eval.json"))
assert abs(mrr - ev["mrr"]) < 1e-5, (mrr, ev)
print("scores agree: max difference %.2e over %d edges, MRR %.4f" % (diff, head.shape[0], mrr))
PY
"$PY" load.py || fail "the exported model does not give tma's scores"

# Every parameter is exported: the weight file's block holds the same
# floats, each tensor from a 16-float boundary, so it is longer by the zero
# gaps (45 floats for the default GCN: after its three 1-float tensors).
"$TMA_BIN" train g.tmag --steps 2 --eval-every-seconds 1000 -o defrun -q > /dev/null || fail "tma train (defaults)"
"$TMA_BIN" export defrun --json > defexport.json || fail "tma export (defaults)"
"$PY" - <<'PY' || fail "the export and the weight file count different parameters"
import json, struct, numpy as np
w = np.load("defrun/export/model.npz")
sizes = [v.size for v in w.values()]
block = struct.unpack_from("<Q", open("defrun/best.tmaw", "rb").read(32), 24)[0]
ex = json.load(open("defrun/export/model.json"))["export"]
assert len(w.files) == ex["tensors"] == 12 and sum(sizes) == ex["floats"] == json.load(open("defexport.json"))["floats"]
assert sum((s + 15) // 16 * 16 for s in sizes) == block == ex["block_floats"], (sum(sizes), block)
assert block - sum(sizes) == 45 and sum(s == 1 for s in sizes) == 3, sizes
assert {"encoder.0.norm.weight", "encoder.0.norm.bias", "encoder.0.act.weight", "decoder.1.weight"} <= set(w.files)
PY

# The dot decoder: no decoder tensors, model.json names it, and the logit of
# (u, v) is r[u] . r[v], as docs/model.md says: equal to tma's scores.
cat > dot.json <<'JSON'
{"model": {"encoder": "gcn", "layers": 2, "hidden": 16, "decoder": "dot"},
 "train": {"batch_size": 64, "fanouts": [5, 5], "threads": 2, "seed": 5}}
JSON
"$TMA_BIN" train g.tmag --config dot.json --steps 40 --eval-every-seconds 1000 -o dotrun -q > /dev/null ||
  fail "tma train of a dot model"
"$TMA_BIN" export dotrun > /dev/null || fail "tma export of a dot model"
"$TMA_BIN" eval g.tmag dotrun/best.tmaw --scores dotscores.npz --json > doteval.json || fail "tma eval --scores (dot)"
"$PY" - <<'PY' || fail "the exported dot model does not give tma's scores"
import json, numpy as np
w = np.load("dotrun/export/model.npz")
assert not [k for k in w if k.startswith("decoder.")], list(w)
assert json.load(open("dotrun/export/model.json"))["decoder"] == "dot"
r = np.load("dotrun/export/embeddings.npy").astype(np.float64)
s = np.load("dotscores.npz")
mine = (r[s["head"]][:, None, :] * r[s["tail"]]).sum(-1)
diff = np.abs(mine - s["score"]).max()
assert diff < 1e-4 * max(1.0, np.abs(s["score"]).max()), diff
rank = 1 + (mine[:, 1:] >= mine[:, :1]).sum(1)
assert abs(float((1.0 / rank).mean()) - json.load(open("doteval.json"))["mrr"]) < 1e-5
PY

# A weight file with --graph and -o; bad input is refused.
"$TMA_BIN" export run/best.tmaw --graph g.tmag -o out2 > /dev/null || fail "export of a weight file"
cmp -s out2/model.npz run/export/model.npz || fail "the same weights exported twice differ"
cmp -s out2/embeddings.npy run/export/embeddings.npy || fail "the same embeddings exported twice differ"
expect_fail 2 "give --graph" -- "$TMA_BIN" export run/best.tmaw -o out3
expect_fail 2 "features" -- "$TMA_BIN" export run/best.tmaw --graph g2.tmag -o out3
expect_fail 1 "nope.tmaw" -- "$TMA_BIN" export nope.tmaw --graph g.tmag -o out3
head -c 200 run/best.tmaw > short.tmaw
expect_fail 1 "short.tmaw" -- "$TMA_BIN" export short.tmaw --graph g.tmag -o out3
[ ! -e out3/model.npz ] || fail "a refused export wrote out3/model.npz"
echo ok
