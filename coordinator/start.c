/*
 * start.c: a fresh job's start: wait for the initial workers to register,
 * deal the shards (the policy handles shards whose owner never came), wait
 * for the owners to load them (each gets W[0] as it becomes ready), then
 * record round 0 (the initial model) and the "training" state.  A start
 * that fails or is interrupted sets `stop`, so the workers that joined leave
 * instead of waiting for ever.
 */
#include "coord_int.h"

#include <stdlib.h>
#include <string.h>

#define COMP COORD_COMP

/* The initial deal once enough workers registered (or at the timeout). */
static tma_status_t deal(coord_t *c, const tma_live_member_t *live, int n_live, int n_main, tma_shard_move_t *mv,
                         const char *reason)
{
    const tma_job_t *job = c->job;
    int need = job->workers - job->n_absent;
    int n = tma_policy_initial_absent(&c->map, live, n_live, job->workers, job->absent_shards, job->n_absent, mv);
    if (n_main < need)
        tma_log_warn(COMP, "only %d of %d workers registered within %.0f s", n_main, need, job->start_timeout);
    if (job->n_absent)
        tma_log_warn(COMP, "%d shard(s) absent by the job's fault.absent_shards (the F >= 1 drill)",
                     job->n_absent);
    tma_status_t st = coord_write_moves(c, mv, n, reason);
    /* Orphans: the policy for a worker that never started. */
    for (int k = 0; k < c->map.n && st == TMA_OK; k++) {
        if (c->map.owner[k] >= 0)
            continue;
        c->map.owner[k] = INT64_MAX; /* a placeholder owner for the policy */
        int m = tma_policy_lost(&c->map, INT64_MAX, job->on_failure, live, n_live, mv);
        for (int j = 0; j < m; j++)
            mv[j].from = -1;
        st = coord_write_moves(c, mv, m, "worker never started");
    }
    c->map_ready = 1;
    return st;
}

/* Registration: waits for the job's workers (without shards: members; with
 * shards: non-backup members, less the absent ones), then deals. */
static tma_status_t registration(coord_t *c, const char *reason)
{
    const tma_job_t *job = c->job;
    double t_reg = tma_clock_now() + job->start_timeout;
    tma_log_info(COMP, "waiting for %d worker(s) to register (up to %.0f s)", job->workers, job->start_timeout);
    tma_shard_move_t *mv = malloc((size_t)(c->map.n + 1) * sizeof *mv);
    if (!mv)
        return TMA_ERR_NOMEM;
    tma_status_t st;
    for (;;) {
        tma_job_view_snap_t s;
        if ((st = tma_job_view_snapshot(c->view, &s)) != TMA_OK)
            break;
        c->seen_version = s.version;
        int n_live = 0, n_main = 0;
        tma_live_member_t *live = malloc((size_t)(s.n_members + 1) * sizeof *live);
        for (int i = 0; live && i < s.n_members; i++) {
            live[n_live].id = s.members[i].rec.id;
            live[n_live].backup = s.members[i].rec.backup;
            n_main += !live[n_live].backup;
            n_live++;
        }
        int n_members = s.n_members;
        tma_job_view_snap_free(&s);
        int timed_out = tma_clock_now() >= t_reg;
        if (!c->vd->uses_shards && (n_members >= job->workers || timed_out)) {
            free(live);
            c->map_ready = 1;
            break;
        }
        if (c->vd->uses_shards && live && (n_main >= job->workers - job->n_absent || timed_out)) {
            st = deal(c, live, n_live, n_main, mv, reason);
            free(live);
            break;
        }
        free(live);
        if (coord_stopping(c)) {
            st = TMA_ERR_CANCELLED;
            break;
        }
        tma_job_view_wait(c->view, c->seen_version, 0.5);
    }
    free(mv);
    return st;
}

/* The one error of a start where no worker became ready; when workers
 * registered but none could connect, it says what rules the coordinator's
 * address out (the interface it resolves to, the UCX setting). */
