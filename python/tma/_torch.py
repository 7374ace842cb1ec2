"""`torch_model`: a `tma export` folder as a PyTorch module that embeds the
nodes of any graph with the model's features (and, for relational models,
its node types and relations) and scores pairs, as `tma eval` does (every
encoder: GCN, SAGE, MLP, RGCN, GAT):
full-neighbourhood inference, LayerNorm (eps 1e-5) and PReLU after every
encoder layer but the last (docs/model.md, "The model" and "tma export")."""

from __future__ import annotations

import functools
import json
import os
import warnings
from typing import Optional

import numpy as np

from ._format import TmaError

LN_EPS = 1e-5  # tma's LayerNorm epsilon (docs/model.md)


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("tma.torch_model needs PyTorch: pip install torch, or Debian's python3-torch (%s)" % e) from e
    return torch


def torch_model(export_dir: str, *, dtype=None):
    """The model of a `tma export` folder (model.npz, model.json) as a
    `torch.nn.Module` (a `TmaModel`) in evaluation mode; `dtype` (default
    torch.float32) is the type it computes in."""
    torch = _torch()
    with open(os.path.join(export_dir, "model.json")) as f:
        model = json.load(f)
    if "export" not in model:
        raise TmaError("%s/model.json has no \"export\" section: export the weights again with this tma" % export_dir)
    with np.load(os.path.join(export_dir, "model.npz")) as z:
        state = {k: torch.from_numpy(np.array(z[k])) for k in z.files}
    m = _module_class()(model, state)
    return m.to(dtype or torch.float32).eval()


