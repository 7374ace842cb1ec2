/*
 * test_gradcheck.c: finite-difference gradient checks.
 *
 * Per layer (Linear, GCN/SAGE aggregation, feature projection on dense and
 * sparse features, LayerNorm, PReLU, the two fused, the decoder's pair
 * product, BCE with logits): the loss L = sum(R * layer(x)) (or the BCE itself) is written
 * here in float64; its central differences must match the gradients the
 * backend's backward ops compute.  Then the whole model (each encoder):
 * the trainer's gradient block against central differences of the
 * trainer's own loss on a fixed batch (reference backend, double sums),
 * GAT included (its softmax, LeakyReLU and scores).
 */
#include "tma_test.h"
#include "gnn_int.h"
#include "gnn_testutil.h"

#include <math.h>
#include <string.h>

static tma_rng_t rng;
static tma_gnn_backend_t *B;

/* A float32 tensor on the backend plus a float64 copy for the reference forward. */
typedef struct var {
    tensor_t t;
    float *f;
    double *d;
    int64_t n;
} var_t;

static var_t var_new(int64_t rows, int64_t cols, double lo, double hi, double avoid)
{
    var_t v;
    v.n = rows * cols;
    v.f = malloc((size_t)(v.n ? v.n : 1) * 4);
    v.d = malloc((size_t)(v.n ? v.n : 1) * 8);
    for (int64_t i = 0; i < v.n; i++) {
        double x;
        do
            x = lo + (hi - lo) * tma_rng_uniform(&rng);
        while (fabs(x) < avoid);
        v.f[i] = (float)x;
        v.d[i] = (double)v.f[i];
    }
    CHECK_OK(tma_gnn_tensor_alloc(B, TMA_GNN_F32, v.n ? v.n : 1, &v.t));
    v.t = tma_gnn_tensor_shape(&v.t, rows, cols);
    CHECK_OK(tma_gnn_tensor_upload(&v.t, v.f));
    return v;
}

static var_t var_out(int64_t rows, int64_t cols) { return var_new(rows, cols, 0, 0, 0); }

static float *var_get(var_t *v)
{
    CHECK_OK(tma_gnn_tensor_download(&v->t, v->f));
    return v->f;
}

static void var_free(var_t *v)
{
    tma_gnn_tensor_free(&v->t);
    free(v->f);
    free(v->d);
}

typedef double (*loss_fn)(void *ctx);

/* Compares `analytic` (float32, from the backend) with central differences of f in x. */
static void fd_check(const char *what, double *x, int64_t n, const float *analytic, loss_fn f, void *ctx)
{
    double gmax = 1e-12, err = 0;
    int64_t worst = -1;
    for (int64_t i = 0; i < n; i++)
        gmax = fmax(gmax, fabs(analytic[i]));
    int64_t stride = n > 300 ? n / 300 : 1;
    for (int64_t i = 0; i < n; i += stride) {
        double old = x[i], h = 1e-6 * fmax(1.0, fabs(old));
        x[i] = old + h;
        double fp = f(ctx);
        x[i] = old - h;
        double fm = f(ctx);
        x[i] = old;
        double num = (fp - fm) / (2 * h);
        double e = fabs(num - analytic[i]) / gmax;
        if (e > err) {
            err = e;
            worst = i;
        }
    }
    CHECK_MSG(err < 1e-4, "%s: gradient differs from finite differences by %.3g (relative to max %.3g) at %lld",
              what, err, gmax, (long long)worst);
}

/* ------------------------------------------------------------------ Linear */

typedef struct lin_ctx {
    var_t *X, *W, *b, *R;
    int64_t n, k, m;
} lin_ctx_t;

static double lin_loss(void *c)
{
    lin_ctx_t *l = c;
    double s = 0;
    for (int64_t i = 0; i < l->n; i++)
        for (int64_t j = 0; j < l->m; j++) {
            double y = l->b->d[j];
            for (int64_t q = 0; q < l->k; q++)
                y += l->X->d[i * l->k + q] * l->W->d[q * l->m + j];
            s += l->R->d[i * l->m + j] * y;
        }
    return s;
}

static void check_linear(void)
{
    const int64_t n = 9, k = 7, m = 5;
    var_t X = var_new(n, k, -1, 1, 0), W = var_new(k, m, -1, 1, 0), b = var_new(1, m, -1, 1, 0);
    var_t R = var_new(n, m, -1, 1, 0), dW = var_out(k, m), db = var_out(1, m), dX = var_out(n, k);
    var_t Y = var_out(n, m);
    CHECK_OK(tma_gnn_op_matmul(&X.t, 0, &W.t, 0, 1, 0, &Y.t));
    CHECK_OK(tma_gnn_op_add_bias(&Y.t, &b.t));
    lin_ctx_t c = {&X, &W, &b, &R, n, k, m};
    /* forward agrees with the float64 definition */
    double ls = 0;
    var_get(&Y);
    for (int64_t i = 0; i < n * m; i++)
        ls += R.d[i] * Y.f[i];
    CHECK_NEAR(ls, lin_loss(&c), 1e-5 * fabs(lin_loss(&c)) + 1e-6);
    CHECK_OK(tma_gnn_op_matmul(&X.t, 1, &R.t, 0, 1, 0, &dW.t));
    CHECK_OK(tma_gnn_op_colsum(&R.t, &db.t));
    CHECK_OK(tma_gnn_op_matmul(&R.t, 0, &W.t, 1, 1, 0, &dX.t));
    fd_check("linear dW", W.d, W.n, var_get(&dW), lin_loss, &c);
    fd_check("linear db", b.d, b.n, var_get(&db), lin_loss, &c);
    fd_check("linear dX", X.d, X.n, var_get(&dX), lin_loss, &c);
    var_t *all[] = {&X, &W, &b, &R, &dW, &db, &dX, &Y};
    for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
        var_free(all[i]);
}

