/*
 * progress.c: the UCX worker and the progress thread that owns it: worker
 * and listener setup, the command queue that API calls hand their work to,
 * the deadlines of sends, hellos and clean closes, and the loop that
 * progresses UCX and sleeps in epoll when there is nothing to do.
 */
#include "transport_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

void transport_wake(tma_transport_t *t)
{
    uint64_t one = 1;
    ssize_t r;
    do {
        r = write(t->cmd_fd, &one, sizeof one);
    } while (r < 0 && errno == EINTR);
}

double transport_deadline_from(double timeout_s)
{
    return timeout_s < 0 ? 0 : tma_clock_now() + timeout_s;
}

/* ------------------------------------------------------------------ commands */

void transport_cmd_complete(tma_transport_t *t, cmd_t *c, tma_status_t st)
{
    if (c->detached) {
        free(c);
        return;
    }
    pthread_mutex_lock(&t->lock);
    c->st = st;
    c->done = 1;
    pthread_cond_broadcast(&t->done_cond);
    pthread_mutex_unlock(&t->lock);
}

void transport_cmd_append_locked(tma_transport_t *t, cmd_t *c)
{
    c->next = NULL;
    if (t->cmd_tail)
        t->cmd_tail->next = c;
    else
        t->cmd_head = c;
    t->cmd_tail = c;
}

/* Queues a command; TMA_ERR_CLOSED once destroy began. */
tma_status_t transport_cmd_submit(tma_transport_t *t, cmd_t *c)
{
    pthread_mutex_lock(&t->lock);
    if (t->closing && c->kind != CMD_SHUTDOWN) {
        pthread_mutex_unlock(&t->lock);
        return TMA_ERR_CLOSED;
    }
    transport_cmd_append_locked(t, c);
    pthread_mutex_unlock(&t->lock);
    transport_wake(t);
    return TMA_OK;
}

void transport_cmd_wait(tma_transport_t *t, cmd_t *c)
{
    pthread_mutex_lock(&t->lock);
    while (!c->done)
        pthread_cond_wait(&t->done_cond, &t->lock);
    pthread_mutex_unlock(&t->lock);
}

static int drain_commands(tma_transport_t *t)
{
    pthread_mutex_lock(&t->lock);
    cmd_t *c = t->cmd_head;
    t->cmd_head = t->cmd_tail = NULL;
    chunk_t *checked = t->checked_head;
    t->checked_head = t->checked_tail = NULL;
    for (chunk_t *k = checked; k; k = k->next)
        t->check_away--;
    int retry = t->retry;
    t->retry = 0;
    pthread_mutex_unlock(&t->lock);
    int n = 0;
    while (checked) {
        chunk_t *next = checked->next;
        transport_chunk_settle(t, checked, UCS_OK);
        checked = next;
        n++;
    }
    while (c) {
        cmd_t *next = c->next;
        switch (c->kind) {
        case CMD_CONNECT:
            transport_do_connect(t, c);
            break;
        case CMD_SEND:
            transport_do_send(t, c);
            break;
        case CMD_DISCONNECT:
            transport_do_disconnect(t, c);
            break;
        case CMD_KILL:
            transport_do_kill(t, c);
            break;
        case CMD_SHUTDOWN:
            transport_do_shutdown(t, c);
            break;
        }
        c = next;
        n++;
    }
    if (retry && t->held_head) {
        transport_retry_held(t);
        n++;
    }
    return n;
}

/* ------------------------------------------------------------------ the loop */

/* Enforces deadlines; returns milliseconds to the next one (capped). */
static int check_deadlines(tma_transport_t *t)
{
    double now = tma_clock_now(), next = now + IDLE_WAKE_MS / 1000.0;
    for (cmd_t *s = t->active_sends; s; s = s->active_next) {
        if (s->deadline > 0 && now >= s->deadline && !s->timed_out &&
            !transport_conn_gone(s->conn)) {
            s->timed_out = 1;
            conn_t *c = s->conn;
            tma_log_warn(COMP, "a send to peer %u at %s ran past its deadline: disconnecting it",
                         c->peer, c->addr);
            transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_TIMEOUT);
            continue;
        }
        if (s->deadline > 0 && s->deadline < next)
            next = s->deadline;
    }
    for (conn_t *c = t->conns; c; c = c->next) {
        if (transport_conn_gone(c) || c->deadline <= 0)
            continue;
        if (now >= c->deadline) {
            if (c->state == CONN_HELLO_WAIT) {
                tma_log_warn(COMP, "connection from %s did not finish its hello within %.1f s: closed",
                             c->addr, t->hello_timeout);
                transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_TIMEOUT);
            } else if (c->state == CONN_CONNECTING) {
                tma_log_error(COMP, "no answer from %s within the connect timeout", c->addr);
                transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_TIMEOUT);
            } else {
                tma_log_warn(COMP, "closing the connection to %s took over %.0f s: forced", c->addr,
                             CLOSE_GRACE_S);
                transport_conn_doom(c, TMA_TRANSPORT_EV_CLOSED, TMA_OK);
            }
            continue;
        }
        if (c->deadline < next)
            next = c->deadline;
    }
    double ms = (next - now) * 1000.0;
    return ms < 1 ? 1 : (int)ms;
}

/*
 * UCX 1.13 keys its asynchronous event handlers by file descriptor in one
 * process-wide table, and asserts (aborting the process) when a worker
 * replays a "missed" event whose fd was closed and meanwhile reused by
 * another worker of the same process (fixed in later UCX).  With one
 * transport per process this cannot happen.  To make it very unlikely with
 * several, every UCX call of every transport in the process is made under
 * this lock, and a progress thread lets go of it only after its worker went
 * idle, by which time the worker has replayed its missed events.  This is
 * the library's only process-wide state.
 */
