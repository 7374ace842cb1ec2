/*
 * transport.c: the UCX endpoint object, its progress thread and the
 * connection, send and receive machinery behind tma_transport.h.
 *
 * One progress thread owns the UCX worker.  API calls never touch UCX: they
 * put a command on a queue, write an eventfd and (for blocking calls) wait
 * on a condition variable until the progress thread completes the command.
 * Arrivals go the other way: the progress thread validates each frame's
 * header in the active-message callback, chooses a destination (a posted
 * buffer or a pooled one), receives the data in place (UCX rendezvous for
 * large tensors) and appends the complete message to the receive queue,
 * where tma_transport_recv() checks its CRC and hands it out.
 *
 * Locking: t->lock guards the command queue, the receive queue, the pool,
 * the posts, the open-peer table and the condition variables.  Everything
 * else (connections, in-flight requests, held arrivals) belongs to the
 * progress thread alone.  UCX is never called with the lock held.
 */
#include "transport_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#define COMP "transport"

#define AM_ID 17
#define ACK_BYTES 8
#define CLOSE_GRACE_S 5.0 /* a clean close that takes longer is forced */
#define MAX_CONNS 4096    /* connections beyond this are rejected */
#define MAX_ASSEMBLING 64 /* tensors one peer may have arriving at once */
#define SEND_WINDOW 4     /* frames of one send in flight at once */
#define SEND_FRAME_CHUNKS 4 /* chunks in a frame of a long tensor (16 MiB) */
#define IDLE_WAKE_MS 200  /* the progress thread looks at deadlines this often */
#define CHECK_AWAY_MIN (256u << 10) /* chunks this long get their CRC checked off the progress thread */
#define CHECK_AWAY_MAX 2 /* frames at most with the checker (queued, checked or settling) */
#define POOL_ALIGN 4096u

#define DEFAULT_MAX_MESSAGE (4ull << 30)
#define DEFAULT_POOL_BYTES (4ull << 30)
#define DEFAULT_HELLO_TIMEOUT 10.0

/* ------------------------------------------------------------------ types */

typedef enum {
    CONN_CONNECTING, /* we connected and sent our hello; waiting for the ack */
    CONN_HELLO_WAIT, /* a peer connected to us; waiting for its hello */
    CONN_OPEN,       /* hello done: visible to the application */
    CONN_CLOSING,    /* clean close: flush, bye, flush, then close */
    CONN_DEAD,       /* closed or failed; freed when its last request ends */
} conn_state_t;

typedef enum { CLOSE_FLUSH1, CLOSE_BYE, CLOSE_FLUSH2, CLOSE_DONE } close_stage_t;

struct cmd;

typedef struct conn {
    struct conn *next;
    tma_transport_t *t;
    ucp_ep_h ep;
    uint64_t uid;
    conn_state_t state;
    close_stage_t close_stage;
    int outgoing;            /* we connected */
    int authed;              /* passed the hello; events are reported */
    int bye_received;        /* the peer announced a clean close */
    int ep_closed;           /* ucp_ep_close_nbx was called */
    int held;                /* chunks of this connection waiting for a buffer */
    struct node *assembling; /* tensors partly arrived */
    int n_assembling;
    int doomed; /* to be ended by the progress loop (see conn_doom) */
    tma_transport_event_kind_t doom_kind;
    tma_status_t doom_reason;
    int refs; /* 1 for the list + one per UCX request that names it */
    uint32_t peer;
    char addr[64];
    double deadline;    /* hello or clean-close deadline; 0 none */
    struct cmd *waiter; /* connect() or disconnect() waiting on this connection */
    /* Control frames (hello, ack, bye) stay here until UCX is done with them. */
    unsigned char ctl_hdr[TMA_TRANSPORT_HEADER_BYTES];
    unsigned char ctl_payload[TMA_TRANSPORT_HELLO_MAX];
    unsigned char bye_hdr[TMA_TRANSPORT_HEADER_BYTES];
} conn_t;

typedef enum {
    CMD_CONNECT,
    CMD_SEND,
    CMD_DISCONNECT,
    CMD_KILL, /* detached: close a connection for a reason (bad CRC, post timeout) */
    CMD_SHUTDOWN,
} cmd_kind_t;

typedef struct cmd {
    struct cmd *next;
    cmd_kind_t kind;
    int detached; /* nobody waits: the progress thread frees it */
    /* CONNECT */
    struct sockaddr_storage sa;
    socklen_t salen;
    char addr[64];
    tma_transport_fault_t fault;
    /* SEND, DISCONNECT, KILL */
    uint32_t peer;
    uint64_t conn_uid;
    tma_status_t reason;
    const unsigned char *hdr;
    size_t hdr_len;
    const void *data;
    size_t send_len;
    double deadline; /* monotonic; 0 none */
    /* progress-thread state */
    conn_t *conn;
    void *req;
    int timed_out;
    struct cmd *active_next;
    /* result */
    int done;
    tma_status_t st;
    uint32_t peer_out;
} cmd_t;

typedef enum { POST_FREE, POST_BUSY, POST_FILLED, POST_DELIVERED } post_state_t;

typedef struct post {
    struct post *next;
    uint32_t peer, tag;
    float *buf;
    size_t bytes;
    post_state_t state;
    uint64_t conn_uid; /* BUSY: whose tensor is arriving */
} post_t;

typedef struct pbuf {
    struct pbuf *next;
    size_t cap;
    void *data;
} pbuf_t;

/* A tensor being assembled from its chunks (progress thread), then an item
 * in the receive queue; or a queued event. */
typedef struct node {
    struct node *next; /* the connection's assembling list, then the queue */
    tma_transport_msg_kind_t kind;
    tma_transport_frame_t frame; /* its first chunk's header: tag, epoch, round, total, seq */
    uint32_t peer;
    uint64_t conn_uid;
    void *data;
    size_t bytes;
    post_t *post;
    pbuf_t *pbuf;
    tma_transport_event_t ev;
    /* assembly */
    conn_t *conn;
    int have_dest;
    int failed;
    int warned; /* said that it cannot fit in the pool */
    uint32_t nchunks, chunks_done; /* chunks of the tensor; of them checked */
    uint32_t chunks_busy;          /* frames held, being received or being checked */
    int listed;                    /* on its connection's assembling list */
    uint64_t have[];               /* assembly: a bit per chunk whose frame was accepted */
} node_t;

/* One frame of a tensor (one or more chunks): being received, or held
 * until its tensor has a destination.  Holds a reference on its connection. */
typedef struct chunk {
    struct chunk *next; /* the held list, or the checker's queues */
    node_t *node;
    conn_t *conn;
    tma_transport_frame_t frame;
    void *desc; /* held: the UCX data descriptor */
    int rndv;
    int active; /* counted in rx_active */
    int crc_ok; /* its CRC was checked and matched */
} chunk_t;

struct tma_transport {
    /* Fixed at create. */
    char *job;
    char *token;
    size_t token_len;
    uint64_t job_id;
    uint32_t self_id;
    uint64_t max_message;
    uint64_t pool_limit;
    double hello_timeout;
    tma_transport_event_cb_t event_cb;
    void *event_cb_arg;
    char listen_addr[64];
    uint16_t listen_port;

    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_listener_h listener;
    int ucx_fd, cmd_fd, epfd;
    pthread_t thread;
    int thread_started;

    /* Guarded by lock. */
    pthread_mutex_t lock;
    pthread_cond_t done_cond; /* a command completed */
    pthread_cond_t rx_cond;   /* the queue, the peer table or a post changed */
    cmd_t *cmd_head, *cmd_tail;
    node_t *q_head, *q_tail;
    post_t *posts;
    pbuf_t *pool_free;
    uint64_t pool_total;
    uint32_t *open_peers;
    size_t n_open, cap_open;
    int retry;        /* a buffer was freed or posted: retry held arrivals */
    int held_waiting; /* some arrival waits for a buffer */
    int closing;      /* destroy began */
    /* The checker thread: landed chunks wait in `check` for their CRC check
     * and come back to the progress thread through `checked`. */
    pthread_cond_t check_cond;
    chunk_t *check_head, *check_tail;
    chunk_t *checked_head, *checked_tail;
    int check_away; /* frames handed to the checker and not yet settled */
    int check_stop;
    pthread_t checker;
    int checker_started;

    /* Progress thread only. */
    conn_t *conns;
    uint32_t n_conns;
    uint64_t next_uid;
    cmd_t *active_sends;
    chunk_t *held_head, *held_tail;
    int shutdown;
    double shutdown_deadline;
    int any_doomed;

