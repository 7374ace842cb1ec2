# make_npz.py: writes the .npz cases of the bad-input corpus and the good
# dtype fixtures (tests/graph/data/).  Run once with a Python that has numpy
# (/usr/bin/python3 here); the outputs are committed, the tests do not run it.
import os
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
data = os.path.join(here, "..", "data")

# A 4-node graph: 0-1, 1-2, 2-3, 0-3 (one direction each).
indptr = np.array([0, 2, 3, 4, 4], dtype=np.int32)
indices = np.array([1, 3, 2, 3], dtype=np.int32)
shape = np.array([4, 4], dtype=np.int64)


def case(name, expect, save=np.savez, **arrays):
    d = os.path.join(here, name)
    os.makedirs(d, exist_ok=True)
    save(os.path.join(d, "g.npz"), **arrays)
    with open(os.path.join(d, "expect"), "w") as f:
        f.write(expect + "\n")
    return os.path.join(d, "g.npz")


case("npz-missing-array", r"g\.npz: array adj_indices is missing", adj_indptr=indptr, adj_shape=shape)
case("npz-fortran-order", r"g\.npz: array attr_matrix is stored in Fortran",
     adj_indptr=indptr, adj_indices=indices, adj_shape=shape,
     attr_matrix=np.asfortranarray(np.arange(12, dtype=np.float32).reshape(4, 3)))
case("npz-id-beyond", r"g\.npz: array adj_indices: entry 2 = 9 is beyond the node count 4",
     adj_indptr=indptr, adj_indices=np.array([1, 3, 9, 3], dtype=np.int32), adj_shape=shape)
case("npz-negative-id", r"g\.npz: array adj_indices: entry 1 = -2 is negative",
     adj_indptr=indptr, adj_indices=np.array([1, -2, 2, 3], dtype=np.int64), adj_shape=shape)
case("npz-float-indices", r"g\.npz: array adj_indices holds floats",
     adj_indptr=indptr, adj_indices=indices.astype(np.float32), adj_shape=shape)
case("npz-labels-length", r"g\.npz: array labels has 3 entries, expected 4",
     adj_indptr=indptr, adj_indices=indices, adj_shape=shape, labels=np.array([0, 1, 0], dtype=np.int8))
case("npz-bad-indptr", r"g\.npz: array adj_indptr: entry 2 = 1 breaks the CSR row pointers",
     adj_indptr=np.array([0, 2, 1, 4, 4], dtype=np.int32), adj_indices=indices, adj_shape=shape)
case("npz-big-endian", r"g\.npz: array adj_indices: dtype '>i4' is not supported",
     adj_indptr=indptr, adj_indices=indices.astype(">i4"), adj_shape=shape)
p = case("npz-truncated", r"g\.npz: not a readable \.npz \(zip\) file",
         adj_indptr=indptr, adj_indices=indices, adj_shape=shape)
b = open(p, "rb").read()
open(p, "wb").write(b[: len(b) // 2])
p = case("npz-corrupt", r"g\.npz: array adj_indices: CRC-32 mismatch",
         adj_indptr=indptr, adj_indices=indices, adj_shape=shape)
b = bytearray(open(p, "rb").read())
b[b.find(b"\x93NUMPY", b.find(b"adj_indices.npy")) + 130] ^= 0xFF
open(p, "wb").write(bytes(b))

# Good fixtures: the same graph in every dtype tma reads, with features and
# labels, next to the equivalent edge-list folder.
os.makedirs(data, exist_ok=True)
feat = np.array([[1, 0, 0], [0, 2, 0], [0, 0, 0.5], [1, 1, 0]], dtype=np.float64)
np.savez(os.path.join(data, "small-dtypes.npz"),
         adj_indptr=indptr.astype(np.int64), adj_indices=indices.astype(np.uint16),
         adj_data=np.ones(4, dtype=np.bool_), adj_shape=shape,
         attr_matrix=feat, labels=np.array([0, 1, 1, 0], dtype=np.uint8))
np.savez(os.path.join(data, "small-sparse.npz"),
         adj_indptr=indptr, adj_indices=indices.astype(np.int8), adj_shape=shape.astype(np.int32),
         attr_indptr=np.array([0, 1, 2, 3, 5], dtype=np.int64),
         attr_indices=np.array([0, 1, 2, 0, 1], dtype=np.int64),
         attr_data=np.array([1, 2, 0.5, 1, 1], dtype=np.float32),
         attr_shape=np.array([4, 3], dtype=np.int64), labels=np.array([0, 1, 1, 0], dtype=np.int32))
