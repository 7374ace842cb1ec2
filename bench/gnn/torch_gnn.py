#!/usr/bin/env python3
"""torch_gnn.py: the PyTorch implementation that tma's GNN engine is measured against.

The same model (GCN / GraphSAGE-mean / MLP encoder with LayerNorm + PReLU
between layers, decoder MLP on r_u * r_v, BCE on one uniform negative tail per
positive edge), the same sampler (positive edges drawn uniformly from the CSR
entries, GraphSAGE sampling without replacement with the same fan-outs, the
batch's own edges removed from message passing, the same GCN / mean edge
weights), the same batch size, thread count, Adam and clipping, and the same
evaluation (layer-wise full-neighbourhood inference, then every validation edge
against its fixed negatives, ties counted against the positive).

It is written the way one writes it well in plain PyTorch: numpy does the
sampling vectorised; blocks are torch sparse COO matrices (torch.sparse.mm,
which has autograd); sparse input features go through F.embedding_bag
(projection of a bag of features, the fastest sparse product with autograd
here: see docs/benchmarks.md), dense ones through X[ids] and matmul; a layer
projects before aggregating when its input is wider than its output, as DGL
does.  Reads the .tmag file directly (docs/formats.md).

  torch_gnn.py G.tmag [--encoder sage] [--batch 1024] [--threads 2] [--steps N | --seconds S]
                      [--hidden 256] [--fanouts 25,10] [--no-eval]

Prints one JSON object like bench_gnn.
"""
import json
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import gnn_args

# ---------------------------------------------------------------- .tmag


def read_tmag(path):
    """The sections of a .tmag file as numpy arrays over a memory map (dgl_gnn.py uses it too)."""
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    hdr = raw[:4096].tobytes()
    if hdr[:8] != b"TMAGRAPH":
        sys.exit(f"{path}: not a .tmag file")
    u32 = lambda o: int.from_bytes(hdr[o : o + 4], "little")
    u64 = lambda o: int.from_bytes(hdr[o : o + 8], "little")
    g = {"nodes": u64(24), "train_edges": u64(40), "num_val": u64(48), "num_test": u64(56),
         "feature_dim": u32(64), "negatives": u32(68)}
    dtypes = {1: np.int64, 2: np.int64, 3: np.float32, 4: np.int32, 5: np.int64, 6: np.int64, 7: np.int64,
              8: np.int64, 9: np.int64}
    names = {1: "indptr", 2: "indices", 3: "features", 5: "val_edges", 6: "test_edges", 7: "val_neg", 8: "test_neg"}
    for i in range(u32(84)):
        o = 168 + 32 * i
        sid, off, cnt = u32(o), u64(o + 8), u64(o + 16)
        if sid in names:
            g[names[sid]] = np.frombuffer(raw, dtype=dtypes[sid], count=cnt, offset=off)
    g["features"] = g["features"].reshape(g["nodes"], g["feature_dim"])
    return g


# ---------------------------------------------------------------- sampling


