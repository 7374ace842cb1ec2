/*
 * client.c: the etcd client object: its configuration, the pool of libcurl
 * easy handles, the request path (POST a JSON body, fail over across
 * endpoints within one deadline, map every failure to a status) and the
 * authentication token with its refresh.
 *
 * Failover rules.  A request that provably never reached a server (the
 * connection was refused or timed out before a byte was sent) moves on to
 * the next endpoint.  One that may have reached it is retried elsewhere only
 * when it is idempotent (KV_CALL_RETRY), or when etcd answered that it
 * refused it before applying (no leader, too many requests).  When every
 * endpoint refused the connection in a row the call fails at once with
 * TMA_ERR_UNAVAILABLE instead of spinning until its deadline.  An idempotent
 * call gives each attempt at most a third of the request timeout (at least
 * 1 s), so one stuck member cannot use up the whole deadline.
 */
#include "kv_int.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ configuration */

void tma_kv_config_init(tma_kv_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->request_timeout_s = 5.0;
    cfg->connect_timeout_s = 1.0;
}

tma_status_t tma_kv_config_from_json(const cJSON *obj, const char *ctx, tma_kv_config_t *cfg)
{
    static const char *const keys[] = {"endpoints", "request_timeout", "connect_timeout", "ca_file",
                                       "cert_file", "key_file", "user", "password", NULL};
    if (!cJSON_IsObject(obj)) {
        tma_log_error(KV_COMP, "%s: expected an object", ctx);
        return TMA_ERR_CONFIG;
    }
    tma_status_t st = tma_json_check_keys(obj, keys, ctx);
    if (st != TMA_OK)
        return st;
    struct {
        const char *key;
        const char **dest;
    } strs[] = {
        {"endpoints", &cfg->endpoints}, {"ca_file", &cfg->ca_file},   {"cert_file", &cfg->cert_file},
        {"key_file", &cfg->key_file},   {"user", &cfg->user},         {"password", &cfg->password},
    };
    for (size_t i = 0; i < TMA_ARRAY_LEN(strs); i++) {
        st = tma_json_get_string(obj, strs[i].key, *strs[i].dest, ctx, strs[i].dest);
        if (st != TMA_OK)
            return st;
    }
    st = tma_json_get_double(obj, "request_timeout", cfg->request_timeout_s, 0.001, 86400, ctx,
                             &cfg->request_timeout_s);
    if (st == TMA_OK)
        st = tma_json_get_double(obj, "connect_timeout", cfg->connect_timeout_s, 0.001, 86400, ctx,
                                 &cfg->connect_timeout_s);
    return st;
}

/* ------------------------------------------------------------------ create / destroy */

static tma_status_t parse_endpoints(tma_kv_t *kv, const char *list)
{
    if (!list || !*list) {
        tma_log_error(KV_COMP, "endpoints: empty; give one or more URLs like http://127.0.0.1:2379");
        return TMA_ERR_CONFIG;
    }
    size_t n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    kv->endpoints = calloc(n, sizeof(char *));
    kv->ep_sockets = calloc(n, sizeof(char *));
    if (!kv->endpoints || !kv->ep_sockets)
        return TMA_ERR_NOMEM;
    const char *p = list;
    for (size_t i = 0; i < n; i++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t' || p[len - 1] == '/'))
            len--;
        int is_unix = strncmp(p, "unix://", 7) == 0;
        size_t scheme = strncmp(p, "http://", 7) == 0 ? 7 : strncmp(p, "https://", 8) == 0 ? 8 : is_unix ? 7 : 0;
        /* A socket path must be absolute and fit sun_path (108 bytes). */
        int bad = len == 0 || scheme == 0 || len <= scheme || len > 1000 ||
                  (is_unix ? p[7] != '/' || len - 7 > 107 : memchr(p + scheme, '/', len - scheme) != NULL);
        if (bad) {
            tma_log_error(KV_COMP,
                          "endpoints: '%.*s' (entry %zu of '%s') is not a URL like "
                          "http://HOST:PORT, https://HOST:PORT or unix:///ABSOLUTE/SOCKET (at most 107 bytes)",
                          (int)TMA_MIN(len, 200), p, i + 1, list);
            return TMA_ERR_CONFIG;
        }
        kv->endpoints[i] = strndup(p, len);
        if (!kv->endpoints[i])
            return TMA_ERR_NOMEM;
        kv->n_endpoints++;
        if (is_unix && !(kv->ep_sockets[i] = strndup(p + 7, len - 7)))
            return TMA_ERR_NOMEM;
        p = comma ? comma + 1 : p + len;
    }
    return TMA_OK;
}

