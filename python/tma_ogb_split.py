#!/usr/bin/env python3
"""tma-ogb-split: converts an OGB link dataset's official split for `tma import`.

OGB ships the split of a link dataset (ogbl-citation2 and datasets in its
layout) as PyTorch `torch.save` files beside raw/:

    split/<name>/train.pt  {'source_node': [E], 'target_node': [E]}
    split/<name>/valid.pt  {'source_node': [N], 'target_node': [N],
                            'target_node_neg': [N, K]}
    split/<name>/test.pt   (as valid.pt)

They are zip archives of Python pickles, so they are read here with torch
(torch.load with weights_only, which loads tensors and plain containers and
refuses arbitrary objects) and written in a plain little-endian form that
tma's C importer reads (docs/formats.md, "The OGB split converter's output"):

    char[8] magic "TMAOGBS1"
    u64     train edges (the count in train.pt)
    u64     N_valid, u64 K_valid, u64 N_test, u64 K_test
    i64     valid source[N_valid], valid target[N_valid], valid negatives[N_valid * K_valid]
    i64     test source[N_test], test target[N_test], test negatives[N_test * K_test]

Usage: tma-ogb-split SPLIT_DIR OUT [--num-nodes N]
Exit status: 0 written; 1 bad input (named on stderr); 2 usage; 3 torch missing.
"""
import os
import struct
import sys

MAGIC = b"TMAOGBS1"
PROG = "tma-ogb-split"


class BadInput(Exception):
    pass


def load(path, torch):
    if not os.path.isfile(path):
        raise BadInput(f"{path}: missing (an OGB split folder holds train.pt, valid.pt and test.pt)")
    try:
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except TypeError:  # a torch before 1.13 has no weights_only
            obj = torch.load(path, map_location="cpu")
    except Exception as e:  # torch raises many types for a bad file
        raise BadInput(f"{path}: not a readable torch.save file of tensors ({type(e).__name__}: {e})")
    if not isinstance(obj, dict):
        raise BadInput(f"{path}: holds a {type(obj).__name__}, expected a dict of tensors "
                       "('source_node', 'target_node'[, 'target_node_neg'])")
    return obj


def tensor(obj, path, key, ndim, torch, num_nodes):
    if key not in obj:
        hint = ""
        if "edge" in obj:
            hint = " (it holds 'edge': the ogbl-collab/ppa layout, which tma does not read; " \
                   "tma reads the ogbl-citation2 layout)"
        raise BadInput(f"{path}: no '{key}' in it{hint}; keys: {sorted(map(str, obj))}")
    t = obj[key]
    if not isinstance(t, torch.Tensor):
        raise BadInput(f"{path}: '{key}' is a {type(t).__name__}, expected a tensor")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise BadInput(f"{path}: '{key}' has dtype {t.dtype}, expected an integer dtype (OGB writes int64)")
    if t.dim() != ndim:
        raise BadInput(f"{path}: '{key}' has shape {tuple(t.shape)}, expected {ndim} dimension(s)")
    t = t.to(torch.int64).contiguous()
    if t.numel():
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or (num_nodes is not None and hi >= num_nodes):
            bad = lo if lo < 0 else hi
            idx = int(((t == bad).nonzero())[0][0]) if t.dim() == 1 else \
                tuple(int(x) for x in (t == bad).nonzero()[0])
            raise BadInput(f"{path}: '{key}'[{idx}] = {bad} is outside the graph's node ids "
                           f"[0, {num_nodes if num_nodes is not None else 'n'})")
    return t


def edges(obj, path, torch, num_nodes, with_neg):
    s = tensor(obj, path, "source_node", 1, torch, num_nodes)
    t = tensor(obj, path, "target_node", 1, torch, num_nodes)
    if s.shape[0] != t.shape[0]:
        raise BadInput(f"{path}: 'source_node' has {s.shape[0]} entries but 'target_node' {t.shape[0]}")
    if not with_neg:
        return s, t, None
    neg = tensor(obj, path, "target_node_neg", 2, torch, num_nodes)
    if neg.shape[0] != s.shape[0] or neg.shape[1] < 1:
        raise BadInput(f"{path}: 'target_node_neg' has shape {tuple(neg.shape)}, expected "
                       f"({s.shape[0]}, K): K >= 1 negatives for each of the {s.shape[0]} edges")
    if s.shape[0] < 1:
        raise BadInput(f"{path}: no evaluation edges in it")
    return s, t, neg


def le_bytes(t):
    return t.numpy().astype("<i8", copy=False).tobytes()


def main(argv):
    args, num_nodes = [], None
    it = iter(argv)
    for a in it:
        if a == "--num-nodes":
            try:
                num_nodes = int(next(it))
            except (StopIteration, ValueError):
                print(f"{PROG}: --num-nodes needs a whole number", file=sys.stderr)
                return 2
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            args.append(a)
    if len(args) != 2:
        print(f"usage: {PROG} SPLIT_DIR OUT [--num-nodes N]", file=sys.stderr)
        return 2
    split, out = args
    try:
        import torch
    except ImportError as e:
        print(f"{PROG}: reading the OGB split in {split} (PyTorch .pt files) needs PyTorch for "
              f"{sys.executable}, which cannot import it ({e}): install the Debian package python3-torch, "
              "or `pip install torch`, or point TMA_PYTHON at a python3 that has it", file=sys.stderr)
        return 3
    try:
        if not os.path.isdir(split):
            raise BadInput(f"{split}: no such folder")
        tr = load(os.path.join(split, "train.pt"), torch)
        ts, _, _ = edges(tr, os.path.join(split, "train.pt"), torch, num_nodes, False)
        parts = []
        head = [ts.shape[0]]
        for name in ("valid", "test"):
            path = os.path.join(split, name + ".pt")
            s, t, neg = edges(load(path, torch), path, torch, num_nodes, True)
            head += [s.shape[0], neg.shape[1]]
            parts += [s, t, neg]
    except BadInput as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    tmp = out + ".part"
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC)
            f.write(struct.pack("<5Q", *head))
            for p in parts:
                f.write(le_bytes(p))
        os.replace(tmp, out)
    except (OSError, RuntimeError) as e:  # a full disk; a torch built without numpy
        print(f"{PROG}: writing {out}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
