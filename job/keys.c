/*
 * keys.c: the etcd key names under /tma/<job>/, from the one table in
 * tma_job.h that both the writers and the job view's watcher use.
 */
#include "tma_job.h"

#include <inttypes.h>
#include <string.h>

typedef struct key_name {
    const char *name;
    size_t len;
    int dir; /* a folder of numbered keys */
} key_name_t;

static const key_name_t key_names[TMA_KEY_COUNT] = {
#define TMA_JOB_KEY_ROW(e, name, dir) [TMA_KEY_##e] = {name, sizeof name - 1, dir},
    TMA_JOB_KEYS(TMA_JOB_KEY_ROW)
#undef TMA_JOB_KEY_ROW
};

char *tma_job_prefix(char *buf, const char *job)
{
    snprintf(buf, TMA_KEY_MAX, "/tma/%s/", job);
    return buf;
}

char *tma_job_key(char *buf, const char *job, tma_job_key_t k)
{
    const key_name_t *kn = &key_names[k];
    snprintf(buf, TMA_KEY_MAX, "/tma/%s/%s%s", job, kn->name, kn->dir ? "/" : "");
    return buf;
}

char *tma_job_key_n(char *buf, const char *job, tma_job_key_t k, int64_t n)
{
    snprintf(buf, TMA_KEY_MAX, "/tma/%s/%s/%08" PRId64, job, key_names[k].name, n);
    return buf;
}

int64_t tma_job_key_number(const char *key)
{
    const char *slash = strrchr(key, '/');
    int64_t v;
    if (!slash || tma_parse_i64(slash + 1, &v) != 0 || v < 0)
        return -1;
    return v;
}

tma_job_key_t tma_job_key_kind(const char *suffix)
{
    for (int k = 0; k < TMA_KEY_COUNT; k++) {
        const key_name_t *kn = &key_names[k];
        if (kn->dir ? strncmp(suffix, kn->name, kn->len) == 0 && suffix[kn->len] == '/'
                    : strcmp(suffix, kn->name) == 0)
            return (tma_job_key_t)k;
    }
    return TMA_KEY_NONE;
}
