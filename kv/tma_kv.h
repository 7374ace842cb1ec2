/*
 * tma_kv.h: a client for etcd v3 through its JSON gateway (libcurl + cJSON):
 * get, put, range with paging, delete, transactions, leases with background
 * keep-alive, and watches with automatic reconnection, over several
 * endpoints with failover, TLS and user/password authentication.
 *
 * Threading.  A client (struct tma_kv) may be used from any number of threads
 * at once.  Requests run on pooled libcurl easy handles: a thread takes a free
 * handle for the length of one call and gives it back, so each in-flight call
 * owns one handle and connections are reused (HTTP keep-alive).  The library
 * never calls curl_global_init(): the program must call it once before it
 * creates a client (the tma program does so in main()).  Two background kinds
 * of thread exist: one lease keeper per client (started by the first
 * tma_kv_lease_keep()) and one thread per watch.  Callbacks run on those
 * threads; they may call any function of this header but tma_kv_destroy(),
 * and they should be cheap (set a flag, push to a queue), because the next
 * event of that watch, or the next keep-alive of that client, waits for them.
 *
 * Statuses.  Every call returns TMA_OK or one of:
 *   TMA_ERR_UNAVAILABLE     no endpoint could serve the request (all refused
 *                           the connection, or the cluster has no leader)
 *   TMA_ERR_TIMEOUT         the per-request deadline passed
 *   TMA_ERR_NOT_FOUND       tma_kv_get(): the key does not exist
 *   TMA_ERR_COMPARE_FAILED  the compare of a helper transaction did not hold
 *   TMA_ERR_LEASE_EXPIRED   the lease does not exist (expired or revoked)
 *   TMA_ERR_PERMISSION      wrong user or password, no permission for the
 *                           key, or TLS verification failed (wrong CA or a
 *                           client certificate the server refused)
 *   TMA_ERR_MALFORMED       the answer was not a valid etcd response
 *   TMA_ERR_COMPACTED       the revision asked for was compacted
 *   TMA_ERR_INVALID         a bad argument (also when etcd rejects one)
 *   TMA_ERR_CONFIG          a bad client configuration (create only)
 *   TMA_ERR_NOMEM           out of memory
 * Output parameters are set only on TMA_OK, unless a comment says otherwise.
 *
 * Keys are NUL-terminated strings; values are byte ranges.  Returned keys and
 * values are NUL-terminated copies (the length fields give the real size, so
 * binary values work too).  Revisions and lease IDs are int64 throughout.
 */
#ifndef TMA_KV_H
#define TMA_KV_H

#include <stddef.h>
#include <stdint.h>

#include "tma_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tma_kv tma_kv_t;

/* ------------------------------------------------------------------ configuration */

typedef struct tma_kv_config {
    /* Comma-separated client URLs, "http://127.0.0.1:2379,http://10.0.0.2:2379";
     * https:// URLs use TLS; unix:///abs/path is etcd's unix-socket listener
     * (`--listen-client-urls unix://NAME:0`), reachable only by who may open
     * the socket file.  Required. */
    const char *endpoints;
    double request_timeout_s; /* whole-call deadline, failover included (default 5) */
    double connect_timeout_s; /* one connection attempt (default 1) */
    const char *ca_file;      /* TLS: verify the server against this CA (NULL: system CAs) */
    const char *cert_file;    /* TLS: client certificate (PEM), with key_file */
    const char *key_file;     /* TLS: client private key (PEM) */
    const char *user;         /* authentication: NULL for none */
    const char *password;
    /* A password is sent only over https:// or a unix socket: with an
     * http:// endpoint tma_kv_create refuses it (TMA_ERR_CONFIG) unless this
     * is set (the CLI's --insecure-etcd). */
    int allow_plain_password;
} tma_kv_config_t;

/* Fills the defaults above (endpoints NULL). */
void tma_kv_config_init(tma_kv_config_t *cfg);