@functools.lru_cache(maxsize=None)
def _module_class():
    torch = _torch()
    nn = torch.nn

    class TmaModel(nn.Module):
        """A tma model rebuilt from its export: `embed(graph)` gives every
        node's embedding r (num_nodes x hidden), `score(heads, tails,
        rels=None)` the logits of pairs on the last embedded graph."""

        def __init__(self, model: dict, state: dict):
            super().__init__()
            self.model = model
            self.encoder_kind = model["encoder"]
            self.decoder_kind = model.get("decoder", "mlp")
            self.layers = model["layers"]
            self.inverse = list(model["export"]["inverse"])
            self.embeddings = None
            # Every tensor of model.npz becomes a parameter under its own
            # name ('.' is not allowed in a parameter's name).
            self.params = nn.ParameterDict({k.replace(".", "__"): nn.Parameter(v, requires_grad=False)
                                            for k, v in state.items()})
            self.type_dims = [self.p("input.%d.weight" % t).shape[1] for t in range(len(self.model.get("type_dims", [])))]

        def p(self, name: str):
            return self.params[name.replace(".", "__")]

        def has(self, name: str) -> bool:
            return name.replace(".", "__") in self.params

        # -------------------------------------------------------------- encoder

        def embed(self, graph, features=None):
            """Every node's embedding on `graph` (a `tma.Graph` or a .tmag
            path: its training CSR, features and, typed, node types and
            relations); `features` replaces the graph's."""
            from ._graph import Graph, open_graph
            g = graph if isinstance(graph, Graph) else open_graph(graph)
            x = g.features if features is None else features
            return self.embed_csr(g.indptr, g.indices, x, g.node_types, g.edge_rels)

        def embed_csr(self, indptr, indices, features, node_types=None, edge_rels=None):
            """`embed` from arrays: the graph as a CSR (row v lists v's
            neighbours, both directions of every undirected edge), features
            (nodes x feature_dim), and for a typed graph each node's type and
            each CSR entry's stored relation id (the edge v -> u of row v)."""
            torch = _torch()
            dt = next(iter(self.params.values())).dtype
            with torch.no_grad():
                indptr = torch.as_tensor(np.array(indptr, dtype=np.int64))
                src = torch.as_tensor(np.array(indices, dtype=np.int64))
                x = torch.as_tensor(np.array(features, dtype=np.float32)).to(dt)
                n = indptr.numel() - 1
                deg = indptr[1:] - indptr[:-1]
                dst = torch.repeat_interleave(torch.arange(n), deg)
                if edge_rels is not None:
                    # A message travels u -> v along v's entry: the inverse of the stored id.
                    rel = torch.as_tensor(self.inverse)[torch.as_tensor(np.array(edge_rels, dtype=np.int64))]
                else:
                    rel = torch.zeros_like(src)
                h = x
                if self.has("input.0.weight"):
                    h = self._project_types(x, torch.as_tensor(np.array(node_types, dtype=np.int64)))
                for l in range(self.layers):
                    z = self._layer(l, h, src, dst, rel, deg, n)
                    if l < self.layers - 1:
                        z = torch.nn.functional.layer_norm(z, z.shape[-1:], self.p("encoder.%d.norm.weight" % l),
                                                           self.p("encoder.%d.norm.bias" % l), LN_EPS)
                        z = torch.nn.functional.prelu(z, self.p("encoder.%d.act.weight" % l))
                    h = z
            self.embeddings = h
            return h

        def _project_types(self, x, types):
            """RGCN on several node types: each node's type's Linear on the
            type's real feature columns."""
            torch = _torch()
            out = x.new_zeros(x.shape[0], self.p("input.0.bias").shape[0])
            for t, d in enumerate(self.type_dims):
                m = types == t
                out[m] = torch.nn.functional.linear(x[m, :d], self.p("input.%d.weight" % t), self.p("input.%d.bias" % t))
            return out

        def _aggregate(self, h, src, dst, w, n):
            """Σ_e w_e h[src_e] into row dst_e."""
            return h.new_zeros(n, h.shape[1]).index_add_(0, dst, h[src] * w[:, None])

        def _layer(self, l, h, src, dst, rel, deg, n):
            torch = _torch()
            F = torch.nn.functional
            P = lambda s: self.p("encoder.%d.%s" % (l, s))  # noqa: E731
            kind = self.encoder_kind
            if kind == "mlp":
                return F.linear(h, P("lin.weight"), P("bias"))
            if kind == "gcn":
                # Symmetric normalisation with self-loops, d = degree + 1 (docs/model.md).
                d = (deg + 1).to(h.dtype)
                w = 1.0 / torch.sqrt(d[dst] * d[src])
                agg = self._aggregate(h, src, dst, w, n) + h / d[:, None]
                return F.linear(agg, P("lin.weight"), P("bias"))
            if kind == "sage":
                w = 1.0 / deg.to(h.dtype)[dst]  # a node without neighbours has the mean 0
                agg = self._aggregate(h, src, dst, w, n)
                return F.linear(h, P("lin_self.weight"), P("bias")) + F.linear(agg, P("lin_neigh.weight"))
            if kind == "rgcn":
                # Mean over each relation's neighbours; W_r = Σ_b comp[r, b] weight[b].
                R = P("comp").shape[0]
                key = dst * R + rel
                count = torch.bincount(key, minlength=n * R).to(h.dtype)
                w = 1.0 / count[key]
                out = h @ P("root") + P("bias")
                W = torch.einsum("rb,bio->rio", P("comp"), P("weight"))
                for r in range(R):
                    m = rel == r
                    if bool(m.any()):
                        out = out + self._aggregate(h, src[m], dst[m], w[m], n) @ W[r]
                return out
            if kind == "gat":
                return self._gat(l, h, src, dst, n)
            raise TmaError("unknown encoder %r in model.json" % kind)

        def _gat(self, l, h, src, dst, n):
            """PyG's GATConv (add_self_loops, negative_slope 0.2): every node
            attends over its neighbours and itself; hidden layers concatenate
            the heads, the last averages them (docs/model.md, "GAT")."""
            torch = _torch()
            F = torch.nn.functional
            P = lambda s: self.p("encoder.%d.%s" % (l, s))  # noqa: E731
            # [heads, C]; an export of one head before tma wrote it as a matrix is [C].
            a_src, a_dst = (P(s).reshape(-1, P(s).shape[-1]) for s in ("att_src", "att_dst"))
            K, C = a_src.shape
            t = F.linear(h, P("lin.weight")).view(n, K, C)
            s_src, s_dst = (t * a_src).sum(-1), (t * a_dst).sum(-1)  # [n, heads]
            # Each node's own edge, as tma's blocks have it (first: the order changes the sums by rounding only).
            loop = torch.arange(n)
            src, dst = torch.cat([loop, src]), torch.cat([loop, dst])
            e = F.leaky_relu(s_src[src] + s_dst[dst], 0.2)  # [edges, heads]
            with warnings.catch_warnings():  # scatter_reduce is "beta" in torch 1.12 and 1.13
                warnings.simplefilter("ignore", UserWarning)
                top = e.new_full((n, K), float("-inf")).scatter_reduce_(0, dst[:, None].expand(-1, K), e, "amax")
            w = torch.exp(e - top[dst])
            w = w / w.new_zeros(n, K).index_add_(0, dst, w)[dst]
            z = t.new_zeros(n, K, C).index_add_(0, dst, t[src] * w[:, :, None])
            z = z.reshape(n, K * C) if l < self.layers - 1 else z.mean(1)
            return z + P("bias")

        # -------------------------------------------------------------- decoder

        def score(self, heads, tails, rels=None, embeddings=None):
            """The logits of the pairs (heads, tails) (broadcast together:
            heads [n, 1] against tails [n, k] scores n x k pairs) on
            `embeddings` (default: the last `embed`); `rels` the pairs'
            relation ids (DistMult; default 0)."""
            torch = _torch()
            r = self.embeddings if embeddings is None else embeddings
            if r is None:
                raise TmaError("score: embed a graph first (or pass embeddings=)")
            with torch.no_grad():
                hu, hv = r[torch.as_tensor(heads)], r[torch.as_tensor(tails)]
                if self.decoder_kind == "dot":
                    return (hu * hv).sum(-1)
                if self.decoder_kind == "distmult":
                    rels = torch.zeros_like(torch.as_tensor(heads)) if rels is None else torch.as_tensor(rels)
                    return (hu * self.p("decoder.relation.weight")[rels] * hv).sum(-1)
                e = hu * hv
                k = sum(1 for name in self.params if name.startswith("decoder__") and name.endswith("__bias"))
                for i in range(k):
                    e = torch.nn.functional.linear(e, self.p("decoder.%d.weight" % (2 * i)),
                                                   self.p("decoder.%d.bias" % (2 * i)))
                    if i < k - 1:
                        e = torch.nn.functional.prelu(e, self.p("decoder.%d.weight" % (2 * i + 1)))
                return e.squeeze(-1)

        def forward(self, heads, tails, rels=None):
            return self.score(heads, tails, rels)

    return TmaModel
