/*
 * bench_ucx_crc.c: what a CRC32C over every byte costs a stream of large UCX
 * active messages, and whether folding the CRC into a copy (UCX's generic
 * datatype) would cost less than the separate pass tma makes.  Plain UCP,
 * not tma: one process sends, one receives, each with one thread that
 * progresses its worker and sleeps on its event fd when idle.
 *
 *   bench_ucx_crc --listen PORT --mode M --bytes N --iters K [--window W]
 *   bench_ucx_crc --connect HOST:PORT --mode M --bytes N --iters K [--window W]
 *
 * Modes (both sides must use the same):
 *   none   contiguous buffers, no CRC;
 *   pass   contiguous buffers (rendezvous straight into the destination),
 *          the CRC in a pass of its own: the sender's before it sends, the
 *          receiver's after the data landed (what tma does);
 *   fused  UCX's generic datatype: UCX calls pack() to copy each fragment out
 *          of the tensor and unpack() to copy it into the destination, and
 *          each checksums the fragment while it is in cache.  The fragment
 *          size is UCX's TCP segment size (UCX_TCP_TX_SEG_SIZE and
 *          UCX_TCP_RX_SEG_SIZE, 8 KiB and 64 KiB by default).
 * The sender keeps W messages in flight (default 2), after 4 untimed ones;
 * the receiver (given the same W) lands message i in buffer i % W.
 * In the CRC modes it sends each message's CRC in a small message once the
 * send completed, and the receiver compares it with its own: a mismatch
 * ends the run with an error.  The sender prints "mode M bytes N iters K
 * MiBps X cpu_send C", the receiver "cpu_recv C" (C: CPU seconds per GiB of
 * the timed messages, user + system, whole process).  bench/bench_ucx_crc.sh
 * runs the three modes alternately.
 */
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "tma_common.h"

enum { MODE_NONE, MODE_PASS, MODE_FUSED };
enum { AM_DATA = 1, AM_CRC = 2 };
#define WARMUP 4

/* What the generic datatype's "buffer" is (UCX hands it to start_pack and
 * start_unpack and never reads it): the bytes and where the CRC goes. */
typedef struct {
    unsigned char *data;
    uint32_t *crc_p;
} gbuf_t;

typedef struct {
    int mode;
    size_t bytes;
    int64_t total; /* messages, warm-up included */
    ucp_worker_h worker;
    ucp_ep_h ep;
    ucp_datatype_t gen_dt;
    ucp_listener_h listener;
    /* receiver */
    unsigned char *dest; /* window slots of `bytes`: message i lands in slot i % window */
    int window;
    gbuf_t *gbufs; /* per message: dest and its CRC slot */
    uint32_t *crc_mine, *crc_theirs;
    unsigned char *have_mine, *have_theirs;
    int64_t landed, checked;
    double cpu_at_warm;
    int failed;
} bench_t;

/* The generic datatype's state: one message being packed or unpacked. */
typedef struct {
    unsigned char *buf;
    size_t len;
    size_t next; /* fragments must come in order for the running CRC */
    uint32_t crc;
    int out_of_order;
    uint32_t *result_p;
} dtstate_t;

static double cpu_seconds(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec * 1e-6 +
           (double)r.ru_stime.tv_sec + (double)r.ru_stime.tv_usec * 1e-6;
}

static void *dt_start(const gbuf_t *g, size_t count)
{
    dtstate_t *s = calloc(1, sizeof *s);
    if (s) {
        s->buf = g->data;
        s->len = count;
        s->result_p = g->crc_p;
    }
    return s;
}

static void *dt_start_pack(void *ctx, const void *buf, size_t count)
{
    (void)ctx;
    return dt_start(buf, count);
}

static void *dt_start_unpack(void *ctx, void *buf, size_t count)
{
    (void)ctx;
    return dt_start(buf, count);
}

static size_t dt_packed_size(void *state) { return ((dtstate_t *)state)->len; }

static size_t dt_pack(void *state, size_t offset, void *dest, size_t max_length)
{
    dtstate_t *s = state;
    size_t n = s->len - offset < max_length ? s->len - offset : max_length;
    s->out_of_order |= offset != s->next;
    memcpy(dest, s->buf + offset, n);
    s->crc = tma_crc32c(s->crc, dest, n);
    s->next = offset + n;
    return n;
}

