/*
 * rank.c: an evaluator rank, the distributed evaluation's piece on one
 * worker (docs/architecture.md, "A distributed evaluation").
 *
 * A rank holds the shards it owns and their inference files (each node's
 * full training-graph row, neighbours named by shard and local id) and
 * computes its own nodes' embeddings layer by layer: level 0 is the input
 * (the features, the per-type input projection, or, for features wider
 * than GNN_EVAL_WIDE times the hidden width, layer 0's projection of them,
 * so the ranks exchange narrow rows), level l + 1 is layer l's output.  A layer runs chunk by chunk over the rank's rows: the chunk's
 * neighbours are gathered into one compact source table (the chunk's own
 * rows first, then the other neighbours: rows the rank holds are copied,
 * the others fetched from their owners through the caller's fetch function),
 * a block over that table carries the same weights the single evaluator
 * uses, and the layer runs through the same combine and activation as
 * training.  So a rank needs its own rows of two levels and one chunk's
 * sources, never the graph.  Scoring runs at the owner of each evaluation
 * edge's head; the tails' and negatives' final rows are fetched the same way.
 * Every rank must finish layer l before any rank starts layer l + 1 (its
 * level l rows are read by the others meanwhile).
 *
 * A remote row that several chunks need would be fetched for each of them;
 * within eval.rank_cache_mb a rank keeps the rows it fetched for the rest of
 * the layer.  Which rows is fixed when the rank is made: the remote
 * neighbours of highest degree first (a node of degree d is in about
 * d * n_k / N of the rank's rows, so in that many chunks until there are
 * fewer chunks), as many as the budget holds.  A chunk's cached rows are
 * copied instead of fetched, so its sources hold the same numbers.
 */
#include "gnn_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COMP "evaluator"

/* Floats of gathered source rows (or of a layer's projection of them) a chunk may hold. */
#define RANK_CHUNK_FLOATS ((int64_t)1 << 23)

struct tma_gnn_rank {
    tma_gnn_config_t cfg;
    tma_gnn_layout_t layout;
    tma_gnn_backend_t *b;
    tensor_t params;
    gnn_params_t P;
    int nsh;
    const tma_graph_t **sh;
    const tma_graph_infer_t **inf;
    int64_t *off;     /* [nsh + 1]: slot s's rows are off[s] .. off[s + 1] */
    int32_t *slot_of; /* [num_shards]: the slot of a shard, -1 when not held */
    int32_t num_shards;
    int64_t n;
    tma_gnn_fetch_fn fetch;
    void *fetch_arg;
    int typed_in; /* level 0 is the per-type projection (a table), not the features */
    int proj0;    /* level 0 is layer 0's projection of the wide features (a float32 table; not typed_in) */
    tensor_t lvl[3]; /* level 0 (typed), odd levels, even levels >= 2: n x hidden */
    int bf16;         /* eval.table_dtype "bf16": the levels in t16 instead, widened as they are read */
    uint16_t *t16[3];
    tensor_t Zo;      /* bf16: a chunk's output rows before they are narrowed into the table */

    int64_t chunk_rows, chunk_edges, max_src;
    int64_t widest_in; /* the widest row a chunk gathers: the features', or hidden (typed_in, proj0) */
    int64_t x_floats;  /* X's: max_src gathered rows, or proj0's chunk_rows feature rows */
    int64_t *cand;      /* chunk_edges: the chunk's neighbours, sorted and unique */
    int64_t *doff;      /* [num_shards + 1]: node (k, i)'s dense id is doff[k] + i, in the packed ids' order */
    uint64_t *skey[2];  /* chunk_edges: a chunk's entries' dense ids, radix-sorted (and the scratch) */
    int32_t *sidx[2];   /* chunk_edges: ... with their entry (and the scratch) */
    int32_t *eu;        /* chunk_edges: entry -> its neighbour's index in cand */
    int32_t *u2s;       /* chunk_edges: unique neighbour -> source row */
    int64_t *remote;    /* the remote sources' packed ids (a chunk's, or a scoring chunk's) */
    int64_t *own_src;   /* the held sources' rank rows (scoring: where a fetched row goes) */
    float *row;         /* widest_in: one feature row widened */
    tensor_t X, T, A, Z, mean, rstd, c_indptr, c_indices, c_weights, c_rel;
    int32_t *norm_count;

    /* The cache of remote rows (cache_setup): the packed ids it may hold, in
     * an open-addressing table (ckey, -1 empty; cslot the row), cap rows of
     * width cwidth; a row is this layer's when cgen[row] == gen. */
    int64_t ccap, cmask, cwidth, gen;
    int64_t *ckey;
    int32_t *cslot;
    int64_t *cgen;
    float *crows;
    int64_t hits, lookups; /* the last layer's: remote sources taken from the cache, and all remote sources */
    int32_t *chit;         /* a chunk's remote sources: the cache row of each (-1 none) */

    int64_t pairs; /* scoring pairs a chunk */
    tensor_t R, hi, ti, prel, dec[2];
    double last_infer_s, last_score_s;
};

/* Table t is held in bfloat16 (eval.table_dtype); layer 0's projection stays
 * float32, as the single evaluator's does. */
static int table16(const tma_gnn_rank_t *rk, int t)
{
    return rk->bf16 && !(t == 0 && rk->proj0);
}

void tma_gnn_rank_destroy(tma_gnn_rank_t *rk)
{
    if (!rk)
        return;
    for (int i = 0; i < 3; i++)
        tma_free_aligned(rk->t16[i]);
    tma_gnn_tensor_free(&rk->Zo);
    tensor_t *ts[] = {&rk->params, &rk->lvl[0], &rk->lvl[1], &rk->lvl[2], &rk->X,  &rk->T,    &rk->A,
                      &rk->Z,      &rk->mean,   &rk->rstd,   &rk->c_indptr, &rk->c_indices, &rk->c_weights,
                      &rk->c_rel,  &rk->R,      &rk->hi,     &rk->ti,     &rk->prel, &rk->dec[0], &rk->dec[1]};
    for (size_t i = 0; i < TMA_ARRAY_LEN(ts); i++)
        tma_gnn_tensor_free(ts[i]);
    void *owned[] = {(void *)rk->sh, (void *)rk->inf, rk->off,      rk->slot_of, rk->cand,    rk->u2s,
                     rk->remote,     rk->own_src,      rk->row,      rk->norm_count, rk->ckey, rk->cslot,
                     rk->cgen,       rk->chit,         rk->doff,     rk->skey[0], rk->skey[1], rk->sidx[0],
                     rk->sidx[1],    rk->eu};
    for (size_t i = 0; i < TMA_ARRAY_LEN(owned); i++)
        free(owned[i]);
    tma_free_aligned(rk->crows);
    tma_gnn_backend_destroy(rk->b);
    free(rk);
}

