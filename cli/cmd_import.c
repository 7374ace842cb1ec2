/* cmd_import.c: `tma import SRC -o G.tmag`: a dataset folder or .npz into a
 * .tmag graph with its split and negatives; plus the split flags and the
 * build report that `tma gen` shares. */
#include "cli_int.h"
#include "tma_graph.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The OGB split converter: $TMA_OGB_SPLIT, else tma-ogb-split beside the
 * running tma (the build tree and the installed bindir both have it there).
 * NULL when neither names a file (the importer then says what to do). */
static char *ogb_split_tool(void)
{
    const char *env = getenv("TMA_OGB_SPLIT");
    if (env && *env)
        return strdup(env);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return NULL;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return NULL;
    *slash = '\0';
    char *p = tma_path_join(self, "tma-ogb-split");
    if (p && !tma_file_exists(p)) {
        free(p);
        return NULL;
    }
    return p;
}

int cli_graph_feat_dtype(const char *cmd, const cli_graph_flags_t *f, tma_feat_dtype_t *t_p)
{
    *t_p = TMA_FEAT_F32;
    if (f->feat_dtype && tma_feat_dtype_parse(f->feat_dtype, t_p) != TMA_OK)
        return cli_usage_error(cmd, "--feat-dtype: expected f32, f16 or bf16, got '%s'", f->feat_dtype);
    return CLI_EXIT_OK;
}

const char *cli_feat_dtype_note(tma_feat_dtype_t t)
{
    return t == TMA_FEAT_F16 ? ", f16" : t == TMA_FEAT_BF16 ? ", bf16" : "";
}

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

void cli_print_types(const tma_graph_t *g)
{
    int64_t *cnt = calloc((size_t)g->num_node_types + (size_t)g->num_relations, sizeof *cnt);
    if (!cnt)
        return;
    for (int64_t v = 0; v < g->num_nodes; v++)
        cnt[g->node_type[v]]++;
    for (int64_t e = 0; e < 2 * g->num_train_edges; e++)
        if (g->edge_rel[e] < g->num_relations)
            cnt[g->num_node_types + g->edge_rel[e]]++;
    char name[256];
    for (int32_t t = 0; t < g->num_node_types; t++)
        printf("  %-22s %s: %" PRId64 " nodes, %d features\n", t ? "" : "node types",
               tma_graph_node_type_name(g, t, name, sizeof name), cnt[t], g->type_feat_dim[t]);
    for (int32_t r = 0; r < g->num_relations; r++)
        printf("  %-22s %s: %" PRId64 " train edges, with its inverse (ids %d and %d)\n", r ? "" : "relations",
               tma_graph_relation_name(g, r, name, sizeof name), cnt[g->num_node_types + r], r,
               r + g->num_relations);
    free(cnt);
}

/* The report of an import (g: the graph in memory, or NULL after an
 * out-of-core import, which wrote it as it went). */
