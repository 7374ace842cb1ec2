/*
 * tma_transport.h: the UCX tensor transport.  A tma_transport_t is one
 * endpoint of the data plane: one UCX context and worker, an optional
 * listener on host:port, and connections to peers, each identified by the
 * peer's member id (its "sender" id).  It moves float32 tensors (initial,
 * local and global weights, gradients) as framed messages: a 64-byte header
 * (docs/transport.md) with a CRC32C over header and payload, validated
 * before anything is delivered.  Tensors over 4 MiB travel as 4 MiB chunks,
 * each a frame of its own, checked as it lands; the sender checksums one
 * chunk while others are on the wire.
 *
 * A connection starts with a challenge and response keyed by the job token
 * (a shared secret that never travels): the connector's hello names the job,
 * its member id, its lease and a fresh nonce; the listener answers with a
 * nonce of its own and an HMAC-SHA256 over both nonces, the job, the ids and
 * the lease, and the connector answers with its own HMAC over the same.  Each
 * side checks the other's before the connection counts, so a peer without
 * the token is refused, a recorded hello replayed later fails (the other
 * side's nonce is new), and a connection never replaces a live member's
 * without proving the same key.  Refusals are logged and never shown to the
 * application.  A frame with a bad magic, version,
 * type, length, job or checksum is dropped with a logged error, and its
 * sender is flagged and disconnected.
 *
 * Progress: each transport owns one progress thread, started by
 * tma_transport_create() and joined by tma_transport_destroy().  It is the
 * only thread that touches the UCX worker: it sleeps on the worker's event
 * fd and on an eventfd through which the API calls hand it commands, and it
 * runs the callbacks.  Applications never progress UCX themselves.
 *
 * Thread-safety: every function may be called from any number of threads
 * at once, except tma_transport_create() and tma_transport_destroy(), which
 * must not race with any other call on the same transport.  The peer
 * callback runs on the progress thread: it must be quick and must not call
 * any tma_transport function.
 *
 * Memory: senders' buffers are read in place (no copy) until the send
 * returns.  Receives land either in a buffer the application posted for a
 * peer's next tensor (tma_transport_post), or in a reusable buffer from the
 * transport's receive pool; the pool allocates only when no free buffer fits
 * and never holds more than its limit (a peer whose message does not fit
 * waits: back-pressure).  CUDA memory: the interface takes a memory type,
 * but the distribution's UCX 1.13 cannot send device memory and the
 * transport does not stage it: TMA_TRANSPORT_MEM_CUDA returns
 * TMA_ERR_UNSUPPORTED.  Callers send host memory; a trainer on a GPU hands
 * out host copies of its parameter and gradient blocks for that.
 *
 * Environment: UCX reads its UCX_* variables when a transport is created.
 * Connections use UCP_ERR_HANDLING_MODE_PEER, which UCX 1.13 serves over TCP
 * only, so UCX_TLS (when set) must include tcp; UCX_NET_DEVICES=lo confines
 * a single-machine job to loopback.  TMA_JOB_TOKEN gives the job token when
 * the configuration has none.
 */
#ifndef TMA_TRANSPORT_H
#define TMA_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "tma_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tma_transport tma_transport_t;

/* ------------------------------------------------------------------ frames */

#define TMA_TRANSPORT_MAGIC 0x46414d54u /* the bytes "TMAF" read as a little-endian u32 */
#define TMA_TRANSPORT_VERSION 2
#define TMA_TRANSPORT_HEADER_BYTES 64
/* A tensor is cut into chunks of this many bytes (the last one shorter), and
 * travels as one or more frames, each carrying one or more whole chunks in a
 * row (the last frame may end with the short chunk) with its own header and
 * CRC, so that checksumming one frame can overlap the transfer of the
 * others.  A frame's chunk field is the index of its first chunk. */
