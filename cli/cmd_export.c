/*
 * cmd_export.c: `tma export RUN_OR_WEIGHTS [--graph G.tmag] [-o DIR]`: a
 * model for other tools, every encoder and decoder.  DIR/model.npz holds
 * the weights under PyTorch state_dict names and shapes (Linear weights
 * [out, in]; RGCN layers as PyTorch Geometric's RGCNConv; GAT layers as
 * GATConv's lin.weight [heads*C, in], att_src and att_dst [heads, C]; the decoder as an
 * nn.Sequential of Linear and PReLU, or DistMult's diagonals),
 * DIR/embeddings.npy every node's embedding from full-neighbourhood
 * inference (num_nodes x hidden, float32), and DIR/model.json the model
 * config with what a reader needs beside it (node types, relation ids and
 * their inverses).  docs/model.md shows the few lines of PyTorch that load
 * them and score an edge; python/tma/_torch.py rebuilds the whole model.
 */
#include "cli_int.h"
#include "tma_gnn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How a tensor of the layout is stored in model.npz. */
typedef enum {
    EXPORT_AS_IS,  /* as tma holds it, [rows, cols] (a vector [n]) */
    EXPORT_MATRIX, /* as tma holds it, [rows, cols] even with one row */
    EXPORT_LINEAR, /* a Linear weight: tma's [in x out] as PyTorch's [out, in] */
    EXPORT_BASES,  /* RGCN bases: tma's [in x bases*out] as [bases, in, out] */
} export_shape_t;

/* A tma parameter name as its model.npz name, and how it is stored.  GCN,
 * SAGE and MLP layers and the per-type input projection are nn.Linear
 * modules; an RGCN layer has the names and shapes of PyTorch Geometric's
 * RGCNConv (weight [bases, in, out], comp [relations, bases], root [in,
 * out]); the MLP decoder is an nn.Sequential of Linear and PReLU; DistMult's
 * diagonals are an nn.Embedding weight [relations, hidden]. */
static export_shape_t torch_name(const tma_gnn_config_t *cfg, const char *tma, char *out, size_t cap)
{
    int i;
    char what[16];
    if (sscanf(tma, "enc.%d.%15s", &i, what) == 2) {
        static const struct {
            const char *tma, *torch;
            int rgcn; /* 1: only in RGCN layers, 0: only in the others, -1: both */
            export_shape_t shape;
        } map[] = {
            {"weight", "lin.weight", 0, EXPORT_LINEAR},
            {"weight_self", "lin_self.weight", 0, EXPORT_LINEAR},
            {"weight_neigh", "lin_neigh.weight", 0, EXPORT_LINEAR},
            {"bases", "weight", 1, EXPORT_BASES},
            {"coef", "comp", 1, EXPORT_MATRIX},
            {"weight_self", "root", 1, EXPORT_MATRIX},
            {"att_src", "att_src", -1, EXPORT_MATRIX}, /* GAT: [heads, C] (GATConv's, less its leading 1) */
            {"att_dst", "att_dst", -1, EXPORT_MATRIX},
            {"bias", "bias", -1, EXPORT_AS_IS},
            {"ln_weight", "norm.weight", -1, EXPORT_AS_IS},
            {"ln_bias", "norm.bias", -1, EXPORT_AS_IS},
            {"prelu", "act.weight", -1, EXPORT_AS_IS},
        };
        /* The kind by its descriptor's name: only model_kinds.c names the enum values. */
        const int rgcn = strcmp(tma_gnn_encoder_name(cfg->encoder), "rgcn") == 0;
        for (size_t k = 0; k < TMA_ARRAY_LEN(map); k++)
            if (strcmp(what, map[k].tma) == 0 && (map[k].rgcn < 0 || map[k].rgcn == rgcn)) {
                snprintf(out, cap, "encoder.%d.%s", i, map[k].torch);
                return map[k].shape;
            }
    } else if (sscanf(tma, "in.%d.%15s", &i, what) == 2) {
        snprintf(out, cap, "input.%d.%s", i, what);
        return strcmp(what, "weight") == 0 ? EXPORT_LINEAR : EXPORT_AS_IS;
    } else if (strcmp(tma, "dec.relation") == 0) {
        snprintf(out, cap, "decoder.relation.weight");
        return EXPORT_AS_IS;
    } else if (sscanf(tma, "dec.%d.%15s", &i, what) == 2) {
        /* nn.Sequential(Linear, PReLU, Linear, ..., Linear): Linear k is
         * module 2k, its PReLU 2k + 1. */
        int prelu = strcmp(what, "prelu") == 0;
        snprintf(out, cap, "decoder.%d.%s", 2 * i + prelu, prelu ? "weight" : what);
        return strcmp(what, "weight") == 0 ? EXPORT_LINEAR : EXPORT_AS_IS;
    }
    snprintf(out, cap, "%s", tma);
    return EXPORT_AS_IS;
}

