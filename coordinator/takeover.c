/*
 * takeover.c: resuming a job another coordinator led (a standby after the
 * leader's lease lapsed, or a restarted coordinator).  The state record in
 * etcd says how far the job got; the checkpoint it names is the global
 * model of that round (when it cannot be read, the one before it, with a
 * warning); metrics.jsonl is rebuilt from the round records in etcd so
 * every completed round keeps exactly one line; best.tmaw is the best model
 * so far.  A job whose state says "stopping" (its coordinator died after
 * setting `stop`) is only finished: no round is added.  With --resume
 * (every process of the job was stopped: tma launch --resume) a job that an
 * interruption ended is reopened, and the shards are dealt afresh (start.c)
 * instead of being kept by owners that are gone.
 */
#include "coord_int.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP COORD_COMP

/* A `state` that is present but does not decode (the view treats it as
 * absent) leaves the job's progress unknown: starting it over would deal
 * the shards afresh, train from new weights and reset the budget, so it is
 * an error naming the key and the way out. */
static tma_status_t check_state_readable(coord_t *c)
{
    char key[TMA_KEY_MAX];
    tma_job_key(key, c->job->name, TMA_KEY_STATE);
    tma_kv_result_t res;
    memset(&res, 0, sizeof res);
    tma_status_t st = tma_kv_get(c->kv, key, &res);
    tma_job_state_rec_t r;
    if (st == TMA_OK && res.n_pairs == 1 &&
        (st = tma_job_state_rec_decode(key, res.pairs[0].value, res.pairs[0].value_len, &r)) != TMA_OK) {
        tma_log_error(COMP, "job %s: %s is present but cannot be read (%s): how far the job got is unknown, so it "
                            "is not started over; to discard the job and start it anew, run the coordinator with "
                            "--config FILE --fresh",
                      c->job->name, key, tma_status_str(st));
        st = TMA_ERR_MALFORMED;
    }
    tma_kv_result_free(&res);
    return st == TMA_ERR_NOT_FOUND ? TMA_OK : st;
}

/* --resume: what the state allows.  A job stopped by an interruption or a
 * failure is reopened (coord_take_over deletes `stop`); one that never
 * began training starts over; one whose budget was spent is finished if its
 * result is missing ("stopping"), else refused, as are a job without state
 * and a --run-dir that is not the job's run folder. */
static tma_status_t check_resume(coord_t *c, int has_state)
{
    const char *job = c->job->name;
    if (!has_state) {
        tma_log_error(COMP, "--resume: job %s has no state in this etcd: nothing to resume (a launched job keeps "
                            "its etcd in RUN/etcd; one launched with --etcd needs the same --etcd)",
                      job);
        return TMA_ERR_CONFIG;
    }
    char *want = c->o->run_dir ? realpath(c->o->run_dir, NULL) : NULL, *have = realpath(c->prev.run_dir, NULL);
    int other = c->o->run_dir && (!want || !have || strcmp(want, have) != 0);
    free(want);
    free(have);
    if (other) {
        tma_log_error(COMP, "--resume: job %s runs in %s, not in %s: that folder holds another run", job,
                      c->prev.run_dir, c->o->run_dir);
        return TMA_ERR_CONFIG;
    }
    const char *phase = c->prev.phase;
    if (strcmp(phase, "starting") == 0 || strcmp(phase, "training") == 0) {
        c->resume = strcmp(phase, "training") == 0;
        return TMA_OK;
    }
    const char *reason = coord_stop_reason(c);
    if (strcmp(reason, "interrupted") != 0 && strcmp(reason, "failed") != 0 && strcmp(phase, "stopping") == 0) {
        c->resume = 1; /* its budget was spent: only its result is missing */
        return TMA_OK;
    }
    if (strcmp(reason, "interrupted") != 0 && strcmp(reason, "failed") != 0) {
        tma_log_error(COMP, "--resume: job %s ran to the end (stopped by %s at round %lld, phase %s; results in %s): "
                            "nothing to resume",
                      job, reason, (long long)c->prev.round, phase, c->prev.run_dir);
        return TMA_ERR_CONFIG;
    }
    tma_log_info(COMP, "--resume: job %s was %s at round %lld: reopening it", job,
                 strcmp(reason, "failed") == 0 ? "stopped by a failure" : "interrupted", (long long)c->prev.round);
    c->resume = c->reopen = 1;
    return TMA_OK;
}