    tma_transport_stats_t st; /* updated with atomics */
    int fault;                /* tma_transport_fault_t for the next frame */
    uint32_t next_seq;        /* tensor numbers for the frames' seq field */
};

#define STAT_ADD(t, field, v) __atomic_add_fetch(&(t)->st.field, (v), __ATOMIC_RELAXED)
#define STAT_SUB(t, field, v) __atomic_sub_fetch(&(t)->st.field, (v), __ATOMIC_RELAXED)

static void conn_doom(conn_t *c, tma_transport_event_kind_t kind, tma_status_t reason);
static void conn_unref(conn_t *c);
static void pump_close(conn_t *c);

/* ------------------------------------------------------------------ small helpers */

static void wake(tma_transport_t *t)
{
    uint64_t one = 1;
    ssize_t r;
    do {
        r = write(t->cmd_fd, &one, sizeof one);
    } while (r < 0 && errno == EINTR);
}

static double deadline_from(double timeout_s)
{
    return timeout_s < 0 ? 0 : tma_clock_now() + timeout_s;
}

/* Waits on cond until the absolute monotonic deadline (0: for ever);
 * returns 0 when the deadline passed. */
static int cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *m, double deadline)
{
    if (deadline <= 0) {
        pthread_cond_wait(cond, m);
        return 1;
    }
    double now = tma_clock_now();
    if (now >= deadline)
        return 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double rem = deadline - now;
    ts.tv_sec += (time_t)rem;
    ts.tv_nsec += (long)((rem - (double)(time_t)rem) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cond, m, &ts);
    return 1;
}

static void format_sockaddr(const struct sockaddr *sa, socklen_t len, char *out, size_t cap)
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
static tma_status_t parse_addr(const char *addr, int passive, struct sockaddr_storage *sa_p,
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

static int token_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    /* Compares every byte whatever the first difference, so the time taken
     * does not tell a guesser how much of the token was right. */
    unsigned char diff = (unsigned char)(alen != blen);
    size_t n = alen < blen ? alen : blen;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

/* ------------------------------------------------------------------ commands */

static void cmd_complete(tma_transport_t *t, cmd_t *c, tma_status_t st)
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

/* Queues a command; TMA_ERR_CLOSED once destroy began. */
static tma_status_t cmd_submit(tma_transport_t *t, cmd_t *c)
{
    c->next = NULL;
    pthread_mutex_lock(&t->lock);
    if (t->closing && c->kind != CMD_SHUTDOWN) {
        pthread_mutex_unlock(&t->lock);
        return TMA_ERR_CLOSED;
    }
    if (t->cmd_tail)
        t->cmd_tail->next = c;
    else
        t->cmd_head = c;
    t->cmd_tail = c;
    pthread_mutex_unlock(&t->lock);
    wake(t);
    return TMA_OK;
}

static void cmd_wait(tma_transport_t *t, cmd_t *c)
{
    pthread_mutex_lock(&t->lock);
    while (!c->done)
        pthread_cond_wait(&t->done_cond, &t->lock);
    pthread_mutex_unlock(&t->lock);
}

/* ------------------------------------------------------------------ pool and posts (lock held) */

static void pool_put_locked(tma_transport_t *t, pbuf_t *b)
{
    b->next = t->pool_free;
    t->pool_free = b;
    if (t->held_waiting)
        t->retry = 1;
}

/* A buffer of at least `bytes`: the best-fitting free one, else a new one
 * if the limit allows (dropping free buffers that do not fit to make room);
 * NULL when the pool is full of buffers in use. */
static pbuf_t *pool_get_locked(tma_transport_t *t, size_t bytes)
{
    pbuf_t **best = NULL;
    for (pbuf_t **pp = &t->pool_free; *pp; pp = &(*pp)->next) {
        size_t cap = (*pp)->cap;
        if (cap >= bytes && cap / 2 <= bytes + POOL_ALIGN && (!best || cap < (*best)->cap))
            best = pp;
    }
    if (best) {
        pbuf_t *b = *best;
        *best = b->next;
        return b;
    }
    size_t need = (bytes + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN;
    if (need == 0)
        need = POOL_ALIGN;
    while (t->pool_total + need > t->pool_limit && t->pool_free) {
        pbuf_t *b = t->pool_free;
        t->pool_free = b->next;
        t->pool_total -= b->cap;
        tma_free_huge(b->data, b->cap);
        free(b);
    }
    if (t->pool_total + need > t->pool_limit)
        return NULL;
    pbuf_t *b = malloc(sizeof *b);
    void *data = b ? tma_alloc_huge(need) : NULL;
    if (!data) {
        free(b);
        tma_log_error(COMP, "out of memory for a %zu-byte receive buffer", need);
        return NULL;
    }
    b->data = data;
    b->cap = need;
    b->next = NULL;
    t->pool_total += need;
    return b;
}

static post_t *post_match_locked(tma_transport_t *t, uint32_t peer, uint32_t tag, size_t bytes)
{
    for (post_t *p = t->posts; p; p = p->next) {
        if (p->state == POST_FREE && p->peer == peer && p->bytes == bytes &&
            (p->tag == TMA_TRANSPORT_ANY_TAG || p->tag == tag))
            return p;
    }
    return NULL;
}

static void post_unlink_locked(tma_transport_t *t, post_t *p)
{
    for (post_t **pp = &t->posts; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            return;
        }
    }
}

/* Gives a node's destination back: the pool buffer, or the post (to FREE,
 * so a later tensor can land there). */
static void node_release_dest_locked(tma_transport_t *t, node_t *n)
{
    if (n->pbuf) {
        pool_put_locked(t, n->pbuf);
        n->pbuf = NULL;
    }
    if (n->post) {
        n->post->state = POST_FREE;
        n->post = NULL;
        pthread_cond_broadcast(&t->rx_cond);
        if (t->held_waiting)
            t->retry = 1;
    }
}

/* ------------------------------------------------------------------ queue and events */

static void queue_append_locked(tma_transport_t *t, node_t *n)
{
    n->next = NULL;
    if (t->q_tail)
        t->q_tail->next = n;
    else
        t->q_head = n;
    t->q_tail = n;
    pthread_cond_broadcast(&t->rx_cond);
}

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
            queue_append_locked(t, n);
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

static void conn_unref(conn_t *c)
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

static conn_t *conn_by_ep(tma_transport_t *t, ucp_ep_h ep)
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

static conn_t *conn_open_by_peer(tma_transport_t *t, uint32_t peer)
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
    conn_unref(c);
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

static void node_settle(tma_transport_t *t, node_t *n);
static void assembling_unlink(conn_t *c, node_t *n);

/* Gives back the held chunks of c and fails its partly arrived tensors
 * (those with chunks still in UCX's hands go when the chunks settle). */
static void conn_drop_arrivals(conn_t *c)
{
    tma_transport_t *t = c->t;
    chunk_t **pp = &t->held_head, *prev = NULL;
    while (*pp) {
        chunk_t *k = *pp;
        if (k->conn != c) {
            prev = k;
            pp = &k->next;
            continue;
        }
        *pp = k->next;
        if (t->held_tail == k)
            t->held_tail = prev;
        ucp_am_data_release(t->worker, k->desc);
        STAT_SUB(t, rx_held, 1);
        c->held--;
        k->node->chunks_busy--;
        k->node->failed = 1;
        free(k);
        conn_unref(c);
    }
    while (c->assembling) {
        node_t *n = c->assembling;
        n->failed = 1;
        if (n->chunks_busy) {
            /* Leave the list; the last chunk's settling frees it. */
            assembling_unlink(c, n);
        } else {
            node_settle(t, n);
        }
    }
}

/*
 * Marks a connection to be ended by the progress loop with this kind and
 * reason (the first one wins).  UCX callbacks call this instead of closing
 * the endpoint under UCX's feet; conn_finish does the work.
 */
static void conn_doom(conn_t *c, tma_transport_event_kind_t kind, tma_status_t reason)
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
        if (!conn_open_by_peer(t, c->peer))
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
        cmd_complete(t, w, st);
    }
    conn_drop_arrivals(c);
    conn_close_ep(c);
    if (was_authed)
        emit_event(t, c, kind, reason);
    c->refs--;     /* the extra reference above; the list's still holds it */
    conn_unref(c); /* the list's reference */
}

