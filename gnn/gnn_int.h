/*
 * gnn_int.h: what the trainer and the evaluator share inside gnn/: the
 * parameter views over a block, the encoder layer and decoder forward
 * passes, and hooks that tests use to look inside a trainer.
 */
#ifndef TMA_GNN_INT_H
#define TMA_GNN_INT_H

#include "gnn_backend.h"

#define GNN_MAX_DECODER_LAYERS 16
#define GNN_LN_EPS 1e-5f

/* Views into a parameter (or gradient) block, by role.  Unused views are
 * zeroed (W for SAGE, W_self/W_neigh otherwise, LayerNorm/PReLU of the last
 * encoder layer, PReLU of the last decoder layer). */
typedef struct gnn_enc_params {
    tensor_t W, W_self, W_neigh, b, ln_w, ln_b, prelu;
    tensor_t V, coef; /* RGCN: the bases side by side and their coefficients (W_self: the self-connection) */
    tensor_t att_src, att_dst; /* GAT: heads x width, the attention vectors (W: the heads' projection) */
} gnn_enc_params_t;

typedef struct gnn_dec_params {
    tensor_t W, b, prelu;
} gnn_dec_params_t;

typedef struct gnn_params {
    gnn_enc_params_t enc[TMA_GNN_MAX_LAYERS];
    gnn_dec_params_t dec[GNN_MAX_DECODER_LAYERS];
    tensor_t rel_diag; /* DistMult: relations x hidden */
    tensor_t in_W[TMA_GNN_MAX_TYPES], in_b[TMA_GNN_MAX_TYPES]; /* the per-type input projection */
} gnn_params_t;

/* Binds views of `block` (a tensor of layout->total floats) by the layout's names. */
tma_status_t gnn_params_bind(const tma_gnn_config_t *cfg, const tma_gnn_layout_t *layout, const tensor_t *block,
                             gnn_params_t *p_p);

/*
 * The parameter walker: the one list of parameter blocks, in one order.
 * Building a layout (lay set) appends each block; binding (bind set, with
 * its block) checks each against the layout's next entry and points the
 * view at it.  The encoder and decoder descriptors name their own blocks.
 */
typedef struct gnn_walk {
    tma_gnn_layout_t *lay;                                 /* building */
    const tma_gnn_layout_t *bind; const tensor_t *block; /* binding */
    int next;                                             /* binding: the layout entry to match next */
} gnn_walk_t;
/* One block, named "<part>.<i>.<role>" ("<part>.<role>" when i < 0), rows x cols. */
tma_status_t gnn_walk_param(gnn_walk_t *w, tensor_t *view, int64_t rows, int64_t cols, const char *part, int i,
                            const char *role);
/* Walks every block of cfg's model, filling p's views when binding. */
tma_status_t gnn_params_walk(const tma_gnn_config_t *cfg, gnn_walk_t *w, gnn_params_t *p);

/* A layer's source rows: node features (layer 0: feat with ids giving the
 * rows) or a dense tensor H of the previous layer's output. */
typedef struct gnn_src {
    tma_gnn_feat_t *feat;
    const tensor_t *ids; /* i64; with feat */
    const tensor_t *H;   /* without feat */
} gnn_src_t;

/* 1 when layer l multiplies by its weight before aggregating (layer 0 of
 * GCN/SAGE on sparse features, and every RGCN layer, whose projection is
 * onto all bases: T is n x bases*hidden); otherwise it aggregates first. */
int gnn_layer_project_first(const tma_gnn_config_t *cfg, int l, const tma_gnn_feat_info_t *fi);
/* Evaluation's choice (the single evaluator and the ranks alike): as
 * training's, and also layer 0 of GCN/SAGE on an untyped graph whose dense
 * features are more than GNN_EVAL_WIDE times as wide as the projection.
 * Each node's row is projected once and the narrow rows aggregated: less
 * work than aggregating the wide rows, and evaluator ranks exchange the
 * projected rows instead of the features. */