static tma_status_t alloc_t(tma_gnn_backend_t *b, tma_gnn_dtype_t dt, int64_t n, tensor_t *t)
{
    return tma_gnn_tensor_alloc(b, dt, n > 0 ? n : 1, t);
}

/* The shards: each a shard file and its inference file of one partition. */
static tma_status_t shards_setup(tma_gnn_rank_t *rk, const tma_gnn_rank_shard_t *shards, int nshards)
{
    rk->nsh = nshards;
    rk->num_shards = shards[0].inf->num_shards;
    rk->sh = calloc((size_t)nshards, sizeof *rk->sh);
    rk->inf = calloc((size_t)nshards, sizeof *rk->inf);
    rk->off = calloc((size_t)nshards + 1, sizeof *rk->off);
    rk->slot_of = malloc((size_t)rk->num_shards * sizeof *rk->slot_of);
    if (!rk->sh || !rk->inf || !rk->off || !rk->slot_of)
        return TMA_ERR_NOMEM;
    for (int32_t k = 0; k < rk->num_shards; k++)
        rk->slot_of[k] = -1;
    for (int s = 0; s < nshards; s++) {
        const tma_graph_t *g = shards[s].shard;
        const tma_graph_infer_t *f = shards[s].inf;
        if (f->num_shards != rk->num_shards || f->shard != g->shard_index || f->num_nodes != g->num_nodes ||
            f->graph_id != g->graph_id || rk->slot_of[f->shard] >= 0 ||
            g->feature_dim != shards[0].shard->feature_dim) {
            tma_log_error(COMP, "evaluator rank: shard %d's inference file does not match its shard file, or "
                          "the shards come from different partitions", g->shard_index);
            return TMA_ERR_MISMATCH;
        }
        rk->sh[s] = g;
        rk->inf[s] = f;
        rk->slot_of[f->shard] = s;
        rk->off[s + 1] = rk->off[s] + f->num_nodes;
    }
    rk->n = rk->off[nshards];
    return TMA_OK;
}

/* Dense ids: every shard's nodes numbered one after the other (a held
 * shard's count from its file, another's from the highest local id among
 * the rank's neighbours), so they sort as the packed ids do. */
static tma_status_t dense_setup(tma_gnn_rank_t *rk)
{
    const int32_t S = rk->num_shards;
    if (!(rk->doff = calloc((size_t)S + 1, sizeof *rk->doff)))
        return TMA_ERR_NOMEM;
    for (int s = 0; s < rk->nsh; s++) {
        const tma_graph_infer_t *f = rk->inf[s];
        rk->doff[f->shard + 1] = TMA_MAX(rk->doff[f->shard + 1], f->num_nodes);
        for (int64_t q = 0; q < f->num_entries; q++) {
            const int32_t k = TMA_INFER_SHARD(f->nbr[q]);
            rk->doff[k + 1] = TMA_MAX(rk->doff[k + 1], TMA_INFER_LOCAL(f->nbr[q]) + 1);
        }
    }
    for (int32_t k = 0; k < S; k++)
        rk->doff[k + 1] += rk->doff[k];
    return TMA_OK;
}

static inline uint64_t cache_hash(int64_t p)
{
    return (uint64_t)p * 0x9E3779B97F4A7C15ull;
}

/* The cache row of packed node p, -1 when the cache may not hold it. */
static inline int32_t cache_find(const tma_gnn_rank_t *rk, int64_t p)
{
    if (!rk->ccap)
        return -1;
    for (uint64_t h = cache_hash(p) >> 20;; h++) {
        const int64_t k = rk->ckey[h & (uint64_t)rk->cmask];
        if (k == p)
            return rk->cslot[h & (uint64_t)rk->cmask];
        if (k < 0)
            return -1;
    }
}

static void cache_free(tma_gnn_rank_t *rk)
{
    free(rk->ckey);
    free(rk->cslot);
    free(rk->cgen);
    free(rk->chit);
    tma_free_aligned(rk->crows);
    rk->ckey = NULL;
    rk->cslot = NULL;
    rk->cgen = NULL;
    rk->chit = NULL;
    rk->crows = NULL;
    rk->ccap = rk->cmask = 0;
}

/* The remote rows the cache may hold, at most `rows` of them: the distinct
 * remote neighbours by degree, highest first (of the degree where the budget
 * ends, those met first in the rank's rows).  A bitmap of one bit a node
 * (by dense id) counts each once. */
