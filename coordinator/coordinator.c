/*
 * coordinator.c: Algorithm 1 (time-based model aggregation) with the
 * baselines in the same loop, and the failure handling of DESIGN §7.
 *
 * One thread runs the job: it alternates between servicing changes (the
 * job view: members that came or went, readiness; the transport: peers that
 * failed) and rounds.  A round raises agg = t, collects the local weights of
 * the live owners until all arrived or the round deadline passed (a peer
 * failure or a deleted member key takes a worker out of the round at once),
 * averages what arrived in member-id order, broadcasts, checkpoints, records
 * the round in etcd (state + metrics/<t> in one transaction guarded by the
 * leader's epoch) and hands the model to the evaluator thread.
 */
#include "coord_int.h"

#include "tma_transport.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP "coordinator"

/* What the coordinator keeps about a member it has dealt with. */
typedef struct slot {
    uint32_t id;
    int used;
    float *buf; /* P + TMA_META_FLOATS, posted for its LOCAL/GRADS tensors */
    int posted;
    int64_t pushed_rev; /* ready mod_revision for which the global weights were pushed */
    int suspect;        /* its connection failed: out of rounds until it reconnects or its lease ends */
    double suspect_since; /* when it became suspect */
    int revoked;        /* its lease was revoked for not reconnecting (fence_suspects) */
    /* this round */
    int expected, got, missed;
    tma_msg_meta_t meta;
    int64_t lease;
    double weight;
    /* GGS bookkeeping: steps taken part in since the last evaluation round */
    int64_t steps;
    double loss_sum;
} slot_t;

typedef struct coord {
    const tma_coordinator_opts_t *o;
    volatile sig_atomic_t *stop_flag;
    tma_kv_t *kv;
    tma_jobview_t *view;
    tma_job_t *job;
    tma_inject_t inj;
    tma_gnn_config_t cfg;
    tma_graph_t *graph;
    tma_partition_info_t *pinfo;
    tma_shard_map_t map;
    int map_ready; /* the initial deal happened */

    int64_t lease;
    tma_lease_guard_t *lease_guard;
    uint64_t epoch;
    int fenced;
    tma_transport_t *tr;

    int64_t P;
    float *global;
    double *acc;
    slot_t *slots;
    int n_slots, cap_slots;

    char *run_dir, *checkpoint_path, *metrics_path, *result_path, *plot_path;
    coord_eval_t *ev;
    tma_gnn_trainer_t *server; /* LLCG correction and the GGS replica */

    int64_t round;
    double elapsed_base; /* training seconds before clock_start */
    double clock_start;  /* monotonic; 0 while not training */
    uint64_t seen_version;
    cJSON *moves;        /* shard moves since the last round record */
    cJSON *lost;         /* members lost since the last round record */
    int64_t ggs_step;
} coord_t;

/* ------------------------------------------------------------------ small helpers */

static int stopping(coord_t *c)
{
    return (c->stop_flag && *c->stop_flag) || __atomic_load_n(&c->fenced, __ATOMIC_SEQ_CST);
}

static double train_elapsed(const coord_t *c)
{
    return c->elapsed_base + (c->clock_start > 0 ? tma_clock_now() - c->clock_start : 0);
}

static slot_t *slot_find(coord_t *c, uint32_t id)
{
    for (int i = 0; i < c->n_slots; i++)
        if (c->slots[i].used && c->slots[i].id == id)
            return &c->slots[i];
    return NULL;
}

static slot_t *slot_get(coord_t *c, uint32_t id)
{
    slot_t *s = slot_find(c, id);
    if (s)
        return s;
    for (int i = 0; i < c->n_slots; i++)
        if (!c->slots[i].used) {
            s = &c->slots[i];
            break;
        }
    if (!s) {
        if (c->n_slots == c->cap_slots) {
            int cap = c->cap_slots ? c->cap_slots * 2 : 16;
            slot_t *n = realloc(c->slots, (size_t)cap * sizeof *n);
            if (!n)
                return NULL;
            c->slots = n;
            c->cap_slots = cap;
        }
        s = &c->slots[c->n_slots++];
        memset(s, 0, sizeof *s);
    }
    float *buf = s->buf;
    memset(s, 0, sizeof *s);
    s->buf = buf;
    s->used = 1;
    s->id = id;
    s->pushed_rev = -1;
    if (!s->buf)
        s->buf = tma_alloc_aligned((size_t)(c->P + TMA_META_FLOATS) * sizeof(float));
    if (!s->buf) {
        s->used = 0;
        return NULL;
    }
    return s;
}

static void slot_post(coord_t *c, slot_t *s)
{
    if (s->posted)
        return;
    uint32_t tag = c->job->variant == TMA_VARIANT_GGS ? TMA_TAG_GRADS : TMA_TAG_LOCAL;
    if (tma_transport_post(c->tr, s->id, tag, s->buf, (size_t)(c->P + TMA_META_FLOATS),
                           TMA_TRANSPORT_MEM_HOST) == TMA_OK)
        s->posted = 1;
}

static void slot_release(coord_t *c, slot_t *s)
{
    if (s->posted) {
        tma_transport_post_cancel(c->tr, s->buf, 2.0);
        s->posted = 0;
    }
    s->used = 0;
}

static void add_ids(cJSON *arr, const uint32_t *ids, int n)
{
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
}

/* ------------------------------------------------------------------ etcd writes guarded by the epoch */

/* Runs puts (and deletes for NULL values) in one transaction that holds only
 * while this coordinator's key still carries its epoch.  A failed compare
 * means another coordinator took over: this one is fenced. */
static tma_status_t guarded_put(coord_t *c, int n, const char *const *keys, char *const *vals)
{
    char ckey[TMA_KEY_MAX];
    tma_fault_key(ckey, c->job->name, "coordinator");
    tma_kv_cmp_t cmp = {ckey, TMA_KV_CMP_CREATE, TMA_KV_EQUAL, (int64_t)c->epoch, NULL, 0};
    tma_kv_op_t ops[16];
    if (n > 16)
        return TMA_ERR_INVALID;
    for (int i = 0; i < n; i++) {
        memset(&ops[i], 0, sizeof ops[i]);
        ops[i].key = keys[i];
        if (vals[i]) {
            ops[i].type = TMA_KV_OP_PUT;
            ops[i].value = vals[i];
            ops[i].value_len = strlen(vals[i]);
        } else {
            ops[i].type = TMA_KV_OP_DELETE;
        }
    }
    tma_kv_txn_t txn = {&cmp, 1, ops, (size_t)n, NULL, 0};
    tma_kv_result_t res;
    memset(&res, 0, sizeof res);
    tma_status_t st = tma_kv_txn(c->kv, &txn, &res);
    if (st == TMA_OK && !res.succeeded) {
        tma_log_error(COMP, "another coordinator leads job %s now: this one (epoch %llu) is fenced and stops",
                      c->job->name, (unsigned long long)c->epoch);
        __atomic_store_n(&c->fenced, 1, __ATOMIC_SEQ_CST);
        st = TMA_ERR_FENCED;
    }
    tma_kv_result_free(&res);
    return st;
}

/* Retries a guarded write while etcd is unreachable (a short outage pauses
 * the job rather than failing it). */
static tma_status_t guarded_put_retry(coord_t *c, int n, const char *const *keys, char *const *vals)
{
    double warn_at = tma_clock_now() + 2.0;
    for (;;) {
        tma_status_t st = guarded_put(c, n, keys, vals);
        if (st == TMA_OK || tma_status_group(st) != TMA_GROUP_PEER || stopping(c))
            return st;
        if (tma_clock_now() > warn_at) {
            tma_log_warn(COMP, "etcd is unreachable (%s); waiting for it", tma_status_str(st));
            warn_at = tma_clock_now() + 10.0;
        }
        tma_sleep(0.5);
    }
}

static tma_status_t write_moves(coord_t *c, const tma_shard_move_t *mv, int n, const char *reason)
{
    for (int i = 0; i < n; i += 8) {
        int m = TMA_MIN(8, n - i);
        char keys[8][TMA_KEY_MAX];
        const char *kp[8];
        char *vals[8];
        for (int j = 0; j < m; j++) {
            tma_shard_rec_t r = {mv[i + j].shard, mv[i + j].to, c->epoch, c->round};
            tma_fault_key_n(keys[j], c->job->name, "shards", mv[i + j].shard);
            kp[j] = keys[j];
            vals[j] = tma_shard_rec_encode(&r);
        }
        tma_status_t st = guarded_put_retry(c, m, kp, vals);
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
                         (long long)mv[i].from, reason, tma_policy_name(c->job->on_failure));
    }
    return TMA_OK;
}

/* ------------------------------------------------------------------ sending global weights */

