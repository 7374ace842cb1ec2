/*
 * test_kv_secure.c: TLS and authentication against a real etcd that
 * requires client certificates (all made here with openssl) and has users
 * and roles made here with etcdctl.  Right certificates and password work
 * (unary calls and watches); a wrong CA, a missing client certificate, a
 * wrong password, an unknown user and a key outside the user's role fail
 * with TMA_ERR_PERMISSION; an expired token is replaced without the caller
 * noticing.
 */
#include "kv_int.h"
#include "kv_test_util.h"
#include "tma_test_etcd.h"

#include <string.h>

#include <curl/curl.h>

static tma_test_etcd_t *etcd;
static tma_test_tls_t tls;

/* with_cert: 0 none, 1 the client certificate without a CN, 2 the one with a CN. */
static tma_kv_t *connect_as(const char *ca, int with_cert, const char *user, const char *password)
{
    tma_kv_config_t cfg;
    tma_kv_config_init(&cfg);
    cfg.endpoints = tma_test_etcd_endpoints(etcd);
    cfg.request_timeout_s = 5;
    cfg.ca_file = ca;
    if (with_cert) {
        cfg.cert_file = with_cert == 2 ? tls.client_cn_cert : tls.client_cert;
        cfg.key_file = with_cert == 2 ? tls.client_cn_key : tls.client_key;
    }
    cfg.user = user;
    cfg.password = password;
    tma_kv_t *kv = NULL;
    CHECK_OK(tma_kv_create(&cfg, &kv));
    return kv;
}

static void test_tls(void)
{
    /* Without auth, a certificate with a CN is fine too. */
    tma_kv_t *kv = connect_as(tls.ca, 2, NULL, NULL);
    CHECK_OK(tma_kv_put(kv, "/tma/cn", "x", 1, 0, NULL));
    tma_kv_destroy(kv);
    kv = connect_as(tls.ca, 1, NULL, NULL);
    CHECK_OK(tma_kv_put(kv, "/tma/tls", "secret", 6, 0, NULL));
    tma_kv_result_t r = {0};
    CHECK_OK(tma_kv_get(kv, "/tma/tls", &r));
    ASSERT_STR_EQ(r.pairs[0].value, "secret");
    tma_kv_result_free(&r);
    kvt_recorder_t rec;
    kvt_recorder_init(&rec);
    tma_kv_watch_t *w = NULL;
    CHECK_OK(tma_kv_watch_start(kv, "/tma/tls", NULL, kvt_recorder_fn, &rec, &w));
    CHECK_OK(tma_kv_put(kv, "/tma/tls", "again", 5, 0, NULL));
    CHECK(kvt_wait_events(&rec, 1, 10));
    tma_kv_watch_stop(w);
    kvt_recorder_free(&rec);
    tma_kv_destroy(kv);

    /* A CA that did not sign the server's certificate. */
    kv = connect_as(tls.other_ca, 1, NULL, NULL);
    CHECK_STATUS(tma_kv_get(kv, "/tma/tls", &r), TMA_ERR_PERMISSION);
    CHECK_STATUS(tma_kv_put(kv, "/tma/tls", "x", 1, 0, NULL), TMA_ERR_PERMISSION);
    CHECK_STATUS(tma_kv_watch_start(kv, "/tma/tls", NULL, kvt_recorder_fn, &rec, &w),
                 TMA_ERR_PERMISSION);
    tma_kv_destroy(kv);
    /* The server requires a client certificate. */
    kv = connect_as(tls.ca, 0, NULL, NULL);
    CHECK_STATUS(tma_kv_get(kv, "/tma/tls", &r), TMA_ERR_PERMISSION);
    tma_kv_destroy(kv);
}

static void setup_auth(void)
{
    /* root (required before auth can be enabled) and alice, who may use /tma/ only. */
    ASSERT_EQ(tma_test_etcdctl(etcd, "user", "add", "root:rootpw", NULL), 0);
    ASSERT_EQ(tma_test_etcdctl(etcd, "user", "add", "alice:apw", NULL), 0);
    ASSERT_EQ(tma_test_etcdctl(etcd, "role", "add", "trainer", NULL), 0);
    ASSERT_EQ(tma_test_etcdctl(etcd, "role", "grant-permission", "trainer", "--prefix=true",
                               "readwrite", "/tma/", NULL),
              0);
    ASSERT_EQ(tma_test_etcdctl(etcd, "user", "grant-role", "alice", "trainer", NULL), 0);
    ASSERT_EQ(tma_test_etcdctl(etcd, "auth", "enable", NULL), 0);
}