#define GNN_EVAL_WIDE 2
int gnn_layer_eval_project_first(const tma_gnn_config_t *cfg, int l, const tma_gnn_feat_info_t *fi);
/* The projection's width at layer l (hidden, bases x hidden for RGCN, heads
 * x width for GAT), and the floats a buffer holding the projection of n rows
 * needs (with what the encoder derives from it after its rows). */
int64_t gnn_layer_proj_cols(const tma_gnn_config_t *cfg, int l);
int64_t gnn_layer_proj_floats(const tma_gnn_config_t *cfg, int l, int64_t n);
/* Floats an edge the layer keeps in A (0: A is the aggregate, if any). */
int64_t gnn_layer_edge_cols(const tma_gnn_config_t *cfg);
/* TMA_OK when backend b has every op cfg's encoder runs; else logs what to
 * do, naming model.encoder and the device, and returns TMA_ERR_CONFIG. */
tma_status_t gnn_encoder_check_backend(const tma_gnn_config_t *cfg, const tma_gnn_backend_t *b);
/* T = src[0:n] W (W_neigh for SAGE, V for RGCN): the projection of project-first layers
 * (then the encoder's `project` on it: T's buffer must hold gnn_layer_proj_floats). */
tma_status_t gnn_layer_project(const tma_gnn_config_t *cfg, const gnn_params_t *P, int l, const gnn_src_t *src,
                               int64_t n, tensor_t *T);
/*
 * Z = the pre-activation output of layer l for the block's destination rows.
 * blk is NULL for the MLP.  The destination rows' own source rows (SAGE and
 * MLP self terms) are src rows [self0, self0 + Z->rows).  T is the
 * projection (project-first) or NULL; A receives the aggregated input
 * (aggregate-first, kept for backward).  rel (i32, the block's edges'
 * relation ids) is read by RGCN only.
 */
tma_status_t gnn_layer_combine(const tma_gnn_config_t *cfg, const gnn_params_t *P, int l,
                               const tma_gnn_block_t *blk, const gnn_src_t *src, int64_t self0, const tensor_t *T,
                               const tensor_t *rel, tensor_t *A, tensor_t *Z);
/* Whether layer l (GCN or SAGE, not projecting first: pf 0) can run as the
 * backend's one fused op (layer_infer) with `scratch` as its work space;
 * src_sparse: its source is features stored as CSR, which the op does not
 * read. */
int gnn_layer_fusable(const tma_gnn_config_t *cfg, const gnn_params_t *P, int l, int src_sparse, int pf,
                      const tensor_t *scratch);
/* Layer l for the block's destination rows in one op: aggregate, the
 * products, bias, and (but for the last layer) LayerNorm and PReLU, into Y;
 * the destination rows' own rows are src rows self0 on.  The same numbers
 * as gnn_layer_combine and gnn_layer_activate (gnn_backend.h, layer_infer). */
tma_status_t gnn_layer_infer_fused(const tma_gnn_config_t *cfg, const gnn_params_t *P, int l,
                                   const tma_gnn_block_t *blk, const gnn_src_t *src, int64_t self0, tensor_t *scratch,
                                   tensor_t *Y);
/* H = PReLU(LayerNorm(Z)), keeping the LayerNorm's mean and rstd (H may be Z). */
tma_status_t gnn_layer_activate(const gnn_params_t *P, int l, const tensor_t *Z, tensor_t *mean, tensor_t *rstd,
                                tensor_t *H);
/*
 * The decoder on pairs (hi[p], ti[p]) of rows of R: E[0] = R[hi] ⊙ R[ti];
 * D[k] = E[k] W_k + b_k; E[k+1] = PReLU(D[k]); the logits are D[K-1].
 * E[k+1] may be the same tensor as D[k] when D[k] is not needed later.
 * DistMult instead writes the logits into D[0] (np x 1) from R, the pairs
 * and rel (i32, each pair's relation id); E is unused.
 */
tma_status_t gnn_decoder_forward(const tma_gnn_config_t *cfg, const gnn_params_t *P, const tensor_t *R,
                                 const tensor_t *hi, const tensor_t *ti, const tensor_t *rel, tensor_t *E,
                                 tensor_t *D);
