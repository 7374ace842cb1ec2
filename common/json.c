/*
 * json.c: cJSON helpers for config files: parse with a located error, typed
 * getters that name the object and key at fault, unknown-key checks, and
 * atomic writes.
 */
#include "tma_common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COMP "config"

tma_status_t tma_json_parse(const char *text, size_t len, const char *what, cJSON **root_p)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        int line = 1, col = 1;
        const char *stop = end ? end : text + len;
        if (stop < text || stop > text + len)
            stop = text + len;
        for (const char *p = text; p < stop; p++) {
            if (*p == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        if (len == 0)
            tma_log_error(COMP, "%s: empty, expected a JSON value", what);
        else
            tma_log_error(COMP, "%s:%d:%d: invalid JSON", what, line, col);
        return TMA_ERR_CONFIG;
    }
    /* Reject trailing garbage after the value (cJSON stops at the value's end). */
    if (end) {
        for (const char *p = end; p < text + len; p++) {
            if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t' && *p != '\0') {
                int line = 1;
                for (const char *q = text; q < p; q++)
                    line += *q == '\n';
                tma_log_error(COMP, "%s:%d: unexpected text after the JSON value", what, line);
                cJSON_Delete(root);
                return TMA_ERR_CONFIG;
            }
        }
    }
    *root_p = root;
    return TMA_OK;
}

tma_status_t tma_json_load_file(const char *path, cJSON **root_p)
{
    char *text;
    size_t len;
    tma_status_t st = tma_file_read_all(path, &text, &len);
    if (st != TMA_OK)
        return st;
    st = tma_json_parse(text, len, path, root_p);
    free(text);
    return st;
}

tma_status_t tma_json_write_file(const char *path, const cJSON *root)
{
    char *text = cJSON_Print(root);
    if (!text)
        return TMA_ERR_NOMEM;
    size_t n = strlen(text);
    char *buf = malloc(n + 2);
    if (!buf) {
        cJSON_free(text);
        return TMA_ERR_NOMEM;
    }
    memcpy(buf, text, n);
    buf[n] = '\n';
    cJSON_free(text);
    tma_status_t st = tma_file_write_atomic(path, buf, n + 1);
    free(buf);
    return st;
}

static const cJSON *field(const cJSON *obj, const char *key)
{
    return obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

tma_status_t tma_json_get_int(const cJSON *obj, const char *key, int64_t def, int64_t min,
                              int64_t max, const char *ctx, int64_t *val_p)
{
    const cJSON *it = field(obj, key);
    if (!it || cJSON_IsNull(it)) {
        *val_p = def;
        return TMA_OK;
    }
    if (!cJSON_IsNumber(it)) {
        tma_log_error(COMP, "%s: \"%s\" must be an integer", ctx, key);
        return TMA_ERR_CONFIG;
    }
    double d = it->valuedouble;
    if (!isfinite(d) || d != floor(d) || fabs(d) > 9007199254740992.0) {
        tma_log_error(COMP, "%s: \"%s\" must be an integer, got %g", ctx, key, d);
        return TMA_ERR_CONFIG;
    }
    int64_t v = (int64_t)d;
    if (v < min || v > max) {
        tma_log_error(COMP, "%s: \"%s\" = %lld is out of range [%lld, %lld]", ctx, key,
                      (long long)v, (long long)min, (long long)max);
        return TMA_ERR_CONFIG;
    }
    *val_p = v;
    return TMA_OK;
}

tma_status_t tma_json_get_double(const cJSON *obj, const char *key, double def, double min,
                                 double max, const char *ctx, double *val_p)
{
    const cJSON *it = field(obj, key);
    if (!it || cJSON_IsNull(it)) {
        *val_p = def;
        return TMA_OK;
    }
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble)) {
        tma_log_error(COMP, "%s: \"%s\" must be a number", ctx, key);
        return TMA_ERR_CONFIG;
    }
    double v = it->valuedouble;
    if (v < min || v > max) {
        tma_log_error(COMP, "%s: \"%s\" = %g is out of range [%g, %g]", ctx, key, v, min, max);
        return TMA_ERR_CONFIG;
    }
    *val_p = v;
    return TMA_OK;
}

