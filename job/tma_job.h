/*
 * tma_job.h: what the coordinator and the workers share about one job: its
 * configuration (parsed section by section), the variants and their
 * descriptors, the etcd keys under /tma/<job>/ and the records stored there,
 * the tags and meta block of the data plane, and the job view (a live
 * picture of the job's keys).  docs/distributed.md describes the keys and
 * records, docs/architecture.md where this layer sits.
 *
 * Thread-safety: job configs, records and descriptors are plain values;
 * functions on them are pure.  A job view may be used from any thread.
 */
#ifndef TMA_JOB_H
#define TMA_JOB_H

#include <signal.h>
#include <stdint.h>

#include "tma_common.h"
#include "tma_gnn.h"
#include "tma_graph.h"
#include "tma_kv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ variants */

/* The training approaches of the paper, all in one engine. */
typedef enum {
    TMA_VARIANT_RANDOMTMA = 0, /* random node shards, time-based aggregation */
    TMA_VARIANT_SUPERTMA = 1,  /* METIS mini-clusters dealt randomly, time-based aggregation */
    TMA_VARIANT_PSGD_PA = 2,   /* METIS shards, periodic averaging */
    TMA_VARIANT_LLCG = 3,      /* PSGD-PA plus correction steps on the full graph at the coordinator */
    TMA_VARIANT_GGS = 4,       /* every worker samples the full graph; gradients averaged every step */
} tma_job_variant_t;

/* What happens to a lost worker's shards (fault/ applies it). */
typedef enum {
    TMA_POLICY_CONTINUE = 0, /* a lost owner's shards are dropped: train on with M - 1 */
    TMA_POLICY_REASSIGN = 1, /* they go to a backup worker, else to the least-loaded live worker */
} tma_job_policy_t;

/* Where a job's graph comes from.  Only `tma launch` can prepare the
 * dataset and generator sources; the coordinator needs a .tmag and, except
 * for GGS, a partition folder. */
typedef enum {
    TMA_SOURCE_GRAPH = 0,    /* "graph": a .tmag file */
    TMA_SOURCE_DATASET = 1,  /* "dataset": a folder for tma import (+ "import" options) */
    TMA_SOURCE_GENERATE = 2, /* "generate": {"kind": "sbm"|"rmat", ...} for tma gen */
} tma_job_source_t;

/* What a variant averages. */
typedef enum {
    TMA_AVERAGE_WEIGHTS = 0, /* local weights, once a round (time- or step-based) */
    TMA_AVERAGE_GRADS = 1,   /* gradients, every step (synchronous SGD) */
} tma_job_average_t;

struct tma_job;

/* Runs at the coordinator after an average with at least one contribution,
 * on its full-graph trainer: it may replace `global` (P floats). */
typedef tma_status_t (*tma_job_variant_after_average_fn)(const struct tma_job *job, tma_gnn_trainer_t *server,
                                                     float *global);

/*
 * Everything in which the variants differ, in one table (job/variant.c):
 * code asks the descriptor, never compares variants.
 */
typedef struct tma_job_variant_desc {
    tma_job_variant_t variant;
    const char *name;     /* "randomtma", ... */
    const char *scheme;   /* the partition scheme family: "random", "supernode", "metis"; NULL: none */
    int uses_shards;      /* workers own shards of a partition (else each trains on the whole graph) */
    tma_job_average_t averages;
    uint32_t tag;         /* the tensor a worker sends: TMA_TAG_LOCAL or TMA_TAG_GRADS */
    int corrects;         /* takes the "llcg" section (correction_steps) */
    /* NULL: the average is the new global model, and the coordinator needs
     * no trainer of its own; else it runs on a full-graph trainer. */
    tma_job_variant_after_average_fn after_average;
} tma_job_variant_desc_t;

/* The descriptor of v (NULL for a value outside the enum). */
const tma_job_variant_desc_t *tma_job_variant_desc(tma_job_variant_t v);
const char *tma_job_variant_name(tma_job_variant_t v);
/* "randomtma", "supertma", "psgd-pa", "llcg", "ggs" (case-insensitive). */
tma_status_t tma_job_variant_parse(const char *s, tma_job_variant_t *v_p);
const char *tma_job_policy_name(tma_job_policy_t p);

/* ------------------------------------------------------------------ the job configuration */

#define TMA_JOB_MAX_WORKERS 4096
#define TMA_JOB_NAME_MAX 128

