/*
 * round.c: one round of Algorithm 1.  It raises agg = t (time mode),
 * collects the local weights of the live owners until all arrived or the
 * round deadline passed (a peer failure or a deleted member key takes a
 * worker out of the round at once), averages what arrived in member-id
 * order, runs the variant's hook (LLCG's correction), broadcasts,
 * checkpoints, records the round in etcd and hands the model to the
 * evaluator thread.  collect and the average are shared with GGS's steps.
 * A round whose collection a stop request cut short is not committed.
 */
#include "coord_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COMP COORD_COMP

static const char nonfinite[] = "NaN or infinite values (a poisoned model: the sender is flagged in the round's record)";

/* Why a tensor from member sl of round t is refused, or NULL to take it. */
static const char *refusal(coord_t *c, const slot_t *sl, const tma_transport_msg_t *m, int64_t t,
                           tma_job_msg_meta_t *meta)
{
    if (!sl || !sl->expected)
        return "not an owner in this round";
    if (sl->got)
        return "a second tensor in one round";
    if (m->meta.epoch != c->epoch)
        return "a stale coordinator epoch";
    if ((int64_t)m->meta.round != t)
        return "another round";
    if (m->count != (size_t)(c->P + c->meta_floats))
        return "the wrong size";
    if (tma_job_msg_meta_unpack(m->data + c->P, c->map.n, meta, sl->shards) != TMA_OK)
        return "a malformed meta block";
    if (meta->lease != sl->lease)
        return "a lease that is not its current one (a stale incarnation)";
    if ((int64_t)m->peer_lease != sl->lease)
        return "a connection whose hello proved another lease than the member's current one";
    if (tma_job_first_nonfinite(m->data, c->P) >= 0)
        return nonfinite;
    if (c->vd->uses_shards) {
        /* Every shard it trained must be one it owns now. */
        int owned = tma_shard_map_count(&c->map, m->peer, NULL);
        if ((int)meta->n_shards != owned)
            return "trained on shards it does not own";
        for (uint32_t j = 0; j < meta->n_shards; j++)
            if (c->map.owner[sl->shards[j]] != (int64_t)m->peer)
                return "trained on shards it does not own";
    }
    return NULL;
}

/* Handles one message of round t: a tensor taken or refused, or a
 * connection event that takes an expected member out of the round. */
static void take_message(coord_t *c, tma_transport_msg_t *m, int64_t t, int *n_got, int *n_missed)
{
    slot_t *sl = coord_slot_find(c, m->peer);
    if (m->kind == TMA_TRANSPORT_MSG_EVENT) {
        if (m->event.kind != TMA_TRANSPORT_EV_CONNECTED && sl && !coord_is_connected(c, m->peer)) {
            coord_mark_suspect(sl);
            if (sl->expected && !sl->got && !sl->missed) {
                sl->missed = 1;
                (*n_missed)++;
                tma_log_warn(COMP, "round %lld: member %u failed mid-round (%s): the round goes on without it",
                             (long long)t, m->peer, tma_status_str(m->event.reason));
            }
        }
    } else {
        tma_job_msg_meta_t meta;
        const char *why = refusal(c, sl, m, t, &meta);
        if (why) {
            tma_log_warn(COMP, "round %lld: refused a tensor from member %u: %s", (long long)t, m->peer, why);
            if (why == nonfinite) {
                /* Flagged in the round's record; it sends nothing more in
                 * this round, so the round does not wait for it. */
                sl->poisoned = 1;
                if (!sl->missed) {
                    sl->missed = 1;
                    (*n_missed)++;
                }
            }
        } else {
            if (!m->in_place)
                memcpy(sl->buf, m->data, (size_t)(c->P + c->meta_floats) * sizeof(float));
            sl->meta = meta;
            sl->got = 1;
            (*n_got)++;
        }
        if (sl && m->in_place)
            sl->posted = 0;
    }
    tma_transport_msg_release(c->tr, m);
    if (sl && sl->used && !sl->got)
        coord_slot_post(c, sl);
}

