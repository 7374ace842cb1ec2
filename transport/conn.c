/*
 * conn.c: the life of a connection: accepting and connecting, the hello
 * and its answer, the open-peer table, the clean close (flush, bye, flush),
 * and the end of a connection for any reason (transport_conn_doom marks
 * it, the progress loop finishes it and reports the event).  Everything
 * here runs on the progress thread.
 */
#include "transport_int.h"

#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void pump_close(conn_t *c);

void transport_format_sockaddr(const struct sockaddr *sa, socklen_t len, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN], serv[8];
    if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(out, cap, "?");
        return;
    }
    if (sa->sa_family == AF_INET6)
        snprintf(out, cap, "[%s]:%s", host, serv);
    else
        snprintf(out, cap, "%s:%s", host, serv);
}

/* Parses "host:port" or "[v6]:port" ("*" or an empty host: any address). */
tma_status_t transport_parse_addr(const char *addr, int passive, struct sockaddr_storage *sa_p,
                                  socklen_t *len_p)
{
    char host[256];
    const char *port;
    if (!addr || !*addr)
        goto bad;
    if (addr[0] == '[') {
        const char *end = strchr(addr, ']');
        if (!end || end[1] != ':' || (size_t)(end - addr - 1) >= sizeof host)
            goto bad;
        memcpy(host, addr + 1, (size_t)(end - addr - 1));
        host[end - addr - 1] = '\0';
        port = end + 2;
    } else {
        const char *colon = strrchr(addr, ':');
        if (!colon || (size_t)(colon - addr) >= sizeof host)
            goto bad;
        memcpy(host, addr, (size_t)(colon - addr));
        host[colon - addr] = '\0';
        port = colon + 1;
    }
    int64_t pnum;
    if (tma_parse_i64(port, &pnum) != 0 || pnum < 0 || pnum > 65535 || (!passive && pnum == 0))
        goto bad;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    const char *h = (host[0] == '\0' || strcmp(host, "*") == 0) ? NULL : host;
    if (!h && !passive)
        goto bad;
    int rc = getaddrinfo(h, port, &hints, &res);
    if (rc != 0 || !res) {
        tma_log_error(COMP, "cannot resolve '%s': %s", addr, gai_strerror(rc));
        return TMA_ERR_CONFIG;
    }
    memcpy(sa_p, res->ai_addr, res->ai_addrlen);
    *len_p = res->ai_addrlen;
    freeaddrinfo(res);
    return TMA_OK;
bad:
    tma_log_error(COMP, "bad address '%s': expected host:port (or [ipv6]:port)%s", addr ? addr : "",
                  passive ? "" : " with a port above 0");
    return TMA_ERR_CONFIG;
}

/* ------------------------------------------------------------------ events and the peer table */

static void open_peer_add_locked(tma_transport_t *t, uint32_t peer)
{
    for (size_t i = 0; i < t->n_open; i++)
        if (t->open_peers[i] == peer)
            return;
    if (t->n_open == t->cap_open) {
        size_t cap = t->cap_open ? 2 * t->cap_open : 16;
        uint32_t *p = realloc(t->open_peers, cap * sizeof *p);
        if (!p)
            return; /* only wait_peer/peers() lose sight of it; logged by the caller's failure */
        t->open_peers = p;
        t->cap_open = cap;
    }
    t->open_peers[t->n_open++] = peer;
}

static void open_peer_remove_locked(tma_transport_t *t, uint32_t peer)
{
    for (size_t i = 0; i < t->n_open; i++) {
        if (t->open_peers[i] == peer) {
            t->open_peers[i] = t->open_peers[--t->n_open];
            return;
        }
    }
}

/* Reports a connection event to the callback and (when it ends a
 * connection) to the receive queue, in that order, so that whoever receives
 * the queued event can count on the callback having run. */
static void emit_event(tma_transport_t *t, conn_t *c, tma_transport_event_kind_t kind,
                       tma_status_t reason)
{
    tma_transport_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = kind;
    ev.peer = c->peer;
    snprintf(ev.addr, sizeof ev.addr, "%s", c->addr);
    ev.reason = reason;
    ev.lease = c->outgoing ? 0 : c->lease;
    if (t->event_cb)
        t->event_cb(t->event_cb_arg, &ev);
    if (kind != TMA_TRANSPORT_EV_CONNECTED) {
        node_t *n = calloc(1, sizeof *n);
        if (n) {
            n->kind = TMA_TRANSPORT_MSG_EVENT;
            n->peer = c->peer;
            n->conn_uid = c->uid;
            n->ev = ev;
            pthread_mutex_lock(&t->lock);
            transport_queue_append_locked(t, n);
            pthread_mutex_unlock(&t->lock);
        } else {
            tma_log_error(COMP, "out of memory: the end of peer %u's connection is not queued",
                          c->peer);
        }
    }
}

