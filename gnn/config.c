/*
 * config.c: the model/training configuration (JSON in and out, defaults,
 * validation, the model hash) and the parameter layout and initialisation
 * that follow from it.
 */
#include "gnn_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMP "gnn-config"

/* Decoder depth limit (its layers share the parameter table with the encoder's). */
#define MAX_DECODER_LAYERS 16

int tma_gnn_config_relational(const tma_gnn_config_t *cfg)
{
    return gnn_encoder_of(cfg)->relational || gnn_decoder_of(cfg)->relational;
}

static const char *const ties_names[] = {"pessimistic", "mean"};

const char *tma_gnn_ties_name(tma_gnn_ties_t t)
{
    return (unsigned)t < TMA_ARRAY_LEN(ties_names) ? ties_names[t] : "?";
}

tma_status_t tma_gnn_ties_parse(const char *name, tma_gnn_ties_t *t_p)
{
    for (size_t i = 0; i < TMA_ARRAY_LEN(ties_names); i++) {
        if (name && strcmp(name, ties_names[i]) == 0) {
            *t_p = (tma_gnn_ties_t)i;
            return TMA_OK;
        }
    }
    return TMA_ERR_CONFIG;
}

static void default_fanouts(tma_gnn_config_t *cfg)
{
    for (int l = 0; l < TMA_GNN_MAX_LAYERS; l++)
        cfg->fanouts[l] = l == 0 ? 25 : 10;
}

void tma_gnn_config_default(tma_gnn_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    tma_gnn_config_default_kinds(cfg);
    cfg->lr_schedule.gamma = 1;
    cfg->layers = 2;
    cfg->hidden = 256;
    cfg->decoder_layers = 2;
    cfg->decoder_hidden = 256;
    cfg->feature_dim = 0;
    cfg->bases = TMA_GNN_DEFAULT_BASES;
    cfg->heads = 1;
    cfg->num_rel_ids = 0;
    cfg->batch_size = 1024;
    cfg->negatives = 1;
    default_fanouts(cfg);
    cfg->lr = 0.001;
    cfg->clip = 1.0;
    cfg->beta1 = 0.9;
    cfg->beta2 = 0.999;
    cfg->eps = 1e-8;
    cfg->threads = 0;
    cfg->seed = 0;
    cfg->eval_batch_edges = 32;
    cfg->eval_max_edges = 0;
    cfg->eval_threads = 0;
    cfg->eval_locality = 1;
    cfg->eval_block_cache_mb = 256;
    cfg->eval_rank_cache_mb = 256;
    cfg->eval_feature_copy_mb = 1024;
    cfg->eval_rank_timeout = 300;
    cfg->eval_on_workers = -1;
    cfg->eval_ties = TMA_GNN_TIES_PESSIMISTIC;
    cfg->eval_num_hits = 3;
    cfg->eval_hits[0] = 10;
    cfg->eval_hits[1] = 50;
    cfg->eval_hits[2] = 100;
    strcpy(cfg->device, "cpu");
    strcpy(cfg->eval_device, "cpu");
}