/* Sends the global weights, labelled with `round` (GGS: the step). */
static void push_global(coord_t *c, const uint32_t *ids, int n, int64_t round)
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

/* ------------------------------------------------------------------ servicing changes */

static int is_member(const tma_jobview_snap_t *s, uint32_t id)
{
    return tma_jobview_snap_member(s, id) != NULL;
}

/* The members that train now: owners with at least one shard (GGS: every
 * ready member), connected, with the global weights pushed. */
static int is_connected(coord_t *c, uint32_t id)
{
    uint32_t peers[1024];
    size_t n = 0;
    tma_transport_peers(c->tr, peers, TMA_ARRAY_LEN(peers), &n);
    for (size_t i = 0; i < n && i < TMA_ARRAY_LEN(peers); i++)
        if (peers[i] == id)
            return 1;
    return 0;
}

static int participants(coord_t *c, const tma_jobview_snap_t *s, uint32_t *ids)
{
    int n = 0;
    for (int i = 0; i < s->n_members; i++) {
        uint32_t id = s->members[i].rec.id;
        const tma_jobview_ready_t *r = tma_jobview_snap_ready(s, id);
        if (!r)
            continue;
        if (c->job->variant != TMA_VARIANT_GGS && tma_shard_map_count(&c->map, id, NULL) == 0)
            continue;
        slot_t *sl = slot_find(c, id);
        if (sl && sl->suspect && is_connected(c, id)) {
            tma_log_info(COMP, "member %u reconnected", id);
            sl->suspect = 0;
            sl->revoked = 0;
            slot_post(c, sl);
        }
        if (!sl || sl->pushed_rev < 0 || sl->suspect)
            continue;
        ids[n++] = id;
    }
    /* member-id order: the averaging order */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            uint32_t t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    return n;
}

/* Opens a round's bookkeeping: the participants (into ids, returned count)
 * are expected, with the lease they hold now; every other slot is not. */
static int expect_participants(coord_t *c, const tma_jobview_snap_t *s, uint32_t *ids)
{
    int n = participants(c, s, ids);
    for (int i = 0; i < c->n_slots; i++)
        c->slots[i].expected = c->slots[i].got = c->slots[i].missed = 0;
    for (int i = 0; i < n; i++) {
        slot_t *sl = slot_find(c, ids[i]);
        const tma_member_rec_t *m = tma_jobview_snap_member(s, ids[i]);
        sl->expected = 1;
        sl->lease = m ? m->lease : 0;
        slot_post(c, sl);
    }
    return n;
}

/* Looks at the job view: members gone (policy), members joined (elastic
 * take-over of orphaned or surplus shards), readiness (push the weights). */
static tma_status_t service_view(coord_t *c, int training)
{
    tma_jobview_snap_t s;
    tma_status_t st = tma_jobview_snapshot(c->view, &s);
    if (st != TMA_OK)
        return st;
    c->seen_version = s.version;
    if (s.has_coord && s.coord_epoch != c->epoch) {
        tma_log_error(COMP, "the coordinator key now belongs to epoch %llu: this one (epoch %llu) is fenced",
                      (unsigned long long)s.coord_epoch, (unsigned long long)c->epoch);
        __atomic_store_n(&c->fenced, 1, __ATOMIC_SEQ_CST);
        tma_jobview_snap_free(&s);
        return TMA_ERR_FENCED;
    }
    tma_live_member_t *live = malloc((size_t)(s.n_members + 1) * sizeof *live);
    tma_shard_move_t *mv = malloc((size_t)(c->map.n + 1) * sizeof *mv);
    if (!live || !mv) {
        free(live);
        free(mv);
        tma_jobview_snap_free(&s);
        return TMA_ERR_NOMEM;
    }
    int n_live = 0;
    for (int i = 0; i < s.n_members; i++) {
        live[n_live].id = s.members[i].rec.id;
        live[n_live].backup = s.members[i].rec.backup;
        n_live++;
    }
    if (c->map_ready && c->job->variant != TMA_VARIANT_GGS) {
        /* Owners whose member key is gone (lease expired, left): apply the policy. */
        for (int k = 0; k < c->map.n && st == TMA_OK; k++) {
            int64_t owner = c->map.owner[k];
            if (owner < 0 || is_member(&s, (uint32_t)owner))
                continue;
            int n = tma_policy_lost(&c->map, owner, c->job->on_failure, live, n_live, mv);
            cJSON_AddItemToArray(c->lost, cJSON_CreateNumber((double)owner));
            tma_log_warn(COMP, "member %lld is gone (its lease expired or it left)", (long long)owner);
            st = write_moves(c, mv, n, "owner lost");
        }
        /* Members without shards: the policy decides whether they take one. */
        for (int i = 0; i < n_live && st == TMA_OK && training; i++) {
            if (tma_shard_map_count(&c->map, live[i].id, NULL) > 0)
                continue;
            int n = tma_policy_joined(&c->map, live[i].id, live[i].backup, c->job->on_failure, mv);
            if (n > 0)
                st = write_moves(c, mv, n, live[i].backup ? "backup takes over" : "joined");
        }
    }
    /* Slots of members that are gone. */
    for (int i = 0; i < c->n_slots; i++)
        if (c->slots[i].used && !is_member(&s, c->slots[i].id))
            slot_release(c, &c->slots[i]);
    /* Readiness: a member that (re)loaded its shards gets the current global
     * weights, so it starts from them. */
    if (training && st == TMA_OK) {
        uint32_t *push = malloc((size_t)(s.n_ready + 1) * sizeof *push);
        int np = 0;
        for (int i = 0; push && i < s.n_ready; i++) {
            const tma_jobview_ready_t *r = &s.ready[i];
            if (!is_member(&s, r->id))
                continue;
            if (c->job->variant != TMA_VARIANT_GGS) {
                /* Ready for exactly the shards it owns now. */
                int owned = tma_shard_map_count(&c->map, r->id, NULL);
                int match = owned == r->rec.n_shards && owned > 0;
                for (int j = 0; match && j < r->rec.n_shards; j++)
                    match = r->rec.shards[j] < c->map.n && c->map.owner[r->rec.shards[j]] == (int64_t)r->id;
                if (!match)
                    continue;
            }
            slot_t *sl = slot_get(c, r->id);
            if (!sl || sl->pushed_rev >= r->mod_revision)
                continue;
            int had = sl->pushed_rev >= 0;
            sl->pushed_rev = r->mod_revision;
            slot_post(c, sl);
            if (!had)
                push[np++] = r->id;
        }
        if (np)
            tma_log_info(COMP, "%d member(s) ready: sending them the current global weights", np);
        push_global(c, push, np, c->job->variant == TMA_VARIANT_GGS ? c->ggs_step : c->round);
        free(push);
    }
    free(live);
    free(mv);
    tma_jobview_snap_free(&s);
    return st;
}

/* A tag no tensor carries: receiving with it returns connection events only
 * (events match any tag), leaving tensors queued for their round. */
#define EVENTS_ONLY_TAG 0x7ffffff0u

