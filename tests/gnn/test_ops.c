/*
 * test_ops.c: every op of a compute backend against the plain-C reference
 * backend, on fresh random inputs, with outputs poisoned (NaN) before each
 * run.  The backends come from TMA_TEST_BACKENDS (comma-separated, default
 * "cpu,cpu-generic"), so another backend (cuda) reuses this test as is.
 * Agreement: max |x - ref| <= TOL * max |ref| per output, TOL = 2e-5 or
 * $TMA_TEST_TOL (tests/gpu/ asks 1e-5 of the CUDA backend); NaN never passes.
 */
#include "tma_test.h"
#include "gnn_backend.h"
#include "gnn_testutil.h"

#include <math.h>
#include <string.h>

static double TOL = 2e-5;

static tma_rng_t rng;
static tma_gnn_backend_t *B, *R; /* backend under test, reference */
static const char *cur_op = "";

static float *rand_floats(int64_t n, double scale)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(scale * (2.0 * tma_rng_uniform(&rng) - 1.0));
    return p;
}

/* The same host data as a tensor on each backend. */
typedef struct pair {
    tensor_t b, r;
} pair_t;

static pair_t mk(tma_gnn_dtype_t dt, int64_t rows, int64_t cols, const void *host)
{
    pair_t p;
    CHECK_OK(tma_gnn_tensor_alloc(B, dt, rows * cols, &p.b));
    CHECK_OK(tma_gnn_tensor_alloc(R, dt, rows * cols, &p.r));
    p.b = tma_gnn_tensor_shape(&p.b, rows, cols);
    p.r = tma_gnn_tensor_shape(&p.r, rows, cols);
    if (host) {
        CHECK_OK(tma_gnn_tensor_upload(&p.b, host));
        CHECK_OK(tma_gnn_tensor_upload(&p.r, host));
    } else {
        /* Poison: an op must write every element it owns. */
        int64_t n = rows * cols;
        float *nan = malloc((size_t)(n ? n : 1) * tma_gnn_dtype_size(dt));
        memset(nan, 0xff, (size_t)n * tma_gnn_dtype_size(dt));
        CHECK_OK(tma_gnn_tensor_upload(&p.b, nan));
        CHECK_OK(tma_gnn_tensor_upload(&p.r, nan));
        free(nan);
    }
    return p;
}

static pair_t mkf(int64_t rows, int64_t cols, double scale)
{
    float *h = rand_floats(rows * cols, scale);
    pair_t p = mk(TMA_GNN_F32, rows, cols, h);
    free(h);
    return p;
}

static void pfree(pair_t *p)
{
    p->b.capacity = p->b.capacity ? p->b.capacity : 1;
    tma_gnn_tensor_free(&p->b);
    tma_gnn_tensor_free(&p->r);
}

/* Compares the float outputs of both backends. */
static void agree(const char *what, const pair_t *p)
{
    int64_t n = tma_gnn_tensor_numel(&p->b);
    float *a = malloc((size_t)(n ? n : 1) * 4), *r = malloc((size_t)(n ? n : 1) * 4);
    CHECK_OK(tma_gnn_tensor_download(&p->b, a));
    CHECK_OK(tma_gnn_tensor_download(&p->r, r));
    double mx = 0, err = 0;
    int64_t worst = -1, nan = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(r[i]))
            nan++;
        mx = fmax(mx, fabs(r[i]));
    }
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - r[i]);
        if (e > err) {
            err = e;
            worst = i;
        }
    }
    CHECK_MSG(nan == 0, "%s %s: %lld NaN outputs", cur_op, what, (long long)nan);
    CHECK_MSG(err <= TOL * fmax(mx, 1e-30), "%s %s: max error %.3g at %lld (%.9g vs ref %.9g), scale %.3g",
              cur_op, what, err, (long long)worst, worst >= 0 ? a[worst] : 0.0, worst >= 0 ? r[worst] : 0.0, mx);
    free(a);
    free(r);
}

/* A one-element sum of terms whose sizes add up to `bound`: |x - ref| <=
 * TOL * bound (a float sum's rounding grows with its terms, not its value). */
static void agree_sum(const char *what, const pair_t *p, double bound)
{
    float a = 0, r = 0;
    CHECK_OK(tma_gnn_tensor_download(&p->b, &a));
    CHECK_OK(tma_gnn_tensor_download(&p->r, &r));
    CHECK_MSG(!isnan(a) && !isnan(r) && fabs((double)a - r) <= TOL * fmax(fmax(bound, fabs(r)), 1e-30),
              "%s %s: %.9g vs ref %.9g, terms summing to %.3g in size", cur_op, what, a, r, bound);
}

static void agree_double(const char *what, double a, double r)
{
    CHECK_MSG(!isnan(a) && fabs(a - r) <= TOL * fmax(fabs(r), 1e-30), "%s %s: %.12g vs ref %.12g", cur_op, what, a,
              r);
}

/* A random block: n_dst rows with 0..maxdeg edges into n_src >= n_dst
 * sources, with its transpose (which the backend under test may use; the
 * reference never does). */
typedef struct blk_pair {
    tma_gnn_block_t b, r;
    pair_t ip, ix, w, tp, ti, tw;
} blk_pair_t;

static blk_pair_t mk_block(int64_t n_dst, int64_t n_src, int maxdeg)
{
    int32_t *ip = malloc((size_t)(n_dst + 1) * 4);
    int32_t *ix = malloc((size_t)(n_dst * maxdeg + 1) * 4);
    float *w = malloc((size_t)(n_dst * maxdeg + 1) * 4);
    int64_t e = 0;
    ip[0] = 0;
    for (int64_t i = 0; i < n_dst; i++) {
        int64_t k = (int64_t)tma_rng_below(&rng, (uint64_t)maxdeg + 1);
        for (int64_t q = 0; q < k; q++) {
            ix[e] = (int32_t)tma_rng_below(&rng, (uint64_t)n_src);
            w[e] = (float)tma_rng_uniform(&rng);
            e++;
        }
        ip[i + 1] = (int32_t)e;
    }
    /* transpose: by source, rows in increasing order */
    int32_t *tp = calloc((size_t)(n_src + 1), 4), *ti = malloc((size_t)(e + 1) * 4);
    float *tw = malloc((size_t)(e + 1) * 4);
    int64_t q = 0;
    for (int64_t j = 0; j < n_src; j++) {
        tp[j] = (int32_t)q;
        for (int64_t i = 0; i < n_dst; i++)
            for (int32_t x = ip[i]; x < ip[i + 1]; x++)
                if (ix[x] == j) {
                    ti[q] = (int32_t)i;
                    tw[q++] = w[x];
                }
    }
    tp[n_src] = (int32_t)q;
    blk_pair_t bp;
    memset(&bp, 0, sizeof bp);
    bp.ip = mk(TMA_GNN_I32, n_dst + 1, 1, ip);
    bp.ix = mk(TMA_GNN_I32, e, 1, ix);
    bp.w = mk(TMA_GNN_F32, e, 1, w);
    bp.tp = mk(TMA_GNN_I32, n_src + 1, 1, tp);
    bp.ti = mk(TMA_GNN_I32, e, 1, ti);
    bp.tw = mk(TMA_GNN_F32, e, 1, tw);
    bp.b = (tma_gnn_block_t){n_dst, n_src, e, bp.ip.b, bp.ix.b, bp.w.b, 0, bp.tp.b, bp.ti.b, bp.tw.b};
    bp.r = (tma_gnn_block_t){n_dst, n_src, e, bp.ip.r, bp.ix.r, bp.w.r, 0, bp.tp.r, bp.ti.r, bp.tw.r};
    free(ip);
    free(ix);
    free(w);
    free(tp);
    free(ti);
    free(tw);
    return bp;
}

static void free_block(blk_pair_t *bp)
{
    pfree(&bp->ip);
    pfree(&bp->ix);
    pfree(&bp->w);
    pfree(&bp->tp);
    pfree(&bp->ti);
    pfree(&bp->tw);
}

