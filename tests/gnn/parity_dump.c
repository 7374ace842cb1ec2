/*
 * parity_dump.c: runs a few training steps of a small model and writes
 * everything a PyTorch reimplementation needs to redo them (the features,
 * the initial parameter block and its layout, each step's sampled batch)
 * and what it must agree with (each step's loss and gradient block before
 * clipping, and the parameter block after the Adam step); then the final
 * parameters' full-neighbourhood embeddings and validation MRR from the
 * evaluator (forced into several chunks).  Used by
 * test_parity.sh with parity_torch.py.
 *
 *   parity_dump OUTDIR ENCODER SPARSE LAYERS DECODER_LAYERS CLIP STEPS [HEADS]
 *
 * $TMA_TEST_BACKEND picks the device of the trainer and the evaluator (cpu).
 */
#include "tma_test.h"
#include "gnn_int.h"
#include "gnn_testutil.h"

#include <string.h>

static const char *outdir;

static void dump(const char *name, const void *data, size_t bytes) { gnn_test_dump(outdir, name, data, bytes); }

int main(int argc, char **argv)
{
    if (argc != 8 && argc != 9) {
        fprintf(stderr, "usage: parity_dump OUTDIR ENCODER SPARSE LAYERS DECODER_LAYERS CLIP STEPS [HEADS]\n");
        return 2;
    }
    outdir = argv[1];
    tma_log_set_level(TMA_LOG_WARN);
    gnn_test_graph_opts_t go;
    gnn_test_graph_defaults(&go);
    go.nodes = 160;
    go.avg_degree = 9;
    go.sparse = atoi(argv[3]);
    go.feature_dim = go.sparse ? 90 : 14;
    go.val = 10;
    go.test = 10;
    go.negatives = 20;
    go.seed = 7;
    tma_graph_t *g = gnn_test_graph(&go);

    tma_gnn_config_t cfg;
    tma_gnn_config_default(&cfg);
    CHECK_OK(tma_gnn_encoder_parse(argv[2], &cfg.encoder));
    cfg.heads = argc == 9 ? atoi(argv[8]) : 1;
    const char *dev = getenv("TMA_TEST_BACKEND");
    if (!dev || !*dev)
        dev = "cpu";
    cfg.layers = atoi(argv[4]);
    cfg.decoder_layers = atoi(argv[5]);
    cfg.clip = atof(argv[6]);
    const int steps = atoi(argv[7]);
    /* not a multiple of 16: padding and odd widths are exercised (GAT: 3 heads of 7) */
    cfg.hidden = cfg.heads > 1 ? 7 * cfg.heads : 19;
    cfg.decoder_hidden = 13;
    cfg.batch_size = 12;
    cfg.fanouts[0] = 4;
    cfg.fanouts[1] = 3;
    cfg.fanouts[2] = 2;
    cfg.lr = 0.01;
    cfg.threads = 2;
    cfg.seed = 3;

    tma_gnn_trainer_t *tr;
    CHECK_OK(gnn_trainer_create_on(dev, &cfg, &g, 1, &tr));
    const tma_gnn_config_t *rc = tma_gnn_trainer_config(tr);
    tma_gnn_layout_t lay;
    CHECK_OK(tma_gnn_layout_build(rc, &lay));
    const int64_t np = tma_gnn_trainer_param_count(tr);
    float *buf = malloc((size_t)np * sizeof *buf);

    dump("features.f32", g->features, (size_t)(g->num_nodes * g->feature_dim) * 4);
    CHECK_OK(tma_gnn_trainer_get_params(tr, buf));
    dump("params_init.f32", buf, (size_t)np * 4);

    cJSON *meta = cJSON_CreateObject();
    cJSON_AddItemToObject(meta, "config", tma_gnn_config_to_json(rc));
    cJSON_AddNumberToObject(meta, "num_nodes", (double)g->num_nodes);
    cJSON_AddNumberToObject(meta, "param_count", (double)np);
    cJSON *jl = cJSON_AddArrayToObject(meta, "layout");
    for (int i = 0; i < lay.count; i++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "name", lay.params[i].name);
        cJSON_AddNumberToObject(p, "rows", (double)lay.params[i].rows);
        cJSON_AddNumberToObject(p, "cols", (double)lay.params[i].cols);
        cJSON_AddNumberToObject(p, "offset", (double)lay.params[i].offset);
        cJSON_AddItemToArray(jl, p);
    }
    cJSON *js = cJSON_AddArrayToObject(meta, "steps");
    char name[64];
    for (int s = 0; s < steps; s++) {
        float loss;
        CHECK_OK(tma_gnn_trainer_compute_grads(tr, &loss));
        gnn_batch_view_t bv;
        gnn_trainer_last_batch(tr, &bv);
        const tma_graph_sample_t *sm = bv.sample;
        cJSON *st = cJSON_CreateObject();
        cJSON_AddNumberToObject(st, "loss", loss);
        cJSON_AddNumberToObject(st, "num_nodes", (double)sm->num_nodes);
        cJSON_AddNumberToObject(st, "num_seeds", (double)sm->num_seeds);
        cJSON_AddNumberToObject(st, "num_pairs", (double)bv.num_pairs);
        snprintf(name, sizeof name, "s%d_nodes.i64", s);
        dump(name, sm->nodes, (size_t)sm->num_nodes * 8);
        snprintf(name, sizeof name, "s%d_head.i32", s);
        dump(name, bv.head, (size_t)bv.num_pairs * 4);
        snprintf(name, sizeof name, "s%d_tail.i32", s);
        dump(name, bv.tail, (size_t)bv.num_pairs * 4);
        cJSON *jb = cJSON_AddArrayToObject(st, "blocks");
        for (int l = 0; rc->encoder != TMA_GNN_ENCODER_MLP && l < rc->layers; l++) {
            const tma_graph_block_t *b = &sm->blocks[l];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "num_dst", (double)b->num_dst);
            cJSON_AddNumberToObject(o, "num_src", (double)b->num_src);
            cJSON_AddNumberToObject(o, "num_edges", (double)b->num_edges);
            cJSON_AddItemToArray(jb, o);
            snprintf(name, sizeof name, "s%d_b%d_indptr.i32", s, l);
            dump(name, b->indptr, (size_t)(b->num_dst + 1) * 4);
            snprintf(name, sizeof name, "s%d_b%d_indices.i32", s, l);
            dump(name, b->indices, (size_t)b->num_edges * 4);
            snprintf(name, sizeof name, "s%d_b%d_weights.f32", s, l);
            dump(name, b->weights, (size_t)b->num_edges * 4);
        }
        CHECK_OK(tma_gnn_trainer_get_grads(tr, buf));
        snprintf(name, sizeof name, "s%d_grads.f32", s);
        dump(name, buf, (size_t)np * 4);
        CHECK_OK(tma_gnn_trainer_apply_grads(tr));
        /* apply_grads clipped the gradient block in place */
        CHECK_OK(tma_gnn_trainer_get_grads(tr, buf));
        snprintf(name, sizeof name, "s%d_clipped.f32", s);
        dump(name, buf, (size_t)np * 4);
        CHECK_OK(tma_gnn_trainer_get_params(tr, buf));
        snprintf(name, sizeof name, "s%d_params.f32", s);
        dump(name, buf, (size_t)np * 4);
        cJSON_AddItemToArray(js, st);
    }
    /* Full-neighbourhood inference with the final parameters, in several
     * chunks, and the validation MRR. */
    tma_gnn_evaluator_t *ev;
    CHECK_OK(gnn_evaluator_create_on(dev, rc, g, &ev));
    gnn_evaluator_set_chunk_rows(ev, 37);
    CHECK_OK(tma_gnn_trainer_get_params(tr, buf));
    float *emb = malloc((size_t)(g->num_nodes * rc->hidden) * 4);
    CHECK_OK(tma_gnn_evaluator_embeddings(ev, buf, emb));
    double mrr;
    CHECK_OK(tma_gnn_evaluator_mrr(ev, buf, TMA_GNN_SPLIT_VAL, &mrr));
    cJSON_AddNumberToObject(meta, "val_mrr", mrr);
    cJSON_AddNumberToObject(meta, "num_val", (double)g->num_val);
    cJSON_AddNumberToObject(meta, "num_negatives", g->num_negatives);
    dump("eval_emb.f32", emb, (size_t)(g->num_nodes * rc->hidden) * 4);
    dump("train_indptr.i64", g->indptr, (size_t)(g->num_nodes + 1) * 8);
    dump("train_indices.i64", g->indices, (size_t)(2 * g->num_train_edges) * 8);
    dump("val_edges.i64", g->val_edges, (size_t)(2 * g->num_val) * 8);
    dump("val_neg.i64", g->val_neg, (size_t)(g->num_val * g->num_negatives) * 8);
    free(emb);
    tma_gnn_evaluator_destroy(ev);

    gnn_test_dump_json(outdir, "meta.json", meta);
    cJSON_Delete(meta);
    free(buf);
    tma_gnn_trainer_destroy(tr);
    tma_graph_destroy(g);
    return tma_test_done();
}
