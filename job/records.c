/*
 * records.c: the JSON records stored under /tma/<job>/.  Each record is a
 * table of its fields, and one encoder and one decoder walk the tables.
 * Decoders treat every value as untrusted input: a value that does not
 * parse, or a field of the wrong type or range, is TMA_ERR_MALFORMED,
 * logged once with the key.
 */
#include "tma_job.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define COMP "records"

/* ------------------------------------------------------------------ fields */

typedef enum {
    FIELD_INT,  /* a signed integer of `size` bytes (4 or 8), in [min, max] */
    FIELD_UINT, /* an unsigned one of 4 bytes, in [min, max] */
    FIELD_DBL,  /* a double */
    FIELD_STR,  /* a char array of `size` bytes; absent is "" unless required */
    FIELD_BOOL, /* an int, 0 or 1; absent is 0 */
} field_kind_t;

/* One field of a record: its JSON name (the struct member's name), its
 * kind, and where it lies in the record.  A table ends with a NULL name. */
typedef struct {
    const char *name;
    field_kind_t kind;
    size_t off, size;
    int64_t min, max;
    int required;   /* strings: absent is an error, not "" */
    int omit_empty; /* strings: an empty one is left out of the encoding */
} field_t;

#define MEMBER_SIZE(T, m) sizeof(((T *)0)->m)
#define FIELD_I(T, m, lo, hi) {#m, FIELD_INT, offsetof(T, m), MEMBER_SIZE(T, m), lo, hi, 1, 0}
#define FIELD_U32(T, m, lo, hi) {#m, FIELD_UINT, offsetof(T, m), MEMBER_SIZE(T, m), lo, hi, 1, 0}
#define FIELD_D(T, m) {#m, FIELD_DBL, offsetof(T, m), MEMBER_SIZE(T, m), 0, 0, 1, 0}
#define FIELD_S(T, m, required) {#m, FIELD_STR, offsetof(T, m), MEMBER_SIZE(T, m), 0, 0, required, 0}
/* An optional string, left out of the encoding when empty. */
#define FIELD_S_OPT(T, m) {#m, FIELD_STR, offsetof(T, m), MEMBER_SIZE(T, m), 0, 0, 0, 1}
#define FIELD_B(T, m) {#m, FIELD_BOOL, offsetof(T, m), MEMBER_SIZE(T, m), 0, 1, 0, 0}
#define FIELD_END {NULL, FIELD_INT, 0, 0, 0, 0, 0, 0}

typedef tma_job_member_rec_t member_t;
static const field_t member_fields[] = {
    FIELD_U32(member_t, id, 0, UINT32_MAX - 1),
    FIELD_I(member_t, lease, 1, INT64_MAX),
    FIELD_B(member_t, backup),
    FIELD_S(member_t, name, 0),
    FIELD_S(member_t, host, 0),
    FIELD_I(member_t, pid, 0, INT32_MAX),
    FIELD_S(member_t, device, 0),
    FIELD_S_OPT(member_t, eval_address),
    FIELD_END,
};

typedef tma_job_shard_rec_t shard_t;
static const field_t shard_fields[] = {
    FIELD_I(shard_t, shard, 0, INT32_MAX),
    FIELD_I(shard_t, owner, -1, UINT32_MAX - 1),
    FIELD_I(shard_t, epoch, 0, INT64_MAX),
    FIELD_I(shard_t, since_round, 0, INT64_MAX),
    FIELD_END,
};

typedef tma_job_coord_rec_t coord_t;
static const field_t coord_fields[] = {
    FIELD_S(coord_t, address, 1),
    FIELD_I(coord_t, lease, 1, INT64_MAX),
    FIELD_S(coord_t, host, 0),
    FIELD_I(coord_t, pid, 0, INT32_MAX),
    FIELD_END,
};

/* The ready record's scalar fields; its shard lists follow them. */
static const field_t ready_fields[] = {
    FIELD_I(tma_job_ready_rec_t, lease, 1, INT64_MAX),
    FIELD_B(tma_job_ready_rec_t, fresh),
    FIELD_END,
};