static void test_matmul(void)
{
    cur_op = "matmul";
    /* {1100, 24, 40}, {24, 40, 1600}: a tall product the CPU backend slices
     * by rows, and with ta a long sum it slices into partials (sgemm_rows,
     * sgemm_tn); {300, 200, 64}: few rows, shares of columns (sgemm_cols, 3
     * uneven shares on 3 threads); {9000, 1, 300}: a matrix-vector product
     * in shares of rows or, with ta, of columns (sgemv_shares).  Alpha 1 and
     * beta 0 or 1 are what the own AVX-512 products take (cpu_gemm.c): {517,
     * 70, 130} and {2000, 256, 256} give them tiles cut short in rows (517 =
     * 86 x 6 + 1) and columns (70 = 64 + 6: a masked vector) and, with ta,
     * sums over blocks of 128 rows and a short last block. */
    const int64_t shapes[][3] = {{1, 1, 1},     {7, 5, 3},      {64, 33, 300},  {130, 17, 1},
                                 {5, 1, 64},    {0, 4, 3},      {3, 4, 0},      {1100, 24, 40},
                                 {24, 40, 1600}, {300, 200, 64}, {9000, 1, 300}, {517, 70, 130},
                                 {2000, 256, 256}};
    const float ab[][2] = {{0.7f, 0.0f}, {1.0f, 0.5f}, {1.0f, 0.0f}, {1.0f, 1.0f}};
    for (size_t s = 0; s < TMA_ARRAY_LEN(shapes); s++) {
        for (int ta = 0; ta < 2; ta++) {
            for (int tb = 0; tb < 2; tb++) {
                int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                pair_t A = ta ? mkf(k, m, 1) : mkf(m, k, 1), Bm = tb ? mkf(n, k, 1) : mkf(k, n, 1);
                pair_t C = mk(TMA_GNN_F32, m, n, NULL);
                for (size_t q = 0; q < TMA_ARRAY_LEN(ab); q++) {
                    char what[64];
                    snprintf(what, sizeof what, "alpha=%g beta=%g", ab[q][0], ab[q][1]);
                    if (ab[q][1] == 0.0f) /* beta 0: C is not read, not even a NaN in it */
                        CHECK_OK(tma_gnn_op_fill(&C.b, NAN));
                    CHECK_OK(tma_gnn_op_matmul(&A.b, ta, &Bm.b, tb, ab[q][0], ab[q][1], &C.b));
                    CHECK_OK(tma_gnn_op_matmul(&A.r, ta, &Bm.r, tb, ab[q][0], ab[q][1], &C.r));
                    agree(what, &C);
                }
                pfree(&A);
                pfree(&Bm);
                pfree(&C);
            }
        }
    }
    /* C = A B + bias, written with the product (the reference: matmul, then
     * add_bias): row slices, column shares, small, an empty sum, no rows. */
    cur_op = "matmul_bias";
    const int64_t bshapes[][3] = {{1100, 24, 40}, {300, 200, 64}, {7, 5, 3}, {5, 3, 0}, {0, 4, 3}, {517, 70, 130}};
    for (size_t s = 0; s < TMA_ARRAY_LEN(bshapes); s++) {
        int64_t m = bshapes[s][0], n = bshapes[s][1], k = bshapes[s][2];
        pair_t A = mkf(m, k, 1), Bm = mkf(k, n, 1), bias = mkf(1, n, 2), C = mk(TMA_GNN_F32, m, n, NULL);
        CHECK_OK(tma_gnn_op_matmul_bias(&A.b, &Bm.b, &bias.b, &C.b));
        CHECK_OK(tma_gnn_op_matmul_bias(&A.r, &Bm.r, &bias.r, &C.r));
        agree("C", &C);
        pfree(&A);
        pfree(&Bm);
        pfree(&bias);
        pfree(&C);
    }
    /* A shape mismatch is refused, not computed. */
    pair_t A = mkf(3, 4, 1), Bm = mkf(5, 2, 1), C = mk(TMA_GNN_F32, 3, 2, NULL);
    CHECK_STATUS(tma_gnn_op_matmul(&A.b, 0, &Bm.b, 0, 1, 0, &C.b), TMA_ERR_INTERNAL);
    pair_t bias = mkf(1, 3, 1), A2 = mkf(3, 5, 1);
    if (B->ops->matmul_bias) /* (without the op, matmul's own check refuses it) */
        CHECK_STATUS(tma_gnn_op_matmul_bias(&A2.b, &Bm.b, &bias.b, &C.b), TMA_ERR_INTERNAL);
    pfree(&bias);
    pfree(&A2);
    pfree(&A);
    pfree(&Bm);
    pfree(&C);
}