#define TMA_TRANSPORT_CHUNK_BYTES (4u << 20)
/* A tensor has at most this many chunks (the chunk index is a u16). */
#define TMA_TRANSPORT_MAX_CHUNKS 65536u
/* A frame carries at most this many payload bytes (16 chunks). */
#define TMA_TRANSPORT_FRAME_MAX_BYTES (64u << 20)
/* The longest job name a hello may carry and the longest job token (bytes). */
#define TMA_TRANSPORT_JOB_MAX 255
#define TMA_TRANSPORT_TOKEN_MAX 255
/* The nonces and MACs of the hello (HMAC-SHA256). */
#define TMA_TRANSPORT_NONCE_BYTES 32
#define TMA_TRANSPORT_MAC_BYTES 32
/* The fixed part of a hello: flags, job length, reserved, lease, nonce. */
#define TMA_TRANSPORT_HELLO_FIXED (16 + TMA_TRANSPORT_NONCE_BYTES)
/* The payload of a hello is at most this long. */
#define TMA_TRANSPORT_HELLO_MAX (TMA_TRANSPORT_HELLO_FIXED + TMA_TRANSPORT_JOB_MAX)
/* A challenge: the listener's nonce and MAC; a proof: the connector's MAC. */
#define TMA_TRANSPORT_CHALLENGE_BYTES (TMA_TRANSPORT_NONCE_BYTES + TMA_TRANSPORT_MAC_BYTES)
#define TMA_TRANSPORT_PROOF_BYTES TMA_TRANSPORT_MAC_BYTES

typedef enum {
    TMA_TRANSPORT_FRAME_HELLO = 1,     /* connector -> listener: job, lease, nonce */
    TMA_TRANSPORT_FRAME_HELLO_ACK = 2, /* listener -> connector: accepted or why not */
    TMA_TRANSPORT_FRAME_TENSOR = 3,    /* a float32 tensor (payload length a multiple of 4) */
    TMA_TRANSPORT_FRAME_BYE = 4,       /* the sender is closing the connection cleanly */
    TMA_TRANSPORT_FRAME_CHALLENGE = 5, /* listener -> connector: its nonce and MAC */
    TMA_TRANSPORT_FRAME_PROOF = 6,     /* connector -> listener: its MAC */
} tma_transport_frame_type_t;

/* The answer in a HELLO_ACK. */
typedef enum {
    TMA_TRANSPORT_HELLO_ACCEPTED = 0,
    TMA_TRANSPORT_HELLO_WRONG_JOB = 1,
    TMA_TRANSPORT_HELLO_WRONG_TOKEN = 2, /* the proof did not match: not this job's key */
    TMA_TRANSPORT_HELLO_MALFORMED = 3,
} tma_transport_hello_result_t;

/* A decoded frame header (the wire layout is in docs/transport.md). */
typedef struct tma_transport_frame {
    uint16_t version;
    uint16_t type;   /* tma_transport_frame_type_t */
    uint32_t tag;    /* application-defined kind of tensor; 0 on control frames */
    uint32_t sender; /* the sender's member id */
    uint64_t job_id; /* tma_transport_job_id(job name) */
    uint64_t epoch;  /* the coordinator epoch the sender acts under */
    uint64_t round;  /* the aggregation round */
    uint64_t length; /* payload bytes after the header (this chunk's) */
    uint64_t total;  /* tensor frames: bytes of the whole tensor; else 0 */
    uint16_t chunk;  /* tensor frames: payload goes at chunk * TMA_TRANSPORT_CHUNK_BYTES */
    uint16_t seq;    /* tensor frames: the sender's tensor number (mod 2^16) */
    uint32_t crc;    /* CRC32C of header bytes 0..59, then of the payload */
} tma_transport_frame_t;

/* The 64-bit job id of a job name (FNV-1a), carried in every header. */
uint64_t tma_transport_job_id(const char *job);

/*
 * Writes f's header to out[0..63], with the CRC32C of its first 60 bytes
 * followed by payload[0..len) (len must equal f->length; the caller checks).
 * Sets f->crc.  Pure: no I/O, no allocation.
 */
void tma_transport_frame_encode(tma_transport_frame_t *f, const void *payload, size_t len,
                                unsigned char out[TMA_TRANSPORT_HEADER_BYTES]);

/*
 * Decodes and validates a header: `len` bytes at `bytes` (fewer than 64 is a
 * truncated header).  Checks magic, version, type and lengths: a tensor's
 * total is a multiple of 4 and at most max_payload, its chunk index lies in
 * the tensor, and its length covers whole chunks from there (or runs exactly
 * to the tensor's end), is at most TMA_TRANSPORT_FRAME_MAX_BYTES and is zero
 * only for an empty tensor; hellos carry 8 to TMA_TRANSPORT_HELLO_MAX bytes,
 * acks 8, byes 0, and control frames have tag, total, chunk and seq 0.
 * It does not check the CRC (the payload may not have arrived yet).
 * Returns TMA_OK and fills *f_p, or TMA_ERR_MALFORMED with *why_p (when not
 * NULL) set to a constant description.  Pure: reads only bytes[0..len).
 */
