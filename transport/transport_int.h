/*
 * transport_int.h: the transport's private structs and the functions its
 * files share (none of this is part of tma_transport.h).
 *
 * One progress thread owns the UCX worker.  API calls never touch UCX: they
 * put a command on a queue, write an eventfd and (for blocking calls) wait
 * on a condition variable until the progress thread completes the command.
 * Arrivals go the other way: the progress thread validates each frame's
 * header in the active-message callback, chooses a destination (a posted
 * buffer or a pooled one), receives the data in place (UCX rendezvous for
 * large tensors), has each chunk's CRC checked (long chunks by the checker
 * thread) and appends the complete tensor to the receive queue, where
 * tma_transport_recv() hands it out.
 *
 * The files, one concern each:
 *   transport.c  lifetime (create, destroy), connect/disconnect, statistics
 *   progress.c   the worker, the command queue, deadlines, the progress loop
 *   conn.c       a connection's life: accept, connect, hello, bye, close, end
 *   rx.c         arrivals: receive, assembly, pool, posts, the CRC checker, recv
 *   send.c       the send window and its test-fault hook
 *   frame.c      the wire format (pure functions)
 *   reach.c      why an address may be unreachable: the route's interface, UCX_NET_DEVICES
 *   auth.c       the hello's HMAC, nonces and MAC comparison (libcrypto)
 *
 * Locking: t->lock guards the command queue, the receive queue, the pool,
 * the posts, the open-peer table, the checker's queues and the condition
 * variables.  Everything else (connections, in-flight requests, held
 * arrivals) belongs to the progress thread alone.  UCX is never called with
 * the lock held, and only under transport_ucx_lock (progress.c says why).
 */
#ifndef TMA_TRANSPORT_INT_H
#define TMA_TRANSPORT_INT_H

#include "tma_transport.h"

#include <pthread.h>
#include <sys/socket.h>

#include <ucp/api/ucp.h>

#define COMP "transport"

#define AM_ID 17
#define ACK_BYTES 8
#define CLOSE_GRACE_S 5.0 /* a clean close that takes longer is forced */
#define MAX_CONNS 4096    /* connections beyond this are rejected */
/* Connections that have not said hello yet: at most this many from one
 * host, and in all; one more ends the oldest of the host holding the most
 * (conn.c: bound_unauthed). */
#define MAX_UNAUTH_PER_HOST 16
#define MAX_UNAUTH 128
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
    int doomed; /* to be ended by the progress loop (see transport_conn_doom) */
    tma_transport_event_kind_t doom_kind;
    tma_status_t doom_reason;
    int refs; /* 1 for the list + one per UCX request that names it */
    uint32_t peer;
    char addr[64];
    double deadline;    /* hello or clean-close deadline; 0 none */
    struct cmd *waiter; /* connect() or disconnect() waiting on this connection */
    /* The handshake (auth.c): both nonces, the lease the connector named,
     * and where each side is: a connector that sent its proof, a listener
     * that sent its challenge. */
    unsigned char nonce_c[TMA_TRANSPORT_NONCE_BYTES];
    unsigned char nonce_s[TMA_TRANSPORT_NONCE_BYTES];
    uint64_t lease;
    int challenged;
    int proved;
    int listener_ok; /* the listener's challenge carried the right MAC */
    int replay; /* test fault: send the recorded proof of the last connect */
    /* Control frames stay here until UCX is done with them: the first one a
     * side sends (hello, challenge, or a refusal) in ctl_*, the second (proof
     * or ack) in ctl2_*. */
    unsigned char ctl_hdr[TMA_TRANSPORT_HEADER_BYTES];
    unsigned char ctl_payload[TMA_TRANSPORT_HELLO_MAX];
    unsigned char ctl2_hdr[TMA_TRANSPORT_HEADER_BYTES];
    unsigned char ctl2_payload[TMA_TRANSPORT_CHALLENGE_BYTES];
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
    uint64_t lease; /* the lease its sender proved (connections made to us) */
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
    uint64_t self_lease;
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
    /* The hello and proof of the last accepted connect, for the replay test
     * fault (progress thread only). */
    unsigned char last_nonce_c[TMA_TRANSPORT_NONCE_BYTES];
    unsigned char last_proof[TMA_TRANSPORT_MAC_BYTES];
    int have_last;
    uint32_t next_seq;        /* tensor numbers for the frames' seq field */
};

#define STAT_ADD(t, field, v) __atomic_add_fetch(&(t)->st.field, (v), __ATOMIC_RELAXED)
#define STAT_SUB(t, field, v) __atomic_sub_fetch(&(t)->st.field, (v), __ATOMIC_RELAXED)

void transport_conn_doom(conn_t *c, tma_transport_event_kind_t kind, tma_status_t reason);

/* ------------------------------------------------------------------ auth.c */

/* Fills a nonce from OpenSSL's RAND_bytes; TMA_ERR_UNAVAILABLE (logged) when
 * it cannot. */
tma_status_t transport_nonce(unsigned char nonce[TMA_TRANSPORT_NONCE_BYTES]);

/* ------------------------------------------------------------------ frame.c */