static tma_status_t copy_file_opt(const char *what, const char *path, char **dst)
{
    if (!path || !*path)
        return TMA_OK;
    if (access(path, R_OK) != 0) {
        tma_log_error(KV_COMP, "%s: cannot read '%s'", what, path);
        return TMA_ERR_CONFIG;
    }
    *dst = strdup(path);
    return *dst ? TMA_OK : TMA_ERR_NOMEM;
}

tma_status_t tma_kv_create(const tma_kv_config_t *cfg, tma_kv_t **kv_p)
{
    if (!cfg || !kv_p)
        return TMA_ERR_INVALID;
    if (!(cfg->request_timeout_s > 0 && cfg->request_timeout_s <= 86400) ||
        !(cfg->connect_timeout_s > 0 && cfg->connect_timeout_s <= 86400)) {
        tma_log_error(KV_COMP, "request_timeout and connect_timeout must be in (0, 86400] seconds");
        return TMA_ERR_CONFIG;
    }
    if (cfg->key_file && *cfg->key_file && !(cfg->cert_file && *cfg->cert_file)) {
        tma_log_error(KV_COMP, "key_file is set without cert_file");
        return TMA_ERR_CONFIG;
    }
    if (cfg->user && *cfg->user && !cfg->password) {
        tma_log_error(KV_COMP, "user '%s' is set without a password", cfg->user);
        return TMA_ERR_CONFIG;
    }
    tma_kv_t *kv = calloc(1, sizeof(*kv));
    if (!kv)
        return TMA_ERR_NOMEM;
    pthread_mutex_init(&kv->pool_mu, NULL);
    pthread_mutex_init(&kv->auth_mu, NULL);
    pthread_mutex_init(&kv->lease_mu, NULL);
    pthread_mutex_init(&kv->watch_mu, NULL);
    tma_cond_init(&kv->lease_cv);
    tma_cond_init(&kv->watch_cv);
    kv->request_timeout_s = cfg->request_timeout_s;
    kv->connect_timeout_s = cfg->connect_timeout_s;

    tma_status_t st = parse_endpoints(kv, cfg->endpoints);
    if (st == TMA_OK && cfg->user && *cfg->user && !cfg->allow_plain_password) {
        for (size_t i = 0; i < kv->n_endpoints; i++) {
            if (strncmp(kv->endpoints[i], "http://", 7) == 0) {
                tma_log_error(KV_COMP,
                              "user '%s': refusing to send the etcd password over plain http to %s: use "
                              "https:// endpoints (with --etcd-ca) or a unix:// socket, or pass "
                              "--insecure-etcd to accept it",
                              cfg->user, kv->endpoints[i]);
                st = TMA_ERR_CONFIG;
                break;
            }
        }
    }
    if (st == TMA_OK)
        st = copy_file_opt("ca_file", cfg->ca_file, &kv->ca_file);
    if (st == TMA_OK)
        st = copy_file_opt("cert_file", cfg->cert_file, &kv->cert_file);
    if (st == TMA_OK)
        st = copy_file_opt("key_file", cfg->key_file, &kv->key_file);
    if (st == TMA_OK && cfg->user && *cfg->user) {
        kv->user = strdup(cfg->user);
        kv->password = strdup(cfg->password);
        if (!kv->user || !kv->password)
            st = TMA_ERR_NOMEM;
    }
    if (st != TMA_OK) {
        tma_kv_destroy(kv);
        return st;
    }
    *kv_p = kv;
    return TMA_OK;
}

void kv_conn_free(kv_conn_t *c)
{
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    curl_slist_free_all(c->headers);
    kv_buf_free(&c->req);
    kv_buf_free(&c->resp);
    kv_buf_free(&c->url);
    free(c);
}