tma_status_t tma_transport_frame_decode(const void *bytes, size_t len, uint64_t max_payload,
                                        tma_transport_frame_t *f_p, const char **why_p);

/* Checks a decoded frame's CRC against its payload (len = f->length bytes).
 * TMA_OK, or TMA_ERR_CHECKSUM. */
tma_status_t tma_transport_frame_verify(const tma_transport_frame_t *f, const void *payload,
                                        size_t len);

/* How many chunks a decoded tensor frame carries (1 for an empty tensor). */
uint32_t tma_transport_frame_chunks(const tma_transport_frame_t *f);

/* A decoded hello. */
typedef struct tma_transport_hello {
    const char *job; /* points into the payload, not NUL-terminated */
    size_t job_len;
    uint64_t lease; /* the connector's lease (0: none) */
    const unsigned char *nonce; /* TMA_TRANSPORT_NONCE_BYTES, into the payload */
} tma_transport_hello_t;

/* Hello payload: u32 flags (0), u16 job length, u16 reserved (0), u64 lease,
 * the connector's nonce, the job name.  encode writes at most
 * TMA_TRANSPORT_HELLO_MAX bytes to out and returns the length, or 0 when the
 * job is too long or empty. */
size_t tma_transport_hello_encode(const char *job, uint64_t lease,
                                  const unsigned char nonce[TMA_TRANSPORT_NONCE_BYTES],
                                  unsigned char *out, size_t cap);
/* Parses a hello payload into *h_p (pointers into `payload`).
 * TMA_ERR_MALFORMED with *why_p on any inconsistency. */
tma_status_t tma_transport_hello_decode(const void *payload, size_t len, tma_transport_hello_t *h_p,
                                        const char **why_p);

/* Who computes a hello MAC: the listener (in its challenge) or the
 * connector (in its proof); the two never equal each other. */
typedef enum {
    TMA_TRANSPORT_MAC_LISTENER = 0,
    TMA_TRANSPORT_MAC_CONNECTOR = 1,
} tma_transport_mac_role_t;

/* The HMAC-SHA256, keyed by the job token, over the role, the job name, the
 * connector's and the listener's member ids, the connector's lease and both
 * nonces (docs/transport.md gives the exact bytes).  OpenSSL's libcrypto
 * computes it.  TMA_ERR_INVALID for an empty key or job; TMA_ERR_NOMEM when
 * libcrypto fails.  Pure otherwise. */
tma_status_t tma_transport_hello_mac(const char *token, size_t token_len, tma_transport_mac_role_t role,
                                     const char *job, size_t job_len, uint32_t connector,
                                     uint32_t listener, uint64_t lease,
                                     const unsigned char nonce_c[TMA_TRANSPORT_NONCE_BYTES],
                                     const unsigned char nonce_s[TMA_TRANSPORT_NONCE_BYTES],
                                     unsigned char mac[TMA_TRANSPORT_MAC_BYTES]);
/* 1 when two MACs are equal, compared in constant time (CRYPTO_memcmp). */
int tma_transport_mac_equal(const unsigned char *a, const unsigned char *b);

/* ------------------------------------------------------------------ configuration */

typedef enum {
    TMA_TRANSPORT_MEM_HOST = 0, /* ordinary host memory */
    TMA_TRANSPORT_MEM_CUDA = 1, /* device memory: TMA_ERR_UNSUPPORTED (see above) */
} tma_transport_mem_t;

typedef enum {
    TMA_TRANSPORT_EV_CONNECTED = 0, /* a peer passed the hello (either direction) */
    TMA_TRANSPORT_EV_CLOSED = 1,    /* the connection ended cleanly (bye, or our disconnect) */
    TMA_TRANSPORT_EV_FAILED = 2,    /* the peer died, reset, timed out or was replaced */
    TMA_TRANSPORT_EV_FLAGGED = 3,   /* the peer sent a bad frame and was disconnected */
} tma_transport_event_kind_t;

/* Who, and what happened.  `reason` says why a connection ended:
 * TMA_OK (clean), TMA_ERR_PEER_FAILED (died or reset), TMA_ERR_TIMEOUT (a
 * send to it ran past its deadline), TMA_ERR_FENCED (a newer connection with
 * the same member id replaced it), TMA_ERR_MALFORMED or TMA_ERR_CHECKSUM (a
 * bad frame), TMA_ERR_CLOSED (this transport is being destroyed). */