/* ------------------------------------------------------------------ aggregation */

typedef struct agg_ctx {
    var_t *X, *R;
    const int32_t *ip, *ix;
    const float *w;
    int64_t nd, d;
} agg_ctx_t;

static double agg_loss(void *c)
{
    agg_ctx_t *a = c;
    double s = 0;
    for (int64_t i = 0; i < a->nd; i++)
        for (int64_t j = 0; j < a->d; j++) {
            double y = 0;
            for (int32_t e = a->ip[i]; e < a->ip[i + 1]; e++)
                y += (double)a->w[e] * a->X->d[a->ix[e] * a->d + j];
            s += a->R->d[i * a->d + j] * y;
        }
    return s;
}

static void check_aggregation(void)
{
    /* A GCN-like block with self-loops and a SAGE-like one without; sources > destinations. */
    for (int gcn = 0; gcn < 2; gcn++) {
        const int64_t nd = 8, ns = 20, d = 6;
        int32_t ip[9], ix[64];
        float w[64];
        int64_t e = 0;
        ip[0] = 0;
        for (int64_t i = 0; i < nd; i++) {
            if (gcn) {
                ix[e] = (int32_t)i;
                w[e++] = 0.3f;
            }
            int64_t k = (int64_t)tma_rng_below(&rng, 5);
            for (int64_t q = 0; q < k; q++) {
                ix[e] = (int32_t)tma_rng_below(&rng, ns);
                w[e++] = gcn ? (float)tma_rng_uniform(&rng) : 1.0f / (float)k;
            }
            ip[i + 1] = (int32_t)e;
        }
        tensor_t tip, tix, tw;
        CHECK_OK(tma_gnn_tensor_alloc(B, TMA_GNN_I32, nd + 1, &tip));
        CHECK_OK(tma_gnn_tensor_alloc(B, TMA_GNN_I32, e, &tix));
        CHECK_OK(tma_gnn_tensor_alloc(B, TMA_GNN_F32, e, &tw));
        CHECK_OK(tma_gnn_tensor_upload(&tip, ip));
        CHECK_OK(tma_gnn_tensor_upload(&tix, ix));
        CHECK_OK(tma_gnn_tensor_upload(&tw, w));
        tma_gnn_block_t blk = {nd, ns, e, tip, tix, tw, 0, {0}, {0}, {0}};
        var_t X = var_new(ns, d, -1, 1, 0), R = var_new(nd, d, -1, 1, 0), dX = var_out(ns, d), Y = var_out(nd, d);
        agg_ctx_t c = {&X, &R, ip, ix, w, nd, d};
        CHECK_OK(tma_gnn_op_spmm(&blk, &X.t, &Y.t));
        var_get(&Y);
        double ls = 0;
        for (int64_t i = 0; i < nd * d; i++)
            ls += R.d[i] * Y.f[i];
        CHECK_NEAR(ls, agg_loss(&c), 1e-5 * fabs(ls) + 1e-6);
        CHECK_OK(tma_gnn_op_spmm_t(&blk, &R.t, &dX.t));
        fd_check(gcn ? "GCN aggregation dX" : "SAGE mean aggregation dX", X.d, X.n, var_get(&dX), agg_loss, &c);
        var_t *all[] = {&X, &R, &dX, &Y};
        for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
            var_free(all[i]);
        tma_gnn_tensor_free(&tip);
        tma_gnn_tensor_free(&tix);
        tma_gnn_tensor_free(&tw);
    }
}

/* ------------------------------------------------------------------ RGCN (bases) */

typedef struct rgcn_ctx {
    var_t *H, *V, *A, *Ws, *b, *R;
    const int32_t *ip, *ix, *rel;
    const float *w;
    int64_t nd, in, out, nb;
} rgcn_ctx_t;

/* The definition, in float64: W_r = sum_b a[r, b] V_b formed explicitly,
 * z_v = h_v W_self + sum_e w[e] h_src(e) W_rel(e) + b. */
static double rgcn_loss(void *c)
{
    rgcn_ctx_t *g = c;
    double s = 0;
    for (int64_t i = 0; i < g->nd; i++)
        for (int64_t j = 0; j < g->out; j++) {
            double z = g->b->d[j];
            for (int64_t k = 0; k < g->in; k++)
                z += g->H->d[i * g->in + k] * g->Ws->d[k * g->out + j];
            for (int32_t e = g->ip[i]; e < g->ip[i + 1]; e++)
                for (int64_t k = 0; k < g->in; k++) {
                    double wr = 0;
                    for (int64_t q = 0; q < g->nb; q++)
                        wr += g->A->d[g->rel[e] * g->nb + q] * g->V->d[k * g->nb * g->out + q * g->out + j];
                    z += (double)g->w[e] * g->H->d[g->ix[e] * g->in + k] * wr;
                }
            s += g->R->d[i * g->out + j] * z;
        }
    return s;
}

static tensor_t upload_i32(const int32_t *x, int64_t n)
{
    tensor_t t;
    CHECK_OK(tma_gnn_tensor_alloc(B, TMA_GNN_I32, n ? n : 1, &t));
    t = tma_gnn_tensor_shape(&t, n, 1);
    if (n)
        CHECK_OK(tma_gnn_tensor_upload(&t, x));
    return t;
}

static tensor_t upload_f32(const float *x, int64_t n)
{
    tensor_t t;
    CHECK_OK(tma_gnn_tensor_alloc(B, TMA_GNN_F32, n ? n : 1, &t));
    t = tma_gnn_tensor_shape(&t, n, 1);
    if (n)
        CHECK_OK(tma_gnn_tensor_upload(&t, x));
    return t;
}

static void free_tensor(tensor_t *t)
{
    t->capacity = t->capacity ? t->capacity : 1;
    tma_gnn_tensor_free(t);
}