tma_status_t coord_resume_check(coord_t *c)
{
    tma_job_view_snap_t s0;
    tma_status_t st = tma_job_view_snapshot(c->view, &s0);
    if (st != TMA_OK)
        return st;
    if (!s0.has_state && (st = check_state_readable(c)) != TMA_OK) {
        tma_job_view_snap_free(&s0);
        return st;
    }
    int resume = s0.has_state && (strcmp(s0.state.phase, "training") == 0 || strcmp(s0.state.phase, "starting") == 0 ||
                                  strcmp(s0.state.phase, "stopping") == 0);
    int finished = s0.has_state && !resume, has_state = s0.has_state;
    c->prev = s0.state;
    tma_job_view_snap_free(&s0);
    if (c->o->resume)
        return check_resume(c, has_state);
    if (finished && c->o->standby && strcmp(c->prev.phase, "done") == 0) {
        /* The leader it stood by for finished the job: nothing to take over. */
        tma_log_info(COMP, "job %s: the leader finished it (results in %s); the standby leaves", c->job->name,
                     c->prev.run_dir);
        c->leader_finished = 1;
        return TMA_ERR_CANCELLED;
    }
    if (finished) {
        tma_log_error(COMP, "job %s already ran to the end (phase %s, results in %s); use another job name or "
                            "--fresh",
                      c->job->name, c->prev.phase, c->prev.run_dir);
        return TMA_ERR_CONFIG;
    }
    /* A job that died before training began starts over under this epoch. */
    c->resume = resume && strcmp(c->prev.phase, "starting") != 0;
    return TMA_OK;
}

/* The best model so far after a takeover.  best.tmaw is the truth (the old
 * evaluator wrote it before announcing it, and may have died in between), so
 * its round comes from the file and its MRR from evaluating it again. */
static tma_status_t resume_best(coord_t *c, int64_t *round_p, double *val_p, double *time_p)
{
    *round_p = -1;
    *val_p = 0;
    *time_p = 0;
    char *path = tma_job_run_path(c->run_dir, "best.tmaw");
    if (!path)
        return TMA_ERR_NOMEM;
    if (!tma_file_exists(path)) {
        free(path);
        return TMA_OK;
    }
    uint64_t r = 0;
    tma_gnn_metrics_t m;
    tma_status_t st;
    /* The workers' ranks do not run yet: its MRR as recorded (the round's
     * line, else the state's best), its round from the file. */
    const int recorded = c->cfg.eval_on_workers > 0;
    if (recorded) {
        float *params = NULL;
        int64_t count = 0;
        st = tma_gnn_weights_read(path, &c->cfg, NULL, &params, &count, &r);
        free(params);
        m.mrr = (int64_t)r == c->prev.best_round ? c->prev.best_val_mrr : NAN;
    } else {
        st = coord_eval_weights_file(c, path, TMA_GNN_SPLIT_VAL, &m, &r);
    }
    double val = m.mrr;
    free(path);
    if (st != TMA_OK)
        return st;
    int64_t *rounds = NULL;
    double *times = NULL, *vals = NULL;
    int n = 0;
    if (tma_job_run_read_metrics(c->metrics_path, &rounds, &times, &vals, &n) == TMA_OK)
        for (int i = 0; i < n; i++)
            if (rounds[i] == (int64_t)r) {
                *time_p = times[i];
                if (recorded && isfinite(vals[i]))
                    val = vals[i];
            }
    if (!isfinite(val)) {
        tma_log_warn(COMP, "the best model so far, round %llu, has no recorded validation MRR: later rounds are "
                     "compared with 0", (unsigned long long)r);
        val = 0;
    }
    free(rounds);
    free(times);
    free(vals);
    *round_p = (int64_t)r;
    *val_p = val;
    tma_log_info(COMP, "the best model so far is round %llu (validation MRR %.4f)", (unsigned long long)r, val);
    return TMA_OK;
}