static ucs_status_t dt_unpack(void *state, size_t offset, const void *src, size_t length)
{
    dtstate_t *s = state;
    if (offset + length > s->len)
        return UCS_ERR_MESSAGE_TRUNCATED;
    s->out_of_order |= offset != s->next;
    memcpy(s->buf + offset, src, length);
    s->crc = tma_crc32c(s->crc, src, length);
    s->next = offset + length;
    return UCS_OK;
}

static void dt_finish(void *state)
{
    dtstate_t *s = state;
    if (s->out_of_order)
        fprintf(stderr, "bench_ucx_crc: fragments came out of order: CRC not comparable\n");
    *s->result_p = s->out_of_order ? 0 : s->crc;
    free(s);
}

/* ------------------------------------------------------------------ receiver */

static void compare(bench_t *b, int64_t seq)
{
    if (!b->have_mine[seq] || !b->have_theirs[seq])
        return;
    if (b->crc_mine[seq] != b->crc_theirs[seq]) {
        fprintf(stderr, "bench_ucx_crc: message %lld: CRC %08x here, %08x at the sender\n",
                (long long)seq, b->crc_mine[seq], b->crc_theirs[seq]);
        b->failed = 1;
    }
    b->checked++;
}

static unsigned char *slot_dest(const bench_t *b, int64_t seq)
{
    return b->dest + (size_t)(seq % b->window) * b->bytes;
}

static void landed(bench_t *b, int64_t seq)
{
    if (b->mode == MODE_PASS)
        b->crc_mine[seq] = tma_crc32c(0, slot_dest(b, seq), b->bytes);
    b->have_mine[seq] = 1;
    if (++b->landed == WARMUP)
        b->cpu_at_warm = cpu_seconds();
    compare(b, seq);
}

typedef struct {
    bench_t *b;
    int64_t seq;
} recv_ctx_t;

static void recv_done(void *req, ucs_status_t st, size_t len, void *user_data)
{
    recv_ctx_t *rc = user_data;
    (void)len;
    if (st != UCS_OK) {
        fprintf(stderr, "bench_ucx_crc: receive failed: %s\n", ucs_status_string(st));
        rc->b->failed = 1;
    } else {
        landed(rc->b, rc->seq);
    }
    ucp_request_free(req);
    free(rc);
}

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    bench_t *b = arg;
    uint64_t h[2] = {0, 0};
    if (header_length != sizeof h) {
        b->failed = 1;
        return UCS_OK;
    }
    memcpy(h, header, sizeof h);
    int64_t seq = (int64_t)h[0];
    if (seq < 0 || seq >= b->total) {
        b->failed = 1;
        return UCS_OK;
    }
    if (h[1] != UINT64_MAX) { /* a CRC message */
        b->crc_theirs[seq] = (uint32_t)h[1];
        b->have_theirs[seq] = 1;
        compare(b, seq);
        return UCS_OK;
    }
    if (length != b->bytes) {
        fprintf(stderr, "bench_ucx_crc: message %lld: %zu bytes, not %zu\n", (long long)seq,
                length, b->bytes);
        b->failed = 1;
        return UCS_OK;
    }
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) { /* small: it came whole */
        memcpy(slot_dest(b, seq), data, length);
        if (b->mode != MODE_NONE)
            b->crc_mine[seq] = tma_crc32c(0, slot_dest(b, seq), length);
        b->have_mine[seq] = 1;
        if (++b->landed == WARMUP)
            b->cpu_at_warm = cpu_seconds();
        compare(b, seq);
        return UCS_OK;
    }
    recv_ctx_t *rc = malloc(sizeof *rc);
    if (!rc) {
        b->failed = 1;
        return UCS_OK;
    }
    rc->b = b;
    rc->seq = seq;
    ucp_request_param_t p;
    memset(&p, 0, sizeof p);
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_DATATYPE;
    p.cb.recv_am = recv_done;
    p.user_data = rc;
    void *buf = slot_dest(b, seq);
    p.datatype = ucp_dt_make_contig(1);
    if (b->mode == MODE_FUSED) {
        b->gbufs[seq].data = slot_dest(b, seq);
        b->gbufs[seq].crc_p = &b->crc_mine[seq];
        buf = &b->gbufs[seq];
        p.datatype = b->gen_dt;
    }
    void *req = ucp_am_recv_data_nbx(b->worker, data, buf, b->bytes, &p);
    if (req == NULL) {
        landed(b, seq);
        free(rc);
    } else if (UCS_PTR_IS_ERR(req)) {
        fprintf(stderr, "bench_ucx_crc: receive failed: %s\n",
                ucs_status_string(UCS_PTR_STATUS(req)));
        b->failed = 1;
        free(rc);
    }
    return UCS_INPROGRESS;
}

