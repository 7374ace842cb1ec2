/*
 * cmd_eval.c: `tma eval G.tmag WEIGHTS [--split test|val] [--ties RULE]
 * [--table-dtype f32|bf16] [--json] [--scores FILE.npz]`: the MRR and Hits@K of saved weights on a
 * graph's test (or validation) edges against their fixed negatives, with
 * full-neighbourhood inference, and every score if asked.  The weight file
 * carries its model config, so no config file is needed.  Also the model
 * loading `tma export` shares.
 */
#include "cli_int.h"
#include "tma_gnn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_model_open(const char *cmd, const char *graph, const char *weights, int64_t threads, const char *device,
                   int64_t max_edges, const tma_gnn_ties_t *ties, int table_bf16, cli_model_t *m)
{
    memset(m, 0, sizeof *m);
    int64_t count = 0;
    if (tma_gnn_weights_read(weights, NULL, &m->cfg, &m->params, &count, &m->round) != TMA_OK)
        return CLI_EXIT_RUNTIME;
    m->cfg.threads = (int)threads;
    m->cfg.eval_max_edges = max_edges;
    if (ties)
        m->cfg.eval_ties = *ties;
    m->cfg.eval_table_bf16 = table_bf16;
    snprintf(m->cfg.eval_device, sizeof m->cfg.eval_device, "%s", device ? device : "cpu");
    if (tma_graph_open(graph, 0, &m->g) != TMA_OK)
        return CLI_EXIT_RUNTIME;
    if (m->g->feature_dim != m->cfg.feature_dim) {
        fprintf(stderr, "tma %s: %s was trained on %lld-dimensional features but %s has %d\n", cmd, weights,
                (long long)m->cfg.feature_dim, graph, m->g->feature_dim);
        return CLI_EXIT_USAGE;
    }
    if (tma_gnn_config_relational(&m->cfg) && m->cfg.num_rel_ids != tma_graph_num_rel_ids(m->g)) {
        fprintf(stderr, "tma %s: %s was trained with %d relation ids but %s has %d\n", cmd, weights,
                m->cfg.num_rel_ids, graph, tma_graph_num_rel_ids(m->g));
        return CLI_EXIT_USAGE;
    }
    return tma_gnn_evaluator_create(&m->cfg, m->g, &m->ev) == TMA_OK ? CLI_EXIT_OK : CLI_EXIT_RUNTIME;
}

void cli_model_close(cli_model_t *m)
{
    tma_gnn_evaluator_destroy(m->ev);
    tma_graph_destroy(m->g);
    free(m->params);
    memset(m, 0, sizeof *m);
}

/* Every score of the split as an .npz: head [n], tail [n, 1+K], score [n, 1+K]. */
static tma_status_t write_scores(const char *path, const cli_model_t *m, tma_gnn_split_t split,
                                 const float *scores, int64_t n)
{
    const tma_graph_t *g = m->g;
    const int64_t K = g->num_negatives, per = 1 + K;
    const int64_t *edges = split == TMA_GNN_SPLIT_TEST ? g->test_edges : g->val_edges;
    const int64_t *negs = split == TMA_GNN_SPLIT_TEST ? g->test_neg : g->val_neg;
    int64_t *head = malloc((size_t)TMA_MAX(n, 1) * sizeof *head);
    int64_t *tail = malloc((size_t)TMA_MAX(n * per, 1) * sizeof *tail);
    tma_status_t st = TMA_ERR_NOMEM;
    if (head && tail) {
        for (int64_t i = 0; i < n; i++) {
            head[i] = edges[2 * i];
            tail[i * per] = edges[2 * i + 1];
            memcpy(tail + i * per + 1, negs + i * K, (size_t)K * sizeof *tail);
        }
        const tma_npy_array_t a[3] = {{"head", TMA_NPY_I64, 1, {n, 0}, head},
                                      {"tail", TMA_NPY_I64, 2, {n, per}, tail},
                                      {"score", TMA_NPY_F32, 2, {n, per}, scores}};
        st = tma_npz_write(path, a, 3);
    }
    free(head);
    free(tail);
    return st;
}