/* An RGCN layer through gnn_rgcn_forward/backward (the gradients of H, the
 * bases, the coefficients, the self weight and the bias), with the mean
 * weights of gnn_rgcn_norm, with and without the transposed block. */
static void check_rgcn(void)
{
    const int64_t nd = 7, ns = 16, in = 5, out = 4, nb = 3;
    const int nr = 4;
    int32_t ip[8], ix[64], rel[64], cnt[4], tp[17], ti[64], trel[64];
    float w[64], tw[64];
    int64_t ne = 0;
    ip[0] = 0;
    for (int64_t i = 0; i < nd; i++) {
        int64_t k = (int64_t)tma_rng_below(&rng, 7);
        for (int64_t q = 0; q < k; q++) {
            ix[ne] = (int32_t)tma_rng_below(&rng, ns);
            rel[ne++] = (int32_t)tma_rng_below(&rng, nr);
        }
        ip[i + 1] = (int32_t)ne;
    }
    CHECK_OK(gnn_rgcn_norm(nd, ip, rel, nr, cnt, w));
    gnn_test_transpose(nd, ns, ip, ix, w, rel, tp, ti, tw, trel);
    /* The mean: a row's weights of one relation sum to 1. */
    for (int64_t i = 0; i < nd; i++)
        for (int r = 0; r < nr; r++) {
            double sw = 0;
            int any = 0;
            for (int32_t e = ip[i]; e < ip[i + 1]; e++)
                if (rel[e] == r) {
                    sw += w[e];
                    any = 1;
                }
            if (any)
                CHECK_NEAR(sw, 1.0, 1e-6);
        }
    tensor_t tip = upload_i32(ip, nd + 1), tix = upload_i32(ix, ne), trl = upload_i32(rel, ne);
    tensor_t ttp = upload_i32(tp, ns + 1), tti = upload_i32(ti, ne), ttr = upload_i32(trel, ne);
    tensor_t tww = upload_f32(w, ne), ttw = upload_f32(tw, ne);
    for (int tr = 0; tr < 2; tr++) {
        tma_gnn_block_t blk = {nd, ns, ne, tip, tix, tww, tr, ttp, tti, ttw};
        var_t H = var_new(ns, in, -1, 1, 0), V = var_new(in, nb * out, -1, 1, 0), A = var_new(nr, nb, -1, 1, 0);
        var_t Ws = var_new(in, out, -1, 1, 0), b = var_new(1, out, -1, 1, 0), R = var_new(nd, out, -1, 1, 0);
        var_t T = var_out(ns, nb * out), dT = var_out(ns, nb * out), Z = var_out(nd, out), dH = var_out(ns, in);
        var_t dV = var_out(in, nb * out), dA = var_out(nr, nb), dWs = var_out(in, out), db = var_out(1, out);
        gnn_rgcn_params_t P = {V.t, A.t, Ws.t, b.t}, G = {dV.t, dA.t, dWs.t, db.t};
        rgcn_ctx_t c = {&H, &V, &A, &Ws, &b, &R, ip, ix, rel, w, nd, in, out, nb};
        CHECK_OK(gnn_rgcn_forward(&P, &blk, &trl, &H.t, &T.t, &Z.t));
        var_get(&Z);
        double ls = 0;
        for (int64_t i = 0; i < nd * out; i++)
            ls += R.d[i] * Z.f[i];
        CHECK_NEAR(ls, rgcn_loss(&c), 1e-5 * fabs(ls) + 1e-6);
        CHECK_OK(gnn_rgcn_backward(&P, &blk, &trl, &ttr, &H.t, &T.t, &R.t, &dT.t, &G, &dH.t));
        fd_check("rgcn dH", H.d, H.n, var_get(&dH), rgcn_loss, &c);
        fd_check("rgcn dV (bases)", V.d, V.n, var_get(&dV), rgcn_loss, &c);
        fd_check("rgcn dcoef", A.d, A.n, var_get(&dA), rgcn_loss, &c);
        fd_check("rgcn dW_self", Ws.d, Ws.n, var_get(&dWs), rgcn_loss, &c);
        fd_check("rgcn db", b.d, b.n, var_get(&db), rgcn_loss, &c);
        var_t *all[] = {&H, &V, &A, &Ws, &b, &R, &T, &dT, &Z, &dH, &dV, &dA, &dWs, &db};
        for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
            var_free(all[i]);
    }
    tensor_t *ts[] = {&tip, &tix, &trl, &ttp, &tti, &ttr, &tww, &ttw};
    for (size_t i = 0; i < TMA_ARRAY_LEN(ts); i++)
        free_tensor(ts[i]);
    /* A relation out of range is refused. */
    rel[0] = nr;
    if (ne)
        CHECK_STATUS(gnn_rgcn_norm(nd, ip, rel, nr, cnt, w), TMA_ERR_INVALID);
}

/* ------------------------------------------------------------------ DistMult */

typedef struct dm_ctx {
    var_t *H, *Wr, *R;
    const int32_t *hi, *ti, *rel;
    int64_t np, d;
} dm_ctx_t;

static double dm_loss(void *c)
{
    dm_ctx_t *m = c;
    double s = 0;
    for (int64_t p = 0; p < m->np; p++) {
        double sc = 0;
        for (int64_t j = 0; j < m->d; j++)
            sc += m->H->d[m->hi[p] * m->d + j] * (m->Wr ? m->Wr->d[m->rel[p] * m->d + j] : 1.0) *
                  m->H->d[m->ti[p] * m->d + j];
        s += m->R->d[p] * sc;
    }
    return s;
}