tma_status_t tma_gnn_config_validate(const tma_gnn_config_t *cfg, const char *ctx)
{
#define BAD(...)                                                                                   \
    do {                                                                                           \
        tma_log_error(COMP, __VA_ARGS__);                                                          \
        return TMA_ERR_CONFIG;                                                                     \
    } while (0)
    if (!gnn_encoder_of(cfg))
        BAD("%s: model.encoder must be gcn, sage, mlp, rgcn or gat", ctx);
    if (!gnn_decoder_of(cfg))
        BAD("%s: model.decoder must be mlp, distmult or dot", ctx);
    const gnn_encoder_desc_t *enc = gnn_encoder_of(cfg);
    const tma_gnn_lr_schedule_t *q = &cfg->lr_schedule;
    if (!(cfg->dropout >= 0 && cfg->dropout <= 0.95))
        BAD("%s: model.dropout = %g is out of range [0, 0.95]", ctx, cfg->dropout);
    if (!(cfg->weight_decay >= 0 && cfg->weight_decay * cfg->lr < 1))
        BAD("%s: train.weight_decay = %g: must be >= 0, and below 1 / lr (%g) so that a step shrinks the weights "
            "by a factor in (0, 1]", ctx, cfg->weight_decay, 1 / cfg->lr);
    if ((int)q->kind < TMA_GNN_LR_CONSTANT || q->kind > TMA_GNN_LR_STEP || q->warmup_steps < 0)
        BAD("%s: train.lr_schedule: an unknown kind or a negative warmup_steps", ctx);
    if (q->kind == TMA_GNN_LR_COSINE && q->steps <= q->warmup_steps)
        BAD("%s: train.lr_schedule.steps = %lld: a cosine schedule needs its horizon in steps, above warmup_steps "
            "(%lld)", ctx, (long long)q->steps, (long long)q->warmup_steps);
    if (q->kind == TMA_GNN_LR_COSINE && !(q->min_ratio >= 0 && q->min_ratio <= 1))
        BAD("%s: train.lr_schedule.min_ratio = %g is out of range [0, 1]", ctx, q->min_ratio);
    if (q->kind == TMA_GNN_LR_STEP && (q->step_size < 1 || !(q->gamma > 0 && q->gamma <= 1)))
        BAD("%s: train.lr_schedule: a step schedule needs step_size >= 1 (got %lld) and gamma in (0, 1] (got %g)",
            ctx, (long long)q->step_size, q->gamma);
    if (cfg->bases < 1 || cfg->bases > TMA_GNN_MAX_BASES)
        BAD("%s: model.bases = %d is out of range [1, %d]", ctx, cfg->bases, TMA_GNN_MAX_BASES);
    if (cfg->num_rel_ids < 0 || cfg->num_rel_ids > 2 * TMA_GRAPH_MAX_RELATIONS)
        BAD("%s: model.relations = %d is out of range [0, %d]", ctx, cfg->num_rel_ids, 2 * TMA_GRAPH_MAX_RELATIONS);
    if (cfg->num_node_types < 0 || cfg->num_node_types == 1 || cfg->num_node_types > TMA_GNN_MAX_TYPES)
        BAD("%s: model.type_dims has %d entries: none, or 2 to %d node types", ctx, cfg->num_node_types,
            TMA_GNN_MAX_TYPES);
    for (int t = 0; t < cfg->num_node_types; t++)
        if (cfg->type_dims[t] < 1 || (cfg->feature_dim > 0 && cfg->type_dims[t] > cfg->feature_dim))
            BAD("%s: model.type_dims[%d] = %d is out of range [1, feature_dim %lld]", ctx, t, cfg->type_dims[t],
                (long long)cfg->feature_dim);
    if (cfg->num_node_types > 0 && !enc->node_types)
        BAD("%s: model.type_dims is for the rgcn encoder (gcn, sage and mlp ignore node types)", ctx);
    if (enc->relational && (int64_t)cfg->num_rel_ids * cfg->bases > TMA_GNN_RGCN_MAX_COEF)
        BAD("%s: model.relations x model.bases = %d x %d is more than %d RGCN coefficients (use fewer bases)", ctx,
            cfg->num_rel_ids, cfg->bases, TMA_GNN_RGCN_MAX_COEF);
    if (cfg->layers < 1 || cfg->layers > TMA_GNN_MAX_LAYERS)
        BAD("%s: model.layers = %d is out of range [1, %d]", ctx, cfg->layers, TMA_GNN_MAX_LAYERS);
    if (cfg->hidden < 1 || cfg->hidden > TMA_GNN_MAX_HIDDEN)
        BAD("%s: model.hidden = %d is out of range [1, %d]", ctx, cfg->hidden, TMA_GNN_MAX_HIDDEN);
    if (cfg->heads != 1 && !enc->attention)
        BAD("%s: model.heads = %d is for the gat encoder (%s has no attention heads)", ctx, cfg->heads, enc->name);
    if (cfg->heads < 1 || cfg->heads > TMA_MIN(cfg->hidden, TMA_GNN_MAX_HEADS))
        BAD("%s: model.heads = %d is out of range [1, %d] (at most model.hidden = %d and %d)", ctx, cfg->heads,
            TMA_MIN(cfg->hidden, TMA_GNN_MAX_HEADS), cfg->hidden, TMA_GNN_MAX_HEADS);
    if (enc->attention && cfg->layers > 1 && cfg->hidden % cfg->heads != 0)
        BAD("%s: model.heads = %d must divide model.hidden = %d: the hidden layers concatenate heads of "
            "hidden / heads", ctx, cfg->heads, cfg->hidden);
    if (cfg->decoder_layers < 1 || cfg->decoder_layers > MAX_DECODER_LAYERS)
        BAD("%s: model.decoder_layers = %d is out of range [1, %d]", ctx, cfg->decoder_layers,
            MAX_DECODER_LAYERS);
    if (cfg->decoder_hidden < 1 || cfg->decoder_hidden > 65536)
        BAD("%s: model.decoder_hidden = %d is out of range [1, 65536]", ctx, cfg->decoder_hidden);
    if (cfg->feature_dim < 0 || cfg->feature_dim > (1 << 24))
        BAD("%s: model.feature_dim = %lld is out of range [0, %d]", ctx, (long long)cfg->feature_dim, 1 << 24);
    if (cfg->batch_size < 1 || cfg->batch_size > (1 << 24))
        BAD("%s: train.batch_size = %d is out of range [1, %d]", ctx, cfg->batch_size, 1 << 24);
    if (cfg->negatives < 1 || cfg->negatives > TMA_GNN_MAX_NEGATIVES)
        BAD("%s: train.negatives = %d is out of range [1, %d]", ctx, cfg->negatives, TMA_GNN_MAX_NEGATIVES);
    if ((2 + (int64_t)cfg->negatives) * cfg->batch_size > TMA_GNN_MAX_BATCH_SEEDS)
        BAD("%s: train.negatives = %d with train.batch_size = %d: (2 + negatives) x batch_size = %lld seeds a step, "
            "more than %d (use fewer negatives or a smaller batch)", ctx, cfg->negatives, cfg->batch_size,
            (2 + (long long)cfg->negatives) * cfg->batch_size, TMA_GNN_MAX_BATCH_SEEDS);
    for (int l = 0; l < cfg->layers; l++)
        if (cfg->fanouts[l] == 0 || cfg->fanouts[l] < -1)
            BAD("%s: train.fanouts[%d] = %d: a fanout is a positive count or -1 (every neighbour)", ctx, l,
                cfg->fanouts[l]);
    if (!(cfg->lr > 0 && cfg->lr <= 10))
        BAD("%s: train.lr = %g is out of range (0, 10]", ctx, cfg->lr);
    if (!(cfg->clip >= 0))
        BAD("%s: train.clip = %g must be >= 0 (0 turns clipping off)", ctx, cfg->clip);
    if (!(cfg->beta1 >= 0 && cfg->beta1 < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1))
        BAD("%s: train.beta1 and train.beta2 must be in [0, 1)", ctx);
    if (!(cfg->eps > 0 && cfg->eps < 1))
        BAD("%s: train.eps = %g is out of range (0, 1)", ctx, cfg->eps);
    if (cfg->threads < 0 || cfg->threads > 1024 || cfg->eval_threads < 0 || cfg->eval_threads > 1024)
        BAD("%s: threads must be in [0, 1024] (0: $OMP_NUM_THREADS, else one per CPU the process may use)", ctx);
    if (cfg->eval_batch_edges < 1 || cfg->eval_batch_edges > 65536)
        BAD("%s: eval.batch_edges = %d is out of range [1, 65536]", ctx, cfg->eval_batch_edges);
    if (cfg->eval_max_edges < 0)
        BAD("%s: eval.max_edges must be >= 0 (0: all)", ctx);
    if (cfg->eval_block_cache_mb < 0 || cfg->eval_block_cache_mb > (1 << 20))
        BAD("%s: eval.block_cache_mb = %d is out of range [0, 1048576] (0: build the blocks at every inference)", ctx,
            cfg->eval_block_cache_mb);
    if (cfg->eval_rank_cache_mb < 0 || cfg->eval_rank_cache_mb > (1 << 20))
        BAD("%s: eval.rank_cache_mb = %d is out of range [0, 1048576] (0: a rank fetches other ranks' rows again "
            "for every chunk)", ctx, cfg->eval_rank_cache_mb);
    if (cfg->eval_feature_copy_mb < 0 || cfg->eval_feature_copy_mb > (1 << 20))
        BAD("%s: eval.feature_copy_mb = %d is out of range [0, 1048576] (0: never copy the features)", ctx,
            cfg->eval_feature_copy_mb);
    if ((unsigned)cfg->eval_ties >= TMA_ARRAY_LEN(ties_names))
        BAD("%s: eval.ties must be \"pessimistic\" or \"mean\"", ctx);
    if (cfg->eval_num_hits < 0 || cfg->eval_num_hits > TMA_GNN_MAX_HITS)
        BAD("%s: eval.hits holds %d entries, at most %d", ctx, cfg->eval_num_hits, TMA_GNN_MAX_HITS);
    for (int i = 0; i < cfg->eval_num_hits; i++)
        if (cfg->eval_hits[i] < 1 || cfg->eval_hits[i] > (1 << 20))
            BAD("%s: eval.hits[%d] = %d is out of range [1, %d]", ctx, i, cfg->eval_hits[i], 1 << 20);
    if (cfg->device[0] && !tma_gnn_device_valid(cfg->device))
        BAD("%s: train.device = \"%s\": a device is \"cpu\", \"cuda\" or \"cuda:N\"", ctx, cfg->device);
    if (cfg->eval_device[0] && !tma_gnn_device_valid(cfg->eval_device))
        BAD("%s: eval.device = \"%s\": a device is \"cpu\", \"cuda\" or \"cuda:N\"", ctx, cfg->eval_device);
    return TMA_OK;
#undef BAD
}

