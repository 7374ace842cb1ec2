/*
 * test_kv_ops.c: every key and lease operation of the etcd client against a
 * real one-member etcd: get, put, range with paging and the snapshot walk,
 * delete, transactions and their helpers, leases (expiry, background
 * keep-alive, loss), concurrency, and each failure status (not found, compare
 * failed, lease expired, compacted, unavailable, timeout, malformed).
 */
#include "kv_test_util.h"
#include "tma_test_etcd.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static tma_test_etcd_t *etcd;

static void test_put_get(tma_kv_t *kv)
{
    int64_t r1 = 0, r2 = 0;
    CHECK_OK(tma_kv_put(kv, "/t/a", "one", 3, 0, &r1));
    CHECK_OK(tma_kv_put(kv, "/t/a", "two", 3, 0, &r2));
    ASSERT_GT(r1, 0);
    ASSERT_EQ(r2, r1 + 1);
    tma_kv_result_t r = {0};
    CHECK_OK(tma_kv_get(kv, "/t/a", &r));
    ASSERT_EQ(r.n_pairs, 1);
    if (r.n_pairs == 1) {
        ASSERT_STR_EQ(r.pairs[0].key, "/t/a");
    }
    ASSERT_EQ(r.pairs[0].value_len, 3);
    ASSERT_STR_EQ(r.pairs[0].value, "two");
    ASSERT_EQ(r.pairs[0].create_revision, r1);
    ASSERT_EQ(r.pairs[0].mod_revision, r2);
    ASSERT_EQ(r.pairs[0].version, 2);
    ASSERT_GE(r.revision, r2);
    tma_kv_result_free(&r);

    /* Binary and empty values. */
    const char bin[] = {'\0', 'x', '\xff', '\0', '"', '\\'};
    CHECK_OK(tma_kv_put(kv, "/t/bin", bin, sizeof(bin), 0, NULL));
    CHECK_OK(tma_kv_get(kv, "/t/bin", &r));
    ASSERT_EQ(r.pairs[0].value_len, sizeof(bin));
    ASSERT_EQ(memcmp(r.pairs[0].value, bin, sizeof(bin)), 0);
    tma_kv_result_free(&r);
    CHECK_OK(tma_kv_put(kv, "/t/empty", NULL, 0, 0, NULL));
    CHECK_OK(tma_kv_get(kv, "/t/empty", &r));
    ASSERT_EQ(r.pairs[0].value_len, 0);
    ASSERT_EQ(r.pairs[0].value[0], '\0');
    tma_kv_result_free(&r);

    CHECK_STATUS(tma_kv_get(kv, "/t/missing", &r), TMA_ERR_NOT_FOUND);
    ASSERT_NULL(r.pairs);
    CHECK_STATUS(tma_kv_put(kv, "", "x", 1, 0, NULL), TMA_ERR_INVALID);
    CHECK_STATUS(tma_kv_get(kv, "", &r), TMA_ERR_INVALID);
}

struct walk {
    tma_kv_t *kv;
    int n;
    int sorted;
    char last[64];
    int stop_at;
};

static int walk_fn(void *arg, const tma_kv_pair_t *p)
{
    struct walk *w = arg;
    if (w->n && strcmp(w->last, p->key) >= 0)
        w->sorted = 0;
    snprintf(w->last, sizeof(w->last), "%s", p->key);
    if (w->n == 3) {
        /* A write during the walk must not show up in it: it is a snapshot. */
        CHECK_OK(tma_kv_put(w->kv, "/t/r/zz-late", "late", 4, 0, NULL));
    }
    w->n++;
    return w->stop_at && w->n == w->stop_at;
}

