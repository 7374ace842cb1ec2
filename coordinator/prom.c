/*
 * prom.c: the coordinator's Prometheus endpoint (metrics.listen,
 * docs/operations.md).  libmicrohttpd serves GET /metrics from its own
 * thread; the coordinator's thread and the evaluator thread only store
 * numbers into a snapshot under a mutex, and a scrape renders that
 * snapshot under the same mutex into its own buffer (microseconds, whatever
 * the client does), so no client, slow or not, ever holds up a round.
 * MHD sends the buffer without blocking, with a limit on connections and a
 * timeout on idle ones.
 */
#include "coord_int.h"

#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define COMP "metrics"

#define PROM_MAX_CONNECTIONS 64 /* beyond them MHD refuses new connections at once */
#define PROM_TIMEOUT_S 5        /* an idle or stalled connection is closed after this */
#define PROM_ROUND_WALLS 9      /* tma_round_duration_seconds: the median of the last 8 rounds' durations */

static const char *const phases[] = {"starting", "training", "stopping", "done", "failed"};

typedef struct prom_worker {
    uint32_t id;
    double steps_per_s;
} prom_worker_t;

struct coord_prom {
    struct MHD_Daemon *d;
    tma_kv_t *kv;      /* for its request errors; may be NULL */
    char job[TMA_JOB_NAME_MAX];
    char variant[32];
    double interval_s;   /* aggregation.interval_seconds (0 in step mode) */
    double budget_s;     /* duration.train_seconds (0: none) */
    int64_t budget_rounds;

    pthread_mutex_t lock; /* guards everything below */
    int phase;            /* index in phases, -1: none yet */
    uint64_t epoch;
    int64_t round;        /* -1: none committed */
    double round_wall;    /* wall-clock seconds when it committed */
    double walls[PROM_ROUND_WALLS]; /* the commit times of the last rounds, consecutive, oldest first */
    int n_walls;
    double train_s, agg_s;
    int workers, backups;
    prom_worker_t *per_worker;
    int n_per_worker, cap_per_worker;
    int64_t val_round; /* -1: none evaluated */
    double val_mrr, best_mrr, eval_s;
    uint64_t failures, moved;
};

/* ------------------------------------------------------------------ rendering */

typedef struct buf {
    char *p;
    size_t len, cap;
    int oom;
} buf_t;

static void add(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(buf_t *b, const char *fmt, ...)
{
    for (int pass = 0; pass < 2 && !b->oom; pass++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
        } else if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        } else {
            size_t cap = TMA_MAX(b->cap * 2, b->len + (size_t)n + 1);
            char *p = realloc(b->p, cap);
            if (!p)
                b->oom = 1;
            else
                b->p = p, b->cap = cap;
        }
    }
}

/* One metric family with a single sample (value NaN: the family without
 * a sample, as Prometheus has it before the first value). */