static void mark_suspect(slot_t *sl)
{
    if (!sl->suspect)
        sl->suspect_since = tma_clock_now();
    sl->suspect = 1;
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
    tma_jobview_snap_t s;
    int have = 0;
    for (int i = 0; i < c->n_slots; i++) {
        slot_t *sl = &c->slots[i];
        if (!sl->used || !sl->suspect || sl->revoked || now - sl->suspect_since < c->job->suspect_grace ||
            is_connected(c, sl->id))
            continue;
        if (!have && tma_jobview_snapshot(c->view, &s) != TMA_OK)
            return;
        have = 1;
        sl->revoked = 1;
        const tma_member_rec_t *m = tma_jobview_snap_member(&s, sl->id);
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
        tma_jobview_snap_free(&s);
}

/* Notes connection events between rounds.  Tensors stay queued: in step
 * mode a worker's weights can arrive before the coordinator opens the round;
 * stale ones are refused when the round looks at them. */
static void service_transport(coord_t *c)
{
    tma_transport_msg_t m;
    memset(&m, 0, sizeof m);
    while (tma_transport_recv(c->tr, TMA_TRANSPORT_ANY_PEER, EVENTS_ONLY_TAG, 0, &m) == TMA_OK) {
        slot_t *sl = slot_find(c, m.peer);
        if (m.kind == TMA_TRANSPORT_MSG_EVENT && m.event.kind != TMA_TRANSPORT_EV_CONNECTED) {
            tma_log_warn(COMP, "member %u: connection %s (%s): suspect until it reconnects or its lease "
                               "expires",
                         m.peer, tma_transport_event_str(m.event.kind), tma_status_str(m.event.reason));
            /* A replaced connection (the member reconnected) is not a failure. */
            if (sl && !is_connected(c, m.peer))
                mark_suspect(sl);
        }
        tma_transport_msg_release(c->tr, &m);
        memset(&m, 0, sizeof m);
    }
}

/* Waits up to `timeout` while servicing changes. */
static tma_status_t idle(coord_t *c, double timeout, int training)
{
    double end = tma_clock_now() + timeout;
    for (;;) {
        service_transport(c);
        fence_suspects(c);
        uint64_t ver = tma_jobview_wait(c->view, c->seen_version, 0);
        if (ver != c->seen_version) {
            tma_status_t st = service_view(c, training);
            if (st != TMA_OK)
                return st;
        }
        double left = end - tma_clock_now();
        if (left <= 0 || stopping(c))
            return TMA_OK;
        tma_jobview_wait(c->view, c->seen_version, TMA_MIN(left, 0.05));
    }
}

/* ------------------------------------------------------------------ a round */

/* Collects tensors of round t from the expected members until all arrived,
 * the deadline passed, or every one still missing has failed. */
static void collect(coord_t *c, int64_t t, uint32_t tag, double deadline, int *n_exp_p)
{
    int n_exp = 0, n_got = 0, n_missed = 0;
    for (int i = 0; i < c->n_slots; i++)
        if (c->slots[i].used && c->slots[i].expected)
            n_exp++;
    *n_exp_p = n_exp;
    while (n_got + n_missed < n_exp && tma_clock_now() < deadline && !stopping(c)) {
        tma_transport_msg_t m;
        memset(&m, 0, sizeof m);
        double left = deadline - tma_clock_now();
        tma_status_t st = tma_transport_recv(c->tr, TMA_TRANSPORT_ANY_PEER, tag, TMA_MIN(left, 0.05), &m);
        if (st == TMA_OK) {
            slot_t *sl = slot_find(c, m.peer);
            if (m.kind == TMA_TRANSPORT_MSG_EVENT) {
                if (m.event.kind != TMA_TRANSPORT_EV_CONNECTED && sl && !is_connected(c, m.peer)) {
                    mark_suspect(sl);
                    if (sl->expected && !sl->got && !sl->missed) {
                        sl->missed = 1;
                        n_missed++;
                        tma_log_warn(COMP, "round %lld: member %u failed mid-round (%s): the round goes on "
                                           "without it",
                                     (long long)t, m.peer, tma_status_str(m.event.reason));
                    }
                }
            } else {
                const char *why = NULL;
                tma_msg_meta_t meta;
                if (!sl || !sl->expected)
                    why = "not an owner in this round";
                else if (sl->got)
                    why = "a second tensor in one round";
                else if (m.meta.epoch != c->epoch)
                    why = "a stale coordinator epoch";
                else if ((int64_t)m.meta.round != t)
                    why = "another round";
                else if (m.count != (size_t)(c->P + TMA_META_FLOATS))
                    why = "the wrong size";
                else if (tma_msg_meta_unpack(m.data + c->P, &meta) != TMA_OK)
                    why = "a malformed meta block";
                else if (meta.lease != sl->lease)
                    why = "a lease that is not its current one (a stale incarnation)";
                if (!why && c->job->variant != TMA_VARIANT_GGS) {
                    /* Every shard it trained must be one it owns now. */
                    int owned = tma_shard_map_count(&c->map, m.peer, NULL);
                    if ((int)meta.n_shards != owned)
                        why = "trained on shards it does not own";
                    for (uint32_t j = 0; !why && j < meta.n_shards; j++)
                        if (meta.shards[j] >= c->map.n || c->map.owner[meta.shards[j]] != (int64_t)m.peer)
                            why = "trained on shards it does not own";
                }
                if (why) {
                    tma_log_warn(COMP, "round %lld: refused a tensor from member %u: %s", (long long)t, m.peer,
                                 why);
                } else {
                    if (!m.in_place)
                        memcpy(sl->buf, m.data, (size_t)(c->P + TMA_META_FLOATS) * sizeof(float));
                    sl->meta = meta;
                    sl->got = 1;
                    n_got++;
                }
                if (sl && m.in_place)
                    sl->posted = 0;
            }
            tma_transport_msg_release(c->tr, &m);
            if (sl && sl->used && !sl->got)
                slot_post(c, sl);
        }
        /* A member whose key vanished will not send. */
        if (tma_jobview_wait(c->view, c->seen_version, 0) != c->seen_version) {
            tma_jobview_snap_t s;
            if (tma_jobview_snapshot(c->view, &s) == TMA_OK) {
                for (int i = 0; i < c->n_slots; i++) {
                    slot_t *sl = &c->slots[i];
                    if (sl->used && sl->expected && !sl->got && !sl->missed && !is_member(&s, sl->id)) {
                        sl->missed = 1;
                        n_missed++;
                        tma_log_warn(COMP, "round %lld: member %u is gone: the round goes on without it",
                                     (long long)t, sl->id);
                    }
                }
                tma_jobview_snap_free(&s);
            }
        }
    }
}

/* Weighted mean of what arrived, in member-id order, accumulated in double. */
static int average(coord_t *c, int grads)
{
    double wsum = 0;
    int n = 0;
    memset(c->acc, 0, (size_t)c->P * sizeof *c->acc);
    for (int pass = 0; pass < 1; pass++) {
        /* slots are not sorted: visit ids in increasing order */
        uint32_t last = 0;
        int first = 1;
        for (;;) {
            slot_t *next = NULL;
            for (int i = 0; i < c->n_slots; i++) {
                slot_t *sl = &c->slots[i];
                if (!sl->used || !sl->got || (!first && sl->id <= last))
                    continue;
                if (!next || sl->id < next->id)
                    next = sl;
            }
            if (!next)
                break;
            first = 0;
            last = next->id;
            double w = 1.0;
            if (!grads) {
                if (c->job->weighted) {
                    int64_t e = 0;
                    tma_shard_map_count(&c->map, next->id, &e);
                    w = (double)e;
                } else {
                    w = (double)tma_shard_map_count(&c->map, next->id, NULL);
                }
                if (!(w > 0))
                    w = 1.0;
            }
            next->weight = w;
            const float *x = next->buf;
            double *acc = c->acc;
            int64_t P = c->P;
#pragma omp parallel for schedule(static)
            for (int64_t j = 0; j < P; j++)
                acc[j] += w * (double)x[j];
            wsum += w;
            n++;
        }
    }
    if (n == 0)
        return 0;
    float *g = c->global;
    const double *acc = c->acc;
    int64_t P = c->P;
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < P; j++)
        g[j] = (float)(acc[j] / wsum);
    return n;
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

/* The round record for metrics.jsonl and metrics/<t>. */
static cJSON *round_record(coord_t *c, int64_t t, double time, const uint32_t *alive, int n_alive,
                           double agg_seconds)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "round", (double)t);
    cJSON_AddNumberToObject(r, "time", time);
    cJSON_AddNumberToObject(r, "wall", tma_clock_wall());
    cJSON_AddNumberToObject(r, "epoch", (double)c->epoch);
    cJSON *ws = cJSON_AddArrayToObject(r, "workers");
    cJSON *missed = cJSON_CreateArray();
    for (int i = 0; i < c->n_slots; i++) {
        slot_t *sl = &c->slots[i];
        if (!sl->used || !sl->expected)
            continue;
        if (!sl->got && c->job->variant != TMA_VARIANT_GGS) {
            cJSON_AddItemToArray(missed, cJSON_CreateNumber(sl->id));
            continue;
        }
        cJSON *w = cJSON_CreateObject();
        cJSON_AddNumberToObject(w, "id", sl->id);
        if (c->job->variant == TMA_VARIANT_GGS) {
            cJSON_AddNumberToObject(w, "steps", (double)sl->steps);
            cJSON_AddNumberToObject(w, "loss", sl->steps ? sl->loss_sum / (double)sl->steps : 0.0);
        } else {
            cJSON_AddNumberToObject(w, "steps", (double)sl->meta.steps_round);
            cJSON_AddNumberToObject(w, "loss", sl->meta.loss);
            cJSON_AddNumberToObject(w, "steps_per_s",
                                    sl->meta.step_seconds > 0 ? (double)sl->meta.steps_round / sl->meta.step_seconds
                                                              : 0.0);
            cJSON_AddNumberToObject(w, "weight", sl->weight);
            cJSON *sh = cJSON_AddArrayToObject(w, "shards");
            for (uint32_t j = 0; j < sl->meta.n_shards; j++)
                cJSON_AddItemToArray(sh, cJSON_CreateNumber(sl->meta.shards[j]));
        }
        cJSON_AddItemToArray(ws, w);
    }
    add_ids(cJSON_AddArrayToObject(r, "alive"), alive, n_alive);
    cJSON_AddItemToObject(r, "missed", missed);
    cJSON_AddItemToObject(r, "lost", c->lost);
    c->lost = cJSON_CreateArray();
    cJSON_AddItemToObject(r, "moves", c->moves);
    c->moves = cJSON_CreateArray();
    if (c->job->variant != TMA_VARIANT_GGS) {
        cJSON *owners = cJSON_AddArrayToObject(r, "owners");
        for (int k = 0; k < c->map.n; k++)
            cJSON_AddItemToArray(owners, cJSON_CreateNumber((double)c->map.owner[k]));
    }
    cJSON_AddNumberToObject(r, "agg_seconds", agg_seconds);
    return r;
}