typedef tma_job_state_rec_t state_t;
static const field_t state_fields[] = {
    FIELD_I(state_t, epoch, 0, INT64_MAX),
    FIELD_I(state_t, round, 0, INT64_MAX),
    FIELD_D(state_t, train_elapsed),
    FIELD_I(state_t, best_round, -1, INT64_MAX),
    FIELD_D(state_t, best_val_mrr),
    FIELD_S(state_t, phase, 1),
    FIELD_S(state_t, run_dir, 1),
    FIELD_S(state_t, checkpoint, 0),
    FIELD_END,
};

/* The agg record, round and epoch, as a struct for the tables. */
typedef struct {
    int64_t round;
    uint64_t epoch;
} agg_t;
static const field_t agg_fields[] = {
    FIELD_I(agg_t, round, 0, INT64_MAX),
    FIELD_I(agg_t, epoch, 0, INT64_MAX),
    FIELD_END,
};

/* The stop record: its epoch, then a reason that no decoder reads. */
typedef struct {
    uint64_t epoch;
} stop_t;
static const field_t stop_fields[] = {
    FIELD_I(stop_t, epoch, 1, INT64_MAX),
    FIELD_END,
};

/* Room for any record decode() fills: it decodes into one, and copies it
 * out only when every field is good. */
typedef union {
    member_t member;
    shard_t shard;
    coord_t coord;
    state_t state;
    agg_t agg;
    stop_t stop;
} any_rec_t;

