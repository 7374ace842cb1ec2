/*
 * gnn_backend.h: the compute backend interface inside gnn/.  A backend
 * fills one ops table (gnn/cpu/: OpenBLAS + OpenMP; gnn/ref/: the plain-C
 * reference; gnn/cuda/: cuBLAS + kernels); everything above it (layers, model,
 * optimizer, evaluator) calls ops and never touches tensor memory.  The
 * registry (backend.c) is the one place that knows which backends exist.
 *
 * Conventions for every op:
 *   - tensors are row-major and contiguous; shapes are read from the tensors
 *     and checked by the caller (tma_gnn_op_* wrappers below assert them);
 *   - outputs are overwritten unless the op takes a `beta` (out = ... +
 *     beta * out) or says it accumulates;
 *   - an op may use the backend's scratch memory but never allocates (except
 *     feat_create, and scratch reserved up front);
 *   - results do not depend on the thread count except through sgemm.
 */
#ifndef TMA_GNN_BACKEND_H
#define TMA_GNN_BACKEND_H

#include "tma_gnn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tma_gnn_tensor tensor_t;

/* A message-flow block in a backend's memory (see tma_graph_block_t).  The
 * transposed arrays are optional (has_transpose); with them the backward
 * product gathers per source row instead of scattering. */
typedef struct tma_gnn_block {
    int64_t num_dst, num_src, num_edges;
    tma_gnn_tensor_t indptr;  /* i32 [num_dst + 1] */
    tma_gnn_tensor_t indices; /* i32 [num_edges] */
    tma_gnn_tensor_t weights; /* f32 [num_edges] */
    int has_transpose;
    tma_gnn_tensor_t t_indptr;  /* i32 [num_src + 1] */
    tma_gnn_tensor_t t_indices; /* i32 [num_edges] destination rows */
    tma_gnn_tensor_t t_weights; /* f32 [num_edges] */
} tma_gnn_block_t;

/* Node features held by a backend (dense, or CSR when sparse enough). */
typedef struct tma_gnn_feat tma_gnn_feat_t;

typedef struct tma_gnn_feat_info {
    int64_t num_nodes, dim;
    int sparse;         /* 1 when stored as CSR */
    double nnz_per_row; /* average stored entries a row (dim when dense) */
} tma_gnn_feat_info_t;

enum {
    TMA_GNN_FEAT_DENSE = 1, /* never convert to CSR */
};

/* Dropout's mask, the same on every backend (so a seed gives the same masks
 * on all): element i under `key` is kept when the high 32 bits of a
 * splitmix64 hash of (key, i) reach `thresh` = p * 2^32. */
#ifdef __CUDACC__
#define GNN_HOST_DEVICE __host__ __device__
#else
#define GNN_HOST_DEVICE
#endif
static inline GNN_HOST_DEVICE int gnn_dropout_keep(uint64_t key, int64_t i, uint32_t thresh)
{
    uint64_t z = key + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (uint32_t)(z >> 32) >= thresh;
}
static inline uint32_t gnn_dropout_threshold(float p)
{
    double t = (double)p * 4294967296.0;
    return t <= 0 ? 0u : t >= 4294967295.0 ? 4294967295u : (uint32_t)t;
}

/* One GCN or SAGE layer of full-neighbourhood inference over a chunk of
 * destination rows (the layer_infer op). */
typedef struct tma_gnn_layer_infer {
    const tma_gnn_block_t *blk;
    /* The source rows: a dense table X (row u for the block's index u), or,
     * when X is NULL, dense features feat through ids (row u: feature row
     * ids[u]). */
    const tensor_t *X;
    tma_gnn_feat_t *feat;
    const tensor_t *ids;
    const tensor_t *W;      /* d_in x d_out, applied to the aggregate */
    const tensor_t *W_self; /* d_in x d_out applied to the row's own source row (SAGE), or NULL */
    int64_t self0;                  /* destination row i's own source row: self0 + i */
    const tensor_t *bias;   /* d_out */
    /* LayerNorm and PReLU after the bias; a == NULL: none (the last layer). */
    const tensor_t *gamma, *beta, *a;
    float eps;
} tma_gnn_layer_infer_t;

typedef struct tma_gnn_adam {
    float lr, beta1, beta2, eps;
    int64_t step; /* 1 for the first update */
} tma_gnn_adam_t;