static void family(buf_t *b, const char *name, const char *type, const char *help, double v)
{
    add(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    if (!isnan(v))
        add(b, "%s %.17g\n", name, v);
}

/* The median time between the consecutive commits in p->walls, NAN with
 * fewer than two. */
static double round_duration(const coord_prom_t *p)
{
    double d[PROM_ROUND_WALLS];
    int n = 0;
    for (int i = 1; i < p->n_walls; i++) {
        double x = p->walls[i] - p->walls[i - 1];
        int j = n++;
        for (; j > 0 && d[j - 1] > x; j--)
            d[j] = d[j - 1];
        d[j] = x;
    }
    return n == 0 ? NAN : n % 2 ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2;
}

/* The exposition text of the snapshot (caller holds the lock). */
static char *render(const coord_prom_t *p, size_t *len_p)
{
    buf_t b = {malloc(4096), 0, 4096, 0};
    if (!b.p)
        return NULL;
    b.p[0] = '\0';
    /* A label value of the job's name needs no escaping: names are letters,
     * digits, '.', '_' and '-' (job/config.c). */
    add(&b, "# HELP tma_job_info The job this coordinator runs.\n# TYPE tma_job_info gauge\n"
            "tma_job_info{tma_job=\"%s\",variant=\"%s\"} 1\n", p->job, p->variant);
    add(&b, "# HELP tma_job_phase The job's phase (state record): 1 for the current one.\n"
            "# TYPE tma_job_phase gauge\n");
    for (int i = 0; i < (int)TMA_ARRAY_LEN(phases); i++)
        add(&b, "tma_job_phase{phase=\"%s\"} %d\n", phases[i], p->phase == i);
    family(&b, "tma_coordinator_epoch", "gauge", "The leading coordinator's epoch.", (double)p->epoch);
    family(&b, "tma_round", "gauge", "The last committed round.", p->round >= 0 ? (double)p->round : NAN);
    family(&b, "tma_round_timestamp_seconds", "gauge", "When the last round committed (Unix time).",
           p->round >= 0 ? p->round_wall : NAN);
    family(&b, "tma_aggregation_interval_seconds", "gauge", "aggregation.interval_seconds (absent in step mode).",
           p->interval_s > 0 ? p->interval_s : NAN);
    family(&b, "tma_round_duration_seconds", "gauge",
           "The median time between consecutive commits over the last 8 rounds.", round_duration(p));
    family(&b, "tma_train_seconds", "gauge", "Training time spent, as of the last round.", p->train_s);
    family(&b, "tma_train_budget_seconds", "gauge", "duration.train_seconds.", p->budget_s > 0 ? p->budget_s : NAN);
    family(&b, "tma_train_budget_rounds", "gauge", "duration.rounds.",
           p->budget_rounds > 0 ? (double)p->budget_rounds : NAN);
    family(&b, "tma_workers_alive", "gauge", "Members alive in etcd that train (own shards).", p->workers);
    family(&b, "tma_backups_idle", "gauge", "Backup members alive in etcd that own no shard.", p->backups);
    add(&b, "# HELP tma_worker_steps_per_second A worker's training steps per second in the last round.\n"
            "# TYPE tma_worker_steps_per_second gauge\n");
    for (int i = 0; i < p->n_per_worker; i++)
        add(&b, "tma_worker_steps_per_second{worker=\"%u\"} %.17g\n", p->per_worker[i].id,
            p->per_worker[i].steps_per_s);
    family(&b, "tma_aggregation_seconds", "gauge", "Seconds the last round took to collect, average and publish.",
           p->round >= 0 ? p->agg_s : NAN);
    family(&b, "tma_validation_mrr", "gauge", "Validation MRR of the last evaluated round.",
           p->val_round >= 0 ? p->val_mrr : NAN);
    family(&b, "tma_validation_round", "gauge", "The last evaluated round.",
           p->val_round >= 0 ? (double)p->val_round : NAN);
    family(&b, "tma_validation_best_mrr", "gauge", "The best validation MRR so far.",
           p->val_round >= 0 ? p->best_mrr : NAN);
    family(&b, "tma_evaluation_seconds", "gauge", "Seconds the last validation took.",
           p->val_round >= 0 ? p->eval_s : NAN);
    family(&b, "tma_failures_detected_total", "counter", "Members lost (their lease ended) since this coordinator led.",
           (double)p->failures);
    family(&b, "tma_shards_moved_total", "counter", "Shard moves since this coordinator led.", (double)p->moved);
    family(&b, "tma_etcd_request_errors_total", "counter", "etcd requests of this coordinator that failed.",
           p->kv ? (double)tma_kv_request_errors(p->kv) : 0);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len_p = b.len;
    return b.p;
}

/* ------------------------------------------------------------------ HTTP */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code, const char *text, const char *ctype,
                             const char *allow)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_size, void **state)
{
    coord_prom_t *p = cls;
    (void)version;
    (void)upload_data;
    /* A body (of a POST) is not read: the answer goes before it, and MHD
     * closes the connection. */
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        *upload_size = 0;
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n", "text/plain", "GET, HEAD");
    }
    if (strcmp(url, "/metrics") != 0)
        return reply(conn, MHD_HTTP_NOT_FOUND, "only /metrics\n", "text/plain", NULL);
    (void)state;
    pthread_mutex_lock(&p->lock);
    size_t len = 0;
    char *text = render(p, &len);
    pthread_mutex_unlock(&p->lock);
    if (!text)
        return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", "text/plain", NULL);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* ------------------------------------------------------------------ the API */

