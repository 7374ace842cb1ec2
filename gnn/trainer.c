/*
 * trainer.c: mini-batch training for link prediction.  A step draws B
 * positive edges (uniformly from the directed CSR entries of one graph, so
 * each undirected edge in either direction) and NK = train.negatives
 * uniform negative tails per edge, samples the message-flow blocks around
 * the (2 + NK)B seeds with the batch's edges removed, runs the encoder and
 * decoder forward, BCE on the (1 + NK)B logits (the positives' mean and the
 * negatives' mean weighted one half each: with NK = 1 the plain mean), and
 * backward into the gradient block; then clips by global norm and takes an
 * Adam step.
 *
 * Every buffer is sized at creation (or when the graphs change) for the
 * worst-case batch from the sampler's bounds; a step never allocates.  On a
 * host-addressable backend (CPU) the sampler writes straight into the
 * tensors; otherwise into host staging arrays that are uploaded.
 */
#include "gnn_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COMP "trainer"

typedef struct gnn_slot {
    tma_graph_t *g;
    tma_graph_sampler_t *sampler;
    int t_from; /* the first block whose transpose the sampler fills */
    tma_gnn_feat_t *feat;
    tma_gnn_feat_info_t fi;
    int64_t weight; /* undirected training edges */
    /* Typed graphs: the nodes of each type (type t's are
     * type_nodes[type_off[t] .. type_off[t + 1])), for negatives of the
     * tail's type.  NULL on an untyped graph. */
    int64_t *type_nodes, *type_off;
    gnn_type_feats_t tf; /* the per-type input projection's feature tables */
} gnn_slot_t;

typedef struct gnn_layer_buf {
    tensor_t T, A, Z, mean, rstd, H;
} gnn_layer_buf_t;

struct tma_gnn_trainer {
    tma_gnn_config_t cfg;
    tma_gnn_layout_t layout;
    tma_gnn_backend_t *b;
    int L, K, B, mlp;
    int NK; /* negatives per positive (train.negatives) */
    const gnn_encoder_desc_t *enc; /* the encoder kind */
    int rgcn, distmult; /* the encoder and decoder read relation ids (RGCN, DistMult) */
    int single;         /* the decoder is one logit op (DistMult, dot): no hidden layers */
    int proj;           /* the per-type input projection (cfg.num_node_types > 0) */

    tensor_t params, grads, adam_m, adam_v;
    gnn_params_t P, G;
    int64_t step;
    tma_rng_t rng;

    gnn_slot_t *slots;
    int nslots;
    int64_t total_weight;
    int last_slot;
    int have_batch;

    /* capacities (worst case over the graphs) */
    int64_t cap_nodes, cap_dst[TMA_GNN_MAX_LAYERS], cap_src[TMA_GNN_MAX_LAYERS], cap_edges[TMA_GNN_MAX_LAYERS];
    int any_sparse, any_dense;

    /* the batch on the host */
    int64_t *seeds; /* [(2 + NK)B]: u..., v..., then negative j of edge i at 2B + jB + i */
    int64_t *excl;  /* [2B] */
    tma_graph_sample_t sample;
    int32_t *h_head, *h_tail; /* [(1 + NK)B]: the positives, then negative j of edge i at B + jB + i */
    int32_t *h_rel;           /* [(1 + NK)B]: each pair's relation id (DistMult) */
    int32_t *norm_count;      /* gnn_rgcn_norm's scratch: one int a relation id */
    int32_t *h_order;         /* the projection: the sample's positions sorted by node type */
    int64_t *h_ids;           /* ... and each one's row in its type's feature table */
    int64_t h_offsets[TMA_GNN_MAX_TYPES + 1];
    void *staging[7 * TMA_GNN_MAX_LAYERS + 8];
    int nstaging;

    /* the batch on the device */
    tensor_t nodes; /* i64 */
    tensor_t indptr[TMA_GNN_MAX_LAYERS], indices[TMA_GNN_MAX_LAYERS], weights[TMA_GNN_MAX_LAYERS];
    tensor_t t_indptr[TMA_GNN_MAX_LAYERS], t_indices[TMA_GNN_MAX_LAYERS], t_weights[TMA_GNN_MAX_LAYERS];
    tensor_t rel[TMA_GNN_MAX_LAYERS]; /* RGCN: each block edge's relation id */
    tma_gnn_block_t blk[TMA_GNN_MAX_LAYERS];
    tensor_t hi, ti, prel, labels, dlogits;

    gnn_layer_buf_t lb[TMA_GNN_MAX_LAYERS];
    tensor_t E[GNN_MAX_DECODER_LAYERS], D[GNN_MAX_DECODER_LAYERS];
    tensor_t g_src, g_dst, g_a, g_dec[2];
    tensor_t g_T; /* RGCN: dT, the gradient of a layer's projection onto its bases */
    tensor_t order, tids, X0, S, dX0; /* the projection: order, ids, its output, scratch, gradient */

    tma_gnn_timing_t timing;
};

/* The pairs a step scores (B positives, NK B negatives) and the seeds it samples around. */
static int64_t num_pairs(const tma_gnn_trainer_t *tr) { return (1 + (int64_t)tr->NK) * tr->B; }
static int64_t num_seeds(const tma_gnn_trainer_t *tr) { return (2 + (int64_t)tr->NK) * tr->B; }

/* ------------------------------------------------------------------ buffers */

static void free_batch_buffers(tma_gnn_trainer_t *tr)
{
    tma_gnn_tensor_free(&tr->nodes);
    for (int l = 0; l < TMA_GNN_MAX_LAYERS; l++) {
        tma_gnn_tensor_free(&tr->indptr[l]);
        tma_gnn_tensor_free(&tr->indices[l]);
        tma_gnn_tensor_free(&tr->weights[l]);
        tma_gnn_tensor_free(&tr->t_indptr[l]);
        tma_gnn_tensor_free(&tr->t_indices[l]);
        tma_gnn_tensor_free(&tr->t_weights[l]);
        tma_gnn_tensor_free(&tr->rel[l]);
        gnn_layer_buf_t *lb = &tr->lb[l];
        tensor_t *ts[] = {&lb->T, &lb->A, &lb->Z, &lb->mean, &lb->rstd, &lb->H};
        for (size_t i = 0; i < TMA_ARRAY_LEN(ts); i++)
            tma_gnn_tensor_free(ts[i]);
    }
    tma_gnn_tensor_free(&tr->g_src);
    tma_gnn_tensor_free(&tr->g_dst);
    tma_gnn_tensor_free(&tr->g_a);
    tma_gnn_tensor_free(&tr->g_T);
    tensor_t *pt[] = {&tr->order, &tr->tids, &tr->X0, &tr->S, &tr->dX0};
    for (size_t i = 0; i < TMA_ARRAY_LEN(pt); i++)
        tma_gnn_tensor_free(pt[i]);
    for (int i = 0; i < tr->nstaging; i++)
        tma_gnn_backend_host_free(tr->b, tr->staging[i]);
    tr->nstaging = 0;
    tr->have_batch = 0;
}

/* Host memory for one sample array: the tensor itself on a host-addressable
 * backend, else a staging buffer of the same size (page-locked where the
 * backend has it, so uploads are asynchronous DMA). */