typedef struct tma_gnn_ops {
    const char *name;
    int host_addressable; /* 1: tensor data is host memory the caller may fill directly */

    tma_status_t (*init)(tma_gnn_backend_t *b, const char *device);
    void (*fini)(tma_gnn_backend_t *b);

    /* memory */
    tma_status_t (*alloc)(tma_gnn_backend_t *b, size_t bytes, void **p_p);
    void (*free)(tma_gnn_backend_t *b, void *p);
    tma_status_t (*upload)(tma_gnn_backend_t *b, void *dst, const void *host, size_t bytes);
    tma_status_t (*download)(tma_gnn_backend_t *b, void *host, const void *src, size_t bytes);
    tma_status_t (*fill)(tma_gnn_backend_t *b, tensor_t *x, float v);

    /* dense: C = alpha op(A) op(B) + beta C (op = transpose when trans_*) */
    tma_status_t (*matmul)(tma_gnn_backend_t *b, const tensor_t *A, int trans_a, const tensor_t *B, int trans_b,
                           float alpha, float beta, tensor_t *C);
    /* Z[i, :] += bias */
    tma_status_t (*add_bias)(tma_gnn_backend_t *b, tensor_t *Z, const tensor_t *bias);
    /* out[0, :] = sum_i X[i, :] */
    tma_status_t (*colsum)(tma_gnn_backend_t *b, const tensor_t *X, tensor_t *out);

    /* sparse: Y = A X (Y: num_dst rows); dX = A^T dY (dX: num_src rows) */
    tma_status_t (*spmm)(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *X, tensor_t *Y);
    tma_status_t (*spmm_t)(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *dY, tensor_t *dX);

    /* PReLU with one slope a (1 x 1): y = x > 0 ? x : a x; dX may alias dY */
    tma_status_t (*prelu_bwd)(tma_gnn_backend_t *b, const tensor_t *dY, const tensor_t *X, const tensor_t *a,
                              tensor_t *dX, tensor_t *da);
    /* H = PReLU(LayerNorm(X)) without keeping the LayerNorm output (mean and
     * rstd are kept); backward recomputes it: dX, dgamma, dbeta and da from
     * dH.  The encoder's activation in one pass each way. */
    tma_status_t (*ln_prelu_fwd)(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *gamma,
                                 const tensor_t *beta, const tensor_t *a, float eps, tensor_t *H, tensor_t *mean,
                                 tensor_t *rstd);
    tma_status_t (*ln_prelu_bwd)(tma_gnn_backend_t *b, const tensor_t *dH, const tensor_t *X, const tensor_t *gamma,
                                 const tensor_t *beta, const tensor_t *a, const tensor_t *mean, const tensor_t *rstd,
                                 tensor_t *dX, tensor_t *dgamma, tensor_t *dbeta, tensor_t *da);
    /* Z[i, :] += bias, then Y = PReLU(Z) (Y may be Z): the decoder's hidden
     * layers in one pass */
    tma_status_t (*bias_prelu)(tma_gnn_backend_t *b, tensor_t *Z, const tensor_t *bias, const tensor_t *a,
                               tensor_t *Y);

    /* E[p, :] = H[hi[p], :] * H[ti[p], :]; backward overwrites dH */
    tma_status_t (*pair_mul)(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
                             tensor_t *E);
    tma_status_t (*pair_mul_bwd)(tma_gnn_backend_t *b, const tensor_t *dE, const tensor_t *H, const tensor_t *hi,
                                 const tensor_t *ti, tensor_t *dH);

    /* mean binary cross-entropy on logits (n x 1) against labels (n x 1);
     * *loss_p gets the mean, dlogits its gradient */
    tma_status_t (*bce_logits)(tma_gnn_backend_t *b, const tensor_t *logits, const tensor_t *labels,
                               double *loss_p, tensor_t *dlogits);

    /* optimizer */
    tma_status_t (*sumsq)(tma_gnn_backend_t *b, const tensor_t *x, double *out_p);
    tma_status_t (*scale)(tma_gnn_backend_t *b, tensor_t *x, float s);
    /* y = x with each element kept (times 1 / (1 - p)) or zeroed by
     * gnn_dropout_keep(key, i, gnn_dropout_threshold(p)); y may be x.  The
     * backward of a dropout is the same op with the same key. */
    tma_status_t (*dropout)(tma_gnn_backend_t *b, const tensor_t *x, float p, uint64_t key, tensor_t *y);
    tma_status_t (*adam)(tma_gnn_backend_t *b, tensor_t *p, const tensor_t *g, tensor_t *m, tensor_t *v,
                         const tma_gnn_adam_t *h);

    /* features: X is num_nodes x dim; ids (i64, n x 1) pick rows.  host
     * holds elements of `dtype` (f32, f16 or bf16); every op reads rows
     * widened to f32, so its results are those of the widened table. */
    tma_status_t (*feat_create)(tma_gnn_backend_t *b, const void *host, tma_feat_dtype_t dtype, int64_t num_nodes,
                                int64_t dim, unsigned flags, tma_gnn_feat_t **f_p);
    void (*feat_destroy)(tma_gnn_backend_t *b, tma_gnn_feat_t *f);
    void (*feat_info)(const tma_gnn_feat_t *f, tma_gnn_feat_info_t *info_p);
    /* out = X[ids] W + beta out */
    tma_status_t (*feat_matmul)(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids, const tensor_t *W,
                                float beta, tensor_t *out);
    /* dW = X[ids]^T dOut */
    tma_status_t (*feat_matmul_grad)(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                     const tensor_t *dOut, tensor_t *dW);
    /* out = A X[ids] (the block's sources are ids' rows) */
    tma_status_t (*feat_aggregate)(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                   const tma_gnn_block_t *blk, tensor_t *out);

    /* Optional ops (NULL where a backend has no use for them; the wrappers
     * below fall back).  Device backends (cuda) fill them. */
    /* Page-locked host memory for staging uploads (NULL on failure).  An
     * upload from it may still be reading it when upload returns: the caller
     * rewrites it only after `wait`. */
    void *(*host_alloc)(tma_gnn_backend_t *b, size_t bytes);
    void (*host_free)(tma_gnn_backend_t *b, void *p);
    /* Returns when the work queued so far has finished (and reports a
     * failure of it). */
    tma_status_t (*wait)(tma_gnn_backend_t *b);
    /* MRR scoring against fixed negatives: scores is n x per (each row the
     * positive's score, then its negatives'); *sum_p = sum over rows of
     * 1 / rank, rank = 1 + #{j >= 1 : !(s[j] < s[0])} (ties and NaN count
     * against the positive). */
    tma_status_t (*mrr_sum)(tma_gnn_backend_t *b, const tensor_t *scores, double *sum_p);
    /* The MLP decoder's logits for evaluation in one op (L = layers >= 1):
     *   E = H[hi] * H[ti] (row-wise);  E = PReLU_a[k](E W[k] + bias[k]) for k < L - 1;
     *   logits = E W[L-1] + bias[L-1]  (W[L-1]: d x 1, logits: np x 1)
     * the numbers of pair_mul, matmul, bias_prelu and add_bias, computed in
     * blocks of rows small enough to stay in a core's cache instead of
     * whole np x d passes through memory.  scratch (f32, any shape) is work
     * space: 2 * rows * widest floats a thread for blocks of `rows` rows
     * (widest: the widest of d and every layer's output); the caller gives
     * at least one row's worth a thread. */
    tma_status_t (*score_mlp)(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
                              int layers, const tensor_t *const *W, const tensor_t *const *bias,
                              const tensor_t *const *a, tensor_t *scratch, tensor_t *logits);

    /* A SAGE layer's input from dense features, own rows and neighbour sums
     * side by side, for one product with [W_self; W_neigh] (out: num_dst x
     * 2 dim, overwritten; the block's destination i is its source i):
     *   out[i, 0:dim]     = X[ids[i]]
     *   out[i, dim:2 dim] = sum_{e in row i} w[e] X[ids[src(e)]]
     * NULL: the caller runs feat_matmul and feat_aggregate. */
    tma_status_t (*feat_self_aggregate)(tma_gnn_backend_t *b, tma_gnn_feat_t *f, const tensor_t *ids,
                                        const tma_gnn_block_t *blk, tensor_t *out);
    /* One encoder layer of full-neighbourhood inference in one op (L: see
     * tma_gnn_layer_infer_t; Y: num_dst x d_out, overwritten):
     *   A = the block's weighted sum of source rows (as spmm)
     *   Z = A W + S W_self + bias   (S: each row's own source row; SAGE)
     *   Y = a ? PReLU_a(LayerNorm(Z)) : Z
     * the numbers of spmm (or feat_aggregate), matmul, add_bias and
     * ln_prelu_fwd, computed in tiles of rows small enough to stay in a
     * core's cache instead of whole passes through memory.  scratch (f32,
     * any shape) is work space: rows * (2 * d_in + d_out) floats a thread
     * for tiles of `rows` rows; the caller gives at least one row's worth a
     * thread. */
    tma_status_t (*layer_infer)(tma_gnn_backend_t *b, const tma_gnn_layer_infer_t *L, tensor_t *scratch,
                                tensor_t *Y);
    /* Optional: C = A B + bias, the bias (n values) added to every row of C
     * (m x n) as the product is written, instead of in a pass of its own;
     * NULL: the caller runs matmul and add_bias. */
    tma_status_t (*matmul_bias)(tma_gnn_backend_t *b, const tensor_t *A, const tensor_t *B, const tensor_t *bias,
                                tensor_t *C);

    /* Heterogeneous models (docs/model.md, "Heterogeneous ops").  Relation
     * ids are i32 in [0, R); the caller guarantees the range. */
    /* RGCN with basis decomposition, after the projection T = H V of the
     * block's source rows onto the B bases side by side (T: num_src x B*d,
     * basis b in columns [b*d, (b+1)*d)), coef a: R x B, rel: i32
     * [num_edges] in CSR order.  Y (num_dst x d, overwritten):
     *   Y[v, j] = sum_{e in row v} w[e] sum_b a[rel[e], b] T[src(e), b*d + j]
     * The block's weights carry the normalisation (tma_gnn_rgcn_norm). */
    tma_status_t (*rgcn_aggregate)(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *rel,
                                   const tensor_t *T, const tensor_t *coef, tensor_t *Y);
    /* Its backward (both outputs overwritten):
     *   dT[u, b*d + j] = sum_{e: src(e) = u} w[e] a[rel[e], b] dY[dst(e), j]
     *   dcoef[r, b]    = sum_{e: rel[e] = r} w[e] sum_j dY[dst(e), j] T[src(e), b*d + j]
     * t_rel (i32 [num_edges], the relation of each transposed edge) is read
     * only when blk->has_transpose. */
    tma_status_t (*rgcn_aggregate_bwd)(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *rel,
                                       const tensor_t *t_rel, const tensor_t *dY, const tensor_t *T,
                                       const tensor_t *coef, tensor_t *dT, tensor_t *dcoef);
    /* DistMult: score[p] = sum_k H[hi[p], k] Wr[rel[p], k] H[ti[p], k]
     * (score: np x 1; Wr: R x d, one diagonal per relation).  rel and Wr
     * NULL: every diagonal is ones, the plain dot product of the dot
     * decoder (then distmult_bwd's dWr is NULL too). */
    tma_status_t (*distmult)(tma_gnn_backend_t *b, const tensor_t *H, const tensor_t *hi, const tensor_t *ti,
                             const tensor_t *rel, const tensor_t *Wr, tensor_t *score);
    /* Its backward: dH (H's shape) and dWr (Wr's shape), both overwritten. */
    tma_status_t (*distmult_bwd)(tma_gnn_backend_t *b, const tensor_t *dscore, const tensor_t *H, const tensor_t *hi,
                                 const tensor_t *ti, const tensor_t *rel, const tensor_t *Wr, tensor_t *dH,
                                 tensor_t *dWr);
    /* GAT (docs/model.md, "GAT"): K heads of width C; T (n x K*C) is the
     * projection of the source rows, head k in columns [k*C, (k+1)*C); a_src
     * and a_dst (K x C) the attention vectors.  Optional: NULL where a
     * backend has no GAT (the trainer and the evaluator refuse the encoder).
     * The scores of every row of T (S: T->rows x 2K, overwritten):
     *   S[u, k] = T[u, head k] . a_src[k],  S[u, K + k] = T[u, head k] . a_dst[k] */
    tma_status_t (*gat_scores)(tma_gnn_backend_t *b, const tensor_t *T, const tensor_t *a_src, const tensor_t *a_dst,
                               tensor_t *S);
    /* Attention over each destination row's edges (destination i's own row
     * of T and S is self0 + i; the block's weights are not read):
     *   alpha[e, k] = softmax over the edges of row i of LeakyReLU_0.2(S[src(e), k] + S[self0 + i, K + k])
     *   Y[i, k*C + c] = sum_e alpha[e, k] T[src(e), k*C + c]   (Y: num_dst x K*C: heads side by side)
     * or, when Y is num_dst x C (and K > 1), the mean of the K heads.
     * alpha (num_edges x K) and Y are overwritten; a row without edges is 0. */
    tma_status_t (*gat_aggregate)(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *T,
                                  const tensor_t *S, int64_t self0, tensor_t *alpha, tensor_t *Y);
    /* Its backward with self0 = 0 (training: the destinations are the first
     * source rows), through the softmax, the LeakyReLU and the scores: dT
     * (T's shape), da_src and da_dst (K x C) overwritten; dE (num_edges x K)
     * and dS (T->rows x 2K) are scratch (dS ends as the scores' gradient). */
    tma_status_t (*gat_aggregate_bwd)(tma_gnn_backend_t *b, const tma_gnn_block_t *blk, const tensor_t *T,
                                      const tensor_t *S, const tensor_t *alpha, const tensor_t *a_src,
                                      const tensor_t *a_dst, const tensor_t *dY, tensor_t *dE, tensor_t *dS,
                                      tensor_t *dT, tensor_t *da_src, tensor_t *da_dst);
    /* Y[i, :] = X[idx[i], :] (idx: i32, Y->rows of them) */
    tma_status_t (*rows_gather)(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *idx, tensor_t *Y);
    /* Y[idx[i], :] = X[i, :] (idx: i32, X->rows of them, distinct); the
     * rows of Y that idx does not name keep their values. */
    tma_status_t (*rows_scatter)(tma_gnn_backend_t *b, const tensor_t *X, const tensor_t *idx, tensor_t *Y);
} tma_gnn_ops_t;