static void test_range(tma_kv_t *kv)
{
    char key[32], val[32];
    for (int i = 0; i < 25; i++) {
        snprintf(key, sizeof(key), "/t/r/%02d", i);
        snprintf(val, sizeof(val), "v%d", i);
        CHECK_OK(tma_kv_put(kv, key, val, strlen(val), 0, NULL));
    }
    CHECK_OK(tma_kv_put(kv, "/t/r0", "outside the prefix", 18, 0, NULL));
    tma_kv_result_t r = {0};
    tma_kv_range_opts_t o = {.flags = TMA_KV_PREFIX};
    CHECK_OK(tma_kv_range(kv, "/t/r/", &o, &r));
    ASSERT_EQ(r.n_pairs, 25);
    ASSERT_EQ(r.count, 25);
    CHECK(!r.more);
    for (size_t i = 0; i < r.n_pairs; i++) {
        snprintf(key, sizeof(key), "/t/r/%02zu", i);
        ASSERT_STR_EQ(r.pairs[i].key, key);
    }
    int64_t snapshot = r.revision;
    tma_kv_result_free(&r);

    o.limit = 10;
    CHECK_OK(tma_kv_range(kv, "/t/r/", &o, &r));
    ASSERT_EQ(r.n_pairs, 10);
    ASSERT_EQ(r.count, 25);
    ASSERT_EQ(r.more, 1);
    tma_kv_result_free(&r);

    o = (tma_kv_range_opts_t){.flags = TMA_KV_PREFIX, .keys_only = 1};
    CHECK_OK(tma_kv_range(kv, "/t/r/", &o, &r));
    ASSERT_EQ(r.n_pairs, 25);
    ASSERT_EQ(r.pairs[3].value_len, 0);
    ASSERT_EQ(r.pairs[3].key_len, 7);
    tma_kv_result_free(&r);
    o = (tma_kv_range_opts_t){.flags = TMA_KV_PREFIX, .count_only = 1};
    CHECK_OK(tma_kv_range(kv, "/t/r/", &o, &r));
    ASSERT_EQ(r.n_pairs, 0);
    ASSERT_EQ(r.count, 25);
    tma_kv_result_free(&r);
    o = (tma_kv_range_opts_t){.end = "/t/r/10"};
    CHECK_OK(tma_kv_range(kv, "/t/r/05", &o, &r));
    ASSERT_EQ(r.n_pairs, 5);
    if (r.n_pairs == 5) {
        ASSERT_STR_EQ(r.pairs[4].key, "/t/r/09");
    }
    tma_kv_result_free(&r);
    o = (tma_kv_range_opts_t){.flags = TMA_KV_PREFIX};
    CHECK_OK(tma_kv_range(kv, "/t/nothing/", &o, &r));
    ASSERT_EQ(r.n_pairs, 0);
    ASSERT_EQ(r.count, 0);
    tma_kv_result_free(&r);

    /* An older revision shows the older value. */
    CHECK_OK(tma_kv_put(kv, "/t/r/00", "changed", 7, 0, NULL));
    o = (tma_kv_range_opts_t){.revision = snapshot};
    CHECK_OK(tma_kv_range(kv, "/t/r/00", &o, &r));
    ASSERT_EQ(r.n_pairs, 1);
    if (r.n_pairs == 1) {
        ASSERT_STR_EQ(r.pairs[0].value, "v0");
    }
    tma_kv_result_free(&r);
    o.revision = snapshot + 1000000;
    CHECK_STATUS(tma_kv_range(kv, "/t/r/00", &o, &r), TMA_ERR_RANGE);

    /* The walk: pages of 7, one revision, every key once, in order. */
    struct walk w = {.kv = kv, .sorted = 1};
    o = (tma_kv_range_opts_t){.flags = TMA_KV_PREFIX, .limit = 7};
    int64_t rev = 0;
    CHECK_OK(tma_kv_range_each(kv, "/t/r/", &o, walk_fn, &w, &rev));
    CHECK_MSG(w.n == 25, "walked %d keys", w.n);
    CHECK(w.sorted);
    ASSERT_STR_EQ(w.last, "/t/r/24");
    CHECK(kvt_exists(kv, "/t/r/zz-late")); /* written mid-walk, yet not walked */
    tma_kv_result_t now = {0};
    CHECK_OK(tma_kv_get(kv, "/t/r/zz-late", &now));
    ASSERT_GT(rev, 0);
    ASSERT_EQ(now.pairs[0].mod_revision, rev + 1);
    tma_kv_result_free(&now);
    struct walk w2 = {.kv = kv, .sorted = 1, .stop_at = 5};
    CHECK_STATUS(tma_kv_range_each(kv, "/t/r/", &o, walk_fn, &w2, NULL), TMA_ERR_CANCELLED);
    ASSERT_EQ(w2.n, 5);
    /* A walk of the whole key space with an empty prefix sees these keys too. */
    struct walk w3 = {.kv = kv, .sorted = 1};
    o.limit = 100;
    CHECK_OK(tma_kv_range_each(kv, "", &o, walk_fn, &w3, NULL));
    ASSERT_GE(w3.n, 27);
    CHECK(w3.sorted);
}