static void test_rowwise(void)
{
    const int64_t shapes[][2] = {{1, 1}, {3, 16}, {50, 37}, {200, 256}, {17, 300}, {0, 8}};
    for (size_t s = 0; s < TMA_ARRAY_LEN(shapes); s++) {
        int64_t n = shapes[s][0], d = shapes[s][1];
        pair_t X = mkf(n, d, 2), bias = mkf(1, d, 1), out = mk(TMA_GNN_F32, 1, d, NULL);
        cur_op = "add_bias";
        CHECK_OK(tma_gnn_op_add_bias(&X.b, &bias.b));
        CHECK_OK(tma_gnn_op_add_bias(&X.r, &bias.r));
        agree("Z", &X);
        cur_op = "colsum";
        CHECK_OK(tma_gnn_op_colsum(&X.b, &out.b));
        CHECK_OK(tma_gnn_op_colsum(&X.r, &out.r));
        agree("out", &out);

        /* LayerNorm alone, as the last encoder layer's inference and the
         * model's activation see it: ln_prelu with slope 1. */
        cur_op = "layernorm";
        float one = 1.0f;
        pair_t g = mkf(1, d, 1), be = mkf(1, d, 1), Y = mk(TMA_GNN_F32, n, d, NULL);
        pair_t mu = mk(TMA_GNN_F32, n, 1, NULL), rs = mk(TMA_GNN_F32, n, 1, NULL);
        pair_t a_one = mk(TMA_GNN_F32, 1, 1, &one), da_one = mk(TMA_GNN_F32, 1, 1, NULL);
        CHECK_OK(tma_gnn_op_ln_prelu_fwd(&X.b, &g.b, &be.b, &a_one.b, 1e-5f, &Y.b, &mu.b, &rs.b));
        CHECK_OK(tma_gnn_op_ln_prelu_fwd(&X.r, &g.r, &be.r, &a_one.r, 1e-5f, &Y.r, &mu.r, &rs.r));
        agree("Y", &Y);
        agree("mean", &mu);
        agree("rstd", &rs);
        pair_t dY = mkf(n, d, 1), dX = mk(TMA_GNN_F32, n, d, NULL);
        pair_t dg = mk(TMA_GNN_F32, 1, d, NULL), db = mk(TMA_GNN_F32, 1, d, NULL);
        CHECK_OK(tma_gnn_op_ln_prelu_bwd(&dY.b, &X.b, &g.b, &be.b, &a_one.b, &mu.b, &rs.b, &dX.b, &dg.b, &db.b,
                                         &da_one.b));
        CHECK_OK(tma_gnn_op_ln_prelu_bwd(&dY.r, &X.r, &g.r, &be.r, &a_one.r, &mu.r, &rs.r, &dX.r, &dg.r, &db.r,
                                         &da_one.r));
        /* A one-column LayerNorm is degenerate (dX is 0 up to rounding times
         * 1/sqrt(eps)); its forward is still compared above. */
        if (d > 1)
            agree("dX", &dX);
        agree("dgamma", &dg);
        agree("dbeta", &db);
        pfree(&a_one);
        pfree(&da_one);

        cur_op = "ln_prelu";
        {
            float a1 = 0.2f;
            pair_t a = mk(TMA_GNN_F32, 1, 1, &a1), da = mk(TMA_GNN_F32, 1, 1, NULL), H = mk(TMA_GNN_F32, n, d, NULL);
            CHECK_OK(tma_gnn_op_ln_prelu_fwd(&X.b, &g.b, &be.b, &a.b, 1e-5f, &H.b, &mu.b, &rs.b));
            CHECK_OK(tma_gnn_op_ln_prelu_fwd(&X.r, &g.r, &be.r, &a.r, 1e-5f, &H.r, &mu.r, &rs.r));
            agree("H", &H);
            agree("mean", &mu);
            agree("rstd", &rs);
            CHECK_OK(tma_gnn_op_ln_prelu_bwd(&dY.b, &X.b, &g.b, &be.b, &a.b, &mu.b, &rs.b, &dX.b, &dg.b, &db.b, &da.b));
            CHECK_OK(tma_gnn_op_ln_prelu_bwd(&dY.r, &X.r, &g.r, &be.r, &a.r, &mu.r, &rs.r, &dX.r, &dg.r, &db.r, &da.r));
            if (d > 1)
                agree("dX", &dX);
            agree("dgamma", &dg);
            agree("dbeta", &db);
            /* da sums dY * pre over the negative pre-activations (pre = H / a
             * there): a sum of terms of both signs, compared against the sum
             * of their sizes rather than against its own, which cancellation
             * can make small (the reference sums in another order). */
            float *hh = malloc((size_t)TMA_MAX(n * d, 1) * 4), *dy = malloc((size_t)TMA_MAX(n * d, 1) * 4);
            CHECK_OK(tma_gnn_tensor_download(&H.r, hh));
            CHECK_OK(tma_gnn_tensor_download(&dY.r, dy));
            double bound = 0;
            for (int64_t i = 0; i < n * d; i++)
                bound += hh[i] < 0 ? fabs((double)dy[i] * hh[i] / a1) : 0.0;
            agree_sum("da", &da, bound);
            free(hh);
            free(dy);
            pfree(&a);
            pfree(&da);
            pfree(&H);
        }
        cur_op = "prelu";
        float a0 = 0.3f;
        pair_t a = mk(TMA_GNN_F32, 1, 1, &a0), da = mk(TMA_GNN_F32, 1, 1, NULL);
        /* The forward is bias_prelu's (below); the backward on its own: */
        CHECK_OK(tma_gnn_op_prelu_bwd(&dY.b, &X.b, &a.b, &dX.b, &da.b));
        CHECK_OK(tma_gnn_op_prelu_bwd(&dY.r, &X.r, &a.r, &dX.r, &da.r));
        agree("dX", &dX);
        agree("da", &da);
        cur_op = "bias_prelu";
        pair_t Z2 = mkf(n, d, 2), Y2 = mk(TMA_GNN_F32, n, d, NULL);
        CHECK_OK(tma_gnn_op_bias_prelu(&Z2.b, &bias.b, &a.b, &Y2.b));
        CHECK_OK(tma_gnn_op_bias_prelu(&Z2.r, &bias.r, &a.r, &Y2.r));
        agree("Z", &Z2);
        agree("Y", &Y2);
        CHECK_OK(tma_gnn_op_bias_prelu(&Z2.b, &bias.b, &a.b, &Z2.b));
        CHECK_OK(tma_gnn_op_bias_prelu(&Z2.r, &bias.r, &a.r, &Z2.r));
        agree("in place", &Z2);
        pfree(&Z2);
        pfree(&Y2);
        cur_op = "prelu";
        /* in place (dX is dY) */
        CHECK_OK(tma_gnn_op_prelu_bwd(&dY.b, &X.b, &a.b, &dY.b, &da.b));
        CHECK_OK(tma_gnn_op_prelu_bwd(&dY.r, &X.r, &a.r, &dY.r, &da.r));
        agree("dX in place", &dY);

        cur_op = "scale/sumsq/fill";
        CHECK_OK(tma_gnn_op_scale(&X.b, -1.5f));
        CHECK_OK(tma_gnn_op_scale(&X.r, -1.5f));
        agree("scaled", &X);
        double sb, sr;
        CHECK_OK(tma_gnn_op_sumsq(&X.b, &sb));
        CHECK_OK(tma_gnn_op_sumsq(&X.r, &sr));
        agree_double("sumsq", sb, sr);
        CHECK_OK(tma_gnn_op_fill(&Y.b, 0.25f));
        CHECK_OK(tma_gnn_op_fill(&Y.r, 0.25f));
        agree("fill", &Y);
        cur_op = "dropout";
        CHECK_OK(tma_gnn_op_dropout(&X.b, 0.3f, 77 + (uint64_t)n, &Y.b)); /* into Y, then in place */
        CHECK_OK(tma_gnn_op_dropout(&X.r, 0.3f, 77 + (uint64_t)n, &Y.r));
        agree("dropped", &Y);
        CHECK_OK(tma_gnn_op_dropout(&X.b, 0.3f, 78, &X.b));
        CHECK_OK(tma_gnn_op_dropout(&X.r, 0.3f, 78, &X.r));
        agree("dropped in place", &X);
        CHECK_STATUS(tma_gnn_op_dropout(&X.b, 1.0f, 78, &X.b), TMA_ERR_INVALID);
        pair_t *all[] = {&X, &bias, &out, &g, &be, &Y, &mu, &rs, &dY, &dX, &dg, &db, &a, &da};
        for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
            pfree(all[i]);
    }
}

/* Dropout's mask: about p of the elements dropped, the others scaled by
 * 1 / (1 - p); the same key gives the same mask, another key another. */
static void test_dropout_mask(void)
{
    const int64_t n = 100000;
    const uint32_t t = gnn_dropout_threshold(0.25f);
    int64_t kept = 0, same = 0;
    for (int64_t i = 0; i < n; i++) {
        int k = gnn_dropout_keep(5, i, t);
        kept += k;
        same += k == gnn_dropout_keep(6, i, t);
    }
    ASSERT_NEAR((double)kept / n, 0.75, 0.01);
    ASSERT_LT(same, n - 1000); /* another key, another mask */
    ASSERT_EQ(gnn_dropout_threshold(0.0f), 0u);
    ASSERT_EQ(gnn_dropout_keep(5, 123, 0), 1);
}