/* ------------------------------------------------------------------ setup and the sender */

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    bench_t *b = arg;
    (void)ep;
    fprintf(stderr, "bench_ucx_crc: the peer failed: %s\n", ucs_status_string(status));
    b->failed = 1;
}

static void ep_params(bench_t *b, ucp_ep_params_t *p)
{
    memset(p, 0, sizeof *p);
    p->field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p->err_mode = UCP_ERR_HANDLING_MODE_PEER; /* as tma's connections */
    p->err_handler.cb = ep_err_cb;
    p->err_handler.arg = b;
}

static void conn_cb(ucp_conn_request_h req, void *arg)
{
    bench_t *b = arg;
    ucp_ep_params_t p;
    ep_params(b, &p);
    p.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
    p.conn_request = req;
    if (b->ep) { /* one sender at a time */
        ucp_listener_reject(b->listener, req);
        return;
    }
    if (ucp_ep_create(b->worker, &p, &b->ep) != UCS_OK)
        b->failed = 1;
}

/* Progresses the worker once; sleeps on its event fd when there was nothing to do. */
static void step(bench_t *b)
{
    if (ucp_worker_progress(b->worker))
        return;
    if (ucp_worker_arm(b->worker) == UCS_OK)
        ucp_worker_wait(b->worker);
}

static int wait_req(bench_t *b, void *req)
{
    if (req == NULL)
        return 0;
    if (UCS_PTR_IS_ERR(req)) {
        fprintf(stderr, "bench_ucx_crc: send failed: %s\n", ucs_status_string(UCS_PTR_STATUS(req)));
        return -1;
    }
    ucs_status_t st;
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS && !b->failed)
        step(b);
    ucp_request_free(req);
    if (st != UCS_OK)
        fprintf(stderr, "bench_ucx_crc: send failed: %s\n", ucs_status_string(st));
    return st == UCS_OK && !b->failed ? 0 : -1;
}

static void *send_msg(bench_t *b, int64_t seq, uint64_t crc_or_max, void *buf, size_t len,
                      ucp_datatype_t dt, uint64_t hdr[2])
{
    hdr[0] = (uint64_t)seq;
    hdr[1] = crc_or_max;
    ucp_request_param_t p;
    memset(&p, 0, sizeof p);
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS;
    p.datatype = dt;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    return ucp_am_send_nbx(b->ep, hdr[1] == UINT64_MAX ? AM_DATA : AM_CRC, hdr, 2 * sizeof *hdr,
                           buf, len, &p);
}

/* After message `seq` left from slot w: its CRC goes in a small message. */
static int send_crc(bench_t *b, int64_t seq, uint32_t crc)
{
    uint64_t hdr[2];
    return wait_req(b, send_msg(b, seq, crc, NULL, 0, ucp_dt_make_contig(1), hdr));
}

typedef struct {
    void *req;
    int64_t seq;
    uint32_t crc;
    uint64_t hdr[2];
} slot_t;

/* Waits for the slot's message (if any) and sends its CRC. */
static int drain(bench_t *b, slot_t *sl)
{
    if (!sl->req)
        return 0;
    void *req = sl->req;
    sl->req = NULL;
    if (wait_req(b, req) != 0)
        return -1;
    return b->mode == MODE_NONE ? 0 : send_crc(b, sl->seq, sl->crc);
}