static void *host_array(tma_gnn_trainer_t *tr, tensor_t *t)
{
    if (tr->b->ops->host_addressable)
        return t->data;
    void *p = tma_gnn_backend_host_alloc(tr->b, (size_t)t->capacity * tma_gnn_dtype_size(t->dtype));
    if (p)
        tr->staging[tr->nstaging++] = p;
    return p;
}

static tma_status_t alloc_t(tma_gnn_trainer_t *tr, tma_gnn_dtype_t dt, int64_t n, tensor_t *t)
{
    return tma_gnn_tensor_alloc(tr->b, dt, n > 0 ? n : 1, t);
}

/* Whether a SAGE layer 0 over dense features runs as one product: its own
 * rows and neighbour sums side by side (feat_self_aggregate) times
 * [W_self; W_neigh], which the parameter layout stores one after the other:
 * one sgemm with twice the inner dimension instead of two, the own rows
 * gathered once for the forward and backward passes instead of twice. */
static int stacked(const gnn_enc_params_t *e)
{
    return (const float *)e->W_neigh.data == (const float *)e->W_self.data + e->W_self.rows * e->W_self.cols &&
           e->W_neigh.rows == e->W_self.rows && e->W_neigh.cols == e->W_self.cols;
}

static int sage_concat(const tma_gnn_trainer_t *tr)
{
    return tr->enc->concat_self && !tr->proj && tr->b->ops->feat_self_aggregate &&
           stacked(&tr->P.enc[0]) && stacked(&tr->G.enc[0]);
}

/* Sizes every per-batch buffer for the worst case over the current graphs. */
static tma_status_t alloc_batch_buffers(tma_gnn_trainer_t *tr)
{
    const int L = tr->L;
    const int64_t H = tr->cfg.hidden, Fd = tr->cfg.feature_dim;
    tma_status_t st;
    tr->cap_nodes = 0;
    memset(tr->cap_dst, 0, sizeof tr->cap_dst);
    memset(tr->cap_edges, 0, sizeof tr->cap_edges);
    memset(tr->cap_src, 0, sizeof tr->cap_src);
    tr->any_sparse = tr->any_dense = 0;
    for (int i = 0; i < tr->nslots; i++) {
        tma_graph_sample_bounds_t bd;
        tma_graph_sampler_bounds(tr->slots[i].sampler, &bd);
        tr->cap_nodes = TMA_MAX(tr->cap_nodes, bd.max_nodes);
        for (int l = 0; l < L && !tr->mlp; l++) {
            tr->cap_dst[l] = TMA_MAX(tr->cap_dst[l], bd.max_dst[l]);
            tr->cap_src[l] = TMA_MAX(tr->cap_src[l], bd.max_src[l]);
            tr->cap_edges[l] = TMA_MAX(tr->cap_edges[l], bd.max_edges[l]);
        }
        if (tr->slots[i].fi.sparse)
            tr->any_sparse = 1;
        else
            tr->any_dense = 1;
    }
    if (tr->mlp)
        for (int l = 0; l < L; l++)
            tr->cap_dst[l] = tr->cap_nodes;

    if ((st = alloc_t(tr, TMA_GNN_I64, tr->cap_nodes, &tr->nodes)))
        return st;
    int64_t max_src_h = 0, max_dst = 0, max_a = 0, max_t = 0;
    for (int l = 0; l < L; l++) {
        int64_t n_dst = tr->cap_dst[l], n_src = l == 0 ? tr->cap_nodes : tr->cap_dst[l - 1];
        int64_t d_in = l == 0 ? Fd : H;
        gnn_layer_buf_t *lb = &tr->lb[l];
        if (!tr->mlp) {
            if ((st = alloc_t(tr, TMA_GNN_I32, n_dst + 1, &tr->indptr[l])) ||
                (st = alloc_t(tr, TMA_GNN_I32, tr->cap_edges[l], &tr->indices[l])) ||
                (st = alloc_t(tr, TMA_GNN_F32, tr->cap_edges[l], &tr->weights[l])) ||
                (st = alloc_t(tr, TMA_GNN_I32, tr->cap_src[l] + 1, &tr->t_indptr[l])) ||
                (st = alloc_t(tr, TMA_GNN_I32, tr->cap_edges[l], &tr->t_indices[l])) ||
                (st = alloc_t(tr, TMA_GNN_F32, tr->cap_edges[l], &tr->t_weights[l])))
                return st;
            int pf = l == 0 && tr->any_sparse, af = l > 0 || tr->any_dense;
            if (tr->enc->always_project) {
                /* Every layer projects its sources first (RGCN onto all bases, GAT for every head). */
                const int64_t ec = gnn_layer_edge_cols(&tr->cfg);
                pf = 0;
                af = 0;
                max_t = TMA_MAX(max_t, n_src * gnn_layer_proj_cols(&tr->cfg, l));
                if ((st = alloc_t(tr, TMA_GNN_F32, gnn_layer_proj_floats(&tr->cfg, l, n_src), &lb->T)))
                    return st;
                if (tr->rgcn && (st = alloc_t(tr, TMA_GNN_I32, tr->cap_edges[l], &tr->rel[l])))
                    return st;
                /* What the layer keeps an edge, and its backward's scratch (an edge's and a row's gradients). */
                if (ec > 0 && (st = alloc_t(tr, TMA_GNN_F32, tr->cap_edges[l] * ec, &lb->A)))
                    return st;
                if (ec > 0)
                    max_a = TMA_MAX(max_a, tr->cap_edges[l] * ec + n_src * 2 * ec);
            }
            if (pf && (st = alloc_t(tr, TMA_GNN_F32, n_src * H, &lb->T)))
                return st;
            /* A SAGE layer 0 in one product holds the own rows beside the sums. */
            const int64_t a_cols = l == 0 && tr->any_dense && sage_concat(tr) ? 2 * d_in : d_in;
            if (af && (st = alloc_t(tr, TMA_GNN_F32, n_dst * a_cols, &lb->A)))
                return st;
            if (pf)
                max_src_h = TMA_MAX(max_src_h, n_src * H); /* dT */
        }
        if ((st = alloc_t(tr, TMA_GNN_F32, n_dst * H, &lb->Z)))
            return st;
        if (l < L - 1) {
            if ((st = alloc_t(tr, TMA_GNN_F32, n_dst, &lb->mean)) ||
                (st = alloc_t(tr, TMA_GNN_F32, n_dst, &lb->rstd)) ||
                (st = alloc_t(tr, TMA_GNN_F32, n_dst * H, &lb->H)))
                return st;
        }
        if (l > 0) {
            max_src_h = TMA_MAX(max_src_h, n_src * H); /* dH */
            max_a = TMA_MAX(max_a, n_dst * H);         /* dA */
        }
        max_dst = TMA_MAX(max_dst, n_dst * H); /* dZ */
    }
    if ((st = alloc_t(tr, TMA_GNN_F32, max_src_h, &tr->g_src)) ||
        (st = alloc_t(tr, TMA_GNN_F32, max_dst, &tr->g_dst)) || (st = alloc_t(tr, TMA_GNN_F32, max_a, &tr->g_a)))
        return st;
    if (tr->enc->always_project && (st = alloc_t(tr, TMA_GNN_F32, max_t, &tr->g_T)))
        return st;
    if (tr->proj && ((st = alloc_t(tr, TMA_GNN_I32, tr->cap_nodes, &tr->order)) ||
                     (st = alloc_t(tr, TMA_GNN_I64, tr->cap_nodes, &tr->tids)) ||
                     (st = alloc_t(tr, TMA_GNN_F32, tr->cap_nodes * H, &tr->X0)) ||
                     (st = alloc_t(tr, TMA_GNN_F32, tr->cap_nodes * H, &tr->S)) ||
                     (st = alloc_t(tr, TMA_GNN_F32, tr->cap_nodes * H, &tr->dX0))))
        return st;

    /* Host views of the sample. */
    memset(&tr->sample, 0, sizeof tr->sample);
    tr->sample.nodes = host_array(tr, &tr->nodes);
    tr->sample.seed_local = tma_gnn_backend_host_alloc(tr->b, (size_t)num_seeds(tr) * sizeof(int32_t));
    if (tr->sample.seed_local)
        tr->staging[tr->nstaging++] = tr->sample.seed_local;
    if (!tr->sample.nodes || !tr->sample.seed_local)
        return TMA_ERR_NOMEM;
    if (tr->proj) {
        /* The sampler fills each node's type; the projection sorts by it on the host. */
        tr->sample.node_type = tma_gnn_backend_host_alloc(tr->b, (size_t)tr->cap_nodes * sizeof(int32_t));
        if (tr->sample.node_type)
            tr->staging[tr->nstaging++] = tr->sample.node_type;
        tr->h_order = host_array(tr, &tr->order);
        tr->h_ids = host_array(tr, &tr->tids);
        if (!tr->sample.node_type || !tr->h_order || !tr->h_ids)
            return TMA_ERR_NOMEM;
    }
    for (int l = 0; l < L && !tr->mlp; l++) {
        tma_graph_block_t *hb = &tr->sample.blocks[l];
        hb->indptr = host_array(tr, &tr->indptr[l]);
        hb->indices = host_array(tr, &tr->indices[l]);
        hb->weights = host_array(tr, &tr->weights[l]);
        hb->t_indptr = host_array(tr, &tr->t_indptr[l]);
        hb->t_indices = host_array(tr, &tr->t_indices[l]);
        hb->t_weights = host_array(tr, &tr->t_weights[l]);
        if (!hb->indptr || !hb->indices || !hb->weights || !hb->t_indptr || !hb->t_indices || !hb->t_weights)
            return TMA_ERR_NOMEM;
        if (tr->rgcn && !(hb->rel = host_array(tr, &tr->rel[l])))
            return TMA_ERR_NOMEM;
    }
    return TMA_OK;
}

