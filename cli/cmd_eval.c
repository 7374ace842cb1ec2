/*
 * cmd_eval.c: `tma eval G.tmag WEIGHTS [--split test|val] [--ties RULE]
 * [--json]`: the MRR and Hits@K of saved weights on a graph's test (or
 * validation) edges against their fixed negatives, with full-neighbourhood
 * inference.  The weight file carries its model config, so no config file
 * is needed.
 */
#include "cli_int.h"
#include "tma_gnn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_cmd_eval(int argc, char **argv)
{
    const char *split = "test", *device = NULL, *ties = "pessimistic";
    int as_json = 0;
    int64_t threads = 0, max_edges = 0;
    const cli_opt_t opts[] = {
        {"split", 0, CLI_STR, &split, "test|val", "which evaluation edges (default test)", NULL},
        {"threads", 0, CLI_INT, &threads, "N", "threads (default: one per CPU)", NULL},
        {"device", 0, CLI_STR, &device, "DEV", "cpu, cuda or cuda:N (default cpu)", NULL},
        {"max-edges", 0, CLI_INT, &max_edges, "N", "only the first N edges of the split (default all)", NULL},
        {"ties", 0, CLI_STR, &ties, "RULE",
         "pessimistic (a tie counts against the positive; default) or mean (OGB's Evaluator)", NULL},
        {"json", 0, CLI_FLAG, &as_json, NULL, "print one JSON object", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {"eval", "G.tmag WEIGHTS [--split test|val] [--ties RULE] [--device DEV] [--json]",
                             "Prints the MRR and Hits@10, 50 and 100 of a weight file (from tma train or a "
                             "distributed run) on the graph's test or validation edges, each ranked against its "
                             "fixed negatives (--ties: how a tie with a negative counts), with full-neighbourhood "
                             "inference over the training graph.",
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
    tma_gnn_ties_t rule;
    if (tma_gnn_ties_parse(ties, &rule) != TMA_OK)
        return cli_usage_error("eval", "--ties: expected pessimistic or mean, got '%s'", ties);
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
    cfg.eval_ties = rule;
    snprintf(cfg.eval_device, sizeof cfg.eval_device, "%s", device ? device : "cpu");
    tma_graph_t *g = NULL;
    tma_gnn_evaluator_t *ev = NULL;
    int rc = CLI_EXIT_RUNTIME;
    tma_gnn_metrics_t m;
    double t0 = tma_clock_now();
    if (tma_graph_open(pos[0], 0, &g) != TMA_OK)
        goto out;
    if (g->feature_dim != cfg.feature_dim) {
        fprintf(stderr, "tma eval: %s was trained on %lld-dimensional features but %s has %d\n", pos[1],
                (long long)cfg.feature_dim, pos[0], g->feature_dim);
        goto out;
    }
    if (tma_gnn_evaluator_create(&cfg, g, &ev) != TMA_OK)
        goto out;
    if (tma_gnn_evaluator_metrics(ev, params, which, &m) != TMA_OK)
        goto out;
    double secs = tma_clock_now() - t0;
    if (as_json) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            goto out;
        cJSON_AddStringToObject(o, "split", split);
        cJSON_AddNumberToObject(o, "mrr", m.mrr);
        tma_gnn_metrics_json(&m, "", o);
        cJSON_AddNumberToObject(o, "edges", (double)m.edges);
        cJSON_AddNumberToObject(o, "negatives", g->num_negatives);
        cJSON_AddStringToObject(o, "encoder", tma_gnn_encoder_name(cfg.encoder));
        cJSON_AddNumberToObject(o, "round", (double)round);
        cJSON_AddNumberToObject(o, "seconds", secs);
        char *txt = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!txt)
            goto out;
        printf("%s\n", txt);
        cJSON_free(txt);
    } else {
        printf("%s_mrr %.6f\n", split, m.mrr);
        for (int k = 0; k < m.num_hits; k++)
            printf("%s_hits@%d %.6f\n", split, m.hits_k[k], m.hits[k]);
        printf("ties %s\n", tma_gnn_ties_name(m.ties));
    }
    rc = CLI_EXIT_OK;
out:
    tma_gnn_evaluator_destroy(ev);
    tma_graph_destroy(g);
    free(params);
    return rc;
}