static tma_status_t get_intv(const cJSON *obj, const char *key, int def, int64_t min, int64_t max,
                             const char *ctx, int *val_p)
{
    int64_t v;
    tma_status_t st = tma_json_get_int(obj, key, def, min, max, ctx, &v);
    if (st == TMA_OK)
        *val_p = (int)v;
    return st;
}

static tma_status_t parse_fanouts(const cJSON *train, const char *ctx, int layers, tma_gnn_config_t *cfg)
{
    const cJSON *fa = train ? cJSON_GetObjectItemCaseSensitive(train, "fanouts") : NULL;
    if (!fa)
        return TMA_OK;
    if (!cJSON_IsArray(fa)) {
        tma_log_error(COMP, "%s: train.fanouts must be an array of integers such as [25, 10]", ctx);
        return TMA_ERR_CONFIG;
    }
    int n = cJSON_GetArraySize(fa);
    if (n != layers) {
        tma_log_error(COMP, "%s: train.fanouts has %d entries but model.layers is %d (one fanout a layer, "
                      "the seeds' hop first)", ctx, n, layers);
        return TMA_ERR_CONFIG;
    }
    int i = 0;
    for (const cJSON *it = fa->child; it; it = it->next, i++) {
        if (!cJSON_IsNumber(it) || it->valuedouble != (double)(int)it->valuedouble ||
            (it->valuedouble < 1 && it->valuedouble != -1) || it->valuedouble > 1e6) {
            tma_log_error(COMP, "%s: train.fanouts[%d] must be a positive integer or -1 (every neighbour)", ctx,
                          i);
            return TMA_ERR_CONFIG;
        }
        cfg->fanouts[i] = (int)it->valuedouble;
    }
    return TMA_OK;
}

/* model.type_dims: each node type's feature width. */
static tma_status_t parse_type_dims(const cJSON *model, const char *mctx, tma_gnn_config_t *cfg)
{
    const cJSON *a = model ? cJSON_GetObjectItemCaseSensitive(model, "type_dims") : NULL;
    if (!a)
        return TMA_OK;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > TMA_GNN_MAX_TYPES) {
        tma_log_error(COMP, "%s.type_dims must be an array of at most %d feature widths, one a node type", mctx,
                      TMA_GNN_MAX_TYPES);
        return TMA_ERR_CONFIG;
    }
    int i = 0;
    for (const cJSON *it = a->child; it; it = it->next, i++) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 1 ||
            it->valuedouble > (1 << 24)) {
            tma_log_error(COMP, "%s.type_dims[%d] must be a positive integer (a feature width)", mctx, i);
            return TMA_ERR_CONFIG;
        }
        cfg->type_dims[i] = (int)it->valuedouble;
    }
    cfg->num_node_types = i;
    return TMA_OK;
}

static const char *const lr_kinds[] = {"constant", "cosine", "step"};

/* train.lr_schedule: {"kind": ..., "warmup_steps": W, ...}; each kind takes
 * only its own keys. */
static tma_status_t parse_lr_schedule(const cJSON *train, const char *tctx, tma_gnn_config_t *cfg)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(train, "lr_schedule");
    if (!o)
        return TMA_OK;
    char ctx[300];
    snprintf(ctx, sizeof ctx, "%s.lr_schedule", tctx);
    if (!cJSON_IsObject(o)) {
        tma_log_error(COMP, "%s: expected an object such as {\"kind\": \"cosine\", \"steps\": 10000}", ctx);
        return TMA_ERR_CONFIG;
    }
    const char *kind;
    tma_status_t st = tma_json_get_string(o, "kind", "constant", ctx, &kind);
    if (st != TMA_OK)
        return st;
    int k = -1;
    for (size_t i = 0; i < TMA_ARRAY_LEN(lr_kinds); i++)
        if (strcmp(kind, lr_kinds[i]) == 0)
            k = (int)i;
    if (k < 0) {
        tma_log_error(COMP, "%s.kind: \"%s\" is not a schedule: constant, cosine or step", ctx, kind);
        return TMA_ERR_CONFIG;
    }
    static const char *const keys[][6] = {{"kind", "warmup_steps", NULL},
                                          {"kind", "warmup_steps", "steps", "min_ratio", NULL},
                                          {"kind", "warmup_steps", "step_size", "gamma", NULL}};
    tma_gnn_lr_schedule_t *s = &cfg->lr_schedule;
    memset(s, 0, sizeof *s);
    s->kind = (tma_gnn_lr_kind_t)k;
    s->gamma = 1;
    if ((st = tma_json_check_keys(o, keys[k], ctx)) ||
        (st = tma_json_get_int(o, "warmup_steps", 0, 0, INT64_MAX / 2, ctx, &s->warmup_steps)) ||
        (st = tma_json_get_int(o, "steps", 0, 0, INT64_MAX / 2, ctx, &s->steps)) ||
        (st = tma_json_get_double(o, "min_ratio", 0, 0, 1, ctx, &s->min_ratio)) ||
        (st = tma_json_get_int(o, "step_size", 0, 0, INT64_MAX / 2, ctx, &s->step_size)) ||
        (st = tma_json_get_double(o, "gamma", 1, 1e-12, 1, ctx, &s->gamma)))
        return st;
    return TMA_OK;
}

