/*
 * test_cuda_step.c: whole training steps and evaluations, CPU against CUDA
 * (skipped, exit 77, where there is no GPU or no CUDA build).  For each
 * encoder, on dense and on sparse features: the same seed (so the same
 * sampled batches: sampling runs on the CPU either way) and the same
 * initial weights give the same loss and gradients within 1e-4 (relative
 * to the largest) for three steps, and the same weights after them; then
 * both evaluators score the same weights: every validation and test
 * score within 1e-4 (relative to the split's largest), and their MRRs
 * agree up to ranking ties (scores that differ by float rounding may swap
 * places).  Also GAT (several heads and one), SAGE's inference in id
 * order, and the typed models (RGCN
 * with bases, GCN and RGCN with DistMult, RGCN with the MLP decoder) on a
 * typed graph.
 */
#include "tma_test.h"
#include "gnn_int.h"
#include "gnn/gnn_testutil.h"
#include "gpu_testutil.h"

#include <math.h>
#include <string.h>

static double max_rel(const float *a, const float *b, int64_t n)
{
    double mx = 1e-30, e = 0;
    int64_t nan = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i]))
            nan++;
        mx = fmax(mx, fabs(b[i]));
        e = fmax(e, fabs((double)a[i] - b[i]));
    }
    return nan ? INFINITY : e / mx;
}

static tma_gnn_config_t step_config(tma_gnn_encoder_t enc, tma_gnn_decoder_t dec)
{
    tma_gnn_config_t c = gnn_test_config(enc, 48, 32, 128, 8, 5, 23);
    c.decoder = dec;
    c.bases = 3;
    return c;
}

/* Every validation and test score of the same weights on both evaluators,
 * relative to the largest score of the split. */
static void check_scores(tma_gnn_evaluator_t *ec, tma_gnn_evaluator_t *eg, const float *params,
                         const tma_graph_t *g, const char *what, const char *model)
{
    const int64_t per = 1 + g->num_negatives;
    for (int split = 0; split < 2; split++) {
        const int64_t n = tma_gnn_evaluator_edges(ec, (tma_gnn_split_t)split) * per;
        CHECK_MSG(n == tma_gnn_evaluator_edges(eg, (tma_gnn_split_t)split) * per,
                  "%s %s split %d: %lld scores on cpu, %lld on cuda", what, model, split, (long long)n,
                  (long long)(tma_gnn_evaluator_edges(eg, (tma_gnn_split_t)split) * per));
        float *sc = malloc((size_t)n * 4), *sg = malloc((size_t)n * 4);
        CHECK_OK(tma_gnn_evaluator_scores(ec, params, (tma_gnn_split_t)split, sc, NULL));
        CHECK_OK(tma_gnn_evaluator_scores(eg, params, (tma_gnn_split_t)split, sg, NULL));
        double e = max_rel(sg, sc, n);
        CHECK_MSG(e <= 1e-4, "%s %s split %d: scores differ by %.3g (relative to the largest)", what, model,
                  split, e);
        fprintf(stderr, "%s %s split %d: scores within %.3g\n", what, model, split, e);
        free(sc);
        free(sg);
    }
}