typedef struct tma_transport_event {
    tma_transport_event_kind_t kind;
    uint32_t peer; /* the peer's member id */
    char addr[64]; /* the peer's "host:port" as seen from here */
    tma_status_t reason;
    uint64_t lease; /* the lease the peer proved in its hello (connections it made to us) */
} tma_transport_event_t;

/* Runs on the progress thread; `ev` is valid during the call only.  For an
 * end of a connection it returns before the same event is queued for
 * tma_transport_recv(), so a thread that received the event can count on
 * the callback having run. */
typedef void (*tma_transport_event_cb_t)(void *arg, const tma_transport_event_t *ev);

typedef struct tma_transport_config {
    const char *job;   /* job name (required, 1..255 bytes) */
    const char *token; /* job token; NULL: $TMA_JOB_TOKEN; must end up non-empty */
    uint32_t self_id;  /* this process's member id, sent as "sender" */
    uint64_t self_lease; /* this member's etcd lease, bound into its hellos (0: none) */
    /* "host:port" to listen on ("0.0.0.0:0" any interface and a free port;
     * "[::1]:7000" for IPv6); NULL: no listener (this side only connects). */
    const char *listen;
    tma_transport_event_cb_t event_cb; /* optional */
    void *event_cb_arg;
    uint64_t max_message_bytes; /* largest tensor payload accepted (default 4 GiB) */
    uint64_t pool_bytes;        /* most bytes the receive pool holds (default 4 GiB) */
    double hello_timeout;       /* seconds a new connection has to say hello (default 10) */
} tma_transport_config_t;

/* Fills in the defaults (every pointer NULL). */
void tma_transport_config_init(tma_transport_config_t *cfg);

/* ------------------------------------------------------------------ lifetime */

/*
 * Creates the UCX context and worker, the listener (when cfg->listen is
 * set) and the progress thread.  Errors: TMA_ERR_CONFIG (no job or token, a
 * bad listen address), TMA_ERR_UNAVAILABLE (UCX failed, or the port is in
 * use), TMA_ERR_NOMEM.  Each is logged naming what is wrong.
 */
tma_status_t tma_transport_create(const tma_transport_config_t *cfg, tma_transport_t **t_p);

/*
 * Clean close: every connection is flushed (outstanding sends complete),
 * told goodbye and closed, the listener and worker are destroyed and the
 * thread joined.  Connections that do not close within 5 s are forced.
 * Messages not yet received are discarded; posted buffers are the caller's
 * again.  Accepts NULL.
 */
void tma_transport_destroy(tma_transport_t *t);

/* The listening address as "host:port" with the real port (port 0 asked for
 * a free one), e.g. "127.0.0.1:40123".  Empty when not listening. */
const char *tma_transport_address(const tma_transport_t *t);
/* The listening port, 0 when not listening. */
uint16_t tma_transport_port(const tma_transport_t *t);

/*
 * Says, for an error message, how this host reaches addr ("host:port" or a
 * host): the interface the route to it leaves by, and whether this
 * process's UCX settings (UCX_NET_DEVICES) rule that interface out.  Writes
 * one sentence into out (cap bytes).  Returns 1 when a UCX setting rules the
 * interface out, else 0.  Thread-safe; touches no transport.
 */
int tma_transport_explain_route(const char *addr, char *out, size_t cap);

/* ------------------------------------------------------------------ connections */

/*
 * Connects to a listener at "host:port", says hello and waits for its answer
 * (up to timeout_s seconds; < 0 waits for ever).  On success *peer_p (when not
 * NULL) is the listener's member id.  If a connection to that member id
 * already exists it is replaced (a standby coordinator took over: connect to
 * its new address); the old one ends with reason TMA_ERR_FENCED.
 * Errors: TMA_ERR_CONFIG (bad address), TMA_ERR_UNAVAILABLE (nobody listens,
 * or the connection broke), TMA_ERR_PERMISSION (the peer refused our job or
 * token), TMA_ERR_TIMEOUT, TMA_ERR_CLOSED.
 */
tma_status_t tma_transport_connect(tma_transport_t *t, const char *addr, double timeout_s,
                                   uint32_t *peer_p);

/* Flushes, says goodbye and closes the connection to `peer`; the event is
 * TMA_TRANSPORT_EV_CLOSED.  TMA_ERR_NOT_FOUND when not connected. */
