#!/usr/bin/env python3
"""dgl_gnn.py: tma's GNN benchmark written the way a DGL user writes it.

The model of torch_gnn.py (GCN, GraphSAGE-mean or GAT encoder, LayerNorm + PReLU
between layers, decoder MLP with PReLU on r_u * r_v, BCE on one uniform negative
tail per positive edge, Adam, gradient clipping), with the batch size, fan-outs,
hidden width and thread count of the other sides, but built from DGL's parts as
its link-prediction examples are: dgl.dataloading.NeighborSampler wrapped in
as_edge_prediction_sampler (exclude="reverse_id", so a batch's edges and their
reverses leave its message-passing blocks; negative_sampler.Uniform(1)), a
DataLoader over the training edges (shuffled, one epoch after another), and
dgl.nn.GraphConv / SAGEConv(aggregator_type="mean") / GATConv on the blocks, with
dense input features as they come.  GCN and GAT run on the graph with self-loops
added (dgl.add_self_loop, as GraphConv and GATConv ask), so their full-graph
operators are tma's.  GAT is tma's: GATConv with --heads heads (LeakyReLU 0.2,
no dropout), hidden layers concatenating heads of hidden / heads, the last
averaging heads of hidden, then one bias of hidden (GATConv's own bias is per
head, so it is off and the bias added after, as tma adds it).
What DGL decides differs from tma's sampler in details a DGL user does not
choose: GraphConv normalises by the degrees within each sampled block, a
node's self-loop is one of the edges its fan-out samples (tma always keeps it,
beside fan-out neighbours), and a negative tail may hit an endpoint of its edge.

Evaluation is full-graph layer-wise inference (each layer on the whole graph,
as GraphConv / SAGEConv run in full-graph training) and the MRR of every
validation edge against its fixed negatives, scored by torch_gnn.py's val_mrr;
the .tmag file is read by torch_gnn.py's reader.  Runs in the venv that
dgl_env.sh makes.

  dgl_gnn.py G.tmag [--encoder sage] [--heads 1] [--batch 1024] [--threads 2] [--steps N | --seconds S]
                    [--hidden 256] [--fanouts 25,10] [--no-eval]

Prints one JSON object like torch_gnn.py and bench_gnn.
"""
import json
import os
import resource
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gnn_args  # noqa: E402


# DGL's sampler runs on the system's OpenMP runtime, not the one torch bundles, so
# torch.set_num_threads does not reach it; it reads OMP_NUM_THREADS when it loads.
ARGS = gnn_args.parse(__doc__.split("\n")[0], ["gcn", "sage", "gat"]) if __name__ == "__main__" else None
if ARGS is not None:
    os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

warnings.filterwarnings("ignore", message=".*non-writable.*")  # the .tmag arrays are a read-only map
import dgl  # noqa: E402
import dgl.nn as dglnn  # noqa: E402

from torch_gnn import backward_and_step, read_tmag, timed_steps, val_mrr  # noqa: E402


def dgl_graph(g, self_loops):
    """The .tmag adjacency as a DGL graph (edge i = CSR entry i), its reverse-edge ids
    and the ids of its training edges (the CSR entries, both directions)."""
    n, indptr, indices = g["nodes"], g["indptr"], g["indices"]
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    dst = np.asarray(indices, dtype=np.int64)
    key, rkey = src * n + dst, dst * n + src
    order = np.argsort(key, kind="stable")
    rev = order[np.minimum(np.searchsorted(key, rkey, sorter=order), len(key) - 1)]
    if not np.array_equal(key[rev], rkey):
        sys.exit(f"dgl_gnn.py: the adjacency of {g['path']} is not symmetric")
    G = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n)
    E = G.num_edges()
    reverse_eids = torch.from_numpy(rev)
    if self_loops:
        G = dgl.add_self_loop(G)  # appended after the E edges; each is its own reverse
        reverse_eids = torch.cat([reverse_eids, torch.arange(E, G.num_edges())])
    return G, reverse_eids, torch.arange(E)