pthread_mutex_t transport_ucx_lock = PTHREAD_MUTEX_INITIALIZER;

void *transport_progress_main(void *arg)
{
    tma_transport_t *t = arg;
    for (;;) {
        int work = 0, stop = 0;
        pthread_mutex_lock(&transport_ucx_lock);
        while (ucp_worker_progress(t->worker))
            work = 1;
        work |= transport_process_doomed(t) > 0;
        work |= drain_commands(t) > 0;
        int wait_ms = check_deadlines(t);
        work |= transport_process_doomed(t) > 0;
        while (ucp_worker_progress(t->worker))
            work = 1;
        if (t->shutdown) {
            if (!t->conns) {
                stop = 1;
            } else if (tma_clock_now() > t->shutdown_deadline + CLOSE_GRACE_S) {
                tma_log_warn(COMP, "%u connection(s) did not close; destroying the worker anyway",
                             t->n_conns);
                stop = 1;
            }
        }
        /* No busy polling: sleeping in epoll between pieces of a transfer
         * leaves the CPU to the peer on a shared machine, which measured
         * faster than spinning (docs/benchmarks.md). */
        ucs_status_t s = work || stop ? UCS_ERR_BUSY : ucp_worker_arm(t->worker);
        pthread_mutex_unlock(&transport_ucx_lock);
        if (stop)
            break;
        if (s == UCS_ERR_BUSY)
            continue;
        struct epoll_event evs[2];
        int n = epoll_wait(t->epfd, evs, 2, wait_ms);
        for (int i = 0; i < n; i++) {
            if (evs[i].data.fd == t->cmd_fd) {
                uint64_t v;
                ssize_t r = read(t->cmd_fd, &v, sizeof v);
                (void)r;
            }
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------ setup */

tma_status_t transport_ucx_setup(tma_transport_t *t)
{
    ucp_config_t *config;
    ucs_status_t s = ucp_config_read(NULL, NULL, &config);
    if (s != UCS_OK) {
        tma_log_error(COMP, "reading the UCX configuration (UCX_* variables) failed: %s",
                      ucs_status_string(s));
        return TMA_ERR_CONFIG;
    }
    ucp_params_t params;
    memset(&params, 0, sizeof params);
    params.field_mask =
        UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;
    params.name = "tma";
    s = ucp_init(&params, config, &t->ctx);
    ucp_config_release(config);
    if (s != UCS_OK) {
        tma_log_error(COMP, "UCX initialisation failed: %s", ucs_status_string(s));
        return TMA_ERR_UNAVAILABLE;
    }
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof wp);
    /* Only the progress thread uses the worker once create() returns. */
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    s = ucp_worker_create(t->ctx, &wp, &t->worker);
    if (s != UCS_OK) {
        tma_log_error(COMP, "creating the UCX worker failed: %s", ucs_status_string(s));
        return TMA_ERR_UNAVAILABLE;
    }
    s = ucp_worker_get_efd(t->worker, &t->ucx_fd);
    if (s != UCS_OK) {
        tma_log_error(COMP, "the UCX worker has no event fd: %s", ucs_status_string(s));
        return TMA_ERR_UNAVAILABLE;
    }
    ucp_am_handler_param_t ap;
    memset(&ap, 0, sizeof ap);
    ap.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    ap.id = AM_ID;
    ap.cb = transport_am_cb;
    ap.arg = t;
    ap.flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA;
    s = ucp_worker_set_am_recv_handler(t->worker, &ap);
    if (s != UCS_OK) {
        tma_log_error(COMP, "registering the UCX message handler failed: %s", ucs_status_string(s));
        return TMA_ERR_UNAVAILABLE;
    }
    return TMA_OK;
}

tma_status_t transport_listen(tma_transport_t *t, const char *listen)
{
    struct sockaddr_storage sa;
    socklen_t salen;
    tma_status_t st = transport_parse_addr(listen, 1, &sa, &salen);
    if (st != TMA_OK)
        return st;
    ucp_listener_params_t lp;
    memset(&lp, 0, sizeof lp);
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = (struct sockaddr *)&sa;
    lp.sockaddr.addrlen = salen;
    lp.conn_handler.cb = transport_conn_request_cb;
    lp.conn_handler.arg = t;
    ucs_status_t s = ucp_listener_create(t->worker, &lp, &t->listener);
    if (s != UCS_OK) {
        tma_log_error(COMP, "cannot listen on %s: %s%s", listen, ucs_status_string(s),
                      s == UCS_ERR_BUSY ? " (the port is in use)" : "");
        t->listener = NULL;
        return TMA_ERR_UNAVAILABLE;
    }
    ucp_listener_attr_t la;
    la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    s = ucp_listener_query(t->listener, &la);
    if (s != UCS_OK) {
        tma_log_error(COMP, "cannot read the listening address: %s", ucs_status_string(s));
        return TMA_ERR_UNAVAILABLE;
    }
    transport_format_sockaddr((struct sockaddr *)&la.sockaddr, sizeof la.sockaddr, t->listen_addr,
                              sizeof t->listen_addr);
    const struct sockaddr *bound = (const struct sockaddr *)&la.sockaddr;
    t->listen_port =
        ntohs(bound->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)bound)->sin6_port
                                           : ((const struct sockaddr_in *)bound)->sin_port);
    tma_log_info(COMP, "member %u listening on %s", t->self_id, t->listen_addr);
    return TMA_OK;
}