static void check_distmult(void)
{
    const int64_t n = 9, d = 6, np = 14, nr = 3;
    int32_t hi[14], ti[14], rel[14];
    for (int64_t p = 0; p < np; p++) {
        hi[p] = (int32_t)tma_rng_below(&rng, n);
        ti[p] = p % 4 == 0 ? hi[p] : (int32_t)tma_rng_below(&rng, n);
        rel[p] = (int32_t)tma_rng_below(&rng, nr);
    }
    tensor_t thi = upload_i32(hi, np), tti = upload_i32(ti, np), trl = upload_i32(rel, np);
    var_t H = var_new(n, d, -1, 1, 0), Wr = var_new(nr, d, -1, 1, 0), R = var_new(np, 1, -1, 1, 0);
    var_t S = var_out(np, 1), dH = var_out(n, d), dWr = var_out(nr, d);
    dm_ctx_t c = {&H, &Wr, &R, hi, ti, rel, np, d};
    CHECK_OK(tma_gnn_op_distmult(&H.t, &thi, &tti, &trl, &Wr.t, &S.t));
    var_get(&S);
    double ls = 0;
    for (int64_t p = 0; p < np; p++)
        ls += R.d[p] * S.f[p];
    CHECK_NEAR(ls, dm_loss(&c), 1e-5 * fabs(ls) + 1e-6);
    CHECK_OK(tma_gnn_op_distmult_bwd(&R.t, &H.t, &thi, &tti, &trl, &Wr.t, &dH.t, &dWr.t));
    fd_check("distmult dH", H.d, H.n, var_get(&dH), dm_loss, &c);
    fd_check("distmult dWr", Wr.d, Wr.n, var_get(&dWr), dm_loss, &c);
    var_t *all[] = {&H, &Wr, &R, &S, &dH, &dWr};
    for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
        var_free(all[i]);
    free_tensor(&thi);
    free_tensor(&tti);
    free_tensor(&trl);
}

/* The dot decoder's op: DistMult with rel and Wr NULL (every diagonal ones). */
static void check_dot(void)
{
    const int64_t n = 9, d = 6, np = 14;
    int32_t hi[14], ti[14];
    for (int64_t p = 0; p < np; p++) {
        hi[p] = (int32_t)tma_rng_below(&rng, n);
        ti[p] = p % 4 == 0 ? hi[p] : (int32_t)tma_rng_below(&rng, n);
    }
    tensor_t thi = upload_i32(hi, np), tti = upload_i32(ti, np);
    var_t H = var_new(n, d, -1, 1, 0), R = var_new(np, 1, -1, 1, 0), S = var_out(np, 1), dH = var_out(n, d);
    dm_ctx_t c = {&H, NULL, &R, hi, ti, NULL, np, d};
    CHECK_OK(tma_gnn_op_distmult(&H.t, &thi, &tti, NULL, NULL, &S.t));
    var_get(&S);
    double ls = 0;
    for (int64_t p = 0; p < np; p++)
        ls += R.d[p] * S.f[p];
    CHECK_NEAR(ls, dm_loss(&c), 1e-5 * fabs(ls) + 1e-6);
    CHECK_OK(tma_gnn_op_distmult_bwd(&R.t, &H.t, &thi, &tti, NULL, NULL, &dH.t, NULL));
    fd_check("dot dH", H.d, H.n, var_get(&dH), dm_loss, &c);
    var_t *all[] = {&H, &R, &S, &dH};
    for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
        var_free(all[i]);
    free_tensor(&thi);
    free_tensor(&tti);
}

/* ------------------------------------------------------------------ per-type input projection */

#define NTYPES 3

typedef struct tp_ctx {
    const float *X[NTYPES];
    const int32_t *types;
    const int64_t *local;
    int64_t dims[NTYPES];
    var_t *W[NTYPES], *b[NTYPES], *R;
    int64_t n, d;
} tp_ctx_t;

static double tp_loss(void *c)
{
    tp_ctx_t *g = c;
    double s = 0;
    for (int64_t i = 0; i < g->n; i++) {
        int t = g->types[i];
        for (int64_t j = 0; j < g->d; j++) {
            double y = g->b[t]->d[j];
            for (int64_t k = 0; k < g->dims[t]; k++)
                y += (double)g->X[t][g->local[i] * g->dims[t] + k] * g->W[t]->d[k * g->d + j];
            s += g->R->d[i * g->d + j] * y;
        }
    }
    return s;
}

/* Three node types of widths 4, 7 and 1 (the last absent from the batch:
 * its gradients must be zero), through gnn_type_project_*; the output's
 * rows must come back in the batch's order. */
