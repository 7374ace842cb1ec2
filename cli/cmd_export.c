/*
 * cmd_export.c: `tma export RUN_OR_WEIGHTS [--graph G.tmag] [-o DIR]`: a
 * model for other tools.  DIR/model.npz holds the weights under PyTorch
 * state_dict names and shapes (Linear weights [out, in]; the decoder as an
 * nn.Sequential of Linear and PReLU), DIR/embeddings.npy every node's
 * embedding from full-neighbourhood inference (num_nodes x hidden, float32),
 * and DIR/model.json the model config.  docs/model.md shows the few lines of
 * PyTorch that load them and score an edge.
 */
#include "cli_int.h"
#include "tma_gnn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A tma parameter name as its PyTorch state_dict name; 1 when the tensor is
 * a Linear weight (stored [in x out], exported [out, in]). */
static int torch_name(const char *tma, char *out, size_t cap)
{
    int i;
    char what[16];
    if (sscanf(tma, "enc.%d.%15s", &i, what) == 2) {
        static const char *const map[][2] = {
            {"weight", "lin.weight"},     {"weight_self", "lin_self.weight"}, {"weight_neigh", "lin_neigh.weight"},
            {"bias", "bias"},             {"ln_weight", "norm.weight"},       {"ln_bias", "norm.bias"},
            {"prelu", "act.weight"},
        };
        for (size_t k = 0; k < TMA_ARRAY_LEN(map); k++)
            if (strcmp(what, map[k][0]) == 0) {
                snprintf(out, cap, "encoder.%d.%s", i, map[k][1]);
                return strncmp(what, "weight", 6) == 0;
            }
    } else if (sscanf(tma, "dec.%d.%15s", &i, what) == 2) {
        /* nn.Sequential(Linear, PReLU, Linear, ..., Linear): Linear k is
         * module 2k, its PReLU 2k + 1. */
        int prelu = strcmp(what, "prelu") == 0;
        snprintf(out, cap, "decoder.%d.%s", 2 * i + prelu, prelu ? "weight" : what);
        return strcmp(what, "weight") == 0;
    }
    snprintf(out, cap, "%s", tma);
    return 0;
}

/* model.npz: every tensor of the layout, Linear weights transposed. */
static tma_status_t write_model(const char *path, const cli_model_t *m)
{
    tma_gnn_layout_t lay;
    tma_status_t st = tma_gnn_layout_build(&m->cfg, &lay);
    if (st != TMA_OK)
        return st;
    tma_npy_array_t a[TMA_GNN_MAX_PARAMS];
    char names[TMA_GNN_MAX_PARAMS][48];
    float *buf = malloc((size_t)lay.total * sizeof *buf);
    if (!buf)
        return TMA_ERR_NOMEM;
    for (int i = 0; i < lay.count; i++) {
        const tma_gnn_param_info_t *p = &lay.params[i];
        const float *src = m->params + p->offset;
        float *dst = buf + p->offset;
        int linear = torch_name(p->name, names[i], sizeof names[i]);
        a[i] = (tma_npy_array_t){names[i], TMA_NPY_F32, linear ? 2 : 1, {linear ? p->cols : p->rows * p->cols,
                                                                         linear ? p->rows : 0}, dst};
        for (int64_t r = 0; r < p->rows; r++)
            for (int64_t c = 0; c < p->cols; c++)
                dst[linear ? c * p->rows + r : r * p->cols + c] = src[r * p->cols + c];
    }
    st = tma_npz_write(path, a, lay.count);
    free(buf);
    return st;
}

/* The weights and graph: a run folder's best.tmaw and the graph its
 * result.json names, or a weight file and --graph. */
static int resolve_inputs(const char *arg, const char *graph_flag, const char *out_flag, char **weights_p,
                          char **graph_p, char **out_p)
{
    if (tma_dir_exists(arg)) {
        *weights_p = tma_path_join(arg, "best.tmaw");
        *out_p = out_flag ? strdup(out_flag) : tma_path_join(arg, "export");
        if (graph_flag) {
            *graph_p = strdup(graph_flag);
            return CLI_EXIT_OK;
        }
        char *rpath = tma_path_join(arg, "result.json");
        cJSON *res = NULL;
        const cJSON *g = NULL;
        if (rpath && tma_json_load_file(rpath, &res) == TMA_OK)
            g = cJSON_GetObjectItemCaseSensitive(res, "graph");
        if (cJSON_IsString(g) && g->valuestring[0])
            *graph_p = strdup(g->valuestring);
        cJSON_Delete(res);
        free(rpath);
        if (!*graph_p)
            return cli_usage_error("export", "%s/result.json names no graph: give --graph G.tmag", arg);
        return CLI_EXIT_OK;
    }
    if (!graph_flag)
        return cli_usage_error("export", "%s is a weight file: give --graph G.tmag (the graph to embed)", arg);
    if (!out_flag)
        return cli_usage_error("export", "%s is a weight file: give -o DIR (where to write)", arg);
    *weights_p = strdup(arg);
    *graph_p = strdup(graph_flag);
    *out_p = strdup(out_flag);
    return CLI_EXIT_OK;
}

