/*
 * ops.c: the key operations: get, put, range (with the page-by-page walk at
 * one revision), delete, transactions and the create-if-absent and
 * compare-and-swap helpers built on them.  Each builds its JSON body in the
 * handle's reusable buffer, makes one call and parses the answer.
 */
#include "kv_int.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ body builders */

/* "name":"<base64 of bytes>" */
static int add_b64_field(kv_buf_t *b, const char *name, const void *p, size_t n)
{
    return kv_buf_addf(b, "\"%s\":\"", name) || kv_buf_add_b64(b, p, n) || kv_buf_adds(b, "\"");
}

/* "name":"<decimal>" (int64 travels as a string) */
static int add_i64_field(kv_buf_t *b, const char *name, int64_t v)
{
    return kv_buf_addf(b, "\"%s\":\"%lld\"", name, (long long)v);
}

/* The key (as bytes) and the end of its range: [key, key+"\0") for a single
 * key, the prefix's end with TMA_KV_PREFIX, or an explicit end. */
static int add_range_bytes(kv_buf_t *b, const char *key, size_t key_len, unsigned flags,
                           const char *end, size_t end_len)
{
    if (flags & TMA_KV_PREFIX) {
        if (key_len == 0) /* every key: from "\0" to the end of the key space */
            return add_b64_field(b, "key", "", 1) || kv_buf_adds(b, ",") ||
                   add_b64_field(b, "range_end", "", 1);
    }
    if (add_b64_field(b, "key", key, key_len))
        return -1;
    if (end)
        return kv_buf_adds(b, ",") || add_b64_field(b, "range_end", end, end_len);
    return 0;
}

/* The range end of a prefix in a malloc'd buffer (*end_p) or NULL for none. */
static tma_status_t range_end_of(const char *key, unsigned flags, const char *end, char **end_p,
                                 size_t *len_p)
{
    *end_p = NULL;
    *len_p = 0;
    if (flags & TMA_KV_PREFIX) {
        size_t n = strlen(key);
        char *e = malloc(n + 1);
        if (!e)
            return TMA_ERR_NOMEM;
        tma_kv_prefix_end(key, e, n + 1, len_p);
        *end_p = e;
    } else if (end) {
        *end_p = strdup(end);
        if (!*end_p)
            return TMA_ERR_NOMEM;
        *len_p = strlen(end);
    }
    return TMA_OK;
}

int kv_buf_add_key_range(kv_buf_t *b, const char *key, unsigned flags, const char *end)
{
    char *e;
    size_t elen;
    if (range_end_of(key, flags, end, &e, &elen) != TMA_OK)
        return -1;
    int rc = add_range_bytes(b, key, strlen(key), flags, e, elen);
    free(e);
    return rc;
}

/* ------------------------------------------------------------------ one call */

/* Makes the call whose body is in c->req and parses the answer as `type`
 * into *res_p (may be NULL: the answer is only checked). */
static tma_status_t roundtrip(tma_kv_t *kv, kv_conn_t *c, const char *path, unsigned flags,
                              tma_kv_op_type_t type, tma_kv_result_t *res_p)
{
    tma_status_t st = kv_call(kv, c, path, flags, kv_deadline(kv));
    if (st != TMA_OK)
        return st;
    tma_kv_result_t res;
    memset(&res, 0, sizeof(res));
    st = tma_kv_parse_result(type, c->resp.data, c->resp.len, &res);
    if (st != TMA_OK) {
        tma_log_error(KV_COMP, "%s: malformed answer from etcd (%zu bytes)", path, c->resp.len);
        return st;
    }
    if (res_p)
        *res_p = res;
    else
        tma_kv_result_free(&res);
    return TMA_OK;
}

static int key_ok(const char *key, unsigned flags)
{
    /* etcd refuses an empty key; an empty prefix means "every key". */
    return key && (key[0] || (flags & TMA_KV_PREFIX));
}

/* ------------------------------------------------------------------ get / put / range / delete */

