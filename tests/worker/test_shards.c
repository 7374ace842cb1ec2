/*
 * test_shards.c: a worker's shard files are mapped once in the process
 * (worker/shards.c).  The trainer and the evaluator rank (here: two threads)
 * take references to the same shard and get the same mapping, which
 * /proc/self/maps shows once; a shard given back by the trainer while the
 * rank still holds it stays mapped and readable, and the last reference
 * unmaps it.  A file that is not the partition's shard is refused.
 */
#include "../gnn/gnn_testutil.h"
#include "tma_test.h"
#include "worker_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The lines of /proc/self/maps that map the file at `path` (its name's end). */
static int mappings_of(const char *path)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') : path;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        const size_t L = strlen(line), B = strlen(base);
        n += L >= B && strcmp(line + L - B, base) == 0;
    }
    fclose(f);
    return n;
}

typedef struct {
    worker_shards_t *s;
    int32_t k;
    tma_graph_t *g;
    tma_status_t st;
} getter_t;

static void *get_main(void *arg)
{
    getter_t *a = arg;
    a->st = worker_shards_get(a->s, a->k, &a->g);
    return NULL;
}

int main(void)
{
    char *dir = tma_test_tmpdir("shards");
    tma_partition_info_t *pinfo = gnn_test_partition(dir, 400, 3, 5);
    const char *p1 = pinfo->shard_paths[1];

    worker_shards_t *s;
    CHECK_OK(worker_shards_create(pinfo, &s));
    ASSERT_EQ(mappings_of(p1), 0);
    /* Two threads (the trainer and the rank) ask for shard 1 at once: one mapping. */
    getter_t a = {s, 1, NULL, TMA_ERR_INTERNAL}, b = {s, 1, NULL, TMA_ERR_INTERNAL};
    pthread_t ta, tb;
    ASSERT_EQ(pthread_create(&ta, NULL, get_main, &a), 0);
    ASSERT_EQ(pthread_create(&tb, NULL, get_main, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_OK(a.st);
    CHECK_OK(b.st);
    ASSERT_EQ(a.g == b.g, 1);
    ASSERT_EQ(a.g->shard_index, 1);
    ASSERT_EQ(worker_shards_refs(s, 1), 2);
    const int once = mappings_of(p1);
    ASSERT_GE(once, 1);
    /* What the old rank did, a second open, shows as a second mapping: the count tells them apart. */
    tma_graph_t *again;
    CHECK_OK(tma_graph_open(p1, 0, &again));
    ASSERT_EQ(mappings_of(p1), 2 * once);
    tma_graph_destroy(again);
    ASSERT_EQ(mappings_of(p1), once);

    /* The trainer gives shard 1 back (reassigned) while the rank reads it. */
    const int64_t n = a.g->num_nodes, F = a.g->feature_dim;
    float *row = malloc((size_t)F * sizeof *row);
    worker_shards_put(s, a.g);
    ASSERT_EQ(worker_shards_refs(s, 1), 1);
    ASSERT_EQ(mappings_of(p1), once);
    tma_graph_feat_rows(b.g, n - 1, 1, row); /* still mapped: no fault */
    float want[64];
    ASSERT_LE(F, 64);
    tma_graph_t *ref;
    CHECK_OK(tma_graph_open(p1, TMA_GRAPH_OPEN_NO_VERIFY, &ref));
    tma_graph_feat_rows(ref, n - 1, 1, want);
    ASSERT_EQ(memcmp(row, want, (size_t)F * sizeof *row), 0);
    tma_graph_destroy(ref);
    /* The last reference unmaps it; a new one maps it again. */
    worker_shards_put(s, b.g);
    ASSERT_EQ(worker_shards_refs(s, 1), 0);
    ASSERT_EQ(mappings_of(p1), 0);
    tma_graph_t *g1;
    CHECK_OK(worker_shards_get(s, 1, &g1));
    ASSERT_EQ(mappings_of(p1), once);
    worker_shards_put(s, g1);

    /* Shards out of range, and a file that is another shard, are refused. */
    tma_graph_t *bad = NULL;
    CHECK_STATUS(worker_shards_get(s, 3, &bad), TMA_ERR_RANGE);
    CHECK_STATUS(worker_shards_get(s, -1, &bad), TMA_ERR_RANGE);
    char *keep = pinfo->shard_paths[2];
    pinfo->shard_paths[2] = pinfo->shard_paths[0];
    CHECK_STATUS(worker_shards_get(s, 2, &bad), TMA_ERR_MISMATCH);
    ASSERT_EQ(bad == NULL, 1);
    ASSERT_EQ(worker_shards_refs(s, 2), 0);
    pinfo->shard_paths[2] = keep;
    worker_shards_destroy(s);
    worker_shards_destroy(NULL);

    free(row);
    tma_partition_info_destroy(pinfo);
    tma_test_cleanup_dir(dir);
    return tma_test_done();
}
