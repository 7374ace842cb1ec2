/*
 * evaluator.c: link-prediction MRR with full-neighbourhood inference.
 *
 * Inference is layer-wise over the whole training graph: layer l reads the
 * N x d embeddings of layer l-1 (or the features) and writes N x hidden
 * embeddings, in chunks of destination rows whose full-neighbourhood block
 * is built on the fly, so memory is two embedding tables plus one chunk.
 * GCN and SAGE layers from a dense source run as one op a chunk where the
 * backend has it (layer_infer: aggregate, multiply, bias, LayerNorm and
 * PReLU on tiles of rows in cache); otherwise as the separate ops.
 * Then each evaluation edge (u, v) and its fixed negatives (u, v') go
 * through the decoder in chunks of edges and are ranked: with g negatives
 * above the positive and e equal to it, rank = 1 + g + e (pessimistic: a tie
 * counts against the positive) or 1 + g + e/2 (mean, OGB's rule).  MRR and
 * Hits@K follow from the ranks (tma_gnn_metrics_*).
 *
 * eval.table_dtype "bf16" (CPU only) keeps the two tables in bfloat16: each
 * layer reads the previous one through a feature store over it (rows widened
 * to float32 as they are gathered, as 16-bit features are), writes a chunk
 * in float32 and narrows it into its table; scoring widens the rows a chunk
 * of edges needs.
 */
#include "gnn_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COMP "evaluator"

/* Edges (of the full-neighbourhood block) built per inference chunk. */
#define EVAL_CHUNK_EDGES (1 << 22)
/* Floats of aggregated input a chunk may hold. */
#define EVAL_CHUNK_FLOATS (1 << 24)
/* Bytes of input rows a group of the locality order may span: a share of a
 * last-level cache, one group a thread. */
#define EVAL_GROUP_BYTES ((int64_t)8 << 20)
/* The smallest group the locality order is capped at. */
#define EVAL_GROUP_MIN 1024

struct tma_gnn_evaluator {
    tma_gnn_config_t cfg;
    tma_gnn_layout_t layout;
    tma_gnn_backend_t *b;
    const tma_graph_t *g;
    tensor_t params;
    gnn_params_t P;
    tma_gnn_feat_t *feat;
    tma_gnn_feat_info_t fi;
    tensor_t emb[2]; /* N x hidden */
    /* eval.table_dtype "bf16": the tables in t16 instead of emb, read through
     * tfeat (widened as gathered, rows by idn: table row p is t16 row p); a
     * chunk's output in Zo before it is narrowed; a scoring chunk's rows in Rs. */
    int bf16;
    uint16_t *t16[2];
    tma_gnn_feat_t *tfeat[2];
    tensor_t idn, Zo, Rs;
    tensor_t ids;    /* i64: the feature row of each table row (node[p] for sparse features in the locality order, else p) */
    /* The locality order (tma_graph_locality_order), NULL for id order:
     * table row p holds node node[p], node v is in row pos[v]. */
    int32_t *node, *pos;
    float *pfeat; /* dense features in the locality order (row p: node node[p]), or NULL */

    int64_t chunk_rows, chunk_edges;
    tensor_t c_indptr, c_indices, c_weights, A, Z, mean, rstd;
    tensor_t c_rel, T;     /* RGCN: the chunk's relation ids; a layer's projection onto its bases (N rows) */
    int32_t *norm_count;   /* RGCN: gnn_rgcn_norm's scratch */
    /* The per-type input projection of every node: tables, order, rows. */
    gnn_type_feats_t tf;
    tensor_t order, tids;
    int64_t offsets[TMA_GNN_MAX_TYPES + 1];
    tma_graph_block_t hb; /* host view of the chunk block */
    /* GCN and SAGE: every chunk's block built once, when the whole graph's fit
     * in eval.block_cache_mb (else nchunks = 0 and each inference builds them).
     * Chunk c is table rows crow[c] .. crow[c + 1], its indptr (local, from 0)
     * at k_indptr[crow[c] + c], its edges at k_indices[cedge[c] ..]. */
    int64_t nchunks, *crow, *cedge;
    tensor_t k_indptr, k_indices, k_weights;
    void *staging[4];

    int64_t pairs; /* per scoring chunk */
    tensor_t hi, ti, prel, dec[2];
    int32_t *h_hi, *h_ti, *h_rel;
    float *h_logits;

    double last_infer_s, last_score_s;
};

static tma_status_t alloc_t(tma_gnn_backend_t *b, tma_gnn_dtype_t dt, int64_t n, tensor_t *t)
{
    return tma_gnn_tensor_alloc(b, dt, n > 0 ? n : 1, t);
}

void tma_gnn_evaluator_destroy(tma_gnn_evaluator_t *ev)
{
    if (!ev)
        return;
    tensor_t *ts[] = {&ev->params,  &ev->emb[0], &ev->emb[1], &ev->ids,  &ev->c_indptr, &ev->c_indices,
                      &ev->c_weights, &ev->A,    &ev->Z,      &ev->mean, &ev->rstd,     &ev->hi,
                      &ev->ti,      &ev->dec[0], &ev->dec[1], &ev->c_rel, &ev->T, &ev->prel, &ev->order, &ev->tids,
                      &ev->k_indptr, &ev->k_indices, &ev->k_weights, &ev->idn, &ev->Zo, &ev->Rs};
    for (size_t i = 0; i < TMA_ARRAY_LEN(ts); i++)
        tma_gnn_tensor_free(ts[i]);
    if (ev->b) {
        for (int i = 0; i < 4; i++)
            tma_gnn_backend_host_free(ev->b, ev->staging[i]);
        tma_gnn_backend_host_free(ev->b, ev->h_rel);
        tma_gnn_backend_host_free(ev->b, ev->h_hi);
        tma_gnn_backend_host_free(ev->b, ev->h_ti);
        tma_gnn_feat_destroy(ev->b, ev->feat);
        for (int i = 0; i < 2; i++)
            tma_gnn_feat_destroy(ev->b, ev->tfeat[i]);
        gnn_type_feats_destroy(ev->b, &ev->tf);
    }
    for (int i = 0; i < 2; i++)
        tma_free_aligned(ev->t16[i]);
    tma_free_aligned(ev->h_logits);
    free(ev->node);
    free(ev->pos);
    tma_free_aligned(ev->pfeat);
    free(ev->norm_count);
    free(ev->crow);
    free(ev->cedge);
    tma_gnn_backend_destroy(ev->b);
    free(ev);
}

static void *host_array(tma_gnn_evaluator_t *ev, tensor_t *t, int slot)
{
    if (ev->b->ops->host_addressable)
        return t->data;
    ev->staging[slot] = tma_gnn_backend_host_alloc(ev->b, (size_t)t->capacity * tma_gnn_dtype_size(t->dtype));
    return ev->staging[slot];
}

