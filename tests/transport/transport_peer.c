/*
 * transport_peer.c: a peer process for the transport tests.  It listens or
 * connects, then plays one role until its stdin closes, it is killed, or its
 * connection ends:
 *   echo    sends every tensor it receives back to its sender
 *   sink    receives and drops tensors
 *   stream  sends tensors of --count floats to its peer, round after round
 *   send1   sends one tensor (after the --fault test hook, if given), then
 *           waits for its connection to end
 *   replay  after its connect (the recording an eavesdropper would make),
 *           replays that hello and proof to --replay-to and exits: 0 when
 *           that listener refused it ("REPLAY-REFUSED"), 4 when it got in
 *   hold    with plain UCX, no transport: opens --count connections to
 *           --connect that never say hello, and keeps them until its stdin
 *           closes ("HELD n" once all are made, "CLOSED n" each time some
 *           were closed by the listener)
 * It reports on stdout, one line each: "ADDR host:port" (when listening),
 * "PEER n" (when connected), "READY", "EVENT kind peer reason", "SENT n" and
 * "RXACTIVE" (the first time a tensor is seen arriving).
 * It dies with its parent (PR_SET_PDEATHSIG), so a crashed test leaves no
 * process behind.
 */
#include "tma_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <ucp/api/ucp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static const struct {
    const char *name;
    tma_transport_fault_t fault;
} faults[] = {
    {"payload", TMA_TRANSPORT_FAULT_PAYLOAD_BYTE},
    {"header", TMA_TRANSPORT_FAULT_HEADER_BYTE},
    {"magic", TMA_TRANSPORT_FAULT_MAGIC},
    {"version", TMA_TRANSPORT_FAULT_VERSION},
    {"type", TMA_TRANSPORT_FAULT_TYPE},
    {"length", TMA_TRANSPORT_FAULT_LENGTH},
    {"truncate", TMA_TRANSPORT_FAULT_TRUNCATE},
    {"short", TMA_TRANSPORT_FAULT_SHORT_HEADER},
    {"job", TMA_TRANSPORT_FAULT_JOB},
};

static void usage(void)
{
    fprintf(stderr, "usage: transport_peer --job J --id N [--token T] [--listen ADDR] "
                    "[--connect ADDR] [--mode echo|sink|stream|send1|replay] [--count N] [--fault F] "
                    "[--replay-to ADDR]\n");
    exit(2);
}

static int stdin_closed(void)
{
    struct pollfd p = {.fd = 0, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    char c;
    return read(0, &c, 1) <= 0;
}

static int hold_closed;

static void hold_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)arg, (void)ep, (void)status;
    hold_closed++;
}

/* --mode hold: n endpoints to addr ("a.b.c.d:port") that send nothing. */
static int hold(const char *addr, int64_t n)
{
    char host[64];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof host)
        return 2;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return 2;
    ucp_params_t p;
    memset(&p, 0, sizeof p);
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_AM;
    ucp_config_t *uc;
    ucp_context_h ctx;
    ucp_worker_h w;
    if (ucp_config_read(NULL, NULL, &uc) != UCS_OK)
        return 1;
    ucs_status_t s = ucp_init(&p, uc, &ctx);
    ucp_config_release(uc);
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof wp);
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (s != UCS_OK || ucp_worker_create(ctx, &wp, &w) != UCS_OK)
        return 1;
    ucp_ep_h *eps = calloc((size_t)n + 1, sizeof *eps);
    for (int64_t i = 0; eps && i < n; i++) {
        ucp_ep_params_t ep;
        memset(&ep, 0, sizeof ep);
        ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
        ep.sockaddr.addr = (const struct sockaddr *)&sa;
        ep.sockaddr.addrlen = sizeof sa;
        ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
        ep.err_handler.cb = hold_err_cb;
        if (ucp_ep_create(w, &ep, &eps[i]) != UCS_OK)
            return 1;
        for (int k = 0; k < 100; k++) /* let the listener see it before the next */
            ucp_worker_progress(w);
        usleep(2000);
    }
    if (!eps)
        return 1;
    printf("HELD %lld\n", (long long)n);
    int said = 0;
    while (!stdin_closed()) {
        ucp_worker_progress(w);
        if (hold_closed != said) {
            said = hold_closed;
            printf("CLOSED %d\n", said);
        }
        usleep(1000);
    }
    /* Endpoints and the worker go with the process. */
    return 0;
}