static void test_auth(void)
{
    setup_auth();
    tma_kv_t *kv = connect_as(tls.ca, 1, "alice", "apw");
    int64_t lease = 0;
    CHECK_OK(tma_kv_lease_grant(kv, 30, &lease, NULL));
    CHECK_OK(tma_kv_put(kv, "/tma/job/members/1", "up", 2, lease, NULL));
    tma_kv_result_t r = {0};
    CHECK_OK(tma_kv_get(kv, "/tma/job/members/1", &r));
    tma_kv_result_free(&r);
    CHECK_STATUS(tma_kv_put(kv, "/other", "x", 1, 0, NULL), TMA_ERR_PERMISSION);
    CHECK_STATUS(tma_kv_get(kv, "/other", &r), TMA_ERR_PERMISSION);
    kvt_recorder_t rec;
    kvt_recorder_init(&rec);
    tma_kv_watch_t *w = NULL;
    CHECK_STATUS(tma_kv_watch_start(kv, "/other", NULL, kvt_recorder_fn, &rec, &w),
                 TMA_ERR_PERMISSION);
    tma_kv_watch_opts_t wo = {.flags = TMA_KV_PREFIX};
    CHECK_OK(tma_kv_watch_start(kv, "/tma/job/", &wo, kvt_recorder_fn, &rec, &w));

    /* The token lives 1 s (--auth-token-ttl=1) and only while it is used:
     * after a quiet spell it is gone and the client must get a new one. */
    uint64_t gen = kv->token_gen;
    tma_sleep(2.5); /* the idle time is the condition under test */
    CHECK_OK(tma_kv_put(kv, "/tma/job/members/2", "up", 2, 0, NULL));
    CHECK_MSG(kv->token_gen > gen, "the token was not renewed (generation %llu)",
              (unsigned long long)gen);
    CHECK(kvt_wait_events(&rec, 1, 10));
    ASSERT_EQ(rec.end_status, TMA_OK);

    /* Any change to users or roles makes every token issued before it
     * stale.  A restart then makes the watch reconnect with its stale token
     * (etcd answers "permission denied"): it and the next call must log in
     * again by themselves.
     * (The watch thread may log in again before the put does, so the
     * generation is compared with the one before the restart.) */
    gen = kv->token_gen;
    ASSERT_EQ(tma_test_etcdctl(etcd, "--user", "root:rootpw", "user", "add", "bob:bpw", NULL), 0);
    tma_test_etcd_restart(etcd, 0);
    int64_t rev = 0;
    CHECK_OK(tma_kv_put(kv, "/tma/job/members/3", "up", 2, 0, &rev));
    CHECK_MSG(kv->token_gen > gen, "no new login after the restart (generation %llu)", (unsigned long long)gen);
    CHECK_MSG(kvt_wait_events(&rec, 2, 15), "the watch did not come back after the restart");
    ASSERT_EQ(rec.end_status, TMA_OK);
    ASSERT_GE(rec.n, 2);
    ASSERT_EQ(rec.ev[rec.n - 1].mod_revision, rev);
    tma_kv_watch_stop(w);
    kvt_recorder_free(&rec);

    /* Taking the role away applies at once, to a client already logged in. */
    ASSERT_EQ(tma_test_etcdctl(etcd, "--user", "root:rootpw", "user", "revoke-role", "alice",
                               "trainer", NULL),
              0);
    CHECK_STATUS(tma_kv_put(kv, "/tma/job/members/4", "up", 2, 0, NULL), TMA_ERR_PERMISSION);
    tma_kv_destroy(kv);

    kv = connect_as(tls.ca, 1, "alice", "wrong");
    CHECK_STATUS(tma_kv_get(kv, "/tma/job/members/1", &r), TMA_ERR_PERMISSION);
    CHECK_STATUS(tma_kv_watch_start(kv, "/tma/job/", &wo, kvt_recorder_fn, &rec, &w),
                 TMA_ERR_PERMISSION);
    tma_kv_destroy(kv);
    kv = connect_as(tls.ca, 1, "mallory", "apw");
    CHECK_STATUS(tma_kv_put(kv, "/tma/x", "x", 1, 0, NULL), TMA_ERR_PERMISSION);
    tma_kv_destroy(kv);
    /* No user at all, while auth is on. */
    kv = connect_as(tls.ca, 1, NULL, NULL);
    CHECK_STATUS(tma_kv_put(kv, "/tma/x", "x", 1, 0, NULL), TMA_ERR_PERMISSION);
    tma_kv_destroy(kv);
    /* etcd's gateway refuses a certificate with a Common Name once auth is on. */
    kv = connect_as(tls.ca, 2, "alice", "apw");
    CHECK_STATUS(tma_kv_get(kv, "/tma/job/members/1", &r), TMA_ERR_PERMISSION);
    tma_kv_destroy(kv);
    /* root may do anything. */
    kv = connect_as(tls.ca, 1, "root", "rootpw");
    CHECK_OK(tma_kv_put(kv, "/other", "x", 1, 0, NULL));
    CHECK_OK(tma_kv_lease_revoke(kv, lease));
    tma_kv_destroy(kv);
}

int main(int argc, char **argv)
{
    tma_test_under_valgrind(argc, argv);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char *dir = tma_test_tmpdir("kv-tls");
    tma_test_tls_make(dir, &tls);
    static const char *const extra[] = {"--auth-token-ttl=1", NULL};
    tma_test_etcd_opts_t opts = {.tls = &tls, .extra_args = extra};
    etcd = tma_test_etcd_start(1, &opts);
    test_tls();
    test_auth();
    tma_test_etcd_stop(etcd);
    tma_test_tls_free(&tls);
    tma_test_cleanup_dir(dir);
    curl_global_cleanup();
    return tma_test_done();
}
