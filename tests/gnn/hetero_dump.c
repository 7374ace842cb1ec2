/*
 * hetero_dump.c: runs the heterogeneous layers on one backend on random
 * inputs and writes the inputs and every result for hetero_torch.py, the
 * PyTorch oracle of test_hetero_parity.sh:
 *   - an RGCN layer with basis decomposition (gnn_rgcn_forward and
 *     gnn_rgcn_backward, the mean weights from gnn_rgcn_norm) against an
 *     upstream gradient dZ, its backward once by scatter and once through
 *     the transposed block;
 *   - DistMult scores and their backward against an upstream gradient;
 *   - the per-node-type input projection, forward and backward.
 * Files are raw little-endian arrays (NAME.f32, NAME.i32, NAME.i64) and
 * meta.json with the sizes.  Exits 77 when BACKEND is not built in or has
 * no device (cuda on a machine without a GPU).
 *
 *   hetero_dump OUTDIR BACKEND SEED
 */
#include "tma_test.h"
#include "gnn_int.h"
#include "gnn_testutil.h"

#include <string.h>

static const char *outdir;
static tma_rng_t rng;
static tma_gnn_backend_t *B;

static void dump(const char *name, const void *data, size_t bytes) { gnn_test_dump(outdir, name, data, bytes); }

/* Writes a backend tensor as NAME.f32 / .i32 / .i64. */
static void put(const char *name, const tensor_t *t)
{
    static const char *const ext[] = {[TMA_GNN_F32] = "f32", [TMA_GNN_I32] = "i32", [TMA_GNN_I64] = "i64"};
    size_t bytes = (size_t)tma_gnn_tensor_numel(t) * tma_gnn_dtype_size(t->dtype);
    void *h = malloc(bytes ? bytes : 1);
    if (bytes)
        CHECK_OK(tma_gnn_tensor_download(t, h));
    char file[128];
    snprintf(file, sizeof file, "%s.%s", name, ext[t->dtype]);
    dump(file, h, bytes);
    free(h);
}

static tensor_t mk(tma_gnn_dtype_t dt, int64_t rows, int64_t cols, const void *host)
{
    tensor_t t;
    const int64_t n = rows * cols;
    CHECK_OK(tma_gnn_tensor_alloc(B, dt, n > 0 ? n : 1, &t));
    t = tma_gnn_tensor_shape(&t, rows, cols);
    if (host && n > 0)
        CHECK_OK(tma_gnn_tensor_upload(&t, host));
    return t;
}

static tensor_t rnd(int64_t rows, int64_t cols)
{
    const int64_t n = rows * cols;
    float *h = malloc((size_t)(n > 0 ? n : 1) * 4);
    for (int64_t i = 0; i < rows * cols; i++)
        h[i] = (float)(2.0 * tma_rng_uniform(&rng) - 1.0);
    tensor_t t = mk(TMA_GNN_F32, rows, cols, h);
    free(h);
    return t;
}

static void drop(tensor_t *t)
{
    t->capacity = t->capacity ? t->capacity : 1;
    tma_gnn_tensor_free(t);
}