/* Rebuilds metrics.jsonl from the round records in etcd after a takeover:
 * every completed round keeps exactly one line. */
static tma_status_t rebuild_metrics(coord_t *c, int64_t last_round)
{
    char prefix[TMA_KEY_MAX];
    tma_job_key(prefix, c->job->name, TMA_KEY_METRICS);
    tma_kv_range_opts_t ro;
    memset(&ro, 0, sizeof ro);
    ro.flags = TMA_KV_PREFIX;
    tma_kv_result_t res;
    memset(&res, 0, sizeof res);
    tma_status_t st = tma_kv_range(c->kv, prefix, &ro, &res);
    if (st != TMA_OK)
        return st;
    char *tmp = tma_strdup_printf("%s.rebuild", c->metrics_path);
    if (!tmp) {
        tma_kv_result_free(&res);
        return TMA_ERR_NOMEM;
    }
    unlink(tmp);
    int64_t expect = 0;
    for (size_t i = 0; i < res.n_pairs && st == TMA_OK; i++) {
        int64_t r = tma_job_key_number(res.pairs[i].key);
        if (r < 0 || r > last_round)
            continue;
        cJSON *o = cJSON_ParseWithLength(res.pairs[i].value, res.pairs[i].value_len);
        if (!o) {
            tma_log_warn(COMP, "%s: not a JSON round record; skipped", res.pairs[i].key);
            continue;
        }
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "eval");
        if (cJSON_IsString(ev) && strcmp(ev->valuestring, "pending") == 0) {
            /* The old evaluator never got to it. */
            cJSON_ReplaceItemInObject(o, "eval", cJSON_CreateString("lost"));
        }
        if (r != expect)
            tma_log_warn(COMP, "metrics: round %lld follows %lld in etcd", (long long)r, (long long)expect - 1);
        expect = r + 1;
        st = tma_job_run_append_line(tmp, o);
        cJSON_Delete(o);
    }
    tma_kv_result_free(&res);
    if (st == TMA_OK && rename(tmp, c->metrics_path) != 0)
        st = TMA_ERR_IO;
    free(tmp);
    return st;
}

/* Weights files a coordinator was writing when it died (checkpoint-*.tmaw
 * and best.tmaw are written to NAME.tmp.XXXXXX, then renamed) would stay
 * for ever: they go before this coordinator's evaluator starts writing. */
static void prune_partial_files(coord_t *c)
{
    DIR *d = opendir(c->run_dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!strstr(de->d_name, ".tmaw.tmp."))
            continue;
        char *path = tma_job_run_path(c->run_dir, de->d_name);
        if (path && unlink(path) == 0)
            tma_log_info(COMP, "removed %s, a partial file the previous coordinator left", path);
        free(path);
    }
    if (d)
        closedir(d);
}

tma_status_t coord_resume_metrics(coord_t *c, coord_eval_cfg_t *ec)
{
    prune_partial_files(c);
    coord_io_retry_t r = {c->metrics_path, "the rebuilt metrics", 0, 0};
    tma_status_t st;
    while ((st = rebuild_metrics(c, c->prev.round)) != TMA_OK && coord_io_retry(&r, st, coord_stopping(c)))
        ;
    coord_io_retry_end(&r, st);
    if (st == TMA_OK)
        st = resume_best(c, &ec->best_round, &ec->best_val, &ec->best_time);
    return st;
}

/* Reads the checkpoint at path: the weights of round `round` (count P). */
static tma_status_t read_checkpoint(coord_t *c, const char *path, int64_t round, float **params_p)
{
    float *params = NULL;
    int64_t count = 0;
    uint64_t r = 0;
    tma_status_t st = tma_gnn_weights_read(path, &c->cfg, NULL, &params, &count, &r);
    if (st == TMA_OK && (count != c->P || (int64_t)r != round)) {
        tma_log_warn(COMP, "%s: checkpoint of round %llu with %lld parameters, expected round %lld with %lld",
                     path, (unsigned long long)r, (long long)count, (long long)round, (long long)c->P);
        st = TMA_ERR_MISMATCH;
    }
    if (st != TMA_OK) {
        free(params);
        return st;
    }
    *params_p = params;
    return TMA_OK;
}

