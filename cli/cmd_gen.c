/* cmd_gen.c: `tma gen sbm|rmat -o G.tmag`: synthetic graphs through the
 * same builder (cleaning, split, negatives) as `tma import`. */
#include "cli_int.h"
#include "tma_graph.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static void print_gen_help(void)
{
    printf("Usage: tma gen MODEL -o G.tmag [options]\n\n"
           "Writes a synthetic graph with its split and negatives. Models:\n"
           "  sbm    stochastic block model: k classes, homophily h, class-centroid features plus noise\n"
           "  rmat   R-MAT power-law graph (a=0.57, b=c=0.19) with random features, for scale tests\n\n"
           "Run 'tma gen MODEL --help' for a model's options.\n");
}

int cli_memory_budget(const char *cmd, const char *flag, uint64_t *budget_p, char *why, size_t why_size)
{
    if (!flag) {
        *budget_p = tma_memory_budget_default(why, why_size);
        return CLI_EXIT_OK;
    }
    uint64_t b;
    if (tma_parse_bytes(flag, &b) != TMA_OK || b == 0)
        return cli_usage_error(cmd, "--memory: expected a size such as 512M, 4G or 1.5GiB, got '%s'", flag);
    *budget_p = tma_memory_budget_cap(b);
    snprintf(why, why_size, *budget_p < b ? "--memory, narrowed to what ulimit -d leaves" : "--memory");
    return CLI_EXIT_OK;
}

/* How a graph was made within its budget, for the report. */
typedef struct gen_mem {
    uint64_t budget, peak; /* peak: the in-memory path's estimate */
    char why[128];
} gen_mem_t;

static int report(const char *cmd, const char *out, uint64_t id, const tma_graph_t *g, const tma_gen_report_t *r,
                  double tw, int json, const gen_mem_t *mem)
{
    const int ooc = r->build.out_of_core;
    if (json) {
        cJSON *o = cli_build_report_json(out, id, r->nodes, &r->build);
        if (o) {
            cJSON_AddNumberToObject(o, "feature_dim", r->feature_dim);
            cJSON_AddStringToObject(o, "features", tma_feat_source_str(r->features));
            cJSON_AddStringToObject(o, "feature_type", tma_feat_dtype_str(r->feat_dtype));
            cJSON_AddNumberToObject(o, "classes", r->num_classes);
            if (r->homophily >= 0)
                cJSON_AddNumberToObject(o, "homophily", r->homophily);
            cJSON_AddNumberToObject(o, "memory_budget", (double)mem->budget);
            cJSON_AddBoolToObject(o, "out_of_core", ooc);
            if (ooc)
                cJSON_AddNumberToObject(o, "spilled_runs", (double)r->build.spilled_runs);
            cJSON_AddNumberToObject(o, "seconds", r->seconds + tw);
        }
        int rc = o ? cli_print_json(o) : CLI_EXIT_RUNTIME;
        cJSON_Delete(o);
        return rc;
    }
    printf("generated %s, graph id %016" PRIx64 "\n", out, id);
    printf("  %-22s %" PRId64 "\n", "nodes", r->nodes);
    cli_print_build_report(&r->build);
    printf("  %-22s %d (%s%s)\n", "features", r->feature_dim, tma_feat_source_str(r->features),
           cli_feat_dtype_note(r->feat_dtype));
    if (r->num_classes)
        printf("  %-22s %d classes\n", "labels", r->num_classes);
    if (r->homophily >= 0)
        printf("  %-22s %.4f\n", "homophily", r->homophily);
    if (g && tma_graph_is_typed(g))
        cli_print_types(g);
    if (ooc)
        printf("  %-22s %.0f MiB (%s): out of core, %" PRId64 " sorted runs spilled\n", "memory budget",
               (double)mem->budget / (1 << 20), mem->why, r->build.spilled_runs);
    else
        printf("  %-22s %.0f MiB (%s): in memory, about %.0f MiB\n", "memory budget",
               (double)mem->budget / (1 << 20), mem->why, (double)mem->peak / (1 << 20));
    printf("  %-22s %.3f (generate %.3f, adjacency %.3f, split %.3f, negatives %.3f, write %.3f)\n", "seconds",
           r->seconds + tw, r->seconds_generate, r->build.seconds_adjacency, r->build.seconds_split,
           r->build.seconds_negatives, ooc ? r->build.seconds_write : tw);
    return CLI_EXIT_OK;
}