static void no_worker_ready(coord_t *c)
{
    const tma_job_t *job = c->job;
    tma_job_view_snap_t s;
    int registered = 0, connected = 0;
    if (tma_job_view_snapshot(c->view, &s) == TMA_OK) {
        registered = s.n_members;
        for (int i = 0; i < s.n_members; i++)
            connected += coord_is_connected(c, s.members[i].rec.id);
        tma_job_view_snap_free(&s);
    }
    if (registered == 0 || connected > 0) {
        tma_log_error(COMP, "no worker became ready within %.0f s of the start: check the workers' logs",
                      2 * job->start_timeout);
        return;
    }
    char why[512];
    tma_transport_explain_route(tma_transport_address(c->tr), why, sizeof why);
    tma_log_error(COMP, "job %s: %d worker(s) registered but none could connect to the coordinator at %s within "
                        "%.0f s (transport.host \"%s\"): %s",
                  job->name, registered, tma_transport_address(c->tr), job->start_timeout, job->host, why);
}

/* Readiness: owners load their shards; the weights go to each one as it
 * becomes ready (coord_service_view), the clock starts when all are, or at
 * the timeout (owners not ready by then are handled as failed). */
static tma_status_t readiness(coord_t *c)
{
    const tma_job_t *job = c->job;
    double t_ready = tma_clock_now() + job->start_timeout;
    for (;;) {
        tma_status_t st = coord_service_view(c, 1);
        if (st != TMA_OK)
            return st;
        int owners = 0;
        int n = coord_count_participants(c, &owners);
        if (n < 0)
            return TMA_ERR_NOMEM;
        if (n > 0 && n >= owners)
            return TMA_OK;
        if (tma_clock_now() >= t_ready) {
            if (n == 0) {
                no_worker_ready(c);
                return TMA_ERR_TIMEOUT;
            }
            tma_log_warn(COMP, "%d of %d owner(s) ready after %.0f s; starting without the others", n, owners,
                         job->start_timeout);
            return TMA_OK;
        }
        if (coord_stopping(c))
            return TMA_ERR_CANCELLED;
        tma_job_view_wait(c->view, c->seen_version, 0.2);
    }
}

tma_status_t coord_start(coord_t *c)
{
    tma_status_t st = registration(c, "initial deal");
    if (st != TMA_OK)
        return st;
    /* Round 0: fresh weights, or those of "init" (read with the model). */
    if (!c->job->init && (st = tma_gnn_params_init(&c->cfg, c->cfg.seed, c->global)) != TMA_OK)
        return st;
    if ((st = readiness(c)) != TMA_OK)
        return st;
    /* Round 0: the initial model. */
    if ((st = coord_write_checkpoint(c, c->checkpoint_path, 0)) != TMA_OK)
        return st;
    /* Its record goes to etcd with the state, as every round's does: a
     * coordinator killed before its evaluator wrote round 0 left no record
     * of it, and the next one's metrics.jsonl then began at round 1. */
    cJSON *rec = coord_round_record(c, 0, 0.0, NULL, 0, 0.0);
    if (!rec)
        return TMA_ERR_NOMEM;
    if ((st = coord_commit_round(c, 0, 0.0, -1, 0, rec)) != TMA_OK)
        return st;
    tma_log_info(COMP, "training started: variant %s, %d worker(s), %s", c->vd->name, c->job->workers,
                 c->job->interval_steps > 0 ? "aggregation every N steps" : "time-based aggregation");
    return TMA_OK;
}

tma_status_t coord_redeal(coord_t *c)
{
    tma_status_t st = registration(c, "resumed");
    if (st == TMA_OK)
        st = readiness(c);
    if (st == TMA_OK)
        tma_log_info(COMP, "training resumes at round %lld with %d worker(s)", (long long)c->round,
                     coord_count_participants(c, NULL));
    return st;
}

void coord_start_abandon(coord_t *c, tma_status_t why)
{
    if (__atomic_load_n(&c->fenced, __ATOMIC_SEQ_CST))
        return; /* the job is another coordinator's now */
    const char *reason = why == TMA_ERR_CANCELLED ? "interrupted" : "start failed";
    tma_log_warn(COMP, "job %s: the start %s (%s): setting stop so the workers leave", c->job->name,
                 why == TMA_ERR_CANCELLED ? "was interrupted" : "failed", tma_status_str(why));
    char *val = tma_job_stop_rec_encode(c->epoch, reason);
    tma_status_t st = coord_put_key(c, TMA_KEY_STOP, val, 1);
    free(val);
    if (st != TMA_OK)
        tma_log_error(COMP, "job %s: could not set stop in etcd (%s): stop the workers by hand", c->job->name,
                      tma_status_str(st));
}
