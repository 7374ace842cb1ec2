/*
 * tma_gnn.h: the GNN engine for link prediction (docs/model.md): compute
 * backends and tensors, the model configuration and its parameter layout,
 * the trainer (sample, forward, backward, clipping, Adam), the evaluator
 * (layer-wise full-neighbourhood inference and MRR against fixed
 * negatives) and weight files.
 *
 * Model: an encoder of L layers (GCN, GraphSAGE-mean or an MLP; LayerNorm
 * then PReLU after every layer but the last) turns node features into
 * embeddings r; the decoder scores an edge (u, v) as
 *   logit = MLP(r_u ⊙ r_v)   (Linear, PReLU, ..., Linear to one output),
 * trained with binary cross-entropy against one uniformly drawn negative
 * tail per positive edge.  docs/model.md has the details.
 *
 * Parameters: all of a model's parameters are one contiguous float32 block
 * whose layout depends only on the model configuration (and the feature
 * dimension it records), so two processes with the same configuration agree
 * on it byte for byte; gradients are a second block of the same layout.
 *
 * Thread-safety: a trainer or an evaluator is used by one thread at a time;
 * different objects may be used from different threads at once (each has
 * its own backend instance and buffers).  Nothing here keeps global
 * mutable state, except that OpenBLAS's thread count is process-wide (the
 * last object created sets it).
 */
#ifndef TMA_GNN_H
#define TMA_GNN_H

#include <stdint.h>

#include "tma_common.h"
#include "tma_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ backends and tensors */

/*
 * A backend instance: one compute device ("cpu": OpenBLAS + OpenMP; "ref":
 * the plain-C reference every backend is tested against; "cuda[:i]" where
 * built with CUDA) with its thread count and scratch memory.  Its ops table
 * is private to gnn/ (gnn/gnn_backend.h).
 */
typedef struct tma_gnn_backend tma_gnn_backend_t;

/* Creates a backend for `device` ("cpu", "ref", "cuda", "cuda:1").  threads
 * <= 0 means tma_threads_default(): OMP_NUM_THREADS, else one per CPU this
 * process may use (TMA_ERR_INVALID for a bad OMP_NUM_THREADS).
 * TMA_ERR_UNSUPPORTED for a device this
 * build lacks, TMA_ERR_INVALID for an unknown name, TMA_ERR_NO_DEVICE when
 * the build has CUDA but the machine has no usable GPU (or not that one),
 * TMA_ERR_DEVICE / TMA_ERR_DEVICE_NOMEM when setting the GPU up fails; each
 * logged with the reason. */
tma_status_t tma_gnn_backend_create(const char *device, int threads, tma_gnn_backend_t **b_p);
void tma_gnn_backend_destroy(tma_gnn_backend_t *b);
/* 1 when this build has the CUDA backend (configure found the toolkit).
 * The backend itself is a module, tma-cuda.so, loaded on the first CUDA
 * backend or tma_gnn_cuda_device_count: only then does a process map the
 * CUDA libraries.  A missing module, or CUDA libraries it cannot load, make
 * tma_gnn_backend_create answer TMA_ERR_NO_DEVICE with a log line naming
 * the file. */
int tma_gnn_cuda_built(void);
/* The GPUs this process can use: loads the CUDA module and asks the CUDA
 * runtime.  0 on any error (no CUDA in the build, no module, no driver, no
 * GPU); the reason is logged at debug level.  Thread-safe. */
int tma_gnn_cuda_device_count(void);
/* NULL when the CUDA module loads (the build has CUDA, the module is where
 * it is looked for and the CUDA libraries it needs load), else a sentence
 * saying why not.  Loads the module (see above). */
const char *tma_gnn_cuda_module_problem(void);
/* "cpu", "ref", ... */
const char *tma_gnn_backend_name(const tma_gnn_backend_t *b);
int tma_gnn_backend_threads(const tma_gnn_backend_t *b);

/* Time spent in each kind of op since the backend was created or reset:
 * calls, seconds, floating-point operations of the products (2mnk for each
 * sgemm, 2 x stored entries x columns for a product with CSR features; 0
 * for the element-wise and sparse-aggregation ops), and the bytes the op moves by row index
 * (the rows that gathers and scatters pick: a sampled block's source rows,
 * a pair's two rows, feature rows; what a roofline charges to memory
 * bandwidth rather than to the sgemm rate).  Returns how many entries were
 * filled (at most max), in a fixed order; ops never called are left out. */
typedef struct tma_gnn_op_stat {
    const char *name;
    int64_t calls;
    double seconds;
    double flops;
    double bytes;
} tma_gnn_op_stat_t;

int tma_gnn_backend_op_stats(const tma_gnn_backend_t *b, tma_gnn_op_stat_t *stats, int max);
void tma_gnn_backend_op_stats_reset(tma_gnn_backend_t *b);
/* on = 1: each op's time in the statistics runs until the device has
 * finished it (a device backend otherwise queues ops and returns at once, so
 * its statistics count launch time).  Costs a host-device round trip per op:
 * for profiles, not for production runs. */
