/*
 * test_transport_cycles.c: 100 connect/close cycles leave no file
 * descriptor and no connection behind: 50 transports created, connected,
 * used and destroyed, and 50 connect/disconnect cycles on one transport.
 * Memory is checked by running this program under AddressSanitizer
 * (tests/transport/asan.sh), whose leak check fails it on any leak.
 */
#include "peer_proc.h"
#include "tma_test.h"
#include "tma_transport.h"

#include <dirent.h>
#include <string.h>

#define ANYT TMA_TRANSPORT_ANY_TAG
#define HOST TMA_TRANSPORT_MEM_HOST

static int count_fds_now(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* The open fds once every endpoint of these transports is released. */
static int count_fds(tma_transport_t *a, tma_transport_t *b)
{
    tma_transport_stats_t sa, sb;
    double deadline = tma_clock_now() + 10;
    do {
        tma_sleep(0.0005); /* poll politely */
        tma_transport_stats(a, &sa);
        sb.endpoints = 0;
        if (b)
            tma_transport_stats(b, &sb);
    } while ((sa.endpoints || sb.endpoints) && tma_clock_now() < deadline);
    ASSERT_EQ(sa.endpoints, 0);
    ASSERT_EQ(sb.endpoints, 0);
    return count_fds_now();
}

/* One message each way, then the server sees the clean close. */
static void exchange(tma_transport_t *srv, tma_transport_t *c, uint32_t id, int i)
{
    float x[300];
    for (int k = 0; k < 300; k++)
        x[k] = (float)(i * 1000 + k);
    tma_transport_meta_t m = {1, 1, (uint64_t)i};
    CHECK_OK(tma_transport_send(c, 0, &m, x, 300, HOST, 10));
    tma_transport_msg_t msg;
    CHECK_OK(tma_transport_recv(srv, id, ANYT, 10, &msg));
    ASSERT_EQ(msg.kind, TMA_TRANSPORT_MSG_TENSOR);
    ASSERT_EQ(msg.count, 300);
    ASSERT_EQ(msg.meta.round, (uint64_t)i);
    if (msg.kind == TMA_TRANSPORT_MSG_TENSOR)
        ASSERT_EQ(memcmp(msg.data, x, sizeof x), 0);
    tma_transport_msg_release(srv, &msg);
    CHECK_OK(tma_transport_send(srv, id, &m, x, 7, HOST, 10));
    CHECK_OK(tma_transport_recv(c, 0, ANYT, 10, &msg));
    ASSERT_EQ(msg.kind, TMA_TRANSPORT_MSG_TENSOR);
    ASSERT_EQ(msg.count, 7);
    tma_transport_msg_release(c, &msg);
}

static void expect_closed(tma_transport_t *t, uint32_t id)
{
    tma_transport_msg_t msg;
    CHECK_OK(tma_transport_recv(t, id, ANYT, 10, &msg));
    ASSERT_EQ(msg.kind, TMA_TRANSPORT_MSG_EVENT);
    ASSERT_EQ(msg.event.kind, TMA_TRANSPORT_EV_CLOSED);
    ASSERT_EQ(msg.event.reason, TMA_OK);
    tma_transport_msg_release(t, &msg);
}

int main(void)
{
    peer_env_setup();
    tma_transport_t *srv = peer_transport(0, "127.0.0.1:0");
    const char *addr = tma_transport_address(srv);

    /* A first cycle pays for UCX's one-time, process-wide set-up. */
    tma_transport_t *c = peer_transport(1, NULL);
    CHECK_OK(tma_transport_connect(c, addr, 10, NULL));
    exchange(srv, c, 1, 0);
    tma_transport_destroy(c);
    expect_closed(srv, 1);
    int fds0 = count_fds(srv, NULL);

    for (int i = 0; i < 50; i++) {
        c = peer_transport(1, NULL);
        CHECK_OK(tma_transport_connect(c, addr, 10, NULL));
        exchange(srv, c, 1, i);
        tma_transport_destroy(c);
        expect_closed(srv, 1);
    }
    int fds1 = count_fds(srv, NULL);
    CHECK_MSG(fds1 == fds0, "open fds %d before 50 create/destroy cycles, %d after", fds0, fds1);

    c = peer_transport(2, NULL);
    CHECK_OK(tma_transport_connect(c, addr, 10, NULL));
    exchange(srv, c, 2, 0);
    CHECK_OK(tma_transport_disconnect(c, 0, 10));
    expect_closed(srv, 2);
    expect_closed(c, 0);
    int fds2 = count_fds(srv, c);
    for (int i = 0; i < 50; i++) {
        CHECK_OK(tma_transport_connect(c, addr, 10, NULL));
        exchange(srv, c, 2, i);
        CHECK_OK(tma_transport_disconnect(c, 0, 10));
        expect_closed(srv, 2);
        expect_closed(c, 0); /* the client is told of its own close too */
    }
    int fds3 = count_fds(srv, c);
    CHECK_MSG(fds3 == fds2, "open fds %d before 50 connect/disconnect cycles, %d after", fds2,
              fds3);

    tma_transport_stats_t s;
    tma_transport_stats(srv, &s);
    ASSERT_EQ(s.connections, 0);
    ASSERT_EQ(s.rx_queued, 0);
    ASSERT_EQ(s.frames_dropped, 0);
    ASSERT_EQ(s.msgs_received, 102);
    tma_transport_destroy(c);
    tma_transport_destroy(srv);
    return tma_test_done();
}