static tma_status_t range_call(tma_kv_t *kv, const char *key, size_t key_len, unsigned flags,
                               const char *end, size_t end_len, const tma_kv_range_opts_t *o,
                               tma_kv_result_t *res_p)
{
    kv_conn_t *c = kv_conn_get(kv);
    if (!c)
        return TMA_ERR_NOMEM;
    kv_buf_t *b = &c->req;
    int bad = kv_buf_adds(b, "{") || add_range_bytes(b, key, key_len, flags, end, end_len);
    if (o && o->limit > 0)
        bad = bad || kv_buf_adds(b, ",") || add_i64_field(b, "limit", o->limit);
    if (o && o->revision > 0)
        bad = bad || kv_buf_adds(b, ",") || add_i64_field(b, "revision", o->revision);
    if (o && o->keys_only)
        bad = bad || kv_buf_adds(b, ",\"keys_only\":true");
    if (o && o->count_only)
        bad = bad || kv_buf_adds(b, ",\"count_only\":true");
    bad = bad || kv_buf_adds(b, "}");
    tma_status_t st = bad ? TMA_ERR_NOMEM
                          : roundtrip(kv, c, "/v3/kv/range", KV_CALL_RETRY, TMA_KV_OP_RANGE, res_p);
    kv_conn_put(kv, c);
    return st;
}

tma_status_t tma_kv_range(tma_kv_t *kv, const char *key, const tma_kv_range_opts_t *opts,
                          tma_kv_result_t *res_p)
{
    unsigned flags = opts ? opts->flags : 0;
    if (!kv || !res_p || !key_ok(key, flags) || (opts && (opts->limit < 0 || opts->revision < 0)))
        return TMA_ERR_INVALID;
    char *end;
    size_t end_len;
    tma_status_t st = range_end_of(key, flags, opts ? opts->end : NULL, &end, &end_len);
    if (st == TMA_OK)
        st = range_call(kv, key, strlen(key), flags, end, end_len, opts, res_p);
    free(end);
    return st;
}

tma_status_t tma_kv_get(tma_kv_t *kv, const char *key, tma_kv_result_t *res_p)
{
    if (!kv || !res_p || !key_ok(key, 0))
        return TMA_ERR_INVALID;
    tma_kv_result_t res;
    memset(&res, 0, sizeof(res));
    tma_status_t st = range_call(kv, key, strlen(key), 0, NULL, 0, NULL, &res);
    if (st != TMA_OK)
        return st;
    if (res.n_pairs == 0) {
        tma_kv_result_free(&res);
        return TMA_ERR_NOT_FOUND;
    }
    *res_p = res;
    return TMA_OK;
}

tma_status_t tma_kv_ping(tma_kv_t *kv, double timeout_s, char *why, size_t why_cap)
{
    if (!kv || !(timeout_s > 0))
        return TMA_ERR_INVALID;
    kv_conn_t *c = kv_conn_get(kv);
    if (!c)
        return TMA_ERR_NOMEM;
    c->why[0] = '\0';
    /* A count of the key "/tma/" ("L3RtYS8=" in base64): a few bytes back. */
    tma_status_t st = kv_buf_adds(&c->req, "{\"key\":\"L3RtYS8=\",\"count_only\":true}")
                          ? TMA_ERR_NOMEM
                          : kv_call(kv, c, "/v3/kv/range", KV_CALL_RETRY | KV_CALL_QUIET,
                                    tma_clock_now() + timeout_s);
    if (st != TMA_OK && why && why_cap)
        snprintf(why, why_cap, "%s", c->why[0] ? c->why : tma_status_str(st));
    kv_conn_put(kv, c);
    return st;
}