/* The files of DIR, and the embeddings. */
static tma_status_t export_files(const char *dir, const cli_model_t *m, int64_t *nodes_p, int64_t *dim_p)
{
    tma_status_t st = tma_mkdir_p(dir);
    char *mpath = tma_path_join(dir, "model.npz"), *epath = tma_path_join(dir, "embeddings.npy");
    char *cpath = tma_path_join(dir, "model.json");
    const int64_t N = m->g->num_nodes, H = m->cfg.hidden;
    float *emb = malloc((size_t)TMA_MAX(N * H, 1) * sizeof *emb);
    if (st == TMA_OK && (!mpath || !epath || !cpath || !emb))
        st = TMA_ERR_NOMEM;
    if (st == TMA_OK)
        st = write_model(mpath, m);
    if (st == TMA_OK)
        st = tma_gnn_evaluator_embeddings(m->ev, m->params, emb);
    if (st == TMA_OK) {
        const tma_npy_array_t a = {"embeddings", TMA_NPY_F32, 2, {N, H}, emb};
        st = tma_npy_write(epath, &a);
    }
    if (st == TMA_OK) {
        cJSON *model = tma_gnn_config_model_json(&m->cfg);
        st = model ? tma_json_write_file(cpath, model) : TMA_ERR_NOMEM;
        cJSON_Delete(model);
    }
    free(emb);
    free(mpath);
    free(epath);
    free(cpath);
    *nodes_p = N;
    *dim_p = H;
    return st;
}

int cli_cmd_export(int argc, char **argv)
{
    const char *graph_flag = NULL, *out_flag = NULL, *device = NULL;
    int64_t threads = 0;
    int as_json = 0;
    const cli_opt_t opts[] = {
        {"graph", 'g', CLI_STR, &graph_flag, "G.tmag", "the graph to embed (default: the run's result.json names it)",
         NULL},
        {"output", 'o', CLI_STR, &out_flag, "DIR", "where to write (default RUN/export)", NULL},
        {"threads", 0, CLI_INT, &threads, "N", "threads of the inference (default: one per CPU)", NULL},
        {"device", 0, CLI_STR, &device, "DEV", "cpu, cuda or cuda:N (default cpu)", NULL},
        {"json", 0, CLI_FLAG, &as_json, NULL, "print what was written as one JSON object", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {
        "export", "RUN_OR_WEIGHTS [--graph G.tmag] [-o DIR]",
        "Exports a model for other tools: DIR/model.npz (the weights under PyTorch state_dict names and shapes), "
        "DIR/embeddings.npy (every node's embedding from full-neighbourhood inference, num_nodes x hidden "
        "float32) and DIR/model.json (the model config). RUN_OR_WEIGHTS is a run folder (its best.tmaw, on the "
        "graph its result.json names) or a weight file (with --graph and -o). docs/model.md shows how PyTorch "
        "loads them and scores an edge.",
        opts, 1, 1};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;
    if (cli_check_threads("export", "--threads", threads) != CLI_EXIT_OK)
        return CLI_EXIT_USAGE;
    if (device && !tma_gnn_device_valid(device))
        return cli_usage_error("export", "--device: expected cpu, cuda or cuda:N, got '%s'", device);
    char *weights = NULL, *graph = NULL, *out = NULL;
    cli_model_t m;
    memset(&m, 0, sizeof m);
    int rc = resolve_inputs(args.pos[0], graph_flag, out_flag, &weights, &graph, &out);
    if (rc == CLI_EXIT_OK && (!weights || !graph || !out))
        rc = CLI_EXIT_RUNTIME;
    if (rc == CLI_EXIT_OK)
        rc = cli_model_open("export", graph, weights, threads, device, 0, NULL, &m);
    if (rc == CLI_EXIT_OK && tma_gnn_config_relational(&m.cfg)) {
        /* Their tensors (RGCN bases and coefficients, DistMult's relation
         * diagonals) have no PyTorch names here yet. */
        fprintf(stderr, "tma export: %s: export does not support rgcn/distmult yet (a %s encoder with a %s decoder)\n",
                weights, tma_gnn_encoder_name(m.cfg.encoder), tma_gnn_decoder_name(m.cfg.decoder));
        rc = CLI_EXIT_USAGE;
    }
    int64_t nodes = 0, dim = 0;
    tma_status_t st = TMA_OK;
    if (rc == CLI_EXIT_OK && (st = export_files(out, &m, &nodes, &dim)) != TMA_OK) {
        fprintf(stderr, "tma export: writing %s failed: %s\n", out, tma_status_str(st));
        rc = CLI_EXIT_RUNTIME;
    }
    if (rc == CLI_EXIT_OK && as_json) {
        cJSON *o = cJSON_CreateObject();
        if (o) {
            cJSON_AddStringToObject(o, "weights", weights);
            cJSON_AddStringToObject(o, "graph", graph);
            cJSON_AddNumberToObject(o, "round", (double)m.round);
            cJSON_AddStringToObject(o, "dir", out);
            cJSON_AddNumberToObject(o, "nodes", (double)nodes);
            cJSON_AddNumberToObject(o, "dim", (double)dim);
        }
        rc = o ? cli_print_json(o) : CLI_EXIT_RUNTIME;
        cJSON_Delete(o);
    } else if (rc == CLI_EXIT_OK)
        printf("exported %s (round %llu) to %s: model.npz, embeddings.npy (%lld x %lld), model.json\n", weights,
               (unsigned long long)m.round, out, (long long)nodes, (long long)dim);
    cli_model_close(&m);
    free(weights);
    free(graph);
    free(out);
    return rc;
}