double tma_gnn_lr_at(const tma_gnn_config_t *cfg, int64_t s)
{
    const tma_gnn_lr_schedule_t *q = &cfg->lr_schedule;
    if (s < q->warmup_steps)
        return cfg->lr * (double)(s + 1) / (double)q->warmup_steps;
    switch (q->kind) {
    case TMA_GNN_LR_COSINE: {
        double span = (double)(q->steps - q->warmup_steps);
        double x = span > 0 ? fmin(1.0, (double)(s - q->warmup_steps) / span) : 1.0;
        return cfg->lr * (q->min_ratio + (1 - q->min_ratio) * 0.5 * (1 + cos(M_PI * x)));
    }
    case TMA_GNN_LR_STEP:
        return cfg->lr * pow(q->gamma, (double)((s - q->warmup_steps) / q->step_size));
    default:
        return cfg->lr;
    }
}

/* eval.node_order. */
static tma_status_t parse_node_order(const cJSON *eval, const char *ectx, tma_gnn_config_t *cfg)
{
    const char *order;
    tma_status_t st = tma_json_get_string(eval, "node_order", "locality", ectx, &order);
    if (st != TMA_OK)
        return st;
    if (strcmp(order, "locality") != 0 && strcmp(order, "id") != 0) {
        tma_log_error(COMP, "%s.node_order: \"%s\" is not an order: \"locality\" (inference walks groups of "
                      "neighbouring nodes, faster) or \"id\" (node id order)", ectx, order);
        return TMA_ERR_CONFIG;
    }
    cfg->eval_locality = strcmp(order, "locality") == 0;
    const char *where;
    if ((st = tma_json_get_string(eval, "where", "auto", ectx, &where)) != TMA_OK)
        return st;
    if (strcmp(where, "coordinator") != 0 && strcmp(where, "workers") != 0 && strcmp(where, "auto") != 0) {
        tma_log_error(COMP, "%s.where: \"%s\" is not a place: \"workers\" (evaluator ranks on the shards' owners, "
                      "no process holds the graph), \"coordinator\" (one evaluator over the whole graph) or \"auto\" "
                      "(workers for jobs of two or more workers with shards)", ectx, where);
        return TMA_ERR_CONFIG;
    }
    cfg->eval_on_workers = where[0] == 'w' ? 1 : where[0] == 'c' ? 0 : -1;
    const char *td;
    if ((st = tma_json_get_string(eval, "table_dtype", "f32", ectx, &td)) != TMA_OK)
        return st;
    if (strcmp(td, "f32") != 0 && strcmp(td, "bf16") != 0) {
        tma_log_error(COMP, "%s.table_dtype: \"%s\" is not a table type: \"f32\" or \"bf16\" (the evaluator's "
                      "embedding tables in bfloat16: half the memory)", ectx, td);
        return TMA_ERR_CONFIG;
    }
    cfg->eval_table_bf16 = strcmp(td, "bf16") == 0;
    return tma_json_get_double(eval, "rank_timeout", cfg->eval_rank_timeout, 1, 86400, ectx, &cfg->eval_rank_timeout);
}

/* eval.ties and eval.hits. */
static tma_status_t parse_ranking(const cJSON *eval, const char *ectx, tma_gnn_config_t *cfg)
{
    const char *ties;
    tma_status_t st = tma_json_get_string(eval, "ties", "pessimistic", ectx, &ties);
    if (st != TMA_OK)
        return st;
    if (tma_gnn_ties_parse(ties, &cfg->eval_ties) != TMA_OK) {
        tma_log_error(COMP, "%s.ties: \"%s\" is not a tie rule: \"pessimistic\" (ties count against the "
                      "positive) or \"mean\" (OGB's Evaluator: the mean of the optimistic and pessimistic rank)",
                      ectx, ties);
        return TMA_ERR_CONFIG;
    }
    const cJSON *h = eval ? cJSON_GetObjectItemCaseSensitive(eval, "hits") : NULL;
    if (!h)
        return TMA_OK;
    if (!cJSON_IsArray(h) || cJSON_GetArraySize(h) > TMA_GNN_MAX_HITS) {
        tma_log_error(COMP, "%s.hits must be an array of at most %d positive integers such as [10, 50, 100]", ectx,
                      TMA_GNN_MAX_HITS);
        return TMA_ERR_CONFIG;
    }
    int i = 0;
    for (const cJSON *it = h->child; it; it = it->next, i++) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 1 ||
            it->valuedouble > (1 << 20)) {
            tma_log_error(COMP, "%s.hits[%d] must be an integer K in [1, %d] (Hits@K)", ectx, i, 1 << 20);
            return TMA_ERR_CONFIG;
        }
        cfg->eval_hits[i] = (int)it->valuedouble;
    }
    cfg->eval_num_hits = i;
    for (; i < TMA_GNN_MAX_HITS; i++)
        cfg->eval_hits[i] = 0;
    return TMA_OK;
}

/* A device name from the config into a config field, checked. */
static tma_status_t copy_device(const char *dev, const char *ctx, char out[32])
{
    if (!tma_gnn_device_valid(dev)) {
        tma_log_error(COMP, "%s.device: \"%s\" is not a device (\"cpu\", \"cuda\" or \"cuda:N\")", ctx, dev);
        return TMA_ERR_CONFIG;
    }
    snprintf(out, 32, "%s", dev);
    return TMA_OK;
}