static tma_status_t cache_setup(tma_gnn_rank_t *rk, int64_t rows)
{
    cache_free(rk);
    if (rows <= 0 || !gnn_encoder_of(&rk->cfg)->neighbours)
        return TMA_OK;
    const int64_t *boff = rk->doff;
    int64_t maxdeg = 0;
    for (int s = 0; s < rk->nsh; s++)
        for (int64_t q = 0; q < rk->inf[s]->num_entries; q++)
            if (rk->slot_of[TMA_INFER_SHARD(rk->inf[s]->nbr[q])] < 0)
                maxdeg = TMA_MAX(maxdeg, rk->inf[s]->nbr_deg[q]);
    uint64_t *seen = calloc((size_t)(boff[rk->num_shards] / 64 + 1), sizeof *seen);
    int64_t *hist = calloc((size_t)maxdeg + 2, sizeof *hist);
    tma_status_t st = seen && hist ? TMA_OK : TMA_ERR_NOMEM;
    for (int s = 0; s < rk->nsh && st == TMA_OK; s++)
        for (int64_t q = 0; q < rk->inf[s]->num_entries; q++) {
            const int64_t p = rk->inf[s]->nbr[q];
            const int32_t k = TMA_INFER_SHARD(p);
            const int64_t bit = boff[k] + TMA_INFER_LOCAL(p);
            if (rk->slot_of[k] < 0 && !(seen[bit >> 6] >> (bit & 63) & 1)) {
                seen[bit >> 6] |= (uint64_t)1 << (bit & 63);
                hist[rk->inf[s]->nbr_deg[q]]++;
            }
        }
    /* Every node of degree above d fits, and `part` of those of degree d. */
    int64_t d = maxdeg, n = 0, total = 0;
    for (int64_t i = 0; st == TMA_OK && i <= maxdeg; i++)
        total += hist[i];
    while (st == TMA_OK && d >= 1 && n + hist[d] <= rows)
        n += hist[d--];
    int64_t part = st == TMA_OK && d >= 1 ? rows - n : 0;
    n += part;
    if (st == TMA_OK && n > 0) {
        rk->ccap = n;
        rk->cwidth = rk->widest_in;
        int64_t slots = 1;
        while (slots < 2 * n)
            slots <<= 1;
        rk->cmask = slots - 1;
        rk->ckey = malloc((size_t)slots * sizeof *rk->ckey);
        rk->cslot = malloc((size_t)slots * sizeof *rk->cslot);
        rk->cgen = calloc((size_t)n, sizeof *rk->cgen);
        rk->chit = malloc((size_t)(rk->chunk_edges + rk->chunk_rows) * sizeof *rk->chit);
        rk->crows = tma_alloc_aligned((size_t)(n * rk->cwidth) * sizeof(float));
        if (!rk->ckey || !rk->cslot || !rk->cgen || !rk->chit || !rk->crows)
            st = TMA_ERR_NOMEM;
        for (int64_t i = 0; st == TMA_OK && i < slots; i++)
            rk->ckey[i] = -1;
        int64_t used = 0;
        for (int s = 0; s < rk->nsh && st == TMA_OK; s++)
            for (int64_t q = 0; q < rk->inf[s]->num_entries; q++) {
                const int64_t p = rk->inf[s]->nbr[q];
                const int32_t dq = rk->inf[s]->nbr_deg[q];
                if (rk->slot_of[TMA_INFER_SHARD(p)] >= 0 || dq < d || (dq == d && part == 0))
                    continue;
                uint64_t h = cache_hash(p) >> 20;
                while (rk->ckey[h & (uint64_t)rk->cmask] >= 0 && rk->ckey[h & (uint64_t)rk->cmask] != p)
                    h++;
                if (rk->ckey[h & (uint64_t)rk->cmask] < 0) {
                    rk->ckey[h & (uint64_t)rk->cmask] = p;
                    rk->cslot[h & (uint64_t)rk->cmask] = (int32_t)used++;
                    part -= dq == d;
                }
            }
        if (st == TMA_OK && used != n)
            st = TMA_ERR_INTERNAL;
        tma_log_debug(COMP, "evaluator rank: a cache of %lld of the %lld remote neighbours' rows (degree %lld and "
                      "above)", (long long)n, (long long)total, (long long)TMA_MAX(d, 1));
    }
    free(seen);
    free(hist);
    if (st != TMA_OK)
        cache_free(rk);
    return st;
}