static int64_t int_load(const field_t *f, const char *p)
{
    if (f->size == 4) {
        int32_t i;
        uint32_t u;
        memcpy(&i, p, 4);
        memcpy(&u, p, 4);
        return f->kind == FIELD_UINT ? (int64_t)u : (int64_t)i;
    }
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* v is in the field's range, so it fits its size (as uint32 for FIELD_UINT). */
static void int_store(const field_t *f, char *p, int64_t v)
{
    if (f->size == 4) {
        int32_t i = (int32_t)v;
        uint32_t u = (uint32_t)v;
        if (f->kind == FIELD_UINT)
            memcpy(p, &u, 4);
        else
            memcpy(p, &i, 4);
    } else {
        memcpy(p, &v, 8);
    }
}

/* ------------------------------------------------------------------ encoding */

static char *print(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static void add_i64(cJSON *o, const char *f, int64_t v)
{
    /* Exact as a JSON number up to 2^53; beyond that (lease ids) as a string. */
    if (v > ((int64_t)1 << 53) || v < -((int64_t)1 << 53)) {
        char buf[32];
        snprintf(buf, sizeof buf, "%" PRId64, v);
        cJSON_AddStringToObject(o, f, buf);
    } else {
        cJSON_AddNumberToObject(o, f, (double)v);
    }
}

/* The record r as a JSON object of the table's fields, in its order; NULL
 * out of memory. */
static cJSON *encode(const field_t *fields, const void *r)
{
    cJSON *o = cJSON_CreateObject();
    for (const field_t *f = fields; o && f->name; f++) {
        const char *p = (const char *)r + f->off;
        double d;
        switch (f->kind) {
        case FIELD_INT:
        case FIELD_UINT:
            add_i64(o, f->name, int_load(f, p));
            break;
        case FIELD_DBL:
            memcpy(&d, p, sizeof d);
            cJSON_AddNumberToObject(o, f->name, d);
            break;
        case FIELD_STR:
            if (p[0] || !f->omit_empty)
                cJSON_AddStringToObject(o, f->name, p);
            break;
        case FIELD_BOOL:
            cJSON_AddBoolToObject(o, f->name, int_load(f, p) != 0);
            break;
        }
    }
    return o;
}

/* ------------------------------------------------------------------ decoding */

/* Field readers: 0 on success, -1 (logged) when missing or malformed. */
static int get_int(const cJSON *it, const char *key, const field_t *f, char *p)
{
    int64_t v;
    if (cJSON_IsNumber(it)) {
        double d = it->valuedouble;
        /* (double)INT64_MAX rounds up to 2^63, which no int64 holds: below it only. */
        if (d >= (double)f->min && d <= (double)f->max && d < 0x1p63 && d == (double)(int64_t)d) {
            int_store(f, p, (int64_t)d);
            return 0;
        }
    } else if (cJSON_IsString(it)) {
        /* int64 values beyond 2^53 (lease ids) travel as strings. */
        if (tma_parse_i64(it->valuestring, &v) == 0 && v >= f->min && v <= f->max) {
            int_store(f, p, v);
            return 0;
        }
    }
    tma_log_error(COMP, "%s: field \"%s\" is missing or not an integer in [%" PRId64 ", %" PRId64 "]", key, f->name,
                  f->min, f->max);
    return -1;
}

static int get_dbl(const cJSON *it, const char *key, const field_t *f, char *p)
{
    if (cJSON_IsNumber(it)) {
        memcpy(p, &it->valuedouble, sizeof(double));
        return 0;
    }
    tma_log_error(COMP, "%s: field \"%s\" is missing or not a number", key, f->name);
    return -1;
}

static int get_str(const cJSON *it, const char *key, const field_t *f, char *p)
{
    if (!it && !f->required) {
        p[0] = '\0';
        return 0;
    }
    if (cJSON_IsString(it) && strlen(it->valuestring) < f->size) {
        snprintf(p, f->size, "%s", it->valuestring);
        return 0;
    }
    tma_log_error(COMP, "%s: field \"%s\" is missing, not a string, or too long", key, f->name);
    return -1;
}

static int get_bool(const cJSON *it, const char *key, const field_t *f, char *p)
{
    if (it && !cJSON_IsBool(it)) {
        tma_log_error(COMP, "%s: field \"%s\" is not true or false", key, f->name);
        return -1;
    }
    int_store(f, p, it && cJSON_IsTrue(it));
    return 0;
}

/* The table's fields of o into r, in the table's order; 0, or -1 at the
 * first bad one (logged). */
static int get_fields(const cJSON *o, const char *key, const field_t *fields, void *r)
{
    static int (*const get[])(const cJSON *, const char *, const field_t *, char *) = {
        [FIELD_INT] = get_int, [FIELD_UINT] = get_int,  [FIELD_DBL] = get_dbl,
        [FIELD_STR] = get_str, [FIELD_BOOL] = get_bool,
    };
    for (const field_t *f = fields; f->name; f++)
        if (get[f->kind](cJSON_GetObjectItemCaseSensitive(o, f->name), key, f, (char *)r + f->off) != 0)
            return -1;
    return 0;
}

/* Parses value and decodes the table's fields of it into r (`size` bytes,
 * zeroed first).  Returns the object, for the caller's other fields to be
 * read from and then deleted, or NULL (logged) when value is not a JSON
 * object or one of the fields is bad. */
static cJSON *decode_fields(const char *key, const char *value, size_t len, const field_t *fields, void *r, size_t size)
{
    memset(r, 0, size);
    cJSON *o = cJSON_ParseWithLength(value, len);
    if (!o || !cJSON_IsObject(o)) {
        tma_log_error(COMP, "%s: the value is not a JSON object", key);
        cJSON_Delete(o);
        return NULL;
    }
    if (get_fields(o, key, fields, r) != 0) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Decodes a record of `size` bytes (a member of any_rec_t) into *r_p, set
 * only when every field is good. */
static tma_status_t decode(const char *key, const char *value, size_t len, const field_t *fields, void *r_p,
                           size_t size)
{
    any_rec_t r;
    cJSON *o = decode_fields(key, value, len, fields, &r, size);
    if (!o)
        return TMA_ERR_MALFORMED;
    cJSON_Delete(o);
    memcpy(r_p, &r, size);
    return TMA_OK;
}

/* ------------------------------------------------------------------ the records */

char *tma_job_member_rec_encode(const tma_job_member_rec_t *r) { return print(encode(member_fields, r)); }

tma_status_t tma_job_member_rec_decode(const char *key, const char *value, size_t len, tma_job_member_rec_t *r_p)
{
    return decode(key, value, len, member_fields, r_p, sizeof *r_p);
}

char *tma_job_shard_rec_encode(const tma_job_shard_rec_t *r) { return print(encode(shard_fields, r)); }

tma_status_t tma_job_shard_rec_decode(const char *key, const char *value, size_t len, tma_job_shard_rec_t *r_p)
{
    return decode(key, value, len, shard_fields, r_p, sizeof *r_p);
}

char *tma_job_coord_rec_encode(const tma_job_coord_rec_t *r) { return print(encode(coord_fields, r)); }

tma_status_t tma_job_coord_rec_decode(const char *key, const char *value, size_t len, tma_job_coord_rec_t *r_p)
{
    return decode(key, value, len, coord_fields, r_p, sizeof *r_p);
}

static void add_shard_list(cJSON *o, const char *name, const int32_t *v, int n)
{
    cJSON *a = cJSON_AddArrayToObject(o, name);
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
}

char *tma_job_ready_rec_encode(const tma_job_ready_rec_t *r)
{
    cJSON *o = encode(ready_fields, r);
    if (o) {
        add_shard_list(o, "shards", r->shards, r->n_shards);
        if (r->n_refused > 0)
            add_shard_list(o, "refused", r->refused, r->n_refused);
    }
    return print(o);
}

/* A list of shard numbers under `name` (absent: none, unless required);
 * 1 when it is bad (logged), -1 out of memory. */
static int get_shard_list(const cJSON *o, const char *key, const char *name, int required, int32_t **v_p, int *n_p)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!a && !required)
        return 0;
    /* At most one entry a shard a partition may have (partition.shards). */
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > (1 << 20)) {
        tma_log_error(COMP, "%s: field \"%s\" is missing, not a list, or too long", key, name);
        return 1;
    }
    int32_t *v = malloc((size_t)cJSON_GetArraySize(a) * sizeof *v + 1);
    if (!v)
        return -1;
    int n = 0;
    for (const cJSON *it = a->child; it; it = it->next) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > INT32_MAX ||
            it->valuedouble != (double)(int32_t)it->valuedouble) {
            tma_log_error(COMP, "%s: a shard number in \"%s\" is not a non-negative integer", key, name);
            free(v);
            return 1;
        }
        v[n++] = (int32_t)it->valuedouble;
    }
    *v_p = v;
    *n_p = n;
    return 0;
}

