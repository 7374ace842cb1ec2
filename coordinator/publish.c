/*
 * publish.c: what the leader publishes while it leads, through the guarded
 * writes of guard.c: the records it builds (state, shard moves, rounds),
 * the broadcast of the global weights and the per-round checkpoints.
 */
#include "coord_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define COMP COORD_COMP

char *coord_state_encode(const coord_t *c, const char *phase, int64_t round, double elapsed, int64_t best_round,
                         double best_val)
{
    tma_job_state_rec_t s;
    memset(&s, 0, sizeof s);
    s.epoch = c->epoch;
    s.round = round;
    s.train_elapsed = elapsed;
    s.best_round = best_round;
    s.best_val_mrr = best_round >= 0 ? best_val : 0;
    snprintf(s.phase, sizeof s.phase, "%s", phase);
    snprintf(s.run_dir, sizeof s.run_dir, "%s", c->run_dir);
    /* Before training there is no checkpoint yet; after, the one of the
     * last round this coordinator wrote (its state names it). */
    if (strcmp(phase, "starting") != 0)
        snprintf(s.checkpoint, sizeof s.checkpoint, "%s", c->checkpoint_path);
    return tma_job_state_rec_encode(&s);
}

tma_status_t coord_put_stop_state(coord_t *c, const char *reason, const char *phase, double elapsed)
{
    int64_t best_round;
    double best_val, best_time;
    coord_eval_best(c->ev, &best_round, &best_val, &best_time);
    char stkey[TMA_KEY_MAX], skey[TMA_KEY_MAX];
    tma_job_key(stkey, c->job->name, TMA_KEY_STOP);
    tma_job_key(skey, c->job->name, TMA_KEY_STATE);
    const char *keys[2] = {stkey, skey};
    char *vals[2] = {reason ? tma_job_stop_rec_encode(c->epoch, reason) : NULL,
                     coord_state_encode(c, phase, c->round, elapsed, best_round, best_val)};
    tma_status_t st = (vals[0] || !reason) && vals[1] ? coord_guarded_put(c, 2, keys, vals, 1) : TMA_ERR_NOMEM;
    free(vals[0]);
    free(vals[1]);
    return st;
}

tma_status_t coord_write_moves(coord_t *c, const tma_shard_move_t *mv, int n, const char *reason)
{
    for (int i = 0; i < n; i += 8) {
        int m = TMA_MIN(8, n - i);
        char keys[8][TMA_KEY_MAX];
        const char *kp[8];
        char *vals[8];
        for (int j = 0; j < m; j++) {
            tma_job_shard_rec_t r = {mv[i + j].shard, mv[i + j].to, c->epoch, c->round};
            tma_job_key_n(keys[j], c->job->name, TMA_KEY_SHARDS, mv[i + j].shard);
            kp[j] = keys[j];
            vals[j] = tma_job_shard_rec_encode(&r);
        }
        tma_status_t st = coord_guarded_put(c, m, kp, vals, 1);
        for (int j = 0; j < m; j++)
            free(vals[j]);
        if (st != TMA_OK)
            return st;
    }
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "shard", mv[i].shard);
        cJSON_AddNumberToObject(o, "from", (double)mv[i].from);
        cJSON_AddNumberToObject(o, "to", (double)mv[i].to);
        cJSON_AddNumberToObject(o, "round", (double)c->round);
        cJSON_AddStringToObject(o, "reason", reason);
        cJSON_AddItemToArray(c->moves, o);
        if (mv[i].to >= 0)
            tma_log_info(COMP, "shard %d: %s -> member %lld (%s)", mv[i].shard,
                         mv[i].from >= 0 ? "moved" : "assigned", (long long)mv[i].to, reason);
        else
            tma_log_warn(COMP, "shard %d: dropped (owner %lld %s; policy %s)", mv[i].shard,
                         (long long)mv[i].from, reason, tma_job_policy_name(c->job->on_failure));
    }
    return TMA_OK;
}

tma_status_t coord_restamp_shards(coord_t *c, const tma_job_view_snap_t *s)
{
    char keys[8][TMA_KEY_MAX];
    const char *kp[8];
    char *vals[8];
    int m = 0;
    tma_status_t st = TMA_OK;
    for (int k = 0; k <= s->n_shards && st == TMA_OK; k++) {
        if (k < s->n_shards && s->shard_present[k] && s->shards[k].epoch != c->epoch) {
            tma_job_shard_rec_t r = s->shards[k];
            r.epoch = c->epoch;
            tma_job_key_n(keys[m], c->job->name, TMA_KEY_SHARDS, k);
            kp[m] = keys[m];
            if (!(vals[m++] = tma_job_shard_rec_encode(&r)))
                st = TMA_ERR_NOMEM;
        }
        if (m > 0 && (m == 8 || k == s->n_shards || st != TMA_OK)) {
            if (st == TMA_OK)
                st = coord_guarded_put(c, m, kp, vals, 1);
            for (int j = 0; j < m; j++)
                free(vals[j]);
            m = 0;
        }
    }
    return st;
}