/* Damages an encoded header in place for a test fault.  Faults that change
 * how much is sent adjust *hdr_len_p (header bytes sent) and *send_len_p
 * (payload bytes sent).  TMA_TRANSPORT_FAULT_PAYLOAD_BYTE and
 * TMA_TRANSPORT_FAULT_DUP_CHUNK are the caller's (they need the payload or
 * the frame's fields). */
void transport_frame_damage(unsigned char hdr[TMA_TRANSPORT_HEADER_BYTES],
                            tma_transport_fault_t fault, size_t *hdr_len_p, size_t *send_len_p);

/* ------------------------------------------------------------------ progress.c */

/* Every UCX call of every transport in the process is made under this lock. */
extern pthread_mutex_t transport_ucx_lock;

/* Wakes the progress thread (any thread). */
void transport_wake(tma_transport_t *t);
/* The absolute monotonic deadline timeout_s from now; 0 (none) when negative. */
double transport_deadline_from(double timeout_s);
/* With t->lock held: appends c to the command queue (the caller wakes the
 * progress thread). */
void transport_cmd_append_locked(tma_transport_t *t, cmd_t *c);
/* Queues a command for the progress thread; TMA_ERR_CLOSED once destroy began. */
tma_status_t transport_cmd_submit(tma_transport_t *t, cmd_t *c);
/* Waits until the progress thread completed c. */
void transport_cmd_wait(tma_transport_t *t, cmd_t *c);
/* Progress thread: completes c with st (frees it when detached). */
void transport_cmd_complete(tma_transport_t *t, cmd_t *c, tma_status_t st);
/* Creates the context and worker and registers the message handler;
 * transport_listen then starts the listener.  Under transport_ucx_lock. */
tma_status_t transport_ucx_setup(tma_transport_t *t);
tma_status_t transport_listen(tma_transport_t *t, const char *listen);
/* The progress thread. */
void *transport_progress_main(void *arg);

/* ------------------------------------------------------------------ conn.c */

/* Parses "host:port" or "[v6]:port" ("*" or an empty host: any address,
 * when passive); logs and returns TMA_ERR_CONFIG when it cannot. */
tma_status_t transport_parse_addr(const char *addr, int passive, struct sockaddr_storage *sa_p,
                                  socklen_t *len_p);
void transport_format_sockaddr(const struct sockaddr *sa, socklen_t len, char *out, size_t cap);
/* Progress thread: connection lookups and references. */
void transport_conn_unref(conn_t *c);
conn_t *transport_conn_by_ep(tma_transport_t *t, ucp_ep_h ep);
conn_t *transport_conn_open_by_peer(tma_transport_t *t, uint32_t peer);
/* Closed, failed or marked to be ended. */
int transport_conn_gone(const conn_t *c);
/* Marks c to be ended by the progress loop (the first kind and reason win). */
void transport_conn_doom(conn_t *c, tma_transport_event_kind_t kind, tma_status_t reason);
/* Logs a peer's bad frame and dooms its connection as flagged. */
void transport_conn_flag(conn_t *c, tma_status_t reason, const char *why);
/* Ends every doomed connection; returns how many. */
int transport_process_doomed(tma_transport_t *t);
/* A hello, hello-ack or bye whose header and CRC passed (arrival checks). */
void transport_conn_on_control(tma_transport_t *t, conn_t *c, const tma_transport_frame_t *f,
                               const void *data, size_t len);
/* The listener's callback: a peer connects. */
void transport_conn_request_cb(ucp_conn_request_h req, void *arg);
/* The commands of connection life, run by the progress thread. */
void transport_do_connect(tma_transport_t *t, cmd_t *cmd);
void transport_do_disconnect(tma_transport_t *t, cmd_t *cmd);
void transport_do_kill(tma_transport_t *t, cmd_t *cmd);
void transport_do_shutdown(tma_transport_t *t, cmd_t *cmd);

/* ------------------------------------------------------------------ rx.c */

/* The active-message handler: every frame arrives here. */
ucs_status_t transport_am_cb(void *arg, const void *header, size_t header_length, void *data,
                             size_t length, const ucp_am_recv_param_t *param);
/* Gives back the held chunks of c and fails its partly arrived tensors. */
void transport_conn_drop_arrivals(conn_t *c);
/* A chunk checked by the checker thread (or failed with status) settles. */
void transport_chunk_settle(tma_transport_t *t, chunk_t *k, ucs_status_t status);
/* Retries held chunks now that a buffer was freed or posted. */
void transport_retry_held(tma_transport_t *t);
/* The checker thread. */
void *transport_checker_main(void *arg);
/* With t->lock held: queues n (a tensor or an event) for recv(). */
void transport_queue_append_locked(tma_transport_t *t, node_t *n);
/* With t->lock held: frees a received or abandoned node, its post and
 * (back to the pool) its buffer. */
void transport_node_free_locked(tma_transport_t *t, node_t *n);

/* ------------------------------------------------------------------ send.c */

/* TMA_OK for host memory; logs why not for anything else. */
tma_status_t transport_check_mem(tma_transport_mem_t mem, const char *what);
/* Progress thread: hands one frame of a send to UCX. */
void transport_do_send(tma_transport_t *t, cmd_t *cmd);

#endif