static void check_type_projection(void)
{
    const int64_t n = 11, d = 5, N = 8, dims[NTYPES] = {4, 7, 1};
    tp_ctx_t c = {.n = n, .d = d};
    tma_gnn_feat_t *feats[NTYPES];
    float *X[NTYPES];
    var_t W[NTYPES], b[NTYPES], dW[NTYPES], db[NTYPES];
    tensor_t Wt[NTYPES], bt[NTYPES], dWt[NTYPES], dbt[NTYPES];
    for (int t = 0; t < NTYPES; t++) {
        X[t] = malloc((size_t)(N * dims[t]) * 4);
        for (int64_t i = 0; i < N * dims[t]; i++)
            X[t][i] = (float)(2 * tma_rng_uniform(&rng) - 1);
        CHECK_OK(tma_gnn_feat_create(B, X[t], TMA_FEAT_F32, N, dims[t], TMA_GNN_FEAT_DENSE, &feats[t]));
        W[t] = var_new(dims[t], d, -1, 1, 0);
        b[t] = var_new(1, d, -1, 1, 0);
        dW[t] = var_new(dims[t], d, 7, 7, 0); /* poisoned: must be overwritten */
        db[t] = var_new(1, d, 7, 7, 0);
        Wt[t] = W[t].t;
        bt[t] = b[t].t;
        dWt[t] = dW[t].t;
        dbt[t] = db[t].t;
        c.X[t] = X[t];
        c.dims[t] = dims[t];
        c.W[t] = &W[t];
        c.b[t] = &b[t];
    }
    int32_t types[11], order[11];
    int64_t local[11], offsets[NTYPES + 1], sorted_ids[11];
    for (int64_t i = 0; i < n; i++) {
        types[i] = (int32_t)tma_rng_below(&rng, 2);
        local[i] = (int64_t)tma_rng_below(&rng, N);
    }
    CHECK_OK(gnn_type_partition(types, n, NTYPES, order, offsets));
    ASSERT_EQ(offsets[NTYPES], n);
    ASSERT_EQ(offsets[2], offsets[3]);
    for (int64_t k = 0; k < n; k++)
        sorted_ids[k] = local[order[k]];
    c.types = types;
    c.local = local;
    tensor_t tord = upload_i32(order, n), tids;
    CHECK_OK(tma_gnn_tensor_alloc(B, TMA_GNN_I64, n, &tids));
    CHECK_OK(tma_gnn_tensor_upload(&tids, sorted_ids));
    var_t R = var_new(n, d, -1, 1, 0), S = var_out(n, d), out = var_out(n, d), dS = var_out(n, d);
    c.R = &R;
    gnn_type_proj_t tp = {NTYPES, feats, offsets, &tord, &tids};
    CHECK_OK(gnn_type_project_forward(&tp, Wt, bt, &S.t, &out.t));
    var_get(&out);
    double ls = 0;
    for (int64_t i = 0; i < n * d; i++)
        ls += R.d[i] * out.f[i];
    CHECK_NEAR(ls, tp_loss(&c), 1e-5 * fabs(ls) + 1e-6);
    CHECK_OK(gnn_type_project_backward(&tp, &R.t, &dS.t, dWt, dbt));
    const char *names[NTYPES][2] = {{"type 0 dW", "type 0 db"}, {"type 1 dW", "type 1 db"},
                                    {"type 2 (absent) dW", "type 2 (absent) db"}};
    for (int t = 0; t < NTYPES; t++) {
        fd_check(names[t][0], W[t].d, W[t].n, var_get(&dW[t]), tp_loss, &c);
        fd_check(names[t][1], b[t].d, b[t].n, var_get(&db[t]), tp_loss, &c);
    }
    for (int64_t i = 0; i < dims[2] * d; i++)
        ASSERT_EQ(dW[2].f[i], 0.0f);
    int32_t bad[2] = {0, NTYPES};
    CHECK_STATUS(gnn_type_partition(bad, 2, NTYPES, order, offsets), TMA_ERR_INVALID);
    for (int t = 0; t < NTYPES; t++) {
        var_free(&W[t]);
        var_free(&b[t]);
        var_free(&dW[t]);
        var_free(&db[t]);
        tma_gnn_feat_destroy(B, feats[t]);
        free(X[t]);
    }
    var_free(&R);
    var_free(&S);
    var_free(&out);
    var_free(&dS);
    free_tensor(&tord);
    tma_gnn_tensor_free(&tids);
}

/* ------------------------------------------------------------------ feature projection */

typedef struct feat_ctx {
    const float *X;
    const int64_t *ids;
    var_t *W, *R;
    int64_t n, F, d;
} feat_ctx_t;

static double feat_loss(void *c)
{
    feat_ctx_t *f = c;
    double s = 0;
    for (int64_t i = 0; i < f->n; i++)
        for (int64_t j = 0; j < f->d; j++) {
            double y = 0;
            for (int64_t q = 0; q < f->F; q++)
                y += (double)f->X[f->ids[i] * f->F + q] * f->W->d[q * f->d + j];
            s += f->R->d[i * f->d + j] * y;
        }
    return s;
}

static void check_feature_projection(void)
{
    for (int sparse = 0; sparse < 2; sparse++) {
        const int64_t N = 30, Fd = sparse ? 200 : 9, n = 12, d = 5;
        float *X = malloc((size_t)(N * Fd) * 4);
        for (int64_t i = 0; i < N * Fd; i++)
            X[i] = sparse ? (tma_rng_uniform(&rng) < 0.05 ? 1.0f : 0.0f) : (float)(2 * tma_rng_uniform(&rng) - 1);
        tma_gnn_feat_t *feat;
        CHECK_OK(tma_gnn_feat_create(B, X, TMA_FEAT_F32, N, Fd, 0, &feat));
        tma_gnn_feat_info_t fi;
        tma_gnn_feat_get_info(B, feat, &fi);
        if (strcmp(tma_gnn_backend_name(B), "ref") != 0)
            ASSERT_EQ(fi.sparse, sparse);
        int64_t ids[12];
        for (int64_t i = 0; i < n; i++)
            ids[i] = (int64_t)tma_rng_below(&rng, N);
        tensor_t tids;
        CHECK_OK(tma_gnn_tensor_alloc(B, TMA_GNN_I64, n, &tids));
        CHECK_OK(tma_gnn_tensor_upload(&tids, ids));
        var_t W = var_new(Fd, d, -1, 1, 0), R = var_new(n, d, -1, 1, 0), dW = var_out(Fd, d);
        feat_ctx_t c = {X, ids, &W, &R, n, Fd, d};
        CHECK_OK(tma_gnn_op_feat_matmul_grad(feat, &tids, &R.t, &dW.t));
        fd_check(sparse ? "sparse feature projection dW" : "dense feature projection dW", W.d, W.n, var_get(&dW),
                 feat_loss, &c);
        var_free(&W);
        var_free(&R);
        var_free(&dW);
        tma_gnn_tensor_free(&tids);
        tma_gnn_feat_destroy(B, feat);
        free(X);
    }
}

/* ------------------------------------------------------------------ LayerNorm, PReLU */

