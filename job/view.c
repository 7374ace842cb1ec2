/*
 * view.c: a live, consistent picture of one job's etcd keys, shared by the
 * coordinator and the workers.  A supervisor thread reads the job's prefix
 * (one snapshot at one revision), then watches it from the next revision;
 * the watch callback applies events under a mutex, bumps a version and wakes
 * waiters.  When the watch ends (compaction, etcd gone for good) the
 * supervisor resynchronises from a fresh snapshot, so no change is missed
 * and none is applied twice.  Nothing on a training step touches etcd: the
 * hot path reads two atomics (the aggregation round and the stop flag).
 */
#include "tma_job.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define COMP "view"

typedef struct view_state {
    char *config; /* JSON text */
    int has_coord;
    tma_job_coord_rec_t coord;
    uint64_t coord_epoch;
    int coord_present;        /* the key exists, whether its value decodes or not */
    uint64_t coord_key_epoch; /* its create revision then */
    int64_t coord_key_lease;  /* the lease etcd binds it to (0: none) */
    tma_job_view_member_t *members;
    int n_members, cap_members;
    tma_job_view_ready_t *ready;
    int n_ready, cap_ready;
    /* What etcd holds (raw_*) and what counts (settle(): the leader's
     * writes only), with the revision of each write so that an ignored one
     * is logged once. */
    tma_job_shard_rec_t *raw_shards;
    int *raw_present;
    int64_t *shard_mod, *shard_logged;
    tma_job_shard_rec_t *shards;
    int *shard_present;
    int n_shards; /* highest index + 1 */
    int has_agg;
    int64_t raw_agg_round, agg_mod, agg_logged;
    uint64_t raw_agg_epoch;
    int64_t agg_round;
    uint64_t agg_epoch;
    int has_stop;
    uint64_t stop_epoch;
    int64_t stop_mod, stop_logged;
    int stop;
    int has_state;
    tma_job_state_rec_t state;
    int64_t revision; /* the etcd revision applied up to */
} view_state_t;

struct tma_job_view {
    tma_kv_t *kv;
    char job[TMA_JOB_NAME_MAX];
    char prefix[TMA_KEY_MAX];
    size_t prefix_len;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    view_state_t st;
    uint64_t version;
    int synced;        /* the first snapshot is in */
    int64_t agg_round; /* atomics for the hot path */
    uint64_t agg_epoch;
    uint64_t agg_seq;  /* odd while agg_round and agg_epoch change (a seqlock) */
    int stop;
    /* supervisor */
    pthread_t thread;
    int quit;
    int watch_ended;
    tma_status_t watch_status;
    tma_kv_watch_t *watch;
};

/* The ready records own their shard lists. */
static void ready_free(tma_job_view_ready_t *ready, int n)
{
    for (int i = 0; i < n; i++)
        tma_job_ready_rec_free(&ready[i].rec);
    free(ready);
}

static void state_clear(view_state_t *s)
{
    free(s->config);
    free(s->members);
    ready_free(s->ready, s->n_ready);
    free(s->raw_shards);
    free(s->raw_present);
    free(s->shard_mod);
    free(s->shard_logged);
    free(s->shards);
    free(s->shard_present);
    memset(s, 0, sizeof *s);
    s->agg_round = 0;
}

static tma_job_view_member_t *find_member(view_state_t *s, uint32_t id)
{
    for (int i = 0; i < s->n_members; i++)
        if (s->members[i].rec.id == id)
            return &s->members[i];
    return NULL;
}

static tma_job_view_ready_t *find_ready(view_state_t *s, uint32_t id)
{
    for (int i = 0; i < s->n_ready; i++)
        if (s->ready[i].id == id)
            return &s->ready[i];
    return NULL;
}

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    void *n = realloc(*arr, (size_t)nc * elem);
    if (!n)
        return -1;
    memset((char *)n + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *arr = n;
    *cap = nc;
    return 0;
}

