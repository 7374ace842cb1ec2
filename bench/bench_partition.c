/*
 * bench_partition.c: how close a partition gets to this machine's memory
 * bandwidth.  In one process it (1) maps the graph and reads it once, so the
 * page cache and page tables are warm, (2) measures memcpy bandwidth over as
 * many bytes as the partition must move at least (read the CSR, features and
 * labels; write every shard's CSR, features, labels and global ids), into
 * fresh memory (first touch included, as the partition's own buffers are)
 * and into memory already touched, and (3) runs tma_partition_run and
 * reports its in-memory time (assign + extract) as effective bandwidth.
 *
 * Usage: bench_partition G.tmag SCHEME SHARDS OUTDIR
 */
#include "tma_graph.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double copy_gbs(char *dst, const char *src, size_t bytes)
{
    double t = tma_clock_now();
    memcpy(dst, src, bytes);
    t = tma_clock_now() - t;
    return 2.0 * (double)bytes / t / 1e9; /* bytes read + bytes written */
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s G.tmag random|supernode:N|metis SHARDS OUTDIR\n", argv[0]);
        return 2;
    }
    tma_log_set_level(TMA_LOG_WARN);
    tma_partition_opts_t o = {0};
    if (tma_partition_scheme_parse(argv[2], &o) != TMA_OK) {
        fprintf(stderr, "bad scheme %s\n", argv[2]);
        return 2;
    }
    o.num_shards = atoi(argv[3]);
    tma_graph_t *g;
    if (tma_graph_open(argv[1], TMA_GRAPH_OPEN_NO_VERIFY, &g) != TMA_OK)
        return 1;
    const int64_t n = g->num_nodes, m = g->num_train_edges, D = g->feature_dim;
    /* Warm the mapping: touch every page the partition reads. */
    uint64_t sink = 0;
    for (int64_t i = 0; i <= n; i += 512)
        sink += (uint64_t)g->indptr[i];
    for (int64_t i = 0; i < 2 * m; i += 512)
        sink += (uint64_t)g->indices[i];
    for (int64_t i = 0; i < n * D; i += 1024)
        sink += (uint64_t)((const float *)g->features)[i];

    tma_partition_result_t *r;
    if (tma_partition_run(g, argv[1], &o, argv[4], &r) != TMA_OK)
        return 1;
    int64_t kept = 0;
    for (int32_t s = 0; s < o.num_shards; s++)
        kept += r->shard_edges[s];
    const double labels = g->labels ? 4.0 : 0.0;
    const double read = 8.0 * (double)(n + 1) + 16.0 * (double)m + (4.0 * (double)D + labels) * (double)n;
    const double written = (8.0 + 4.0 * (double)D + labels + 8.0) * (double)n + 8.0 * o.num_shards + 16.0 * (double)kept;
    const size_t half = (size_t)((read + written) / 2);

    char *src = malloc(half), *dst = malloc(half);
    if (!src || !dst)
        return 1;
    memset(src, 1, half);
    double fresh = copy_gbs(dst, src, half);
    double warm = copy_gbs(dst, src, half);
    warm = warm > copy_gbs(dst, src, half) ? warm : copy_gbs(dst, src, half);

    const double t_mem = r->seconds_assign + r->seconds_extract;
    const double eff = (read + written) / t_mem / 1e9;
    printf("graph %s: %" PRId64 " nodes, %" PRId64 " training edges, %" PRId64 " features\n", argv[1], n, m, D);
    printf("scheme %s, %d shards: edge_ratio %.4f\n", argv[2], o.num_shards, r->edge_ratio);
    printf("bytes moved at least: %.1f MB read + %.1f MB written\n", read / 1e6, written / 1e6);
    printf("memcpy of the same bytes: %.2f GB/s into fresh memory, %.2f GB/s into touched memory\n", fresh, warm);
    printf("partition: assign %.3f s, extract %.3f s (in memory: %.2f GB/s = %.0f%% of fresh memcpy, %.0f%% of "
           "touched), write %.3f s, total %.3f s\n",
           r->seconds_assign, r->seconds_extract, eff, 100 * eff / fresh, 100 * eff / warm, r->seconds_write,
           r->seconds);
    printf("memcpy-bound time for these bytes: %.3f s (fresh) / %.3f s (touched)\n", (read + written) / fresh / 1e9,
           (read + written) / warm / 1e9);
    free(src);
    free(dst);
    tma_partition_result_destroy(r);
    tma_graph_destroy(g);
    return sink == 42 ? 3 : 0;
}