void tma_gnn_backend_set_sync_timing(tma_gnn_backend_t *b, int on);

typedef enum {
    TMA_GNN_F32 = 0,
    TMA_GNN_I32 = 1,
    TMA_GNN_I64 = 2,
} tma_gnn_dtype_t;

/*
 * A tensor: a row-major matrix in a backend's memory.  It is a value: views
 * copy the struct and point into the same memory.  Only the backend reads
 * or writes `data`; everyone else goes through upload/download and ops.
 * Buffers are allocated once with a capacity and reshaped per use.
 */
typedef struct tma_gnn_tensor {
    tma_gnn_backend_t *backend;
    tma_gnn_dtype_t dtype;
    int64_t rows, cols;
    int64_t capacity; /* elements this tensor owns (0 for a view) */
    void *data;
} tma_gnn_tensor_t;

size_t tma_gnn_dtype_size(tma_gnn_dtype_t dt);
/* Allocates `capacity` elements (shape capacity x 1); contents undefined. */
tma_status_t tma_gnn_tensor_alloc(tma_gnn_backend_t *b, tma_gnn_dtype_t dt, int64_t capacity,
                                  tma_gnn_tensor_t *t_p);
/* Frees an owning tensor and zeroes the struct; views and zeroed structs are ignored. */
void tma_gnn_tensor_free(tma_gnn_tensor_t *t);
/* A rows x cols view starting `offset` elements into t (asserts it fits). */
tma_gnn_tensor_t tma_gnn_tensor_view(const tma_gnn_tensor_t *t, int64_t offset, int64_t rows, int64_t cols);
/* t itself reshaped to rows x cols within its capacity (asserts it fits). */
tma_gnn_tensor_t tma_gnn_tensor_shape(const tma_gnn_tensor_t *t, int64_t rows, int64_t cols);
static inline int64_t tma_gnn_tensor_numel(const tma_gnn_tensor_t *t) { return t->rows * t->cols; }
/* Copies numel elements from host memory into t / from t to host memory. */
tma_status_t tma_gnn_tensor_upload(tma_gnn_tensor_t *t, const void *host);
tma_status_t tma_gnn_tensor_download(const tma_gnn_tensor_t *t, void *host);

/* ------------------------------------------------------------------ model configuration */

typedef enum {
    TMA_GNN_ENCODER_GCN = 0,
    TMA_GNN_ENCODER_SAGE = 1,
    TMA_GNN_ENCODER_MLP = 2,
    TMA_GNN_ENCODER_RGCN = 3, /* relational GCN with basis decomposition (typed graphs) */
    TMA_GNN_ENCODER_GAT = 4,  /* graph attention (GATConv): model.heads heads, self loops added */
} tma_gnn_encoder_t;

typedef enum {
    TMA_GNN_DECODER_MLP = 0,      /* r_u ⊙ r_v through decoder_layers Linear layers */
    TMA_GNN_DECODER_DISTMULT = 1, /* sum_k r_u[k] w_rel[k] r_v[k], one diagonal per relation id */
    TMA_GNN_DECODER_DOT = 2,      /* sum_k r_u[k] r_v[k]: no parameters */
} tma_gnn_decoder_t;

#define TMA_GNN_DEFAULT_BASES 4 /* RGCN bases (the paper's) */

#define TMA_GNN_MAX_LAYERS 8
#define TMA_GNN_MAX_HIDDEN 4096
#define TMA_GNN_MAX_HITS 8 /* entries of eval.hits */
#define TMA_GNN_MAX_NEGATIVES 1024 /* train.negatives */
#define TMA_GNN_MAX_BATCH_SEEDS (1 << 26) /* (2 + negatives) x batch_size: the seeds a step samples around */
#define TMA_GNN_MAX_BASES 64
#define TMA_GNN_MAX_HEADS 64 /* GAT attention heads (model.heads) */
#define TMA_GNN_MAX_TYPES 16 /* node types of the per-type input projection */

/* How the MRR and Hits@K rank a positive that ties with negatives.  With g
 * negatives scoring above the positive and e scoring equal to it:
 *   PESSIMISTIC: rank = 1 + g + e (ties count against the positive; tma's default)
 *   MEAN:        rank = 1 + g + e/2, the mean of the optimistic and the
 *                pessimistic rank (OGB's Evaluator, ogbl-citation2 and friends).
 * A NaN score counts against the positive under both. */
typedef enum {
    TMA_GNN_TIES_PESSIMISTIC = 0,
    TMA_GNN_TIES_MEAN = 1,
} tma_gnn_ties_t;