/* The string key `key` as an encoder (decoder 0) or decoder (1) kind, or the error naming the key. */
static tma_status_t parse_kind(const cJSON *obj, const char *key, const char *def, int decoder, const char *ctx,
                               tma_gnn_config_t *cfg)
{
    const char *v;
    tma_status_t st = tma_json_get_string(obj, key, def, ctx, &v);
    if (st != TMA_OK)
        return st;
    if (decoder ? tma_gnn_decoder_parse(v, &cfg->decoder) == TMA_OK : tma_gnn_encoder_parse(v, &cfg->encoder) == TMA_OK)
        return TMA_OK;
    tma_log_error(COMP, "%s.%s: \"%s\" is not %s (%s)", ctx, key, v, decoder ? "a decoder" : "an encoder",
                  decoder ? "mlp, distmult or dot" : "gcn, sage, mlp, rgcn or gat");
    return TMA_ERR_CONFIG;
}

tma_status_t tma_gnn_config_from_sections(const cJSON *model, const cJSON *train, const cJSON *eval,
                                          const char *ctx, tma_gnn_config_t *cfg_p)
{
    static const char *const model_keys[] = {"encoder",     "layers",  "hidden", "decoder_layers", "decoder_hidden",
                                             "feature_dim", "decoder", "bases",  "relations",      "type_dims",
                                             "dropout",     "heads",   NULL};
    static const char *const train_keys[] = {"batch_size", "fanouts", "lr", "clip", "threads", "seed", "beta1",
                                             "beta2", "eps", "device", "weight_decay", "lr_schedule", "negatives",
                                             NULL};
    static const char *const eval_keys[] = {"batch_edges", "max_edges", "threads", "device", "ties", "hits",
                                            "node_order", "block_cache_mb", "feature_copy_mb", "where", "rank_timeout", "table_dtype",
                                            "rank_cache_mb", NULL};
    char mctx[256], tctx[256], ectx[256];
    snprintf(mctx, sizeof mctx, "%s: model", ctx);
    snprintf(tctx, sizeof tctx, "%s: train", ctx);
    snprintf(ectx, sizeof ectx, "%s: eval", ctx);
    tma_gnn_config_t cfg;
    tma_gnn_config_default(&cfg);
    tma_status_t st;
    if ((st = tma_json_check_keys(model, model_keys, mctx)) != TMA_OK ||
        (st = tma_json_check_keys(train, train_keys, tctx)) != TMA_OK ||
        (st = tma_json_check_keys(eval, eval_keys, ectx)) != TMA_OK)
        return st;

    if ((st = parse_kind(model, "encoder", "gcn", 0, mctx, &cfg)) != TMA_OK ||
        (st = parse_kind(model, "decoder", "mlp", 1, mctx, &cfg)) != TMA_OK)
        return st;
    int64_t i64;
    if ((st = get_intv(model, "layers", cfg.layers, 1, TMA_GNN_MAX_LAYERS, mctx, &cfg.layers)) ||
        (st = get_intv(model, "hidden", cfg.hidden, 1, TMA_GNN_MAX_HIDDEN, mctx, &cfg.hidden)) ||
        (st = get_intv(model, "decoder_layers", cfg.decoder_layers, 1, MAX_DECODER_LAYERS, mctx,
                       &cfg.decoder_layers)) ||
        (st = get_intv(model, "decoder_hidden", cfg.decoder_hidden, 1, 65536, mctx, &cfg.decoder_hidden)) ||
        (st = tma_json_get_int(model, "feature_dim", 0, 0, 1 << 24, mctx, &cfg.feature_dim)) ||
        (st = get_intv(model, "bases", cfg.bases, 1, TMA_GNN_MAX_BASES, mctx, &cfg.bases)) ||
        (st = get_intv(model, "heads", cfg.heads, 1, TMA_GNN_MAX_HEADS, mctx, &cfg.heads)) ||
        (st = get_intv(model, "relations", 0, 0, 2 * TMA_GRAPH_MAX_RELATIONS, mctx, &cfg.num_rel_ids)) ||
        (st = tma_json_get_double(model, "dropout", 0, 0, 0.95, mctx, &cfg.dropout)))
        return st;
    if ((st = get_intv(train, "batch_size", cfg.batch_size, 1, 1 << 24, tctx, &cfg.batch_size)) ||
        (st = get_intv(train, "negatives", cfg.negatives, 1, TMA_GNN_MAX_NEGATIVES, tctx, &cfg.negatives)) ||
        (st = tma_json_get_double(train, "lr", cfg.lr, 1e-12, 10, tctx, &cfg.lr)) ||
        (st = tma_json_get_double(train, "clip", cfg.clip, 0, 1e30, tctx, &cfg.clip)) ||
        (st = tma_json_get_double(train, "beta1", cfg.beta1, 0, 0.999999999, tctx, &cfg.beta1)) ||
        (st = tma_json_get_double(train, "beta2", cfg.beta2, 0, 0.999999999, tctx, &cfg.beta2)) ||
        (st = tma_json_get_double(train, "eps", cfg.eps, 1e-30, 0.5, tctx, &cfg.eps)) ||
        (st = tma_json_get_double(train, "weight_decay", 0, 0, 1e6, tctx, &cfg.weight_decay)) ||
        (st = parse_lr_schedule(train, tctx, &cfg)) ||
        (st = get_intv(train, "threads", 0, 0, 1024, tctx, &cfg.threads)) ||
        (st = tma_json_get_int(train, "seed", 0, 0, INT64_MAX, tctx, &i64)))
        return st;
    cfg.seed = (uint64_t)i64;
    if ((st = parse_fanouts(train, ctx, cfg.layers, &cfg)) != TMA_OK ||
        (st = parse_type_dims(model, mctx, &cfg)) != TMA_OK)
        return st;
    if ((st = get_intv(eval, "batch_edges", cfg.eval_batch_edges, 1, 65536, ectx, &cfg.eval_batch_edges)) ||
        (st = tma_json_get_int(eval, "max_edges", 0, 0, INT64_MAX, ectx, &cfg.eval_max_edges)) ||
        (st = get_intv(eval, "threads", 0, 0, 1024, ectx, &cfg.eval_threads)) ||
        (st = get_intv(eval, "block_cache_mb", cfg.eval_block_cache_mb, 0, 1 << 20, ectx, &cfg.eval_block_cache_mb)) ||
        (st = get_intv(eval, "rank_cache_mb", cfg.eval_rank_cache_mb, 0, 1 << 20, ectx, &cfg.eval_rank_cache_mb)) ||
        (st = get_intv(eval, "feature_copy_mb", cfg.eval_feature_copy_mb, 0, 1 << 20, ectx,
                       &cfg.eval_feature_copy_mb)) ||
        (st = parse_ranking(eval, ectx, &cfg)) || (st = parse_node_order(eval, ectx, &cfg)))
        return st;
    const char *dev;
    if ((st = tma_json_get_string(train, "device", "cpu", tctx, &dev)) != TMA_OK ||
        (st = copy_device(dev, tctx, cfg.device)) != TMA_OK ||
        (st = tma_json_get_string(eval, "device", "cpu", ectx, &dev)) != TMA_OK ||
        (st = copy_device(dev, ectx, cfg.eval_device)) != TMA_OK)
        return st;
    if ((st = tma_gnn_config_validate(&cfg, ctx)) != TMA_OK)
        return st;
    *cfg_p = cfg;
    return TMA_OK;
}

