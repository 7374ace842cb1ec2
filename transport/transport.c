/*
 * transport.c: the API of tma_transport.h that is not sending or receiving:
 * the object's lifetime (create starts the checker and progress threads,
 * destroy closes every connection cleanly and frees what is left),
 * connecting and disconnecting peers, and the statistics.  How the pieces
 * fit is described in transport_int.h.
 */
#include "transport_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

void tma_transport_config_init(tma_transport_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_message_bytes = DEFAULT_MAX_MESSAGE;
    cfg->pool_bytes = DEFAULT_POOL_BYTES;
    cfg->hello_timeout = DEFAULT_HELLO_TIMEOUT;
}

tma_status_t tma_transport_create(const tma_transport_config_t *cfg, tma_transport_t **t_p)
{
    tma_status_t st = TMA_OK;
    const char *token = cfg->token ? cfg->token : getenv("TMA_JOB_TOKEN");
    if (!cfg->job || !*cfg->job || strlen(cfg->job) > TMA_TRANSPORT_JOB_MAX) {
        tma_log_error(COMP, "transport: the job name must have 1 to %d bytes",
                      TMA_TRANSPORT_JOB_MAX);
        return TMA_ERR_CONFIG;
    }
    if (!token || !*token || strlen(token) > TMA_TRANSPORT_TOKEN_MAX) {
        tma_log_error(COMP,
                      "transport: no job token (1 to %d bytes): set it in the job config or in "
                      "the TMA_JOB_TOKEN environment variable",
                      TMA_TRANSPORT_TOKEN_MAX);
        return TMA_ERR_CONFIG;
    }
    if (cfg->self_id == UINT32_MAX) {
        tma_log_error(COMP, "transport: member id %u is reserved", UINT32_MAX);
        return TMA_ERR_CONFIG;
    }
    tma_transport_t *t = calloc(1, sizeof *t);
    if (!t)
        return TMA_ERR_NOMEM;
    t->ucx_fd = t->cmd_fd = t->epfd = -1;
    /* First, so that destroy can undo any failure below. */
    pthread_mutex_init(&t->lock, NULL);
    tma_cond_init(&t->done_cond);
    tma_cond_init(&t->rx_cond);
    tma_cond_init(&t->check_cond);
    t->job = strdup(cfg->job);
    t->token = strdup(token);
    if (!t->job || !t->token) {
        st = TMA_ERR_NOMEM;
        goto fail;
    }
    t->token_len = strlen(t->token);
    t->job_id = tma_transport_job_id(t->job);
    t->self_id = cfg->self_id;
    t->self_lease = cfg->self_lease;
    t->max_message = cfg->max_message_bytes ? cfg->max_message_bytes : DEFAULT_MAX_MESSAGE;
    t->pool_limit = cfg->pool_bytes ? cfg->pool_bytes : DEFAULT_POOL_BYTES;
    t->hello_timeout = cfg->hello_timeout > 0 ? cfg->hello_timeout : DEFAULT_HELLO_TIMEOUT;
    t->event_cb = cfg->event_cb;
    t->event_cb_arg = cfg->event_cb_arg;
    pthread_mutex_lock(&transport_ucx_lock);
    st = transport_ucx_setup(t);
    if (st == TMA_OK && cfg->listen)
        st = transport_listen(t, cfg->listen);
    pthread_mutex_unlock(&transport_ucx_lock);
    if (st != TMA_OK)
        goto fail;
    t->cmd_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (t->cmd_fd < 0 || t->epfd < 0) {
        tma_log_error(COMP, "eventfd/epoll: %s", strerror(errno));
        st = TMA_ERR_IO;
        goto fail;
    }
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.fd = t->cmd_fd;
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->cmd_fd, &ev) != 0)
        goto epoll_fail;
    ev.data.fd = t->ucx_fd;
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->ucx_fd, &ev) != 0)
        goto epoll_fail;
    if (pthread_create(&t->checker, NULL, transport_checker_main, t) != 0) {
        tma_log_error(COMP, "cannot start the checksum thread");
        st = TMA_ERR_NOMEM;
        goto fail;
    }
    t->checker_started = 1;
    if (pthread_create(&t->thread, NULL, transport_progress_main, t) != 0) {
        tma_log_error(COMP, "cannot start the progress thread");
        st = TMA_ERR_NOMEM;
        goto fail;
    }
    t->thread_started = 1;
    *t_p = t;
    return TMA_OK;