/* ------------------------------------------------------------------ connections */

static conn_t *conn_new(tma_transport_t *t)
{
    conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        tma_log_error(COMP, "out of memory for a connection");
        return NULL;
    }
    c->t = t;
    c->uid = ++t->next_uid;
    c->refs = 1;
    c->peer = UINT32_MAX;
    c->next = t->conns;
    t->conns = c;
    t->n_conns++;
    STAT_ADD(t, endpoints, 1);
    return c;
}

void transport_conn_unref(conn_t *c)
{
    if (--c->refs > 0)
        return;
    tma_transport_t *t = c->t;
    for (conn_t **pp = &t->conns; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    t->n_conns--;
    STAT_SUB(t, endpoints, 1);
    free(c);
}

conn_t *transport_conn_by_ep(tma_transport_t *t, ucp_ep_h ep)
{
    for (conn_t *c = t->conns; c; c = c->next)
        if (c->ep == ep && !c->ep_closed)
            return c;
    return NULL;
}

static conn_t *conn_by_uid(tma_transport_t *t, uint64_t uid)
{
    for (conn_t *c = t->conns; c; c = c->next)
        if (c->uid == uid)
            return c;
    return NULL;
}

conn_t *transport_conn_open_by_peer(tma_transport_t *t, uint32_t peer)
{
    for (conn_t *c = t->conns; c; c = c->next)
        if (c->state == CONN_OPEN && !c->doomed && c->peer == peer)
            return c;
    return NULL;
}

static void close_done_cb(void *req, ucs_status_t status, void *user_data)
{
    conn_t *c = user_data;
    ucp_request_free(req);
    transport_conn_unref(c);
}

/* Force-closes the endpoint once; outstanding requests complete with
 * UCS_ERR_CANCELED (their callbacks may run inside this call). */
static void conn_close_ep(conn_t *c)
{
    if (c->ep_closed || !c->ep)
        return;
    c->ep_closed = 1;
    ucp_request_param_t p;
    memset(&p, 0, sizeof p);
    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    p.cb.send = close_done_cb;
    p.user_data = c;
    void *req = ucp_ep_close_nbx(c->ep, &p);
    if (req && !UCS_PTR_IS_ERR(req))
        c->refs++;
}

/*
 * Marks a connection to be ended by the progress loop with this kind and
 * reason (the first one wins).  UCX callbacks call this instead of closing
 * the endpoint under UCX's feet; conn_finish does the work.
 */
void transport_conn_doom(conn_t *c, tma_transport_event_kind_t kind, tma_status_t reason)
{
    if (c->state == CONN_DEAD || c->doomed)
        return;
    c->doomed = 1;
    c->doom_kind = kind;
    c->doom_reason = reason;
    c->t->any_doomed = 1;
}

/*
 * Ends a doomed connection: tells the application (when the peer had passed
 * its hello), answers a waiting connect() or disconnect(), drops held
 * arrivals and force-closes the endpoint.  Runs on the progress loop only,
 * never inside a UCX callback.
 */
static void conn_finish(conn_t *c)
{
    tma_transport_t *t = c->t;
    tma_transport_event_kind_t kind = c->doom_kind;
    tma_status_t reason = c->doom_reason;
    c->refs++; /* callbacks run inside conn_close_ep may drop references */
    int was_authed = c->authed;
    c->state = CONN_DEAD;
    c->authed = 0;
    if (was_authed) {
        pthread_mutex_lock(&t->lock);
        if (!transport_conn_open_by_peer(t, c->peer))
            open_peer_remove_locked(t, c->peer);
        pthread_cond_broadcast(&t->rx_cond);
        pthread_mutex_unlock(&t->lock);
        STAT_SUB(t, connections, 1);
    }
    if (c->waiter) {
        cmd_t *w = c->waiter;
        c->waiter = NULL;
        tma_status_t st = w->kind == CMD_DISCONNECT       ? TMA_OK
                          : reason == TMA_ERR_PEER_FAILED ? TMA_ERR_UNAVAILABLE
                                                          : reason;
        transport_cmd_complete(t, w, st);
    }
    transport_conn_drop_arrivals(c);
    conn_close_ep(c);
    if (was_authed)
        emit_event(t, c, kind, reason);
    c->refs--;     /* the extra reference above; the list's still holds it */
    transport_conn_unref(c); /* the list's reference */
}

/* Ends every doomed connection; returns how many. */
int transport_process_doomed(tma_transport_t *t)
{
    int n = 0;
    while (t->any_doomed) {
        t->any_doomed = 0;
        conn_t *c = t->conns;
        while (c && !(c->doomed && c->state != CONN_DEAD))
            c = c->next;
        if (c) {
            conn_finish(c);
            t->any_doomed = 1; /* look again: the list changed */
            n++;
        }
    }
    return n;
}

/* Flags a peer that sent a bad frame: logs it once and disconnects it. */
void transport_conn_flag(conn_t *c, tma_status_t reason, const char *why)
{
    tma_transport_t *t = c->t;
    STAT_ADD(t, frames_dropped, 1);
    if (c->authed) {
        STAT_ADD(t, peers_flagged, 1);
        tma_log_error(COMP,
                      "peer %u at %s sent a bad frame (%s): dropped it and disconnected the peer",
                      c->peer, c->addr, why);
    } else {
        tma_log_error(COMP,
                      "connection from %s sent a bad frame before its hello was accepted (%s): "
                      "closed",
                      c->addr, why);
    }
    transport_conn_doom(c, TMA_TRANSPORT_EV_FLAGGED, reason);
}

int transport_conn_gone(const conn_t *c)
{
    return c->state == CONN_DEAD || c->doomed;
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    conn_t *c = arg;
    if (transport_conn_gone(c))
        return;
    if (c->bye_received || c->state == CONN_CLOSING) {
        /* The peer went away after saying goodbye, or while we closed. */
        transport_conn_doom(c, TMA_TRANSPORT_EV_CLOSED, TMA_OK);
        return;
    }
    if (c->authed)
        tma_log_warn(COMP, "peer %u at %s failed: %s", c->peer, c->addr, ucs_status_string(status));
    else
        tma_log_info(COMP, "connection %s %s failed before its hello: %s",
                     c->outgoing ? "to" : "from", c->addr, ucs_status_string(status));
    transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_PEER_FAILED);
}

