# make_formats.py OUT CORA_NPZ: writes, with numpy and scipy, the .npz files
# that PyG, scipy and DGL users bring, for tests/graph/test_npz_formats.sh:
#   OUT/good/<case>/g.npz   a graph, stored (np.savez) or deflated
#                           (np.savez_compressed, scipy's default)
#   OUT/good/<case>/ref/    the same graph from the same arrays as an edge list
#                           (edges.txt, meta.txt, features.txt, labels.txt)
#   OUT/bad/<case>/g.npz    a broken file, with `expect`: its error (a regex)
import io
import os
import struct
import sys
import warnings
import zipfile

import numpy as np
import scipy.sparse as sp

out, cora_npz = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(5)


def folder(*parts):
    d = os.path.join(out, *parts)
    os.makedirs(d, exist_ok=True)
    return d


def ref(case, n, pairs, x=None, y=None):
    """The edge-list twin: every pair an edge (in the direction given)."""
    d = folder("good", case, "ref")
    with open(os.path.join(d, "meta.txt"), "w") as f:
        f.write("nodes %d\n" % n)
        if x is not None:
            f.write("feature_dim %d\n" % x.shape[1])
    with open(os.path.join(d, "edges.txt"), "w") as f:
        f.writelines("%d %d\n" % (u, v) for u, v in pairs)
    if x is not None:
        with open(os.path.join(d, "features.txt"), "w") as f:
            for v, c in zip(*np.nonzero(x)):
                f.write("%d %d %s\n" % (v, c, repr(float(x[v, c]))))
    if y is not None:
        with open(os.path.join(d, "labels.txt"), "w") as f:
            f.writelines("%d %d\n" % (v, int(l)) for v, l in enumerate(y))


def good(case, save, n, pairs, feats=None, labels=None, **arrays):
    save(os.path.join(folder("good", case), "g.npz"), **arrays)
    ref(case, n, pairs, feats, labels)


def bad(case, expect, data):
    d = folder("bad", case)
    with open(os.path.join(d, "g.npz"), "wb") as f:
        f.write(data)
    with open(os.path.join(d, "expect"), "w") as f:
        f.write(expect + "\n")


def npz_bytes(save, **arrays):
    b = io.BytesIO()
    save(b, **arrays)
    return b.getvalue()


def member(data, name):
    """(central directory entry offset, local header offset, data offset,
    compressed size) of member name in the zip bytes data."""
    z = zipfile.ZipFile(io.BytesIO(data))
    info = z.getinfo(name)
    cd = data.find(b"PK\x01\x02")
    while cd >= 0 and data[cd + 46:cd + 46 + len(name)] != name.encode():
        cd = data.find(b"PK\x01\x02", cd + 4)
    lh = info.header_offset
    off = lh + 30 + struct.unpack_from("<H", data, lh + 26)[0] + struct.unpack_from("<H", data, lh + 28)[0]
    return cd, lh, off, info.compress_size


# A random graph: 300 nodes, 1200 distinct undirected pairs, 16 features
# (some zero), 5 classes; node 299 has no edge (the node count comes from
# shape or x, not from the largest id).
n, f = 300, 16
pairs = set()
while len(pairs) < 1200:
    u, v = rng.integers(0, n - 1, 2)
    if u != v:
        pairs.add((int(min(u, v)), int(max(u, v))))
pairs = sorted(pairs)
x = rng.random((n, f)).astype(np.float32)
x[x < 0.3] = 0
y = rng.integers(0, 5, n)
src = np.array([p[0] for p in pairs], dtype=np.int64)
dst = np.array([p[1] for p in pairs], dtype=np.int64)

# scipy.sparse.save_npz, compressed (its default) and not, in every format
# tma reads; the adjacency with both directions, with weights.
w = rng.random(len(pairs)) + 0.5
adj = sp.coo_matrix((np.concatenate([w, w]), (np.concatenate([src, dst]), np.concatenate([dst, src]))),
                    shape=(n, n))
for fmt in ("csr", "csc", "coo"):
    for compressed in (True, False):
        case = "scipy-%s-%s" % (fmt, "deflated" if compressed else "stored")
        os.makedirs(folder("good", case), exist_ok=True)
        sp.save_npz(os.path.join(out, "good", case, "g.npz"), adj.asformat(fmt), compressed=compressed)
        ref(case, n, pairs)
# Explicit zeros in a csr matrix (both directions of one pair) are no edge.
z = sp.csr_matrix(adj)
zr = int(np.searchsorted(z.indptr, 0, side="right")) - 1
zc = int(z.indices[0])
z.data[0] = 0
z.data[z.indptr[zc] + int(np.nonzero(z.indices[z.indptr[zc]:z.indptr[zc + 1]] == zr)[0][0])] = 0
os.makedirs(folder("good", "scipy-explicit-zero"), exist_ok=True)
sp.save_npz(os.path.join(out, "good", "scipy-explicit-zero", "g.npz"), z)
ref("scipy-explicit-zero", n, [p for p in pairs if p != (min(zr, zc), max(zr, zc))])

