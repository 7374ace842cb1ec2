/*
 * bench_transport.c: streaming throughput of the tma transport, the number that
 * bench/bench_transport.sh puts beside `ucx_perftest -t tag_bw`.
 *
 *   bench_transport --listen HOST:PORT
 *       receives tensors and gives each buffer back at once (recv checks
 *       every CRC); answers each "done" message.  Prints "ADDR host:port",
 *       serves until its stdin closes.
 *   bench_transport --connect HOST:PORT --bytes N --iters K [--warmup W] [--threads T]
 *                   [--untouched 0|1]
 *       sends K tensors of N bytes (after W untimed ones), then "done", and
 *       times first send to answer.  T threads send in turn (each its own
 *       buffer), so one thread's CRC overlaps another's transfer.  Prints
 *       "bytes N iters K seconds S MiBps X cpu_send C1 cpu_recv C2 pool_grew P":
 *       the CPU seconds (user + system, all threads) each process spent in
 *       the timed part, and the bytes the receiver's pool grew by in it (new
 *       memory is slow to touch the first time on some VMs: the warm-up should
 *       leave P at 0); the receiver reports its own in the answers to "done".
 *       The send buffers come from tma_alloc_aligned (a plain anonymous map
 *       here; tma_alloc_huge's map measured twice the sender's CPU per byte
 *       at 1 MiB on the development VM, for reasons not found), filled with
 *       values; --untouched 1 leaves them unwritten, as ucx_perftest leaves
 *       its send buffer (reads then come from the kernel's shared zero page,
 *       which stays in cache).
 *
 * The job token comes from TMA_JOB_TOKEN.
 */
#include "tma_transport.h"

#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { TAG_DATA = 1, TAG_DONE = 2, TAG_ACK = 3 };

static int stdin_open(void)
{
    struct pollfd p = {.fd = 0, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0)
        return 1;
    char c;
    return read(0, &c, 1) > 0;
}

/* User + system CPU seconds of this process, all threads. */
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static int serve(const char *listen)
{
    tma_transport_config_t cfg;
    tma_transport_config_init(&cfg);
    cfg.job = "bench";
    cfg.self_id = 0;
    cfg.listen = listen;
    cfg.pool_bytes = 8ull << 30;
    tma_transport_t *t;
    if (tma_transport_create(&cfg, &t) != TMA_OK)
        return 1;
    printf("ADDR %s\n", tma_transport_address(t));
    fflush(stdout);
    while (stdin_open()) {
        tma_transport_msg_t m;
        if (tma_transport_recv(t, TMA_TRANSPORT_ANY_PEER, TMA_TRANSPORT_ANY_TAG, 0.2, &m) != TMA_OK)
            continue;
        if (m.kind == TMA_TRANSPORT_MSG_TENSOR && m.meta.tag == TAG_DONE) {
            /* The answer carries this process's CPU seconds so far and the
             * bytes its receive pool holds (two doubles). */
            tma_transport_stats_t ts;
            tma_transport_stats(t, &ts);
            double v[2] = {cpu_seconds(), (double)ts.pool_bytes};
            float ack[4];
            memcpy(ack, v, sizeof v);
            tma_transport_meta_t a = {TAG_ACK, 0, m.meta.round};
            tma_transport_send(t, m.peer, &a, ack, 4, TMA_TRANSPORT_MEM_HOST, 30);
        }
        tma_transport_msg_release(t, &m);
    }
    tma_transport_destroy(t);
    return 0;
}

typedef struct {
    tma_transport_t *t;
    float *buf;
    size_t count;
    int64_t iters;
    tma_status_t st;
} sender_t;

static void *send_loop(void *arg)
{
    sender_t *s = arg;
    for (int64_t i = 0; i < s->iters && s->st == TMA_OK; i++) {
        tma_transport_meta_t m = {TAG_DATA, 0, (uint64_t)i};
        s->st = tma_transport_send(s->t, 0, &m, s->buf, s->count, TMA_TRANSPORT_MEM_HOST, 120);
    }
    return NULL;
}

/* Sends iters tensors from `threads` threads, then done; waits for the ack
 * and returns what it says: the receiver's CPU seconds and pool bytes. */