static int import_report(const char *src, const char *out, uint64_t id, const tma_graph_t *g,
                         const tma_graph_import_report_t *r, const tma_graph_import_opts_t *o, double tw, int json,
                         uint64_t budget, const char *why)
{
    if (json) {
        cJSON *j = cli_build_report_json(out, id, r->nodes, &r->build);
        if (j) {
            cJSON_AddStringToObject(j, "layout", r->layout);
            cJSON_AddNumberToObject(j, "feature_dim", r->feature_dim);
            cJSON_AddStringToObject(j, "features", tma_feat_source_str(r->features));
            cJSON_AddStringToObject(j, "feature_type", tma_feat_dtype_str(r->feat_dtype));
            cJSON_AddNumberToObject(j, "input_feature_dim", r->input_feature_dim);
            cJSON_AddBoolToObject(j, "features_mapped", r->features_mapped);
            cJSON *ign = cJSON_AddArrayToObject(j, "ignored");
            const char *name = r->ignored;
            for (int32_t i = 0; ign && i < r->num_ignored; i++, name += strlen(name) + 1)
                cJSON_AddItemToArray(ign, cJSON_CreateString(name));
            cJSON_AddNumberToObject(j, "ignored_more", r->ignored_more);
            cJSON_AddNumberToObject(j, "classes", r->num_classes);
            if (g && tma_graph_is_typed(g)) {
                cJSON_AddNumberToObject(j, "num_node_types", r->num_node_types);
                cJSON_AddNumberToObject(j, "num_relations", r->num_relations);
            }
            cJSON_AddNumberToObject(j, "memory_budget", (double)budget);
            cJSON_AddBoolToObject(j, "out_of_core", r->build.out_of_core);
            cJSON_AddNumberToObject(j, "seconds", r->seconds + tw);
        }
        int rc = j ? cli_print_json(j) : CLI_EXIT_RUNTIME;
        cJSON_Delete(j);
        return rc;
    }
    printf("imported %s (%s layout) into %s, graph id %016" PRIx64 "\n", src, r->layout, out, id);
    printf("  %-22s %" PRId64 "\n", "nodes", r->nodes);
    cli_print_build_report(&r->build);
    if (r->split_from[0])
        printf("  %-22s official, as given in %s (%" PRId64 " training edges listed; no re-split, no cap, "
               "each evaluation edge with its own %d negatives)\n",
               "split", r->split_from, r->split_train_edges, r->build.negatives);
    else
        printf("  %-22s drawn (seed %" PRIu64 ")\n", "split", o->build.seed);
    if (r->features == TMA_FEAT_PROJECTED)
        printf("  %-22s %d (projected from %d%s)\n", "features", r->feature_dim, r->input_feature_dim,
               cli_feat_dtype_note(r->feat_dtype));
    else
        printf("  %-22s %d (%s%s%s)\n", "features", r->feature_dim, tma_feat_source_str(r->features),
               cli_feat_dtype_note(r->feat_dtype),
               r->features_mapped ? ", used in place from the mapped features.npy" : "");
    if (r->num_classes)
        printf("  %-22s %d classes\n", "labels", r->num_classes);
    else
        printf("  %-22s none\n", "labels");
    if (g && tma_graph_is_typed(g))
        cli_print_types(g);
    if (r->num_ignored) {
        /* What the dataset folder holds that the import did not read. */
        printf("  %-22s ", "ignored (not read)");
        const char *name = r->ignored;
        for (int32_t i = 0; i < r->num_ignored; i++, name += strlen(name) + 1)
            printf("%s%s", i ? ", " : "", name);
        if (r->ignored_more)
            printf(" and %d more", r->ignored_more);
        printf("\n");
    }
    if (r->build.out_of_core)
        printf("  %-22s %.0f MiB (%s): out of core, %" PRId64 " sorted runs spilled\n", "memory budget",
               (double)budget / (1 << 20), why, r->build.spilled_runs);
    else
        printf("  %-22s %.0f MiB (%s): in memory\n", "memory budget", (double)budget / (1 << 20), why);
    printf("  %-22s %.3f (read %.3f, adjacency %.3f, split %.3f, negatives %.3f, write %.3f)\n", "seconds",
           r->seconds + tw, r->seconds_read, r->build.seconds_adjacency, r->build.seconds_split,
           r->build.seconds_negatives, r->build.out_of_core ? r->build.seconds_write : tw);
    return CLI_EXIT_OK;
}

