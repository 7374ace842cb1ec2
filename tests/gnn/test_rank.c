/*
 * test_rank.c: evaluator ranks against the single evaluator.  A graph is
 * written, partitioned into shards with their inference files, and dealt to
 * M ranks (some holding several shards); the ranks run layer by layer in
 * lockstep, fetching each other's rows in this process, and score the
 * evaluation edges at their heads' owners.  Every validation and test logit
 * must equal the single evaluator's within 1e-5 relative, for GCN, SAGE, MLP
 * and GAT on an untyped graph and RGCN and GCN with DistMult on a typed one.
 * The inference files themselves are checked against the graph, and damaged
 * or foreign ones are refused.  The single evaluator's bfloat16 tables are
 * checked against its float32 tables (check_single_bf16).
 */
#include "gnn_int.h"
#include "gnn_testutil.h"
#include "tma_gnn.h"
#include "tma_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_RANKS = 4 };

typedef struct world {
    int M;
    tma_gnn_rank_t *rank[MAX_RANKS];
    int32_t *owner; /* [S]: shard -> rank */
    int64_t fetched;
    int64_t cols0; /* the widest row fetched at level 0 */
} world_t;

static tma_status_t fetch(void *arg, int level, const int64_t *ids, int64_t n, int64_t cols, float *out)
{
    world_t *w = arg;
    if (level == 0)
        w->cols0 = TMA_MAX(w->cols0, cols);
    for (int64_t i = 0; i < n; i++) {
        tma_status_t st = tma_gnn_rank_rows(w->rank[w->owner[TMA_INFER_SHARD(ids[i])]], level, ids + i, 1,
                                            out + i * cols);
        if (st != TMA_OK)
            return st;
    }
    w->fetched += n;
    return TMA_OK;
}

typedef struct part {
    tma_partition_info_t *info;
    tma_graph_t **shard;
    tma_graph_infer_t **inf;
} part_t;

static void part_open(const char *dir, part_t *p)
{
    CHECK_OK(tma_partition_info_load(dir, &p->info));
    const int32_t S = p->info->num_shards;
    p->shard = calloc((size_t)S, sizeof *p->shard);
    p->inf = calloc((size_t)S, sizeof *p->inf);
    for (int32_t k = 0; k < S; k++) {
        CHECK_OK(tma_graph_open(p->info->shard_paths[k], 0, &p->shard[k]));
        char *nm = tma_partition_infer_name(k), *path = tma_path_join(dir, nm);
        CHECK_OK(tma_graph_infer_open(path, 0, k, S, p->info->graph_id, p->info->shard_nodes, &p->inf[k]));
        free(nm);
        free(path);
    }
}

static void part_close(part_t *p)
{
    for (int32_t k = 0; k < p->info->num_shards; k++) {
        tma_graph_destroy(p->shard[k]);
        tma_graph_infer_close(p->inf[k]);
    }
    free(p->shard);
    free(p->inf);
    tma_partition_info_destroy(p->info);
}

/* The inference files say what the graph says: each node's full row, its
 * neighbours' degrees, and the duties of the heads it holds. */
static void check_files(const tma_graph_t *g, const part_t *p)
{
    const int32_t S = p->info->num_shards;
    int64_t duties[2] = {0, 0};
    for (int32_t k = 0; k < S; k++) {
        const tma_graph_infer_t *f = p->inf[k];
        for (int64_t i = 0; i < f->num_nodes; i++) {
            const int64_t v = f->global_ids[i];
            ASSERT_EQ(f->indptr[i + 1] - f->indptr[i], tma_graph_degree(g, v));
            for (int64_t q = f->indptr[i], e = g->indptr[v]; q < f->indptr[i + 1]; q++, e++) {
                const int64_t nb = f->nbr[q];
                ASSERT_EQ(p->inf[TMA_INFER_SHARD(nb)]->global_ids[TMA_INFER_LOCAL(nb)], g->indices[e]);
                ASSERT_EQ(f->nbr_deg[q], tma_graph_degree(g, g->indices[e]));
                if (f->rel)
                    ASSERT_EQ(f->rel[q], g->edge_rel[e]);
            }
        }
        for (int t = 0; t < 2; t++) {
            const int64_t W = TMA_INFER_DUTY_COLS + f->num_negatives;
            const int64_t *edges = t ? g->test_edges : g->val_edges, *negs = t ? g->test_neg : g->val_neg;
            for (int64_t i = 0; i < f->num_duties[t]; i++) {
                const int64_t *d = f->duties[t] + i * W, e = d[TMA_INFER_DUTY_EDGE];
                ASSERT_EQ(f->global_ids[d[TMA_INFER_DUTY_HEAD]], edges[2 * e]);
                const int64_t tail = d[TMA_INFER_DUTY_TAIL], neg0 = d[TMA_INFER_DUTY_COLS];
                ASSERT_EQ(p->inf[TMA_INFER_SHARD(tail)]->global_ids[TMA_INFER_LOCAL(tail)], edges[2 * e + 1]);
                ASSERT_EQ(p->inf[TMA_INFER_SHARD(neg0)]->global_ids[TMA_INFER_LOCAL(neg0)],
                          negs[e * g->num_negatives]);
            }
            duties[t] += f->num_duties[t];
        }
    }
    ASSERT_EQ(duties[0], g->num_val);
    ASSERT_EQ(duties[1], g->num_test);
}