typedef struct ln_ctx {
    var_t *X, *g, *b, *R;
    int64_t n, d;
} ln_ctx_t;

static double ln_loss(void *c)
{
    ln_ctx_t *l = c;
    double s = 0;
    for (int64_t i = 0; i < l->n; i++) {
        const double *x = l->X->d + i * l->d;
        double mu = 0, var = 0;
        for (int64_t j = 0; j < l->d; j++)
            mu += x[j];
        mu /= (double)l->d;
        for (int64_t j = 0; j < l->d; j++)
            var += (x[j] - mu) * (x[j] - mu);
        var /= (double)l->d;
        double rs = 1.0 / sqrt(var + 1e-5);
        for (int64_t j = 0; j < l->d; j++)
            s += l->R->d[i * l->d + j] * ((x[j] - mu) * rs * l->g->d[j] + l->b->d[j]);
    }
    return s;
}

static void check_layernorm(void)
{
    const int64_t n = 6, d = 11;
    var_t X = var_new(n, d, -2, 2, 0), g = var_new(1, d, 0.5, 1.5, 0), b = var_new(1, d, -1, 1, 0);
    var_t R = var_new(n, d, -1, 1, 0), Y = var_out(n, d), mu = var_out(n, 1), rs = var_out(n, 1);
    var_t dX = var_out(n, d), dg = var_out(1, d), db = var_out(1, d);
    /* LayerNorm alone: the model's ln_prelu with slope 1 (the identity). */
    var_t a = var_new(1, 1, 1, 1, 0), da = var_out(1, 1);
    CHECK_OK(tma_gnn_op_ln_prelu_fwd(&X.t, &g.t, &b.t, &a.t, 1e-5f, &Y.t, &mu.t, &rs.t));
    ln_ctx_t c = {&X, &g, &b, &R, n, d};
    var_get(&Y);
    double ls = 0;
    for (int64_t i = 0; i < n * d; i++)
        ls += R.d[i] * Y.f[i];
    CHECK_NEAR(ls, ln_loss(&c), 1e-5 * fabs(ls) + 1e-6);
    CHECK_OK(tma_gnn_op_ln_prelu_bwd(&R.t, &X.t, &g.t, &b.t, &a.t, &mu.t, &rs.t, &dX.t, &dg.t, &db.t, &da.t));
    fd_check("layernorm dX", X.d, X.n, var_get(&dX), ln_loss, &c);
    fd_check("layernorm dgamma", g.d, g.n, var_get(&dg), ln_loss, &c);
    fd_check("layernorm dbeta", b.d, b.n, var_get(&db), ln_loss, &c);
    var_t *all[] = {&X, &g, &b, &R, &Y, &mu, &rs, &dX, &dg, &db, &a, &da};
    for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
        var_free(all[i]);
}

/* The encoder's activation as one op: PReLU(LayerNorm(x)). */
typedef struct lnp_ctx {
    var_t *X, *g, *b, *a, *R;
    int64_t n, d;
} lnp_ctx_t;

static double lnp_loss(void *c)
{
    lnp_ctx_t *l = c;
    double s = 0;
    for (int64_t i = 0; i < l->n; i++) {
        const double *x = l->X->d + i * l->d;
        double mu = 0, var = 0;
        for (int64_t j = 0; j < l->d; j++)
            mu += x[j];
        mu /= (double)l->d;
        for (int64_t j = 0; j < l->d; j++)
            var += (x[j] - mu) * (x[j] - mu);
        var /= (double)l->d;
        double rs = 1.0 / sqrt(var + 1e-5);
        for (int64_t j = 0; j < l->d; j++) {
            double y = (x[j] - mu) * rs * l->g->d[j] + l->b->d[j];
            s += l->R->d[i * l->d + j] * (y > 0 ? y : l->a->d[0] * y);
        }
    }
    return s;
}

static void check_ln_prelu(void)
{
    const int64_t n = 6, d = 11;
    var_t X = var_new(n, d, -2, 2, 0), g = var_new(1, d, 0.5, 1.5, 0), b = var_new(1, d, -1, 1, 0);
    var_t a = var_new(1, 1, 0.1, 0.4, 0), R = var_new(n, d, -1, 1, 0), H = var_out(n, d);
    var_t mu = var_out(n, 1), rs = var_out(n, 1), dX = var_out(n, d), dg = var_out(1, d), db = var_out(1, d);
    var_t da = var_out(1, 1);
    CHECK_OK(tma_gnn_op_ln_prelu_fwd(&X.t, &g.t, &b.t, &a.t, 1e-5f, &H.t, &mu.t, &rs.t));
    lnp_ctx_t c = {&X, &g, &b, &a, &R, n, d};
    var_get(&H);
    double ls = 0;
    for (int64_t i = 0; i < n * d; i++)
        ls += R.d[i] * H.f[i];
    CHECK_NEAR(ls, lnp_loss(&c), 1e-5 * fabs(ls) + 1e-6);
    CHECK_OK(tma_gnn_op_ln_prelu_bwd(&R.t, &X.t, &g.t, &b.t, &a.t, &mu.t, &rs.t, &dX.t, &dg.t, &db.t, &da.t));
    fd_check("layernorm+prelu dX", X.d, X.n, var_get(&dX), lnp_loss, &c);
    fd_check("layernorm+prelu dgamma", g.d, g.n, var_get(&dg), lnp_loss, &c);
    fd_check("layernorm+prelu dbeta", b.d, b.n, var_get(&db), lnp_loss, &c);
    fd_check("layernorm+prelu da", a.d, a.n, var_get(&da), lnp_loss, &c);
    var_t *all[] = {&X, &g, &b, &a, &R, &H, &mu, &rs, &dX, &dg, &db, &da};
    for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
        var_free(all[i]);
}