tma_status_t tma_json_get_bool(const cJSON *obj, const char *key, int def, const char *ctx,
                               int *val_p)
{
    const cJSON *it = field(obj, key);
    if (!it || cJSON_IsNull(it)) {
        *val_p = def;
        return TMA_OK;
    }
    if (!cJSON_IsBool(it)) {
        tma_log_error(COMP, "%s: \"%s\" must be true or false", ctx, key);
        return TMA_ERR_CONFIG;
    }
    *val_p = cJSON_IsTrue(it) ? 1 : 0;
    return TMA_OK;
}

tma_status_t tma_json_get_string(const cJSON *obj, const char *key, const char *def,
                                 const char *ctx, const char **val_p)
{
    const cJSON *it = field(obj, key);
    if (!it || cJSON_IsNull(it)) {
        *val_p = def;
        return TMA_OK;
    }
    if (!cJSON_IsString(it) || !it->valuestring) {
        tma_log_error(COMP, "%s: \"%s\" must be a string", ctx, key);
        return TMA_ERR_CONFIG;
    }
    *val_p = it->valuestring;
    return TMA_OK;
}

tma_status_t tma_json_check_keys(const cJSON *obj, const char *const *allowed, const char *ctx)
{
    if (!obj)
        return TMA_OK;
    if (!cJSON_IsObject(obj)) {
        tma_log_error(COMP, "%s: must be a JSON object", ctx);
        return TMA_ERR_CONFIG;
    }
    for (const cJSON *it = obj->child; it; it = it->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++) {
            if (it->string && strcmp(it->string, *a) == 0) {
                ok = 1;
                break;
            }
        }
        if (!ok) {
            char list[512];
            size_t off = 0;
            list[0] = '\0';
            for (const char *const *a = allowed; *a && off < sizeof list - 1; a++) {
                int n = snprintf(list + off, sizeof list - off, "%s%s", off ? ", " : "", *a);
                if (n < 0)
                    break;
                off += (size_t)n;
            }
            const char *key = it->string ? it->string : "?";
            tma_suggest_t sg;
            tma_suggest_init(&sg);
            for (const char *const *a = allowed; *a; a++)
                tma_suggest_add(&sg, key, strlen(key), *a);
            const char *near = tma_suggest_best(&sg, strlen(key));
            if (near)
                tma_log_error(COMP, "%s: unknown key \"%s\"; did you mean \"%s\"? (known keys: %s)", ctx, key,
                              near, list);
            else
                tma_log_error(COMP, "%s: unknown key \"%s\" (known keys: %s)", ctx, key, list);
            return TMA_ERR_CONFIG;
        }
    }
    return TMA_OK;
}

void tma_suggest_init(tma_suggest_t *s)
{
    s->best = NULL;
    s->dist = 1 << 30;
}

void tma_suggest_add(tma_suggest_t *s, const char *word, size_t len, const char *cand)
{
    /* Edit distance with swaps of neighbours ("trian": one edit from
     * "train"), over three rows; words longer than 63 bytes are not
     * misspellings worth guessing at. */
    size_t m = strlen(cand);
    if (len > 63 || m > 63)
        return;
    int prev2[64], prev[64], cur[64];
    for (size_t j = 0; j <= m; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= len; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int sub = prev[j - 1] + (word[i - 1] != cand[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = TMA_MIN(sub, TMA_MIN(del, ins));
            if (i > 1 && j > 1 && word[i - 1] == cand[j - 2] && word[i - 2] == cand[j - 1])
                cur[j] = TMA_MIN(cur[j], prev2[j - 2] + 1);
        }
        memcpy(prev2, prev, (m + 1) * sizeof *prev);
        memcpy(prev, cur, (m + 1) * sizeof *prev);
    }
    if (prev[m] < s->dist) {
        s->dist = prev[m];
        s->best = cand;
    }
}

const char *tma_suggest_best(const tma_suggest_t *s, size_t len)
{
    int most = TMA_MAX(1, (int)len / 3);
    return s->best && s->dist > 0 && s->dist <= most ? s->best : NULL;
}

int tma_parse_i64(const char *s, int64_t *val_p)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s)
        return -1;
    *val_p = (int64_t)v;
    return 0;
}

int tma_parse_double(const char *s, double *val_p)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || end == s || !isfinite(v))
        return -1;
    *val_p = v;
    return 0;
}

const char *tma_version(void) { return PACKAGE_VERSION; }