/* The per-type input projection: every node's type order and table row, once. */
static tma_status_t type_projection_setup(tma_gnn_evaluator_t *ev)
{
    const tma_graph_t *g = ev->g;
    const int64_t N = g->num_nodes;
    tma_status_t st;
    if (!tma_graph_is_typed(g) || g->num_node_types != ev->cfg.num_node_types) {
        tma_log_error(COMP, "the graph's node types differ from the model's (%d)", ev->cfg.num_node_types);
        return TMA_ERR_MISMATCH;
    }
    if ((st = gnn_type_feats_create(ev->b, &ev->cfg, g, &ev->tf)) ||
        (st = alloc_t(ev->b, TMA_GNN_I32, N, &ev->order)) || (st = alloc_t(ev->b, TMA_GNN_I64, N, &ev->tids)))
        return st;
    int32_t *order = malloc((size_t)N * sizeof *order);
    int64_t *ids = malloc((size_t)N * sizeof *ids);
    st = order && ids ? gnn_type_feats_order(&ev->tf, NULL, g->node_type, N, order, ev->offsets, ids) : TMA_ERR_NOMEM;
    ev->order = tma_gnn_tensor_shape(&ev->order, N, 1);
    ev->tids = tma_gnn_tensor_shape(&ev->tids, N, 1);
    st = st ? st : tma_gnn_tensor_upload(&ev->order, order);
    st = st ? st : tma_gnn_tensor_upload(&ev->tids, ids);
    free(order);
    free(ids);
    return st;
}

/* The locality order, for the encoders that aggregate neighbours on graphs
 * of one node type (eval.node_order "locality"). */
static tma_status_t order_setup(tma_gnn_evaluator_t *ev, int64_t row_floats)
{
    const tma_gnn_config_t *cfg = &ev->cfg;
    const int64_t N = ev->g->num_nodes;
    if (!cfg->eval_locality || cfg->num_node_types > 0 || !gnn_encoder_of(cfg)->whole_graph)
        return TMA_OK;
    ev->node = malloc((size_t)N * sizeof *ev->node);
    ev->pos = malloc((size_t)N * sizeof *ev->pos);
    if (!ev->node || !ev->pos)
        return TMA_ERR_NOMEM;
    int64_t cap = TMA_MAX((int64_t)EVAL_GROUP_MIN, EVAL_GROUP_BYTES / (row_floats * (int64_t)sizeof(float)));
    double t0 = tma_clock_now();
    tma_status_t st = tma_graph_locality_order(ev->g, cap, ev->node, ev->pos);
    if (st != TMA_OK)
        return st;
    const int64_t Fd = cfg->feature_dim;
    const double copy_bytes = (double)N * (double)Fd * sizeof(float);
    if (!ev->fi.sparse && copy_bytes > (double)cfg->eval_feature_copy_mb * (1 << 20))
        tma_log_info(COMP, "the features (%.0f MiB) are read in place, not copied into the locality order "
                     "(eval.feature_copy_mb = %d)", copy_bytes / (1 << 20), cfg->eval_feature_copy_mb);
    else if (!ev->fi.sparse) {
        /* Dense features in the same order, so that a group's rows (and a
         * chunk's own rows) are contiguous: a copy the size of the features. */
        if (!(ev->pfeat = tma_alloc_aligned((size_t)N * (size_t)Fd * sizeof(float))))
            return TMA_ERR_NOMEM;
        tma_advise_huge(ev->pfeat, (size_t)N * (size_t)Fd * sizeof(float)); /* neighbours' rows: at random */
        /* Widened to float32 as they are copied (16-bit features too). */
#pragma omp parallel for num_threads(tma_gnn_backend_threads(ev->b)) schedule(static)
        for (int64_t p = 0; p < N; p++)
            tma_graph_feat_rows(ev->g, ev->node[p], 1, ev->pfeat + p * Fd);
        tma_gnn_feat_destroy(ev->b, ev->feat);
        ev->feat = NULL;
        if ((st = tma_gnn_feat_create(ev->b, ev->pfeat, TMA_FEAT_F32, N, Fd, 0, &ev->feat)) != TMA_OK)
            return st;
        tma_gnn_feat_get_info(ev->b, ev->feat, &ev->fi);
    }
    tma_log_debug(COMP, "locality order of %lld nodes (groups of at most %lld) in %.3f s", (long long)N,
                  (long long)cap, tma_clock_now() - t0);
    return TMA_OK;
}

static int64_t chunk_end(const tma_gnn_evaluator_t *ev, int64_t r0, int self_loops);

/* Builds every chunk's block once (see nchunks) when they fit in
 * eval.block_cache_mb: the blocks are the same for every layer and every
 * inference, and building them cost about a tenth of a GCN inference. */
static tma_status_t block_cache_setup(tma_gnn_evaluator_t *ev)
{
    const tma_gnn_config_t *cfg = &ev->cfg;
    const tma_graph_t *g = ev->g;
    const int gcn = gnn_encoder_of(cfg)->self_loops;
    const int64_t N = g->num_nodes;
    if (!gnn_encoder_of(cfg)->whole_graph)
        return TMA_OK;
    int64_t nch = 0, edges = gcn ? N : 0;
    for (int64_t r0 = 0; r0 < N; r0 = chunk_end(ev, r0, gcn))
        nch++;
    for (int64_t v = 0; v < N; v++)
        edges += tma_graph_degree(g, v);
    const double bytes = 8.0 * (double)edges + 4.0 * (double)(N + nch);
    if (bytes > (double)cfg->eval_block_cache_mb * (1 << 20)) {
        tma_log_debug(COMP, "inference blocks: %.0f MiB, over eval.block_cache_mb = %d: built at every inference",
                      bytes / (1 << 20), cfg->eval_block_cache_mb);
        return TMA_OK;
    }
    tma_gnn_backend_t *b = ev->b;
    tma_status_t st;
    if (!(ev->crow = malloc((size_t)(nch + 1) * sizeof *ev->crow)) ||
        !(ev->cedge = malloc((size_t)(nch + 1) * sizeof *ev->cedge)))
        return TMA_ERR_NOMEM;
    if ((st = alloc_t(b, TMA_GNN_I32, N + nch, &ev->k_indptr)) || (st = alloc_t(b, TMA_GNN_I32, edges, &ev->k_indices)) ||
        (st = alloc_t(b, TMA_GNN_F32, edges, &ev->k_weights)))
        return st;
    const tma_graph_norm_t norm = gcn ? TMA_GRAPH_NORM_GCN : TMA_GRAPH_NORM_MEAN;
    int64_t c = 0, e0 = 0;
    for (int64_t r0 = 0; r0 < N; c++) {
        const int64_t r1 = chunk_end(ev, r0, gcn), n = r1 - r0;
        /* The staging arrays are rewritten: the device must be done with the last chunk's. */
        if ((st = tma_gnn_backend_wait(b)) ||
            (st = tma_graph_block_full_ordered(g, norm, gcn, ev->node, ev->pos, r0, r1, tma_gnn_backend_threads(b),
                                               &ev->hb)))
            return st;
        const int64_t ne = ev->hb.num_edges;
        if (e0 + ne > edges)
            return TMA_ERR_INTERNAL;
        tensor_t ip = tma_gnn_tensor_view(&ev->k_indptr, r0 + c, n + 1, 1);
        tensor_t ix = tma_gnn_tensor_view(&ev->k_indices, e0, ne, 1), w = tma_gnn_tensor_view(&ev->k_weights, e0, ne, 1);
        if ((st = tma_gnn_tensor_upload(&ip, ev->hb.indptr)) || (st = tma_gnn_tensor_upload(&ix, ev->hb.indices)) ||
            (st = tma_gnn_tensor_upload(&w, ev->hb.weights)))
            return st;
        ev->crow[c] = r0;
        ev->cedge[c] = e0;
        e0 += ne;
        r0 = r1;
    }
    ev->crow[c] = N;
    ev->cedge[c] = e0;
    ev->nchunks = c;
    return tma_gnn_backend_wait(b);
}