static void ctl_send_cb(void *req, ucs_status_t status, void *user_data)
{
    conn_t *c = user_data;
    ucp_request_free(req);
    if (status != UCS_OK && !transport_conn_gone(c))
        transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_PEER_FAILED);
    transport_conn_unref(c);
}

static void request_param(ucp_request_param_t *p, void *user_data, ucp_send_nbx_callback_t cb)
{
    memset(p, 0, sizeof *p);
    p->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p->cb.send = cb;
    p->user_data = user_data;
}

/* Sends a control frame whose bytes live in c until it completes. */
static void conn_send_ctl(conn_t *c, const unsigned char *hdr, size_t hdr_len, const void *payload,
                          size_t len)
{
    ucp_request_param_t p;
    request_param(&p, c, ctl_send_cb);
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER;
    void *req = ucp_am_send_nbx(c->ep, AM_ID, hdr, hdr_len, payload, len, &p);
    if (UCS_PTR_IS_ERR(req)) {
        tma_log_warn(COMP, "sending a control frame to %s failed: %s", c->addr,
                     ucs_status_string(UCS_PTR_STATUS(req)));
        transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_PEER_FAILED);
    } else if (req) {
        c->refs++;
    }
}

static void control_header(tma_transport_t *t, tma_transport_frame_type_t type, uint64_t job_id,
                           const void *payload, size_t len, unsigned char *out)
{
    tma_transport_frame_t f;
    memset(&f, 0, sizeof f);
    f.version = TMA_TRANSPORT_VERSION;
    f.type = (uint16_t)type;
    f.sender = t->self_id;
    f.job_id = job_id;
    f.length = len;
    tma_transport_frame_encode(&f, payload, len, out);
}

/* At debug level, says which UCX transports carry a connection (the lanes
 * of ucp_ep_print_info), e.g. "tcp/lo". */
static void log_lanes(conn_t *c)
{
    if (tma_log_get_level() < TMA_LOG_DEBUG)
        return;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return;
    ucp_ep_print_info(c->ep, f);
    fclose(f);
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (strstr(line, "lane"))
            tma_log_debug(COMP, "peer %u lanes: %s", c->peer, line + strspn(line, "# "));
    }
    free(buf);
}