static tma_status_t run(tma_transport_t *t, sender_t *s, int threads, int64_t iters, uint64_t round,
                        double peer_p[2])
{
    pthread_t th[16];
    for (int k = 0; k < threads; k++) {
        s[k].iters = iters / threads + (k < iters % threads);
        s[k].st = TMA_OK;
        pthread_create(&th[k], NULL, send_loop, &s[k]);
    }
    tma_status_t st = TMA_OK;
    for (int k = 0; k < threads; k++) {
        pthread_join(th[k], NULL);
        if (s[k].st != TMA_OK)
            st = s[k].st;
    }
    if (st != TMA_OK)
        return st;
    float one = 1;
    tma_transport_meta_t d = {TAG_DONE, 0, round};
    st = tma_transport_send(t, 0, &d, &one, 1, TMA_TRANSPORT_MEM_HOST, 30);
    tma_transport_msg_t m;
    if (st == TMA_OK)
        st = tma_transport_recv(t, 0, TAG_ACK, 120, &m);
    if (st != TMA_OK)
        return st;
    if (m.kind != TMA_TRANSPORT_MSG_TENSOR || m.count != 4) {
        tma_transport_msg_release(t, &m);
        return TMA_ERR_MALFORMED;
    }
    memcpy(peer_p, m.data, 2 * sizeof *peer_p);
    tma_transport_msg_release(t, &m);
    return TMA_OK;
}

int main(int argc, char **argv)
{
    const char *listen = NULL, *connect_to = NULL;
    int64_t bytes = 1 << 20, iters = 100, warmup = 2, threads = 1, untouched = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        int bad = 0;
        if (!strcmp(a, "--listen"))
            listen = v;
        else if (!strcmp(a, "--connect"))
            connect_to = v;
        else if (!strcmp(a, "--bytes"))
            bad = tma_parse_i64(v, &bytes) || bytes < 4 || bytes % 4;
        else if (!strcmp(a, "--iters"))
            bad = tma_parse_i64(v, &iters) || iters < 1;
        else if (!strcmp(a, "--warmup"))
            bad = tma_parse_i64(v, &warmup) || warmup < 0;
        else if (!strcmp(a, "--threads"))
            bad = tma_parse_i64(v, &threads) || threads < 1 || threads > 16;
        else if (!strcmp(a, "--untouched"))
            bad = tma_parse_i64(v, &untouched) || untouched < 0 || untouched > 1;
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "bench_transport: bad option %s %s\n", a, v);
            return 2;
        }
    }
    if (listen)
        return serve(listen);
    if (!connect_to) {
        fprintf(stderr, "usage: bench_transport --listen ADDR | --connect ADDR --bytes N --iters K "
                        "[--warmup W] [--threads T] [--untouched 0|1]\n");
        return 2;
    }
    tma_transport_config_t cfg;
    tma_transport_config_init(&cfg);
    cfg.job = "bench";
    cfg.self_id = 1;
    tma_transport_t *t;
    if (tma_transport_create(&cfg, &t) != TMA_OK)
        return 1;
    if (tma_transport_connect(t, connect_to, 30, NULL) != TMA_OK) {
        tma_transport_destroy(t);
        return 1;
    }
    sender_t s[16];
    size_t count = (size_t)bytes / sizeof(float);
    for (int k = 0; k < threads; k++) {
        s[k].t = t;
        s[k].count = count;
        s[k].buf = tma_alloc_aligned((size_t)bytes);
        if (!s[k].buf)
            return 1;
        for (size_t i = 0; i < count && !untouched; i++)
            s[k].buf[i] = (float)(i % 1000) * 0.001f;
    }
    int rc = 0;
    double peer0[2] = {0, 0}, peer1[2] = {0, 0};
    /* The warm-up (or, without one, a bare "done") also reads the receiver's
     * CPU clock at the start. */
    tma_status_t st = run(t, s, (int)threads, warmup, 0, peer0);
    double cpu0 = cpu_seconds(), t0 = tma_clock_now();
    if (st == TMA_OK)
        st = run(t, s, (int)threads, iters, 1, peer1);
    double dt = tma_clock_now() - t0, cpu = cpu_seconds() - cpu0;
    if (st != TMA_OK) {
        fprintf(stderr, "bench_transport: %s\n", tma_status_str(st));
        rc = 1;
    } else {
        printf("bytes %lld iters %lld seconds %.6f MiBps %.1f cpu_send %.3f cpu_recv %.3f "
               "pool_grew %.0f\n",
               (long long)bytes, (long long)iters, dt,
               (double)bytes * (double)iters / dt / 1048576.0, cpu, peer1[0] - peer0[0],
               peer1[1] - peer0[1]);
    }
    for (int k = 0; k < threads; k++)
        tma_free_aligned(s[k].buf);
    tma_transport_destroy(t);
    return rc;
}
