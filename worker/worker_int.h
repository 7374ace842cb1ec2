/*
 * worker_int.h: the worker's private pieces beside worker.c: the optimizer
 * state files of state.c (tma worker --state-dir).
 */
#ifndef TMA_WORKER_INT_H
#define TMA_WORKER_INT_H

#include "tma_job.h"

/*
 * What a trainer holds beyond the global weights (Adam's moments and step
 * count, the batch RNG: tma_gnn_opt_state_t) when it sends round t, in
 * DIR/<job>-<shards>-r<t>.opt (gnn's optimizer state format; <shards> is
 * 16 hex digits naming the sorted shard set, which the file's JSON lists
 * with the job and the round).  A trainer that starts on a shard set from
 * W[t] continues the state of that set's trainer at round t: a job resumed
 * after every process was stopped takes the steps of one that never
 * stopped.  One state a (shard set, round); written atomically, so a
 * process killed at any moment leaves the previous file or the new one.
 * The set names the trainer because member ids change when workers join
 * again, and the seed of a trainer's batches comes from its shards.
 */
typedef struct worker_state_key {
    const char *dir, *job;
    const int32_t *shards; /* sorted */
    int n_shards;
} worker_state_key_t;

/* Writes the trainer's state as round `round`'s, through the caller's
 * buffers: params and s->adam_m, s->adam_v of tma_gnn_trainer_param_count
 * floats each.  Errors are logged, naming the file. */
tma_status_t worker_state_save(const worker_state_key_t *k, int64_t round, tma_gnn_trainer_t *tr, float *params,
                               tma_gnn_opt_state_t *s);
/* Gives the trainer the state its shard set had at round `round`: 1 when
 * one was found and set, 0 when there is none, -1 when there is one that
 * cannot be used (logged: another model, damaged, another job or set; the
 * trainer keeps its own). */
int worker_state_load(const worker_state_key_t *k, int64_t round, tma_gnn_trainer_t *tr);
/* Removes the job's state files (every shard set's) of rounds before
 * `keep_from`: no resume goes back further than the round before the last
 * committed one. */
void worker_state_prune(const char *dir, const char *job, int64_t keep_from);

#endif /* TMA_WORKER_INT_H */