static void test_delete(tma_kv_t *kv)
{
    tma_kv_result_t r = {0};
    CHECK_OK(tma_kv_delete(kv, "/t/r/00", 0, &r));
    ASSERT_EQ(r.type, TMA_KV_OP_DELETE);
    ASSERT_EQ(r.count, 1);
    ASSERT_EQ(r.n_pairs, 0);
    tma_kv_result_free(&r);
    CHECK_OK(tma_kv_delete(kv, "/t/r/00", 0, &r));
    ASSERT_EQ(r.count, 0);
    tma_kv_result_free(&r);
    CHECK_OK(tma_kv_delete(kv, "/t/r/", TMA_KV_PREFIX | TMA_KV_PREV_KV, &r));
    ASSERT_EQ(r.count, 25);
    ASSERT_EQ(r.n_pairs, 25); /* 24 left + the late one */
    ASSERT_STR_EQ(r.pairs[0].key, "/t/r/01");
    ASSERT_STR_EQ(r.pairs[0].value, "v1");
    tma_kv_result_free(&r);
    CHECK(!kvt_exists(kv, "/t/r/05"));
    CHECK(kvt_exists(kv, "/t/r0")); /* the prefix end is exclusive */
    CHECK_OK(tma_kv_delete(kv, "/t/r0", 0, NULL));
}

static void test_txn(tma_kv_t *kv)
{
    CHECK_OK(tma_kv_put(kv, "/t/x/a", "1", 1, 0, NULL));
    CHECK_OK(tma_kv_put(kv, "/t/x/b", "2", 1, 0, NULL));
    tma_kv_cmp_t cmp[2] = {
        {.key = "/t/x/a", .target = TMA_KV_CMP_VALUE, .op = TMA_KV_EQUAL, .value = "1", .value_len = 1},
        {.key = "/t/x/b", .target = TMA_KV_CMP_VERSION, .op = TMA_KV_EQUAL, .number = 1},
    };
    tma_kv_op_t ok_ops[3] = {
        {.type = TMA_KV_OP_PUT, .key = "/t/x/c", .value = "3", .value_len = 1},
        {.type = TMA_KV_OP_RANGE, .key = "/t/x/", .flags = TMA_KV_PREFIX},
        {.type = TMA_KV_OP_DELETE, .key = "/t/x/b"},
    };
    tma_kv_op_t fail_ops[1] = {{.type = TMA_KV_OP_RANGE, .key = "/t/x/a"}};
    tma_kv_txn_t txn = {cmp, 2, ok_ops, 3, fail_ops, 1};
    tma_kv_result_t r = {0};
    CHECK_OK(tma_kv_txn(kv, &txn, &r));
    ASSERT_EQ(r.type, TMA_KV_OP_TXN);
    ASSERT_EQ(r.succeeded, 1);
    ASSERT_EQ(r.n_results, 3);
    ASSERT_EQ(r.results[0].type, TMA_KV_OP_PUT);
    ASSERT_EQ(r.results[1].type, TMA_KV_OP_RANGE);
    ASSERT_EQ(r.results[1].n_pairs, 3); /* a, b, c */
    ASSERT_EQ(r.results[2].type, TMA_KV_OP_DELETE);
    ASSERT_EQ(r.results[2].count, 1);
    tma_kv_result_free(&r);
    /* Now b is gone (version 0): the second compare fails, the failure ops run. */
    CHECK_OK(tma_kv_txn(kv, &txn, &r));
    ASSERT_EQ(r.succeeded, 0);
    ASSERT_EQ(r.n_results, 1);
    ASSERT_EQ(r.results[0].n_pairs, 1);
    ASSERT_STR_EQ(r.results[0].pairs[0].value, "1");
    tma_kv_result_free(&r);
    CHECK(!kvt_exists(kv, "/t/x/b"));

    /* Revision compares: GREATER and LESS. */
    tma_kv_result_t a = {0};
    CHECK_OK(tma_kv_get(kv, "/t/x/a", &a));
    tma_kv_cmp_t c2 = {.key = "/t/x/a", .target = TMA_KV_CMP_MOD, .op = TMA_KV_LESS,
                       .number = a.pairs[0].mod_revision + 1};
    tma_kv_txn_t t2 = {&c2, 1, NULL, 0, NULL, 0};
    CHECK_OK(tma_kv_txn(kv, &t2, &r));
    ASSERT_EQ(r.succeeded, 1);
    ASSERT_EQ(r.n_results, 0);
    tma_kv_result_free(&r);
    c2.op = TMA_KV_GREATER;
    CHECK_OK(tma_kv_txn(kv, &t2, &r));
    ASSERT_EQ(r.succeeded, 0);
    tma_kv_result_free(&r);
    c2.target = TMA_KV_CMP_CREATE;
    c2.op = TMA_KV_NOT_EQUAL;
    c2.number = 0;
    CHECK_OK(tma_kv_txn(kv, &t2, &r));
    ASSERT_EQ(r.succeeded, 1);
    tma_kv_result_free(&r);
    tma_kv_result_free(&a);

    /* Bad arguments never reach etcd. */
    tma_kv_cmp_t bad = {.key = "/t/x/a", .target = (tma_kv_cmp_target_t)9};
    tma_kv_txn_t t3 = {&bad, 1, NULL, 0, NULL, 0};
    CHECK_STATUS(tma_kv_txn(kv, &t3, &r), TMA_ERR_INVALID);
    tma_kv_op_t bad_op = {.type = TMA_KV_OP_TXN, .key = "/t/x/a"};
    tma_kv_txn_t t4 = {NULL, 0, &bad_op, 1, NULL, 0};
    CHECK_STATUS(tma_kv_txn(kv, &t4, &r), TMA_ERR_INVALID);
    /* etcd itself refuses two puts of one key in a txn. */
    tma_kv_op_t dup[2] = {{.type = TMA_KV_OP_PUT, .key = "/t/x/d", .value = "1", .value_len = 1},
                          {.type = TMA_KV_OP_PUT, .key = "/t/x/d", .value = "2", .value_len = 1}};
    tma_kv_txn_t t5 = {NULL, 0, dup, 2, NULL, 0};
    CHECK_STATUS(tma_kv_txn(kv, &t5, &r), TMA_ERR_INVALID);
}

