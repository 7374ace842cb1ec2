/*
 * test_kv_watch.c: watches against a real one-member etcd: puts and deletes
 * arrive in order with their revisions (and previous values), a replay from
 * an old revision, the compaction report and the resync after it, a stop
 * from inside the callback, a large event split over many chunks, and the
 * reconnection after etcd is killed and restarted on the same data folder
 * (together with the unary calls and a kept lease).
 */
#include "kv_test_util.h"
#include "tma_test_etcd.h"

#include <stdlib.h>
#include <string.h>

static tma_test_etcd_t *etcd;

static tma_kv_watch_t *watch(tma_kv_t *kv, const char *key, unsigned flags, int64_t from,
                             kvt_recorder_t *r)
{
    tma_kv_watch_opts_t o = {.flags = flags, .start_revision = from};
    tma_kv_watch_t *w = NULL;
    CHECK_OK(tma_kv_watch_start(kv, key, &o, kvt_recorder_fn, r, &w));
    return w;
}

static void check_event(kvt_recorder_t *r, size_t i, tma_kv_event_type_t type, const char *key,
                        const char *value, int64_t rev)
{
    if (i >= r->n) {
        CHECK_MSG(0, "event %zu missing", i);
        return;
    }
    const kvt_event_t *e = &r->ev[i];
    CHECK_MSG(e->type == type && strcmp(e->key, key) == 0 && (!value || strcmp(e->value, value) == 0) &&
                  e->mod_revision == rev,
              "event %zu: type %d key %s value %s rev %lld; expected %d %s %s %lld", i, e->type,
              e->key, e->value, (long long)e->mod_revision, type, key, value ? value : "-",
              (long long)rev);
}

static void test_order(tma_kv_t *kv)
{
    kvt_recorder_t r, one;
    kvt_recorder_init(&r);
    kvt_recorder_init(&one);
    tma_kv_watch_t *w = watch(kv, "/w/a/", TMA_KV_PREFIX | TMA_KV_PREV_KV, 0, &r);
    tma_kv_watch_t *w1 = watch(kv, "/w/a/1", 0, 0, &one);
    int64_t rev[6];
    CHECK_OK(tma_kv_put(kv, "/w/a/1", "v1", 2, 0, &rev[0]));
    CHECK_OK(tma_kv_put(kv, "/w/a/2", "v2", 2, 0, &rev[1]));
    CHECK_OK(tma_kv_put(kv, "/w/b", "outside", 7, 0, NULL));
    CHECK_OK(tma_kv_put(kv, "/w/a/1", "v1b", 3, 0, &rev[2]));
    tma_kv_result_t d = {0};
    CHECK_OK(tma_kv_delete(kv, "/w/a/2", 0, &d));
    rev[3] = d.revision;
    tma_kv_result_free(&d);
    /* Two puts in one txn share a revision and arrive together. */
    tma_kv_op_t ops[2] = {{.type = TMA_KV_OP_PUT, .key = "/w/a/3", .value = "v3", .value_len = 2},
                          {.type = TMA_KV_OP_PUT, .key = "/w/a/4", .value = "v4", .value_len = 2}};
    tma_kv_txn_t txn = {NULL, 0, ops, 2, NULL, 0};
    tma_kv_result_t t = {0};
    CHECK_OK(tma_kv_txn(kv, &txn, &t));
    rev[4] = t.revision;
    tma_kv_result_free(&t);

    CHECK_MSG(kvt_wait_events(&r, 6, 10), "got %zu of 6 events", kvt_recorder_count(&r));
    pthread_mutex_lock(&r.mu);
    ASSERT_EQ(r.n, 6);
    ASSERT_EQ(r.out_of_order, 0);
    ASSERT_EQ(r.end_status, TMA_OK);
    check_event(&r, 0, TMA_KV_EVENT_PUT, "/w/a/1", "v1", rev[0]);
    check_event(&r, 1, TMA_KV_EVENT_PUT, "/w/a/2", "v2", rev[1]);
    check_event(&r, 2, TMA_KV_EVENT_PUT, "/w/a/1", "v1b", rev[2]);
    check_event(&r, 3, TMA_KV_EVENT_DELETE, "/w/a/2", "", rev[3]);
    check_event(&r, 4, TMA_KV_EVENT_PUT, "/w/a/3", "v3", rev[4]);
    check_event(&r, 5, TMA_KV_EVENT_PUT, "/w/a/4", "v4", rev[4]);
    ASSERT_GE(r.n, 4);
    if (r.n >= 4) {
        CHECK(r.ev[2].has_prev);
        ASSERT_STR_EQ(r.ev[2].prev_value, "v1");
        CHECK(r.ev[3].has_prev);
        ASSERT_STR_EQ(r.ev[3].prev_value, "v2");
        CHECK(!r.ev[0].has_prev);
    }
    pthread_mutex_unlock(&r.mu);
    CHECK(kvt_wait_events(&one, 2, 10));
    ASSERT_EQ(kvt_recorder_count(&one), 2);
    check_event(&one, 1, TMA_KV_EVENT_PUT, "/w/a/1", "v1b", rev[2]);
    tma_kv_watch_stop(w);
    tma_kv_watch_stop(w1);

    /* A replay from the first revision delivers the same history. */
    kvt_recorder_t again;
    kvt_recorder_init(&again);
    w = watch(kv, "/w/a/", TMA_KV_PREFIX, rev[0], &again);
    CHECK(kvt_wait_events(&again, 6, 10));
    for (size_t i = 0; i < 6 && i < again.n && i < r.n; i++) {
        ASSERT_EQ(again.ev[i].mod_revision, r.ev[i].mod_revision);
        ASSERT_STR_EQ(again.ev[i].key, r.ev[i].key);
    }
    tma_kv_watch_stop(w);
    tma_kv_watch_stop(NULL);
    kvt_recorder_free(&again);
    kvt_recorder_free(&r);
    kvt_recorder_free(&one);
}

