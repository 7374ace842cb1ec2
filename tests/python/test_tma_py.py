"""tests/python/test_tma_py.py: the tma Python package against the tma
program (run by test_python.sh in a temporary folder, with TMA_BIN set)."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

import tma

TMA = os.environ["TMA_BIN"]


def info(path):
    return json.loads(subprocess.check_output([TMA, "info", path, "--json"]))


def expect_error(fn, *words, code="any"):
    try:
        fn()
    except tma.TmaError as e:
        for w in words:
            assert w in str(e), "%r does not say %r" % (str(e), w)
        if code != "any":
            assert e.exit_code == code, (e.exit_code, code)
        return e
    raise AssertionError("no TmaError (expected one naming %s)" % (words,))


# --- open_graph: the arrays are the file's, as tma info counts them -----------------------------
g = tma.open_graph("g.tmag")
i = info("g.tmag")
assert g.num_nodes == i["nodes"] and g.num_train_edges == i["train_edges"], (g.header, i)
assert g.features.shape == (i["nodes"], i["feature_dim"]) and g.features.dtype == np.float32
assert g.val_edges.shape == (i["val_edges"], 2) and g.test_edges.shape == (i["test_edges"], 2)
assert g.val_neg.shape == (i["val_edges"], i["negatives_per_edge"])
assert isinstance(g.features, np.memmap), "the features are copied, not mapped"
ip, ix = np.asarray(g.indptr), np.asarray(g.indices)
assert ip[0] == 0 and ip[-1] == len(ix) == 2 * g.num_train_edges and np.all(np.diff(ip) >= 0)
ei = g.edge_index()
pairs = set(map(tuple, ei.T.tolist()))
assert all((v, u) in pairs for u, v in pairs), "the CSR is not symmetric"
assert all(np.all(np.diff(ix[ip[u]:ip[u + 1]]) > 0) for u in range(g.num_nodes)), "a row is not sorted"
assert not g.typed and g.labels is not None and len(g.labels) == g.num_nodes

# A damaged header and a truncated file are refused by name.
shutil.copy("g.tmag", "bad.tmag")
with open("bad.tmag", "r+b") as f:
    f.seek(30)
    f.write(b"\xff")
expect_error(lambda: tma.open_graph("bad.tmag"), "header checksum")
shutil.copy("g.tmag", "short.tmag")
os.truncate("short.tmag", os.path.getsize("g.tmag") - 100)
expect_error(lambda: tma.open_graph("short.tmag"), "truncated")

# --- save_graph: arrays in, the same graph out (split by tma import) ---------------------------
rng = np.random.default_rng(3)
n = 120
src = rng.integers(0, n, 900)
dst = rng.integers(0, n, 900)
x = rng.normal(size=(n, 6)).astype(np.float32)
y = rng.integers(0, 4, n)
s = tma.save_graph("saved.tmag", np.stack([src, dst]), x=x, y=y, val=20, test=20, negatives=10, seed=1)
want = {(min(a, b), max(a, b)) for a, b in zip(src.tolist(), dst.tolist()) if a != b}
got = {(min(a, b), max(a, b)) for a, b in s.edge_index().T.tolist()}
got |= {(min(a, b), max(a, b)) for a, b in np.asarray(s.val_edges).tolist()}
got |= {(min(a, b), max(a, b)) for a, b in np.asarray(s.test_edges).tolist()}
assert got == want, "save_graph lost or invented edges: %d vs %d" % (len(got), len(want))
assert np.array_equal(np.asarray(s.features), x) and np.array_equal(np.asarray(s.labels), y)
assert s.val_edges.shape == (20, 2) and s.val_neg.shape == (20, 10)
expect_error(lambda: tma.save_graph("x.tmag", np.array([[0, 1], [1, 5]]), x=np.zeros((3, 2))), "tma import")

# --- train and Run ------------------------------------------------------------------------------
run = tma.train("g.tmag", "run", steps=12, progress=False,
                config={"model": {"hidden": 16, "decoder_hidden": 16}, "train": {"batch_size": 64}})
r = run.result
assert r["steps"] == 12 and 0 < r["test_mrr"] <= 1, r
rows = run.metrics_rows()
with open("run/metrics.jsonl") as f:
    assert len(rows) == sum(1 for line in f if line.strip()) >= 1
m = run.metrics
try:
    import pandas
    assert isinstance(m, pandas.DataFrame) and len(m) == len(rows) and "val_mrr" in m.columns
except ImportError:
    assert m == rows
assert run.config["model"]["hidden"] == 16
w = run.weights()
assert w.model["hidden"] == 16 and w.params.dtype == np.float32 and np.all(np.isfinite(w.params))
ex = run.export()
assert ex["state_dict"]["encoder.0.lin.weight"].shape == (16, g.features.shape[1]), sorted(ex["state_dict"])
assert all(np.all(np.isfinite(a)) for a in ex["state_dict"].values()) and ex["model"]["hidden"] == 16
assert ex["embeddings"].shape == (g.num_nodes, 16)
expect_error(lambda: tma.Run("nowhere"), "not a run folder")
shutil.copy("run/best.tmaw", "bad.tmaw")
with open("bad.tmaw", "r+b") as f:
    f.seek(140)
    f.write(b"#")
expect_error(lambda: tma.read_weights("bad.tmaw"), "checksum")

# --- errors carry the command's line and exit code ----------------------------------------------
expect_error(lambda: tma.train("missing.tmag", "run2", steps=3, progress=False), "missing.tmag", "tma train", code=1)
expect_error(lambda: tma.train("g.tmag", "run", steps=3, progress=False), "holds a run", code=2)
expect_error(lambda: tma.launch({"job": "x", "workers": 0}, "run3", progress=False), "workers", code=2)
assert not os.path.exists("run3")
print("the tma package: open_graph, save_graph, train, Run and errors agree with the tma program")