/* Buffers whose size depends only on the config (decoder, pairs). */
static tma_status_t alloc_fixed_buffers(tma_gnn_trainer_t *tr)
{
    const int64_t P = num_pairs(tr);
    tma_status_t st;
    if ((st = alloc_t(tr, TMA_GNN_I32, P, &tr->hi)) || (st = alloc_t(tr, TMA_GNN_I32, P, &tr->ti)) ||
        (st = alloc_t(tr, TMA_GNN_F32, P, &tr->labels)) || (st = alloc_t(tr, TMA_GNN_F32, P, &tr->dlogits)))
        return st;
    int64_t widest = tr->cfg.hidden;
    if (tr->distmult && (st = alloc_t(tr, TMA_GNN_I32, P, &tr->prel)))
        return st;
    if (tr->single && (st = alloc_t(tr, TMA_GNN_F32, P, &tr->D[0])))
        return st;
    for (int k = 0; k < tr->K && !tr->single; k++) {
        const tensor_t *W = &tr->P.dec[k].W;
        widest = TMA_MAX(widest, W->cols);
        if ((st = alloc_t(tr, TMA_GNN_F32, P * W->rows, &tr->E[k])) ||
            (st = alloc_t(tr, TMA_GNN_F32, P * W->cols, &tr->D[k])))
            return st;
    }
    if ((st = alloc_t(tr, TMA_GNN_F32, P * widest, &tr->g_dec[0])) ||
        (st = alloc_t(tr, TMA_GNN_F32, P * widest, &tr->g_dec[1])))
        return st;
    float *lab = malloc((size_t)P * sizeof *lab);
    if (!lab)
        return TMA_ERR_NOMEM;
    for (int64_t p = 0; p < P; p++)
        lab[p] = p < tr->B ? 1.0f : 0.0f;
    tensor_t l = tma_gnn_tensor_shape(&tr->labels, P, 1);
    st = tma_gnn_tensor_upload(&l, lab);
    free(lab);
    tr->h_head = tma_gnn_backend_host_alloc(tr->b, (size_t)P * sizeof(int32_t));
    tr->h_tail = tma_gnn_backend_host_alloc(tr->b, (size_t)P * sizeof(int32_t));
    tr->seeds = malloc((size_t)num_seeds(tr) * sizeof(int64_t));
    tr->excl = malloc((size_t)(2 * tr->B) * sizeof(int64_t));
    if (!tr->h_head || !tr->h_tail || !tr->seeds || !tr->excl)
        return TMA_ERR_NOMEM;
    if (tr->distmult && !(tr->h_rel = tma_gnn_backend_host_alloc(tr->b, (size_t)P * sizeof(int32_t))))
        return TMA_ERR_NOMEM;
    if (tr->rgcn && !(tr->norm_count = calloc((size_t)tr->cfg.num_rel_ids, sizeof(int32_t))))
        return TMA_ERR_NOMEM;
    return st;
}

/* ------------------------------------------------------------------ graphs */

static void free_slots(tma_gnn_trainer_t *tr)
{
    for (int i = 0; i < tr->nslots; i++) {
        tma_graph_sampler_destroy(tr->slots[i].sampler);
        tma_gnn_feat_destroy(tr->b, tr->slots[i].feat);
        free(tr->slots[i].type_nodes);
        free(tr->slots[i].type_off);
        gnn_type_feats_destroy(tr->b, &tr->slots[i].tf);
    }
    free(tr->slots);
    tr->slots = NULL;
    tr->nslots = 0;
}

/* The nodes of each type, for negatives drawn from the tail's type. */
static tma_status_t index_types(const tma_graph_t *g, gnn_slot_t *s)
{
    const int T = g->num_node_types;
    s->type_off = calloc((size_t)T + 1, sizeof *s->type_off);
    s->type_nodes = malloc((size_t)g->num_nodes * sizeof *s->type_nodes);
    if (!s->type_off || !s->type_nodes)
        return TMA_ERR_NOMEM;
    for (int64_t v = 0; v < g->num_nodes; v++)
        s->type_off[g->node_type[v] + 1]++;
    for (int t = 0; t < T; t++)
        s->type_off[t + 1] += s->type_off[t];
    for (int64_t v = 0; v < g->num_nodes; v++)
        s->type_nodes[s->type_off[g->node_type[v]]++] = v;
    for (int t = T; t > 0; t--)
        s->type_off[t] = s->type_off[t - 1];
    s->type_off[0] = 0;
    return TMA_OK;
}