/* A connection passed its hello: make it the one for its member id. */
static void conn_open(conn_t *c)
{
    tma_transport_t *t = c->t;
    conn_t *old = transport_conn_open_by_peer(t, c->peer);
    c->state = CONN_OPEN;
    c->authed = 1;
    c->deadline = 0;
    STAT_ADD(t, connections, 1);
    if (old && old != c) {
        tma_log_info(COMP, "peer %u: the new connection at %s replaces the one at %s", c->peer,
                     c->addr, old->addr);
        transport_conn_doom(old, TMA_TRANSPORT_EV_FAILED, TMA_ERR_FENCED);
    }
    pthread_mutex_lock(&t->lock);
    open_peer_add_locked(t, c->peer);
    pthread_cond_broadcast(&t->rx_cond);
    pthread_mutex_unlock(&t->lock);
    tma_log_debug(COMP, "peer %u at %s connected", c->peer, c->addr);
    log_lanes(c);
    emit_event(t, c, TMA_TRANSPORT_EV_CONNECTED, TMA_OK);
}

/* The clean close: flush (what we sent arrives), bye, flush (the bye
 * arrives), then a forced close, which is safe because nothing is left in
 * flight.  Each step's callback calls pump_close again. */
static void close_step_cb(void *req, ucs_status_t status, void *user_data)
{
    conn_t *c = user_data;
    ucp_request_free(req);
    if (c->state == CONN_CLOSING && !c->doomed) {
        if (status != UCS_OK)
            transport_conn_doom(c,
                                c->bye_received ? TMA_TRANSPORT_EV_CLOSED : TMA_TRANSPORT_EV_FAILED,
                                c->bye_received ? TMA_OK : TMA_ERR_PEER_FAILED);
        else
            pump_close(c);
    }
    transport_conn_unref(c);
}

static void pump_close(conn_t *c)
{
    tma_transport_t *t = c->t;
    while (c->state == CONN_CLOSING && !c->doomed) {
        ucp_request_param_t p;
        request_param(&p, c, close_step_cb);
        void *req;
        switch (c->close_stage) {
        case CLOSE_FLUSH1:
            /* A peer that said bye needs no bye back. */
            c->close_stage = c->bye_received ? CLOSE_FLUSH2 : CLOSE_BYE;
            req = ucp_ep_flush_nbx(c->ep, &p);
            break;
        case CLOSE_BYE:
            c->close_stage = CLOSE_FLUSH2;
            control_header(t, TMA_TRANSPORT_FRAME_BYE, t->job_id, NULL, 0, c->bye_hdr);
            p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
            p.flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER;
            req = ucp_am_send_nbx(c->ep, AM_ID, c->bye_hdr, sizeof c->bye_hdr, NULL, 0, &p);
            break;
        case CLOSE_FLUSH2:
            c->close_stage = CLOSE_DONE;
            req = ucp_ep_flush_nbx(c->ep, &p);
            break;
        default:
            transport_conn_doom(c, TMA_TRANSPORT_EV_CLOSED, TMA_OK);
            return;
        }
        if (UCS_PTR_IS_ERR(req)) {
            transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_PEER_FAILED);
            return;
        }
        if (req) {
            c->refs++;
            return;
        }
    }
}

/* Starts a clean close at `stage` (a refused peer only needs its ack flushed). */
static void conn_start_close(conn_t *c, close_stage_t stage)
{
    if (transport_conn_gone(c) || c->state == CONN_CLOSING)
        return;
    c->state = CONN_CLOSING;
    c->close_stage = stage;
    c->deadline = tma_clock_now() + CLOSE_GRACE_S;
    pump_close(c);
}

/* ------------------------------------------------------------------ hello, ack, bye */

/* The listener answers a hello: a refusal (ack) when it cannot be this
 * job's, else its challenge.  The hello's sender id, lease and nonce are
 * kept: the proof must cover exactly them. */
static void refuse(tma_transport_t *t, conn_t *c, uint64_t job_id, tma_transport_hello_result_t res,
                   uint32_t sender, const char *why, unsigned char *hdr, unsigned char *payload)
{
    memset(payload, 0, ACK_BYTES);
    payload[0] = (unsigned char)res;
    /* The ack carries the connector's job id, so that a refused peer of
     * another job reads the refusal rather than a frame of a foreign job. */
    control_header(t, TMA_TRANSPORT_FRAME_HELLO_ACK, job_id, payload, ACK_BYTES, hdr);
    /* Counted before the refusal leaves: the refused peer may act on it
     * (and read these counters) before this thread runs again. */
    STAT_ADD(t, peers_refused, 1);
    conn_send_ctl(c, hdr, TMA_TRANSPORT_HEADER_BYTES, payload, ACK_BYTES);
    tma_log_warn(COMP, "refused member %u connecting from %s: %s", sender, c->addr, why);
    if (!transport_conn_gone(c))
        conn_start_close(c, CLOSE_FLUSH2); /* let the refusal reach the peer, then close */
}