/* Ends every doomed connection; returns how many. */
static int process_doomed(tma_transport_t *t)
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
static void conn_flag(conn_t *c, tma_status_t reason, const char *why)
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
    conn_doom(c, TMA_TRANSPORT_EV_FLAGGED, reason);
}

static int conn_gone(const conn_t *c)
{
    return c->state == CONN_DEAD || c->doomed;
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    conn_t *c = arg;
    if (conn_gone(c))
        return;
    if (c->bye_received || c->state == CONN_CLOSING) {
        /* The peer went away after saying goodbye, or while we closed. */
        conn_doom(c, TMA_TRANSPORT_EV_CLOSED, TMA_OK);
        return;
    }
    if (c->authed)
        tma_log_warn(COMP, "peer %u at %s failed: %s", c->peer, c->addr, ucs_status_string(status));
    else
        tma_log_info(COMP, "connection %s %s failed before its hello: %s",
                     c->outgoing ? "to" : "from", c->addr, ucs_status_string(status));
    conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_PEER_FAILED);
}

static void ctl_send_cb(void *req, ucs_status_t status, void *user_data)
{
    conn_t *c = user_data;
    ucp_request_free(req);
    if (status != UCS_OK && !conn_gone(c))
        conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_PEER_FAILED);
    conn_unref(c);
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
        conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_PEER_FAILED);
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
    conn_t *old = conn_open_by_peer(t, c->peer);
    c->state = CONN_OPEN;
    c->authed = 1;
    c->deadline = 0;
    STAT_ADD(t, connections, 1);
    if (old && old != c) {
        tma_log_info(COMP, "peer %u: the new connection at %s replaces the one at %s", c->peer,
                     c->addr, old->addr);
        conn_doom(old, TMA_TRANSPORT_EV_FAILED, TMA_ERR_FENCED);
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
            conn_doom(c, c->bye_received ? TMA_TRANSPORT_EV_CLOSED : TMA_TRANSPORT_EV_FAILED,
                      c->bye_received ? TMA_OK : TMA_ERR_PEER_FAILED);
        else
            pump_close(c);
    }
    conn_unref(c);
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
            conn_doom(c, TMA_TRANSPORT_EV_CLOSED, TMA_OK);
            return;
        }
        if (UCS_PTR_IS_ERR(req)) {
            conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_PEER_FAILED);
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
    if (conn_gone(c) || c->state == CONN_CLOSING)
        return;
    c->state = CONN_CLOSING;
    c->close_stage = stage;
    c->deadline = tma_clock_now() + CLOSE_GRACE_S;
    pump_close(c);
}

/* ------------------------------------------------------------------ arrivals */

/*
 * A tensor arrives as one or more chunks (frames), each received straight
 * into its place in the tensor's destination and checked against its own
 * CRC as soon as it has landed.  The tensor is queued for recv()
 * when every chunk has arrived and passed; a bad chunk flags the peer and
 * the tensor is dropped once its other chunks have settled.
 */

/* Picks where a tensor lands: a matching post, else a pool buffer.
 * 0 when nothing is free (its chunks are held). */
static int rx_pick_dest(tma_transport_t *t, node_t *n)
{
    int ok = 1;
    pthread_mutex_lock(&t->lock);
    post_t *p = post_match_locked(t, n->conn->peer, n->frame.tag, n->bytes);
    if (p) {
        p->state = POST_BUSY;
        p->conn_uid = n->conn->uid;
        n->post = p;
        n->data = p->buf;
    } else if (n->bytes == 0) {
        n->data = NULL;
    } else {
        n->pbuf = pool_get_locked(t, n->bytes);
        if (n->pbuf)
            n->data = n->pbuf->data;
        else
            ok = 0, t->held_waiting = 1; /* the next freed buffer retries it */
    }
    n->have_dest = ok;
    pthread_mutex_unlock(&t->lock);
    if (!ok && n->bytes > t->pool_limit && !n->warned) {
        n->warned = 1;
        tma_log_warn(COMP,
                     "a %zu-byte tensor from peer %u is larger than the receive pool (%" PRIu64
                     " bytes): it waits for a posted buffer",
                     n->bytes, n->conn->peer, t->pool_limit);
    }
    return ok;
}

static void assembling_unlink(conn_t *c, node_t *n)
{
    for (node_t **pp = &c->assembling; *pp; pp = &(*pp)->next) {
        if (*pp == n) {
            *pp = n->next;
            n->next = NULL;
            n->listed = 0;
            c->n_assembling--;
            return;
        }
    }
}

/* Queues a complete tensor, or frees a failed one whose chunks all settled. */
static void node_settle(tma_transport_t *t, node_t *n)
{
    conn_t *c = n->conn;
    if (n->failed) {
        if (n->chunks_busy)
            return; /* the last chunk to settle frees it */
        assembling_unlink(c, n);
        pthread_mutex_lock(&t->lock);
        node_release_dest_locked(t, n);
        pthread_mutex_unlock(&t->lock);
        free(n);
        conn_unref(c);
        return;
    }
    if (n->chunks_done < n->nchunks)
        return;
    assembling_unlink(c, n);
    n->kind = TMA_TRANSPORT_MSG_TENSOR;
    n->peer = c->peer;
    n->conn_uid = c->uid;
    n->conn = NULL;
    pthread_mutex_lock(&t->lock);
    if (n->post)
        n->post->state = POST_FILLED;
    queue_append_locked(t, n);
    pthread_mutex_unlock(&t->lock);
    conn_unref(c);
}

static void *chunk_dest(const chunk_t *k)
{
    return (char *)k->node->data + (size_t)k->frame.chunk * TMA_TRANSPORT_CHUNK_BYTES;
}

static void queue_chunk(chunk_t **head, chunk_t **tail, chunk_t *k)
{
    k->next = NULL;
    if (*tail)
        (*tail)->next = k;
    else
        *head = k;
    *tail = k;
}

/* A chunk's data has been checked (k->crc_ok) or did not arrive (status):
 * count it in its tensor and queue the tensor once it is complete. */
static void chunk_settle(tma_transport_t *t, chunk_t *k, ucs_status_t status)
{
    node_t *n = k->node;
    conn_t *c = k->conn;
    if (status == UCS_OK && !n->failed) {
        if (!k->crc_ok) {
            n->failed = 1;
            if (!conn_gone(c))
                conn_flag(c, TMA_ERR_CHECKSUM, "checksum mismatch");
        } else {
            n->chunks_done += tma_transport_frame_chunks(&k->frame);
        }
    } else if (status != UCS_OK) {
        if (!n->failed)
            tma_log_debug(COMP, "a tensor from peer %u did not arrive: %s", c->peer,
                          ucs_status_string(status));
        n->failed = 1;
    }
    if (k->active)
        STAT_SUB(t, rx_active, 1);
    n->chunks_busy--;
    free(k);
    node_settle(t, n);
    conn_unref(c);
}

/*
 * A chunk's data landed (status UCS_OK) or failed to.  Long chunks go to the
 * checker thread, so that the progress thread goes on receiving while their
 * CRC is computed, but at most CHECK_AWAY_MAX at a time: the progress thread
 * checks the others itself, so that a checker starved of CPU slows the
 * arrivals down instead of letting finished frames (and with them tensors
 * counted against MAX_ASSEMBLING, and pool buffers) pile up.  Short ones are
 * checked here.
 */
static void chunk_landed(tma_transport_t *t, chunk_t *k, ucs_status_t status)
{
    if (status == UCS_OK && !k->node->failed) {
        if (k->frame.length >= CHECK_AWAY_MIN && t->checker_started) {
            pthread_mutex_lock(&t->lock);
            int room = t->check_away < CHECK_AWAY_MAX;
            if (room) {
                t->check_away++;
                queue_chunk(&t->check_head, &t->check_tail, k);
                pthread_cond_signal(&t->check_cond);
            }
            pthread_mutex_unlock(&t->lock);
            if (room)
                return;
            /* The checker is behind: check here, which also holds back
             * further arrivals (else frames, tensors and pool buffers
             * would pile up behind a starved checker). */
        }
        k->crc_ok = tma_transport_frame_verify(&k->frame, chunk_dest(k), k->frame.length) == TMA_OK;
    }
    chunk_settle(t, k, status);
}

static void chunk_rndv_cb(void *req, ucs_status_t status, size_t length, void *user_data)
{
    chunk_t *k = user_data;
    tma_transport_t *t = k->conn->t;
    ucp_request_free(req);
    if (status == UCS_OK && length != k->frame.length)
        status = UCS_ERR_MESSAGE_TRUNCATED;
    chunk_landed(t, k, status);
}