tma_status_t tma_gnn_rank_create(const tma_gnn_config_t *cfg, const tma_gnn_rank_shard_t *shards, int nshards,
                                 tma_gnn_fetch_fn fetch, void *fetch_arg, tma_gnn_rank_t **rk_p)
{
    if (!cfg || !shards || nshards < 1 || !fetch || !rk_p)
        return TMA_ERR_INVALID;
    tma_gnn_rank_t *rk = calloc(1, sizeof *rk);
    if (!rk)
        return TMA_ERR_NOMEM;
    rk->cfg = *cfg;
    rk->fetch = fetch;
    rk->fetch_arg = fetch_arg;
    tma_status_t st;
    if ((st = shards_setup(rk, shards, nshards)) || (st = tma_gnn_config_resolve(&rk->cfg, shards[0].shard)) ||
        (st = tma_gnn_layout_build(&rk->cfg, &rk->layout)))
        goto fail;
    const int threads = rk->cfg.eval_threads > 0 ? rk->cfg.eval_threads : rk->cfg.threads;
    /* Ranks compute on the CPU: their tables are read row by row as others fetch them. */
    if ((st = tma_gnn_backend_create("cpu", threads, &rk->b)) || (st = gnn_encoder_check_backend(&rk->cfg, rk->b)))
        goto fail;
    tma_gnn_backend_t *b = rk->b;
    const tma_gnn_config_t *c = &rk->cfg;
    const int64_t H = c->hidden, Fd = c->feature_dim, n = rk->n;
    rk->typed_in = c->num_node_types > 0;
    tma_gnn_feat_info_t dense;
    memset(&dense, 0, sizeof dense);
    rk->proj0 = !rk->typed_in && !gnn_encoder_of(c)->always_project && gnn_layer_eval_project_first(c, 0, &dense);
    rk->widest_in = rk->typed_in || rk->proj0 ? H : TMA_MAX(H, Fd);
    if ((st = alloc_t(b, TMA_GNN_F32, rk->layout.total, &rk->params)) ||
        (st = gnn_params_bind(&rk->cfg, &rk->layout, &rk->params, &rk->P)))
        goto fail;
    rk->bf16 = c->eval_table_bf16;
    for (int i = rk->typed_in || rk->proj0 ? 0 : 1; i < 3; i++) {
        if (table16(rk, i) ? !(rk->t16[i] = tma_alloc_aligned((size_t)TMA_MAX(n * H, 1) * sizeof(uint16_t)))
                     : (st = alloc_t(b, TMA_GNN_F32, n * H, &rk->lvl[i])) != TMA_OK) {
            st = st ? st : TMA_ERR_NOMEM;
            goto fail;
        }
    }

    /* Chunks: at most chunk_rows rows, and chunk_edges entries (so as many sources). */
    int64_t maxdeg = 0;
    for (int s = 0; s < rk->nsh; s++)
        for (int64_t i = 0; i < rk->inf[s]->num_nodes; i++)
            maxdeg = TMA_MAX(maxdeg, rk->inf[s]->indptr[i + 1] - rk->inf[s]->indptr[i]);
    int64_t proj = 1;
    for (int l = 0; l < c->layers; l++)
        proj = TMA_MAX(proj, gnn_layer_proj_cols(c, l));
    const int64_t width = TMA_MAX(rk->widest_in, proj);
    rk->chunk_rows = TMA_MAX((int64_t)64, TMA_MIN(TMA_MAX(n, 1), RANK_CHUNK_FLOATS / width / 8));
    rk->chunk_edges = TMA_MAX(maxdeg + 1, RANK_CHUNK_FLOATS / width);
    rk->max_src = rk->chunk_rows + rk->chunk_edges;
    const int64_t ce = rk->chunk_edges + rk->chunk_rows; /* with GCN's self-loops */
    int64_t proj_floats = rk->max_src * H;
    for (int l = 0; l < c->layers; l++)
        proj_floats = TMA_MAX(proj_floats, gnn_layer_proj_floats(c, l, rk->max_src));
    /* Scoring: the remote tails and negatives of a chunk of duties. */
    const int64_t K = rk->inf[0]->num_negatives;
    const int64_t ids = TMA_MAX(ce, (int64_t)c->eval_batch_edges * (1 + K));
    rk->x_floats = TMA_MAX(rk->max_src * rk->widest_in, rk->proj0 ? rk->chunk_rows * Fd : 0);
    /* A: a chunk's aggregated rows; proj0 with SAGE, its own features at layer 0 (the self term). */
    const int64_t a_cols = rk->proj0 && gnn_encoder_of(c)->self_term ? TMA_MAX(Fd, H) : rk->widest_in;
    if ((st = alloc_t(b, TMA_GNN_F32, rk->x_floats, &rk->X)) ||
        (st = alloc_t(b, TMA_GNN_F32, proj_floats, &rk->T)) ||
        (st = alloc_t(b, TMA_GNN_F32, TMA_MAX(rk->chunk_rows * a_cols, ce * gnn_layer_edge_cols(c)), &rk->A)) ||
        (st = alloc_t(b, TMA_GNN_F32, rk->chunk_rows * H, &rk->Z)) ||
        (rk->bf16 && (st = alloc_t(b, TMA_GNN_F32, rk->chunk_rows * H, &rk->Zo))) ||
        (st = alloc_t(b, TMA_GNN_F32, rk->chunk_rows, &rk->mean)) ||
        (st = alloc_t(b, TMA_GNN_F32, rk->chunk_rows, &rk->rstd)) ||
        (st = alloc_t(b, TMA_GNN_I32, rk->chunk_rows + 1, &rk->c_indptr)) ||
        (st = alloc_t(b, TMA_GNN_I32, ce, &rk->c_indices)) || (st = alloc_t(b, TMA_GNN_F32, ce, &rk->c_weights)) ||
        (st = alloc_t(b, TMA_GNN_I32, ce, &rk->c_rel)))
        goto fail;
    rk->cand = malloc((size_t)ce * sizeof *rk->cand);
    for (int i = 0; i < 2; i++) {
        rk->skey[i] = malloc((size_t)ce * sizeof *rk->skey[i]);
        rk->sidx[i] = malloc((size_t)ce * sizeof *rk->sidx[i]);
    }
    rk->eu = malloc((size_t)ce * sizeof *rk->eu);
    rk->u2s = malloc((size_t)ce * sizeof *rk->u2s);
    rk->remote = malloc((size_t)ids * sizeof *rk->remote);
    rk->own_src = malloc((size_t)ids * sizeof *rk->own_src);
    rk->row = malloc((size_t)TMA_MAX(Fd, 1) * sizeof *rk->row);
    rk->norm_count = calloc((size_t)TMA_MAX(c->num_rel_ids, 1), sizeof *rk->norm_count);

    /* Scoring chunks: a duty's head, tail and negatives are R's rows. */
    rk->pairs = (int64_t)c->eval_batch_edges * (1 + K);
    if ((st = alloc_t(b, TMA_GNN_F32, (int64_t)c->eval_batch_edges * (2 + K) * H, &rk->R)) ||
        (st = alloc_t(b, TMA_GNN_I32, rk->pairs, &rk->prel)) ||
        (st = gnn_score_bufs_alloc(c, &rk->P, b, rk->pairs, &rk->hi, &rk->ti, rk->dec)))
        goto fail;
    if (!rk->cand || !rk->u2s || !rk->remote || !rk->own_src || !rk->row || !rk->norm_count || !rk->skey[0] ||
        !rk->skey[1] || !rk->sidx[0] || !rk->sidx[1] || !rk->eu || (st = dense_setup(rk)) != TMA_OK) {
        st = st ? st : TMA_ERR_NOMEM;
        goto fail;
    }
    /* The cache: its rows, their keys (two slots a row) and generations within eval.rank_cache_mb. */
    const int64_t cache_rows = ((int64_t)c->eval_rank_cache_mb << 20) / (rk->widest_in * (int64_t)sizeof(float) + 32);
    if ((st = cache_setup(rk, TMA_MIN(cache_rows, (int64_t)INT32_MAX))) != TMA_OK)
        goto fail;
    *rk_p = rk;
    return TMA_OK;
fail:
    if (st == TMA_ERR_NOMEM)
        tma_log_error(COMP, "out of memory creating an evaluator rank for %lld nodes", (long long)rk->n);
    tma_gnn_rank_destroy(rk);
    return st;
}

int64_t tma_gnn_rank_param_count(const tma_gnn_rank_t *rk)
{
    return rk->layout.total;
}

int64_t tma_gnn_rank_rows_held(const tma_gnn_rank_t *rk)
{
    return rk->n;
}

/* Level l's table: 0 (the per-type projection), 1 (odd levels) or 2 (even
 * levels from 2); -1 for level 0 without the projection (the features). */
static int level_table(const tma_gnn_rank_t *rk, int level)
{
    if (level == 0)
        return rk->typed_in || rk->proj0 ? 0 : -1;
    return level & 1 ? 1 : 2;
}


/* Rows [r0, r0 + n) of table t from n x hidden floats (narrowed to bf16 when the tables are). */
static void table_put(tma_gnn_rank_t *rk, int t, int64_t r0, int64_t n, const float *rows)
{
    const int64_t H = rk->cfg.hidden;
    if (table16(rk, t))
        tma_feat_narrow(rows, (size_t)(n * H), TMA_FEAT_BF16, rk->t16[t] + r0 * H);
}

static int64_t level_cols(const tma_gnn_rank_t *rk, int level)
{
    return level == 0 && !rk->typed_in && !rk->proj0 ? rk->cfg.feature_dim : rk->cfg.hidden;
}

/* Held rows [r, r + n)'s features, widened to float32: one read for each
 * shard the rows lie in. */
static void feature_rows(const tma_gnn_rank_t *rk, int64_t r, int64_t n, float *out)
{
    int s = 0;
    while (r >= rk->off[s + 1])
        s++;
    for (; n > 0; s++) {
        const int64_t m = TMA_MIN(n, rk->off[s + 1] - r);
        tma_graph_feat_rows(rk->sh[s], r - rk->off[s], m, out);
        out += m * rk->cfg.feature_dim;
        r += m;
        n -= m;
    }
}

/* One held row of a level into out (widened features at level 0). */
static void held_row(const tma_gnn_rank_t *rk, int level, int64_t r, float *out)
{
    const int64_t d = level_cols(rk, level);
    const int t = level_table(rk, level);
    if (t >= 0 && table16(rk, t)) {
        tma_feat_widen(rk->t16[t] + r * d, TMA_FEAT_BF16, (size_t)d, out);
        return;
    }
    if (t >= 0) {
        memcpy(out, (const float *)rk->lvl[t].data + r * d, (size_t)d * sizeof(float));
        return;
    }
    feature_rows(rk, r, 1, out);
}