static void apply_member(view_state_t *s, const tma_kv_pair_t *p, int del)
{
    int64_t id = tma_job_key_number(p->key);
    if (id < 0)
        return;
    tma_job_view_member_t *m = find_member(s, (uint32_t)id);
    if (del) {
        if (m)
            *m = s->members[--s->n_members];
        return;
    }
    tma_job_member_rec_t rec;
    if (tma_job_member_rec_decode(p->key, p->value, p->value_len, &rec) != TMA_OK || rec.id != (uint32_t)id)
        return;
    if (!m) {
        if (grow((void **)&s->members, &s->cap_members, s->n_members + 1, sizeof *s->members) != 0)
            return;
        m = &s->members[s->n_members++];
    }
    m->rec = rec;
    m->mod_revision = p->mod_revision;
}

static void apply_ready(view_state_t *s, const tma_kv_pair_t *p, int del)
{
    int64_t id = tma_job_key_number(p->key);
    if (id < 0)
        return;
    tma_job_view_ready_t *r = find_ready(s, (uint32_t)id);
    if (del) {
        if (r) {
            tma_job_ready_rec_free(&r->rec);
            *r = s->ready[--s->n_ready];
        }
        return;
    }
    tma_job_ready_rec_t rec;
    if (tma_job_ready_rec_decode(p->key, p->value, p->value_len, &rec) != TMA_OK)
        return;
    if (!r) {
        if (grow((void **)&s->ready, &s->cap_ready, s->n_ready + 1, sizeof *s->ready) != 0) {
            tma_job_ready_rec_free(&rec);
            return;
        }
        r = &s->ready[s->n_ready++];
    } else {
        tma_job_ready_rec_free(&r->rec);
    }
    r->id = (uint32_t)id;
    r->rec = rec;
    r->mod_revision = p->mod_revision;
}

static void apply_shard(view_state_t *s, const tma_kv_pair_t *p, int del)
{
    int64_t k = tma_job_key_number(p->key);
    if (k < 0 || k >= (1 << 20))
        return;
    if (k >= s->n_shards) {
        int c[6] = {s->n_shards, s->n_shards, s->n_shards, s->n_shards, s->n_shards, s->n_shards};
        if (grow((void **)&s->shards, &c[0], (int)k + 1, sizeof *s->shards) != 0 ||
            grow((void **)&s->shard_present, &c[1], (int)k + 1, sizeof *s->shard_present) != 0 ||
            grow((void **)&s->raw_shards, &c[2], (int)k + 1, sizeof *s->raw_shards) != 0 ||
            grow((void **)&s->raw_present, &c[3], (int)k + 1, sizeof *s->raw_present) != 0 ||
            grow((void **)&s->shard_mod, &c[4], (int)k + 1, sizeof *s->shard_mod) != 0 ||
            grow((void **)&s->shard_logged, &c[5], (int)k + 1, sizeof *s->shard_logged) != 0)
            return;
        s->n_shards = (int)k + 1;
    }
    s->raw_present[k] = 0;
    s->shard_mod[k] = p->mod_revision;
    tma_job_shard_rec_t rec;
    if (!del && tma_job_shard_rec_decode(p->key, p->value, p->value_len, &rec) == TMA_OK && rec.shard == k) {
        s->raw_shards[k] = rec;
        s->raw_present[k] = 1;
    }
}

/* The epoch of the leader whose writes count: the coordinator key's, or
 * with none the one in `state` (0: no leader known). */
static uint64_t leader_epoch(const view_state_t *s)
{
    if (s->has_coord)
        return s->coord_epoch;
    return s->has_state ? s->state.epoch : 0;
}

/* Works out what counts from what etcd holds (view.h: "Control keys count
 * only from their writer"); logs each ignored write once. */