/* Pearson's correlation of n pairs. */
static double correlation(const float *x, const float *y, int64_t n)
{
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    for (int64_t i = 0; i < n; i++) {
        sx += x[i];
        sy += y[i];
        sxx += (double)x[i] * x[i];
        syy += (double)y[i] * y[i];
        sxy += (double)x[i] * y[i];
    }
    const double k = (double)n;
    return (sxy - sx * sy / k) / sqrt((sxx - sx * sx / k) * (syy - sy * sy / k));
}

/* Both paths' logits of every validation and test edge for random weights. */
/* tol: the largest relative difference of a logit (1e-5: the same numbers).
 * tol 0 (bfloat16 tables, every row rounded to 8 bits of mantissa): the
 * logits' correlation with the single evaluator's is at least 0.99 instead. */
/* cache_rows >= 0: each rank's cache of remote rows holds at most that many
 * (else eval.rank_cache_mb's, which holds them all here).  Returns the rows
 * fetched; *hash_p (may be NULL) is a hash of the ranks' logits' bits;
 * *cols0_p (may be NULL) the widest row the ranks fetched at level 0. */
static int64_t check_model_cache(const char *name, tma_gnn_config_t c, const tma_graph_t *g, const part_t *p, int M,
                                 double tol, int64_t cache_rows, uint64_t *hash_p, int64_t *cols0_p)
{
    uint64_t hash = 1469598103934665603ull;
    const int32_t S = p->info->num_shards;
    tma_gnn_evaluator_t *ev;
    tma_gnn_config_t ce = c;
    ce.eval_table_bf16 = 0; /* the single evaluator keeps float32 */
    CHECK_OK(tma_gnn_evaluator_create(&ce, g, &ev));
    CHECK_OK(tma_gnn_config_resolve(&c, g));
    tma_gnn_layout_t lay;
    CHECK_OK(tma_gnn_layout_build(&c, &lay));
    float *params = malloc((size_t)lay.total * sizeof(float));
    CHECK_OK(tma_gnn_params_init(&c, 11, params));
    world_t w = {.M = M, .owner = malloc((size_t)S * sizeof(int32_t))};
    for (int r = 0; r < M; r++) {
        tma_gnn_rank_shard_t held[64];
        int nh = 0;
        for (int32_t k = 0; k < S; k++)
            if (k % M == r) {
                held[nh].shard = p->shard[k];
                held[nh++].inf = p->inf[k];
                w.owner[k] = r;
            }
        CHECK_OK(tma_gnn_rank_create(&c, held, nh, fetch, &w, &w.rank[r]));
        if (r == 1)
            gnn_rank_set_chunk(w.rank[r], 29, 150); /* many chunks, some of one row's worth of edges */
        if (cache_rows >= 0)
            CHECK_OK(gnn_rank_set_cache(w.rank[r], cache_rows));
    }
    for (int r = 0; r < M; r++)
        CHECK_OK(tma_gnn_rank_begin(w.rank[r], params));
    for (int l = 0; l < c.layers; l++)
        for (int r = 0; r < M; r++)
            CHECK_OK(tma_gnn_rank_layer(w.rank[r], l));
    const int64_t per = 1 + g->num_negatives;
    double worst = 0;
    for (int t = 0; t < 2; t++) {
        const tma_gnn_split_t split = t ? TMA_GNN_SPLIT_TEST : TMA_GNN_SPLIT_VAL;
        const int64_t ne = tma_gnn_evaluator_edges(ev, split);
        float *want = malloc((size_t)(ne * per) * sizeof(float)), *got = malloc((size_t)(ne * per) * sizeof(float));
        int64_t *edges = malloc((size_t)ne * sizeof(int64_t));
        uint8_t *seen = calloc((size_t)ne, 1);
        CHECK_OK(tma_gnn_evaluator_scores(ev, params, split, want, NULL));
        int64_t total = 0;
        for (int r = 0; r < M; r++) {
            const int64_t nd = tma_gnn_rank_duties(w.rank[r], split, 0);
            float *lg = malloc((size_t)(TMA_MAX(nd, 1) * per) * sizeof(float));
            int64_t cnt = -1;
            CHECK_OK(tma_gnn_rank_score(w.rank[r], split, 0, edges, lg, &cnt));
            ASSERT_EQ(cnt, nd);
            for (int64_t i = 0; i < cnt; i++) {
                ASSERT_LT(edges[i], ne);
                ASSERT_EQ(seen[edges[i]], 0);
                seen[edges[i]] = 1;
                memcpy(got + edges[i] * per, lg + i * per, (size_t)per * sizeof(float));
            }
            total += cnt;
            free(lg);
        }
        ASSERT_EQ(total, ne);
        for (int64_t i = 0; i < ne * per; i++) {
            uint32_t bits;
            memcpy(&bits, got + i, sizeof bits);
            hash = (hash ^ bits) * 1099511628211ull;
        }
        const double corr = correlation(want, got, ne * per);
        if (tol == 0) {
            CHECK_MSG(corr >= 0.99, "%s: %s logits correlate %.4f with the single evaluator's", name,
                      t ? "test" : "validation", corr);
            fprintf(stderr, "%s: %s logits' correlation with float32's %.5f\n", name, t ? "test" : "validation", corr);
        }
        for (int64_t i = 0; i < ne * per && tol > 0; i++) {
            const double rel = fabs((double)got[i] - want[i]) / fmax(1.0, fabs((double)want[i]));
            worst = fmax(worst, rel);
            CHECK_MSG(rel <= tol, "%s: %s logit %lld: ranks %.9g, single evaluator %.9g", name, t ? "test" : "validation",
                      (long long)i, got[i], want[i]);
            if (rel > tol)
                break;
        }
        free(want);
        free(got);
        free(edges);
        free(seen);
    }
    fprintf(stderr, "%s: %d ranks over %d shards, %lld rows fetched", name, M, S, (long long)w.fetched);
    fprintf(stderr, tol > 0 ? ", largest relative difference %.2g\n" : "\n", worst);
    ASSERT_GT(w.fetched, 0);
    for (int r = 0; r < M; r++)
        tma_gnn_rank_destroy(w.rank[r]);
    free(w.owner);
    free(params);
    tma_gnn_evaluator_destroy(ev);
    if (hash_p)
        *hash_p = hash;
    if (cols0_p)
        *cols0_p = w.cols0;
    return w.fetched;
}

