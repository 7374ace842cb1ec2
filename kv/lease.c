/*
 * lease.c: lease grant, revoke, keep-alive and time-to-live, and the
 * client's keeper thread that renews kept leases every third of their TTL.
 *
 * The keeper never holds lease_mu during a request or a callback.  Each
 * kept entry carries a serial number, so an answer that arrives after the
 * entry was stopped, revoked or kept anew is dropped instead of being
 * applied to the wrong entry.
 */
#include "kv_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct kv_kept {
    int64_t lease;
    uint64_t serial;
    double next_due;   /* when to renew next */
    double expires_at; /* when the lease runs out unless renewed (local estimate) */
    int failing;       /* renewals are failing (logged once per outage) */
    tma_kv_lease_lost_fn fn;
    void *arg;
};

/* ------------------------------------------------------------------ one-shot calls */

/* POSTs {"ID":"<lease>"} (or {"TTL":"<ttl>"} for a grant) and parses a lease answer. */
static tma_status_t lease_call(tma_kv_t *kv, const char *path, const char *field, int64_t v,
                               unsigned flags, double deadline, tma_kv_lease_resp_t *out)
{
    kv_conn_t *c = kv_conn_get(kv);
    if (!c)
        return TMA_ERR_NOMEM;
    tma_status_t st = TMA_ERR_NOMEM;
    if (kv_buf_addf(&c->req, "{\"%s\":\"%lld\"}", field, (long long)v) == 0) {
        st = kv_call(kv, c, path, flags, deadline);
        if (st == TMA_OK) {
            st = tma_kv_parse_lease(c->resp.data, c->resp.len, out);
            if (st == TMA_ERR_MALFORMED)
                tma_log_error(KV_COMP, "%s: malformed answer from etcd (%zu bytes)", path,
                              c->resp.len);
        }
    }
    kv_conn_put(kv, c);
    return st;
}

tma_status_t tma_kv_lease_grant(tma_kv_t *kv, int64_t ttl_s, int64_t *lease_p,
                                int64_t *granted_ttl_p)
{
    if (!kv || !lease_p || ttl_s <= 0)
        return TMA_ERR_INVALID;
    tma_kv_lease_resp_t r;
    /* Retried like a read: a grant repeated after a lost answer only leaves
     * an unused lease that expires by itself. */
    tma_status_t st =
        lease_call(kv, "/v3/lease/grant", "TTL", ttl_s, KV_CALL_RETRY, kv_deadline(kv), &r);
    if (st != TMA_OK)
        return st;
    if (r.id == 0 || r.ttl <= 0) {
        tma_log_error(KV_COMP, "/v3/lease/grant: the answer has no lease ID or TTL");
        return TMA_ERR_MALFORMED;
    }
    *lease_p = r.id;
    if (granted_ttl_p)
        *granted_ttl_p = r.ttl;
    return TMA_OK;
}

static tma_status_t keepalive(tma_kv_t *kv, int64_t lease, unsigned flags, double deadline,
                              int64_t *ttl_p)
{
    tma_kv_lease_resp_t r;
    tma_status_t st = lease_call(kv, "/v3/lease/keepalive", "ID", lease, KV_CALL_RETRY | flags,
                                 deadline, &r);
    if (st != TMA_OK)
        return st;
    /* etcd answers a renewal of a lease it no longer has with 200 and no TTL. */
    if (!r.has_ttl || r.ttl <= 0)
        return TMA_ERR_LEASE_EXPIRED;
    if (ttl_p)
        *ttl_p = r.ttl;
    return TMA_OK;
}

tma_status_t tma_kv_lease_keepalive_once(tma_kv_t *kv, int64_t lease, int64_t *ttl_p)
{
    if (!kv || lease <= 0)
        return TMA_ERR_INVALID;
    return keepalive(kv, lease, 0, kv_deadline(kv), ttl_p);
}

