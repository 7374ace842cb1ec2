/*
 * cmd_eval.c: `tma eval G.tmag WEIGHTS [--split test|val] [--json]`: the MRR
 * of saved weights on a graph's test (or validation) edges against their
 * fixed negatives, with full-neighbourhood inference.  The weight file
 * carries its model config, so no config file is needed.
 */
#include "cli_int.h"
#include "tma_gnn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_cmd_eval(int argc, char **argv)
{
    const char *split = "test", *device = NULL;
    int as_json = 0;
    int64_t threads = 0, max_edges = 0;
    const cli_opt_t opts[] = {
        {"split", 0, CLI_STR, &split, "test|val", "which evaluation edges (default test)", NULL},
        {"threads", 0, CLI_INT, &threads, "N", "threads (default: $OMP_NUM_THREADS, else one per CPU this process may use)", NULL},
        {"device", 0, CLI_STR, &device, "DEV", "cpu, cuda or cuda:N (default cpu)", NULL},
        {"max-edges", 0, CLI_INT, &max_edges, "N", "only the first N edges of the split (default all)", NULL},
        {"json", 0, CLI_FLAG, &as_json, NULL, "print one JSON object", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {"eval", "G.tmag WEIGHTS [--split test|val] [--device DEV] [--json]",
                             "Prints the MRR of a weight file (from tma train or a distributed run) on the graph's "
                             "test or validation edges, each ranked against its fixed negatives (ties count "
                             "against the positive), with full-neighbourhood inference over the training graph.",
                             opts, 2, 2};
    char *pos[CLI_MAX_POS];
    int npos;
    int pr = cli_parse(&spec, argc, argv, pos, &npos);
    if (pr != CLI_PARSE_OK)
        return pr == CLI_PARSE_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    tma_gnn_split_t which;
    if (strcmp(split, "test") == 0)
        which = TMA_GNN_SPLIT_TEST;
    else if (strcmp(split, "val") == 0)
        which = TMA_GNN_SPLIT_VAL;
    else
        return cli_usage_error("eval", "--split: expected test or val, got '%s'", split);
    if (threads < 0 || threads > 1024)
        return cli_usage_error("eval", "--threads: expected 0 to 1024, got %lld", (long long)threads);
    if (max_edges < 0)
        return cli_usage_error("eval", "--max-edges: expected a non-negative count");
    if (device && !tma_gnn_device_valid(device))
        return cli_usage_error("eval", "--device: expected cpu, cuda or cuda:N, got '%s'", device);

    tma_gnn_config_t cfg;
    float *params = NULL;
    int64_t count = 0;
    uint64_t round = 0;
    if (tma_gnn_weights_read(pos[1], NULL, &cfg, &params, &count, &round) != TMA_OK)
        return CLI_EXIT_RUNTIME;
    cfg.threads = (int)threads;
    cfg.eval_max_edges = max_edges;
    snprintf(cfg.eval_device, sizeof cfg.eval_device, "%s", device ? device : "cpu");
    tma_graph_t *g = NULL;
    tma_gnn_evaluator_t *ev = NULL;
    int rc = CLI_EXIT_RUNTIME;
    double mrr = 0, t0 = tma_clock_now();
    if (tma_graph_open(pos[0], 0, &g) != TMA_OK)
        goto out;
    if (g->feature_dim != cfg.feature_dim) {
        fprintf(stderr, "tma eval: %s was trained on %lld-dimensional features but %s has %d\n", pos[1],
                (long long)cfg.feature_dim, pos[0], g->feature_dim);
        goto out;
    }
    if (tma_gnn_evaluator_create(&cfg, g, &ev) != TMA_OK)
        goto out;
    if (tma_gnn_evaluator_mrr(ev, params, which, &mrr) != TMA_OK)
        goto out;
    double secs = tma_clock_now() - t0;
    int64_t n = which == TMA_GNN_SPLIT_TEST ? g->num_test : g->num_val;
    if (max_edges > 0 && max_edges < n)
        n = max_edges;
    if (as_json)
        printf("{\"split\": \"%s\", \"mrr\": %.6f, \"edges\": %lld, \"negatives\": %d, \"encoder\": \"%s\", "
               "\"round\": %llu, \"seconds\": %.3f}\n",
               split, mrr, (long long)n, g->num_negatives, tma_gnn_encoder_name(cfg.encoder),
               (unsigned long long)round, secs);
    else
        printf("%s_mrr %.6f\n", split, mrr);
    rc = CLI_EXIT_OK;
out:
    tma_gnn_evaluator_destroy(ev);
    tma_graph_destroy(g);
    free(params);
    return rc;
}
