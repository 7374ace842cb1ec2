/*
 * tb.c: a metrics.jsonl line as TensorBoard scalars (docs/formats.md,
 * "TensorBoard event files").  Both `tma train` and the coordinator call
 * it right after the line is written, so the event file holds exactly what
 * metrics.jsonl holds, step = the line's round.
 */
#include "tma_job.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define TB_MAX 4096 /* 2 a worker: jobs up to about 2,000 workers; past it, the rest is left out */

typedef struct tb_set {
    int n;
    char tags[TB_MAX][96];
    float vals[TB_MAX];
} tb_set_t;

static void add(tb_set_t *s, const char *tag, double v)
{
    if (s->n >= TB_MAX || !isfinite(v))
        return;
    snprintf(s->tags[s->n], sizeof s->tags[0], "%s", tag);
    s->vals[s->n++] = (float)v;
}

static void add_num(tb_set_t *s, const cJSON *rec, const char *key, const char *tag)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(rec, key);
    if (cJSON_IsNumber(x))
        add(s, tag, x->valuedouble);
}

tma_status_t tma_job_run_tb_line(tma_tfevents_t *w, const cJSON *rec)
{
    static tb_set_t s; /* 400 KB, static: callers are serialised by the lock */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    const cJSON *round = cJSON_GetObjectItemCaseSensitive(rec, "round");
    const cJSON *wall = cJSON_GetObjectItemCaseSensitive(rec, "wall");
    if (!w || !cJSON_IsNumber(round))
        return TMA_OK;
    pthread_mutex_lock(&lock);
    s.n = 0;
    add_num(&s, rec, "val_mrr", "val/mrr");
    const cJSON *x;
    cJSON_ArrayForEach(x, rec)
    {
        if (x->string && strncmp(x->string, "val_hits@", 9) == 0 && cJSON_IsNumber(x)) {
            char tag[96];
            snprintf(tag, sizeof tag, "val/hits@%s", x->string + 9);
            add(&s, tag, x->valuedouble);
        }
    }
    add_num(&s, rec, "eval_seconds", "val/eval_seconds");
    add_num(&s, rec, "agg_seconds", "round/aggregation_seconds");
    const cJSON *alive = cJSON_GetObjectItemCaseSensitive(rec, "alive");
    if (cJSON_IsArray(alive))
        add(&s, "round/alive_workers", cJSON_GetArraySize(alive));
    /* tma train: one loss (-1 when no step ran) and its edge rate. */
    const cJSON *loss = cJSON_GetObjectItemCaseSensitive(rec, "loss");
    if (cJSON_IsNumber(loss) && loss->valuedouble >= 0)
        add(&s, "train/loss", loss->valuedouble);
    add_num(&s, rec, "edges_per_second", "train/edges_per_second");
    /* A distributed round: per worker. */
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(rec, "workers");
    cJSON_ArrayForEach(x, ws)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(x, "id");
        if (!cJSON_IsNumber(id))
            continue;
        char tag[96];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, "steps_per_s");
        if (cJSON_IsNumber(v)) {
            snprintf(tag, sizeof tag, "train/steps_per_second/%d", id->valueint);
            add(&s, tag, v->valuedouble);
        }
        v = cJSON_GetObjectItemCaseSensitive(x, "loss");
        if (cJSON_IsNumber(v)) {
            snprintf(tag, sizeof tag, "train/loss/%d", id->valueint);
            add(&s, tag, v->valuedouble);
        }
    }
    static const char *tags[TB_MAX];
    for (int i = 0; i < s.n; i++)
        tags[i] = s.tags[i];
    tma_status_t st = TMA_OK;
    if (s.n > 0) {
        st = tma_tfevents_scalars(w, cJSON_IsNumber(wall) ? wall->valuedouble : tma_clock_wall(),
                                  (int64_t)round->valuedouble, s.n, tags, s.vals);
        if (st == TMA_OK)
            st = tma_tfevents_flush(w);
    }
    pthread_mutex_unlock(&lock);
    return st;
}

tma_status_t tma_job_run_metrics_section(const cJSON *root, const char *ctx, int *tensorboard_p)
{
    static const char *const keys[] = {"tensorboard", NULL};
    *tensorboard_p = 1;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "metrics");
    if (!m)
        return TMA_OK;
    if (!cJSON_IsObject(m)) {
        tma_log_error("job", "%s: \"metrics\" must be an object such as {\"tensorboard\": false}", ctx);
        return TMA_ERR_CONFIG;
    }
    tma_status_t st = tma_json_check_keys(m, keys, "metrics");
    if (st == TMA_OK)
        st = tma_json_get_bool(m, "tensorboard", 1, "metrics", tensorboard_p);
    return st;
}