int cli_cmd_import(int argc, char **argv)
{
    const char *out = NULL, *memory = NULL;
    int64_t feat_dim = 0;
    cli_graph_flags_t f = {.negatives = TMA_GRAPH_DEFAULT_NEGATIVES};
    int dim_seen = 0, resplit = 0;
    const char *split_name = NULL;
    const cli_opt_t opts[] = {
        {"output", 'o', CLI_STR, &out, "G.tmag", "the graph file to write (required)", NULL},
        {"feat-dim", 0, CLI_INT, &feat_dim, "D",
         "D dense features by a seeded random projection (default: the input's own, densified; "
         "64 for graphs without features)",
         &dim_seen},
        CLI_MEMORY_OPT(memory),
        CLI_GRAPH_SPLIT_OPTS(f),
        {"split", 0, CLI_STR, &split_name, "NAME",
         "OGB datasets: the split folder split/NAME to use (default: the only one)", NULL},
        {"resplit", 0, CLI_FLAG, &resplit, NULL,
         "OGB datasets: ignore the official split/ and draw a seeded split as for other layouts", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {
        "import", "SRC -o G.tmag [options]",
        "Reads a dataset into a .tmag graph: SRC is a folder with edges.txt ('u v' or weighted 'u v w' "
        "lines, an optional header line; + features.txt "
        "'node feature value' or features.npy (nodes x F, float32 or float16), labels.txt 'node label', "
        "meta.txt), an OGB dataset folder or its raw/ "
        "(edge.csv.gz, num-node-list.csv.gz, node-feat.csv.gz, node-label.csv.gz), or a .npz, stored or "
        "compressed: gnn-benchmark's arrays (adj_indptr, adj_indices, adj_shape, attr_*, labels), "
        "scipy.sparse.save_npz's, or PyG-style edge_index [2, E], x, y; or a typed dataset: MovieLens 100K as GroupLens "
        "ships it (u.data, u.user, u.item, u.genre, u.occupation) or a folder with node_types.txt ('node type_name') and "
        "edges.txt ('u v relation_name'), each relation stored with its inverse. Self-loops and duplicate edges are dropped and counted; "
        "a seeded validation/test split is removed from the training graph and each evaluation edge gets "
        "fixed negative tails. Files in the folder that are not read are listed in the report (\"ignored\"). An OGB dataset with an official split (split/NAME/{train,valid,test}.pt) keeps "
        "it and its negatives as they are (read by tma-ogb-split, which needs PyTorch). See docs/graphs.md.",
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
    if (rc != CLI_EXIT_OK || (rc = cli_graph_feat_dtype("import", &f, &o.feat_dtype)) != CLI_EXIT_OK)
        return rc;
    o.feat_dim = (int32_t)feat_dim;
    o.split_name = split_name;
    o.resplit = resplit;
    char *tool = resplit ? NULL : ogb_split_tool();
    o.ogb_split_tool = tool;
    o.ogb_split_python = getenv("TMA_PYTHON") && *getenv("TMA_PYTHON") ? getenv("TMA_PYTHON") : NULL;

    uint64_t budget;
    char why[128];
    if ((rc = cli_memory_budget("import", memory, &budget, why, sizeof why)) != CLI_EXIT_OK) {
        free(tool);
        return rc;
    }
    tma_graph_t *g = NULL;
    tma_graph_import_report_t r;
    uint64_t id = 0;
    double tw = 0;
    const uint64_t peak = tma_graph_import_streams(args.pos[0]) ? tma_graph_import_peak_bytes(args.pos[0], o.feat_dim) : 0;
    tma_status_t st = peak > budget ? tma_graph_import_file(args.pos[0], &o, budget, out, &r, &id)
                                    : tma_graph_import(args.pos[0], &o, &g, &r);
    free(tool);
    if (st != TMA_OK) {
        /* The importer logged what is wrong: a status word after it ("not
         * found" for a missing Python module) would only mislead. */
        fprintf(stderr, "tma import: %s: nothing was written (%s)\n", args.pos[0],
                st == TMA_ERR_NOMEM ? "out of memory" : "the error above says why");
        return CLI_EXIT_RUNTIME;
    }
    if (g) {
        tw = tma_clock_now();
        st = tma_graph_write(g, out);
        tw = tma_clock_now() - tw;
        id = g->graph_id;
        if (st != TMA_OK) {
            fprintf(stderr, "tma import: writing %s failed: %s\n", out, tma_status_str(st));
            tma_graph_destroy(g);
            return CLI_EXIT_RUNTIME;
        }
    }
    rc = import_report(args.pos[0], out, id, g, &r, &o, tw, f.json, budget, why);
    tma_graph_destroy(g);
    return rc;
}