/* eval.table_dtype "bf16": the two tables in bfloat16, each behind a feature
 * store (dense: nothing is scanned), read by table row (idn). */
static tma_status_t tables16_setup(tma_gnn_evaluator_t *ev)
{
    const int64_t N = ev->g->num_nodes, H = ev->cfg.hidden;
    tma_status_t st = alloc_t(ev->b, TMA_GNN_I64, N, &ev->idn);
    int64_t *idh = st == TMA_OK ? malloc((size_t)N * sizeof *idh) : NULL;
    if (st == TMA_OK && !idh)
        st = TMA_ERR_NOMEM;
    for (int64_t i = 0; st == TMA_OK && i < N; i++)
        idh[i] = i;
    if (st == TMA_OK) {
        ev->idn = tma_gnn_tensor_shape(&ev->idn, N, 1);
        st = tma_gnn_tensor_upload(&ev->idn, idh);
    }
    free(idh);
    for (int i = 0; i < 2 && st == TMA_OK; i++) {
        if (!(ev->t16[i] = tma_alloc_aligned((size_t)(N * H) * sizeof(uint16_t))))
            return TMA_ERR_NOMEM;
        st = tma_gnn_feat_create(ev->b, ev->t16[i], TMA_FEAT_BF16, N, H, TMA_GNN_FEAT_DENSE, &ev->tfeat[i]);
    }
    return st;
}