static void test_sparse(void)
{
    /* n_dst, n_src, max degree, width; the last two have rows of more than
     * 1024 edges (the CUDA backend sums those a block a row): in the block
     * itself, and in its transpose (few sources, many destinations). */
    const int64_t shapes[][4] = {{1, 1, 1, 1},       {20, 50, 6, 16},   {300, 900, 12, 64}, {40, 40, 3, 37},
                                 {64, 100, 5, 300}, {6, 200, 5000, 300}, {5000, 3, 2, 40}};
    for (size_t s = 0; s < TMA_ARRAY_LEN(shapes); s++) {
        int64_t nd = shapes[s][0], ns = shapes[s][1], d = shapes[s][3];
        blk_pair_t bp = mk_block(nd, ns, (int)shapes[s][2]);
        pair_t X = mkf(ns, d, 1), Y = mk(TMA_GNN_F32, nd, d, NULL);
        cur_op = "spmm";
        CHECK_OK(tma_gnn_op_spmm(&bp.b, &X.b, &Y.b));
        CHECK_OK(tma_gnn_op_spmm(&bp.r, &X.r, &Y.r));
        agree("Y", &Y);
        cur_op = "spmm_t";
        pair_t dY = mkf(nd, d, 1), dX = mk(TMA_GNN_F32, ns, d, NULL);
        CHECK_OK(tma_gnn_op_spmm_t(&bp.b, &dY.b, &dX.b));
        CHECK_OK(tma_gnn_op_spmm_t(&bp.r, &dY.r, &dX.r));
        agree("dX (scatter)", &dX);
        pair_t dX2 = mk(TMA_GNN_F32, ns, d, NULL);
        bp.b.has_transpose = 1;
        CHECK_OK(tma_gnn_op_spmm_t(&bp.b, &dY.b, &dX2.b));
        CHECK_OK(tma_gnn_op_spmm_t(&bp.r, &dY.r, &dX2.r));
        agree("dX (gather by source)", &dX2);
        cur_op = "spmm (block with transpose)";
        CHECK_OK(tma_gnn_op_spmm(&bp.b, &X.b, &Y.b));
        agree("Y", &Y);
        bp.b.has_transpose = 0;
        pfree(&dX2);

        cur_op = "pair_mul";
        int64_t np = nd * 2;
        int32_t *hi = malloc((size_t)np * 4), *ti = malloc((size_t)np * 4);
        for (int64_t p = 0; p < np; p++) {
            hi[p] = (int32_t)tma_rng_below(&rng, (uint64_t)ns);
            ti[p] = p % 5 == 0 ? hi[p] : (int32_t)tma_rng_below(&rng, (uint64_t)ns); /* some self pairs */
        }
        pair_t H = mk(TMA_GNN_I32, np, 1, hi), T = mk(TMA_GNN_I32, np, 1, ti), E = mk(TMA_GNN_F32, np, d, NULL);
        CHECK_OK(tma_gnn_op_pair_mul(&X.b, &H.b, &T.b, &E.b));
        CHECK_OK(tma_gnn_op_pair_mul(&X.r, &H.r, &T.r, &E.r));
        agree("E", &E);
        pair_t dE = mkf(np, d, 1);
        CHECK_OK(tma_gnn_op_pair_mul_bwd(&dE.b, &X.b, &H.b, &T.b, &dX.b));
        CHECK_OK(tma_gnn_op_pair_mul_bwd(&dE.r, &X.r, &H.r, &T.r, &dX.r));
        agree("dH", &dX);
        free(hi);
        free(ti);
        pair_t *all[] = {&X, &Y, &dY, &dX, &H, &T, &E, &dE};
        for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
            pfree(all[i]);
        free_block(&bp);
    }
}

/* Heterogeneous ops: the RGCN aggregation and its backward (scatter and
 * gather through the transpose, whose relation ids follow mk_block's
 * transposed order), DistMult (with self pairs and repeated relations), and
 * the row gather and scatter of the per-type projection. */
static void test_hetero(void)
{
    /* n_dst, n_src, max degree, out width, relations, bases */
    const int64_t shapes[][6] = {{1, 1, 1, 1, 1, 1},      {20, 50, 6, 16, 3, 2},  {300, 900, 12, 64, 5, 4},
                                 {40, 40, 3, 37, 2, 3},   {64, 100, 5, 130, 8, 1}, {7, 30, 20, 5, 64, 64}};
    for (size_t s = 0; s < TMA_ARRAY_LEN(shapes); s++) {
        int64_t nd = shapes[s][0], ns = shapes[s][1], d = shapes[s][3], nr = shapes[s][4], nb = shapes[s][5];
        blk_pair_t bp = mk_block(nd, ns, (int)shapes[s][2]);
        int64_t ne = bp.b.num_edges;
        int32_t *ip = malloc((size_t)(nd + 1) * 4), *ix = malloc((size_t)(ne + 1) * 4);
        int32_t *rel = malloc((size_t)(ne + 1) * 4), *trel = malloc((size_t)(ne + 1) * 4);
        CHECK_OK(tma_gnn_tensor_download(&bp.ip.r, ip));
        if (ne)
            CHECK_OK(tma_gnn_tensor_download(&bp.ix.r, ix));
        for (int64_t e = 0; e < ne; e++)
            rel[e] = (int32_t)tma_rng_below(&rng, (uint64_t)nr);
        /* mk_block's transposed order: by source, then destination row */
        int32_t *tptr = malloc((size_t)(ns + 1) * 4), *tdst = malloc((size_t)(ne + 1) * 4);
        gnn_test_transpose(nd, ns, ip, ix, NULL, rel, tptr, tdst, NULL, trel);
        free(tptr);
        free(tdst);
        pair_t R_ = mk(TMA_GNN_I32, ne, 1, rel), TR = mk(TMA_GNN_I32, ne, 1, trel);
        pair_t T = mkf(ns, nb * d, 1), A = mkf(nr, nb, 1), Y = mk(TMA_GNN_F32, nd, d, NULL);
        cur_op = "rgcn_aggregate";
        CHECK_OK(tma_gnn_op_rgcn_aggregate(&bp.b, &R_.b, &T.b, &A.b, &Y.b));
        CHECK_OK(tma_gnn_op_rgcn_aggregate(&bp.r, &R_.r, &T.r, &A.r, &Y.r));
        agree("Y", &Y);
        cur_op = "rgcn_aggregate_bwd";
        pair_t dY = mkf(nd, d, 1), dT = mk(TMA_GNN_F32, ns, nb * d, NULL), dA = mk(TMA_GNN_F32, nr, nb, NULL);
        CHECK_OK(tma_gnn_op_rgcn_aggregate_bwd(&bp.b, &R_.b, &TR.b, &dY.b, &T.b, &A.b, &dT.b, &dA.b));
        CHECK_OK(tma_gnn_op_rgcn_aggregate_bwd(&bp.r, &R_.r, &TR.r, &dY.r, &T.r, &A.r, &dT.r, &dA.r));
        agree("dT (scatter)", &dT);
        agree("dcoef", &dA);
        pair_t dT2 = mk(TMA_GNN_F32, ns, nb * d, NULL), dA2 = mk(TMA_GNN_F32, nr, nb, NULL);
        bp.b.has_transpose = 1;
        CHECK_OK(tma_gnn_op_rgcn_aggregate_bwd(&bp.b, &R_.b, &TR.b, &dY.b, &T.b, &A.b, &dT2.b, &dA2.b));
        CHECK_OK(tma_gnn_op_rgcn_aggregate_bwd(&bp.r, &R_.r, &TR.r, &dY.r, &T.r, &A.r, &dT2.r, &dA2.r));
        agree("dT (gather by source)", &dT2);
        agree("dcoef (with transpose)", &dA2);
        bp.b.has_transpose = 0;
        /* A T whose width is not B x d is refused. */
        CHECK_STATUS(tma_gnn_op_rgcn_aggregate(&bp.b, &R_.b, &dY.b, &A.b, &Y.b),
                     nb == 1 && ns == nd ? TMA_OK : TMA_ERR_INTERNAL);

        cur_op = "distmult";
        int64_t np = nd * 3;
        int32_t *hi = malloc((size_t)np * 4), *ti = malloc((size_t)np * 4), *pr = malloc((size_t)np * 4);
        for (int64_t p = 0; p < np; p++) {
            hi[p] = (int32_t)tma_rng_below(&rng, (uint64_t)ns);
            ti[p] = p % 5 == 0 ? hi[p] : (int32_t)tma_rng_below(&rng, (uint64_t)ns); /* some self pairs */
            pr[p] = (int32_t)tma_rng_below(&rng, (uint64_t)nr);
        }
        pair_t H = mkf(ns, d, 1), Wr = mkf(nr, d, 1), HI = mk(TMA_GNN_I32, np, 1, hi), TI = mk(TMA_GNN_I32, np, 1, ti);
        pair_t PR = mk(TMA_GNN_I32, np, 1, pr), sc = mk(TMA_GNN_F32, np, 1, NULL);
        CHECK_OK(tma_gnn_op_distmult(&H.b, &HI.b, &TI.b, &PR.b, &Wr.b, &sc.b));
        CHECK_OK(tma_gnn_op_distmult(&H.r, &HI.r, &TI.r, &PR.r, &Wr.r, &sc.r));
        agree("score", &sc);
        cur_op = "distmult_bwd";
        pair_t ds = mkf(np, 1, 1), dH = mk(TMA_GNN_F32, ns, d, NULL), dWr = mk(TMA_GNN_F32, nr, d, NULL);
        CHECK_OK(tma_gnn_op_distmult_bwd(&ds.b, &H.b, &HI.b, &TI.b, &PR.b, &Wr.b, &dH.b, &dWr.b));
        CHECK_OK(tma_gnn_op_distmult_bwd(&ds.r, &H.r, &HI.r, &TI.r, &PR.r, &Wr.r, &dH.r, &dWr.r));
        agree("dH", &dH);
        agree("dWr", &dWr);
        /* rel and Wr NULL: the dot decoder's plain dot product, checked
         * against the values themselves as well as the reference. */
        cur_op = "distmult (dot)";
        pair_t sd = mk(TMA_GNN_F32, np, 1, NULL), dHd = mk(TMA_GNN_F32, ns, d, NULL);
        CHECK_OK(tma_gnn_op_distmult(&H.b, &HI.b, &TI.b, NULL, NULL, &sd.b));
        CHECK_OK(tma_gnn_op_distmult(&H.r, &HI.r, &TI.r, NULL, NULL, &sd.r));
        agree("score", &sd);
        float *hh = malloc((size_t)(ns * d) * 4), *hs = malloc((size_t)np * 4);
        CHECK_OK(tma_gnn_tensor_download(&H.r, hh));
        CHECK_OK(tma_gnn_tensor_download(&sd.b, hs));
        for (int64_t p = 0; p < np; p++) {
            double want = 0;
            for (int64_t j = 0; j < d; j++)
                want += (double)hh[(int64_t)hi[p] * d + j] * hh[(int64_t)ti[p] * d + j];
            CHECK_NEAR(hs[p], want, 1e-5 * (1 + fabs(want)));
        }
        free(hh);
        free(hs);
        cur_op = "distmult_bwd (dot)";
        CHECK_OK(tma_gnn_op_distmult_bwd(&ds.b, &H.b, &HI.b, &TI.b, NULL, NULL, &dHd.b, NULL));
        CHECK_OK(tma_gnn_op_distmult_bwd(&ds.r, &H.r, &HI.r, &TI.r, NULL, NULL, &dHd.r, NULL));
        agree("dH", &dHd);
        /* Half a pair (rel without Wr) is a caller's bug, refused. */
        CHECK_STATUS(tma_gnn_op_distmult(&H.b, &HI.b, &TI.b, &PR.b, NULL, &sd.b), TMA_ERR_INTERNAL);
        pfree(&sd);
        pfree(&dHd);

        cur_op = "rows_gather/rows_scatter";
        int64_t *perm = malloc((size_t)ns * 8);
        int32_t *idx = malloc((size_t)ns * 4);
        for (int64_t i = 0; i < ns; i++)
            perm[i] = i;
        tma_rng_shuffle_i64(&rng, perm, ns);
        for (int64_t i = 0; i < ns; i++)
            idx[i] = (int32_t)perm[i];
        int64_t ng = ns / 2 + 1; /* a gather of some rows, a scatter into some */
        pair_t IX = mk(TMA_GNN_I32, ng, 1, idx), G = mk(TMA_GNN_F32, ng, d, NULL);
        CHECK_OK(tma_gnn_op_rows_gather(&H.b, &IX.b, &G.b));
        CHECK_OK(tma_gnn_op_rows_gather(&H.r, &IX.r, &G.r));
        agree("gathered", &G);
        pair_t Sd = mkf(ns, d, 1);
        CHECK_OK(tma_gnn_op_rows_scatter(&G.b, &IX.b, &Sd.b));
        CHECK_OK(tma_gnn_op_rows_scatter(&G.r, &IX.r, &Sd.r));
        agree("scattered (other rows kept)", &Sd);
        free(perm);
        free(idx);
        free(hi);
        free(ti);
        free(pr);
        free(ip);
        free(ix);
        free(rel);
        free(trel);
        pair_t *all[] = {&R_, &TR, &T, &A, &Y, &dY, &dT, &dA, &dT2, &dA2, &H, &Wr, &HI, &TI, &PR, &sc, &ds, &dH, &dWr,
                         &IX, &G, &Sd};
        for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
            pfree(all[i]);
        free_block(&bp);
    }
}