static int run_sender(bench_t *b, int window)
{
    unsigned char **bufs = calloc((size_t)window, sizeof *bufs);
    slot_t *slots = calloc((size_t)window, sizeof *slots);
    gbuf_t *g = calloc((size_t)window, sizeof *g);
    int rc = -1;
    if (!bufs || !slots || !g)
        goto out;
    for (int w = 0; w < window; w++) {
        bufs[w] = tma_alloc_aligned(b->bytes);
        if (!bufs[w]) {
            fprintf(stderr, "bench_ucx_crc: cannot allocate %d buffers of %zu bytes\n", window, b->bytes);
            goto out;
        }
        for (size_t i = 0; i < b->bytes; i++)
            bufs[w][i] = (unsigned char)(i * 131u + (unsigned)w);
        g[w].data = bufs[w];
        g[w].crc_p = &slots[w].crc;
    }
    double t0 = 0, c0 = 0;
    for (int64_t i = 0; i < b->total; i++) {
        slot_t *sl = &slots[i % window];
        if (i == WARMUP) { /* the warm-up ends before the clock starts */
            for (int w = 0; w < window; w++)
                if (drain(b, &slots[w]) != 0)
                    goto out;
            t0 = tma_clock_now();
            c0 = cpu_seconds();
        }
        if (drain(b, sl) != 0)
            goto out;
        unsigned char *data = bufs[i % window];
        void *buf = data;
        ucp_datatype_t dt = ucp_dt_make_contig(1);
        if (b->mode == MODE_PASS)
            sl->crc = tma_crc32c(0, data, b->bytes);
        if (b->mode == MODE_FUSED) {
            buf = &g[i % window];
            dt = b->gen_dt;
        }
        sl->seq = i;
        sl->req = send_msg(b, i, UINT64_MAX, buf, b->bytes, dt, sl->hdr);
        if (UCS_PTR_IS_ERR(sl->req)) {
            wait_req(b, sl->req);
            sl->req = NULL;
            goto out;
        }
    }
    for (int w = 0; w < window; w++)
        if (drain(b, &slots[w]) != 0)
            goto out;
    double dt = tma_clock_now() - t0, cpu = cpu_seconds() - c0;
    double gib = (double)(b->total - WARMUP) * (double)b->bytes / 1073741824.0;
    static const char *names[] = {"none", "pass", "fused"};
    printf("mode %s bytes %zu iters %lld MiBps %.1f cpu_send %.3f\n", names[b->mode], b->bytes,
           (long long)(b->total - WARMUP), gib * 1024.0 / dt, cpu / gib);
    rc = 0;
out:
    for (int w = 0; bufs && w < window; w++) {
        if (slots && slots[w].req)
            wait_req(b, slots[w].req);
        tma_free_aligned(bufs[w]);
    }
    free(bufs);
    free(slots);
    free(g);
    return rc;
}

static int run_receiver(bench_t *b)
{
    size_t n = (size_t)b->total;
    b->dest = tma_alloc_aligned(b->bytes * (size_t)b->window);
    b->crc_mine = calloc(n, sizeof *b->crc_mine);
    b->crc_theirs = calloc(n, sizeof *b->crc_theirs);
    b->have_mine = calloc(n, 1);
    b->have_theirs = calloc(n, 1);
    b->gbufs = calloc(n, sizeof *b->gbufs);
    if (!b->dest || !b->crc_mine || !b->crc_theirs || !b->have_mine || !b->have_theirs || !b->gbufs) {
        fprintf(stderr, "bench_ucx_crc: cannot allocate %d buffers of %zu bytes\n", b->window, b->bytes);
        return -1;
    }
    memset(b->dest, 0, b->bytes * (size_t)b->window); /* first touch before the clock */
    int64_t want = b->mode == MODE_NONE ? 0 : b->total;
    while (!b->failed && (b->landed < b->total || b->checked < want))
        step(b);
    if (b->failed)
        return -1;
    double gib = (double)(b->total - WARMUP) * (double)b->bytes / 1073741824.0;
    printf("cpu_recv %.3f checked %lld\n", (cpu_seconds() - b->cpu_at_warm) / gib, (long long)b->checked);
    fflush(stdout);
    /* Let the sender see its last completions before the endpoint goes. */
    for (double end = tma_clock_now() + 0.5; tma_clock_now() < end;)
        ucp_worker_progress(b->worker);
    return 0;
}

static int parse_mode(const char *v)
{
    return !strcmp(v, "none") ? MODE_NONE : !strcmp(v, "pass") ? MODE_PASS
                                          : !strcmp(v, "fused") ? MODE_FUSED : -1;
}