epoll_fail:
    tma_log_error(COMP, "epoll_ctl: %s", strerror(errno));
    st = TMA_ERR_IO;
fail:
    tma_transport_destroy(t);
    return st;
}

void tma_transport_destroy(tma_transport_t *t)
{
    if (!t)
        return;
    if (t->thread_started) {
        cmd_t cmd;
        memset(&cmd, 0, sizeof cmd);
        cmd.kind = CMD_SHUTDOWN;
        pthread_mutex_lock(&t->lock);
        t->closing = 1;
        pthread_cond_broadcast(&t->rx_cond);
        pthread_mutex_unlock(&t->lock);
        transport_cmd_submit(t, &cmd);
        transport_cmd_wait(t, &cmd);
        pthread_join(t->thread, NULL);
    }
    /* The checker goes after the progress thread, which waits for every
     * chunk it handed over to come back (they hold their connections). */
    if (t->checker_started) {
        pthread_mutex_lock(&t->lock);
        t->check_stop = 1;
        pthread_cond_broadcast(&t->check_cond);
        pthread_mutex_unlock(&t->lock);
        pthread_join(t->checker, NULL);
    }
    /* Commands that raced with shutdown. */
    for (cmd_t *c = t->cmd_head, *next; c; c = next) {
        next = c->next;
        transport_cmd_complete(t, c, TMA_ERR_CLOSED);
    }
    pthread_mutex_lock(&transport_ucx_lock);
    if (t->listener)
        ucp_listener_destroy(t->listener);
    if (t->worker)
        ucp_worker_destroy(t->worker);
    if (t->ctx)
        ucp_cleanup(t->ctx);
    pthread_mutex_unlock(&transport_ucx_lock);
    /* Whatever is left of connections that did not close (the worker is
     * gone): nodes go through transport_node_free_locked, which returns
     * their buffers to the pool, and the pool is freed last. */
    pthread_mutex_lock(&t->lock);
    for (chunk_t *k = t->held_head, *next; k; k = next) {
        next = k->next;
        free(k);
    }
    for (chunk_t *k = t->checked_head, *next; k; k = next) {
        /* Checked but never settled: the progress thread gave up first. */
        next = k->next;
        node_t *n = k->node;
        if (--n->chunks_busy == 0 && !n->listed)
            transport_node_free_locked(t, n);
        free(k);
    }
    while (t->conns) {
        conn_t *c = t->conns;
        t->conns = c->next;
        for (node_t *n = c->assembling, *next; n; n = next) {
            next = n->next;
            transport_node_free_locked(t, n);
        }
        free(c);
    }
    for (node_t *n = t->q_head, *next; n; n = next) {
        next = n->next;
        transport_node_free_locked(t, n);
    }
    for (pbuf_t *b = t->pool_free, *next; b; b = next) {
        next = b->next;
        tma_free_huge(b->data, b->cap);
        free(b);
    }
    for (post_t *p = t->posts, *next; p; p = next) {
        next = p->next;
        free(p);
    }
    pthread_mutex_unlock(&t->lock);
    if (t->epfd >= 0)
        close(t->epfd);
    if (t->cmd_fd >= 0)
        close(t->cmd_fd);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->done_cond);
    pthread_cond_destroy(&t->rx_cond);
    pthread_cond_destroy(&t->check_cond);
    free(t->open_peers);
    free(t->job);
    if (t->token)
        memset(t->token, 0, t->token_len);
    free(t->token);
    free(t);
}