/*
 * The checker thread: computes the CRC of landed chunks and hands them back
 * to the progress thread, which owns the tensors.  It touches nothing but
 * the chunk's frame and its bytes, which stay put until the chunk settles.
 * It stops once destroy asks and the queue is empty.
 */
static void *checker_main(void *arg)
{
    tma_transport_t *t = arg;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        chunk_t *k = t->check_head;
        if (!k) {
            if (t->check_stop)
                break;
            pthread_cond_wait(&t->check_cond, &t->lock);
            continue;
        }
        t->check_head = k->next;
        if (!t->check_head)
            t->check_tail = NULL;
        pthread_mutex_unlock(&t->lock);
        k->crc_ok = tma_transport_frame_verify(&k->frame, chunk_dest(k), k->frame.length) == TMA_OK;
        pthread_mutex_lock(&t->lock);
        int was_empty = t->checked_head == NULL;
        queue_chunk(&t->checked_head, &t->checked_tail, k);
        if (was_empty) {
            /* The progress thread takes the whole list when it wakes, so one
             * wake-up per non-empty list is enough. */
            pthread_mutex_unlock(&t->lock);
            wake(t);
            pthread_mutex_lock(&t->lock);
        }
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

/* Moves a chunk whose tensor has a destination; `data` is the UCX payload
 * (eager) or the rendezvous descriptor; `held` says UCX kept it for us. */
static void chunk_start(tma_transport_t *t, chunk_t *k, void *data, int held)
{
    if (k->node->failed) {
        if (held)
            ucp_am_data_release(t->worker, data);
        chunk_settle(t, k, UCS_ERR_CANCELED);
        return;
    }
    if (!k->rndv) {
        if (k->frame.length)
            memcpy(chunk_dest(k), data, k->frame.length);
        if (held)
            ucp_am_data_release(t->worker, data);
        chunk_landed(t, k, UCS_OK);
        return;
    }
    ucp_request_param_t p;
    memset(&p, 0, sizeof p);
    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p.cb.recv_am = chunk_rndv_cb;
    p.user_data = k;
    p.memory_type = UCS_MEMORY_TYPE_HOST;
    /* Counted from here until its check is done. */
    k->active = 1;
    STAT_ADD(t, rx_active, 1);
    void *req = ucp_am_recv_data_nbx(t->worker, data, chunk_dest(k), k->frame.length, &p);
    if (req == NULL)
        chunk_landed(t, k, UCS_OK);
    else if (UCS_PTR_IS_ERR(req))
        chunk_landed(t, k, UCS_PTR_STATUS(req));
}

static void held_append(tma_transport_t *t, chunk_t *k)
{
    k->next = NULL;
    if (t->held_tail)
        t->held_tail->next = k;
    else
        t->held_head = k;
    t->held_tail = k;
    k->conn->held++;
    STAT_ADD(t, rx_held, 1);
}

/* Retries held chunks in order; a connection's later chunks never pass its
 * earlier ones. */
static void retry_held(tma_transport_t *t)
{
    chunk_t *k = t->held_head, *prev = NULL;
    uint64_t blocked[16];
    int nblocked = 0;
    while (k) {
        chunk_t *next = k->next;
        int skip = 0;
        for (int i = 0; i < nblocked; i++)
            skip |= blocked[i] == k->conn->uid;
        if (!skip && (k->node->have_dest || rx_pick_dest(t, k->node))) {
            if (prev)
                prev->next = next;
            else
                t->held_head = next;
            if (t->held_tail == k)
                t->held_tail = prev;
            k->conn->held--;
            STAT_SUB(t, rx_held, 1);
            void *desc = k->desc;
            k->desc = NULL;
            chunk_start(t, k, desc, 1);
        } else {
            if (!skip && nblocked < (int)TMA_ARRAY_LEN(blocked))
                blocked[nblocked++] = k->conn->uid;
            prev = k;
        }
        k = next;
    }
    if (!t->held_head) {
        pthread_mutex_lock(&t->lock);
        t->held_waiting = 0;
        pthread_mutex_unlock(&t->lock);
    }
}

/* A tensor chunk passed the header checks: find or start its tensor, then
 * receive it (or hold it until the tensor has a destination). */
static ucs_status_t on_chunk(tma_transport_t *t, conn_t *c, const tma_transport_frame_t *f,
                             void *data, int rndv, ucs_status_t drop)
{
    node_t *n = c->assembling;
    while (n && n->frame.seq != f->seq)
        n = n->next;
    if (n && (n->frame.total != f->total || n->frame.tag != f->tag || n->frame.epoch != f->epoch ||
              n->frame.round != f->round)) {
        conn_flag(c, TMA_ERR_MALFORMED, "chunk does not belong to the tensor it names");
        return drop;
    }
    if (!n) {
        if (c->n_assembling >= MAX_ASSEMBLING) {
            conn_flag(c, TMA_ERR_MALFORMED, "too many tensors arriving at once");
            return drop;
        }
        uint32_t nchunks =
            f->total ? (uint32_t)((f->total - 1) / TMA_TRANSPORT_CHUNK_BYTES + 1) : 1;
        n = calloc(1, sizeof *n + (nchunks + 63) / 64 * sizeof n->have[0]);
        if (!n) {
            tma_log_error(COMP, "out of memory: dropped a tensor from peer %u", c->peer);
            return drop;
        }
        n->frame = *f;
        n->bytes = f->total;
        n->nchunks = nchunks;
        n->conn = c;
        c->refs++;
        n->next = c->assembling;
        n->listed = 1;
        c->assembling = n;
        c->n_assembling++;
    }
    /* Each chunk must come exactly once (decode kept the frame inside the
     * tensor), or the tensor could complete with a chunk never written. */
    uint32_t first = f->chunk, nc = tma_transport_frame_chunks(f);
    for (uint32_t i = first; i < first + nc; i++) {
        if (n->have[i / 64] & (1ull << (i % 64))) {
            conn_flag(c, TMA_ERR_MALFORMED, "a chunk of a tensor arrived twice");
            return drop;
        }
    }
    for (uint32_t i = first; i < first + nc; i++)
        n->have[i / 64] |= 1ull << (i % 64);
    chunk_t *k = calloc(1, sizeof *k);
    if (!k) {
        tma_log_error(COMP, "out of memory: dropped a tensor from peer %u", c->peer);
        n->failed = 1;
        node_settle(t, n);
        return drop;
    }
    k->node = n;
    k->conn = c;
    k->frame = *f;
    k->rndv = rndv;
    c->refs++;
    n->chunks_busy++;
    if (c->held > 0 || (!n->have_dest && !rx_pick_dest(t, n))) {
        k->desc = data;
        held_append(t, k);
        return UCS_INPROGRESS;
    }
    chunk_start(t, k, data, 0);
    return rndv ? UCS_INPROGRESS : UCS_OK;
}

static void on_hello(tma_transport_t *t, conn_t *c, const tma_transport_frame_t *f,
                     const void *data, size_t len)
{
    const char *job, *token, *why = NULL;
    size_t jl, tl;
    tma_transport_hello_result_t res = TMA_TRANSPORT_HELLO_ACCEPTED;
    char name[TMA_TRANSPORT_JOB_MAX + 1];
    if (tma_transport_hello_decode(data, len, &job, &jl, &token, &tl, &why) != TMA_OK) {
        res = TMA_TRANSPORT_HELLO_MALFORMED;
    } else if (memcpy(name, job, jl), name[jl] = '\0', tma_transport_job_id(name) != f->job_id) {
        res = TMA_TRANSPORT_HELLO_MALFORMED;
        why = "the job id in its header does not match its job name";
    } else if (jl != strlen(t->job) || memcmp(job, t->job, jl) != 0) {
        res = TMA_TRANSPORT_HELLO_WRONG_JOB;
        why = "it belongs to another job";
    } else if (!token_equal(token, tl, t->token, t->token_len)) {
        res = TMA_TRANSPORT_HELLO_WRONG_TOKEN;
        why = "wrong job token";
    }
    unsigned char ack[ACK_BYTES] = {0};
    ack[0] = (unsigned char)res;
    memcpy(c->ctl_payload, ack, ACK_BYTES);
    /* The ack carries the connector's job id, so that a refused peer of
     * another job reads the refusal rather than a frame of a foreign job. */
    control_header(t, TMA_TRANSPORT_FRAME_HELLO_ACK, f->job_id, c->ctl_payload, ACK_BYTES,
                   c->ctl_hdr);
    conn_send_ctl(c, c->ctl_hdr, sizeof c->ctl_hdr, c->ctl_payload, ACK_BYTES);
    if (conn_gone(c))
        return;
    c->peer = f->sender;
    if (res != TMA_TRANSPORT_HELLO_ACCEPTED) {
        STAT_ADD(t, peers_refused, 1);
        tma_log_warn(COMP, "refused member %u connecting from %s: %s", f->sender, c->addr, why);
        conn_start_close(c, CLOSE_FLUSH2); /* let the refusal reach the peer, then close */
        return;
    }
    conn_open(c);
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
        conn_flag(c, TMA_ERR_MALFORMED, "malformed hello-ack");
        return;
    }
    if (res != TMA_TRANSPORT_HELLO_ACCEPTED) {
        const char *why = res == TMA_TRANSPORT_HELLO_WRONG_JOB ? "we belong to another job"
                          : res == TMA_TRANSPORT_HELLO_WRONG_TOKEN
                              ? "wrong job token (check TMA_JOB_TOKEN or the job config)"
                              : "it found our hello malformed";
        tma_log_error(COMP, "member %u at %s refused our connection: %s", f->sender, c->addr, why);
        conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_PERMISSION);
        return;
    }
    c->peer = f->sender;
    c->waiter = NULL;
    conn_open(c);
    if (w) {
        w->peer_out = c->peer;
        cmd_complete(t, w, TMA_OK);
    }
}

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    tma_transport_t *t = arg;
    int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    ucs_status_t drop = rndv ? UCS_ERR_REJECTED : UCS_OK;
    conn_t *c = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
                    ? conn_by_ep(t, param->reply_ep)
                    : NULL;
    if (!c) {
        STAT_ADD(t, frames_dropped, 1);
        tma_log_warn(COMP, "dropped a frame from an unknown endpoint");
        return drop;
    }
    if (conn_gone(c))
        return drop;

    tma_transport_frame_t f;
    const char *why = NULL;
    char buf[96];
    if (tma_transport_frame_decode(header, header_length, t->max_message, &f, &why) != TMA_OK) {
        conn_flag(c, TMA_ERR_MALFORMED, why);
        return drop;
    }
    if (header_length != TMA_TRANSPORT_HEADER_BYTES) {
        conn_flag(c, TMA_ERR_MALFORMED, "header longer than 64 bytes");
        return drop;
    }
    /* A hello of another job is answered (and refused) by on_hello. */
    if (f.job_id != t->job_id && f.type != TMA_TRANSPORT_FRAME_HELLO) {
        conn_flag(c, TMA_ERR_MALFORMED, "frame of another job");
        return drop;
    }
    if (f.length != length) {
        snprintf(buf, sizeof buf, "length mismatch: header says %" PRIu64 " bytes, %zu arrived",
                 f.length, length);
        conn_flag(c, TMA_ERR_MALFORMED, buf);
        return drop;
    }
    if (c->authed && f.sender != c->peer) {
        conn_flag(c, TMA_ERR_MALFORMED, "sender id differs from the one in its hello");
        return drop;
    }
    if (f.type != TMA_TRANSPORT_FRAME_TENSOR) {
        /* Control frames are small and come eagerly; check them now. */
        if (rndv) {
            conn_flag(c, TMA_ERR_MALFORMED, "control frame sent by rendezvous");
            return drop;
        }
        if (tma_transport_frame_verify(&f, data, length) != TMA_OK) {
            conn_flag(c, TMA_ERR_CHECKSUM, "checksum mismatch");
            return drop;
        }
    }
    switch (f.type) {
    case TMA_TRANSPORT_FRAME_HELLO:
        if (c->outgoing || c->state != CONN_HELLO_WAIT)
            conn_flag(c, TMA_ERR_MALFORMED, "unexpected hello");
        else
            on_hello(t, c, &f, data, length);
        return UCS_OK;
    case TMA_TRANSPORT_FRAME_HELLO_ACK:
        if (!c->outgoing || c->state != CONN_CONNECTING)
            conn_flag(c, TMA_ERR_MALFORMED, "unexpected hello-ack");
        else
            on_hello_ack(t, c, &f, data, length);
        return UCS_OK;
    case TMA_TRANSPORT_FRAME_BYE:
        if (!c->authed) {
            conn_flag(c, TMA_ERR_MALFORMED, "bye before hello");
            return UCS_OK;
        }
        c->bye_received = 1;
        conn_start_close(c, CLOSE_FLUSH1);
        return UCS_OK;
    default:
        break;
    }
    /* A tensor. */
    if (c->state != CONN_OPEN) {
        if (c->state == CONN_CLOSING)
            return drop; /* we are closing: late data is not delivered */
        conn_flag(c, TMA_ERR_MALFORMED, "tensor before hello");
        return drop;
    }
    return on_chunk(t, c, &f, data, rndv, drop);
}