/* Reads a config from a JSON object with the keys "endpoints" (string),
 * "request_timeout", "connect_timeout" (seconds), "ca_file", "cert_file",
 * "key_file", "user", "password"; missing keys keep the values already in
 * *cfg.  Strings point into obj.  TMA_ERR_CONFIG names ctx and the key. */
tma_status_t tma_kv_config_from_json(const cJSON *obj, const char *ctx, tma_kv_config_t *cfg);

/* Creates a client.  The configuration is copied.  No request is made:
 * unreachable endpoints or a wrong password show up on the first call.
 * TMA_ERR_CONFIG for a malformed endpoint list, a TLS file that cannot be
 * read, a user without password, or a password with an http:// endpoint
 * (see allow_plain_password). */
tma_status_t tma_kv_create(const tma_kv_config_t *cfg, tma_kv_t **kv_p);

/* Stops every watch still running and the lease keeper (kept leases are
 * not revoked: they expire after their TTL), then frees the client.  No
 * other call on this client may be running or start.  Accepts NULL. */
void tma_kv_destroy(tma_kv_t *kv);

/* How many requests of this client have failed so far: calls that ended
 * without an answer (unavailable, timed out) or with an error answer
 * (permission, malformed, invalid); a missing key, a failed compare, an
 * expired lease or a compacted revision do not count.  Watches' reconnects
 * do not count either.  Any thread; never blocks. */
uint64_t tma_kv_request_errors(tma_kv_t *kv);

/* ------------------------------------------------------------------ results */

typedef struct tma_kv_pair {
    const char *key; /* NUL-terminated copy */
    size_t key_len;
    const char *value; /* NUL-terminated copy; "" for keys_only ranges and delete events */
    size_t value_len;
    int64_t create_revision;
    int64_t mod_revision;
    int64_t version;
    int64_t lease; /* 0: not bound to a lease */
} tma_kv_pair_t;

typedef enum {
    TMA_KV_OP_RANGE = 0,
    TMA_KV_OP_PUT = 1,
    TMA_KV_OP_DELETE = 2,
    TMA_KV_OP_TXN = 3,
} tma_kv_op_type_t;

/* The answer to one operation.  Zero it before first use; the memory it
 * points to is its own until tma_kv_result_free().  A call that fills a
 * result overwrites it without freeing: free a result before reusing it. */
typedef struct tma_kv_result {
    tma_kv_op_type_t type;
    int64_t revision;  /* the store's revision when the operation was applied */
    int64_t count;     /* RANGE: keys in the range (all pages); DELETE: keys deleted */
    int more;          /* RANGE: keys past the limit remain */
    int succeeded;     /* TXN: the compares held (the success ops ran) */
    size_t n_pairs;    /* RANGE: the keys; PUT: the previous pair (0 or 1);
                          DELETE: the deleted pairs (TMA_KV_PREV_KV only) */
    tma_kv_pair_t *pairs;
    size_t n_results; /* TXN: one result per operation that ran, in order */
    struct tma_kv_result *results;
    void *mem_; /* private */
} tma_kv_result_t;

/* Frees what res holds and zeroes it; accepts a zeroed result. */
void tma_kv_result_free(tma_kv_result_t *res);

/* ------------------------------------------------------------------ keys */

enum {
    TMA_KV_PREFIX = 1u << 0,  /* the key is a prefix: every key that starts with it */
    TMA_KV_PREV_KV = 1u << 1, /* return the pairs as they were before the change */
};

/* The one pair at `key` into *res_p (n_pairs == 1).  TMA_ERR_NOT_FOUND when
 * the key does not exist. */
tma_status_t tma_kv_get(tma_kv_t *kv, const char *key, tma_kv_result_t *res_p);

/* Whether etcd answers: one small read (the count of the key "/tma/") with
 * a deadline of timeout_s, tried on the endpoints in turn, logged at debug
 * level only.  TMA_OK when an endpoint answered; else the status of the
 * last failure, and (when why is not NULL) "ENDPOINT: reason" in why
 * (curl's or etcd's words).  Thread-safe. */