static void on_hello(tma_transport_t *t, conn_t *c, const tma_transport_frame_t *f,
                     const void *data, size_t len)
{
    const char *why = NULL;
    tma_transport_hello_t h;
    char name[TMA_TRANSPORT_JOB_MAX + 1];
    tma_transport_hello_result_t res = TMA_TRANSPORT_HELLO_ACCEPTED;
    if (tma_transport_hello_decode(data, len, &h, &why) != TMA_OK) {
        res = TMA_TRANSPORT_HELLO_MALFORMED;
    } else if (memcpy(name, h.job, h.job_len), name[h.job_len] = '\0',
               tma_transport_job_id(name) != f->job_id) {
        res = TMA_TRANSPORT_HELLO_MALFORMED;
        why = "the job id in its header does not match its job name";
    } else if (h.job_len != strlen(t->job) || memcmp(h.job, t->job, h.job_len) != 0) {
        res = TMA_TRANSPORT_HELLO_WRONG_JOB;
        why = "it belongs to another job";
    } else if (f->sender == UINT32_MAX) {
        res = TMA_TRANSPORT_HELLO_MALFORMED;
        why = "it claims the reserved member id";
    }
    if (res != TMA_TRANSPORT_HELLO_ACCEPTED) {
        refuse(t, c, f->job_id, res, f->sender, why, c->ctl_hdr, c->ctl_payload);
        return;
    }
    c->peer = f->sender;
    c->lease = h.lease;
    memcpy(c->nonce_c, h.nonce, TMA_TRANSPORT_NONCE_BYTES);
    unsigned char *nonce_s = c->ctl_payload, *mac = c->ctl_payload + TMA_TRANSPORT_NONCE_BYTES;
    if (transport_nonce(c->nonce_s) != TMA_OK ||
        tma_transport_hello_mac(t->token, t->token_len, TMA_TRANSPORT_MAC_LISTENER, t->job,
                                strlen(t->job), c->peer, t->self_id, c->lease, c->nonce_c,
                                c->nonce_s, mac) != TMA_OK) {
        transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_UNAVAILABLE);
        return;
    }
    memcpy(nonce_s, c->nonce_s, TMA_TRANSPORT_NONCE_BYTES);
    control_header(t, TMA_TRANSPORT_FRAME_CHALLENGE, t->job_id, c->ctl_payload,
                   TMA_TRANSPORT_CHALLENGE_BYTES, c->ctl_hdr);
    conn_send_ctl(c, c->ctl_hdr, sizeof c->ctl_hdr, c->ctl_payload, TMA_TRANSPORT_CHALLENGE_BYTES);
    c->challenged = 1;
}

/* The listener checks the connector's proof: only a peer holding the job
 * token can answer this connection's fresh nonce. */
static void on_proof(tma_transport_t *t, conn_t *c, const tma_transport_frame_t *f,
                     const unsigned char *data)
{
    unsigned char want[TMA_TRANSPORT_MAC_BYTES];
    if (f->sender != c->peer) {
        transport_conn_flag(c, TMA_ERR_MALFORMED, "proof from another member id than its hello");
        return;
    }
    if (tma_transport_hello_mac(t->token, t->token_len, TMA_TRANSPORT_MAC_CONNECTOR, t->job,
                                strlen(t->job), c->peer, t->self_id, c->lease, c->nonce_c,
                                c->nonce_s, want) != TMA_OK) {
        transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_UNAVAILABLE);
        return;
    }
    if (!tma_transport_mac_equal(want, data)) {
        refuse(t, c, t->job_id, TMA_TRANSPORT_HELLO_WRONG_TOKEN, c->peer,
               "its proof does not match this connection's challenge (a wrong job token, or a "
               "replayed hello)",
               c->ctl2_hdr, c->ctl2_payload);
        return;
    }
    memset(c->ctl2_payload, 0, ACK_BYTES);
    c->ctl2_payload[0] = TMA_TRANSPORT_HELLO_ACCEPTED;
    control_header(t, TMA_TRANSPORT_FRAME_HELLO_ACK, t->job_id, c->ctl2_payload, ACK_BYTES,
                   c->ctl2_hdr);
    conn_send_ctl(c, c->ctl2_hdr, sizeof c->ctl2_hdr, c->ctl2_payload, ACK_BYTES);
    if (transport_conn_gone(c))
        return;
    conn_open(c);
}

/* The connector checks the listener's MAC (a listener without the token
 * cannot make it, so no impostor gets our weights) and sends its proof. */
