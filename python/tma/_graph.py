"""Graphs: `open_graph` (a .tmag as numpy views) and `save_graph`."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ._format import FEAT_DTYPES, SECTIONS, TmaError, read_tmag_header
from ._run import run_command


@dataclass
class Graph:
    """A .tmag graph.  The arrays are read-only views of the mapped file
    (no copy): `indptr`/`indices` the training graph as CSR (both directions
    of every undirected edge), `features` (nodes x feature_dim: float32, or
    float16 for a graph stored with --feat-dtype f16; a bfloat16 graph's are
    ml_dtypes.bfloat16 when that package is installed, else widened to a
    float32 copy, as numpy has no bfloat16),
    `labels` (or None), `val_edges`/`test_edges` (pairs, shape (n, 2)) with
    their fixed negatives `val_neg`/`test_neg` (n x negatives), and for a
    typed graph `node_types`, `edge_rels` (aligned with `indices`),
    `val_rels`/`test_rels` and the type and relation `names`."""

    path: str
    header: dict
    indptr: np.ndarray
    indices: np.ndarray
    features: np.ndarray
    labels: Optional[np.ndarray]
    val_edges: np.ndarray
    test_edges: np.ndarray
    val_neg: np.ndarray
    test_neg: np.ndarray
    node_types: Optional[np.ndarray] = None
    edge_rels: Optional[np.ndarray] = None
    val_rels: Optional[np.ndarray] = None
    test_rels: Optional[np.ndarray] = None
    type_names: list = field(default_factory=list)
    relation_names: list = field(default_factory=list)

    @property
    def num_nodes(self) -> int:
        return self.header["num_nodes"]

    @property
    def num_train_edges(self) -> int:
        """Undirected training edges (the CSR holds twice as many entries)."""
        return self.header["num_train_edges"]

    @property
    def typed(self) -> bool:
        return self.node_types is not None

    def edge_index(self) -> np.ndarray:
        """The training graph as a (2, 2 x train edges) int64 array, both directions."""
        rows = np.repeat(np.arange(self.num_nodes, dtype=np.int64), np.diff(self.indptr))
        return np.stack([rows, np.asarray(self.indices)])

    def to_pyg(self):
        """A `torch_geometric.data.Data` of the training graph (x, edge_index,
        y when labelled; node_type and edge_type for a typed graph)."""
        try:
            import torch
            from torch_geometric.data import Data
        except ImportError as e:
            raise ImportError("Graph.to_pyg needs PyTorch Geometric: pip install torch_geometric (%s)" % e) from e
        d = Data(x=torch.from_numpy(np.array(self.features, dtype=np.float32)),
                 edge_index=torch.from_numpy(self.edge_index()), num_nodes=self.num_nodes)
        if self.labels is not None:
            d.y = torch.from_numpy(np.array(self.labels, dtype=np.int64))
        if self.typed:
            d.node_type = torch.from_numpy(np.array(self.node_types, dtype=np.int64))
            d.edge_type = torch.from_numpy(np.array(self.edge_rels, dtype=np.int64))
        return d

    def to_dgl(self):
        """A `dgl.DGLGraph` of the training graph (ndata feat, label; ntype
        and etype for a typed graph)."""
        try:
            import dgl
            import torch
        except ImportError as e:
            raise ImportError("Graph.to_dgl needs DGL: pip install dgl (%s)" % e) from e
        ei = self.edge_index()
        g = dgl.graph((torch.from_numpy(ei[0]), torch.from_numpy(ei[1])), num_nodes=self.num_nodes)
        g.ndata["feat"] = torch.from_numpy(np.array(self.features, dtype=np.float32))
        if self.labels is not None:
            g.ndata["label"] = torch.from_numpy(np.array(self.labels, dtype=np.int64))
        if self.typed:
            g.ndata["ntype"] = torch.from_numpy(np.array(self.node_types, dtype=np.int64))
            g.edata["etype"] = torch.from_numpy(np.array(self.edge_rels, dtype=np.int64))
        return g


def _features(raw: np.ndarray, feat_dtype: int) -> np.ndarray:
    """The features section as numpy reads it: a view, but for bfloat16
    without ml_dtypes (a float32 copy, exact)."""
    if FEAT_DTYPES[feat_dtype][0] != "bf16":
        return raw
    try:
        import ml_dtypes
        return raw.view(ml_dtypes.bfloat16)
    except ImportError:
        return (raw.astype(np.uint32) << 16).view(np.float32)


def open_graph(path: str) -> Graph:
    """Opens a .tmag file (docs/formats.md): its header is checked (magic,
    version, checksum, the file's size, each section's bounds); the arrays
    are mapped read-only.  `tma info` also verifies every section's checksum."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(4096)
    h = read_tmag_header(path, head)
    if h["file_bytes"] != size:
        raise TmaError("%s: %d bytes, the header says %d (a truncated or extended file)" % (path, size, h["file_bytes"]))
    arrays = {}
    for sid, (esize, off, count) in h["sections"].items():
        if sid not in SECTIONS:
            continue
        name, dtype = SECTIONS[sid]
        if name == "features":
            dtype = FEAT_DTYPES[h["feat_dtype"]][1]
        if np.dtype(dtype).itemsize != esize or off + esize * count > size:
            raise TmaError("%s: section %d (%s) does not fit the file" % (path, sid, name))
        arrays[name] = np.memmap(path, dtype=dtype, mode="r", offset=off, shape=(count,)) if count else \
            np.zeros(0, dtype=dtype)
    n, fd = h["num_nodes"], h["feature_dim"]
    need = ["indptr", "indices", "features", "val_edges", "test_edges", "val_neg", "test_neg"]
    missing = [k for k in need if k not in arrays]
    if missing:
        raise TmaError("%s: sections missing: %s" % (path, ", ".join(missing)))
    neg = h["num_negatives"]
    names = bytes(arrays["names"]).split(b"\0")[:-1] if "names" in arrays else []
    t = h["num_node_types"]
    return Graph(
        path=path, header=h, indptr=arrays["indptr"], indices=arrays["indices"],
        features=_features(arrays["features"], h["feat_dtype"]).reshape(n, fd),
        labels=arrays.get("labels"),
        val_edges=arrays["val_edges"].reshape(-1, 2), test_edges=arrays["test_edges"].reshape(-1, 2),
        val_neg=arrays["val_neg"].reshape(h["num_val"], neg), test_neg=arrays["test_neg"].reshape(h["num_test"], neg),
        node_types=arrays.get("node_types"), edge_rels=arrays.get("edge_rels"),
        val_rels=arrays.get("val_rels"), test_rels=arrays.get("test_rels"),
        type_names=[s.decode() for s in names[:t]], relation_names=[s.decode() for s in names[t:]],
    )