tma_status_t coord_prom_create(const tma_job_t *job, tma_kv_t *kv, coord_prom_t **p_p)
{
    *p_p = NULL;
    if (!job->metrics_listen[0])
        return TMA_OK;
    struct sockaddr_storage sa;
    unsigned salen;
    if (tma_job_listen_parse(job->metrics_listen, &sa, &salen) != TMA_OK) {
        tma_log_error(COMP, "metrics.listen \"%s\" is not ADDR:PORT", job->metrics_listen);
        return TMA_ERR_CONFIG;
    }
    coord_prom_t *p = calloc(1, sizeof *p);
    if (!p)
        return TMA_ERR_NOMEM;
    pthread_mutex_init(&p->lock, NULL);
    p->kv = kv;
    snprintf(p->job, sizeof p->job, "%s", job->name);
    snprintf(p->variant, sizeof p->variant, "%s", tma_job_variant_name(job->variant));
    p->interval_s = job->interval_steps > 0 ? 0 : job->interval_s;
    p->budget_s = job->train_s;
    p->budget_rounds = job->rounds;
    p->phase = -1;
    p->round = p->val_round = -1;
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    /* Port 0 here: MHD binds what MHD_OPTION_SOCK_ADDR gives, address and port. */
    p->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, p, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)PROM_MAX_CONNECTIONS,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)PROM_TIMEOUT_S,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768, MHD_OPTION_END);
    if (!p->d) {
        /* A monitoring port taken (by a hung former leader on this host,
         * say) must not stop the job: it runs on without the endpoint. */
        tma_log_warn(COMP, "cannot serve /metrics on %s (metrics.listen): %s; the job runs without it",
                     job->metrics_listen, strerror(errno));
        pthread_mutex_destroy(&p->lock);
        free(p);
        return TMA_OK;
    }
    tma_log_info(COMP, "serving Prometheus metrics at http://%s/metrics", job->metrics_listen);
    *p_p = p;
    return TMA_OK;
}

void coord_prom_destroy(coord_prom_t *p)
{
    if (!p)
        return;
    MHD_stop_daemon(p->d);
    pthread_mutex_destroy(&p->lock);
    free(p->per_worker);
    free(p);
}

void coord_prom_phase(coord_prom_t *p, const char *phase, uint64_t epoch)
{
    if (!p)
        return;
    int k = -1;
    for (int i = 0; i < (int)TMA_ARRAY_LEN(phases); i++)
        if (strcmp(phases[i], phase) == 0)
            k = i;
    pthread_mutex_lock(&p->lock);
    p->phase = k;
    p->epoch = epoch;
    pthread_mutex_unlock(&p->lock);
}

static double num(const cJSON *o, const char *key, double def)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(x) ? x->valuedouble : def;
}

void coord_prom_round(coord_prom_t *p, const cJSON *record)
{
    if (!p)
        return;
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(record, "workers");
    int n = cJSON_IsArray(ws) ? cJSON_GetArraySize(ws) : 0;
    pthread_mutex_lock(&p->lock);
    const int64_t prev = p->round;
    p->round = (int64_t)num(record, "round", (double)p->round);
    p->round_wall = num(record, "wall", tma_clock_wall());
    /* A round that does not follow the last one (this coordinator took
     * over, or a round was redone) starts the durations afresh. */
    if (p->n_walls > 0 && p->round != prev + 1)
        p->n_walls = 0;
    if (p->n_walls == PROM_ROUND_WALLS) {
        memmove(p->walls, p->walls + 1, (PROM_ROUND_WALLS - 1) * sizeof *p->walls);
        p->n_walls--;
    }
    p->walls[p->n_walls++] = p->round_wall;
    p->train_s = num(record, "time", p->train_s);
    p->agg_s = num(record, "agg_seconds", 0);
    p->failures += (uint64_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(record, "lost"));
    p->moved += (uint64_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(record, "moves"));
    if (n > p->cap_per_worker) {
        prom_worker_t *w = realloc(p->per_worker, (size_t)n * sizeof *w);
        if (w) {
            p->per_worker = w;
            p->cap_per_worker = n;
        }
    }
    p->n_per_worker = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, ws)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(x, "id");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, "steps_per_s");
        if (p->n_per_worker < p->cap_per_worker && cJSON_IsNumber(id) && cJSON_IsNumber(v)) {
            p->per_worker[p->n_per_worker].id = (uint32_t)id->valuedouble;
            p->per_worker[p->n_per_worker++].steps_per_s = v->valuedouble;
        }
    }
    pthread_mutex_unlock(&p->lock);
}

void coord_prom_members(coord_prom_t *p, int workers, int backups)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->workers = workers;
    p->backups = backups;
    pthread_mutex_unlock(&p->lock);
}

void coord_prom_eval(coord_prom_t *p, int64_t round, double mrr, double best, double seconds)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->val_round = round;
    p->val_mrr = mrr;
    p->best_mrr = best;
    p->eval_s = seconds;
    pthread_mutex_unlock(&p->lock);
}
