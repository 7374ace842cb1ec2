/*
 * tb.c: a metrics.jsonl line as TensorBoard scalars (docs/formats.md,
 * "TensorBoard event files").  Both `tma train` and the coordinator call
 * it right after the line is written, so the event file holds exactly what
 * metrics.jsonl holds, step = the line's round.  And the config's "metrics"
 * section both read, with the parse of metrics.listen (the coordinator's
 * Prometheus endpoint, coordinator/prom.c).
 */
#include "tma_job.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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

tma_status_t tma_job_listen_parse(const char *s, struct sockaddr_storage *sa_p, unsigned *len_p)
{
    char host[64];
    const char *colon = s ? strrchr(s, ':') : NULL;
    if (!colon || colon == s || (size_t)(colon - s) >= sizeof host)
        return TMA_ERR_CONFIG;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (!isdigit((unsigned char)colon[1]) || *end || errno || port < 1 || port > 65535)
        return TMA_ERR_CONFIG;
    struct sockaddr_storage sa;
    memset(&sa, 0, sizeof sa);
    size_t hl = strlen(host);
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&sa;
        host[hl - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
            return TMA_ERR_CONFIG;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *len_p = sizeof *a6;
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&sa;
        if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
            return TMA_ERR_CONFIG;
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *len_p = sizeof *a4;
    }
    *sa_p = sa;
    return TMA_OK;
}

tma_status_t tma_job_run_metrics_section(const cJSON *root, const char *ctx, int *tensorboard_p, char *listen,
                                         size_t cap)
{
    static const char *const job_keys[] = {"tensorboard", "listen", NULL};
    static const char *const train_keys[] = {"tensorboard", NULL};
    *tensorboard_p = 1;
    if (listen)
        listen[0] = '\0';
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "metrics");
    if (!m)
        return TMA_OK;
    if (!cJSON_IsObject(m)) {
        tma_log_error("job", "%s: \"metrics\" must be an object such as {\"tensorboard\": false}", ctx);
        return TMA_ERR_CONFIG;
    }
    if (!listen && cJSON_GetObjectItemCaseSensitive(m, "listen")) {
        tma_log_error("job", "%s: metrics.listen is the coordinator's Prometheus endpoint: only a distributed job "
                             "(tma launch, tma coordinator) has one", ctx);
        return TMA_ERR_CONFIG;
    }
    tma_status_t st = tma_json_check_keys(m, listen ? job_keys : train_keys, "metrics");
    if (st == TMA_OK)
        st = tma_json_get_bool(m, "tensorboard", 1, "metrics", tensorboard_p);
    if (st != TMA_OK || !listen)
        return st;
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(m, "listen");
    struct sockaddr_storage sa;
    unsigned len;
    if (l && (!cJSON_IsString(l) || strlen(l->valuestring) >= cap ||
              tma_job_listen_parse(l->valuestring, &sa, &len) != TMA_OK)) {
        tma_log_error("job", "%s: metrics.listen must be \"ADDR:PORT\" with a numeric address of this host and a "
                             "port 1..65535, such as \"127.0.0.1:9464\" or \"[::1]:9464\"", ctx);
        return TMA_ERR_CONFIG;
    }
    if (l)
        snprintf(listen, cap, "%s", l->valuestring);
    return TMA_OK;
}