class Sampler:
    """GraphSAGE sampling into blocks over one growing node list (seeds first)."""

    def __init__(self, g, fanouts, norm, self_loops, rng):
        self.indptr, self.indices, self.n = g["indptr"], g["indices"], g["nodes"]
        self.deg = np.diff(self.indptr)
        self.fanouts, self.norm, self.self_loops, self.rng = fanouts, norm, self_loops, rng
        self.local_of = np.full(self.n, -1, dtype=np.int64)

    def _add(self, cand):
        fresh = cand[self.local_of[cand] < 0]
        if len(fresh):
            # first occurrences without a sort: write indices backwards, the first one wins
            idx = np.arange(len(fresh))
            self.local_of[fresh[::-1]] = -2 - idx[::-1]
            fresh = fresh[self.local_of[fresh] == -2 - idx]
            self.local_of[fresh] = np.arange(self.count, self.count + len(fresh))
            self.nodes.append(fresh)
            self.count += len(fresh)
        return self.local_of[cand]

    def sample(self, seeds, excl_keys):
        self.nodes, self.count = [], 0
        seed_local = self._add(seeds)
        B = len(seeds) // 3
        endpoint = np.zeros(self.n, dtype=bool)
        endpoint[seeds[: 2 * B]] = True
        blocks = []
        for fanout in self.fanouts:
            n_dst = self.count
            dst = np.concatenate(self.nodes)
            start, deg = self.indptr[dst], self.deg[dst]
            rep = np.repeat(np.arange(n_dst), deg)
            pos = np.arange(len(rep)) - np.repeat(np.cumsum(deg) - deg, deg) + start[rep]
            cand = self.indices[pos]
            # only edges at an endpoint of a positive edge can be excluded
            check = np.flatnonzero(endpoint[dst[rep]])
            a, b = np.minimum(dst[rep[check]], cand[check]), np.maximum(dst[rep[check]], cand[check])
            drop = check[np.isin(a * self.n + b, excl_keys)]
            if len(drop):
                keep = np.ones(len(rep), dtype=bool)
                keep[drop] = False
                rep, cand = rep[keep], cand[keep]
            c = np.bincount(rep, minlength=n_dst)
            k = c if fanout < 0 else np.minimum(c, fanout)
            if (k < c).any():
                # without replacement: order each row by random keys (rows stay in order), keep the first k
                order = np.argsort(rep + self.rng.random(len(rep)))
                rep, cand = rep[order], cand[order]
                rank = np.arange(len(rep)) - np.repeat(np.cumsum(c) - c, c)
                sel = rank < k[rep]
                rep, cand = rep[sel], cand[sel]
            src = self._add(cand)
            if self.norm == "gcn":
                di = self.deg[dst].astype(np.float64) + 1.0
                w = (c[rep] / np.maximum(k[rep], 1)) / np.sqrt(di[rep] * (self.deg[cand] + 1.0))
            else:
                w = 1.0 / k[rep]
            if self.self_loops:
                rows = np.concatenate([np.arange(n_dst), rep])
                cols = np.concatenate([np.arange(n_dst), src])
                w = np.concatenate([1.0 / (self.deg[dst] + 1.0), w])
            else:
                rows, cols = rep, src
            blocks.append((rows, cols, w.astype(np.float32), n_dst, self.count))
        nodes = np.concatenate(self.nodes)
        self.local_of[nodes] = -1
        return nodes, seed_local, blocks[::-1]  # blocks[0] feeds the first layer


def block_tensor(rows, cols, w, n_dst, n_src):
    idx = torch.from_numpy(np.stack([rows, cols]))
    return torch.sparse_coo_tensor(idx, torch.from_numpy(w), (n_dst, n_src)).coalesce()


# ---------------------------------------------------------------- features


class Features:
    """Node features: a CSR bag for embedding_bag when sparse, else a dense tensor."""

    def __init__(self, X, dense_limit=0.10):
        n, f = X.shape
        nnz = 0
        for i in range(0, n, 4096):
            nnz += int(np.count_nonzero(X[i : i + 4096]))
        self.sparse = nnz <= dense_limit * n * f and f >= 16
        if self.sparse:
            rows, cols = [], []
            vals = []
            for i in range(0, n, 4096):
                r, c = np.nonzero(X[i : i + 4096])
                rows.append(r + i)
                cols.append(c)
                vals.append(X[i : i + 4096][r, c])
            rows, self.col, self.val = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
            self.rowptr = np.zeros(n + 1, dtype=np.int64)
            np.add.at(self.rowptr, rows + 1, 1)
            self.rowptr = np.cumsum(self.rowptr)
            self.col_t, self.val_t = torch.from_numpy(self.col.astype(np.int64)), torch.from_numpy(self.val)
        else:
            self.X = torch.from_numpy(np.ascontiguousarray(X))

    def project(self, ids, W):
        """X[ids] @ W"""
        if not self.sparse:
            return self.X[torch.from_numpy(ids)] @ W
        start, cnt = self.rowptr[ids], self.rowptr[ids + 1] - self.rowptr[ids]
        pos = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt) + np.repeat(start, cnt)
        offsets = torch.from_numpy(np.cumsum(cnt) - cnt)
        p = torch.from_numpy(pos)
        return F.embedding_bag(self.col_t[p], W, offsets, mode="sum", per_sample_weights=self.val_t[p])

    def rows(self, ids):
        """X[ids] as a dense tensor (aggregate-first layers on dense features)."""
        return self.X[torch.from_numpy(ids)]


# ---------------------------------------------------------------- model