static tma_status_t make_slots(tma_gnn_trainer_t *tr, tma_graph_t *const *graphs, int n)
{
    if (n < 1 || !graphs) {
        tma_log_error(COMP, "a trainer needs at least one graph");
        return TMA_ERR_INVALID;
    }
    tr->slots = calloc((size_t)n, sizeof *tr->slots);
    if (!tr->slots)
        return TMA_ERR_NOMEM;
    tr->nslots = n;
    tr->total_weight = 0;
    tma_graph_sampler_opts_t so;
    memset(&so, 0, sizeof so);
    so.num_layers = tr->mlp ? 0 : tr->L;
    for (int l = 0; l < tr->L; l++)
        so.fanouts[l] = tr->cfg.fanouts[l];
    so.norm = tr->enc->norm;
    so.self_loops = tr->enc->self_loops;
    /* Backward gathers per source row.  RGCN's weights (the mean per
     * relation) are set after sampling, so its blocks have no transpose
     * and the backward scatters. */
    so.transpose = !tr->rgcn;
    so.threads = tma_gnn_backend_threads(tr->b);
    so.max_seeds = num_seeds(tr);
    so.max_excluded = tr->B;
    for (int i = 0; i < n; i++) {
        gnn_slot_t *s = &tr->slots[i];
        tma_graph_t *g = graphs[i];
        tma_status_t st;
        if (!g)
            return TMA_ERR_INVALID;
        if (g->feature_dim != tr->cfg.feature_dim) {
            tma_log_error(COMP, "graph %d has %d-dimensional features; the model expects %lld", i, g->feature_dim,
                          (long long)tr->cfg.feature_dim);
            return TMA_ERR_MISMATCH;
        }
        if (g->num_nodes < 2) {
            tma_log_error(COMP, "graph %d has %lld nodes; link prediction needs at least 2", i,
                          (long long)g->num_nodes);
            return TMA_ERR_INVALID;
        }
        s->g = g;
        s->weight = g->num_train_edges;
        tr->total_weight += s->weight;
        if ((st = tma_gnn_feat_create(tr->b, g->features, g->feat_dtype, g->num_nodes, g->feature_dim, 0,
                                      &s->feat)) != TMA_OK)
            return st;
        tma_gnn_feat_get_info(tr->b, s->feat, &s->fi);
        /* Layer 0's backward goes through its block's transpose only when it
         * projects first (sparse features) or feeds the per-type projection;
         * over dense features nothing needs it (no input gradient), and
         * transposing it was a serial pass over most of a step's edges. */
        so.transpose_from = tr->proj || gnn_layer_project_first(&tr->cfg, 0, &s->fi) ? 0 : TMA_MIN(1, so.num_layers);
        s->t_from = so.transpose ? so.transpose_from : so.num_layers;
        if ((st = tma_graph_sampler_create(g, &so, &s->sampler)) != TMA_OK)
            return st;
        if (tma_gnn_config_relational(&tr->cfg) && tma_graph_num_rel_ids(g) != tr->cfg.num_rel_ids) {
            tma_log_error(COMP, "graph %d has %d relation ids; the model expects %d", i, tma_graph_num_rel_ids(g),
                          tr->cfg.num_rel_ids);
            return TMA_ERR_MISMATCH;
        }
        if (tma_graph_is_typed(g) && (st = index_types(g, s)) != TMA_OK)
            return st;
        if (tr->proj) {
            int same = tma_graph_is_typed(g) && g->num_node_types == tr->cfg.num_node_types;
            for (int t = 0; same && t < g->num_node_types; t++)
                same = g->type_feat_dim[t] == tr->cfg.type_dims[t];
            if (!same) {
                tma_log_error(COMP, "graph %d's node types or their feature widths differ from the model's", i);
                return TMA_ERR_MISMATCH;
            }
            if ((st = gnn_type_feats_create(tr->b, &tr->cfg, g, &s->tf)) != TMA_OK)
                return st;
        }
    }
    if (tr->total_weight == 0) {
        tma_log_error(COMP, "none of the %d graph(s) has a training edge", n);
        return TMA_ERR_INVALID;
    }
    return TMA_OK;
}

tma_status_t tma_gnn_trainer_set_graphs(tma_gnn_trainer_t *tr, tma_graph_t *const *graphs, int num_graphs)
{
    free_slots(tr);
    free_batch_buffers(tr);
    tma_status_t st = make_slots(tr, graphs, num_graphs);
    if (st == TMA_OK)
        st = alloc_batch_buffers(tr);
    if (st != TMA_OK)
        tma_log_error(COMP, "could not set up the trainer's graphs: %s", tma_status_str(st));
    return st;
}

/* ------------------------------------------------------------------ lifetime */

void tma_gnn_trainer_destroy(tma_gnn_trainer_t *tr)
{
    if (!tr)
        return;
    free_slots(tr);
    free_batch_buffers(tr);
    tensor_t *ts[] = {&tr->params, &tr->grads,   &tr->adam_m,   &tr->adam_v,   &tr->hi,  &tr->ti,
                      &tr->labels, &tr->dlogits, &tr->g_dec[0], &tr->g_dec[1], &tr->prel};
    for (size_t i = 0; i < TMA_ARRAY_LEN(ts); i++)
        tma_gnn_tensor_free(ts[i]);
    for (int k = 0; k < GNN_MAX_DECODER_LAYERS; k++) {
        tma_gnn_tensor_free(&tr->E[k]);
        tma_gnn_tensor_free(&tr->D[k]);
    }
    if (tr->b) {
        tma_gnn_backend_host_free(tr->b, tr->h_head);
        tma_gnn_backend_host_free(tr->b, tr->h_tail);
        tma_gnn_backend_host_free(tr->b, tr->h_rel);
    }
    free(tr->norm_count);
    free(tr->seeds);
    free(tr->excl);
    tma_gnn_backend_destroy(tr->b);
    free(tr);
}