/* The newest readable checkpoint in the run folder of a round before
 * `round` (the one the state named before its last commit), into *params_p
 * and *path_p (malloc'd). */
static tma_status_t fallback_checkpoint(coord_t *c, int64_t round, float **params_p, char **path_p)
{
    int64_t best_r = -1;
    uint64_t best_e = 0;
    char *best = NULL;
    DIR *d = opendir(c->run_dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        int64_t r;
        uint64_t e;
        if (coord_checkpoint_parse(de->d_name, &r, &e) != 0 || r >= round || r < best_r ||
            (r == best_r && e <= best_e))
            continue;
        char *path = tma_job_run_path(c->run_dir, de->d_name);
        float *params = NULL;
        if (path && read_checkpoint(c, path, r, &params) == TMA_OK) {
            free(*params_p);
            *params_p = params;
            free(best);
            best = path;
            best_r = r;
            best_e = e;
        } else {
            free(path);
        }
    }
    if (d)
        closedir(d);
    if (!best)
        return TMA_ERR_NOT_FOUND;
    *path_p = best;
    return TMA_OK;
}

/* A reopened job trains again: `stop` goes and the state says "training"
 * (one guarded transaction, so the workers that start now see no stop), and
 * the interrupted run's result.json and plot, which the end rewrites. */
static tma_status_t reopen(coord_t *c)
{
    tma_status_t st = coord_put_stop_state(c, NULL, "training", c->elapsed_base);
    if (st != TMA_OK)
        return st;
    snprintf(c->prev.phase, sizeof c->prev.phase, "training");
    char *svg = tma_job_run_path(c->run_dir, "mrr.svg");
    if (svg)
        unlink(svg);
    free(svg);
    unlink(c->result_path);
    coord_prom_phase(c->prom, "training", c->epoch);
    return TMA_OK;
}

/* --resume: the workers that had the shards are gone; coord_redeal deals
 * them again from an empty map (the old records name the gone members under
 * an old epoch, which the workers ignore once this coordinator leads). */
static tma_status_t restart(coord_t *c)
{
    tma_status_t st = c->reopen ? reopen(c) : TMA_OK;
    if (st == TMA_OK)
        tma_log_info(COMP, "resuming job %s at round %lld (%.1f s of training done); dealing its shards to the "
                           "workers that register",
                     c->job->name, (long long)c->round, c->elapsed_base);
    return st;
}

/* Take over: the last checkpoint, the round, the clock, the shard map; the
 * workers already training keep going. */
