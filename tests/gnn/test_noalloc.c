/*
 * test_noalloc.c: no allocation on the per-step path.  The allocator entry
 * points of everything linked statically (the tma libraries) are wrapped
 * (-Wl,--wrap) and counted; after the trainer and evaluator are built,
 * training steps (each encoder, dense and sparse features), gradient
 * exchange, parameter setting and evaluations must not call them.
 */
#include "tma_test.h"
#include "gnn_int.h"
#include "gnn_testutil.h"

#include <string.h>

static int counting;
static long calls;

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t al, size_t n);

void *__wrap_malloc(size_t n)
{
    calls += counting;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t a, size_t b)
{
    calls += counting;
    return __real_calloc(a, b);
}
void *__wrap_realloc(void *p, size_t n)
{
    calls += counting;
    return __real_realloc(p, n);
}
int __wrap_posix_memalign(void **p, size_t al, size_t n)
{
    calls += counting;
    return __real_posix_memalign(p, al, n);
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);
    /* Dense features, sparse features, and a typed graph with the heterogeneous models. */
    static const tma_gnn_encoder_t typed_enc[3] = {TMA_GNN_ENCODER_RGCN, TMA_GNN_ENCODER_GCN, TMA_GNN_ENCODER_RGCN};
    static const tma_gnn_decoder_t typed_dec[3] = {TMA_GNN_DECODER_DISTMULT, TMA_GNN_DECODER_DISTMULT,
                                                   TMA_GNN_DECODER_MLP};
    for (int kind = 0; kind < 3; kind++) {
        const int sparse = kind == 1, typed = kind == 2;
        gnn_test_graph_opts_t o;
        gnn_test_graph_defaults(&o);
        o.sparse = sparse;
        o.feature_dim = sparse ? 100 : 20;
        tma_graph_t *g = typed ? gnn_test_typed_graph(300, 4, 1.0, 2, 3, 20, 30, 50, 1) : gnn_test_graph(&o);
        for (int e = 0; e < 3; e++) {
            tma_gnn_config_t c;
            tma_gnn_config_default(&c);
            c.encoder = typed ? typed_enc[e] : (tma_gnn_encoder_t)e;
            c.decoder = typed ? typed_dec[e] : TMA_GNN_DECODER_MLP;
            c.hidden = 16;
            c.decoder_hidden = 8;
            c.batch_size = 32;
            c.threads = 2;
            tma_gnn_trainer_t *tr;
            tma_gnn_evaluator_t *ev;
            calls = 0;
            counting = 1;
            CHECK_OK(tma_gnn_trainer_create(&c, &g, 1, &tr));
            CHECK_OK(tma_gnn_evaluator_create(&c, g, &ev));
            counting = 0;
            CHECK_MSG(calls > 0, "the allocator wrappers saw nothing: the test cannot work");
            int64_t n = tma_gnn_trainer_param_count(tr);
            float *p = malloc((size_t)n * 4), *gr = malloc((size_t)n * 4);
            double mrr;
            CHECK_OK(tma_gnn_trainer_step(tr, NULL)); /* first-use effects (OpenBLAS buffers) */
            CHECK_OK(tma_gnn_evaluator_mrr(ev, p, TMA_GNN_SPLIT_VAL, &mrr));
            calls = 0;
            counting = 1;
            for (int s = 0; s < 5; s++) {
                float loss;
                CHECK_OK(tma_gnn_trainer_compute_grads(tr, &loss));
                CHECK_OK(tma_gnn_trainer_get_grads(tr, gr));
                CHECK_OK(tma_gnn_trainer_set_grads(tr, gr));
                CHECK_OK(tma_gnn_trainer_apply_grads(tr));
                CHECK_OK(tma_gnn_trainer_step(tr, &loss));
            }
            CHECK_OK(tma_gnn_trainer_get_params(tr, p));
            CHECK_OK(tma_gnn_trainer_set_params(tr, p));
            CHECK_OK(tma_gnn_evaluator_mrr(ev, p, TMA_GNN_SPLIT_VAL, &mrr));
            CHECK_OK(tma_gnn_evaluator_mrr(ev, p, TMA_GNN_SPLIT_TEST, &mrr));
            counting = 0;
            CHECK_MSG(calls == 0, "%s + %s (%s): %ld allocations during steps and evaluations",
                      tma_gnn_encoder_name(c.encoder), tma_gnn_decoder_name(c.decoder),
                      typed ? "typed graph" : sparse ? "sparse features" : "dense features", calls);
            free(p);
            free(gr);
            tma_gnn_evaluator_destroy(ev);
            tma_gnn_trainer_destroy(tr);
        }
        tma_graph_destroy(g);
    }
    return tma_test_done();
}