void tma_kv_destroy(tma_kv_t *kv)
{
    if (!kv)
        return;
    kv_watch_shutdown(kv);
    kv_lease_shutdown(kv);
    while (kv->free_conns) {
        kv_conn_t *c = kv->free_conns;
        kv->free_conns = c->next;
        kv_conn_free(c);
    }
    for (size_t i = 0; i < kv->n_endpoints; i++) {
        free(kv->endpoints[i]);
        if (kv->ep_sockets)
            free(kv->ep_sockets[i]);
    }
    free(kv->endpoints);
    free(kv->ep_sockets);
    free(kv->ca_file);
    free(kv->cert_file);
    free(kv->key_file);
    free(kv->user);
    if (kv->password) {
        memset(kv->password, 0, strlen(kv->password));
        free(kv->password);
    }
    free(kv->token);
    free(kv->kept);
    pthread_mutex_destroy(&kv->pool_mu);
    pthread_mutex_destroy(&kv->auth_mu);
    pthread_mutex_destroy(&kv->lease_mu);
    pthread_mutex_destroy(&kv->watch_mu);
    pthread_cond_destroy(&kv->lease_cv);
    pthread_cond_destroy(&kv->watch_cv);
    free(kv);
}

/* ------------------------------------------------------------------ handles */

static size_t conn_write(char *p, size_t size, size_t nmemb, void *ud)
{
    kv_conn_t *c = ud;
    size_t n = size * nmemb;
    if (c->resp.len + n > KV_MAX_RESPONSE) {
        c->write_status = TMA_ERR_MALFORMED;
        return 0;
    }
    if (kv_buf_add(&c->resp, p, n) != 0) {
        c->write_status = TMA_ERR_NOMEM;
        return 0;
    }
    return n;
}

kv_conn_t *kv_conn_new(tma_kv_t *kv)
{
    kv_conn_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->curl = curl_easy_init();
    if (!c->curl) {
        free(c);
        return NULL;
    }
    CURL *h = c->curl;
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, conn_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
    /* etcd serves gRPC and the gateway on one port and routes HTTP/2 to gRPC. */
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 10L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 5L);
    if (kv->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, kv->ca_file);
    if (kv->cert_file)
        curl_easy_setopt(h, CURLOPT_SSLCERT, kv->cert_file);
    if (kv->key_file)
        curl_easy_setopt(h, CURLOPT_SSLKEY, kv->key_file);
    return c;
}

kv_conn_t *kv_conn_get(tma_kv_t *kv)
{
    pthread_mutex_lock(&kv->pool_mu);
    kv_conn_t *c = kv->free_conns;
    if (c)
        kv->free_conns = c->next;
    pthread_mutex_unlock(&kv->pool_mu);
    if (!c)
        c = kv_conn_new(kv);
    if (c) {
        c->next = NULL;
        kv_buf_clear(&c->req);
    }
    return c;
}

void kv_conn_put(tma_kv_t *kv, kv_conn_t *c)
{
    if (!c)
        return;
    /* LIFO: a thread that calls again soon gets the handle (and the open
     * connection) it just used. */
    pthread_mutex_lock(&kv->pool_mu);
    c->next = kv->free_conns;
    kv->free_conns = c;
    pthread_mutex_unlock(&kv->pool_mu);
}

/* ------------------------------------------------------------------ endpoints */

size_t kv_endpoint_current(tma_kv_t *kv)
{
    return __atomic_load_n(&kv->cur_ep, __ATOMIC_RELAXED) % kv->n_endpoints;
}