tma_status_t tma_kv_lease_time_to_live(tma_kv_t *kv, int64_t lease, int64_t *ttl_p,
                                       int64_t *granted_ttl_p)
{
    if (!kv || lease <= 0)
        return TMA_ERR_INVALID;
    tma_kv_lease_resp_t r;
    tma_status_t st = lease_call(kv, "/v3/lease/timetolive", "ID", lease, KV_CALL_RETRY,
                                 kv_deadline(kv), &r);
    if (st != TMA_OK)
        return st;
    if (r.ttl < 0)
        return TMA_ERR_LEASE_EXPIRED; /* etcd says TTL -1 for a lease it does not have */
    if (ttl_p)
        *ttl_p = r.ttl;
    if (granted_ttl_p)
        *granted_ttl_p = r.granted_ttl;
    return TMA_OK;
}

/* ------------------------------------------------------------------ the kept set */

/* Index of a kept lease, or -1; lease_mu held. */
static ssize_t kept_find(tma_kv_t *kv, int64_t lease)
{
    for (size_t i = 0; i < kv->n_kept; i++) {
        if (kv->kept[i].lease == lease)
            return (ssize_t)i;
    }
    return -1;
}

static void kept_remove_at(tma_kv_t *kv, size_t i)
{
    kv->kept[i] = kv->kept[--kv->n_kept];
}

static int remove_kept(tma_kv_t *kv, int64_t lease)
{
    pthread_mutex_lock(&kv->lease_mu);
    ssize_t i = kept_find(kv, lease);
    if (i >= 0) {
        kept_remove_at(kv, (size_t)i);
        pthread_cond_broadcast(&kv->lease_cv);
    }
    pthread_mutex_unlock(&kv->lease_mu);
    return i >= 0;
}

tma_status_t tma_kv_lease_revoke(tma_kv_t *kv, int64_t lease)
{
    if (!kv || lease <= 0)
        return TMA_ERR_INVALID;
    remove_kept(kv, lease);
    tma_kv_lease_resp_t r;
    return lease_call(kv, "/v3/lease/revoke", "ID", lease, KV_CALL_RETRY, kv_deadline(kv), &r);
}

tma_status_t tma_kv_lease_keep_stop(tma_kv_t *kv, int64_t lease)
{
    if (!kv || lease <= 0)
        return TMA_ERR_INVALID;
    return remove_kept(kv, lease) ? TMA_OK : TMA_ERR_NOT_FOUND;
}

/* The renewal period for a TTL: a third of it, at least 0.2 s. */
static double renew_period(int64_t ttl)
{
    return TMA_MAX((double)ttl / 3.0, 0.2);
}

static void timed_wait(pthread_cond_t *cv, pthread_mutex_t *mu, double seconds)
{
    tma_cond_wait_until(cv, mu, tma_clock_now() + TMA_MAX(seconds, 0.0));
}