class GAT(nn.Module):
    """tma's GAT layer from GATConv: heads concatenated (concat) or averaged, one bias."""

    def __init__(self, d, hidden, heads, concat):
        super().__init__()
        self.concat = concat
        self.conv = dglnn.GATConv(d, hidden // heads if concat else hidden, heads, bias=False)
        self.bias = nn.Parameter(torch.zeros(hidden))

    def forward(self, graph, h):
        z = self.conv(graph, h)  # [nodes, heads, C]
        return (z.flatten(1) if self.concat else z.mean(1)) + self.bias


def conv(enc, d, hidden, heads, last):
    if enc == "gcn":
        return dglnn.GraphConv(d, hidden)
    if enc == "sage":
        return dglnn.SAGEConv(d, hidden, "mean")
    return GAT(d, hidden, heads, not last)


class Model(nn.Module):
    def __init__(self, enc, layers, fdim, hidden, dlayers, dhidden, heads=1):
        super().__init__()
        self.L = layers
        self.convs, self.norms, self.acts = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        for l in range(layers):
            d = fdim if l == 0 else hidden
            self.convs.append(conv(enc, d, hidden, heads, l == layers - 1))
            if l < layers - 1:
                self.norms.append(nn.LayerNorm(hidden))
                self.acts.append(nn.PReLU())
        dec, d = [], hidden
        for k in range(dlayers):
            o = 1 if k == dlayers - 1 else dhidden
            dec.append(nn.Linear(d, o))
            if k < dlayers - 1:
                dec.append(nn.PReLU())
            d = o
        self.decoder = nn.Sequential(*dec)

    def layer(self, l, graph, h):
        h = self.convs[l](graph, h)
        return self.acts[l](self.norms[l](h)) if l < self.L - 1 else h

    def forward(self, blocks, x):
        h = x
        for l, block in enumerate(blocks):
            h = self.layer(l, block, h)
        return h

    def decode(self, E):
        return self.decoder(E).reshape(-1)

    @torch.no_grad()
    def inference(self, G):
        """Every node's representation, one layer at a time over the whole graph."""
        h = G.ndata["feat"]
        for l in range(self.L):
            h = self.layer(l, G, h)
        return h


def main():
    a = ARGS
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dgl.seed(a.seed)

    t_setup = time.perf_counter()
    g = read_tmag(a.graph)
    g["path"] = a.graph
    G, reverse_eids, train_eids = dgl_graph(g, a.encoder in ("gcn", "gat"))
    G.ndata["feat"] = torch.from_numpy(np.ascontiguousarray(g["features"]))
    G.create_formats_()
    fanouts = [int(x) for x in a.fanouts.split(",")][: a.layers]
    # DGL's fanouts[0] is the first layer's (the hop farthest from the seeds); the others
    # list them from the seeds outward.
    sampler = dgl.dataloading.NeighborSampler(fanouts[::-1], prefetch_node_feats=["feat"])
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        sampler, exclude="reverse_id", reverse_eids=reverse_eids,
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(1))
    loader = dgl.dataloading.DataLoader(G, train_eids, sampler, batch_size=a.batch, shuffle=True,
                                        drop_last=True, num_workers=0)
    model = Model(a.encoder, a.layers, g["feature_dim"], a.hidden, a.decoder_layers, a.decoder_hidden, a.heads)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    t_setup = time.perf_counter() - t_setup
    B = a.batch
    batches = iter(loader)

    def step(times):
        nonlocal batches
        t0 = time.perf_counter()
        try:
            input_nodes, pair_graph, neg_pair_graph, blocks = next(batches)
        except StopIteration:  # the next epoch
            batches = iter(loader)
            input_nodes, pair_graph, neg_pair_graph, blocks = next(batches)
        t1 = time.perf_counter()
        h = model(blocks, blocks[0].srcdata["feat"])
        pu, pv = pair_graph.edges()
        nu, nv = neg_pair_graph.edges()
        score = model.decode(torch.cat([h[pu] * h[pv], h[nu] * h[nv]]))
        labels = torch.cat([torch.ones(len(pu)), torch.zeros(len(nu))])
        loss = F.binary_cross_entropy_with_logits(score, labels)
        backward_and_step(model, opt, loss, a.clip)
        t2 = time.perf_counter()
        times[0] += t1 - t0
        times[1] += t2 - t1
        times[2] += input_nodes.numel()
        times[3] += sum(b.num_edges() for b in blocks)
        return loss.item()

    done, mean_loss, elapsed, cpu_train, times = timed_steps(step, a, 4)
    out = {"impl": "dgl", "dgl": dgl.__version__, "torch": torch.__version__, "graph": a.graph,
           "encoder": a.encoder, "heads": a.heads, "batch_size": B, "threads": torch.get_num_threads(), "setup_seconds": t_setup,
           "features": "dense", "steps": done, "params": sum(p.numel() for p in model.parameters()),
           "mean_loss": mean_loss, "edges_per_second": done * B / elapsed, "step_ms": elapsed / done * 1e3,
           "cpu_ms_per_step": cpu_train / done * 1e3,
           "sample_ms": times[0] / done * 1e3, "compute_ms": times[1] / done * 1e3,
           "sampled_nodes": times[2] / done, "sampled_edges": times[3] / done}
    if not a.no_eval:
        model.eval()
        te, ce = time.perf_counter(), time.process_time()
        H = model.inference(G)
        ti = time.perf_counter() - te
        mrr = val_mrr(model.decode, H, g, a.eval_batch_edges)
        t_eval, cpu_eval = time.perf_counter() - te, time.process_time() - ce
        out.update({"eval_seconds": t_eval, "eval_cpu_seconds": cpu_eval,
                    "eval_infer_seconds": ti, "eval_score_seconds": t_eval - ti,
                    "eval_edges": len(g["val_edges"]) // 2, "val_mrr": mrr})
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps(out))


if __name__ == "__main__":
    main()
