/*
 * coordinator.c: Algorithm 1 (time-based model aggregation) with the
 * baselines in the same engine, as a sequence of phases: open the job,
 * open the model, lead, open the run folder, start (or take over), train,
 * finish; then the phases are closed in reverse order.  docs/architecture.md
 * describes the round and the failover invariants.
 *
 * One thread runs the job: it alternates between servicing changes (the
 * job view: members that came or went, readiness; the transport: peers that
 * failed) and rounds (round.c; GGS: synchronous steps, ggs.c).
 */
#include "coord_int.h"

#include <stdlib.h>
#include <string.h>

#define COMP COORD_COMP

/* The rounds of a variant that averages weights, until the training time
 * or the round count is reached.  *reason_p says which.  The budget is
 * training time elapsed: rounds fall every interval, but when they run late
 * (a deadline hit, a slow worker, a takeover) none is raised once the
 * training time is up but the last, and a round that ends past it is the
 * last, so the job ends at or right after its budget. */
static tma_status_t train_rounds(coord_t *c, const char **reason_p)
{
    tma_status_t st = TMA_OK;
    for (;;) {
        double el = coord_train_elapsed(c);
        if (c->job->rounds > 0 && c->round >= c->job->rounds) {
            *reason_p = "rounds";
            break;
        }
        int last = 0;
        if (c->job->interval_steps <= 0) {
            /* The last round at the end of the training time, so the final
             * local progress is aggregated. */
            double next = (double)(c->round + 1) * c->job->interval_s + c->sched_shift;
            if (c->round > 0 && next < c->round_time + 0.5 * c->job->interval_s) {
                /* The last round ended late (its commit waited out an
                 * etcd outage): the next one an interval after it, not
                 * right behind it. */
                c->sched_shift += c->round_time + c->job->interval_s - next;
                next = c->round_time + c->job->interval_s;
            } else if (el - next >= c->job->interval_s) {
                /* A whole interval late (a takeover, a stalled loop): one
                 * round now, the next an interval later, rather than every
                 * missed round back to back. */
                tma_log_info(COMP, "round %lld is %.1f s late: raising it now, the next %.1f s later",
                             (long long)c->round + 1, el - next, c->job->interval_s);
                c->sched_shift += el - next;
                next = el;
            }
            if (c->job->train_s > 0 && (next >= c->job->train_s || el >= c->job->train_s)) {
                next = c->job->train_s;
                last = 1;
            }
            if (el < next) {
                st = coord_idle(c, TMA_MIN(next - el, 0.25), 1);
                if (st != TMA_OK || coord_stopping(c))
                    break;
                continue;
            }
        } else {
            if (c->job->train_s > 0 && el >= c->job->train_s)
                break;
            st = coord_idle(c, 0, 1);
            if (st != TMA_OK || coord_stopping(c))
                break;
            /* A round is defined by the steps its participants make: none
             * is opened without one (it would count no weights). */
            if (coord_count_participants(c, NULL) <= 0) {
                st = coord_idle(c, 0.1, 1);
                if (st != TMA_OK || coord_stopping(c))
                    break;
                continue;
            }
        }
        st = coord_round(c, c->round + 1);
        /* A round that ran past the end of the training time was the last.
         * Past it by the time in its record: one recorded just before the
         * end, and committed just after it (a loaded machine), is followed
         * by the last round, at the end. */
        if (st != TMA_OK || coord_stopping(c) || last ||
            (c->job->train_s > 0 && c->round_time >= c->job->train_s))
            break;
    }
    return st;
}

/* After a takeover in step mode (rounds counted in steps) or GGS: waits up
 * to fault.start_timeout for the owners to reconnect, so the first round
 * (or step) collects from all of them rather than from the first to come
 * back.  Owners that do not come back are handled by their leases. */
static tma_status_t await_owners(coord_t *c)
{
    double end = tma_clock_now() + c->job->start_timeout;
    int said = 0;
    for (;;) {
        /* As at the start: the view is looked at every time, so one that
         * connected gets the weights it needs (GGS) at once. */
        tma_status_t st = coord_idle(c, 0.1, 1);
        if (st == TMA_OK)
            st = coord_service_view(c, 1);
        if (st != TMA_OK || coord_stopping(c))
            return st;
        int owners = 0;
        int n = coord_count_participants(c, &owners);
        if (n > 0 && n >= owners) {
            if (said)
                tma_log_info(COMP, "all %d owner(s) reconnected", n);
            return TMA_OK;
        }
        if (tma_clock_now() >= end) {
            tma_log_warn(COMP, "%d of %d owner(s) reconnected within %.0f s; going on with them", TMA_MAX(n, 0),
                         owners, c->job->start_timeout);
            return TMA_OK;
        }
        if (!said)
            tma_log_info(COMP, "waiting up to %.0f s for the %d owner(s) to reconnect", c->job->start_timeout,
                         owners);
        said = 1;
    }
}

/* Training from the current round on: rounds, or GGS's synchronous steps. */
static tma_status_t train(coord_t *c, const char **reason_p)
{
    if (c->resume && (c->job->interval_steps > 0 || c->vd->averages == TMA_AVERAGE_GRADS)) {
        tma_status_t st = await_owners(c);
        if (st != TMA_OK || coord_stopping(c))
            return st;
    }
    c->clock_start = tma_clock_now();
    *reason_p = "time";
    if (c->vd->averages == TMA_AVERAGE_WEIGHTS)
        return train_rounds(c, reason_p);
    c->ggs_step = 0;
    tma_status_t st = coord_ggs_loop(c);
    if (c->job->rounds > 0 && c->round >= c->job->rounds)
        *reason_p = "rounds";
    return st;
}