/* The scoring buffers of `pairs` pairs: their head and tail rows hi, ti
 * (i32) and the decoder's two buffers (gnn_score_pairs). */
tma_status_t gnn_score_bufs_alloc(const tma_gnn_config_t *cfg, const gnn_params_t *Pm, tma_gnn_backend_t *b,
                                  int64_t pairs, tensor_t *hi, tensor_t *ti, tensor_t dec[2]);
/* The decoder's logits of P pairs (hi[p], ti[p]) of rows of R (rel: their
 * relation ids, DistMult; else NULL), computed in dec[0] and dec[1] (each
 * P x the widest decoder layer); *logits_p is a P x 1 view of one of them.
 * The fused MLP scorer where the backend has it (evaluator.c). */
tma_status_t gnn_score_pairs(const tma_gnn_config_t *cfg, const gnn_params_t *Pm, const tensor_t *R,
                             const tensor_t *hi, const tensor_t *ti, const tensor_t *rel, tensor_t dec[2], int64_t P,
                             tensor_t *logits_p);
/* T = src[r0 : r0 + T->rows] W + beta T */
tma_status_t gnn_src_matmul(const gnn_src_t *src, int64_t r0, const tensor_t *W, float beta, tensor_t *T);
/* A = the block's weighted sum of src rows */
tma_status_t gnn_src_aggregate(const gnn_src_t *src, const tma_gnn_block_t *blk, tensor_t *A);
/* G = src[r0 : r0 + dY->rows]^T dY: a weight's gradient from its product's */
tma_status_t gnn_src_matmul_grad(const gnn_src_t *src, int64_t r0, const tensor_t *dY, tensor_t *G);

/*
 * Layer l's backward as the trainer hands it to the encoder's hook: how the
 * forward ran the layer, what it kept, and scratch.  The buffers T, A, rel,
 * g_T, g_src and g_a are the trainer's, unshaped: the hook shapes what its
 * kind uses (as its forward did).
 */
typedef struct gnn_layer_bwd {
    const tma_gnn_config_t *cfg;
    int64_t n_dst, n_src, d_in;
    const gnn_src_t *src;        /* the layer's input rows, as the forward read them */
    const tma_gnn_block_t *blk;  /* NULL for the MLP */
    int project_first;           /* the forward projected (T) before aggregating */
    int concat;                  /* the forward's one product over [X_dst | A] (SAGE, layer 0) */
    const tensor_t *T, *A, *rel; /* the projection, the aggregate, the block's relation ids */
    tensor_t *g_T, *g_src, *g_a; /* scratch */
    tensor_t *dH;                /* the input's gradient (n_src rows); NULL when the input is features */
} gnn_layer_bwd_t;

/* ------------------------------------------------------------------ model kinds (model_kinds.c, enc_*.c, dec_*.c) */

/*
 * One encoder kind: everything the trainer, the evaluator and the layout
 * ask of it.  gnn_encoder_of() looks it up once; adding a kind is one
 * enc_<kind>.c holding its descriptor and forward, plus its entry in the
 * table of model_kinds.c.
 */
