/*
 * test_kv_cluster.c: failover in a real 3-member etcd cluster.  The member
 * the client uses is SIGKILLed while a writer, a watch and a kept lease are
 * running: every write still succeeds, the watch delivers every revision
 * once and in order, the lease stays alive.  Then the member comes back on
 * its data folder, the next member in use is killed the same way, and with
 * two members down (no quorum) calls fail with a timeout until one returns.
 */
#include "kv_int.h"
#include "kv_test_util.h"
#include "tma_test_etcd.h"

#include <signal.h>
#include <string.h>

static tma_test_etcd_t *etcd;

/* Writes n keys "<prefix><i>" and records their revisions; all must work. */
static void write_burst(tma_kv_t *kv, const char *prefix, int n, int64_t *revs)
{
    char key[64];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "%s%02d", prefix, i);
        tma_status_t st = tma_kv_put(kv, key, "x", 1, 0, &revs[i]);
        CHECK_MSG(st == TMA_OK, "put %s during failover: %s", key, tma_status_str(st));
    }
}

/* Every revision in revs shows up once, in order, among the recorded events. */
static void check_delivered(kvt_recorder_t *r, const int64_t *revs, int n)
{
    pthread_mutex_lock(&r->mu);
    ASSERT_EQ(r->out_of_order, 0);
    ASSERT_EQ(r->end_status, TMA_OK);
    size_t j = 0;
    for (int i = 0; i < n; i++) {
        while (j < r->n && r->ev[j].mod_revision < revs[i])
            j++;
        CHECK_MSG(j < r->n && r->ev[j].mod_revision == revs[i], "revision %lld was not delivered",
                  (long long)revs[i]);
        if (j + 1 < r->n)
            CHECK_MSG(r->ev[j + 1].mod_revision != revs[i], "revision %lld delivered twice",
                      (long long)revs[i]);
    }
    pthread_mutex_unlock(&r->mu);
}