/* Checkpoint, state and metrics/<t> in etcd, then the evaluator. */
static tma_status_t finish_round(coord_t *c, int64_t t, cJSON *record)
{
    double time = train_elapsed(c);
    tma_status_t st = tma_gnn_weights_write(c->checkpoint_path, &c->cfg, c->global, (uint64_t)t);
    if (st != TMA_OK) {
        cJSON_Delete(record);
        return st;
    }
    int64_t best_round;
    double best_val, best_time;
    coord_eval_best(c->ev, &best_round, &best_val, &best_time);
    tma_state_rec_t s;
    memset(&s, 0, sizeof s);
    s.epoch = c->epoch;
    s.round = t;
    s.train_elapsed = time;
    s.best_round = best_round;
    s.best_val_mrr = best_round >= 0 ? best_val : 0;
    snprintf(s.phase, sizeof s.phase, "training");
    snprintf(s.run_dir, sizeof s.run_dir, "%s", c->run_dir);
    snprintf(s.checkpoint, sizeof s.checkpoint, "%s", c->checkpoint_path);
    char skey[TMA_KEY_MAX], mkey[TMA_KEY_MAX];
    tma_fault_key(skey, c->job->name, "state");
    tma_fault_key_n(mkey, c->job->name, "metrics", t);
    cJSON_DeleteItemFromObject(record, "val_mrr");
    cJSON_AddNullToObject(record, "val_mrr");
    cJSON_AddStringToObject(record, "eval", "pending");
    char *vals[2] = {tma_state_rec_encode(&s), cJSON_PrintUnformatted(record)};
    const char *keys[2] = {skey, mkey};
    st = vals[0] && vals[1] ? guarded_put_retry(c, 2, keys, vals) : TMA_ERR_NOMEM;
    free(vals[0]);
    cJSON_free(vals[1]);
    if (st != TMA_OK) {
        cJSON_Delete(record);
        return st;
    }
    c->round = t;
    coord_eval_submit(c->ev, t, time, c->global, record);
    return TMA_OK;
}

static void progress_line(coord_t *c, int64_t t, int n_got, int n_exp, double agg_s)
{
    int64_t br;
    double bv, bt;
    coord_eval_best(c->ev, &br, &bv, &bt);
    double last = coord_eval_last(c->ev);
    char sps[256] = "";
    size_t off = 0;
    for (int i = 0; i < c->n_slots && off < sizeof sps - 16; i++) {
        slot_t *sl = &c->slots[i];
        if (sl->used && sl->got && sl->meta.step_seconds > 0)
            off += (size_t)snprintf(sps + off, sizeof sps - off, " %u:%.1f", sl->id,
                                    (double)sl->meta.steps_round / sl->meta.step_seconds);
    }
    double total = c->job->train_s;
    tma_log_info(COMP, "round %lld | %.1f/%.1f min | %d/%d workers | steps/s%s | val MRR last %.4f best %.4f | "
                       "aggregation %.2f s",
                 (long long)t, train_elapsed(c) / 60.0, total / 60.0, n_got, n_exp, sps[0] ? sps : " -",
                 isnan(last) ? 0.0 : last, br >= 0 ? bv : 0.0, agg_s);
}

static tma_status_t tma_round(coord_t *c, int64_t t)
{
    tma_jobview_snap_t s;
    tma_status_t st = tma_jobview_snapshot(c->view, &s);
    if (st != TMA_OK)
        return st;
    uint32_t *ids = malloc((size_t)(s.n_members + 1) * sizeof *ids);
    uint32_t *alive = malloc((size_t)(s.n_members + 1) * sizeof *alive);
    if (!ids || !alive) {
        free(ids);
        free(alive);
        tma_jobview_snap_free(&s);
        return TMA_ERR_NOMEM;
    }
    int n_alive = 0;
    for (int i = 0; i < s.n_members; i++)
        alive[n_alive++] = s.members[i].rec.id;
    (void)expect_participants(c, &s, ids);
    tma_jobview_snap_free(&s);

    double t0 = tma_clock_now();
    if (c->job->interval_steps <= 0) {
        /* Raise the flag; workers see it through their watch. */
        char key[TMA_KEY_MAX];
        tma_fault_key(key, c->job->name, "agg");
        char *val = tma_agg_rec_encode(t, c->epoch);
        const char *kp[1] = {key};
        char *vp[1] = {val};
        st = val ? guarded_put_retry(c, 1, kp, vp) : TMA_ERR_NOMEM;
        free(val);
        if (st != TMA_OK) {
            free(ids);
            free(alive);
            return st;
        }
    }
    int n_exp = 0;
    collect(c, t, TMA_TAG_LOCAL, tma_clock_now() + c->job->round_deadline, &n_exp);
    tma_inject_crash_point(&c->inj, "aggregate", t);
    for (int i = 0; i < c->n_slots; i++)
        if (c->slots[i].used && c->slots[i].got)
            dump_tensor(c, "local", c->slots[i].id, t, c->slots[i].buf);
    int n_got = average(c, 0);
    if (n_got == 0)
        tma_log_warn(COMP, "round %lld: no weights arrived (%d expected); the global model is unchanged",
                     (long long)t, n_exp);
    if (n_got > 0 && c->job->variant == TMA_VARIANT_LLCG && c->server) {
        /* LLCG: correct the average with a few steps on the full graph. */
        st = tma_gnn_trainer_set_params(c->server, c->global);
        for (int k = 0; k < c->job->llcg_steps && st == TMA_OK; k++)
            st = tma_gnn_trainer_step(c->server, NULL);
        if (st == TMA_OK)
            st = tma_gnn_trainer_get_params(c->server, c->global);
        if (st != TMA_OK) {
            free(ids);
            free(alive);
            return st;
        }
    }
    dump_tensor(c, "global", 0, t, c->global);
    tma_inject_crash_point(&c->inj, "broadcast", t);
    /* Every live member that trains gets W[t], also those that missed the round. */
    tma_jobview_snap_t s2;
    if (tma_jobview_snapshot(c->view, &s2) == TMA_OK) {
        int np = participants(c, &s2, ids);
        tma_jobview_snap_free(&s2);
        push_global(c, ids, np, t);
    }
    double agg_s = tma_clock_now() - t0;
    if (n_exp - n_got > 0)
        tma_log_warn(COMP, "round %lld completed with %d of %d owners", (long long)t, n_got, n_exp);
    cJSON *rec = round_record(c, t, train_elapsed(c), alive, n_alive, agg_s);
    free(ids);
    free(alive);
    st = finish_round(c, t, rec);
    if (st == TMA_OK)
        progress_line(c, t, n_got, n_exp, agg_s);
    return st;
}

/* ------------------------------------------------------------------ GGS: synchronous SGD */