typedef struct gnn_encoder_desc {
    const char *name;
    int neighbours;          /* aggregates sampled neighbours (0: the MLP, no blocks) */
    int relational;          /* per-relation weights: needs model.relations, blocks carry relation ids */
    int node_types;          /* takes per-type input projections on typed graphs */
    int whole_graph;         /* the evaluator may aggregate the whole graph chunk by chunk, one fused op a layer */
    int concat_self;         /* its self and neighbour products may be one product over [X_dst | A] */
    int always_project;      /* projects before aggregating at every layer (onto all bases: bases*hidden wide) */
    int self_loops;          /* sampling adds self loops */
    int attention;           /* GAT: takes model.heads and needs the backend's gat ops */
    tma_graph_norm_t norm;   /* the sampled blocks' edge weights */
    /* Walks layer l's blocks (in x out), binding them into e. */
    tma_status_t (*params)(gnn_walk_t *w, const tma_gnn_config_t *cfg, int l, int64_t in, int64_t out,
                           gnn_enc_params_t *e);
    /* The layer's pre-activation forward (gnn_layer_combine's contract). */
    tma_status_t (*combine)(const gnn_enc_params_t *e, const tma_gnn_block_t *blk, const gnn_src_t *src,
                            int64_t self0, const tensor_t *T, const tensor_t *rel, tensor_t *A, tensor_t *Z);
    /* Where in gnn_enc_params_t the weight applied to the aggregated (or
     * projected) neighbours lies (W, W_neigh or V); self_term: a self term
     * X_dst W_self beside it. */
    size_t agg_weight;
    int self_term;
    /* always_project: the projection's width at layer l (NULL: hidden). */
    int64_t (*proj_cols)(const tma_gnn_config_t *cfg, int l);
    /* Optional: floats a row that `project` derives from the projection T
     * (n x proj_cols) once for all rows and stores after T's n rows in T's
     * buffer (GAT: each head's two attention scores). */
    int64_t (*proj_tail)(const tma_gnn_config_t *cfg);
    tma_status_t (*project)(const gnn_enc_params_t *e, tensor_t *T);
    /* Optional: floats an edge the forward keeps in A for backward (GAT:
     * the attention of each head); A is then num_edges x edge_cols. */
    int64_t (*edge_cols)(const tma_gnn_config_t *cfg);
    /* From dZ, the gradient of the layer's pre-activation output (the bias's
     * gradient is the caller's): the weights' gradients into g, and b->dH. */
    tma_status_t (*backward)(const gnn_enc_params_t *e, gnn_enc_params_t *g, const gnn_layer_bwd_t *b,
                             const tensor_t *dZ);
} gnn_encoder_desc_t;

/* One decoder kind. */
typedef struct gnn_decoder_desc {
    const char *name;
    int relational; /* scores a pair by its relation id: needs model.relations */
    int single;     /* one logit op on the pair, no hidden layers (the buffers see depth 1); else the MLP */
    tma_status_t (*params)(gnn_walk_t *w, const tma_gnn_config_t *cfg, int64_t in, gnn_params_t *p);
    tma_status_t (*forward)(const tma_gnn_config_t *cfg, const gnn_params_t *P, const tensor_t *R,
                            const tensor_t *hi, const tensor_t *ti, const tensor_t *rel, tensor_t *E, tensor_t *D);
    /* From dlogits (pairs x 1), with forward's E and D buffers (unshaped)
     * and two scratch buffers gd[2]: the decoder's gradients into G and dZ,
     * the gradient of R's rows. */
    tma_status_t (*backward)(const tma_gnn_config_t *cfg, const gnn_params_t *P, gnn_params_t *G,
                             const tensor_t *R, const tensor_t *hi, const tensor_t *ti, const tensor_t *rel,
                             const tensor_t *E, const tensor_t *D, tensor_t *gd, tensor_t *dlogits, tensor_t *dZ);
} gnn_decoder_desc_t;

extern const gnn_encoder_desc_t gnn_encoder_gcn, gnn_encoder_sage, gnn_encoder_mlp, gnn_encoder_rgcn, gnn_encoder_gat;
extern const gnn_decoder_desc_t gnn_decoder_mlp, gnn_decoder_distmult, gnn_decoder_dot;
/* 1 when cfg's decoder is not the default (mlp): the model section and the
 * hash name it then, as they do for every relational model. */
int gnn_decoder_named(const tma_gnn_config_t *cfg);
/* The descriptors of cfg's kinds (a validated config: never NULL). */
const gnn_encoder_desc_t *gnn_encoder_of(const tma_gnn_config_t *cfg);
const gnn_decoder_desc_t *gnn_decoder_of(const tma_gnn_config_t *cfg);

/* The aggregate's weight of an encoder layer's parameters (or gradients). */
static inline const tensor_t *gnn_enc_agg_weight(const gnn_encoder_desc_t *d, const gnn_enc_params_t *e)
{
    return (const tensor_t *)(const void *)((const char *)e + d->agg_weight);
}
static inline tensor_t *gnn_enc_agg_grad(const gnn_encoder_desc_t *d, gnn_enc_params_t *g)
{
    return (tensor_t *)(void *)((char *)g + d->agg_weight);
}