static void conn_request_cb(ucp_conn_request_h req, void *arg)
{
    tma_transport_t *t = arg;
    ucp_conn_request_attr_t attr;
    char addr[64] = "?";
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (ucp_conn_request_query(req, &attr) == UCS_OK)
        format_sockaddr((struct sockaddr *)&attr.client_address, sizeof attr.client_address, addr,
                        sizeof addr);
    if (t->shutdown || t->n_conns >= MAX_CONNS) {
        tma_log_warn(COMP, "rejected a connection from %s: %s", addr,
                     t->shutdown ? "closing" : "too many connections");
        ucp_listener_reject(t->listener, req);
        return;
    }
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
        conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_UNAVAILABLE);
    }
}

/* ------------------------------------------------------------------ commands on the progress
 * thread */

static void do_connect(tma_transport_t *t, cmd_t *cmd)
{
    if (t->shutdown) {
        cmd_complete(t, cmd, TMA_ERR_CLOSED);
        return;
    }
    conn_t *c = conn_new(t);
    if (!c) {
        cmd_complete(t, cmd, TMA_ERR_NOMEM);
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
        conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_UNAVAILABLE);
        return;
    }
    size_t len =
        tma_transport_hello_encode(t->job, t->token, c->ctl_payload, sizeof c->ctl_payload);
    control_header(t, TMA_TRANSPORT_FRAME_HELLO, t->job_id, c->ctl_payload, len, c->ctl_hdr);
    size_t hdr_len = sizeof c->ctl_hdr;
    if (cmd->fault == TMA_TRANSPORT_FAULT_PAYLOAD_BYTE)
        c->ctl_payload[len / 2] ^= 0x10;
    else
        tma_transport_frame_damage(c->ctl_hdr, cmd->fault, &hdr_len, &len);
    conn_send_ctl(c, c->ctl_hdr, hdr_len, c->ctl_payload, len);
}

static void send_finish(tma_transport_t *t, cmd_t *cmd, ucs_status_t status)
{
    conn_t *c = cmd->conn;
    for (cmd_t **pp = &t->active_sends; *pp; pp = &(*pp)->active_next) {
        if (*pp == cmd) {
            *pp = cmd->active_next;
            STAT_SUB(t, tx_active, 1);
            break;
        }
    }
    tma_status_t st;
    if (status == UCS_OK) {
        st = TMA_OK;
    } else if (cmd->timed_out) {
        st = TMA_ERR_TIMEOUT;
    } else if (status == UCS_ERR_CANCELED && t->shutdown) {
        st = TMA_ERR_CLOSED;
    } else {
        st = TMA_ERR_PEER_FAILED;
    }
    cmd->conn = NULL;
    cmd_complete(t, cmd, st);
    if (c)
        conn_unref(c);
}

static void send_done_cb(void *req, ucs_status_t status, void *user_data)
{
    cmd_t *cmd = user_data;
    ucp_request_free(req);
    send_finish(cmd->conn->t, cmd, status);
}