/* Where the job token came from; it decides where the token may be written
 * (docs/security.md): only a token that was in the config itself, or one
 * a coordinator generated, travels to the workers in etcd's config key. */
typedef enum {
    TMA_JOB_TOKEN_NONE = 0,
    TMA_JOB_TOKEN_CONFIG,    /* transport.token in the config */
    TMA_JOB_TOKEN_FILE,      /* transport.token_file */
    TMA_JOB_TOKEN_ENV,       /* $TMA_JOB_TOKEN */
    TMA_JOB_TOKEN_GENERATED, /* tma_job_ensure_token made one */
} tma_job_token_src_t;

/* What the run folder's JSON files show instead of a token. */
#define TMA_JOB_TOKEN_HIDDEN "(hidden)"

typedef struct tma_job {
    char name[TMA_JOB_NAME_MAX]; /* [A-Za-z0-9._-]+ */
    tma_job_variant_t variant;
    const tma_job_variant_desc_t *vd; /* the variant's descriptor (set by tma_job_parse) */
    int workers; /* M: trainers that own shards at the start */

    tma_job_source_t source;
    char *graph;         /* absolute path of the full .tmag (evaluation, GGS training) */
    char *dataset;       /* TMA_SOURCE_DATASET: the folder */
    cJSON *import_opts;  /* TMA_SOURCE_DATASET: the "import" object (owned), or NULL */
    cJSON *generate;     /* TMA_SOURCE_GENERATE: the "generate" object (owned) */

    char *partition_dir;  /* absolute; NULL until prepared (launch makes one in the run folder) */
    char *partition_node_dir; /* partition.node_dir: the folder's path on each worker's node, when
                               * not partition_dir (no shared file system); absolute, or NULL */
    char partition_scheme[64]; /* "random", "supernode:N", "metis"; "" without shards (GGS) */
    char partition_clusterer[16]; /* partition.clusterer: "metis", "lp", "auto"; "" unset (auto) */
    int shards;           /* S (>= workers); 0 without shards (GGS) */
    uint64_t partition_seed;

    /* aggregation: exactly one of interval_s and interval_steps is > 0 */
    double interval_s;
    int64_t interval_steps;
    int weighted;          /* average weighted by each shard's training edges */
    /* duration: train_s > 0 (time) or rounds > 0 (step mode, or both: whichever first) */
    double train_s;
    int64_t rounds;
    int llcg_steps;        /* correction steps after each average (variants with a correction: LLCG) */

    /* faults */
    tma_job_policy_t on_failure;
    double start_timeout;  /* seconds for the initial workers to become ready */
    int64_t lease_ttl;     /* seconds */
    double round_deadline; /* seconds a round waits for weights once raised */
    double suspect_grace;  /* seconds a member whose connection failed has to reconnect before its
                              lease is revoked (it is fenced then, not at the lease's expiry) */
    /* The paper's F >= 1 drill: these shards' trainers are absent from the
     * start (the policy handles them as never started); the coordinator waits
     * for workers - n_absent workers. */
    int n_absent;
    int32_t absent_shards[16];

    /* transport */
    char token[256];       /* job token; "" until tma_job_load_token or tma_job_ensure_token */
    char *token_file;      /* transport.token_file: a file holding the token (absolute), or NULL */
    tma_job_token_src_t token_src;
    char host[256];        /* address the coordinator listens on and advertises */

    /* devices: "cpu" or "cuda[:i]" */
    char eval_device[32];
    int n_worker_devices;
    char (*worker_devices)[32]; /* worker i uses worker_devices[i % n] */

    tma_gnn_config_t model; /* model, train and eval sections (feature_dim resolved later) */
    char *init;             /* "init": the weights round 0 starts from (absolute), or NULL: fresh ones */

    int tensorboard; /* metrics.tensorboard: the coordinator writes RUN/events.out.tfevents.* */
    char metrics_listen[64]; /* metrics.listen: "ADDR:PORT" of the coordinator's /metrics, "" = off */
} tma_job_t;

/*
 * Parses a job config object.  Relative paths are resolved against base_dir
 * (the config file's folder).  Every key is checked: unknown keys, wrong
 * types, out-of-range values and contradictions (an interval in both seconds
 * and steps, a partition scheme that does not fit the variant, more workers
 * than shards, ...) are refused with TMA_ERR_CONFIG naming ctx and the key.
 * Files are not opened here (tma_job_check_files does that).  The caller
 * owns *job_p (tma_job_destroy).
 */
