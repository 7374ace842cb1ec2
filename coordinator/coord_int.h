/*
 * coord_int.h: the coordinator's private pieces: the evaluator thread, the
 * round records and the run folder's files.
 */
#ifndef TMA_COORD_INT_H
#define TMA_COORD_INT_H

#include "tma_coordinator.h"
#include "tma_gnn.h"

/* ------------------------------------------------------------------ evaluator thread (evaluator.c) */

/*
 * The evaluator runs beside aggregation: the round loop hands it each new
 * global model with the round's record; it evaluates the newest one it has
 * (a round handed over while it was busy, and overtaken by a newer one, is
 * recorded as skipped), appends each round's line to metrics.jsonl in round
 * order, keeps the best model's weights and the `best` key, and updates the
 * round's record in etcd with its validation MRR.
 */
typedef struct coord_eval coord_eval_t;

typedef struct coord_eval_cfg {
    const tma_gnn_config_t *cfg; /* resolved; copied */
    const tma_graph_t *graph;    /* the full graph; must outlive the evaluator */
    const char *run_dir;
    tma_kv_t *kv;                /* may be NULL: no etcd updates */
    const char *job;
    uint64_t epoch;              /* guards the etcd writes */
    int64_t best_round;          /* resumed best (-1: none) */
    double best_val, best_time;
} coord_eval_cfg_t;

tma_status_t coord_eval_create(const coord_eval_cfg_t *c, coord_eval_t **e_p);
/* Hands over round `round`'s global weights (copied) and its record (taken
 * over: the evaluator fills "val_mrr" and "eval" and writes it). */
void coord_eval_submit(coord_eval_t *e, int64_t round, double time, const float *params, cJSON *record);
/* Waits until everything submitted is evaluated and written. */
void coord_eval_drain(coord_eval_t *e);
/* The best round so far (-1: none), its validation MRR and training time. */
void coord_eval_best(coord_eval_t *e, int64_t *round_p, double *val_p, double *time_p);
/* Last validation MRR (NaN before the first), for progress lines. */
double coord_eval_last(coord_eval_t *e);
/* Rounds evaluated and skipped so far. */
void coord_eval_counts(coord_eval_t *e, int64_t *evaluated_p, int64_t *skipped_p);
/* The first error the thread hit (a failed write), TMA_OK otherwise. */
tma_status_t coord_eval_error(coord_eval_t *e);
/* Stops the thread (after what it is doing) and frees it; accepts NULL. */
void coord_eval_destroy(coord_eval_t *e);

#endif
