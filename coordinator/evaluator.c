/*
 * evaluator.c: the coordinator's evaluator thread.  It never blocks a
 * round: submitting copies the weights into a one-slot mailbox (the newest
 * model wins), and the thread writes each round's metrics line, in round
 * order, once the newest model handed over so far has been evaluated, and
 * logs the progress line of each (with that round's validation MRR).
 */
#include "coord_int.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define COMP "evaluator"

typedef struct pending {
    int64_t round;
    double time;
    cJSON *record;
    struct pending *next;
} pending_t;

struct coord_eval {
    tma_gnn_config_t cfg;
    const tma_graph_t *graph;
    char *metrics_path, *best_path;
    tma_kv_t *kv;
    char job[TMA_JOB_NAME_MAX];
    uint64_t epoch;
    tma_gnn_evaluator_t *ev;
    int64_t P;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    int quit, busy;
    /* mailbox */
    int has_mail;
    int64_t mail_round;
    double mail_time;
    float *mail, *work;
    /* records waiting for their line */
    pending_t *head, *tail;
    /* results */
    int64_t best_round;
    double best_val, best_time;
    /* the progress line */
    tma_run_budget_t budget;
    double progress_best;
    int64_t evaluated, skipped;
    tma_status_t error;
};

/* Writes obj under key k (a folder: its number n). */
static void put_etcd(coord_eval_t *e, tma_job_key_t k, int64_t n, const cJSON *obj)
{
    if (!e->kv)
        return;
    char key[TMA_KEY_MAX];
    if (k == TMA_KEY_METRICS)
        tma_job_key_n(key, e->job, k, n);
    else
        tma_job_key(key, e->job, k);
    char *val = cJSON_PrintUnformatted(obj);
    if (!val)
        return;
    tma_status_t st = tma_kv_put(e->kv, key, val, strlen(val), 0, NULL);
    if (st != TMA_OK)
        tma_log_warn(COMP, "cannot record %s in etcd: %s", key, tma_status_str(st));
    cJSON_free(val);
}

/* Writes the lines of every pending record up to `round` (unlocked I/O). */
static void flush_records(coord_eval_t *e, pending_t *list, int64_t round, double val, int ok)
{
    while (list) {
        pending_t *p = list;
        list = p->next;
        cJSON *r = p->record;
        cJSON_DeleteItemFromObject(r, "val_mrr");
        cJSON_DeleteItemFromObject(r, "eval");
        if (p->round == round && ok) {
            cJSON_AddNumberToObject(r, "val_mrr", val);
            cJSON_AddStringToObject(r, "eval", "ok");
        } else {
            cJSON_AddNullToObject(r, "val_mrr");
            cJSON_AddStringToObject(r, "eval", p->round == round ? "error" : "skipped");
        }
        tma_status_t st = tma_run_append_line(e->metrics_path, r);
        if (st != TMA_OK && e->error == TMA_OK)
            e->error = st;
        char line[512];
        tma_run_progress_line(r, &e->budget, &e->progress_best, line, sizeof line);
        tma_log_info(COMP, "%s", line);
        put_etcd(e, TMA_KEY_METRICS, p->round, r);
        cJSON_Delete(r);
        free(p);
    }
}