static void rgcn_case(cJSON *meta)
{
    const int64_t nd = 40 + (int64_t)tma_rng_below(&rng, 20), ns = nd + 60, in = 12, out = 9;
    const int64_t nb = 1 + (int64_t)tma_rng_below(&rng, 4), nr = 2 + (int64_t)tma_rng_below(&rng, 5);
    int32_t *ip = malloc((size_t)(nd + 1) * 4), *ix = malloc((size_t)(nd * 12) * 4), *rel = malloc((size_t)(nd * 12) * 4);
    int64_t ne = 0;
    ip[0] = 0;
    for (int64_t i = 0; i < nd; i++) {
        /* Some rows without neighbours; a few sources repeat within a row. */
        int64_t k = (int64_t)tma_rng_below(&rng, 12);
        for (int64_t q = 0; q < k; q++) {
            ix[ne] = (int32_t)tma_rng_below(&rng, (uint64_t)ns);
            rel[ne++] = (int32_t)tma_rng_below(&rng, (uint64_t)nr);
        }
        ip[i + 1] = (int32_t)ne;
    }
    float *w = malloc((size_t)(ne ? ne : 1) * 4), *tw = malloc((size_t)(ne ? ne : 1) * 4);
    int32_t *cnt = malloc((size_t)nr * 4), *tp = malloc((size_t)(ns + 1) * 4);
    int32_t *ti = malloc((size_t)(ne ? ne : 1) * 4), *trel = malloc((size_t)(ne ? ne : 1) * 4);
    CHECK_OK(gnn_rgcn_norm(nd, ip, rel, (int)nr, cnt, w));
    gnn_test_transpose(nd, ns, ip, ix, w, rel, tp, ti, tw, trel);
    tensor_t tip = mk(TMA_GNN_I32, nd + 1, 1, ip), tix = mk(TMA_GNN_I32, ne, 1, ix), trl = mk(TMA_GNN_I32, ne, 1, rel);
    tensor_t tww = mk(TMA_GNN_F32, ne, 1, w), ttp = mk(TMA_GNN_I32, ns + 1, 1, tp), tti = mk(TMA_GNN_I32, ne, 1, ti);
    tensor_t ttw = mk(TMA_GNN_F32, ne, 1, tw), ttr = mk(TMA_GNN_I32, ne, 1, trel);
    tensor_t H = rnd(ns, in), dZ = rnd(nd, out);
    gnn_rgcn_params_t P = {rnd(in, nb * out), rnd(nr, nb), rnd(in, out), rnd(1, out)};
    gnn_rgcn_params_t G = {mk(TMA_GNN_F32, in, nb * out, NULL), mk(TMA_GNN_F32, nr, nb, NULL),
                           mk(TMA_GNN_F32, in, out, NULL), mk(TMA_GNN_F32, 1, out, NULL)};
    tensor_t T = mk(TMA_GNN_F32, ns, nb * out, NULL), dT = mk(TMA_GNN_F32, ns, nb * out, NULL);
    tensor_t Z = mk(TMA_GNN_F32, nd, out, NULL), dH = mk(TMA_GNN_F32, ns, in, NULL);
    put("rgcn_indptr", &tip);
    put("rgcn_indices", &tix);
    put("rgcn_rel", &trl);
    put("rgcn_H", &H);
    put("rgcn_V", &P.V);
    put("rgcn_coef", &P.coef);
    put("rgcn_W_self", &P.W_self);
    put("rgcn_b", &P.b);
    put("rgcn_dZ", &dZ);
    for (int tr = 0; tr < 2; tr++) {
        tma_gnn_block_t blk = {nd, ns, ne, tip, tix, tww, tr, ttp, tti, ttw};
        char name[64];
        CHECK_OK(gnn_rgcn_forward(&P, &blk, &trl, &H, &T, &Z));
        CHECK_OK(gnn_rgcn_backward(&P, &blk, &trl, &ttr, &H, &T, &dZ, &dT, &G, &dH));
        const char *pre = tr ? "rgcn_t" : "rgcn_s";
        const struct {
            const char *what;
            const tensor_t *t;
        } outs[] = {{"Z", &Z}, {"dH", &dH}, {"dV", &G.V}, {"dcoef", &G.coef}, {"dW_self", &G.W_self}, {"db", &G.b}};
        for (size_t k = 0; k < TMA_ARRAY_LEN(outs); k++) {
            snprintf(name, sizeof name, "%s_%s", pre, outs[k].what);
            put(name, outs[k].t);
        }
    }
    cJSON *m = cJSON_AddObjectToObject(meta, "rgcn");
    cJSON_AddNumberToObject(m, "num_dst", (double)nd);
    cJSON_AddNumberToObject(m, "num_src", (double)ns);
    cJSON_AddNumberToObject(m, "num_edges", (double)ne);
    cJSON_AddNumberToObject(m, "in", (double)in);
    cJSON_AddNumberToObject(m, "out", (double)out);
    cJSON_AddNumberToObject(m, "bases", (double)nb);
    cJSON_AddNumberToObject(m, "relations", (double)nr);
    tensor_t *all[] = {&tip, &tix, &trl, &tww, &ttp, &tti, &ttw, &ttr, &H, &dZ, &P.V, &P.coef, &P.W_self, &P.b,
                       &G.V, &G.coef, &G.W_self, &G.b, &T, &dT, &Z, &dH};
    for (size_t k = 0; k < TMA_ARRAY_LEN(all); k++)
        drop(all[k]);
    free(ip);
    free(ix);
    free(rel);
    free(w);
    free(tw);
    free(cnt);
    free(tp);
    free(ti);
    free(trel);
}

