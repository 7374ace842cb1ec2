/*
 * kv_int.h: the pieces shared by the files of the etcd client: byte
 * buffers, a block arena for parsed answers, base64, the pure response
 * parsers (bytes in, struct out; driven by the fuzz target too), and the
 * client's private state and request path.
 */
#ifndef TMA_KV_INT_H
#define TMA_KV_INT_H

#include <pthread.h>
#include <stdint.h>

#include <curl/curl.h>

#include "tma_kv.h"

#define KV_COMP "kv"

/* ------------------------------------------------------------------ buffers */

/* A growable byte buffer, kept NUL-terminated (data[len] == 0 once any byte
 * was added).  Reused across requests: clearing keeps the memory. */
typedef struct kv_buf {
    char *data;
    size_t len, cap;
} kv_buf_t;

/* All return 0, or -1 when memory runs out (the buffer is then unchanged). */
int kv_buf_reserve(kv_buf_t *b, size_t extra);
int kv_buf_add(kv_buf_t *b, const void *p, size_t n);
int kv_buf_adds(kv_buf_t *b, const char *s);
int kv_buf_addf(kv_buf_t *b, const char *fmt, ...) TMA_PRINTF(2, 3);
/* The base64 text of n bytes. */
int kv_buf_add_b64(kv_buf_t *b, const void *p, size_t n);
static inline void kv_buf_clear(kv_buf_t *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}
void kv_buf_free(kv_buf_t *b);

/* ------------------------------------------------------------------ arena */

/* Blocks chained newest first; everything is freed at once. */
typedef struct kv_arena kv_arena_t;

/* n bytes aligned to 16 from the arena at *a (a new block when needed);
 * NULL when memory runs out. */
void *kv_arena_alloc(kv_arena_t **a, size_t n);
/* Frees every block but the newest and empties it (for per-message reuse). */
void kv_arena_reset(kv_arena_t **a);
void kv_arena_free(kv_arena_t *a);

/* ------------------------------------------------------------------ base64 */

/* Strict standard base64 with padding.  Decodes n characters into out
 * (room for n / 4 * 3 bytes) and sets *out_len; -1 on any bad character,
 * length or padding. */
int tma_kv_b64_decode(const char *in, size_t n, uint8_t *out, size_t *out_len);

/* ------------------------------------------------------------------ parsers */

/* One etcd error answer, read from a non-200 body (or a stream's error). */
typedef struct tma_kv_error {
    tma_status_t status; /* what the caller returns */
    int grpc_code;       /* the gRPC code etcd gave, -1 when the body had none */
    int token_invalid;   /* the auth token expired or is unknown: authenticate again */
    int not_applied;     /* etcd refused before applying (no leader...): safe to retry */
    char message[256];   /* etcd's message, or a description of the body */
} tma_kv_error_t;

/* Maps an HTTP status and body to a status (always an error: a 2xx code with
 * an unreadable body is TMA_ERR_MALFORMED).  Fills *err; returns err->status. */
tma_status_t tma_kv_parse_error(long http_code, const char *body, size_t len,
                                tma_kv_error_t *err);

/* A range, put, deleterange or txn answer (HTTP 200) into *res_p; the result
 * owns its memory.  TMA_ERR_MALFORMED when it is not valid. */
tma_status_t tma_kv_parse_result(tma_kv_op_type_t type, const char *body, size_t len,
                                 tma_kv_result_t *res_p);

/* A lease grant, keepalive (wrapped in "result"), timetolive or revoke answer. */
typedef struct tma_kv_lease_resp {
    int64_t revision;
    int64_t id;
    int64_t ttl;         /* seconds left (-1 from timetolive when it expired) */
    int64_t granted_ttl; /* timetolive only */
    int has_ttl;         /* a keepalive for a lease that is gone has no TTL */
} tma_kv_lease_resp_t;

tma_status_t tma_kv_parse_lease(const char *body, size_t len, tma_kv_lease_resp_t *out_p);

/* One line of a watch stream: {"result":{...}}, or {"error":{...}} when the
 * stream failed (returned as that error's status, with *err filled).  *err
 * is cleared first: after any other outcome its message is "". */
typedef struct tma_kv_watch_resp {
    int64_t revision;
    int64_t watch_id;
    int64_t compact_revision;
    int created;
    int canceled;
    const char *cancel_reason; /* "" when none; in the arena */
    size_t n_events;
    tma_kv_event_t *events; /* in the arena */
} tma_kv_watch_resp_t;

tma_status_t tma_kv_parse_watch(const char *line, size_t len, kv_arena_t **arena,
                                tma_kv_watch_resp_t *out_p, tma_kv_error_t *err);

/* An /v3/auth/authenticate answer: copies the token (cap bytes with NUL). */
tma_status_t tma_kv_parse_auth(const char *body, size_t len, char *token, size_t cap);