typedef struct prelu_ctx {
    var_t *X, *a, *R;
} prelu_ctx_t;

static double prelu_loss(void *c)
{
    prelu_ctx_t *p = c;
    double s = 0;
    for (int64_t i = 0; i < p->X->n; i++) {
        double x = p->X->d[i];
        s += p->R->d[i] * (x > 0 ? x : p->a->d[0] * x);
    }
    return s;
}

static void check_prelu(void)
{
    var_t X = var_new(7, 9, -1, 1, 1e-3), a = var_new(1, 1, 0.1, 0.4, 0), R = var_new(7, 9, -1, 1, 0);
    var_t dX = var_out(7, 9), da = var_out(1, 1);
    prelu_ctx_t c = {&X, &a, &R};
    CHECK_OK(tma_gnn_op_prelu_bwd(&R.t, &X.t, &a.t, &dX.t, &da.t));
    fd_check("prelu dX", X.d, X.n, var_get(&dX), prelu_loss, &c);
    fd_check("prelu da", a.d, a.n, var_get(&da), prelu_loss, &c);
    var_t *all[] = {&X, &a, &R, &dX, &da};
    for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
        var_free(all[i]);
}

/* ------------------------------------------------------------------ decoder input, loss */

typedef struct pair_ctx {
    var_t *H, *R;
    const int32_t *hi, *ti;
    int64_t np, d;
} pair_ctx_t;

static double pair_loss(void *c)
{
    pair_ctx_t *p = c;
    double s = 0;
    for (int64_t q = 0; q < p->np; q++)
        for (int64_t j = 0; j < p->d; j++)
            s += p->R->d[q * p->d + j] * p->H->d[p->hi[q] * p->d + j] * p->H->d[p->ti[q] * p->d + j];
    return s;
}

static void check_pair_mul(void)
{
    const int64_t n = 10, d = 7, np = 16;
    int32_t hi[16], ti[16];
    for (int64_t q = 0; q < np; q++) {
        hi[q] = (int32_t)tma_rng_below(&rng, n);
        ti[q] = q == 3 ? hi[q] : (int32_t)tma_rng_below(&rng, n); /* a self pair too */
    }
    tensor_t thi, tti;
    CHECK_OK(tma_gnn_tensor_alloc(B, TMA_GNN_I32, np, &thi));
    CHECK_OK(tma_gnn_tensor_alloc(B, TMA_GNN_I32, np, &tti));
    CHECK_OK(tma_gnn_tensor_upload(&thi, hi));
    CHECK_OK(tma_gnn_tensor_upload(&tti, ti));
    var_t H = var_new(n, d, -1, 1, 0), R = var_new(np, d, -1, 1, 0), dH = var_out(n, d);
    pair_ctx_t c = {&H, &R, hi, ti, np, d};
    CHECK_OK(tma_gnn_op_pair_mul_bwd(&R.t, &H.t, &thi, &tti, &dH.t));
    fd_check("pair product dH", H.d, H.n, var_get(&dH), pair_loss, &c);
    var_free(&H);
    var_free(&R);
    var_free(&dH);
    tma_gnn_tensor_free(&thi);
    tma_gnn_tensor_free(&tti);
}

typedef struct bce_ctx {
    var_t *x, *y;
} bce_ctx_t;

static double bce_loss(void *c)
{
    bce_ctx_t *b = c;
    double s = 0;
    for (int64_t i = 0; i < b->x->n; i++) {
        double x = b->x->d[i], y = b->y->d[i];
        s += -(y * log(1 / (1 + exp(-x))) + (1 - y) * log(1 - 1 / (1 + exp(-x))));
    }
    return s / (double)b->x->n;
}

static void check_bce(void)
{
    var_t x = var_new(20, 1, -6, 6, 0), y = var_new(20, 1, 0, 1, 0), dl = var_out(20, 1);
    for (int64_t i = 0; i < 20; i++)
        y.d[i] = y.f[i] = i % 2 ? 1.0f : 0.0f;
    CHECK_OK(tma_gnn_tensor_upload(&y.t, y.f));
    bce_ctx_t c = {&x, &y};
    double loss;
    CHECK_OK(tma_gnn_op_bce_logits(&x.t, &y.t, &loss, &dl.t));
    CHECK_NEAR(loss, bce_loss(&c), 1e-9);
    fd_check("BCE with logits", x.d, x.n, var_get(&dl), bce_loss, &c);
    var_free(&x);
    var_free(&y);
    var_free(&dl);
}

/* ------------------------------------------------------------------ whole model */

/* The central difference of the trainer's loss in parameter i (p: the
 * parameters, restored on return).  GAT's check retries a parameter with a
 * step ten times smaller when the first straddles the kink of an attention
 * logit's LeakyReLU (its slope is no parameter to set to 1 as PReLU's). */
static double model_central_diff(tma_gnn_trainer_t *tr, float *p, int64_t i, float h)
{
    const float old = p[i];
    double fp, fm;
    p[i] = old + h;
    CHECK_OK(tma_gnn_trainer_set_params(tr, p));
    CHECK_OK(gnn_trainer_recompute(tr, &fp));
    p[i] = old - h;
    CHECK_OK(tma_gnn_trainer_set_params(tr, p));
    CHECK_OK(gnn_trainer_recompute(tr, &fm));
    p[i] = old;
    return (fp - fm) / ((double)(old + h) - (double)(old - h));
}

