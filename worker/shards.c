/*
 * shards.c: the shard files a worker has mapped, shared by its trainer and
 * its evaluator rank (worker_int.h, worker_shards_*).
 *
 * A shard's .tmag is mapped once a process, however many of the worker's
 * parts read it: each takes a reference (worker_shards_get) and gives it
 * back (worker_shards_put); the last reference given back unmaps the file.
 * So a shard reassigned away from the trainer while its rank still
 * evaluates on it stays mapped until the rank lets go, and a rank that
 * opens a shard the trainer already holds reads the same pages instead of
 * a second mapping (which RssFile would count twice).  One mutex guards
 * the table; a file is opened and verified outside it, and when two threads
 * open the same shard at once the second keeps the first one's mapping.
 */
#include "worker_int.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>

#define COMP "worker"

struct worker_shards {
    const tma_partition_info_t *pinfo;
    pthread_mutex_t mu;
    tma_graph_t **g; /* [num_shards]: the mapped shard, or NULL */
    int *refs;       /* [num_shards]: references given out */
};

tma_status_t worker_shards_create(const tma_partition_info_t *pinfo, worker_shards_t **s_p)
{
    worker_shards_t *s = calloc(1, sizeof *s);
    if (!s)
        return TMA_ERR_NOMEM;
    s->pinfo = pinfo;
    s->g = calloc((size_t)TMA_MAX(pinfo->num_shards, 1), sizeof *s->g);
    s->refs = calloc((size_t)TMA_MAX(pinfo->num_shards, 1), sizeof *s->refs);
    if (!s->g || !s->refs || pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s->g);
        free(s->refs);
        free(s);
        return TMA_ERR_NOMEM;
    }
    *s_p = s;
    return TMA_OK;
}

void worker_shards_destroy(worker_shards_t *s)
{
    if (!s)
        return;
    for (int32_t k = 0; k < s->pinfo->num_shards; k++) {
        if (s->g[k])
            tma_log_warn(COMP, "shard %d still had %d reference(s) at the end", k, s->refs[k]);
        tma_graph_destroy(s->g[k]);
    }
    pthread_mutex_destroy(&s->mu);
    free(s->g);
    free(s->refs);
    free(s);
}

/* Takes a reference to shard k when it is mapped; 0 when it is not. */
static int take(worker_shards_t *s, int32_t k, tma_graph_t **g_p)
{
    pthread_mutex_lock(&s->mu);
    const int have = s->g[k] != NULL;
    if (have) {
        s->refs[k]++;
        *g_p = s->g[k];
    }
    pthread_mutex_unlock(&s->mu);
    return have;
}

tma_status_t worker_shards_get(worker_shards_t *s, int32_t k, tma_graph_t **g_p)
{
    if (k < 0 || k >= s->pinfo->num_shards)
        return TMA_ERR_RANGE;
    if (take(s, k, g_p))
        return TMA_OK;
    /* Mapped and verified outside the lock (seconds for a large shard: the
     * other thread's shards stay available meanwhile). */
    const char *path = s->pinfo->shard_paths[k];
    tma_graph_t *g = NULL;
    tma_status_t st = tma_graph_open(path, 0, &g);
    if (st == TMA_OK && (g->graph_id != s->pinfo->graph_id || g->kind != TMA_GRAPH_SHARD || g->shard_index != k)) {
        tma_log_error(COMP, "%s: not shard %d of the job's partition", path, k);
        st = TMA_ERR_MISMATCH;
    }
    if (st != TMA_OK) {
        tma_graph_destroy(g);
        return st;
    }
    tma_graph_t *spare = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->g[k])
        spare = g; /* the other thread mapped it meanwhile: one mapping, theirs */
    else
        s->g[k] = g;
    s->refs[k]++;
    *g_p = s->g[k];
    pthread_mutex_unlock(&s->mu);
    tma_graph_destroy(spare);
    return TMA_OK;
}

void worker_shards_put(worker_shards_t *s, const tma_graph_t *g)
{
    if (!s || !g)
        return;
    tma_graph_t *drop = NULL;
    pthread_mutex_lock(&s->mu);
    const int32_t k = g->shard_index;
    assert(k >= 0 && k < s->pinfo->num_shards && s->g[k] == g && s->refs[k] > 0);
    if (--s->refs[k] == 0) {
        drop = s->g[k];
        s->g[k] = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    tma_graph_destroy(drop); /* unmapped outside the lock */
}

int worker_shards_refs(worker_shards_t *s, int32_t k)
{
    if (k < 0 || k >= s->pinfo->num_shards)
        return 0;
    pthread_mutex_lock(&s->mu);
    const int n = s->refs[k];
    pthread_mutex_unlock(&s->mu);
    return n;
}