tma_status_t tma_kv_ping(tma_kv_t *kv, double timeout_s, char *why, size_t why_cap);

/* Sets key to value, bound to `lease` (0: none).  *revision_p (may be NULL)
 * gets the revision of the write.  TMA_ERR_LEASE_EXPIRED when the lease is
 * gone. */
tma_status_t tma_kv_put(tma_kv_t *kv, const char *key, const void *value, size_t value_len,
                        int64_t lease, int64_t *revision_p);

typedef struct tma_kv_range_opts {
    unsigned flags;      /* TMA_KV_PREFIX */
    const char *end;     /* explicit end of [key, end) when not a prefix; NULL: one key */
    int64_t limit;       /* at most this many pairs (0: all); res->more says if more remain */
    int64_t revision;    /* read at this revision (0: the latest) */
    int keys_only;       /* leave the values out */
    int count_only;      /* only res->count */
} tma_kv_range_opts_t;

/* The pairs in a range, sorted by key.  opts may be NULL (one key).  An empty
 * range is TMA_OK with n_pairs == 0.  TMA_ERR_COMPACTED when opts->revision
 * was compacted. */
tma_status_t tma_kv_range(tma_kv_t *kv, const char *key, const tma_kv_range_opts_t *opts,
                          tma_kv_result_t *res_p);

/* Called once per pair by tma_kv_range_each(); return non-zero to stop. */
typedef int (*tma_kv_pair_fn)(void *arg, const tma_kv_pair_t *pair);

/* Walks a whole range page by page (opts->limit pairs a page, default 1000),
 * every page read at the same revision, so the walk is one consistent
 * snapshot even while others write.  *revision_p (may be NULL) gets that
 * revision: watching from it + 1 misses nothing and repeats nothing.
 * TMA_ERR_CANCELLED when fn stopped the walk; TMA_ERR_COMPACTED when the
 * snapshot was compacted during the walk (start again). */
tma_status_t tma_kv_range_each(tma_kv_t *kv, const char *key, const tma_kv_range_opts_t *opts,
                               tma_kv_pair_fn fn, void *arg, int64_t *revision_p);

/* Deletes key, or every key under it with TMA_KV_PREFIX.  Deleting nothing
 * is TMA_OK with count 0.  res_p may be NULL; with TMA_KV_PREV_KV its
 * pairs are the deleted ones. */
tma_status_t tma_kv_delete(tma_kv_t *kv, const char *key, unsigned flags, tma_kv_result_t *res_p);

/* ------------------------------------------------------------------ transactions */

typedef enum {
    TMA_KV_CMP_VALUE = 0,   /* the value (bytes) */
    TMA_KV_CMP_CREATE = 1,  /* create revision (0: the key does not exist) */
    TMA_KV_CMP_MOD = 2,     /* mod revision (0: the key does not exist) */
    TMA_KV_CMP_VERSION = 3, /* version: writes since creation (0: does not exist) */
    TMA_KV_CMP_LEASE = 4,   /* the lease the key is bound to */
} tma_kv_cmp_target_t;

typedef enum {
    TMA_KV_EQUAL = 0,
    TMA_KV_NOT_EQUAL = 1,
    TMA_KV_GREATER = 2,
    TMA_KV_LESS = 3,
} tma_kv_cmp_op_t;

typedef struct tma_kv_cmp {
    const char *key;
    tma_kv_cmp_target_t target;
    tma_kv_cmp_op_t op;
    int64_t number;    /* CREATE, MOD, VERSION, LEASE */
    const void *value; /* VALUE */
    size_t value_len;
} tma_kv_cmp_t;

typedef struct tma_kv_op {
    tma_kv_op_type_t type; /* RANGE (a get), PUT or DELETE */
    const char *key;
    unsigned flags;        /* TMA_KV_PREFIX for RANGE and DELETE */
    const void *value;     /* PUT */
    size_t value_len;
    int64_t lease;         /* PUT: 0 for none */
} tma_kv_op_t;

