/*
 * state.c: a worker's optimizer state files (worker_int.h): one for each
 * shard set and round it sent, in the folder of `tma worker --state-dir`,
 * so that the trainer of a shard set that starts again from W[t] (a resumed
 * job, a worker that replaces one lost in round t) continues the Adam
 * moments, step count and batch RNG of the one that sent round t.
 */
#include "worker_int.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP "worker"

static uint64_t set_hash(const int32_t *shards, int n)
{
    uint64_t h = 0x5eed5eedull;
    for (int i = 0; i < n; i++)
        h = tma_hash64(h ^ ((uint64_t)(uint32_t)shards[i] + 1));
    return h;
}

static char *state_path(const worker_state_key_t *k, int64_t round)
{
    char name[TMA_JOB_NAME_MAX + 48];
    snprintf(name, sizeof name, "%s-%016" PRIx64 "-r%08lld.opt", k->job, set_hash(k->shards, k->n_shards),
             (long long)round);
    return tma_path_join(k->dir, name);
}

tma_status_t worker_state_save(const worker_state_key_t *k, int64_t round, tma_gnn_trainer_t *tr, float *params,
                               tma_gnn_opt_state_t *s)
{
    char *path = state_path(k, round);
    cJSON *o = cJSON_CreateObject();
    cJSON *set = o ? cJSON_AddArrayToObject(o, "shards") : NULL;
    tma_status_t st = path && set ? TMA_OK : TMA_ERR_NOMEM;
    for (int i = 0; i < k->n_shards && st == TMA_OK; i++)
        if (!cJSON_AddItemToArray(set, cJSON_CreateNumber(k->shards[i])))
            st = TMA_ERR_NOMEM;
    if (st == TMA_OK && (!cJSON_AddStringToObject(o, "job", k->job) ||
                         !cJSON_AddNumberToObject(o, "round", (double)round)))
        st = TMA_ERR_NOMEM;
    if (st == TMA_OK)
        st = tma_gnn_trainer_get_params(tr, params);
    if (st == TMA_OK)
        st = tma_gnn_trainer_get_opt(tr, s);
    if (st == TMA_OK)
        st = tma_gnn_opt_write(path, tma_gnn_trainer_config(tr), params, s, o); /* logs its failure */
    cJSON_Delete(o);
    free(path);
    return st;
}

/* The file's JSON names this job, shard set and round. */
static int names_key(const cJSON *o, const worker_state_key_t *k, int64_t round)
{
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(o, "job");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "round");
    const cJSON *set = cJSON_GetObjectItemCaseSensitive(o, "shards");
    if (!cJSON_IsString(job) || strcmp(job->valuestring, k->job) != 0 || !cJSON_IsNumber(r) ||
        r->valuedouble != (double)round || !cJSON_IsArray(set) || cJSON_GetArraySize(set) != k->n_shards)
        return 0;
    int i = 0;
    for (const cJSON *it = set->child; it; it = it->next, i++)
        if (!cJSON_IsNumber(it) || it->valuedouble != (double)k->shards[i])
            return 0;
    return 1;
}

int worker_state_load(const worker_state_key_t *k, int64_t round, tma_gnn_trainer_t *tr)
{
    char *path = state_path(k, round);
    if (!path || !tma_file_exists(path)) {
        free(path);
        return 0;
    }
    float *params = NULL;
    tma_gnn_opt_state_t s;
    memset(&s, 0, sizeof s);
    cJSON *o = NULL;
    tma_status_t st = tma_gnn_opt_read(path, tma_gnn_trainer_config(tr), &params, &s, &o); /* logs a refusal */
    const char *why = st != TMA_OK                ? "above"
                      : !names_key(o, k, round) ? "it names another job, shard set or round"
                                                : NULL;
    if (!why && (st = tma_gnn_trainer_set_opt(tr, &s)) != TMA_OK)
        why = tma_status_str(st);
    if (why)
        tma_log_warn(COMP, "%s cannot be used (%s): round %lld starts with a fresh optimizer state", path, why,
                     (long long)round + 1);
    else
        tma_log_info(COMP, "continuing the optimizer state of round %lld (step %lld) from %s", (long long)round,
                     (long long)s.steps, path);
    cJSON_Delete(o);
    free(params);
    free(s.adam_m);
    free(s.adam_v);
    free(path);
    return why ? -1 : 1;
}

/* The round of a state file of this job ("<job>-<16 hex>-r<digits>.opt"), or -1. */
static int64_t file_round(const char *name, const char *job)
{
    size_t n = strlen(name), j = strlen(job);
    const size_t tail = 1 + 16 + 2; /* "-<hex>-r" */
    if (n < j + tail + 1 + 4 || strncmp(name, job, j) != 0 || strcmp(name + n - 4, ".opt") != 0 ||
        name[j] != '-' || name[j + 17] != '-' || name[j + 18] != 'r')
        return -1;
    for (size_t i = j + 1; i < j + 17; i++)
        if (!strchr("0123456789abcdef", name[i]))
            return -1;
    int64_t r = 0;
    for (size_t i = j + tail; i < n - 4; i++) {
        if (name[i] < '0' || name[i] > '9' || r > INT64_MAX / 10 - 9)
            return -1;
        r = r * 10 + (name[i] - '0');
    }
    return r;
}

void worker_state_prune(const char *dir, const char *job, int64_t keep_from)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        int64_t r = file_round(de->d_name, job);
        if (r < 0 || r >= keep_from)
            continue;
        char *path = tma_path_join(dir, de->d_name);
        if (path)
            unlink(path); /* another worker may have removed it first */
        free(path);
    }
    if (d)
        closedir(d);
}