tma_status_t tma_job_parse(const cJSON *root, const char *ctx, const char *base_dir, tma_job_t **job_p);
/* Loads and parses a JSON file (base_dir = its folder). */
tma_status_t tma_job_load(const char *path, tma_job_t **job_p);
/* Checks that the graph file opens, that the partition folder is complete,
 * made from that graph with a scheme that fits the variant, and has at least
 * `workers` shards; fills job->shards.  Errors name the file at fault. */
tma_status_t tma_job_check_files(tma_job_t *job);
/* The weights of "init" (job->init, not NULL) for the resolved model cfg,
 * into *params_p (malloc'd, tma_gnn_param_count(cfg) floats; caller frees).
 * Weights of another model are TMA_ERR_CONFIG, the error naming the first
 * field that differs (tma train --init's check); a file that cannot be
 * read or is damaged is the reader's error (TMA_ERR_IO, TMA_ERR_FORMAT,
 * TMA_ERR_CHECKSUM), naming the file. */
tma_status_t tma_job_init_weights(const tma_job_t *job, const tma_gnn_config_t *cfg, float **params_p);
/* The resolved config as JSON (absolute paths), as the run folder shows it:
 * a token is "(hidden)".  Caller owns it. */
cJSON *tma_job_to_json(const tma_job_t *job);
/* The same for etcd's config key: the token itself only when it came from
 * the config or was generated by a coordinator, else "(hidden)" (the
 * workers then read it from $TMA_JOB_TOKEN or transport.token_file). */
cJSON *tma_job_to_etcd_json(const tma_job_t *job);
/* The partition scheme a variant uses by default for a graph of `nodes`. */
void tma_job_default_scheme(tma_job_variant_t v, int shards, int64_t nodes, char *out, size_t cap);
/* Finds the job's token when it has none yet: transport.token_file (which
 * must be a regular file of the caller's; a file others may read is
 * refused), else $TMA_JOB_TOKEN.  TMA_OK also when there is none
 * (job->token stays ""); TMA_ERR_CONFIG, naming the file, when the token
 * file cannot be used. */
tma_status_t tma_job_load_token(tma_job_t *job);
/* tma_job_load_token, and when that finds none, 32 random hex digits
 * (OpenSSL's RAND_bytes) marked TMA_JOB_TOKEN_GENERATED. */
tma_status_t tma_job_ensure_token(tma_job_t *job);
void tma_job_destroy(tma_job_t *job);

/* ------------------------------------------------------------------ etcd keys */

/*
 * Keys live under "/tma/<job>/" (docs/distributed.md).  One table names
 * them for the writers (tma_job_key) and the watcher (tma_job_key_kind):
 * X(enum suffix, name, is a folder of numbered keys).
 */
#define TMA_JOB_KEYS(X)                                                                            \
    X(CONFIG, "config", 0)                                                                         \
    X(COORDINATOR, "coordinator", 0)                                                               \
    X(MEMBERS, "members", 1)                                                                       \
    X(READY, "ready", 1)                                                                           \
    X(SHARDS, "shards", 1)                                                                         \
    X(AGG, "agg", 0)                                                                               \
    X(STOP, "stop", 0)                                                                             \
    X(STATE, "state", 0)                                                                           \
    X(METRICS, "metrics", 1)                                                                       \
    X(BEST, "best", 0)                                                                             \
    X(NEXT_ID, "next_id", 0)

typedef enum tma_job_key {
    TMA_KEY_NONE = -1, /* not a key of the table */
#define TMA_JOB_KEY_ENUM(e, name, dir) TMA_KEY_##e,
    TMA_JOB_KEYS(TMA_JOB_KEY_ENUM)
#undef TMA_JOB_KEY_ENUM
        TMA_KEY_COUNT
} tma_job_key_t;

#define TMA_KEY_MAX 256

/* "/tma/<job>/" into buf (cap >= TMA_KEY_MAX).  Returns buf. */
char *tma_job_prefix(char *buf, const char *job);
/* "/tma/<job>/<name>" for a single key, "/tma/<job>/<name>/" (the folder's
 * prefix) for a folder.  Returns buf. */
char *tma_job_key(char *buf, const char *job, tma_job_key_t k);
/* "/tma/<job>/<name>/<number>" for a folder (shards, members, ready,
 * metrics).  Numbers are zero-padded to 8 digits so keys sort in numeric
 * order. */