tma_status_t tma_job_ready_rec_decode(const char *key, const char *value, size_t len, tma_job_ready_rec_t *r_p)
{
    tma_job_ready_rec_t r;
    cJSON *o = decode_fields(key, value, len, ready_fields, &r, sizeof r);
    if (!o)
        return TMA_ERR_MALFORMED;
    int bad = get_shard_list(o, key, "shards", 1, &r.shards, &r.n_shards);
    if (!bad)
        bad = get_shard_list(o, key, "refused", 0, &r.refused, &r.n_refused);
    cJSON_Delete(o);
    if (bad) {
        tma_job_ready_rec_free(&r);
        return bad < 0 ? TMA_ERR_NOMEM : TMA_ERR_MALFORMED;
    }
    *r_p = r;
    return TMA_OK;
}

void tma_job_ready_rec_free(tma_job_ready_rec_t *r)
{
    if (!r)
        return;
    free(r->shards);
    free(r->refused);
    r->shards = r->refused = NULL;
    r->n_shards = r->n_refused = 0;
}

char *tma_job_state_rec_encode(const tma_job_state_rec_t *r) { return print(encode(state_fields, r)); }

tma_status_t tma_job_state_rec_decode(const char *key, const char *value, size_t len, tma_job_state_rec_t *r_p)
{
    return decode(key, value, len, state_fields, r_p, sizeof *r_p);
}

char *tma_job_agg_rec_encode(int64_t round, uint64_t epoch)
{
    const agg_t a = {round, epoch};
    return print(encode(agg_fields, &a));
}

tma_status_t tma_job_agg_rec_decode(const char *key, const char *value, size_t len, int64_t *round_p,
                                uint64_t *epoch_p)
{
    agg_t a;
    tma_status_t st = decode(key, value, len, agg_fields, &a, sizeof a);
    if (st == TMA_OK) {
        *round_p = a.round;
        *epoch_p = a.epoch;
    }
    return st;
}

char *tma_job_stop_rec_encode(uint64_t epoch, const char *reason)
{
    const stop_t s = {epoch};
    cJSON *o = encode(stop_fields, &s);
    if (o)
        cJSON_AddStringToObject(o, "reason", reason);
    return print(o);
}

tma_status_t tma_job_stop_rec_decode(const char *key, const char *value, size_t len, uint64_t *epoch_p)
{
    stop_t s;
    tma_status_t st = decode(key, value, len, stop_fields, &s, sizeof s);
    if (st == TMA_OK)
        *epoch_p = s.epoch;
    return st;
}