/* Whether member id's ready record refuses a shard the map says it owns:
 * it does not train that shard (its file is missing on the member's node),
 * so it sends nothing this round that could count; the refusal is dealt
 * with between rounds. */
static int refuses_owned(const coord_t *c, const tma_job_view_snap_t *s, uint32_t id, int32_t *shard_p)
{
    const tma_job_view_ready_t *r = tma_job_view_snap_ready(s, id);
    for (int j = 0; r && j < r->rec.n_refused; j++) {
        int32_t k = r->rec.refused[j];
        if (k < c->map.n && c->map.owner[k] == (int64_t)id) {
            *shard_p = k;
            return 1;
        }
    }
    return 0;
}

/* Expected members whose key vanished, or that refused a shard they own,
 * will not send (a step-mode round would otherwise wait for them).  An
 * expected one that reloaded its shards meanwhile and waits for weights
 * gets them, so it trains and sends (it would otherwise wait for this
 * round's broadcast, and a step-mode round for it). */
static void drop_gone(coord_t *c, int64_t t, int *n_missed)
{
    if (tma_job_view_wait(c->view, c->seen_version, 0) == c->seen_version)
        return;
    tma_job_view_snap_t s;
    if (tma_job_view_snapshot(c->view, &s) != TMA_OK)
        return;
    coord_push_ready(c, &s, 1);
    for (int i = 0; i < c->n_slots; i++) {
        slot_t *sl = &c->slots[i];
        if (!sl->used || !sl->expected || sl->got || sl->missed)
            continue;
        int32_t k = -1;
        if (!tma_job_view_snap_member(&s, sl->id))
            tma_log_warn(COMP, "round %lld: member %u is gone: the round goes on without it", (long long)t,
                         sl->id);
        else if (c->vd->uses_shards && refuses_owned(c, &s, sl->id, &k))
            tma_log_warn(COMP, "round %lld: member %u refused shard %d (no file on its node): the round goes on "
                               "without it",
                         (long long)t, sl->id, k);
        else
            continue;
        sl->missed = 1;
        (*n_missed)++;
    }
    tma_job_view_snap_free(&s);
}

/* Collects tensors of round t from the expected members until all arrived,
 * the deadline passed, or every one still missing has failed.  With
 * after_first > 0 the deadline moves to after_first seconds past the first
 * tensor taken, if that is sooner. */
void coord_collect(coord_t *c, int64_t t, uint32_t tag, double deadline, double after_first, int *n_exp_p)
{
    int n_exp = 0, n_got = 0, n_missed = 0;
    for (int i = 0; i < c->n_slots; i++)
        if (c->slots[i].used && c->slots[i].expected)
            n_exp++;
    *n_exp_p = n_exp;
    while (n_got + n_missed < n_exp && tma_clock_now() < deadline && !coord_stopping(c)) {
        tma_transport_msg_t m;
        memset(&m, 0, sizeof m);
        double left = deadline - tma_clock_now();
        int had = n_got;
        if (tma_transport_recv(c->tr, TMA_TRANSPORT_ANY_PEER, tag, TMA_MIN(left, 0.05), &m) == TMA_OK)
            take_message(c, &m, t, &n_got, &n_missed);
        if (after_first > 0 && had == 0 && n_got > 0)
            deadline = TMA_MIN(deadline, tma_clock_now() + after_first);
        drop_gone(c, t, &n_missed);
    }
}

/* How long round t collects.  Time mode: fault.round_deadline from when agg
 * was raised (every worker sends at once).  Step mode: the workers send
 * when their interval_steps are done, which may take far longer than the
 * deadline, so the deadline runs from the first tensor that arrives (the
 * others are that much late at most), and until one does the round waits
 * for the end of the training time (and a deadline past it), or without
 * one for as long as an expected owner is alive: a failed one still leaves
 * the round at once. */
