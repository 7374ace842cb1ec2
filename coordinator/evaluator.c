/*
 * evaluator.c: the coordinator's evaluator thread.  It never blocks a
 * round: submitting copies the weights into a one-slot mailbox (the newest
 * model wins), and the thread writes each round's metrics line, in round
 * order, once the newest model handed over so far has been evaluated, and
 * logs the progress line of each (with that round's validation MRR).
 * Its etcd writes are guarded by the coordinator's epoch like every other
 * write of the leader, and once the coordinator is fenced it writes nothing
 * more, neither to etcd nor to the run folder.  A file write that fails (a
 * full disk) is retried, never left half done.
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
    tma_tfevents_t *tb; /* RUN/events.out.tfevents.* (one per coordinator) */
    tma_kv_t *kv;
    char job[TMA_JOB_NAME_MAX];
    uint64_t epoch;
    int *fenced;
    volatile sig_atomic_t *stop_flag;
    tma_gnn_evaluator_t *ev;
    coord_ranks_t *ranks; /* eval.where "workers": the ranks evaluate (ev is NULL) */
    char why[256];        /* why the last evaluation on the ranks failed */
    char *best_test_path; /* RUN/best-test.json: the best round's test metrics, measured with it (ranks) */
    tma_gnn_metrics_t best_test;
    int64_t best_test_round; /* -1: none kept */
    const tma_inject_t *inj;
    coord_prom_t *prom;
    int64_t P;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    int quit, busy;
    int held; /* coord_eval_metrics is using ev: take no mail */
    /* mailbox */
    int has_mail;
    int64_t mail_round;
    double mail_time;
    float *mail, *work;
    float *best;  /* the best round's weights, to restore best.tmaw (coord_eval_settle_best) */
    int has_best; /* best holds them */
    /* records waiting for their line */
    pending_t *head, *tail;
    /* results */
    int64_t best_round;
    double best_val, best_time;
    /* the progress line */
    tma_job_run_budget_t budget;
    double progress_best;
    int64_t evaluated, skipped;
    tma_status_t error;
};

static int fenced(coord_eval_t *e)
{
    return e->fenced && __atomic_load_n(e->fenced, __ATOMIC_SEQ_CST);
}

/* A file write is given up only when the coordinator stops or is fenced. */
static int give_up(coord_eval_t *e)
{
    return fenced(e) || (e->stop_flag && *e->stop_flag);
}

/* Writes obj under key k (a folder: its number n), guarded by the epoch.
 * TMA_ERR_FENCED when another coordinator leads: nothing more is written. */
static tma_status_t put_etcd(coord_eval_t *e, tma_job_key_t k, int64_t n, const cJSON *obj)
{
    if (!e->kv)
        return fenced(e) ? TMA_ERR_FENCED : TMA_OK;
    char key[TMA_KEY_MAX];
    if (k == TMA_KEY_METRICS)
        tma_job_key_n(key, e->job, k, n);
    else
        tma_job_key(key, e->job, k);
    char *val = cJSON_PrintUnformatted(obj);
    if (!val)
        return TMA_ERR_NOMEM;
    const char *kp[1] = {key};
    char *vp[1] = {val};
    tma_status_t st = fenced(e) ? TMA_ERR_FENCED : coord_guarded_txn(e->kv, e->job, e->epoch, e->fenced, 1, kp, vp);
    if (st != TMA_OK && st != TMA_ERR_FENCED)
        tma_log_warn(COMP, "cannot record %s in etcd: %s (the run folder has it)", key, tma_status_str(st));
    cJSON_free(val);
    return st;
}

static void set_error(coord_eval_t *e, tma_status_t st)
{
    pthread_mutex_lock(&e->lock);
    if (e->error == TMA_OK)
        e->error = st;
    pthread_mutex_unlock(&e->lock);
}

/* The metrics of params on split: on the ranks (with test_p, the test
 * split's too, on the same embeddings), or with the one evaluator. */
static tma_status_t evaluate(coord_eval_t *e, const float *params, tma_gnn_split_t split, tma_gnn_metrics_t *m_p,
                             tma_gnn_metrics_t *test_p)
{
    if (!e->ranks)
        return tma_gnn_evaluator_metrics(e->ev, params, split, m_p);
    tma_status_t st = coord_ranks_metrics(e->ranks, params, split, m_p, test_p, e->why, sizeof e->why);
    if (st != TMA_OK)
        tma_log_warn(COMP, "the evaluation on the ranks failed: %s", e->why);
    return st;
}