tma_status_t gnn_evaluator_create_on(const char *device, const tma_gnn_config_t *cfg, const tma_graph_t *g,
                                     tma_gnn_evaluator_t **ev_p)
{
    if (!cfg || !g || !ev_p)
        return TMA_ERR_INVALID;
    if (g->num_nodes < 1 || g->num_nodes > INT32_MAX) {
        tma_log_error(COMP, "the graph has %lld nodes; evaluation supports 1 to %d", (long long)g->num_nodes,
                      INT32_MAX);
        return TMA_ERR_UNSUPPORTED;
    }
    tma_gnn_evaluator_t *ev = calloc(1, sizeof *ev);
    if (!ev)
        return TMA_ERR_NOMEM;
    tma_status_t st;
    ev->cfg = *cfg;
    ev->g = g;
    if ((st = tma_gnn_config_resolve(&ev->cfg, g)) || (st = tma_gnn_layout_build(&ev->cfg, &ev->layout)))
        goto fail;
    int threads = ev->cfg.eval_threads > 0 ? ev->cfg.eval_threads : ev->cfg.threads;
    if ((st = tma_gnn_backend_create(device, threads, &ev->b)) || (st = gnn_encoder_check_backend(&ev->cfg, ev->b)))
        goto fail;
    tma_gnn_backend_t *b = ev->b;
    ev->bf16 = cfg->eval_table_bf16;
    if (ev->bf16 && !b->ops->host_addressable) {
        /* A device's feature store widens 16-bit rows once, on upload: no table would shrink. */
        tma_log_error(COMP, "eval.table_dtype \"bf16\" is for evaluators on the CPU; this one runs on %s: set "
                      "eval.table_dtype \"f32\" or eval.device \"cpu\"", device);
        st = TMA_ERR_CONFIG;
        goto fail;
    }
    const int64_t N = g->num_nodes, H = ev->cfg.hidden, Fd = ev->cfg.feature_dim;
    if ((st = alloc_t(b, TMA_GNN_F32, ev->layout.total, &ev->params)) ||
        (st = gnn_params_bind(&ev->cfg, &ev->layout, &ev->params, &ev->P)) ||
        (st = tma_gnn_feat_create(b, g->features, g->feat_dtype, N, Fd, 0, &ev->feat)))
        goto fail;
    tma_gnn_feat_get_info(b, ev->feat, &ev->fi);
    int64_t widest_in = (ev->fi.sparse ? H : TMA_MAX(H, Fd));
    if ((st = order_setup(ev, widest_in)) != TMA_OK)
        goto fail;
    if (ev->bf16) {
        if ((st = tables16_setup(ev)) != TMA_OK)
            goto fail;
    } else if ((st = alloc_t(b, TMA_GNN_F32, N * H, &ev->emb[0])) || (st = alloc_t(b, TMA_GNN_F32, N * H, &ev->emb[1]))) {
        goto fail;
    }
    if ((st = alloc_t(b, TMA_GNN_I64, N, &ev->ids)))
        goto fail;
    {
        int64_t *idh = malloc((size_t)N * sizeof *idh);
        if (!idh) {
            st = TMA_ERR_NOMEM;
            goto fail;
        }
        for (int64_t i = 0; i < N; i++)
            idh[i] = ev->node && !ev->pfeat ? ev->node[i] : i;
        ev->ids = tma_gnn_tensor_shape(&ev->ids, N, 1);
        st = tma_gnn_tensor_upload(&ev->ids, idh);
        free(idh);
        if (st)
            goto fail;
    }

    /* Inference chunks. */
    int64_t maxdeg = 0;
    for (int64_t v = 0; v < N; v++)
        maxdeg = TMA_MAX(maxdeg, tma_graph_degree(g, v));
    ev->chunk_rows = TMA_MAX((int64_t)64, TMA_MIN(N, EVAL_CHUNK_FLOATS / widest_in));
    ev->chunk_rows = TMA_MIN(ev->chunk_rows, N);
    ev->chunk_edges = TMA_MAX((int64_t)EVAL_CHUNK_EDGES, maxdeg + 1);
    if ((st = alloc_t(b, TMA_GNN_I32, ev->chunk_rows + 1, &ev->c_indptr)) ||
        (st = alloc_t(b, TMA_GNN_I32, ev->chunk_edges, &ev->c_indices)) ||
        (st = alloc_t(b, TMA_GNN_F32, ev->chunk_edges, &ev->c_weights)) ||
        (st = alloc_t(b, TMA_GNN_F32, TMA_MAX(ev->chunk_rows * widest_in, ev->chunk_edges * gnn_layer_edge_cols(&ev->cfg)),
                      &ev->A)) ||
        (st = alloc_t(b, TMA_GNN_F32, ev->chunk_rows * H, &ev->Z)) ||
        (ev->bf16 && (st = alloc_t(b, TMA_GNN_F32, ev->chunk_rows * H, &ev->Zo))) ||
        (st = alloc_t(b, TMA_GNN_F32, ev->chunk_rows, &ev->mean)) ||
        (st = alloc_t(b, TMA_GNN_F32, ev->chunk_rows, &ev->rstd)))
        goto fail;
    /* The tables and chunk buffers are written once here, on all threads: the
     * memory is committed when the evaluator is made, and every inference,
     * the first too, runs on pages already touched (a first touch costs
     * microseconds a page: about 0.15 s for two 200 MB tables). */
    {
        tensor_t *touch[] = {&ev->emb[0], &ev->emb[1], &ev->A, &ev->Z, &ev->Zo};
        for (size_t i = 0; i < TMA_ARRAY_LEN(touch) && st == TMA_OK; i++) {
            if (!touch[i]->capacity)
                continue; /* bf16: no float32 tables */
            tensor_t all = tma_gnn_tensor_shape(touch[i], touch[i]->capacity, 1);
            st = tma_gnn_op_fill(&all, 0.0f);
        }
        for (int i = 0; i < 2 && ev->t16[i]; i++)
            memset(ev->t16[i], 0, (size_t)(N * H) * sizeof(uint16_t));
        if (st)
            goto fail;
    }
    ev->hb.indptr = host_array(ev, &ev->c_indptr, 0);
    ev->hb.indices = host_array(ev, &ev->c_indices, 1);
    ev->hb.weights = host_array(ev, &ev->c_weights, 2);
    if (gnn_encoder_of(&ev->cfg)->always_project) {
        /* The projection of every node (onto the bases, or for every head), once a layer; the chunks aggregate from it. */
        int64_t tf = 0;
        for (int l = 0; l < ev->cfg.layers; l++)
            tf = TMA_MAX(tf, gnn_layer_proj_floats(&ev->cfg, l, N));
        if ((st = alloc_t(b, TMA_GNN_F32, tf, &ev->T)))
            goto fail;
    } else if (ev->bf16 && gnn_layer_eval_project_first(&ev->cfg, 0, &ev->fi)) {
        /* Sparse or wide features: layer 0's projection of every node, in float32 (the f32 tables lend a table). */
        if ((st = alloc_t(b, TMA_GNN_F32, N * H, &ev->T)))
            goto fail;
    }
    if (gnn_encoder_of(&ev->cfg)->relational) {
        if ((st = alloc_t(b, TMA_GNN_I32, ev->chunk_edges, &ev->c_rel)))
            goto fail;
        ev->hb.rel = host_array(ev, &ev->c_rel, 3);
        ev->norm_count = calloc((size_t)ev->cfg.num_rel_ids, sizeof *ev->norm_count);
        if (!ev->hb.rel || !ev->norm_count) {
            st = TMA_ERR_NOMEM;
            goto fail;
        }
    }
    if (ev->cfg.num_node_types > 0 && (st = type_projection_setup(ev)) != TMA_OK)
        goto fail;
    if (ev->hb.indptr && ev->hb.indices && ev->hb.weights && (st = block_cache_setup(ev)) != TMA_OK)
        goto fail;

    /* Scoring chunks. */
    ev->pairs = (int64_t)ev->cfg.eval_batch_edges * (1 + TMA_MAX(g->num_negatives, 0));
    if (gnn_decoder_of(&ev->cfg)->relational) {
        if ((st = alloc_t(b, TMA_GNN_I32, ev->pairs, &ev->prel)))
            goto fail;
        if (!(ev->h_rel = tma_gnn_backend_host_alloc(b, (size_t)ev->pairs * sizeof(int32_t)))) {
            st = TMA_ERR_NOMEM;
            goto fail;
        }
    }
    if ((st = gnn_score_bufs_alloc(&ev->cfg, &ev->P, b, ev->pairs, &ev->hi, &ev->ti, ev->dec)))
        goto fail;
    /* bf16: a scoring chunk's rows widened, each edge's head, tail and negatives. */
    if (ev->bf16 &&
        (st = alloc_t(b, TMA_GNN_F32, (int64_t)ev->cfg.eval_batch_edges * (2 + TMA_MAX(g->num_negatives, 0)) * H, &ev->Rs)))
        goto fail;
    ev->h_hi = tma_gnn_backend_host_alloc(b, (size_t)ev->pairs * sizeof(int32_t));
    ev->h_ti = tma_gnn_backend_host_alloc(b, (size_t)ev->pairs * sizeof(int32_t));
    ev->h_logits = tma_alloc_aligned((size_t)ev->pairs * sizeof(float));
    if (!ev->hb.indptr || !ev->hb.indices || !ev->hb.weights || !ev->h_hi || !ev->h_ti || !ev->h_logits) {
        st = TMA_ERR_NOMEM;
        goto fail;
    }
    *ev_p = ev;
    return TMA_OK;
fail:
    if (st == TMA_ERR_NOMEM)
        tma_log_error(COMP, "out of memory creating an evaluator for %lld nodes", (long long)g->num_nodes);
    tma_gnn_evaluator_destroy(ev);
    return st;
}

tma_status_t tma_gnn_evaluator_create(const tma_gnn_config_t *cfg, const tma_graph_t *g,
                                      tma_gnn_evaluator_t **ev_p)
{
    if (!cfg)
        return TMA_ERR_INVALID;
    return gnn_evaluator_create_on(cfg->eval_device[0] ? cfg->eval_device : "cpu", cfg, g, ev_p);
}