static void *eval_main(void *arg)
{
    coord_eval_t *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        while (!e->has_mail && !e->quit)
            pthread_cond_wait(&e->cond, &e->lock);
        if (!e->has_mail)
            break;
        float *t = e->work;
        e->work = e->mail;
        e->mail = t;
        int64_t round = e->mail_round;
        double time = e->mail_time;
        e->has_mail = 0;
        e->busy = 1;
        /* Take the records this evaluation will settle. */
        pending_t *list = NULL, **tailp = &list;
        while (e->head && e->head->round <= round) {
            pending_t *p = e->head;
            e->head = p->next;
            p->next = NULL;
            *tailp = p;
            tailp = &p->next;
        }
        if (!e->head)
            e->tail = NULL;
        pthread_mutex_unlock(&e->lock);

        double val = NAN;
        double t0 = tma_clock_now();
        tma_status_t st = tma_gnn_evaluator_mrr(e->ev, e->work, TMA_GNN_SPLIT_VAL, &val);
        double secs = tma_clock_now() - t0;
        int ok = st == TMA_OK && isfinite(val);
        if (!ok)
            tma_log_error(COMP, "evaluating round %lld failed: %s", (long long)round, tma_status_str(st));
        else
            tma_log_debug(COMP, "round %lld: validation MRR %.4f (%.2f s)", (long long)round, val, secs);
        int64_t nskip = 0;
        for (pending_t *p = list; p; p = p->next)
            nskip += p->round != round;
        if (nskip)
            tma_log_info(COMP, "evaluation fell behind: skipped %lld round(s), evaluated round %lld",
                         (long long)nskip, (long long)round);
        int better = 0;
        pthread_mutex_lock(&e->lock);
        if (ok) {
            e->evaluated++;
            better = e->best_round < 0 || val > e->best_val;
        }
        e->skipped += nskip;
        pthread_mutex_unlock(&e->lock);
        if (better) {
            /* Keep the best model's weights before saying it is the best. */
            tma_status_t ws = tma_gnn_weights_write(e->best_path, &e->cfg, e->work, (uint64_t)round);
            if (ws == TMA_OK) {
                pthread_mutex_lock(&e->lock);
                e->best_round = round;
                e->best_val = val;
                e->best_time = time;
                pthread_mutex_unlock(&e->lock);
                cJSON *b = cJSON_CreateObject();
                if (b) {
                    cJSON_AddNumberToObject(b, "round", (double)round);
                    cJSON_AddNumberToObject(b, "val_mrr", val);
                    cJSON_AddNumberToObject(b, "time", time);
                    cJSON_AddStringToObject(b, "weights", e->best_path);
                    put_etcd(e, TMA_KEY_BEST, 0, b);
                    cJSON_Delete(b);
                }
            } else if (e->error == TMA_OK) {
                e->error = ws;
            }
        }
        flush_records(e, list, round, val, ok);
        pthread_mutex_lock(&e->lock);
        e->busy = 0;
        pthread_cond_broadcast(&e->cond);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

tma_status_t coord_eval_create(const coord_eval_cfg_t *c, coord_eval_t **e_p)
{
    coord_eval_t *e = calloc(1, sizeof *e);
    if (!e)
        return TMA_ERR_NOMEM;
    e->cfg = *c->cfg;
    e->graph = c->graph;
    e->kv = c->kv;
    snprintf(e->job, sizeof e->job, "%s", c->job ? c->job : "");
    e->epoch = c->epoch;
    e->best_round = c->best_round;
    e->best_val = c->best_val;
    e->best_time = c->best_time;
    e->budget = c->budget;
    e->progress_best = c->best_round >= 0 ? c->best_val : NAN;
    e->metrics_path = tma_run_path(c->run_dir, "metrics.jsonl");
    e->best_path = tma_run_path(c->run_dir, "best.tmaw");
    e->P = tma_gnn_param_count(&e->cfg);
    tma_status_t st = TMA_ERR_NOMEM;
    if (!e->metrics_path || !e->best_path || e->P <= 0)
        goto fail;
    e->mail = tma_alloc_aligned((size_t)e->P * sizeof(float));
    e->work = tma_alloc_aligned((size_t)e->P * sizeof(float));
    if (!e->mail || !e->work)
        goto fail;
    st = tma_gnn_evaluator_create(&e->cfg, e->graph, &e->ev);
    if (st != TMA_OK)
        goto fail;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    if (pthread_create(&e->thread, NULL, eval_main, e) != 0) {
        tma_gnn_evaluator_destroy(e->ev);
        st = TMA_ERR_NOMEM;
        goto fail;
    }
    *e_p = e;
    return TMA_OK;
fail:
    tma_free_aligned(e->mail);
    tma_free_aligned(e->work);
    free(e->metrics_path);
    free(e->best_path);
    free(e);
    return st;
}

void coord_eval_submit(coord_eval_t *e, int64_t round, double time, const float *params, cJSON *record)
{
    pending_t *p = calloc(1, sizeof *p);
    pthread_mutex_lock(&e->lock);
    memcpy(e->mail, params, (size_t)e->P * sizeof(float));
    e->mail_round = round;
    e->mail_time = time;
    e->has_mail = 1;
    if (p) {
        p->round = round;
        p->time = time;
        p->record = record;
        if (e->tail)
            e->tail->next = p;
        else
            e->head = p;
        e->tail = p;
    } else {
        cJSON_Delete(record);
    }
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

void coord_eval_drain(coord_eval_t *e)
{
    pthread_mutex_lock(&e->lock);
    while (e->has_mail || e->busy || e->head)
        pthread_cond_wait(&e->cond, &e->lock);
    pthread_mutex_unlock(&e->lock);
}

void coord_eval_best(coord_eval_t *e, int64_t *round_p, double *val_p, double *time_p)
{
    pthread_mutex_lock(&e->lock);
    *round_p = e->best_round;
    *val_p = e->best_val;
    if (time_p)
        *time_p = e->best_time;
    pthread_mutex_unlock(&e->lock);
}

void coord_eval_counts(coord_eval_t *e, int64_t *evaluated_p, int64_t *skipped_p)
{
    pthread_mutex_lock(&e->lock);
    *evaluated_p = e->evaluated;
    *skipped_p = e->skipped;
    pthread_mutex_unlock(&e->lock);
}

tma_status_t coord_eval_error(coord_eval_t *e)
{
    pthread_mutex_lock(&e->lock);
    tma_status_t st = e->error;
    pthread_mutex_unlock(&e->lock);
    return st;
}

void coord_eval_destroy(coord_eval_t *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    e->quit = 1;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    for (pending_t *p = e->head; p;) {
        pending_t *n = p->next;
        cJSON_Delete(p->record);
        free(p);
        p = n;
    }
    tma_gnn_evaluator_destroy(e->ev);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    tma_free_aligned(e->mail);
    tma_free_aligned(e->work);
    free(e->metrics_path);
    free(e->best_path);
    free(e);
}