static void distmult_case(cJSON *meta)
{
    const int64_t n = 50, d = 16, np = 120, nr = 5;
    int32_t hi[120], ti[120], rel[120];
    for (int64_t p = 0; p < np; p++) {
        hi[p] = (int32_t)tma_rng_below(&rng, n);
        ti[p] = p % 7 == 0 ? hi[p] : (int32_t)tma_rng_below(&rng, n);
        rel[p] = (int32_t)tma_rng_below(&rng, nr);
    }
    tensor_t thi = mk(TMA_GNN_I32, np, 1, hi), tti = mk(TMA_GNN_I32, np, 1, ti), trl = mk(TMA_GNN_I32, np, 1, rel);
    tensor_t H = rnd(n, d), Wr = rnd(nr, d), ds = rnd(np, 1), S = mk(TMA_GNN_F32, np, 1, NULL);
    tensor_t dH = mk(TMA_GNN_F32, n, d, NULL), dWr = mk(TMA_GNN_F32, nr, d, NULL);
    CHECK_OK(tma_gnn_op_distmult(&H, &thi, &tti, &trl, &Wr, &S));
    CHECK_OK(tma_gnn_op_distmult_bwd(&ds, &H, &thi, &tti, &trl, &Wr, &dH, &dWr));
    put("dm_head", &thi);
    put("dm_tail", &tti);
    put("dm_rel", &trl);
    put("dm_H", &H);
    put("dm_Wr", &Wr);
    put("dm_dscore", &ds);
    put("dm_score", &S);
    put("dm_dH", &dH);
    put("dm_dWr", &dWr);
    cJSON *m = cJSON_AddObjectToObject(meta, "distmult");
    cJSON_AddNumberToObject(m, "nodes", (double)n);
    cJSON_AddNumberToObject(m, "dim", (double)d);
    cJSON_AddNumberToObject(m, "pairs", (double)np);
    cJSON_AddNumberToObject(m, "relations", (double)nr);
    tensor_t *all[] = {&thi, &tti, &trl, &H, &Wr, &ds, &S, &dH, &dWr};
    for (size_t k = 0; k < TMA_ARRAY_LEN(all); k++)
        drop(all[k]);
}

#define NT 3