/*
 * The model and training configuration.  JSON:
 *   {"model": {"encoder": "gcn"|"sage"|"mlp"|"rgcn"|"gat", "layers": 2, "hidden": 256,
 *              "decoder": "mlp"|"distmult", "decoder_layers": 2,
 *              "decoder_hidden": 256, "feature_dim": D, "bases": 4,
 *              "relations": 2R, "type_dims": [d_0, ...]},
 *    "train": {"batch_size": 1024, "fanouts": [25, 10], "lr": 0.001,
 *              "clip": 1.0, "threads": 0, "seed": 0, "beta1": 0.9,
 *              "beta2": 0.999, "eps": 1e-8, "device": "cpu"},
 *    "eval":  {"batch_edges": 16, "max_edges": 0, "threads": 0,
 *              "device": "cpu", "ties": "pessimistic", "hits": [10, 50, 100]}}
 * eval.ties is "pessimistic" or "mean" (tma_gnn_ties_t); eval.hits lists
 * the K of Hits@K (at most TMA_GNN_MAX_HITS, each 1..2^20; [] for none).
 * A device is "cpu", "cuda" or "cuda:N" (the GPU a trainer, or the
 * evaluator, computes on; sampling stays on the CPU threads).
 * Missing keys take the defaults shown (docs/model.md, "Configuration"); unknown keys are
 * refused naming the key.  feature_dim 0 (unset) is filled in from the
 * graph when a trainer or evaluator is created, and so is relations (the
 * number of relation ids, 2R on a typed graph, 1 on an untyped one) for a
 * model that uses relations (rgcn or distmult; tma_gnn_config_relational).
 * bases (default 4) is an RGCN key; relations x bases is at most 4096.
 * heads (default 1) is a GAT key, 1..min(hidden, TMA_GNN_MAX_HEADS), and a
 * divisor of hidden when the model has more than one layer (the hidden
 * layers concatenate heads of hidden / heads; the last averages heads of
 * hidden).
 * type_dims (rgcn on a graph with 2..TMA_GNN_MAX_TYPES node types) is also
 * filled in from the graph: each node type's feature width.
 */
/* train.lr_schedule: the learning rate of each step, from the trainer's own
 * step count s (0 for the first step).  Every kind first warms up linearly
 * over warmup_steps (lr * (s + 1) / W); then constant keeps lr; cosine
 * decays from lr to lr * min_ratio over the steps up to `steps` (the
 * horizon, counted from step 0) and stays there; step multiplies by gamma
 * every step_size steps after the warmup. */
typedef enum {
    TMA_GNN_LR_CONSTANT = 0,
    TMA_GNN_LR_COSINE = 1,
    TMA_GNN_LR_STEP = 2,
} tma_gnn_lr_kind_t;
typedef struct tma_gnn_lr_schedule {
    tma_gnn_lr_kind_t kind;
    int64_t warmup_steps;
    int64_t steps;     /* cosine: the horizon (> warmup_steps) */
    double min_ratio;  /* cosine: the final lr as a share of lr, [0, 1] */
    int64_t step_size; /* step: steps between decays (>= 1) */
    double gamma;      /* step: the factor, (0, 1] */
} tma_gnn_lr_schedule_t;

typedef struct tma_gnn_config {
    /* model: these define the parameter layout and the config hash */
    tma_gnn_encoder_t encoder;
    int layers;          /* encoder layers, 1..TMA_GNN_MAX_LAYERS */
    int hidden;          /* width of every encoder layer, 1..TMA_GNN_MAX_HIDDEN */
    int decoder_layers;  /* linear layers of the decoder, >= 1 */
    int decoder_hidden;  /* width of the decoder's hidden layers */
    int64_t feature_dim; /* input width; 0 = take it from the graph */
    tma_gnn_decoder_t decoder;
    int bases;           /* RGCN bases (encoder rgcn), 1..TMA_GNN_MAX_BASES */
    int heads;           /* GAT attention heads (encoder gat), 1..TMA_GNN_MAX_HEADS */
    int num_rel_ids;     /* model.relations: relation ids (rgcn, distmult); 0 = from the graph */
    /* model.type_dims: an rgcn model on a graph with several node types
     * projects type t's features (its first type_dims[t] columns) to
     * `hidden` with its own Linear before the first layer.  num_node_types
     * 0: no projection (set from the graph when resolved). */
    int num_node_types;
    int type_dims[TMA_GNN_MAX_TYPES];
    /* training */
    int batch_size;                   /* positive edges per step */
    int negatives;                    /* train.negatives: uniform negative tails per positive, 1..TMA_GNN_MAX_NEGATIVES */
    int fanouts[TMA_GNN_MAX_LAYERS]; /* per hop from the seeds; -1 = all */
    double lr, clip, beta1, beta2, eps;
    double weight_decay; /* train.weight_decay: decoupled (AdamW), every parameter; 0: none */
    double dropout;      /* model.dropout: on the input of every encoder layer after the first, in training */
    tma_gnn_lr_schedule_t lr_schedule; /* train.lr_schedule */
    int threads; /* <= 0: OMP_NUM_THREADS, else one per CPU this process may use */
    uint64_t seed;
    /* evaluation */
    int eval_batch_edges;  /* evaluation edges scored per chunk */
    int64_t eval_max_edges;/* 0: all; else the first N edges of the split */
    int eval_threads;      /* <= 0: as threads */
    int eval_locality;     /* eval.node_order: 1 "locality" (inference walks groups of neighbours), 0 "id" */
    int eval_block_cache_mb; /* eval.block_cache_mb: MiB the whole graph's inference blocks may take to be built once; 0: per inference */
    int eval_feature_copy_mb; /* eval.feature_copy_mb: MiB the dense features' copy in the locality order may take; larger: read in place */
    int eval_on_workers;      /* eval.where: 1 "workers" (evaluator ranks on the shards' owners), 0 "coordinator", -1 "auto" (the coordinator decides) */
    double eval_rank_timeout; /* eval.rank_timeout: seconds a rank may take for one step of an evaluation */
    int eval_table_bf16;      /* eval.table_dtype "bf16": the evaluator's embedding tables in bfloat16 (half the memory; CPU only) */
    int eval_rank_cache_mb;   /* eval.rank_cache_mb: MiB a rank may keep of other ranks' rows across a layer's chunks; 0: none */
    tma_gnn_ties_t eval_ties;
    int eval_num_hits;                  /* entries of eval_hits */
    int eval_hits[TMA_GNN_MAX_HITS];    /* the K of each Hits@K */
    /* devices ("cpu", "cuda", "cuda:N"; "" means "cpu") */
    char device[32];      /* train.device: tma_gnn_trainer_create's backend */
    char eval_device[32]; /* eval.device: tma_gnn_evaluator_create's backend */
} tma_gnn_config_t;