/* The next chunk of rows from r0: at most chunk_rows rows and chunk_edges edges. */
static int64_t chunk_end(const tma_gnn_evaluator_t *ev, int64_t r0, int self_loops)
{
    const tma_graph_t *g = ev->g;
    int64_t r1 = r0, e = 0;
    while (r1 < g->num_nodes && r1 - r0 < ev->chunk_rows) {
        int64_t de = tma_graph_degree(g, ev->node ? ev->node[r1] : r1) + (self_loops ? 1 : 0);
        if (r1 > r0 && e + de > ev->chunk_edges)
            break;
        e += de;
        r1++;
    }
    return r1;
}

/* Rows [r0, r0 + n) of bf16 table t from a chunk's n x hidden float32 rows. */
static void table16_put(tma_gnn_evaluator_t *ev, int t, int64_t r0, int64_t n, const float *rows)
{
    const int64_t H = ev->cfg.hidden;
    tma_feat_narrow(rows, (size_t)(n * H), TMA_FEAT_BF16, ev->t16[t] + r0 * H);
}

/* Layer-wise inference over every node.  Float32 tables: *R_p is the last
 * layer's table.  bf16 tables: the last layer's is t16[(layers - 1) & 1]
 * and *R_p is left alone. */
static tma_status_t infer(tma_gnn_evaluator_t *ev, tensor_t *R_p)
{
    const tma_gnn_config_t *cfg = &ev->cfg;
    const tma_graph_t *g = ev->g;
    const int64_t N = g->num_nodes, H = cfg->hidden, Fd = cfg->feature_dim;
    const gnn_encoder_desc_t *enc = gnn_encoder_of(cfg);
    const int mlp = !enc->neighbours, gcn = enc->self_loops, rgcn = enc->relational;
    const tma_graph_norm_t norm = enc->norm;
    tma_status_t st = TMA_OK;
    tensor_t in, out;
    const int bf16 = ev->bf16;
    for (int l = 0; l < cfg->layers && st == TMA_OK; l++) {
        if (!bf16)
            out = tma_gnn_tensor_shape(&ev->emb[l & 1], N, H);
        gnn_src_t src = {0};
        if (l == 0 && cfg->num_node_types > 0) {
            /* Layer 0 writes emb[0]: emb[1] holds the projected input, T its scratch until layer 0's projection.
             * bf16: the projection in float32 for a moment, then narrowed into t16[1]. */
            gnn_type_proj_t tp = {cfg->num_node_types, ev->tf.feats, ev->offsets, &ev->order, &ev->tids};
            tensor_t S = tma_gnn_tensor_shape(&ev->T, N, H), tmp = {0};
            if (bf16)
                st = alloc_t(ev->b, TMA_GNN_F32, N * H, &tmp);
            in = tma_gnn_tensor_shape(bf16 ? &tmp : &ev->emb[1], N, H);
            st = st ? st : gnn_type_project_forward(&tp, ev->P.in_W, ev->P.in_b, &S, &in);
            if (bf16 && st == TMA_OK)
                table16_put(ev, 1, 0, N, in.data);
            tma_gnn_tensor_free(&tmp);
            if (bf16) {
                src.feat = ev->tfeat[1];
                src.ids = &ev->idn;
            } else {
                src.H = &in;
            }
        } else if (l == 0) {
            src.feat = ev->feat;
            src.ids = &ev->ids;
        } else if (bf16) {
            src.feat = ev->tfeat[(l - 1) & 1];
            src.ids = &ev->idn;
        } else {
            src.H = &in;
        }
        const int pf = gnn_layer_eval_project_first(cfg, l, &ev->fi);
        tensor_t T;
        if (enc->always_project) {
            T = tma_gnn_tensor_shape(&ev->T, N, gnn_layer_proj_cols(cfg, l));
            st = st ? st : gnn_layer_project(cfg, &ev->P, l, &src, N, &T);
        } else if (pf) {
            /* Layer 0 only, so the other table is free to hold the projection (bf16: T, float32). */
            T = tma_gnn_tensor_shape(bf16 ? &ev->T : &ev->emb[1], N, H);
            st = gnn_layer_project(cfg, &ev->P, l, &src, N, &T);
        }
        /* GCN and SAGE from a dense source: the fused layer where the backend has it. */
        const int fused = gnn_layer_fusable(cfg, &ev->P, l, src.feat == ev->feat && ev->fi.sparse, pf, &ev->A);
        for (int64_t r0 = 0, c = 0; r0 < N && st == TMA_OK; c++) {
            int64_t r1 = ev->nchunks ? ev->crow[c + 1] : chunk_end(ev, r0, gcn), n = r1 - r0;
            tma_gnn_block_t blk;
            tensor_t rel;
            memset(&blk, 0, sizeof blk);
            if (ev->nchunks) {
                /* Built when the evaluator was made. */
                blk.num_dst = n;
                blk.num_src = N;
                blk.num_edges = ev->cedge[c + 1] - ev->cedge[c];
                blk.indptr = tma_gnn_tensor_view(&ev->k_indptr, r0 + c, n + 1, 1);
                blk.indices = tma_gnn_tensor_view(&ev->k_indices, ev->cedge[c], blk.num_edges, 1);
                blk.weights = tma_gnn_tensor_view(&ev->k_weights, ev->cedge[c], blk.num_edges, 1);
            } else if (!mlp) {
                /* The staging arrays are rewritten: the device must be done with the last chunk's. */
                st = tma_gnn_backend_wait(ev->b);
                st = st ? st
                        : tma_graph_block_full_ordered(g, norm, gcn, ev->node, ev->pos, r0, r1,
                                                       tma_gnn_backend_threads(ev->b), &ev->hb);
                /* RGCN: the mean over each relation's neighbours. */
                if (st == TMA_OK && rgcn)
                    st = gnn_rgcn_norm(ev->hb.num_dst, ev->hb.indptr, ev->hb.rel, cfg->num_rel_ids, ev->norm_count,
                                       ev->hb.weights);
                if (st)
                    break;
                blk.num_dst = ev->hb.num_dst;
                blk.num_src = ev->hb.num_src;
                blk.num_edges = ev->hb.num_edges;
                blk.indptr = tma_gnn_tensor_shape(&ev->c_indptr, n + 1, 1);
                blk.indices = tma_gnn_tensor_shape(&ev->c_indices, blk.num_edges, 1);
                blk.weights = tma_gnn_tensor_shape(&ev->c_weights, blk.num_edges, 1);
                st = tma_gnn_tensor_upload(&blk.indptr, ev->hb.indptr);
                st = st ? st : tma_gnn_tensor_upload(&blk.indices, ev->hb.indices);
                st = st ? st : tma_gnn_tensor_upload(&blk.weights, ev->hb.weights);
                if (rgcn) {
                    rel = tma_gnn_tensor_shape(&ev->c_rel, blk.num_edges, 1);
                    st = st ? st : tma_gnn_tensor_upload(&rel, ev->hb.rel);
                }
            }
            tensor_t A;
            const int64_t ec = gnn_layer_edge_cols(cfg);
            if (ec > 0) /* what the layer keeps an edge: scratch here */
                A = tma_gnn_tensor_shape(&ev->A, blk.num_edges, ec);
            else if (!pf && !mlp)
                A = tma_gnn_tensor_shape(&ev->A, n, l == 0 ? Fd : H);
            tensor_t Yout = bf16 ? tma_gnn_tensor_shape(&ev->Zo, n, H) : tma_gnn_tensor_view(&out, r0 * H, n, H);
            int last = l == cfg->layers - 1;
            if (st == TMA_OK && fused) {
                /* The whole layer for this chunk in one op, the aggregate buffer its scratch. */
                st = gnn_layer_infer_fused(cfg, &ev->P, l, &blk, &src, r0, &ev->A, &Yout);
                if (st == TMA_OK && bf16)
                    table16_put(ev, l & 1, r0, n, Yout.data);
                r0 = r1;
                continue;
            }
            tensor_t Z = last ? Yout : tma_gnn_tensor_shape(&ev->Z, n, H);
            st = st ? st
                    : gnn_layer_combine(cfg, &ev->P, l, mlp ? NULL : &blk, &src, r0, pf ? &T : NULL,
                                        rgcn ? &rel : NULL, (pf && !ec) || mlp ? NULL : &A, &Z);
            if (st == TMA_OK && !last) {
                tensor_t mean = tma_gnn_tensor_shape(&ev->mean, n, 1), rstd = tma_gnn_tensor_shape(&ev->rstd, n, 1);
                st = gnn_layer_activate(&ev->P, l, &Z, &mean, &rstd, &Yout);
            }
            if (st == TMA_OK && bf16)
                table16_put(ev, l & 1, r0, n, Yout.data);
            r0 = r1;
        }
        in = out;
    }
    if (st == TMA_OK && !bf16)
        *R_p = out;
    return st;
}