/* Ops counted in a backend's statistics (tma_gnn_backend_op_stats), with
 * the names the statistics report: X(ID, name) gives GNN_OP_ID and "name". */
#define GNN_OPS(X)                                                                                 \
    X(MATMUL, "matmul")                                                                            \
    X(ADD_BIAS, "add_bias")                                                                        \
    X(COLSUM, "colsum")                                                                            \
    X(SPMM, "spmm")                                                                                \
    X(SPMM_T, "spmm_t")                                                                            \
    X(PRELU_BWD, "prelu_bwd")                                                                      \
    X(PAIR_MUL, "pair_mul")                                                                        \
    X(PAIR_MUL_BWD, "pair_mul_bwd")                                                                \
    X(BCE, "bce_logits")                                                                           \
    X(SUMSQ, "sumsq")                                                                              \
    X(SCALE, "scale")                                                                              \
    X(DROPOUT, "dropout")                                                                          \
    X(FILL, "fill")                                                                                \
    X(ADAM, "adam")                                                                                \
    X(FEAT_MATMUL, "feat_matmul")                                                                  \
    X(FEAT_MATMUL_GRAD, "feat_matmul_grad")                                                        \
    X(FEAT_AGGREGATE, "feat_aggregate")                                                            \
    X(UPLOAD, "upload")                                                                            \
    X(DOWNLOAD, "download")                                                                        \
    X(BIAS_PRELU, "bias_prelu")                                                                    \
    X(LN_PRELU_FWD, "ln_prelu_fwd")                                                                \
    X(LN_PRELU_BWD, "ln_prelu_bwd")                                                                \
    X(MRR_SUM, "mrr_sum")                                                                          \
    X(SCORE_MLP, "score_mlp")                                                                      \
    X(LAYER_INFER, "layer_infer")                                                                  \
    X(FEAT_SELF_AGG, "feat_self_aggregate")                                                        \
    X(RGCN_AGG, "rgcn_aggregate")                                                                  \
    X(RGCN_AGG_BWD, "rgcn_aggregate_bwd")                                                          \
    X(DISTMULT, "distmult")                                                                        \
    X(DISTMULT_BWD, "distmult_bwd")                                                                \
    X(ROWS_GATHER, "rows_gather")                                                                  \
    X(ROWS_SCATTER, "rows_scatter")                                                                \
    X(GAT_SCORES, "gat_scores")                                                                    \
    X(GAT_AGG, "gat_aggregate")                                                                    \
    X(GAT_AGG_BWD, "gat_aggregate_bwd")