/* The learning rate of step s (0-based) under cfg's lr and lr_schedule. */
double tma_gnn_lr_at(const tma_gnn_config_t *cfg, int64_t s);

/* The defaults (feature_dim 0). */
void tma_gnn_config_default(tma_gnn_config_t *cfg);
/* Parses a config object with "model", "train" and "eval" sections (all
 * optional, nothing else allowed).  `ctx` names it in errors ("model.json").
 * TMA_ERR_CONFIG naming the key for an unknown key or a bad value. */
tma_status_t tma_gnn_config_from_json(const cJSON *root, const char *ctx, tma_gnn_config_t *cfg_p);
/* The same for sections embedded in a larger config (any may be NULL). */
tma_status_t tma_gnn_config_from_sections(const cJSON *model, const cJSON *train, const cJSON *eval,
                                          const char *ctx, tma_gnn_config_t *cfg_p);
/* Loads and parses a JSON file. */
tma_status_t tma_gnn_config_load(const char *path, tma_gnn_config_t *cfg_p);
/* The full config as JSON (every key, resolved); caller owns the object. */
cJSON *tma_gnn_config_to_json(const tma_gnn_config_t *cfg);
/* The "model" section alone (what weight files record). */
cJSON *tma_gnn_config_model_json(const tma_gnn_config_t *cfg);
/*
 * The one parser of device names (gnn/backend.c): "cpu" (*gpu_p = -1),
 * "cuda" (GPU 0) or "cuda:N" (N: decimal digits, 0..1023).  TMA_OK or
 * TMA_ERR_CONFIG; gpu_p may be NULL.  Whether this build and machine have
 * the device is only known when a backend is created.
 */
tma_status_t tma_gnn_device_parse(const char *device, int *gpu_p);
/* 1 when tma_gnn_device_parse accepts `device`. */
int tma_gnn_device_valid(const char *device);
/* Checks the ranges and relations of a config filled in by hand. */
tma_status_t tma_gnn_config_validate(const tma_gnn_config_t *cfg, const char *ctx);
/* Sets feature_dim (and, for a relational model, relations) from the
 * graph, or fails (TMA_ERR_MISMATCH) when it was set to something else. */
tma_status_t tma_gnn_config_resolve(tma_gnn_config_t *cfg, const tma_graph_t *g);
/* A 64-bit hash of the model section (encoder, layers, widths, feature_dim):
 * equal hashes mean the same parameter layout and meaning. */
uint64_t tma_gnn_config_hash(const tma_gnn_config_t *cfg);
const char *tma_gnn_encoder_name(tma_gnn_encoder_t e);
/* "mlp" or "distmult". */
const char *tma_gnn_decoder_name(tma_gnn_decoder_t d);
/* The kind named `name` (as the names above spell it); TMA_ERR_CONFIG for none. */
tma_status_t tma_gnn_encoder_parse(const char *name, tma_gnn_encoder_t *e_p);
tma_status_t tma_gnn_decoder_parse(const char *name, tma_gnn_decoder_t *d_p);
/* Sets the default kinds: a gcn encoder and an mlp decoder. */
void tma_gnn_config_default_kinds(tma_gnn_config_t *cfg);
/* 1 when the model reads relation ids (encoder rgcn or decoder distmult). */
int tma_gnn_config_relational(const tma_gnn_config_t *cfg);
/* "pessimistic" or "mean". */
const char *tma_gnn_ties_name(tma_gnn_ties_t t);
/* Parses a tie rule's name; TMA_ERR_CONFIG (not logged) for another. */
tma_status_t tma_gnn_ties_parse(const char *name, tma_gnn_ties_t *t_p);

/* ------------------------------------------------------------------ parameter layout */

