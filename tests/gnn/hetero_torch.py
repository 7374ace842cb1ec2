#!/usr/bin/env python3
"""hetero_torch.py: the PyTorch oracle for tma's heterogeneous layers.

Reads what hetero_dump wrote and recomputes, in float64 with autograd and
from the definitions (not tma's formulation):
  - RGCN with basis decomposition (Schlichtkrull et al. 2018):
      W_r = sum_b a[r, b] V_b
      z_v = h_v W_self + sum_r sum_{u in N_r(v)} h_u W_r / |N_r(v)| + b
    with |N_r(v)| counted here from the edge list (so tma's gnn_rgcn_norm
    is checked too), each message formed with its relation's own W_r; the
    forward and the gradients of H, the bases V, the coefficients a, W_self
    and b from an upstream gradient dZ, against tma's backward by scatter
    and through the transposed block;
  - DistMult: score = sum_k h_u[k] w_r[k] h_v[k] and the gradients of H and
    the relation embeddings;
  - the per-node-type input projection: out_i = x_i W_t(i) + b_t(i) with
    each type's own feature width, and the gradients of every W_t, b_t.
Every tensor must agree within 1e-5 relative to its largest entry.  Exits 1
on any disagreement, printing each comparison.
"""
import json
import os
import sys

import numpy as np
import torch

TOL = 1e-5


def load(d, name, dtype, shape=None):
    a = np.fromfile(os.path.join(d, name), dtype=dtype)
    return a.reshape(shape) if shape is not None else a


def f64(d, name, shape):
    return torch.tensor(load(d, name + ".f32", np.float32).astype(np.float64).reshape(shape))


def idx(d, name, dtype=np.int32):
    return torch.tensor(load(d, name, dtype).astype(np.int64))


class Checker:
    def __init__(self, case):
        self.case = case
        self.failed = 0

    def __call__(self, what, got, ref):
        ref = ref.detach()
        scale = max(ref.abs().max().item() if ref.numel() else 0.0, 1e-30)
        err = (got - ref).abs().max().item() if ref.numel() else 0.0
        ok = err <= TOL * scale and not torch.isnan(got).any().item()
        print(f"{self.case}: {what}: max error {err:.3g} (scale {scale:.3g}) {'ok' if ok else 'FAIL'}")
        self.failed += not ok


def check_rgcn(d, m, chk):
    nd, ns, ne = m["num_dst"], m["num_src"], m["num_edges"]
    fin, fout, nb, nr = m["in"], m["out"], m["bases"], m["relations"]
    indptr = idx(d, "rgcn_indptr.i32")
    src = idx(d, "rgcn_indices.i32")
    rel = idx(d, "rgcn_rel.i32")
    dst = torch.repeat_interleave(torch.arange(nd), indptr[1:] - indptr[:-1])
    assert dst.numel() == ne == src.numel() == rel.numel()
    H = f64(d, "rgcn_H", (ns, fin)).requires_grad_()
    V = f64(d, "rgcn_V", (fin, nb * fout)).requires_grad_()
    coef = f64(d, "rgcn_coef", (nr, nb)).requires_grad_()
    Ws = f64(d, "rgcn_W_self", (fin, fout)).requires_grad_()
    b = f64(d, "rgcn_b", (1, fout)).requires_grad_()
    dZ = f64(d, "rgcn_dZ", (nd, fout))
    bases = V.reshape(fin, nb, fout).permute(1, 0, 2)  # [B, in, out]: V_b
    W = torch.einsum("rb,bio->rio", coef, bases)  # [R, in, out]: W_r
    count = torch.zeros(nd, nr, dtype=torch.float64).index_put_((dst, rel), torch.ones(ne, dtype=torch.float64),
                                                                accumulate=True)
    msg = torch.bmm(H[src].unsqueeze(1), W[rel]).squeeze(1) / count[dst, rel].unsqueeze(1)
    Z = H[:nd] @ Ws + torch.zeros(nd, fout, dtype=torch.float64).index_add(0, dst, msg) + b
    (Z * dZ).sum().backward()
    for pre, how in (("rgcn_s", "scatter"), ("rgcn_t", "transpose")):
        chk(f"rgcn Z ({how})", f64(d, pre + "_Z", (nd, fout)), Z)
        chk(f"rgcn dH ({how})", f64(d, pre + "_dH", (ns, fin)), H.grad)
        chk(f"rgcn dV bases ({how})", f64(d, pre + "_dV", (fin, nb * fout)), V.grad)
        chk(f"rgcn dcoef ({how})", f64(d, pre + "_dcoef", (nr, nb)), coef.grad)
        chk(f"rgcn dW_self ({how})", f64(d, pre + "_dW_self", (fin, fout)), Ws.grad)
        chk(f"rgcn db ({how})", f64(d, pre + "_db", (1, fout)), b.grad)


def check_distmult(d, m, chk):
    n, dim, npairs, nr = m["nodes"], m["dim"], m["pairs"], m["relations"]
    hi, ti, rel = idx(d, "dm_head.i32"), idx(d, "dm_tail.i32"), idx(d, "dm_rel.i32")
    H = f64(d, "dm_H", (n, dim)).requires_grad_()
    Wr = f64(d, "dm_Wr", (nr, dim)).requires_grad_()
    ds = f64(d, "dm_dscore", (npairs,))
    score = (H[hi] * Wr[rel] * H[ti]).sum(1)
    (score * ds).sum().backward()
    chk("distmult score", f64(d, "dm_score", (npairs,)), score)
    chk("distmult dH", f64(d, "dm_dH", (n, dim)), H.grad)
    chk("distmult dWr", f64(d, "dm_dWr", (nr, dim)), Wr.grad)


def check_typeproj(d, m, chk):
    n, dim, rows, dims = m["n"], m["dim"], m["rows_per_type"], m["type_dims"]
    types, local = idx(d, "tp_types.i32"), idx(d, "tp_local.i64", np.int64)
    X = [f64(d, f"tp_X{t}", (rows, dt)) for t, dt in enumerate(dims)]
    W = [f64(d, f"tp_W{t}", (dt, dim)).requires_grad_() for t, dt in enumerate(dims)]
    b = [f64(d, f"tp_b{t}", (1, dim)).requires_grad_() for t in range(len(dims))]
    dOut = f64(d, "tp_dOut", (n, dim))
    out = torch.stack([(X[t][local[i]] @ W[t] + b[t][0]) for i, t in enumerate(types.tolist())])
    (out * dOut).sum().backward()
    chk("type projection out", f64(d, "tp_out", (n, dim)), out)
    for t, dt in enumerate(dims):
        chk(f"type projection dW[{t}]", f64(d, f"tp_dW{t}", (dt, dim)), W[t].grad)
        chk(f"type projection db[{t}]", f64(d, f"tp_db{t}", (1, dim)), b[t].grad)


def main(dirs):
    failed = 0
    for d in dirs:
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
        chk = Checker(f"{os.path.basename(d)} ({meta['backend']})")
        check_rgcn(d, meta["rgcn"], chk)
        check_distmult(d, meta["distmult"], chk)
        check_typeproj(d, meta["typeproj"], chk)
        failed += chk.failed
    if failed:
        print(f"{failed} comparisons disagree with PyTorch")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
