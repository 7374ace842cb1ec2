/*
 * records.c: the JSON records stored under /tma/<job>/.  Decoders treat every value as untrusted input: a value that does
 * not parse, or a field of the wrong type or range, is TMA_ERR_MALFORMED,
 * logged once with the key.
 */
#include "tma_job.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define COMP "records"

static char *print(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static cJSON *parse(const char *key, const char *value, size_t len)
{
    cJSON *o = cJSON_ParseWithLength(value, len);
    if (!o || !cJSON_IsObject(o)) {
        tma_log_error(COMP, "%s: the value is not a JSON object", key);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Field readers: 0 on success, -1 (logged) when missing or malformed. */
static int get_i64(const cJSON *o, const char *key, const char *f, int64_t min, int64_t max, int64_t *v_p)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, f);
    double d;
    if (cJSON_IsNumber(it)) {
        d = it->valuedouble;
        /* (double)INT64_MAX rounds up to 2^63, which no int64 holds: below it only. */
        if (d >= (double)min && d <= (double)max && d < 0x1p63 && d == (double)(int64_t)d) {
            *v_p = (int64_t)d;
            return 0;
        }
    } else if (cJSON_IsString(it)) {
        /* int64 values beyond 2^53 (lease ids) travel as strings. */
        int64_t v;
        if (tma_parse_i64(it->valuestring, &v) == 0 && v >= min && v <= max) {
            *v_p = v;
            return 0;
        }
    }
    tma_log_error(COMP, "%s: field \"%s\" is missing or not an integer in [%" PRId64 ", %" PRId64 "]", key,
                  f, min, max);
    return -1;
}

static int get_dbl(const cJSON *o, const char *key, const char *f, double *v_p)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, f);
    if (cJSON_IsNumber(it)) {
        *v_p = it->valuedouble;
        return 0;
    }
    tma_log_error(COMP, "%s: field \"%s\" is missing or not a number", key, f);
    return -1;
}

static int get_str(const cJSON *o, const char *key, const char *f, char *out, size_t cap, int required)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, f);
    if (!it && !required) {
        out[0] = '\0';
        return 0;
    }
    if (cJSON_IsString(it) && strlen(it->valuestring) < cap) {
        snprintf(out, cap, "%s", it->valuestring);
        return 0;
    }
    tma_log_error(COMP, "%s: field \"%s\" is missing, not a string, or too long", key, f);
    return -1;
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

char *tma_job_member_rec_encode(const tma_job_member_rec_t *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    add_i64(o, "id", r->id);
    add_i64(o, "lease", r->lease);
    cJSON_AddBoolToObject(o, "backup", r->backup);
    cJSON_AddStringToObject(o, "name", r->name);
    cJSON_AddStringToObject(o, "host", r->host);
    add_i64(o, "pid", r->pid);
    cJSON_AddStringToObject(o, "device", r->device);
    if (r->eval_address[0])
        cJSON_AddStringToObject(o, "eval_address", r->eval_address);
    return print(o);
}

tma_status_t tma_job_member_rec_decode(const char *key, const char *value, size_t len, tma_job_member_rec_t *r_p)
{
    cJSON *o = parse(key, value, len);
    if (!o)
        return TMA_ERR_MALFORMED;
    tma_job_member_rec_t r;
    memset(&r, 0, sizeof r);
    int64_t id, lease, pid;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "backup");
    int bad = get_i64(o, key, "id", 0, UINT32_MAX - 1, &id) || get_i64(o, key, "lease", 1, INT64_MAX, &lease) ||
              get_i64(o, key, "pid", 0, INT32_MAX, &pid) || get_str(o, key, "name", r.name, sizeof r.name, 0) ||
              get_str(o, key, "host", r.host, sizeof r.host, 0) ||
              get_str(o, key, "device", r.device, sizeof r.device, 0) ||
              get_str(o, key, "eval_address", r.eval_address, sizeof r.eval_address, 0);
    if (!bad && b && !cJSON_IsBool(b)) {
        tma_log_error(COMP, "%s: field \"backup\" is not true or false", key);
        bad = 1;
    }
    cJSON_Delete(o);
    if (bad)
        return TMA_ERR_MALFORMED;
    r.id = (uint32_t)id;
    r.lease = lease;
    r.pid = (int)pid;
    r.backup = b && cJSON_IsTrue(b);
    *r_p = r;
    return TMA_OK;
}

char *tma_job_shard_rec_encode(const tma_job_shard_rec_t *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    add_i64(o, "shard", r->shard);
    add_i64(o, "owner", r->owner);
    add_i64(o, "epoch", (int64_t)r->epoch);
    add_i64(o, "since_round", r->since_round);
    return print(o);
}

tma_status_t tma_job_shard_rec_decode(const char *key, const char *value, size_t len, tma_job_shard_rec_t *r_p)
{
    cJSON *o = parse(key, value, len);
    if (!o)
        return TMA_ERR_MALFORMED;
    int64_t shard, owner, epoch, since;
    int bad = get_i64(o, key, "shard", 0, INT32_MAX, &shard) || get_i64(o, key, "owner", -1, UINT32_MAX - 1, &owner) ||
              get_i64(o, key, "epoch", 0, INT64_MAX, &epoch) || get_i64(o, key, "since_round", 0, INT64_MAX, &since);
    cJSON_Delete(o);
    if (bad)
        return TMA_ERR_MALFORMED;
    r_p->shard = (int32_t)shard;
    r_p->owner = owner;
    r_p->epoch = (uint64_t)epoch;
    r_p->since_round = since;
    return TMA_OK;
}