typedef enum {
#define GNN_OP_ENUM_(id, name) GNN_OP_##id,
    GNN_OPS(GNN_OP_ENUM_)
#undef GNN_OP_ENUM_
    GNN_OP_COUNT
} gnn_op_id_t;

struct tma_gnn_backend {
    const tma_gnn_ops_t *ops;
    int threads;
    char device[32];
    void *impl; /* the backend's own state */
    int sync_timing; /* time each op to its completion on the device (tma_gnn_backend_set_sync_timing) */
    /* time, dense FLOPs and bytes moved by row index per op (for profiles; a few ns per call) */
    int64_t op_calls[GNN_OP_COUNT];
    uint64_t op_ns[GNN_OP_COUNT];
    double op_flops[GNN_OP_COUNT];
    double op_bytes[GNN_OP_COUNT]; /* moved by row index (gathers and scatters) */
};

/* The backends this build has (registry in backend.c). */
extern const tma_gnn_ops_t tma_gnn_cpu_avx2_ops;    /* gnn/cpu/, built for AVX2 + FMA */
extern const tma_gnn_ops_t tma_gnn_cpu_generic_ops; /* gnn/cpu/, baseline x86-64 */
extern const tma_gnn_ops_t tma_gnn_ref_ops;         /* gnn/ref/ */