tma_status_t tma_gnn_config_from_json(const cJSON *root, const char *ctx, tma_gnn_config_t *cfg_p)
{
    static const char *const top_keys[] = {"model", "train", "eval", "metrics", NULL}; /* metrics: tma train */
    if (!cJSON_IsObject(root)) {
        tma_log_error(COMP, "%s: the config must be a JSON object with \"model\", \"train\" and \"eval\"", ctx);
        return TMA_ERR_CONFIG;
    }
    tma_status_t st = tma_json_check_keys(root, top_keys, ctx);
    if (st != TMA_OK)
        return st;
    return tma_gnn_config_from_sections(cJSON_GetObjectItemCaseSensitive(root, "model"),
                                        cJSON_GetObjectItemCaseSensitive(root, "train"),
                                        cJSON_GetObjectItemCaseSensitive(root, "eval"), ctx, cfg_p);
}

tma_status_t tma_gnn_config_load(const char *path, tma_gnn_config_t *cfg_p)
{
    cJSON *root;
    tma_status_t st = tma_json_load_file(path, &root);
    if (st != TMA_OK)
        return st;
    st = tma_gnn_config_from_json(root, path, cfg_p);
    cJSON_Delete(root);
    return st;
}

cJSON *tma_gnn_config_model_json(const tma_gnn_config_t *cfg)
{
    cJSON *m = cJSON_CreateObject();
    if (!m)
        return NULL;
    cJSON_AddStringToObject(m, "encoder", tma_gnn_encoder_name(cfg->encoder));
    cJSON_AddNumberToObject(m, "layers", cfg->layers);
    cJSON_AddNumberToObject(m, "hidden", cfg->hidden);
    cJSON_AddNumberToObject(m, "decoder_layers", cfg->decoder_layers);
    cJSON_AddNumberToObject(m, "decoder_hidden", cfg->decoder_hidden);
    cJSON_AddNumberToObject(m, "feature_dim", (double)cfg->feature_dim);
    if (gnn_encoder_of(cfg)->attention)
        cJSON_AddNumberToObject(m, "heads", cfg->heads);
    /* Only relational models name the new keys, so the model section (and
     * the weight files that record it) of every other model is unchanged. */
    if (gnn_decoder_named(cfg) && !tma_gnn_config_relational(cfg))
        cJSON_AddStringToObject(m, "decoder", tma_gnn_decoder_name(cfg->decoder));
    if (tma_gnn_config_relational(cfg)) {
        cJSON_AddStringToObject(m, "decoder", tma_gnn_decoder_name(cfg->decoder));
        if (gnn_encoder_of(cfg)->relational)
            cJSON_AddNumberToObject(m, "bases", cfg->bases);
        cJSON_AddNumberToObject(m, "relations", cfg->num_rel_ids);
        if (cfg->num_node_types > 0)
            cJSON_AddItemToObject(m, "type_dims", cJSON_CreateIntArray(cfg->type_dims, cfg->num_node_types));
    }
    return m;
}

cJSON *tma_gnn_config_to_json(const tma_gnn_config_t *cfg)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *m = tma_gnn_config_model_json(cfg);
    cJSON *t = cJSON_CreateObject(), *e = cJSON_CreateObject();
    cJSON *fa = cJSON_CreateIntArray(cfg->fanouts, cfg->layers);
    if (!root || !m || !t || !e || !fa) {
        cJSON_Delete(root);
        cJSON_Delete(m);
        cJSON_Delete(t);
        cJSON_Delete(e);
        cJSON_Delete(fa);
        return NULL;
    }
    /* Training only: not in the model section weight files record and hash. */
    if (cfg->dropout > 0)
        cJSON_AddNumberToObject(m, "dropout", cfg->dropout);
    cJSON_AddItemToObject(root, "model", m);
    cJSON_AddNumberToObject(t, "batch_size", cfg->batch_size);
    /* Named only when not the default, so the resolved config of every
     * earlier run reads the same. */
    if (cfg->negatives != 1)
        cJSON_AddNumberToObject(t, "negatives", cfg->negatives);
    cJSON_AddItemToObject(t, "fanouts", fa);
    cJSON_AddNumberToObject(t, "lr", cfg->lr);
    cJSON_AddNumberToObject(t, "clip", cfg->clip);
    cJSON_AddNumberToObject(t, "threads", cfg->threads);
    cJSON_AddNumberToObject(t, "seed", (double)cfg->seed);
    cJSON_AddNumberToObject(t, "beta1", cfg->beta1);
    cJSON_AddNumberToObject(t, "beta2", cfg->beta2);
    cJSON_AddNumberToObject(t, "eps", cfg->eps);
    cJSON_AddNumberToObject(t, "weight_decay", cfg->weight_decay);
    {
        const tma_gnn_lr_schedule_t *q = &cfg->lr_schedule;
        cJSON *ls = cJSON_AddObjectToObject(t, "lr_schedule");
        cJSON_AddStringToObject(ls, "kind", lr_kinds[q->kind]);
        cJSON_AddNumberToObject(ls, "warmup_steps", (double)q->warmup_steps);
        if (q->kind == TMA_GNN_LR_COSINE) {
            cJSON_AddNumberToObject(ls, "steps", (double)q->steps);
            cJSON_AddNumberToObject(ls, "min_ratio", q->min_ratio);
        } else if (q->kind == TMA_GNN_LR_STEP) {
            cJSON_AddNumberToObject(ls, "step_size", (double)q->step_size);
            cJSON_AddNumberToObject(ls, "gamma", q->gamma);
        }
    }
    cJSON_AddStringToObject(t, "device", cfg->device[0] ? cfg->device : "cpu");
    cJSON_AddItemToObject(root, "train", t);
    cJSON_AddNumberToObject(e, "batch_edges", cfg->eval_batch_edges);
    cJSON_AddNumberToObject(e, "max_edges", (double)cfg->eval_max_edges);
    cJSON_AddNumberToObject(e, "threads", cfg->eval_threads);
    cJSON_AddStringToObject(e, "device", cfg->eval_device[0] ? cfg->eval_device : "cpu");
    cJSON_AddStringToObject(e, "ties", tma_gnn_ties_name(cfg->eval_ties));
    cJSON_AddStringToObject(e, "node_order", cfg->eval_locality ? "locality" : "id");
    cJSON_AddNumberToObject(e, "block_cache_mb", cfg->eval_block_cache_mb);
    cJSON_AddNumberToObject(e, "feature_copy_mb", cfg->eval_feature_copy_mb);
    cJSON_AddStringToObject(e, "where", cfg->eval_on_workers > 0 ? "workers" : cfg->eval_on_workers == 0 ? "coordinator" : "auto");
    cJSON_AddNumberToObject(e, "rank_timeout", cfg->eval_rank_timeout);
    cJSON_AddStringToObject(e, "table_dtype", cfg->eval_table_bf16 ? "bf16" : "f32");
    cJSON_AddNumberToObject(e, "rank_cache_mb", cfg->eval_rank_cache_mb);
    cJSON_AddItemToObject(e, "hits", cJSON_CreateIntArray(cfg->eval_hits, cfg->eval_num_hits));
    cJSON_AddItemToObject(root, "eval", e);
    return root;
}