static void typeproj_case(cJSON *meta)
{
    const int64_t n = 70, d = 10, N = 30, dims[NT] = {6, 13, 3};
    float *X[NT];
    tma_gnn_feat_t *feats[NT];
    tensor_t W[NT], b[NT], dW[NT], db[NT];
    char name[64];
    for (int t = 0; t < NT; t++) {
        X[t] = malloc((size_t)(N * dims[t]) * 4);
        for (int64_t i = 0; i < N * dims[t]; i++)
            X[t][i] = (float)(2.0 * tma_rng_uniform(&rng) - 1.0);
        CHECK_OK(tma_gnn_feat_create(B, X[t], TMA_FEAT_F32, N, dims[t], TMA_GNN_FEAT_DENSE, &feats[t]));
        W[t] = rnd(dims[t], d);
        b[t] = rnd(1, d);
        dW[t] = mk(TMA_GNN_F32, dims[t], d, NULL);
        db[t] = mk(TMA_GNN_F32, 1, d, NULL);
        snprintf(name, sizeof name, "tp_X%d.f32", t);
        dump(name, X[t], (size_t)(N * dims[t]) * 4);
    }
    int32_t types[70], order[70];
    int64_t local[70], sorted[70], offsets[NT + 1];
    for (int64_t i = 0; i < n; i++) {
        types[i] = (int32_t)tma_rng_below(&rng, NT);
        local[i] = (int64_t)tma_rng_below(&rng, N);
    }
    CHECK_OK(gnn_type_partition(types, n, NT, order, offsets));
    for (int64_t k = 0; k < n; k++)
        sorted[k] = local[order[k]];
    tensor_t tord = mk(TMA_GNN_I32, n, 1, order), tids = mk(TMA_GNN_I64, n, 1, sorted);
    tensor_t S = mk(TMA_GNN_F32, n, d, NULL), out = mk(TMA_GNN_F32, n, d, NULL), dS = mk(TMA_GNN_F32, n, d, NULL);
    tensor_t dOut = rnd(n, d);
    gnn_type_proj_t tp = {NT, feats, offsets, &tord, &tids};
    CHECK_OK(gnn_type_project_forward(&tp, W, b, &S, &out));
    CHECK_OK(gnn_type_project_backward(&tp, &dOut, &dS, dW, db));
    dump("tp_types.i32", types, sizeof types);
    dump("tp_local.i64", local, sizeof local);
    put("tp_out", &out);
    put("tp_dOut", &dOut);
    for (int t = 0; t < NT; t++) {
        snprintf(name, sizeof name, "tp_W%d", t);
        put(name, &W[t]);
        snprintf(name, sizeof name, "tp_b%d", t);
        put(name, &b[t]);
        snprintf(name, sizeof name, "tp_dW%d", t);
        put(name, &dW[t]);
        snprintf(name, sizeof name, "tp_db%d", t);
        put(name, &db[t]);
    }
    cJSON *m = cJSON_AddObjectToObject(meta, "typeproj");
    cJSON_AddNumberToObject(m, "n", (double)n);
    cJSON_AddNumberToObject(m, "dim", (double)d);
    cJSON_AddNumberToObject(m, "rows_per_type", (double)N);
    cJSON *jd = cJSON_AddArrayToObject(m, "type_dims");
    for (int t = 0; t < NT; t++)
        cJSON_AddItemToArray(jd, cJSON_CreateNumber((double)dims[t]));
    for (int t = 0; t < NT; t++) {
        drop(&W[t]);
        drop(&b[t]);
        drop(&dW[t]);
        drop(&db[t]);
        tma_gnn_feat_destroy(B, feats[t]);
        free(X[t]);
    }
    tensor_t *all[] = {&tord, &tids, &S, &out, &dS, &dOut};
    for (size_t k = 0; k < TMA_ARRAY_LEN(all); k++)
        drop(all[k]);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: hetero_dump OUTDIR BACKEND SEED\n");
        return 2;
    }
    outdir = argv[1];
    tma_log_set_level(TMA_LOG_WARN);
    tma_rng_seed(&rng, (uint64_t)atoll(argv[3]), 0);
    tma_status_t st = tma_gnn_backend_create(argv[2], 2, &B);
    if (st == TMA_ERR_UNSUPPORTED || st == TMA_ERR_NO_DEVICE)
        tma_test_skip("the requested backend is not in this build or has no device here");
    CHECK_OK(st);
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "backend", argv[2]);
    rgcn_case(meta);
    distmult_case(meta);
    typeproj_case(meta);
    gnn_test_dump_json(outdir, "meta.json", meta);
    cJSON_Delete(meta);
    tma_gnn_backend_destroy(B);
    return tma_test_done();
}