/* MRR scoring against fixed negatives (an optional op: the evaluator ranks
 * on the host where a backend lacks it), with planted ties. */
/* GAT: the scores, the attention-weighted aggregation (heads side by side
 * and averaged, destinations offset into the rows as the evaluator's
 * chunks are) and its backward, against the reference. */
static void test_gat(void)
{
    /* n_dst, n_src, max degree, heads, head width, mean */
    const int64_t shapes[][6] = {{1, 1, 1, 1, 1, 0},   {20, 50, 6, 3, 5, 0}, {20, 50, 6, 3, 5, 1},
                                 {300, 900, 12, 4, 16, 0}, {64, 100, 5, 1, 37, 1}, {7, 30, 20, 8, 3, 1}};
    for (size_t s = 0; s < TMA_ARRAY_LEN(shapes); s++) {
        const int64_t nd = shapes[s][0], ns = shapes[s][1], K = shapes[s][3], C = shapes[s][4];
        const int64_t d = shapes[s][5] ? C : K * C;
        blk_pair_t bp = mk_block(nd, ns, (int)shapes[s][2]);
        const int64_t ne = bp.b.num_edges;
        pair_t T = mkf(ns, K * C, 1), as = mkf(K, C, 1), ad = mkf(K, C, 1), S = mk(TMA_GNN_F32, ns, 2 * K, NULL);
        cur_op = "gat_scores";
        CHECK_OK(tma_gnn_op_gat_scores(&T.b, &as.b, &ad.b, &S.b));
        CHECK_OK(tma_gnn_op_gat_scores(&T.r, &as.r, &ad.r, &S.r));
        agree("S", &S);
        pair_t al = mk(TMA_GNN_F32, ne, K, NULL), Y = mk(TMA_GNN_F32, nd, d, NULL);
        for (int64_t self0 = 0; self0 <= ns - nd; self0 += ns - nd > 0 ? ns - nd : 1) {
            cur_op = "gat_aggregate";
            CHECK_OK(tma_gnn_op_gat_aggregate(&bp.b, &T.b, &S.b, self0, &al.b, &Y.b));
            CHECK_OK(tma_gnn_op_gat_aggregate(&bp.r, &T.r, &S.r, self0, &al.r, &Y.r));
            agree("alpha", &al);
            agree("Y", &Y);
        }
        CHECK_OK(tma_gnn_op_gat_aggregate(&bp.b, &T.b, &S.b, 0, &al.b, &Y.b));
        CHECK_OK(tma_gnn_op_gat_aggregate(&bp.r, &T.r, &S.r, 0, &al.r, &Y.r));
        cur_op = "gat_aggregate_bwd";
        pair_t dY = mkf(nd, d, 1), dE = mk(TMA_GNN_F32, ne, K, NULL), dS = mk(TMA_GNN_F32, ns, 2 * K, NULL);
        pair_t dT = mk(TMA_GNN_F32, ns, K * C, NULL), das = mk(TMA_GNN_F32, K, C, NULL), dad = mk(TMA_GNN_F32, K, C, NULL);
        CHECK_OK(tma_gnn_op_gat_aggregate_bwd(&bp.b, &T.b, &S.b, &al.b, &as.b, &ad.b, &dY.b, &dE.b, &dS.b, &dT.b,
                                              &das.b, &dad.b));
        CHECK_OK(tma_gnn_op_gat_aggregate_bwd(&bp.r, &T.r, &S.r, &al.r, &as.r, &ad.r, &dY.r, &dE.r, &dS.r, &dT.r,
                                              &das.r, &dad.r));
        agree("dS (the scores' gradient)", &dS);
        agree("dT", &dT);
        agree("da_src", &das);
        agree("da_dst", &dad);
        /* A Y neither K x C nor C wide is refused. */
        if (K > 1 && C > 1) {
            tensor_t bad = tma_gnn_tensor_shape(&Y.b, nd, C - 1);
            CHECK_STATUS(tma_gnn_op_gat_aggregate(&bp.b, &T.b, &S.b, 0, &al.b, &bad), TMA_ERR_INTERNAL);
        }
        pair_t *ps[] = {&T, &as, &ad, &S, &al, &Y, &dY, &dE, &dS, &dT, &das, &dad};
        for (size_t i = 0; i < TMA_ARRAY_LEN(ps); i++)
            pfree(ps[i]);
        free_block(&bp);
    }
}