/*
 * The CUDA backend is a module of its own, tma-cuda.so (gnn/cuda/ and
 * cuda_module.c): the one file that links cuBLAS and the CUDA runtime.
 * backend_cuda.c loads it with dlopen the first time a process asks for a
 * CUDA device or counts GPUs, so a CPU-only process never maps those
 * libraries (about 100 MB of anonymous memory before main, which
 * docs/benchmarks.md measures).  The module is built from the same tree as
 * the program that loads it: the host checks the version and the sizes of
 * the structs they share before it uses the ops table.
 */
#define GNN_CUDA_MODULE_FILE "tma-cuda.so"
#define GNN_CUDA_MODULE_ENTRY "tma_gnn_cuda_module"

/* What the host lends the module: the process's log, and the one parser of
 * device names (the module sees none of the host's symbols). */
typedef struct gnn_cuda_host {
    void (*log_vmsg)(tma_log_level_t level, const char *component, const char *fmt, va_list ap);
    tma_log_level_t (*log_get_level)(void);
    tma_status_t (*device_parse)(const char *device, int *gpu_p);
} gnn_cuda_host_t;

/* What the module's entry returns (static storage, never freed). */
typedef struct gnn_cuda_module {
    const char *version; /* PACKAGE_VERSION of the tree it was built from */
    size_t ops_size, backend_size; /* sizeof(tma_gnn_ops_t), sizeof(tma_gnn_backend_t) there */
    const tma_gnn_ops_t *ops;
    int (*device_count)(void); /* the GPUs the CUDA runtime sees; 0 on any error */
} gnn_cuda_module_t;

