/* kv_test_util.c: see kv_test_util.h. */
#include "kv_test_util.h"

#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

tma_kv_t *kvt_connect(const char *endpoints, double request_timeout_s)
{
    tma_kv_config_t cfg;
    tma_kv_config_init(&cfg);
    cfg.endpoints = endpoints;
    cfg.request_timeout_s = request_timeout_s;
    tma_kv_t *kv = NULL;
    CHECK_OK(tma_kv_create(&cfg, &kv));
    return kv;
}

tma_kv_t *kvt_start(int argc, char **argv, int members, double request_timeout_s, tma_test_etcd_t **etcd_p)
{
    tma_test_under_valgrind(argc, argv);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    *etcd_p = tma_test_etcd_start(members, NULL);
    return kvt_connect(tma_test_etcd_endpoints(*etcd_p), request_timeout_s);
}

int kvt_finish(tma_test_etcd_t *etcd)
{
    tma_test_etcd_stop(etcd);
    curl_global_cleanup();
    return tma_test_done();
}

int kvt_run(int argc, char **argv, double request_timeout_s, kvt_test_fn *const *tests, size_t n, void (*after)(void),
            tma_test_etcd_t **etcd_p)
{
    tma_kv_t *kv = kvt_start(argc, argv, 1, request_timeout_s, etcd_p);
    for (size_t i = 0; i < n; i++)
        tests[i](kv);
    tma_kv_destroy(kv);
    if (after)
        after();
    return kvt_finish(*etcd_p);
}

void kvt_recorder_init(kvt_recorder_t *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
}

void kvt_recorder_free(kvt_recorder_t *r)
{
    free(r->ev);
    pthread_mutex_destroy(&r->mu);
    memset(r, 0, sizeof(*r));
}

static void copy_text(char *dst, size_t cap, const char *src, size_t len)
{
    size_t n = TMA_MIN(len, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void kvt_recorder_fn(void *arg, const tma_kv_watch_update_t *u)
{
    kvt_recorder_t *r = arg;
    pthread_mutex_lock(&r->mu);
    r->n_updates++;
    if (u->status != TMA_OK) {
        r->end_status = u->status;
        r->compact_revision = u->compact_revision;
    }
    for (size_t i = 0; i < u->n_events; i++) {
        const tma_kv_event_t *e = &u->events[i];
        if (r->n == r->cap) {
            size_t cap = r->cap ? r->cap * 2 : 64;
            kvt_event_t *ev = realloc(r->ev, cap * sizeof(*ev));
            if (!ev) {
                fprintf(stderr, "recorder: out of memory\n");
                exit(99);
            }
            r->ev = ev;
            r->cap = cap;
        }
        kvt_event_t *d = &r->ev[r->n];
        memset(d, 0, sizeof(*d));
        d->type = e->type;
        copy_text(d->key, sizeof(d->key), e->kv.key, e->kv.key_len);
        copy_text(d->value, sizeof(d->value), e->kv.value, e->kv.value_len);
        d->mod_revision = e->kv.mod_revision;
        d->has_prev = e->has_prev;
        if (e->has_prev)
            copy_text(d->prev_value, sizeof(d->prev_value), e->prev_kv.value, e->prev_kv.value_len);
        if (r->n && d->mod_revision < r->ev[r->n - 1].mod_revision)
            r->out_of_order++;
        r->n++;
    }
    tma_kv_watch_t *self = r->stop_on_event;
    if (self && u->n_events)
        r->stop_on_event = NULL;
    pthread_mutex_unlock(&r->mu);
    if (self && u->n_events)
        tma_kv_watch_stop(self);
}

size_t kvt_recorder_count(kvt_recorder_t *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static int have_events(void *arg)
{
    kvt_recorder_t *r = arg;
    pthread_mutex_lock(&r->mu);
    int ok = r->n >= r->want;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

int kvt_wait_events(kvt_recorder_t *r, size_t n, double seconds)
{
    pthread_mutex_lock(&r->mu);
    r->want = n;
    pthread_mutex_unlock(&r->mu);
    return tma_test_wait_for(have_events, r, seconds);
}

static int has_ended(void *arg)
{
    kvt_recorder_t *r = arg;
    pthread_mutex_lock(&r->mu);
    int ok = r->end_status != TMA_OK;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

int kvt_wait_end(kvt_recorder_t *r, double seconds)
{
    return tma_test_wait_for(has_ended, r, seconds);
}

void kvt_lost_fn(void *arg, int64_t lease, tma_status_t why)
{
    kvt_lost_t *l = arg;
    l->lease = lease;
    l->why = why;
    __atomic_add_fetch(&l->calls, 1, __ATOMIC_RELEASE);
}

int kvt_lost_calls(kvt_lost_t *l)
{
    return __atomic_load_n(&l->calls, __ATOMIC_ACQUIRE);
}

int kvt_exists(tma_kv_t *kv, const char *key)
{
    tma_kv_result_t r = {0};
    tma_status_t st = tma_kv_get(kv, key, &r);
    if (st == TMA_ERR_NOT_FOUND)
        return 0;
    CHECK_OK(st);
    tma_kv_result_free(&r);
    return 1;
}