static void check_model_tol(const char *name, tma_gnn_config_t c, const tma_graph_t *g, const part_t *p, int M,
                            double tol)
{
    check_model_cache(name, c, g, p, M, tol, -1, NULL, NULL);
}

/* The single evaluator with bfloat16 tables against its float32 tables, same
 * weights: every logit, the MRR of both splits and the embeddings.  Each
 * level's table (and a typed model's projected input) is rounded to 8
 * significant bits, a relative error up to 2^-9 (0.002) a value; a layer
 * passes its input's error on through a weighted mean and LayerNorm, so with
 * three layers the rows could be about 4 x 2^-9 = 0.008 off if every error
 * added up (measured: at most 0.0055).  The bounds leave 2.5 times that for
 * the weights' gain: 0.02 a row (relative), 0.05 of the logits' RMS a logit
 * (measured 0.019), a correlation of 0.999 (measured 0.99999), and an MRR
 * within 0.02 (measured 0.0014: a rank moves only where a negative's logit
 * is within that rounding of the positive's). */
static void check_single_bf16(const char *name, tma_gnn_config_t c, const tma_graph_t *g)
{
    tma_gnn_config_t c16 = c;
    c.eval_table_bf16 = 0;
    c16.eval_table_bf16 = 1;
    tma_gnn_evaluator_t *e32, *e16;
    CHECK_OK(tma_gnn_evaluator_create(&c, g, &e32));
    CHECK_OK(tma_gnn_evaluator_create(&c16, g, &e16));
    CHECK_OK(tma_gnn_config_resolve(&c, g));
    tma_gnn_layout_t lay;
    CHECK_OK(tma_gnn_layout_build(&c, &lay));
    float *params = malloc((size_t)lay.total * sizeof(float));
    CHECK_OK(tma_gnn_params_init(&c, 11, params));
    const int64_t per = 1 + g->num_negatives;
    for (int t = 0; t < 2; t++) {
        const tma_gnn_split_t split = t ? TMA_GNN_SPLIT_TEST : TMA_GNN_SPLIT_VAL;
        const int64_t ne = tma_gnn_evaluator_edges(e32, split);
        float *want = malloc((size_t)(ne * per) * sizeof(float)), *got = malloc((size_t)(ne * per) * sizeof(float));
        double m32, m16, sd = 0, worst = 0;
        CHECK_OK(tma_gnn_evaluator_scores(e32, params, split, want, &m32));
        CHECK_OK(tma_gnn_evaluator_scores(e16, params, split, got, &m16));
        for (int64_t i = 0; i < ne * per; i++)
            sd += (double)want[i] * want[i];
        sd = sqrt(sd / (double)(ne * per));
        for (int64_t i = 0; i < ne * per; i++)
            worst = fmax(worst, fabs((double)got[i] - want[i]) / sd);
        const double corr = correlation(want, got, ne * per);
        fprintf(stderr, "%s, single evaluator, bf16 tables: %s logits' correlation with float32's %.6f, largest "
                "difference %.4f of their RMS; MRR %.6f (float32 %.6f)\n", name, t ? "test" : "validation", corr,
                worst, m16, m32);
        CHECK_MSG(corr >= 0.999, "%s: bf16 logits correlate %.6f with float32's", name, corr);
        CHECK_MSG(worst <= 0.05, "%s: a bf16 logit is %.4f of the logits' RMS from float32's", name, worst);
        CHECK_MSG(fabs(m16 - m32) <= 0.02, "%s: bf16 MRR %.6f, float32 %.6f", name, m16, m32);
        free(want);
        free(got);
    }
    /* The embeddings: float32's within bfloat16's rounding of each row. */
    const int64_t N = g->num_nodes, H = c.hidden;
    float *x = malloc((size_t)(N * H) * sizeof(float)), *y = malloc((size_t)(N * H) * sizeof(float));
    CHECK_OK(tma_gnn_evaluator_embeddings(e32, params, x));
    CHECK_OK(tma_gnn_evaluator_embeddings(e16, params, y));
    double worst = 0;
    for (int64_t v = 0; v < N; v++) {
        double nx = 0, d = 0;
        for (int64_t j = 0; j < H; j++) {
            nx += (double)x[v * H + j] * x[v * H + j];
            d += ((double)y[v * H + j] - x[v * H + j]) * ((double)y[v * H + j] - x[v * H + j]);
        }
        worst = fmax(worst, sqrt(d / fmax(nx, 1e-30)));
    }
    fprintf(stderr, "%s, single evaluator, bf16 tables: embeddings within %.4f of float32's (relative, per row)\n",
            name, worst);
    CHECK_MSG(worst <= 0.02, "%s: a bf16 embedding is %.4f (relative) from float32's", name, worst);
    free(x);
    free(y);
    free(params);
    tma_gnn_evaluator_destroy(e32);
    tma_gnn_evaluator_destroy(e16);
}