typedef struct tma_kv_txn {
    const tma_kv_cmp_t *cmp;
    size_t n_cmp;
    const tma_kv_op_t *success; /* run when every compare holds */
    size_t n_success;
    const tma_kv_op_t *failure; /* run otherwise */
    size_t n_failure;
} tma_kv_txn_t;

/* Runs a transaction atomically.  TMA_OK whether or not the compares held:
 * res->succeeded says which branch ran, res->results holds one result per op
 * of that branch.  A txn that fails in transport is never retried once it may
 * have reached the server (TMA_ERR_UNAVAILABLE or TMA_ERR_TIMEOUT: its
 * outcome is unknown). */
tma_status_t tma_kv_txn(tma_kv_t *kv, const tma_kv_txn_t *txn, tma_kv_result_t *res_p);

/* Creates key with value (bound to lease, 0: none) only if it does not exist:
 * TMA_ERR_COMPARE_FAILED when it does.  The leader-election primitive.  When
 * current_p is not NULL it gets the pair that won: the new one on TMA_OK, the
 * existing one on TMA_ERR_COMPARE_FAILED (the one exception to "outputs only
 * on success"); free it with tma_kv_result_free(). */
tma_status_t tma_kv_put_if_absent(tma_kv_t *kv, const char *key, const void *value,
                                  size_t value_len, int64_t lease, tma_kv_result_t *current_p);

/* Compare-and-swap on the mod revision: writes value only if key's mod
 * revision is still expected_mod_revision (0: the key must not exist).
 * TMA_ERR_COMPARE_FAILED otherwise.  *revision_p (may be NULL) gets the new
 * mod revision, the expected value of the next swap. */
tma_status_t tma_kv_cas(tma_kv_t *kv, const char *key, int64_t expected_mod_revision,
                        const void *value, size_t value_len, int64_t lease, int64_t *revision_p);

/* Compare-and-swap on the value: writes value only if key holds exactly
 * expected (a key that does not exist never matches).  TMA_ERR_COMPARE_FAILED
 * otherwise. */
tma_status_t tma_kv_cas_value(tma_kv_t *kv, const char *key, const void *expected,
                              size_t expected_len, const void *value, size_t value_len,
                              int64_t lease, int64_t *revision_p);

/* ------------------------------------------------------------------ leases */

/* Grants a lease of ttl_s seconds (etcd may raise small TTLs to its minimum,
 * about 2 s; *granted_ttl_p, may be NULL, gets the TTL granted). */
tma_status_t tma_kv_lease_grant(tma_kv_t *kv, int64_t ttl_s, int64_t *lease_p,
                                int64_t *granted_ttl_p);

/* Revokes a lease (its keys are deleted) and stops keeping it alive.
 * TMA_ERR_LEASE_EXPIRED when it no longer exists. */
tma_status_t tma_kv_lease_revoke(tma_kv_t *kv, int64_t lease);

/* Renews a lease once; *ttl_p (may be NULL) gets its fresh TTL.
 * TMA_ERR_LEASE_EXPIRED when it no longer exists. */
tma_status_t tma_kv_lease_keepalive_once(tma_kv_t *kv, int64_t lease, int64_t *ttl_p);

/* The seconds a lease has left and the TTL it was granted (either pointer
 * may be NULL).  TMA_ERR_LEASE_EXPIRED when it no longer exists. */
tma_status_t tma_kv_lease_time_to_live(tma_kv_t *kv, int64_t lease, int64_t *ttl_p,
                                       int64_t *granted_ttl_p);

/* Why a kept lease was lost: TMA_ERR_LEASE_EXPIRED when etcd said it is
 * gone, TMA_ERR_UNAVAILABLE or TMA_ERR_TIMEOUT when no endpoint could renew
 * it before its TTL ran out (it has then expired on the server too). */
typedef void (*tma_kv_lease_lost_fn)(void *arg, int64_t lease, tma_status_t why);

