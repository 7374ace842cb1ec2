"""ogb_fixture.py: a small OGB link dataset with an official split, written
with torch in the exact layout of ogbl-citation2 (raw/*.csv.gz plus
split/time/{train,valid,test}.pt), and the check that a .tmag imported from
it carries that split and every negative exactly.

  ogb_fixture.py make DIR [BREAK]   writes the dataset (BREAK: one defect, below)
  ogb_fixture.py check DIR G.tmag   compares the .tmag's sections with the .pt files

The evaluation edges are more than tma's own cap of 2,000, and the
negatives are drawn as OGB draws them (uniform over all nodes), so some are
the head itself, a neighbour of it, or the positive tail.
"""
import gzip
import os
import struct
import sys

import numpy as np
import torch

NODES, TRAIN, VALID, TEST, K, DIM = 3000, 9000, 2050, 300, 1000, 8


def make(root, defect):
    global VALID
    if defect:
        VALID = 100  # the refusals need no more, and the machine is shared
    rng = np.random.default_rng(7)
    pairs, seen = [], set()
    while len(pairs) < TRAIN + VALID + TEST:
        u, v = (int(x) for x in rng.integers(0, NODES, 2))
        if u != v and (min(u, v), max(u, v)) not in seen:
            seen.add((min(u, v), max(u, v)))
            pairs.append((u, v))
    pairs = np.array(pairs, dtype=np.int64)
    train, valid, test = pairs[:TRAIN], pairs[TRAIN:TRAIN + VALID], pairs[TRAIN + VALID:]
    raw = os.path.join(root, "raw")
    split = os.path.join(root, "split", "time")
    os.makedirs(raw)
    os.makedirs(split)
    with gzip.open(os.path.join(raw, "edge.csv.gz"), "wt") as f:
        f.writelines(f"{u},{v}\n" for u, v in train)
    with gzip.open(os.path.join(raw, "node-feat.csv.gz"), "wt") as f:
        for row in rng.standard_normal((NODES, DIM)).astype(np.float32):
            f.write(",".join(f"{x:.6f}" for x in row) + "\n")
    with gzip.open(os.path.join(raw, "num-node-list.csv.gz"), "wt") as f:
        f.write(f"{NODES}\n")
    with gzip.open(os.path.join(raw, "num-edge-list.csv.gz"), "wt") as f:
        f.write(f"{TRAIN}\n")

    def ev(e):
        neg = rng.integers(0, NODES, (len(e), K))
        # What OGB's uniform draws do produce: the head, a training
        # neighbour of it, the positive tail itself.
        adj = {}
        for u, v in train:
            adj.setdefault(int(u), []).append(int(v))
            adj.setdefault(int(v), []).append(int(u))
        for i in range(0, len(e), 7):
            neg[i, 0] = e[i, 0]
            neg[i, 1] = e[i, 1]
            if adj.get(int(e[i, 0])):
                neg[i, 2] = adj[int(e[i, 0])][0]
        return {"source_node": torch.from_numpy(e[:, 0].copy()), "target_node": torch.from_numpy(e[:, 1].copy()),
                "target_node_neg": torch.from_numpy(neg)}

    parts = {"train": {"source_node": torch.from_numpy(train[:, 0].copy()),
                       "target_node": torch.from_numpy(train[:, 1].copy())},
             "valid": ev(valid), "test": ev(test)}
    # One defect each, for the refusal tests.
    if defect == "float-dtype":
        parts["valid"]["source_node"] = parts["valid"]["source_node"].float()
    elif defect == "neg-1d":
        parts["test"]["target_node_neg"] = parts["test"]["target_node_neg"][:, 0].contiguous()
    elif defect == "neg-rows":
        parts["test"]["target_node_neg"] = parts["test"]["target_node_neg"][:-1].contiguous()
    elif defect == "id-range":
        parts["test"]["target_node"][5] = NODES + 4
    elif defect == "negative-id":
        parts["valid"]["target_node_neg"][3, 9] = -2
    elif defect == "k-differs":
        parts["test"]["target_node_neg"] = parts["test"]["target_node_neg"][:, :500].contiguous()
    elif defect == "train-edge":
        parts["valid"]["source_node"][0], parts["valid"]["target_node"][0] = int(train[0, 1]), int(train[0, 0])
    elif defect == "no-neg-key":
        del parts["test"]["target_node_neg"]
    elif defect not in ("", "missing-test", "not-torch"):
        sys.exit(f"unknown defect {defect}")
    for name, obj in parts.items():
        if defect == "missing-test" and name == "test":
            continue
        if defect == "not-torch" and name == "valid":
            with open(os.path.join(split, "valid.pt"), "wb") as f:
                f.write(b"this is not a torch.save file\n")
            continue
        torch.save(obj, os.path.join(split, name + ".pt"))