static tma_status_t ggs_loop(coord_t *c)
{
    tma_status_t st = TMA_OK;
    double next_eval = c->job->interval_steps > 0 ? 0 : train_elapsed(c) + c->job->interval_s;
    int64_t steps_since = 0;
    double agg_acc = 0;
    while (!stopping(c)) {
        if (c->job->train_s > 0 && train_elapsed(c) >= c->job->train_s)
            break;
        if (c->job->rounds > 0 && c->round >= c->job->rounds)
            break;
        st = idle(c, 0, 1);
        if (st != TMA_OK)
            break;
        tma_jobview_snap_t s;
        if ((st = tma_jobview_snapshot(c->view, &s)) != TMA_OK)
            break;
        uint32_t *ids = malloc((size_t)(s.n_members + 1) * sizeof *ids);
        int n = ids ? expect_participants(c, &s, ids) : 0;
        tma_jobview_snap_free(&s);
        if (n == 0) {
            free(ids);
            st = idle(c, 0.1, 1);
            if (st != TMA_OK)
                break;
            continue;
        }
        int64_t step = c->ggs_step + 1;
        double t0 = tma_clock_now();
        int n_exp = 0;
        collect(c, step, TMA_TAG_GRADS, tma_clock_now() + c->job->round_deadline, &n_exp);
        int n_got = average(c, 1);
        if (n_got > 0) {
            /* The replica applies the averaged gradients with its Adam; the
             * workers take the resulting parameters (no optimizer state to
             * keep in sync on them). */
            st = tma_gnn_trainer_set_grads(c->server, c->global);
            if (st == TMA_OK)
                st = tma_gnn_trainer_apply_grads(c->server);
            if (st == TMA_OK)
                st = tma_gnn_trainer_get_params(c->server, c->global);
            if (st != TMA_OK) {
                free(ids);
                break;
            }
            c->ggs_step = step;
            steps_since++;
            for (int i = 0; i < c->n_slots; i++)
                if (c->slots[i].used && c->slots[i].got) {
                    c->slots[i].steps++;
                    c->slots[i].loss_sum += c->slots[i].meta.loss;
                }
        }
        push_global(c, ids, n, c->ggs_step);
        free(ids);
        agg_acc += tma_clock_now() - t0;
        int due = c->job->interval_steps > 0 ? steps_since >= c->job->interval_steps : train_elapsed(c) >= next_eval;
        if (due && n_got > 0) {
            int64_t t = c->round + 1;
            tma_jobview_snap_t s3;
            if ((st = tma_jobview_snapshot(c->view, &s3)) != TMA_OK)
                break;
            uint32_t *alive = malloc((size_t)(s3.n_members + 1) * sizeof *alive);
            int n_alive = 0;
            for (int i = 0; alive && i < s3.n_members; i++)
                alive[n_alive++] = s3.members[i].rec.id;
            tma_jobview_snap_free(&s3);
            if (!alive) {
                st = TMA_ERR_NOMEM;
                break;
            }
            for (int i = 0; i < c->n_slots; i++)
                c->slots[i].expected = c->slots[i].used && c->slots[i].steps > 0;
            cJSON *rec = round_record(c, t, train_elapsed(c), alive, n_alive, agg_acc);
            cJSON_AddNumberToObject(rec, "sync_steps", (double)steps_since);
            free(alive);
            st = finish_round(c, t, rec);
            if (st != TMA_OK)
                break;
            progress_line(c, t, n_got, n_exp, agg_acc);
            for (int i = 0; i < c->n_slots; i++) {
                c->slots[i].steps = 0;
                c->slots[i].loss_sum = 0;
            }
            steps_since = 0;
            agg_acc = 0;
            next_eval += c->job->interval_s;
        }
    }
    return st;
}

/* ------------------------------------------------------------------ start-up */

/* The listening address: job->host, or for "auto" this host's first
 * non-loopback IPv4 address (loopback when there is none). */
static void listen_address(const tma_job_t *job, char *out, size_t cap)
{
    if (strcmp(job->host, "auto") != 0) {
        snprintf(out, cap, "%s:0", job->host);
        return;
    }
    snprintf(out, cap, "127.0.0.1:0");
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) != 0)
        return;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
            !(i->ifa_flags & IFF_UP))
            continue;
        char host[64];
        if (getnameinfo(i->ifa_addr, sizeof(struct sockaddr_in), host, sizeof host, NULL, 0, NI_NUMERICHOST) == 0) {
            snprintf(out, cap, "%s:0", host);
            break;
        }
    }
    freeifaddrs(ifa);
}

/* Leader election: create the coordinator key with our lease, waiting for a
 * current leader's lease to lapse (a standby waits for ever, others up to
 * twice the lease TTL plus a little). */
static tma_status_t campaign(coord_t *c)
{
    char key[TMA_KEY_MAX];
    tma_fault_key(key, c->job->name, "coordinator");
    tma_coord_rec_t rec;
    memset(&rec, 0, sizeof rec);
    snprintf(rec.address, sizeof rec.address, "%s", tma_transport_address(c->tr));
    rec.lease = c->lease;
    rec.pid = (int)getpid();
    gethostname(rec.host, sizeof rec.host - 1);
    char *val = tma_coord_rec_encode(&rec);
    if (!val)
        return TMA_ERR_NOMEM;
    double give_up = tma_clock_now() + 2.0 * (double)c->job->lease_ttl + 5.0;
    int said = 0;
    tma_status_t st;
    for (;;) {
        tma_kv_result_t cur;
        memset(&cur, 0, sizeof cur);
        st = tma_kv_put_if_absent(c->kv, key, val, strlen(val), c->lease, &cur);
        if (st == TMA_OK) {
            c->epoch = (uint64_t)cur.pairs[0].create_revision;
            tma_kv_result_free(&cur);
            break;
        }
        if (st == TMA_ERR_COMPARE_FAILED) {
            if (!said) {
                tma_coord_rec_t other;
                if (cur.n_pairs && tma_coord_rec_decode(key, cur.pairs[0].value, cur.pairs[0].value_len, &other) == TMA_OK)
                    tma_log_info(COMP, "job %s has a leader (pid %d on %s at %s); %s", c->job->name, other.pid,
                                 other.host, other.address,
                                 c->o->standby ? "standing by to take over" : "waiting for its lease to lapse");
                said = 1;
            }
            tma_kv_result_free(&cur);
            if (!c->o->standby && tma_clock_now() > give_up) {
                tma_log_error(COMP, "job %s: another coordinator is running; use --standby to wait for it, or "
                                    "another job name",
                              c->job->name);
                st = TMA_ERR_UNAVAILABLE;
                break;
            }
        } else if (tma_status_group(st) != TMA_GROUP_PEER) {
            break;
        }
        if (stopping(c)) {
            st = TMA_ERR_CANCELLED;
            break;
        }
        tma_jobview_wait(c->view, tma_jobview_wait(c->view, 0, 0), 0.5);
    }
    free(val);
    return st;
}

static void on_lease_lost(void *arg, tma_status_t why)
{
    coord_t *c = arg;
    tma_log_error(COMP, "the leader lease %llx is lost (%s): fenced", (unsigned long long)c->lease,
                  tma_status_str(why));
    __atomic_store_n(&c->fenced, 1, __ATOMIC_SEQ_CST);
    tma_jobview_poke(c->view);
}

/* Waits for the initial workers, deals the shards, applies the policy to
 * shards whose owner never came, broadcasts W[0]. */
static tma_status_t start_phase(coord_t *c)
{
    tma_status_t st = TMA_OK;
    const tma_job_t *job = c->job;
    double t_reg = tma_clock_now() + job->start_timeout;
    tma_log_info(COMP, "waiting for %d worker(s) to register (up to %.0f s)", job->workers, job->start_timeout);
    tma_shard_move_t *mv = malloc((size_t)(c->map.n + 1) * sizeof *mv);
    if (!mv)
        return TMA_ERR_NOMEM;
    if (job->variant != TMA_VARIANT_GGS) {
        /* Registration. */
        for (;;) {
            tma_jobview_snap_t s;
            if ((st = tma_jobview_snapshot(c->view, &s)) != TMA_OK)
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
            tma_jobview_snap_free(&s);
            int timed_out = tma_clock_now() >= t_reg;
            int need = job->workers - job->n_absent;
            if (live && (n_main >= need || timed_out)) {
                int n = tma_policy_initial_absent(&c->map, live, n_live, job->workers, job->absent_shards,
                                                  job->n_absent, mv);
                if (n_main < need)
                    tma_log_warn(COMP, "only %d of %d workers registered within %.0f s", n_main, need,
                                 job->start_timeout);
                if (job->n_absent)
                    tma_log_warn(COMP, "%d shard(s) absent by the job's fault.absent_shards (the F >= 1 drill)",
                                 job->n_absent);
                st = write_moves(c, mv, n, "initial deal");
                /* Orphans: the policy for a worker that never started. */
                for (int k = 0; k < c->map.n && st == TMA_OK; k++) {
                    if (c->map.owner[k] >= 0)
                        continue;
                    int m = 0;
                    c->map.owner[k] = INT64_MAX; /* a placeholder owner for the policy */
                    m = tma_policy_lost(&c->map, INT64_MAX, job->on_failure, live, n_live, mv);
                    for (int j = 0; j < m; j++)
                        mv[j].from = -1;
                    st = write_moves(c, mv, m, "worker never started");
                }
                free(live);
                c->map_ready = 1;
                break;
            }
            free(live);
            if (stopping(c)) {
                st = TMA_ERR_CANCELLED;
                break;
            }
            tma_jobview_wait(c->view, c->seen_version, 0.5);
        }
    } else {
        c->map_ready = 1;
        /* GGS: wait for `workers` members (or the timeout). */
        for (;;) {
            tma_jobview_snap_t s;
            if ((st = tma_jobview_snapshot(c->view, &s)) != TMA_OK)
                break;
            int n = s.n_members;
            c->seen_version = s.version;
            tma_jobview_snap_free(&s);
            if (n >= job->workers || tma_clock_now() >= t_reg)
                break;
            if (stopping(c)) {
                st = TMA_ERR_CANCELLED;
                break;
            }
            tma_jobview_wait(c->view, c->seen_version, 0.5);
        }
    }
    free(mv);
    if (st != TMA_OK)
        return st;
    /* Readiness: owners load their shards; the weights go to each one as it
     * becomes ready (service_view), the clock starts when all are, or at the
     * timeout (owners not ready by then are handled as failed). */
    st = tma_gnn_params_init(&c->cfg, c->cfg.seed, c->global);
    if (st != TMA_OK)
        return st;
    double t_ready = tma_clock_now() + job->start_timeout;
    for (;;) {
        st = service_view(c, 1);
        if (st != TMA_OK)
            return st;
        tma_jobview_snap_t s;
        if ((st = tma_jobview_snapshot(c->view, &s)) != TMA_OK)
            return st;
        uint32_t *ids = malloc((size_t)(s.n_members + 1) * sizeof *ids);
        int n = ids ? participants(c, &s, ids) : 0;
        int owners = 0;
        if (job->variant == TMA_VARIANT_GGS) {
            owners = s.n_members;
        } else {
            for (int i = 0; i < s.n_members; i++)
                owners += tma_shard_map_count(&c->map, s.members[i].rec.id, NULL) > 0;
        }
        tma_jobview_snap_free(&s);
        free(ids);
        if (n > 0 && n >= owners)
            break;
        if (tma_clock_now() >= t_ready) {
            if (n == 0) {
                tma_log_error(COMP, "no worker became ready within %.0f s of the start: check the workers' logs",
                              2 * job->start_timeout);
                return TMA_ERR_TIMEOUT;
            }
            tma_log_warn(COMP, "%d of %d owner(s) ready after %.0f s; starting without the others", n, owners,
                         job->start_timeout);
            break;
        }
        if (stopping(c))
            return TMA_ERR_CANCELLED;
        tma_jobview_wait(c->view, c->seen_version, 0.2);
    }
    return TMA_OK;
}