/* The decoder's layer count as the buffers see it: 1 for DistMult and dot. */
static inline int gnn_decoder_depth(const tma_gnn_config_t *cfg)
{
    return gnn_decoder_of(cfg)->single ? 1 : cfg->decoder_layers;
}

/* ------------------------------------------------------------------ heterogeneous layers (hetero.c) */

/*
 * The mean over each relation's neighbours as block weights: for the CSR
 * rows (indptr over num_dst rows, rel the relation of each edge, in
 * [0, num_rels)) w[e] = 1 / #{e' in row(e) : rel[e'] = rel[e]}.  `count`
 * is scratch of num_rels ints (no allocation: the sampler calls this per
 * step).  Works for a sampled block (the mean over the sampled neighbours)
 * and a full one alike.  TMA_ERR_INVALID for a relation out of range.
 */
tma_status_t gnn_rgcn_norm(int64_t num_dst, const int32_t *indptr, const int32_t *rel, int num_rels,
                           int32_t *count, float *weights_p);
/*
 * A stable counting sort of the positions 0..n-1 by types[i] in
 * [0, num_types): order_p[offsets_p[t] .. offsets_p[t+1]) lists the
 * positions of type t in increasing order (offsets_p: num_types + 1
 * entries).  TMA_ERR_INVALID for a type out of range.
 */
tma_status_t gnn_type_partition(const int32_t *types, int64_t n, int num_types, int32_t *order_p,
                                int64_t *offsets_p);

/* An RGCN layer's parameters (or gradients), in -> out with B bases and R
 * relations: V [in x B*out] (the bases side by side: V_b is columns
 * [b*out, (b+1)*out)), coef [R x B], W_self [in x out], b [1 x out]. */
typedef struct gnn_rgcn_params {
    tensor_t V, coef, W_self, b;
} gnn_rgcn_params_t;

/*
 * Z = H[0:num_dst] W_self + sum_e w[e] H[src(e)] W_rel(e) + b with
 * W_r = sum_b coef[r, b] V_b, computed as T = H[0:num_src] V (one sgemm;
 * T: num_src x B*out, kept for backward), then tma_gnn_op_rgcn_aggregate.
 * The destination rows are the first num_dst rows of H (the sampler's
 * order).  The block's weights must be gnn_rgcn_norm's for the mean.
 */
tma_status_t gnn_rgcn_forward(const gnn_rgcn_params_t *P, const tma_gnn_block_t *blk, const tensor_t *rel,
                              const tensor_t *H, tensor_t *T, tensor_t *Z);
/*
 * Backward from dZ: every gradient in G (overwritten), and dH (num_src x
 * in, overwritten; NULL skips it) = dT V^T plus dZ W_self^T on the first
 * num_dst rows.  dT is scratch of T's shape; t_rel as for the op.
 */
tma_status_t gnn_rgcn_backward(const gnn_rgcn_params_t *P, const tma_gnn_block_t *blk, const tensor_t *rel,
                               const tensor_t *t_rel, const tensor_t *H, const tensor_t *T, const tensor_t *dZ,
                               tensor_t *dT, gnn_rgcn_params_t *G, tensor_t *dH);

/*
 * The per-node-type input projection of a batch of n nodes: node i of type
 * t gets out[i] = X_t[id(i)] W[t] + bias[t], where X_t (feats[t]) has its
 * own width.  order (i32 [n], on the backend) and offsets (host,
 * num_types + 1) come from gnn_type_partition of the nodes' types; ids
 * (i64 [n], on the backend) is the row in its type's feature table of the
 * node at each sorted position: ids[k] = id(order[k]).
 */
typedef struct gnn_type_proj {
    int num_types;
    tma_gnn_feat_t *const *feats;
    const int64_t *offsets;
    const tensor_t *order, *ids;
} gnn_type_proj_t;

/* out (n x d) from W[t] (dim_t x d) and bias[t] (1 x d); S is n x d scratch
 * (the rows sorted by type).  Every row of out is written. */