char *tma_job_key_n(char *buf, const char *job, tma_job_key_t k, int64_t n);
/* The number at the end of such a key, or -1. */
int64_t tma_job_key_number(const char *key);
/* Which key a suffix (the part after "/tma/<job>/") is: a single key
 * matches exactly, a folder's keys by "<name>/".  TMA_KEY_NONE otherwise. */
tma_job_key_t tma_job_key_kind(const char *suffix);

/* The address a role listens on, as "host:0" (any free port): transport.host,
 * or for "auto" this host's first non-loopback IPv4 address (loopback when
 * there is none).  A worker (its evaluator rank) keeps transport.host only
 * when it is a loopback address, else it takes its own. */
void tma_job_listen_address(const tma_job_t *job, int worker, char *out, size_t cap);

/* ------------------------------------------------------------------ records */

/* Values are JSON objects; a value that does not parse or lacks a field is
 * TMA_ERR_MALFORMED (logged with the key). */
/* A worker's membership record, bound to its lease. */
typedef struct tma_job_member_rec {
    uint32_t id;    /* unique in the job for ever: a re-registered worker gets a new id */
    int64_t lease;
    int backup;     /* started with --backup: takes shards only to replace a lost owner */
    char name[64];  /* a human label: --name or host:pid */
    char host[64];
    int pid;
    char device[32];
    char eval_address[128]; /* "host:port" of its evaluator rank (eval.where "workers"), or empty */
} tma_job_member_rec_t;

/* Who owns a shard.  Written only by the leader coordinator. */
typedef struct tma_job_shard_rec {
    int32_t shard;
    int64_t owner;       /* member id, or -1 when orphaned */
    uint64_t epoch;      /* the coordinator epoch that wrote it */
    int64_t since_round; /* the round from which this owner counts */
} tma_job_shard_rec_t;

/* The leader's record (leased).  Its epoch is the key's create revision. */
typedef struct tma_job_coord_rec {
    char address[128]; /* UCX "host:port" workers connect to */
    int64_t lease;
    char host[64];
    int pid;
} tma_job_coord_rec_t;

/* A worker's readiness: the shards it has loaded. */
typedef struct tma_job_ready_rec {
    int64_t lease;
    int n_shards;
    int32_t *shards; /* [n_shards]; malloc'd by the decoder (tma_job_ready_rec_free) */
    /* Shards dealt to this member that it refused: their files are missing
     * or wrong on its node (optional "refused"; the coordinator deals them
     * to another member). */
    int n_refused;
    int32_t *refused; /* [n_refused]; malloc'd by the decoder */
    /* The worker loaded these shards from none and holds no weights: it
     * waits for the coordinator's (optional "fresh"; absent is 0). */
    int fresh;
} tma_job_ready_rec_t;

/* The job's progress, for a restarted or standby coordinator. */
typedef struct tma_job_state_rec {
    uint64_t epoch;
    int64_t round;           /* the last completed round */
    double train_elapsed;    /* seconds of training done by the end of that round */
    int64_t best_round;      /* -1 before any evaluation */
    double best_val_mrr;
    char phase[16];          /* "starting", "training", "stopping", "done", "failed" */
    char run_dir[1024];
    char checkpoint[1100];   /* global weights after `round` */
} tma_job_state_rec_t;

char *tma_job_member_rec_encode(const tma_job_member_rec_t *r);
tma_status_t tma_job_member_rec_decode(const char *key, const char *value, size_t len, tma_job_member_rec_t *r_p);
char *tma_job_shard_rec_encode(const tma_job_shard_rec_t *r);
tma_status_t tma_job_shard_rec_decode(const char *key, const char *value, size_t len, tma_job_shard_rec_t *r_p);
char *tma_job_coord_rec_encode(const tma_job_coord_rec_t *r);
tma_status_t tma_job_coord_rec_decode(const char *key, const char *value, size_t len, tma_job_coord_rec_t *r_p);
char *tma_job_ready_rec_encode(const tma_job_ready_rec_t *r);
tma_status_t tma_job_ready_rec_decode(const char *key, const char *value, size_t len, tma_job_ready_rec_t *r_p);
/* Frees what a decoded ready record owns; accepts NULL. */
void tma_job_ready_rec_free(tma_job_ready_rec_t *r);
char *tma_job_state_rec_encode(const tma_job_state_rec_t *r);
tma_status_t tma_job_state_rec_decode(const char *key, const char *value, size_t len, tma_job_state_rec_t *r_p);
/* {"round": t, "epoch": e} for the agg key; encode returns malloc'd text. */
char *tma_job_agg_rec_encode(int64_t round, uint64_t epoch);
tma_status_t tma_job_agg_rec_decode(const char *key, const char *value, size_t len, int64_t *round_p,
                                uint64_t *epoch_p);