/* ------------------------------------------------------------------ the client */

/* One libcurl easy handle with its reusable buffers. */
typedef struct kv_conn {
    CURL *curl;
    struct curl_slist *headers; /* for headers_gen */
    uint64_t headers_gen;       /* the token generation the headers carry (0: none) */
    int headers_auth;           /* the headers carry a token */
    kv_buf_t req, resp, url;
    tma_status_t write_status;  /* why the write callback refused bytes */
    char errbuf[CURL_ERROR_SIZE];
    char why[CURL_ERROR_SIZE + 256]; /* the endpoint and reason of the last failed call */
    struct kv_conn *next;
} kv_conn_t;

/* The most bytes one unary answer may have. */
#define KV_MAX_RESPONSE ((size_t)512 << 20)

typedef struct kv_kept kv_kept_t;

struct tma_kv {
    char **endpoints;   /* as given: http://, https:// or unix:///path (for messages) */
    char **ep_sockets;  /* a unix:// endpoint's socket path, else NULL */
    size_t n_endpoints;
    size_t cur_ep; /* atomic: the endpoint requests try first */
    double request_timeout_s, connect_timeout_s;
    char *ca_file, *cert_file, *key_file, *user, *password;

    pthread_mutex_t pool_mu;
    kv_conn_t *free_conns;

    pthread_mutex_t auth_mu;
    char *token;        /* NULL until authenticated */
    uint64_t token_gen; /* bumped by every new token */

    pthread_mutex_t lease_mu;
    pthread_cond_t lease_cv;
    kv_kept_t *kept;
    size_t n_kept, cap_kept;
    uint64_t kept_serial;
    int keeper_started, keeper_stop;
    pthread_t keeper;

    pthread_mutex_t watch_mu;
    pthread_cond_t watch_cv;
    struct tma_kv_watch *watches;

    uint64_t request_errors; /* atomic: calls that failed (tma_kv_request_errors) */
};

enum {
    KV_CALL_RETRY = 1u << 0,   /* idempotent: retry on another endpoint after any transport failure */
    KV_CALL_NO_AUTH = 1u << 1, /* send no token (authenticate itself) */
    KV_CALL_QUIET = 1u << 2,   /* log failures at debug level only (the caller retries) */
};

/* A handle from the pool (created when none is free); NULL on OOM. */
kv_conn_t *kv_conn_get(tma_kv_t *kv);
void kv_conn_put(tma_kv_t *kv, kv_conn_t *c);
/* A handle that belongs to one owner (a watch); freed by kv_conn_free. */
kv_conn_t *kv_conn_new(tma_kv_t *kv);
void kv_conn_free(kv_conn_t *c);

/* Sets the URL (endpoint + path), auth header and body of c for endpoint ep.
 * Returns the token generation used (0: none). */
tma_status_t kv_conn_prepare(tma_kv_t *kv, kv_conn_t *c, size_t ep, const char *path,
                             unsigned flags, uint64_t *gen_p);

/* POSTs c->req to path, failing over across endpoints until the deadline
 * (tma_clock_now() based).  On TMA_OK c->resp holds the 200 answer. */
tma_status_t kv_call(tma_kv_t *kv, kv_conn_t *c, const char *path, unsigned flags,
                     double deadline);

/* The token in use is stale (generation gen): authenticate again unless
 * another thread already did. */
tma_status_t kv_auth_refresh(tma_kv_t *kv, uint64_t gen);

/* Moves cur_ep past ep (unless another thread moved it already). */
void kv_endpoint_advance(tma_kv_t *kv, size_t ep);
size_t kv_endpoint_current(tma_kv_t *kv);

/* curl_easy_perform() with SIGPIPE blocked in the calling thread (a peer
 * that closed a TLS connection must not kill the program; the signal
 * disposition is the program's, so it is not touched). */
CURLcode kv_perform(CURL *curl);
/* Blocks SIGPIPE for the rest of a thread the library owns. */
void kv_thread_block_sigpipe(void);

/* Maps a libcurl failure to a status. */
tma_status_t kv_curl_status(CURLcode cc, const char *errbuf);
/* The deadline of a call starting now. */
double kv_deadline(const tma_kv_t *kv);

/* Appends the "key" and, for a prefix, "range_end" JSON members (base64). */
int kv_buf_add_key_range(kv_buf_t *b, const char *key, unsigned flags, const char *end);

/* Stops every kept lease and joins the keeper; used by tma_kv_destroy. */
void kv_lease_shutdown(tma_kv_t *kv);
/* Stops every watch; used by tma_kv_destroy. */
void kv_watch_shutdown(tma_kv_t *kv);

#endif /* TMA_KV_INT_H */
