/*
 * tma_worker.h: the trainer process of a distributed job (Algorithm 2 of
 * the paper).  A worker needs only the etcd endpoints and the job name: it
 * reads the job config from etcd, registers (a leased member key), waits
 * for shards to be assigned to it, loads them, says it is ready, receives
 * the global weights and trains; when the coordinator raises `agg` it sends
 * its weights at the end of the current step and takes the global ones back.
 * It survives a coordinator failover (it keeps training and reconnects) and,
 * when its lease is lost, drops its state and registers again as a new
 * member.  docs/distributed.md describes the protocol.
 */
#ifndef TMA_WORKER_H
#define TMA_WORKER_H

#include <signal.h>

#include "tma_fault.h"
#include "tma_kv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tma_worker_opts {
    const tma_kv_config_t *kv; /* etcd endpoints, TLS, auth */
    const char *job;
    int backup;           /* --backup: take shards only to replace a lost owner */
    const char *name;     /* a label for logs and `tma status` (NULL: host:pid) */
    const char *device;   /* overrides the job's device for this worker (NULL: the job's) */
    int threads;          /* overrides train.threads when > 0 */
    double wait_config;   /* seconds to wait for the job's config to appear in etcd */
    const tma_inject_t *inject; /* failure injection (NULL: none) */
    /* The partition folder on this node (partition.json and the shards it
     * trains), for a cluster without a shared file system; NULL: the job's
     * partition.node_dir, else its partition.dir. */
    const char *data_dir;
    /* A folder for the optimizer state of each round this worker sends
     * (its shard set's Adam moments, step count and batch RNG; made if
     * missing), from which a trainer that starts on the same shard set from
     * the global weights of that round continues: a resumed job takes the
     * steps of one that never stopped.  NULL: none kept. */
    const char *state_dir;
} tma_worker_opts_t;

/*
 * Runs a worker until the job stops (TMA_OK), *stop_flag becomes non-zero
 * (TMA_ERR_CANCELLED, after leaving the job cleanly), or an error that it
 * cannot recover from (a bad config, a partition folder that does not match
 * the job, a shard file that passed its check but does not load, a device
 * that does not work), which is logged and returned.  A shard dealt to it
 * whose file is missing or wrong on this node is not an error: the worker
 * refuses it (logged, naming the file and the node; listed in its ready
 * record) and the coordinator deals it to another member.
 */
tma_status_t tma_worker_run(const tma_worker_opts_t *opts, volatile sig_atomic_t *stop_flag);

#ifdef __cplusplus
}
#endif
#endif /* TMA_WORKER_H */