tma_status_t coord_take_over(coord_t *c)
{
    const tma_job_state_rec_t *prev = &c->prev;
    float *params = NULL;
    char *path = NULL;
    tma_status_t st = prev->checkpoint[0] ? read_checkpoint(c, prev->checkpoint, prev->round, &params)
                                          : TMA_ERR_NOT_FOUND;
    if (st == TMA_OK) {
        path = strdup(prev->checkpoint);
    } else if (fallback_checkpoint(c, prev->round, &params, &path) == TMA_OK) {
        tma_log_warn(COMP, "the checkpoint of round %lld (%s) cannot be used (%s): resuming from %s, the one "
                           "before it; round %lld's aggregation is lost",
                     (long long)prev->round, prev->checkpoint[0] ? prev->checkpoint : "none named",
                     tma_status_str(st), path, (long long)prev->round);
        st = TMA_OK;
    } else {
        tma_log_error(COMP, "job %s: the checkpoint of round %lld (%s) cannot be used (%s) and %s holds no "
                            "earlier one; the job cannot be resumed (start it again with --fresh)",
                      c->job->name, (long long)prev->round, prev->checkpoint, tma_status_str(st), c->run_dir);
    }
    if (st == TMA_OK && !path)
        st = TMA_ERR_NOMEM;
    if (st != TMA_OK) {
        free(params);
        free(path);
        return st;
    }
    memcpy(c->global, params, (size_t)c->P * sizeof(float));
    free(params);
    /* GGS's replica steps on from these parameters (with a fresh Adam: its
     * moments are not checkpointed). */
    if (c->vd->averages == TMA_AVERAGE_GRADS && c->server &&
        (st = tma_gnn_trainer_set_params(c->server, c->global)) != TMA_OK) {
        free(path);
        return st;
    }
    free(c->checkpoint_path);
    c->checkpoint_path = path;
    if (strcmp(path, prev->checkpoint) != 0) {
        /* The job goes on from these weights as round prev->round's model:
         * that is what the next state will name, the fallback stays until then. */
        free(c->checkpoint_prev);
        c->checkpoint_prev = path;
        c->checkpoint_path = coord_checkpoint_path(c->run_dir, prev->round, c->epoch);
        if (!c->checkpoint_path)
            return TMA_ERR_NOMEM;
        if ((st = coord_write_checkpoint(c, c->checkpoint_path, prev->round)) != TMA_OK)
            return st;
    }
    c->round = prev->round;
    c->elapsed_base = prev->train_elapsed;
    if (c->o->resume)
        return restart(c);
    tma_job_view_snap_t s;
    if ((st = tma_job_view_snapshot(c->view, &s)) != TMA_OK)
        return st;
    for (int k = 0; k < c->map.n && k < s.n_shards; k++)
        if (s.shard_present[k])
            c->map.owner[k] = s.shards[k].owner;
    if ((st = coord_restamp_shards(c, &s)) != TMA_OK) {
        tma_job_view_snap_free(&s);
        return st;
    }
    /* Workers already training keep going: treat them as having the
     * weights.  Not one whose ready record says it has none (it reloaded
     * its shards and waits for them), and not in GGS: they step on the
     * coordinator's parameters, so each gets this one's as it connects (and
     * its step numbering with them: the sync-step counter starts again). */
    for (int i = 0; i < s.n_ready && c->vd->averages != TMA_AVERAGE_GRADS; i++) {
        slot_t *sl = s.ready[i].rec.fresh ? NULL : coord_slot_get(c, s.ready[i].id);
        if (sl)
            sl->pushed_rev = s.ready[i].mod_revision;
    }
    tma_job_view_snap_free(&s);
    c->map_ready = 1;
    tma_log_info(COMP, "took over job %s at round %lld (%.1f s of training done)", c->job->name,
                 (long long)c->round, c->elapsed_base);
    for (int i = 0; i < c->n_slots; i++)
        if (c->slots[i].used)
            coord_slot_post(c, &c->slots[i]);
    return TMA_OK;
}

int coord_resuming_stop(const coord_t *c)
{
    return c->resume && strcmp(c->prev.phase, "stopping") == 0;
}

/* Why the job was stopped: the reason in its `stop` record ("time" when it
 * cannot be read). */
const char *coord_stop_reason(coord_t *c)
{
    static const char *const reasons[] = {"time", "rounds", "interrupted", "failed"};
    char key[TMA_KEY_MAX];
    tma_job_key(key, c->job->name, TMA_KEY_STOP);
    tma_kv_result_t res;
    memset(&res, 0, sizeof res);
    const char *reason = reasons[0];
    if (tma_kv_get(c->kv, key, &res) == TMA_OK && res.n_pairs == 1) {
        cJSON *o = cJSON_ParseWithLength(res.pairs[0].value, res.pairs[0].value_len);
        const cJSON *r = o ? cJSON_GetObjectItemCaseSensitive(o, "reason") : NULL;
        for (size_t i = 0; cJSON_IsString(r) && i < TMA_ARRAY_LEN(reasons); i++)
            if (strcmp(r->valuestring, reasons[i]) == 0)
                reason = reasons[i];
        cJSON_Delete(o);
    }
    tma_kv_result_free(&res);
    return reason;
}