/* {"epoch": e, "reason": r} for the stop key; malloc'd text.  decode reads
 * the epoch (TMA_ERR_MALFORMED, logged, for anything else). */
char *tma_job_stop_rec_encode(uint64_t epoch, const char *reason);
tma_status_t tma_job_stop_rec_decode(const char *key, const char *value, size_t len, uint64_t *epoch_p);

/* ------------------------------------------------------------------ the data-plane protocol */

/* Tensor tags on the transport (docs/distributed.md). */
enum {
    TMA_TAG_GLOBAL = 1, /* coordinator -> worker: global weights W[round] (GGS: after step `round`) */
    TMA_TAG_LOCAL = 2,  /* worker -> coordinator: local weights for round `round`, then the meta block */
    TMA_TAG_GRADS = 3,  /* worker -> coordinator (GGS): gradients of step `round`, then the meta block */
    /* A distributed evaluation (eval.where "workers"), on the evaluator
     * transports (worker/evalrank.c, coordinator/ranks.c); `round` is the
     * evaluation's number.  Integers travel as floats (exact below 2^24) or,
     * 64-bit, bit for bit in two floats. */
    TMA_TAG_EVAL_BEGIN = 16,  /* coordinator -> rank: S, each shard's owner, then the parameters */
    TMA_TAG_EVAL_STEP = 17,   /* coordinator -> rank: what (TMA_EVAL_*), its argument, a limit (64-bit) */
    TMA_TAG_EVAL_DONE = 18,   /* rank -> coordinator: status, what, argument */
    TMA_TAG_EVAL_RESULT = 19, /* rank -> coordinator: status, duties, then each: edge (64-bit), above, ties */
    TMA_TAG_EVAL_FETCH = 20,  /* rank -> rank: level, n, the request's id (64-bit), then n packed nodes (64-bit) */
    TMA_TAG_EVAL_ROWS = 21,   /* rank -> rank: status, the id of the request answered (64-bit), then the n rows */
};

/* What an evaluation step asks of a rank (TMA_TAG_EVAL_STEP). */
enum {
    TMA_EVAL_BEGIN = 0,   /* (the answer to TMA_TAG_EVAL_BEGIN) */
    TMA_EVAL_LAYER = 1,   /* argument: the layer */
    TMA_EVAL_SCORE = 2,   /* argument: the split (tma_gnn_split_t); limit: eval.max_edges */
    TMA_EVAL_ABORT = 3,   /* drop this evaluation */
    TMA_EVAL_RELEASE = 4, /* the job ends: no more evaluations */
};
/* Two floats carrying a 64-bit integer, bit for bit. */
static inline void tma_eval_put_i64(float *f, int64_t v)
{
    memcpy(f, &v, sizeof v);
}
static inline int64_t tma_eval_get_i64(const float *f)
{
    int64_t v;
    memcpy(&v, f, sizeof v);
    return v;
}

/* The coordinator's member id on the transport (workers count up from 0). */
#define TMA_COORD_PEER 0xFFFFFFF0u

/* What a worker says about the tensor it sends, appended to it as a meta
 * block: this head (its bytes, bit for bit, in TMA_META_HEAD_FLOATS floats),
 * then one float for each shard of the job's partition, the first n_shards
 * holding the numbers of the shards trained on (int32, bit for bit), the
 * rest zero.  Both roles know the partition's shard count S, so the block
 * of a job is tma_job_msg_meta_floats(S) floats and carries any number of shards
 * (a survivor that took over every shard after reassignments). */
#define TMA_META_HEAD_FLOATS 12
typedef struct tma_job_msg_meta {
    uint32_t magic; /* TMA_META_MAGIC */
    uint32_t n_shards;
    int64_t lease;        /* the sender's lease (fencing) */
    int64_t steps_total;  /* steps since the worker started training */
    int64_t steps_round;  /* steps since its last aggregation */
    double loss;          /* mean training loss over those steps */
    double step_seconds;  /* time spent in those steps */
} tma_job_msg_meta_t;
#define TMA_META_MAGIC 0x4d414d54u /* "TMAM" */

/* The floats of a job's meta block: the head and one per shard (S = 0:
 * the variant has no shards). */