int main(int argc, char **argv)
{
    const char *listen_port = NULL, *connect_to = NULL;
    int64_t bytes = 64 << 20, iters = 32, window = 2;
    bench_t b;
    memset(&b, 0, sizeof b);
    b.mode = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        int bad = 0;
        if (!strcmp(a, "--listen"))
            listen_port = v;
        else if (!strcmp(a, "--connect"))
            connect_to = v;
        else if (!strcmp(a, "--mode"))
            bad = (b.mode = parse_mode(v)) < 0;
        else if (!strcmp(a, "--bytes"))
            bad = tma_parse_i64(v, &bytes) || bytes < 1;
        else if (!strcmp(a, "--iters"))
            bad = tma_parse_i64(v, &iters) || iters < 1;
        else if (!strcmp(a, "--window"))
            bad = tma_parse_i64(v, &window) || window < 1 || window > 64;
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "bench_ucx_crc: bad option %s %s\n", a, v);
            return 2;
        }
    }
    if ((!listen_port == !connect_to) || b.mode < 0) {
        fprintf(stderr, "usage: bench_ucx_crc --listen PORT | --connect HOST:PORT --mode none|pass|fused "
                        "[--bytes N] [--iters K] [--window W]\n");
        return 2;
    }
    b.bytes = (size_t)bytes;
    b.window = (int)window;
    b.total = iters + WARMUP;

    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    char host[64] = "0.0.0.0";
    const char *port = listen_port;
    if (connect_to) {
        const char *colon = strrchr(connect_to, ':');
        if (!colon || (size_t)(colon - connect_to) >= sizeof host) {
            fprintf(stderr, "bench_ucx_crc: --connect wants HOST:PORT, not %s\n", connect_to);
            return 2;
        }
        memcpy(host, connect_to, (size_t)(colon - connect_to));
        host[colon - connect_to] = 0;
        port = colon + 1;
    }
    int64_t port_n;
    if (tma_parse_i64(port, &port_n) || port_n < 1 || port_n > 65535 ||
        inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "bench_ucx_crc: bad address %s:%s (IPv4 address and port)\n", host, port);
        return 2;
    }
    sa.sin_port = htons((uint16_t)port_n);

    int rc = 1;
    ucp_config_t *cfg = NULL;
    ucp_context_h ctx = NULL;
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
        return 1;
    ucp_params_t pp;
    memset(&pp, 0, sizeof pp);
    pp.field_mask = UCP_PARAM_FIELD_FEATURES;
    pp.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    ucs_status_t st = ucp_init(&pp, cfg, &ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK)
        return 1;
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof wp);
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (ucp_worker_create(ctx, &wp, &b.worker) != UCS_OK)
        goto out_ctx;
    ucp_generic_dt_ops_t ops = {dt_start_pack, dt_start_unpack, dt_packed_size,
                                dt_pack,       dt_unpack,       dt_finish};
    if (ucp_dt_create_generic(&ops, NULL, &b.gen_dt) != UCS_OK)
        goto out_worker;
    if (listen_port) {
        ucp_am_handler_param_t ap;
        memset(&ap, 0, sizeof ap);
        ap.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                        UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
        ap.cb = am_cb;
        ap.arg = &b;
        ap.flags = UCP_AM_FLAG_WHOLE_MSG;
        ap.id = AM_DATA;
        ucp_worker_set_am_recv_handler(b.worker, &ap);
        ap.id = AM_CRC;
        ucp_worker_set_am_recv_handler(b.worker, &ap);
        ucp_listener_params_t lp;
        memset(&lp, 0, sizeof lp);
        lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
        lp.sockaddr.addr = (struct sockaddr *)&sa;
        lp.sockaddr.addrlen = sizeof sa;
        lp.conn_handler.cb = conn_cb;
        lp.conn_handler.arg = &b;
        if (ucp_listener_create(b.worker, &lp, &b.listener) != UCS_OK) {
            fprintf(stderr, "bench_ucx_crc: cannot listen on port %s\n", port);
            goto out_dt;
        }
        rc = run_receiver(&b) == 0 ? 0 : 1;
        ucp_listener_destroy(b.listener);
    } else {
        ucp_ep_params_t p;
        ep_params(&b, &p);
        p.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
        p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
        p.sockaddr.addr = (struct sockaddr *)&sa;
        p.sockaddr.addrlen = sizeof sa;
        if (ucp_ep_create(b.worker, &p, &b.ep) != UCS_OK) {
            fprintf(stderr, "bench_ucx_crc: cannot connect to %s\n", connect_to);
            goto out_dt;
        }
        rc = run_sender(&b, (int)window) == 0 ? 0 : 1;
    }
    if (b.ep) {
        ucp_request_param_t cp;
        memset(&cp, 0, sizeof cp);
        cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
        void *req = ucp_ep_close_nbx(b.ep, &cp);
        if (req && !UCS_PTR_IS_ERR(req)) {
            while (ucp_request_check_status(req) == UCS_INPROGRESS)
                ucp_worker_progress(b.worker);
            ucp_request_free(req);
        }
    }
out_dt:
    ucp_dt_destroy(b.gen_dt);
out_worker:
    ucp_worker_destroy(b.worker);
out_ctx:
    ucp_cleanup(ctx);
    tma_free_aligned(b.dest);
    free(b.crc_mine);
    free(b.crc_theirs);
    free(b.have_mine);
    free(b.have_theirs);
    free(b.gbufs);
    return rc;
}