/* Writes the lines of every pending record up to `round` (unlocked I/O):
 * metrics/<t> first, whose guard proves this coordinator still leads, then
 * the line and its progress line. */
static void flush_records(coord_eval_t *e, pending_t *list, int64_t round, const tma_gnn_metrics_t *m, int ok)
{
    while (list) {
        pending_t *p = list;
        list = p->next;
        cJSON *r = p->record;
        cJSON_DeleteItemFromObject(r, "val_mrr");
        cJSON_DeleteItemFromObject(r, "eval");
        if (p->round == round && ok) {
            cJSON_AddNumberToObject(r, "val_mrr", m->mrr);
            tma_gnn_metrics_json(m, "val_", r);
            cJSON_AddStringToObject(r, "eval", "ok");
        } else {
            cJSON_AddNullToObject(r, "val_mrr");
            /* A failed evaluation on the ranks is skipped, with its reason. */
            const int failed_ranks = p->round == round && e->ranks && e->why[0];
            cJSON_AddStringToObject(r, "eval", p->round == round && !failed_ranks ? "error" : "skipped");
            if (failed_ranks)
                cJSON_AddStringToObject(r, "eval_reason", e->why);
        }
        if (put_etcd(e, TMA_KEY_METRICS, p->round, r) != TMA_ERR_FENCED) {
            coord_io_retry_t rt = {e->metrics_path, "a metrics line", 0, 0};
            tma_status_t st;
            while ((st = tma_job_run_append_line(e->metrics_path, r)) != TMA_OK && coord_io_retry(&rt, st, give_up(e)))
                ;
            coord_io_retry_end(&rt, st);
            if (st != TMA_OK) {
                tma_log_error(COMP, "round %lld: its line is missing from %s", (long long)p->round, e->metrics_path);
                set_error(e, st);
            } else {
                if (tma_job_run_tb_line(e->tb, r) != TMA_OK)
                    tma_log_warn(COMP, "round %lld: its TensorBoard values are missing from %s", (long long)p->round,
                                 tma_tfevents_path(e->tb));
                char line[512];
                tma_job_run_progress_line(r, &e->budget, &e->progress_best, line, sizeof line);
                tma_log_info(COMP, "%s", line);
            }
        }
        cJSON_Delete(r);
        free(p);
    }
}

/* RUN/best-test.json: round `round`'s test metrics as running sums (the
 * numbers come back exactly), written after best.tmaw and before `best`. */
static tma_status_t write_best_test(coord_eval_t *e, int64_t round, const tma_gnn_metrics_t *m)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return TMA_ERR_NOMEM;
    cJSON_AddNumberToObject(o, "round", (double)round);
    cJSON_AddNumberToObject(o, "edges", (double)m->edges);
    cJSON_AddNumberToObject(o, "sum_rr_pessimistic", m->sum_rr_pessimistic);
    cJSON_AddNumberToObject(o, "sum_rr_mean", m->sum_rr_mean);
    cJSON_AddNumberToObject(o, "sum_auc", m->sum_auc);
    double hc[TMA_GNN_MAX_HITS];
    for (int k = 0; k < m->num_hits; k++)
        hc[k] = (double)m->hit_count[k];
    cJSON_AddItemToObject(o, "hit_count", cJSON_CreateDoubleArray(hc, m->num_hits));
    coord_io_retry_t rt = {e->best_test_path, "the best round's test metrics", 0, 0};
    tma_status_t st;
    while ((st = tma_json_write_file(e->best_test_path, o)) != TMA_OK && coord_io_retry(&rt, st, give_up(e)))
        ;
    coord_io_retry_end(&rt, st);
    cJSON_Delete(o);
    if (st == TMA_OK) {
        pthread_mutex_lock(&e->lock);
        e->best_test = *m;
        e->best_test_round = round;
        pthread_mutex_unlock(&e->lock);
    }
    return st;
}

