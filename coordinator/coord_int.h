/*
 * coord_int.h: the coordinator's private pieces: its state (coord_t and the
 * per-member slots), the functions each of its files provides to the
 * others, and the evaluator thread.  The files, in the order of a job:
 * setup.c (phases that acquire and release), start.c (the first deal and
 * round 0), takeover.c (resuming another coordinator's job), members.c
 * (the view, suspects, slots), round.c (collect, average, publish a
 * round), average.c (the pure weighted mean), ggs.c (synchronous SGD),
 * publish.c (the records, the global weights, checkpoints), end.c (stop,
 * test, result) and coordinator.c (the sequence of phases); below them all,
 * coord.c (state queries: stopping, training time), guard.c (etcd writes
 * guarded by the epoch), io_retry.c (writes retried while the disk is full),
 * evaluator.c (the evaluator thread; a weights file's metrics) and prom.c
 * (the /metrics endpoint).
 */
#ifndef TMA_COORD_INT_H
#define TMA_COORD_INT_H

#include "tma_coordinator.h"
#include "tma_gnn.h"
#include "tma_transport.h"

/* ------------------------------------------------------------------ evaluator thread (evaluator.c) */

/*
 * The evaluator runs beside aggregation: the round loop hands it each new
 * global model with the round's record; it evaluates the newest one it has
 * (a round handed over while it was busy, and overtaken by a newer one, is
 * recorded as skipped), appends each round's line to metrics.jsonl in round
 * order, keeps the best model's weights and the `best` key, and updates the
 * round's record in etcd with its validation MRR.
 */
typedef struct coord_eval coord_eval_t;

/* ------------------------------------------------------------------ evaluator ranks (ranks.c) */

/* A distributed evaluation on the shards' owners (eval.where "workers"),
 * driven by the evaluator thread alone. */
typedef struct coord_ranks coord_ranks_t;
typedef struct coord_ranks_cfg {
    const char *job, *token;
    tma_job_view_t *view;        /* the shard owners and their ranks' addresses */
    const tma_gnn_config_t *cfg; /* resolved; copied */
    int32_t num_shards;
    int64_t num_val, num_test, negatives; /* the graph's (its header) */
    uint64_t epoch;
    const int *fenced;
    volatile sig_atomic_t *stop_flag;
} coord_ranks_cfg_t;
tma_status_t coord_ranks_create(const coord_ranks_cfg_t *c, coord_ranks_t **r_p);
/* The metrics of `params` on `split`, computed by the ranks, and with
 * test_p also the test split's on the same embeddings (test_p->edges 0 when
 * the graph has no test edges); on failure why says what went wrong (a rank
 * gone, late, or a shard without an owner). */
tma_status_t coord_ranks_metrics(coord_ranks_t *r, const float *params, tma_gnn_split_t split,
                                 tma_gnn_metrics_t *m_p, tma_gnn_metrics_t *test_p, char *why, size_t cap);
/* Releases the ranks (the job's evaluations are over) and frees it; accepts NULL. */
void coord_ranks_destroy(coord_ranks_t *r);

/* ------------------------------------------------------------------ Prometheus endpoint (prom.c) */

/*
 * GET /metrics on metrics.listen, served by libmicrohttpd's own thread from
 * a snapshot that the coordinator's and the evaluator's threads update
 * (every function below takes the snapshot's mutex for a few stores and
 * never waits on a client).  Every function accepts NULL (no endpoint).
 */
typedef struct coord_prom coord_prom_t;

/* Starts serving when job->metrics_listen is set (*p_p NULL otherwise).
 * An address that cannot be bound is a warning and *p_p NULL: the job runs
 * without the endpoint.  kv (may be NULL) gives the etcd request errors and
 * must outlive the endpoint. */
tma_status_t coord_prom_create(const tma_job_t *job, tma_kv_t *kv, coord_prom_t **p_p);
/* Stops the server (waiting for its thread) and frees it. */
void coord_prom_destroy(coord_prom_t *p);
void coord_prom_phase(coord_prom_t *p, const char *phase, uint64_t epoch);
/* A committed round's record: round, wall, time, agg_seconds, the workers'
 * steps_per_s, and its lost members and moves added to the counters. */