/* Sends the global weights, labelled with `round` (GGS: the step). */
void coord_push_global(coord_t *c, const uint32_t *ids, int n, int64_t round)
{
    if (n <= 0)
        return;
    tma_status_t *sts = calloc((size_t)n, sizeof *sts);
    tma_transport_meta_t tm = {TMA_TAG_GLOBAL, c->epoch, (uint64_t)round};
    tma_transport_send_many(c->tr, ids, (size_t)n, &tm, c->global, (size_t)c->P, TMA_TRANSPORT_MEM_HOST,
                            c->job->round_deadline, sts);
    for (int i = 0; sts && i < n; i++)
        if (sts[i] != TMA_OK)
            tma_log_warn(COMP, "sending the global weights to member %u failed: %s", ids[i],
                         tma_status_str(sts[i]));
    free(sts);
}

char *coord_checkpoint_path(const char *run_dir, int64_t round, uint64_t epoch)
{
    char name[96];
    snprintf(name, sizeof name, "checkpoint-r%06lld-e%llu.tmaw", (long long)round, (unsigned long long)epoch);
    return tma_job_run_path(run_dir, name);
}

int coord_checkpoint_parse(const char *name, int64_t *round_p, uint64_t *epoch_p)
{
    long long r;
    unsigned long long e;
    int end = 0;
    if (sscanf(name, "checkpoint-r%lld-e%llu.tmaw%n", &r, &e, &end) != 2 || name[end] != '\0' || r < 0)
        return -1;
    *round_p = r;
    *epoch_p = e;
    return 0;
}

/* After a commit: every checkpoint but the one `state` names now and the one
 * it named before goes (a resume falls back to the previous one when the
 * newest cannot be read; files of uncommitted rounds and older epochs are
 * of no use). */
static void prune_checkpoints(coord_t *c)
{
    DIR *d = opendir(c->run_dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        int64_t r;
        uint64_t e;
        if (coord_checkpoint_parse(de->d_name, &r, &e) != 0)
            continue;
        char *path = tma_job_run_path(c->run_dir, de->d_name);
        if (path && strcmp(path, c->checkpoint_path) != 0 &&
            (!c->checkpoint_prev || strcmp(path, c->checkpoint_prev) != 0) && unlink(path) != 0)
            tma_log_warn(COMP, "%s: cannot remove an old checkpoint: %s", path, strerror(errno));
        free(path);
    }
    closedir(d);
}

tma_status_t coord_write_checkpoint(coord_t *c, const char *path, int64_t t)
{
    coord_io_retry_t r = {path, "the checkpoint", 0, 0};
    tma_status_t st;
    while ((st = tma_gnn_weights_write(path, &c->cfg, c->global, (uint64_t)t)) != TMA_OK &&
           coord_io_retry(&r, st, coord_stopping(c)))
        ;
    coord_io_retry_end(&r, st);
    /* Given up because the coordinator stops: an interruption, not a failed job. */
    if (st != TMA_OK && coord_stopping(c) && !__atomic_load_n(&c->fenced, __ATOMIC_SEQ_CST))
        st = TMA_ERR_CANCELLED;
    return st;
}

/* The end of round t: the round's own checkpoint, then state (naming it)
 * and metrics/<t> in one guarded transaction (the round counts once both
 * are in), then the evaluator, which takes the record over.  The checkpoint
 * `state` named before stays until the next commit, so a checkpoint ahead of
 * the state never hides the one a resume needs. */
tma_status_t coord_publish_round(coord_t *c, int64_t t, cJSON *record)
{
    double time = coord_train_elapsed(c);
    char *path = coord_checkpoint_path(c->run_dir, t, c->epoch);
    tma_status_t st = path ? coord_write_checkpoint(c, path, t) : TMA_ERR_NOMEM;
    if (st != TMA_OK) {
        free(path);
        cJSON_Delete(record);
        return st;
    }
    char *named = c->checkpoint_path;
    c->checkpoint_path = path;
    int64_t best_round;
    double best_val, best_time;
    coord_eval_best(c->ev, &best_round, &best_val, &best_time);
    st = coord_commit_round(c, t, time, best_round, best_val, record);
    if (st != TMA_OK) {
        c->checkpoint_path = named;
        free(path);
        return st;
    }
    free(c->checkpoint_prev);
    c->checkpoint_prev = named;
    prune_checkpoints(c);
    c->round = t;
    return TMA_OK;
}

tma_status_t coord_commit_round(coord_t *c, int64_t t, double time, int64_t best_round, double best_val,
                                cJSON *record)
{
    char skey[TMA_KEY_MAX], mkey[TMA_KEY_MAX];
    tma_job_key(skey, c->job->name, TMA_KEY_STATE);
    tma_job_key_n(mkey, c->job->name, TMA_KEY_METRICS, t);
    cJSON_DeleteItemFromObject(record, "val_mrr");
    cJSON_AddNullToObject(record, "val_mrr");
    cJSON_AddStringToObject(record, "eval", "pending");
    char *vals[2] = {coord_state_encode(c, "training", t, time, best_round, best_val),
                     cJSON_PrintUnformatted(record)};
    const char *keys[2] = {skey, mkey};
    tma_status_t st = vals[0] && vals[1] ? coord_guarded_put(c, 2, keys, vals, 1) : TMA_ERR_NOMEM;
    free(vals[0]);
    cJSON_free(vals[1]);
    if (st != TMA_OK) {
        cJSON_Delete(record);
        return st;
    }
    tma_inject_point(&c->inj, "commit", t);
    coord_prom_phase(c->prom, "training", c->epoch);
    coord_prom_round(c->prom, record);
    coord_eval_submit(c->ev, t, time, c->global, record);
    return TMA_OK;
}
