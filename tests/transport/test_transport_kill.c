/*
 * test_transport_kill.c: SIGKILL of a peer process in the middle of a
 * transfer, in both directions.  The survivor must report the failure
 * (callback and receive queue) within 2 s, fail the interrupted operation,
 * leave nothing in flight, and keep serving its other peer.
 */
#include "peer_proc.h"
#include "tma_test.h"
#include "tma_transport.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define ANYT TMA_TRANSPORT_ANY_TAG
#define HOST TMA_TRANSPORT_MEM_HOST
#define BIG (64u << 20) /* floats: 256 MiB */

static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;
static double failed_at[64]; /* when the callback reported peer i failed */

static void event_cb(void *arg, const tma_transport_event_t *ev)
{
    if (ev->kind == TMA_TRANSPORT_EV_FAILED && ev->peer < 64) {
        pthread_mutex_lock(&cb_lock);
        failed_at[ev->peer] = tma_clock_now();
        pthread_mutex_unlock(&cb_lock);
    }
}

static double failed_time(uint32_t peer)
{
    pthread_mutex_lock(&cb_lock);
    double v = failed_at[peer];
    pthread_mutex_unlock(&cb_lock);
    return v;
}

/* The queued end of peer's connection, within timeout_s. */
static int wait_failed(tma_transport_t *t, uint32_t peer, double timeout_s)
{
    double deadline = tma_clock_now() + timeout_s;
    for (;;) {
        double left = deadline - tma_clock_now();
        tma_transport_msg_t m;
        if (left <= 0 || tma_transport_recv(t, peer, ANYT, left, &m) != TMA_OK)
            return 0;
        int hit = m.kind == TMA_TRANSPORT_MSG_EVENT && m.event.kind == TMA_TRANSPORT_EV_FAILED &&
                  m.event.reason == TMA_ERR_PEER_FAILED;
        tma_transport_msg_release(t, &m);
        if (hit)
            return 1;
    }
}

static void echo_works(tma_transport_t *t, uint32_t peer, const float *x, size_t n)
{
    tma_transport_meta_t m = {4, 1, 9};
    CHECK_OK(tma_transport_send(t, peer, &m, x, n, HOST, 30));
    tma_transport_msg_t msg;
    CHECK_OK(tma_transport_recv(t, peer, 4, 30, &msg));
    ASSERT_EQ(msg.kind, TMA_TRANSPORT_MSG_TENSOR);
    ASSERT_EQ(msg.count, n);
    if (msg.count == n)
        ASSERT_EQ(memcmp(msg.data, x, n * sizeof(float)), 0);
    tma_transport_msg_release(t, &msg);
}

static void wait_until_idle(tma_transport_t *t)
{
    tma_transport_stats_t s;
    double deadline = tma_clock_now() + 5;
    do {
        tma_sleep(0.0005); /* poll politely */
        tma_transport_stats(t, &s);
    } while ((s.rx_active || s.tx_active || s.rx_held) && tma_clock_now() < deadline);
    CHECK_MSG(s.rx_active == 0 && s.tx_active == 0 && s.rx_held == 0, "rx %u tx %u held %u",
              s.rx_active, s.tx_active, s.rx_held);
}

/* A peer streaming 256 MiB tensors to us dies with one half-received. */
static void test_sender_dies(tma_transport_t *srv, const float *x)
{
    char count[32];
    snprintf(count, sizeof count, "%u", BIG);
    peer_proc_t s;
    if (peer_proc_start(&s, 20, "--id", "21", "--connect", tma_transport_address(srv), "--mode",
                        "stream", "--count", count, NULL) != 0) {
        CHECK(0);
        return;
    }
    CHECK_OK(tma_transport_wait_peer(srv, 21, 30));
    int got = 0, stopped = 0;
    double deadline = tma_clock_now() + 60;
    while (!stopped && tma_clock_now() < deadline) {
        tma_transport_msg_t m;
        if (tma_transport_recv(srv, 21, ANYT, 0.001, &m) == TMA_OK) {
            got += m.kind == TMA_TRANSPORT_MSG_TENSOR && m.count == BIG;
            tma_transport_msg_release(srv, &m);
        }
        tma_transport_stats_t st;
        tma_transport_stats(srv, &st);
        if (got && st.rx_active) {
            kill(s.pid, SIGSTOP);
            /* Stopped mid-message: it cannot complete any more. */
            tma_transport_stats(srv, &st);
            if (st.rx_active)
                stopped = 1;
            else
                kill(s.pid, SIGCONT);
        }
    }
    CHECK_MSG(got > 0 && stopped, "received %d, stopped %d", got, stopped);
    double t0 = tma_clock_now();
    peer_proc_kill(&s);
    CHECK(wait_failed(srv, 21, 2.0));
    double cb = failed_time(21);
    CHECK_MSG(cb > 0 && cb - t0 < 2.0, "callback after %.3f s", cb - t0);
    tma_log_info("test", "sender killed mid-transfer: failure reported after %.3f s", cb - t0);
    wait_until_idle(srv);
    peer_check_sole(srv, 22);
    echo_works(srv, 22, x, 1u << 20);
}