/* ------------------------------------------------------------------ ranking metrics */

void tma_gnn_metrics_init(tma_gnn_metrics_t *m, const tma_gnn_config_t *cfg)
{
    memset(m, 0, sizeof *m);
    m->ties = cfg->eval_ties;
    m->num_hits = TMA_MIN(TMA_MAX(cfg->eval_num_hits, 0), TMA_GNN_MAX_HITS);
    memcpy(m->hits_k, cfg->eval_hits, (size_t)m->num_hits * sizeof *m->hits_k);
}

/* One edge's rank from its negatives above the positive and those tied with it. */
static void metrics_add_one(tma_gnn_metrics_t *m, int64_t above, int64_t ties, int64_t per)
{
    /* Negatives below the positive, and the ties at one half. */
    if (per > 1)
        m->sum_auc += ((double)(per - 1 - above - ties) + 0.5 * (double)ties) / (double)(per - 1);
    const double pess = 1.0 + (double)(above + ties), mean = 1.0 + (double)above + 0.5 * (double)ties;
    m->sum_rr_pessimistic += 1.0 / pess;
    m->sum_rr_mean += 1.0 / mean;
    const double rank = m->ties == TMA_GNN_TIES_MEAN ? mean : pess;
    for (int k = 0; k < m->num_hits; k++)
        m->hit_count[k] += rank <= (double)m->hits_k[k];
    m->edges++;
}

void tma_gnn_metrics_count(const float *scores, int64_t rows, int64_t per, int32_t *above_p, int32_t *ties_p)
{
    for (int64_t i = 0; i < rows; i++) {
        const float *s = scores + i * per;
        int32_t above = 0, ties = 0;
        for (int64_t j = 1; j < per; j++) {
            /* NaN on either side is "not below": it counts against the positive. */
            above += !(s[j] <= s[0]);
            ties += s[j] == s[0];
        }
        above_p[i] = above;
        ties_p[i] = ties;
    }
}

void tma_gnn_metrics_add_counts(tma_gnn_metrics_t *m, const int32_t *above, const int32_t *ties, int64_t rows,
                                int64_t per)
{
    for (int64_t i = 0; i < rows; i++)
        metrics_add_one(m, above[i], ties[i], per);
}

void tma_gnn_metrics_add(tma_gnn_metrics_t *m, const float *scores, int64_t rows, int64_t per)
{
    for (int64_t i = 0; i < rows; i++) {
        int32_t above, ties;
        tma_gnn_metrics_count(scores + i * per, 1, per, &above, &ties);
        metrics_add_one(m, above, ties, per);
    }
}

void tma_gnn_metrics_finish(tma_gnn_metrics_t *m)
{
    const double n = m->edges > 0 ? (double)m->edges : 1.0;
    m->mrr_pessimistic = m->sum_rr_pessimistic / n;
    m->mrr_mean = m->sum_rr_mean / n;
    m->mrr = m->ties == TMA_GNN_TIES_MEAN ? m->mrr_mean : m->mrr_pessimistic;
    m->auc = m->sum_auc / n;
    for (int k = 0; k < m->num_hits; k++)
        m->hits[k] = (double)m->hit_count[k] / n;
}

void tma_gnn_metrics_json(const tma_gnn_metrics_t *m, const char *prefix, cJSON *obj)
{
    char key[64];
    for (int k = 0; k < m->num_hits; k++) {
        snprintf(key, sizeof key, "%shits@%d", prefix, m->hits_k[k]);
        cJSON_AddNumberToObject(obj, key, m->hits[k]);
    }
    if (isfinite(m->auc)) {
        snprintf(key, sizeof key, "%sauc", prefix);
        cJSON_AddNumberToObject(obj, key, m->auc);
    }
    cJSON_AddStringToObject(obj, "ties", tma_gnn_ties_name(m->ties));
}

/* The embedding table's row of node v. */
static inline int32_t row_of(const tma_gnn_evaluator_t *ev, int64_t v)
{
    return ev->pos ? ev->pos[v] : (int32_t)v;
}

tma_status_t gnn_score_bufs_alloc(const tma_gnn_config_t *cfg, const gnn_params_t *Pm, tma_gnn_backend_t *b,
                                  int64_t pairs, tensor_t *hi, tensor_t *ti, tensor_t dec[2])
{
    int64_t widest = cfg->hidden;
    for (int k = 0; k < cfg->decoder_layers && !gnn_decoder_of(cfg)->single; k++)
        widest = TMA_MAX(widest, Pm->dec[k].W.cols);
    tma_status_t st;
    if ((st = alloc_t(b, TMA_GNN_I32, pairs, hi)) || (st = alloc_t(b, TMA_GNN_I32, pairs, ti)) ||
        /* dec[0] is also score_mlp's scratch: two rows a thread at least. */
        (st = alloc_t(b, TMA_GNN_F32, TMA_MAX(pairs, 2 * (int64_t)tma_gnn_backend_threads(b)) * widest, &dec[0])))
        return st;
    return alloc_t(b, TMA_GNN_F32, pairs * widest, &dec[1]);
}