struct resync {
    int n;
    int64_t max_rev;
};

static int count_pair(void *arg, const tma_kv_pair_t *p)
{
    struct resync *s = arg;
    s->n++;
    s->max_rev = TMA_MAX(s->max_rev, p->mod_revision);
    return 0;
}

static void test_compaction(tma_kv_t *kv)
{
    int64_t first = 0, last = 0;
    CHECK_OK(tma_kv_put(kv, "/w/c/1", "a", 1, 0, &first));
    CHECK_OK(tma_kv_put(kv, "/w/c/2", "b", 1, 0, NULL));
    CHECK_OK(tma_kv_put(kv, "/w/c/1", "c", 1, 0, &last));
    char rev[32];
    snprintf(rev, sizeof(rev), "%lld", (long long)last);
    ASSERT_EQ(tma_test_etcdctl(etcd, "compaction", rev, NULL), 0);

    kvt_recorder_t r;
    kvt_recorder_init(&r);
    tma_kv_watch_t *w = watch(kv, "/w/c/", TMA_KV_PREFIX, first, &r);
    CHECK_MSG(kvt_wait_end(&r, 10), "no compaction report");
    CHECK_STATUS(r.end_status, TMA_ERR_COMPACTED);
    ASSERT_EQ(r.compact_revision, last);
    ASSERT_EQ(r.n, 0);
    ASSERT_EQ(r.n_updates, 1);
    /* The ended watch calls no more. */
    CHECK_OK(tma_kv_put(kv, "/w/c/3", "d", 1, 0, NULL));

    /* Resync: read the prefix at one revision, watch from the next. */
    struct resync s = {0};
    int64_t at = 0;
    tma_kv_range_opts_t o = {.flags = TMA_KV_PREFIX, .limit = 2};
    CHECK_OK(tma_kv_range_each(kv, "/w/c/", &o, count_pair, &s, &at));
    ASSERT_EQ(s.n, 3);
    ASSERT_EQ(s.max_rev, at);
    kvt_recorder_t r2;
    kvt_recorder_init(&r2);
    tma_kv_watch_t *w2 = watch(kv, "/w/c/", TMA_KV_PREFIX, at + 1, &r2);
    int64_t after = 0;
    CHECK_OK(tma_kv_put(kv, "/w/c/4", "e", 1, 0, &after));
    CHECK(kvt_wait_events(&r2, 1, 10));
    ASSERT_EQ(r2.n, 1);
    ASSERT_EQ(r2.ev[0].mod_revision, after);
    ASSERT_EQ(r2.end_status, TMA_OK);
    ASSERT_EQ(r.n_updates, 1);
    tma_kv_watch_stop(w);
    tma_kv_watch_stop(w2);
    kvt_recorder_free(&r);
    kvt_recorder_free(&r2);
}

