/*
 * parse.c: the pure half of the etcd client: growable buffers, the answer
 * arena, base64, and the parsers that turn etcd's JSON gateway answers into
 * structs.  Nothing here touches the network, so the fuzz target drives
 * these functions directly.  int64 fields arrive as JSON strings and are
 * parsed as integers (lease IDs exceed 2^53); fields that are zero or false
 * are omitted by etcd and read as 0.
 */
#include "kv_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ buffers */

int kv_buf_reserve(kv_buf_t *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->len)
        return -1;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p)
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

int kv_buf_add(kv_buf_t *b, const void *p, size_t n)
{
    if (kv_buf_reserve(b, n) != 0)
        return -1;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int kv_buf_adds(kv_buf_t *b, const char *s)
{
    return kv_buf_add(b, s, strlen(s));
}

int kv_buf_addf(kv_buf_t *b, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    int rc = -1;
    if (n >= 0 && kv_buf_reserve(b, (size_t)n) == 0) {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
        rc = 0;
    }
    va_end(ap2);
    return rc;
}

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int kv_buf_add_b64(kv_buf_t *b, const void *p, size_t n)
{
    if (n > SIZE_MAX / 2)
        return -1;
    size_t out_len = (n + 2) / 3 * 4;
    if (kv_buf_reserve(b, out_len) != 0)
        return -1;
    const uint8_t *in = p;
    char *o = b->data + b->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *o++ = b64_alphabet[v >> 18];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = b64_alphabet[(v >> 6) & 63];
        *o++ = b64_alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        *o++ = b64_alphabet[v >> 18];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    b->len += out_len;
    b->data[b->len] = '\0';
    return 0;
}

void kv_buf_free(kv_buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------------ base64 */

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int tma_kv_b64_decode(const char *in, size_t n, uint8_t *out, size_t *out_len)
{
    if (n % 4 != 0)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int last = i + 4 == n;
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            unsigned char c = (unsigned char)in[i + k];
            if (c == '=' && last && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad) {
                return -1; /* data after padding */
            } else if ((v[k] = b64_value(c)) < 0) {
                return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (uint8_t)(w >> 16);
        if (pad < 2)
            out[o++] = (uint8_t)(w >> 8);
        if (pad < 1)
            out[o++] = (uint8_t)w;
    }
    *out_len = o;
    return 0;
}

/* ------------------------------------------------------------------ arena */

struct kv_arena {
    struct kv_arena *next;
    size_t cap, used;
    unsigned char data[] __attribute__((aligned(16)));
};

void *kv_arena_alloc(kv_arena_t **a, size_t n)
{
    if (n > SIZE_MAX / 4)
        return NULL;
    n = (n + 15) & ~(size_t)15;
    kv_arena_t *h = *a;
    if (!h || h->cap - h->used < n) {
        size_t cap = h ? h->cap * 2 : 4096;
        if (cap > ((size_t)1 << 20))
            cap = (size_t)1 << 20;
        if (cap < n)
            cap = n;
        kv_arena_t *blk = malloc(sizeof(*blk) + cap);
        if (!blk)
            return NULL;
        blk->next = h;
        blk->cap = cap;
        blk->used = 0;
        *a = h = blk;
    }
    void *p = h->data + h->used;
    h->used += n;
    return p;
}

void kv_arena_reset(kv_arena_t **a)
{
    kv_arena_t *h = *a;
    if (!h)
        return;
    kv_arena_free(h->next);
    h->next = NULL;
    h->used = 0;
}

void kv_arena_free(kv_arena_t *a)
{
    while (a) {
        kv_arena_t *next = a->next;
        free(a);
        a = next;
    }
}

void tma_kv_result_free(tma_kv_result_t *res)
{
    if (!res)
        return;
    kv_arena_free(res->mem_);
    memset(res, 0, sizeof(*res));
}

/* ------------------------------------------------------------------ JSON field readers */

/* Each returns 0, or -1 when the field has the wrong type or form.  A
 * missing field reads as zero, false or empty: etcd omits those. */

static const cJSON *js_get(const cJSON *obj, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(obj, name);
}

static int js_i64(const cJSON *obj, const char *name, int64_t *v)
{
    const cJSON *it = js_get(obj, name);
    *v = 0;
    if (!it)
        return 0;
    /* int64 is a JSON string in etcd's gateway; a JSON number would have
     * gone through a double, so it is refused rather than trusted. */
    if (!cJSON_IsString(it) || !it->valuestring)
        return -1;
    const char *s = it->valuestring;
    if (!(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')))
        return -1;
    return tma_parse_i64(s, v);
}

static int js_bool(const cJSON *obj, const char *name, int *v)
{
    const cJSON *it = js_get(obj, name);
    *v = 0;
    if (!it)
        return 0;
    if (!cJSON_IsBool(it))
        return -1;
    *v = cJSON_IsTrue(it);
    return 0;
}

/* A base64 field decoded into the arena, NUL-terminated. */
static int js_bytes(const cJSON *obj, const char *name, kv_arena_t **arena, const char **p,
                    size_t *len)
{
    const cJSON *it = js_get(obj, name);
    *p = "";
    *len = 0;
    if (!it)
        return 0;
    if (!cJSON_IsString(it) || !it->valuestring)
        return -1;
    size_t n = strlen(it->valuestring);
    uint8_t *out = kv_arena_alloc(arena, n / 4 * 3 + 1);
    if (!out)
        return -1;
    if (tma_kv_b64_decode(it->valuestring, n, out, len) != 0)
        return -1;
    out[*len] = '\0';
    *p = (const char *)out;
    return 0;
}

/* A plain (not base64) string field copied into the arena. */
static int js_text(const cJSON *obj, const char *name, kv_arena_t **arena, const char **p)
{
    const cJSON *it = js_get(obj, name);
    *p = "";
    if (!it)
        return 0;
    if (!cJSON_IsString(it) || !it->valuestring)
        return -1;
    size_t n = strlen(it->valuestring);
    char *out = kv_arena_alloc(arena, n + 1);
    if (!out)
        return -1;
    memcpy(out, it->valuestring, n + 1);
    *p = out;
    return 0;
}

static int parse_pair(const cJSON *obj, kv_arena_t **arena, tma_kv_pair_t *pair)
{
    memset(pair, 0, sizeof(*pair));
    if (!cJSON_IsObject(obj))
        return -1;
    if (js_bytes(obj, "key", arena, &pair->key, &pair->key_len) != 0 ||
        js_bytes(obj, "value", arena, &pair->value, &pair->value_len) != 0 ||
        js_i64(obj, "create_revision", &pair->create_revision) != 0 ||
        js_i64(obj, "mod_revision", &pair->mod_revision) != 0 ||
        js_i64(obj, "version", &pair->version) != 0 || js_i64(obj, "lease", &pair->lease) != 0)
        return -1;
    return 0;
}

/* An optional array of pairs. */
static int parse_pairs(const cJSON *obj, const char *name, kv_arena_t **arena,
                       tma_kv_pair_t **pairs_p, size_t *n_p)
{
    const cJSON *arr = js_get(obj, name);
    *pairs_p = NULL;
    *n_p = 0;
    if (!arr)
        return 0;
    if (!cJSON_IsArray(arr))
        return -1;
    size_t n = (size_t)cJSON_GetArraySize(arr);
    if (n == 0)
        return 0;
    tma_kv_pair_t *pairs = kv_arena_alloc(arena, n * sizeof(*pairs));
    if (!pairs)
        return -1;
    size_t i = 0;
    for (const cJSON *it = arr->child; it && i < n; it = it->next, i++) {
        if (parse_pair(it, arena, &pairs[i]) != 0)
            return -1;
    }
    *pairs_p = pairs;
    *n_p = i;
    return 0;
}

/* The header's revision; the header itself must be there. */
static int parse_header(const cJSON *root, int64_t *rev)
{
    const cJSON *h = js_get(root, "header");
    *rev = 0;
    if (!cJSON_IsObject(h))
        return -1;
    return js_i64(h, "revision", rev);
}

/* Parses a whole body: one JSON value, then only whitespace. */
static cJSON *parse_body(const char *body, size_t len)
{
    if (!body || len == 0)
        return NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root)
        return NULL;
    for (const char *p = end ? end : body + len; p < body + len; p++) {
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t' && *p != '\0') {
            cJSON_Delete(root);
            return NULL;
        }
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* ------------------------------------------------------------------ errors */

static void map_grpc(tma_kv_error_t *err)
{
    const char *m = err->message;
    switch (err->grpc_code) {
    case 3: /* InvalidArgument */
        if (strstr(m, "authentication failed") || strstr(m, "user name is empty") ||
            strstr(m, "revision of auth store is old")) {
            err->status = TMA_ERR_PERMISSION;
            /* No token was sent, or it predates an auth change: a fresh one may work. */
            err->token_invalid = strstr(m, "authentication failed") == NULL;
        } else {
            err->status = TMA_ERR_INVALID;
        }
        break;
    case 4: /* DeadlineExceeded */
        err->status = TMA_ERR_TIMEOUT;
        break;
    case 5: /* NotFound */
        err->status = strstr(m, "lease not found") ? TMA_ERR_LEASE_EXPIRED : TMA_ERR_NOT_FOUND;
        break;
    case 6: /* AlreadyExists */
    case 9: /* FailedPrecondition */
        err->status = TMA_ERR_INVALID;
        break;
    case 7: /* PermissionDenied */
        err->status = TMA_ERR_PERMISSION;
        break;
    case 8: /* ResourceExhausted: too many requests, no space; refused before applying */
        err->status = TMA_ERR_UNAVAILABLE;
        err->not_applied = 1;
        break;
    case 11: /* OutOfRange */
        err->status = strstr(m, "compacted") ? TMA_ERR_COMPACTED : TMA_ERR_RANGE;
        break;
    case 14: /* Unavailable */
        err->status = TMA_ERR_UNAVAILABLE;
        err->not_applied = strstr(m, "no leader") || strstr(m, "not capable") ||
                           strstr(m, "too many requests");
        break;
    case 16: /* Unauthenticated */
        err->status = TMA_ERR_PERMISSION;
        err->token_invalid = 1;
        break;
    default: /* Canceled, Unknown, Aborted, Internal, ...: the server failed */
        err->status = TMA_ERR_UNAVAILABLE;
        break;
    }
}

/* Reads {"error":"..","message":"..","code":N} (unary) or
 * {"error":{"grpc_code":N,"message":".."}} (streams).  0 when a code was found. */
static int read_error_object(const cJSON *root, tma_kv_error_t *err)
{
    const cJSON *code = NULL, *msg = NULL;
    const cJSON *e = js_get(root, "error");
    if (cJSON_IsObject(e)) {
        code = js_get(e, "grpc_code");
        msg = js_get(e, "message");
    } else {
        code = js_get(root, "code");
        msg = js_get(root, "message");
        if (!cJSON_IsString(msg))
            msg = e;
    }
    if (!cJSON_IsNumber(code) || code->valuedouble < 0 || code->valuedouble > 16 ||
        code->valuedouble != (double)(int)code->valuedouble)
        return -1;
    err->grpc_code = (int)code->valuedouble;
    if (cJSON_IsString(msg) && msg->valuestring)
        snprintf(err->message, sizeof(err->message), "%s", msg->valuestring);
    else
        snprintf(err->message, sizeof(err->message), "gRPC code %d", err->grpc_code);
    map_grpc(err);
    return 0;
}

tma_status_t tma_kv_parse_error(long http_code, const char *body, size_t len, tma_kv_error_t *err)
{
    memset(err, 0, sizeof(*err));
    err->grpc_code = -1;
    cJSON *root = parse_body(body, len);
    int found = root && read_error_object(root, err) == 0;
    cJSON_Delete(root);
    if (found)
        return err->status;

    /* Not etcd's error shape: describe the body (printable bytes only). */
    char snippet[80];
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < sizeof(snippet); i++) {
        unsigned char c = (unsigned char)body[i];
        snippet[k++] = (c >= 32 && c < 127) ? (char)c : ' ';
    }
    snippet[k] = '\0';
    snprintf(err->message, sizeof(err->message), "HTTP %ld with %s%s%s", http_code,
             len ? "an unexpected body: " : "an empty body", snippet, len > k ? "..." : "");
    if (http_code == 401 || http_code == 403) {
        err->status = TMA_ERR_PERMISSION;
    } else if (len >= 20 && memmem(body, len, "CommonName of client", 20)) {
        /* etcd 3.4's gateway, with auth enabled, refuses client certificates
         * that have a Common Name. */
        snprintf(err->message, sizeof(err->message),
                 "etcd refuses a client certificate with a Common Name on its JSON gateway "
                 "while authentication is enabled; use a certificate without a CN");
        err->status = TMA_ERR_PERMISSION;
    } else if (http_code == 408 || http_code == 504) {
        err->status = TMA_ERR_TIMEOUT;
    } else if (http_code >= 500 && http_code <= 599) {
        err->status = TMA_ERR_UNAVAILABLE;
    } else {
        err->status = TMA_ERR_MALFORMED;
    }
    return err->status;
}

/* Streams wrap each message: {"result":{...}} or {"error":{...}}. */
static tma_status_t unwrap_stream(const cJSON *root, const cJSON **inner, tma_kv_error_t *err)
{
    const cJSON *r = js_get(root, "result");
    if (cJSON_IsObject(r)) {
        *inner = r;
        return TMA_OK;
    }
    const cJSON *e = js_get(root, "error");
    if (e) {
        tma_kv_error_t local;
        tma_kv_error_t *ep = err ? err : &local;
        memset(ep, 0, sizeof(*ep));
        ep->grpc_code = -1;
        if (read_error_object(root, ep) != 0)
            return TMA_ERR_MALFORMED;
        return ep->status;
    }
    *inner = root;
    return TMA_OK;
}

/* Parses one answer of a streaming endpoint: *root_p (to delete) and the
 * message inside it.  A stream's error object is returned as its status. */
static tma_status_t open_stream_message(const char *body, size_t len, tma_kv_error_t *err,
                                        cJSON **root_p, const cJSON **inner_p)
{
    *root_p = parse_body(body, len);
    if (!*root_p)
        return TMA_ERR_MALFORMED;
    tma_status_t st = unwrap_stream(*root_p, inner_p, err);
    if (st != TMA_OK) {
        cJSON_Delete(*root_p);
        *root_p = NULL;
    }
    return st;
}

/* ------------------------------------------------------------------ results */

#define KV_MAX_TXN_DEPTH 8

static int parse_op_result(tma_kv_op_type_t type, const cJSON *obj, kv_arena_t **arena,
                           tma_kv_result_t *res, int depth);

static int parse_txn_responses(const cJSON *obj, kv_arena_t **arena, tma_kv_result_t *res,
                               int depth)
{
    const cJSON *arr = js_get(obj, "responses");
    if (!arr)
        return 0;
    if (!cJSON_IsArray(arr) || depth >= KV_MAX_TXN_DEPTH)
        return -1;
    size_t n = (size_t)cJSON_GetArraySize(arr);
    if (n == 0)
        return 0;
    tma_kv_result_t *results = kv_arena_alloc(arena, n * sizeof(*results));
    if (!results)
        return -1;
    static const struct {
        const char *name;
        tma_kv_op_type_t type;
    } kinds[] = {
        {"response_range", TMA_KV_OP_RANGE},
        {"response_put", TMA_KV_OP_PUT},
        {"response_delete_range", TMA_KV_OP_DELETE},
        {"response_txn", TMA_KV_OP_TXN},
    };
    size_t i = 0;
    for (const cJSON *it = arr->child; it && i < n; it = it->next, i++) {
        if (!cJSON_IsObject(it))
            return -1;
        const cJSON *inner = NULL;
        tma_kv_op_type_t type = TMA_KV_OP_RANGE;
        for (size_t k = 0; k < TMA_ARRAY_LEN(kinds); k++) {
            const cJSON *c = js_get(it, kinds[k].name);
            if (c) {
                if (inner)
                    return -1; /* one response holds exactly one kind */
                inner = c;
                type = kinds[k].type;
            }
        }
        if (!cJSON_IsObject(inner))
            return -1;
        memset(&results[i], 0, sizeof(results[i]));
        if (parse_op_result(type, inner, arena, &results[i], depth + 1) != 0)
            return -1;
    }
    res->results = results;
    res->n_results = i;
    return 0;
}

static int parse_op_result(tma_kv_op_type_t type, const cJSON *obj, kv_arena_t **arena,
                           tma_kv_result_t *res, int depth)
{
    res->type = type;
    const cJSON *h = js_get(obj, "header");
    if (h && (!cJSON_IsObject(h) || js_i64(h, "revision", &res->revision) != 0))
        return -1;
    switch (type) {
    case TMA_KV_OP_RANGE:
        return (parse_pairs(obj, "kvs", arena, &res->pairs, &res->n_pairs) != 0 ||
                js_i64(obj, "count", &res->count) != 0 || js_bool(obj, "more", &res->more) != 0)
                   ? -1
                   : 0;
    case TMA_KV_OP_PUT: {
        const cJSON *prev = js_get(obj, "prev_kv");
        if (!prev)
            return 0;
        res->pairs = kv_arena_alloc(arena, sizeof(*res->pairs));
        if (!res->pairs || parse_pair(prev, arena, res->pairs) != 0)
            return -1;
        res->n_pairs = 1;
        return 0;
    }
    case TMA_KV_OP_DELETE:
        return (js_i64(obj, "deleted", &res->count) != 0 ||
                parse_pairs(obj, "prev_kvs", arena, &res->pairs, &res->n_pairs) != 0)
                   ? -1
                   : 0;
    case TMA_KV_OP_TXN:
        return (js_bool(obj, "succeeded", &res->succeeded) != 0 ||
                parse_txn_responses(obj, arena, res, depth) != 0)
                   ? -1
                   : 0;
    }
    return -1;
}

tma_status_t tma_kv_parse_result(tma_kv_op_type_t type, const char *body, size_t len,
                                 tma_kv_result_t *res_p)
{
    cJSON *root = parse_body(body, len);
    if (!root)
        return TMA_ERR_MALFORMED;
    tma_kv_result_t res;
    memset(&res, 0, sizeof(res));
    kv_arena_t *arena = NULL;
    tma_status_t st = TMA_ERR_MALFORMED;
    if (!cJSON_IsObject(js_get(root, "header")))
        goto out;
    if (parse_op_result(type, root, &arena, &res, 0) != 0)
        goto out;
    res.mem_ = arena;
    arena = NULL;
    *res_p = res;
    st = TMA_OK;
out:
    kv_arena_free(arena);
    cJSON_Delete(root);
    return st;
}

/* ------------------------------------------------------------------ leases */

tma_status_t tma_kv_parse_lease(const char *body, size_t len, tma_kv_lease_resp_t *out_p)
{
    cJSON *root;
    const cJSON *inner;
    tma_status_t st = open_stream_message(body, len, NULL, &root, &inner);
    if (st != TMA_OK)
        return st;
    tma_kv_lease_resp_t out;
    memset(&out, 0, sizeof(out));
    st = TMA_ERR_MALFORMED;
    if (parse_header(inner, &out.revision) != 0 || js_i64(inner, "ID", &out.id) != 0 ||
        js_i64(inner, "TTL", &out.ttl) != 0 || js_i64(inner, "grantedTTL", &out.granted_ttl) != 0)
        goto done;
    out.has_ttl = js_get(inner, "TTL") != NULL;
    *out_p = out;
    st = TMA_OK;
done:
    cJSON_Delete(root);
    return st;
}

/* ------------------------------------------------------------------ watch */

static int parse_event(const cJSON *obj, kv_arena_t **arena, tma_kv_event_t *ev)
{
    memset(ev, 0, sizeof(*ev));
    if (!cJSON_IsObject(obj))
        return -1;
    const cJSON *type = js_get(obj, "type");
    if (!type) {
        ev->type = TMA_KV_EVENT_PUT; /* PUT is 0, so etcd leaves it out */
    } else if (cJSON_IsString(type) && type->valuestring && strcmp(type->valuestring, "PUT") == 0) {
        ev->type = TMA_KV_EVENT_PUT;
    } else if (cJSON_IsString(type) && type->valuestring &&
               strcmp(type->valuestring, "DELETE") == 0) {
        ev->type = TMA_KV_EVENT_DELETE;
    } else {
        return -1;
    }
    if (parse_pair(js_get(obj, "kv"), arena, &ev->kv) != 0)
        return -1;
    const cJSON *prev = js_get(obj, "prev_kv");
    if (prev) {
        if (parse_pair(prev, arena, &ev->prev_kv) != 0)
            return -1;
        ev->has_prev = 1;
    }
    return 0;
}

tma_status_t tma_kv_parse_watch(const char *line, size_t len, kv_arena_t **arena,
                                tma_kv_watch_resp_t *out_p, tma_kv_error_t *err)
{
    /* *err is defined whatever the outcome: empty unless the stream reported an error. */
    if (err) {
        memset(err, 0, sizeof(*err));
        err->grpc_code = -1;
    }
    cJSON *root;
    const cJSON *inner;
    tma_status_t st = open_stream_message(line, len, err, &root, &inner);
    if (st != TMA_OK)
        return st;
    tma_kv_watch_resp_t out;
    memset(&out, 0, sizeof(out));
    st = TMA_ERR_MALFORMED;
    if (parse_header(inner, &out.revision) != 0 || js_i64(inner, "watch_id", &out.watch_id) != 0 ||
        js_i64(inner, "compact_revision", &out.compact_revision) != 0 ||
        js_bool(inner, "created", &out.created) != 0 ||
        js_bool(inner, "canceled", &out.canceled) != 0 ||
        js_text(inner, "cancel_reason", arena, &out.cancel_reason) != 0)
        goto done;
    const cJSON *arr = js_get(inner, "events");
    if (arr) {
        if (!cJSON_IsArray(arr))
            goto done;
        size_t n = (size_t)cJSON_GetArraySize(arr);
        if (n) {
            out.events = kv_arena_alloc(arena, n * sizeof(*out.events));
            if (!out.events)
                goto done;
            size_t i = 0;
            for (const cJSON *it = arr->child; it && i < n; it = it->next, i++) {
                if (parse_event(it, arena, &out.events[i]) != 0)
                    goto done;
            }
            out.n_events = i;
        }
    }
    *out_p = out;
    st = TMA_OK;
done:
    cJSON_Delete(root);
    return st;
}

/* ------------------------------------------------------------------ auth */

tma_status_t tma_kv_parse_auth(const char *body, size_t len, char *token, size_t cap)
{
    cJSON *root = parse_body(body, len);
    if (!root)
        return TMA_ERR_MALFORMED;
    tma_status_t st = TMA_ERR_MALFORMED;
    int64_t rev;
    const cJSON *t = js_get(root, "token");
    if (parse_header(root, &rev) == 0 && cJSON_IsString(t) && t->valuestring &&
        t->valuestring[0] && strlen(t->valuestring) < cap) {
        /* The token travels in an HTTP header: refuse control bytes. */
        int ok = 1;
        for (const char *p = t->valuestring; *p; p++)
            ok &= (unsigned char)*p >= 32 && *p != 127;
        if (ok) {
            strcpy(token, t->valuestring);
            st = TMA_OK;
        }
    }
    cJSON_Delete(root);
    return st;
}

/* ------------------------------------------------------------------ keys */

int tma_kv_prefix_end(const char *prefix, char *out, size_t cap, size_t *len_p)
{
    size_t n = strlen(prefix);
    if (cap < n + 1)
        return -1;
    memcpy(out, prefix, n);
    while (n > 0) {
        unsigned char c = (unsigned char)out[n - 1];
        if (c < 0xff) {
            out[n - 1] = (char)(c + 1);
            out[n] = '\0';
            *len_p = n;
            return 0;
        }
        n--;
    }
    out[0] = '\0';
    *len_p = 1; /* the single NUL byte: everything from the key on */
    return 0;
}