void coord_prom_round(coord_prom_t *p, const cJSON *record);
void coord_prom_members(coord_prom_t *p, int workers, int backups);
void coord_prom_eval(coord_prom_t *p, int64_t round, double mrr, double best, double seconds);

typedef struct coord_eval_cfg {
    const tma_gnn_config_t *cfg; /* resolved; copied */
    const tma_graph_t *graph;    /* the full graph; must outlive the evaluator */
    const char *run_dir;
    tma_kv_t *kv;                /* may be NULL: no etcd updates */
    const char *job;
    uint64_t epoch;              /* guards the etcd writes */
    int *fenced;                 /* the coordinator's flag (required): set on a failed guard; nothing is written after */
    volatile sig_atomic_t *stop_flag; /* may be NULL; a write that keeps failing is given up when set */
    int64_t best_round;          /* resumed best (-1: none) */
    double best_val, best_time;
    tma_job_run_budget_t budget;     /* for the progress line logged with each metrics line */
    const tma_inject_t *inj;     /* may be NULL; the point "eval"; must outlive the evaluator */
    int tensorboard;             /* metrics.tensorboard: write RUN/events.out.tfevents.* */
    coord_prom_t *prom;          /* may be NULL; told each evaluation; must outlive the evaluator */
    const coord_ranks_cfg_t *ranks; /* eval.where "workers": evaluate on the ranks (graph: its header only) */
    int64_t first_round;         /* a resumed job's first round of its own (> 0): TensorBoard drops those after it */
} coord_eval_cfg_t;

tma_status_t coord_eval_create(const coord_eval_cfg_t *c, coord_eval_t **e_p);
/* Hands over round `round`'s global weights (copied) and its record (taken
 * over: the evaluator fills "val_mrr" and "eval" and writes it). */
void coord_eval_submit(coord_eval_t *e, int64_t round, double time, const float *params, cJSON *record);
/* Waits until everything submitted is evaluated and written. */
void coord_eval_drain(coord_eval_t *e);
/* The metrics of `params` on `split`, computed by the caller with the
 * evaluator's own buffers once its thread is idle (a second evaluator would
 * hold a second set of N x hidden tables); the thread takes no new work
 * meanwhile. */
tma_status_t coord_eval_metrics(coord_eval_t *e, const float *params, tma_gnn_split_t split, tma_gnn_metrics_t *m_p);
/* Evaluating on the ranks: the test metrics of round `round` when it is the
 * best round, measured with its validation (kept, or RUN/best-test.json
 * from the coordinator that measured them).  TMA_ERR_NOT_FOUND otherwise. */
tma_status_t coord_eval_best_test(coord_eval_t *e, int64_t round, tma_gnn_metrics_t *m_p);
/* The best round so far (-1: none), its validation MRR and training time. */
void coord_eval_best(coord_eval_t *e, int64_t *round_p, double *val_p, double *time_p);
/* Rounds evaluated and skipped so far. */
void coord_eval_counts(coord_eval_t *e, int64_t *evaluated_p, int64_t *skipped_p);
/* Makes sure best.tmaw holds the best round (a fenced coordinator may have
 * rewritten it): rewrites it from the kept weights when it does not. */
tma_status_t coord_eval_settle_best(coord_eval_t *e);
/* The first error the thread hit (a failed write), TMA_OK otherwise. */
tma_status_t coord_eval_error(coord_eval_t *e);
/* Stops the thread (after what it is doing) and frees it; accepts NULL. */
void coord_eval_destroy(coord_eval_t *e);

#define COORD_COMP "coordinator"

/* ------------------------------------------------------------------ state */