/* The rank row of a packed node, -1 when another rank holds it. */
static inline int64_t held(const tma_gnn_rank_t *rk, int64_t p)
{
    const int32_t k = TMA_INFER_SHARD(p);
    const int32_t s = k >= 0 && k < rk->num_shards ? rk->slot_of[k] : -1;
    return s < 0 ? -1 : rk->off[s] + TMA_INFER_LOCAL(p);
}

tma_status_t tma_gnn_rank_rows(const tma_gnn_rank_t *rk, int level, const int64_t *ids, int64_t n, float *out)
{
    if (level < 0 || level > rk->cfg.layers)
        return TMA_ERR_RANGE;
    const int64_t d = level_cols(rk, level);
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = held(rk, ids[i]);
        if (r < 0 || r >= rk->n) {
            tma_log_error(COMP, "evaluator rank: asked for shard %d's node %lld, which this rank does not hold",
                          TMA_INFER_SHARD(ids[i]), (long long)TMA_INFER_LOCAL(ids[i]));
            return TMA_ERR_RANGE;
        }
        held_row(rk, level, r, out + i * d);
    }
    return TMA_OK;
}

int64_t tma_gnn_rank_cols(const tma_gnn_rank_t *rk, int level)
{
    return level_cols(rk, level);
}

/* Level 0 of a typed model: the per-type input projection of each shard's nodes. */
static tma_status_t project_input(tma_gnn_rank_t *rk)
{
    const tma_gnn_config_t *c = &rk->cfg;
    const int64_t H = c->hidden;
    tma_status_t st = TMA_OK;
    for (int s = 0; s < rk->nsh && st == TMA_OK; s++) {
        const tma_graph_t *g = rk->sh[s];
        const int64_t n = g->num_nodes;
        if (n == 0)
            continue;
        gnn_type_feats_t tf = {0};
        tensor_t order = {0}, tids = {0};
        int64_t offsets[TMA_GNN_MAX_TYPES + 1];
        int32_t *ho = malloc((size_t)n * sizeof *ho);
        int64_t *hid = malloc((size_t)n * sizeof *hid);
        st = ho && hid ? gnn_type_feats_create(rk->b, c, g, &tf) : TMA_ERR_NOMEM;
        st = st ? st : gnn_type_feats_order(&tf, NULL, g->node_type, n, ho, offsets, hid);
        st = st ? st : alloc_t(rk->b, TMA_GNN_I32, n, &order);
        st = st ? st : alloc_t(rk->b, TMA_GNN_I64, n, &tids);
        if (st == TMA_OK) {
            order = tma_gnn_tensor_shape(&order, n, 1);
            tids = tma_gnn_tensor_shape(&tids, n, 1);
            st = tma_gnn_tensor_upload(&order, ho);
            st = st ? st : tma_gnn_tensor_upload(&tids, hid);
        }
        if (st == TMA_OK) {
            gnn_type_proj_t tp = {c->num_node_types, tf.feats, offsets, &order, &tids};
            tensor_t S = tma_gnn_tensor_shape(&rk->X, n, H), tmp = {0};
            /* bf16 tables: the shard's rows in float32 for a moment, then narrowed. */
            if (rk->bf16)
                st = alloc_t(rk->b, TMA_GNN_F32, n * H, &tmp);
            tensor_t out = rk->bf16 ? tma_gnn_tensor_shape(&tmp, n, H)
                                    : tma_gnn_tensor_view(&rk->lvl[0], rk->off[s] * H, n, H);
            if (rk->X.capacity < n * H)
                st = TMA_ERR_NOMEM; /* scratch below; one shard's rows at a time */
            st = st ? st : gnn_type_project_forward(&tp, rk->P.in_W, rk->P.in_b, &S, &out);
            if (st == TMA_OK)
                table_put(rk, 0, rk->off[s], n, out.data);
            tma_gnn_tensor_free(&tmp);
        }
        tma_gnn_tensor_free(&order);
        tma_gnn_tensor_free(&tids);
        gnn_type_feats_destroy(rk->b, &tf);
        free(ho);
        free(hid);
    }
    return st;
}

/* Level 0 for wide features: layer 0's projection of each held node's
 * features, chunk_rows rows at a time (widened into X, then multiplied). */
static tma_status_t project_wide(tma_gnn_rank_t *rk)
{
    const tma_gnn_config_t *c = &rk->cfg;
    const int64_t Fd = c->feature_dim, P = gnn_layer_proj_cols(c, 0);
    tma_status_t st = TMA_OK;
    for (int64_t r0 = 0; r0 < rk->n && st == TMA_OK; r0 += rk->chunk_rows) {
        const int64_t n = TMA_MIN(rk->chunk_rows, rk->n - r0);
        feature_rows(rk, r0, n, (float *)rk->X.data);
        tensor_t Xs = tma_gnn_tensor_shape(&rk->X, n, Fd), out = tma_gnn_tensor_view(&rk->lvl[0], r0 * P, n, P);
        gnn_src_t src = {.H = &Xs};
        st = gnn_layer_project(c, &rk->P, 0, &src, n, &out);
    }
    return st;
}

tma_status_t tma_gnn_rank_begin(tma_gnn_rank_t *rk, const float *params)
{
    rk->last_infer_s = rk->last_score_s = 0;
    const double t0 = tma_clock_now();
    tma_status_t st = tma_gnn_tensor_upload(&rk->params, params);
    if (st == TMA_OK && rk->typed_in) {
        if (rk->X.capacity < rk->n * rk->cfg.hidden) {
            /* The projection's scratch: grown once for the largest shard. */
            int64_t most = 0;
            for (int s = 0; s < rk->nsh; s++)
                most = TMA_MAX(most, rk->sh[s]->num_nodes);
            if (rk->X.capacity < most * rk->cfg.hidden) {
                tma_gnn_tensor_free(&rk->X);
                st = alloc_t(rk->b, TMA_GNN_F32, TMA_MAX(most * rk->cfg.hidden, rk->x_floats), &rk->X);
            }
        }
        st = st ? st : project_input(rk);
    }
    if (st == TMA_OK && rk->proj0)
        st = project_wide(rk);
    rk->last_infer_s += tma_clock_now() - t0;
    return st;
}