def save_graph(path: str, edge_index, x=None, y=None, *, val: Optional[int] = None, test: Optional[int] = None,
               negatives: Optional[int] = None, seed: Optional[int] = None, tma_bin: Optional[str] = None) -> Graph:
    """Writes a graph given as arrays (PyG's `edge_index` (2, E), node
    features `x` (N, F), labels `y` (N,)) to a .tmag file through
    `tma import`, which cleans it (self-loops and duplicates dropped, both
    directions kept) and draws the validation/test split and negatives
    (`val`, `test`, `negatives`, `seed` as its flags).  A PyG `Data` may be
    passed as `edge_index` (its x and y are used).  Returns the opened graph."""
    if hasattr(edge_index, "edge_index"):  # a torch_geometric Data
        data = edge_index
        edge_index = data.edge_index
        x = getattr(data, "x", None) if x is None else x
        y = getattr(data, "y", None) if y is None else y
    arrays = {"edge_index": np.asarray(_numpy(edge_index), dtype=np.int64)}
    if arrays["edge_index"].ndim != 2 or arrays["edge_index"].shape[0] != 2:
        raise ValueError("edge_index must have shape (2, E), got %s" % (arrays["edge_index"].shape,))
    if x is not None:
        arrays["x"] = np.asarray(_numpy(x), dtype=np.float32)
    if y is not None:
        arrays["y"] = np.asarray(_numpy(y), dtype=np.int64)
    flags = []
    for name, v in (("val", val), ("test", test), ("negatives", negatives), ("seed", seed)):
        if v is not None:
            flags += ["--" + name, str(int(v))]
    with tempfile.TemporaryDirectory(prefix="tma-save-") as tmp:
        npz = os.path.join(tmp, "graph.npz")
        np.savez(npz, **arrays)
        run_command(["import", npz, "-o", path] + flags, tma_bin=tma_bin, quiet=True)
    return open_graph(path)


def _numpy(a):
    """A numpy view of a numpy array or a torch tensor."""
    if hasattr(a, "detach"):
        return a.detach().cpu().numpy()
    return a
