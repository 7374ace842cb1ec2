/*
 * worker.c: the trainer loop of a distributed job (Algorithm 2).
 *
 * One thread does everything that touches the model: it trains, and between
 * steps it reads two atomics kept by the job view (the aggregation round and
 * the stop flag) and polls the transport for global weights.  Anything else
 * (shard moves, a new coordinator, a lost lease) is noticed through the job
 * view's version counter, also between steps.  A round in time mode: when
 * agg = t is seen, the weights go out at the end of the current step with a
 * meta block (lease, steps, loss, shards), and the worker waits up to the
 * round deadline for W[t]; if the coordinator is gone it keeps training and
 * reconnects when a new one appears.  With --state-dir it keeps its
 * optimizer state of every round it sends (state.c), and a trainer that
 * starts from W[t] continues the state its shard set had at round t.
 */
#include "worker_int.h"

#include "tma_transport.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP "worker"

typedef struct worker {
    const tma_worker_opts_t *o;
    volatile sig_atomic_t *stop_flag;
    tma_kv_t *kv;
    tma_job_view_t *view;
    tma_job_t *job;
    const tma_job_variant_desc_t *vd; /* job->vd */
    tma_partition_info_t *pinfo;
    worker_shards_t *shards; /* the shard files mapped, shared by the trainer and the rank */
    tma_inject_t inj;
    tma_gnn_config_t cfg;
    char device[32];
    int device_fixed; /* device is final (--device, one entry, a local rank, or a first incarnation's id) */

    /* one incarnation (a member id) */
    tma_member_t *member;
    uint32_t id;
    int64_t lease;
    int fenced; /* atomic: the lease was lost */
    int silent; /* etcd has not answered for longer than the lease TTL: not training */
    tma_transport_t *tr;
    worker_eval_t *ev; /* its evaluator rank (eval.where "workers") */
    uint64_t conn_epoch; /* the coordinator epoch we are connected to (0: none) */
    uint64_t explained_epoch; /* the coordinator whose unreachable address was explained */
    double next_connect;

    /* Shard sets hold up to max_shards entries: the partition's shard
     * count (1 without shards: the whole graph), so one worker can own
     * every shard. */
    int max_shards;
    int n_loaded;
    int32_t *loaded;       /* [max_shards], sorted */
    tma_graph_t **graphs;  /* [max_shards] */
    int32_t *want;         /* [max_shards]: scratch for the owned set */
    int32_t *refused;      /* [max_shards]: shards this incarnation refused (no file here) */
    int n_refused;
    tma_graph_t **opening; /* [max_shards]: scratch for load_shards */
    int *reuse;            /* [max_shards]: scratch for load_shards */
    int64_t meta_floats;   /* the meta block after the parameters */
    tma_gnn_trainer_t *trainer;
    int64_t P;         /* floats in the parameter block */
    float *sendbuf;    /* P + meta_floats */
    float *globalbuf;  /* P, posted for the coordinator's weights */
    int posted;
    tma_gnn_opt_state_t opt; /* --state-dir: the moments' buffers (P floats each) for the state files */
    int64_t saved_round;     /* the round (of saved_epoch) whose state is saved; -1: none for these shards */
    uint64_t saved_epoch;
    int have_weights;  /* global weights received since the shards were loaded */
    int64_t adopted_round; /* newest global round adopted */
    uint64_t adopted_epoch; /* ... and the epoch of the coordinator that sent it */

    /* accounting for the meta block */
    int64_t steps_total, steps_round;
    double loss_sum, step_seconds;
    /* The last round sent: a round is (epoch, round), so one that a new
     * coordinator raises again after a takeover is sent again. */
    int64_t last_sent_round;
    uint64_t last_sent_epoch;
    /* Step mode: the interval's steps are done and its weights wait for a
     * coordinator to take them (the one they went to died before sending
     * W[t] back): no more steps until one does, so the round holds exactly
     * interval_steps steps, as in a run without the failure. */
    int step_pending;
    int64_t state_round; /* the last round committed (`state` in etcd) */
    int stall_done, drop_done;
    int ready_dirty; /* ready/<id> must be (re)written */
    int ready_fresh; /* the record in etcd says "fresh" (no weights): rewritten once they come */
    int bad_shard_said; /* the highest out-of-range shards/<k> reported */
    double next_ready;
} worker_t;

static int should_stop(worker_t *w)
{
    return (w->stop_flag && *w->stop_flag) || tma_job_view_stopped(w->view);
}

static void on_lease_lost(void *arg, tma_status_t why)
{
    worker_t *w = arg;
    (void)why;
    __atomic_store_n(&w->fenced, 1, __ATOMIC_SEQ_CST);
    tma_job_view_poke(w->view);
}

/* ------------------------------------------------------------------ config */

/* The job's config from etcd (written by the coordinator). */
static tma_status_t read_config(worker_t *w)
{
    tma_status_t st = tma_job_view_wait_config(w->view, w->o->wait_config, w->stop_flag, &w->job);
    if (st == TMA_ERR_TIMEOUT)
        tma_log_error(COMP, "job %s: no config in etcd after %.0f s: is the coordinator running with "
                            "--job %s against the same etcd?",
                      w->o->job, w->o->wait_config, w->o->job);
    if (st == TMA_OK)
        w->vd = w->job->vd;
    return st;
}

/* ------------------------------------------------------------------ shards */

/* Gives back a graph load_shards opened: a shard's reference (the rank may
 * still hold the file), or GGS's whole graph. */
static void drop_graph(worker_t *w, tma_graph_t *g)
{
    if (w->vd->uses_shards)
        worker_shards_put(w->shards, g);
    else
        tma_graph_destroy(g);
}