/* After training: stop the job and write its result, unless this
 * coordinator was fenced (the job is another's now). */
static tma_status_t end(coord_t *c, tma_status_t st, const char *reason)
{
    if (__atomic_load_n(&c->fenced, __ATOMIC_SEQ_CST))
        return TMA_ERR_FENCED;
    if (c->stop_flag && *c->stop_flag && c->o->suspend) {
        /* No stop, no result: the state in etcd still says "training", so
         * the next coordinator of this job takes it over from the last
         * committed round (step_down revokes our lease: no wait). */
        tma_log_info(COMP, "suspended after round %lld (checkpoint %s); a coordinator started with --job %s "
                           "resumes the job",
                     (long long)c->round, c->checkpoint_path, c->job->name);
        return TMA_ERR_CANCELLED;
    }
    if (c->stop_flag && *c->stop_flag)
        reason = "interrupted";
    if (st != TMA_OK && st != TMA_ERR_CANCELLED) {
        tma_log_error(COMP, "the job failed: %s; writing what there is", tma_status_str(st));
        reason = "failed";
    }
    tma_status_t fst = coord_finish(c, reason);
    if (st == TMA_OK)
        st = fst;
    if (st == TMA_OK && c->stop_flag && *c->stop_flag)
        st = TMA_ERR_CANCELLED;
    return st;
}

/* After a run that ended fenced: 1 when it was because etcd let the leader
 * lease expire (a stall longer than the TTL) and nobody leads the job now
 * (no coordinator key, or one bound to no lease),
 * so this coordinator should campaign again (logged). */
static int lead_again(coord_t *c)
{
    if (!__atomic_load_n(&c->lease_lost, __ATOMIC_SEQ_CST) || (c->stop_flag && *c->stop_flag) || !c->kv)
        return 0;
    char key[TMA_KEY_MAX];
    tma_job_key(key, c->job->name, TMA_KEY_COORDINATOR);
    tma_kv_result_t res;
    memset(&res, 0, sizeof res);
    tma_status_t st = TMA_ERR_UNAVAILABLE;
    for (int i = 0; i < 20 && st != TMA_OK && !(c->stop_flag && *c->stop_flag); i++) {
        if ((st = tma_kv_range(c->kv, key, NULL, &res)) != TMA_OK)
            tma_sleep(0.5); /* etcd may still be waking */
    }
    /* A record bound to no lease is nobody's: the campaign removes it. */
    int nobody = st == TMA_OK && (res.n_pairs == 0 || res.pairs[0].lease == 0);
    tma_kv_result_free(&res);
    if (nobody)
        tma_log_warn(COMP, "job %s: the leader lease expired (etcd stalled longer than its %d s TTL?) and nobody "
                           "leads the job: campaigning again under a new epoch, resuming from its state",
                     c->job->name, (int)c->job->lease_ttl);
    return nobody;
}

/* One leadership: open, lead, train or take over, end.  *again_p: the lease
 * was lost with no successor (lead_again). */
static tma_status_t run_once(const tma_coordinator_opts_t *opts, volatile sig_atomic_t *stop_flag, int *again_p)
{
    *again_p = 0;
    coord_t *c = calloc(1, sizeof *c);
    if (!c)
        return TMA_ERR_NOMEM;
    c->o = opts;
    c->stop_flag = stop_flag;
    if (opts->inject)
        c->inj = *opts->inject;
    else
        tma_inject_init(&c->inj);
    c->moves = cJSON_CreateArray();
    c->lost = cJSON_CreateArray();
    tma_status_t st = TMA_OK;
    const char *reason = "time";
    if (!c->moves || !c->lost) {
        st = TMA_ERR_NOMEM;
        goto out;
    }
    if ((st = coord_open_job(c)) != TMA_OK)
        goto out;
    if ((st = coord_open_model(c)) != TMA_OK)
        goto close_job;
    if ((st = coord_lead(c)) != TMA_OK)
        goto close_model;
    if ((st = coord_open_run(c)) != TMA_OK)
        goto step_down;
    if ((st = c->resume ? coord_take_over(c) : coord_start(c)) != TMA_OK) {
        if (!c->resume)
            coord_start_abandon(c, st);
        goto close_run;
    }
    if (coord_resuming_stop(c))
        reason = coord_stop_reason(c); /* stopped already: only the result is missing */
    else if (c->o->resume && c->resume && (st = coord_redeal(c)) != TMA_OK)
        ; /* no worker came, or interrupted: ended below ("failed", "interrupted") */
    else
        st = train(c, &reason);
    st = end(c, st, reason);
close_run:
    coord_close_run(c);
step_down:
    coord_step_down(c);
    if (st == TMA_ERR_FENCED)
        *again_p = lead_again(c);
close_model:
    coord_close_model(c);
close_job:
    coord_close_job(c);
out:
    if (c->leader_finished)
        st = TMA_OK; /* the standby's job is done: its leader finished it */
    cJSON_Delete(c->moves);
    cJSON_Delete(c->lost);
    free(c);
    return st;
}

tma_status_t tma_coordinator_run(const tma_coordinator_opts_t *opts, volatile sig_atomic_t *stop_flag)
{
    /* A leader whose lease etcd let expire, with nobody leading after it,
     * leads again as a standby would (bounded: a stall every round would
     * otherwise go on for ever). */
    for (int n = 0;; n++) {
        int again = 0;
        tma_status_t st = run_once(opts, stop_flag, &again);
        if (!again)
            return st;
        if (n == 20) {
            tma_log_error(COMP, "lost the leader lease %d times in a row: giving up (is etcd healthy?)", n + 1);
            return st;
        }
    }
}