/* The module's one exported function, GNN_CUDA_MODULE_ENTRY; it keeps `host`. */
typedef const gnn_cuda_module_t *(*gnn_cuda_module_entry_t)(const gnn_cuda_host_t *host);

/* backend_cuda.c: the CUDA module, loaded once a process (thread-safe; never
 * unloaded).  TMA_OK and the module, or TMA_ERR_NO_DEVICE and *why_p, a
 * sentence naming the file and what is wrong with it (static storage).  Logs
 * nothing: the caller says what it could not do.  Where it looks:
 * $TMA_CUDA_MODULE (the file, and only it), else tma-cuda.so beside the
 * running program (the build tree), else in the installed $(pkglibdir),
 * also when the whole install tree was moved (make install DESTDIR=...). */
tma_status_t gnn_cuda_module_load(const gnn_cuda_module_t **mod_p, const char **why_p);

/* Staging memory for uploads: page-locked where the backend has it (see
 * host_alloc above), else aligned host memory; NULL when out of memory. */
void *tma_gnn_backend_host_alloc(tma_gnn_backend_t *b, size_t bytes);
void tma_gnn_backend_host_free(tma_gnn_backend_t *b, void *p);
/* Waits for the backend's queued work (TMA_OK at once on host backends). */
tma_status_t tma_gnn_backend_wait(tma_gnn_backend_t *b);