static void on_challenge(tma_transport_t *t, conn_t *c, const tma_transport_frame_t *f,
                         const unsigned char *data)
{
    unsigned char want[TMA_TRANSPORT_MAC_BYTES];
    const unsigned char *nonce_s = data, *mac = data + TMA_TRANSPORT_NONCE_BYTES;
    if (tma_transport_hello_mac(t->token, t->token_len, TMA_TRANSPORT_MAC_LISTENER, t->job,
                                strlen(t->job), t->self_id, f->sender, t->self_lease, c->nonce_c,
                                nonce_s, want) != TMA_OK) {
        transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_UNAVAILABLE);
        return;
    }
    /* The proof goes out even when the challenge's MAC is wrong, so that a
     * listener with another token refuses us and says so in its log; we
     * then refuse whatever it answers (on_hello_ack).  An HMAC over a nonce
     * the listener chose tells it nothing about the key. */
    c->listener_ok = c->replay || tma_transport_mac_equal(want, mac);
    memcpy(c->nonce_s, nonce_s, TMA_TRANSPORT_NONCE_BYTES);
    if (c->replay) {
        memcpy(c->ctl2_payload, t->last_proof, TMA_TRANSPORT_MAC_BYTES);
    } else if (tma_transport_hello_mac(t->token, t->token_len, TMA_TRANSPORT_MAC_CONNECTOR, t->job,
                                       strlen(t->job), t->self_id, f->sender, t->self_lease,
                                       c->nonce_c, c->nonce_s, c->ctl2_payload) != TMA_OK) {
        transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_UNAVAILABLE);
        return;
    }
    memcpy(t->last_nonce_c, c->nonce_c, TMA_TRANSPORT_NONCE_BYTES);
    memcpy(t->last_proof, c->ctl2_payload, TMA_TRANSPORT_MAC_BYTES);
    control_header(t, TMA_TRANSPORT_FRAME_PROOF, t->job_id, c->ctl2_payload,
                   TMA_TRANSPORT_PROOF_BYTES, c->ctl2_hdr);
    conn_send_ctl(c, c->ctl2_hdr, sizeof c->ctl2_hdr, c->ctl2_payload, TMA_TRANSPORT_PROOF_BYTES);
    c->proved = 1;
}

static void on_hello_ack(tma_transport_t *t, conn_t *c, const tma_transport_frame_t *f,
                         const unsigned char *data, size_t len)
{
    cmd_t *w = c->waiter;
    unsigned res = data[0];
    int reserved = 0;
    for (size_t i = 1; i < len; i++)
        reserved |= data[i];
    if (reserved || res > TMA_TRANSPORT_HELLO_MALFORMED) {
        transport_conn_flag(c, TMA_ERR_MALFORMED, "malformed hello-ack");
        return;
    }
    if (res != TMA_TRANSPORT_HELLO_ACCEPTED) {
        const char *why = res == TMA_TRANSPORT_HELLO_WRONG_JOB ? "we belong to another job"
                          : res == TMA_TRANSPORT_HELLO_WRONG_TOKEN
                              ? "our proof did not match (check TMA_JOB_TOKEN or the token file)"
                              : "it found our hello malformed";
        tma_log_error(COMP, "member %u at %s refused our connection: %s", f->sender, c->addr, why);
        transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_PERMISSION);
        return;
    }
    if (!c->proved) {
        transport_conn_flag(c, TMA_ERR_MALFORMED, "accepted before any challenge");
        return;
    }
    if (!c->listener_ok) {
        STAT_ADD(t, peers_refused, 1);
        tma_log_error(COMP,
                      "member %u at %s accepted us without proving this job's token (its "
                      "challenge does not match): not connecting",
                      f->sender, c->addr);
        transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_PERMISSION);
        return;
    }
    t->have_last = 1;
    c->peer = f->sender;
    c->waiter = NULL;
    conn_open(c);
    if (w) {
        w->peer_out = c->peer;
        transport_cmd_complete(t, w, TMA_OK);
    }
}

