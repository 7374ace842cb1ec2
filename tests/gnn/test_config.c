/* test_config.c: model configs from JSON (defaults, every key, refusals
 * naming the key), the config hash, the parameter layout and seeded init. */
#include "tma_test.h"
#include "tma_gnn.h"

#include <math.h>
#include <string.h>

static tma_status_t parse(const char *text, tma_gnn_config_t *cfg)
{
    cJSON *root = cJSON_Parse(text);
    if (!root) {
        fprintf(stderr, "bad test JSON: %s\n", text);
        exit(99);
    }
    tma_status_t st = tma_gnn_config_from_json(root, "test.json", cfg);
    cJSON_Delete(root);
    return st;
}

/* The config is refused and the log names `key`. */
static void refused(const char *text, const char *key)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    tma_log_set_stream(mem);
    tma_gnn_config_t cfg;
    tma_status_t st = parse(text, &cfg);
    fflush(mem);
    tma_log_set_stream(stderr);
    CHECK_MSG(st == TMA_ERR_CONFIG, "accepted: %s", text);
    CHECK_MSG(buf && strstr(buf, key), "the error for %s does not name \"%s\": %s", text, key, buf ? buf : "");
    fclose(mem);
    free(buf);
}

/* Heterogeneous models: rgcn with bases, the distmult decoder, the number
 * of relation ids recorded like feature_dim; untyped configs unchanged. */