static void do_send(tma_transport_t *t, cmd_t *cmd)
{
    conn_t *c = t->shutdown ? NULL : conn_open_by_peer(t, cmd->peer);
    if (!c) {
        cmd_complete(t, cmd, t->shutdown ? TMA_ERR_CLOSED : TMA_ERR_UNAVAILABLE);
        return;
    }
    cmd->conn = c;
    c->refs++;
    ucp_request_param_t p;
    memset(&p, 0, sizeof p);
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p.cb.send = send_done_cb;
    p.user_data = cmd;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    p.memory_type = UCS_MEMORY_TYPE_HOST;
    void *req = ucp_am_send_nbx(c->ep, AM_ID, cmd->hdr, cmd->hdr_len, cmd->data, cmd->send_len, &p);
    if (req == NULL) {
        send_finish(t, cmd, UCS_OK);
    } else if (UCS_PTR_IS_ERR(req)) {
        send_finish(t, cmd, UCS_PTR_STATUS(req));
    } else {
        cmd->req = req;
        cmd->active_next = t->active_sends;
        t->active_sends = cmd;
        STAT_ADD(t, tx_active, 1);
    }
}

static void do_disconnect(tma_transport_t *t, cmd_t *cmd)
{
    conn_t *c = conn_open_by_peer(t, cmd->peer);
    if (!c) {
        cmd_complete(t, cmd, TMA_ERR_NOT_FOUND);
        return;
    }
    c->waiter = cmd;
    conn_start_close(c, CLOSE_FLUSH1);
}

static void do_kill(tma_transport_t *t, cmd_t *cmd)
{
    conn_t *c = conn_by_uid(t, cmd->conn_uid);
    if (c && !conn_gone(c)) {
        if (cmd->reason == TMA_ERR_CHECKSUM) {
            STAT_ADD(t, peers_flagged, 1);
            conn_doom(c, TMA_TRANSPORT_EV_FLAGGED, cmd->reason);
        } else {
            conn_doom(c, TMA_TRANSPORT_EV_FAILED, cmd->reason);
        }
    }
    cmd_complete(t, cmd, TMA_OK);
}

static void do_shutdown(tma_transport_t *t, cmd_t *cmd)
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
            conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_CLOSED);
    }
    cmd_complete(t, cmd, TMA_OK);
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
        chunk_settle(t, checked, UCS_OK);
        checked = next;
        n++;
    }
    while (c) {
        cmd_t *next = c->next;
        switch (c->kind) {
        case CMD_CONNECT:
            do_connect(t, c);
            break;
        case CMD_SEND:
            do_send(t, c);
            break;
        case CMD_DISCONNECT:
            do_disconnect(t, c);
            break;
        case CMD_KILL:
            do_kill(t, c);
            break;
        case CMD_SHUTDOWN:
            do_shutdown(t, c);
            break;
        }
        c = next;
        n++;
    }
    if (retry && t->held_head) {
        retry_held(t);
        n++;
    }
    return n;
}