tma_status_t tma_gnn_config_resolve(tma_gnn_config_t *cfg, const tma_graph_t *g)
{
    if (g->feature_dim < 1) {
        tma_log_error(COMP, "the graph has no node features (feature_dim %d)", g->feature_dim);
        return TMA_ERR_FORMAT;
    }
    if (cfg->feature_dim == 0) {
        cfg->feature_dim = g->feature_dim;
    } else if (cfg->feature_dim != g->feature_dim) {
        tma_log_error(COMP, "model.feature_dim is %lld but the graph's features have %d dimensions",
                      (long long)cfg->feature_dim, g->feature_dim);
        return TMA_ERR_MISMATCH;
    }
    if (!tma_gnn_config_relational(cfg))
        return TMA_OK;
    int32_t nr = tma_graph_num_rel_ids(g);
    if (cfg->num_rel_ids == 0) {
        cfg->num_rel_ids = nr;
    } else if (cfg->num_rel_ids != nr) {
        tma_log_error(COMP, "model.relations is %d but the graph has %d relation ids (2 x %d relations)",
                      cfg->num_rel_ids, nr, g->num_relations);
        return TMA_ERR_MISMATCH;
    }
    /* RGCN on several node types: the per-type input projection. */
    int types = gnn_encoder_of(cfg)->node_types && tma_graph_is_typed(g) && g->num_node_types > 1
                    ? g->num_node_types
                    : 0;
    if (types > TMA_GNN_MAX_TYPES) {
        tma_log_error(COMP, "the graph has %d node types; the rgcn encoder's per-type input projection supports at "
                      "most %d", types, TMA_GNN_MAX_TYPES);
        return TMA_ERR_UNSUPPORTED;
    }
    if (cfg->num_node_types == 0) {
        cfg->num_node_types = types;
        for (int t = 0; t < types; t++)
            cfg->type_dims[t] = g->type_feat_dim[t];
    } else {
        int same = cfg->num_node_types == types;
        for (int t = 0; same && t < types; t++)
            same = cfg->type_dims[t] == g->type_feat_dim[t];
        if (!same) {
            tma_log_error(COMP, "model.type_dims (%d node types) does not match the graph's %d node types and "
                          "their feature widths", cfg->num_node_types, types);
            return TMA_ERR_MISMATCH;
        }
    }
    return tma_gnn_config_validate(cfg, "model config");
}

/* The model's shape as "key=value" words: what the hash covers. */
static int model_text(const tma_gnn_config_t *cfg, char *s, size_t cap)
{
    int n = snprintf(s, cap, "tma-model-v1 encoder=%s layers=%d hidden=%d decoder_layers=%d "
                     "decoder_hidden=%d feature_dim=%lld norm=layernorm act=prelu",
                     tma_gnn_encoder_name(cfg->encoder), cfg->layers, cfg->hidden, cfg->decoder_layers,
                     cfg->decoder_hidden, (long long)cfg->feature_dim);
    /* Relational models and other decoders extend the text; the others keep their hash. */
    if (tma_gnn_config_relational(cfg))
        n += snprintf(s + n, cap - (size_t)n, " decoder=%s bases=%d relations=%d",
                      tma_gnn_decoder_name(cfg->decoder), gnn_encoder_of(cfg)->relational ? cfg->bases : 0,
                      cfg->num_rel_ids);
    else if (gnn_decoder_named(cfg))
        n += snprintf(s + n, cap - (size_t)n, " decoder=%s", tma_gnn_decoder_name(cfg->decoder));
    for (int t = 0; t < cfg->num_node_types; t++)
        n += snprintf(s + n, cap - (size_t)n, " type_dim%d=%d", t, cfg->type_dims[t]);
    if (gnn_encoder_of(cfg)->attention)
        n += snprintf(s + n, cap - (size_t)n, " heads=%d", cfg->heads);
    return TMA_MIN(n, (int)cap - 1);
}

uint64_t tma_gnn_config_hash(const tma_gnn_config_t *cfg)
{
    char s[640];
    int n = model_text(cfg, s, sizeof s);
    /* FNV-1a, then a final mix. */
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return tma_hash64(h);
}