static void round_deadline(const coord_t *c, double *deadline_p, double *after_first_p)
{
    const tma_job_t *j = c->job;
    if (j->interval_steps <= 0) {
        *deadline_p = tma_clock_now() + j->round_deadline;
        *after_first_p = 0;
        return;
    }
    *after_first_p = j->round_deadline;
    *deadline_p = j->train_s > 0 ? tma_clock_now() + TMA_MAX(j->train_s - coord_train_elapsed(c), 0.0) + j->round_deadline
                                 : HUGE_VAL;
}

/* The weighted mean of what arrived into c->global.  Weights: gradients
 * count alike; weights by the member's training edges (aggregation.weighted)
 * or its shard count.  Returns the number of contributions. */
int coord_average_slots(coord_t *c)
{
    int n = 0;
    for (int i = 0; i < c->n_slots; i++) {
        slot_t *sl = &c->slots[i];
        if (!sl->used || !sl->got)
            continue;
        double w = 1.0;
        if (c->vd->averages == TMA_AVERAGE_WEIGHTS) {
            if (c->job->weighted) {
                int64_t e = 0;
                tma_shard_map_count(&c->map, sl->id, &e);
                w = (double)e;
            } else {
                w = (double)tma_shard_map_count(&c->map, sl->id, NULL);
            }
            if (!(w > 0))
                w = 1.0;
        }
        sl->weight = w;
        c->contrib[n++] = (coord_contrib_t){sl->id, w, sl->buf};
    }
    return coord_average(c->contrib, n, c->P, c->acc, c->global);
}

/* The variant's hook after an average that had contributions. */
tma_status_t coord_after_average(coord_t *c, int n_got)
{
    if (n_got == 0 || !c->vd->after_average || !c->server)
        return TMA_OK;
    return c->vd->after_average(c->job, c->server, c->global);
}

static void dump_tensor(coord_t *c, const char *what, uint32_t id, int64_t t, const float *x)
{
    if (!c->o->dump_dir)
        return;
    char name[96];
    snprintf(name, sizeof name, "r%06lld-%s-%u.tmaw", (long long)t, what, id);
    char *path = tma_path_join(c->o->dump_dir, name);
    if (path)
        tma_gnn_weights_write(path, &c->cfg, x, (uint64_t)t);
    free(path);
}

/* The name of member id (--name, or host:pid), or NULL when it is gone. */
static const char *member_name(const tma_job_view_snap_t *s, uint32_t id)
{
    for (int i = 0; s && i < s->n_members; i++)
        if (s->members[i].rec.id == id)
            return s->members[i].rec.name;
    return NULL;
}

static cJSON *worker_record(coord_t *c, const slot_t *sl, const tma_job_view_snap_t *s)
{
    cJSON *w = cJSON_CreateObject();
    cJSON_AddNumberToObject(w, "id", sl->id);
    const char *name = member_name(s, sl->id);
    if (name && name[0])
        cJSON_AddStringToObject(w, "name", name);
    if (c->vd->averages == TMA_AVERAGE_GRADS) {
        cJSON_AddNumberToObject(w, "steps", (double)sl->steps);
        cJSON_AddNumberToObject(w, "loss", sl->steps ? sl->loss_sum / (double)sl->steps : 0.0);
        return w;
    }
    cJSON_AddNumberToObject(w, "steps", (double)sl->meta.steps_round);
    cJSON_AddNumberToObject(w, "loss", sl->meta.loss);
    cJSON_AddNumberToObject(w, "steps_per_s",
                            sl->meta.step_seconds > 0 ? (double)sl->meta.steps_round / sl->meta.step_seconds : 0.0);
    cJSON_AddNumberToObject(w, "weight", sl->weight);
    cJSON *sh = cJSON_AddArrayToObject(w, "shards");
    for (uint32_t j = 0; j < sl->meta.n_shards; j++)
        cJSON_AddItemToArray(sh, cJSON_CreateNumber(sl->shards[j]));
    return w;
}