struct race {
    tma_kv_t *kv;
    int id;
    tma_status_t st;
};

static void *race_main(void *arg)
{
    struct race *r = arg;
    char v[16];
    snprintf(v, sizeof(v), "w%d", r->id);
    r->st = tma_kv_put_if_absent(r->kv, "/t/leader", v, strlen(v), 0, NULL);
    return NULL;
}

static void test_helpers(tma_kv_t *kv)
{
    tma_kv_result_t cur = {0};
    CHECK_OK(tma_kv_put_if_absent(kv, "/t/h/once", "first", 5, 0, &cur));
    ASSERT_EQ(cur.n_pairs, 1);
    if (cur.n_pairs == 1) {
        ASSERT_STR_EQ(cur.pairs[0].value, "first");
    }
    ASSERT_EQ(cur.pairs[0].version, 1);
    ASSERT_EQ(cur.pairs[0].create_revision, cur.pairs[0].mod_revision);
    int64_t created = cur.pairs[0].create_revision;
    tma_kv_result_free(&cur);
    CHECK_STATUS(tma_kv_put_if_absent(kv, "/t/h/once", "second", 6, 0, &cur),
                 TMA_ERR_COMPARE_FAILED);
    ASSERT_EQ(cur.n_pairs, 1);
    if (cur.n_pairs == 1) {
        ASSERT_STR_EQ(cur.pairs[0].value, "first");
    } /* who won */
    ASSERT_EQ(cur.pairs[0].create_revision, created);
    tma_kv_result_free(&cur);
    CHECK_STATUS(tma_kv_put_if_absent(kv, "/t/h/once", "third", 5, 0, NULL), TMA_ERR_COMPARE_FAILED);

    /* Leader election: of 4 racing threads exactly one wins. */
    pthread_t th[4];
    struct race rc[4];
    for (int i = 0; i < 4; i++) {
        rc[i] = (struct race){kv, i, TMA_ERR_INTERNAL};
        pthread_create(&th[i], NULL, race_main, &rc[i]);
    }
    int winners = 0, losers = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        winners += rc[i].st == TMA_OK;
        losers += rc[i].st == TMA_ERR_COMPARE_FAILED;
    }
    CHECK_MSG(winners == 1 && losers == 3, "%d winners, %d losers", winners, losers);

    /* Compare-and-swap on the mod revision (shard ownership with epochs). */
    int64_t rev = 0, rev2 = 0;
    CHECK_OK(tma_kv_cas(kv, "/t/h/shard", 0, "owner=1 epoch=1", 15, 0, &rev));
    CHECK_STATUS(tma_kv_cas(kv, "/t/h/shard", 0, "owner=2 epoch=1", 15, 0, NULL),
                 TMA_ERR_COMPARE_FAILED);
    CHECK_OK(tma_kv_cas(kv, "/t/h/shard", rev, "owner=2 epoch=2", 15, 0, &rev2));
    ASSERT_GT(rev2, rev);
    CHECK_STATUS(tma_kv_cas(kv, "/t/h/shard", rev, "owner=3 epoch=2", 15, 0, NULL),
                 TMA_ERR_COMPARE_FAILED); /* stale */
    CHECK_OK(tma_kv_get(kv, "/t/h/shard", &cur));
    ASSERT_STR_EQ(cur.pairs[0].value, "owner=2 epoch=2");
    ASSERT_EQ(cur.pairs[0].mod_revision, rev2);
    tma_kv_result_free(&cur);

    CHECK_OK(tma_kv_cas_value(kv, "/t/h/shard", "owner=2 epoch=2", 15, "owner=4 epoch=3", 15, 0, NULL));
    CHECK_STATUS(tma_kv_cas_value(kv, "/t/h/shard", "owner=2 epoch=2", 15, "x", 1, 0, NULL),
                 TMA_ERR_COMPARE_FAILED);
    CHECK_STATUS(tma_kv_cas_value(kv, "/t/h/absent", "", 0, "x", 1, 0, NULL),
                 TMA_ERR_COMPARE_FAILED);
}