class Model(torch.nn.Module):
    def __init__(self, enc, layers, fdim, hidden, dlayers, dhidden):
        super().__init__()
        self.enc, self.L, self.K = enc, layers, dlayers
        P = torch.nn.Parameter
        glorot = lambda i, o: P(torch.empty(i, o).uniform_(-(6 / (i + o)) ** 0.5, (6 / (i + o)) ** 0.5))
        self.W, self.Ws, self.b, self.lnw, self.lnb, self.a = [torch.nn.ParameterList() for _ in range(6)]
        d = fdim
        for l in range(layers):
            self.W.append(glorot(d, hidden))
            if enc == "sage":
                self.Ws.append(glorot(d, hidden))
            self.b.append(P(torch.zeros(hidden)))
            if l < layers - 1:
                self.lnw.append(P(torch.ones(hidden)))
                self.lnb.append(P(torch.zeros(hidden)))
                self.a.append(P(torch.full((1,), 0.25)))
            d = hidden
        self.DW, self.Db, self.Da = [torch.nn.ParameterList() for _ in range(3)]
        for k in range(dlayers):
            o = 1 if k == dlayers - 1 else dhidden
            self.DW.append(glorot(d, o))
            self.Db.append(P(torch.zeros(o)))
            if k < dlayers - 1:
                self.Da.append(P(torch.full((1,), 0.25)))
            d = o

    def act(self, l, Z):
        Z = F.layer_norm(Z, (Z.shape[1],), self.lnw[l], self.lnb[l], eps=1e-5)
        return F.prelu(Z, self.a[l])

    def layer0(self, feats, ids, n_dst, A):
        """The first layer on input features (ids: its source nodes)."""
        W = self.W[0]
        if self.enc == "mlp":
            return feats.project(ids[:n_dst], W) + self.b[0]
        if feats.sparse or W.shape[0] > W.shape[1]:
            Z = torch.sparse.mm(A, feats.project(ids, W))  # project, then aggregate
        else:
            Z = torch.sparse.mm(A, feats.rows(ids)) @ W  # aggregate, then project
        if self.enc == "sage":
            Z = Z + feats.project(ids[:n_dst], self.Ws[0])
        return Z + self.b[0]

    def layer(self, l, H, n_dst, A):
        if self.enc == "mlp":
            return H[:n_dst] @ self.W[l] + self.b[l]
        Z = torch.sparse.mm(A, H) @ self.W[l]
        if self.enc == "sage":
            Z = Z + H[:n_dst] @ self.Ws[l]
        return Z + self.b[l]

    def decode(self, E):
        for k in range(self.K):
            E = E @ self.DW[k] + self.Db[k]
            if k < self.K - 1:
                E = F.prelu(E, self.Da[k])
        return E.reshape(-1)


def encode_batch(model, feats, nodes, blocks, n_seeds):
    H = None
    for l in range(model.L):
        if model.enc == "mlp":
            n_dst, A = n_seeds, None
        else:
            rows, cols, w, n_dst, n_src = blocks[l]
            A = block_tensor(rows, cols, w, n_dst, n_src)
        Z = model.layer0(feats, nodes, n_dst, A) if l == 0 else model.layer(l, H, n_dst, A)
        H = model.act(l, Z) if l < model.L - 1 else Z
    return H


# ---------------------------------------------------------------- evaluation


@torch.no_grad()
def evaluate(model, feats, g, Afull, batch_edges):
    t0 = time.perf_counter()
    n = g["nodes"]
    all_ids = np.arange(n)
    H = None
    for l in range(model.L):
        Z = model.layer0(feats, all_ids, n, Afull) if l == 0 else model.layer(l, H, n, Afull)
        H = model.act(l, Z) if l < model.L - 1 else Z
    t1 = time.perf_counter()
    mrr = val_mrr(model.decode, H, g, batch_edges)
    return mrr, t1 - t0, time.perf_counter() - t1