tma_status_t gnn_trainer_create_on(const char *device, const tma_gnn_config_t *cfg, tma_graph_t *const *graphs,
                                   int num_graphs, tma_gnn_trainer_t **tr_p)
{
    if (!cfg || !tr_p || num_graphs < 1 || !graphs || !graphs[0])
        return TMA_ERR_INVALID;
    tma_gnn_trainer_t *tr = calloc(1, sizeof *tr);
    if (!tr)
        return TMA_ERR_NOMEM;
    tma_status_t st;
    tr->cfg = *cfg;
    if ((st = tma_gnn_config_resolve(&tr->cfg, graphs[0])) != TMA_OK ||
        (st = tma_gnn_layout_build(&tr->cfg, &tr->layout)) != TMA_OK)
        goto fail;
    tr->L = tr->cfg.layers;
    tr->K = gnn_decoder_depth(&tr->cfg);
    tr->B = tr->cfg.batch_size;
    tr->NK = tr->cfg.negatives;
    tr->enc = gnn_encoder_of(&tr->cfg);
    tr->mlp = !tr->enc->neighbours;
    tr->rgcn = tr->enc->relational;
    tr->distmult = gnn_decoder_of(&tr->cfg)->relational;
    tr->single = gnn_decoder_of(&tr->cfg)->single;
    tr->proj = tr->cfg.num_node_types > 0;
    tma_rng_seed(&tr->rng, tr->cfg.seed, 0x747261696e6572ull);
    if ((st = tma_gnn_backend_create(device, tr->cfg.threads, &tr->b)) != TMA_OK ||
        (st = gnn_encoder_check_backend(&tr->cfg, tr->b)) != TMA_OK)
        goto fail;

    const int64_t np = tr->layout.total;
    if ((st = alloc_t(tr, TMA_GNN_F32, np, &tr->params)) || (st = alloc_t(tr, TMA_GNN_F32, np, &tr->grads)) ||
        (st = alloc_t(tr, TMA_GNN_F32, np, &tr->adam_m)) || (st = alloc_t(tr, TMA_GNN_F32, np, &tr->adam_v)))
        goto fail;
    float *init = malloc((size_t)np * sizeof *init);
    if (!init) {
        st = TMA_ERR_NOMEM;
        goto fail;
    }
    st = tma_gnn_params_init(&tr->cfg, tr->cfg.seed, init);
    if (st == TMA_OK)
        st = tma_gnn_tensor_upload(&tr->params, init);
    free(init);
    if (st || (st = tma_gnn_op_fill(&tr->grads, 0.0f)) || (st = tma_gnn_op_fill(&tr->adam_m, 0.0f)) ||
        (st = tma_gnn_op_fill(&tr->adam_v, 0.0f)))
        goto fail;
    if ((st = gnn_params_bind(&tr->cfg, &tr->layout, &tr->params, &tr->P)) ||
        (st = gnn_params_bind(&tr->cfg, &tr->layout, &tr->grads, &tr->G)))
        goto fail;
    if ((st = alloc_fixed_buffers(tr)) != TMA_OK)
        goto fail;
    if ((st = tma_gnn_trainer_set_graphs(tr, graphs, num_graphs)) != TMA_OK)
        goto fail;
    tma_log_debug(COMP, "trainer: %s encoder, %s decoder, %lld parameters, batch %d, %d graph(s), up to %lld sampled nodes",
                  tma_gnn_encoder_name(tr->cfg.encoder), tma_gnn_decoder_name(tr->cfg.decoder), (long long)np, tr->B, num_graphs,
                  (long long)tr->cap_nodes);
    *tr_p = tr;
    return TMA_OK;
fail:
    if (st == TMA_ERR_NOMEM)
        tma_log_error(COMP, "out of memory creating a trainer");
    tma_gnn_trainer_destroy(tr);
    return st;
}

tma_status_t tma_gnn_trainer_create(const tma_gnn_config_t *cfg, tma_graph_t *const *graphs, int num_graphs,
                                    tma_gnn_trainer_t **tr_p)
{
    if (!cfg)
        return TMA_ERR_INVALID;
    return gnn_trainer_create_on(cfg->device[0] ? cfg->device : "cpu", cfg, graphs, num_graphs, tr_p);
}

void tma_gnn_trainer_reseed(tma_gnn_trainer_t *tr, uint64_t seed)
{
    tma_rng_seed(&tr->rng, seed, 0x747261696e6572ull);
}

/* ------------------------------------------------------------------ the batch */