static void *keeper_main(void *arg)
{
    tma_kv_t *kv = arg;
    kv_thread_block_sigpipe();
    pthread_mutex_lock(&kv->lease_mu);
    while (!kv->keeper_stop) {
        /* The entry due first. */
        ssize_t due = -1;
        for (size_t i = 0; i < kv->n_kept; i++) {
            if (due < 0 || kv->kept[i].next_due < kv->kept[due].next_due)
                due = (ssize_t)i;
        }
        if (due < 0) {
            pthread_cond_wait(&kv->lease_cv, &kv->lease_mu);
            continue;
        }
        double now = tma_clock_now();
        if (kv->kept[due].next_due > now) {
            timed_wait(&kv->lease_cv, &kv->lease_mu, kv->kept[due].next_due - now);
            continue;
        }
        kv_kept_t k = kv->kept[due];
        pthread_mutex_unlock(&kv->lease_mu);

        /* Never wait past the lease's own end, nor less than a moment. */
        double deadline = now + TMA_MIN(kv->request_timeout_s, TMA_MAX(k.expires_at - now, 0.25));
        int64_t ttl = 0;
        tma_status_t st = keepalive(kv, k.lease, KV_CALL_QUIET, deadline, &ttl);

        pthread_mutex_lock(&kv->lease_mu);
        ssize_t i = kept_find(kv, k.lease);
        if (i < 0 || kv->kept[i].serial != k.serial)
            continue; /* stopped, revoked or kept anew meanwhile */
        kv_kept_t *e = &kv->kept[i];
        now = tma_clock_now();
        tma_status_t lost = TMA_OK;
        if (st == TMA_OK) {
            if (e->failing)
                tma_log_info(KV_COMP, "lease %lld renewed again", (long long)k.lease);
            e->failing = 0;
            e->expires_at = now + (double)ttl;
            e->next_due = now + renew_period(ttl);
        } else if (st == TMA_ERR_LEASE_EXPIRED || st == TMA_ERR_PERMISSION ||
                   st == TMA_ERR_MALFORMED || st == TMA_ERR_INVALID || now >= e->expires_at) {
            lost = st;
        } else {
            if (!e->failing)
                tma_log_warn(KV_COMP, "lease %lld: renewal failed (%s); retrying until it expires",
                             (long long)k.lease, tma_status_str(st));
            e->failing = 1;
            e->next_due = now + TMA_MIN(0.25, TMA_MAX(e->expires_at - now, 0.0) / 2);
        }
        if (lost != TMA_OK) {
            tma_log_warn(KV_COMP, "lease %lld lost: %s", (long long)k.lease, tma_status_str(lost));
            kept_remove_at(kv, (size_t)i);
            if (k.fn) {
                pthread_mutex_unlock(&kv->lease_mu);
                k.fn(k.arg, k.lease, lost);
                pthread_mutex_lock(&kv->lease_mu);
            }
        }
    }
    pthread_mutex_unlock(&kv->lease_mu);
    return NULL;
}

tma_status_t tma_kv_lease_keep(tma_kv_t *kv, int64_t lease, tma_kv_lease_lost_fn lost_fn,
                               void *arg)
{
    if (!kv || lease <= 0)
        return TMA_ERR_INVALID;
    int64_t ttl;
    tma_status_t st = keepalive(kv, lease, 0, kv_deadline(kv), &ttl);
    if (st != TMA_OK)
        return st;
    double now = tma_clock_now();
    pthread_mutex_lock(&kv->lease_mu);
    if (!kv->keeper_started) {
        if (pthread_create(&kv->keeper, NULL, keeper_main, kv) != 0) {
            pthread_mutex_unlock(&kv->lease_mu);
            tma_log_error(KV_COMP, "cannot start the lease keeper thread");
            return TMA_ERR_NOMEM;
        }
        kv->keeper_started = 1;
    }
    ssize_t i = kept_find(kv, lease);
    if (i < 0) {
        if (kv->n_kept == kv->cap_kept) {
            size_t cap = kv->cap_kept ? kv->cap_kept * 2 : 8;
            kv_kept_t *k = realloc(kv->kept, cap * sizeof(*k));
            if (!k) {
                pthread_mutex_unlock(&kv->lease_mu);
                return TMA_ERR_NOMEM;
            }
            kv->kept = k;
            kv->cap_kept = cap;
        }
        i = (ssize_t)kv->n_kept++;
    }
    kv_kept_t *e = &kv->kept[i];
    memset(e, 0, sizeof(*e));
    e->lease = lease;
    e->serial = ++kv->kept_serial;
    e->expires_at = now + (double)ttl;
    e->next_due = now + renew_period(ttl);
    e->fn = lost_fn;
    e->arg = arg;
    pthread_cond_broadcast(&kv->lease_cv);
    pthread_mutex_unlock(&kv->lease_mu);
    return TMA_OK;
}

void kv_lease_shutdown(tma_kv_t *kv)
{
    pthread_mutex_lock(&kv->lease_mu);
    int started = kv->keeper_started;
    kv->keeper_stop = 1;
    kv->n_kept = 0;
    pthread_cond_broadcast(&kv->lease_cv);
    pthread_mutex_unlock(&kv->lease_mu);
    if (started)
        pthread_join(kv->keeper, NULL);
    kv->keeper_started = 0;
}