@torch.no_grad()
def val_mrr(decode, H, g, batch_edges):
    """MRR of every validation edge against its fixed negatives, ties counted against the
    positive; decode maps the rows r_u * r_v to one score each (dgl_gnn.py uses it too)."""
    edges, negs = g["val_edges"].reshape(-1, 2), g["val_neg"].reshape(len(g["val_edges"]) // 2, -1)
    K = negs.shape[1]
    rr = 0.0
    for e0 in range(0, len(edges), batch_edges):
        e = torch.from_numpy(edges[e0 : e0 + batch_edges])
        ng = torch.from_numpy(negs[e0 : e0 + batch_edges])
        heads = e[:, :1].expand(-1, K + 1).reshape(-1)
        tails = torch.cat([e[:, 1:], ng], dim=1).reshape(-1)
        s = decode(H[heads] * H[tails]).reshape(-1, K + 1)
        ranks = 1 + (s[:, 1:] >= s[:, :1]).sum(dim=1)
        rr += (1.0 / ranks.double()).sum().item()
    return rr / len(edges)


def full_operator(g, enc):
    n, indptr, indices = g["nodes"], g["indptr"], g["indices"]
    deg = np.diff(indptr).astype(np.float64)
    rows = np.repeat(np.arange(n), np.diff(indptr))
    if enc == "gcn":
        r = np.concatenate([np.arange(n), rows])
        c = np.concatenate([np.arange(n), indices])
        w = 1.0 / np.sqrt((deg[r] + 1) * (deg[c] + 1))
    else:
        r, c = rows, indices
        w = 1.0 / np.maximum(deg[rows], 1)
    return block_tensor(r, c, w.astype(np.float32), n, n)


def backward_and_step(model, opt, loss, clip):
    """Backward, clipping by global norm (clip > 0), one optimiser step (dgl_gnn.py uses it too)."""
    opt.zero_grad()
    loss.backward()
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()


def timed_steps(step, a, slots):
    """a.warmup untimed steps, then a.steps steps or a.seconds of them.  step(times) runs one,
    returns its loss and adds its timings into times (slots numbers).  Returns the steps timed,
    their mean loss, their wall and CPU seconds, and the times (dgl_gnn.py uses it too)."""
    for _ in range(a.warmup):
        step([0.0] * slots)
    times = [0.0] * slots
    done, loss_sum, start, cpu0 = 0, 0.0, time.perf_counter(), time.process_time()
    while (done < a.steps) if a.steps else (time.perf_counter() - start < a.seconds):
        loss_sum += step(times)
        done += 1
    return done, loss_sum / done, time.perf_counter() - start, time.process_time() - cpu0, times


# ---------------------------------------------------------------- main


def main():
    a = gnn_args.parse(__doc__.split("\n")[0], ["gcn", "sage", "mlp"])
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)

    t_setup = time.perf_counter()
    g = read_tmag(a.graph)
    feats = Features(g["features"])
    fanouts = [int(x) for x in a.fanouts.split(",")][: a.layers]
    sampler = Sampler(g, fanouts if a.encoder != "mlp" else [], "gcn" if a.encoder == "gcn" else "mean",
                      a.encoder == "gcn", rng)
    entry_row = np.repeat(np.arange(g["nodes"]), np.diff(g["indptr"]))
    model = Model(a.encoder, a.layers, g["feature_dim"], a.hidden, a.decoder_layers, a.decoder_hidden)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    labels = torch.cat([torch.ones(a.batch), torch.zeros(a.batch)])
    t_setup = time.perf_counter() - t_setup
    n, B = g["nodes"], a.batch

    def step(times):
        t0 = time.perf_counter()
        e = rng.integers(0, len(g["indices"]), B)
        u, v = entry_row[e], g["indices"][e]
        t = rng.integers(0, n, B)
        for _ in range(64):
            bad = (t == u) | (t == v)
            if not bad.any():
                break
            t[bad] = rng.integers(0, n, int(bad.sum()))
        keys = np.unique(np.minimum(u, v) * n + np.maximum(u, v))
        nodes, seed_local, blocks = sampler.sample(np.concatenate([u, v, t]), keys)
        t1 = time.perf_counter()
        H = encode_batch(model, feats, nodes, blocks, int(seed_local.max()) + 1)
        sl = torch.from_numpy(seed_local)
        head = torch.cat([sl[:B], sl[:B]])
        tail = sl[B:]
        loss = F.binary_cross_entropy_with_logits(model.decode(H[head] * H[tail]), labels)
        backward_and_step(model, opt, loss, a.clip)
        t2 = time.perf_counter()
        times[0] += t1 - t0
        times[1] += t2 - t1
        return loss.item()

    done, mean_loss, elapsed, cpu_train, times = timed_steps(step, a, 2)
    out = {"impl": "torch", "torch": torch.__version__, "graph": a.graph, "encoder": a.encoder,
           "batch_size": B, "threads": torch.get_num_threads(), "setup_seconds": t_setup,
           "features": "sparse (embedding_bag)" if feats.sparse else "dense", "steps": done,
           "params": sum(p.numel() for p in model.parameters()), "mean_loss": mean_loss, "edges_per_second": done * B / elapsed, "step_ms": elapsed / done * 1e3,
           "cpu_ms_per_step": cpu_train / done * 1e3,
           "sample_ms": times[0] / done * 1e3, "compute_ms": times[1] / done * 1e3}
    if not a.no_eval:
        Afull = full_operator(g, a.encoder) if a.encoder != "mlp" else None
        te, ce = time.perf_counter(), time.process_time()
        mrr, ti, ts = evaluate(model, feats, g, Afull, a.eval_batch_edges)
        out.update({"eval_seconds": time.perf_counter() - te, "eval_cpu_seconds": time.process_time() - ce,
                    "eval_infer_seconds": ti, "eval_score_seconds": ts,
                    "eval_edges": len(g["val_edges"]) // 2, "val_mrr": mrr})
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps(out))


if __name__ == "__main__":
    main()