/*
 * The layout of the parameter block: one entry per tensor, in order, each
 * starting on a 16-float boundary (the gaps are zero).  Matrices are stored
 * row-major as [in x out] (y = x W).  Names: "enc.<l>.weight" (SAGE:
 * "enc.<l>.weight_self" then "enc.<l>.weight_neigh"), "enc.<l>.bias",
 * "enc.<l>.ln_weight", "enc.<l>.ln_bias", "enc.<l>.prelu", "dec.<k>.weight",
 * "dec.<k>.bias", "dec.<k>.prelu".  RGCN layers have "enc.<l>.bases"
 * [in x bases*hidden], "enc.<l>.coef" [relations x bases] and
 * "enc.<l>.weight_self" [in x hidden] instead of "enc.<l>.weight"; the
 * DistMult decoder is one tensor, "dec.relation" [relations x hidden].  The
 * per-type input projection comes first: "in.<t>.weight" [type_dims[t] x
 * hidden] and "in.<t>.bias" for each node type t; layer 0's input is then
 * hidden wide.
 */
typedef struct tma_gnn_param_info {
    char name[32];
    int64_t rows, cols; /* a vector is 1 x n */
    int64_t offset;     /* in floats from the start of the block */
} tma_gnn_param_info_t;

#define TMA_GNN_MAX_PARAMS (TMA_GNN_MAX_LAYERS * 7 + 3 * 16 + 2 * TMA_GNN_MAX_TYPES)

typedef struct tma_gnn_layout {
    int count;
    tma_gnn_param_info_t params[TMA_GNN_MAX_PARAMS];
    int64_t total; /* floats in the block, padding included */
} tma_gnn_layout_t;

/* The layout for a resolved config (feature_dim > 0). */
tma_status_t tma_gnn_layout_build(const tma_gnn_config_t *cfg, tma_gnn_layout_t *layout_p);
/* Floats in the parameter block, or -1 for an invalid/unresolved config. */
int64_t tma_gnn_param_count(const tma_gnn_config_t *cfg);
/* Fills `params` (tma_gnn_param_count floats) with a seeded initialisation:
 * Glorot-uniform weights, zero biases, LayerNorm 1/0, PReLU 0.25.  The
 * result depends only on the config and `seed`. */
tma_status_t tma_gnn_params_init(const tma_gnn_config_t *cfg, uint64_t seed, float *params);

/* ------------------------------------------------------------------ trainer */

typedef struct tma_gnn_trainer tma_gnn_trainer_t;

/*
 * A trainer over one or more graphs (a worker's shards): each mini-batch
 * comes from one graph, drawn with probability proportional to its training
 * edges.  The graphs must outlive the trainer (or the next set_graphs) and
 * share the feature dimension.  Parameters start from
 * tma_gnn_params_init(cfg, cfg->seed); cfg->feature_dim is resolved from the
 * graphs.  All buffers are sized here for the worst-case batch; steps do not
 * allocate.  It computes on cfg->device (see tma_gnn_backend_create for the
 * errors of a device that is not there); weights and gradients move through
 * the host copies below whatever the device.
 */
tma_status_t tma_gnn_trainer_create(const tma_gnn_config_t *cfg, tma_graph_t *const *graphs, int num_graphs,
                                    tma_gnn_trainer_t **tr_p);
void tma_gnn_trainer_destroy(tma_gnn_trainer_t *tr);
/* Replaces the set of graphs; parameters, Adam state and the RNG are kept. */
tma_status_t tma_gnn_trainer_set_graphs(tma_gnn_trainer_t *tr, tma_graph_t *const *graphs, int num_graphs);
/* Reseeds the batch RNG (workers mix in their id so they draw differently). */
void tma_gnn_trainer_reseed(tma_gnn_trainer_t *tr, uint64_t seed);

/* One step: sample a batch, forward, backward, clip, Adam.  *loss_p gets the
 * batch's mean BCE loss (may be NULL). */
tma_status_t tma_gnn_trainer_step(tma_gnn_trainer_t *tr, float *loss_p);
/* The first half of a step: sample, forward, backward; the gradient block
 * then holds this batch's gradients (for synchronous SGD: average them with
 * tma_gnn_trainer_get_grads/set_grads, then apply). */
tma_status_t tma_gnn_trainer_compute_grads(tma_gnn_trainer_t *tr, float *loss_p);
/* The second half: clip the gradient block by global norm, one Adam step. */
tma_status_t tma_gnn_trainer_apply_grads(tma_gnn_trainer_t *tr);

/* Block access (host copies of tma_gnn_trainer_param_count floats).  Setting
 * the parameters replaces the weights; the Adam state stays as it is. */
int64_t tma_gnn_trainer_param_count(const tma_gnn_trainer_t *tr);
tma_status_t tma_gnn_trainer_get_params(const tma_gnn_trainer_t *tr, float *params);
tma_status_t tma_gnn_trainer_set_params(tma_gnn_trainer_t *tr, const float *params);
tma_status_t tma_gnn_trainer_get_grads(const tma_gnn_trainer_t *tr, float *grads);
tma_status_t tma_gnn_trainer_set_grads(tma_gnn_trainer_t *tr, const float *grads);
/* Adam steps applied so far. */
int64_t tma_gnn_trainer_steps(const tma_gnn_trainer_t *tr);