tma_status_t tma_kv_range_each(tma_kv_t *kv, const char *key, const tma_kv_range_opts_t *opts,
                               tma_kv_pair_fn fn, void *arg, int64_t *revision_p)
{
    unsigned flags = opts ? opts->flags : 0;
    if (!kv || !fn || !key_ok(key, flags) ||
        (opts && (opts->limit < 0 || opts->revision < 0 || opts->count_only)))
        return TMA_ERR_INVALID;
    tma_kv_range_opts_t o = {0};
    if (opts)
        o = *opts;
    if (o.limit == 0)
        o.limit = 1000;

    char *end;
    size_t end_len;
    tma_status_t st = range_end_of(key, flags, o.end, &end, &end_len);
    if (st != TMA_OK)
        return st;
    /* Later pages start just past the last key seen; they carry the explicit
     * end so the prefix flag no longer applies. */
    kv_buf_t cur = {0};
    int single = !(flags & TMA_KV_PREFIX) && !o.end;
    size_t klen = strlen(key);
    if ((flags & TMA_KV_PREFIX) && klen == 0) {
        st = kv_buf_add(&cur, "", 1) ? TMA_ERR_NOMEM : TMA_OK;
    } else {
        st = kv_buf_add(&cur, key, klen) ? TMA_ERR_NOMEM : TMA_OK;
    }
    while (st == TMA_OK) {
        tma_kv_result_t res;
        memset(&res, 0, sizeof(res));
        st = range_call(kv, cur.data, cur.len, 0, single ? NULL : end, end_len, &o, &res);
        if (st != TMA_OK)
            break;
        if (o.revision == 0)
            o.revision = res.revision; /* pin every later page to this snapshot */
        for (size_t i = 0; i < res.n_pairs && st == TMA_OK; i++) {
            if (fn(arg, &res.pairs[i]))
                st = TMA_ERR_CANCELLED;
        }
        int more = res.more && res.n_pairs > 0;
        if (st == TMA_OK && more) {
            const tma_kv_pair_t *last = &res.pairs[res.n_pairs - 1];
            kv_buf_clear(&cur);
            if (kv_buf_add(&cur, last->key, last->key_len) || kv_buf_add(&cur, "", 1))
                st = TMA_ERR_NOMEM;
        }
        tma_kv_result_free(&res);
        if (!more)
            break;
    }
    kv_buf_free(&cur);
    free(end);
    if (st == TMA_OK && revision_p)
        *revision_p = o.revision;
    return st;
}

tma_status_t tma_kv_put(tma_kv_t *kv, const char *key, const void *value, size_t value_len,
                        int64_t lease, int64_t *revision_p)
{
    if (!kv || !key_ok(key, 0) || (!value && value_len) || lease < 0)
        return TMA_ERR_INVALID;
    kv_conn_t *c = kv_conn_get(kv);
    if (!c)
        return TMA_ERR_NOMEM;
    kv_buf_t *b = &c->req;
    int bad = kv_buf_adds(b, "{") || add_b64_field(b, "key", key, strlen(key)) ||
              kv_buf_adds(b, ",") || add_b64_field(b, "value", value, value_len);
    if (lease)
        bad = bad || kv_buf_adds(b, ",") || add_i64_field(b, "lease", lease);
    bad = bad || kv_buf_adds(b, "}");
    tma_kv_result_t res;
    memset(&res, 0, sizeof(res));
    tma_status_t st =
        bad ? TMA_ERR_NOMEM : roundtrip(kv, c, "/v3/kv/put", KV_CALL_RETRY, TMA_KV_OP_PUT, &res);
    kv_conn_put(kv, c);
    if (st == TMA_OK && revision_p)
        *revision_p = res.revision;
    tma_kv_result_free(&res);
    return st;
}

tma_status_t tma_kv_delete(tma_kv_t *kv, const char *key, unsigned flags, tma_kv_result_t *res_p)
{
    if (!kv || !key_ok(key, flags))
        return TMA_ERR_INVALID;
    kv_conn_t *c = kv_conn_get(kv);
    if (!c)
        return TMA_ERR_NOMEM;
    kv_buf_t *b = &c->req;
    int bad = kv_buf_adds(b, "{") || kv_buf_add_key_range(b, key, flags, NULL);
    if (flags & TMA_KV_PREV_KV)
        bad = bad || kv_buf_adds(b, ",\"prev_kv\":true");
    bad = bad || kv_buf_adds(b, "}");
    tma_status_t st = bad ? TMA_ERR_NOMEM
                          : roundtrip(kv, c, "/v3/kv/deleterange", KV_CALL_RETRY,
                                      TMA_KV_OP_DELETE, res_p);
    kv_conn_put(kv, c);
    return st;
}

/* ------------------------------------------------------------------ transactions */

static int add_cmp(kv_buf_t *b, const tma_kv_cmp_t *cmp)
{
    static const char *const targets[] = {"VALUE", "CREATE", "MOD", "VERSION", "LEASE"};
    static const char *const fields[] = {"value", "create_revision", "mod_revision", "version",
                                         "lease"};
    static const char *const results[] = {"EQUAL", "NOT_EQUAL", "GREATER", "LESS"};
    int bad = kv_buf_addf(b, "{\"target\":\"%s\",\"result\":\"%s\",", targets[cmp->target],
                          results[cmp->op]) ||
              add_b64_field(b, "key", cmp->key, strlen(cmp->key)) || kv_buf_adds(b, ",");
    if (cmp->target == TMA_KV_CMP_VALUE)
        bad = bad || add_b64_field(b, "value", cmp->value, cmp->value_len);
    else
        bad = bad || add_i64_field(b, fields[cmp->target], cmp->number);
    return bad || kv_buf_adds(b, "}");
}