/* model.npz: every tensor of the layout (the alignment gaps between them
 * left out), reshaped as torch_name says.  *floats_p: the floats written. */
static tma_status_t write_model(const char *path, const cli_model_t *m, const tma_gnn_layout_t *lay, int64_t *floats_p)
{
    tma_npy_array_t a[TMA_GNN_MAX_PARAMS];
    char names[TMA_GNN_MAX_PARAMS][48];
    float *buf = malloc((size_t)lay->total * sizeof *buf);
    if (!buf)
        return TMA_ERR_NOMEM;
    int64_t floats = 0;
    for (int i = 0; i < lay->count; i++) {
        const tma_gnn_param_info_t *p = &lay->params[i];
        const float *src = m->params + p->offset;
        float *dst = buf + p->offset;
        const int64_t R = p->rows, C = p->cols, B = m->cfg.bases;
        a[i] = (tma_npy_array_t){names[i], TMA_NPY_F32, 1, {R * C}, dst};
        const export_shape_t torch_shape = torch_name(&m->cfg, p->name, names[i], sizeof names[i]);
        switch (torch_shape) {
        case EXPORT_LINEAR:
            a[i].ndim = 2;
            a[i].shape[0] = C;
            a[i].shape[1] = R;
            for (int64_t r = 0; r < R; r++)
                for (int64_t c = 0; c < C; c++)
                    dst[c * R + r] = src[r * C + c];
            break;
        case EXPORT_BASES: /* column b*out + j of row r is [b, r, j] */
            a[i].ndim = 3;
            a[i].shape[0] = B;
            a[i].shape[1] = R;
            a[i].shape[2] = C / B;
            for (int64_t r = 0; r < R; r++)
                for (int64_t c = 0; c < C; c++)
                    dst[(c / (C / B)) * R * (C / B) + r * (C / B) + c % (C / B)] = src[r * C + c];
            break;
        case EXPORT_AS_IS:
        case EXPORT_MATRIX:
            if (R > 1 || torch_shape == EXPORT_MATRIX) {
                a[i].ndim = 2;
                a[i].shape[0] = R;
                a[i].shape[1] = C;
            }
            memcpy(dst, src, (size_t)(R * C) * sizeof *dst);
            break;
        }
        floats += R * C;
    }
    tma_status_t st = tma_npz_write(path, a, lay->count);
    free(buf);
    if (st == TMA_OK)
        *floats_p = floats;
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

/* model.json: the model section, and under "export" what a reader needs
 * beyond it: the floats written against the weight file's block (which
 * holds them at 16-float boundaries: the gaps are its zero padding), the
 * graph's node types with their real feature widths, and the relation ids
 * with each one's inverse (docs/model.md, "tma export"). */
static cJSON *model_json(const cli_model_t *m, const tma_gnn_layout_t *lay, int64_t floats)
{
    const tma_graph_t *g = m->g;
    cJSON *model = tma_gnn_config_model_json(&m->cfg), *ex = cJSON_CreateObject();
    if (!model || !ex || !cJSON_AddItemToObject(model, "export", ex)) {
        cJSON_Delete(ex);
        cJSON_Delete(model);
        return NULL;
    }
    char name[256], base[200];
    cJSON_AddNumberToObject(ex, "format", 1);
    cJSON_AddNumberToObject(ex, "tensors", lay->count);
    cJSON_AddNumberToObject(ex, "floats", (double)floats);
    cJSON_AddNumberToObject(ex, "block_floats", (double)lay->total);
    cJSON_AddNumberToObject(ex, "feature_dim", (double)m->cfg.feature_dim);
    if (tma_graph_is_typed(g)) {
        cJSON *types = cJSON_AddArrayToObject(ex, "node_types"), *dims = cJSON_AddArrayToObject(ex, "type_feat_dims");
        for (int32_t t = 0; t < g->num_node_types && types && dims; t++) {
            cJSON_AddItemToArray(types, cJSON_CreateString(tma_graph_node_type_name(g, t, name, sizeof name)));
            cJSON_AddItemToArray(dims, cJSON_CreateNumber(g->type_feat_dim[t]));
        }
    }
    const int32_t ids = tma_graph_num_rel_ids(g);
    cJSON_AddNumberToObject(ex, "relation_ids", ids);
    cJSON *rels = cJSON_AddArrayToObject(ex, "relation_names"), *inv = cJSON_AddArrayToObject(ex, "inverse");
    for (int32_t r = 0; r < ids && rels && inv; r++) {
        /* Id r < R is relation r in its stored direction, r + R its inverse. */
        if (!tma_graph_is_typed(g))
            snprintf(name, sizeof name, "edge");
        else if (r < g->num_relations)
            tma_graph_relation_name(g, r, name, sizeof name);
        else
            snprintf(name, sizeof name, "%s^-1", tma_graph_relation_name(g, r - g->num_relations, base, sizeof base));
        cJSON_AddItemToArray(rels, cJSON_CreateString(name));
        cJSON_AddItemToArray(inv, cJSON_CreateNumber(tma_graph_is_typed(g) ? tma_graph_rel_inverse(g, r) : r));
    }
    return model;
}

/* The files of DIR, and the embeddings. */
static tma_status_t export_files(const char *dir, const cli_model_t *m, int64_t *nodes_p, int64_t *dim_p,
                                 int64_t *floats_p)
{
    tma_status_t st = tma_mkdir_p(dir);
    char *mpath = tma_path_join(dir, "model.npz"), *epath = tma_path_join(dir, "embeddings.npy");
    char *cpath = tma_path_join(dir, "model.json");
    const int64_t N = m->g->num_nodes, H = m->cfg.hidden;
    float *emb = malloc((size_t)TMA_MAX(N * H, 1) * sizeof *emb);
    tma_gnn_layout_t lay;
    if (st == TMA_OK && (!mpath || !epath || !cpath || !emb))
        st = TMA_ERR_NOMEM;
    if (st == TMA_OK)
        st = tma_gnn_layout_build(&m->cfg, &lay);
    if (st == TMA_OK)
        st = write_model(mpath, m, &lay, floats_p);
    if (st == TMA_OK)
        st = tma_gnn_evaluator_embeddings(m->ev, m->params, emb);
    if (st == TMA_OK) {
        const tma_npy_array_t a = {"embeddings", TMA_NPY_F32, 2, {N, H}, emb};
        st = tma_npy_write(epath, &a);
    }
    if (st == TMA_OK) {
        cJSON *model = model_json(m, &lay, *floats_p);
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
        "float32) and DIR/model.json (the model config, with the graph's node types and relation ids). "
        "RUN_OR_WEIGHTS is a run folder (its best.tmaw, on the "
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
        rc = cli_model_open("export", graph, weights, threads, device, 0, NULL, 0, &m);
    int64_t nodes = 0, dim = 0, floats = 0;
    tma_status_t st = TMA_OK;
    if (rc == CLI_EXIT_OK && (st = export_files(out, &m, &nodes, &dim, &floats)) != TMA_OK) {
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
            cJSON_AddNumberToObject(o, "floats", (double)floats);
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