static void unload_all(worker_t *w)
{
    tma_gnn_trainer_destroy(w->trainer);
    w->trainer = NULL;
    for (int i = 0; i < w->n_loaded; i++)
        drop_graph(w, w->graphs[i]);
    w->n_loaded = 0;
    w->have_weights = 0;
}

/* The shards the view says this member owns, sorted.  A shards/<k> key
 * with k beyond the partition is refused (said once): there is no such
 * shard to load. */
static int owned_shards(worker_t *w, const tma_job_view_snap_t *s, int32_t *out)
{
    int n = 0;
    for (int k = 0; k < s->n_shards && n < w->max_shards; k++) {
        if (!s->shard_present[k] || s->shards[k].owner != (int64_t)w->id)
            continue;
        if (k >= w->pinfo->num_shards) {
            if (k > w->bad_shard_said) {
                tma_log_error(COMP, "member %u: refused shards/%08d: shard %d is out of range (the job's "
                                    "partition has %d shards)",
                              w->id, k, k, w->pinfo->num_shards);
                w->bad_shard_said = k;
            }
            continue;
        }
        out[n++] = k;
    }
    return n;
}

static int has_shard(const int32_t *set, int n, int32_t k)
{
    for (int i = 0; i < n; i++)
        if (set[i] == k)
            return 1;
    return 0;
}

/* Drops from want[] the shards this node cannot train: a shard not loaded
 * yet is checked (its file exists here and is shard k of the partition);
 * one that fails is refused for the rest of the incarnation and the ready
 * record says so, so the coordinator deals it to another member instead of
 * waiting for this one.  Returns the new count. */
static int refuse_missing(worker_t *w, int32_t *want, int n_want)
{
    int n = 0;
    for (int i = 0; i < n_want; i++) {
        const int32_t k = want[i];
        if (has_shard(w->refused, w->n_refused, k))
            continue;
        if (!has_shard(w->loaded, w->n_loaded, k) &&
            (tma_partition_shard_check(w->pinfo, k) != TMA_OK || (w->ev && !worker_eval_files_here(w->pinfo, k)))) {
            tma_log_error(COMP, "member %u refuses shard %d: its file is not usable on this node (above); the "
                                "coordinator deals it to another worker",
                          w->id, k);
            w->refused[w->n_refused++] = k;
            w->ready_dirty = 1;
            w->next_ready = 0;
            continue;
        }
        want[n++] = k;
    }
    return n;
}