const char *tma_transport_address(const tma_transport_t *t)
{
    return t->listen_addr;
}

uint16_t tma_transport_port(const tma_transport_t *t)
{
    return t->listen_port;
}

/* ------------------------------------------------------------------ connections (API) */

tma_status_t tma_transport_connect(tma_transport_t *t, const char *addr, double timeout_s,
                                   uint32_t *peer_p)
{
    cmd_t cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.kind = CMD_CONNECT;
    tma_status_t st = transport_parse_addr(addr, 0, &cmd.sa, &cmd.salen);
    if (st != TMA_OK)
        return st;
    snprintf(cmd.addr, sizeof cmd.addr, "%s", addr);
    cmd.deadline = transport_deadline_from(timeout_s);
    cmd.fault = (tma_transport_fault_t)__atomic_exchange_n(&t->fault, 0, __ATOMIC_RELAXED);
    st = transport_cmd_submit(t, &cmd);
    if (st != TMA_OK)
        return st;
    transport_cmd_wait(t, &cmd);
    if (cmd.st == TMA_OK && peer_p)
        *peer_p = cmd.peer_out;
    if (cmd.st == TMA_ERR_UNAVAILABLE)
        tma_log_error(COMP, "cannot connect to %s: nobody answers there", addr);
    return cmd.st;
}

tma_status_t tma_transport_disconnect(tma_transport_t *t, uint32_t peer, double timeout_s)
{
    cmd_t cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.kind = CMD_DISCONNECT;
    cmd.peer = peer;
    cmd.deadline = transport_deadline_from(timeout_s);
    tma_status_t st = transport_cmd_submit(t, &cmd);
    if (st != TMA_OK)
        return st;
    transport_cmd_wait(t, &cmd);
    return cmd.st;
}

tma_status_t tma_transport_wait_peer(tma_transport_t *t, uint32_t peer, double timeout_s)
{
    double deadline = transport_deadline_from(timeout_s);
    tma_status_t st = TMA_ERR_TIMEOUT;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        int found = 0;
        for (size_t i = 0; i < t->n_open; i++)
            found |= t->open_peers[i] == peer;
        if (found) {
            st = TMA_OK;
            break;
        }
        if (t->closing) {
            st = TMA_ERR_CLOSED;
            break;
        }
        if (timeout_s == 0 || !tma_cond_wait_until(&t->rx_cond, &t->lock, deadline))
            break;
    }
    pthread_mutex_unlock(&t->lock);
    return st;
}

void tma_transport_peers(tma_transport_t *t, uint32_t *ids, size_t cap, size_t *n_p)
{
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->n_open && i < cap; i++)
        ids[i] = t->open_peers[i];
    *n_p = t->n_open;
    pthread_mutex_unlock(&t->lock);
}

/* ------------------------------------------------------------------ statistics, tests */

void tma_transport_stats(tma_transport_t *t, tma_transport_stats_t *s_p)
{
    tma_transport_stats_t s;
    memset(&s, 0, sizeof s);
#define LD(f) s.f = __atomic_load_n(&t->st.f, __ATOMIC_RELAXED)
    LD(msgs_sent);
    LD(bytes_sent);
    LD(msgs_received);
    LD(bytes_received);
    LD(frames_dropped);
    LD(peers_refused);
    LD(peers_flagged);
    LD(hello_evicted);
    LD(connections);
    LD(endpoints);
    LD(tx_active);
    LD(rx_active);
    LD(rx_held);
#undef LD
    pthread_mutex_lock(&t->lock);
    s.pool_bytes = t->pool_total;
    for (node_t *n = t->q_head; n; n = n->next)
        s.rx_queued++;
    pthread_mutex_unlock(&t->lock);
    *s_p = s;
}

void tma_transport_test_inject(tma_transport_t *t, tma_transport_fault_t fault)
{
    __atomic_store_n(&t->fault, (int)fault, __ATOMIC_RELAXED);
}