/* A peer dies while receiving 256 MiB from us: our send fails. */
static void test_receiver_dies(tma_transport_t *srv, const float *x)
{
    peer_proc_t k;
    if (peer_proc_start(&k, 20, "--id", "23", "--connect", tma_transport_address(srv), "--mode",
                        "sink", NULL) != 0) {
        CHECK(0);
        return;
    }
    CHECK_OK(tma_transport_wait_peer(srv, 23, 30));
    int stopped = 0;
    for (int attempt = 0; attempt < 10 && !stopped; attempt++) {
        peer_send_t job = {.t = srv, .peer = 23, .meta = {1, 0, 0}, .x = x, .n = BIG, .timeout_s = 60};
        peer_send_start(&job);
        char line[64];
        if (attempt == 0 && peer_proc_expect(&k, "RXACTIVE", 30, line, sizeof line) == 0) {
            kill(k.pid, SIGSTOP);
            if (__atomic_load_n(&job.done, __ATOMIC_ACQUIRE) == 0)
                stopped = 1; /* our send is still in flight and cannot finish */
        } else if (attempt > 0) {
            /* The receiver reports RXACTIVE once; later attempts stop it as
             * soon as our send is in flight and check it was not finished. */
            tma_transport_stats_t st;
            double deadline = tma_clock_now() + 10;
            do {
                tma_sleep(0.0005); /* poll politely */
                tma_transport_stats(srv, &st);
            } while (!st.tx_active && tma_clock_now() < deadline);
            kill(k.pid, SIGSTOP);
            if (__atomic_load_n(&job.done, __ATOMIC_ACQUIRE) == 0)
                stopped = 1;
        }
        if (stopped) {
            double t0 = tma_clock_now();
            peer_proc_kill(&k);
            CHECK_STATUS(peer_send_join(&job), TMA_ERR_PEER_FAILED);
            CHECK_MSG(job.done_at - t0 < 2.0, "send failed after %.3f s", job.done_at - t0);
            CHECK(wait_failed(srv, 23, 2.0));
            double cb = failed_time(23);
            CHECK_MSG(cb > 0 && cb - t0 < 2.0, "callback after %.3f s", cb - t0);
            tma_log_info("test", "receiver killed mid-transfer: send failed after %.3f s",
                         job.done_at - t0);
        } else {
            kill(k.pid, SIGCONT);
            CHECK_OK(peer_send_join(&job));
        }
    }
    CHECK(stopped);
    if (!stopped)
        peer_proc_kill(&k);
    wait_until_idle(srv);
    echo_works(srv, 22, x, 1u << 20);
}

int main(void)
{
    peer_env_setup();
    tma_transport_config_t cfg;
    peer_config(&cfg, 0, "127.0.0.1:0");
    cfg.event_cb = event_cb;
    tma_transport_t *srv;
    CHECK_OK(tma_transport_create(&cfg, &srv));
    peer_proc_t e;
    if (peer_proc_start(&e, 20, "--id", "22", "--connect", tma_transport_address(srv), "--mode",
                        "echo", NULL) != 0) {
        tma_transport_destroy(srv);
        return 1;
    }
    CHECK_OK(tma_transport_wait_peer(srv, 22, 30));
    float *x = tma_alloc_aligned((size_t)BIG * sizeof(float));
    tma_rng_t r;
    tma_rng_seed(&r, 7, 0);
    for (size_t i = 0; i < BIG; i++)
        x[i] = (float)tma_rng_uniform(&r);

    test_sender_dies(srv, x);
    test_receiver_dies(srv, x);

    tma_free_aligned(x);
    tma_transport_destroy(srv);
    ASSERT_EQ(peer_proc_end(&e, 30), 0);
    return tma_test_done();
}