static inline int64_t tma_job_msg_meta_floats(int shards)
{
    return TMA_META_HEAD_FLOATS + (shards > 0 ? shards : 0);
}
/* Packs m and shards[0..m->n_shards) (n_shards <= S) into the
 * tma_job_msg_meta_floats(S) floats at out. */
void tma_job_msg_meta_pack(const tma_job_msg_meta_t *m, const int32_t *shards, int S, float *out);
/* Unpacks a block of tma_job_msg_meta_floats(S) floats: the head into *m_p and
 * its shard numbers into shards_p[0..n_shards) (room for S).
 * TMA_ERR_MALFORMED when the block is not a meta block (bad magic, more than
 * S shards, a shard number outside [0, S), negative step counts); nothing is
 * written then. */
tma_status_t tma_job_msg_meta_unpack(const float *in, int S, tma_job_msg_meta_t *m_p, int32_t *shards_p);
/* The index of the first NaN or infinity among x[0..n), or -1 when all are
 * finite: a received tensor with one is refused (it would poison every
 * model it is averaged into). */
int64_t tma_job_first_nonfinite(const float *x, int64_t n);

/* ------------------------------------------------------------------ the job view */

/*
 * A live picture of a job's keys: one snapshot of the prefix, then a watch
 * from the next revision, resynchronised from a fresh snapshot whenever the
 * watch ends (compaction, etcd restarted).  Thread-safe.
 */
typedef struct tma_job_view tma_job_view_t;

typedef struct tma_job_view_member {
    tma_job_member_rec_t rec;
    int64_t mod_revision;
} tma_job_view_member_t;

typedef struct tma_job_view_ready {
    uint32_t id;
    tma_job_ready_rec_t rec;
    int64_t mod_revision; /* changes each time the worker (re)loads its shards */
} tma_job_view_ready_t;

/* A copy of everything the view knows (free with tma_job_view_snap_free). */
typedef struct tma_job_view_snap {
    uint64_t version;
    int64_t revision; /* the etcd revision the view has applied: every write up to it is in */
    char *config; /* JSON text, or NULL */
    int has_coord;
    tma_job_coord_rec_t coord;
    uint64_t coord_epoch; /* the coordinator key's create revision */
    /* The key as etcd has it, also when its value does not decode (the
     * leader re-asserts a record damaged or detached from its lease). */
    int coord_present;
    uint64_t coord_key_epoch; /* its create revision */
    int64_t coord_key_lease;  /* the lease it is bound to (0: none) */
    int n_members;
    tma_job_view_member_t *members;
    int n_ready;
    tma_job_view_ready_t *ready;
    int n_shards;       /* highest shard index seen + 1 */
    tma_job_shard_rec_t *shards;
    int *shard_present; /* [n_shards]: a record the leader wrote (see below) */
    int64_t agg_round;
    uint64_t agg_epoch;
    int stop;
    int has_state;
    tma_job_state_rec_t state;
} tma_job_view_snap_t;

/*
 * Control keys count only from their writer, the leader.  The view acts on
 *   agg        only when its epoch is the current coordinator's (the
 *              coordinator key's create revision); otherwise the last agg
 *              it accepted stands;
 *   stop       only when its epoch is the leader's: the current
 *              coordinator's, or with no coordinator key the epoch of the
 *              `state` record (the leader writes it last);
 *   shards/<k> only when its epoch is the current coordinator's or that of
 *              `state` (a new leader re-stamps the shard records at takeover,
 *              before it commits its first round).
 * Anything else (a stop from an older epoch, a value someone else wrote) is
 * logged once per write and ignored.
 */

/* Reads the job's keys (retrying for up to `timeout` seconds while etcd is
 * unreachable) and starts watching them. */
tma_status_t tma_job_view_start(tma_kv_t *kv, const char *job, double timeout, tma_job_view_t **v_p);
void tma_job_view_stop(tma_job_view_t *v);
/* Waits until the view's version differs from `since` (or timeout
 * seconds); returns the current version. */
uint64_t tma_job_view_wait(tma_job_view_t *v, uint64_t since, double timeout);
/* Wakes every waiter (bumps the version): for local events that should be
 * handled like a change. */
void tma_job_view_poke(tma_job_view_t *v);
/* Lock-free reads for the training loop. */
/* The open aggregation round and, in *epoch_p, the epoch of the coordinator
 * that raised it: a round is (epoch, round), so a round a new coordinator
 * raises again is a new one. */