tma_status_t tma_transport_disconnect(tma_transport_t *t, uint32_t peer, double timeout_s);

/* Waits until `peer` is connected (hello done).  TMA_OK, TMA_ERR_TIMEOUT. */
tma_status_t tma_transport_wait_peer(tma_transport_t *t, uint32_t peer, double timeout_s);

/* The member ids of the connected peers, at most `cap` of them; *n_p is the
 * full count. */
void tma_transport_peers(tma_transport_t *t, uint32_t *ids, size_t cap, size_t *n_p);

/* ------------------------------------------------------------------ sending */

/* What a message says besides its data; carried in the header. */
typedef struct tma_transport_meta {
    uint32_t tag;   /* application-defined kind (e.g. local or global weights) */
    uint64_t epoch; /* coordinator epoch */
    uint64_t round; /* aggregation round */
} tma_transport_meta_t;

/*
 * Sends count float32 values (count may be 0) to a connected peer and waits
 * until the data has left `data` (the buffer may then be reused), at most
 * timeout_s seconds (< 0: no limit).  The CRC is computed by the calling
 * thread; the data is not copied.  A send that runs past its deadline
 * disconnects the peer (reason TMA_ERR_TIMEOUT), because the only way to get
 * the buffer back from UCX is to close the connection.
 * Errors: TMA_ERR_UNAVAILABLE (not connected), TMA_ERR_PEER_FAILED (the
 * connection broke), TMA_ERR_TIMEOUT, TMA_ERR_RANGE (over max_message_bytes),
 * TMA_ERR_UNSUPPORTED (CUDA memory), TMA_ERR_CLOSED.
 */
tma_status_t tma_transport_send(tma_transport_t *t, uint32_t peer, const tma_transport_meta_t *meta,
                                const float *data, size_t count, tma_transport_mem_t mem,
                                double timeout_s);

/*
 * The same tensor to n peers at once (a broadcast of the global weights):
 * one CRC, n concurrent sends.  status_p (n entries, may be NULL) gets each
 * peer's result.  Returns TMA_OK when every send succeeded, else the first
 * failure in peer order.
 */
tma_status_t tma_transport_send_many(tma_transport_t *t, const uint32_t *peers, size_t n,
                                     const tma_transport_meta_t *meta, const float *data,
                                     size_t count, tma_transport_mem_t mem, double timeout_s,
                                     tma_status_t *status_p);

/* ------------------------------------------------------------------ receiving */

#define TMA_TRANSPORT_ANY_PEER UINT32_MAX
#define TMA_TRANSPORT_ANY_TAG UINT32_MAX

typedef enum {
    TMA_TRANSPORT_MSG_TENSOR = 0, /* a tensor arrived (and passed its checksum) */
    TMA_TRANSPORT_MSG_EVENT = 1,  /* a connection ended: see `event` */
} tma_transport_msg_kind_t;

/* One received item.  Filled by tma_transport_recv; give it back with
 * tma_transport_msg_release. */
typedef struct tma_transport_msg {
    tma_transport_msg_kind_t kind;
    uint32_t peer;             /* sender's member id */
    tma_transport_meta_t meta; /* TMA_TRANSPORT_MSG_TENSOR */
    float *data;               /* TMA_TRANSPORT_MSG_TENSOR: count values */
    size_t count;
    int in_place;                /* 1: data is the buffer given to tma_transport_post */
    uint64_t peer_lease;         /* TENSOR: the lease its sender proved in the hello of the
                                    connection it came on (0 on connections we made) */
    tma_transport_event_t event; /* TMA_TRANSPORT_MSG_EVENT: the ended connection */
    void *priv_;                 /* private */
} tma_transport_msg_t;

/*
 * Posts `buf` (count floats) for the next tensor from `peer` with `tag`
 * (TMA_TRANSPORT_ANY_TAG matches any): a tensor of exactly count values
 * lands there, every chunk at its place, with no copy; a tensor of another
 * size goes to the pool as usual and the post stays.  Several posts for one peer are used in
 * posting order.  The buffer belongs to the transport until the message is released or the post is
 * cancelled.  Errors: TMA_ERR_UNSUPPORTED (CUDA), TMA_ERR_INVALID (the buffer is already posted).
 */
tma_status_t tma_transport_post(tma_transport_t *t, uint32_t peer, uint32_t tag, float *buf,
                                size_t count, tma_transport_mem_t mem);