/* Checked wrappers: each asserts the shapes an op expects, then calls it. */
tma_status_t tma_gnn_op_matmul(const tensor_t *A, int trans_a, const tensor_t *B, int trans_b, float alpha,
                               float beta, tensor_t *C);
/* C = A B + bias (bias: C->cols values, added to every row): the backend's
 * matmul_bias, or matmul and add_bias; counted as matmul in the op stats. */
tma_status_t tma_gnn_op_matmul_bias(const tensor_t *A, const tensor_t *B, const tensor_t *bias, tensor_t *C);
tma_status_t tma_gnn_op_add_bias(tensor_t *Z, const tensor_t *bias);
tma_status_t tma_gnn_op_colsum(const tensor_t *X, tensor_t *out);
tma_status_t tma_gnn_op_spmm(const tma_gnn_block_t *blk, const tensor_t *X, tensor_t *Y);
tma_status_t tma_gnn_op_spmm_t(const tma_gnn_block_t *blk, const tensor_t *dY, tensor_t *dX);
tma_status_t tma_gnn_op_prelu_bwd(const tensor_t *dY, const tensor_t *X, const tensor_t *a, tensor_t *dX,
                                  tensor_t *da);
tma_status_t tma_gnn_op_bias_prelu(tensor_t *Z, const tensor_t *bias, const tensor_t *a, tensor_t *Y);
tma_status_t tma_gnn_op_ln_prelu_fwd(const tensor_t *X, const tensor_t *gamma, const tensor_t *beta,
                                     const tensor_t *a, float eps, tensor_t *H, tensor_t *mean, tensor_t *rstd);
tma_status_t tma_gnn_op_ln_prelu_bwd(const tensor_t *dH, const tensor_t *X, const tensor_t *gamma,
                                     const tensor_t *beta, const tensor_t *a, const tensor_t *mean,
                                     const tensor_t *rstd, tensor_t *dX, tensor_t *dgamma, tensor_t *dbeta,
                                     tensor_t *da);
tma_status_t tma_gnn_op_pair_mul(const tensor_t *H, const tensor_t *hi, const tensor_t *ti, tensor_t *E);
tma_status_t tma_gnn_op_pair_mul_bwd(const tensor_t *dE, const tensor_t *H, const tensor_t *hi,
                                     const tensor_t *ti, tensor_t *dH);
tma_status_t tma_gnn_op_bce_logits(const tensor_t *logits, const tensor_t *labels, double *loss_p,
                                   tensor_t *dlogits);
tma_status_t tma_gnn_op_sumsq(const tensor_t *x, double *out_p);
tma_status_t tma_gnn_op_scale(tensor_t *x, float s);
/* Dropout with probability p in [0, 1) under key (gnn_dropout_keep); x and y
 * of one backend and one size; y may be x. */
tma_status_t tma_gnn_op_dropout(const tensor_t *x, float p, uint64_t key, tensor_t *y);
tma_status_t tma_gnn_op_fill(tensor_t *x, float v);
tma_status_t tma_gnn_op_adam(tensor_t *p, const tensor_t *g, tensor_t *m, tensor_t *v, const tma_gnn_adam_t *h);
/* TMA_ERR_UNSUPPORTED where the backend has no mrr_sum (the caller ranks on the host). */
tma_status_t tma_gnn_op_mrr_sum(const tensor_t *scores, double *sum_p);
/* TMA_ERR_UNSUPPORTED where the backend has no score_mlp (the caller runs
 * pair_mul, matmul, bias_prelu and add_bias); see the ops table. */
tma_status_t tma_gnn_op_score_mlp(const tensor_t *H, const tensor_t *hi, const tensor_t *ti, int layers,
                                  const tensor_t *const *W, const tensor_t *const *bias, const tensor_t *const *a,
                                  tensor_t *scratch, tensor_t *logits);