/* Enforces deadlines; returns milliseconds to the next one (capped). */
static int check_deadlines(tma_transport_t *t)
{
    double now = tma_clock_now(), next = now + IDLE_WAKE_MS / 1000.0;
    for (cmd_t *s = t->active_sends; s; s = s->active_next) {
        if (s->deadline > 0 && now >= s->deadline && !s->timed_out && !conn_gone(s->conn)) {
            s->timed_out = 1;
            conn_t *c = s->conn;
            tma_log_warn(COMP, "a send to peer %u at %s ran past its deadline: disconnecting it",
                         c->peer, c->addr);
            conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_TIMEOUT);
            continue;
        }
        if (s->deadline > 0 && s->deadline < next)
            next = s->deadline;
    }
    for (conn_t *c = t->conns; c; c = c->next) {
        if (conn_gone(c) || c->deadline <= 0)
            continue;
        if (now >= c->deadline) {
            if (c->state == CONN_HELLO_WAIT) {
                tma_log_warn(COMP, "connection from %s sent no hello within %.1f s: closed",
                             c->addr, t->hello_timeout);
                conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_TIMEOUT);
            } else if (c->state == CONN_CONNECTING) {
                tma_log_error(COMP, "no answer from %s within the connect timeout", c->addr);
                conn_doom(c, TMA_TRANSPORT_EV_FAILED, TMA_ERR_TIMEOUT);
            } else {
                tma_log_warn(COMP, "closing the connection to %s took over %.0f s: forced", c->addr,
                             CLOSE_GRACE_S);
                conn_doom(c, TMA_TRANSPORT_EV_CLOSED, TMA_OK);
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
static pthread_mutex_t g_ucx_lock = PTHREAD_MUTEX_INITIALIZER;

static void *progress_main(void *arg)
{
    tma_transport_t *t = arg;
    for (;;) {
        int work = 0, stop = 0;
        pthread_mutex_lock(&g_ucx_lock);
        while (ucp_worker_progress(t->worker))
            work = 1;
        work |= process_doomed(t) > 0;
        work |= drain_commands(t) > 0;
        int wait_ms = check_deadlines(t);
        work |= process_doomed(t) > 0;
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
        pthread_mutex_unlock(&g_ucx_lock);
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

/* ------------------------------------------------------------------ lifetime */

void tma_transport_config_init(tma_transport_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_message_bytes = DEFAULT_MAX_MESSAGE;
    cfg->pool_bytes = DEFAULT_POOL_BYTES;
    cfg->hello_timeout = DEFAULT_HELLO_TIMEOUT;
}

static tma_status_t ucx_setup(tma_transport_t *t)
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
    ap.cb = am_cb;
    ap.arg = t;
    ap.flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA;
    s = ucp_worker_set_am_recv_handler(t->worker, &ap);
    if (s != UCS_OK) {
        tma_log_error(COMP, "registering the UCX message handler failed: %s", ucs_status_string(s));
        return TMA_ERR_UNAVAILABLE;
    }
    return TMA_OK;
}

static tma_status_t listener_setup(tma_transport_t *t, const char *listen)
{
    struct sockaddr_storage sa;
    socklen_t salen;
    tma_status_t st = parse_addr(listen, 1, &sa, &salen);
    if (st != TMA_OK)
        return st;
    ucp_listener_params_t lp;
    memset(&lp, 0, sizeof lp);
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = (struct sockaddr *)&sa;
    lp.sockaddr.addrlen = salen;
    lp.conn_handler.cb = conn_request_cb;
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
    format_sockaddr((struct sockaddr *)&la.sockaddr, sizeof la.sockaddr, t->listen_addr,
                    sizeof t->listen_addr);
    const struct sockaddr *bound = (const struct sockaddr *)&la.sockaddr;
    t->listen_port =
        ntohs(bound->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)bound)->sin6_port
                                           : ((const struct sockaddr_in *)bound)->sin_port);
    tma_log_info(COMP, "member %u listening on %s", t->self_id, t->listen_addr);
    return TMA_OK;
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
    t->job = strdup(cfg->job);
    t->token = strdup(token);
    if (!t->job || !t->token) {
        st = TMA_ERR_NOMEM;
        goto fail;
    }
    t->token_len = strlen(t->token);
    t->job_id = tma_transport_job_id(t->job);
    t->self_id = cfg->self_id;
    t->max_message = cfg->max_message_bytes ? cfg->max_message_bytes : DEFAULT_MAX_MESSAGE;
    t->pool_limit = cfg->pool_bytes ? cfg->pool_bytes : DEFAULT_POOL_BYTES;
    t->hello_timeout = cfg->hello_timeout > 0 ? cfg->hello_timeout : DEFAULT_HELLO_TIMEOUT;
    t->event_cb = cfg->event_cb;
    t->event_cb_arg = cfg->event_cb_arg;
    pthread_mutex_init(&t->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->done_cond, &ca);
    pthread_cond_init(&t->rx_cond, &ca);
    pthread_cond_init(&t->check_cond, &ca);
    pthread_condattr_destroy(&ca);

    pthread_mutex_lock(&g_ucx_lock);
    st = ucx_setup(t);
    if (st == TMA_OK && cfg->listen)
        st = listener_setup(t, cfg->listen);
    pthread_mutex_unlock(&g_ucx_lock);
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
    if (pthread_create(&t->checker, NULL, checker_main, t) != 0) {
        tma_log_error(COMP, "cannot start the checksum thread");
        st = TMA_ERR_NOMEM;
        goto fail;
    }
    t->checker_started = 1;
    if (pthread_create(&t->thread, NULL, progress_main, t) != 0) {
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
        cmd_submit(t, &cmd);
        cmd_wait(t, &cmd);
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
        cmd_complete(t, c, TMA_ERR_CLOSED);
    }
    pthread_mutex_lock(&g_ucx_lock);
    if (t->listener)
        ucp_listener_destroy(t->listener);
    if (t->worker)
        ucp_worker_destroy(t->worker);
    if (t->ctx)
        ucp_cleanup(t->ctx);
    pthread_mutex_unlock(&g_ucx_lock);
    /* Whatever is left of connections that did not close (the worker is gone). */
    for (chunk_t *k = t->held_head, *next; k; k = next) {
        next = k->next;
        free(k);
    }
    for (chunk_t *k = t->checked_head, *next; k; k = next) {
        /* Checked but never settled: the progress thread gave up first. */
        next = k->next;
        node_t *n = k->node;
        if (--n->chunks_busy == 0 && !n->listed) {
            if (n->pbuf) {
                tma_free_huge(n->pbuf->data, n->pbuf->cap);
                free(n->pbuf);
            }
            free(n);
        }
        free(k);
    }
    while (t->conns) {
        conn_t *c = t->conns;
        t->conns = c->next;
        for (node_t *n = c->assembling, *next; n; n = next) {
            next = n->next;
            if (n->pbuf) {
                tma_free_huge(n->pbuf->data, n->pbuf->cap);
                free(n->pbuf);
            }
            free(n);
        }
        free(c);
    }
    for (node_t *n = t->q_head, *next; n; n = next) {
        next = n->next;
        if (n->pbuf) {
            tma_free_huge(n->pbuf->data, n->pbuf->cap);
            free(n->pbuf);
        }
        free(n);
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
    tma_status_t st = parse_addr(addr, 0, &cmd.sa, &cmd.salen);
    if (st != TMA_OK)
        return st;
    snprintf(cmd.addr, sizeof cmd.addr, "%s", addr);
    cmd.deadline = deadline_from(timeout_s);
    cmd.fault = (tma_transport_fault_t)__atomic_exchange_n(&t->fault, 0, __ATOMIC_RELAXED);
    st = cmd_submit(t, &cmd);
    if (st != TMA_OK)
        return st;
    cmd_wait(t, &cmd);
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
    cmd.deadline = deadline_from(timeout_s);
    tma_status_t st = cmd_submit(t, &cmd);
    if (st != TMA_OK)
        return st;
    cmd_wait(t, &cmd);
    return cmd.st;
}

tma_status_t tma_transport_wait_peer(tma_transport_t *t, uint32_t peer, double timeout_s)
{
    double deadline = deadline_from(timeout_s);
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
        if (timeout_s == 0 || !cond_wait_until(&t->rx_cond, &t->lock, deadline))
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

/* ------------------------------------------------------------------ sending (API) */

static tma_status_t check_mem(tma_transport_mem_t mem, const char *what)
{
    if (mem == TMA_TRANSPORT_MEM_HOST)
        return TMA_OK;
    if (mem == TMA_TRANSPORT_MEM_CUDA) {
        tma_log_error(COMP,
                      "%s: CUDA memory is not supported yet (this UCX cannot send device "
                      "memory; staging through host memory comes with the CUDA backend)",
                      what);
        return TMA_ERR_UNSUPPORTED;
    }
    tma_log_error(COMP, "%s: unknown memory type %d", what, (int)mem);
    return TMA_ERR_INVALID;
}

/* Waits until the n sends of one window slot are done and records the first
 * failure of each peer. */
static void send_slot_wait(tma_transport_t *t, cmd_t *slot, size_t n, tma_status_t *res)
{
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < n; i++) {
        while (!slot[i].done)
            pthread_cond_wait(&t->done_cond, &t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    for (size_t i = 0; i < n; i++) {
        if (res[i] == TMA_OK && slot[i].st != TMA_OK)
            res[i] = slot[i].st;
        slot[i].done = 0;
    }
}

/*
 * The send path: the tensor goes out in frames of whole chunks.  This thread
 * checksums frame i while up to SEND_WINDOW - 1 earlier frames are on their
 * way, so the CRC work can overlap the transfer.  A tensor of up to
 * SEND_WINDOW chunks goes one chunk per frame; longer ones in up to
 * SEND_WINDOW frames of up to SEND_FRAME_CHUNKS chunks: every frame costs a
 * rendezvous and several thread wake-ups on both sides, which measured ~15 %
 * of the CPU per byte with 4 MiB frames on loopback (docs/benchmarks.md).
 * Every frame goes to every peer before the next is checksummed; a peer that
 * failed gets no further frames.
 */
tma_status_t tma_transport_send_many(tma_transport_t *t, const uint32_t *peers, size_t n,
                                     const tma_transport_meta_t *meta, const float *data,
                                     size_t count, tma_transport_mem_t mem, double timeout_s,
                                     tma_status_t *status_p)
{
    tma_status_t st = check_mem(mem, "send");
    if (st != TMA_OK)
        return st;
    size_t bytes;
    if (tma_mul_overflow(count, sizeof(float), &bytes) || bytes > t->max_message) {
        tma_log_error(COMP, "send: %zu values exceed the largest message (%" PRIu64 " bytes)",
                      count, t->max_message);
        return TMA_ERR_RANGE;
    }
    if (n == 0)
        return TMA_OK;
    if (!data && count)
        return TMA_ERR_INVALID;
    const size_t chunk = TMA_TRANSPORT_CHUNK_BYTES;
    size_t nchunks = bytes ? (bytes - 1) / chunk + 1 : 1;
    if (nchunks > TMA_TRANSPORT_MAX_CHUNKS) {
        tma_log_error(COMP, "send: %zu bytes need more than %u chunks", bytes,
                      TMA_TRANSPORT_MAX_CHUNKS);
        return TMA_ERR_RANGE;
    }
    size_t per = (nchunks + SEND_WINDOW - 1) / SEND_WINDOW;
    if (per > SEND_FRAME_CHUNKS)
        per = SEND_FRAME_CHUNKS;
    const size_t frame_bytes = per * chunk;
    size_t nframes = (nchunks + per - 1) / per;
    tma_status_t one_res, *res = status_p ? status_p : n == 1 ? &one_res : calloc(n, sizeof *res);
    cmd_t one_cmd[SEND_WINDOW];
    cmd_t *cmds = n == 1 ? one_cmd : calloc(SEND_WINDOW * n, sizeof *cmds);
    if (!res || !cmds) {
        if (res != status_p && res != &one_res)
            free(res);
        if (cmds != one_cmd)
            free(cmds);
        return TMA_ERR_NOMEM;
    }
    memset(cmds, 0, SEND_WINDOW * n * sizeof *cmds);
    for (size_t p = 0; p < n; p++)
        res[p] = TMA_OK;
    unsigned char hdr[SEND_WINDOW][TMA_TRANSPORT_HEADER_BYTES];
    void *copy = NULL;
    tma_transport_frame_t f;
    memset(&f, 0, sizeof f);
    f.version = TMA_TRANSPORT_VERSION;
    f.type = TMA_TRANSPORT_FRAME_TENSOR;
    f.tag = meta ? meta->tag : 0;
    f.epoch = meta ? meta->epoch : 0;
    f.round = meta ? meta->round : 0;
    f.sender = t->self_id;
    f.job_id = t->job_id;
    f.total = bytes;
    f.seq = (uint16_t)__atomic_fetch_add(&t->next_seq, 1, __ATOMIC_RELAXED);
    tma_transport_fault_t fault =
        (tma_transport_fault_t)__atomic_exchange_n(&t->fault, 0, __ATOMIC_RELAXED);
    double deadline = deadline_from(timeout_s);

    for (size_t i = 0; i < nframes; i++) {
        size_t s = i % SEND_WINDOW, off = i * frame_bytes;
        cmd_t *slot = &cmds[s * n];
        if (i >= SEND_WINDOW)
            send_slot_wait(t, slot, n, res);
        const unsigned char *payload = (const unsigned char *)data + off;
        f.chunk = (uint16_t)(i * per);
        f.length = bytes - off < frame_bytes ? bytes - off : frame_bytes;
        if (i == 1 && fault == TMA_TRANSPORT_FAULT_DUP_CHUNK && f.length == frame_bytes)
            f.chunk = 0; /* test fault: the first frame's chunks again */
        tma_transport_frame_encode(&f, payload, f.length, hdr[s]);
        size_t hdr_len = TMA_TRANSPORT_HEADER_BYTES, send_len = f.length;
        /* Test faults: a payload bit in the last frame (after others landed),
         * anything else in the first. */
        if (i == nframes - 1 && fault == TMA_TRANSPORT_FAULT_PAYLOAD_BYTE && f.length) {
            copy = malloc(f.length); /* test hook only: never damage the caller's data */
            if (copy) {
                memcpy(copy, payload, f.length);
                ((unsigned char *)copy)[f.length / 2] ^= 0x10;
                payload = copy;
            }
        } else if (i == 0 && fault != TMA_TRANSPORT_FAULT_NONE &&
                   fault != TMA_TRANSPORT_FAULT_PAYLOAD_BYTE &&
                   fault != TMA_TRANSPORT_FAULT_DUP_CHUNK) {
            tma_transport_frame_damage(hdr[s], fault, &hdr_len, &send_len);
        }
        pthread_mutex_lock(&t->lock);
        int closing = t->closing;
        for (size_t p = 0; p < n; p++) {
            cmd_t *c = &slot[p];
            memset(c, 0, sizeof *c);
            c->kind = CMD_SEND;
            c->peer = peers[p];
            c->hdr = hdr[s];
            c->hdr_len = hdr_len;
            c->data = payload;
            c->send_len = send_len;
            c->deadline = deadline;
            if (res[p] != TMA_OK || closing) {
                if (closing)
                    res[p] = TMA_ERR_CLOSED;
                c->done = 1; /* nothing to send to a failed peer */
                continue;
            }
            if (t->cmd_tail)
                t->cmd_tail->next = c;
            else
                t->cmd_head = c;
            t->cmd_tail = c;
        }
        pthread_mutex_unlock(&t->lock);
        wake(t);
    }
    for (size_t i = 0; i < SEND_WINDOW && i < nframes; i++)
        send_slot_wait(t, &cmds[((nframes - 1 - i) % SEND_WINDOW) * n], n, res);
    st = TMA_OK;
    for (size_t p = 0; p < n; p++) {
        if (res[p] == TMA_OK) {
            STAT_ADD(t, msgs_sent, 1);
            STAT_ADD(t, bytes_sent, bytes);
        } else if (st == TMA_OK) {
            st = res[p];
        }
    }
    if (res != status_p && res != &one_res)
        free(res);
    if (cmds != one_cmd)
        free(cmds);
    free(copy);
    return st;
}

tma_status_t tma_transport_send(tma_transport_t *t, uint32_t peer, const tma_transport_meta_t *meta,
                                const float *data, size_t count, tma_transport_mem_t mem,
                                double timeout_s)
{
    return tma_transport_send_many(t, &peer, 1, meta, data, count, mem, timeout_s, NULL);
}

/* ------------------------------------------------------------------ receiving (API) */

tma_status_t tma_transport_post(tma_transport_t *t, uint32_t peer, uint32_t tag, float *buf,
                                size_t count, tma_transport_mem_t mem)
{
    tma_status_t st = check_mem(mem, "post");
    if (st != TMA_OK)
        return st;
    size_t bytes;
    if (!buf || tma_mul_overflow(count, sizeof(float), &bytes))
        return TMA_ERR_INVALID;
    post_t *p = calloc(1, sizeof *p);
    if (!p)
        return TMA_ERR_NOMEM;
    p->peer = peer;
    p->tag = tag;
    p->buf = buf;
    p->bytes = bytes;
    p->state = POST_FREE;
    pthread_mutex_lock(&t->lock);
    for (post_t *q = t->posts; q; q = q->next) {
        if (q->buf == buf) {
            pthread_mutex_unlock(&t->lock);
            free(p);
            tma_log_error(COMP, "post: buffer %p is already posted", (void *)buf);
            return TMA_ERR_INVALID;
        }
    }
    post_t **pp = &t->posts;
    while (*pp)
        pp = &(*pp)->next;
    *pp = p;
    int kick = t->held_waiting;
    if (kick)
        t->retry = 1;
    pthread_mutex_unlock(&t->lock);
    if (kick)
        wake(t);
    return TMA_OK;
}

static void node_free_locked(tma_transport_t *t, node_t *n)
{
    if (n->post) {
        post_unlink_locked(t, n->post);
        free(n->post);
        n->post = NULL;
        pthread_cond_broadcast(&t->rx_cond);
    }
    if (n->pbuf)
        pool_put_locked(t, n->pbuf);
    free(n);
}

tma_status_t tma_transport_post_cancel(tma_transport_t *t, float *buf, double timeout_s)
{
    double deadline = deadline_from(timeout_s);
    int killed = 0;
    tma_status_t st = TMA_ERR_NOT_FOUND;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        post_t *p = t->posts;
        while (p && p->buf != buf)
            p = p->next;
        if (!p || p->state == POST_DELIVERED)
            break;
        if (p->state == POST_BUSY) {
            if (!killed && timeout_s >= 0 && tma_clock_now() >= deadline) {
                cmd_t *k = calloc(1, sizeof *k);
                if (k) {
                    k->kind = CMD_KILL;
                    k->detached = 1;
                    k->conn_uid = p->conn_uid;
                    k->reason = TMA_ERR_TIMEOUT;
                    killed = 1;
                    tma_log_warn(COMP, "a tensor still arriving into a cancelled post: closing "
                                       "that connection");
                    pthread_mutex_unlock(&t->lock);
                    if (cmd_submit(t, k) != TMA_OK)
                        free(k);
                    pthread_mutex_lock(&t->lock);
                    continue;
                }
            }
            cond_wait_until(&t->rx_cond, &t->lock, killed ? 0 : deadline);
            continue;
        }
        if (p->state == POST_FILLED) {
            node_t **pp = &t->q_head, *prev = NULL;
            while (*pp && (*pp)->post != p) {
                prev = *pp;
                pp = &(*pp)->next;
            }
            if (*pp) {
                node_t *n = *pp;
                *pp = n->next;
                if (t->q_tail == n)
                    t->q_tail = prev;
                n->post = NULL;
                free(n);
            }
        }
        post_unlink_locked(t, p);
        free(p);
        st = TMA_OK;
        break;
    }
    pthread_mutex_unlock(&t->lock);
    return st;
}

static int node_matches(const node_t *n, uint32_t peer, uint32_t tag)
{
    if (peer != TMA_TRANSPORT_ANY_PEER && n->peer != peer)
        return 0;
    return n->kind == TMA_TRANSPORT_MSG_EVENT || tag == TMA_TRANSPORT_ANY_TAG ||
           n->frame.tag == tag;
}

tma_status_t tma_transport_recv(tma_transport_t *t, uint32_t peer, uint32_t tag, double timeout_s,
                                tma_transport_msg_t *msg_p)
{
    double deadline = deadline_from(timeout_s);
    for (;;) {
        node_t *n = NULL;
        tma_status_t st = TMA_OK;
        pthread_mutex_lock(&t->lock);
        for (;;) {
            if (t->closing) {
                st = TMA_ERR_CLOSED;
                break;
            }
            node_t *prev = NULL;
            for (n = t->q_head; n && !node_matches(n, peer, tag); n = n->next)
                prev = n;
            if (n) {
                if (prev)
                    prev->next = n->next;
                else
                    t->q_head = n->next;
                if (t->q_tail == n)
                    t->q_tail = prev;
                if (n->post)
                    n->post->state = POST_DELIVERED;
                break;
            }
            if (timeout_s == 0 || !cond_wait_until(&t->rx_cond, &t->lock, deadline)) {
                st = TMA_ERR_TIMEOUT;
                break;
            }
        }
        pthread_mutex_unlock(&t->lock);
        if (st != TMA_OK)
            return st;

        memset(msg_p, 0, sizeof *msg_p);
        msg_p->kind = n->kind;
        msg_p->peer = n->peer;
        msg_p->priv_ = n;
        if (n->kind == TMA_TRANSPORT_MSG_EVENT) {
            msg_p->event = n->ev;
            return TMA_OK;
        }
        STAT_ADD(t, msgs_received, 1);
        STAT_ADD(t, bytes_received, n->bytes);
        msg_p->meta.tag = n->frame.tag;
        msg_p->meta.epoch = n->frame.epoch;
        msg_p->meta.round = n->frame.round;
        msg_p->data = n->data;
        msg_p->count = n->bytes / sizeof(float);
        msg_p->in_place = n->post != NULL;
        return TMA_OK;
    }
}

void tma_transport_msg_release(tma_transport_t *t, tma_transport_msg_t *msg)
{
    node_t *n = msg->priv_;
    if (n) {
        pthread_mutex_lock(&t->lock);
        node_free_locked(t, n);
        int kick = t->retry;
        pthread_mutex_unlock(&t->lock);
        if (kick)
            wake(t);
    }
    memset(msg, 0, sizeof *msg);
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