static int key_gone(void *arg)
{
    void **a = arg;
    return !kvt_exists(a[0], a[1]);
}

static int lost_called(void *arg)
{
    return kvt_lost_calls(arg) > 0;
}

static void test_leases(tma_kv_t *kv)
{
    int64_t lease = 0, granted = 0, ttl = 0;
    CHECK_OK(tma_kv_lease_grant(kv, 30, &lease, &granted));
    ASSERT_GT(lease, 0);
    ASSERT_EQ(granted, 30);
    CHECK_OK(tma_kv_put(kv, "/t/l/a", "x", 1, lease, NULL));
    tma_kv_result_t r = {0};
    CHECK_OK(tma_kv_get(kv, "/t/l/a", &r));
    ASSERT_EQ(r.pairs[0].lease, lease);
    tma_kv_result_free(&r);
    CHECK_OK(tma_kv_lease_time_to_live(kv, lease, &ttl, &granted));
    ASSERT_GT(ttl, 0);
    ASSERT_LE(ttl, 30);
    ASSERT_EQ(granted, 30);
    CHECK_OK(tma_kv_lease_keepalive_once(kv, lease, &ttl));
    ASSERT_EQ(ttl, 30);
    /* The lease guards a txn compare too. */
    tma_kv_cmp_t cmp = {.key = "/t/l/a", .target = TMA_KV_CMP_LEASE, .op = TMA_KV_EQUAL, .number = lease};
    tma_kv_txn_t txn = {&cmp, 1, NULL, 0, NULL, 0};
    CHECK_OK(tma_kv_txn(kv, &txn, &r));
    CHECK(r.succeeded);
    tma_kv_result_free(&r);

    CHECK_OK(tma_kv_lease_revoke(kv, lease));
    CHECK(!kvt_exists(kv, "/t/l/a"));
    CHECK_STATUS(tma_kv_lease_revoke(kv, lease), TMA_ERR_LEASE_EXPIRED);
    CHECK_STATUS(tma_kv_lease_keepalive_once(kv, lease, &ttl), TMA_ERR_LEASE_EXPIRED);
    CHECK_STATUS(tma_kv_lease_time_to_live(kv, lease, &ttl, NULL), TMA_ERR_LEASE_EXPIRED);
    CHECK_STATUS(tma_kv_put(kv, "/t/l/b", "x", 1, lease, NULL), TMA_ERR_LEASE_EXPIRED);
    CHECK_STATUS(tma_kv_lease_keep(kv, lease, NULL, NULL), TMA_ERR_LEASE_EXPIRED);
    CHECK_STATUS(tma_kv_lease_grant(kv, 0, &lease, NULL), TMA_ERR_INVALID);

    /* A key bound to a lease nobody renews vanishes after the TTL, while
     * one whose lease is kept in the background stays. */
    int64_t dying = 0, kept = 0, lost_lease = 0;
    CHECK_OK(tma_kv_lease_grant(kv, 2, &dying, NULL));
    double t0 = tma_clock_now();
    CHECK_OK(tma_kv_put(kv, "/t/l/dying", "x", 1, dying, NULL));
    CHECK_OK(tma_kv_lease_grant(kv, 2, &kept, NULL));
    CHECK_OK(tma_kv_put(kv, "/t/l/kept", "x", 1, kept, NULL));
    kvt_lost_t lost_kept = {0}, lost = {0};
    CHECK_OK(tma_kv_lease_keep(kv, kept, kvt_lost_fn, &lost_kept));
    CHECK_OK(tma_kv_lease_grant(kv, 2, &lost_lease, NULL));
    CHECK_OK(tma_kv_lease_keep(kv, lost_lease, kvt_lost_fn, &lost));
    CHECK_STATUS(tma_kv_lease_keep_stop(kv, 12345), TMA_ERR_NOT_FOUND);

    void *dying_arg[2] = {kv, "/t/l/dying"};
    CHECK_MSG(tma_test_wait_for(key_gone, dying_arg, 15), "the leased key outlived its TTL");
    double gone_after = tma_clock_now() - t0;
    CHECK_MSG(gone_after > 1.0, "the key vanished after %.2f s, before its 2 s TTL", gone_after);

    /* Another client revokes the lease behind the keeper's back: the keeper
     * learns at its next renewal and calls back once. */
    tma_kv_t *other = kvt_connect(tma_test_etcd_endpoints(etcd), 5);
    CHECK_OK(tma_kv_lease_revoke(other, lost_lease));
    tma_kv_destroy(other);
    CHECK_MSG(tma_test_wait_for(lost_called, &lost, 10), "no lease-lost callback");
    ASSERT_EQ(lost.lease, lost_lease);
    ASSERT_EQ(lost.why, TMA_ERR_LEASE_EXPIRED);
    ASSERT_EQ(kvt_lost_calls(&lost), 1);

    /* Well past two TTLs since the grant, the kept key is still there. */
    while (tma_clock_now() - t0 < 5.0) {
        CHECK(kvt_exists(kv, "/t/l/kept"));
        tma_sleep(0.25);
    }
    CHECK_OK(tma_kv_lease_time_to_live(kv, kept, &ttl, NULL));
    ASSERT_GE(ttl, 1);
    ASSERT_EQ(kvt_lost_calls(&lost_kept), 0);

    /* Stop keeping it: it expires like any other. */
    CHECK_OK(tma_kv_lease_keep_stop(kv, kept));
    void *kept_arg[2] = {kv, "/t/l/kept"};
    CHECK_MSG(tma_test_wait_for(key_gone, kept_arg, 15), "the key outlived its unkept lease");
    ASSERT_EQ(kvt_lost_calls(&lost_kept), 0);
}