static void settle(const char *job, view_state_t *s)
{
    uint64_t leader = leader_epoch(s);
    if (s->has_agg && s->agg_mod != s->agg_logged) {
        if (s->has_coord && s->raw_agg_epoch == s->coord_epoch) {
            s->agg_round = s->raw_agg_round;
            s->agg_epoch = s->raw_agg_epoch;
        } else if (s->has_coord) {
            s->agg_logged = s->agg_mod;
            tma_log_warn(COMP,
                         "job %s: ignored agg written at revision %lld: epoch %llu is not the coordinator's "
                         "(%llu); only the leader raises agg",
                         job, (long long)s->agg_mod, (unsigned long long)s->raw_agg_epoch,
                         (unsigned long long)s->coord_epoch);
        }
    }
    s->stop = s->has_stop && leader != 0 && s->stop_epoch == leader;
    if (s->has_stop && !s->stop && leader != 0 && s->stop_mod != s->stop_logged) {
        s->stop_logged = s->stop_mod;
        tma_log_warn(COMP,
                     "job %s: ignored stop written at revision %lld: it does not carry the leader's epoch "
                     "(%llu); only the leader stops a job",
                     job, (long long)s->stop_mod, (unsigned long long)leader);
    }
    for (int k = 0; k < s->n_shards; k++) {
        uint64_t e = s->raw_shards[k].epoch;
        int ok = s->raw_present[k] && e != 0 &&
                 ((s->has_coord && e == s->coord_epoch) || (s->has_state && e == s->state.epoch));
        s->shard_present[k] = ok;
        if (ok)
            s->shards[k] = s->raw_shards[k];
        else if (s->raw_present[k] && leader != 0 && s->shard_mod[k] != s->shard_logged[k]) {
            s->shard_logged[k] = s->shard_mod[k];
            tma_log_warn(COMP,
                         "job %s: ignored shards/%d written at revision %lld: epoch %llu is not the "
                         "leader's (%llu)",
                         job, k, (long long)s->shard_mod[k], (unsigned long long)e, (unsigned long long)leader);
        }
    }
}

/* Applies one PUT (value != NULL) or DELETE to the state. */
static void apply(view_state_t *s, const char *suffix, const tma_kv_pair_t *p, int del)
{
    const char *key = p->key;
    switch (tma_job_key_kind(suffix)) {
    case TMA_KEY_CONFIG:
        free(s->config);
        s->config = del ? NULL : strdup(p->value);
        break;
    case TMA_KEY_COORDINATOR:
        s->has_coord = 0;
        s->coord_present = !del;
        s->coord_key_epoch = del ? 0 : (uint64_t)p->create_revision;
        s->coord_key_lease = del ? 0 : p->lease;
        if (!del && tma_job_coord_rec_decode(key, p->value, p->value_len, &s->coord) == TMA_OK) {
            s->has_coord = 1;
            s->coord_epoch = (uint64_t)p->create_revision;
        }
        break;
    case TMA_KEY_AGG: {
        int64_t r;
        uint64_t e;
        if (!del && tma_job_agg_rec_decode(key, p->value, p->value_len, &r, &e) == TMA_OK) {
            s->has_agg = 1;
            s->raw_agg_round = r;
            s->raw_agg_epoch = e;
            s->agg_mod = p->mod_revision;
        }
        break;
    }
    case TMA_KEY_STOP:
        s->has_stop = !del && tma_job_stop_rec_decode(key, p->value, p->value_len, &s->stop_epoch) == TMA_OK;
        if (!del && !s->has_stop)
            tma_log_warn(COMP, "%s: ignored: not a stop record the leader wrote", key);
        s->stop_mod = p->mod_revision;
        break;
    case TMA_KEY_STATE:
        s->has_state = !del && tma_job_state_rec_decode(key, p->value, p->value_len, &s->state) == TMA_OK;
        break;
    case TMA_KEY_MEMBERS: apply_member(s, p, del); break;
    case TMA_KEY_READY: apply_ready(s, p, del); break;
    case TMA_KEY_SHARDS: apply_shard(s, p, del); break;
    /* metrics/, best, next_id: not needed by the roles' decisions. */
    case TMA_KEY_METRICS:
    case TMA_KEY_BEST:
    case TMA_KEY_NEXT_ID:
    case TMA_KEY_NONE:
    case TMA_KEY_COUNT: break;
    }
}

static void publish(tma_job_view_t *v)
{
    settle(v->job, &v->st);
    v->version++;
    __atomic_add_fetch(&v->agg_seq, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&v->agg_round, v->st.agg_round, __ATOMIC_SEQ_CST);
    __atomic_store_n(&v->agg_epoch, v->st.agg_epoch, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&v->agg_seq, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&v->stop, v->st.stop, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&v->cond);
}