static int add_op(kv_buf_t *b, const tma_kv_op_t *op)
{
    switch (op->type) {
    case TMA_KV_OP_RANGE:
        return kv_buf_adds(b, "{\"request_range\":{") ||
               kv_buf_add_key_range(b, op->key, op->flags, NULL) || kv_buf_adds(b, "}}");
    case TMA_KV_OP_PUT: {
        int bad = kv_buf_adds(b, "{\"request_put\":{") ||
                  add_b64_field(b, "key", op->key, strlen(op->key)) || kv_buf_adds(b, ",") ||
                  add_b64_field(b, "value", op->value, op->value_len);
        if (op->lease)
            bad = bad || kv_buf_adds(b, ",") || add_i64_field(b, "lease", op->lease);
        return bad || kv_buf_adds(b, "}}");
    }
    case TMA_KV_OP_DELETE:
        return kv_buf_adds(b, "{\"request_delete_range\":{") ||
               kv_buf_add_key_range(b, op->key, op->flags, NULL) || kv_buf_adds(b, "}}");
    default:
        return -1;
    }
}

static int ops_valid(const tma_kv_op_t *ops, size_t n, int *read_only)
{
    if (n && !ops)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const tma_kv_op_t *op = &ops[i];
        if (op->type != TMA_KV_OP_RANGE && op->type != TMA_KV_OP_PUT &&
            op->type != TMA_KV_OP_DELETE)
            return 0;
        if (!key_ok(op->key, op->type == TMA_KV_OP_PUT ? 0 : op->flags))
            return 0;
        if (op->type == TMA_KV_OP_PUT && ((!op->value && op->value_len) || op->lease < 0))
            return 0;
        if (op->type != TMA_KV_OP_RANGE)
            *read_only = 0;
    }
    return 1;
}

static int add_op_list(kv_buf_t *b, const char *name, const tma_kv_op_t *ops, size_t n)
{
    int bad = kv_buf_addf(b, ",\"%s\":[", name);
    for (size_t i = 0; i < n && !bad; i++)
        bad = (i && kv_buf_adds(b, ",")) || add_op(b, &ops[i]);
    return bad || kv_buf_adds(b, "]");
}

tma_status_t tma_kv_txn(tma_kv_t *kv, const tma_kv_txn_t *txn, tma_kv_result_t *res_p)
{
    if (!kv || !txn || !res_p || (txn->n_cmp && !txn->cmp))
        return TMA_ERR_INVALID;
    for (size_t i = 0; i < txn->n_cmp; i++) {
        const tma_kv_cmp_t *cmp = &txn->cmp[i];
        if (!key_ok(cmp->key, 0) || (unsigned)cmp->target > TMA_KV_CMP_LEASE ||
            (unsigned)cmp->op > TMA_KV_LESS ||
            (cmp->target == TMA_KV_CMP_VALUE && !cmp->value && cmp->value_len))
            return TMA_ERR_INVALID;
    }
    int read_only = 1;
    if (!ops_valid(txn->success, txn->n_success, &read_only) ||
        !ops_valid(txn->failure, txn->n_failure, &read_only))
        return TMA_ERR_INVALID;

    kv_conn_t *c = kv_conn_get(kv);
    if (!c)
        return TMA_ERR_NOMEM;
    kv_buf_t *b = &c->req;
    int bad = kv_buf_adds(b, "{\"compare\":[");
    for (size_t i = 0; i < txn->n_cmp && !bad; i++)
        bad = (i && kv_buf_adds(b, ",")) || add_cmp(b, &txn->cmp[i]);
    bad = bad || kv_buf_adds(b, "]") || add_op_list(b, "success", txn->success, txn->n_success) ||
          add_op_list(b, "failure", txn->failure, txn->n_failure) || kv_buf_adds(b, "}");
    /* A transaction that only reads may be repeated; one that writes may not
     * (a compare-and-swap applied twice would report a false failure). */
    tma_status_t st = bad ? TMA_ERR_NOMEM
                          : roundtrip(kv, c, "/v3/kv/txn", read_only ? KV_CALL_RETRY : 0,
                                      TMA_KV_OP_TXN, res_p);
    kv_conn_put(kv, c);
    return st;
}

/* A txn of one compare, one put on success, and optionally a read of the
 * key after it (success) or instead of it (failure). */