tma_status_t coord_eval_best_test(coord_eval_t *e, int64_t round, tma_gnn_metrics_t *m_p)
{
    pthread_mutex_lock(&e->lock);
    const int have = e->best_test_round == round && round >= 0;
    if (have)
        *m_p = e->best_test;
    pthread_mutex_unlock(&e->lock);
    if (have)
        return TMA_OK;
    /* A coordinator that took over: the file its predecessor wrote. */
    cJSON *o = NULL;
    if (!e->best_test_path || tma_json_load_file(e->best_test_path, &o) != TMA_OK)
        return TMA_ERR_NOT_FOUND;
    tma_gnn_metrics_t m;
    tma_gnn_metrics_init(&m, &e->cfg);
    const cJSON *hc = cJSON_GetObjectItemCaseSensitive(o, "hit_count");
    int64_t r = -1, edges = 0;
    tma_status_t st = tma_json_get_int(o, "round", -1, 0, INT64_MAX, e->best_test_path, &r);
    st = st ? st : tma_json_get_int(o, "edges", 0, 1, INT64_MAX, e->best_test_path, &edges);
    st = st ? st : tma_json_get_double(o, "sum_rr_pessimistic", 0, 0, 1e18, e->best_test_path, &m.sum_rr_pessimistic);
    st = st ? st : tma_json_get_double(o, "sum_rr_mean", 0, 0, 1e18, e->best_test_path, &m.sum_rr_mean);
    st = st ? st : tma_json_get_double(o, "sum_auc", 0, 0, 1e18, e->best_test_path, &m.sum_auc);
    if (st == TMA_OK && (r != round || !cJSON_IsArray(hc) || cJSON_GetArraySize(hc) != m.num_hits))
        st = TMA_ERR_MISMATCH;
    for (int k = 0; st == TMA_OK && k < m.num_hits; k++) {
        const cJSON *it = cJSON_GetArrayItem(hc, k);
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > (double)edges)
            st = TMA_ERR_MALFORMED;
        else
            m.hit_count[k] = (int64_t)it->valuedouble;
    }
    cJSON_Delete(o);
    if (st != TMA_OK)
        return st;
    m.edges = edges;
    tma_gnn_metrics_finish(&m);
    *m_p = m;
    return TMA_OK;
}

/* best.tmaw from e->work (round `round`), before `best` announces it; only
 * while this coordinator leads (a guard with no writes proves it). */
static tma_status_t write_best(coord_eval_t *e, int64_t round)
{
    if (fenced(e) || (e->kv && coord_guarded_txn(e->kv, e->job, e->epoch, e->fenced, 0, NULL, NULL) == TMA_ERR_FENCED))
        return TMA_ERR_FENCED;
    coord_io_retry_t rt = {e->best_path, "the best model", 0, 0};
    tma_status_t st;
    while ((st = tma_gnn_weights_write(e->best_path, &e->cfg, e->work, (uint64_t)round)) != TMA_OK &&
           coord_io_retry(&rt, st, give_up(e)))
        ;
    coord_io_retry_end(&rt, st);
    return st;
}