/* The whole model's loss against its gradient on graph g (label names it). */
static void check_model_on(tma_graph_t *g, tma_gnn_encoder_t enc, tma_gnn_decoder_t dec, int negatives,
                           const char *label)
{
    tma_gnn_config_t cfg;
    tma_gnn_config_default(&cfg);
    cfg.encoder = enc;
    cfg.decoder = dec;
    cfg.negatives = negatives;
    cfg.bases = 2;
    cfg.heads = enc == TMA_GNN_ENCODER_GAT ? 3 : 1; /* hidden layers: 3 heads of 2; the last: 3 of 6, averaged */
    cfg.hidden = 6;
    cfg.decoder_hidden = 5;
    cfg.batch_size = 6;
    cfg.fanouts[0] = 3;
    cfg.fanouts[1] = 2;
    tma_gnn_trainer_t *tr;
    CHECK_OK(gnn_trainer_create_on("ref", &cfg, &g, 1, &tr));
    const int64_t np = tma_gnn_trainer_param_count(tr);
    float *p = malloc((size_t)np * 4), *gr = malloc((size_t)np * 4);
    /* The composition is checked on a smooth function: PReLU slopes of 1 (no
     * kink for a finite difference to straddle; PReLU itself is checked
     * above, and with its real slopes against PyTorch), and random biases so
     * that no LayerNorm row is constant. */
    CHECK_OK(tma_gnn_trainer_get_params(tr, p));
    for (int64_t i = 0; i < np; i++)
        p[i] += (float)(0.1 * (2 * tma_rng_uniform(&rng) - 1));
    tma_gnn_layout_t lay;
    CHECK_OK(tma_gnn_layout_build(tma_gnn_trainer_config(tr), &lay));
    for (int i = 0; i < lay.count; i++)
        if (strstr(lay.params[i].name, ".prelu"))
            p[lay.params[i].offset] = 1.0f;
    CHECK_OK(tma_gnn_trainer_set_params(tr, p));
    float loss;
    CHECK_OK(tma_gnn_trainer_compute_grads(tr, &loss));
    CHECK_OK(tma_gnn_trainer_get_grads(tr, gr));
    double gmax = 0, err = 0;
    for (int64_t i = 0; i < np; i++)
        gmax = fmax(gmax, fabs(gr[i]));
    int checked = 0;
    int64_t worst = -1;
    for (int64_t i = 0; i < np; i += 1 + np / 150) {
        /* float32 parameters: a step of 1e-3 keeps the differences well above rounding */
        double e = fabs(model_central_diff(tr, p, i, 1e-3f) - gr[i]) / gmax;
        if (enc == TMA_GNN_ENCODER_GAT && e >= 1e-3) /* a step across an attention logit's LeakyReLU kink */
            e = fmin(e, fabs(model_central_diff(tr, p, i, 1e-4f) - gr[i]) / gmax);
        if (e > err) {
            err = e;
            worst = i;
        }
        checked++;
    }
    CHECK_MSG(err < 1e-3, "%s + %s (%s): model gradient differs from finite differences by %.3g at %lld (max "
              "%.3g, %d parameters checked)", tma_gnn_encoder_name(enc), tma_gnn_decoder_name(dec), label, err,
              (long long)worst, gmax, checked);
    CHECK_OK(tma_gnn_trainer_set_params(tr, p));
    double again;
    CHECK_OK(gnn_trainer_recompute(tr, &again));
    CHECK_NEAR(again, loss, 1e-6);
    free(p);
    free(gr);
    tma_gnn_trainer_destroy(tr);
}

static void check_model(tma_gnn_encoder_t enc, int sparse)
{
    gnn_test_graph_opts_t go;
    gnn_test_graph_defaults(&go);
    go.nodes = 80;
    go.sparse = sparse;
    go.feature_dim = sparse ? 60 : 8;
    go.val = go.test = 5;
    go.negatives = 5;
    tma_graph_t *g = gnn_test_graph(&go);
    check_model_on(g, enc, TMA_GNN_DECODER_MLP, 1, sparse ? "sparse features" : "dense features");
    check_model_on(g, enc, TMA_GNN_DECODER_DOT, 1, sparse ? "sparse features" : "dense features");
    /* train.negatives: the loss's two halves (positives, negatives) and their gradient. */
    check_model_on(g, enc, TMA_GNN_DECODER_MLP, 3, sparse ? "sparse, 3 negatives" : "dense, 3 negatives");
    tma_graph_destroy(g);
}

/* Heterogeneous models on a small typed graph (2 node types, 3 relations). */
static void check_hetero_models(void)
{
    tma_graph_t *g = gnn_test_typed_graph(80, 4, 1.0, 2, 3, 8, 5, 5, 3);
    check_model_on(g, TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_DISTMULT, 1, "typed graph");
    check_model_on(g, TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_MLP, 1, "typed graph");
    check_model_on(g, TMA_GNN_ENCODER_GCN, TMA_GNN_DECODER_DISTMULT, 1, "typed graph");
    check_model_on(g, TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_DOT, 1, "typed graph");
    check_model_on(g, TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_DISTMULT, 2, "typed graph, 2 negatives");
    tma_graph_destroy(g);
}

int main(void)
{
    tma_log_set_level(TMA_LOG_WARN);
    const char *dev = getenv("TMA_TEST_BACKEND");
    CHECK_OK(tma_gnn_backend_create(dev && *dev ? dev : "cpu", 2, &B));
    tma_rng_seed(&rng, 2024, 0);
    check_linear();
    check_aggregation();
    check_feature_projection();
    check_layernorm();
    check_prelu();
    check_ln_prelu();
    check_pair_mul();
    check_bce();
    check_rgcn();
    check_distmult();
    check_dot();
    check_type_projection();
    tma_gnn_backend_destroy(B);
    for (int enc = 0; enc < 3; enc++)
        for (int sparse = 0; sparse < 2; sparse++)
            check_model((tma_gnn_encoder_t)enc, sparse);
    /* GAT: attention over the sampled neighbours and the self loop */
    check_model(TMA_GNN_ENCODER_GAT, 0);
    check_model(TMA_GNN_ENCODER_GAT, 1);
    check_hetero_models();
    return tma_test_done();
}