void kv_endpoint_advance(tma_kv_t *kv, size_t ep)
{
    size_t expect = ep;
    __atomic_compare_exchange_n(&kv->cur_ep, &expect, (ep + 1) % kv->n_endpoints, 0,
                                __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

double kv_deadline(const tma_kv_t *kv)
{
    return tma_clock_now() + kv->request_timeout_s;
}

/* ------------------------------------------------------------------ requests */

CURLcode kv_perform(CURL *curl)
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    CURLcode cc = curl_easy_perform(curl);
    if (!sigismember(&old, SIGPIPE)) {
        /* Swallow a SIGPIPE this transfer raised before unblocking. */
        sigset_t pending;
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE)) {
            struct timespec zero = {0, 0};
            sigtimedwait(&pipe_set, NULL, &zero);
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    return cc;
}

void kv_thread_block_sigpipe(void)
{
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
}

tma_status_t kv_conn_prepare(tma_kv_t *kv, kv_conn_t *c, size_t ep, const char *path,
                             unsigned flags, uint64_t *gen_p)
{
    kv_buf_clear(&c->url);
    /* A unix socket carries plain HTTP; the host name is only a placeholder. */
    const char *sock = kv->ep_sockets[ep];
    if (kv_buf_adds(&c->url, sock ? "http://localhost" : kv->endpoints[ep]) != 0 ||
        kv_buf_adds(&c->url, path) != 0)
        return TMA_ERR_NOMEM;
    curl_easy_setopt(c->curl, CURLOPT_URL, c->url.data);
    curl_easy_setopt(c->curl, CURLOPT_UNIX_SOCKET_PATH, sock);

    /* Without a token yet the request goes out bare; etcd then asks for one. */
    int want_auth = 0;
    uint64_t gen = 0;
    char *token = NULL;
    if (kv->user && !(flags & KV_CALL_NO_AUTH)) {
        pthread_mutex_lock(&kv->auth_mu);
        gen = kv->token_gen;
        want_auth = kv->token != NULL;
        if (want_auth && (!c->headers || !c->headers_auth || c->headers_gen != gen))
            token = tma_strdup_printf("Authorization: %s", kv->token);
        pthread_mutex_unlock(&kv->auth_mu);
    }
    int rebuild = !c->headers || c->headers_auth != want_auth || (want_auth && c->headers_gen != gen);
    if (rebuild) {
        if (want_auth && !token)
            return TMA_ERR_NOMEM;
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
        struct curl_slist *h2 = h ? curl_slist_append(h, "Expect:") : NULL;
        struct curl_slist *h3 = h2 && token ? curl_slist_append(h2, token) : h2;
        free(token);
        if (!h3) {
            curl_slist_free_all(h2 ? h2 : h);
            return TMA_ERR_NOMEM;
        }
        curl_slist_free_all(c->headers);
        c->headers = h3;
        c->headers_auth = want_auth;
        c->headers_gen = gen;
    } else {
        free(token);
    }
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, c->req.data ? c->req.data : "");
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->req.len);
    *gen_p = gen;
    return TMA_OK;
}

tma_status_t kv_curl_status(CURLcode cc, const char *errbuf)
{
    int tls_refused = errbuf && (strstr(errbuf, "alert") || strstr(errbuf, "certificate") ||
                                 strstr(errbuf, "verify"));
    switch (cc) {
    case CURLE_OK:
        return TMA_OK;
    case CURLE_OPERATION_TIMEDOUT:
        return TMA_ERR_TIMEOUT;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CIPHER:
        return TMA_ERR_PERMISSION;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_RECV_ERROR:
        /* A TLS alert (bad or missing client certificate, unknown CA) is a
         * refusal; anything else is a broken connection. */
        return tls_refused ? TMA_ERR_PERMISSION : TMA_ERR_UNAVAILABLE;
    case CURLE_OUT_OF_MEMORY:
        return TMA_ERR_NOMEM;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return TMA_ERR_INVALID;
    default:
        return TMA_ERR_UNAVAILABLE;
    }
}

/* Logs a final failure once: misconfiguration loudly, transient trouble as
 * a warning (the caller decides whether it is fatal). */
static void log_failure(kv_conn_t *c, unsigned flags, tma_status_t st, const char *ep, const char *path,
                        const char *what)
{
    snprintf(c->why, sizeof c->why, "%s: %s", ep, what);
    tma_log_level_t lvl = TMA_LOG_WARN;
    if (st == TMA_ERR_PERMISSION || st == TMA_ERR_MALFORMED || st == TMA_ERR_INVALID)
        lvl = TMA_LOG_ERROR;
    if (flags & KV_CALL_QUIET)
        lvl = TMA_LOG_DEBUG;
    if (lvl <= tma_log_get_level())
        tma_log_msg(lvl, KV_COMP, "%s%s: %s (%s)", ep, path, what, tma_status_str(st));
}

static void sleep_until_at_most(double seconds, double deadline)
{
    double left = deadline - tma_clock_now();
    tma_sleep(TMA_MIN(seconds, left));
}