/* A control frame whose header and CRC passed the arrival checks. */
void transport_conn_on_control(tma_transport_t *t, conn_t *c, const tma_transport_frame_t *f,
                               const void *data, size_t len)
{
    switch (f->type) {
    case TMA_TRANSPORT_FRAME_HELLO:
        if (c->outgoing || c->state != CONN_HELLO_WAIT || c->challenged)
            transport_conn_flag(c, TMA_ERR_MALFORMED, "unexpected hello");
        else
            on_hello(t, c, f, data, len);
        break;
    case TMA_TRANSPORT_FRAME_PROOF:
        if (c->outgoing || c->state != CONN_HELLO_WAIT || !c->challenged)
            transport_conn_flag(c, TMA_ERR_MALFORMED, "unexpected proof");
        else
            on_proof(t, c, f, data);
        break;
    case TMA_TRANSPORT_FRAME_CHALLENGE:
        if (!c->outgoing || c->state != CONN_CONNECTING || c->proved)
            transport_conn_flag(c, TMA_ERR_MALFORMED, "unexpected challenge");
        else
            on_challenge(t, c, f, data);
        break;
    case TMA_TRANSPORT_FRAME_HELLO_ACK:
        if (!c->outgoing || c->state != CONN_CONNECTING)
            transport_conn_flag(c, TMA_ERR_MALFORMED, "unexpected hello-ack");
        else
            on_hello_ack(t, c, f, data, len);
        break;
    case TMA_TRANSPORT_FRAME_BYE:
        if (!c->authed) {
            transport_conn_flag(c, TMA_ERR_MALFORMED, "bye before hello");
            break;
        }
        c->bye_received = 1;
        conn_start_close(c, CLOSE_FLUSH1);
        break;
    }
}

/* The host part of "host:port" (or "[v6]:port"): its length in addr. */
static size_t host_len(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    return colon ? (size_t)(colon - addr) : strlen(addr);
}

static int same_host(const char *a, const char *b)
{
    size_t n = host_len(a);
    return n == host_len(b) && memcmp(a, b, n) == 0;
}

static int unauthed(const conn_t *c)
{
    return !c->outgoing && c->state == CONN_HELLO_WAIT && !transport_conn_gone(c);
}

/*
 * Before accepting a connection from addr: the connections still waiting
 * for their hello are bounded per host (MAX_UNAUTH_PER_HOST) and in all
 * (MAX_UNAUTH).  Over a bound, the oldest waiting connection of addr's
 * host, or else of the host holding the most, is closed, never the new
 * one: a host that floods us only displaces its own connections, and a
 * worker that reconnects (it says hello at once) is never refused.
 */
static void bound_unauthed(tma_transport_t *t, const char *addr)
{
    int total = 0, mine = 0;
    conn_t *oldest_mine = NULL;
    for (conn_t *c = t->conns; c; c = c->next) { /* newest first */
        if (!unauthed(c))
            continue;
        total++;
        if (same_host(c->addr, addr)) {
            mine++;
            oldest_mine = c;
        }
    }
    conn_t *victim = NULL;
    if (mine >= MAX_UNAUTH_PER_HOST) {
        victim = oldest_mine;
    } else if (total >= MAX_UNAUTH) {
        int most = 0;
        for (conn_t *c = t->conns; c; c = c->next) {
            if (!unauthed(c))
                continue;
            int n = 0;
            conn_t *oldest = NULL;
            for (conn_t *d = t->conns; d; d = d->next)
                if (unauthed(d) && same_host(d->addr, c->addr)) {
                    n++;
                    oldest = d;
                }
            if (n > most) {
                most = n;
                victim = oldest;
            }
        }
    }
    if (!victim)
        return;
    STAT_ADD(t, hello_evicted, 1);
    tma_log_warn(COMP, "closed a connection from %s that had not said hello: %s", victim->addr,
                 mine >= MAX_UNAUTH_PER_HOST ? "too many from that host wait for their hello"
                                             : "too many connections wait for their hello");
    transport_conn_doom(victim, TMA_TRANSPORT_EV_FAILED, TMA_ERR_UNAVAILABLE);
}

void transport_conn_request_cb(ucp_conn_request_h req, void *arg)
{
    tma_transport_t *t = arg;
    ucp_conn_request_attr_t attr;
    char addr[64] = "?";
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (ucp_conn_request_query(req, &attr) == UCS_OK)
        transport_format_sockaddr((struct sockaddr *)&attr.client_address,
                                  sizeof attr.client_address, addr, sizeof addr);
    if (t->shutdown || t->n_conns >= MAX_CONNS) {
        tma_log_warn(COMP, "rejected a connection from %s: %s", addr,
                     t->shutdown ? "closing" : "too many connections");
        ucp_listener_reject(t->listener, req);
        return;
    }
    bound_unauthed(t, addr);
    conn_t *c = conn_new(t);
    if (!c) {
        ucp_listener_reject(t->listener, req);
        return;
    }
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    c->state = CONN_HELLO_WAIT;
    c->deadline = tma_clock_now() + t->hello_timeout;
    ucp_ep_params_t ep;
    memset(&ep, 0, sizeof ep);
    ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.conn_request = req;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = ep_err_cb;
    ep.err_handler.arg = c;
    ucs_status_t s = ucp_ep_create(t->worker, &ep, &c->ep);
    if (s != UCS_OK) {
        tma_log_warn(COMP, "accepting a connection from %s failed: %s", addr, ucs_status_string(s));
        c->ep = NULL;
        transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_UNAVAILABLE);
    }
}

