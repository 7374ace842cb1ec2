/* cmd_import.c: `tma import SRC -o G.tmag`: a dataset folder or .npz into a
 * .tmag graph with its split and negatives; plus the split flags and the
 * build report that `tma gen` shares. */
#include "cli_int.h"
#include "tma_graph.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

int cli_graph_build_flags(const char *cmd, const cli_graph_flags_t *f, tma_graph_build_opts_t *b)
{
    tma_graph_build_opts_init(b);
    const double xs[2] = {f->val, f->test};
    const int seen[2] = {f->val_seen, f->test_seen};
    const char *names[2] = {"--val", "--test"};
    for (int i = 0; i < 2; i++) {
        if (!seen[i])
            continue;
        if (xs[i] < 0 || (xs[i] >= 1 && xs[i] != floor(xs[i])))
            return cli_usage_error(cmd, "%s: expected a fraction in [0, 1) or a whole count of edges, got %g",
                                   names[i], xs[i]);
    }
    if (f->val_seen)
        b->val = f->val;
    if (f->test_seen)
        b->test = f->test;
    if (f->negatives < 0 || f->negatives > (1 << 20))
        return cli_usage_error(cmd, "--negatives: expected a count in [0, 1048576], got %" PRId64, f->negatives);
    b->negatives = (int32_t)f->negatives;
    if (f->seed < 0 || f->seed >= TMA_GRAPH_MAX_SEED)
        return cli_usage_error(cmd, "--seed: expected an integer in [0, 2^53), got %" PRId64, f->seed);
    b->seed = (uint64_t)f->seed;
    return CLI_EXIT_OK;
}

cJSON *cli_build_report_json(const char *path, uint64_t graph_id, int64_t nodes, const tma_graph_build_report_t *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    char id[24];
    snprintf(id, sizeof id, "%016" PRIx64, graph_id);
    cJSON_AddStringToObject(o, "graph", path);
    cJSON_AddStringToObject(o, "graph_id", id);
    cJSON_AddNumberToObject(o, "nodes", (double)nodes);
    cJSON_AddNumberToObject(o, "input_edges", (double)r->input_edges);
    cJSON_AddNumberToObject(o, "self_loops_dropped", (double)r->self_loops);
    cJSON_AddNumberToObject(o, "duplicates_dropped", (double)r->duplicates);
    cJSON_AddNumberToObject(o, "edges", (double)r->edges);
    cJSON_AddNumberToObject(o, "train_edges", (double)r->train_edges);
    cJSON_AddNumberToObject(o, "val_edges", (double)r->val_edges);
    cJSON_AddNumberToObject(o, "test_edges", (double)r->test_edges);
    cJSON_AddNumberToObject(o, "negatives", r->negatives);
    return o;
}

void cli_print_build_report(const tma_graph_build_report_t *r)
{
    printf("  %-22s %" PRId64 "\n", "input edges", r->input_edges);
    printf("  %-22s %" PRId64 "\n", "self-loops dropped", r->self_loops);
    printf("  %-22s %" PRId64 "\n", "duplicates dropped", r->duplicates);
    printf("  %-22s %" PRId64 "\n", "edges", r->edges);
    printf("  %-22s %" PRId64 "\n", "train edges", r->train_edges);
    printf("  %-22s %" PRId64 "\n", "validation edges", r->val_edges);
    printf("  %-22s %" PRId64 "\n", "test edges", r->test_edges);
    printf("  %-22s %d\n", "negatives per edge", r->negatives);
}