/* What the coordinator keeps about a member it has dealt with. */
typedef struct slot {
    uint32_t id;
    int used;
    float *buf; /* P + meta_floats, posted for its LOCAL/GRADS tensors */
    int posted;
    int64_t pushed_rev; /* ready mod_revision for which the global weights were pushed */
    int suspect;        /* its connection failed: out of rounds until it reconnects or its lease ends */
    double suspect_since; /* when it became suspect */
    int revoked;        /* its lease was revoked for not reconnecting (coord_fence_suspects) */
    /* this round */
    int expected, got, missed;
    int poisoned;       /* it sent NaN or infinite values since the last round record */
    tma_job_msg_meta_t meta;
    int32_t *shards;    /* [map.n]: the shards its meta block names (meta.n_shards) */
    int64_t lease;
    double weight;
    /* GGS bookkeeping: steps taken part in since the last evaluation round */
    int64_t steps;
    double loss_sum;
} slot_t;

/* One member's tensor in an average. */
typedef struct coord_contrib {
    uint32_t id;    /* distinct within one average: the summation order */
    double weight;  /* > 0 */
    const float *x; /* P floats */
} coord_contrib_t;

typedef struct coord {
    const tma_coordinator_opts_t *o;
    volatile sig_atomic_t *stop_flag;
    char jobname[TMA_JOB_NAME_MAX];
    tma_kv_t *kv;
    tma_job_view_t *view;
    tma_job_t *job;
    const tma_job_variant_desc_t *vd; /* job->vd */
    tma_inject_t inj;
    tma_gnn_config_t cfg;
    tma_graph_t *graph;
    tma_partition_info_t *pinfo;
    tma_shard_map_t map;
    int map_ready; /* the initial deal happened */

    int64_t lease;
    tma_lease_guard_t *lease_guard;
    uint64_t epoch;
    tma_job_coord_rec_t leader; /* the coordinator record it campaigned with */
    int fenced;
    tma_transport_t *tr;

    int64_t P;
    int64_t meta_floats; /* of the meta block after a worker's tensor: tma_job_msg_meta_floats(map.n) */
    float *global;
    double *acc;
    slot_t *slots;
    int n_slots, cap_slots;
    coord_contrib_t *contrib; /* [cap_slots] */

    char *run_dir, *metrics_path, *result_path;
    char *checkpoint_path; /* the checkpoint `state` names (round c->round's; before round 0: its name) */
    char *checkpoint_prev; /* the one it named before: kept until the next commit */
    coord_eval_t *ev;
    coord_prom_t *prom;        /* the /metrics endpoint, or NULL */
    tma_gnn_trainer_t *server; /* the full-graph trainer of a variant's after_average hook */

    int resume;             /* taking over a job that was training */
    int reopen;             /* --resume of a job an interruption ended: `stop` is deleted */
    int leader_finished;    /* a standby whose leader finished the job: nothing to do, a success */
    int lease_lost;         /* fenced because etcd let the leader lease expire (on_lease_lost) */
    tma_job_state_rec_t prev;   /* its state record */

    int64_t round;
    double elapsed_base; /* training seconds before clock_start */
    double clock_start;  /* monotonic; 0 while not training */
    double round_time;   /* training seconds in the last round's record (coord_round) */
    double sched_shift;  /* time-based rounds fall at (t * interval + sched_shift) s of training */
    uint64_t seen_version;
    cJSON *moves;        /* shard moves since the last round record */
    cJSON *lost;         /* members lost since the last round record */
    int64_t ggs_step;
} coord_t;

/* A tag no tensor carries: receiving with it returns connection events only
 * (events match any tag), leaving tensors queued for their round. */
#define COORD_EVENTS_ONLY_TAG 0x7ffffff0u

/* coord.c */
int coord_stopping(coord_t *c);
double coord_train_elapsed(const coord_t *c);

/* guard.c */
/* One transaction that holds only while the coordinator key has create
 * revision `epoch`; a failed compare sets *fenced and is TMA_ERR_FENCED.
 * NULL values delete.  At most 16 keys. */
tma_status_t coord_guarded_txn(tma_kv_t *kv, const char *job, uint64_t epoch, int *fenced, int n,
                               const char *const *keys, char *const *vals);
