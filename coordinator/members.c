/*
 * members.c: what the coordinator knows of its members: one slot each (the
 * receive buffer posted for its tensors, whether it has the global weights,
 * whether it is suspect), and servicing changes between rounds: members
 * gone (the shard policy), members joined (elastic take-over of orphaned or
 * surplus shards), readiness (push the current weights), failed
 * connections (suspects) and suspects fenced after fault.suspect_grace.
 */
#include "coord_int.h"

#include <stdlib.h>
#include <string.h>

#define COMP COORD_COMP

slot_t *coord_slot_find(coord_t *c, uint32_t id)
{
    for (int i = 0; i < c->n_slots; i++)
        if (c->slots[i].used && c->slots[i].id == id)
            return &c->slots[i];
    return NULL;
}

/* One more slot at the end of the array (and room for its contribution). */
static slot_t *slot_append(coord_t *c)
{
    if (c->n_slots == c->cap_slots) {
        int cap = c->cap_slots ? c->cap_slots * 2 : 16;
        slot_t *n = realloc(c->slots, (size_t)cap * sizeof *n);
        if (!n)
            return NULL;
        c->slots = n;
        coord_contrib_t *cn = realloc(c->contrib, (size_t)cap * sizeof *cn);
        if (!cn)
            return NULL;
        c->contrib = cn;
        c->cap_slots = cap;
    }
    slot_t *s = &c->slots[c->n_slots++];
    memset(s, 0, sizeof *s);
    return s;
}

slot_t *coord_slot_get(coord_t *c, uint32_t id)
{
    slot_t *s = coord_slot_find(c, id);
    if (s)
        return s;
    for (int i = 0; i < c->n_slots; i++)
        if (!c->slots[i].used) {
            s = &c->slots[i];
            break;
        }
    if (!s && !(s = slot_append(c)))
        return NULL;
    float *buf = s->buf;
    int32_t *shards = s->shards;
    memset(s, 0, sizeof *s);
    s->buf = buf;
    s->shards = shards;
    s->used = 1;
    s->id = id;
    s->pushed_rev = -1;
    if (!s->buf)
        s->buf = tma_alloc_aligned((size_t)(c->P + c->meta_floats) * sizeof(float));
    if (!s->shards)
        s->shards = malloc((size_t)c->map.n * sizeof *s->shards + 1);
    if (!s->buf || !s->shards) {
        s->used = 0;
        return NULL;
    }
    return s;
}

void coord_slot_post(coord_t *c, slot_t *s)
{
    if (s->posted)
        return;
    if (tma_transport_post(c->tr, s->id, c->vd->tag, s->buf, (size_t)(c->P + c->meta_floats),
                           TMA_TRANSPORT_MEM_HOST) == TMA_OK)
        s->posted = 1;
}

void coord_slot_release(coord_t *c, slot_t *s)
{
    if (s->posted) {
        tma_transport_post_cancel(c->tr, s->buf, 2.0);
        s->posted = 0;
    }
    s->used = 0;
}

static int is_member(const tma_job_view_snap_t *s, uint32_t id)
{
    return tma_job_view_snap_member(s, id) != NULL;
}

/* Asks the transport about this one peer, so any number of connected
 * members (up to TMA_JOB_MAX_WORKERS and beyond, with spares) counts. */
int coord_is_connected(coord_t *c, uint32_t id)
{
    return tma_transport_wait_peer(c->tr, id, 0) == TMA_OK;
}

void coord_mark_suspect(slot_t *sl)
{
    if (!sl->suspect)
        sl->suspect_since = tma_clock_now();
    sl->suspect = 1;
}

uint32_t *coord_member_ids(const tma_job_view_snap_t *s, int *n_p)
{
    uint32_t *ids = malloc((size_t)(s->n_members + 1) * sizeof *ids);
    *n_p = 0;
    for (int i = 0; ids && i < s->n_members; i++)
        ids[(*n_p)++] = s->members[i].rec.id;
    return ids;
}