int cli_cmd_import(int argc, char **argv)
{
    const char *out = NULL;
    int64_t feat_dim = 0;
    cli_graph_flags_t f = {.negatives = TMA_GRAPH_DEFAULT_NEGATIVES};
    int dim_seen = 0;
    const cli_opt_t opts[] = {
        {"output", 'o', CLI_STR, &out, "G.tmag", "the graph file to write (required)", NULL},
        {"feat-dim", 0, CLI_INT, &feat_dim, "D",
         "D dense features by a seeded random projection (default: the input's own, densified; "
         "64 for graphs without features)",
         &dim_seen},
        CLI_GRAPH_SPLIT_OPTS(f),
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {
        "import", "SRC -o G.tmag [options]",
        "Reads a dataset into a .tmag graph: SRC is a folder with edges.txt (+ features.txt "
        "'node feature value', labels.txt 'node label', meta.txt), an OGB dataset folder or its raw/ "
        "(edge.csv.gz, num-node-list.csv.gz, node-feat.csv.gz, node-label.csv.gz), or a .npz of CSR arrays (adj_indptr, "
        "adj_indices, adj_shape, attr_*, labels). Self-loops and duplicate edges are dropped and counted; "
        "a seeded validation/test split is removed from the training graph and each evaluation edge gets "
        "fixed negative tails. See docs/graphs.md.",
        opts, 1, 1};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;
    if (!out)
        return cli_usage_error("import", "-o G.tmag is required");
    if (dim_seen && (feat_dim < 1 || feat_dim > (1 << 20)))
        return cli_usage_error("import", "--feat-dim: expected a dimension in [1, 1048576], got %" PRId64, feat_dim);
    tma_graph_import_opts_t o;
    tma_graph_import_opts_init(&o);
    int rc = cli_graph_build_flags("import", &f, &o.build);
    if (rc != CLI_EXIT_OK)
        return rc;
    o.feat_dim = (int32_t)feat_dim;

    tma_graph_t *g;
    tma_graph_import_report_t r;
    tma_status_t st = tma_graph_import(args.pos[0], &o, &g, &r);
    if (st != TMA_OK) {
        fprintf(stderr, "tma import: %s: %s; nothing was written\n", args.pos[0], tma_status_str(st));
        return CLI_EXIT_RUNTIME;
    }
    double tw = tma_clock_now();
    st = tma_graph_write(g, out);
    tw = tma_clock_now() - tw;
    if (st != TMA_OK) {
        fprintf(stderr, "tma import: writing %s failed: %s\n", out, tma_status_str(st));
        tma_graph_destroy(g);
        return CLI_EXIT_RUNTIME;
    }
    if (f.json) {
        cJSON *j = cli_build_report_json(out, g->graph_id, r.nodes, &r.build);
        if (j) {
            cJSON_AddStringToObject(j, "layout", r.layout);
            cJSON_AddNumberToObject(j, "feature_dim", r.feature_dim);
            cJSON_AddStringToObject(j, "features", tma_feat_source_str(r.features));
            cJSON_AddNumberToObject(j, "input_feature_dim", r.input_feature_dim);
            cJSON_AddNumberToObject(j, "classes", r.num_classes);
            cJSON_AddNumberToObject(j, "seconds", r.seconds + tw);
        }
        tma_graph_destroy(g);
        rc = j ? cli_print_json(j) : CLI_EXIT_RUNTIME;
        cJSON_Delete(j);
        return rc;
    }
    printf("imported %s (%s layout) into %s, graph id %016" PRIx64 "\n", args.pos[0], r.layout, out, g->graph_id);
    printf("  %-22s %" PRId64 "\n", "nodes", r.nodes);
    cli_print_build_report(&r.build);
    if (r.features == TMA_FEAT_PROJECTED)
        printf("  %-22s %d (projected from %d)\n", "features", r.feature_dim, r.input_feature_dim);
    else
        printf("  %-22s %d (%s)\n", "features", r.feature_dim, tma_feat_source_str(r.features));
    if (r.num_classes)
        printf("  %-22s %d classes\n", "labels", r.num_classes);
    else
        printf("  %-22s none\n", "labels");
    printf("  %-22s %.3f (read %.3f, adjacency %.3f, split %.3f, negatives %.3f, write %.3f)\n", "seconds",
           r.seconds + tw, r.seconds_read, r.build.seconds_adjacency, r.build.seconds_split,
           r.build.seconds_negatives, tw);
    tma_graph_destroy(g);
    return CLI_EXIT_OK;
}