/* ------------------------------------------------------------------ commands */

void transport_do_connect(tma_transport_t *t, cmd_t *cmd)
{
    if (t->shutdown) {
        transport_cmd_complete(t, cmd, TMA_ERR_CLOSED);
        return;
    }
    conn_t *c = conn_new(t);
    if (!c) {
        transport_cmd_complete(t, cmd, TMA_ERR_NOMEM);
        return;
    }
    c->outgoing = 1;
    c->state = CONN_CONNECTING;
    c->deadline = cmd->deadline;
    c->waiter = cmd;
    snprintf(c->addr, sizeof c->addr, "%s", cmd->addr);
    ucp_ep_params_t ep;
    memset(&ep, 0, sizeof ep);
    ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                    UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.sockaddr.addr = (struct sockaddr *)&cmd->sa;
    ep.sockaddr.addrlen = cmd->salen;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = ep_err_cb;
    ep.err_handler.arg = c;
    ucs_status_t s = ucp_ep_create(t->worker, &ep, &c->ep);
    if (s != UCS_OK) {
        tma_log_error(COMP, "connecting to %s failed: %s (UCX_TLS, if set, must include tcp)",
                      cmd->addr, ucs_status_string(s));
        c->ep = NULL;
        transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_UNAVAILABLE);
        return;
    }
    if (cmd->fault == TMA_TRANSPORT_FAULT_REPLAY_HELLO && t->have_last) {
        /* What an eavesdropper recorded: the last hello's nonce, and later
         * its proof (on_challenge). */
        memcpy(c->nonce_c, t->last_nonce_c, TMA_TRANSPORT_NONCE_BYTES);
        c->replay = 1;
    } else if (transport_nonce(c->nonce_c) != TMA_OK) {
        transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_UNAVAILABLE);
        return;
    }
    size_t len = tma_transport_hello_encode(t->job, t->self_lease, c->nonce_c, c->ctl_payload,
                                            sizeof c->ctl_payload);
    control_header(t, TMA_TRANSPORT_FRAME_HELLO, t->job_id, c->ctl_payload, len, c->ctl_hdr);
    size_t hdr_len = sizeof c->ctl_hdr;
    if (cmd->fault == TMA_TRANSPORT_FAULT_PAYLOAD_BYTE)
        c->ctl_payload[len / 2] ^= 0x10;
    else
        transport_frame_damage(c->ctl_hdr, cmd->fault, &hdr_len, &len);
    conn_send_ctl(c, c->ctl_hdr, hdr_len, c->ctl_payload, len);
}

void transport_do_disconnect(tma_transport_t *t, cmd_t *cmd)
{
    conn_t *c = transport_conn_open_by_peer(t, cmd->peer);
    if (!c) {
        transport_cmd_complete(t, cmd, TMA_ERR_NOT_FOUND);
        return;
    }
    c->waiter = cmd;
    conn_start_close(c, CLOSE_FLUSH1);
}

void transport_do_kill(tma_transport_t *t, cmd_t *cmd)
{
    conn_t *c = conn_by_uid(t, cmd->conn_uid);
    if (c && !transport_conn_gone(c)) {
        if (cmd->reason == TMA_ERR_CHECKSUM) {
            STAT_ADD(t, peers_flagged, 1);
            transport_conn_doom(c, TMA_TRANSPORT_EV_FLAGGED, cmd->reason);
        } else {
            transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, cmd->reason);
        }
    }
    transport_cmd_complete(t, cmd, TMA_OK);
}

void transport_do_shutdown(tma_transport_t *t, cmd_t *cmd)
{
    t->shutdown = 1;
    t->shutdown_deadline = tma_clock_now() + CLOSE_GRACE_S;
    if (t->listener) {
        ucp_listener_destroy(t->listener);
        t->listener = NULL;
    }
    /* Starting a clean close never frees a connection (that waits for the
     * loop), so the list can be walked as it is. */
    for (conn_t *c = t->conns; c; c = c->next) {
        if (c->state == CONN_OPEN)
            conn_start_close(c, CLOSE_FLUSH1);
        else if (c->state != CONN_CLOSING)
            transport_conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_CLOSED);
    }
    transport_cmd_complete(t, cmd, TMA_OK);
}