static void check_hetero(void)
{
    tma_gnn_config_t c, d;
    tma_gnn_config_default(&d);
    ASSERT_EQ(d.decoder, TMA_GNN_DECODER_MLP);
    ASSERT_EQ(d.bases, 4);
    ASSERT_EQ(d.num_rel_ids, 0);
    CHECK(!tma_gnn_config_relational(&d));
    CHECK_OK(parse("{\"model\": {\"encoder\": \"rgcn\", \"bases\": 3, \"decoder\": \"distmult\", "
                   "\"relations\": 6, \"feature_dim\": 5, \"hidden\": 8}}", &c));
    ASSERT_EQ(c.encoder, TMA_GNN_ENCODER_RGCN);
    ASSERT_EQ(c.decoder, TMA_GNN_DECODER_DISTMULT);
    ASSERT_EQ(c.bases, 3);
    ASSERT_EQ(c.num_rel_ids, 6);
    CHECK(tma_gnn_config_relational(&c));
    /* The model section (what weight files record) round-trips the new keys. */
    cJSON *m = tma_gnn_config_model_json(&c);
    tma_gnn_config_t back;
    CHECK_OK(tma_gnn_config_from_sections(m, NULL, NULL, "model section", &back));
    ASSERT_EQ(back.encoder, c.encoder);
    ASSERT_EQ(back.decoder, c.decoder);
    ASSERT_EQ(back.bases, 3);
    ASSERT_EQ(back.num_rel_ids, 6);
    ASSERT_EQ(tma_gnn_config_hash(&back), tma_gnn_config_hash(&c));
    cJSON_Delete(m);
    /* An untyped model's section names none of them. */
    d.feature_dim = 5;
    m = tma_gnn_config_model_json(&d);
    CHECK(!cJSON_GetObjectItem(m, "decoder") && !cJSON_GetObjectItem(m, "bases") &&
          !cJSON_GetObjectItem(m, "relations"));
    cJSON_Delete(m);
    /* The hash covers decoder, bases and relations. */
    tma_gnn_config_t b = c;
    b.bases = 4;
    ASSERT_NE(tma_gnn_config_hash(&b), tma_gnn_config_hash(&c));
    b = c;
    b.num_rel_ids = 4;
    ASSERT_NE(tma_gnn_config_hash(&b), tma_gnn_config_hash(&c));
    b = c;
    b.decoder = TMA_GNN_DECODER_MLP;
    ASSERT_NE(tma_gnn_config_hash(&b), tma_gnn_config_hash(&c));
    b = d;
    b.decoder = TMA_GNN_DECODER_DISTMULT;
    b.num_rel_ids = 1;
    ASSERT_NE(tma_gnn_config_hash(&b), tma_gnn_config_hash(&d));
    /* The layout: RGCN bases, coefficients, self-connection; DistMult's diagonals. */
    tma_gnn_layout_t lay;
    CHECK_OK(tma_gnn_layout_build(&c, &lay));
    ASSERT_STR_EQ(lay.params[0].name, "enc.0.bases");
    ASSERT_EQ(lay.params[0].rows * 100 + lay.params[0].cols, 5 * 100 + 3 * 8);
    ASSERT_STR_EQ(lay.params[1].name, "enc.0.coef");
    ASSERT_EQ(lay.params[1].rows * 100 + lay.params[1].cols, 6 * 100 + 3);
    ASSERT_STR_EQ(lay.params[2].name, "enc.0.weight_self");
    ASSERT_STR_EQ(lay.params[lay.count - 1].name, "dec.relation");
    ASSERT_EQ(lay.params[lay.count - 1].rows * 100 + lay.params[lay.count - 1].cols, 6 * 100 + 8);
    float *p = calloc((size_t)lay.total, 4);
    CHECK_OK(tma_gnn_params_init(&c, 1, p));
    ASSERT_EQ(p[lay.params[lay.count - 1].offset], 1.0f);
    free(p);
    /* Unresolved relations: no layout. */
    b = c;
    b.num_rel_ids = 0;
    ASSERT_EQ(tma_gnn_param_count(&b), -1);

    /* The per-type input projection: type_dims come first in the layout, layer 0 reads hidden. */
    b = c;
    b.num_node_types = 2;
    b.type_dims[0] = 4;
    b.type_dims[1] = 5;
    CHECK_OK(tma_gnn_layout_build(&b, &lay));
    ASSERT_STR_EQ(lay.params[0].name, "in.0.weight");
    ASSERT_EQ(lay.params[0].rows * 100 + lay.params[0].cols, 4 * 100 + 8);
    ASSERT_STR_EQ(lay.params[2].name, "in.1.weight");
    ASSERT_EQ(lay.params[2].rows, 5);
    ASSERT_STR_EQ(lay.params[4].name, "enc.0.bases");
    ASSERT_EQ(lay.params[4].rows, 8);
    ASSERT_NE(tma_gnn_config_hash(&b), tma_gnn_config_hash(&c));
    m = tma_gnn_config_model_json(&b);
    CHECK_OK(tma_gnn_config_from_sections(m, NULL, NULL, "model section", &back));
    ASSERT_EQ(back.num_node_types, 2);
    ASSERT_EQ(back.type_dims[1], 5);
    ASSERT_EQ(tma_gnn_config_hash(&back), tma_gnn_config_hash(&b));
    cJSON_Delete(m);

    refused("{\"model\": {\"encoder\": \"rgcm\"}}", "encoder");
    refused("{\"model\": {\"encoder\": \"gcn\", \"type_dims\": [3, 4]}}", "type_dims");
    refused("{\"model\": {\"encoder\": \"rgcn\", \"type_dims\": [3]}}", "type_dims");
    refused("{\"model\": {\"encoder\": \"rgcn\", \"type_dims\": [3, 0]}}", "type_dims");
    refused("{\"model\": {\"encoder\": \"rgcn\", \"type_dims\": [3, 9], \"feature_dim\": 8}}", "type_dims");
    refused("{\"model\": {\"decoder\": \"transe\"}}", "decoder");
    refused("{\"model\": {\"decoder\": 1}}", "decoder");
    refused("{\"model\": {\"bases\": 0}}", "bases");
    refused("{\"model\": {\"bases\": 1.5}}", "bases");
    refused("{\"model\": {\"relations\": -1}}", "relations");
    refused("{\"model\": {\"encoder\": \"rgcn\", \"relations\": 2000, \"bases\": 4}}", "bases");

    /* GAT: heads in range, dividing hidden when a hidden layer concatenates them; named in the section and hash */
    tma_gnn_config_t ga, gb;
    CHECK_OK(parse("{\"model\": {\"encoder\": \"gat\", \"heads\": 4, \"hidden\": 8, \"feature_dim\": 5}}", &ga));
    ASSERT_EQ(ga.heads, 4);
    CHECK_OK(parse("{\"model\": {\"encoder\": \"gat\", \"heads\": 2, \"hidden\": 8, \"feature_dim\": 5}}", &gb));
    ASSERT_NE(tma_gnn_config_hash(&ga), tma_gnn_config_hash(&gb));
    m = tma_gnn_config_model_json(&ga);
    CHECK(cJSON_GetObjectItem(m, "heads") && cJSON_GetObjectItem(m, "heads")->valueint == 4);
    cJSON_Delete(m);
    CHECK_OK(tma_gnn_layout_build(&ga, &lay));
    ASSERT_STR_EQ(lay.params[0].name, "enc.0.weight");
    ASSERT_EQ(lay.params[0].cols, 8); /* 4 heads of 2, concatenated */
    ASSERT_STR_EQ(lay.params[1].name, "enc.0.att_src");
    ASSERT_EQ(lay.params[1].rows, 4);
    ASSERT_EQ(lay.params[1].cols, 2);
    ASSERT_STR_EQ(lay.params[2].name, "enc.0.att_dst");
    ASSERT_STR_EQ(lay.params[7].name, "enc.1.weight");
    ASSERT_EQ(lay.params[7].cols, 32); /* the last layer: 4 heads of 8, averaged */
    CHECK_OK(parse("{\"model\": {\"encoder\": \"gat\", \"heads\": 3, \"hidden\": 8, \"layers\": 1}}", &ga));
    refused("{\"model\": {\"encoder\": \"gat\", \"heads\": 0}}", "heads");
    refused("{\"model\": {\"encoder\": \"gat\", \"heads\": 65}}", "heads");
    refused("{\"model\": {\"encoder\": \"gat\", \"heads\": 9, \"hidden\": 8}}", "heads");
    refused("{\"model\": {\"encoder\": \"gat\", \"heads\": 3, \"hidden\": 8}}", "heads");
    refused("{\"model\": {\"encoder\": \"gcn\", \"heads\": 2}}", "heads");
}