/*
 * What a trainer holds beyond its weights, so that a run stopped and
 * continued takes the same steps as one that never stopped: Adam's moments,
 * its step count (which also drives the learning-rate schedule and the
 * dropout masks) and the batch RNG.  The moments are host arrays of
 * tma_gnn_trainer_param_count floats each, owned by the caller.
 */
typedef struct tma_gnn_opt_state {
    int64_t steps; /* Adam steps applied */
    tma_rng_t rng; /* the batch RNG */
    float *adam_m, *adam_v;
} tma_gnn_opt_state_t;
/* Copies the trainer's state into *s (its two arrays must be allocated). */
tma_status_t tma_gnn_trainer_get_opt(const tma_gnn_trainer_t *tr, tma_gnn_opt_state_t *s);
/* Replaces the trainer's state by *s (the weights are set apart, with
 * tma_gnn_trainer_set_params). */
tma_status_t tma_gnn_trainer_set_opt(tma_gnn_trainer_t *tr, const tma_gnn_opt_state_t *s);
/* The resolved config the trainer runs. */
const tma_gnn_config_t *tma_gnn_trainer_config(const tma_gnn_trainer_t *tr);

/* Time spent in the parts of the steps so far, in seconds. */
typedef struct tma_gnn_timing {
    double sample, forward, backward, optimizer;
    int64_t batches;
    int64_t sampled_nodes, sampled_edges; /* summed over batches (all blocks) */
} tma_gnn_timing_t;
void tma_gnn_trainer_timing(const tma_gnn_trainer_t *tr, tma_gnn_timing_t *t_p);
/* The trainer's backend, for its op statistics (owned by the trainer). */
tma_gnn_backend_t *tma_gnn_trainer_backend(const tma_gnn_trainer_t *tr);

/* ------------------------------------------------------------------ evaluator */

typedef enum {
    TMA_GNN_SPLIT_VAL = 0,
    TMA_GNN_SPLIT_TEST = 1,
} tma_gnn_split_t;

typedef struct tma_gnn_evaluator tma_gnn_evaluator_t;

/*
 * An evaluator over a full graph (its training graph for message passing,
 * its validation/test edges and fixed negatives).  Holds two N x hidden
 * embedding buffers (a layer's input and output; bfloat16 with
 * cfg->eval_table_bf16, float32 else) and chunk scratch; the graph must
 * outlive it.  May be used from any one thread at a time, independently of
 * trainers.  It computes on cfg->eval_device; TMA_ERR_CONFIG (logged, naming
 * eval.table_dtype) for bfloat16 tables on a device that is not the CPU.
 */
tma_status_t tma_gnn_evaluator_create(const tma_gnn_config_t *cfg, const tma_graph_t *g,
                                      tma_gnn_evaluator_t **ev_p);
void tma_gnn_evaluator_destroy(tma_gnn_evaluator_t *ev);
/*
 * MRR of `params` (a host parameter block for the evaluator's config) on
 * the split: full-neighbourhood layer-wise inference over the training
 * graph, then each evaluation edge (u, v) is ranked against its fixed
 * negatives (u, v') under the config's eval.ties (tma_gnn_ties_t; by
 * default rank = 1 + #{v' : score(u, v') >= score(u, v)}).
 * TMA_ERR_NOT_FOUND if the graph has no edges in that split.
 */
tma_status_t tma_gnn_evaluator_mrr(tma_gnn_evaluator_t *ev, const float *params, tma_gnn_split_t split,
                                   double *mrr_p);
/* Edges the evaluator ranks on a split (eval.max_edges applied). */
int64_t tma_gnn_evaluator_edges(const tma_gnn_evaluator_t *ev, tma_gnn_split_t split);
/*
 * The same evaluation, keeping every logit: scores[i * (1 + K) + 0] is
 * edge i's (u, v), then its K negatives' (u, v'_j) in the graph's order;
 * tma_gnn_evaluator_edges(ev, split) rows.  *mrr_p (may be NULL) as above.
 */
tma_status_t tma_gnn_evaluator_scores(tma_gnn_evaluator_t *ev, const float *params, tma_gnn_split_t split,
                                      float *scores, double *mrr_p);
/* The embeddings r of every node (num_nodes x hidden floats, row-major,
 * into `out`): the full-neighbourhood inference the MRR is computed on. */
tma_status_t tma_gnn_evaluator_embeddings(tma_gnn_evaluator_t *ev, const float *params, float *out);

/* Ranking metrics of one split: the MRR and Hits@K under the config's tie
 * rule, and the MRR under both rules. */