static void check_step(tma_graph_t *g, tma_gnn_config_t c, const char *what)
{
    char model[64];
    snprintf(model, sizeof model, "%s+%s%s", tma_gnn_encoder_name(c.encoder), tma_gnn_decoder_name(c.decoder),
             c.eval_locality ? "" : " (id order)");
    tma_gnn_trainer_t *cpu, *gpu;
    CHECK_OK(gnn_trainer_create_on("cpu", &c, &g, 1, &cpu));
    CHECK_OK(gnn_trainer_create_on("cuda", &c, &g, 1, &gpu));
    const int64_t n = tma_gnn_trainer_param_count(cpu);
    ASSERT_EQ(n, tma_gnn_trainer_param_count(gpu));
    float *g1 = malloc((size_t)n * 4), *g2 = malloc((size_t)n * 4);
    for (int s = 0; s < 3; s++) {
        float l1 = NAN, l2 = NAN;
        CHECK_OK(tma_gnn_trainer_compute_grads(gpu, &l1));
        CHECK_OK(tma_gnn_trainer_compute_grads(cpu, &l2));
        CHECK_MSG(fabs(l1 - l2) <= 1e-4 * fabs(l2), "%s %s step %d: loss %.9g on cuda, %.9g on cpu", what,
                  model, s, l1, l2);
        CHECK_OK(tma_gnn_trainer_get_grads(gpu, g1));
        CHECK_OK(tma_gnn_trainer_get_grads(cpu, g2));
        double e = max_rel(g1, g2, n);
        CHECK_MSG(e <= 1e-4, "%s %s step %d: gradients differ by %.3g (relative to the largest)", what,
                  model, s, e);
        CHECK_OK(tma_gnn_trainer_apply_grads(gpu));
        CHECK_OK(tma_gnn_trainer_apply_grads(cpu));
    }
    CHECK_OK(tma_gnn_trainer_get_params(gpu, g1));
    CHECK_OK(tma_gnn_trainer_get_params(cpu, g2));
    CHECK_MSG(max_rel(g1, g2, n) <= 1e-4, "%s %s: weights after 3 steps differ by %.3g", what,
              model, max_rel(g1, g2, n));

    /* Evaluation of the same (CPU) weights on both. */
    tma_gnn_evaluator_t *ec, *eg;
    CHECK_OK(gnn_evaluator_create_on("cpu", tma_gnn_trainer_config(cpu), g, &ec));
    CHECK_OK(gnn_evaluator_create_on("cuda", tma_gnn_trainer_config(cpu), g, &eg));
    for (int split = 0; split < 2; split++) {
        double mc = NAN, mg = NAN;
        CHECK_OK(tma_gnn_evaluator_mrr(ec, g2, (tma_gnn_split_t)split, &mc));
        CHECK_OK(tma_gnn_evaluator_mrr(eg, g2, (tma_gnn_split_t)split, &mg));
        /* A swap of two near-tied scores moves one edge's reciprocal rank
         * by at most 1/2: allow that for one edge in a hundred. */
        int64_t edges = split ? g->num_test : g->num_val;
        double tol = 1e-6 + 0.5 * ceil(0.01 * (double)edges) / (double)edges;
        CHECK_MSG(!isnan(mg) && fabs(mc - mg) <= tol, "%s %s split %d: MRR %.6f on cuda, %.6f on cpu", what,
                  model, split, mg, mc);
        fprintf(stderr, "%s %s split %d: MRR cpu %.6f cuda %.6f\n", what, model, split, mc,
                mg);
    }
    check_scores(ec, eg, g2, g, what, model);
    tma_gnn_evaluator_destroy(ec);
    tma_gnn_evaluator_destroy(eg);
    /* Inference in many chunks (37 rows), with the blocks built once
     * (eval.block_cache_mb) and at every inference. */
    for (int cache = 0; cache < 2; cache++) {
        tma_gnn_config_t ce = *tma_gnn_trainer_config(cpu);
        ce.eval_block_cache_mb = cache ? 256 : 0;
        CHECK_OK(gnn_evaluator_create_on("cpu", &ce, g, &ec));
        CHECK_OK(gnn_evaluator_create_on("cuda", &ce, g, &eg));
        gnn_evaluator_set_chunk_rows(ec, 37);
        gnn_evaluator_set_chunk_rows(eg, 37);
        char chunked[160];
        snprintf(chunked, sizeof chunked, "%s (chunks of 37 rows, blocks %s)", model,
                 cache ? "built once" : "built at every inference");
        check_scores(ec, eg, g2, g, what, chunked);
        tma_gnn_evaluator_destroy(ec);
        tma_gnn_evaluator_destroy(eg);
    }
    free(g1);
    free(g2);
    tma_gnn_trainer_destroy(cpu);
    tma_gnn_trainer_destroy(gpu);
}

int main(void)
{
    gpu_test_require();
    tma_log_set_level(TMA_LOG_ERROR);
    gnn_test_graph_opts_t o;
    gnn_test_graph_defaults(&o);
    o.nodes = 2000;
    o.val = 200;
    o.test = 200;
    tma_graph_t *g = gnn_test_graph(&o);
    o.sparse = 1;
    o.feature_dim = 300;
    tma_graph_t *gs = gnn_test_graph(&o);
    for (int e = 0; e < 3; e++) {
        check_step(g, step_config((tma_gnn_encoder_t)e, TMA_GNN_DECODER_MLP), "dense");
        check_step(gs, step_config((tma_gnn_encoder_t)e, TMA_GNN_DECODER_MLP), "sparse");
    }
    /* Inference in id order (no permuted feature copy) as well as the
     * default locality order. */
    tma_gnn_config_t c = step_config(TMA_GNN_ENCODER_SAGE, TMA_GNN_DECODER_MLP);
    c.eval_locality = 0;
    check_step(g, c, "dense");
    /* The dot decoder (the DistMult op without relations), and several negatives a positive. */
    check_step(g, step_config(TMA_GNN_ENCODER_GCN, TMA_GNN_DECODER_DOT), "dense");
    c = step_config(TMA_GNN_ENCODER_SAGE, TMA_GNN_DECODER_MLP);
    c.negatives = 4;
    check_step(g, c, "dense, 4 negatives");
    /* GAT: 4 heads (concatenated in the hidden layer, averaged in the last),
     * dense and sparse features; one head with the dot decoder. */
    c = step_config(TMA_GNN_ENCODER_GAT, TMA_GNN_DECODER_MLP);
    c.heads = 4;
    check_step(g, c, "dense");
    check_step(gs, c, "sparse");
    c = step_config(TMA_GNN_ENCODER_GAT, TMA_GNN_DECODER_DOT);
    check_step(g, c, "dense");
    /* Typed graphs: RGCN with bases and the per-type projection, DistMult. */
    tma_graph_t *gt = gnn_test_typed_graph(1500, 4, 0.5, 2, 3, 32, 150, 20, 29);
    check_step(gt, step_config(TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_DISTMULT), "typed");
    check_step(gt, step_config(TMA_GNN_ENCODER_GCN, TMA_GNN_DECODER_DISTMULT), "typed");
    check_step(gt, step_config(TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_MLP), "typed");
    check_step(gt, step_config(TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_DOT), "typed");
    tma_graph_destroy(gt);
    tma_graph_destroy(g);
    tma_graph_destroy(gs);
    return tma_test_done();
}