/* ------------------------------------------------------------------ the end */

static tma_status_t finish(coord_t *c, const char *reason)
{
    char key[TMA_KEY_MAX];
    tma_fault_key(key, c->job->name, "stop");
    char val[256];
    snprintf(val, sizeof val, "{\"epoch\":%llu,\"reason\":\"%s\"}", (unsigned long long)c->epoch, reason);
    const char *kp[1] = {key};
    char *vp[1] = {val};
    tma_status_t st = guarded_put_retry(c, 1, kp, vp);
    if (st != TMA_OK)
        tma_log_warn(COMP, "could not set stop in etcd: %s", tma_status_str(st));
    tma_log_info(COMP, "training stopped (%s) after %.1f s and %lld round(s); finishing the evaluation", reason,
                 train_elapsed(c), (long long)c->round);
    double train_s = train_elapsed(c);
    c->clock_start = 0;
    c->elapsed_base = train_s;
    coord_eval_drain(c->ev);

    /* Test the best round. */
    int64_t best_round;
    double best_val, best_time;
    coord_eval_best(c->ev, &best_round, &best_val, &best_time);
    double test_mrr = NAN;
    char *best_path = tma_run_path(c->run_dir, "best.tmaw");
    if (best_round >= 0 && best_path) {
        float *params = NULL;
        int64_t count = 0;
        uint64_t r;
        st = tma_gnn_weights_read(best_path, &c->cfg, NULL, &params, &count, &r);
        if (st == TMA_OK) {
            tma_gnn_evaluator_t *ev;
            st = tma_gnn_evaluator_create(&c->cfg, c->graph, &ev);
            if (st == TMA_OK) {
                st = tma_gnn_evaluator_mrr(ev, params, TMA_GNN_SPLIT_TEST, &test_mrr);
                tma_gnn_evaluator_destroy(ev);
            }
            free(params);
        }
        if (st != TMA_OK)
            tma_log_error(COMP, "testing the best round failed: %s", tma_status_str(st));
    }
    /* Convergence from the metrics file (the paper's definition). */
    int64_t *rounds = NULL;
    double *times = NULL, *vals = NULL;
    int n = 0;
    double conv = -1;
    if (tma_run_read_metrics(c->metrics_path, &rounds, &times, &vals, &n) == TMA_OK) {
        conv = tma_run_convergence_time(times, vals, n, NULL, NULL);
        const char *label = tma_variant_name(c->job->variant);
        const double *tp = times, *vp2 = vals;
        char title[192];
        snprintf(title, sizeof title, "%s: validation MRR (%s, M = %d)", c->job->name, label, c->job->workers);
        tma_run_plot_svg(c->plot_path, title, 1, &label, &tp, &vp2, &n);
    }
    int64_t evaluated, skipped;
    coord_eval_counts(c->ev, &evaluated, &skipped);
    cJSON *res = cJSON_CreateObject();
    cJSON_AddStringToObject(res, "job", c->job->name);
    cJSON_AddStringToObject(res, "variant", tma_variant_name(c->job->variant));
    cJSON_AddNumberToObject(res, "workers", c->job->workers);
    if (c->pinfo) {
        cJSON_AddStringToObject(res, "partition", c->job->partition_scheme);
        cJSON_AddNumberToObject(res, "edge_ratio", c->pinfo->edge_ratio);
    } else {
        cJSON_AddNumberToObject(res, "edge_ratio", 1.0);
    }
    if (isfinite(test_mrr))
        cJSON_AddNumberToObject(res, "test_mrr", test_mrr);
    else
        cJSON_AddNullToObject(res, "test_mrr");
    if (best_round >= 0) {
        cJSON_AddNumberToObject(res, "best_val_mrr", best_val);
        cJSON_AddNumberToObject(res, "best_round", (double)best_round);
        cJSON_AddNumberToObject(res, "best_at_seconds", best_time);
    } else {
        cJSON_AddNullToObject(res, "best_val_mrr");
        cJSON_AddNullToObject(res, "best_round");
        cJSON_AddNullToObject(res, "best_at_seconds");
    }
    if (conv >= 0)
        cJSON_AddNumberToObject(res, "convergence_seconds", conv);
    else
        cJSON_AddNullToObject(res, "convergence_seconds");
    cJSON_AddNumberToObject(res, "train_seconds", train_s);
    cJSON_AddNumberToObject(res, "rounds", (double)c->round);
    cJSON_AddNumberToObject(res, "rounds_evaluated", (double)evaluated);
    cJSON_AddNumberToObject(res, "rounds_skipped", (double)skipped);
    cJSON_AddStringToObject(res, "stopped", reason);
    cJSON_AddStringToObject(res, "best_weights", best_path ? best_path : "");
    tma_status_t wst = tma_json_write_file(c->result_path, res);
    cJSON_Delete(res);
    free(rounds);
    free(times);
    free(vals);
    free(best_path);
    if (wst == TMA_OK)
        tma_log_info(COMP, "result: test MRR %.4f (best round %lld, validation %.4f); written to %s",
                     isfinite(test_mrr) ? test_mrr : 0.0, (long long)best_round, best_round >= 0 ? best_val : 0.0,
                     c->result_path);
    /* The final state. */
    tma_state_rec_t s;
    memset(&s, 0, sizeof s);
    s.epoch = c->epoch;
    s.round = c->round;
    s.train_elapsed = train_s;
    s.best_round = best_round;
    s.best_val_mrr = best_round >= 0 ? best_val : 0;
    snprintf(s.phase, sizeof s.phase, "%s", wst == TMA_OK ? "done" : "failed");
    snprintf(s.run_dir, sizeof s.run_dir, "%s", c->run_dir);
    snprintf(s.checkpoint, sizeof s.checkpoint, "%s", c->checkpoint_path);
    char skey[TMA_KEY_MAX];
    tma_fault_key(skey, c->job->name, "state");
    char *sv = tma_state_rec_encode(&s);
    const char *kp2[1] = {skey};
    char *vp3[1] = {sv};
    if (sv)
        guarded_put(c, 1, kp2, vp3);
    free(sv);
    return wst;
}

/* ------------------------------------------------------------------ entry */