int cli_cmd_eval(int argc, char **argv)
{
    const char *split = "test", *device = NULL, *scores_path = NULL, *ties = "pessimistic", *table_dtype = "f32";
    int as_json = 0;
    int64_t threads = 0, max_edges = 0;
    const cli_opt_t opts[] = {
        {"split", 0, CLI_STR, &split, "test|val", "which evaluation edges (default test)", NULL},
        {"threads", 0, CLI_INT, &threads, "N", "threads (default: $OMP_NUM_THREADS, else one per CPU this process may use)", NULL},
        {"device", 0, CLI_STR, &device, "DEV", "cpu, cuda or cuda:N (default cpu)", NULL},
        {"max-edges", 0, CLI_INT, &max_edges, "N", "only the first N edges of the split (default all)", NULL},
        {"ties", 0, CLI_STR, &ties, "RULE",
         "pessimistic (a tie counts against the positive; default) or mean (OGB's Evaluator)", NULL},
        {"table-dtype", 0, CLI_STR, &table_dtype, "f32|bf16",
         "the evaluator's two N x hidden tables in float32 (default) or bfloat16 (half the memory; CPU only)", NULL},
        {"scores", 0, CLI_STR, &scores_path, "FILE.npz",
         "also write every score: head [n], tail [n, 1+K] (the positive, then the negatives), score [n, 1+K]", NULL},
        {"json", 0, CLI_FLAG, &as_json, NULL, "print one JSON object", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {"eval",
                             "G.tmag WEIGHTS [--split test|val] [--ties RULE] [--device DEV] [--json] "
                             "[--scores FILE.npz]",
                             "Prints the MRR and Hits@10, 50 and 100 of a weight file (from tma train or a "
                             "distributed run) on the graph's test or validation edges, each ranked against its "
                             "fixed negatives (--ties: how a tie with a negative counts), with full-neighbourhood "
                             "inference over the training graph.",
                             opts, 2, 2};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;
    tma_gnn_split_t which;
    if (strcmp(split, "test") == 0)
        which = TMA_GNN_SPLIT_TEST;
    else if (strcmp(split, "val") == 0)
        which = TMA_GNN_SPLIT_VAL;
    else
        return cli_usage_error("eval", "--split: expected test or val, got '%s'", split);
    if (cli_check_threads("eval", "--threads", threads) != CLI_EXIT_OK)
        return CLI_EXIT_USAGE;
    if (max_edges < 0)
        return cli_usage_error("eval", "--max-edges: expected a non-negative count");
    tma_gnn_ties_t rule;
    if (tma_gnn_ties_parse(ties, &rule) != TMA_OK)
        return cli_usage_error("eval", "--ties: expected pessimistic or mean, got '%s'", ties);
    if (device && !tma_gnn_device_valid(device))
        return cli_usage_error("eval", "--device: expected cpu, cuda or cuda:N, got '%s'", device);
    if (strcmp(table_dtype, "f32") != 0 && strcmp(table_dtype, "bf16") != 0)
        return cli_usage_error("eval", "--table-dtype: expected f32 or bf16, got '%s'", table_dtype);
    if (table_dtype[0] == 'b' && device && strcmp(device, "cpu") != 0)
        return cli_usage_error("eval", "--table-dtype bf16 is for the CPU evaluator, not --device %s", device);

    cli_model_t m;
    tma_gnn_metrics_t mt;
    double t0 = tma_clock_now();
    float *scores = NULL;
    int rc = cli_model_open("eval", args.pos[0], args.pos[1], threads, device, max_edges, &rule, table_dtype[0] == 'b',
                            &m);
    if (rc != CLI_EXIT_OK)
        goto out;
    rc = CLI_EXIT_RUNTIME;
    int64_t n = tma_gnn_evaluator_edges(m.ev, which);
    if (scores_path) {
        /* The scores are written as computed; the metrics come from them
         * through the same ranking code the evaluator uses. */
        const int64_t per = 1 + m.g->num_negatives;
        scores = malloc((size_t)TMA_MAX(n * per, 1) * sizeof *scores);
        if (!scores || tma_gnn_evaluator_scores(m.ev, m.params, which, scores, NULL) != TMA_OK ||
            write_scores(scores_path, &m, which, scores, n) != TMA_OK)
            goto out;
        tma_gnn_metrics_init(&mt, &m.cfg);
        tma_gnn_metrics_add(&mt, scores, n, per);
        tma_gnn_metrics_finish(&mt);
    } else if (tma_gnn_evaluator_metrics(m.ev, m.params, which, &mt) != TMA_OK) {
        goto out;
    }
    double secs = tma_clock_now() - t0;
    if (as_json) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            goto out;
        cJSON_AddStringToObject(o, "split", split);
        cJSON_AddNumberToObject(o, "mrr", mt.mrr);
        tma_gnn_metrics_json(&mt, "", o);
        cJSON_AddNumberToObject(o, "edges", (double)n);
        cJSON_AddNumberToObject(o, "negatives", m.g->num_negatives);
        cJSON_AddStringToObject(o, "encoder", tma_gnn_encoder_name(m.cfg.encoder));
        cJSON_AddNumberToObject(o, "round", (double)m.round);
        cJSON_AddNumberToObject(o, "seconds", secs);
        rc = cli_print_json(o);
        cJSON_Delete(o);
        goto out;
    }
    printf("%s_mrr %.6f\n", split, mt.mrr);
    for (int k = 0; k < mt.num_hits; k++)
        printf("%s_hits@%d %.6f\n", split, mt.hits_k[k], mt.hits[k]);
    if (isfinite(mt.auc))
        printf("%s_auc %.6f\n", split, mt.auc);
    printf("ties %s\n", tma_gnn_ties_name(mt.ties));
    rc = CLI_EXIT_OK;
out:
    free(scores);
    cli_model_close(&m);
    return rc;
}
