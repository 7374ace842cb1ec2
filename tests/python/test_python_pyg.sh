#!/bin/bash
# test_python_pyg.sh: a graph out to PyTorch Geometric and DGL and back
# (Graph.to_pyg / to_dgl, save_graph of a PyG Data): the same training edges,
# features and labels.  Needs torch_geometric or dgl in $TMA_PYG_PYTHON (a
# virtual env with `pip install torch_geometric dgl`), else skips (77).
. "$TMA_SRCDIR/tests/lib.sh"
PY=${TMA_PYG_PYTHON:-/usr/bin/python3}
have=$("$PY" - <<'PY' 2>/dev/null
import importlib.util as u
print(" ".join(m for m in ("torch_geometric", "dgl") if u.find_spec(m)))
PY
)
[ -n "$have" ] || skip "neither torch_geometric nor dgl is importable by $PY (set TMA_PYG_PYTHON to a venv with pip install torch_geometric dgl)"
cd "$TMP_ROOT" || hard "cd"
"$TMA_BUILDDIR/tests/gnn/write_test_graph" g.tmag 300 12 0 3 || hard "cannot write the test graph"
TMA_BIN=$TMA_BIN PYTHONPATH=$TMA_SRCDIR/python "$PY" - $have <<'PY' || fail "round trip"
import sys
import numpy as np
import tma

g = tma.open_graph("g.tmag")
want = {(min(a, b), max(a, b)) for a, b in g.edge_index().T.tolist()}
if "torch_geometric" in sys.argv[1:]:
    d = g.to_pyg()
    assert d.num_nodes == g.num_nodes and d.x.shape == g.features.shape
    s = tma.save_graph("pyg.tmag", d, val=10, test=10, negatives=5, seed=2)
    got = {(min(a, b), max(a, b)) for a, b in s.edge_index().T.tolist()}
    got |= {(min(a, b), max(a, b)) for a, b in np.asarray(s.val_edges).tolist() + np.asarray(s.test_edges).tolist()}
    assert got == want and np.array_equal(np.asarray(s.features), np.asarray(g.features))
    assert np.array_equal(np.asarray(s.labels), np.asarray(g.labels))
    print("PyG round trip: %d edges" % len(got))
if "dgl" in sys.argv[1:]:
    h = g.to_dgl()
    u, v = h.edges()
    got = {(min(a, b), max(a, b)) for a, b in zip(u.tolist(), v.tolist())}
    assert h.num_nodes() == g.num_nodes and got == want
    assert np.array_equal(h.ndata["feat"].numpy(), np.asarray(g.features))
    print("DGL: %d edges" % len(got))
PY
echo "graphs went to $have and back unchanged"