/* TMA_ERR_UNSUPPORTED where the backend has no feat_self_aggregate; see the ops table. */
tma_status_t tma_gnn_op_feat_self_aggregate(tma_gnn_feat_t *f, const tensor_t *ids, const tma_gnn_block_t *blk,
                                            tensor_t *out);
/* TMA_ERR_UNSUPPORTED where the backend has no layer_infer (the caller runs
 * the separate ops); see the ops table. */
tma_status_t tma_gnn_op_layer_infer(const tma_gnn_layer_infer_t *L, tensor_t *scratch, tensor_t *Y);
tma_status_t tma_gnn_op_feat_matmul(tma_gnn_feat_t *f, const tensor_t *ids, const tensor_t *W, float beta,
                                    tensor_t *out);
tma_status_t tma_gnn_op_feat_matmul_grad(tma_gnn_feat_t *f, const tensor_t *ids, const tensor_t *dOut,
                                         tensor_t *dW);
tma_status_t tma_gnn_op_feat_aggregate(tma_gnn_feat_t *f, const tensor_t *ids, const tma_gnn_block_t *blk,
                                       tensor_t *out);

/* Heterogeneous ops (see the table above for what each computes).  rgcn:
 * at most TMA_GNN_RGCN_MAX_COEF coefficients (R x B), so the CPU backend's
 * deterministic reduction of dcoef fits its scratch. */
#define TMA_GNN_RGCN_MAX_COEF 4096
tma_status_t tma_gnn_op_rgcn_aggregate(const tma_gnn_block_t *blk, const tensor_t *rel, const tensor_t *T,
                                       const tensor_t *coef, tensor_t *Y);
tma_status_t tma_gnn_op_rgcn_aggregate_bwd(const tma_gnn_block_t *blk, const tensor_t *rel, const tensor_t *t_rel,
                                           const tensor_t *dY, const tensor_t *T, const tensor_t *coef, tensor_t *dT,
                                           tensor_t *dcoef);
tma_status_t tma_gnn_op_distmult(const tensor_t *H, const tensor_t *hi, const tensor_t *ti, const tensor_t *rel,
                                 const tensor_t *Wr, tensor_t *score);
tma_status_t tma_gnn_op_distmult_bwd(const tensor_t *dscore, const tensor_t *H, const tensor_t *hi,
                                     const tensor_t *ti, const tensor_t *rel, const tensor_t *Wr, tensor_t *dH,
                                     tensor_t *dWr);
/* GAT (see the ops table); TMA_ERR_UNSUPPORTED where the backend has none. */
#define TMA_GNN_GAT_SLOPE 0.2f /* LeakyReLU's negative slope on the attention logits (GATConv's) */
tma_status_t tma_gnn_op_gat_scores(const tensor_t *T, const tensor_t *a_src, const tensor_t *a_dst, tensor_t *S);
tma_status_t tma_gnn_op_gat_aggregate(const tma_gnn_block_t *blk, const tensor_t *T, const tensor_t *S, int64_t self0,
                                      tensor_t *alpha, tensor_t *Y);
tma_status_t tma_gnn_op_gat_aggregate_bwd(const tma_gnn_block_t *blk, const tensor_t *T, const tensor_t *S,
                                          const tensor_t *alpha, const tensor_t *a_src, const tensor_t *a_dst,
                                          const tensor_t *dY, tensor_t *dE, tensor_t *dS, tensor_t *dT,
                                          tensor_t *da_src, tensor_t *da_dst);
tma_status_t tma_gnn_op_rows_gather(const tensor_t *X, const tensor_t *idx, tensor_t *Y);
tma_status_t tma_gnn_op_rows_scatter(const tensor_t *X, const tensor_t *idx, tensor_t *Y);

/* A backend's features: creation through its ops table. */
tma_status_t tma_gnn_feat_create(tma_gnn_backend_t *b, const void *host, tma_feat_dtype_t dtype, int64_t num_nodes,
                                 int64_t dim, unsigned flags, tma_gnn_feat_t **f_p);
void tma_gnn_feat_destroy(tma_gnn_backend_t *b, tma_gnn_feat_t *f);
void tma_gnn_feat_get_info(tma_gnn_backend_t *b, const tma_gnn_feat_t *f, tma_gnn_feat_info_t *info_p);

#ifdef __cplusplus
}
#endif
#endif