/* Sorts rk->skey[0][0..n) (keys up to maxkey) with rk->sidx[0] along,
 * stable, by 11-bit digits from the lowest (a pass a digit of maxkey);
 * the result is left in skey[0] and sidx[0].  Replaces a qsort per chunk
 * that took a fifth of a rank's time. */
static void sort_entries(tma_gnn_rank_t *rk, int64_t n, uint64_t maxkey)
{
    enum { BITS = 11, BUCKETS = 1 << BITS };
    int64_t cnt[BUCKETS];
    uint64_t *k = rk->skey[0], *k2 = rk->skey[1];
    int32_t *x = rk->sidx[0], *x2 = rk->sidx[1];
    for (int shift = 0; shift == 0 || (shift < 64 && maxkey >> shift); shift += BITS) {
        memset(cnt, 0, sizeof cnt);
        for (int64_t i = 0; i < n; i++)
            cnt[(k[i] >> shift) & (BUCKETS - 1)]++;
        for (int64_t b = 0, sum = 0; b < BUCKETS; b++) {
            const int64_t c = cnt[b];
            cnt[b] = sum;
            sum += c;
        }
        for (int64_t i = 0; i < n; i++) {
            const int64_t j = cnt[(k[i] >> shift) & (BUCKETS - 1)]++;
            k2[j] = k[i];
            x2[j] = x[i];
        }
        uint64_t *tk = k;
        k = k2;
        k2 = tk;
        int32_t *tx = x;
        x = x2;
        x2 = tx;
    }
    if (k != rk->skey[0]) {
        memcpy(rk->skey[0], k, (size_t)n * sizeof *k);
        memcpy(rk->sidx[0], x, (size_t)n * sizeof *x);
    }
}

/* The next chunk of rows from r0 within slot s: at most chunk_rows rows and chunk_edges entries. */
static int64_t chunk_end(const tma_gnn_rank_t *rk, int s, int64_t r0)
{
    const tma_graph_infer_t *f = rk->inf[s];
    int64_t r1 = r0, e = 0;
    while (r1 < rk->off[s + 1] && r1 - r0 < rk->chunk_rows) {
        const int64_t i = r1 - rk->off[s], de = f->indptr[i + 1] - f->indptr[i] + 1;
        if (r1 > r0 && e + de > rk->chunk_edges)
            break;
        e += de;
        r1++;
    }
    return r1;
}

/* Gathers the chunk's sources at `level` into X (its own rows first, then
 * the other neighbours: held ones copied, then the remote ones fetched) and
 * builds the block over them.  Returns the number of sources in *n_src. */
static tma_status_t gather_chunk(tma_gnn_rank_t *rk, int level, int s, int64_t r0, int64_t r1, tma_gnn_block_t *blk,
                                 tensor_t *rel_t, int64_t *n_src_p)
{
    const tma_gnn_config_t *c = &rk->cfg;
    const gnn_encoder_desc_t *enc = gnn_encoder_of(c);
    const tma_graph_infer_t *f = rk->inf[s];
    const int64_t n = r1 - r0, d = level_cols(rk, level), i0 = r0 - rk->off[s];
    const int64_t e0 = f->indptr[i0], ne = f->indptr[i0 + n] - e0;
    float *X = rk->X.data;
    /* The chunk's neighbours, sorted and unique, and each entry's among them. */
    int64_t nu = 0;
    if (enc->neighbours) {
        uint64_t most = 0;
        for (int64_t e = 0; e < ne; e++) {
            const int64_t p = f->nbr[e0 + e];
            const uint64_t key = (uint64_t)(rk->doff[TMA_INFER_SHARD(p)] + TMA_INFER_LOCAL(p));
            rk->skey[0][e] = key;
            rk->sidx[0][e] = (int32_t)e;
            most = key > most ? key : most;
        }
        sort_entries(rk, ne, most);
        for (int64_t e = 0; e < ne; e++) {
            if (e == 0 || rk->skey[0][e] != rk->skey[0][e - 1])
                rk->cand[nu++] = f->nbr[e0 + rk->sidx[0][e]];
            rk->eu[rk->sidx[0][e]] = (int32_t)(nu - 1);
        }
    }
    /* Source rows: the chunk's own rows, the other held rows, then the remote
     * ones: first those to fetch, then those in the cache (this layer's). */
    int64_t n_own = 0, n_rem = 0, n_hit = 0;
    for (int64_t u = 0; u < nu; u++) {
        const int64_t r = held(rk, rk->cand[u]);
        if (r >= r0 && r < r1)
            rk->u2s[u] = (int32_t)(r - r0);
        else if (r >= 0)
            rk->own_src[n_own++] = r;
        else {
            const int32_t cr = cache_find(rk, rk->cand[u]);
            if (cr >= 0 && rk->cgen[cr] == rk->gen)
                n_hit++;
            else
                rk->remote[n_rem++] = rk->cand[u];
        }
    }
    int64_t k_own = 0, k_rem = 0, k_hit = 0;
    for (int64_t u = 0; u < nu; u++) {
        const int64_t r = held(rk, rk->cand[u]);
        if (r >= 0 && (r < r0 || r >= r1)) {
            rk->u2s[u] = (int32_t)(n + k_own++);
        } else if (r < 0) {
            const int32_t cr = cache_find(rk, rk->cand[u]);
            if (cr >= 0 && rk->cgen[cr] == rk->gen) {
                memcpy(X + (n + n_own + n_rem + k_hit) * d, rk->crows + (int64_t)cr * rk->cwidth,
                       (size_t)d * sizeof(float));
                rk->u2s[u] = (int32_t)(n + n_own + n_rem + k_hit++);
            } else {
                if (rk->chit)
                    rk->chit[k_rem] = cr; /* fetched below, then kept when the cache may hold it */
                rk->u2s[u] = (int32_t)(n + n_own + k_rem++);
            }
        }
    }
    const int64_t n_src = n + n_own + n_rem + n_hit;
    if (n_src > rk->max_src)
        return TMA_ERR_INTERNAL;
    rk->hits += n_hit;
    rk->lookups += n_hit + n_rem;
    for (int64_t i = 0; i < n; i++)
        held_row(rk, level, r0 + i, X + i * d);
    for (int64_t j = 0; j < n_own; j++)
        held_row(rk, level, rk->own_src[j], X + (n + j) * d);
    float *fetched = X + (n + n_own) * d;
    tma_status_t st = n_rem ? rk->fetch(rk->fetch_arg, level, rk->remote, n_rem, d, fetched) : TMA_OK;
    if (st != TMA_OK)
        return st;
    for (int64_t j = 0; j < n_rem && rk->chit; j++)
        if (rk->chit[j] >= 0) {
            memcpy(rk->crows + (int64_t)rk->chit[j] * rk->cwidth, fetched + j * d, (size_t)d * sizeof(float));
            rk->cgen[rk->chit[j]] = rk->gen;
        }
    *n_src_p = n_src;
    if (!enc->neighbours)
        return TMA_OK;

    /* The block: the single evaluator's weights (graph/sampler.c, full rows), rows in the graph's order. */
    const int gcn = enc->self_loops, relational = enc->relational;
    const int gcn_norm = enc->norm == TMA_GRAPH_NORM_GCN;
    int32_t *ip = rk->c_indptr.data, *ix = rk->c_indices.data, *rl = rk->c_rel.data;
    float *w = rk->c_weights.data;
    const int32_t R2 = c->num_rel_ids;
    int64_t e = 0;
    ip[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t a = f->indptr[i0 + i], z = f->indptr[i0 + i + 1], deg = z - a;
        const double di = (double)(deg + 1);
        const double scale = gcn_norm ? (deg > 0 ? 1.0 : 0.0) : (deg + gcn > 0 ? 1.0 / (double)(deg + gcn) : 0.0);
        if (gcn) {
            ix[e] = (int32_t)i;
            w[e] = gcn_norm ? (float)(1.0 / di) : (float)scale;
            e++;
        }
        for (int64_t q = a; q < z; q++, e++) {
            ix[e] = rk->u2s[rk->eu[q - e0]];
            w[e] = gcn_norm ? (float)(scale / sqrt(di * (double)(f->nbr_deg[q] + 1))) : (float)scale;
            if (relational)
                rl[e] = f->rel ? (f->rel[q] + R2 / 2) % R2 : 0; /* the message runs back: the inverse */
        }
        ip[i + 1] = (int32_t)e;
    }
    if (relational && (st = gnn_rgcn_norm(n, ip, rl, R2, rk->norm_count, w)) != TMA_OK)
        return st;
    memset(blk, 0, sizeof *blk);
    blk->num_dst = n;
    blk->num_src = n_src;
    blk->num_edges = e;
    blk->indptr = tma_gnn_tensor_shape(&rk->c_indptr, n + 1, 1);
    blk->indices = tma_gnn_tensor_shape(&rk->c_indices, e, 1);
    blk->weights = tma_gnn_tensor_shape(&rk->c_weights, e, 1);
    *rel_t = tma_gnn_tensor_shape(&rk->c_rel, e, 1);
    return TMA_OK;
}