/* The members that train now: owners with at least one shard (without
 * shards: every ready member), connected, with the global weights pushed;
 * in member-id order, the averaging order.  A member that never connected
 * (nothing reaches this coordinator's address) is none. */
int coord_participants(coord_t *c, const tma_job_view_snap_t *s, uint32_t *ids)
{
    int n = 0;
    for (int i = 0; i < s->n_members; i++) {
        uint32_t id = s->members[i].rec.id;
        const tma_job_view_ready_t *r = tma_job_view_snap_ready(s, id);
        if (!r)
            continue;
        if (c->vd->uses_shards && tma_shard_map_count(&c->map, id, NULL) == 0)
            continue;
        slot_t *sl = coord_slot_find(c, id);
        if (sl && sl->suspect && coord_is_connected(c, id)) {
            tma_log_info(COMP, "member %u reconnected", id);
            sl->suspect = 0;
            sl->revoked = 0;
            coord_slot_post(c, sl);
        }
        if (!sl || sl->pushed_rev < 0 || sl->suspect || !coord_is_connected(c, id))
            continue;
        ids[n++] = id;
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            uint32_t t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    return n;
}

int coord_count_participants(coord_t *c, int *owners_p)
{
    tma_job_view_snap_t s;
    if (tma_job_view_snapshot(c->view, &s) != TMA_OK)
        return -1;
    uint32_t *ids = malloc((size_t)(s.n_members + 1) * sizeof *ids);
    int n = ids ? coord_participants(c, &s, ids) : -1;
    int owners = 0;
    for (int i = 0; i < s.n_members; i++)
        owners += !c->vd->uses_shards || tma_shard_map_count(&c->map, s.members[i].rec.id, NULL) > 0;
    tma_job_view_snap_free(&s);
    free(ids);
    if (owners_p)
        *owners_p = owners;
    return n;
}

/* Opens a round's bookkeeping: the participants (into ids, returned count)
 * are expected, with the lease they hold now; every other slot is not. */
int coord_expect_participants(coord_t *c, const tma_job_view_snap_t *s, uint32_t *ids)
{
    int n = coord_participants(c, s, ids);
    for (int i = 0; i < c->n_slots; i++)
        c->slots[i].expected = c->slots[i].got = c->slots[i].missed = 0;
    for (int i = 0; i < n; i++) {
        slot_t *sl = coord_slot_find(c, ids[i]);
        const tma_job_member_rec_t *m = tma_job_view_snap_member(s, ids[i]);
        sl->expected = 1;
        sl->lease = m ? m->lease : 0;
        coord_slot_post(c, sl);
    }
    return n;
}

/* Shards that members refused (their ready records list them: the file is
 * missing or wrong on the member's node) are remembered, and one that its
 * owner refused is dealt to a member that did not refuse it.  Refusals of
 * members that are gone are forgotten. */
static tma_status_t apply_refusals(coord_t *c, const tma_job_view_snap_t *s, const tma_live_member_t *live,
                                   int n_live, tma_shard_move_t *mv)
{
    for (int i = 0; i < c->map.n_refusals;) {
        int64_t m = c->map.refusals[i].member;
        if (!is_member(s, (uint32_t)m))
            tma_shard_map_forget(&c->map, m);
        else
            i++;
    }
    tma_status_t st = TMA_OK;
    for (int i = 0; i < s->n_ready && st == TMA_OK; i++) {
        const tma_job_view_ready_t *r = &s->ready[i];
        const tma_job_member_rec_t *m = tma_job_view_snap_member(s, r->id);
        for (int j = 0; m && j < r->rec.n_refused && st == TMA_OK; j++) {
            int32_t k = r->rec.refused[j];
            if (k >= c->map.n)
                continue;
            int fresh = tma_shard_map_refuse(&c->map, k, r->id);
            if (fresh < 0)
                return TMA_ERR_NOMEM;
            if (fresh)
                tma_log_warn(COMP, "member %u (%s on %s) refused shard %d: its file is missing or wrong on that "
                                   "node",
                             r->id, m->name, m->host, k);
            int n = tma_policy_refused(&c->map, k, live, n_live, mv);
            if (n > 0)
                st = coord_write_moves(c, mv, n, "shard file missing on its node");
            if (n > 0 && mv[0].to < 0)
                tma_log_error(COMP, "shard %d: every live member refused it (no node of theirs holds its file): "
                                    "nobody trains it until a worker that has it joins",
                              k);
        }
    }
    return st;
}

/* Owners whose member key is gone (lease expired, left) lose their shards
 * by the policy; members without shards may take some (when training). */
static tma_status_t apply_policies(coord_t *c, const tma_job_view_snap_t *s, const tma_live_member_t *live,
                                   int n_live, tma_shard_move_t *mv, int training)
{
    tma_status_t st = TMA_OK;
    for (int k = 0; k < c->map.n && st == TMA_OK; k++) {
        int64_t owner = c->map.owner[k];
        if (owner < 0 || is_member(s, (uint32_t)owner))
            continue;
        int n = tma_policy_lost(&c->map, owner, c->job->on_failure, live, n_live, mv);
        cJSON_AddItemToArray(c->lost, cJSON_CreateNumber((double)owner));
        tma_log_warn(COMP, "member %lld is gone (its lease expired or it left)", (long long)owner);
        st = coord_write_moves(c, mv, n, "owner lost");
    }
    for (int i = 0; i < n_live && st == TMA_OK && training; i++) {
        if (tma_shard_map_count(&c->map, live[i].id, NULL) > 0)
            continue;
        int n = tma_policy_joined(&c->map, live[i].id, live[i].backup, c->job->on_failure, mv);
        if (n > 0)
            st = coord_write_moves(c, mv, n, live[i].backup ? "backup takes over" : "joined");
    }
    return st;
}

/* A member that (re)loaded its shards gets the current global weights, so
 * it starts from them: the first time, and whenever its ready record says
 * it holds none (`fresh`: it loaded its shards from none, as after losing
 * them all; another change of its shards keeps its own weights).  With
 * shards: only when ready for exactly the shards it owns now.  With
 * `expected_only` (while a round collects), only members that round
 * expects: one that joins meanwhile starts from the round's average. */
void coord_push_ready(coord_t *c, const tma_job_view_snap_t *s, int expected_only)
{
    uint32_t *push = malloc((size_t)(s->n_ready + 1) * sizeof *push);
    int np = 0;
    for (int i = 0; push && i < s->n_ready; i++) {
        const tma_job_view_ready_t *r = &s->ready[i];
        if (!is_member(s, r->id))
            continue;
        if (c->vd->uses_shards) {
            int owned = tma_shard_map_count(&c->map, r->id, NULL);
            int match = owned == r->rec.n_shards && owned > 0;
            for (int j = 0; match && j < r->rec.n_shards; j++)
                match = r->rec.shards[j] < c->map.n && c->map.owner[r->rec.shards[j]] == (int64_t)r->id;
            if (!match)
                continue;
        }
        /* One not connected yet gets them once it is (coord_idle). */
        if (!coord_is_connected(c, r->id))
            continue;
        slot_t *sl = expected_only ? coord_slot_find(c, r->id) : coord_slot_get(c, r->id);
        if (!sl || sl->pushed_rev >= r->mod_revision || (expected_only && (!sl->expected || sl->got)))
            continue;
        int had = sl->pushed_rev >= 0;
        sl->pushed_rev = r->mod_revision;
        coord_slot_post(c, sl);
        if (!had || r->rec.fresh)
            push[np++] = r->id;
    }
    if (np)
        tma_log_info(COMP, "%d member(s) ready: sending them the current global weights", np);
    coord_push_global(c, push, np, c->vd->averages == TMA_AVERAGE_GRADS ? c->ggs_step : c->round);
    free(push);
}

tma_status_t coord_reassert_shards(coord_t *c, const tma_job_view_snap_t *s)
{
    tma_status_t st = TMA_OK;
    if (!c->map_ready || !c->vd->uses_shards)
        return TMA_OK;
    for (int k = 0; k < c->map.n && st == TMA_OK; k++) {
        int64_t owner = c->map.owner[k];
        if (owner < 0 || (k < s->n_shards && s->shard_present[k] && s->shards[k].owner == owner))
            continue;
        char key[TMA_KEY_MAX];
        tma_job_key_n(key, c->job->name, TMA_KEY_SHARDS, k);
        tma_job_shard_rec_t r = {k, owner, c->epoch, c->round};
        char *val = tma_job_shard_rec_encode(&r);
        const char *kp[1] = {key};
        tma_log_warn(COMP, "%s in etcd does not name member %lld, this coordinator's owner of shard %d "
                           "(damaged, deleted or not seen yet): writing it again",
                     key, (long long)owner, k);
        st = val ? coord_guarded_put(c, 1, kp, &val, 1) : TMA_ERR_NOMEM;
        free(val);
    }
    return st;
}

/* Looks at the job view: fencing by a newer epoch, the policies, slots of
 * members that are gone, readiness. */
tma_status_t coord_service_view(coord_t *c, int training)
{
    tma_job_view_snap_t s;
    tma_status_t st = tma_job_view_snapshot(c->view, &s);
    if (st != TMA_OK)
        return st;
    c->seen_version = s.version;
    /* Only a newer epoch fences: epochs are create revisions, so an older
     * one in the view is the view not having caught up with this leader's
     * campaign yet (a takeover right after the old key's lease lapsed). */
    if (s.has_coord && s.coord_epoch > c->epoch) {
        tma_log_error(COMP, "the coordinator key now belongs to epoch %llu: this one (epoch %llu) is fenced",
                      (unsigned long long)s.coord_epoch, (unsigned long long)c->epoch);
        __atomic_store_n(&c->fenced, 1, __ATOMIC_SEQ_CST);
        tma_job_view_snap_free(&s);
        return TMA_ERR_FENCED;
    }
    if ((st = coord_reassert_leader(c, &s)) != TMA_OK) {
        tma_job_view_snap_free(&s);
        return st;
    }
    tma_live_member_t *live = malloc((size_t)(s.n_members + 1) * sizeof *live);
    tma_shard_move_t *mv = malloc((size_t)(c->map.n + 1) * sizeof *mv);
    if (!live || !mv) {
        free(live);
        free(mv);
        tma_job_view_snap_free(&s);
        return TMA_ERR_NOMEM;
    }
    int n_live = 0;
    for (int i = 0; i < s.n_members; i++) {
        live[n_live].id = s.members[i].rec.id;
        live[n_live].backup = s.members[i].rec.backup;
        n_live++;
    }
    if (c->map_ready && c->vd->uses_shards && (st = apply_refusals(c, &s, live, n_live, mv)) == TMA_OK)
        st = apply_policies(c, &s, live, n_live, mv, training);
    for (int i = 0; i < c->n_slots; i++)
        if (c->slots[i].used && !is_member(&s, c->slots[i].id))
            coord_slot_release(c, &c->slots[i]);
    if (training && st == TMA_OK)
        coord_push_ready(c, &s, 0);
    if (c->prom) {
        int workers = 0, backups = 0;
        for (int i = 0; i < s.n_members; i++) {
            int owns = c->map_ready && tma_shard_map_count(&c->map, s.members[i].rec.id, NULL) > 0;
            if (c->vd->uses_shards ? owns : !s.members[i].rec.backup)
                workers++;
            else if (s.members[i].rec.backup)
                backups++;
        }
        coord_prom_members(c->prom, workers, backups);
    }
    free(live);
    free(mv);
    tma_job_view_snap_free(&s);
    return st;
}

/* A member whose connection failed and that has not reconnected within
 * fault.suspect_grace is fenced now rather than when its lease expires: the
 * coordinator revokes its lease, its member key goes, and the policy moves
 * its shards at once (a SIGKILLed worker's backup trains about a second
 * later instead of a lease TTL later).  A worker that was alive after all
 * (a flapping link) finds its lease gone and registers again, as after any
 * fencing; its weights were refused meanwhile (suspect). */
static void fence_suspects(coord_t *c)
{
    double now = tma_clock_now();
    tma_job_view_snap_t s;
    int have = 0;
    for (int i = 0; i < c->n_slots; i++) {
        slot_t *sl = &c->slots[i];
        if (!sl->used || !sl->suspect || sl->revoked || now - sl->suspect_since < c->job->suspect_grace ||
            coord_is_connected(c, sl->id))
            continue;
        if (!have && tma_job_view_snapshot(c->view, &s) != TMA_OK)
            return;
        have = 1;
        sl->revoked = 1;
        const tma_job_member_rec_t *m = tma_job_view_snap_member(&s, sl->id);
        if (!m)
            continue; /* already gone */
        tma_status_t st = tma_kv_lease_revoke(c->kv, m->lease);
        if (st == TMA_OK || st == TMA_ERR_LEASE_EXPIRED || st == TMA_ERR_NOT_FOUND)
            tma_log_warn(COMP, "member %u: no reconnection %.1f s after its connection failed: its lease is "
                               "revoked (fenced)",
                         sl->id, now - sl->suspect_since);
        else
            tma_log_warn(COMP, "member %u: revoking its lease failed (%s); it ends when the lease expires",
                         sl->id, tma_status_str(st));
    }
    if (have)
        tma_job_view_snap_free(&s);
}

/* Notes connection events between rounds.  Tensors stay queued: in step
 * mode a worker's weights can arrive before the coordinator opens the round;
 * stale ones are refused when the round looks at them.  Returns 1 when a
 * member connected (it may be ready and waiting for the weights). */
static int service_transport(coord_t *c)
{
    int connected = 0;
    tma_transport_msg_t m;
    memset(&m, 0, sizeof m);
    while (tma_transport_recv(c->tr, TMA_TRANSPORT_ANY_PEER, COORD_EVENTS_ONLY_TAG, 0, &m) == TMA_OK) {
        slot_t *sl = coord_slot_find(c, m.peer);
        connected |= m.kind == TMA_TRANSPORT_MSG_EVENT && m.event.kind == TMA_TRANSPORT_EV_CONNECTED;
        if (m.kind == TMA_TRANSPORT_MSG_EVENT && m.event.kind != TMA_TRANSPORT_EV_CONNECTED) {
            tma_log_warn(COMP, "member %u: connection %s (%s): suspect until it reconnects or its lease "
                               "expires",
                         m.peer, tma_transport_event_str(m.event.kind), tma_status_str(m.event.reason));
            /* A replaced connection (the member reconnected) is not a failure. */
            if (sl && !coord_is_connected(c, m.peer))
                coord_mark_suspect(sl);
        }
        tma_transport_msg_release(c->tr, &m);
        memset(&m, 0, sizeof m);
    }
    return connected;
}

/* Waits up to `timeout` while servicing changes. */
tma_status_t coord_idle(coord_t *c, double timeout, int training)
{
    double end = tma_clock_now() + timeout;
    for (;;) {
        int connected = service_transport(c);
        fence_suspects(c);
        uint64_t ver = tma_job_view_wait(c->view, c->seen_version, 0);
        if (ver != c->seen_version || connected) {
            tma_status_t st = coord_service_view(c, training);
            if (st != TMA_OK)
                return st;
        }
        double left = end - tma_clock_now();
        if (left <= 0 || coord_stopping(c))
            return TMA_OK;
        tma_job_view_wait(c->view, c->seen_version, TMA_MIN(left, 0.05));
    }
}