def read_tmag(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"TMAGRAPH", "not a .tmag"
    flags, nodes = struct.unpack_from("<I", data, 20)[0], struct.unpack_from("<Q", data, 24)[0]
    num_val, num_test = struct.unpack_from("<QQ", data, 48)
    negatives, nsec = struct.unpack_from("<I", data, 68)[0], struct.unpack_from("<I", data, 84)[0]
    secs = {}
    for i in range(nsec):
        sid, esz, off, cnt, _crc, _r = struct.unpack_from("<IIQQII", data, 168 + 32 * i)
        secs[sid] = np.frombuffer(data, dtype="<i8" if esz == 8 else "<f4", count=cnt, offset=off)
    return dict(flags=flags, nodes=nodes, num_val=num_val, num_test=num_test, negatives=negatives, secs=secs)


def check(root, tmag):
    g = read_tmag(tmag)
    split = os.path.join(root, "split", "time")
    failures = []
    if not g["flags"] & 2:
        failures.append(f"header flags {g['flags']:#x}: bit 1 (the split is given) is not set")
    if g["nodes"] != NODES:
        failures.append(f"nodes {g['nodes']}, expected {NODES}")
    for name, edge_sec, neg_sec, count in (("valid", 5, 7, "num_val"), ("test", 6, 8, "num_test")):
        pt = torch.load(os.path.join(split, name + ".pt"))
        s, t, neg = (pt[k].numpy() for k in ("source_node", "target_node", "target_node_neg"))
        if g[count] != len(s):
            failures.append(f"{name}: {g[count]} edges in the .tmag, {len(s)} in {name}.pt")
            continue
        if g["negatives"] != neg.shape[1]:
            failures.append(f"{name}: {g['negatives']} negatives per edge, {neg.shape[1]} in {name}.pt")
            continue
        pairs = g["secs"][edge_sec].reshape(-1, 2)
        if not (np.array_equal(pairs[:, 0], s) and np.array_equal(pairs[:, 1], t)):
            bad = int(np.nonzero((pairs[:, 0] != s) | (pairs[:, 1] != t))[0][0])
            failures.append(f"{name}: edge {bad} is {tuple(pairs[bad])} in the .tmag, ({s[bad]}, {t[bad]}) in the .pt")
        got = g["secs"][neg_sec].reshape(len(s), -1)
        if not np.array_equal(got, neg):
            bad = np.argwhere(got != neg)[0]
            failures.append(f"{name}: negative {tuple(bad)} is {got[tuple(bad)]}, {neg[tuple(bad)]} in the .pt")
    # The training graph is raw/edge.csv.gz, both directions, nothing removed.
    indptr, indices = g["secs"][1], g["secs"][2]
    if len(indices) != 2 * TRAIN:
        failures.append(f"{len(indices) // 2} training edges, expected the {TRAIN} of raw/edge.csv.gz")
    else:
        tr = torch.load(os.path.join(split, "train.pt"))
        u, v = tr["source_node"].numpy(), tr["target_node"].numpy()
        deg = np.bincount(np.concatenate([u, v]), minlength=NODES)
        if not np.array_equal(np.diff(indptr), deg):
            failures.append("the training CSR's degrees differ from train.pt's")
    if failures:
        sys.exit("\n".join(failures))
    print(f"valid {g['num_val']} + test {g['num_test']} edges, {g['negatives']} negatives each: identical")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
