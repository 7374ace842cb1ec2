/* cmd_info.c: `tma info G.tmag [--json]`: a graph or shard file's summary. */
#include "cli_int.h"
#include "tma_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A typed graph's node_types or relations array, one line an entry:
 * "node_type  user  943 nodes, 24 features" or
 * "relation   rating1  (ids 0 / 5)  5000 train edges". */
static void print_types(const cJSON *arr)
{
    int types = strcmp(arr->string, "node_types") == 0;
    int i = 0;
    for (const cJSON *x = arr->child; x; x = x->next, i++) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(x, "name");
        const char *nm = cJSON_IsString(name) ? name->valuestring : "?";
        if (types)
            printf("%-22s %d %s: %.0f nodes, %.0f features\n", "node_type", i, nm,
                   cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(x, "nodes")),
                   cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(x, "feature_dim")));
        else
            printf("%-22s %d %s: %.0f train edges (inverse id %.0f)\n", "relation", i, nm,
                   cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(x, "train_edges")),
                   cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(x, "inverse_id")));
    }
}

int cli_cmd_info(int argc, char **argv)
{
    int as_json = 0, no_verify = 0;
    const cli_opt_t opts[] = {
        {"json", 0, CLI_FLAG, &as_json, NULL, "print one JSON object", NULL},
        {"no-verify", 0, CLI_FLAG, &no_verify, NULL, "skip the section checksums (faster on huge files)", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {"info", "G.tmag [--json]",
                             "Prints the counts of a .tmag graph or shard file after checking it.", opts, 1, 1};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;

    tma_graph_t *g;
    tma_status_t st = tma_graph_open(args.pos[0], no_verify ? TMA_GRAPH_OPEN_NO_VERIFY : 0, &g);
    if (st != TMA_OK)
        return CLI_EXIT_RUNTIME;
    cJSON *info = tma_graph_info_json(g);
    tma_graph_destroy(g);
    if (!info)
        return CLI_EXIT_RUNTIME;
    if (as_json) {
        cli_print_json(info);
    } else {
        for (cJSON *it = info->child; it; it = it->next) {
            if (cJSON_IsArray(it))
                print_types(it);
            else if (cJSON_IsString(it))
                printf("%-22s %s\n", it->string, it->valuestring);
            else if (cJSON_IsBool(it))
                printf("%-22s %s\n", it->string, cJSON_IsTrue(it) ? "yes" : "no");
            else if (it->valuedouble == (double)(int64_t)it->valuedouble)
                printf("%-22s %lld\n", it->string, (long long)it->valuedouble);
            else
                printf("%-22s %.3f\n", it->string, it->valuedouble);
        }
    }
    cJSON_Delete(info);
    return CLI_EXIT_OK;
}