tma_status_t coord_guarded_put(coord_t *c, int n, const char *const *keys, char *const *vals, int retry);
tma_status_t coord_put_key(coord_t *c, tma_job_key_t k, char *val, int retry);
/* The coordinator key holds this leader's epoch but not its record, or is
 * not bound to its lease (a plain put over it): writes the record again,
 * with the lease, guarded by the epoch.  TMA_OK when nothing was wrong. */
tma_status_t coord_reassert_leader(coord_t *c, const tma_job_view_snap_t *s);

/* setup.c: each open_* acquires one phase's resources in order and on
 * failure releases what it took; each close_* releases them in reverse
 * order and accepts a partly opened phase. */
tma_status_t coord_open_job(coord_t *c);   /* the config, etcd, the job view */
void coord_close_job(coord_t *c);
tma_status_t coord_open_model(coord_t *c); /* graph, model, buffers, shard map, server trainer */
void coord_close_model(coord_t *c);
tma_status_t coord_lead(coord_t *c);       /* transport, leader lease, election */
void coord_step_down(coord_t *c);          /* slots, transport, lease */
tma_status_t coord_open_run(coord_t *c);   /* resume or not, run folder, config in etcd, evaluator */
void coord_close_run(coord_t *c);

/* start.c */
tma_status_t coord_start(coord_t *c); /* registration, the initial deal, readiness, round 0 */
/* --resume, after coord_take_over: registration, the deal (as at the start)
 * and readiness, the current global weights going to each owner. */
tma_status_t coord_redeal(coord_t *c);
/* After coord_start failed with `why`: sets stop (unless fenced), so the
 * workers that joined leave; the state stays "starting", so the job can be
 * started again under the same name. */
void coord_start_abandon(coord_t *c, tma_status_t why);

/* takeover.c */
tma_status_t coord_resume_check(coord_t *c); /* fills c->resume and c->prev from the state in etcd */
tma_status_t coord_resume_metrics(coord_t *c, coord_eval_cfg_t *ec);
tma_status_t coord_take_over(coord_t *c);
/* The job taken over had been stopped (`stop` set, the result not yet
 * written): it is only finished, with the reason its `stop` gives. */
int coord_resuming_stop(const coord_t *c);
const char *coord_stop_reason(coord_t *c);

/* members.c */
slot_t *coord_slot_find(coord_t *c, uint32_t id);
slot_t *coord_slot_get(coord_t *c, uint32_t id);
void coord_slot_post(coord_t *c, slot_t *s);
void coord_slot_release(coord_t *c, slot_t *s);
int coord_is_connected(coord_t *c, uint32_t id);
void coord_mark_suspect(slot_t *sl);
int coord_participants(coord_t *c, const tma_job_view_snap_t *s, uint32_t *ids);
int coord_expect_participants(coord_t *c, const tma_job_view_snap_t *s, uint32_t *ids);
/* The participants now (-1 when the job view cannot be read) and, into
 * *owners_p (may be NULL), the members that own shards (without shards:
 * every member). */
int coord_count_participants(coord_t *c, int *owners_p);
/* Sends the current global weights to the members ready for the shards they
 * own that have none yet (members.c); expected_only: those the round under
 * way expects. */
void coord_push_ready(coord_t *c, const tma_job_view_snap_t *s, int expected_only);
/* At a round's start: the shards/<k> records in the view s must be this
 * coordinator's map.  One that does not decode, names another owner or was
 * deleted (someone else wrote it) would make its owner drop the shard while
 * the rounds still expect it: it is written again (guarded), with a
 * warning.  One of its own the view has not shown yet is written again
 * with the same value. */
tma_status_t coord_reassert_shards(coord_t *c, const tma_job_view_snap_t *s);
/* The ids of the job's members (malloc'd, *n_p of them; NULL on no memory). */
uint32_t *coord_member_ids(const tma_job_view_snap_t *s, int *n_p);
tma_status_t coord_service_view(coord_t *c, int training);
tma_status_t coord_idle(coord_t *c, double timeout, int training);

/* round.c */
void coord_collect(coord_t *c, int64_t t, uint32_t tag, double deadline, double after_first, int *n_exp_p);
int coord_average_slots(coord_t *c);
tma_status_t coord_after_average(coord_t *c, int n_got);
cJSON *coord_round_record(coord_t *c, int64_t t, double time, const uint32_t *alive, int n_alive,
                          double agg_seconds);