/* The row of directed CSR entry e: the largest u with indptr[u] <= e. */
static int64_t row_of_entry(const tma_graph_t *g, int64_t e)
{
    int64_t lo = 0, hi = g->num_nodes - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (g->indptr[mid] <= e)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static tma_status_t upload_prefix(tensor_t *t, const void *host, int64_t n)
{
    tensor_t v = tma_gnn_tensor_shape(t, n, 1);
    return tma_gnn_tensor_upload(&v, host);
}

static tma_status_t sample_batch(tma_gnn_trainer_t *tr)
{
    /* The graph: proportional to its training edges. */
    int si = 0;
    if (tr->nslots > 1) {
        int64_t r = (int64_t)tma_rng_below(&tr->rng, (uint64_t)tr->total_weight);
        while (si < tr->nslots - 1 && r >= tr->slots[si].weight) {
            r -= tr->slots[si].weight;
            si++;
        }
    }
    gnn_slot_t *s = &tr->slots[si];
    const tma_graph_t *g = s->g;
    const int B = tr->B;
    /* The staging buffers are rewritten below: the device must be done
     * reading the last batch from them (a no-op on host backends). */
    tma_status_t wst = tma_gnn_backend_wait(tr->b);
    if (wst != TMA_OK)
        return wst;
    const uint64_t entries = 2 * (uint64_t)g->num_train_edges;
    for (int i = 0; i < B; i++) {
        int64_t e = (int64_t)tma_rng_below(&tr->rng, entries);
        int64_t u = row_of_entry(g, e), v = g->indices[e];
        /* NK tails drawn right after the edge: with NK = 1 the draws of before. */
        for (int j = 0; j < tr->NK; j++) {
            int64_t t;
            if (s->type_nodes) {
                /* Typed graph: the negative tail is of the positive tail's type. */
                const int32_t ty = g->node_type[v];
                const int64_t o = s->type_off[ty], cnt = s->type_off[ty + 1] - o;
                t = s->type_nodes[o + (int64_t)tma_rng_below(&tr->rng, (uint64_t)cnt)];
                for (int tries = 0; (t == u || t == v) && tries < 64 && cnt > 2; tries++)
                    t = s->type_nodes[o + (int64_t)tma_rng_below(&tr->rng, (uint64_t)cnt)];
            } else {
                t = (int64_t)tma_rng_below(&tr->rng, (uint64_t)g->num_nodes);
                for (int tries = 0; (t == u || t == v) && tries < 64; tries++)
                    t = (int64_t)tma_rng_below(&tr->rng, (uint64_t)g->num_nodes);
            }
            tr->seeds[(int64_t)(2 + j) * B + i] = t;
        }
        if (tr->distmult) {
            /* The positive and its negatives are scored with the relation of u -> v. */
            const int32_t r = g->edge_rel ? g->edge_rel[e] : 0;
            for (int j = 0; j <= tr->NK; j++)
                tr->h_rel[(int64_t)j * B + i] = r;
        }
        tr->seeds[i] = u;
        tr->seeds[B + i] = v;
        tr->excl[2 * i] = u;
        tr->excl[2 * i + 1] = v;
    }
    tma_status_t st = tma_graph_sampler_sample(s->sampler, tr->seeds, num_seeds(tr), tr->excl, B,
                                               tma_rng_next(&tr->rng), &tr->sample);
    if (st != TMA_OK)
        return st;
    /* Pairs: (u_i, v_i) for the positives, (u_i, t_ij) for the negatives. */
    for (int64_t p = 0; p < num_pairs(tr); p++) {
        tr->h_head[p] = tr->sample.seed_local[p % B];
        tr->h_tail[p] = tr->sample.seed_local[B + p];
    }
    const tma_graph_sample_t *sm = &tr->sample;
    if (tr->proj) {
        st = gnn_type_feats_order(&s->tf, sm->nodes, sm->node_type, sm->num_nodes, tr->h_order, tr->h_offsets,
                                  tr->h_ids);
        st = st ? st : upload_prefix(&tr->order, tr->h_order, sm->num_nodes);
        st = st ? st : upload_prefix(&tr->tids, tr->h_ids, sm->num_nodes);
        if (st != TMA_OK)
            return st;
    }
    st = upload_prefix(&tr->nodes, sm->nodes, sm->num_nodes);
    st = st ? st : upload_prefix(&tr->hi, tr->h_head, num_pairs(tr));
    st = st ? st : upload_prefix(&tr->ti, tr->h_tail, num_pairs(tr));
    if (tr->distmult)
        st = st ? st : upload_prefix(&tr->prel, tr->h_rel, num_pairs(tr));
    for (int l = 0; l < tr->L && !tr->mlp && st == TMA_OK; l++) {
        const tma_graph_block_t *hb = &sm->blocks[l];
        tma_gnn_block_t *b = &tr->blk[l];
        if (tr->rgcn) {
            /* The mean over each relation's sampled neighbours, in place of the sampler's weights. */
            st = gnn_rgcn_norm(hb->num_dst, hb->indptr, hb->rel, tr->cfg.num_rel_ids, tr->norm_count, hb->weights);
            if (st != TMA_OK) {
                tma_log_error(COMP, "a sampled edge has a relation id outside [0, %d)", tr->cfg.num_rel_ids);
                break;
            }
            st = upload_prefix(&tr->rel[l], hb->rel, hb->num_edges);
            b->has_transpose = 0;
        }
        st = st ? st : upload_prefix(&tr->indptr[l], hb->indptr, hb->num_dst + 1);
        st = st ? st : upload_prefix(&tr->indices[l], hb->indices, hb->num_edges);
        st = st ? st : upload_prefix(&tr->weights[l], hb->weights, hb->num_edges);
        b->num_dst = hb->num_dst;
        b->num_src = hb->num_src;
        b->num_edges = hb->num_edges;
        b->indptr = tma_gnn_tensor_shape(&tr->indptr[l], hb->num_dst + 1, 1);
        b->indices = tma_gnn_tensor_shape(&tr->indices[l], hb->num_edges, 1);
        b->weights = tma_gnn_tensor_shape(&tr->weights[l], hb->num_edges, 1);
        if (tr->rgcn || l < s->t_from) {
            b->has_transpose = 0;
            continue;
        }
        st = st ? st : upload_prefix(&tr->t_indptr[l], hb->t_indptr, hb->num_src + 1);
        st = st ? st : upload_prefix(&tr->t_indices[l], hb->t_indices, hb->num_edges);
        st = st ? st : upload_prefix(&tr->t_weights[l], hb->t_weights, hb->num_edges);
        b->has_transpose = 1;
        b->t_indptr = tma_gnn_tensor_shape(&tr->t_indptr[l], hb->num_src + 1, 1);
        b->t_indices = tma_gnn_tensor_shape(&tr->t_indices[l], hb->num_edges, 1);
        b->t_weights = tma_gnn_tensor_shape(&tr->t_weights[l], hb->num_edges, 1);
    }
    tr->last_slot = si;
    tr->have_batch = (st == TMA_OK);
    tr->timing.sampled_nodes += sm->num_nodes;
    for (int l = 0; l < tr->L && !tr->mlp; l++)
        tr->timing.sampled_edges += sm->blocks[l].num_edges;
    return st;
}

/* Destination and source row counts of layer l in the current batch. */
static void layer_rows(const tma_gnn_trainer_t *tr, int l, int64_t *n_dst_p, int64_t *n_src_p)
{
    if (tr->mlp) {
        *n_dst_p = *n_src_p = tr->sample.num_seeds;
    } else {
        *n_dst_p = tr->blk[l].num_dst;
        *n_src_p = tr->blk[l].num_src;
    }
}

/* ------------------------------------------------------------------ forward and backward */

/* The per-type input projection of the batch's n nodes (views into order and ids). */
static gnn_type_proj_t type_proj(const tma_gnn_trainer_t *tr, int64_t n, tensor_t *order, tensor_t *ids)
{
    *order = tma_gnn_tensor_shape(&tr->order, n, 1);
    *ids = tma_gnn_tensor_shape(&tr->tids, n, 1);
    gnn_type_proj_t tp = {tr->cfg.num_node_types, tr->slots[tr->last_slot].tf.feats, tr->h_offsets, order, ids};
    return tp;
}

/* The key of layer l's dropout mask in this step: the same in its forward
 * and backward, and for a given seed in every run. */
static uint64_t dropout_key(const tma_gnn_trainer_t *tr, int l)
{
    return tma_hash64(tr->cfg.seed * 0x9E3779B97F4A7C15ull ^ tma_hash64((uint64_t)tr->step * 64 + (uint64_t)l));
}

/* BCE on the logits: the positives' mean and the negatives' mean, one half
 * each.  With one negative a positive that is the mean over all 2B logits,
 * computed as one op as it always was (the same bytes). */
static tma_status_t batch_loss(tma_gnn_trainer_t *tr, const tensor_t *logits, double *loss_p)
{
    const int64_t B = tr->B, P = num_pairs(tr);
    tensor_t labels = tma_gnn_tensor_shape(&tr->labels, P, 1), dl = tma_gnn_tensor_shape(&tr->dlogits, P, 1);
    if (tr->NK == 1)
        return tma_gnn_op_bce_logits(logits, &labels, loss_p, &dl);
    tensor_t lp = tma_gnn_tensor_view(logits, 0, B, 1), ln = tma_gnn_tensor_view(logits, B, P - B, 1);
    tensor_t yp = tma_gnn_tensor_view(&labels, 0, B, 1), yn = tma_gnn_tensor_view(&labels, B, P - B, 1);
    tensor_t dp = tma_gnn_tensor_view(&dl, 0, B, 1), dn = tma_gnn_tensor_view(&dl, B, P - B, 1);
    double pos = 0, neg = 0;
    tma_status_t st = tma_gnn_op_bce_logits(&lp, &yp, &pos, &dp);
    st = st ? st : tma_gnn_op_bce_logits(&ln, &yn, &neg, &dn);
    st = st ? st : tma_gnn_op_scale(&dl, 0.5f);
    if (st == TMA_OK)
        *loss_p = 0.5 * (pos + neg);
    return st;
}

static tma_status_t forward(tma_gnn_trainer_t *tr, double *loss_p)
{
    const gnn_slot_t *s = &tr->slots[tr->last_slot];
    const tma_gnn_config_t *cfg = &tr->cfg;
    const int64_t H = cfg->hidden, Fd = cfg->feature_dim, P = num_pairs(tr);
    tensor_t ids = tma_gnn_tensor_shape(&tr->nodes, tr->sample.num_nodes, 1);
    tensor_t Hprev;
    tma_status_t st = TMA_OK;
    for (int l = 0; l < tr->L && st == TMA_OK; l++) {
        int64_t n_dst, n_src;
        layer_rows(tr, l, &n_dst, &n_src);
        gnn_layer_buf_t *lb = &tr->lb[l];
        gnn_src_t src = {0};
        if (l == 0 && tr->proj) {
            /* Each node type through its own Linear: layer 0 reads that. */
            tensor_t order, tids, S = tma_gnn_tensor_shape(&tr->S, n_src, H);
            gnn_type_proj_t tp = type_proj(tr, n_src, &order, &tids);
            Hprev = tma_gnn_tensor_shape(&tr->X0, n_src, H);
            st = gnn_type_project_forward(&tp, tr->P.in_W, tr->P.in_b, &S, &Hprev);
            src.H = &Hprev;
        } else if (l == 0) {
            src.feat = s->feat;
            src.ids = &ids;
        } else {
            /* model.dropout on the layer's input, in place: the backward
             * reads the same dropped rows. */
            if (cfg->dropout > 0)
                st = st ? st : tma_gnn_op_dropout(&Hprev, (float)cfg->dropout, dropout_key(tr, l), &Hprev);
            src.H = &Hprev;
        }
        int pf = gnn_layer_project_first(cfg, l, &s->fi);
        tensor_t T, A, Z = tma_gnn_tensor_shape(&lb->Z, n_dst, H);
        tensor_t rel;
        if (tr->rgcn)
            rel = tma_gnn_tensor_shape(&tr->rel[l], tr->blk[l].num_edges, 1);
        if (pf) {
            T = tma_gnn_tensor_shape(&lb->T, n_src, gnn_layer_proj_cols(cfg, l));
            st = st ? st : gnn_layer_project(cfg, &tr->P, l, &src, n_src, &T);
            if (gnn_layer_edge_cols(cfg) > 0) /* what the layer keeps an edge */
                A = tma_gnn_tensor_shape(&lb->A, tr->blk[l].num_edges, gnn_layer_edge_cols(cfg));
        } else if (!tr->mlp) {
            A = tma_gnn_tensor_shape(&lb->A, n_dst, l == 0 ? Fd : H);
        }
        if (l == 0 && !pf && !s->fi.sparse && sage_concat(tr)) {
            /* [X_dst | A] [W_self; W_neigh] + b */
            const gnn_enc_params_t *e = &tr->P.enc[0];
            tensor_t XA = tma_gnn_tensor_shape(&lb->A, n_dst, 2 * Fd), W = tma_gnn_tensor_view(&e->W_self, 0, 2 * Fd, H);
            st = st ? st : tma_gnn_op_feat_self_aggregate(s->feat, &ids, &tr->blk[0], &XA);
            st = st ? st : tma_gnn_op_matmul_bias(&XA, &W, &e->b, &Z);
        } else {
            st = st ? st
                    : gnn_layer_combine(cfg, &tr->P, l, tr->mlp ? NULL : &tr->blk[l], &src, 0, pf ? &T : NULL,
                                        tr->rgcn ? &rel : NULL,
                                        (pf && !gnn_layer_edge_cols(cfg)) || tr->mlp ? NULL : &A, &Z);
        }
        if (st == TMA_OK && l < tr->L - 1) {
            tensor_t mean = tma_gnn_tensor_shape(&lb->mean, n_dst, 1), rstd = tma_gnn_tensor_shape(&lb->rstd, n_dst, 1);
            Hprev = tma_gnn_tensor_shape(&lb->H, n_dst, H);
            st = gnn_layer_activate(&tr->P, l, &Z, &mean, &rstd, &Hprev);
        }
    }
    if (st != TMA_OK)
        return st;
    tensor_t R = tma_gnn_tensor_shape(&tr->lb[tr->L - 1].Z, tr->sample.num_seeds, H);
    tensor_t hi = tma_gnn_tensor_shape(&tr->hi, P, 1), ti = tma_gnn_tensor_shape(&tr->ti, P, 1), rel;
    tensor_t E[GNN_MAX_DECODER_LAYERS], D[GNN_MAX_DECODER_LAYERS];
    if (tr->distmult)
        rel = tma_gnn_tensor_shape(&tr->prel, P, 1);
    if (tr->single)
        D[0] = tma_gnn_tensor_shape(&tr->D[0], P, 1);
    for (int k = 0; k < tr->K && !tr->single; k++) {
        E[k] = tma_gnn_tensor_shape(&tr->E[k], P, tr->P.dec[k].W.rows);
        D[k] = tma_gnn_tensor_shape(&tr->D[k], P, tr->P.dec[k].W.cols);
    }
    st = gnn_decoder_forward(cfg, &tr->P, &R, &hi, &ti, tr->distmult ? &rel : NULL, E, D);
    if (st == TMA_OK)
        st = batch_loss(tr, &D[tr->K - 1], loss_p);
    return st;
}

static tma_status_t backward(tma_gnn_trainer_t *tr)
{
    const gnn_slot_t *s = &tr->slots[tr->last_slot];
    const tma_gnn_config_t *cfg = &tr->cfg;
    const int64_t H = cfg->hidden, Fd = cfg->feature_dim, P = num_pairs(tr);

    /* The decoder, into the embeddings of the seeds. */
    const int64_t n_seeds = tr->sample.num_seeds;
    tensor_t R = tma_gnn_tensor_shape(&tr->lb[tr->L - 1].Z, n_seeds, H);
    tensor_t hi = tma_gnn_tensor_shape(&tr->hi, P, 1), ti = tma_gnn_tensor_shape(&tr->ti, P, 1);
    tensor_t prel = tma_gnn_tensor_shape(&tr->prel, tr->distmult ? P : 0, 1);
    tensor_t dZ = tma_gnn_tensor_shape(&tr->g_dst, n_seeds, H);
    tma_status_t st = gnn_decoder_of(cfg)->backward(cfg, &tr->P, &tr->G, &R, &hi, &ti, &prel, tr->E, tr->D,
                                                    tr->g_dec, &tr->dlogits, &dZ);

    tensor_t all_ids = tma_gnn_tensor_shape(&tr->nodes, tr->sample.num_nodes, 1);
    for (int l = tr->L - 1; l >= 0 && st == TMA_OK; l--) {
        int64_t n_dst, n_src;
        layer_rows(tr, l, &n_dst, &n_src);
        /* The layer's input rows, as forward read them. */
        tensor_t Hin, dH;
        gnn_src_t src = {0};
        if (l == 0 && !tr->proj) {
            src.feat = s->feat;
            src.ids = &all_ids;
        } else {
            Hin = tma_gnn_tensor_shape(l > 0 ? &tr->lb[l - 1].H : &tr->X0, n_src, H);
            dH = tma_gnn_tensor_shape(l > 0 ? &tr->g_src : &tr->dX0, n_src, H);
            src.H = &Hin;
        }
        const int pf = gnn_layer_project_first(cfg, l, &s->fi);
        const gnn_layer_bwd_t b = {
            .cfg = cfg, .n_dst = n_dst, .n_src = n_src, .d_in = l == 0 ? Fd : H, .src = &src,
            .blk = tr->mlp ? NULL : &tr->blk[l], .project_first = pf,
            .concat = l == 0 && !pf && !s->fi.sparse && sage_concat(tr), .T = &tr->lb[l].T, .A = &tr->lb[l].A,
            .rel = &tr->rel[l], .g_T = &tr->g_T, .g_src = &tr->g_src, .g_a = &tr->g_a, .dH = src.H ? &dH : NULL,
        };
        st = tma_gnn_op_colsum(&dZ, &tr->G.enc[l].b);
        st = st ? st : tr->enc->backward(&tr->P.enc[l], &tr->G.enc[l], &b, &dZ);
        if (st == TMA_OK && l > 0 && cfg->dropout > 0) /* back through the input's dropout: the same mask */
            st = tma_gnn_op_dropout(&dH, (float)cfg->dropout, dropout_key(tr, l), &dH);
        if (st == TMA_OK && l == 0 && tr->proj) {
            tensor_t order, tids, dS = tma_gnn_tensor_shape(&tr->S, n_src, H);
            gnn_type_proj_t tp = type_proj(tr, n_src, &order, &tids);
            st = gnn_type_project_backward(&tp, &dH, &dS, tr->G.in_W, tr->G.in_b);
        }
        if (st != TMA_OK || l == 0)
            break;
        /* Through PReLU and LayerNorm of layer l-1, into dZ. */
        const gnn_enc_params_t *wp = &tr->P.enc[l - 1];
        gnn_enc_params_t *gp = &tr->G.enc[l - 1];
        gnn_layer_buf_t *lp = &tr->lb[l - 1];
        tensor_t Z = tma_gnn_tensor_shape(&lp->Z, n_src, H);
        tensor_t mean = tma_gnn_tensor_shape(&lp->mean, n_src, 1), rstd = tma_gnn_tensor_shape(&lp->rstd, n_src, 1);
        dZ = tma_gnn_tensor_shape(&tr->g_dst, n_src, H);
        st = tma_gnn_op_ln_prelu_bwd(&dH, &Z, &wp->ln_w, &wp->ln_b, &wp->prelu, &mean, &rstd, &dZ, &gp->ln_w,
                                     &gp->ln_b, &gp->prelu);
    }
    return st;
}

/* ------------------------------------------------------------------ steps */

tma_status_t tma_gnn_trainer_compute_grads(tma_gnn_trainer_t *tr, float *loss_p)
{
    if (tr->nslots == 0) {
        tma_log_error(COMP, "the trainer has no graphs (a failed set_graphs?)");
        return TMA_ERR_INVALID;
    }
    double t0 = tma_clock_now();
    tma_status_t st = sample_batch(tr);
    double t1 = tma_clock_now();
    double loss = 0;
    if (st == TMA_OK)
        st = forward(tr, &loss);
    double t2 = tma_clock_now();
    if (st == TMA_OK)
        st = backward(tr);
    double t3 = tma_clock_now();
    tr->timing.sample += t1 - t0;
    tr->timing.forward += t2 - t1;
    tr->timing.backward += t3 - t2;
    tr->timing.batches++;
    if (st != TMA_OK) {
        tma_log_error(COMP, "training step failed: %s", tma_status_str(st));
        return st;
    }
    if (!isfinite(loss)) {
        tma_log_error(COMP, "the loss became %g at step %lld (try a lower train.lr)", loss,
                      (long long)tr->step + 1);
        return TMA_ERR_RANGE;
    }
    if (loss_p)
        *loss_p = (float)loss;
    return TMA_OK;
}

tma_status_t tma_gnn_trainer_apply_grads(tma_gnn_trainer_t *tr)
{
    double t0 = tma_clock_now();
    tma_status_t st = TMA_OK;
    if (tr->cfg.clip > 0) {
        /* torch.nn.utils.clip_grad_norm_: scale by clip / (norm + 1e-6) when that is below 1. */
        double ss;
        st = tma_gnn_op_sumsq(&tr->grads, &ss);
        double norm = sqrt(ss);
        if (st == TMA_OK && !isfinite(norm)) {
            tma_log_error(COMP, "the gradient norm is %g at step %lld", norm, (long long)tr->step + 1);
            return TMA_ERR_RANGE;
        }
        double coef = tr->cfg.clip / (norm + 1e-6);
        if (st == TMA_OK && coef < 1.0)
            st = tma_gnn_op_scale(&tr->grads, (float)coef);
    }
    /* The schedule follows this trainer's own step count; weight decay is
     * decoupled (AdamW: p *= 1 - lr * wd, then the Adam update). */
    const double lr = tma_gnn_lr_at(&tr->cfg, tr->step);
    if (st == TMA_OK && tr->cfg.weight_decay > 0)
        st = tma_gnn_op_scale(&tr->params, (float)(1.0 - lr * tr->cfg.weight_decay));
    tma_gnn_adam_t h = {(float)lr, (float)tr->cfg.beta1, (float)tr->cfg.beta2, (float)tr->cfg.eps, tr->step + 1};
    if (st == TMA_OK)
        st = tma_gnn_op_adam(&tr->params, &tr->grads, &tr->adam_m, &tr->adam_v, &h);
    if (st == TMA_OK)
        tr->step++;
    tr->timing.optimizer += tma_clock_now() - t0;
    return st;
}

tma_status_t tma_gnn_trainer_step(tma_gnn_trainer_t *tr, float *loss_p)
{
    tma_status_t st = tma_gnn_trainer_compute_grads(tr, loss_p);
    return st ? st : tma_gnn_trainer_apply_grads(tr);
}

/* ------------------------------------------------------------------ access */

int64_t tma_gnn_trainer_param_count(const tma_gnn_trainer_t *tr) { return tr->layout.total; }

tma_status_t tma_gnn_trainer_get_params(const tma_gnn_trainer_t *tr, float *params)
{
    return tma_gnn_tensor_download(&tr->params, params);
}

tma_status_t tma_gnn_trainer_set_params(tma_gnn_trainer_t *tr, const float *params)
{
    return tma_gnn_tensor_upload(&tr->params, params);
}

tma_status_t tma_gnn_trainer_get_grads(const tma_gnn_trainer_t *tr, float *grads)
{
    return tma_gnn_tensor_download(&tr->grads, grads);
}

tma_status_t tma_gnn_trainer_set_grads(tma_gnn_trainer_t *tr, const float *grads)
{
    return tma_gnn_tensor_upload(&tr->grads, grads);
}

int64_t tma_gnn_trainer_steps(const tma_gnn_trainer_t *tr) { return tr->step; }

tma_status_t tma_gnn_trainer_get_opt(const tma_gnn_trainer_t *tr, tma_gnn_opt_state_t *s)
{
    tma_status_t st = tma_gnn_tensor_download(&tr->adam_m, s->adam_m);
    if (st == TMA_OK)
        st = tma_gnn_tensor_download(&tr->adam_v, s->adam_v);
    s->steps = tr->step;
    s->rng = tr->rng;
    return st;
}

tma_status_t tma_gnn_trainer_set_opt(tma_gnn_trainer_t *tr, const tma_gnn_opt_state_t *s)
{
    if (s->steps < 0)
        return TMA_ERR_INVALID;
    tma_status_t st = tma_gnn_tensor_upload(&tr->adam_m, s->adam_m);
    if (st == TMA_OK)
        st = tma_gnn_tensor_upload(&tr->adam_v, s->adam_v);
    if (st == TMA_OK) {
        tr->step = s->steps;
        tr->rng = s->rng;
    }
    return st;
}

const tma_gnn_config_t *tma_gnn_trainer_config(const tma_gnn_trainer_t *tr) { return &tr->cfg; }

void tma_gnn_trainer_timing(const tma_gnn_trainer_t *tr, tma_gnn_timing_t *t_p) { *t_p = tr->timing; }

/* ------------------------------------------------------------------ test hooks */

void gnn_trainer_last_batch(const tma_gnn_trainer_t *tr, gnn_batch_view_t *view_p)
{
    memset(view_p, 0, sizeof *view_p);
    if (!tr->have_batch)
        return;
    view_p->graph_index = tr->last_slot;
    view_p->sample = &tr->sample;
    view_p->num_pairs = num_pairs(tr);
    view_p->head = tr->h_head;
    view_p->tail = tr->h_tail;
    view_p->seeds = tr->seeds;
}

tma_status_t gnn_trainer_recompute(tma_gnn_trainer_t *tr, double *loss_p)
{
    if (!tr->have_batch)
        return TMA_ERR_INVALID;
    tma_status_t st = forward(tr, loss_p);
    return st ? st : backward(tr);
}

tma_gnn_backend_t *tma_gnn_trainer_backend(const tma_gnn_trainer_t *tr) { return tr->b; }
