/*
 * watch.c: watches.  Each watch owns a thread, a libcurl multi handle (so a
 * stop can wake a thread blocked on an idle stream at once) and an easy
 * handle for its long-lived POST /v3/watch.  etcd answers with a chunked
 * stream of one JSON object a line; each line is parsed into the watch's
 * arena (reset per line) and its events handed to the callback.
 *
 * The thread remembers the next revision it owes the caller.  When the
 * stream breaks it reconnects (next endpoint, growing back-off) asking for
 * exactly that revision, and drops any event below it, so the caller sees
 * every revision once and in order.
 */
#include "kv_int.h"

#include <stdlib.h>
#include <string.h>

enum { W_STARTING = 0, W_RUNNING = 1, W_DONE = 2 };

/* One line of a watch stream may not grow past this. */
#define KV_MAX_WATCH_LINE ((size_t)256 << 20)

/* A quiet stream may sit on a member that hangs (its kernel keeps the
 * connection open) or that lost its cluster (it gets no new events): after
 * this many seconds of silence the watch asks that member a quorum read, and
 * moves to another member when it gets no answer. */
#define KV_WATCH_PROBE_AFTER 5.0

struct tma_kv_watch {
    tma_kv_t *kv;
    struct tma_kv_watch *next; /* in kv->watches, under kv->watch_mu */
    kv_buf_t key, end;         /* bytes; end.len == 0: a single key */
    unsigned flags;
    tma_kv_watch_fn fn;
    void *arg;
    pthread_t thread;
    pthread_t self; /* the watch thread as it sees itself (set before any callback) */
    CURLM *multi;
    kv_conn_t *conn;
    kv_buf_t line;
    kv_arena_t *arena;
    int64_t next_rev; /* the first revision not yet delivered; 0 until etcd says */

    /* The current stream, reset by stream_once(). */
    long http_code;
    int got_created;
    int outage;            /* the stream broke and has not been re-created yet */
    double last_rx;        /* when the stream last brought bytes */
    int terminal;          /* a line ended the watch for good */
    int reauth;            /* the token went stale: authenticate and reconnect */
    int denials;           /* "permission denied" cancels since the last good creation */
    tma_status_t line_err; /* why a line stopped the stream */
    char why[1024];        /* what went wrong last, for the log */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state;
    tma_status_t start_status;
    int ended;     /* an update that ends the watch was delivered */
    int stop;      /* atomic */
    int self_stop; /* atomic: stopped from its own callback; the thread frees w */
};

static int stopped(tma_kv_watch_t *w)
{
    return __atomic_load_n(&w->stop, __ATOMIC_ACQUIRE);
}