int main(int argc, char **argv)
{
    const char *job = NULL, *token = NULL, *listen = NULL, *connect_to = NULL, *mode = "echo";
    const char *fault_name = NULL, *replay_to = NULL;
    int64_t id = -1, count = 1024;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (!strcmp(a, "--job"))
            job = v;
        else if (!strcmp(a, "--token"))
            token = *v ? v : NULL; /* empty: use TMA_JOB_TOKEN */
        else if (!strcmp(a, "--listen"))
            listen = v;
        else if (!strcmp(a, "--connect"))
            connect_to = v;
        else if (!strcmp(a, "--mode"))
            mode = v;
        else if (!strcmp(a, "--fault"))
            fault_name = v;
        else if (!strcmp(a, "--replay-to"))
            replay_to = v;
        else if (!strcmp(a, "--id")) {
            if (tma_parse_i64(v, &id) != 0)
                usage();
        } else if (!strcmp(a, "--count")) {
            if (tma_parse_i64(v, &count) != 0 || count < 0)
                usage();
        } else {
            usage();
        }
        i++;
    }
    if (!job || id < 0 || (!listen && !connect_to) || ((strcmp(mode, "replay") == 0) != (replay_to != NULL)) ||
        (replay_to && !connect_to))
        usage();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        return 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "hold")) {
        printf("READY\n");
        return connect_to ? hold(connect_to, count) : 2;
    }

    tma_transport_fault_t fault = TMA_TRANSPORT_FAULT_NONE;
    for (size_t i = 0; fault_name && i < TMA_ARRAY_LEN(faults); i++)
        if (!strcmp(faults[i].name, fault_name))
            fault = faults[i].fault;
    if (fault_name && fault == TMA_TRANSPORT_FAULT_NONE)
        usage();

    tma_transport_config_t cfg;
    tma_transport_config_init(&cfg);
    cfg.job = job;
    cfg.token = token;
    cfg.self_id = (uint32_t)id;
    cfg.listen = listen;
    tma_transport_t *t;
    if (tma_transport_create(&cfg, &t) != TMA_OK)
        return 1;
    if (listen)
        printf("ADDR %s\n", tma_transport_address(t));
    uint32_t peer = TMA_TRANSPORT_ANY_PEER;
    if (connect_to) {
        tma_status_t st = tma_transport_connect(t, connect_to, 10, &peer);
        if (st != TMA_OK) {
            printf("CONNECT-FAILED %d\n", st);
            tma_transport_destroy(t);
            return 3;
        }
        printf("PEER %u\n", peer);
    }
    if (replay_to) {
        tma_transport_test_inject(t, TMA_TRANSPORT_FAULT_REPLAY_HELLO);
        tma_status_t st = tma_transport_connect(t, replay_to, 10, NULL);
        printf(st == TMA_OK ? "REPLAY-ACCEPTED\n" : "REPLAY-REFUSED %d\n", st);
        tma_transport_destroy(t);
        return st == TMA_OK ? 4 : 0;
    }
    printf("READY\n");

    float *buf = NULL;
    if (!strcmp(mode, "stream") || !strcmp(mode, "send1")) {
        buf = malloc((size_t)(count ? count : 1) * sizeof(float));
        if (!buf)
            return 1;
        for (int64_t i = 0; i < count; i++)
            buf[i] = (float)i;
    }
    int rc = 0;
    if (!strcmp(mode, "send1")) {
        tma_transport_test_inject(t, fault);
        tma_transport_meta_t m = {1, 0, 0};
        tma_status_t st =
            tma_transport_send(t, peer, &m, buf, (size_t)count, TMA_TRANSPORT_MEM_HOST, 10);
        printf("SENT %d\n", st);
    }
    uint64_t round = 0;
    int rx_seen = 0;
    while (!stdin_closed()) {
        if (!strcmp(mode, "stream")) {
            tma_transport_meta_t m = {1, 0, round++};
            tma_status_t st =
                tma_transport_send(t, peer, &m, buf, (size_t)count, TMA_TRANSPORT_MEM_HOST, 30);
            if (st != TMA_OK) {
                printf("SENT %d\n", st);
                break;
            }
            continue;
        }
        tma_transport_msg_t msg;
        tma_status_t st =
            tma_transport_recv(t, TMA_TRANSPORT_ANY_PEER, TMA_TRANSPORT_ANY_TAG, 0.002, &msg);
        if (!rx_seen) {
            /* Tell the test that a tensor is arriving (it may stop us now). */
            tma_transport_stats_t s;
            tma_transport_stats(t, &s);
            if (s.rx_active) {
                printf("RXACTIVE\n");
                rx_seen = 1;
            }
        }
        if (st == TMA_ERR_TIMEOUT)
            continue;
        if (st != TMA_OK) {
            rc = 1;
            break;
        }
        if (msg.kind == TMA_TRANSPORT_MSG_EVENT) {
            printf("EVENT %s %u %d\n", tma_transport_event_str(msg.event.kind), msg.event.peer,
                   msg.event.reason);
            tma_transport_msg_release(t, &msg);
            if (!strcmp(mode, "send1"))
                break;
            continue;
        }
        if (!strcmp(mode, "echo")) {
            st = tma_transport_send(t, msg.peer, &msg.meta, msg.data, msg.count,
                                    TMA_TRANSPORT_MEM_HOST, 30);
            if (st != TMA_OK)
                printf("ECHO-FAILED %d\n", st);
        }
        tma_transport_msg_release(t, &msg);
    }
    free(buf);
    tma_transport_destroy(t);
    return rc;
}