static int write_and_report(const char *cmd, tma_graph_t *g, const char *out, const tma_gen_report_t *r, int json,
                            const gen_mem_t *mem)
{
    double tw = tma_clock_now();
    tma_status_t st = tma_graph_write(g, out);
    tw = tma_clock_now() - tw;
    if (st != TMA_OK) {
        fprintf(stderr, "tma %s: writing %s failed: %s\n", cmd, out, tma_status_str(st));
        return CLI_EXIT_RUNTIME;
    }
    return report(cmd, out, g->graph_id, g, r, tw, json, mem);
}

/* The end of a generation: its status and what it made, a graph g in memory
 * (written here, then destroyed) or one written out of core as it was built
 * (g NULL; id, its graph id). */
static int gen_finish(const char *cmd, tma_status_t st, tma_graph_t *g, const char *out, uint64_t id,
                      const tma_gen_report_t *r, int json, const gen_mem_t *mem)
{
    if (st != TMA_OK) {
        fprintf(stderr, "tma %s: %s; nothing was written\n", cmd, tma_status_str(st));
        return CLI_EXIT_RUNTIME;
    }
    if (!g)
        return report(cmd, out, id, NULL, r, 0, json, mem);
    int rc = write_and_report(cmd, g, out, r, json, mem);
    tma_graph_destroy(g);
    return rc;
}

/* The flags both models take, read after their own: the build options, the
 * memory budget and the feature type. */
static int gen_flags(const char *cmd, const cli_graph_flags_t *f, const char *memory, tma_graph_build_opts_t *b,
                     gen_mem_t *mem, tma_feat_dtype_t *dtype_p)
{
    int rc = cli_graph_build_flags(cmd, f, b);
    if (rc == CLI_EXIT_OK)
        rc = cli_memory_budget(cmd, memory, &mem->budget, mem->why, sizeof mem->why);
    if (rc == CLI_EXIT_OK)
        rc = cli_graph_feat_dtype(cmd, f, dtype_p);
    return rc;
}