static int same_set(const int32_t *a, int na, const int32_t *b, int nb)
{
    if (na != nb)
        return 0;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

static tma_status_t put_ready(worker_t *w)
{
    tma_job_ready_rec_t r;
    memset(&r, 0, sizeof r);
    r.lease = w->lease;
    r.n_shards = w->vd->uses_shards ? w->n_loaded : 0;
    r.shards = w->loaded;
    r.n_refused = w->n_refused;
    r.refused = w->refused;
    r.fresh = w->n_loaded > 0 && !w->have_weights;
    char *val = tma_job_ready_rec_encode(&r);
    if (!val)
        return TMA_ERR_NOMEM;
    char key[TMA_KEY_MAX];
    tma_job_key_n(key, w->job->name, TMA_KEY_READY, w->id);
    tma_status_t st = tma_kv_put(w->kv, key, val, strlen(val), w->lease, NULL);
    free(val);
    if (st != TMA_OK)
        tma_log_warn(COMP, "cannot record readiness in etcd: %s", tma_status_str(st));
    else
        w->ready_fresh = r.fresh;
    return st;
}

static void ensure_posted(worker_t *w);

/* The first trainer of an incarnation, on the device of the job's list
 * that its member id picks, and the send and receive buffers sized for its
 * parameter block. */
static tma_status_t create_trainer(worker_t *w, tma_graph_t **graphs, int n)
{
    tma_status_t st = tma_gnn_trainer_create(&w->cfg, graphs, n, &w->trainer);
    if (st != TMA_OK)
        return st;
    tma_log_info(COMP, "member %u trains on %s with %d thread(s)", w->id, w->cfg.device,
                 tma_gnn_backend_threads(tma_gnn_trainer_backend(w->trainer)));
    int64_t P = tma_gnn_trainer_param_count(w->trainer);
    if (P == w->P && w->sendbuf && w->globalbuf)
        return TMA_OK;
    /* The receive buffer may be posted on the transport: take it back
     * before it is freed. */
    if (w->posted) {
        tma_transport_post_cancel(w->tr, w->globalbuf, 2.0);
        w->posted = 0;
    }
    w->P = P;
    tma_free_aligned(w->sendbuf);
    tma_free_aligned(w->globalbuf);
    free(w->opt.adam_m);
    free(w->opt.adam_v);
    w->sendbuf = tma_alloc_aligned((size_t)(w->P + w->meta_floats) * sizeof(float));
    w->globalbuf = tma_alloc_aligned((size_t)w->P * sizeof(float));
    w->opt.adam_m = w->o->state_dir ? malloc((size_t)w->P * sizeof(float)) : NULL;
    w->opt.adam_v = w->o->state_dir ? malloc((size_t)w->P * sizeof(float)) : NULL;
    if (!w->sendbuf || !w->globalbuf || (w->o->state_dir && (!w->opt.adam_m || !w->opt.adam_v)))
        return TMA_ERR_NOMEM;
    ensure_posted(w);
    return TMA_OK;
}

/* Loads the given shard set (without shards, GGS: the whole graph), keeping
 * the shards already loaded and the trainer's weights and optimizer state. */
static tma_status_t load_shards(worker_t *w, const int32_t *want, int n_want)
{
    tma_graph_t **graphs = w->opening;
    int *reuse = w->reuse;
    tma_status_t st = TMA_OK;
    for (int i = 0; i < n_want; i++) {
        graphs[i] = NULL;
        reuse[i] = -1;
        for (int j = 0; j < w->n_loaded; j++)
            if (w->loaded[j] == want[i])
                reuse[i] = j;
        if (reuse[i] >= 0) {
            graphs[i] = w->graphs[reuse[i]];
            continue;
        }
        const char *path = w->vd->uses_shards ? w->pinfo->shard_paths[want[i]] : w->job->graph;
        double t0 = tma_clock_now();
        /* A shard's file may be mapped already by the rank: one mapping. */
        st = w->vd->uses_shards ? worker_shards_get(w->shards, want[i], &graphs[i]) : tma_graph_open(path, 0, &graphs[i]);
        if (st != TMA_OK)
            goto fail;
        tma_log_info(COMP, "member %u loaded %s (%lld nodes, %lld training edges) in %.2f s", w->id, path,
                     (long long)graphs[i]->num_nodes, (long long)graphs[i]->num_train_edges,
                     tma_clock_now() - t0);
    }
    if (n_want > 0) {
        if (!w->trainer) {
            st = create_trainer(w, graphs, n_want);
        } else {
            st = tma_gnn_trainer_set_graphs(w->trainer, graphs, n_want);
        }
        if (st != TMA_OK)
            goto fail;
        /* Workers draw different batches: mix the shard ids into the seed
         * (not the member id, so a rerun with the same seed is identical);
         * on the whole graph only the member id tells them apart. */
        uint64_t seed = w->cfg.seed;
        for (int i = 0; i < n_want; i++)
            seed = tma_hash64(seed ^ (uint64_t)(want[i] + 1));
        if (!w->vd->uses_shards)
            seed = tma_hash64(w->cfg.seed ^ ((uint64_t)w->id + 0x5151));
        tma_gnn_trainer_reseed(w->trainer, seed);
        w->saved_round = -1;
    }
    /* Close what is no longer owned. */
    for (int j = 0; j < w->n_loaded; j++) {
        int kept = 0;
        for (int i = 0; i < n_want; i++)
            kept |= reuse[i] == j;
        if (!kept)
            drop_graph(w, w->graphs[j]);
    }
    int had = w->n_loaded;
    for (int i = 0; i < n_want; i++) {
        w->graphs[i] = graphs[i];
        w->loaded[i] = want[i];
    }
    w->n_loaded = n_want;
    if (n_want == 0) {
        tma_gnn_trainer_destroy(w->trainer);
        w->trainer = NULL;
        w->have_weights = 0;
    } else if (had == 0) {
        w->have_weights = 0;
    }
    w->ready_dirty = 1;
    w->next_ready = 0;
    return TMA_OK;
fail:
    for (int i = 0; i < n_want; i++)
        if (graphs[i] && reuse[i] < 0)
            drop_graph(w, graphs[i]);
    return st;
}

/* ------------------------------------------------------------------ the coordinator link */

static void disconnect(worker_t *w)
{
    if (w->posted && w->tr) {
        tma_transport_post_cancel(w->tr, w->globalbuf, 2.0);
        w->posted = 0;
    }
    w->conn_epoch = 0;
}

static void ensure_posted(worker_t *w)
{
    if (w->posted || !w->tr || !w->globalbuf || !w->conn_epoch)
        return;
    if (tma_transport_post(w->tr, TMA_COORD_PEER, TMA_TAG_GLOBAL, w->globalbuf, (size_t)w->P,
                           TMA_TRANSPORT_MEM_HOST) == TMA_OK)
        w->posted = 1;
}

/* Connects to the coordinator the view names, when not connected to it yet. */
static void ensure_connected(worker_t *w, const tma_job_view_snap_t *s)
{
    if (!s->has_coord || s->coord_epoch == w->conn_epoch)
        return;
    double now = tma_clock_now();
    if (now < w->next_connect)
        return;
    if (w->conn_epoch)
        disconnect(w);
    uint32_t peer = 0;
    tma_status_t st = tma_transport_connect(w->tr, s->coord.address, 5.0, &peer);
    if (st != TMA_OK || peer != TMA_COORD_PEER) {
        /* Once per coordinator: what may rule its address out here. */
        char why[512] = "";
        if (w->explained_epoch != s->coord_epoch) {
            tma_transport_explain_route(s->coord.address, why, sizeof why);
            w->explained_epoch = s->coord_epoch;
        }
        tma_log_warn(COMP, "member %u: cannot reach the coordinator at %s (%s)%s%s; will retry", w->id,
                     s->coord.address, st == TMA_OK ? "it is not a coordinator" : tma_status_str(st),
                     why[0] ? ": " : "", why);
        w->next_connect = now + 1.0;
        return;
    }
    w->conn_epoch = s->coord_epoch;
    tma_log_info(COMP, "member %u connected to the coordinator at %s (epoch %llu)", w->id, s->coord.address,
                 (unsigned long long)s->coord_epoch);
    ensure_posted(w);
}

/* Takes a received global tensor: adopt it unless it is older than what we
 * have.  Returns 1 when one was adopted. */
static int take_global(worker_t *w, tma_transport_msg_t *m)
{
    int adopted = 0;
    if (m->kind == TMA_TRANSPORT_MSG_EVENT) {
        tma_transport_event_t ev = m->event;
        tma_transport_msg_release(w->tr, m);
        /* The end of a connection that a newer one replaced (we reconnected
         * to a new coordinator) is not news: only act when none is left.
         * Posted buffers belong to the peer id, not the connection: they
         * stay posted. */
        if (tma_transport_wait_peer(w->tr, TMA_COORD_PEER, 0) == TMA_OK)
            return 0;
        tma_log_warn(COMP, "member %u: the connection to the coordinator ended (%s)", w->id,
                     tma_status_str(ev.reason));
        w->conn_epoch = 0;
        return 0;
    }
    if (m->count != (size_t)w->P) {
        tma_log_error(COMP, "member %u: global weights of %zu floats, expected %lld: refused", w->id, m->count,
                      (long long)w->P);
    } else if (m->meta.epoch < w->conn_epoch) {
        tma_log_warn(COMP, "member %u: refused global weights of a stale coordinator epoch %llu", w->id,
                     (unsigned long long)m->meta.epoch);
    } else if (tma_job_first_nonfinite(m->data, w->P) >= 0) {
        tma_log_error(COMP, "member %u: the global weights of round %llu from the coordinator (epoch %llu) hold "
                            "NaN or infinite values: refused, training on with its own",
                      w->id, (unsigned long long)m->meta.round, (unsigned long long)m->meta.epoch);
    } else if (w->trainer && (m->meta.epoch > w->adopted_epoch || (int64_t)m->meta.round >= w->adopted_round ||
                              !w->have_weights)) {
        tma_log_debug(COMP, "member %u: global weights of round %llu", w->id, (unsigned long long)m->meta.round);
        if (tma_gnn_trainer_set_params(w->trainer, m->data) == TMA_OK) {
            w->adopted_round = (int64_t)m->meta.round;
            w->adopted_epoch = m->meta.epoch;
            w->have_weights = 1;
            adopted = 1;
            /* A record that still says "fresh" would make a coordinator that
             * takes over think this member waits for weights. */
            if (w->ready_fresh && !w->ready_dirty) {
                w->ready_dirty = 1;
                w->next_ready = 0;
            }
        }
    }
    int was_in_place = m->in_place;
    tma_transport_msg_release(w->tr, m);
    if (was_in_place)
        w->posted = 0;
    ensure_posted(w);
    return adopted;
}

/* Whether W[round] of the coordinator we are connected to is adopted
 * already (that round is closed). */
static int has_global(const worker_t *w, int64_t round)
{
    return w->have_weights && w->conn_epoch && w->adopted_epoch == w->conn_epoch && w->adopted_round >= round;
}

/* Waits up to timeout for global weights of at least round `round`
 * (-1: any).  Returns 1 when adopted, 0 on timeout or when something else
 * needs attention (stop, fenced, the connection ended). */
static int wait_global(worker_t *w, int64_t round, double timeout)
{
    if (round >= 0 && has_global(w, round))
        return 1; /* it came before we waited */
    double end = tma_clock_now() + timeout;
    while (tma_clock_now() < end) {
        if (should_stop(w) || __atomic_load_n(&w->fenced, __ATOMIC_SEQ_CST) || !w->conn_epoch)
            return 0;
        tma_transport_msg_t m;
        memset(&m, 0, sizeof m);
        if (tma_transport_recv(w->tr, TMA_COORD_PEER, TMA_TAG_GLOBAL, 0.1, &m) != TMA_OK)
            continue;
        int64_t got = m.kind == TMA_TRANSPORT_MSG_EVENT ? -1 : (int64_t)m.meta.round;
        int adopted = take_global(w, &m);
        if (adopted && (round < 0 || w->adopted_round >= round))
            return 1;
        if (!adopted && round >= 0 && got >= round)
            return 0; /* refused: no other W[round] comes */
    }
    return 0;
}

static void poll_global(worker_t *w)
{
    tma_transport_msg_t m;
    memset(&m, 0, sizeof m);
    while (w->conn_epoch && tma_transport_recv(w->tr, TMA_COORD_PEER, TMA_TAG_GLOBAL, 0, &m) == TMA_OK) {
        take_global(w, &m);
        memset(&m, 0, sizeof m);
    }
}

/* Sends the local weights (or GGS gradients) with the meta block. */
static tma_status_t send_tensor(worker_t *w, uint32_t tag, int64_t round)
{
    tma_status_t st = tag == TMA_TAG_GRADS ? tma_gnn_trainer_get_grads(w->trainer, w->sendbuf)
                                           : tma_gnn_trainer_get_params(w->trainer, w->sendbuf);
    if (st != TMA_OK)
        return st;
    if (tag == TMA_TAG_LOCAL)
        tma_inject_poison(&w->inj, "weights", round, w->sendbuf);
    tma_job_msg_meta_t meta;
    memset(&meta, 0, sizeof meta);
    meta.magic = TMA_META_MAGIC;
    meta.lease = w->lease;
    meta.steps_total = w->steps_total;
    meta.steps_round = w->steps_round;
    meta.loss = w->steps_round ? w->loss_sum / (double)w->steps_round : 0.0;
    meta.step_seconds = w->step_seconds;
    meta.n_shards = (uint32_t)(w->vd->uses_shards ? w->n_loaded : 0);
    tma_job_msg_meta_pack(&meta, w->loaded, w->vd->uses_shards ? w->pinfo->num_shards : 0, w->sendbuf + w->P);
    tma_transport_meta_t tm = {tag, w->conn_epoch, (uint64_t)round};
    tma_log_debug(COMP, "member %u: sending %s for round %lld (%lld steps)", w->id,
                  tag == TMA_TAG_GRADS ? "gradients" : "weights", (long long)round, (long long)w->steps_round);
    st = tma_transport_send(w->tr, TMA_COORD_PEER, &tm, w->sendbuf, (size_t)(w->P + w->meta_floats),
                            TMA_TRANSPORT_MEM_HOST, w->job->round_deadline);
    if (st != TMA_OK) {
        tma_log_warn(COMP, "member %u: sending to the coordinator failed (%s)", w->id, tma_status_str(st));
        w->conn_epoch = 0;
    }
    return st;
}

static void reset_round(worker_t *w)
{
    w->steps_round = 0;
    w->loss_sum = 0;
    w->step_seconds = 0;
}

/* ------------------------------------------------------------------ one incarnation */

static void teardown(worker_t *w, int leave)
{
    /* The job's last evaluations may need this rank after the stop (not
     * after a signal, a fencing or a failure). */
    const int linger = leave && !(w->stop_flag && *w->stop_flag) && tma_job_view_stopped(w->view);
    worker_eval_stop(w->ev, linger ? w->cfg.eval_rank_timeout * (w->cfg.layers + 3) : 0);
    w->ev = NULL;
    disconnect(w);
    tma_transport_destroy(w->tr);
    w->tr = NULL;
    unload_all(w);
    if (leave)
        tma_member_leave(w->member);
    else
        tma_member_abandon(w->member);
    w->member = NULL;
}

static void set_device(worker_t *w, const char *device)
{
    snprintf(w->device, sizeof w->device, "%s", device);
    snprintf(w->cfg.device, sizeof w->cfg.device, "%s", device);
}

/* The device, once for all incarnations (worker_device_choose). */
static tma_status_t choose_device(worker_t *w)
{
    char dev[32];
    tma_status_t st = worker_device_choose(w->o->device, w->job, dev, sizeof dev, &w->device_fixed);
    if (st == TMA_OK)
        set_device(w, dev);
    return st;
}

static tma_status_t join(worker_t *w)
{
    tma_job_member_rec_t rec;
    memset(&rec, 0, sizeof rec);
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    snprintf(rec.host, sizeof rec.host, "%s", host);
    rec.pid = (int)getpid();
    rec.backup = w->o->backup;
    snprintf(rec.device, sizeof rec.device, "%s", w->device);
    if (w->o->name)
        snprintf(rec.name, sizeof rec.name, "%s", w->o->name);
    else
        snprintf(rec.name, sizeof rec.name, "%.40s:%d", host, rec.pid);
    __atomic_store_n(&w->fenced, 0, __ATOMIC_SEQ_CST);
    w->silent = 0;
    tma_status_t st = tma_member_join(w->kv, w->job->name, w->job->lease_ttl, &rec, on_lease_lost, w, &w->member);
    if (st != TMA_OK)
        return st;
    w->id = rec.id;
    w->lease = rec.lease;
    if (!w->device_fixed) {
        /* No --device and no local rank: the first incarnation's id picks
         * the entry, and later incarnations keep it (a fenced worker stays
         * on its GPU).  The record then names the device really used. */
        set_device(w, w->job->worker_devices[w->id % (unsigned)w->job->n_worker_devices]);
        w->device_fixed = 1;
        if (strcmp(rec.device, w->device) != 0) {
            snprintf(rec.device, sizeof rec.device, "%s", w->device);
            tma_member_update(w->member, w->job->name, &rec);
        }
    }
    if (!w->o->name) {
        char tag[32];
        snprintf(tag, sizeof tag, "worker-%u", w->id);
        tma_log_set_tag(tag);
    }

    st = tma_job_load_token(w->job);
    if (st != TMA_OK) {
        tma_member_leave(w->member);
        w->member = NULL;
        return st;
    }
    tma_transport_config_t tc;
    tma_transport_config_init(&tc);
    tc.job = w->job->name;
    tc.token = w->job->token[0] ? w->job->token : NULL;
    tc.self_id = w->id;
    tc.self_lease = (uint64_t)w->lease;
    st = tma_transport_create(&tc, &w->tr);
    if (st != TMA_OK) {
        tma_member_leave(w->member);
        w->member = NULL;
        return st;
    }
    if (w->cfg.eval_on_workers > 0 && w->vd->uses_shards) {
        char listen[300];
        tma_job_listen_address(w->job, 1, listen, sizeof listen);
        worker_eval_cfg_t ec = {w->job->name, tc.token, listen, w->id,   w->lease,
                                &w->cfg,     w->pinfo, w->shards, w->view, &w->inj};
        if ((st = worker_eval_join(&ec, w->member, &rec, &w->ev)) != TMA_OK) {
            tma_transport_destroy(w->tr);
            w->tr = NULL;
            tma_member_leave(w->member);
            w->member = NULL;
            return st;
        }
    }
    w->conn_epoch = 0;
    w->next_connect = 0;
    w->adopted_round = -1;
    w->adopted_epoch = 0;
    w->last_sent_round = 0;
    w->last_sent_epoch = 0;
    w->step_pending = 0;
    w->state_round = 0;
    w->steps_total = 0;
    w->n_refused = 0; /* a new member checks its shards again: files may have arrived */
    reset_round(w);
    return TMA_OK;
}

/* ------------------------------------------------------------------ optimizer state files */

/* Whether this worker keeps state files: --state-dir, and a variant whose
 * trainers own shard sets and send weights (a GGS worker's state is the
 * coordinator's). */
static int keeps_state(const worker_t *w)
{
    return w->o->state_dir && w->vd->uses_shards && w->vd->averages == TMA_AVERAGE_WEIGHTS;
}

static worker_state_key_t state_key(const worker_t *w)
{
    worker_state_key_t k = {w->o->state_dir, w->job->name, w->loaded, w->n_loaded};
    return k;
}

/* Before round t's weights go out: the trainer's state as round t's (once
 * a round of an epoch), then the files no resume needs any more.  A state
 * that cannot be written is logged and training goes on (a resume at round
 * t would start this shard set's optimizer afresh). */
static void save_state(worker_t *w, int64_t t, uint64_t epoch)
{
    if (!keeps_state(w) || (w->saved_round == t && w->saved_epoch == epoch))
        return;
    worker_state_key_t k = state_key(w);
    if (worker_state_save(&k, t, w->trainer, w->sendbuf, &w->opt) != TMA_OK)
        return;
    w->saved_round = t;
    w->saved_epoch = epoch;
    worker_state_prune(w->o->state_dir, w->job->name, TMA_MIN(t, w->state_round) - 1);
}

/* A trainer that starts on its shards from W[r]: the state its shard set
 * had at round r, when there is one. */
static void continue_state(worker_t *w)
{
    if (!keeps_state(w))
        return;
    worker_state_key_t k = state_key(w);
    (void)worker_state_load(&k, w->adopted_round, w->trainer); /* logged either way */
}

/* Step mode: the round the coordinator we are connected to collects next,
 * one past the newest of the round committed last (`state`), the global
 * weights it sent us and the round we sent it.  A coordinator that took the
 * job over resumes from `state`, so a worker that sent round t to its
 * predecessor sends t again, and one that joins late counts from W[r]. */
static int64_t step_round(const worker_t *w)
{
    int64_t base = w->state_round;
    if (w->adopted_epoch == w->conn_epoch && w->adopted_round > base)
        base = w->adopted_round;
    if (w->last_sent_epoch == w->conn_epoch && w->last_sent_round > base)
        base = w->last_sent_round;
    return base + 1;
}

/* The aggregation protocol at the end of a step: when a round is due (agg
 * raised, or interval_steps done) the weights go out and the worker waits
 * for W[t]; with no coordinator connected it trains on.  Stop and fencing
 * are noticed by the caller's loop. */
static void maybe_aggregate(worker_t *w)
{
    const tma_job_t *job = w->job;
    int64_t t = -1;
    uint64_t epoch = w->last_sent_epoch;
    if (job->interval_steps > 0) {
        if (w->steps_round < job->interval_steps && !w->step_pending)
            return;
        if (!w->conn_epoch) {
            /* No coordinator: the round's weights wait for the next one
             * (the round number is its to say, not ours to advance). */
            w->step_pending = 1;
            return;
        }
        t = step_round(w);
        epoch = w->conn_epoch;
    } else {
        /* A round raised by another coordinator than the one we are
         * connected to waits until we are connected to it (or it is
         * replaced); an older epoch's is stale. */
        int64_t agg = tma_job_view_agg(w->view, &epoch);
        int fresh = epoch > w->last_sent_epoch || (epoch == w->last_sent_epoch && agg > w->last_sent_round);
        if (agg > 0 && fresh && (!w->conn_epoch || epoch == w->conn_epoch))
            t = agg;
    }
    if (t < 0)
        return;
    if (job->interval_steps <= 0 && has_global(w, t)) {
        /* Round t closed before we got to it (we were late): its global
         * weights are here, anything we sent now would be refused. */
        w->last_sent_round = t;
        w->last_sent_epoch = epoch;
        return;
    }
    if (w->inj.stall_round == t && !w->stall_done) {
        w->stall_done = 1;
        tma_member_stall_keepalive(w->member, w->inj.stall_seconds);
    }
    tma_inject_point(&w->inj, "send", t);
    w->last_sent_round = t;
    w->last_sent_epoch = epoch;
    if (!w->conn_epoch) {
        /* No coordinator right now: keep training on local weights. */
        reset_round(w);
        return;
    }
    int steps = job->interval_steps > 0;
    save_state(w, t, epoch);
    if (w->inj.drop_round == t && !w->drop_done) {
        w->drop_done = 1;
        tma_log_warn(COMP, "injected: member %u drops its weights for round %lld", w->id, (long long)t);
    } else if (send_tensor(w, TMA_TAG_LOCAL, t) != TMA_OK) {
        if (steps)
            w->step_pending = 1; /* for the next coordinator */
        else
            reset_round(w);
        return;
    }
    if (!steps)
        reset_round(w);
    tma_inject_point(&w->inj, "recv", t);
    /* The coordinator waits up to its round deadline, then averages and
     * broadcasts: allow for that and some slack. */
    int got = wait_global(w, t, job->round_deadline + 10.0);
    if (steps && !got && !w->conn_epoch) {
        /* It died before W[t] came: the same weights go to the next one. */
        if (!w->step_pending)
            tma_log_warn(COMP, "member %u: the coordinator went away in round %lld: holding the round's weights "
                               "for the next one",
                         w->id, (long long)t);
        w->step_pending = 1;
        return;
    }
    if (steps) {
        w->step_pending = 0;
        reset_round(w);
    }
    if (!got)
        tma_log_warn(COMP, "member %u: no global weights for round %lld; training on", w->id, (long long)t);
}

static tma_status_t ggs_step(worker_t *w, int64_t s)
{
    float loss = 0;
    double t0 = tma_clock_now();
    tma_status_t st = tma_gnn_trainer_compute_grads(w->trainer, &loss);
    if (st != TMA_OK)
        return st;
    w->steps_total++;
    w->steps_round = 1;
    w->loss_sum = loss;
    w->step_seconds = tma_clock_now() - t0;
    if (send_tensor(w, TMA_TAG_GRADS, s) != TMA_OK)
        return TMA_OK;
    /* The new parameters come back as the global weights of step s (or of
     * an earlier one, when the coordinator refused ours: we step again
     * from them, numbered as it numbers them). */
    if (!wait_global(w, -1, w->job->round_deadline + 10.0))
        tma_log_warn(COMP, "member %u: no parameters back for step %lld", w->id, (long long)s);
    reset_round(w);
    return TMA_OK;
}

/* A worker that has had no answer from etcd for longer than its lease TTL
 * (cut off from etcd, maybe not from the coordinator) presumes its lease
 * lost: etcd has probably expired it, the coordinator has given its shards
 * away, and nothing it trains or sends would count.  It stops training
 * (and drops the steps of the round, which nobody will count) until etcd
 * answers: then it trains on if the lease survived (a whole cluster was
 * down), is fenced and joins again if not, or leaves if the job is over.
 * Returns 1 while paused (after waiting a little). */
static int paused_by_silence(worker_t *w, uint64_t seen)
{
    if (tma_member_silent(w->member)) {
        if (!w->silent) {
            tma_log_warn(COMP, "member %u: no answer from etcd for longer than its lease TTL (%lld s): it presumes "
                               "its lease lost and stops training until etcd answers",
                         w->id, (long long)w->job->lease_ttl);
            w->silent = 1;
            reset_round(w);
        }
        tma_job_view_wait(w->view, seen, 0.5);
        return 1;
    }
    if (w->silent) {
        tma_log_info(COMP, "member %u: etcd answers again and its lease is alive: training on", w->id);
        w->silent = 0;
    }
    return 0;
}

/* Runs one incarnation until stop (TMA_OK), fencing (TMA_ERR_FENCED) or an
 * error. */
static tma_status_t incarnation(worker_t *w)
{
    tma_status_t st = join(w);
    if (st != TMA_OK)
        return st;
    uint64_t seen = (uint64_t)-1;
    int started = 0;
    while (!should_stop(w)) {
        if (__atomic_load_n(&w->fenced, __ATOMIC_SEQ_CST)) {
            tma_log_warn(COMP, "member %u was fenced (its lease is gone): dropping its state and joining "
                               "again",
                         w->id);
            teardown(w, 0);
            return TMA_ERR_FENCED;
        }
        if (paused_by_silence(w, seen))
            continue;
        uint64_t ver = tma_job_view_wait(w->view, seen, 0);
        double now = tma_clock_now();
        int idle = !w->trainer || !w->have_weights;
        if (w->ready_dirty && now >= w->next_ready) {
            if (put_ready(w) == TMA_OK)
                w->ready_dirty = 0;
            else
                w->next_ready = now + 1.0;
        }
        if (ver != seen || idle || (!w->conn_epoch && now >= w->next_connect)) {
            tma_job_view_snap_t s;
            if (tma_job_view_snapshot(w->view, &s) == TMA_OK) {
                seen = s.version;
                if (s.has_state)
                    w->state_round = s.state.round;
                ensure_connected(w, &s);
                int32_t *want = w->want;
                int n_want;
                if (w->vd->uses_shards) {
                    n_want = refuse_missing(w, want, owned_shards(w, &s, want));
                } else {
                    want[0] = 0; /* the whole graph */
                    n_want = 1;
                }
                tma_job_view_snap_free(&s);
                if (!same_set(want, n_want, w->loaded, w->n_loaded)) {
                    st = load_shards(w, want, n_want);
                    if (st != TMA_OK) {
                        teardown(w, 1);
                        return st;
                    }
                }
            }
        }
        if (!w->trainer) {
            /* A spare or backup with nothing to train: wait for a change. */
            tma_job_view_wait(w->view, seen, 0.5);
            continue;
        }
        if (!w->have_weights) {
            /* Fresh shards: train from the coordinator's current weights. */
            poll_global(w);
            if (!w->have_weights)
                wait_global(w, -1, 0.2);
            if (!w->have_weights)
                continue;
            continue_state(w);
            if (!started) {
                tma_log_info(COMP, "member %u training on %d shard(s) from global round %lld", w->id,
                             w->n_loaded, (long long)w->adopted_round);
                started = 1;
            }
            /* Rounds already raised before we had weights are not ours. */
            uint64_t agg_epoch;
            int64_t agg = tma_job_view_agg(w->view, &agg_epoch);
            if (w->job->interval_steps <= 0 &&
                (agg_epoch > w->last_sent_epoch || (agg_epoch == w->last_sent_epoch && agg > w->last_sent_round))) {
                w->last_sent_round = agg;
                w->last_sent_epoch = agg_epoch;
            } else if (w->adopted_round > w->last_sent_round)
                w->last_sent_round = w->adopted_round;
        }
        if (w->vd->averages == TMA_AVERAGE_GRADS) {
            /* GGS steps on the parameters of the coordinator we are
             * connected to, numbered as it numbers them: one that took the
             * job over sends its own when we connect (its counter restarts). */
            if (!w->conn_epoch) {
                tma_job_view_wait(w->view, seen, 0.2);
                continue;
            }
            if (w->adopted_epoch != w->conn_epoch) {
                wait_global(w, -1, 0.2);
                continue;
            }
            st = ggs_step(w, w->adopted_round + 1);
            if (st != TMA_OK)
                break;
            continue;
        }
        if (w->step_pending) {
            /* Step mode: this round's weights wait for a coordinator. */
            if (w->conn_epoch)
                maybe_aggregate(w);
            else
                tma_job_view_wait(w->view, seen, 0.2);
            continue;
        }
        if (w->steps_round == 0) /* the round's first step: a pause there fires once */
            tma_inject_point(&w->inj, "step", w->last_sent_round + 1);
        float loss = 0;
        double t0 = tma_clock_now();
        st = tma_gnn_trainer_step(w->trainer, &loss);
        if (st != TMA_OK)
            break;
        w->steps_total++;
        w->steps_round++;
        w->loss_sum += loss;
        w->step_seconds += tma_clock_now() - t0;
        if (w->inj.delay_step > 0)
            tma_sleep(w->inj.delay_step);
        poll_global(w);
        maybe_aggregate(w);
    }
    if (st != TMA_OK) {
        tma_log_error(COMP, "member %u: training failed: %s", w->id, tma_status_str(st));
        teardown(w, 1);
        return st;
    }
    tma_log_info(COMP, "member %u: the job stopped after %lld steps", w->id, (long long)w->steps_total);
    teardown(w, 1);
    return TMA_OK;
}

/* ------------------------------------------------------------------ entry */

/* partition.json of the folder this node holds: --data-dir, else the job's
 * partition.node_dir, else its partition.dir (a shared file system).  It
 * must be the job's partition: the same shard count and seed. */
static tma_status_t open_partition(worker_t *w)
{
    const char *dir = w->o->data_dir       ? w->o->data_dir
                      : w->job->partition_node_dir ? w->job->partition_node_dir
                                                 : w->job->partition_dir;
    const char *from = w->o->data_dir ? "--data-dir" : w->job->partition_node_dir ? "partition.node_dir" : "partition.dir";
    if (!dir) {
        tma_log_error(COMP, "job %s has no partition folder: give --data-dir DIR", w->job->name);
        return TMA_ERR_CONFIG;
    }
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    tma_status_t st = tma_partition_info_load(dir, &w->pinfo);
    if (st != TMA_OK) {
        tma_log_error(COMP, "node %s: cannot read the job's partition from %s (%s): copy partition.json and this "
                            "node's shards there, or give --data-dir DIR",
                      host, dir, from);
        return st;
    }
    if (w->pinfo->num_shards != w->job->shards || w->pinfo->seed != w->job->partition_seed) {
        tma_log_error(COMP, "node %s: %s/partition.json (%s) holds %d shards of seed %llu, but job %s uses %d shards "
                            "of seed %llu: it is another partition",
                      host, dir, from, w->pinfo->num_shards, (unsigned long long)w->pinfo->seed, w->job->name,
                      w->job->shards, (unsigned long long)w->job->partition_seed);
        return TMA_ERR_MISMATCH;
    }
    tma_log_info(COMP, "partition: %s (%s), %d shards", dir, from, w->pinfo->num_shards);
    return TMA_OK;
}

tma_status_t tma_worker_run(const tma_worker_opts_t *opts, volatile sig_atomic_t *stop_flag)
{
    worker_t w;
    memset(&w, 0, sizeof w);
    w.o = opts;
    w.stop_flag = stop_flag;
    /* The log tag is the worker's name, as in its launch's log file name,
     * tma status and the progress line; without --name, worker-ID once it
     * has joined (join). */
    if (opts->name)
        tma_log_set_tag(opts->name);
    if (opts->inject)
        w.inj = *opts->inject;
    else
        tma_inject_init(&w.inj);
    if (opts->state_dir && tma_mkdir_p(opts->state_dir) != TMA_OK) {
        tma_log_error(COMP, "--state-dir %s: cannot make the folder", opts->state_dir);
        return TMA_ERR_IO;
    }
    tma_status_t st = tma_kv_create(opts->kv, &w.kv);
    if (st != TMA_OK)
        return st;
    st = tma_job_view_start(w.kv, opts->job, opts->wait_config, &w.view);
    if (st != TMA_OK)
        goto out;
    st = read_config(&w);
    if (st != TMA_OK)
        goto out;
    w.cfg = w.job->model;
    if (opts->threads > 0)
        w.cfg.threads = opts->threads;
    /* The trainer computes on this device (cpu or cuda[:i]); weights
     * still travel through the trainer's host copies, so the transport sees
     * host memory only. */
    if ((st = choose_device(&w)) != TMA_OK)
        goto out;
    if (w.vd->uses_shards && ((st = open_partition(&w)) != TMA_OK || (st = worker_shards_create(w.pinfo, &w.shards))))
        goto out;
    w.max_shards = w.vd->uses_shards ? w.pinfo->num_shards : 1;
    w.meta_floats = tma_job_msg_meta_floats(w.vd->uses_shards ? w.pinfo->num_shards : 0);
    w.loaded = malloc((size_t)w.max_shards * sizeof *w.loaded);
    w.graphs = malloc((size_t)w.max_shards * sizeof *w.graphs);
    w.want = malloc((size_t)w.max_shards * sizeof *w.want);
    w.refused = malloc((size_t)w.max_shards * sizeof *w.refused);
    w.opening = malloc((size_t)w.max_shards * sizeof *w.opening);
    w.reuse = malloc((size_t)w.max_shards * sizeof *w.reuse);
    if (!w.loaded || !w.graphs || !w.want || !w.refused || !w.opening || !w.reuse) {
        st = TMA_ERR_NOMEM;
        goto out;
    }
    for (int joined = 0;; joined = 1) {
        st = incarnation(&w);
        /* After a first incarnation, joining again waits for etcd to
         * answer (a worker fenced after an etcd outage rejoins when it
         * comes back). */
        int retry = st == TMA_ERR_FENCED || (joined && tma_status_group(st) == TMA_GROUP_PEER);
        if (!retry)
            break;
        if (should_stop(&w)) {
            st = TMA_OK;
            break;
        }
        if (st != TMA_ERR_FENCED)
            tma_log_warn(COMP, "cannot join job %s again yet (%s); retrying until etcd answers", w.job->name,
                         tma_status_str(st));
        tma_sleep(st == TMA_ERR_FENCED ? 0.5 : 2.0);
    }
    if (st == TMA_OK && stop_flag && *stop_flag)
        st = TMA_ERR_CANCELLED;
out:
    tma_job_view_stop(w.view);
    tma_free_aligned(w.sendbuf);
    tma_free_aligned(w.globalbuf);
    free(w.opt.adam_m);
    free(w.opt.adam_v);
    free(w.loaded);
    free(w.graphs);
    free(w.want);
    free(w.refused);
    free(w.opening);
    free(w.reuse);
    worker_shards_destroy(w.shards);
    tma_partition_info_destroy(w.pinfo);
    tma_job_destroy(w.job);
    tma_kv_destroy(w.kv);
    return st;
}
