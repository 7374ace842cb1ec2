/*
 * worker_int.h: the worker's private pieces: worker.c (the trainer loop)
 * and evalrank.c (its evaluator rank, eval.where "workers").
 */
#ifndef TMA_WORKER_INT_H
#define TMA_WORKER_INT_H

#include "tma_worker.h"

#include "tma_gnn.h"
#include "tma_graph.h"
#include "tma_fault.h"
#include "tma_job.h"
#include "tma_transport.h"

typedef struct worker_eval worker_eval_t;

typedef struct worker_eval_cfg {
    const char *job, *token;          /* the transport's job and token */
    const char *listen;               /* "host:port" to listen on (port 0: any) */
    uint32_t self_id;                 /* this incarnation's member id */
    int64_t lease;                    /* its lease, bound into hellos */
    const tma_gnn_config_t *cfg;      /* the model, eval.rank_timeout, eval threads */
    const tma_partition_info_t *pinfo; /* this node's partition folder (shard and inference files) */
    tma_job_view_t *view;             /* other ranks' addresses (member records) */
    const tma_inject_t *inj;          /* TMA_FAULT's point "rank" (evaluation number); may be NULL */
} worker_eval_cfg_t;

/* Starts the rank: its transport, listening, and its thread. */
tma_status_t worker_eval_start(const worker_eval_cfg_t *c, worker_eval_t **e_p);
/* "host:port" for the member record. */
const char *worker_eval_address(const worker_eval_t *e);
/* Ends the rank.  When a coordinator's evaluator is connected and has not
 * released the ranks (the job's last evaluations need them), waits up to
 * linger_s seconds for it to release them or go away first.  Accepts NULL. */
void worker_eval_stop(worker_eval_t *e, double linger_s);

#endif