static void test_self_stop_and_large(tma_kv_t *kv)
{
    kvt_recorder_t r, sync;
    kvt_recorder_init(&r);
    kvt_recorder_init(&sync);
    tma_kv_watch_t *w = watch(kv, "/w/s", 0, 0, &r);
    pthread_mutex_lock(&r.mu);
    r.stop_on_event = w; /* the first event stops the watch from its own callback */
    pthread_mutex_unlock(&r.mu);
    tma_kv_watch_t *ws = watch(kv, "/w/s", 0, 0, &sync);
    CHECK_OK(tma_kv_put(kv, "/w/s", "1", 1, 0, NULL));
    CHECK_OK(tma_kv_put(kv, "/w/s", "2", 1, 0, NULL));
    /* A value of 1 MiB reaches the callback whole, over many chunks. */
    size_t big_len = 1 << 20;
    char *big = malloc(big_len);
    for (size_t i = 0; i < big_len; i++)
        big[i] = (char)('a' + i % 26);
    CHECK_OK(tma_kv_put(kv, "/w/s", big, big_len, 0, NULL));
    free(big);
    CHECK(kvt_wait_events(&sync, 3, 20));
    ASSERT_EQ(sync.n, 3);
    if (sync.n == 3) {
        ASSERT_EQ(strncmp(sync.ev[2].value, "abcdefgh", 8), 0);
    }
    CHECK_MSG(kvt_recorder_count(&r) == 1, "the stopped watch delivered %zu events",
              kvt_recorder_count(&r));
    /* Many small events in a row keep their order. */
    char key[32];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "%d", i);
        CHECK_OK(tma_kv_put(kv, "/w/s", key, strlen(key), 0, NULL));
    }
    CHECK(kvt_wait_events(&sync, 103, 20));
    ASSERT_EQ(sync.out_of_order, 0);
    ASSERT_STR_EQ(sync.ev[102].value, "99");
    tma_kv_watch_stop(ws);
    kvt_recorder_free(&sync);
    kvt_recorder_free(&r);
}

static int put_works(void *arg)
{
    return tma_kv_put(arg, "/w/r/probe", "x", 1, 0, NULL) == TMA_OK;
}