typedef struct tma_gnn_metrics {
    tma_gnn_ties_t ties;
    int num_hits;
    int hits_k[TMA_GNN_MAX_HITS];
    int64_t edges;          /* evaluation edges ranked */
    double mrr;             /* under `ties` */
    double mrr_pessimistic; /* under each rule; mrr_mean is NaN when a device */
    double mrr_mean;        /* ranked (pessimistic, no Hits@K: tma's default config) */
    double hits[TMA_GNN_MAX_HITS]; /* fraction of edges with rank <= hits_k[i], under `ties` */
    /* ROC AUC of each edge's positive against its own negatives (the
     * fraction of negatives scored below it, a tie counting one half),
     * averaged over the edges; NaN where mrr_mean is. */
    double auc;
    /* running sums (tma_gnn_metrics_add) */
    double sum_rr_pessimistic, sum_rr_mean, sum_auc;
    int64_t hit_count[TMA_GNN_MAX_HITS];
} tma_gnn_metrics_t;

/* Empty metrics for cfg's eval.ties and eval.hits. */
void tma_gnn_metrics_init(tma_gnn_metrics_t *m, const tma_gnn_config_t *cfg);
/* Ranks `rows` rows of `per` scores each (the positive first, then its
 * per - 1 negatives) into the running sums.  Pure; the reference the
 * evaluator and the OGB parity test use. */
void tma_gnn_metrics_add(tma_gnn_metrics_t *m, const float *scores, int64_t rows, int64_t per);
/* The same in two halves, for ranks that score apart from the metrics:
 * each row's negatives above its positive and tied with it, and then the
 * running sums from those counts (the same numbers as tma_gnn_metrics_add
 * when the rows come in the same order). */
void tma_gnn_metrics_count(const float *scores, int64_t rows, int64_t per, int32_t *above_p, int32_t *ties_p);
void tma_gnn_metrics_add_counts(tma_gnn_metrics_t *m, const int32_t *above, const int32_t *ties, int64_t rows,
                                int64_t per);
/* The means from the sums (mrr, mrr_*, hits, auc). */
void tma_gnn_metrics_finish(tma_gnn_metrics_t *m);
/* Adds "<prefix>hits@K" for each K, "<prefix>auc" (where known) and "ties"
 * to a JSON object (a metrics line or result.json). */
void tma_gnn_metrics_json(const tma_gnn_metrics_t *m, const char *prefix, cJSON *obj);
/* Like tma_gnn_evaluator_mrr, with every metric. */
tma_status_t tma_gnn_evaluator_metrics(tma_gnn_evaluator_t *ev, const float *params, tma_gnn_split_t split,
                                       tma_gnn_metrics_t *m_p);
/* The evaluator's backend, for its op statistics (owned by the evaluator). */
tma_gnn_backend_t *tma_gnn_evaluator_backend(const tma_gnn_evaluator_t *ev);
/* Seconds spent in inference and in scoring by the last call. */
void tma_gnn_evaluator_last_timing(const tma_gnn_evaluator_t *ev, double *infer_s_p, double *score_s_p);

/* ------------------------------------------------------------------ evaluator ranks */

/*
 * An evaluator rank (gnn/rank.c): the embeddings of the nodes of the shards
 * it holds, computed from their inference files (tma_graph_infer_t), and the
 * logits of the evaluation edges whose heads they hold.  Rows of other
 * shards' nodes come through `fetch`: fill out (n x cols floats, row-major)
 * with the level-`level` rows of the packed nodes ids[0, n), which other
 * ranks hold (their tma_gnn_rank_rows).  Level 0 is the input (features
 * widened to float32, or the per-type input projection of typed models),
 * level l + 1 layer l's output.  Ranks compute on the CPU.
 */
typedef struct tma_gnn_rank tma_gnn_rank_t;
typedef tma_status_t (*tma_gnn_fetch_fn)(void *arg, int level, const int64_t *ids, int64_t n, int64_t cols,
                                         float *out);
typedef struct tma_gnn_rank_shard {
    const tma_graph_t *shard;      /* shard-NNNNN.tmag: features, node types */
    const tma_graph_infer_t *inf;  /* shard-NNNNN.infer.tmag */
} tma_gnn_rank_shard_t;

/* The shards (all of one partition; they must outlive the rank).  Beside
 * its two tables and one chunk's buffers the rank keeps up to
 * cfg->eval_rank_cache_mb of fetched rows for the rest of a layer. */
tma_status_t tma_gnn_rank_create(const tma_gnn_config_t *cfg, const tma_gnn_rank_shard_t *shards, int nshards,
                                 tma_gnn_fetch_fn fetch, void *fetch_arg, tma_gnn_rank_t **rk_p);
void tma_gnn_rank_destroy(tma_gnn_rank_t *rk);
/* Floats in the model's parameter block (its config resolved against the shards). */
int64_t tma_gnn_rank_param_count(const tma_gnn_rank_t *rk);
/* Rows held: the nodes of its shards. */
int64_t tma_gnn_rank_rows_held(const tma_gnn_rank_t *rk);
/* Columns of a level's rows (the feature dimension at level 0 of an untyped model, else hidden). */
int64_t tma_gnn_rank_cols(const tma_gnn_rank_t *rk, int level);
/* An evaluation starts: the weights (the layout's parameter block), and level 0. */
tma_status_t tma_gnn_rank_begin(tma_gnn_rank_t *rk, const float *params);
/* Layer l: level l + 1 of the held rows from level l (fetching).  Every rank
 * must be done with layer l - 1 before any starts layer l, and layers run in
 * order from 0. */