static int last_rev_seen(kvt_recorder_t *r, int64_t rev)
{
    pthread_mutex_lock(&r->mu);
    int ok = r->n && r->ev[r->n - 1].mod_revision >= rev;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

struct seen {
    kvt_recorder_t *r;
    int64_t rev;
};

static int seen_fn(void *arg)
{
    struct seen *s = arg;
    return last_rev_seen(s->r, s->rev);
}

static void failover_round(tma_kv_t *kv, kvt_recorder_t *r, int victim, const char *prefix)
{
    tma_log_info("test", "killing member %d (%s), the one in use", victim,
                 tma_test_etcd_endpoint(etcd, victim));
    tma_test_etcd_kill(etcd, victim);
    int64_t revs[30];
    write_burst(kv, prefix, 30, revs);
    struct seen s = {r, revs[29]};
    CHECK_MSG(tma_test_wait_for(seen_fn, &s, 20), "the watch did not catch up after failover");
    check_delivered(r, revs, 30);
    ASSERT_NE(kv_endpoint_current(kv), (size_t)victim);
}

/* A member that hangs (SIGSTOP) keeps its connections open, so nothing
 * breaks: a watch on it notices by its liveness probe and moves on. */
static void test_hung_member(tma_kv_t *kv)
{
    int hung = (int)(kv_endpoint_current(kv) + 1) % 3;
    char eps[512];
    snprintf(eps, sizeof(eps), "%s,%s,%s", tma_test_etcd_endpoint(etcd, hung),
             tma_test_etcd_endpoint(etcd, (hung + 1) % 3), tma_test_etcd_endpoint(etcd, (hung + 2) % 3));
    tma_kv_t *pinned = kvt_connect(eps, 5); /* starts on the member about to hang */
    kvt_recorder_t r;
    kvt_recorder_init(&r);
    tma_kv_watch_t *w = NULL;
    tma_kv_watch_opts_t wo = {.flags = TMA_KV_PREFIX};
    CHECK_OK(tma_kv_watch_start(pinned, "/c/h/", &wo, kvt_recorder_fn, &r, &w));
    tma_log_info("test", "stopping member %d (%s) under a watch", hung,
                 tma_test_etcd_endpoint(etcd, hung));
    ASSERT_EQ(tma_test_stop_process(tma_test_etcd_pid(etcd, hung)), 1);
    /* When the hung member led, a put may meet the leader change: retry it
     * (a put is idempotent) and wait for the revision of the one that worked. */
    int64_t rev = 0;
    tma_status_t st = TMA_ERR_TIMEOUT;
    for (int i = 0; i < 4 && st != TMA_OK; i++)
        st = tma_kv_put(kv, "/c/h/x", "x", 1, 0, &rev);
    CHECK_OK(st);
    struct seen s = {&r, rev};
    CHECK_MSG(tma_test_wait_for(seen_fn, &s, 30), "the watch stayed on the hung member");
    kill(tma_test_etcd_pid(etcd, hung), SIGCONT);
    tma_kv_watch_stop(w);
    tma_kv_destroy(pinned);
    kvt_recorder_free(&r);
}

int main(int argc, char **argv)
{
    tma_kv_t *kv = kvt_start(argc, argv, 3, 5, &etcd);

    kvt_recorder_t r;
    kvt_recorder_init(&r);
    tma_kv_watch_opts_t wo = {.flags = TMA_KV_PREFIX};
    tma_kv_watch_t *w = NULL;
    CHECK_OK(tma_kv_watch_start(kv, "/c/", &wo, kvt_recorder_fn, &r, &w));
    int64_t lease = 0;
    kvt_lost_t lost = {0};
    CHECK_OK(tma_kv_lease_grant(kv, 3, &lease, NULL));
    CHECK_OK(tma_kv_put(kv, "/m/member-1", "up", 2, lease, NULL));
    CHECK_OK(tma_kv_lease_keep(kv, lease, kvt_lost_fn, &lost));
    int64_t warm[5];
    write_burst(kv, "/c/warm-", 5, warm);
    struct seen s0 = {&r, warm[4]};
    CHECK(tma_test_wait_for(seen_fn, &s0, 20));
    check_delivered(&r, warm, 5);

    /* The client starts on the first endpoint: that member is in use. */
    size_t in_use = kv_endpoint_current(kv);
    ASSERT_EQ(in_use, 0);
    double t0 = tma_clock_now();
    failover_round(kv, &r, (int)in_use, "/c/a-");
    tma_test_etcd_restart(etcd, (int)in_use);

    /* Again with whichever member serves now. */
    in_use = kv_endpoint_current(kv);
    failover_round(kv, &r, (int)in_use, "/c/b-");
    tma_test_etcd_restart(etcd, (int)in_use);

    /* The kept lease (TTL 3 s) lived through both failovers. */
    while (tma_clock_now() - t0 < 7.0) {
        CHECK(kvt_exists(kv, "/m/member-1"));
        tma_sleep(0.25);
    }
    ASSERT_EQ(kvt_lost_calls(&lost), 0);
    CHECK_OK(tma_kv_lease_revoke(kv, lease));
    CHECK(!kvt_exists(kv, "/m/member-1"));

    test_hung_member(kv);

    /* Two of three down: no quorum, so no write can commit before the deadline. */
    int a = (int)kv_endpoint_current(kv), b = (a + 1) % 3;
    tma_test_etcd_kill(etcd, a);
    tma_test_etcd_kill(etcd, b);
    tma_kv_t *quick = kvt_connect(tma_test_etcd_endpoints(etcd), 1.0);
    tma_status_t st = tma_kv_put(quick, "/c/no-quorum", "x", 1, 0, NULL);
    CHECK_MSG(st == TMA_ERR_TIMEOUT || st == TMA_ERR_UNAVAILABLE, "without quorum: %s",
              tma_status_str(st));
    tma_test_etcd_restart(etcd, a);
    tma_test_etcd_restart(etcd, b);
    CHECK_OK(tma_kv_put(quick, "/c/quorum", "x", 1, 0, NULL));
    tma_kv_destroy(quick);

    int64_t last[1];
    write_burst(kv, "/c/end-", 1, last);
    struct seen s = {&r, last[0]};
    CHECK(tma_test_wait_for(seen_fn, &s, 20));
    ASSERT_EQ(r.end_status, TMA_OK);
    tma_kv_watch_stop(w);
    kvt_recorder_free(&r);
    tma_kv_destroy(kv);
    return kvt_finish(etcd);
}