/* The decoder's logits of P pairs (hi[p], ti[p]) of rows of R (rel: their
 * relation ids, DistMult), computed in dec[0] and dec[1]; *logits_p is a
 * view of one of them (P x 1).  The fused MLP scorer where the backend has it. */
tma_status_t gnn_score_pairs(const tma_gnn_config_t *cfg, const gnn_params_t *Pm, const tensor_t *R,
                             const tensor_t *hi, const tensor_t *ti, const tensor_t *rel, tensor_t dec[2], int64_t P,
                             tensor_t *logits_p)
{
    const int single = gnn_decoder_of(cfg)->single;
    tma_gnn_backend_t *b = dec[0].backend;
    /* Two buffers in turn: E[k] in one, D[k] (then PReLU in place: E[k+1]) in the other. */
    tensor_t E[GNN_MAX_DECODER_LAYERS], D[GNN_MAX_DECODER_LAYERS];
    const int depth = gnn_decoder_depth(cfg);
    if (single)
        D[0] = tma_gnn_tensor_shape(&dec[1], P, 1);
    for (int k = 0; k < depth && !single; k++) {
        E[k] = tma_gnn_tensor_shape(&dec[k & 1], P, Pm->dec[k].W.rows);
        D[k] = tma_gnn_tensor_shape(&dec[(k + 1) & 1], P, Pm->dec[k].W.cols);
    }
    tma_status_t st;
    if (!single && b->ops->score_mlp) {
        /* The fused decoder: the same numbers in cache-sized blocks. */
        const tensor_t *W[GNN_MAX_DECODER_LAYERS], *bias[GNN_MAX_DECODER_LAYERS], *a[GNN_MAX_DECODER_LAYERS];
        for (int k = 0; k < depth; k++) {
            W[k] = &Pm->dec[k].W;
            bias[k] = &Pm->dec[k].b;
            a[k] = &Pm->dec[k].prelu;
        }
        D[depth - 1] = tma_gnn_tensor_shape(&dec[1], P, 1);
        st = tma_gnn_op_score_mlp(R, hi, ti, depth, W, bias, a, &dec[0], &D[depth - 1]);
    } else {
        st = gnn_decoder_forward(cfg, Pm, R, hi, ti, rel, E, D);
    }
    *logits_p = D[depth - 1];
    return st;
}

/* bf16 tables: edge i of a scoring chunk has rows i * (2 + K) (its head) to
 * i * (2 + K) + 1 + K (its tail and negatives) of Rs, widened from the last
 * layer's table; its pairs (hh, tt: table rows) are rewritten to those rows. */
static void score_rows16(tma_gnn_evaluator_t *ev, int64_t i, int32_t *hh, int32_t *tt)
{
    const int64_t H = ev->cfg.hidden, per = 1 + ev->g->num_negatives, base = i * (1 + per);
    const uint16_t *t = ev->t16[(ev->cfg.layers - 1) & 1];
    float *R = ev->Rs.data;
    tma_feat_widen(t + (int64_t)hh[0] * H, TMA_FEAT_BF16, (size_t)H, R + base * H);
    for (int64_t j = 0; j < per; j++) {
        tma_feat_widen(t + (int64_t)tt[j] * H, TMA_FEAT_BF16, (size_t)H, R + (base + 1 + j) * H);
        hh[j] = (int32_t)base;
        tt[j] = (int32_t)(base + 1 + j);
    }
}

/* The metrics of a split, and with `scores` non-NULL every logit of it (row
 * i: edge i's positive, then its negatives), downloaded whatever the device. */
static tma_status_t eval_split(tma_gnn_evaluator_t *ev, const float *params, tma_gnn_split_t split,
                               tma_gnn_metrics_t *m_p, float *scores)
{
    const tma_graph_t *g = ev->g;
    int64_t n = split == TMA_GNN_SPLIT_TEST ? g->num_test : g->num_val;
    const int64_t *edges = split == TMA_GNN_SPLIT_TEST ? g->test_edges : g->val_edges;
    const int64_t *negs = split == TMA_GNN_SPLIT_TEST ? g->test_neg : g->val_neg;
    const int32_t *erel = split == TMA_GNN_SPLIT_TEST ? g->test_rel : g->val_rel;
    const int distmult = gnn_decoder_of(&ev->cfg)->relational;
    const char *name = split == TMA_GNN_SPLIT_TEST ? "test" : "validation";
    if (n <= 0 || !edges) {
        tma_log_error(COMP, "the graph has no %s edges to evaluate", name);
        return TMA_ERR_NOT_FOUND;
    }
    if (ev->cfg.eval_max_edges > 0)
        n = TMA_MIN(n, ev->cfg.eval_max_edges);
    tma_gnn_metrics_t m;
    tma_gnn_metrics_init(&m, &ev->cfg);
    /* A device backend ranks where the scores are (one number comes back)
     * when only the pessimistic MRR is asked for; anything more is ranked
     * here from the downloaded scores. */
    const int on_device = ev->b->ops->mrr_sum && m.ties == TMA_GNN_TIES_PESSIMISTIC && m.num_hits == 0 && !scores;
    const int64_t K = g->num_negatives, per = 1 + K;
    double t0 = tma_clock_now();
    tma_status_t st = tma_gnn_tensor_upload(&ev->params, params);
    tensor_t R;
    st = st ? st : infer(ev, &R);
    double t1 = tma_clock_now();
    const int64_t ce_max = ev->pairs / per;
    for (int64_t e0 = 0; e0 < n && st == TMA_OK; e0 += ce_max) {
        int64_t ce = TMA_MIN(ce_max, n - e0), P = ce * per;
        /* h_hi and h_ti are rewritten: the last chunk's uploads must be done. */
        if ((st = tma_gnn_backend_wait(ev->b)) != TMA_OK)
            break;
        for (int64_t i = 0; i < ce; i++) {
            /* Rows of the embedding table: positions in the locality order. */
            int32_t u = row_of(ev, edges[2 * (e0 + i)]), v = row_of(ev, edges[2 * (e0 + i) + 1]);
            int32_t *hh = ev->h_hi + i * per, *tt = ev->h_ti + i * per;
            hh[0] = u;
            tt[0] = v;
            for (int64_t j = 0; j < K; j++) {
                hh[1 + j] = u;
                tt[1 + j] = row_of(ev, negs[(e0 + i) * K + j]);
            }
            if (ev->bf16)
                score_rows16(ev, i, hh, tt);
            /* DistMult: the edge's relation scores it and its negatives alike. */
            for (int64_t j = 0; distmult && j < per; j++)
                ev->h_rel[i * per + j] = erel ? erel[e0 + i] : 0;
        }
        tensor_t hi = tma_gnn_tensor_shape(&ev->hi, P, 1), ti = tma_gnn_tensor_shape(&ev->ti, P, 1), rel;
        st = tma_gnn_tensor_upload(&hi, ev->h_hi);
        st = st ? st : tma_gnn_tensor_upload(&ti, ev->h_ti);
        if (distmult) {
            rel = tma_gnn_tensor_shape(&ev->prel, P, 1);
            st = st ? st : tma_gnn_tensor_upload(&rel, ev->h_rel);
        }
        tensor_t logits_t;
        if (ev->bf16)
            R = tma_gnn_tensor_shape(&ev->Rs, ce * (1 + per), ev->cfg.hidden);
        st = st ? st : gnn_score_pairs(&ev->cfg, &ev->P, &R, &hi, &ti, distmult ? &rel : NULL, ev->dec, P, &logits_t);
        const tensor_t *logits = &logits_t;
        if (st == TMA_OK && on_device) {
            tensor_t S = tma_gnn_tensor_shape(logits, ce, per);
            double part = 0;
            st = tma_gnn_op_mrr_sum(&S, &part);
            m.sum_rr_pessimistic += part;
            m.edges += ce;
            continue;
        }
        st = st ? st : tma_gnn_tensor_download(logits, ev->h_logits);
        if (st == TMA_OK && scores)
            memcpy(scores + e0 * per, ev->h_logits, (size_t)P * sizeof *scores);
        if (st == TMA_OK)
            tma_gnn_metrics_add(&m, ev->h_logits, ce, per);
    }
    double t2 = tma_clock_now();
    ev->last_infer_s = t1 - t0;
    ev->last_score_s = t2 - t1;
    if (st != TMA_OK) {
        tma_log_error(COMP, "evaluation failed: %s", tma_status_str(st));
        return st;
    }
    tma_gnn_metrics_finish(&m);
    if (on_device)
        m.mrr_mean = m.auc = NAN;
    *m_p = m;
    return TMA_OK;
}