static void test_mrr(void)
{
    if (!B->ops->mrr_sum)
        return;
    cur_op = "mrr_sum";
    for (int64_t rows = 1; rows < 3000; rows = rows * 9 + 2) {
        for (int64_t per = 2; per < 700; per = per * 5 + 1) {
            float *h = rand_floats(rows * per, 3);
            for (int64_t i = 0; i < rows; i += 3)
                h[i * per + 1 + (i % (per - 1))] = h[i * per]; /* a tie counts against the positive */
            pair_t S = mk(TMA_GNN_F32, rows, per, h);
            double sb = NAN, sr = NAN;
            CHECK_OK(tma_gnn_op_mrr_sum(&S.b, &sb));
            CHECK_OK(tma_gnn_op_mrr_sum(&S.r, &sr));
            agree_double("sum", sb, sr);
            free(h);
            pfree(&S);
        }
    }
}

/* The fused MLP decoder scoring (an optional op: the evaluator runs
 * pair_mul, matmul, bias_prelu and add_bias where a backend lacks it)
 * against those ops on the reference, with scratch for one row a thread
 * (every block one row) and for long blocks. */
static void test_score_mlp(void)
{
    if (!B->ops->score_mlp)
        return;
    cur_op = "score_mlp";
    static const int64_t widths[][4] = {{16, 1}, {40, 24, 1}, {7, 33, 5, 1}, {64, 48, 1}};
    static const int depths[] = {1, 2, 3, 2};
    for (int c = 0; c < 4; c++) {
        const int L = depths[c];
        const int64_t d = widths[c][0], nodes = 53;
        int64_t widest = d;
        for (int k = 0; k < L; k++)
            widest = TMA_MAX(widest, widths[c][k + 1]);
        for (int64_t np = 1; np < 2000; np = np * 7 + 3) {
            pair_t H = mkf(nodes, d, 1.0), Wt[3], bt[3], at[3];
            int32_t *ih = malloc((size_t)np * 4), *it = malloc((size_t)np * 4);
            for (int64_t p = 0; p < np; p++) {
                ih[p] = (int32_t)tma_rng_below(&rng, (uint64_t)nodes);
                it[p] = (int32_t)tma_rng_below(&rng, (uint64_t)nodes);
            }
            pair_t hi = mk(TMA_GNN_I32, np, 1, ih), ti = mk(TMA_GNN_I32, np, 1, it);
            const tensor_t *Wb[3], *bb[3], *ab[3];
            for (int k = 0; k < L; k++) {
                Wt[k] = mkf(widths[c][k], widths[c][k + 1], 0.5);
                bt[k] = mkf(1, widths[c][k + 1], 0.5);
                float slope = 0.25f;
                at[k] = mk(TMA_GNN_F32, 1, 1, &slope);
                Wb[k] = &Wt[k].b;
                bb[k] = &bt[k].b;
                ab[k] = &at[k].b;
            }
            /* The reference: the unfused ops. */
            pair_t E[2] = {mk(TMA_GNN_F32, np, widest, NULL), mk(TMA_GNN_F32, np, widest, NULL)};
            pair_t out = mk(TMA_GNN_F32, np, 1, NULL);
            tensor_t x = tma_gnn_tensor_shape(&E[0].r, np, d);
            CHECK_OK(tma_gnn_op_pair_mul(&H.r, &hi.r, &ti.r, &x));
            for (int k = 0; k < L; k++) {
                int64_t o = widths[c][k + 1];
                tensor_t y = k == L - 1 ? out.r : tma_gnn_tensor_shape(&E[(k + 1) & 1].r, np, o);
                CHECK_OK(tma_gnn_op_matmul(&x, 0, &Wt[k].r, 0, 1.0f, 0.0f, &y));
                if (k < L - 1)
                    CHECK_OK(tma_gnn_op_bias_prelu(&y, &bt[k].r, &at[k].r, &y));
                else
                    CHECK_OK(tma_gnn_op_add_bias(&y, &bt[k].r));
                x = y;
            }
            for (int big = 0; big < 2; big++) {
                int64_t n = (big ? 300 : 2) * widest * tma_gnn_backend_threads(B);
                pair_t S = mk(TMA_GNN_F32, n, 1, NULL);
                CHECK_OK(tma_gnn_op_score_mlp(&H.b, &hi.b, &ti.b, L, Wb, bb, ab, &S.b, &out.b));
                agree(big ? "logits (long blocks)" : "logits (one-row blocks)", &out);
                pfree(&S);
            }
            /* Too little scratch is a shape error, not an overrun. */
            pair_t small = mk(TMA_GNN_F32, 2 * widest * tma_gnn_backend_threads(B) - 1, 1, NULL);
            CHECK_MSG(tma_gnn_op_score_mlp(&H.b, &hi.b, &ti.b, L, Wb, bb, ab, &small.b, &out.b) != TMA_OK,
                      "score_mlp accepted too little scratch");
            pfree(&small);
            for (int k = 0; k < L; k++) {
                pfree(&Wt[k]);
                pfree(&bt[k]);
                pfree(&at[k]);
            }
            pfree(&E[0]);
            pfree(&E[1]);
            pfree(&out);
            pfree(&hi);
            pfree(&ti);
            pfree(&H);
            free(ih);
            free(it);
        }
    }
}

static void test_loss_adam(void)
{
    cur_op = "bce_logits";
    for (int64_t n = 1; n < 2000; n = n * 7 + 1) {
        pair_t x = mkf(n, 1, 8), dl = mk(TMA_GNN_F32, n, 1, NULL);
        float *lab = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++)
            lab[i] = i < n / 2 ? 1.0f : 0.0f;
        pair_t y = mk(TMA_GNN_F32, n, 1, lab);
        double lb, lr;
        CHECK_OK(tma_gnn_op_bce_logits(&x.b, &y.b, &lb, &dl.b));
        CHECK_OK(tma_gnn_op_bce_logits(&x.r, &y.r, &lr, &dl.r));
        agree_double("loss", lb, lr);
        agree("dlogits", &dl);
        free(lab);
        pfree(&x);
        pfree(&y);
        pfree(&dl);
    }
    cur_op = "adam";
    for (int64_t n = 1; n < 100000; n = n * 13 + 3) {
        pair_t p = mkf(n, 1, 1), g = mkf(n, 1, 0.1), m = mkf(n, 1, 0.01), v = mkf(n, 1, 0.0);
        /* v must be >= 0 */
        float *vh = rand_floats(n, 1e-3);
        for (int64_t i = 0; i < n; i++)
            vh[i] = fabsf(vh[i]);
        CHECK_OK(tma_gnn_tensor_upload(&v.b, vh));
        CHECK_OK(tma_gnn_tensor_upload(&v.r, vh));
        free(vh);
        for (int64_t step = 1; step <= 3; step++) {
            tma_gnn_adam_t h = {1e-3f, 0.9f, 0.999f, 1e-8f, step};
            CHECK_OK(tma_gnn_op_adam(&p.b, &g.b, &m.b, &v.b, &h));
            CHECK_OK(tma_gnn_op_adam(&p.r, &g.r, &m.r, &v.r, &h));
        }
        agree("p", &p);
        agree("m", &m);
        agree("v", &v);
        pfree(&p);
        pfree(&g);
        pfree(&m);
        pfree(&v);
    }
}

/* The fused inference layer (an optional op: the evaluator runs spmm or
 * feat_aggregate, matmul, add_bias and ln_prelu_fwd where a backend lacks
 * it) against those ops on the reference: GCN (no self weight) and SAGE,
 * with and without the activation, from a table and from dense features
 * through ids (consecutive and shuffled), with scratch for one row a
 * thread (every tile one row) and for long tiles. */