static int gen_sbm(int argc, char **argv)
{
    const char *out = NULL, *memory = NULL;
    int64_t nodes = 10000, classes = 4, feat_dim = 32, node_types = 0, relations = 0;
    double avg_degree = 10, homophily = 0.9, noise = 1.0;
    cli_graph_flags_t f = {.negatives = TMA_GRAPH_DEFAULT_NEGATIVES};
    const cli_opt_t opts[] = {
        {"output", 'o', CLI_STR, &out, "G.tmag", "the graph file to write (required)", NULL},
        {"nodes", 0, CLI_INT, &nodes, "N", "nodes (default 10000)", NULL},
        {"classes", 0, CLI_INT, &classes, "K", "classes, of equal size (default 4)", NULL},
        {"avg-degree", 0, CLI_DOUBLE, &avg_degree, "D", "average degree: N*D/2 edges are drawn (default 10)", NULL},
        {"homophily", 0, CLI_DOUBLE, &homophily, "H",
         "probability that an edge's endpoints share a class (default 0.9)", NULL},
        {"feat-dim", 0, CLI_INT, &feat_dim, "F", "feature dimension (default 32)", NULL},
        {"noise", 0, CLI_DOUBLE, &noise, "S",
         "feature noise: features = class centroid ~ N(0,I) + S * N(0,I) (default 1.0)", NULL},
        {"node-types", 0, CLI_INT, &node_types, "T",
         "a typed graph: node v is of type v mod T, type t keeps max(1, F - t) feature columns (default: untyped)",
         NULL},
        {"relations", 0, CLI_INT, &relations, "R",
         "with --node-types: each edge gets a uniform relation of R, stored with its inverse", NULL},
        CLI_MEMORY_OPT(memory),
        CLI_GRAPH_SPLIT_OPTS(f),
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {
        "gen sbm", "-o G.tmag [options]",
        "A stochastic block model (the paper's Lemma 1 setting, generalised): K equal classes; each edge "
        "picks a uniform node u and, with probability H, a partner of u's class, otherwise one of another "
        "class. Labels are stored. Self-loops and duplicates are dropped; the split is as in tma import.",
        opts, 0, 0};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;
    if (!out)
        return cli_usage_error(spec.cmd, "-o G.tmag is required");
    if (nodes < 2 || nodes >= ((int64_t)1 << 40))
        return cli_usage_error(spec.cmd, "--nodes: expected a count in [2, 2^40), got %" PRId64, nodes);
    if (classes < 1 || classes > nodes)
        return cli_usage_error(spec.cmd, "--classes: expected a count in [1, nodes], got %" PRId64, classes);
    if (!(avg_degree > 0) || avg_degree > 1e6)
        return cli_usage_error(spec.cmd, "--avg-degree: expected a positive number up to 1e6, got %g", avg_degree);
    if (!(homophily >= 0 && homophily <= 1) || (classes == 1 && homophily != 1))
        return cli_usage_error(spec.cmd, "--homophily: expected a probability in [0, 1] (1 with one class), got %g",
                               homophily);
    if (feat_dim < 1 || feat_dim > (1 << 20))
        return cli_usage_error(spec.cmd, "--feat-dim: expected a dimension in [1, 1048576], got %" PRId64, feat_dim);
    if (!(noise >= 0))
        return cli_usage_error(spec.cmd, "--noise: expected a number >= 0, got %g", noise);
    if (node_types < 0 || node_types > TMA_GRAPH_MAX_NODE_TYPES || node_types > nodes)
        return cli_usage_error(spec.cmd, "--node-types: expected a count in [1, min(nodes, %d)], got %" PRId64,
                               TMA_GRAPH_MAX_NODE_TYPES, node_types);
    if (relations < 0 || relations > TMA_GRAPH_MAX_RELATIONS || (node_types > 0) != (relations > 0))
        return cli_usage_error(spec.cmd, "--relations: expected a count in [1, %d], given together with "
                               "--node-types, got %" PRId64, TMA_GRAPH_MAX_RELATIONS, relations);
    tma_graph_build_opts_t b;
    gen_mem_t mem;
    tma_feat_dtype_t dtype;
    int rc = gen_flags(spec.cmd, &f, memory, &b, &mem, &dtype);
    if (rc != CLI_EXIT_OK)
        return rc;
    tma_gen_sbm_opts_t o = {nodes, (int32_t)classes, avg_degree, homophily, (int32_t)feat_dim, noise, b.seed, dtype};
    tma_gen_typed_opts_t to = {(int32_t)node_types, (int32_t)relations};
    tma_gen_report_t r;
    mem.peak = tma_graph_gen_peak_bytes(nodes, llround(avg_degree * (double)nodes / 2), (int32_t)feat_dim, 1);
    if (mem.peak > mem.budget && node_types > 0) {
        fprintf(stderr, "tma %s: a typed SBM is built in memory only (about %.0f MiB, over the budget of %.0f MiB); "
                "give a larger --memory or fewer nodes; nothing was written\n",
                spec.cmd, (double)mem.peak / (1 << 20), (double)mem.budget / (1 << 20));
        return CLI_EXIT_RUNTIME;
    }
    uint64_t id = 0;
    tma_graph_t *g = NULL;
    tma_status_t st = mem.peak > mem.budget ? tma_graph_gen_sbm_file(&o, &b, mem.budget, out, &r, &id)
                                            : tma_graph_gen_sbm_typed(&o, node_types > 0 ? &to : NULL, &b, &g, &r);
    return gen_finish(spec.cmd, st, g, out, id, &r, f.json, &mem);
}

static int gen_rmat(int argc, char **argv)
{
    const char *out = NULL, *memory = NULL;
    int64_t scale = 0, nodes = 0, edges = 0, feat_dim = 16;
    int scale_seen = 0, nodes_seen = 0;
    cli_graph_flags_t f = {.negatives = TMA_GRAPH_DEFAULT_NEGATIVES};
    const cli_opt_t opts[] = {
        {"output", 'o', CLI_STR, &out, "G.tmag", "the graph file to write (required)", NULL},
        {"scale", 0, CLI_INT, &scale, "S", "2^S nodes (default 16 unless --nodes is given)", &scale_seen},
        {"nodes", 0, CLI_INT, &nodes, "N", "N nodes instead (ids drawn over 2^ceil(log2 N), larger ones redrawn)",
         &nodes_seen},
        {"edges", 0, CLI_INT, &edges, "M",
         "edges drawn (default 16 per node); self-loops and duplicates are then dropped", NULL},
        {"feat-dim", 0, CLI_INT, &feat_dim, "F", "random feature dimension (default 16)", NULL},
        CLI_MEMORY_OPT(memory),
        CLI_GRAPH_SPLIT_OPTS(f),
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {
        "gen rmat", "-o G.tmag [options]",
        "An R-MAT power-law graph (a = 0.57, b = c = 0.19, d = 0.05) with random features (the seeded "
        "projection of one-hot ids, as for imported graphs without features). Self-loops and duplicates "
        "are dropped, so the graph has somewhat fewer than M edges; the split is as in tma import.",
        opts, 0, 0};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;
    if (!out)
        return cli_usage_error(spec.cmd, "-o G.tmag is required");
    if (scale_seen && (scale < 1 || scale > 40))
        return cli_usage_error(spec.cmd, "--scale: expected 1..40, got %" PRId64, scale);
    if (nodes_seen && (nodes < 2 || nodes > ((int64_t)1 << 40)))
        return cli_usage_error(spec.cmd, "--nodes: expected a count in [2, 2^40], got %" PRId64, nodes);
    if (scale_seen && nodes_seen && nodes > ((int64_t)1 << scale))
        return cli_usage_error(spec.cmd, "--nodes %" PRId64 " does not fit --scale %" PRId64, nodes, scale);
    if (!scale_seen && !nodes_seen)
        scale = 16;
    int64_t n = nodes_seen ? nodes : (int64_t)1 << scale;
    if (edges == 0)
        edges = 16 * n;
    if (edges < 1 || edges > ((int64_t)1 << 36))
        return cli_usage_error(spec.cmd, "--edges: expected a count in [1, 2^36], got %" PRId64, edges);
    if (feat_dim < 1 || feat_dim > (1 << 20))
        return cli_usage_error(spec.cmd, "--feat-dim: expected a dimension in [1, 1048576], got %" PRId64, feat_dim);
    tma_graph_build_opts_t b;
    gen_mem_t mem;
    tma_feat_dtype_t dtype;
    int rc = gen_flags(spec.cmd, &f, memory, &b, &mem, &dtype);
    if (rc != CLI_EXIT_OK)
        return rc;
    tma_gen_rmat_opts_t o = {nodes_seen ? nodes : 0, (int32_t)scale, edges, (int32_t)feat_dim, b.seed, dtype};
    tma_gen_report_t r;
    mem.peak = tma_graph_gen_peak_bytes(n, edges, (int32_t)feat_dim, 0);
    uint64_t id = 0;
    tma_graph_t *g = NULL;
    tma_status_t st = mem.peak > mem.budget ? tma_graph_gen_rmat_file(&o, &b, mem.budget, out, &r, &id)
                                            : tma_graph_gen_rmat(&o, &b, &g, &r);
    return gen_finish(spec.cmd, st, g, out, id, &r, f.json, &mem);
}

int cli_cmd_gen(int argc, char **argv)
{
    if (argc < 2) {
        print_gen_help();
        return CLI_EXIT_USAGE;
    }
    const char *model = argv[1];
    if (strcmp(model, "--help") == 0 || strcmp(model, "-h") == 0) {
        print_gen_help();
        return CLI_EXIT_OK;
    }
    if (strcmp(model, "sbm") == 0)
        return gen_sbm(argc - 1, argv + 1);
    if (strcmp(model, "rmat") == 0)
        return gen_rmat(argc - 1, argv + 1);
    return cli_usage_error("gen", "unknown model '%s' (expected sbm or rmat)", model);
}