static void on_watch(void *arg, const tma_kv_watch_update_t *u)
{
    tma_job_view_t *v = arg;
    pthread_mutex_lock(&v->lock);
    if (u->status != TMA_OK) {
        v->watch_ended = 1;
        v->watch_status = u->status;
        pthread_cond_broadcast(&v->cond);
        pthread_mutex_unlock(&v->lock);
        return;
    }
    for (size_t i = 0; i < u->n_events; i++) {
        const tma_kv_event_t *ev = &u->events[i];
        if (strncmp(ev->kv.key, v->prefix, v->prefix_len) != 0)
            continue;
        apply(&v->st, ev->kv.key + v->prefix_len, &ev->kv, ev->type == TMA_KV_EVENT_DELETE);
        v->st.revision = TMA_MAX(v->st.revision, ev->kv.mod_revision);
    }
    publish(v);
    pthread_mutex_unlock(&v->lock);
}

static int snap_pair(void *arg, const tma_kv_pair_t *p)
{
    void **a = arg;
    view_state_t *s = a[0];
    const tma_job_view_t *v = a[1];
    if (strncmp(p->key, v->prefix, v->prefix_len) == 0)
        apply(s, p->key + v->prefix_len, p, 0);
    return 0;
}

/* One snapshot and a watch from just after it. */
static tma_status_t resync(tma_job_view_t *v)
{
    view_state_t fresh;
    memset(&fresh, 0, sizeof fresh);
    int64_t rev = 0;
    tma_kv_range_opts_t ro;
    memset(&ro, 0, sizeof ro);
    ro.flags = TMA_KV_PREFIX;
    void *arg[2] = {&fresh, v};
    tma_status_t st = tma_kv_range_each(v->kv, v->prefix, &ro, snap_pair, arg, &rev);
    if (st != TMA_OK) {
        state_clear(&fresh);
        return st;
    }
    fresh.revision = rev;
    pthread_mutex_lock(&v->lock);
    state_clear(&v->st);
    v->st = fresh;
    v->synced = 1;
    v->watch_ended = 0;
    publish(v);
    pthread_mutex_unlock(&v->lock);
    tma_kv_watch_opts_t wo;
    memset(&wo, 0, sizeof wo);
    wo.flags = TMA_KV_PREFIX;
    wo.start_revision = rev + 1;
    st = tma_kv_watch_start(v->kv, v->prefix, &wo, on_watch, v, &v->watch);
    if (st != TMA_OK)
        v->watch = NULL;
    return st;
}

static void *supervise(void *arg)
{
    tma_job_view_t *v = arg;
    double backoff = 0.1;
    for (;;) {
        pthread_mutex_lock(&v->lock);
        while (!v->quit && v->watch && !v->watch_ended)
            pthread_cond_wait(&v->cond, &v->lock);
        int quit = v->quit;
        pthread_mutex_unlock(&v->lock);
        if (quit)
            break;
        if (v->watch) {
            tma_log_warn(COMP, "job %s: watch ended (%s); reading the job's keys again", v->job,
                         tma_status_str(v->watch_status));
            tma_kv_watch_stop(v->watch);
            v->watch = NULL;
        }
        tma_status_t st = resync(v);
        if (st == TMA_OK) {
            backoff = 0.1;
            continue;
        }
        tma_log_debug(COMP, "job %s: cannot read the job's keys yet: %s", v->job, tma_status_str(st));
        /* etcd is unreachable: retry, waking early only to quit. */
        pthread_mutex_lock(&v->lock);
        if (!v->quit)
            tma_cond_wait_until(&v->cond, &v->lock, tma_clock_now() + backoff);
        pthread_mutex_unlock(&v->lock);
        backoff = backoff * 2 > 2.0 ? 2.0 : backoff * 2;
    }
    if (v->watch) {
        tma_kv_watch_stop(v->watch);
        v->watch = NULL;
    }
    return NULL;
}