static tma_status_t call(tma_kv_t *kv, kv_conn_t *c, const char *path, unsigned flags, double deadline)
{
    size_t n = kv->n_endpoints;
    size_t ep = kv_endpoint_current(kv);
    size_t at = ep; /* the endpoint of the attempt being judged */
    size_t refused = 0;
    int refreshed = 0;
    double backoff = 0.02;
    tma_status_t last = TMA_ERR_TIMEOUT;
    char last_what[300] = "no attempt finished before the deadline";
    int want_auth = kv->user && !(flags & KV_CALL_NO_AUTH);

    for (;;) {
        double left = deadline - tma_clock_now();
        if (left <= 0) {
            /* "Unavailable" answers until the end mean the cluster could not
             * serve; anything else is a plain timeout. */
            tma_status_t st = last == TMA_ERR_UNAVAILABLE ? TMA_ERR_UNAVAILABLE : TMA_ERR_TIMEOUT;
            log_failure(c, flags, st, kv->endpoints[at], path, last_what);
            return st;
        }
        at = ep;
        if (want_auth) {
            pthread_mutex_lock(&kv->auth_mu);
            int have = kv->token != NULL;
            pthread_mutex_unlock(&kv->auth_mu);
            if (!have) {
                tma_status_t st = kv_auth_refresh(kv, 0);
                if (st != TMA_OK)
                    return st;
            }
        }
        uint64_t gen;
        tma_status_t st = kv_conn_prepare(kv, c, ep, path, flags, &gen);
        if (st != TMA_OK)
            return st;
        /* An idempotent call gives one attempt at most a third of its time:
         * a request stuck on a member (a hung member, or a proposal sent to a
         * leader that just died, which waits for etcd's own 5 s timeout) is
         * then sent to the others in turn. */
        double attempt = left;
        if (flags & KV_CALL_RETRY)
            attempt = TMA_MIN(left, TMA_MAX(1.0, kv->request_timeout_s / 3));
        long left_ms = (long)ceil(attempt * 1000.0);
        curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, left_ms);
        curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS,
                         TMA_MAX(1L, TMA_MIN(left_ms, (long)(kv->connect_timeout_s * 1000.0))));
        kv_buf_clear(&c->resp);
        c->write_status = TMA_OK;
        c->errbuf[0] = '\0';
        CURLcode cc = kv_perform(c->curl);

        if (cc == CURLE_OK) {
            long code = 0;
            curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &code);
            if (code == 200)
                return TMA_OK;
            tma_kv_error_t err;
            tma_kv_parse_error(code, c->resp.data, c->resp.len, &err);
            if (err.token_invalid && want_auth && !refreshed) {
                refreshed = 1;
                st = kv_auth_refresh(kv, gen);
                if (st != TMA_OK)
                    return st;
                continue;
            }
            int retry = (err.status == TMA_ERR_UNAVAILABLE || err.status == TMA_ERR_TIMEOUT) &&
                        ((flags & KV_CALL_RETRY) || err.not_applied);
            if (!retry) {
                if (err.status == TMA_ERR_PERMISSION || err.status == TMA_ERR_MALFORMED ||
                    err.status == TMA_ERR_INVALID || err.status == TMA_ERR_UNAVAILABLE ||
                    err.status == TMA_ERR_TIMEOUT)
                    log_failure(c, flags, err.status, kv->endpoints[at], path, err.message);
                return err.status;
            }
            last = err.status;
            snprintf(last_what, sizeof(last_what), "%s", err.message);
            tma_log_debug(KV_COMP, "%s%s: %s; trying the next endpoint", kv->endpoints[at], path,
                          err.message);
            refused = 0;
            kv_endpoint_advance(kv, ep);
            ep = (ep + 1) % n;
            sleep_until_at_most(backoff, deadline);
            backoff = TMA_MIN(backoff * 2, 0.5);
            continue;
        }

        if (cc == CURLE_WRITE_ERROR && c->write_status != TMA_OK) {
            log_failure(c, flags, c->write_status, kv->endpoints[at], path,
                        c->write_status == TMA_ERR_NOMEM ? "out of memory for the answer"
                                                         : "the answer is too large");
            return c->write_status;
        }
        st = kv_curl_status(cc, c->errbuf);
        const char *why = c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc);
        if (st == TMA_ERR_PERMISSION || st == TMA_ERR_NOMEM || st == TMA_ERR_INVALID) {
            log_failure(c, flags, st, kv->endpoints[at], path, why);
            return st;
        }
        /* Bytes of the request went out: the server may have acted on it. */
        curl_off_t sent_bytes = 0;
        long req_size = 0;
        curl_easy_getinfo(c->curl, CURLINFO_REQUEST_SIZE, &req_size);
        curl_easy_getinfo(c->curl, CURLINFO_SIZE_UPLOAD_T, &sent_bytes);
        int sent = req_size > 0 || sent_bytes > 0;
        last = st;
        snprintf(last_what, sizeof(last_what), "%s", why);
        tma_log_debug(KV_COMP, "%s%s: %s%s", kv->endpoints[at], path, why,
                      sent ? " (after sending)" : "");
        kv_endpoint_advance(kv, ep);
        if (sent && !(flags & KV_CALL_RETRY)) {
            log_failure(c, flags, st, kv->endpoints[at], path, why);
            return st;
        }
        ep = (ep + 1) % n;
        if (!sent && (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST)) {
            if (++refused >= n) {
                log_failure(c, flags, TMA_ERR_UNAVAILABLE, kv->endpoints[at], path,
                            n > 1 ? "every endpoint refused the connection" : why);
                return TMA_ERR_UNAVAILABLE;
            }
        } else {
            refused = 0;
        }
    }
}