tma_status_t gnn_type_project_forward(const gnn_type_proj_t *tp, const tensor_t *W, const tensor_t *bias,
                                      tensor_t *S, tensor_t *out);
/* dW[t] and dbias[t] (overwritten; zero for a type with no node in the
 * batch) from dOut; dS is n x d scratch.  Features take no gradient. */
tma_status_t gnn_type_project_backward(const gnn_type_proj_t *tp, const tensor_t *dOut, tensor_t *dS, tensor_t *dW,
                                       tensor_t *dbias);

/*
 * A graph's features split by node type for the per-type input projection
 * (cfg->num_node_types > 0): type t's table holds its nodes' first
 * cfg->type_dims[t] feature columns, in node order; row[v] is node v's row
 * in its type's table.
 */
typedef struct gnn_type_feats {
    int num_types;
    tma_gnn_feat_t *feats[TMA_GNN_MAX_TYPES];
    float *host[TMA_GNN_MAX_TYPES]; /* the tables (a backend may keep pointing at them) */
    int64_t *row;                   /* [num_nodes] */
} gnn_type_feats_t;

tma_status_t gnn_type_feats_create(tma_gnn_backend_t *b, const tma_gnn_config_t *cfg, const tma_graph_t *g,
                                   gnn_type_feats_t *tf_p);
/* Accepts a zeroed (never created) one. */
void gnn_type_feats_destroy(tma_gnn_backend_t *b, gnn_type_feats_t *tf);
/* For the n nodes `nodes` of types `types`: gnn_type_partition into
 * order_p/offsets_p, and ids_p[k] = row of node nodes[order_p[k]]. */
tma_status_t gnn_type_feats_order(const gnn_type_feats_t *tf, const int64_t *nodes, const int32_t *types,
                                  int64_t n, int32_t *order_p, int64_t *offsets_p, int64_t *ids_p);

/* ------------------------------------------------------------------ trainer hooks (tests) */

/* The last batch a trainer sampled (host view, valid until the next step):
 * which graph, the sample, and the decoder pairs ((1 + NK)B of them: B
 * positives, then negative j of edge i at B + jB + i, as local ids of the
 * sample's seeds), NK = train.negatives. */
typedef struct gnn_batch_view {
    int graph_index;
    const tma_graph_sample_t *sample;
    int64_t num_pairs;
    const int32_t *head, *tail;
    const int64_t *seeds; /* the (2 + NK)B seeds asked for: u..., v..., negative tails (j-major)... */
} gnn_batch_view_t;

void gnn_trainer_last_batch(const tma_gnn_trainer_t *tr, gnn_batch_view_t *view_p);
/* Forward and backward again on the last batch with the current parameters. */
tma_status_t gnn_trainer_recompute(tma_gnn_trainer_t *tr, double *loss_p);
/* Creates a trainer on a named backend ("cpu", "ref", ...). */
tma_status_t gnn_trainer_create_on(const char *device, const tma_gnn_config_t *cfg, tma_graph_t *const *graphs,
                                   int num_graphs, tma_gnn_trainer_t **tr_p);
/* Evaluator hooks: the chunk size of layer-wise inference (tests force
 * several chunks on small graphs), and the final embeddings of all nodes
 * (N x hidden floats, host) for `params`. */
void gnn_evaluator_set_chunk_rows(tma_gnn_evaluator_t *ev, int64_t rows);
/* Caps a rank's layer chunks at `rows` rows and `edges` entries (tests: many chunks on a small graph). */
void gnn_rank_set_chunk(tma_gnn_rank_t *rk, int64_t rows, int64_t edges);
/* Tests: the rank's cache of remote rows made again for at most `rows` rows (0: none). */
tma_status_t gnn_rank_set_cache(tma_gnn_rank_t *rk, int64_t rows);
/* Creates an evaluator on a named backend. */
tma_status_t gnn_evaluator_create_on(const char *device, const tma_gnn_config_t *cfg, const tma_graph_t *g,
                                     tma_gnn_evaluator_t **ev_p);

#endif