tma_status_t tma_gnn_rank_layer(tma_gnn_rank_t *rk, int l);
/* Serves held rows: level `level` of the packed nodes ids[0, n) into out
 * (n x tma_gnn_rank_cols).  TMA_ERR_RANGE (logged) for a node not held.
 * Reads only: may run beside another thread's tma_gnn_rank_layer of the
 * next layer. */
tma_status_t tma_gnn_rank_rows(const tma_gnn_rank_t *rk, int level, const int64_t *ids, int64_t n, float *out);
/* Duties of a split it holds: evaluation edges whose head it holds, with
 * an index below `limit` (limit <= 0: all). */
int64_t tma_gnn_rank_duties(const tma_gnn_rank_t *rk, tma_gnn_split_t split, int64_t limit);
/* After the last layer: each duty's edge index into edges[] and its logits
 * (the positive, then its negatives in the graph's order: 1 + negatives
 * floats) into logits[]; *count_p duties (tma_gnn_rank_duties). */
tma_status_t tma_gnn_rank_score(tma_gnn_rank_t *rk, tma_gnn_split_t split, int64_t limit, int64_t *edges,
                                float *logits, int64_t *count_p);
/* Seconds of inference (begin and the layers) and of the last scoring. */
void tma_gnn_rank_last_timing(const tma_gnn_rank_t *rk, double *infer_s_p, double *score_s_p);
/* The last layer's remote sources (summed over its chunks: a row several
 * chunks need counts in each) in *remote_p, of them taken from the rank's
 * cache of fetched rows instead of fetched in *hits_p, and the rows the
 * cache may hold (eval.rank_cache_mb) in *cap_p.  Each may be NULL. */
void tma_gnn_rank_cache_stats(const tma_gnn_rank_t *rk, int64_t *hits_p, int64_t *remote_p, int64_t *cap_p);

/* ------------------------------------------------------------------ weight files */

/*
 * A weight file: a 128-byte header (magic "TMAWGHT\0", version, model-config
 * hash, parameter count, round or step, checksums), the model section of
 * the config as JSON text, then the parameter block (float32, little-endian).
 * docs/model.md gives the byte layout.  Written atomically.
 */
#define TMA_GNN_WEIGHTS_VERSION 1

/* The first field in which two models' shapes differ, as "hidden is 64
 * there, 32 here" (have: "there", want: "here"), into buf. */
void tma_gnn_config_model_diff(const tma_gnn_config_t *have, const tma_gnn_config_t *want, char *buf, size_t cap);

/* Writes cfg's model section and `params` (tma_gnn_param_count floats). */
tma_status_t tma_gnn_weights_write(const char *path, const tma_gnn_config_t *cfg, const float *params,
                                   uint64_t round);
/*
 * Reads a weight file.  With `expect` non-NULL, a file for another model
 * (config hash) is refused with TMA_ERR_MISMATCH; with *cfg_p given, the
 * file's model section is parsed into it (training keys at defaults).
 * `params_p` gets a malloc'd block (caller frees) of *count_p floats.
 * A bad magic, version, size or checksum is refused (TMA_ERR_FORMAT or
 * TMA_ERR_CHECKSUM) with an error naming the file and what is wrong.
 */
tma_status_t tma_gnn_weights_read(const char *path, const tma_gnn_config_t *expect, tma_gnn_config_t *cfg_p,
                                  float **params_p, int64_t *count_p, uint64_t *round_p);

/*
 * Optimizer state files (`last.opt` of a `tma train` run folder; layout in
 * docs/formats.md): the weights, Adam's moments, the step count and the
 * batch RNG of one trainer, with a caller's JSON object (`progress`: what
 * else the run needs to continue) in one checksummed file written
 * atomically, so that a process killed at any moment leaves the previous
 * state or the new one.  The file names its model by config hash only.
 */
#define TMA_GNN_OPT_VERSION 1
tma_status_t tma_gnn_opt_write(const char *path, const tma_gnn_config_t *cfg, const float *params,
                               const tma_gnn_opt_state_t *s, const cJSON *progress);
/*
 * Reads an optimizer state file of the model `expect` (a file of another
 * model, by config hash, is TMA_ERR_MISMATCH).  *params_p, s_p->adam_m and
 * s_p->adam_v are malloc'd (tma_gnn_param_count(expect) floats each; the
 * caller frees them), *progress_p is the caller's object (cJSON_Delete).  A
 * bad magic, version, size or checksum is refused (TMA_ERR_FORMAT,
 * TMA_ERR_CHECKSUM) with an error naming the file.  Outputs are set only on
 * success.
 */
tma_status_t tma_gnn_opt_read(const char *path, const tma_gnn_config_t *expect, float **params_p,
                              tma_gnn_opt_state_t *s_p, cJSON **progress_p);

#ifdef __cplusplus
}
#endif
#endif /* TMA_GNN_H */