static void set_state(tma_kv_watch_t *w, int state, tma_status_t st)
{
    pthread_mutex_lock(&w->mu);
    if (w->state == W_STARTING)
        w->start_status = st;
    w->state = state;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static int get_state(tma_kv_watch_t *w)
{
    pthread_mutex_lock(&w->mu);
    int s = w->state;
    pthread_mutex_unlock(&w->mu);
    return s;
}

static void deliver(tma_kv_watch_t *w, tma_status_t st, int64_t rev, int64_t compact,
                    const tma_kv_event_t *ev, size_t n)
{
    if (stopped(w) || w->ended)
        return;
    w->ended = st != TMA_OK;
    tma_kv_watch_update_t u = {st, rev, compact, n, ev};
    w->fn(w->arg, &u);
}

/* Maps a cancel to a status; sets w->reauth when a new token may help. */
static tma_status_t cancel_status(tma_kv_watch_t *w, const tma_kv_watch_resp_t *r)
{
    const char *why = r->cancel_reason;
    if (r->compact_revision > 0)
        return TMA_ERR_COMPACTED;
    if (strstr(why, "permission denied")) {
        /* etcd says "permission denied" for a stale token too (one from
         * before an auth change), so a client with credentials logs in
         * again once before it believes the denial. */
        if (w->kv->user && w->denials++ == 0)
            w->reauth = 1;
        return TMA_ERR_PERMISSION;
    }
    if (w->kv->user && (strstr(why, "auth token") || strstr(why, "user name is empty") ||
                        strstr(why, "revision of auth store is old"))) {
        w->reauth = 1;
        return TMA_ERR_PERMISSION;
    }
    return TMA_ERR_CANCELLED;
}

/* One complete line.  Returns 0 to go on reading, -1 to end this stream. */
static int handle_line(tma_kv_watch_t *w, const char *p, size_t n)
{
    while (n && (p[n - 1] == '\r' || p[n - 1] == ' '))
        n--;
    if (n == 0)
        return 0;
    kv_arena_reset(&w->arena);
    tma_kv_watch_resp_t r;
    tma_kv_error_t err;
    memset(&err, 0, sizeof(err));
    tma_status_t st = tma_kv_parse_watch(p, n, &w->arena, &r, &err);
    if (st != TMA_OK) {
        w->line_err = st;
        if (st == TMA_ERR_MALFORMED) {
            /* Reconnect: a fresh stream starts clean. */
            tma_log_error(KV_COMP, "watch %s: malformed line from etcd (%zu bytes)", w->key.data, n);
            snprintf(w->why, sizeof(w->why), "a malformed line from etcd");
            return -1;
        }
        /* The stream itself failed ({"error":...}). */
        snprintf(w->why, sizeof(w->why), "%s", err.message);
        if (w->kv->user && (err.token_invalid || (st == TMA_ERR_PERMISSION && w->denials++ == 0)))
            w->reauth = 1;
        else if (st == TMA_ERR_PERMISSION || st == TMA_ERR_COMPACTED)
            w->terminal = 1;
        return -1;
    }
    if (r.created && !r.canceled) {
        w->got_created = 1;
        w->denials = 0;
        if (w->outage)
            tma_log_info(KV_COMP, "watch %s: re-created at %s, resuming at revision %lld",
                         w->key.data, w->conn->url.data, (long long)w->next_rev);
        w->outage = 0;
        if (w->next_rev == 0)
            w->next_rev = r.revision + 1; /* "from now": after the revision it was created at */
        if (get_state(w) == W_STARTING)
            set_state(w, W_RUNNING, TMA_OK);
    }
    if (r.n_events) {
        /* Drop what an earlier stream already delivered, keep the order. */
        size_t k = 0;
        for (size_t i = 0; i < r.n_events; i++) {
            if (r.events[i].kv.mod_revision >= w->next_rev)
                r.events[k++] = r.events[i];
        }
        if (k) {
            w->next_rev = r.events[k - 1].kv.mod_revision + 1;
            deliver(w, TMA_OK, r.revision, 0, r.events, k);
        }
    }
    if (r.canceled) {
        st = cancel_status(w, &r);
        w->line_err = st;
        snprintf(w->why, sizeof(w->why), "etcd cancelled the watch: %.500s",
                 r.cancel_reason[0] ? r.cancel_reason : "no reason given");
        if (!w->reauth) {
            w->terminal = 1;
            if (st == TMA_ERR_CANCELLED)
                tma_log_error(KV_COMP, "watch %s: etcd cancelled it: %s", w->key.data,
                              r.cancel_reason[0] ? r.cancel_reason : "no reason given");
            if (get_state(w) == W_RUNNING)
                deliver(w, st, r.revision, r.compact_revision, NULL, 0);
        }
        return -1;
    }
    return stopped(w) ? -1 : 0;
}

static size_t watch_write(char *p, size_t size, size_t nmemb, void *ud)
{
    tma_kv_watch_t *w = ud;
    size_t n = size * nmemb;
    if (stopped(w))
        return 0;
    w->last_rx = tma_clock_now();
    if (w->http_code == 0)
        curl_easy_getinfo(w->conn->curl, CURLINFO_RESPONSE_CODE, &w->http_code);
    if (w->http_code != 200) {
        /* An error answer: keep its beginning for the message. */
        if (w->conn->resp.len < 65536 && kv_buf_add(&w->conn->resp, p, n) != 0)
            return 0;
        return n;
    }
    if (w->line.len + n > KV_MAX_WATCH_LINE || kv_buf_add(&w->line, p, n) != 0) {
        w->line_err = w->line.len + n > KV_MAX_WATCH_LINE ? TMA_ERR_MALFORMED : TMA_ERR_NOMEM;
        tma_log_error(KV_COMP, "watch %s: a stream message is too large or memory ran out",
                      w->key.data);
        return 0;
    }
    /* Hand over every complete line, then keep the partial tail. */
    size_t start = 0;
    for (;;) {
        char *nl = memchr(w->line.data + start, '\n', w->line.len - start);
        if (!nl)
            break;
        size_t len = (size_t)(nl - (w->line.data + start));
        if (handle_line(w, w->line.data + start, len) != 0)
            return 0;
        start += len + 1;
    }
    if (start) {
        memmove(w->line.data, w->line.data + start, w->line.len - start);
        w->line.len -= start;
        w->line.data[w->line.len] = '\0';
    }
    return n;
}

static int build_request(tma_kv_watch_t *w)
{
    kv_buf_t *b = &w->conn->req;
    kv_buf_clear(b);
    int bad = kv_buf_adds(b, "{\"create_request\":{\"key\":\"") ||
              kv_buf_add_b64(b, w->key.data, w->key.len) || kv_buf_adds(b, "\"");
    if (w->end.len)
        bad = bad || kv_buf_adds(b, ",\"range_end\":\"") ||
              kv_buf_add_b64(b, w->end.data, w->end.len) || kv_buf_adds(b, "\"");
    if (w->next_rev > 0)
        bad = bad || kv_buf_addf(b, ",\"start_revision\":\"%lld\"", (long long)w->next_rev);
    if (w->flags & TMA_KV_PREV_KV)
        bad = bad || kv_buf_adds(b, ",\"prev_kv\":true");
    return bad || kv_buf_adds(b, "}}");
}

/* 1 when member ep answers a quorum read (of the watched key's count) in
 * time; any answer but "unavailable" or a timeout counts. */
static int probe_member(tma_kv_watch_t *w, size_t ep)
{
    tma_kv_t *kv = w->kv;
    kv_conn_t *c = kv_conn_get(kv);
    if (!c)
        return 1;
    int alive = 1;
    uint64_t gen;
    if (kv_buf_adds(&c->req, "{\"key\":\"") == 0 &&
        kv_buf_add_b64(&c->req, w->key.data, w->key.len) == 0 &&
        kv_buf_adds(&c->req, "\",\"count_only\":true}") == 0 &&
        kv_conn_prepare(kv, c, ep, "/v3/kv/range", 0, &gen) == TMA_OK) {
        long ms = (long)(TMA_MAX(1.0, kv->request_timeout_s / 3) * 1000.0);
        curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, ms);
        curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, ms);
        kv_buf_clear(&c->resp);
        c->errbuf[0] = '\0';
        CURLcode cc = kv_perform(c->curl);
        long code = 0;
        const char *why = c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc);
        if (cc == CURLE_OK) {
            curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &code);
            if (code != 200) {
                tma_kv_error_t err;
                tma_status_t st = tma_kv_parse_error(code, c->resp.data, c->resp.len, &err);
                alive = st != TMA_ERR_UNAVAILABLE && st != TMA_ERR_TIMEOUT;
                if (!alive)
                    snprintf(w->why, sizeof(w->why), "%.500s: a quorum read failed: %.300s",
                             kv->endpoints[ep], err.message);
            }
        } else {
            alive = 0;
            snprintf(w->why, sizeof(w->why), "%.500s did not answer a quorum read: %.300s",
                     kv->endpoints[ep], why);
        }
    }
    kv_conn_put(kv, c);
    return alive;
}