static void *eval_main(void *arg)
{
    coord_eval_t *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        while ((!e->has_mail || e->held) && !e->quit)
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

        tma_inject_point(e->inj, "eval", round);
        tma_gnn_metrics_t m;
        double t0 = tma_clock_now();
        /* On the ranks the test edges are scored with every evaluation: the
         * best round's test metrics are known when it becomes the best, and
         * the end of the job needs no rank. */
        tma_gnn_metrics_t tm;
        memset(&tm, 0, sizeof tm);
        tma_status_t st = evaluate(e, e->work, TMA_GNN_SPLIT_VAL, &m, e->ranks ? &tm : NULL);
        const double val = st == TMA_OK ? m.mrr : NAN;
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
        if (better && !fenced(e)) {
            /* Keep the best model's weights before saying it is the best. */
            tma_status_t ws = write_best(e, round);
            if (ws == TMA_OK && e->ranks && tm.edges > 0)
                ws = write_best_test(e, round, &tm);
            if (ws == TMA_OK) {
                pthread_mutex_lock(&e->lock);
                e->best_round = round;
                e->best_val = val;
                e->best_time = time;
                memcpy(e->best, e->work, (size_t)e->P * sizeof(float));
                e->has_best = 1;
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
            } else if (ws != TMA_ERR_FENCED) {
                set_error(e, ws);
            }
        }
        pthread_mutex_lock(&e->lock);
        double best_val = e->best_val;
        pthread_mutex_unlock(&e->lock);
        if (ok)
            coord_prom_eval(e->prom, round, val, best_val, secs);
        if (fenced(e)) {
            for (pending_t *p = list; p;) {
                pending_t *n = p->next;
                cJSON_Delete(p->record);
                free(p);
                p = n;
            }
            list = NULL;
        }
        flush_records(e, list, round, &m, ok);
        pthread_mutex_lock(&e->lock);
        e->busy = 0;
        pthread_cond_broadcast(&e->cond);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

/* A resumed best round: its weights from best.tmaw, kept in e->best. */
static void load_best(coord_eval_t *e)
{
    float *params = NULL;
    int64_t count = 0;
    uint64_t r = 0;
    if (tma_gnn_weights_read(e->best_path, &e->cfg, NULL, &params, &count, &r) == TMA_OK && count == e->P &&
        (int64_t)r == e->best_round) {
        memcpy(e->best, params, (size_t)e->P * sizeof(float));
        e->has_best = 1;
    }
    free(params);
}

tma_status_t coord_eval_settle_best(coord_eval_t *e)
{
    pthread_mutex_lock(&e->lock);
    int64_t best_round = e->best_round;
    int have = e->has_best;
    pthread_mutex_unlock(&e->lock);
    if (best_round < 0 || fenced(e))
        return TMA_OK;
    float *params = NULL;
    int64_t count = 0;
    uint64_t r = 0;
    tma_status_t st = tma_gnn_weights_read(e->best_path, &e->cfg, NULL, &params, &count, &r);
    free(params);
    if (st == TMA_OK && count == e->P && (int64_t)r == best_round)
        return TMA_OK;
    if (!have) {
        tma_log_error(COMP, "%s does not hold the best round %lld and its weights are gone", e->best_path,
                      (long long)best_round);
        return TMA_ERR_MISMATCH;
    }
    if (st == TMA_OK)
        tma_log_warn(COMP, "%s holds round %llu, not the best round %lld (written by a coordinator that was "
                           "fenced?): writing it again",
                     e->best_path, (unsigned long long)r, (long long)best_round);
    else
        tma_log_warn(COMP, "%s cannot be read (%s): writing the best round %lld again", e->best_path,
                     tma_status_str(st), (long long)best_round);
    coord_io_retry_t rt = {e->best_path, "the best model", 0, 0};
    while ((st = tma_gnn_weights_write(e->best_path, &e->cfg, e->best, (uint64_t)best_round)) != TMA_OK &&
           coord_io_retry(&rt, st, give_up(e)))
        ;
    coord_io_retry_end(&rt, st);
    return st;
}

/* What coord_eval_create allocates (the thread, the gnn evaluator and the
 * locks are the caller's to end first). */
static void eval_free(coord_eval_t *e)
{
    tma_free_aligned(e->mail);
    tma_free_aligned(e->work);
    tma_free_aligned(e->best);
    free(e->metrics_path);
    free(e->best_path);
    free(e->best_test_path);
    tma_tfevents_close(e->tb);
    free(e);
}

tma_status_t coord_eval_create(const coord_eval_cfg_t *c, coord_eval_t **e_p)
{
    if (!c->fenced)
        return TMA_ERR_INVALID;
    coord_eval_t *e = calloc(1, sizeof *e);
    if (!e)
        return TMA_ERR_NOMEM;
    e->cfg = *c->cfg;
    e->graph = c->graph;
    e->kv = c->kv;
    snprintf(e->job, sizeof e->job, "%s", c->job ? c->job : "");
    e->epoch = c->epoch;
    e->fenced = c->fenced;
    e->stop_flag = c->stop_flag;
    e->best_round = c->best_round;
    e->best_val = c->best_val;
    e->best_time = c->best_time;
    e->budget = c->budget;
    e->inj = c->inj;
    e->prom = c->prom;
    e->progress_best = c->best_round >= 0 ? c->best_val : NAN;
    e->metrics_path = tma_job_run_path(c->run_dir, "metrics.jsonl");
    e->best_path = tma_job_run_path(c->run_dir, "best.tmaw");
    e->best_test_path = tma_job_run_path(c->run_dir, "best-test.json");
    e->best_test_round = -1;
    e->P = tma_gnn_param_count(&e->cfg);
    tma_status_t st = TMA_ERR_NOMEM;
    if (!e->metrics_path || !e->best_path || e->P <= 0)
        goto fail;
    if (c->tensorboard && tma_tfevents_open(c->run_dir, &e->tb) != TMA_OK)
        tma_log_warn(COMP, "no TensorBoard event file in %s: metrics.jsonl alone records the rounds", c->run_dir);
    /* metrics.jsonl was cut back to the rounds before first_round (takeover.c),
     * which this coordinator writes again: the predecessor's values of them
     * are dropped from TensorBoard's view too. */
    if (e->tb && c->first_round > 0 && tma_tfevents_restart(e->tb, tma_clock_wall(), c->first_round) != TMA_OK)
        tma_log_warn(COMP, "%s: no restart record: TensorBoard may show rounds from %lld twice",
                     tma_tfevents_path(e->tb), (long long)c->first_round);
    e->mail = tma_alloc_aligned((size_t)e->P * sizeof(float));
    e->work = tma_alloc_aligned((size_t)e->P * sizeof(float));
    e->best = tma_alloc_aligned((size_t)e->P * sizeof(float));
    if (!e->mail || !e->work || !e->best)
        goto fail;
    if (e->best_round >= 0)
        load_best(e);
    st = c->ranks ? coord_ranks_create(c->ranks, &e->ranks) : tma_gnn_evaluator_create(&e->cfg, e->graph, &e->ev);
    if (st != TMA_OK)
        goto fail;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    if (pthread_create(&e->thread, NULL, eval_main, e) != 0) {
        tma_gnn_evaluator_destroy(e->ev);
        coord_ranks_destroy(e->ranks);
        st = TMA_ERR_NOMEM;
        goto fail;
    }
    *e_p = e;
    return TMA_OK;
fail:
    eval_free(e);
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

tma_status_t coord_eval_metrics(coord_eval_t *e, const float *params, tma_gnn_split_t split, tma_gnn_metrics_t *m_p)
{
    pthread_mutex_lock(&e->lock);
    while (e->has_mail || e->busy || e->held)
        pthread_cond_wait(&e->cond, &e->lock);
    e->held = 1;
    pthread_mutex_unlock(&e->lock);
    tma_status_t st = evaluate(e, params, split, m_p, NULL);
    pthread_mutex_lock(&e->lock);
    e->held = 0;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    return st;
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
    coord_ranks_destroy(e->ranks);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    eval_free(e);
}

/* Outside the thread: used by end.c (best.tmaw on the test split) and
 * takeover.c (the previous best on the validation split). */
tma_status_t coord_eval_weights_file(coord_t *c, const char *path, tma_gnn_split_t split, tma_gnn_metrics_t *m_p,
                                     uint64_t *round_p)
{
    float *params = NULL;
    int64_t count = 0;
    uint64_t r = 0;
    tma_status_t st = tma_gnn_weights_read(path, &c->cfg, NULL, &params, &count, &r);
    if (st != TMA_OK)
        return st;
    if (c->ev) {
        st = coord_eval_metrics(c->ev, params, split, m_p);
        /* Ranks: a rank that just failed still owns its shards until its
         * lease lapses and the policy deals them; try again after that. */
        for (int again = 0; c->cfg.eval_on_workers > 0 && again < 3 && st != TMA_OK && st != TMA_ERR_NOT_FOUND &&
                            !coord_stopping(c);
             again++) {
            tma_log_info(COMP, "%s: evaluating it on the ranks again in %.0f s", path, c->job->lease_ttl + 1.0);
            tma_sleep(c->job->lease_ttl + 1.0);
            st = coord_eval_metrics(c->ev, params, split, m_p);
        }
    } else if (c->cfg.eval_on_workers > 0) {
        /* Before the evaluator exists (a takeover's first steps) the ranks are not driven yet. */
        tma_log_warn(COMP, "%s: not evaluated: the evaluator ranks are not running yet", path);
        st = TMA_ERR_UNAVAILABLE;
    } else {
        tma_gnn_evaluator_t *ev;
        st = tma_gnn_evaluator_create(&c->cfg, c->graph, &ev);
        if (st == TMA_OK) {
            st = tma_gnn_evaluator_metrics(ev, params, split, m_p);
            tma_gnn_evaluator_destroy(ev);
        }
    }
    free(params);
    if (st == TMA_OK && round_p)
        *round_p = r;
    return st;
}