int64_t tma_job_view_agg(const tma_job_view_t *v, uint64_t *epoch_p);
int tma_job_view_stopped(const tma_job_view_t *v);
tma_status_t tma_job_view_snapshot(tma_job_view_t *v, tma_job_view_snap_t *s);
void tma_job_view_snap_free(tma_job_view_snap_t *s);
const tma_job_member_rec_t *tma_job_view_snap_member(const tma_job_view_snap_t *s, uint32_t id);
const tma_job_view_ready_t *tma_job_view_snap_ready(const tma_job_view_snap_t *s, uint32_t id);

/*
 * Waits up to `timeout` seconds for the job's config to appear in the view
 * and parses it ("the job config in etcd", paths absolute).  TMA_ERR_TIMEOUT
 * (not logged: the caller says what to do) when none came,
 * TMA_ERR_CANCELLED when *stop_flag became non-zero, a parse error
 * otherwise.  The caller owns *job_p.  Used by both roles.
 */
tma_status_t tma_job_view_wait_config(tma_job_view_t *v, double timeout, volatile sig_atomic_t *stop_flag,
                                     tma_job_t **job_p);

/* ------------------------------------------------------------------ the run folder (run.c) */

/*
 * The run folder is the output of `tma train` and of a distributed job
 * alike, so every tool reads both (docs/formats.md, "Run folders"):
 * metrics.jsonl (one line a round, each with "round", "time" and
 * "val_mrr"), result.json in one schema, best.tmaw and mrr.svg.  These
 * functions are pure file work: no etcd, thread-safe on distinct files.
 */
#define TMA_RUN_SCHEMA_VERSION 1

/* Paths in a run folder (malloc'd; caller frees). */
char *tma_job_run_path(const char *run_dir, const char *name);
/* Makes the folder (and its parents; one it makes is 0700: the user's
 * alone); *abs_p is its absolute path (malloc'd; caller frees).  An
 * existing folder that another user owns, or that its group or others may
 * write, is refused (TMA_ERR_INVALID, logged). */
tma_status_t tma_job_run_make_dir(const char *dir, char **abs_p);
/* Adds 077 to the process's umask: every file a command that writes run
 * folders creates (checkpoints, best model, results, plots, events, logs)
 * is the user's alone, whatever the folder's own mode (issue 30, item 6). */
void tma_job_run_private_files(void);
/* Whether dir holds a run's results (result.json, metrics.jsonl or
 * best.tmaw): commands refuse to write a run there unless told to replace
 * it. */
int tma_job_run_holds_run(const char *dir);
/* Removes those files and mrr.svg from dir (missing ones are fine), so a
 * new run can replace the old one (--force). */
tma_status_t tma_job_run_clear_results(const char *dir);
/* Appends one JSON line (with newline) to a file, flushed and fsynced. */
tma_status_t tma_job_run_append_line(const char *path, const cJSON *obj);
/* Makes metrics.jsonl the record of rounds 1..last_round, for a run that
 * continues from its state after that round (`tma train --resume`): lines
 * of later rounds (written after the state, by a process that was then
 * killed) and a torn last line are dropped; when the last kept line is of
 * an earlier round, `line` (that round's, kept with the state; may be NULL)
 * is appended.  Rewritten atomically; a missing file with nothing to add
 * stays missing.  TMA_ERR_FORMAT (logged, naming the line) for another
 * line without "round". */
tma_status_t tma_job_run_trim_metrics(const char *path, int64_t last_round, const cJSON *line);
/* Reads metrics.jsonl: the rounds' validation MRR and times, in file order.
 * *n_p rounds; arrays malloc'd (caller frees); val is NaN where none.
 * TMA_ERR_FORMAT (logged, naming the line) for a line without "round" and
 * "time". */
tma_status_t tma_job_run_read_metrics(const char *path, int64_t **rounds_p, double **times_p, double **vals_p,
                                  int *n_p);
/* The time to reach within 1% of the best validation MRR (the paper's
 * convergence time), or -1 when there is no evaluated round. */
double tma_job_run_convergence_time(const double *times, const double *vals, int n, double *best_p,
                                int *best_index_p);
/* What the plot of one run marks besides its curve. */
typedef struct tma_job_run_plot_marks {
    int64_t best_round; /* the best round, ringed at (best_time, best_val); -1: none */
    double best_time, best_val;
    double test_mrr; /* a dashed line at the test MRR; NaN: none */
} tma_job_run_plot_marks_t;
/* Writes an SVG line chart of validation MRR against training time for one
 * or more runs (labels[i] names series i; times in seconds): the time axis
 * in seconds for runs under 3 minutes, else in minutes, both axes from 0
 * with ticks at round values (1, 2, 2.5 or 5 times a power of ten), and
 * marks (may be NULL) with their legend entries.  Atomic (a temporary file
 * renamed). */