static tma_status_t load_job(coord_t *c)
{
    const tma_coordinator_opts_t *o = c->o;
    tma_status_t st;
    if (o->config_path) {
        st = tma_job_load(o->config_path, &c->job);
        if (st != TMA_OK)
            return st;
        if (o->job)
            snprintf(c->job->name, sizeof c->job->name, "%s", o->job);
        return tma_job_check_files(c->job);
    }
    /* From etcd: a standby waits for it. */
    double end = tma_clock_now() + (o->standby ? 1e12 : 30.0);
    uint64_t ver = 0;
    for (;;) {
        tma_jobview_snap_t s;
        if ((st = tma_jobview_snapshot(c->view, &s)) != TMA_OK)
            return st;
        if (s.config) {
            cJSON *root;
            st = tma_json_parse(s.config, strlen(s.config), "the job config in etcd", &root);
            tma_jobview_snap_free(&s);
            if (st != TMA_OK)
                return st;
            st = tma_job_parse(root, "the job config in etcd", "/", &c->job);
            cJSON_Delete(root);
            if (st == TMA_OK)
                st = tma_job_check_files(c->job);
            return st;
        }
        tma_jobview_snap_free(&s);
        if (tma_clock_now() > end) {
            tma_log_error(COMP, "job %s has no config in etcd: start the first coordinator with --config", o->job);
            return TMA_ERR_NOT_FOUND;
        }
        if (c->stop_flag && *c->stop_flag)
            return TMA_ERR_CANCELLED;
        ver = tma_jobview_wait(c->view, ver, 1.0);
    }
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
    float *params = NULL;
    int64_t count = 0;
    uint64_t r = 0;
    tma_status_t st = tma_gnn_weights_read(path, &c->cfg, NULL, &params, &count, &r);
    free(path);
    if (st != TMA_OK)
        return st;
    tma_gnn_evaluator_t *ev;
    double val = 0;
    st = tma_gnn_evaluator_create(&c->cfg, c->graph, &ev);
    if (st == TMA_OK) {
        st = tma_gnn_evaluator_mrr(ev, params, TMA_GNN_SPLIT_VAL, &val);
        tma_gnn_evaluator_destroy(ev);
    }
    free(params);
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
    tma_fault_key(prefix, c->job->name, "metrics/");
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
        int64_t r = tma_fault_key_number(res.pairs[i].key);
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

tma_status_t tma_coordinator_run(const tma_coordinator_opts_t *opts, volatile sig_atomic_t *stop_flag)
{
    coord_t cc, *c = &cc;
    memset(c, 0, sizeof *c);
    c->o = opts;
    c->stop_flag = stop_flag;
    c->moves = cJSON_CreateArray();
    c->lost = cJSON_CreateArray();
    if (opts->inject)
        c->inj = *opts->inject;
    else
        tma_inject_init(&c->inj);
    tma_status_t st = TMA_OK;
    /* A config file is checked before anything talks to etcd, so a bad one
     * is refused before the job starts. */
    if (opts->config_path) {
        st = load_job(c);
        if (st != TMA_OK)
            goto out;
    }
    const char *jobname = opts->job ? opts->job : c->job ? c->job->name : NULL;
    if (!jobname) {
        tma_log_error(COMP, "no job name: give --job or a config with \"job\"");
        st = TMA_ERR_CONFIG;
        goto out;
    }
    char jn[TMA_JOB_NAME_MAX];
    snprintf(jn, sizeof jn, "%s", jobname);
    st = tma_kv_create(opts->kv, &c->kv);
    if (st != TMA_OK)
        goto out;
    st = tma_jobview_start(c->kv, jn, 30.0, &c->view);
    if (st != TMA_OK)
        goto out;
    if (opts->fresh) {
        tma_jobview_snap_t s;
        if ((st = tma_jobview_snapshot(c->view, &s)) != TMA_OK)
            goto out;
        int live = s.has_coord;
        tma_jobview_snap_free(&s);
        if (live) {
            tma_log_error(COMP, "--fresh: job %s has a running coordinator; stop it first", jn);
            st = TMA_ERR_CONFIG;
            goto out;
        }
        char prefix[TMA_KEY_MAX];
        tma_fault_key(prefix, jn, "");
        st = tma_kv_delete(c->kv, prefix, TMA_KV_PREFIX, NULL);
        if (st != TMA_OK)
            goto out;
    }
    if (!c->job) {
        /* The config comes from etcd (a standby, or a resumed job). */
        tma_coordinator_opts_t o2 = *opts;
        o2.job = jn;
        c->o = &o2;
        st = load_job(c);
        c->o = opts;
        if (st != TMA_OK)
            goto out;
    }
    snprintf(c->job->name, sizeof c->job->name, "%s", jn);
    {
        char tag[64];
        snprintf(tag, sizeof tag, "coordinator%s", opts->standby ? "-standby" : "");
        tma_log_set_tag(tag);
    }

    /* The model and the graph the evaluator uses. */
    st = tma_graph_open(c->job->graph, 0, &c->graph);
    if (st != TMA_OK)
        goto out;
    c->cfg = c->job->model;
    if (opts->eval_threads > 0)
        c->cfg.eval_threads = opts->eval_threads;
    {
        /* CUDA backend (issue 7): the evaluator computes on this device (it
         * reads the weights from host memory whatever the device). */
        const char *dev = opts->eval_device ? opts->eval_device : c->job->eval_device;
        if (!tma_gnn_device_valid(dev)) {
            tma_log_error(COMP, "evaluator device \"%s\": expected cpu, cuda or cuda:N", dev);
            st = TMA_ERR_INVALID;
            goto out;
        }
        snprintf(c->cfg.eval_device, sizeof c->cfg.eval_device, "%s", dev);
    }
    if ((st = tma_gnn_config_resolve(&c->cfg, c->graph)) != TMA_OK)
        goto out;
    c->P = tma_gnn_param_count(&c->cfg);
    c->global = tma_alloc_aligned((size_t)c->P * sizeof(float));
    c->acc = tma_alloc_aligned((size_t)c->P * sizeof(double));
    if (!c->global || !c->acc) {
        st = TMA_ERR_NOMEM;
        goto out;
    }
    if (c->job->variant != TMA_VARIANT_GGS) {
        if ((st = tma_partition_info_load(c->job->partition_dir, &c->pinfo)) != TMA_OK)
            goto out;
        if ((st = tma_shard_map_create(c->pinfo->num_shards, c->pinfo->shard_edges, &c->map)) != TMA_OK)
            goto out;
    } else if ((st = tma_shard_map_create(0, NULL, &c->map)) != TMA_OK) {
        goto out;
    }
    if (c->job->variant == TMA_VARIANT_LLCG || c->job->variant == TMA_VARIANT_GGS) {
        tma_graph_t *g1[1] = {c->graph};
        tma_gnn_config_t scfg = c->cfg;
        if ((st = tma_gnn_trainer_create(&scfg, g1, 1, &c->server)) != TMA_OK)
            goto out;
        tma_gnn_trainer_reseed(c->server, tma_hash64(c->cfg.seed ^ 0xc0c0));
    }

    /* Data plane, then leadership. */
    tma_job_ensure_token(c->job);
    {
        tma_transport_config_t tc;
        tma_transport_config_init(&tc);
        char listen[300];
        listen_address(c->job, listen, sizeof listen);
        tc.job = c->job->name;
        tc.token = c->job->token[0] ? c->job->token : NULL;
        tc.self_id = TMA_COORD_PEER;
        tc.listen = listen;
        if ((st = tma_transport_create(&tc, &c->tr)) != TMA_OK)
            goto out;
    }
    if ((st = tma_kv_lease_grant(c->kv, c->job->lease_ttl, &c->lease, NULL)) != TMA_OK)
        goto out;
    if ((st = tma_lease_guard_start(c->kv, c->lease, on_lease_lost, c, &c->lease_guard)) != TMA_OK)
        goto out;
    if ((st = campaign(c)) != TMA_OK)
        goto out;
    tma_log_info(COMP, "leading job %s (epoch %llu) at %s", c->job->name, (unsigned long long)c->epoch,
                 tma_transport_address(c->tr));

    /* Fresh start or resume? */
    tma_jobview_snap_t s0;
    if ((st = tma_jobview_snapshot(c->view, &s0)) != TMA_OK)
        goto out;
    int resume = s0.has_state && (strcmp(s0.state.phase, "training") == 0 || strcmp(s0.state.phase, "starting") == 0);
    int finished = s0.has_state && !resume;
    tma_state_rec_t prev = s0.state;
    tma_jobview_snap_free(&s0);
    if (finished) {
        tma_log_error(COMP, "job %s already ran to the end (phase %s, results in %s); use another job name or "
                            "--fresh",
                      c->job->name, prev.phase, prev.run_dir);
        st = TMA_ERR_CONFIG;
        goto out;
    }
    if (resume && strcmp(prev.phase, "starting") == 0) {
        /* It died before training began: start over under this epoch. */
        resume = 0;
    }
    c->run_dir = strdup(resume ? prev.run_dir
                               : (opts->run_dir ? opts->run_dir : "runs"));
    if (!resume && !opts->run_dir) {
        free(c->run_dir);
        c->run_dir = tma_strdup_printf("runs/%s", c->job->name);
    }
    if (!c->run_dir || (st = tma_mkdir_p(c->run_dir)) != TMA_OK) {
        st = st ? st : TMA_ERR_NOMEM;
        goto out;
    }
    {
        char *abs = realpath(c->run_dir, NULL);
        if (abs) {
            free(c->run_dir);
            c->run_dir = abs;
        }
    }
    c->checkpoint_path = tma_run_path(c->run_dir, "checkpoint.tmaw");
    c->metrics_path = tma_run_path(c->run_dir, "metrics.jsonl");
    c->result_path = tma_run_path(c->run_dir, "result.json");
    c->plot_path = tma_run_path(c->run_dir, "mrr.svg");

    cJSON *cfgjson = tma_job_to_json(c->job);
    if (!cfgjson) {
        st = TMA_ERR_NOMEM;
        goto out;
    }
    if (!resume) {
        char *text = cJSON_PrintUnformatted(cfgjson);
        char ckey[TMA_KEY_MAX], skey[TMA_KEY_MAX], akey[TMA_KEY_MAX], stkey[TMA_KEY_MAX];
        tma_fault_key(ckey, c->job->name, "config");
        tma_fault_key(skey, c->job->name, "state");
        tma_fault_key(akey, c->job->name, "agg");
        tma_fault_key(stkey, c->job->name, "stop");
        tma_state_rec_t s;
        memset(&s, 0, sizeof s);
        s.epoch = c->epoch;
        s.best_round = -1;
        snprintf(s.phase, sizeof s.phase, "starting");
        snprintf(s.run_dir, sizeof s.run_dir, "%s", c->run_dir);
        char *sv = tma_state_rec_encode(&s);
        const char *keys[4] = {ckey, skey, akey, stkey};
        char *vals[4] = {text, sv, NULL, NULL};
        st = text && sv ? guarded_put_retry(c, 4, keys, vals) : TMA_ERR_NOMEM;
        cJSON_free(text);
        free(sv);
        char *cfgpath = tma_run_path(c->run_dir, "config.json");
        if (st == TMA_OK)
            st = tma_json_write_file(cfgpath, cfgjson);
        free(cfgpath);
        unlink(c->metrics_path);
    }
    cJSON_Delete(cfgjson);
    if (st != TMA_OK)
        goto out;

    coord_eval_cfg_t ec = {&c->cfg, c->graph, c->run_dir, c->kv, c->job->name, c->epoch, -1, 0, 0};
    if (resume && ((st = rebuild_metrics(c, prev.round)) != TMA_OK ||
                   (st = resume_best(c, &ec.best_round, &ec.best_val, &ec.best_time)) != TMA_OK))
        goto out;
    if ((st = coord_eval_create(&ec, &c->ev)) != TMA_OK)
        goto out;

    if (resume) {
        /* Take over: the last checkpoint, the round, the clock, the shard map. */
        float *params = NULL;
        int64_t count = 0;
        uint64_t r = 0;
        st = tma_gnn_weights_read(prev.checkpoint, &c->cfg, NULL, &params, &count, &r);
        if (st == TMA_OK && (count != c->P || (int64_t)r != prev.round)) {
            tma_log_error(COMP, "%s: checkpoint of round %llu, expected round %lld", prev.checkpoint,
                          (unsigned long long)r, (long long)prev.round);
            st = TMA_ERR_MISMATCH;
        }
        if (st != TMA_OK) {
            free(params);
            goto out;
        }
        memcpy(c->global, params, (size_t)c->P * sizeof(float));
        free(params);
        c->round = prev.round;
        c->elapsed_base = prev.train_elapsed;
        tma_jobview_snap_t s;
        if ((st = tma_jobview_snapshot(c->view, &s)) != TMA_OK)
            goto out;
        for (int k = 0; k < c->map.n && k < s.n_shards; k++)
            if (s.shard_present[k])
                c->map.owner[k] = s.shards[k].owner;
        /* Workers already training keep going: treat them as having the weights. */
        for (int i = 0; i < s.n_ready; i++) {
            slot_t *sl = slot_get(c, s.ready[i].id);
            if (sl)
                sl->pushed_rev = s.ready[i].mod_revision;
        }
        tma_jobview_snap_free(&s);
        c->map_ready = 1;
        tma_log_info(COMP, "took over job %s at round %lld (%.1f s of training done)", c->job->name,
                     (long long)c->round, c->elapsed_base);
        for (int i = 0; i < c->n_slots; i++)
            if (c->slots[i].used)
                slot_post(c, &c->slots[i]);
    } else {
        st = start_phase(c);
        if (st != TMA_OK)
            goto out;
        /* Round 0: the initial model. */
        if ((st = tma_gnn_weights_write(c->checkpoint_path, &c->cfg, c->global, 0)) != TMA_OK)
            goto out;
        coord_eval_submit(c->ev, 0, 0.0, c->global, round_record(c, 0, 0.0, NULL, 0, 0.0));
        tma_state_rec_t s;
        memset(&s, 0, sizeof s);
        s.epoch = c->epoch;
        s.best_round = -1;
        snprintf(s.phase, sizeof s.phase, "training");
        snprintf(s.run_dir, sizeof s.run_dir, "%s", c->run_dir);
        snprintf(s.checkpoint, sizeof s.checkpoint, "%s", c->checkpoint_path);
        char skey[TMA_KEY_MAX];
        tma_fault_key(skey, c->job->name, "state");
        char *sv = tma_state_rec_encode(&s);
        const char *kp[1] = {skey};
        char *vp[1] = {sv};
        st = sv ? guarded_put_retry(c, 1, kp, vp) : TMA_ERR_NOMEM;
        free(sv);
        if (st != TMA_OK)
            goto out;
        tma_log_info(COMP, "training started: variant %s, %d worker(s), %s", tma_variant_name(c->job->variant),
                     c->job->workers,
                     c->job->interval_steps > 0 ? "aggregation every N steps" : "time-based aggregation");
    }
    c->clock_start = tma_clock_now();

    const char *reason = "time";
    if (c->job->variant == TMA_VARIANT_GGS) {
        c->ggs_step = 0;
        st = ggs_loop(c);
        if (c->job->rounds > 0 && c->round >= c->job->rounds)
            reason = "rounds";
    } else {
        for (;;) {
            double el = train_elapsed(c);
            if (c->job->rounds > 0 && c->round >= c->job->rounds) {
                reason = "rounds";
                break;
            }
            int last = 0;
            if (c->job->interval_steps <= 0) {
                /* Rounds fall every interval; the last one at the end of the
                 * training time, so the final local progress is aggregated. */
                double next = (double)(c->round + 1) * c->job->interval_s;
                if (c->job->train_s > 0 && next >= c->job->train_s) {
                    next = c->job->train_s;
                    last = 1;
                }
                if (el < next) {
                    st = idle(c, TMA_MIN(next - el, 0.25), 1);
                    if (st != TMA_OK || stopping(c))
                        break;
                    continue;
                }
            } else {
                if (c->job->train_s > 0 && el >= c->job->train_s)
                    break;
                st = idle(c, 0, 1);
                if (st != TMA_OK || stopping(c))
                    break;
            }
            st = tma_round(c, c->round + 1);
            if (st != TMA_OK || stopping(c) || last)
                break;
        }
    }
    if (__atomic_load_n(&c->fenced, __ATOMIC_SEQ_CST)) {
        st = TMA_ERR_FENCED;
        goto out;
    }
    if (c->stop_flag && *c->stop_flag)
        reason = "interrupted";
    if (st != TMA_OK && st != TMA_ERR_CANCELLED) {
        tma_log_error(COMP, "the job failed: %s; writing what there is", tma_status_str(st));
        reason = "failed";
    }
    {
        tma_status_t fst = finish(c, reason);
        if (st == TMA_OK)
            st = fst;
        if (st == TMA_OK && c->stop_flag && *c->stop_flag)
            st = TMA_ERR_CANCELLED;
    }
out:
    coord_eval_destroy(c->ev);
    for (int i = 0; i < c->n_slots; i++) {
        if (c->slots[i].used)
            slot_release(c, &c->slots[i]);
        tma_free_aligned(c->slots[i].buf);
    }
    free(c->slots);
    tma_transport_destroy(c->tr);
    if (c->lease) {
        tma_lease_guard_stop(c->lease_guard);
        if (!__atomic_load_n(&c->fenced, __ATOMIC_SEQ_CST))
            tma_kv_lease_revoke(c->kv, c->lease);
    }
    tma_gnn_trainer_destroy(c->server);
    tma_jobview_stop(c->view);
    tma_shard_map_free(&c->map);
    tma_partition_info_destroy(c->pinfo);
    tma_graph_destroy(c->graph);
    tma_free_aligned(c->global);
    tma_free_aligned(c->acc);
    free(c->run_dir);
    free(c->checkpoint_path);
    free(c->metrics_path);
    free(c->result_path);
    free(c->plot_path);
    cJSON_Delete(c->moves);
    cJSON_Delete(c->lost);
    tma_job_destroy(c->job);
    tma_kv_destroy(c->kv);
    return st;
}
