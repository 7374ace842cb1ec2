/*
 * test_job_view.c: the job view against a real etcd: control keys count only
 * from their writer.  A stop, agg or shards/<k> that does not carry the
 * current coordinator's epoch (garbage, an older epoch, a made-up one) is
 * ignored; the leader's own writes are acted on.
 */
#include "tma_job.h"
#include "tma_test.h"
#include "tma_test_etcd.h"

#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

static tma_kv_t *kv;
static tma_job_view_t *view;

static void put(tma_job_key_t k, int n, char *val, int64_t *rev_p)
{
    char key[TMA_KEY_MAX];
    if (n >= 0)
        tma_job_key_n(key, "v", k, n);
    else
        tma_job_key(key, "v", k);
    ASSERT_NOT_NULL(val);
    CHECK_OK(tma_kv_put(kv, key, val, strlen(val), 0, rev_p));
    free(val);
}

/* Waits until the view has applied every write so far: a write of its own, and
 * the view's revision at or past it (watch events arrive in revision order;
 * a version bump alone may be an earlier write's). */
static void settle(void)
{
    int64_t rev = 0;
    put(TMA_KEY_BEST, -1, strdup("{}"), &rev);
    double end = tma_clock_now() + 10;
    for (;;) {
        uint64_t since = tma_job_view_wait(view, 0, 0);
        tma_job_view_snap_t s;
        CHECK_OK(tma_job_view_snapshot(view, &s));
        int64_t seen = s.revision;
        tma_job_view_snap_free(&s);
        if (seen >= rev || tma_clock_now() >= end)
            break;
        tma_job_view_wait(view, since, 1);
    }
}

static void snap(tma_job_view_snap_t *s)
{
    settle();
    CHECK_OK(tma_job_view_snapshot(view, s));
}

static void test_control_keys(void)
{
    tma_job_coord_rec_t cr;
    memset(&cr, 0, sizeof cr);
    snprintf(cr.address, sizeof cr.address, "127.0.0.1:1");
    cr.lease = 1;
    int64_t rev = 0;
    put(TMA_KEY_COORDINATOR, -1, tma_job_coord_rec_encode(&cr), &rev);
    uint64_t epoch = (uint64_t)rev;
    tma_job_view_snap_t s;
    snap(&s);
    ASSERT_EQ(s.coord_epoch, epoch);
    tma_job_view_snap_free(&s);

    /* `etcdctl put /tma/v/stop x`, a stop of an older epoch, one of a made-up epoch. */
    put(TMA_KEY_STOP, -1, strdup("x"), NULL);
    settle();
    ASSERT_EQ(tma_job_view_stopped(view), 0);
    put(TMA_KEY_STOP, -1, tma_job_stop_rec_encode(epoch - 1, "old"), NULL);
    settle();
    ASSERT_EQ(tma_job_view_stopped(view), 0);
    put(TMA_KEY_STOP, -1, tma_job_stop_rec_encode(epoch + 7, "forged"), NULL);
    settle();
    ASSERT_EQ(tma_job_view_stopped(view), 0);

    /* agg: the leader's counts, another epoch's does not (the last good one stands). */
    uint64_t agg_epoch = 0;
    put(TMA_KEY_AGG, -1, tma_job_agg_rec_encode(2, epoch), NULL);
    settle();
    ASSERT_EQ(tma_job_view_agg(view, &agg_epoch), 2);
    ASSERT_EQ(agg_epoch, epoch);
    put(TMA_KEY_AGG, -1, tma_job_agg_rec_encode(9, epoch + 3), NULL);
    settle();
    /* The round and its epoch stay the accepted pair: workers key rounds by both. */
    ASSERT_EQ(tma_job_view_agg(view, &agg_epoch), 2);
    ASSERT_EQ(agg_epoch, epoch);

    /* shards/<k>: a record of another epoch names no owner. */
    tma_job_shard_rec_t r = {0, 4, epoch + 1, 0};
    put(TMA_KEY_SHARDS, 0, tma_job_shard_rec_encode(&r), NULL);
    r.shard = 1;
    r.epoch = epoch;
    put(TMA_KEY_SHARDS, 1, tma_job_shard_rec_encode(&r), NULL);
    snap(&s);
    ASSERT_EQ(s.n_shards, 2);
    ASSERT_EQ(s.shard_present[0], 0);
    ASSERT_EQ(s.shard_present[1], 1);
    ASSERT_EQ(s.shards[1].owner, 4);
    tma_job_view_snap_free(&s);

    /* A fresh view (a snapshot, not a watch) judges the same way. */
    tma_job_view_t *fresh;
    CHECK_OK(tma_job_view_start(kv, "v", 10, &fresh));
    CHECK_OK(tma_job_view_snapshot(fresh, &s));
    ASSERT_EQ(tma_job_view_stopped(fresh), 0);
    ASSERT_EQ(s.shard_present[0], 0);
    ASSERT_EQ(s.shard_present[1], 1);
    tma_job_view_snap_free(&s);
    tma_job_view_stop(fresh);

    /* The leader's stop counts; once its key is gone (the coordinator exited)
     * the epoch in `state` names the leader. */
    put(TMA_KEY_STOP, -1, tma_job_stop_rec_encode(epoch, "done"), NULL);
    settle();
    ASSERT_EQ(tma_job_view_stopped(view), 1);
    tma_job_state_rec_t st;
    memset(&st, 0, sizeof st);
    st.epoch = epoch;
    snprintf(st.phase, sizeof st.phase, "done");
    put(TMA_KEY_STATE, -1, tma_job_state_rec_encode(&st), NULL);
    char key[TMA_KEY_MAX];
    tma_job_key(key, "v", TMA_KEY_COORDINATOR);
    CHECK_OK(tma_kv_delete(kv, key, 0, NULL));
    settle();
    ASSERT_EQ(tma_job_view_stopped(view), 1);
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    tma_test_etcd_t *etcd = tma_test_etcd_start(1, NULL);
    tma_kv_config_t cfg;
    tma_kv_config_init(&cfg);
    cfg.endpoints = tma_test_etcd_endpoints(etcd);
    CHECK_OK(tma_kv_create(&cfg, &kv));
    CHECK_OK(tma_job_view_start(kv, "v", 10, &view));
    test_control_keys();
    tma_job_view_stop(view);
    tma_kv_destroy(kv);
    tma_test_etcd_stop(etcd);
    curl_global_cleanup();
    return tma_test_done();
}