/* x rounded through feature type t: returns the stored elements (malloc'd,
 * for the backend under test) and widens them back into x (for the
 * reference, which then sees exactly the values the backend widens). */
static void *round_through(float *x, int64_t n, tma_feat_dtype_t t)
{
    void *raw = malloc((size_t)n * tma_feat_dtype_size(t));
    tma_feat_narrow(x, (size_t)n, t, raw);
    tma_feat_widen(raw, t, (size_t)n, x);
    return raw;
}

static void test_layer_infer(void)
{
    if (!B->ops->layer_infer)
        return;
    cur_op = "layer_infer";
    /* n_dst, n_src, max degree, d_in, d_out */
    static const int64_t shapes[][5] = {{1, 3, 2, 5, 4}, {300, 700, 12, 40, 24}, {130, 260, 6, 64, 37}};
    /* Each shape with f32, f16 and bf16 features (16-bit ones widened row by row). */
    for (size_t k = 0; k < 3 * TMA_ARRAY_LEN(shapes); k++) {
        const size_t c = k % TMA_ARRAY_LEN(shapes);
        const tma_feat_dtype_t dt = (tma_feat_dtype_t)(k / TMA_ARRAY_LEN(shapes));
        const int64_t nd = shapes[c][0], ns = shapes[c][1], d = shapes[c][3], h = shapes[c][4];
        const int64_t N = ns + 9, self0 = ns - nd;
        blk_pair_t bp = mk_block(nd, ns, (int)shapes[c][2]);
        pair_t X = mkf(ns, d, 1), W = mkf(d, h, 0.5), Ws = mkf(d, h, 0.5), bias = mkf(1, h, 0.5);
        pair_t gamma = mkf(1, h, 1), beta = mkf(1, h, 0.5);
        float slope = 0.25f;
        pair_t a = mk(TMA_GNN_F32, 1, 1, &slope);
        /* Dense features of N nodes, the sources' rows through ids. */
        float *fx = rand_floats(N * d, 1);
        tma_gnn_feat_t *fb, *fr;
        void *fraw = round_through(fx, N * d, dt);
        CHECK_OK(tma_gnn_feat_create(B, fraw, dt, N, d, TMA_GNN_FEAT_DENSE, &fb));
        CHECK_OK(tma_gnn_feat_create(R, fx, TMA_FEAT_F32, N, d, TMA_GNN_FEAT_DENSE, &fr));
        int64_t *idh = malloc((size_t)N * 8);
        for (int from = 0; from < 3; from++) {
            /* from: 0 the table X, 1 features through consecutive ids, 2 through shuffled ids */
            for (int64_t i = 0; i < N; i++)
                idh[i] = i;
            if (from == 2)
                tma_rng_shuffle_i64(&rng, idh, N);
            else
                for (int64_t i = 0; i < ns; i++)
                    idh[i] = i + 9;
            pair_t ids = mk(TMA_GNN_I64, ns, 1, idh);
            for (int sage = 0; sage < 2; sage++) {
                for (int act = 0; act < 2; act++) {
                    /* The reference: the separate ops. */
                    pair_t A = mk(TMA_GNN_F32, nd, d, NULL), Y = mk(TMA_GNN_F32, nd, h, NULL);
                    pair_t Z = mk(TMA_GNN_F32, nd, h, NULL), mean = mk(TMA_GNN_F32, nd, 1, NULL);
                    pair_t rstd = mk(TMA_GNN_F32, nd, 1, NULL);
                    tensor_t *z = act ? &Z.r : &Y.r;
                    if (from)
                        CHECK_OK(tma_gnn_op_feat_aggregate(fr, &ids.r, &bp.r, &A.r));
                    else
                        CHECK_OK(tma_gnn_op_spmm(&bp.r, &X.r, &A.r));
                    CHECK_OK(tma_gnn_op_matmul(&A.r, 0, &W.r, 0, 1.0f, 0.0f, z));
                    if (sage && from) {
                        tensor_t sid = tma_gnn_tensor_view(&ids.r, self0, nd, 1);
                        CHECK_OK(tma_gnn_op_feat_matmul(fr, &sid, &Ws.r, 1.0f, z));
                    } else if (sage) {
                        tensor_t xs = tma_gnn_tensor_view(&X.r, self0 * d, nd, d);
                        CHECK_OK(tma_gnn_op_matmul(&xs, 0, &Ws.r, 0, 1.0f, 1.0f, z));
                    }
                    CHECK_OK(tma_gnn_op_add_bias(z, &bias.r));
                    if (act)
                        CHECK_OK(tma_gnn_op_ln_prelu_fwd(z, &gamma.r, &beta.r, &a.r, 1e-5f, &Y.r, &mean.r,
                                                         &rstd.r));
                    tma_gnn_layer_infer_t L = {.blk = &bp.b,
                                               .X = from ? NULL : &X.b,
                                               .feat = from ? fb : NULL,
                                               .ids = from ? &ids.b : NULL,
                                               .W = &W.b,
                                               .W_self = sage ? &Ws.b : NULL,
                                               .self0 = self0,
                                               .bias = &bias.b,
                                               .gamma = &gamma.b,
                                               .beta = &beta.b,
                                               .a = act ? &a.b : NULL,
                                               .eps = 1e-5f};
                    const int64_t row = 2 * d + h, nt = tma_gnn_backend_threads(B);
                    for (int big = 0; big < 2; big++) {
                        pair_t S = mk(TMA_GNN_F32, (big ? 500 : 1) * row * nt, 1, NULL);
                        CHECK_OK(tma_gnn_op_layer_infer(&L, &S.b, &Y.b));
                        agree(big ? "Y (long tiles)" : "Y (one-row tiles)", &Y);
                        pfree(&S);
                    }
                    /* Too little scratch, or a self row past the sources, is a shape error, not an overrun. */
                    pair_t small = mk(TMA_GNN_F32, row * nt - 1, 1, NULL), S = mk(TMA_GNN_F32, row * nt, 1, NULL);
                    CHECK_MSG(tma_gnn_op_layer_infer(&L, &small.b, &Y.b) != TMA_OK,
                              "layer_infer accepted too little scratch");
                    if (sage) {
                        L.self0 = self0 + 1;
                        CHECK_MSG(tma_gnn_op_layer_infer(&L, &S.b, &Y.b) != TMA_OK,
                                  "layer_infer accepted self rows past the sources");
                    }
                    pair_t *all[] = {&A, &Y, &Z, &mean, &rstd, &small, &S};
                    for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
                        pfree(all[i]);
                }
            }
            pfree(&ids);
        }
        tma_gnn_feat_destroy(B, fb);
        tma_gnn_feat_destroy(R, fr);
        free(fx);
        free(fraw);
        free(idh);
        pair_t *all[] = {&X, &W, &Ws, &bias, &gamma, &beta, &a};
        for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
            pfree(all[i]);
        free_block(&bp);
    }
}