/* Runs one stream against endpoint ep until it ends.  Returns why it ended:
 * TMA_OK (etcd closed it, or stop), a transport status, or the status of a
 * line or error answer; *refused_p says the connection was refused. */
static tma_status_t stream_once(tma_kv_watch_t *w, size_t ep, double start_deadline,
                                int *refused_p, uint64_t *gen_p)
{
    tma_kv_t *kv = w->kv;
    kv_conn_t *c = w->conn;
    *refused_p = 0;
    w->http_code = 0;
    w->got_created = 0;
    w->terminal = 0;
    w->reauth = 0;
    w->line_err = TMA_OK;
    snprintf(w->why, sizeof(w->why), "%.500s/v3/watch: the stream ended", kv->endpoints[ep]);
    kv_buf_clear(&w->line);
    kv_buf_clear(&c->resp);
    c->errbuf[0] = '\0';

    if (kv->user) {
        pthread_mutex_lock(&kv->auth_mu);
        int have = kv->token != NULL;
        pthread_mutex_unlock(&kv->auth_mu);
        if (!have) {
            tma_status_t st = kv_auth_refresh(kv, 0);
            if (st != TMA_OK) {
                snprintf(w->why, sizeof(w->why), "could not log in as user '%.200s'", kv->user);
                return st;
            }
        }
    }
    if (build_request(w) != 0)
        return TMA_ERR_NOMEM;
    tma_status_t st = kv_conn_prepare(kv, c, ep, "/v3/watch", 0, gen_p);
    if (st != TMA_OK)
        return st;
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, watch_write);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, 0L); /* a stream has no end */
    curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS,
                     TMA_MAX(1L, (long)(kv->connect_timeout_s * 1000.0)));
    curl_multi_add_handle(w->multi, c->curl);

    CURLcode cc = CURLE_OK;
    int running = 1, probe_failed = 0;
    double last_probe = tma_clock_now();
    w->last_rx = last_probe;
    while (running && !stopped(w)) {
        if (curl_multi_perform(w->multi, &running) != CURLM_OK)
            break;
        if (!running)
            break;
        double now = tma_clock_now();
        if (w->got_created && now - w->last_rx > KV_WATCH_PROBE_AFTER &&
            now - last_probe > KV_WATCH_PROBE_AFTER) {
            last_probe = now;
            if (!probe_member(w, ep)) {
                probe_failed = 1;
                break;
            }
        }
        int timeout_ms = 1000;
        /* The start deadline bounds the creation only, never the stream. */
        if (start_deadline > 0 && !w->got_created) {
            double left = start_deadline - tma_clock_now();
            if (left <= 0) {
                cc = CURLE_OPERATION_TIMEDOUT;
                break;
            }
            timeout_ms = (int)TMA_MIN(1000.0, left * 1000.0 + 1);
        }
        curl_multi_poll(w->multi, NULL, 0, timeout_ms, NULL);
    }
    int msgs;
    CURLMsg *m;
    while ((m = curl_multi_info_read(w->multi, &msgs))) {
        if (m->msg == CURLMSG_DONE)
            cc = m->data.result;
    }
    curl_multi_remove_handle(w->multi, c->curl);
    if (stopped(w))
        return TMA_OK;
    if (w->line_err != TMA_OK || w->terminal || w->reauth)
        return w->line_err != TMA_OK ? w->line_err : TMA_ERR_PERMISSION;
    if (probe_failed)
        return TMA_ERR_TIMEOUT;
    if (cc != CURLE_OK) {
        long req_size = 0;
        curl_easy_getinfo(c->curl, CURLINFO_REQUEST_SIZE, &req_size);
        *refused_p = req_size == 0 && (cc == CURLE_COULDNT_CONNECT ||
                                       cc == CURLE_COULDNT_RESOLVE_HOST);
        st = kv_curl_status(cc, c->errbuf);
        snprintf(w->why, sizeof(w->why), "%.500s/v3/watch: %.300s", kv->endpoints[ep],
                 c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc));
        tma_log_debug(KV_COMP, "watch %s: %s", w->key.data, w->why);
        return st;
    }
    if (w->http_code != 200 && w->http_code != 0) {
        tma_kv_error_t err;
        st = tma_kv_parse_error(w->http_code, c->resp.data, c->resp.len, &err);
        if (err.token_invalid && kv->user)
            w->reauth = 1;
        else if (st == TMA_ERR_PERMISSION || st == TMA_ERR_INVALID || st == TMA_ERR_MALFORMED)
            w->terminal = 1;
        snprintf(w->why, sizeof(w->why), "%.500s/v3/watch: %.300s", kv->endpoints[ep], err.message);
        tma_log_debug(KV_COMP, "watch %s: %s", w->key.data, w->why);
        return st;
    }
    /* Handle a last line that had no newline. */
    if (w->line.len && handle_line(w, w->line.data, w->line.len) != 0 &&
        (w->terminal || w->reauth || w->line_err != TMA_OK))
        return w->line_err != TMA_OK ? w->line_err : TMA_ERR_PERMISSION;
    return TMA_ERR_UNAVAILABLE; /* etcd closed the stream (shutting down) */
}