/* The round record for metrics.jsonl and metrics/<t>. */
cJSON *coord_round_record(coord_t *c, int64_t t, double time, const uint32_t *alive, int n_alive,
                          double agg_seconds)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "round", (double)t);
    cJSON_AddNumberToObject(r, "time", time);
    cJSON_AddNumberToObject(r, "wall", tma_clock_wall());
    cJSON_AddNumberToObject(r, "epoch", (double)c->epoch);
    cJSON *ws = cJSON_AddArrayToObject(r, "workers");
    cJSON *missed = cJSON_CreateArray();
    /* The members' names, for the record's readers (a failed snapshot
     * only leaves them out). */
    tma_job_view_snap_t s;
    int have_snap = c->view && tma_job_view_snapshot(c->view, &s) == TMA_OK;
    for (int i = 0; i < c->n_slots; i++) {
        slot_t *sl = &c->slots[i];
        if (!sl->used || !sl->expected)
            continue;
        if (!sl->got && c->vd->averages == TMA_AVERAGE_WEIGHTS)
            cJSON_AddItemToArray(missed, cJSON_CreateNumber(sl->id));
        else
            cJSON_AddItemToArray(ws, worker_record(c, sl, have_snap ? &s : NULL));
    }

    cJSON *al = cJSON_AddArrayToObject(r, "alive");
    for (int i = 0; i < n_alive; i++)
        cJSON_AddItemToArray(al, cJSON_CreateNumber(alive[i]));
    /* Backups standing by (started --backup, owning no shard; as
     * tma_backups_idle counts them), so readers count them apart. */
    cJSON *bk = cJSON_AddArrayToObject(r, "backups");
    for (int i = 0; have_snap && i < s.n_members; i++) {
        const tma_job_member_rec_t *m = &s.members[i].rec;
        if (m->backup && !(c->vd->uses_shards && c->map_ready && tma_shard_map_count(&c->map, m->id, NULL) > 0))
            cJSON_AddItemToArray(bk, cJSON_CreateNumber(m->id));
    }
    cJSON_AddItemToObject(r, "missed", missed);
    /* Senders of NaN or infinite values since the last record. */
    cJSON *poisoned = cJSON_AddArrayToObject(r, "poisoned");
    for (int i = 0; i < c->n_slots; i++) {
        if (c->slots[i].used && c->slots[i].poisoned)
            cJSON_AddItemToArray(poisoned, cJSON_CreateNumber(c->slots[i].id));
        c->slots[i].poisoned = 0;
    }
    cJSON_AddItemToObject(r, "lost", c->lost);
    c->lost = cJSON_CreateArray();
    cJSON_AddItemToObject(r, "moves", c->moves);
    c->moves = cJSON_CreateArray();
    if (c->vd->uses_shards) {
        cJSON *owners = cJSON_AddArrayToObject(r, "owners");
        for (int k = 0; k < c->map.n; k++)
            cJSON_AddItemToArray(owners, cJSON_CreateNumber((double)c->map.owner[k]));
    }
    cJSON_AddNumberToObject(r, "agg_seconds", agg_seconds);
    if (have_snap)
        tma_job_view_snap_free(&s);
    return r;
}

/* Whether a stop request (a signal) ended round t's collection before every
 * expected tensor arrived or its sender failed: such a round is not
 * committed, since its average would count fewer workers than the round
 * had; the job ends at the round before, which a resumed job redoes whole
 * (in step mode with the weights of a run that was never stopped). */
static int cut_short(coord_t *c, int64_t t)
{
    if (!(c->stop_flag && *c->stop_flag))
        return 0;
    int n_exp = 0, n_in = 0;
    for (int i = 0; i < c->n_slots; i++) {
        const slot_t *sl = &c->slots[i];
        n_exp += sl->used && sl->expected;
        n_in += sl->used && sl->expected && (sl->got || sl->missed);
    }
    if (n_in < n_exp)
        tma_log_info(COMP, "round %lld: stopped with %d of %d owners' weights in: not committed, the job ends at "
                           "round %lld",
                     (long long)t, n_in, n_exp, (long long)c->round);
    return n_in < n_exp;
}