/* train.weight_decay and train.lr_schedule: the learning rate of each step
 * (warmup, then constant, cosine or step), their round trip through the
 * config JSON, and each bad key refused by name. */
/* The dot decoder: named in the model section and the hash (an untyped
 * model's section and hash name no decoder otherwise), no parameters. */
static void check_dot(void)
{
    tma_gnn_config_t c, mlp;
    CHECK_OK(parse("{\"model\": {\"decoder\": \"dot\", \"feature_dim\": 5, \"hidden\": 8}}", &c));
    ASSERT_EQ(c.decoder, TMA_GNN_DECODER_DOT);
    CHECK(!tma_gnn_config_relational(&c));
    CHECK_OK(parse("{\"model\": {\"feature_dim\": 5, \"hidden\": 8}}", &mlp));
    ASSERT_NE(tma_gnn_config_hash(&c), tma_gnn_config_hash(&mlp));
    cJSON *m = tma_gnn_config_model_json(&c);
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(m, "decoder")), "dot");
    tma_gnn_config_t back;
    CHECK_OK(tma_gnn_config_from_sections(m, NULL, NULL, "model section", &back));
    ASSERT_EQ(back.decoder, TMA_GNN_DECODER_DOT);
    ASSERT_EQ(tma_gnn_config_hash(&back), tma_gnn_config_hash(&c));
    cJSON_Delete(m);
    char diff[256];
    tma_gnn_config_model_diff(&mlp, &c, diff, sizeof diff);
    ASSERT_STR_EQ(diff, "decoder is mlp there, dot here");
    /* The encoder's blocks only: the same layout as the MLP decoder's without "dec.". */
    tma_gnn_layout_t lay, lm;
    CHECK_OK(tma_gnn_layout_build(&c, &lay));
    CHECK_OK(tma_gnn_layout_build(&mlp, &lm));
    for (int i = 0; i < lay.count; i++)
        CHECK_MSG(strncmp(lay.params[i].name, "dec", 3) != 0, "dot decoder has a parameter %s", lay.params[i].name);
    ASSERT_LT(lay.total, lm.total);
    refused("{\"model\": {\"decoder\": \"dott\"}}", "dot");
}