struct writer {
    tma_kv_t *kv;
    int id;
    int failures;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    char key[64];
    for (int i = 0; i < 25; i++) {
        snprintf(key, sizeof(key), "/t/c/%d/%02d", w->id, i);
        if (tma_kv_put(w->kv, key, key, strlen(key), 0, NULL) != TMA_OK)
            w->failures++;
    }
    return NULL;
}

static void test_threads(tma_kv_t *kv)
{
    pthread_t th[4];
    struct writer w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct writer){kv, i, 0};
        pthread_create(&th[i], NULL, writer_main, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ASSERT_EQ(w[i].failures, 0);
    }
    tma_kv_result_t r = {0};
    tma_kv_range_opts_t o = {.flags = TMA_KV_PREFIX, .count_only = 1};
    CHECK_OK(tma_kv_range(kv, "/t/c/", &o, &r));
    ASSERT_EQ(r.count, 100);
    tma_kv_result_free(&r);
}

static void test_compacted(tma_kv_t *kv)
{
    int64_t old = 0, now = 0;
    CHECK_OK(tma_kv_put(kv, "/t/k", "old", 3, 0, &old));
    CHECK_OK(tma_kv_put(kv, "/t/k", "new", 3, 0, &now));
    char rev[32];
    snprintf(rev, sizeof(rev), "%lld", (long long)now);
    ASSERT_EQ(tma_test_etcdctl(etcd, "compaction", rev, NULL), 0);
    tma_kv_result_t r = {0};
    tma_kv_range_opts_t o = {.revision = old};
    CHECK_STATUS(tma_kv_range(kv, "/t/k", &o, &r), TMA_ERR_COMPACTED);
    o.revision = now;
    CHECK_OK(tma_kv_range(kv, "/t/k", &o, &r));
    ASSERT_STR_EQ(r.pairs[0].value, "new");
    tma_kv_result_free(&r);
}