static void check_model(const char *name, tma_gnn_config_t c, const tma_graph_t *g, const part_t *p, int M)
{
    check_model_tol(name, c, g, p, M, 1e-5);
}

static tma_gnn_config_t model(tma_gnn_encoder_t enc, tma_gnn_decoder_t dec)
{
    tma_gnn_config_t c;
    tma_gnn_config_default(&c);
    c.encoder = enc;
    c.decoder = dec;
    c.hidden = 24;
    c.decoder_hidden = 16;
    c.bases = 3;
    c.heads = enc == TMA_GNN_ENCODER_GAT ? 2 : c.heads;
    c.threads = 2;
    c.eval_batch_edges = 37; /* several scoring chunks */
    return c;
}

/* Writes g, partitions it into S random shards, opens the pieces. */
static void partition(tma_graph_t *g, const char *dir, int32_t S, part_t *p)
{
    char *gpath = tma_path_join(dir, "g.tmag"), *pdir = tma_path_join(dir, "part");
    CHECK_OK(tma_graph_write(g, gpath));
    tma_graph_t *gf;
    CHECK_OK(tma_graph_open(gpath, 0, &gf));
    tma_partition_opts_t o = {.scheme = TMA_PARTITION_RANDOM, .num_shards = S, .seed = 3};
    tma_partition_result_t *res;
    CHECK_OK(tma_partition_run(gf, gpath, &o, pdir, &res));
    tma_partition_result_destroy(res);
    tma_graph_destroy(gf);
    part_open(pdir, p);
    free(gpath);
    free(pdir);
}

