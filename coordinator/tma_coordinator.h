/*
 * tma_coordinator.h: the server of a distributed job (Algorithm 1 of the
 * paper): it publishes the job, deals shards to workers, broadcasts the
 * initial weights, raises `agg` every interval, averages the weights that
 * live owners send (LLCG: then corrects them on the full graph; GGS: it
 * averages gradients every step instead), broadcasts the result, hands it to
 * the evaluator thread, and after the training time stops the job, tests
 * the best round and writes the run folder.  It holds a leader lease: a
 * standby (or restarted) coordinator resumes from the state in etcd and the
 * last checkpoint.  docs/distributed.md describes the protocol and
 * docs/faults.md the failure handling.
 */
#ifndef TMA_COORDINATOR_H
#define TMA_COORDINATOR_H

#include <signal.h>

#include "tma_fault.h"
#include "tma_kv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tma_coordinator_opts {
    const tma_kv_config_t *kv; /* etcd endpoints, TLS, auth */
    const char *job;           /* the job name (overrides the config's) */
    /* The job config file.  NULL: take the config from etcd (a standby, or
     * a coordinator restarted to resume a job). */
    const char *config_path;
    const char *run_dir;  /* NULL: runs/<job> (a resumed job keeps its own) */
    int standby;          /* wait for the leader's lease to lapse, then take over */
    int fresh;            /* remove a finished job's keys of the same name first */
    /* Every process of the job was stopped (tma launch --resume): continue
     * it from its state in etcd, also when an interruption (or a failure)
     * ended it; the leases its coordinator and members left are revoked
     * (they are gone), and the shards are dealt again, as at the start, to
     * the workers that register.  A job that ran to the end, or has no
     * state, is refused (TMA_ERR_CONFIG); so is run_dir when it is not the
     * job's run folder. */
    int resume;
    /* What *stop_flag means: 0, stop the job (test the best round, write
     * result.json); 1, suspend it (a preempted batch job): write nothing
     * more and release the leadership at once, leaving the job in etcd with
     * the last completed round's checkpoint for a coordinator to resume. */
    int suspend;
    const char *eval_device; /* overrides the job's evaluator device */
    int eval_threads;     /* overrides eval.threads when > 0 */
    const tma_inject_t *inject;
    const char *dump_dir; /* testing: every received and averaged tensor as weight files */
    /* Called (when not NULL) once the config file is checked, before the
     * coordinator first talks to etcd, with etcd_check_arg: a status other
     * than TMA_OK ends the run with that status (tma coordinator waits for
     * etcd to answer here, so a bad config is still refused first). */
    tma_status_t (*etcd_check)(void *arg);
    void *etcd_check_arg;
} tma_coordinator_opts_t;

/*
 * Runs the coordinator until the job is done (TMA_OK, with result.json in
 * the run folder), *stop_flag becomes non-zero (TMA_ERR_CANCELLED: it sets
 * `stop`, finishes the evaluation, tests the best round and writes the
 * result before returning; with opts->suspend it returns at once, the job
 * left to be resumed), another coordinator fenced it
 * (TMA_ERR_FENCED), or an error that stops the job (logged).
 */
tma_status_t tma_coordinator_run(const tma_coordinator_opts_t *opts, volatile sig_atomic_t *stop_flag);

#ifdef __cplusplus
}
#endif
#endif /* TMA_COORDINATOR_H */