void tma_gnn_config_model_diff(const tma_gnn_config_t *have, const tma_gnn_config_t *want, char *buf, size_t cap)
{
    /* The fields a user sets, by name, in the order a config lists them. */
    const char *na = tma_gnn_encoder_name(have->encoder), *nb = tma_gnn_encoder_name(want->encoder);
    const char *da = tma_gnn_decoder_name(have->decoder), *db = tma_gnn_decoder_name(want->decoder);
    if (strcmp(na, nb) != 0 || strcmp(da, db) != 0) {
        const int enc = strcmp(na, nb) != 0;
        snprintf(buf, cap, "%s is %s there, %s here", enc ? "encoder" : "decoder", enc ? na : da, enc ? nb : db);
        return;
    }
    const struct {
        const char *key;
        long long a, b;
    } nums[] = {{"layers", have->layers, want->layers},
                {"hidden", have->hidden, want->hidden},
                {"decoder_layers", have->decoder_layers, want->decoder_layers},
                {"decoder_hidden", have->decoder_hidden, want->decoder_hidden},
                {"feature_dim", (long long)have->feature_dim, (long long)want->feature_dim}};
    for (size_t i = 0; i < TMA_ARRAY_LEN(nums); i++)
        if (nums[i].a != nums[i].b) {
            snprintf(buf, cap, "%s is %lld there, %lld here", nums[i].key, nums[i].a, nums[i].b);
            return;
        }
    char a[640], b[640];
    model_text(have, a, sizeof a);
    model_text(want, b, sizeof b);
    /* The rest (relational keys, type widths): the first word that differs,
     * by key; a key only one side has counts. */
    char *sa = NULL, *sb = NULL;
    for (char *wa = strtok_r(a, " ", &sa), *wb = strtok_r(b, " ", &sb); wa || wb;
         wa = strtok_r(NULL, " ", &sa), wb = strtok_r(NULL, " ", &sb)) {
        if (wa && wb && strcmp(wa, wb) == 0)
            continue;
        const char *ea = wa ? strchr(wa, '=') : NULL, *eb = wb ? strchr(wb, '=') : NULL;
        if (ea && eb && ea - wa == eb - wb && strncmp(wa, wb, (size_t)(ea - wa)) == 0)
            snprintf(buf, cap, "%.*s is %s there, %s here", (int)(ea - wa), wa, ea + 1, eb + 1);
        else
            snprintf(buf, cap, "%s there, %s here", wa ? wa : "(nothing)", wb ? wb : "(nothing)");
        return;
    }
    snprintf(buf, cap, "the same shape");
}

/* ------------------------------------------------------------------ layout */

tma_status_t tma_gnn_layout_build(const tma_gnn_config_t *cfg, tma_gnn_layout_t *layout_p)
{
    tma_status_t st = tma_gnn_config_validate(cfg, "model config");
    if (st != TMA_OK)
        return st;
    if (cfg->feature_dim < 1) {
        tma_log_error(COMP, "the parameter layout needs model.feature_dim (resolve the config against a graph)");
        return TMA_ERR_CONFIG;
    }
    if (tma_gnn_config_relational(cfg) && cfg->num_rel_ids < 1) {
        tma_log_error(COMP, "the parameter layout of an rgcn or distmult model needs model.relations (resolve the "
                      "config against a graph)");
        return TMA_ERR_CONFIG;
    }
    tma_gnn_layout_t lay;
    memset(&lay, 0, sizeof lay);
    gnn_params_t views;
    gnn_walk_t w = {.lay = &lay};
    if ((st = gnn_params_walk(cfg, &w, &views)) != TMA_OK)
        return st;
    *layout_p = lay;
    return TMA_OK;
}

int64_t tma_gnn_param_count(const tma_gnn_config_t *cfg)
{
    tma_gnn_layout_t lay;
    if (tma_gnn_layout_build(cfg, &lay) != TMA_OK)
        return -1;
    return lay.total;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

tma_status_t tma_gnn_params_init(const tma_gnn_config_t *cfg, uint64_t seed, float *params)
{
    tma_gnn_layout_t lay;
    tma_status_t st = tma_gnn_layout_build(cfg, &lay);
    if (st != TMA_OK)
        return st;
    memset(params, 0, (size_t)lay.total * sizeof *params);
    for (int i = 0; i < lay.count; i++) {
        const tma_gnn_param_info_t *p = &lay.params[i];
        float *dst = params + p->offset;
        int64_t n = p->rows * p->cols;
        if (ends_with(p->name, ".prelu")) {
            dst[0] = 0.25f;
        } else if (strcmp(p->name, "dec.relation") == 0) {
            /* DistMult starts as the plain dot product r_u . r_v for every relation. */
            for (int64_t j = 0; j < n; j++)
                dst[j] = 1.0f;
        } else if (ends_with(p->name, ".bases") || ends_with(p->name, ".coef")) {
            tma_rng_t rng;
            tma_rng_seed(&rng, seed, 0x676e6e00u + (uint64_t)i);
            /* V: Glorot over one basis [in x out]; coef: Glorot over [R x B]. */
            int64_t fan = ends_with(p->name, ".bases") ? p->rows + p->cols / cfg->bases : p->rows + p->cols;
            double bound = sqrt(6.0 / (double)fan);
            for (int64_t j = 0; j < n; j++)
                dst[j] = (float)((2.0 * tma_rng_uniform(&rng) - 1.0) * bound);
        } else if (ends_with(p->name, ".ln_weight")) {
            for (int64_t j = 0; j < n; j++)
                dst[j] = 1.0f;
        } else if (strstr(p->name, ".weight") || ends_with(p->name, ".att_src") || ends_with(p->name, ".att_dst")) {
            /* Glorot (Xavier) uniform, one RNG stream a tensor (GAT's attention
             * vectors too, over heads x width as GATConv's glorot). */
            tma_rng_t rng;
            tma_rng_seed(&rng, seed, 0x676e6e00u + (uint64_t)i);
            double bound = sqrt(6.0 / (double)(p->rows + p->cols));
            for (int64_t j = 0; j < n; j++)
                dst[j] = (float)((2.0 * tma_rng_uniform(&rng) - 1.0) * bound);
        }
        /* biases and LayerNorm shifts stay 0 */
    }
    return TMA_OK;
}