tma_status_t tma_gnn_rank_layer(tma_gnn_rank_t *rk, int l)
{
    const tma_gnn_config_t *c = &rk->cfg;
    if (l < 0 || l >= c->layers)
        return TMA_ERR_RANGE;
    const double t0 = tma_clock_now();
    rk->gen++; /* the cache's rows of the last layer are another level's */
    rk->hits = rk->lookups = 0;
    const gnn_encoder_desc_t *enc = gnn_encoder_of(c);
    const int64_t H = c->hidden, d_in = level_cols(rk, l);
    const int mlp = !enc->neighbours, last = l == c->layers - 1;
    /* The sources are dense rows here, whatever the features' storage. */
    tma_gnn_feat_info_t fi;
    memset(&fi, 0, sizeof fi);
    /* p0: the sources are layer 0's projections already (level 0 of wide features). */
    const int p0 = l == 0 && rk->proj0, pf = p0 || gnn_layer_project_first(c, l, &fi);
    const int out_t = level_table(rk, l + 1);
    tensor_t out = rk->bf16 ? rk->Zo : tma_gnn_tensor_shape(&rk->lvl[out_t], rk->n, H);
    tma_status_t st = TMA_OK;
    for (int s = 0; s < rk->nsh && st == TMA_OK; s++) {
        for (int64_t r0 = rk->off[s]; r0 < rk->off[s + 1] && st == TMA_OK;) {
            const int64_t r1 = chunk_end(rk, s, r0), n = r1 - r0;
            tma_gnn_block_t blk;
            tensor_t rel;
            int64_t n_src = 0;
            st = gather_chunk(rk, l, s, r0, r1, &blk, &rel, &n_src);
            if (st != TMA_OK)
                break;
            tensor_t Xs = tma_gnn_tensor_shape(&rk->X, n_src, d_in);
            gnn_src_t src = {.H = &Xs};
            tensor_t T = Xs, A;
            if (p0 && enc->self_term) {
                /* SAGE's self term: the chunk's own features, in A (unused when projecting first). */
                feature_rows(rk, r0, n, (float *)rk->A.data);
                A = tma_gnn_tensor_shape(&rk->A, n, c->feature_dim);
                src.H = &A;
            }
            if (enc->always_project || (pf && !p0)) {
                T = tma_gnn_tensor_shape(&rk->T, n_src, enc->always_project ? gnn_layer_proj_cols(c, l) : H);
                st = gnn_layer_project(c, &rk->P, l, &src, n_src, &T);
            }
            const int64_t ec = gnn_layer_edge_cols(c);
            if (ec > 0)
                A = tma_gnn_tensor_shape(&rk->A, blk.num_edges, ec);
            else if (!pf && !mlp)
                A = tma_gnn_tensor_shape(&rk->A, n, d_in);
            tensor_t Yout = rk->bf16 ? tma_gnn_tensor_shape(&rk->Zo, n, H) : tma_gnn_tensor_view(&out, r0 * H, n, H);
            tensor_t Z = last ? Yout : tma_gnn_tensor_shape(&rk->Z, n, H);
            /* GCN and SAGE: the single evaluator's fused op (the chunk's own rows are the first sources). */
            const int fused = st == TMA_OK && gnn_layer_fusable(c, &rk->P, l, 0, pf, &rk->A);
            if (fused)
                st = gnn_layer_infer_fused(c, &rk->P, l, &blk, &src, 0, &rk->A, &Yout);
            else
                st = st ? st
                        : gnn_layer_combine(c, &rk->P, l, mlp ? NULL : &blk, &src, 0, pf ? &T : NULL,
                                            enc->relational ? &rel : NULL, (pf && !ec) || mlp ? NULL : &A, &Z);
            if (st == TMA_OK && !last && !fused) {
                tensor_t mean = tma_gnn_tensor_shape(&rk->mean, n, 1), rstd = tma_gnn_tensor_shape(&rk->rstd, n, 1);
                st = gnn_layer_activate(&rk->P, l, &Z, &mean, &rstd, &Yout);
            }
            if (st == TMA_OK)
                table_put(rk, out_t, r0, n, Yout.data);
            r0 = r1;
        }
    }
    rk->last_infer_s += tma_clock_now() - t0;
    return st;
}

