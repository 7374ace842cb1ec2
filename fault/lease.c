/*
 * lease.c: a lease kept alive across etcd outages.  The kv keeper reports a
 * lease lost when etcd says it is gone, but also when no endpoint could renew
 * it for a whole TTL.  The second is not proof: a cluster that was down as a
 * whole refreshes every lease when it elects a leader again.  So on an
 * unreachable etcd the guard asks for the lease's time to live until etcd
 * answers, and keeps it again if it is still there; only an answer that the
 * lease is gone reaches the owner's callback.  Until etcd answers the lease
 * is "silent" (no answer for longer than its TTL): its owner presumes it
 * lost and does no work that counts only under it.
 */
#include "tma_fault.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define COMP "lease"

struct tma_lease_guard {
    tma_kv_t *kv;
    int64_t lease;
    tma_lease_lost_fn lost_fn;
    void *arg;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    int thread_running;
    int quit;
    int lost;          /* reported to the owner (once) */
    int recovering;    /* the keeper gave up: the thread checks with etcd */
    int silent;        /* atomic: etcd has not answered for longer than the TTL */
    double stall_until; /* injected stall: no renewals before this time */
};

static void keeper_lost(void *arg, int64_t lease, tma_status_t why);

static void report_lost(tma_lease_guard_t *g, tma_status_t why)
{
    pthread_mutex_lock(&g->lock);
    int already = g->lost || g->quit;
    g->lost = 1;
    pthread_mutex_unlock(&g->lock);
    if (!already && g->lost_fn)
        g->lost_fn(g->arg, why);
}

/* The guard's thread: handles recoveries and stalls. */
static void *guard_main(void *arg)
{
    tma_lease_guard_t *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->quit) {
        double now = tma_clock_now();
        if (g->lost || (!g->recovering && g->stall_until <= 0)) {
            pthread_cond_wait(&g->cond, &g->lock);
            continue;
        }
        if (g->stall_until > now) {
            tma_cond_wait_until(&g->cond, &g->lock, g->stall_until);
            continue;
        }
        /* Either a stall ended or the keeper gave up: ask etcd. */
        g->stall_until = 0;
        pthread_mutex_unlock(&g->lock);
        int64_t ttl = 0;
        tma_status_t st = tma_kv_lease_time_to_live(g->kv, g->lease, &ttl, NULL);
        if (st == TMA_OK && ttl > 0)
            st = tma_kv_lease_keep(g->kv, g->lease, keeper_lost, g);
        pthread_mutex_lock(&g->lock);
        if (st == TMA_OK && ttl > 0) {
            if (g->recovering)
                tma_log_info(COMP, "lease %llx is still alive (%lld s left): keeping it again",
                             (unsigned long long)g->lease, (long long)ttl);
            g->recovering = 0;
            __atomic_store_n(&g->silent, 0, __ATOMIC_SEQ_CST);
        } else if (st == TMA_ERR_LEASE_EXPIRED || (st == TMA_OK && ttl <= 0)) {
            g->recovering = 0;
            pthread_mutex_unlock(&g->lock);
            report_lost(g, TMA_ERR_LEASE_EXPIRED);
            pthread_mutex_lock(&g->lock);
        } else {
            /* etcd is still unreachable: try again shortly. */
            g->recovering = 1;
            if (!g->quit)
                tma_cond_wait_until(&g->cond, &g->lock, tma_clock_now() + 0.5);
        }
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

static void keeper_lost(void *arg, int64_t lease, tma_status_t why)
{
    tma_lease_guard_t *g = arg;
    if (why == TMA_ERR_LEASE_EXPIRED) {
        report_lost(g, why);
        return;
    }
    /* Unreachable: not proof.  Let the thread find out.  The keeper gives up
     * only when a whole TTL passed since the last renewal: etcd may have
     * expired the lease by now, so until it answers the lease is silent. */
    tma_log_warn(COMP, "lease %llx could not be renewed for its whole TTL (%s); presumed lost until etcd answers",
                 (unsigned long long)lease, tma_status_str(why));
    pthread_mutex_lock(&g->lock);
    g->recovering = 1;
    __atomic_store_n(&g->silent, 1, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

tma_status_t tma_lease_guard_start(tma_kv_t *kv, int64_t lease, tma_lease_lost_fn lost_fn, void *arg,
                                   tma_lease_guard_t **g_p)
{
    tma_lease_guard_t *g = calloc(1, sizeof *g);
    if (!g)
        return TMA_ERR_NOMEM;
    g->kv = kv;
    g->lease = lease;
    g->lost_fn = lost_fn;
    g->arg = arg;
    pthread_mutex_init(&g->lock, NULL);
    tma_cond_init(&g->cond);
    if (pthread_create(&g->thread, NULL, guard_main, g) != 0) {
        free(g);
        return TMA_ERR_NOMEM;
    }
    g->thread_running = 1;
    tma_status_t st = tma_kv_lease_keep(kv, lease, keeper_lost, g);
    if (st != TMA_OK) {
        tma_lease_guard_stop(g);
        return st;
    }
    *g_p = g;
    return TMA_OK;
}

void tma_lease_guard_stop(tma_lease_guard_t *g)
{
    if (!g)
        return;
    tma_kv_lease_keep_stop(g->kv, g->lease);
    pthread_mutex_lock(&g->lock);
    g->quit = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    if (g->thread_running)
        pthread_join(g->thread, NULL);
    /* The keeper may have been restarted by the thread meanwhile. */
    tma_kv_lease_keep_stop(g->kv, g->lease);
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
    free(g);
}

int tma_lease_guard_silent(const tma_lease_guard_t *g)
{
    return g && __atomic_load_n(&g->silent, __ATOMIC_SEQ_CST);
}

void tma_lease_guard_stall(tma_lease_guard_t *g, double seconds)
{
    tma_kv_lease_keep_stop(g->kv, g->lease);
    pthread_mutex_lock(&g->lock);
    g->stall_until = tma_clock_now() + seconds;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}