static tma_status_t guarded_put(tma_kv_t *kv, const tma_kv_cmp_t *cmp, const char *key,
                                const void *value, size_t value_len, int64_t lease, int read_back,
                                tma_kv_result_t *res_p)
{
    const tma_kv_op_t ok_ops[2] = {
        {.type = TMA_KV_OP_PUT, .key = key, .value = value, .value_len = value_len, .lease = lease},
        {.type = TMA_KV_OP_RANGE, .key = key},
    };
    const tma_kv_op_t fail_ops[1] = {{.type = TMA_KV_OP_RANGE, .key = key}};
    const tma_kv_txn_t txn = {cmp, 1, ok_ops, read_back ? 2 : 1, fail_ops, read_back ? 1 : 0};
    return tma_kv_txn(kv, &txn, res_p);
}

/* A put guarded by one compare: TMA_ERR_COMPARE_FAILED when it did not hold. */
static tma_status_t swap(tma_kv_t *kv, const tma_kv_cmp_t *cmp, const void *value, size_t value_len,
                         int64_t lease, int64_t *revision_p)
{
    tma_kv_result_t res;
    memset(&res, 0, sizeof(res));
    tma_status_t st = guarded_put(kv, cmp, cmp->key, value, value_len, lease, 0, &res);
    if (st == TMA_OK && !res.succeeded)
        st = TMA_ERR_COMPARE_FAILED;
    if (st == TMA_OK && revision_p)
        *revision_p = res.revision;
    tma_kv_result_free(&res);
    return st;
}

tma_status_t tma_kv_cas(tma_kv_t *kv, const char *key, int64_t expected_mod_revision,
                        const void *value, size_t value_len, int64_t lease, int64_t *revision_p)
{
    if (!key_ok(key, 0) || expected_mod_revision < 0)
        return TMA_ERR_INVALID;
    const tma_kv_cmp_t cmp = {.key = key, .target = TMA_KV_CMP_MOD, .op = TMA_KV_EQUAL,
                              .number = expected_mod_revision};
    return swap(kv, &cmp, value, value_len, lease, revision_p);
}

tma_status_t tma_kv_cas_value(tma_kv_t *kv, const char *key, const void *expected,
                              size_t expected_len, const void *value, size_t value_len,
                              int64_t lease, int64_t *revision_p)
{
    if (!key_ok(key, 0) || (!expected && expected_len))
        return TMA_ERR_INVALID;
    const tma_kv_cmp_t cmp = {.key = key, .target = TMA_KV_CMP_VALUE, .op = TMA_KV_EQUAL,
                              .value = expected, .value_len = expected_len};
    return swap(kv, &cmp, value, value_len, lease, revision_p);
}

tma_status_t tma_kv_put_if_absent(tma_kv_t *kv, const char *key, const void *value,
                                  size_t value_len, int64_t lease, tma_kv_result_t *current_p)
{
    if (!key_ok(key, 0))
        return TMA_ERR_INVALID;
    const tma_kv_cmp_t cmp = {.key = key, .target = TMA_KV_CMP_CREATE, .op = TMA_KV_EQUAL,
                              .number = 0};
    tma_kv_result_t res;
    memset(&res, 0, sizeof(res));
    tma_status_t st = guarded_put(kv, &cmp, key, value, value_len, lease, current_p != NULL, &res);
    if (st != TMA_OK)
        return st;
    st = res.succeeded ? TMA_OK : TMA_ERR_COMPARE_FAILED;
    if (current_p) {
        /* The read is the last op of whichever branch ran; hand its pairs
         * over together with the memory that holds them. */
        const tma_kv_result_t *read = res.n_results ? &res.results[res.n_results - 1] : NULL;
        if (!read || read->type != TMA_KV_OP_RANGE || read->n_pairs != 1) {
            /* The key vanished between the compare and the read: impossible
             * inside one txn, so the answer is wrong. */
            tma_log_error(KV_COMP, "put_if_absent %s: the txn answer lacks the key's read", key);
            tma_kv_result_free(&res);
            return TMA_ERR_MALFORMED;
        }
        tma_kv_result_t cur = res;
        cur.type = TMA_KV_OP_RANGE;
        cur.count = 1;
        cur.n_pairs = 1;
        cur.pairs = read->pairs;
        cur.n_results = 0;
        cur.results = NULL;
        *current_p = cur;
        return st;
    }
    tma_kv_result_free(&res);
    return st;
}