int64_t tma_gnn_rank_duties(const tma_gnn_rank_t *rk, tma_gnn_split_t split, int64_t limit)
{
    int64_t n = 0;
    const int t = split == TMA_GNN_SPLIT_TEST;
    for (int s = 0; s < rk->nsh; s++) {
        const tma_graph_infer_t *f = rk->inf[s];
        const int64_t W = TMA_INFER_DUTY_COLS + f->num_negatives;
        for (int64_t i = 0; i < f->num_duties[t]; i++)
            n += limit <= 0 || f->duties[t][i * W + TMA_INFER_DUTY_EDGE] < limit;
    }
    return n;
}

/* Scores ce duties (rows of W values at d) into logits (ce x (1 + K)). */
static tma_status_t score_chunk(tma_gnn_rank_t *rk, int s, const int64_t *const *rows, int64_t ce, float *logits)
{
    const tma_gnn_config_t *c = &rk->cfg;
    const int64_t K = rk->inf[s]->num_negatives, per = 1 + K, H = c->hidden, P = ce * per;
    const int level = c->layers;
    float *R = rk->R.data;
    int32_t *hi = rk->hi.data, *ti = rk->ti.data, *pr = rk->prel.data;
    int64_t n_rem = 0;
    /* Row i * (2 + K): the head; then the tail and the negatives. */
    for (int64_t i = 0; i < ce; i++) {
        const int64_t *d = rows[i];
        held_row(rk, level, rk->off[s] + d[TMA_INFER_DUTY_HEAD], R + i * (2 + K) * H);
        for (int64_t j = 0; j < per; j++) {
            const int64_t p = d[TMA_INFER_DUTY_TAIL + j], r = held(rk, p);
            const int64_t at = i * (2 + K) + 1 + j;
            if (r >= 0)
                held_row(rk, level, r, R + at * H);
            else {
                rk->remote[n_rem] = p;
                rk->own_src[n_rem++] = at;
            }
            hi[i * per + j] = (int32_t)(i * (2 + K));
            ti[i * per + j] = (int32_t)at;
            pr[i * per + j] = (int32_t)d[TMA_INFER_DUTY_REL];
        }
    }
    tma_status_t st = TMA_OK;
    if (n_rem) {
        /* Fetched into the spare scratch, then put in place. */
        float *tmp = rk->X.data;
        st = rk->fetch(rk->fetch_arg, level, rk->remote, n_rem, H, tmp);
        for (int64_t q = 0; q < n_rem && st == TMA_OK; q++)
            memcpy(R + rk->own_src[q] * H, tmp + q * H, (size_t)H * sizeof(float));
    }
    tensor_t Rt = tma_gnn_tensor_shape(&rk->R, ce * (2 + K), H), hit = tma_gnn_tensor_shape(&rk->hi, P, 1),
             tit = tma_gnn_tensor_shape(&rk->ti, P, 1), rel = tma_gnn_tensor_shape(&rk->prel, P, 1), lg;
    st = st ? st
            : gnn_score_pairs(c, &rk->P, &Rt, &hit, &tit, gnn_decoder_of(c)->relational ? &rel : NULL, rk->dec, P,
                              &lg);
    return st ? st : tma_gnn_tensor_download(&lg, logits);
}

tma_status_t tma_gnn_rank_score(tma_gnn_rank_t *rk, tma_gnn_split_t split, int64_t limit, int64_t *edges,
                                float *logits, int64_t *count_p)
{
    const double t0 = tma_clock_now();
    const int t = split == TMA_GNN_SPLIT_TEST;
    const int64_t ce_max = rk->cfg.eval_batch_edges;
    const int64_t **rows = malloc((size_t)ce_max * sizeof *rows);
    if (!rows)
        return TMA_ERR_NOMEM;
    if (rk->X.capacity < ce_max * (1 + rk->inf[0]->num_negatives) * rk->cfg.hidden) {
        tma_gnn_tensor_free(&rk->X);
        tma_status_t st = alloc_t(rk->b, TMA_GNN_F32,
                                  TMA_MAX(ce_max * (1 + rk->inf[0]->num_negatives) * rk->cfg.hidden,
                                          rk->x_floats),
                                  &rk->X);
        if (st != TMA_OK) {
            free(rows);
            return st;
        }
    }
    int64_t out = 0;
    tma_status_t st = TMA_OK;
    for (int s = 0; s < rk->nsh && st == TMA_OK; s++) {
        const tma_graph_infer_t *f = rk->inf[s];
        const int64_t K = f->num_negatives, W = TMA_INFER_DUTY_COLS + K;
        int64_t ce = 0;
        for (int64_t i = 0; i <= f->num_duties[t] && st == TMA_OK; i++) {
            const int64_t *d = i < f->num_duties[t] ? f->duties[t] + i * W : NULL;
            if (d && (limit <= 0 || d[TMA_INFER_DUTY_EDGE] < limit)) {
                edges[out + ce] = d[TMA_INFER_DUTY_EDGE];
                rows[ce++] = d;
            }
            if (ce == ce_max || (!d && ce > 0)) {
                st = score_chunk(rk, s, rows, ce, logits + out * (1 + K));
                out += ce;
                ce = 0;
            }
        }
    }
    free(rows);
    *count_p = out;
    rk->last_score_s = tma_clock_now() - t0;
    return st;
}

void tma_gnn_rank_cache_stats(const tma_gnn_rank_t *rk, int64_t *hits_p, int64_t *remote_p, int64_t *cap_p)
{
    if (hits_p)
        *hits_p = rk->hits;
    if (remote_p)
        *remote_p = rk->lookups;
    if (cap_p)
        *cap_p = rk->ccap;
}

tma_status_t gnn_rank_set_cache(tma_gnn_rank_t *rk, int64_t rows)
{
    return cache_setup(rk, rows);
}

void gnn_rank_set_chunk(tma_gnn_rank_t *rk, int64_t rows, int64_t edges)
{
    if (rows >= 1 && rows <= rk->chunk_rows)
        rk->chunk_rows = rows;
    if (edges >= 1 && edges <= rk->chunk_edges)
        rk->chunk_edges = edges; /* a row of more entries still makes a chunk of its own */
}

void tma_gnn_rank_last_timing(const tma_gnn_rank_t *rk, double *infer_s_p, double *score_s_p)
{
    if (infer_s_p)
        *infer_s_p = rk->last_infer_s;
    if (score_s_p)
        *score_s_p = rk->last_score_s;
}