/* Sleeps up to `seconds`, woken early by a stop. */
static void pause_for(tma_kv_watch_t *w, double seconds)
{
    if (!stopped(w))
        curl_multi_poll(w->multi, NULL, 0, (int)(seconds * 1000.0), NULL);
}

static void watch_free(tma_kv_watch_t *w)
{
    if (w->multi)
        curl_multi_cleanup(w->multi);
    kv_conn_free(w->conn);
    kv_buf_free(&w->key);
    kv_buf_free(&w->end);
    kv_buf_free(&w->line);
    kv_arena_free(w->arena);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

static void unlink_watch(tma_kv_watch_t *w)
{
    tma_kv_t *kv = w->kv;
    for (tma_kv_watch_t **pp = &kv->watches; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    pthread_cond_broadcast(&kv->watch_cv);
}

static void *watch_main(void *arg)
{
    tma_kv_watch_t *w = arg;
    tma_kv_t *kv = w->kv;
    w->self = pthread_self();
    kv_thread_block_sigpipe();
    double start_deadline = kv_deadline(kv);
    size_t n = kv->n_endpoints;
    size_t ep = kv_endpoint_current(kv);
    size_t refused = 0;
    double backoff = 0.05;
    tma_status_t last = TMA_ERR_TIMEOUT;

    while (!stopped(w)) {
        int was_refused = 0;
        uint64_t gen = 0;
        tma_status_t st = stream_once(w, ep, get_state(w) == W_STARTING ? start_deadline : 0,
                                      &was_refused, &gen);
        if (stopped(w))
            break;
        int starting = get_state(w) == W_STARTING; /* still not created */
        if (w->terminal) {
            if (starting)
                set_state(w, W_DONE, st);
            else
                deliver(w, st, 0, 0, NULL, 0); /* unless a line delivered it already */
            break;
        }
        if (w->got_created) {
            /* The stream worked for a while: start counting failures afresh. */
            refused = 0;
            backoff = 0.05;
        }
        if (w->reauth) {
            st = kv_auth_refresh(kv, gen);
            if (st == TMA_OK)
                continue;
            snprintf(w->why, sizeof(w->why), "could not log in again as user '%.200s'", kv->user);
        }
        if (st == TMA_ERR_PERMISSION || st == TMA_ERR_NOMEM || st == TMA_ERR_INVALID) {
            /* Retrying will not help: wrong credentials, TLS refused, a bug. */
            tma_log_error(KV_COMP, "watch %s: %s (%s)", w->key.data, w->why, tma_status_str(st));
            if (starting)
                set_state(w, W_DONE, st);
            else
                deliver(w, st, 0, 0, NULL, 0);
            break;
        }
        last = st;
        kv_endpoint_advance(kv, ep);
        ep = (ep + 1) % n;
        refused = was_refused ? refused + 1 : 0;
        if (starting) {
            if (refused >= n || tma_clock_now() >= start_deadline) {
                tma_status_t fail = refused >= n || last == TMA_ERR_UNAVAILABLE
                                        ? TMA_ERR_UNAVAILABLE
                                        : TMA_ERR_TIMEOUT;
                tma_log_warn(KV_COMP, "watch %s: could not be created (%s)", w->key.data,
                             tma_status_str(fail));
                set_state(w, W_DONE, fail);
                break;
            }
            continue;
        }
        if (!w->outage)
            tma_log_warn(KV_COMP,
                         "watch %s: stream lost: %s (%s); reconnecting, resuming at revision %lld",
                         w->key.data, w->why, tma_status_str(st), (long long)w->next_rev);
        w->outage = 1;
        /* A pause only after every endpoint failed in turn. */
        if (refused == 0 || refused % n == 0) {
            pause_for(w, backoff);
            backoff = TMA_MIN(backoff * 2, 1.0);
        }
    }
    if (get_state(w) == W_STARTING)
        set_state(w, W_DONE, TMA_ERR_CANCELLED);

    if (__atomic_load_n(&w->self_stop, __ATOMIC_ACQUIRE)) {
        /* Stopped from its own callback: nobody will join; clean up here. */
        pthread_detach(pthread_self());
        pthread_mutex_lock(&kv->watch_mu);
        unlink_watch(w);
        pthread_mutex_unlock(&kv->watch_mu);
        watch_free(w);
    }
    return NULL;
}

tma_status_t tma_kv_watch_start(tma_kv_t *kv, const char *key, const tma_kv_watch_opts_t *opts,
                                tma_kv_watch_fn fn, void *arg, tma_kv_watch_t **w_p)
{
    unsigned flags = opts ? opts->flags : 0;
    if (!kv || !key || !fn || !w_p || (!key[0] && !(flags & TMA_KV_PREFIX)) ||
        (opts && opts->start_revision < 0))
        return TMA_ERR_INVALID;
    tma_kv_watch_t *w = calloc(1, sizeof(*w));
    if (!w)
        return TMA_ERR_NOMEM;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->kv = kv;
    w->flags = flags;
    w->fn = fn;
    w->arg = arg;
    w->next_rev = opts ? opts->start_revision : 0;
    w->state = W_STARTING;
    tma_status_t st = TMA_ERR_NOMEM;
    size_t klen = strlen(key);
    if (flags & TMA_KV_PREFIX) {
        char *e = malloc(klen + 1);
        size_t elen;
        if (!e)
            goto fail;
        tma_kv_prefix_end(key, e, klen + 1, &elen);
        int bad = (klen ? kv_buf_add(&w->key, key, klen) : kv_buf_add(&w->key, "", 1)) ||
                  kv_buf_add(&w->end, e, elen);
        free(e);
        if (bad)
            goto fail;
    } else if (kv_buf_add(&w->key, key, klen) != 0) {
        goto fail;
    }
    w->multi = curl_multi_init();
    w->conn = kv_conn_new(kv);
    if (!w->multi || !w->conn)
        goto fail;

    pthread_mutex_lock(&kv->watch_mu);
    w->next = kv->watches;
    kv->watches = w;
    pthread_mutex_unlock(&kv->watch_mu);
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
        pthread_mutex_lock(&kv->watch_mu);
        unlink_watch(w);
        pthread_mutex_unlock(&kv->watch_mu);
        tma_log_error(KV_COMP, "watch %s: cannot start its thread", key);
        goto fail;
    }
    pthread_mutex_lock(&w->mu);
    while (w->state == W_STARTING)
        pthread_cond_wait(&w->cv, &w->mu);
    st = w->start_status;
    pthread_mutex_unlock(&w->mu);
    if (st != TMA_OK) {
        pthread_join(w->thread, NULL);
        pthread_mutex_lock(&kv->watch_mu);
        unlink_watch(w);
        pthread_mutex_unlock(&kv->watch_mu);
        goto fail;
    }
    *w_p = w;
    return TMA_OK;
fail:
    watch_free(w);
    return st;
}

void tma_kv_watch_stop(tma_kv_watch_t *w)
{
    if (!w)
        return;
    __atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
    if (pthread_equal(pthread_self(), w->self)) {
        __atomic_store_n(&w->self_stop, 1, __ATOMIC_RELEASE);
        return;
    }
    curl_multi_wakeup(w->multi);
    pthread_join(w->thread, NULL);
    tma_kv_t *kv = w->kv;
    pthread_mutex_lock(&kv->watch_mu);
    unlink_watch(w);
    pthread_mutex_unlock(&kv->watch_mu);
    watch_free(w);
}

void kv_watch_shutdown(tma_kv_t *kv)
{
    pthread_mutex_lock(&kv->watch_mu);
    for (;;) {
        tma_kv_watch_t *w = kv->watches;
        while (w && __atomic_load_n(&w->self_stop, __ATOMIC_ACQUIRE))
            w = w->next;
        if (w) {
            pthread_mutex_unlock(&kv->watch_mu);
            tma_kv_watch_stop(w);
            pthread_mutex_lock(&kv->watch_mu);
        } else if (kv->watches) {
            /* Only self-stopped watches remain: they unlink themselves. */
            pthread_cond_wait(&kv->watch_cv, &kv->watch_mu);
        } else {
            break;
        }
    }
    pthread_mutex_unlock(&kv->watch_mu);
}