static void test_restart(tma_kv_t *kv)
{
    kvt_recorder_t r;
    kvt_recorder_init(&r);
    tma_kv_watch_t *w = watch(kv, "/w/r/", TMA_KV_PREFIX, 0, &r);
    int64_t lease = 0;
    kvt_lost_t lost = {0};
    CHECK_OK(tma_kv_lease_grant(kv, 20, &lease, NULL));
    CHECK_OK(tma_kv_put(kv, "/w/r/member", "alive", 5, lease, NULL));
    CHECK_OK(tma_kv_lease_keep(kv, lease, kvt_lost_fn, &lost));
    int64_t r1 = 0, r2 = 0;
    CHECK_OK(tma_kv_put(kv, "/w/r/1", "before", 6, 0, &r1));
    CHECK(kvt_wait_events(&r, 2, 10));

    tma_test_etcd_kill(etcd, 0);
    CHECK_STATUS(tma_kv_put(kv, "/w/r/2", "down", 4, 0, NULL), TMA_ERR_UNAVAILABLE);
    tma_kv_result_t g = {0};
    CHECK_STATUS(tma_kv_get(kv, "/w/r/1", &g), TMA_ERR_UNAVAILABLE);
    tma_test_etcd_restart(etcd, 0);

    /* The same client works again, and the data survived. */
    CHECK(tma_test_wait_for(put_works, kv, 10));
    CHECK_OK(tma_kv_get(kv, "/w/r/1", &g));
    ASSERT_STR_EQ(g.pairs[0].value, "before");
    ASSERT_EQ(g.pairs[0].mod_revision, r1);
    tma_kv_result_free(&g);
    CHECK_OK(tma_kv_put(kv, "/w/r/2", "after", 5, 0, &r2));

    /* The watch reconnected and resumed after the last revision it gave:
     * the probe puts and the new key, nothing twice. */
    int found = 0;
    for (int tries = 0; tries < 1000 && !found; tries++) {
        pthread_mutex_lock(&r.mu);
        found = r.n && r.ev[r.n - 1].mod_revision == r2;
        pthread_mutex_unlock(&r.mu);
        if (!found)
            tma_sleep(0.01);
    }
    CHECK_MSG(found, "the watch did not deliver the put made after the restart");
    pthread_mutex_lock(&r.mu);
    ASSERT_EQ(r.out_of_order, 0);
    ASSERT_EQ(r.end_status, TMA_OK);
    for (size_t i = 1; i < r.n; i++)
        CHECK_MSG(r.ev[i].mod_revision > r.ev[i - 1].mod_revision ||
                      strcmp(r.ev[i].key, r.ev[i - 1].key) != 0,
                  "event %zu repeated", i);
    ASSERT_GE(r.n, 2);
    if (r.n >= 2) {
        ASSERT_STR_EQ(r.ev[1].key, "/w/r/1");
        ASSERT_EQ(r.ev[1].mod_revision, r1);
    }
    ASSERT_GE(r.n, 4);
    if (r.n >= 4) {
        ASSERT_STR_EQ(r.ev[r.n - 1].key, "/w/r/2");
    }
    pthread_mutex_unlock(&r.mu);

    /* The kept lease outlived the outage. */
    int64_t ttl = 0;
    CHECK_OK(tma_kv_lease_keepalive_once(kv, lease, &ttl));
    CHECK(kvt_exists(kv, "/w/r/member"));
    ASSERT_EQ(kvt_lost_calls(&lost), 0);
    tma_kv_watch_stop(w);
    CHECK_OK(tma_kv_lease_revoke(kv, lease));
    CHECK(!kvt_exists(kv, "/w/r/member"));
    kvt_recorder_free(&r);
}

static void test_start_failures(void)
{
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", tma_test_free_port());
    tma_kv_t *kv = kvt_connect(url, 5);
    kvt_recorder_t r;
    kvt_recorder_init(&r);
    tma_kv_watch_t *w = NULL;
    CHECK_STATUS(tma_kv_watch_start(kv, "/w/x", NULL, kvt_recorder_fn, &r, &w), TMA_ERR_UNAVAILABLE);
    ASSERT_NULL(w);
    CHECK_STATUS(tma_kv_watch_start(kv, "", NULL, kvt_recorder_fn, &r, &w), TMA_ERR_INVALID);
    tma_kv_destroy(kv);

    /* Destroying a client stops the watches still running. */
    kv = kvt_connect(tma_test_etcd_endpoints(etcd), 5);
    w = watch(kv, "/w/d", 0, 0, &r);
    CHECK_OK(tma_kv_put(kv, "/w/d", "1", 1, 0, NULL));
    CHECK(kvt_wait_events(&r, 1, 10));
    tma_kv_destroy(kv);
    kvt_recorder_free(&r);
}

int main(int argc, char **argv)
{
    static kvt_test_fn *const tests[] = {test_order, test_compaction, test_self_stop_and_large, test_restart};
    return kvt_run(argc, argv, 5, tests, TMA_ARRAY_LEN(tests), test_start_failures, &etcd);
}