/* Counts the calls that failed as requests: no answer, or an error answer.
 * A missing key, a failed compare, an expired lease or a compacted
 * revision are answers the callers expect, not errors. */
tma_status_t kv_call(tma_kv_t *kv, kv_conn_t *c, const char *path, unsigned flags, double deadline)
{
    tma_status_t st = call(kv, c, path, flags, deadline);
    if (st != TMA_OK && st != TMA_ERR_NOT_FOUND && st != TMA_ERR_COMPARE_FAILED && st != TMA_ERR_LEASE_EXPIRED &&
        st != TMA_ERR_COMPACTED)
        __atomic_add_fetch(&kv->request_errors, 1, __ATOMIC_RELAXED);
    return st;
}

uint64_t tma_kv_request_errors(tma_kv_t *kv)
{
    return __atomic_load_n(&kv->request_errors, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ authentication */

#define KV_MAX_TOKEN 4096

tma_status_t kv_auth_refresh(tma_kv_t *kv, uint64_t gen)
{
    pthread_mutex_lock(&kv->auth_mu);
    if (kv->token && kv->token_gen != gen) {
        /* Another thread got a fresh token while this one waited. */
        pthread_mutex_unlock(&kv->auth_mu);
        return TMA_OK;
    }
    tma_status_t st = TMA_ERR_NOMEM;
    char *token = NULL;
    kv_conn_t *c = kv_conn_get(kv);
    cJSON *body = cJSON_CreateObject();
    char *text = NULL;
    if (!c || !body || !cJSON_AddStringToObject(body, "name", kv->user) ||
        !cJSON_AddStringToObject(body, "password", kv->password) ||
        !(text = cJSON_PrintUnformatted(body)) || kv_buf_adds(&c->req, text) != 0)
        goto out;
    st = kv_call(kv, c, "/v3/auth/authenticate", KV_CALL_RETRY | KV_CALL_NO_AUTH,
                 kv_deadline(kv));
    if (st == TMA_OK) {
        token = malloc(KV_MAX_TOKEN);
        if (!token) {
            st = TMA_ERR_NOMEM;
            goto out;
        }
        st = tma_kv_parse_auth(c->resp.data, c->resp.len, token, KV_MAX_TOKEN);
        if (st != TMA_OK) {
            tma_log_error(KV_COMP, "/v3/auth/authenticate: the answer has no valid token");
            goto out;
        }
        free(kv->token);
        kv->token = token;
        token = NULL;
        kv->token_gen++;
        tma_log_debug(KV_COMP, "authenticated as '%s'", kv->user);
    }
out:
    free(token);
    if (text) {
        memset(text, 0, strlen(text));
        cJSON_free(text);
    }
    cJSON_Delete(body);
    if (c) {
        if (c->req.data)
            memset(c->req.data, 0, c->req.len);
        kv_buf_clear(&c->req);
        kv_conn_put(kv, c);
    }
    pthread_mutex_unlock(&kv->auth_mu);
    return st;
}