tma_status_t tma_job_view_start(tma_kv_t *kv, const char *job, double timeout, tma_job_view_t **v_p)
{
    tma_job_view_t *v = calloc(1, sizeof *v);
    if (!v)
        return TMA_ERR_NOMEM;
    v->kv = kv;
    snprintf(v->job, sizeof v->job, "%s", job);
    tma_job_prefix(v->prefix, job);
    v->prefix_len = strlen(v->prefix);
    pthread_mutex_init(&v->lock, NULL);
    tma_cond_init(&v->cond);
    /* The first snapshot is taken here, so the caller starts from a
     * complete picture (or learns at once that etcd is unreachable). */
    double end = tma_clock_now() + timeout;
    tma_status_t st;
    for (;;) {
        st = resync(v);
        if (st == TMA_OK || tma_clock_now() >= end || tma_status_group(st) != TMA_GROUP_PEER)
            break;
        tma_sleep(0.2);
    }
    if (st != TMA_OK) {
        tma_log_error(COMP, "job %s: cannot read its keys from etcd: %s", job, tma_status_str(st));
        if (v->watch)
            tma_kv_watch_stop(v->watch);
        state_clear(&v->st);
        pthread_mutex_destroy(&v->lock);
        pthread_cond_destroy(&v->cond);
        free(v);
        return st;
    }
    if (pthread_create(&v->thread, NULL, supervise, v) != 0) {
        tma_kv_watch_stop(v->watch);
        state_clear(&v->st);
        free(v);
        return TMA_ERR_NOMEM;
    }
    *v_p = v;
    return TMA_OK;
}

void tma_job_view_stop(tma_job_view_t *v)
{
    if (!v)
        return;
    pthread_mutex_lock(&v->lock);
    v->quit = 1;
    pthread_cond_broadcast(&v->cond);
    pthread_mutex_unlock(&v->lock);
    pthread_join(v->thread, NULL);
    state_clear(&v->st);
    pthread_mutex_destroy(&v->lock);
    pthread_cond_destroy(&v->cond);
    free(v);
}

uint64_t tma_job_view_wait(tma_job_view_t *v, uint64_t since, double timeout)
{
    pthread_mutex_lock(&v->lock);
    if (v->version == since && timeout > 0) {
        double deadline = tma_clock_now() + timeout;
        while (v->version == since && !v->quit)
            if (!tma_cond_wait_until(&v->cond, &v->lock, deadline))
                break;
    }
    uint64_t ver = v->version;
    pthread_mutex_unlock(&v->lock);
    return ver;
}

void tma_job_view_poke(tma_job_view_t *v)
{
    pthread_mutex_lock(&v->lock);
    v->version++;
    pthread_cond_broadcast(&v->cond);
    pthread_mutex_unlock(&v->lock);
}

int64_t tma_job_view_agg(const tma_job_view_t *v, uint64_t *epoch_p)
{
    for (;;) {
        uint64_t s1 = __atomic_load_n(&v->agg_seq, __ATOMIC_SEQ_CST);
        int64_t r = __atomic_load_n(&v->agg_round, __ATOMIC_SEQ_CST);
        uint64_t e = __atomic_load_n(&v->agg_epoch, __ATOMIC_SEQ_CST);
        if (!(s1 & 1) && __atomic_load_n(&v->agg_seq, __ATOMIC_SEQ_CST) == s1) {
            *epoch_p = e;
            return r;
        }
    }
}

int tma_job_view_stopped(const tma_job_view_t *v)
{
    return __atomic_load_n(&v->stop, __ATOMIC_ACQUIRE);
}

