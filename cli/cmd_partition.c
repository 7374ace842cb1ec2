/* cmd_partition.c: `tma partition G.tmag --scheme S --shards N -o DIR`:
 * shard files, partition.json and a table of the shard statistics. */
#include "cli_int.h"
#include "tma_graph.h"
#include "tma_job.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_cmd_partition(int argc, char **argv)
{
    const char *out = NULL, *scheme = NULL, *memory = NULL, *clusterer = NULL;
    int64_t shards = 0, seed = 0;
    int shards_seen = 0, json = 0;
    const cli_opt_t opts[] = {
        {"scheme", 0, CLI_STR, &scheme, "SCHEME",
         "random (each node to a seeded random shard), supernode[:N] (METIS into N mini-clusters, "
         "shuffled and dealt to the shards) or metis (METIS into the shard count); required",
         NULL},
        {"clusterer", 0, CLI_STR, &clusterer, "C",
         "what cuts the graph for supernode and metis: metis, lp (label propagation with capped groups packed "
         "into the parts: any size, 16 bytes a node) or auto (default: metis unless the graph is beyond its "
         "2^31 adjacency entries or its estimate is over --memory)",
         NULL},
        {"shards", 0, CLI_INT, &shards, "S", "number of shards (required)", &shards_seen},
        {"seed", 0, CLI_INT, &seed, "X", "seed of the assignment (default 0)", NULL},
        {"output", 'o', CLI_STR, &out, "DIR",
         "the partition folder: shard-NNNNN.tmag files and partition.json, written last (required)", NULL},
        CLI_MEMORY_OPT(memory),
        {"json", 0, CLI_FLAG, &json, NULL, "print partition.json (the statistics) instead of the table", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {
        "partition", "G.tmag --scheme random|supernode[:N]|metis [--clusterer metis|lp|auto] --shards S [--seed X] -o DIR",
        "Cuts the training graph of G.tmag into S shards; each shard file holds the induced training "
        "subgraph, its features, labels and global ids. Prints and saves the statistics: edge_ratio (share "
        "of training edges kept inside shards), label_tv (mean total-variation distance of the shards' "
        "label distributions from the graph's) and feature_mean_dist (mean L2 distance of the shards' mean "
        "features from the graph's). Existing shard files and partition.json in DIR are replaced.",
        opts, 1, 1};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;
    if (!out)
        return cli_usage_error("partition", "-o DIR is required");
    if (!scheme)
        return cli_usage_error("partition", "--scheme is required (random, supernode[:N] or metis)");
    tma_partition_opts_t o = {0};
    /* "supernode" alone: N as a job config gets it (about 50 nodes a
     * cluster), from the graph's node count, after the flags are checked. */
    int default_n = strcmp(scheme, "supernode") == 0;
    if (default_n)
        scheme = "supernode:1";
    if (tma_partition_scheme_parse(scheme, &o) != TMA_OK)
        return cli_usage_error("partition", "--scheme: expected random, supernode, supernode:N (N >= 1) or metis, got '%s'",
                               scheme);
    if (!shards_seen || shards < 1 || shards > (1 << 20))
        return cli_usage_error("partition", "--shards: expected a count in [1, 1048576]%s",
                               shards_seen ? "" : " (required)");
    if (seed < 0 || seed >= TMA_GRAPH_MAX_SEED)
        return cli_usage_error("partition", "--seed: expected an integer in [0, 2^53), got %" PRId64, seed);
    if (o.scheme == TMA_PARTITION_SUPERNODE && o.num_clusters < shards && !default_n)
        return cli_usage_error("partition", "--scheme supernode:%" PRId64 ": needs at least as many clusters as "
                               "--shards (%" PRId64 ")", o.num_clusters, shards);
    if (clusterer && tma_clusterer_parse(clusterer, &o.clusterer) != TMA_OK)
        return cli_usage_error("partition", "--clusterer: expected metis, lp or auto, got '%s'", clusterer);
    if (clusterer && o.scheme == TMA_PARTITION_RANDOM && o.clusterer != TMA_CLUSTERER_AUTO)
        return cli_usage_error("partition", "--clusterer %s: the random scheme uses no clusterer (it is for "
                               "supernode and metis)", clusterer);
    o.num_shards = (int32_t)shards;
    o.seed = (uint64_t)seed;
    char why[128];
    int rc = cli_memory_budget("partition", memory, &o.memory, why, sizeof why);
    if (rc != CLI_EXIT_OK)
        return rc;

    tma_graph_t *g;
    tma_status_t st = tma_graph_open(args.pos[0], 0, &g);
    if (st != TMA_OK) {
        fprintf(stderr, "tma partition: cannot use %s: %s\n", args.pos[0], tma_status_str(st));
        return CLI_EXIT_RUNTIME;
    }
    if (default_n) {
        char def[64];
        tma_job_default_scheme(TMA_VARIANT_SUPERTMA, (int)shards, g->num_nodes, def, sizeof def);
        if (tma_partition_scheme_parse(def, &o) != TMA_OK) {
            tma_graph_destroy(g);
            return CLI_EXIT_RUNTIME;
        }
        fprintf(stderr, "tma partition: --scheme supernode: %s (the job config's default: about 50 nodes a "
                        "cluster, at least 4 a shard, at most 15000)\n", def);
    }
    tma_partition_result_t *r;
    st = tma_partition_run(g, args.pos[0], &o, out, &r);
    const tma_clusterer_t used = tma_partition_clusterer(g, &o);
    const uint64_t need = tma_partition_peak_bytes(g, &o);
    tma_graph_destroy(g);
    if (st != TMA_OK) {
        fprintf(stderr, "tma partition: %s: %s; %s has no partition.json\n", args.pos[0], tma_status_str(st), out);
        return CLI_EXIT_RUNTIME;
    }
    if (json) {
        tma_partition_result_destroy(r);
        char *path = tma_path_join(out, "partition.json");
        rc = path ? cli_print_file(path) : CLI_EXIT_RUNTIME;
        free(path);
        return rc;
    }
    printf("partitioned %s into %s: scheme %s", args.pos[0], out, tma_partition_scheme_str(o.scheme));
    if (o.scheme == TMA_PARTITION_SUPERNODE)
        printf(":%" PRId64, o.num_clusters);
    if (used != TMA_CLUSTERER_AUTO)
        printf(" (clusterer %s)", tma_clusterer_str(used));
    printf(", %d shards, seed %" PRId64 "; about %.0f MiB of the %.0f MiB budget (%s)\n", o.num_shards, seed,
           (double)need / (1 << 20), (double)o.memory / (1 << 20), why);
    printf("%6s %12s %14s %9s %10s %10s\n", "shard", "nodes", "edges", "clusters", "label_tv", "feat_dist");
    for (int32_t s = 0; s < o.num_shards; s++) {
        printf("%6d %12" PRId64 " %14" PRId64 " ", s, r->shard_nodes[s], r->shard_edges[s]);
        if (r->shard_clusters)
            printf("%9" PRId64 " ", r->shard_clusters[s]);
        else
            printf("%9s ", "-");
        if (r->shard_label_tv[s] >= 0)
            printf("%10.4f ", r->shard_label_tv[s]);
        else
            printf("%10s ", "-");
        if (r->shard_feature_dist[s] >= 0)
            printf("%10.4f\n", r->shard_feature_dist[s]);
        else
            printf("%10s\n", "-");
    }
    printf("edge_ratio %.4f  label_tv ", r->edge_ratio);
    if (r->label_tv >= 0)
        printf("%.4f", r->label_tv);
    else
        printf("-");
    printf("  feature_mean_dist %.4f  seconds %.3f (assign %.3f, extract %.3f, write %.3f)\n",
           r->feature_mean_dist, r->seconds, r->seconds_assign, r->seconds_extract, r->seconds_write);
    tma_partition_result_destroy(r);
    return CLI_EXIT_OK;
}
