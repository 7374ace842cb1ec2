/*
 * bench_tfevents.c: the size of a TensorBoard event file per 1,000 rounds.
 * bench_tfevents DIR WORKERS ROUNDS writes ROUNDS metrics lines shaped as a
 * distributed job's (WORKERS workers, every round evaluated with
 * val_hits@10/50/100) through tma_job_run_tb_line, then prints the file's size.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "tma_job.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: bench_tfevents DIR WORKERS ROUNDS\n");
        return 2;
    }
    int workers = atoi(argv[2]);
    long rounds = atol(argv[3]);
    tma_tfevents_t *w;
    if (workers < 1 || rounds < 1 || tma_tfevents_open(argv[1], &w) != TMA_OK)
        return 1;
    for (long t = 0; t < rounds; t++) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddNumberToObject(r, "round", (double)t);
        cJSON_AddNumberToObject(r, "wall", 1.8e9 + (double)t);
        cJSON *ws = cJSON_AddArrayToObject(r, "workers");
        cJSON *al = cJSON_AddArrayToObject(r, "alive");
        for (int i = 0; i < workers; i++) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "id", i + 1);
            cJSON_AddNumberToObject(x, "steps_per_s", 40.0 + i);
            cJSON_AddNumberToObject(x, "loss", 0.5);
            cJSON_AddItemToArray(ws, x);
            cJSON_AddItemToArray(al, cJSON_CreateNumber(i + 1));
        }
        cJSON_AddNumberToObject(r, "agg_seconds", 0.01);
        cJSON_AddNumberToObject(r, "val_mrr", 0.3);
        cJSON_AddNumberToObject(r, "val_hits@10", 0.5);
        cJSON_AddNumberToObject(r, "val_hits@50", 0.7);
        cJSON_AddNumberToObject(r, "val_hits@100", 0.8);
        tma_status_t st = tma_job_run_tb_line(w, r);
        cJSON_Delete(r);
        if (st != TMA_OK)
            return 1;
    }
    struct stat sb;
    int ok = stat(tma_tfevents_path(w), &sb) == 0;
    printf("%s: %d workers, %ld rounds: %lld bytes (%.1f KB per 1,000 rounds)\n", tma_tfevents_path(w), workers,
           rounds, ok ? (long long)sb.st_size : -1LL, ok ? sb.st_size / 1024.0 * 1000.0 / (double)rounds : -1.0);
    tma_tfevents_close(w);
    return ok ? 0 : 1;
}