/* Keeps a lease alive from the client's keeper thread (a renewal every third
 * of its TTL, retried across endpoints) until tma_kv_lease_revoke(),
 * tma_kv_lease_keep_stop() or tma_kv_destroy().  Renews once before it
 * returns: TMA_ERR_LEASE_EXPIRED when the lease is already gone.  When the
 * lease is lost later, lost_fn (may be NULL) is called once, on the keeper
 * thread, and the lease is no longer kept.  Keeping a lease twice
 * replaces the callback. */
tma_status_t tma_kv_lease_keep(tma_kv_t *kv, int64_t lease, tma_kv_lease_lost_fn lost_fn,
                               void *arg);

/* Stops renewing a lease (it then expires after its TTL).  TMA_ERR_NOT_FOUND
 * when it was not kept (or was just lost: its lost_fn may be running).  Once
 * this returns TMA_OK, its lost_fn is never called. */
tma_status_t tma_kv_lease_keep_stop(tma_kv_t *kv, int64_t lease);

/* ------------------------------------------------------------------ watches */

typedef enum {
    TMA_KV_EVENT_PUT = 0,
    TMA_KV_EVENT_DELETE = 1,
} tma_kv_event_type_t;

typedef struct tma_kv_event {
    tma_kv_event_type_t type;
    tma_kv_pair_t kv;      /* DELETE: key and mod_revision (the deletion's) only */
    int has_prev;          /* prev_kv was asked for and the key existed */
    tma_kv_pair_t prev_kv;
} tma_kv_event_t;

/* What a watch callback receives.  Valid only during the callback. */
typedef struct tma_kv_watch_update {
    /* TMA_OK: events below.  Anything else ends the watch (no call follows):
     *   TMA_ERR_COMPACTED  the revision to watch from was compacted; resync by
     *                      reading the range (tma_kv_range_each) and watching
     *                      again from its revision + 1
     *   TMA_ERR_PERMISSION the user may not watch these keys
     *   TMA_ERR_CANCELLED  etcd cancelled the watch for another reason (logged) */
    tma_status_t status;
    int64_t revision;         /* the store's revision when etcd sent this */
    int64_t compact_revision; /* TMA_ERR_COMPACTED: the oldest revision still kept */
    size_t n_events;          /* in revision order; one revision's events come together */
    const tma_kv_event_t *events;
} tma_kv_watch_update_t;

typedef void (*tma_kv_watch_fn)(void *arg, const tma_kv_watch_update_t *update);

typedef struct tma_kv_watch_opts {
    unsigned flags;         /* TMA_KV_PREFIX, TMA_KV_PREV_KV */
    int64_t start_revision; /* deliver events from this revision on (0: after now) */
} tma_kv_watch_opts_t;

typedef struct tma_kv_watch tma_kv_watch_t;

/* Watches key (or a prefix) from a thread of its own.  Returns once etcd
 * has created the watch, so every change made after the return is seen.
 * When the connection breaks (the member died, etcd restarted), the watch
 * reconnects to the next endpoint by itself and resumes after the last
 * revision it delivered: nothing is lost or delivered twice.  Events are
 * delivered in revision order.  opts may be NULL. */
tma_status_t tma_kv_watch_start(tma_kv_t *kv, const char *key, const tma_kv_watch_opts_t *opts,
                                tma_kv_watch_fn fn, void *arg, tma_kv_watch_t **w_p);

/* Ends a watch: once it returns, fn is not called again and w is freed.
 * May be called from the watch's own callback (the watch then ends when the
 * callback returns).  Accepts NULL. */
void tma_kv_watch_stop(tma_kv_watch_t *w);

/* ------------------------------------------------------------------ helpers */

/* The range end that covers every key starting with prefix: the prefix with
 * its last byte incremented (trailing 0xff bytes dropped); "\0" (one NUL
 * byte, meaning "to the end of the key space") when there is none.  Writes
 * *len_p bytes to out (cap >= strlen(prefix) + 1); -1 when cap is too small. */
int tma_kv_prefix_end(const char *prefix, char *out, size_t cap, size_t *len_p);

#ifdef __cplusplus
}
#endif
#endif /* TMA_KV_H */