/*
 * Takes a post back.  If a tensor is arriving into it, waits for the arrival
 * to end (closing that peer's connection, reason TMA_ERR_TIMEOUT, if it has
 * not ended within timeout_s); a tensor that landed and was not yet received
 * is discarded.  After TMA_OK the buffer is the caller's.  TMA_ERR_NOT_FOUND
 * when `buf` is not posted (or its message was already received).
 */
tma_status_t tma_transport_post_cancel(tma_transport_t *t, float *buf, double timeout_s);

/*
 * Waits up to timeout_s seconds (< 0 for ever, 0 polls) for the next item
 * from `peer` (or TMA_TRANSPORT_ANY_PEER) with `tag` (or
 * TMA_TRANSPORT_ANY_TAG): a tensor (whose every chunk passed its CRC), or
 * the end of a matching peer's connection (an event matches any tag).
 * Items come in the order they finished arriving.
 * Errors: TMA_ERR_TIMEOUT, TMA_ERR_CLOSED.
 */
tma_status_t tma_transport_recv(tma_transport_t *t, uint32_t peer, uint32_t tag, double timeout_s,
                                tma_transport_msg_t *msg_p);

/* Gives a received item's buffer back (to the pool, or ends the post).
 * Accepts a zeroed msg; zeroes it. */
void tma_transport_msg_release(tma_transport_t *t, tma_transport_msg_t *msg);

/* ------------------------------------------------------------------ statistics, tests */

typedef struct tma_transport_stats {
    uint64_t msgs_sent, bytes_sent;
    uint64_t msgs_received, bytes_received;
    uint64_t frames_dropped; /* bad frames and failed checksums */
    uint64_t peers_refused;  /* hellos refused */
    uint64_t peers_flagged;
    uint64_t hello_evicted;  /* connections closed before their hello to bound those waiting (per host, in all) */
    uint32_t connections; /* open (hello done) */
    uint32_t endpoints;   /* UCX endpoints not yet released (any state) */
    uint32_t tx_active;   /* frames (chunks) handed to UCX and not sent yet */
    uint32_t rx_active;   /* chunks being received by rendezvous right now */
    uint32_t rx_held;     /* chunks waiting for their tensor to get a buffer */
    uint32_t rx_queued;   /* items waiting for tma_transport_recv */
    uint64_t pool_bytes;  /* bytes the receive pool holds */
} tma_transport_stats_t;

void tma_transport_stats(tma_transport_t *t, tma_transport_stats_t *s_p);

/* Test hook: the next tensor this transport sends (or, if it connects
 * first, its hello) is damaged after its CRC is computed: a payload bit in
 * its last frame, any other fault in its first frame's header (but see
 * TMA_TRANSPORT_FAULT_DUP_CHUNK). */
typedef enum {
    TMA_TRANSPORT_FAULT_NONE = 0,
    TMA_TRANSPORT_FAULT_PAYLOAD_BYTE, /* one payload bit of the last chunk flipped (from a copy) */
    TMA_TRANSPORT_FAULT_HEADER_BYTE,  /* one bit of the epoch flipped */
    TMA_TRANSPORT_FAULT_MAGIC,        /* wrong magic */
    TMA_TRANSPORT_FAULT_VERSION,      /* version 99 */
    TMA_TRANSPORT_FAULT_TYPE,         /* type 77 */
    TMA_TRANSPORT_FAULT_LENGTH,       /* header claims 4 bytes more than the chunk has */
    TMA_TRANSPORT_FAULT_TRUNCATE,     /* payload cut 4 bytes short of the header's length */
    TMA_TRANSPORT_FAULT_SHORT_HEADER, /* only 40 header bytes sent */
    TMA_TRANSPORT_FAULT_JOB,          /* another job id in the header */
    TMA_TRANSPORT_FAULT_DUP_CHUNK,    /* the second frame names the first one's chunks (valid
                                         CRC); no effect on a tensor of one frame */
    TMA_TRANSPORT_FAULT_REPLAY_HELLO, /* the next connect replays the hello and proof of this
                                         transport's last accepted connect, as an eavesdropper
                                         who recorded them would */
} tma_transport_fault_t;

void tma_transport_test_inject(tma_transport_t *t, tma_transport_fault_t fault);

/* "peer connected" and friends, for logs. */
const char *tma_transport_event_str(tma_transport_event_kind_t kind);

#ifdef __cplusplus
}
#endif
#endif /* TMA_TRANSPORT_H */
