/*
 * takeover.c: resuming a job another coordinator led (a standby after the
 * leader's lease lapsed, or a restarted coordinator).  The state record in
 * etcd says how far the job got; the last checkpoint is the global model of
 * that round; metrics.jsonl is rebuilt from the round records in etcd so
 * every completed round keeps exactly one line; best.tmaw is the best model
 * so far.
 */
#include "coord_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP COORD_COMP

tma_status_t coord_resume_check(coord_t *c)
{
    tma_jobview_snap_t s0;
    tma_status_t st = tma_jobview_snapshot(c->view, &s0);
    if (st != TMA_OK)
        return st;
    int resume = s0.has_state && (strcmp(s0.state.phase, "training") == 0 || strcmp(s0.state.phase, "starting") == 0);
    int finished = s0.has_state && !resume;
    c->prev = s0.state;
    tma_jobview_snap_free(&s0);
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
    char *path = tma_run_path(c->run_dir, "best.tmaw");
    if (!path)
        return TMA_ERR_NOMEM;
    if (!tma_file_exists(path)) {
        free(path);
        return TMA_OK;
    }
    uint64_t r = 0;
    double val = 0;
    tma_status_t st = coord_eval_weights_file(c, path, TMA_GNN_SPLIT_VAL, &val, &r);
    free(path);
    if (st != TMA_OK)
        return st;
    int64_t *rounds = NULL;
    double *times = NULL, *vals = NULL;
    int n = 0;
    if (tma_run_read_metrics(c->metrics_path, &rounds, &times, &vals, &n) == TMA_OK)
        for (int i = 0; i < n; i++)
            if (rounds[i] == (int64_t)r)
                *time_p = times[i];
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
        st = tma_run_append_line(tmp, o);
        cJSON_Delete(o);
    }
    tma_kv_result_free(&res);
    if (st == TMA_OK && rename(tmp, c->metrics_path) != 0)
        st = TMA_ERR_IO;
    free(tmp);
    return st;
}

tma_status_t coord_resume_metrics(coord_t *c, coord_eval_cfg_t *ec)
{
    tma_status_t st = rebuild_metrics(c, c->prev.round);
    if (st == TMA_OK)
        st = resume_best(c, &ec->best_round, &ec->best_val, &ec->best_time);
    return st;
}

/* Take over: the last checkpoint, the round, the clock, the shard map; the
 * workers already training keep going. */
tma_status_t coord_take_over(coord_t *c)
{
    const tma_state_rec_t *prev = &c->prev;
    float *params = NULL;
    int64_t count = 0;
    uint64_t r = 0;
    tma_status_t st = tma_gnn_weights_read(prev->checkpoint, &c->cfg, NULL, &params, &count, &r);
    if (st == TMA_OK && (count != c->P || (int64_t)r != prev->round)) {
        tma_log_error(COMP, "%s: checkpoint of round %llu, expected round %lld", prev->checkpoint,
                      (unsigned long long)r, (long long)prev->round);
        st = TMA_ERR_MISMATCH;
    }
    if (st != TMA_OK) {
        free(params);
        return st;
    }
    memcpy(c->global, params, (size_t)c->P * sizeof(float));
    free(params);
    c->round = prev->round;
    c->elapsed_base = prev->train_elapsed;
    tma_jobview_snap_t s;
    if ((st = tma_jobview_snapshot(c->view, &s)) != TMA_OK)
        return st;
    for (int k = 0; k < c->map.n && k < s.n_shards; k++)
        if (s.shard_present[k])
            c->map.owner[k] = s.shards[k].owner;
    if ((st = coord_restamp_shards(c, &s)) != TMA_OK) {
        tma_jobview_snap_free(&s);
        return st;
    }
    /* Workers already training keep going: treat them as having the weights. */
    for (int i = 0; i < s.n_ready; i++) {
        slot_t *sl = coord_slot_get(c, s.ready[i].id);
        if (sl)
            sl->pushed_rev = s.ready[i].mod_revision;
    }
    tma_jobview_snap_free(&s);
    c->map_ready = 1;
    tma_log_info(COMP, "took over job %s at round %lld (%.1f s of training done)", c->job->name,
                 (long long)c->round, c->elapsed_base);
    for (int i = 0; i < c->n_slots; i++)
        if (c->slots[i].used)
            coord_slot_post(c, &c->slots[i]);
    return TMA_OK;
}