static void check_schedules(void)
{
    tma_gnn_config_t c;
    CHECK_OK(parse("{\"train\": {\"lr\": 0.1}}", &c));
    ASSERT_EQ(c.lr_schedule.kind, TMA_GNN_LR_CONSTANT);
    ASSERT_EQ(c.weight_decay, 0.0);
    ASSERT_NEAR(tma_gnn_lr_at(&c, 0), 0.1, 1e-15);
    ASSERT_NEAR(tma_gnn_lr_at(&c, 123456), 0.1, 1e-15);

    CHECK_OK(parse("{\"train\": {\"lr\": 0.1, \"weight_decay\": 0.01, \"lr_schedule\": {\"kind\": \"constant\", "
                   "\"warmup_steps\": 4}}}", &c));
    ASSERT_NEAR(c.weight_decay, 0.01, 0);
    ASSERT_NEAR(tma_gnn_lr_at(&c, 0), 0.025, 1e-15); /* lr * 1/4 */
    ASSERT_NEAR(tma_gnn_lr_at(&c, 3), 0.1, 1e-15);
    ASSERT_NEAR(tma_gnn_lr_at(&c, 4), 0.1, 1e-15);

    CHECK_OK(parse("{\"train\": {\"lr\": 0.2, \"lr_schedule\": {\"kind\": \"cosine\", \"warmup_steps\": 10, "
                   "\"steps\": 110, \"min_ratio\": 0.1}}}", &c));
    ASSERT_NEAR(tma_gnn_lr_at(&c, 9), 0.2, 1e-15);               /* the end of the warmup */
    ASSERT_NEAR(tma_gnn_lr_at(&c, 10), 0.2, 1e-15);              /* the top of the cosine */
    ASSERT_NEAR(tma_gnn_lr_at(&c, 60), 0.2 * (0.1 + 0.9 * 0.5), 1e-12); /* halfway */
    ASSERT_NEAR(tma_gnn_lr_at(&c, 110), 0.02, 1e-12);            /* the horizon: lr * min_ratio */
    ASSERT_NEAR(tma_gnn_lr_at(&c, 5000), 0.02, 1e-12);           /* and after it */

    CHECK_OK(parse("{\"train\": {\"lr\": 0.1, \"lr_schedule\": {\"kind\": \"step\", \"step_size\": 10, "
                   "\"gamma\": 0.5}}}", &c));
    ASSERT_NEAR(tma_gnn_lr_at(&c, 9), 0.1, 1e-15);
    ASSERT_NEAR(tma_gnn_lr_at(&c, 10), 0.05, 1e-15);
    ASSERT_NEAR(tma_gnn_lr_at(&c, 25), 0.025, 1e-15);

    /* Through the config's JSON and back: the same schedule. */
    cJSON *j = tma_gnn_config_to_json(&c);
    tma_gnn_config_t back;
    CHECK_OK(tma_gnn_config_from_json(j, "round trip", &back));
    ASSERT_EQ(back.lr_schedule.kind, TMA_GNN_LR_STEP);
    ASSERT_EQ(back.lr_schedule.step_size, 10);
    ASSERT_NEAR(tma_gnn_lr_at(&back, 25), 0.025, 1e-15);
    cJSON_Delete(j);

    refused("{\"train\": {\"weight_decay\": -0.1}}", "weight_decay");
    refused("{\"model\": {\"dropout\": 1}}", "dropout");
    refused("{\"model\": {\"dropout\": -0.5}}", "dropout");
    CHECK_OK(parse("{\"model\": {\"dropout\": 0.3}}", &c));
    ASSERT_NEAR(c.dropout, 0.3, 0);
    {
        /* Training only: the model section (weights files, their hash) is a model's without it. */
        tma_gnn_config_t d0;
        CHECK_OK(parse("{}", &d0));
        ASSERT_EQ(tma_gnn_config_hash(&c), tma_gnn_config_hash(&d0));
        cJSON *jj = tma_gnn_config_to_json(&c);
        tma_gnn_config_t b2;
        CHECK_OK(tma_gnn_config_from_json(jj, "round trip", &b2));
        ASSERT_NEAR(b2.dropout, 0.3, 0);
        cJSON_Delete(jj);
    }
    refused("{\"train\": {\"lr\": 0.5, \"weight_decay\": 2}}", "weight_decay");
    refused("{\"train\": {\"lr_schedule\": \"cosine\"}}", "lr_schedule");
    refused("{\"train\": {\"lr_schedule\": {\"kind\": \"linear\"}}}", "kind");
    refused("{\"train\": {\"lr_schedule\": {\"kind\": \"cosine\"}}}", "steps");
    refused("{\"train\": {\"lr_schedule\": {\"kind\": \"cosine\", \"steps\": 5, \"warmup_steps\": 5}}}", "steps");
    refused("{\"train\": {\"lr_schedule\": {\"kind\": \"cosine\", \"steps\": 50, \"min_ratio\": 2}}}", "min_ratio");
    refused("{\"train\": {\"lr_schedule\": {\"kind\": \"step\", \"gamma\": 0.5}}}", "step_size");
    refused("{\"train\": {\"lr_schedule\": {\"kind\": \"step\", \"step_size\": 5, \"gamma\": 1.5}}}", "gamma");
    refused("{\"train\": {\"lr_schedule\": {\"kind\": \"constant\", \"gamma\": 0.5}}}", "gamma");
    refused("{\"train\": {\"lr_schedule\": {\"warmup_steps\": -1}}}", "warmup_steps");
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);
    tma_gnn_config_t d, c;
    tma_gnn_config_default(&d);
    ASSERT_EQ(d.encoder, TMA_GNN_ENCODER_GCN);
    ASSERT_EQ(d.layers, 2);
    ASSERT_EQ(d.hidden, 256);
    ASSERT_EQ(d.decoder_layers, 2);
    ASSERT_EQ(d.fanouts[0], 25);
    ASSERT_EQ(d.fanouts[1], 10);
    ASSERT_EQ(d.lr, 0.001);
    ASSERT_EQ(d.clip, 1.0);
    ASSERT_GT(d.batch_size, 0);

    CHECK_OK(parse("{}", &c));
    ASSERT_EQ(memcmp(&c, &d, sizeof c), 0);
    CHECK_OK(parse("{\"model\": {\"encoder\": \"gcn\", \"layers\": 3, \"hidden\": 64, \"decoder_layers\": 1, "
                   "\"decoder_hidden\": 32, \"feature_dim\": 10}, \"train\": {\"batch_size\": 128, "
                   "\"fanouts\": [5, 4, -1], \"lr\": 0.01, \"clip\": 0, \"threads\": 2, \"seed\": 9, "
                   "\"beta1\": 0.8, \"beta2\": 0.99, \"eps\": 1e-6}, \"eval\": {\"batch_edges\": 8, "
                   "\"max_edges\": 100, \"threads\": 1, \"ties\": \"mean\", \"hits\": [1, 20], \"node_order\": \"id\", "
                   "\"block_cache_mb\": 0, \"rank_cache_mb\": 7, \"table_dtype\": \"bf16\"}}",
                   &c));
    ASSERT_EQ(c.encoder, TMA_GNN_ENCODER_GCN);
    ASSERT_EQ(c.layers, 3);
    ASSERT_EQ(c.hidden, 64);
    ASSERT_EQ(c.decoder_layers, 1);
    ASSERT_EQ(c.decoder_hidden, 32);
    ASSERT_EQ(c.feature_dim, 10);
    ASSERT_EQ(c.batch_size, 128);
    ASSERT_EQ(c.fanouts[0], 5);
    ASSERT_EQ(c.fanouts[1], 4);
    ASSERT_EQ(c.fanouts[2], -1);
    ASSERT_EQ(c.lr, 0.01);
    ASSERT_EQ(c.clip, 0);
    ASSERT_EQ(c.threads, 2);
    ASSERT_EQ(c.seed, 9);
    ASSERT_EQ(c.beta1, 0.8);
    ASSERT_EQ(c.beta2, 0.99);
    ASSERT_EQ(c.eps, 1e-6);
    ASSERT_EQ(c.eval_batch_edges, 8);
    ASSERT_EQ(c.eval_max_edges, 100);
    ASSERT_EQ(c.eval_threads, 1);
    ASSERT_EQ(c.eval_ties, TMA_GNN_TIES_MEAN);
    ASSERT_EQ(c.eval_locality, 0);
    ASSERT_EQ(c.eval_block_cache_mb, 0);
    ASSERT_EQ(c.eval_rank_cache_mb, 7);
    ASSERT_EQ(c.eval_table_bf16, 1);
    ASSERT_EQ(c.eval_num_hits, 2);
    ASSERT_EQ(c.eval_hits[0], 1);
    ASSERT_EQ(c.eval_hits[1], 20);
    /* The defaults: ties count against the positive; Hits@10, 50, 100. */
    ASSERT_EQ(d.eval_ties, TMA_GNN_TIES_PESSIMISTIC);
    ASSERT_EQ(d.eval_locality, 1); /* eval.node_order "locality" */
    ASSERT_EQ(d.eval_block_cache_mb, 256);
    ASSERT_EQ(d.eval_rank_cache_mb, 256);
    ASSERT_EQ(d.eval_table_bf16, 0);
    ASSERT_EQ(d.eval_num_hits, 3);
    ASSERT_EQ(d.eval_hits[0] * 10000 + d.eval_hits[1] * 100 + d.eval_hits[2], 10 * 10000 + 50 * 100 + 100);

    /* to_json and back gives the same config. */
    cJSON *j = tma_gnn_config_to_json(&c);
    tma_gnn_config_t back;
    CHECK_OK(tma_gnn_config_from_json(j, "round trip", &back));
    ASSERT_EQ(memcmp(&back, &c, sizeof c), 0);
    /* train.negatives is written only when not 1: earlier configs read the same. */
    CHECK(!cJSON_GetObjectItem(cJSON_GetObjectItem(j, "train"), "negatives"));
    cJSON_Delete(j);
    c.negatives = 5;
    j = tma_gnn_config_to_json(&c);
    CHECK_OK(tma_gnn_config_from_json(j, "round trip", &back));
    ASSERT_EQ(back.negatives, 5);
    cJSON_Delete(j);
    c.negatives = 1;

    /* Three layers without fanouts: 25 then 10s. */
    CHECK_OK(parse("{\"model\": {\"layers\": 3}}", &c));
    ASSERT_EQ(c.fanouts[0], 25);
    ASSERT_EQ(c.fanouts[1], 10);
    ASSERT_EQ(c.fanouts[2], 10);

    refused("{\"modle\": {}}", "modle");
    refused("{\"model\": {\"hiden\": 3}}", "hiden");
    refused("{\"train\": {\"learning_rate\": 3}}", "learning_rate");
    refused("{\"eval\": {\"batch\": 3}}", "batch");
    refused("{\"model\": {\"encoder\": \"gin\"}}", "encoder");
    refused("{\"model\": {\"encoder\": 3}}", "encoder");
    refused("{\"model\": {\"layers\": 0}}", "layers");
    refused("{\"model\": {\"layers\": 99}}", "layers");
    refused("{\"model\": {\"hidden\": -4}}", "hidden");
    refused("{\"model\": {\"hidden\": 2.5}}", "hidden");
    refused("{\"model\": {\"decoder_layers\": 0}}", "decoder_layers");
    refused("{\"train\": {\"batch_size\": 0}}", "batch_size");
    /* train.negatives: [1, 1024], and (2 + negatives) x batch_size seeds a step at most 2^26. */
    ASSERT_EQ(d.negatives, 1);
    CHECK_OK(parse("{\"train\": {\"negatives\": 16}}", &c));
    ASSERT_EQ(c.negatives, 16);
    refused("{\"train\": {\"negatives\": 0}}", "\"negatives\" = 0 is out of range [1, 1024]");
    refused("{\"train\": {\"negatives\": -2}}", "\"negatives\" = -2 is out of range [1, 1024]");
    refused("{\"train\": {\"negatives\": 1025}}", "\"negatives\" = 1025 is out of range [1, 1024]");
    refused("{\"train\": {\"negatives\": 1.5}}", "negatives");
    refused("{\"train\": {\"negatives\": 1024, \"batch_size\": 100000}}", "train.negatives = 1024 with train.batch_size");
    refused("{\"train\": {\"fanouts\": [25]}}", "fanouts");
    refused("{\"train\": {\"fanouts\": [25, 0]}}", "fanouts");
    refused("{\"train\": {\"fanouts\": \"25,10\"}}", "fanouts");
    refused("{\"train\": {\"lr\": -1}}", "lr");
    refused("{\"train\": {\"lr\": \"fast\"}}", "lr");
    refused("{\"train\": {\"clip\": -1}}", "clip");
    refused("{\"train\": {\"beta2\": 1}}", "beta2");
    refused("{\"train\": {\"threads\": -2}}", "threads");
    refused("{\"train\": {\"seed\": -2}}", "seed");
    refused("{\"eval\": {\"batch_edges\": 0}}", "batch_edges");
    refused("{\"eval\": {\"ties\": \"optimistic\"}}", "ties");
    refused("{\"eval\": {\"ties\": 1}}", "ties");
    refused("{\"eval\": {\"node_order\": \"random\"}}", "node_order");
    refused("{\"eval\": {\"node_order\": 0}}", "node_order");
    refused("{\"eval\": {\"block_cache_mb\": -1}}", "block_cache_mb");
    refused("{\"eval\": {\"block_cache_mb\": 1.5}}", "block_cache_mb");
    refused("{\"eval\": {\"block_cache_mb\": \"all\"}}", "block_cache_mb");
    refused("{\"eval\": {\"rank_cache_mb\": -1}}", "rank_cache_mb");
    refused("{\"eval\": {\"rank_cache_mb\": 2097152}}", "rank_cache_mb");
    refused("{\"eval\": {\"table_dtype\": \"f16\"}}", "table_dtype");
    refused("{\"eval\": {\"hits\": 10}}", "hits");
    refused("{\"eval\": {\"hits\": [10, 0]}}", "hits");
    refused("{\"eval\": {\"hits\": [2.5]}}", "hits");
    refused("{\"eval\": {\"hits\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}}", "hits");
    CHECK_OK(parse("{\"eval\": {\"hits\": []}}", &c));
    ASSERT_EQ(c.eval_num_hits, 0);
    refused("[1, 2]", "model");

    /* A config file that does not parse names the file. */
    char *dir = tma_test_tmpdir("gnncfg");
    char *path = tma_path_join(dir, "bad.json");
    CHECK_OK(tma_file_write_atomic(path, "{\"model\": {", 11));
    ASSERT_NE(tma_gnn_config_load(path, &c), TMA_OK);
    ASSERT_NE(tma_gnn_config_load("/nonexistent/x.json", &c), TMA_OK);
    free(path);
    tma_test_cleanup_dir(dir);

    /* The hash follows the model section only. */
    tma_gnn_config_t a, b;
    tma_gnn_config_default(&a);
    a.encoder = TMA_GNN_ENCODER_SAGE;
    a.feature_dim = 32;
    b = a;
    b.lr = 0.5;
    b.batch_size = 7;
    b.seed = 99;
    ASSERT_EQ(tma_gnn_config_hash(&a), tma_gnn_config_hash(&b));
    b = a;
    b.hidden = 128;
    ASSERT_NE(tma_gnn_config_hash(&a), tma_gnn_config_hash(&b));
    b = a;
    b.encoder = TMA_GNN_ENCODER_GCN;
    ASSERT_NE(tma_gnn_config_hash(&a), tma_gnn_config_hash(&b));
    b.encoder = TMA_GNN_ENCODER_MLP;
    ASSERT_NE(tma_gnn_config_hash(&a), tma_gnn_config_hash(&b));
    b = a;
    b.feature_dim = 33;
    ASSERT_NE(tma_gnn_config_hash(&a), tma_gnn_config_hash(&b));

    /* The layout: sizes, alignment, order, and no overlap. */
    tma_gnn_layout_t lay;
    a.hidden = 10;
    a.decoder_hidden = 7;
    CHECK_OK(tma_gnn_layout_build(&a, &lay));
    int64_t expect = 0, next = 0;
    for (int i = 0; i < lay.count; i++) {
        ASSERT_EQ(lay.params[i].offset % 16, 0);
        ASSERT_GE(lay.params[i].offset, next);
        next = lay.params[i].offset + lay.params[i].rows * lay.params[i].cols;
        expect += lay.params[i].rows * lay.params[i].cols;
    }
    ASSERT_GE(lay.total, expect);
    ASSERT_EQ(lay.total, tma_gnn_param_count(&a));
    /* SAGE 2 layers: (2*32*10 + 10) + (10 + 10 + 1) + (2*10*10 + 10) ; decoder (10*7 + 7 + 1) + (7 + 1) */
    ASSERT_EQ(expect, 2 * 32 * 10 + 10 + 21 + 2 * 100 + 10 + 70 + 7 + 1 + 7 + 1);
    ASSERT_STR_EQ(lay.params[0].name, "enc.0.weight_self");
    ASSERT_EQ(lay.params[0].rows, 32);
    ASSERT_STR_EQ(lay.params[lay.count - 1].name, "dec.1.bias");
    ASSERT_EQ(lay.params[lay.count - 1].cols, 1);
    tma_gnn_config_t u = a;
    u.feature_dim = 0;
    ASSERT_EQ(tma_gnn_param_count(&u), -1);

    /* Seeded init: same seed same block (padding zero), other seed other block. */
    int64_t n = lay.total;
    float *p1 = calloc((size_t)n, 4), *p2 = calloc((size_t)n, 4), *p3 = calloc((size_t)n, 4);
    memset(p1, 0x7f, (size_t)n * 4);
    CHECK_OK(tma_gnn_params_init(&a, 5, p1));
    CHECK_OK(tma_gnn_params_init(&a, 5, p2));
    CHECK_OK(tma_gnn_params_init(&a, 6, p3));
    ASSERT_EQ(memcmp(p1, p2, (size_t)n * 4), 0);
    ASSERT_NE(memcmp(p1, p3, (size_t)n * 4), 0);
    for (int i = 0; i < lay.count; i++) {
        const tma_gnn_param_info_t *q = &lay.params[i];
        const float *v = p1 + q->offset;
        int64_t m = q->rows * q->cols;
        if (strstr(q->name, ".prelu"))
            ASSERT_EQ(v[0], 0.25f);
        else if (strstr(q->name, "ln_weight")) {
            ASSERT_EQ(v[0], 1.0f);
            ASSERT_EQ(v[m - 1], 1.0f);
        } else if (strstr(q->name, "bias"))
            ASSERT_EQ(v[0], 0.0f);
        else {
            double bound = sqrt(6.0 / (double)(q->rows + q->cols)), mx = 0;
            for (int64_t k = 0; k < m; k++)
                mx = fmax(mx, fabs(v[k]));
            ASSERT_LE(mx, bound);
            ASSERT_GT(mx, 0.5 * bound);
        }
        if (i + 1 < lay.count)
            for (int64_t k = q->offset + m; k < lay.params[i + 1].offset; k++)
                ASSERT_EQ(p1[k], 0.0f);
    }
    free(p1);
    free(p2);
    free(p3);
    check_hetero();
    check_schedules();
    check_dot();
    return tma_test_done();
}