/* Raises the flag for round t; workers see it through their watch. */
static tma_status_t raise_agg(coord_t *c, int64_t t)
{
    char *val = tma_job_agg_rec_encode(t, c->epoch);
    tma_status_t st = coord_put_key(c, TMA_KEY_AGG, val, 1);
    free(val);
    return st;
}

/* Averages what arrived, corrects it (LLCG), and broadcasts W[t] to every
 * live member that trains, also those that missed the round. */
static tma_status_t aggregate(coord_t *c, int64_t t, int n_exp, uint32_t *ids, int *n_got_p)
{
    tma_inject_point(&c->inj, "aggregate", t);
    for (int i = 0; i < c->n_slots; i++)
        if (c->slots[i].used && c->slots[i].got)
            dump_tensor(c, "local", c->slots[i].id, t, c->slots[i].buf);
    int n_got = coord_average_slots(c);
    *n_got_p = n_got;
    if (n_got == 0)
        tma_log_warn(COMP, "round %lld: no weights arrived (%d expected); the global model is unchanged",
                     (long long)t, n_exp);
    tma_status_t st = coord_after_average(c, n_got);
    if (st != TMA_OK)
        return st;
    dump_tensor(c, "global", 0, t, c->global);
    tma_inject_point(&c->inj, "broadcast", t);
    tma_job_view_snap_t s;
    if (tma_job_view_snapshot(c->view, &s) == TMA_OK) {
        int np = coord_participants(c, &s, ids);
        tma_job_view_snap_free(&s);
        float keep = c->global[0];
        tma_inject_poison(&c->inj, "global", t, c->global); /* the broadcast only, not the checkpoint */
        coord_push_global(c, ids, np, t);
        c->global[0] = keep;
    }
    return TMA_OK;
}

tma_status_t coord_round(coord_t *c, int64_t t)
{
    tma_job_view_snap_t s;
    tma_status_t st = tma_job_view_snapshot(c->view, &s);
    if (st != TMA_OK)
        return st;
    if ((st = coord_reassert_shards(c, &s)) != TMA_OK) {
        tma_job_view_snap_free(&s);
        return st;
    }
    int n_alive = 0;
    uint32_t *ids = malloc((size_t)(s.n_members + 1) * sizeof *ids);
    uint32_t *alive = coord_member_ids(&s, &n_alive);
    if (ids && alive)
        (void)coord_expect_participants(c, &s, ids);
    tma_job_view_snap_free(&s);
    if (!ids || !alive) {
        free(ids);
        free(alive);
        return TMA_ERR_NOMEM;
    }

    double t0 = tma_clock_now();
    int n_exp = 0, n_got = 0;
    if (c->job->interval_steps <= 0)
        st = raise_agg(c, t);
    if (st == TMA_OK) {
        double deadline, after_first;
        round_deadline(c, &deadline, &after_first);
        coord_collect(c, t, TMA_TAG_LOCAL, deadline, after_first, &n_exp);
        st = cut_short(c, t) ? TMA_ERR_CANCELLED : aggregate(c, t, n_exp, ids, &n_got);
    }
    if (st != TMA_OK) {
        free(ids);
        free(alive);
        return st;
    }
    double agg_s = tma_clock_now() - t0;
    if (n_exp - n_got > 0)
        tma_log_warn(COMP, "round %lld completed with %d of %d owners", (long long)t, n_got, n_exp);
    c->round_time = coord_train_elapsed(c);
    cJSON *rec = coord_round_record(c, t, c->round_time, alive, n_alive, agg_s);
    free(ids);
    free(alive);
    return coord_publish_round(c, t, rec);
}