char *tma_job_coord_rec_encode(const tma_job_coord_rec_t *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "address", r->address);
    add_i64(o, "lease", r->lease);
    cJSON_AddStringToObject(o, "host", r->host);
    add_i64(o, "pid", r->pid);
    return print(o);
}

tma_status_t tma_job_coord_rec_decode(const char *key, const char *value, size_t len, tma_job_coord_rec_t *r_p)
{
    cJSON *o = parse(key, value, len);
    if (!o)
        return TMA_ERR_MALFORMED;
    tma_job_coord_rec_t r;
    memset(&r, 0, sizeof r);
    int64_t lease, pid;
    int bad = get_str(o, key, "address", r.address, sizeof r.address, 1) ||
              get_i64(o, key, "lease", 1, INT64_MAX, &lease) || get_str(o, key, "host", r.host, sizeof r.host, 0) ||
              get_i64(o, key, "pid", 0, INT32_MAX, &pid);
    cJSON_Delete(o);
    if (bad)
        return TMA_ERR_MALFORMED;
    r.lease = lease;
    r.pid = (int)pid;
    *r_p = r;
    return TMA_OK;
}

char *tma_job_ready_rec_encode(const tma_job_ready_rec_t *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    add_i64(o, "lease", r->lease);
    cJSON *a = cJSON_AddArrayToObject(o, "shards");
    for (int i = 0; i < r->n_shards; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(r->shards[i]));
    if (r->n_refused > 0) {
        a = cJSON_AddArrayToObject(o, "refused");
        for (int i = 0; i < r->n_refused; i++)
            cJSON_AddItemToArray(a, cJSON_CreateNumber(r->refused[i]));
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
    cJSON *o = parse(key, value, len);
    if (!o)
        return TMA_ERR_MALFORMED;
    tma_job_ready_rec_t r;
    memset(&r, 0, sizeof r);
    int bad = get_i64(o, key, "lease", 1, INT64_MAX, &r.lease);
    if (!bad)
        bad = get_shard_list(o, key, "shards", 1, &r.shards, &r.n_shards);
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

char *tma_job_state_rec_encode(const tma_job_state_rec_t *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    add_i64(o, "epoch", (int64_t)r->epoch);
    add_i64(o, "round", r->round);
    cJSON_AddNumberToObject(o, "train_elapsed", r->train_elapsed);
    add_i64(o, "best_round", r->best_round);
    cJSON_AddNumberToObject(o, "best_val_mrr", r->best_val_mrr);
    cJSON_AddStringToObject(o, "phase", r->phase);
    cJSON_AddStringToObject(o, "run_dir", r->run_dir);
    cJSON_AddStringToObject(o, "checkpoint", r->checkpoint);
    return print(o);
}

tma_status_t tma_job_state_rec_decode(const char *key, const char *value, size_t len, tma_job_state_rec_t *r_p)
{
    cJSON *o = parse(key, value, len);
    if (!o)
        return TMA_ERR_MALFORMED;
    tma_job_state_rec_t r;
    memset(&r, 0, sizeof r);
    int64_t epoch;
    int bad = get_i64(o, key, "epoch", 0, INT64_MAX, &epoch) || get_i64(o, key, "round", 0, INT64_MAX, &r.round) ||
              get_dbl(o, key, "train_elapsed", &r.train_elapsed) ||
              get_i64(o, key, "best_round", -1, INT64_MAX, &r.best_round) ||
              get_dbl(o, key, "best_val_mrr", &r.best_val_mrr) ||
              get_str(o, key, "phase", r.phase, sizeof r.phase, 1) ||
              get_str(o, key, "run_dir", r.run_dir, sizeof r.run_dir, 1) ||
              get_str(o, key, "checkpoint", r.checkpoint, sizeof r.checkpoint, 0);
    cJSON_Delete(o);
    if (bad)
        return TMA_ERR_MALFORMED;
    r.epoch = (uint64_t)epoch;
    *r_p = r;
    return TMA_OK;
}

char *tma_job_agg_rec_encode(int64_t round, uint64_t epoch)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    add_i64(o, "round", round);
    add_i64(o, "epoch", (int64_t)epoch);
    return print(o);
}

tma_status_t tma_job_agg_rec_decode(const char *key, const char *value, size_t len, int64_t *round_p,
                                uint64_t *epoch_p)
{
    cJSON *o = parse(key, value, len);
    if (!o)
        return TMA_ERR_MALFORMED;
    int64_t round, epoch;
    int bad = get_i64(o, key, "round", 0, INT64_MAX, &round) || get_i64(o, key, "epoch", 0, INT64_MAX, &epoch);
    cJSON_Delete(o);
    if (bad)
        return TMA_ERR_MALFORMED;
    *round_p = round;
    *epoch_p = (uint64_t)epoch;
    return TMA_OK;
}

char *tma_job_stop_rec_encode(uint64_t epoch, const char *reason)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    add_i64(o, "epoch", (int64_t)epoch);
    cJSON_AddStringToObject(o, "reason", reason);
    return print(o);
}

tma_status_t tma_job_stop_rec_decode(const char *key, const char *value, size_t len, uint64_t *epoch_p)
{
    cJSON *o = parse(key, value, len);
    if (!o)
        return TMA_ERR_MALFORMED;
    int64_t epoch;
    int bad = get_i64(o, key, "epoch", 1, INT64_MAX, &epoch);
    cJSON_Delete(o);
    if (bad)
        return TMA_ERR_MALFORMED;
    *epoch_p = (uint64_t)epoch;
    return TMA_OK;
}