tma_status_t tma_job_run_plot_svg(const char *path, const char *title, int nseries, const char *const *labels,
                                  const double *const *times, const double *const *vals, const int *counts,
                                  const tma_job_run_plot_marks_t *marks);

/* Appends a metrics line's values to a TensorBoard event file as scalars
 * at step = its round: val/mrr, val/hits@K, val/eval_seconds,
 * round/aggregation_seconds, round/alive_workers, train/loss,
 * train/edges_per_second, train/steps_per_second/<id> and train/loss/<id>
 * (docs/formats.md); a value absent or not finite is left out.  w NULL:
 * nothing (event files off).  Flushed. */
tma_status_t tma_job_run_tb_line(tma_tfevents_t *w, const cJSON *rec);
/* The "metrics" section of a job or `tma train` config: "tensorboard"
 * (default true: write the event file) and, when listen is not NULL (a
 * distributed job), "listen" (the coordinator's Prometheus endpoint,
 * "ADDR:PORT", checked by tma_job_listen_parse; "" when absent) into
 * listen[cap].  TMA_ERR_CONFIG, logged naming the key, for anything else
 * (also "listen" when listen is NULL: `tma train` has no endpoint). */
tma_status_t tma_job_run_metrics_section(const cJSON *root, const char *ctx, int *tensorboard_p, char *listen,
                                         size_t cap);
/* Parses a listen address "A.B.C.D:PORT" or "[IPv6]:PORT" (a numeric
 * address, so what binds is what the config says; PORT 1..65535) into
 * *sa_p and *len_p.  TMA_ERR_CONFIG (not logged: the caller names the key)
 * when it is not one.  Thread-safe. */
struct sockaddr_storage;
tma_status_t tma_job_listen_parse(const char *s, struct sockaddr_storage *sa_p, unsigned *len_p);

/* What a progress line is measured against. */
typedef struct tma_job_run_budget {
    double train_s; /* the training time, or 0 when the budget is rounds */
    int64_t rounds;
    int workers;
} tma_job_run_budget_t;
/*
 * The one progress line, built from a metrics line (so it shows the
 * validation MRR of the round it names): "round R | T/TOTAL min | alive
 * A/M [+ K backups] | steps/s NAME S, ... | val MRR V (best B) | aggregation
 * S s": K the alive backups standing by (the record's "backups"; without
 * it, the alive members that own no shard), A the other alive members, each
 * worker by its name (member-ID without one) in name order.  *best_p
 * carries the best across calls (start it at NAN).  Always NUL-terminated.
 */
void tma_job_run_progress_line(const cJSON *rec, const tma_job_run_budget_t *b, double *best_p, char *buf, size_t cap);

/* result.json: the fields every run has. */
typedef struct tma_job_run_result {
    const char *variant;  /* a variant's name, or "centralized" (tma train) */
    const char *job;      /* the job's name; NULL for tma train */
    const char *graph;    /* the graph file */
    uint64_t graph_id;
    double started;       /* wall-clock seconds when training started; 0: the first metrics line's "wall" */
    int workers;          /* 1 for tma train */
    double edge_ratio;    /* training edges kept by the partition (1: all) */
    double test_mrr;      /* of the best weights; NaN: nothing was tested */
    int64_t best_round;   /* -1: no evaluated round */
    double best_val_mrr, best_at_seconds;
    double train_seconds;
    int64_t rounds;       /* the last round (tma train: the number of validations) */
    const char *stopped;  /* why training ended: "time", "steps", "rounds", "interrupted", "failed" */
    const char *best_weights;
} tma_job_run_result_t;
/*
 * Writes RUN/result.json: schema_version, tma_version, started (ISO 8601,
 * UTC), the fields of *r, convergence_seconds (from RUN/metrics.jsonl, which
 * also gives RUN/mrr.svg), then the items of `extra` (what only one kind of
 * run has; taken over and freed, may be NULL).  Atomic.  *conv_p (may be
 * NULL) gets the convergence time (-1: none).
 */
tma_status_t tma_job_run_write_result(const char *run_dir, const tma_job_run_result_t *r, cJSON *extra, double *conv_p);

#ifdef __cplusplus
}
#endif
#endif /* TMA_JOB_H */