/* A damaged inference file, or another shard's, is refused. */
static void check_refusals(const char *dir, const part_t *p)
{
    char *nm = tma_partition_infer_name(1), *src = tma_path_join(p->info->dir, nm), *bad = tma_path_join(dir, "bad");
    tma_graph_infer_t *f;
    CHECK_STATUS(tma_graph_infer_open(src, 0, 0, p->info->num_shards, p->info->graph_id, p->info->shard_nodes, &f),
                 TMA_ERR_MISMATCH);
    size_t len;
    char *bytes;
    CHECK_OK(tma_file_read_all(src, &bytes, &len));
    bytes[4096 + 9] ^= 0x40; /* the row pointers, the first section */
    CHECK_OK(tma_file_write_atomic(bad, bytes, len));
    CHECK_STATUS(tma_graph_infer_open(bad, 0, 1, p->info->num_shards, p->info->graph_id, p->info->shard_nodes, &f),
                 TMA_ERR_CHECKSUM);
    /* A shard's inference file is not a graph. */
    tma_graph_t *g;
    CHECK_STATUS(tma_graph_open(src, 0, &g), TMA_ERR_FORMAT);
    free(bytes);
    free(nm);
    free(src);
    free(bad);
}

int main(void)
{
    char *dir = tma_test_tmpdir("rank");
    gnn_test_graph_opts_t o;
    gnn_test_graph_defaults(&o);
    o.nodes = 500;
    o.val = 60;
    o.test = 50;
    o.negatives = 20;
    tma_graph_t *g = gnn_test_graph(&o);
    char *d1 = tma_path_join(dir, "untyped");
    CHECK_OK(tma_mkdir_p(d1));
    part_t p;
    partition(g, d1, 5, &p);
    check_files(g, &p);
    check_refusals(d1, &p);
    const struct {
        tma_gnn_encoder_t enc;
        tma_gnn_decoder_t dec;
        int layers, M;
    } untyped[] = {
        {TMA_GNN_ENCODER_GCN, TMA_GNN_DECODER_MLP, 2, 2},  {TMA_GNN_ENCODER_GCN, TMA_GNN_DECODER_MLP, 3, 3},
        {TMA_GNN_ENCODER_SAGE, TMA_GNN_DECODER_MLP, 2, 3}, {TMA_GNN_ENCODER_MLP, TMA_GNN_DECODER_MLP, 2, 2},
        {TMA_GNN_ENCODER_GAT, TMA_GNN_DECODER_DOT, 2, 2},  {TMA_GNN_ENCODER_SAGE, TMA_GNN_DECODER_DOT, 2, 4},
    };
    for (size_t i = 0; i < TMA_ARRAY_LEN(untyped); i++) {
        tma_gnn_config_t c = model(untyped[i].enc, untyped[i].dec);
        c.layers = untyped[i].layers;
        char name[64];
        snprintf(name, sizeof name, "%s+%s, %d layers", tma_gnn_encoder_name(c.encoder), tma_gnn_decoder_name(c.decoder),
                 c.layers);
        check_model(name, c, g, &p, untyped[i].M);
    }
    /* The ranks' cache of fetched rows: without one, with one of 40 rows a rank
     * (a few of the remote rows: the highest degrees) and with eval.rank_cache_mb's
     * (all of them), the same logits to the bit, and fewer rows fetched. */
    {
        tma_gnn_config_t cc = model(TMA_GNN_ENCODER_GCN, TMA_GNN_DECODER_MLP);
        cc.layers = 3;
        uint64_t h[3];
        const int64_t f0 = check_model_cache("gcn+mlp, no cache", cc, g, &p, 3, 1e-5, 0, &h[0], NULL);
        const int64_t f1 = check_model_cache("gcn+mlp, a cache of 40 rows", cc, g, &p, 3, 1e-5, 40, &h[1], NULL);
        const int64_t f2 = check_model_cache("gcn+mlp, eval.rank_cache_mb", cc, g, &p, 3, 1e-5, -1, &h[2], NULL);
        ASSERT_EQ(h[1], h[0]);
        ASSERT_EQ(h[2], h[0]);
        ASSERT_LT(f1, f0);
        ASSERT_LT(f2, f1);
    }
    /* bfloat16 tables: the same scores within bfloat16's rounding. */
    tma_gnn_config_t cb = model(TMA_GNN_ENCODER_SAGE, TMA_GNN_DECODER_MLP);
    cb.eval_table_bf16 = 1;
    check_model_tol("sage+mlp, bf16 tables", cb, g, &p, 3, 0);
    /* The single evaluator's bf16 tables: GCN (its fused layer), SAGE, GAT, MLP. */
    const tma_gnn_encoder_t single16[] = {TMA_GNN_ENCODER_GCN, TMA_GNN_ENCODER_SAGE, TMA_GNN_ENCODER_GAT,
                                          TMA_GNN_ENCODER_MLP};
    for (size_t i = 0; i < TMA_ARRAY_LEN(single16); i++) {
        tma_gnn_config_t cs = model(single16[i], TMA_GNN_DECODER_MLP);
        cs.layers = 3;
        check_single_bf16(tma_gnn_encoder_name(cs.encoder), cs, g);
    }
    tma_gnn_config_t cn = model(TMA_GNN_ENCODER_SAGE, TMA_GNN_DECODER_DOT);
    cn.eval_locality = 0; /* id order */
    check_single_bf16("sage+dot, id order", cn, g);
    part_close(&p);
    tma_graph_destroy(g);
    free(d1);

    /* Wide features (64 columns, hidden 24): GCN and SAGE project each node's
     * features once at layer 0 (gnn_layer_eval_project_first), in the single
     * evaluator and in the ranks alike, and the ranks fetch the projected rows
     * (24 columns), not the features; the logits are the same. */
    o.feature_dim = 64;
    g = gnn_test_graph(&o);
    d1 = tma_path_join(dir, "wide");
    CHECK_OK(tma_mkdir_p(d1));
    partition(g, d1, 5, &p);
    const tma_gnn_encoder_t wide[] = {TMA_GNN_ENCODER_GCN, TMA_GNN_ENCODER_SAGE};
    for (size_t i = 0; i < TMA_ARRAY_LEN(wide); i++) {
        tma_gnn_config_t cw = model(wide[i], TMA_GNN_DECODER_MLP);
        int64_t cols0 = 0;
        char name[64];
        snprintf(name, sizeof name, "%s+mlp, wide features", tma_gnn_encoder_name(cw.encoder));
        check_model_cache(name, cw, g, &p, 3, 1e-5, -1, NULL, &cols0);
        ASSERT_EQ(cols0, cw.hidden);
        cw.eval_table_bf16 = 1;
        snprintf(name, sizeof name, "%s+mlp, wide features, bf16 tables", tma_gnn_encoder_name(cw.encoder));
        check_model_cache(name, cw, g, &p, 3, 0, -1, NULL, &cols0);
        ASSERT_EQ(cols0, cw.hidden);
        check_single_bf16(name, cw, g);
    }
    /* At twice the hidden width or less, the features themselves. */
    {
        tma_gnn_config_t cw = model(TMA_GNN_ENCODER_GCN, TMA_GNN_DECODER_MLP);
        cw.hidden = 32;
        int64_t cols0 = 0;
        check_model_cache("gcn+mlp, features twice the hidden width", cw, g, &p, 2, 1e-5, -1, NULL, &cols0);
        ASSERT_EQ(cols0, 64);
    }
    part_close(&p);
    tma_graph_destroy(g);
    free(d1);

    /* Typed: RGCN with its per-type input projection, and DistMult. */
    g = gnn_test_typed_graph(400, 8, 3.0, 2, 3, 12, 40, 15, 5);
    d1 = tma_path_join(dir, "typed");
    CHECK_OK(tma_mkdir_p(d1));
    partition(g, d1, 4, &p);
    check_files(g, &p);
    check_model("rgcn+distmult", model(TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_DISTMULT), g, &p, 3);
    check_model("gcn+distmult", model(TMA_GNN_ENCODER_GCN, TMA_GNN_DECODER_DISTMULT), g, &p, 2);
    check_model("rgcn+mlp", model(TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_MLP), g, &p, 2);
    tma_gnn_config_t rb = model(TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_DISTMULT);
    rb.eval_table_bf16 = 1;
    check_model_tol("rgcn+distmult, bf16 tables", rb, g, &p, 3, 0);
    check_single_bf16("rgcn+distmult", rb, g);
    part_close(&p);
    tma_graph_destroy(g);
    free(d1);
    tma_test_cleanup_dir(dir);
    return tma_test_done();
}