# PyG: edge_index [2, E] int64 with both directions, x [N, F], y [N].
ei = np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])])
for save, kind in ((np.savez, "stored"), (np.savez_compressed, "deflated")):
    good("pyg-" + kind, save, n, pairs, x, y, edge_index=ei, x=x, y=y)
# Without x: the node count is the largest id + 1; int32 ids, one direction.
good("pyg-no-x", np.savez_compressed, int(max(src.max(), dst.max())) + 1, pairs,
     edge_index=np.stack([src, dst]).astype(np.int32))

# Cora (gnn-benchmark's arrays) deflated: large members, many inflate calls.
with np.load(cora_npz) as c:
    np.savez_compressed(os.path.join(folder("good", "cora-deflated"), "g.npz"), **dict(c))

# ---- broken files
stored = npz_bytes(np.savez, edge_index=ei, x=x)
deflated = npz_bytes(np.savez_compressed, edge_index=ei, x=x)
cd, lh, off, csize = member(deflated, "edge_index.npy")
# A corrupt deflate stream: its first block gets the reserved block type 3.
b = bytearray(deflated)
b[off] = 0xFF
bad("deflate-corrupt", r"g\.npz: array edge_index: corrupt deflate data", bytes(b))
# A truncated deflate stream: the directory says half the compressed bytes.
b = bytearray(deflated)
struct.pack_into("<I", b, cd + 20, csize // 2)
bad("deflate-truncated", r"g\.npz: array edge_index: the deflate stream does not end where the zip entry does", bytes(b))
# An entry that claims more than deflate can give.
b = bytearray(deflated)
struct.pack_into("<I", b, cd + 24, 0x7FFFFFF0)
bad("deflate-claims-too-much", r"g\.npz: array edge_index: the zip entry claims 2147483632 bytes", bytes(b))
# The directory's CRC-32 does not match the inflated bytes.
b = bytearray(deflated)
b[cd + 16] ^= 0x01
bad("deflate-crc", r"g\.npz: array edge_index: CRC-32 mismatch", bytes(b))
# The file cut short.
bad("truncated", r"g\.npz: not a readable \.npz \(zip\) file", deflated[:len(deflated) * 2 // 3])
# Wrong dtypes.
bad("pyg-float-ids", r"g\.npz: array edge_index holds floats",
    npz_bytes(np.savez, edge_index=ei.astype(np.float32), x=x))
bad("pyg-complex-x", r"g\.npz: array x: dtype '<c8' is not supported",
    npz_bytes(np.savez_compressed, edge_index=ei, x=x.astype(np.complex64)))
bad("pyg-string-y", r"g\.npz: array y holds byte strings",
    npz_bytes(np.savez, edge_index=ei, x=x, y=np.array([b"a"] * n)))
bad("scipy-format-not-bytes", r"g\.npz: array format must be one byte string",
    npz_bytes(np.savez, format=np.array([1, 2, 3]), shape=np.array([n, n]), indptr=z.indptr, indices=z.indices,
              data=z.data))
# Mismatched shapes.
bad("pyg-transposed", r"g\.npz: array edge_index has shape \(2400, 2\), expected \(2, E\).*not its transpose",
    npz_bytes(np.savez, edge_index=ei.T.copy(), x=x))
bad("pyg-id-beyond-x", r"g\.npz: array edge_index: entry [0-9]+ = 299 is beyond the node count 299",
    npz_bytes(np.savez_compressed, edge_index=np.concatenate([ei, [[0], [299]]], axis=1), x=x[:299]))
bad("pyg-y-length", r"g\.npz: array y has 299 entries, expected 300",
    npz_bytes(np.savez, edge_index=ei, x=x, y=y[:299]))
bad("pyg-x-1d", r"g\.npz: array x must have shape \(N, F\)", npz_bytes(np.savez, edge_index=ei, x=x[:, 0].copy()))
csr = sp.csr_matrix(adj)
bad("scipy-data-length", r"g\.npz: arrays indptr \(301 entries\), indices \(2400\) and data \(2399\) do not match",
    npz_bytes(np.savez_compressed, format=np.array(b"csr"), shape=np.array([n, n]), indptr=csr.indptr,
              indices=csr.indices, data=csr.data[:-1]))
bad("scipy-not-square", r"g\.npz: array shape must be \(n, n\)",
    npz_bytes(np.savez_compressed, format=np.array(b"csr"), shape=np.array([n, n + 1]), indptr=csr.indptr,
              indices=csr.indices, data=csr.data))
bad("scipy-indptr", r"g\.npz: array indptr has 300 entries, expected 301",
    npz_bytes(np.savez_compressed, format=np.array(b"csr"), shape=np.array([n, n]), indptr=csr.indptr[:-1],
              indices=csr.indices, data=csr.data))
dia = io.BytesIO()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "a DIA matrix with 534 diagonals is inefficient": it is the point
    sp.save_npz(dia, sp.dia_matrix(adj))
bad("scipy-dia", r"g\.npz: scipy sparse format 'dia' is not read", dia.getvalue())
bad("unknown-arrays", r"g\.npz: no known arrays \(it holds: a, b\)", npz_bytes(np.savez, a=ei, b=x))