/* Features: random sparse-ish or dense, stored how each backend likes. */
static void test_features(void)
{
    /* Sparse and dense, each stored as f32, f16 and bf16: the backend
     * under test gets the stored elements, the reference them widened. */
    for (int k = 0; k < 6; k++) {
        const int sparse = k % 2;
        const tma_feat_dtype_t dt = (tma_feat_dtype_t)(k / 2);
        const int64_t N = 400, Fd = sparse ? 500 : 40, d = 33;
        float *X = malloc((size_t)(N * Fd) * 4);
        for (int64_t i = 0; i < N * Fd; i++)
            X[i] = sparse ? (tma_rng_uniform(&rng) < 0.03 ? (float)tma_rng_uniform(&rng) : 0.0f)
                          : (float)(2 * tma_rng_uniform(&rng) - 1);
        void *Xraw = round_through(X, N * Fd, dt);
        tma_gnn_feat_t *fb, *fr;
        CHECK_OK(tma_gnn_feat_create(B, Xraw, dt, N, Fd, 0, &fb));
        CHECK_OK(tma_gnn_feat_create(R, X, TMA_FEAT_F32, N, Fd, 0, &fr));
        /* Distinct ids (many of the nodes: the CPU backend gathers by
         * feature), a few distinct ones (it scatters), ids with repeats (it
         * must not gather), and consecutive ids (dense: used in place). */
        int64_t ids_set[4][150], lens[4] = {150, 20, 150, 150};
        int64_t *perm = malloc((size_t)N * 8);
        for (int64_t i = 0; i < N; i++)
            perm[i] = i;
        tma_rng_shuffle_i64(&rng, perm, N);
        for (int64_t i = 0; i < 150; i++) {
            ids_set[0][i] = perm[i];
            ids_set[1][i] = perm[200 + i % 20];
            ids_set[2][i] = (int64_t)tma_rng_below(&rng, 60);
            ids_set[3][i] = 100 + i;
        }
        free(perm);
        for (int which = 0; which < 4; which++) {
            const int64_t n = lens[which];
            pair_t ids = mk(TMA_GNN_I64, n, 1, ids_set[which]);
            pair_t W = mkf(Fd, d, 1), out = mk(TMA_GNN_F32, n, d, NULL);
            cur_op = "feat_matmul";
            CHECK_OK(tma_gnn_op_feat_matmul(fb, &ids.b, &W.b, 0.0f, &out.b));
            CHECK_OK(tma_gnn_op_feat_matmul(fr, &ids.r, &W.r, 0.0f, &out.r));
            agree(sparse ? "sparse" : "dense", &out);
            CHECK_OK(tma_gnn_op_feat_matmul(fb, &ids.b, &W.b, 1.0f, &out.b));
            CHECK_OK(tma_gnn_op_feat_matmul(fr, &ids.r, &W.r, 1.0f, &out.r));
            agree(sparse ? "sparse beta=1" : "dense beta=1", &out);
            cur_op = "feat_matmul_grad";
            pair_t dO = mkf(n, d, 1), dW = mk(TMA_GNN_F32, Fd, d, NULL);
            CHECK_OK(tma_gnn_op_feat_matmul_grad(fb, &ids.b, &dO.b, &dW.b));
            CHECK_OK(tma_gnn_op_feat_matmul_grad(fr, &ids.r, &dO.r, &dW.r));
            agree(sparse ? "sparse" : "dense", &dW);
            cur_op = "feat_aggregate";
            blk_pair_t bp = mk_block(60, n, 7);
            pair_t A = mk(TMA_GNN_F32, 60, Fd, NULL);
            CHECK_OK(tma_gnn_op_feat_aggregate(fb, &ids.b, &bp.b, &A.b));
            CHECK_OK(tma_gnn_op_feat_aggregate(fr, &ids.r, &bp.r, &A.r));
            agree(sparse ? "sparse" : "dense", &A);
            if (!sparse && B->ops->feat_self_aggregate) {
                /* Own rows beside the sums: the rows by id on the host, the sums feat_aggregate's on ref. */
                cur_op = "feat_self_aggregate";
                pair_t XA = mk(TMA_GNN_F32, 60, 2 * Fd, NULL);
                if (n < 60) {
                    CHECK_MSG(tma_gnn_op_feat_self_aggregate(fb, &ids.b, &bp.b, &XA.b) != TMA_OK,
                              "feat_self_aggregate accepted fewer sources than destinations");
                } else {
                    float *sum = malloc((size_t)(60 * Fd) * 4), *want = malloc((size_t)(60 * 2 * Fd) * 4);
                    CHECK_OK(tma_gnn_tensor_download(&A.r, sum));
                    for (int64_t i = 0; i < 60; i++) {
                        memcpy(want + i * 2 * Fd, X + ids_set[which][i] * Fd, (size_t)Fd * 4);
                        memcpy(want + i * 2 * Fd + Fd, sum + i * Fd, (size_t)Fd * 4);
                    }
                    CHECK_OK(tma_gnn_tensor_upload(&XA.r, want));
                    CHECK_OK(tma_gnn_op_feat_self_aggregate(fb, &ids.b, &bp.b, &XA.b));
                    agree("dense", &XA);
                    free(sum);
                    free(want);
                }
                pfree(&XA);
            }
            free_block(&bp);
            pair_t *all[] = {&ids, &W, &out, &dO, &dW, &A};
            for (size_t i = 0; i < TMA_ARRAY_LEN(all); i++)
                pfree(all[i]);
        }
        tma_gnn_feat_destroy(B, fb);
        tma_gnn_feat_destroy(R, fr);
        free(Xraw);
        free(X);
    }
}

/* 1 when the processor runs cpu_gemm.c's own products (AVX-512F). */
static int cpu_has_avx512f(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);
    const char *list = getenv("TMA_TEST_BACKENDS"), *tol = getenv("TMA_TEST_TOL");
    if (tol && *tol && (tma_parse_double(tol, &TOL) != 0 || !(TOL > 0))) {
        fprintf(stderr, "TMA_TEST_TOL=%s: expected a positive number\n", tol);
        return 2;
    }
    char buf[256];
    CHECK_OK(tma_gnn_backend_create("ref", 1, &R));
    /* TMA_CPU_GEMM picks the CPU backend's products; a value it does not
     * know is refused by name. */
    const char *gemm_env = getenv("TMA_CPU_GEMM");
    char *gemm_saved = gemm_env ? strdup(gemm_env) : NULL;
    setenv("TMA_CPU_GEMM", "fast", 1);
    CHECK_STATUS(tma_gnn_backend_create("cpu", 1, &B), TMA_ERR_CONFIG);
    /* "cpu" twice: its own AVX-512 products (where the processor has them),
     * then OpenBLAS for every product. */
    const char *names = list && *list ? list : "cpu,cpu:openblas,cpu-generic";
    snprintf(buf, sizeof buf, "%s", names);
    for (char *save = NULL, *name = strtok_r(buf, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        const char *gemm = strcmp(name, "cpu:openblas") == 0 ? "openblas" : gemm_saved;
        if (gemm)
            setenv("TMA_CPU_GEMM", gemm, 1);
        else
            unsetenv("TMA_CPU_GEMM");
        if (strcmp(name, "cpu:openblas") == 0)
            name[3] = '\0';
        for (int threads = 1; threads <= 3; threads += 2) {
            tma_status_t st = tma_gnn_backend_create(name, threads, &B);
            if (st == TMA_ERR_UNSUPPORTED) {
                fprintf(stderr, "backend %s is not built in; not tested\n", name);
                tma_test_skip("a requested backend is not in this build");
            }
            if (st == TMA_ERR_NO_DEVICE) {
                fprintf(stderr, "backend %s: no GPU on this machine; not tested\n", name);
                tma_test_skip("no GPU: the requested backend has no device here");
            }
            CHECK_OK(st);
            fprintf(stderr, "checking backend %s (%s) with %d thread(s) against ref%s%s\n", name,
                    tma_gnn_backend_name(B), threads, gemm ? ", TMA_CPU_GEMM=" : "", gemm ? gemm : "");
            if (strcmp(name, "cpu") == 0 && !(gemm && strcmp(gemm, "openblas") == 0) && threads == 1 &&
                !cpu_has_avx512f())
                fprintf(stderr, "backend cpu: the own AVX-512 products (gnn/cpu/cpu_gemm.c): not exercised on this "
                                "CPU (no AVX-512F; OpenBLAS ran every product)\n");
            tma_rng_seed(&rng, 42, (uint64_t)threads);
            test_matmul();
            test_rowwise();
            test_dropout_mask();
    test_sparse();
            test_loss_adam();
            test_mrr();
            test_score_mlp();
            test_layer_infer();
            test_features();
            test_hetero();
            test_gat();
            tma_gnn_backend_destroy(B);
        }
    }
    tma_gnn_backend_destroy(R);
    free(gemm_saved);
    return tma_test_done();
}
