/*
 * ogb_rank.c: ranks a file of scores with tma's metrics (tma_gnn_metrics_*,
 * what the evaluator runs on every chunk of scores) and prints them as JSON,
 * for test_ogb_eval.sh to hold against OGB's Evaluator.
 *
 *   ogb_rank SCORES ROWS PER pessimistic|mean K1,K2,...
 *
 * SCORES: ROWS x PER little-endian float32, each row the positive's score
 * then its PER - 1 negatives'.
 */
#include "tma_gnn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: ogb_rank SCORES ROWS PER pessimistic|mean K1,K2,...\n");
        return 2;
    }
    int64_t rows = strtoll(argv[2], NULL, 10), per = strtoll(argv[3], NULL, 10);
    tma_gnn_config_t cfg;
    tma_gnn_config_default(&cfg);
    if (rows < 1 || per < 1 || tma_gnn_ties_parse(argv[4], &cfg.eval_ties) != TMA_OK) {
        fprintf(stderr, "ogb_rank: bad rows, per or tie rule\n");
        return 2;
    }
    cfg.eval_num_hits = 0;
    for (char *p = argv[5], *tok; (tok = strtok(p, ",")) != NULL && cfg.eval_num_hits < TMA_GNN_MAX_HITS; p = NULL)
        cfg.eval_hits[cfg.eval_num_hits++] = atoi(tok);
    tma_mmap_t map;
    if (tma_mmap_open(argv[1], &map) != TMA_OK)
        return 1;
    if (map.size != (size_t)(rows * per) * sizeof(float)) {
        fprintf(stderr, "ogb_rank: %s has %zu bytes, expected %lld x %lld floats\n", argv[1], map.size,
                (long long)rows, (long long)per);
        return 1;
    }
    tma_gnn_metrics_t m;
    tma_gnn_metrics_init(&m, &cfg);
    /* In chunks, as the evaluator adds them. */
    for (int64_t r0 = 0; r0 < rows; r0 += 37)
        tma_gnn_metrics_add(&m, (const float *)map.data + r0 * per, rows - r0 < 37 ? rows - r0 : 37, per);
    tma_gnn_metrics_finish(&m);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "mrr", m.mrr);
    cJSON_AddNumberToObject(o, "mrr_pessimistic", m.mrr_pessimistic);
    cJSON_AddNumberToObject(o, "mrr_mean", m.mrr_mean);
    cJSON_AddNumberToObject(o, "edges", (double)m.edges);
    tma_gnn_metrics_json(&m, "", o);
    char *txt = cJSON_PrintUnformatted(o);
    printf("%s\n", txt);
    cJSON_free(txt);
    cJSON_Delete(o);
    tma_mmap_close(&map);
    return 0;
}