tma_status_t tma_gnn_evaluator_mrr(tma_gnn_evaluator_t *ev, const float *params, tma_gnn_split_t split,
                                   double *mrr_p)
{
    tma_gnn_metrics_t m;
    tma_status_t st = eval_split(ev, params, split, &m, NULL);
    if (st == TMA_OK)
        *mrr_p = m.mrr;
    return st;
}

tma_status_t tma_gnn_evaluator_metrics(tma_gnn_evaluator_t *ev, const float *params, tma_gnn_split_t split,
                                       tma_gnn_metrics_t *m_p)
{
    return eval_split(ev, params, split, m_p, NULL);
}

int64_t tma_gnn_evaluator_edges(const tma_gnn_evaluator_t *ev, tma_gnn_split_t split)
{
    int64_t n = split == TMA_GNN_SPLIT_TEST ? ev->g->num_test : ev->g->num_val;
    return ev->cfg.eval_max_edges > 0 ? TMA_MIN(n, ev->cfg.eval_max_edges) : n;
}

tma_status_t tma_gnn_evaluator_scores(tma_gnn_evaluator_t *ev, const float *params, tma_gnn_split_t split,
                                      float *scores, double *mrr_p)
{
    tma_gnn_metrics_t m;
    tma_status_t st = eval_split(ev, params, split, &m, scores);
    if (st == TMA_OK && mrr_p)
        *mrr_p = m.mrr;
    return st;
}

void tma_gnn_evaluator_last_timing(const tma_gnn_evaluator_t *ev, double *infer_s_p, double *score_s_p)
{
    if (infer_s_p)
        *infer_s_p = ev->last_infer_s;
    if (score_s_p)
        *score_s_p = ev->last_score_s;
}

void gnn_evaluator_set_chunk_rows(tma_gnn_evaluator_t *ev, int64_t rows)
{
    if (rows < 1 || rows > ev->chunk_rows)
        return;
    ev->chunk_rows = rows;
    if (ev->nchunks) {
        /* The blocks again, in the new chunks (without them on failure: each inference builds them). */
        tma_gnn_tensor_free(&ev->k_indptr);
        tma_gnn_tensor_free(&ev->k_indices);
        tma_gnn_tensor_free(&ev->k_weights);
        free(ev->crow);
        free(ev->cedge);
        ev->crow = ev->cedge = NULL;
        ev->nchunks = 0;
        if (block_cache_setup(ev) != TMA_OK)
            ev->nchunks = 0;
    }
}

/* Rows in the locality order (row p holds node node[p]) to node id order,
 * in place: each cycle of the permutation moves along with one spare row. */
static tma_status_t unpermute_rows(const tma_gnn_evaluator_t *ev, float *rows)
{
    if (!ev->pos)
        return TMA_OK;
    const int64_t N = ev->g->num_nodes, H = ev->cfg.hidden;
    const size_t bytes = (size_t)H * sizeof(float);
    uint8_t *done = calloc((size_t)N, 1);
    float *spare = malloc(bytes);
    if (!done || !spare) {
        free(done);
        free(spare);
        return TMA_ERR_NOMEM;
    }
    for (int64_t v0 = 0; v0 < N; v0++) {
        if (done[v0])
            continue;
        memcpy(spare, rows + v0 * H, bytes);
        for (int64_t v = v0;;) {
            int64_t from = ev->pos[v];
            done[v] = 1;
            if (from == v0) {
                memcpy(rows + v * H, spare, bytes);
                break;
            }
            memcpy(rows + v * H, rows + from * H, bytes);
            v = from;
        }
    }
    free(done);
    free(spare);
    return TMA_OK;
}

tma_status_t tma_gnn_evaluator_embeddings(tma_gnn_evaluator_t *ev, const float *params, float *out)
{
    tensor_t R;
    tma_status_t st = tma_gnn_tensor_upload(&ev->params, params);
    st = st ? st : infer(ev, &R);
    if (st == TMA_OK && ev->bf16)
        tma_feat_widen(ev->t16[(ev->cfg.layers - 1) & 1], TMA_FEAT_BF16, (size_t)(ev->g->num_nodes * ev->cfg.hidden), out);
    else
        st = st ? st : tma_gnn_tensor_download(&R, out);
    return st ? st : unpermute_rows(ev, out);
}

tma_gnn_backend_t *tma_gnn_evaluator_backend(const tma_gnn_evaluator_t *ev) { return ev->b; }