tma_status_t tma_job_view_snapshot(tma_job_view_t *v, tma_job_view_snap_t *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_lock(&v->lock);
    const view_state_t *st = &v->st;
    s->version = v->version;
    s->revision = st->revision;
    s->config = st->config ? strdup(st->config) : NULL;
    s->has_coord = st->has_coord;
    s->coord = st->coord;
    s->coord_epoch = st->coord_epoch;
    s->coord_present = st->coord_present;
    s->coord_key_epoch = st->coord_key_epoch;
    s->coord_key_lease = st->coord_key_lease;
    s->n_members = st->n_members;
    s->n_ready = 0; /* counts the records copied (and owned) so far */
    s->n_shards = st->n_shards;
    s->members = malloc((size_t)(st->n_members + 1) * sizeof *s->members);
    s->ready = malloc((size_t)(st->n_ready + 1) * sizeof *s->ready);
    s->shards = malloc((size_t)(st->n_shards + 1) * sizeof *s->shards);
    s->shard_present = malloc((size_t)(st->n_shards + 1) * sizeof *s->shard_present);
    int ok = s->members && s->ready && s->shards && s->shard_present && (!st->config || s->config);
    if (ok && st->n_members)
        memcpy(s->members, st->members, (size_t)st->n_members * sizeof *s->members);
    for (int i = 0; ok && i < st->n_ready; i++) {
        const tma_job_ready_rec_t *from = &st->ready[i].rec;
        s->ready[i] = st->ready[i];
        s->ready[i].rec.shards = malloc((size_t)from->n_shards * sizeof(int32_t) + 1);
        s->ready[i].rec.refused = malloc((size_t)from->n_refused * sizeof(int32_t) + 1);
        s->n_ready = i + 1; /* owns what it got, freed with the snapshot */
        if (!s->ready[i].rec.shards || !s->ready[i].rec.refused) {
            ok = 0;
            break;
        }
        memcpy(s->ready[i].rec.shards, from->shards, (size_t)from->n_shards * sizeof(int32_t));
        memcpy(s->ready[i].rec.refused, from->refused, (size_t)from->n_refused * sizeof(int32_t));
    }
    if (ok && st->n_shards) {
        memcpy(s->shards, st->shards, (size_t)st->n_shards * sizeof *s->shards);
        memcpy(s->shard_present, st->shard_present, (size_t)st->n_shards * sizeof *s->shard_present);
    }
    s->agg_round = st->agg_round;
    s->agg_epoch = st->agg_epoch;
    s->stop = st->stop;
    s->has_state = st->has_state;
    s->state = st->state;
    pthread_mutex_unlock(&v->lock);
    if (!ok) {
        tma_job_view_snap_free(s);
        return TMA_ERR_NOMEM;
    }
    return TMA_OK;
}

void tma_job_view_snap_free(tma_job_view_snap_t *s)
{
    if (!s)
        return;
    free(s->config);
    free(s->members);
    ready_free(s->ready, s->n_ready);
    free(s->shards);
    free(s->shard_present);
    memset(s, 0, sizeof *s);
}

const tma_job_member_rec_t *tma_job_view_snap_member(const tma_job_view_snap_t *s, uint32_t id)
{
    for (int i = 0; i < s->n_members; i++)
        if (s->members[i].rec.id == id)
            return &s->members[i].rec;
    return NULL;
}

const tma_job_view_ready_t *tma_job_view_snap_ready(const tma_job_view_snap_t *s, uint32_t id)
{
    for (int i = 0; i < s->n_ready; i++)
        if (s->ready[i].id == id)
            return &s->ready[i];
    return NULL;
}

tma_status_t tma_job_view_wait_config(tma_job_view_t *v, double timeout, volatile sig_atomic_t *stop_flag,
                                     tma_job_t **job_p)
{
    static const char *const ctx = "the job config in etcd";
    double end = tma_clock_now() + timeout;
    uint64_t ver = 0;
    for (;;) {
        tma_job_view_snap_t s;
        tma_status_t st = tma_job_view_snapshot(v, &s);
        if (st != TMA_OK)
            return st;
        if (s.config) {
            cJSON *root;
            st = tma_json_parse(s.config, strlen(s.config), ctx, &root);
            tma_job_view_snap_free(&s);
            if (st != TMA_OK)
                return st;
            /* Paths in etcd are absolute (tma_job_to_json). */
            st = tma_job_parse(root, ctx, "/", job_p);
            cJSON_Delete(root);
            return st;
        }
        tma_job_view_snap_free(&s);
        if (tma_clock_now() >= end)
            return TMA_ERR_TIMEOUT;
        if (stop_flag && *stop_flag)
            return TMA_ERR_CANCELLED;
        ver = tma_job_view_wait(v, ver, 0.5);
    }
}