tma_status_t coord_round(coord_t *c, int64_t t);

/* average.c: the weighted mean of n contributions into out[P], summed in
 * increasing id order in double (acc[P] is scratch), so the result does
 * not depend on the order of `in`.  Returns n; out is left unchanged when
 * n == 0.  Pure: touches nothing but acc and out. */
int coord_average(const coord_contrib_t *in, int n, int64_t P, double *acc, float *out);

/* ggs.c */
tma_status_t coord_ggs_loop(coord_t *c);

/* publish.c */
/* The state record with this coordinator's epoch and run folder. */
char *coord_state_encode(const coord_t *c, const char *phase, int64_t round, double elapsed, int64_t best_round,
                         double best_val);
tma_status_t coord_write_moves(coord_t *c, const tma_shard_move_t *mv, int n, const char *reason);
/* `stop` (with `reason`; NULL deletes it) and `state` (phase, round c->round,
 * `elapsed`, the evaluator's best) in one guarded transaction, so no worker
 * sees the one without the other. */
tma_status_t coord_put_stop_state(coord_t *c, const char *reason, const char *phase, double elapsed);
/* Takeover: rewrites every shard record the snapshot shows under this
 * coordinator's epoch (same owner, same since_round), so that workers keep
 * counting them once this leader commits its first round (the view honours
 * shards/<k> only from the leader). */
tma_status_t coord_restamp_shards(coord_t *c, const tma_job_view_snap_t *s);
void coord_push_global(coord_t *c, const uint32_t *ids, int n, int64_t round);
tma_status_t coord_publish_round(coord_t *c, int64_t t, cJSON *record);
/* The end of round t in etcd: state ("training", round t) and metrics/<t>
 * (the record, eval "pending") in one guarded transaction, then the record
 * to the evaluator (taken over, or freed on failure). */
tma_status_t coord_commit_round(coord_t *c, int64_t t, double time, int64_t best_round, double best_val,
                                cJSON *record);
/* The checkpoint of round `round` written under `epoch`: run_dir/
 * checkpoint-r<round>-e<epoch>.tmaw (malloc'd), and the parse of such a
 * name (0, or -1 when it is not one). */
char *coord_checkpoint_path(const char *run_dir, int64_t round, uint64_t epoch);
int coord_checkpoint_parse(const char *name, int64_t *round_p, uint64_t *epoch_p);
/* Writes the global weights as round t's checkpoint at path, retrying while
 * the write fails (a full disk) until the coordinator stops. */
tma_status_t coord_write_checkpoint(coord_t *c, const char *path, int64_t t);

/* io_retry.c: a write the job cannot go on without (a checkpoint, a
 * metrics line, best.tmaw, result.json) is retried while it fails, so a
 * full disk pauses the job instead of ending it:
 *     coord_io_retry_t r = {path, "the checkpoint", 0, 0};
 *     while ((st = write(path)) != TMA_OK && coord_io_retry(&r, st, give_up))
 *         ;
 *     coord_io_retry_end(&r, st);
 * coord_io_retry warns (naming the path, then every 10 s), waits a second
 * and returns 1 to try again; 0 when st cannot get better by waiting or
 * give_up is set (the caller is stopping or fenced). */
typedef struct coord_io_retry {
    const char *path, *what;
    int tries;
    double warn_at;
} coord_io_retry_t;
int coord_io_retry(coord_io_retry_t *r, tma_status_t st, int give_up);
void coord_io_retry_end(coord_io_retry_t *r, tma_status_t st);

/* end.c */
tma_status_t coord_finish(coord_t *c, const char *reason);

/* evaluator.c, outside the thread: the MRR and Hits@K of a weights file on
 * a split of the full graph, and its round. */
tma_status_t coord_eval_weights_file(coord_t *c, const char *path, tma_gnn_split_t split, tma_gnn_metrics_t *m_p,
                                     uint64_t *round_p);

#endif
