/*
 * worker_int.h: the worker's private pieces beside worker.c (the trainer
 * loop): the optimizer state files of state.c (tma worker --state-dir) and
 * evalrank.c, its evaluator rank (eval.where "workers").
 */
#ifndef TMA_WORKER_INT_H
#define TMA_WORKER_INT_H

#include "tma_worker.h"

#include "tma_fault.h"
#include "tma_gnn.h"
#include "tma_graph.h"
#include "tma_job.h"
#include "tma_transport.h"

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

/* The device a worker trains on (device.c): --device (opt_device, may be
 * NULL), else the job's one devices.workers entry, else the entry the
 * launcher's local rank picks (SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK),
 * else the first; *fixed_p is 0 in that last case (the first member id
 * picks then).  TMA_ERR_INVALID (logged) for a name that is no device. */
tma_status_t worker_device_choose(const char *opt_device, const tma_job_t *job, char *device, size_t cap,
                                  int *fixed_p);

/* ------------------------------------------------------------------ shared shard files (shards.c) */

/*
 * The shard files of this worker's partition folder, each mapped once in the
 * process and shared by the trainer and the evaluator rank: a reference
 * counts each user, and the file is unmapped when the last one is given
 * back, whichever part gives it back last (a shard reassigned while the
 * rank still evaluates on it stays mapped for the rank).  Thread-safe: the
 * trainer's thread and the rank's thread call it.  The table does not own
 * pinfo, which must outlive it.
 */
typedef struct worker_shards worker_shards_t;

tma_status_t worker_shards_create(const tma_partition_info_t *pinfo, worker_shards_t **s_p);
/* Frees the table, unmapping what is still mapped (a reference not given
 * back is logged); accepts NULL. */
void worker_shards_destroy(worker_shards_t *s);
/* A reference to shard k: mapped and verified (tma_graph_open) on the first
 * reference, the same graph after that.  Errors: tma_graph_open's, logged
 * naming the file; TMA_ERR_MISMATCH (logged) for a file that is not shard k
 * of the partition; TMA_ERR_RANGE for k outside it. */
tma_status_t worker_shards_get(worker_shards_t *s, int32_t k, tma_graph_t **g_p);
/* Gives back a reference from worker_shards_get; the last one unmaps the
 * file.  Accepts NULL for either. */
void worker_shards_put(worker_shards_t *s, const tma_graph_t *g);
/* The references to shard k now given out (0 when it is not mapped). */
int worker_shards_refs(worker_shards_t *s, int32_t k);

/* ------------------------------------------------------------------ the evaluator rank (evalrank.c) */

typedef struct worker_eval worker_eval_t;

typedef struct worker_eval_cfg {
    const char *job, *token;          /* the transport's job and token */
    const char *listen;               /* "host:port" to listen on (port 0: any) */
    uint32_t self_id;                 /* this incarnation's member id */
    int64_t lease;                    /* its lease, bound into hellos */
    const tma_gnn_config_t *cfg;      /* the model, eval.rank_timeout, eval threads */
    const tma_partition_info_t *pinfo; /* this node's partition folder (shard and inference files) */
    worker_shards_t *shards;          /* the shard files, shared with the trainer (outlives the rank) */
    tma_job_view_t *view;             /* other ranks' addresses (member records) */
    const tma_inject_t *inj;          /* TMA_FAULT's point "rank" (evaluation number); may be NULL */
} worker_eval_cfg_t;

/* Starts the rank: its transport, listening, and its thread. */
tma_status_t worker_eval_start(const worker_eval_cfg_t *c, worker_eval_t **e_p);
/* worker_eval_start, and the rank's address into the member record `rec`
 * (written to etcd through `member`); on failure nothing is left running. */
tma_status_t worker_eval_join(const worker_eval_cfg_t *c, tma_member_t *member, tma_job_member_rec_t *rec,
                              worker_eval_t **e_p);
/* Shard k's inference file is on this node (else logged, naming it). */
int worker_eval_files_here(const tma_partition_info_t *pinfo, int32_t k);
/* "host:port" for the member record. */
const char *worker_eval_address(const worker_eval_t *e);
/* Ends the rank.  When a coordinator's evaluator is connected and has not
 * released the ranks (the job's last evaluations need them), waits up to
 * linger_s seconds for it to release them or go away first.  Accepts NULL. */
void worker_eval_stop(worker_eval_t *e, double linger_s);

#endif