/* A server that answers every request with a fixed reply: not etcd. */
struct fake {
    int fd;
    int port;
    const char *reply;
    pthread_t th;
    int served;
};

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    for (;;) {
        int c = accept(f->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        char buf[4096];
        ssize_t n = read(c, buf, sizeof(buf));
        if (n > 0) {
            ssize_t w = write(c, f->reply, strlen(f->reply));
            (void)w;
            f->served++;
        }
        close(c);
    }
}

static void fake_start(struct fake *f, const char *reply)
{
    f->reply = reply;
    f->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    ASSERT_EQ(bind(f->fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ASSERT_EQ(listen(f->fd, 8), 0);
    getsockname(f->fd, (struct sockaddr *)&a, &len);
    f->port = ntohs(a.sin_port);
    pthread_create(&f->th, NULL, fake_main, f);
}

static void fake_stop(struct fake *f)
{
    shutdown(f->fd, SHUT_RDWR);
    close(f->fd);
    pthread_join(f->th, NULL);
}

static void test_failures(void)
{
    /* Nothing listens: unavailable, at once rather than at the deadline. */
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", tma_test_free_port());
    tma_kv_t *kv = kvt_connect(url, 20);
    double t0 = tma_clock_now();
    CHECK_STATUS(tma_kv_put(kv, "/t/f", "x", 1, 0, NULL), TMA_ERR_UNAVAILABLE);
    CHECK_MSG(tma_clock_now() - t0 < 10, "took %.1f s", tma_clock_now() - t0);
    tma_kv_destroy(kv);

    /* A server that answers, but not as etcd does. */
    static const char *const replies[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nContent-Length: 34\r\nConnection: close\r\n\r\n"
        "{\"header\":{\"revision\":12345678.5}}",
        "HTTP/1.1 404 Not Found\r\nContent-Length: 19\r\nConnection: close\r\n\r\n"
        "404 page not found\n",
    };
    for (size_t i = 0; i < TMA_ARRAY_LEN(replies); i++) {
        struct fake f = {0};
        fake_start(&f, replies[i]);
        snprintf(url, sizeof(url), "http://127.0.0.1:%d", f.port);
        kv = kvt_connect(url, 5);
        CHECK_STATUS(tma_kv_put(kv, "/t/f", "x", 1, 0, NULL), TMA_ERR_MALFORMED);
        tma_kv_result_t r = {0};
        CHECK_STATUS(tma_kv_get(kv, "/t/f", &r), TMA_ERR_MALFORMED);
        tma_kv_destroy(kv);
        fake_stop(&f);
        ASSERT_GE(f.served, 2);
    }

    /* A hung etcd (SIGSTOP): the deadline holds. */
    kv = kvt_connect(tma_test_etcd_endpoints(etcd), 0.5);
    CHECK_OK(tma_kv_put(kv, "/t/f", "x", 1, 0, NULL));
    pid_t pid = tma_test_etcd_pid(etcd, 0);
    ASSERT_EQ(tma_test_stop_process(pid), 1);
    t0 = tma_clock_now();
    tma_kv_result_t r = {0};
    CHECK_STATUS(tma_kv_get(kv, "/t/f", &r), TMA_ERR_TIMEOUT);
    double took = tma_clock_now() - t0;
    kill(pid, SIGCONT);
    CHECK_MSG(took >= 0.4 && took < 5, "the 0.5 s deadline took %.2f s", took);
    CHECK_OK(tma_kv_get(kv, "/t/f", &r));
    tma_kv_result_free(&r);
    tma_kv_destroy(kv);
}

int main(int argc, char **argv)
{
    static kvt_test_fn *const tests[] = {test_put_get, test_range,   test_delete, test_txn,
                                         test_helpers, test_threads, test_leases, test_compacted};
    return kvt_run(argc, argv, 10, tests, TMA_ARRAY_LEN(tests), test_failures, &etcd);
}
