/*
 * backend.c: the backend registry (the one place that knows which backends
 * this build has), tensors, and the shape-checked wrappers through which
 * the rest of gnn/ calls the ops table.  A wrapper that finds a shape it
 * does not expect reports TMA_ERR_INTERNAL: that is a bug in the caller.
 */
#include "gnn_backend.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP "gnn"

/* ------------------------------------------------------------------ registry */

tma_status_t tma_gnn_device_parse(const char *device, int *gpu_p)
{
    int gpu = -1;
    if (!device)
        return TMA_ERR_CONFIG;
    if (strcmp(device, "cuda") == 0) {
        gpu = 0;
    } else if (strncmp(device, "cuda:", 5) == 0) {
        int64_t i;
        if (device[5] < '0' || device[5] > '9' || tma_parse_i64(device + 5, &i) != 0 || i > 1023)
            return TMA_ERR_CONFIG;
        gpu = (int)i;
    } else if (strcmp(device, "cpu") != 0) {
        return TMA_ERR_CONFIG;
    }
    if (gpu_p)
        *gpu_p = gpu;
    return TMA_OK;
}

int tma_gnn_device_valid(const char *device)
{
    return tma_gnn_device_parse(device, NULL) == TMA_OK;
}

tma_status_t tma_gnn_backend_create(const char *device, int threads, tma_gnn_backend_t **b_p)
{
    if (!device || !b_p)
        return TMA_ERR_INVALID;
    const tma_gnn_ops_t *ops = NULL;
    if (strcmp(device, "cpu") == 0) {
        /* The AVX2 build of the CPU kernels where the processor has it. */
        ops = &tma_gnn_cpu_generic_ops;
#if defined(__x86_64__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            ops = &tma_gnn_cpu_avx2_ops;
#endif
    } else if (strcmp(device, "cpu-generic") == 0) {
        ops = &tma_gnn_cpu_generic_ops;
    } else if (strcmp(device, "ref") == 0) {
        ops = &tma_gnn_ref_ops;
    } else if (tma_gnn_device_valid(device)) {
        /* "cuda" or "cuda:N" ("cpu" was taken above) */
#ifdef HAVE_CUDA
        /* Its module, loaded now (backend_cuda.c): a CPU-only process never maps CUDA. */
        const gnn_cuda_module_t *mod;
        const char *why;
        if (gnn_cuda_module_load(&mod, &why) != TMA_OK) {
            tma_log_error(COMP, "device %s: no usable GPU: %s; or use --device cpu", device, why);
            return TMA_ERR_NO_DEVICE;
        }
        ops = mod->ops;
#else
        tma_log_error(COMP, "device \"%s\": this build of tma has no CUDA backend (configure --with-cuda)",
                      device);
        return TMA_ERR_UNSUPPORTED;
#endif
    } else {
        tma_log_error(COMP, "unknown device \"%s\" (expected cpu, cpu-generic, ref or cuda[:i])", device);
        return TMA_ERR_INVALID;
    }
    if (strlen(device) >= sizeof(((tma_gnn_backend_t *)0)->device)) {
        tma_log_error(COMP, "device name \"%s\" is too long", device);
        return TMA_ERR_INVALID;
    }
    /* Unless asked for a number: OMP_NUM_THREADS, else the CPUs this
     * process may use (a Slurm task's, not the node's). */
    tma_status_t st = tma_threads_resolve(threads, &threads);
    if (st != TMA_OK)
        return st;
    tma_gnn_backend_t *b = calloc(1, sizeof *b);
    if (!b)
        return TMA_ERR_NOMEM;
    b->ops = ops;
    b->threads = threads;
    strcpy(b->device, device);
    st = ops->init ? ops->init(b, device) : TMA_OK;
    if (st != TMA_OK) {
        free(b);
        return st;
    }
    *b_p = b;
    return TMA_OK;
}

void tma_gnn_backend_destroy(tma_gnn_backend_t *b)
{
    if (!b)
        return;
    if (b->ops->fini)
        b->ops->fini(b);
    free(b);
}

const char *tma_gnn_backend_name(const tma_gnn_backend_t *b) { return b->ops->name; }
int tma_gnn_backend_threads(const tma_gnn_backend_t *b) { return b->threads; }

/* ------------------------------------------------------------------ op statistics */

static const char *const op_names[GNN_OP_COUNT] = {
#define GNN_OP_NAME_(id, name) [GNN_OP_##id] = name,
    GNN_OPS(GNN_OP_NAME_)
#undef GNN_OP_NAME_
};

int tma_gnn_backend_op_stats(const tma_gnn_backend_t *b, tma_gnn_op_stat_t *stats, int max)
{
    int n = 0;
    for (int i = 0; i < GNN_OP_COUNT && n < max; i++) {
        if (!b->op_calls[i])
            continue;
        stats[n].name = op_names[i];
        stats[n].calls = b->op_calls[i];
        stats[n].seconds = (double)b->op_ns[i] * 1e-9;
        stats[n].flops = b->op_flops[i];
        stats[n].bytes = b->op_bytes[i];
        n++;
    }
    return n;
}

int tma_gnn_cuda_built(void)
{
#ifdef HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int tma_gnn_cuda_device_count(void)
{
#ifdef HAVE_CUDA
    const gnn_cuda_module_t *mod;
    const char *why;
    if (gnn_cuda_module_load(&mod, &why) != TMA_OK) {
        tma_log_debug(COMP, "no GPU: %s", why);
        return 0;
    }
    return mod->device_count();
#else
    return 0;
#endif
}

const char *tma_gnn_cuda_module_problem(void)
{
#ifdef HAVE_CUDA
    const gnn_cuda_module_t *mod;
    const char *why;
    return gnn_cuda_module_load(&mod, &why) == TMA_OK ? NULL : why;
#else
    return "this build has no CUDA backend (configure found no CUDA toolkit)";
#endif
}

void tma_gnn_backend_set_sync_timing(tma_gnn_backend_t *b, int on) { b->sync_timing = on != 0; }

void *tma_gnn_backend_host_alloc(tma_gnn_backend_t *b, size_t bytes)
{
    return b->ops->host_alloc ? b->ops->host_alloc(b, bytes) : tma_alloc_aligned(bytes);
}

void tma_gnn_backend_host_free(tma_gnn_backend_t *b, void *p)
{
    if (!p)
        return;
    if (b->ops->host_free)
        b->ops->host_free(b, p);
    else
        tma_free_aligned(p);
}

tma_status_t tma_gnn_backend_wait(tma_gnn_backend_t *b) { return b->ops->wait ? b->ops->wait(b) : TMA_OK; }

void tma_gnn_backend_op_stats_reset(tma_gnn_backend_t *b)
{
    memset(b->op_calls, 0, sizeof b->op_calls);
    memset(b->op_ns, 0, sizeof b->op_ns);
    memset(b->op_flops, 0, sizeof b->op_flops);
    memset(b->op_bytes, 0, sizeof b->op_bytes);
}

/* Calls an op through backend `b`, adding its time (and dense flops) to b's statistics. */
/* With sync_timing the device finishes the work queued before the op, and
 * the op itself, inside the measurement's bounds (device backends queue ops
 * and return at once). */
#define TIMED_IO(b, op, flops, bytes, call)                                                               \
    do {                                                                                           \
        tma_gnn_backend_t *b_ = (b);                                                               \
        if (b_->sync_timing)                                                                       \
            (void)tma_gnn_backend_wait(b_);                                                        \
        uint64_t t0_ = tma_clock_ns();                                                             \
        tma_status_t st_ = (call);                                                                 \
        if (b_->sync_timing && st_ == TMA_OK)                                                      \
            st_ = tma_gnn_backend_wait(b_);                                                        \
        b_->op_ns[op] += tma_clock_ns() - t0_;                                                     \
        b_->op_calls[op]++;                                                                        \
        b_->op_flops[op] += (flops);                                                               \
        b_->op_bytes[op] += (bytes);                                                               \
        return st_;                                                                                \
    } while (0)
#define TIMED(b, op, flops, call) TIMED_IO(b, op, flops, 0, call)

/* ------------------------------------------------------------------ tensors */

size_t tma_gnn_dtype_size(tma_gnn_dtype_t dt)
{
    switch (dt) {
    case TMA_GNN_F32: return 4;
    case TMA_GNN_I32: return 4;
    case TMA_GNN_I64: return 8;
    }
    return 0;
}

tma_status_t tma_gnn_tensor_alloc(tma_gnn_backend_t *b, tma_gnn_dtype_t dt, int64_t capacity,
                                  tma_gnn_tensor_t *t_p)
{
    size_t bytes;
    if (capacity < 0 || tma_mul_overflow((size_t)(capacity ? capacity : 1), tma_gnn_dtype_size(dt), &bytes))
        return TMA_ERR_INVALID;
    void *p = NULL;
    tma_status_t st = b->ops->alloc(b, bytes, &p);
    if (st != TMA_OK)
        return st;
    t_p->backend = b;
    t_p->dtype = dt;
    t_p->rows = capacity;
    t_p->cols = 1;
    t_p->capacity = capacity;
    t_p->data = p;
    return TMA_OK;
}

void tma_gnn_tensor_free(tma_gnn_tensor_t *t)
{
    if (!t || !t->data || !t->backend || t->capacity == 0)
        return;
    t->backend->ops->free(t->backend, t->data);
    memset(t, 0, sizeof *t);
}

tma_gnn_tensor_t tma_gnn_tensor_view(const tma_gnn_tensor_t *t, int64_t offset, int64_t rows, int64_t cols)
{
    assert(offset >= 0 && rows >= 0 && cols >= 0);
    assert(t->capacity == 0 || offset + rows * cols <= t->capacity);
    tma_gnn_tensor_t v = *t;
    v.capacity = 0;
    v.rows = rows;
    v.cols = cols;
    v.data = (char *)t->data + (size_t)offset * tma_gnn_dtype_size(t->dtype);
    return v;
}

tma_gnn_tensor_t tma_gnn_tensor_shape(const tma_gnn_tensor_t *t, int64_t rows, int64_t cols)
{
    assert(rows >= 0 && cols >= 0);
    assert(t->capacity == 0 ? rows * cols <= t->rows * t->cols : rows * cols <= t->capacity);
    tma_gnn_tensor_t v = *t;
    v.rows = rows;
    v.cols = cols;
    return v;
}

tma_status_t tma_gnn_tensor_upload(tma_gnn_tensor_t *t, const void *host)
{
    size_t bytes = (size_t)tma_gnn_tensor_numel(t) * tma_gnn_dtype_size(t->dtype);
    if (!bytes)
        return TMA_OK;
    TIMED(t->backend, GNN_OP_UPLOAD, 0, t->backend->ops->upload(t->backend, t->data, host, bytes));
}

tma_status_t tma_gnn_tensor_download(const tma_gnn_tensor_t *t, void *host)
{
    size_t bytes = (size_t)tma_gnn_tensor_numel(t) * tma_gnn_dtype_size(t->dtype);
    if (!bytes)
        return TMA_OK;
    TIMED(t->backend, GNN_OP_DOWNLOAD, 0, t->backend->ops->download(t->backend, host, t->data, bytes));
}

/* ------------------------------------------------------------------ checked op wrappers */

static tma_status_t shape_error(const char *op, const char *what)
{
    tma_log_error(COMP, "%s: %s (a bug in the caller)", op, what);
    return TMA_ERR_INTERNAL;
}

#define REQUIRE(op, cond)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return shape_error(op, #cond);                                                         \
    } while (0)

#define IS(t, dt) ((t)->dtype == (dt))

tma_status_t tma_gnn_op_matmul(const tensor_t *A, int trans_a, const tensor_t *B, int trans_b, float alpha,
                               float beta, tensor_t *C)
{
    int64_t m = trans_a ? A->cols : A->rows, k = trans_a ? A->rows : A->cols;
    int64_t kb = trans_b ? B->cols : B->rows, n = trans_b ? B->rows : B->cols;
    REQUIRE("matmul", IS(A, TMA_GNN_F32) && IS(B, TMA_GNN_F32) && IS(C, TMA_GNN_F32));
    REQUIRE("matmul", k == kb && C->rows == m && C->cols == n);
    REQUIRE("matmul", A->backend == C->backend && B->backend == C->backend);
    if (m == 0 || n == 0)
        return TMA_OK;
    TIMED(C->backend, GNN_OP_MATMUL, 2.0 * (double)m * (double)n * (double)k,
          C->backend->ops->matmul(C->backend, A, trans_a, B, trans_b, alpha, beta, C));
}

tma_status_t tma_gnn_op_matmul_bias(const tensor_t *A, const tensor_t *B, const tensor_t *bias, tensor_t *C)
{
    if (!C->backend->ops->matmul_bias) {
        tma_status_t st = tma_gnn_op_matmul(A, 0, B, 0, 1.0f, 0.0f, C);
        return st != TMA_OK ? st : tma_gnn_op_add_bias(C, bias);
    }
    REQUIRE("matmul_bias", IS(A, TMA_GNN_F32) && IS(B, TMA_GNN_F32) && IS(C, TMA_GNN_F32) && IS(bias, TMA_GNN_F32));
    REQUIRE("matmul_bias", A->cols == B->rows && C->rows == A->rows && C->cols == B->cols);
    REQUIRE("matmul_bias", tma_gnn_tensor_numel(bias) == C->cols);
    REQUIRE("matmul_bias", A->backend == C->backend && B->backend == C->backend && bias->backend == C->backend);
    if (C->rows == 0 || C->cols == 0)
        return TMA_OK;
    TIMED(C->backend, GNN_OP_MATMUL, 2.0 * (double)C->rows * (double)C->cols * (double)A->cols,
          C->backend->ops->matmul_bias(C->backend, A, B, bias, C));
}

tma_status_t tma_gnn_op_add_bias(tensor_t *Z, const tensor_t *bias)
{
    REQUIRE("add_bias", tma_gnn_tensor_numel(bias) == Z->cols && IS(Z, TMA_GNN_F32));
    TIMED(Z->backend, GNN_OP_ADD_BIAS, 0, Z->backend->ops->add_bias(Z->backend, Z, bias));
}

tma_status_t tma_gnn_op_colsum(const tensor_t *X, tensor_t *out)
{
    REQUIRE("colsum", tma_gnn_tensor_numel(out) == X->cols && IS(X, TMA_GNN_F32));
    TIMED(out->backend, GNN_OP_COLSUM, 0, out->backend->ops->colsum(out->backend, X, out));
}

static int block_ok(const tma_gnn_block_t *blk)
{
    int ok = IS(&blk->indptr, TMA_GNN_I32) && IS(&blk->indices, TMA_GNN_I32) && IS(&blk->weights, TMA_GNN_F32) &&
             tma_gnn_tensor_numel(&blk->indptr) >= blk->num_dst + 1 &&
             tma_gnn_tensor_numel(&blk->indices) >= blk->num_edges &&
             tma_gnn_tensor_numel(&blk->weights) >= blk->num_edges;
    if (ok && blk->has_transpose)
        ok = IS(&blk->t_indptr, TMA_GNN_I32) && IS(&blk->t_indices, TMA_GNN_I32) &&
             IS(&blk->t_weights, TMA_GNN_F32) && tma_gnn_tensor_numel(&blk->t_indptr) >= blk->num_src + 1 &&
             tma_gnn_tensor_numel(&blk->t_indices) >= blk->num_edges &&
             tma_gnn_tensor_numel(&blk->t_weights) >= blk->num_edges;
    return ok;
}

tma_status_t tma_gnn_op_spmm(const tma_gnn_block_t *blk, const tensor_t *X, tensor_t *Y)
{
    REQUIRE("spmm", block_ok(blk));
    REQUIRE("spmm", X->rows >= blk->num_src && Y->rows == blk->num_dst && X->cols == Y->cols);
    TIMED_IO(Y->backend, GNN_OP_SPMM, 0, 4.0 * (double)blk->num_edges * (double)X->cols, Y->backend->ops->spmm(Y->backend, blk, X, Y));
}

tma_status_t tma_gnn_op_spmm_t(const tma_gnn_block_t *blk, const tensor_t *dY, tensor_t *dX)
{
    REQUIRE("spmm_t", block_ok(blk));
    REQUIRE("spmm_t", dX->rows == blk->num_src && dY->rows == blk->num_dst && dX->cols == dY->cols);
    TIMED_IO(dX->backend, GNN_OP_SPMM_T, 0, 4.0 * (double)blk->num_edges * (double)dY->cols, dX->backend->ops->spmm_t(dX->backend, blk, dY, dX));
}

tma_status_t tma_gnn_op_prelu_bwd(const tensor_t *dY, const tensor_t *X, const tensor_t *a, tensor_t *dX,
                                  tensor_t *da)
{
    REQUIRE("prelu_bwd", tma_gnn_tensor_numel(X) == tma_gnn_tensor_numel(dY) &&
                             tma_gnn_tensor_numel(X) == tma_gnn_tensor_numel(dX));
    REQUIRE("prelu_bwd", tma_gnn_tensor_numel(a) == 1 && tma_gnn_tensor_numel(da) == 1);
    TIMED(dX->backend, GNN_OP_PRELU_BWD, 0, dX->backend->ops->prelu_bwd(dX->backend, dY, X, a, dX, da));
}

tma_status_t tma_gnn_op_bias_prelu(tensor_t *Z, const tensor_t *bias, const tensor_t *a, tensor_t *Y)
{
    REQUIRE("bias_prelu", tma_gnn_tensor_numel(bias) == Z->cols && tma_gnn_tensor_numel(a) == 1);
    REQUIRE("bias_prelu", Y->rows == Z->rows && Y->cols == Z->cols);
    TIMED(Y->backend, GNN_OP_BIAS_PRELU, 0, Y->backend->ops->bias_prelu(Y->backend, Z, bias, a, Y));
}

tma_status_t tma_gnn_op_ln_prelu_fwd(const tensor_t *X, const tensor_t *gamma, const tensor_t *beta,
                                     const tensor_t *a, float eps, tensor_t *H, tensor_t *mean, tensor_t *rstd)
{
    REQUIRE("ln_prelu_fwd", H->rows == X->rows && H->cols == X->cols && tma_gnn_tensor_numel(a) == 1);
    REQUIRE("ln_prelu_fwd", tma_gnn_tensor_numel(gamma) == X->cols && tma_gnn_tensor_numel(beta) == X->cols);
    REQUIRE("ln_prelu_fwd", tma_gnn_tensor_numel(mean) == X->rows && tma_gnn_tensor_numel(rstd) == X->rows);
    TIMED(H->backend, GNN_OP_LN_PRELU_FWD, 0,
          H->backend->ops->ln_prelu_fwd(H->backend, X, gamma, beta, a, eps, H, mean, rstd));
}

tma_status_t tma_gnn_op_ln_prelu_bwd(const tensor_t *dH, const tensor_t *X, const tensor_t *gamma,
                                     const tensor_t *beta, const tensor_t *a, const tensor_t *mean,
                                     const tensor_t *rstd, tensor_t *dX, tensor_t *dgamma, tensor_t *dbeta,
                                     tensor_t *da)
{
    REQUIRE("ln_prelu_bwd", dH->rows == X->rows && dH->cols == X->cols && dX->rows == X->rows &&
                                dX->cols == X->cols && tma_gnn_tensor_numel(a) == 1 && tma_gnn_tensor_numel(da) == 1);
    REQUIRE("ln_prelu_bwd", tma_gnn_tensor_numel(gamma) == X->cols && tma_gnn_tensor_numel(beta) == X->cols &&
                                tma_gnn_tensor_numel(dgamma) == X->cols && tma_gnn_tensor_numel(dbeta) == X->cols);
    REQUIRE("ln_prelu_bwd", tma_gnn_tensor_numel(mean) == X->rows && tma_gnn_tensor_numel(rstd) == X->rows);
    REQUIRE("ln_prelu_bwd", mean->backend == dX->backend && rstd->backend == dX->backend);
    TIMED(dX->backend, GNN_OP_LN_PRELU_BWD, 0,
          dX->backend->ops->ln_prelu_bwd(dX->backend, dH, X, gamma, beta, a, mean, rstd, dX, dgamma, dbeta, da));
}

tma_status_t tma_gnn_op_pair_mul(const tensor_t *H, const tensor_t *hi, const tensor_t *ti, tensor_t *E)
{
    REQUIRE("pair_mul", IS(hi, TMA_GNN_I32) && IS(ti, TMA_GNN_I32));
    REQUIRE("pair_mul", tma_gnn_tensor_numel(hi) == E->rows && tma_gnn_tensor_numel(ti) == E->rows &&
                            E->cols == H->cols);
    TIMED_IO(E->backend, GNN_OP_PAIR_MUL, 0, 8.0 * (double)E->rows * (double)E->cols, E->backend->ops->pair_mul(E->backend, H, hi, ti, E));
}

tma_status_t tma_gnn_op_pair_mul_bwd(const tensor_t *dE, const tensor_t *H, const tensor_t *hi,
                                     const tensor_t *ti, tensor_t *dH)
{
    REQUIRE("pair_mul_bwd", IS(hi, TMA_GNN_I32) && IS(ti, TMA_GNN_I32));
    REQUIRE("pair_mul_bwd", tma_gnn_tensor_numel(hi) == dE->rows && tma_gnn_tensor_numel(ti) == dE->rows &&
                                dE->cols == H->cols && dH->rows == H->rows && dH->cols == H->cols);
    TIMED_IO(dH->backend, GNN_OP_PAIR_MUL_BWD, 0, 16.0 * (double)dE->rows * (double)dE->cols, dH->backend->ops->pair_mul_bwd(dH->backend, dE, H, hi, ti, dH));
}

tma_status_t tma_gnn_op_bce_logits(const tensor_t *logits, const tensor_t *labels, double *loss_p,
                                   tensor_t *dlogits)
{
    int64_t n = tma_gnn_tensor_numel(logits);
    REQUIRE("bce_logits", n > 0 && tma_gnn_tensor_numel(labels) == n && tma_gnn_tensor_numel(dlogits) == n);
    TIMED(dlogits->backend, GNN_OP_BCE, 0,
          dlogits->backend->ops->bce_logits(dlogits->backend, logits, labels, loss_p, dlogits));
}

tma_status_t tma_gnn_op_sumsq(const tensor_t *x, double *out_p)
{
    TIMED(x->backend, GNN_OP_SUMSQ, 0, x->backend->ops->sumsq(x->backend, x, out_p));
}

tma_status_t tma_gnn_op_scale(tensor_t *x, float s)
{
    TIMED(x->backend, GNN_OP_SCALE, 0, x->backend->ops->scale(x->backend, x, s));
}

tma_status_t tma_gnn_op_dropout(const tensor_t *x, float p, uint64_t key, tensor_t *y)
{
    if (!(p >= 0 && p < 1) || x->backend != y->backend || tma_gnn_tensor_numel(x) != tma_gnn_tensor_numel(y) ||
        x->dtype != TMA_GNN_F32 || y->dtype != TMA_GNN_F32)
        return TMA_ERR_INVALID;
    TIMED(x->backend, GNN_OP_DROPOUT, 0, x->backend->ops->dropout(x->backend, x, p, key, y));
}

tma_status_t tma_gnn_op_fill(tensor_t *x, float v)
{
    TIMED(x->backend, GNN_OP_FILL, 0, x->backend->ops->fill(x->backend, x, v));
}

tma_status_t tma_gnn_op_adam(tensor_t *p, const tensor_t *g, tensor_t *m, tensor_t *v, const tma_gnn_adam_t *h)
{
    int64_t n = tma_gnn_tensor_numel(p);
    REQUIRE("adam", tma_gnn_tensor_numel(g) == n && tma_gnn_tensor_numel(m) == n && tma_gnn_tensor_numel(v) == n);
    REQUIRE("adam", h->step >= 1);
    TIMED(p->backend, GNN_OP_ADAM, 0, p->backend->ops->adam(p->backend, p, g, m, v, h));
}

tma_status_t tma_gnn_op_mrr_sum(const tensor_t *scores, double *sum_p)
{
    REQUIRE("mrr_sum", IS(scores, TMA_GNN_F32) && scores->cols >= 1);
    if (!scores->backend->ops->mrr_sum)
        return TMA_ERR_UNSUPPORTED;
    TIMED(scores->backend, GNN_OP_MRR_SUM, 0, scores->backend->ops->mrr_sum(scores->backend, scores, sum_p));
}

tma_status_t tma_gnn_op_score_mlp(const tensor_t *H, const tensor_t *hi, const tensor_t *ti, int layers,
                                  const tensor_t *const *W, const tensor_t *const *bias, const tensor_t *const *a,
                                  tensor_t *scratch, tensor_t *logits)
{
    const int64_t np = logits->rows;
    if (!logits->backend->ops->score_mlp)
        return TMA_ERR_UNSUPPORTED;
    REQUIRE("score_mlp", IS(H, TMA_GNN_F32) && IS(hi, TMA_GNN_I32) && IS(ti, TMA_GNN_I32));
    REQUIRE("score_mlp", IS(scratch, TMA_GNN_F32) && IS(logits, TMA_GNN_F32) && logits->cols == 1);
    REQUIRE("score_mlp", tma_gnn_tensor_numel(hi) == np && tma_gnn_tensor_numel(ti) == np);
    REQUIRE("score_mlp", layers >= 1 && W[0]->rows == H->cols && W[layers - 1]->cols == 1);
    int64_t widest = H->cols;
    double flops = 0;
    for (int k = 0; k < layers; k++) {
        REQUIRE("score_mlp", IS(W[k], TMA_GNN_F32) && tma_gnn_tensor_numel(bias[k]) == W[k]->cols);
        REQUIRE("score_mlp", k == 0 || W[k]->rows == W[k - 1]->cols);
        REQUIRE("score_mlp", k == layers - 1 || tma_gnn_tensor_numel(a[k]) == 1);
        widest = TMA_MAX(widest, W[k]->cols);
        flops += 2.0 * (double)np * (double)W[k]->rows * (double)W[k]->cols;
    }
    REQUIRE("score_mlp", tma_gnn_tensor_numel(scratch) >= 2 * widest * logits->backend->threads);
    if (np == 0)
        return TMA_OK;
    TIMED_IO(logits->backend, GNN_OP_SCORE_MLP, flops, 8.0 * (double)np * (double)H->cols,
          logits->backend->ops->score_mlp(logits->backend, H, hi, ti, layers, W, bias, a, scratch, logits));
}

tma_status_t tma_gnn_op_layer_infer(const tma_gnn_layer_infer_t *L, tensor_t *scratch, tensor_t *Y)
{
    tma_gnn_backend_t *b = Y->backend;
    if (!b->ops->layer_infer)
        return TMA_ERR_UNSUPPORTED;
    const tma_gnn_block_t *blk = L->blk;
    const int64_t n = blk->num_dst, d = L->W->rows, h = L->W->cols;
    REQUIRE("layer_infer", block_ok(blk) && IS(Y, TMA_GNN_F32) && Y->rows == n && Y->cols == h);
    REQUIRE("layer_infer", IS(L->W, TMA_GNN_F32) && IS(L->bias, TMA_GNN_F32) && tma_gnn_tensor_numel(L->bias) == h);
    REQUIRE("layer_infer", !L->W_self || (IS(L->W_self, TMA_GNN_F32) && L->W_self->rows == d && L->W_self->cols == h));
    /* The rows the op reads: the block's sources, and each row's own. */
    const int64_t need = TMA_MAX(blk->num_src, L->W_self ? L->self0 + n : 0);
    REQUIRE("layer_infer", L->self0 >= 0);
    if (L->X) {
        REQUIRE("layer_infer", IS(L->X, TMA_GNN_F32) && L->X->cols == d && L->X->rows >= need);
    } else {
        tma_gnn_feat_info_t fi;
        REQUIRE("layer_infer", L->feat && L->ids);
        b->ops->feat_info(L->feat, &fi);
        REQUIRE("layer_infer", !fi.sparse && fi.dim == d);
        REQUIRE("layer_infer", IS(L->ids, TMA_GNN_I64) && tma_gnn_tensor_numel(L->ids) >= need);
    }
    if (L->a) {
        REQUIRE("layer_infer", L->gamma && L->beta && tma_gnn_tensor_numel(L->a) == 1);
        REQUIRE("layer_infer", tma_gnn_tensor_numel(L->gamma) == h && tma_gnn_tensor_numel(L->beta) == h);
    }
    REQUIRE("layer_infer", IS(scratch, TMA_GNN_F32) && tma_gnn_tensor_numel(scratch) >= (2 * d + h) * b->threads);
    if (n == 0)
        return TMA_OK;
    const double flops = 2.0 * (double)n * (double)d * (double)h * (L->W_self ? 2.0 : 1.0);
    TIMED_IO(b, GNN_OP_LAYER_INFER, flops, 4.0 * (double)blk->num_edges * (double)d,
             b->ops->layer_infer(b, L, scratch, Y));
}

/* ------------------------------------------------------------------ heterogeneous ops */

tma_status_t tma_gnn_op_rgcn_aggregate(const tma_gnn_block_t *blk, const tensor_t *rel, const tensor_t *T,
                                       const tensor_t *coef, tensor_t *Y)
{
    REQUIRE("rgcn_aggregate", block_ok(blk) && IS(rel, TMA_GNN_I32) && tma_gnn_tensor_numel(rel) >= blk->num_edges);
    REQUIRE("rgcn_aggregate", IS(T, TMA_GNN_F32) && IS(coef, TMA_GNN_F32) && IS(Y, TMA_GNN_F32));
    REQUIRE("rgcn_aggregate", coef->rows >= 1 && coef->cols >= 1 &&
                                  tma_gnn_tensor_numel(coef) <= TMA_GNN_RGCN_MAX_COEF);
    REQUIRE("rgcn_aggregate", T->rows >= blk->num_src && T->cols == coef->cols * Y->cols && Y->rows == blk->num_dst);
    if (!Y->backend->ops->rgcn_aggregate)
        return TMA_ERR_UNSUPPORTED;
    TIMED_IO(Y->backend, GNN_OP_RGCN_AGG, 2.0 * (double)blk->num_edges * (double)T->cols,
             4.0 * (double)blk->num_edges * (double)T->cols,
          Y->backend->ops->rgcn_aggregate(Y->backend, blk, rel, T, coef, Y));
}

tma_status_t tma_gnn_op_rgcn_aggregate_bwd(const tma_gnn_block_t *blk, const tensor_t *rel, const tensor_t *t_rel,
                                           const tensor_t *dY, const tensor_t *T, const tensor_t *coef, tensor_t *dT,
                                           tensor_t *dcoef)
{
    REQUIRE("rgcn_aggregate_bwd",
            block_ok(blk) && IS(rel, TMA_GNN_I32) && tma_gnn_tensor_numel(rel) >= blk->num_edges);
    REQUIRE("rgcn_aggregate_bwd", !blk->has_transpose || (t_rel && IS(t_rel, TMA_GNN_I32) &&
                                                          tma_gnn_tensor_numel(t_rel) >= blk->num_edges));
    REQUIRE("rgcn_aggregate_bwd", IS(dY, TMA_GNN_F32) && IS(T, TMA_GNN_F32) && IS(coef, TMA_GNN_F32) &&
                                      IS(dT, TMA_GNN_F32) && IS(dcoef, TMA_GNN_F32));
    REQUIRE("rgcn_aggregate_bwd", coef->rows >= 1 && coef->cols >= 1 &&
                                      tma_gnn_tensor_numel(coef) <= TMA_GNN_RGCN_MAX_COEF &&
                                      dcoef->rows == coef->rows && dcoef->cols == coef->cols);
    REQUIRE("rgcn_aggregate_bwd", dY->rows == blk->num_dst && T->rows >= blk->num_src &&
                                      T->cols == coef->cols * dY->cols && dT->rows == blk->num_src &&
                                      dT->cols == T->cols);
    if (!dT->backend->ops->rgcn_aggregate_bwd)
        return TMA_ERR_UNSUPPORTED;
    TIMED_IO(dT->backend, GNN_OP_RGCN_AGG_BWD, 4.0 * (double)blk->num_edges * (double)T->cols,
             8.0 * (double)blk->num_edges * (double)T->cols,
          dT->backend->ops->rgcn_aggregate_bwd(dT->backend, blk, rel, t_rel, dY, T, coef, dT, dcoef));
}

/* The pairs, and either both rel and Wr (DistMult) or neither (the dot product). */
static int pairs_ok(const tensor_t *hi, const tensor_t *ti, const tensor_t *rel, const tensor_t *Wr,
                    const tensor_t *H, int64_t np)
{
    if (!IS(hi, TMA_GNN_I32) || !IS(ti, TMA_GNN_I32) || tma_gnn_tensor_numel(hi) != np ||
        tma_gnn_tensor_numel(ti) != np || !IS(H, TMA_GNN_F32) || !rel != !Wr)
        return 0;
    return !rel || (IS(rel, TMA_GNN_I32) && tma_gnn_tensor_numel(rel) == np && IS(Wr, TMA_GNN_F32) &&
                    Wr->cols == H->cols && Wr->rows >= 1);
}

tma_status_t tma_gnn_op_distmult(const tensor_t *H, const tensor_t *hi, const tensor_t *ti, const tensor_t *rel,
                                 const tensor_t *Wr, tensor_t *score)
{
    REQUIRE("distmult", pairs_ok(hi, ti, rel, Wr, H, score->rows) && score->cols == 1 && IS(score, TMA_GNN_F32));
    if (!score->backend->ops->distmult)
        return TMA_ERR_UNSUPPORTED;
    TIMED_IO(score->backend, GNN_OP_DISTMULT, 3.0 * (double)score->rows * (double)H->cols,
             8.0 * (double)score->rows * (double)H->cols,
          score->backend->ops->distmult(score->backend, H, hi, ti, rel, Wr, score));
}

tma_status_t tma_gnn_op_distmult_bwd(const tensor_t *dscore, const tensor_t *H, const tensor_t *hi,
                                     const tensor_t *ti, const tensor_t *rel, const tensor_t *Wr, tensor_t *dH,
                                     tensor_t *dWr)
{
    REQUIRE("distmult_bwd", pairs_ok(hi, ti, rel, Wr, H, dscore->rows) && dscore->cols == 1 && !Wr == !dWr);
    REQUIRE("distmult_bwd", IS(dH, TMA_GNN_F32) && dH->rows == H->rows && dH->cols == H->cols);
    REQUIRE("distmult_bwd", !dWr || (IS(dWr, TMA_GNN_F32) && dWr->rows == Wr->rows && dWr->cols == Wr->cols));
    if (!dH->backend->ops->distmult_bwd)
        return TMA_ERR_UNSUPPORTED;
    TIMED_IO(dH->backend, GNN_OP_DISTMULT_BWD, 6.0 * (double)dscore->rows * (double)H->cols,
             16.0 * (double)dscore->rows * (double)H->cols,
          dH->backend->ops->distmult_bwd(dH->backend, dscore, H, hi, ti, rel, Wr, dH, dWr));
}

tma_status_t tma_gnn_op_rows_gather(const tensor_t *X, const tensor_t *idx, tensor_t *Y)
{
    REQUIRE("rows_gather", IS(idx, TMA_GNN_I32) && tma_gnn_tensor_numel(idx) == Y->rows && X->cols == Y->cols);
    REQUIRE("rows_gather", IS(X, TMA_GNN_F32) && IS(Y, TMA_GNN_F32) && X->data != Y->data);
    if (!Y->backend->ops->rows_gather)
        return TMA_ERR_UNSUPPORTED;
    TIMED_IO(Y->backend, GNN_OP_ROWS_GATHER, 0, 4.0 * (double)Y->rows * (double)Y->cols, Y->backend->ops->rows_gather(Y->backend, X, idx, Y));
}

tma_status_t tma_gnn_op_rows_scatter(const tensor_t *X, const tensor_t *idx, tensor_t *Y)
{
    REQUIRE("rows_scatter", IS(idx, TMA_GNN_I32) && tma_gnn_tensor_numel(idx) == X->rows && X->cols == Y->cols);
    REQUIRE("rows_scatter", IS(X, TMA_GNN_F32) && IS(Y, TMA_GNN_F32) && X->data != Y->data);
    if (!Y->backend->ops->rows_scatter)
        return TMA_ERR_UNSUPPORTED;
    TIMED_IO(Y->backend, GNN_OP_ROWS_SCATTER, 0, 4.0 * (double)X->rows * (double)X->cols, Y->backend->ops->rows_scatter(Y->backend, X, idx, Y));
}

/* ------------------------------------------------------------------ GAT */

/* K heads of width C from the attention vectors; T must be n x K*C. */
static int gat_shapes_ok(const tensor_t *T, const tensor_t *a_src, const tensor_t *a_dst)
{
    return IS(T, TMA_GNN_F32) && IS(a_src, TMA_GNN_F32) && IS(a_dst, TMA_GNN_F32) && a_src->rows >= 1 &&
           a_src->rows <= TMA_GNN_MAX_HEADS &&
           a_src->cols >= 1 && a_dst->rows == a_src->rows && a_dst->cols == a_src->cols &&
           T->cols == a_src->rows * a_src->cols;
}

tma_status_t tma_gnn_op_gat_scores(const tensor_t *T, const tensor_t *a_src, const tensor_t *a_dst, tensor_t *S)
{
    REQUIRE("gat_scores", gat_shapes_ok(T, a_src, a_dst));
    REQUIRE("gat_scores", IS(S, TMA_GNN_F32) && S->rows == T->rows && S->cols == 2 * a_src->rows);
    if (!S->backend->ops->gat_scores)
        return TMA_ERR_UNSUPPORTED;
    TIMED(S->backend, GNN_OP_GAT_SCORES, 4.0 * (double)T->rows * (double)T->cols,
          S->backend->ops->gat_scores(S->backend, T, a_src, a_dst, S));
}

tma_status_t tma_gnn_op_gat_aggregate(const tma_gnn_block_t *blk, const tensor_t *T, const tensor_t *S, int64_t self0,
                                      tensor_t *alpha, tensor_t *Y)
{
    const int64_t K = S->cols / 2;
    REQUIRE("gat_aggregate", block_ok(blk) && IS(T, TMA_GNN_F32) && IS(S, TMA_GNN_F32) && IS(alpha, TMA_GNN_F32) &&
                                 IS(Y, TMA_GNN_F32));
    REQUIRE("gat_aggregate", K >= 1 && S->cols == 2 * K && S->rows == T->rows && T->rows >= blk->num_src &&
                                 T->cols % K == 0 && self0 >= 0 && self0 + blk->num_dst <= T->rows);
    REQUIRE("gat_aggregate", alpha->rows == blk->num_edges && alpha->cols == K && Y->rows == blk->num_dst &&
                                 (Y->cols == T->cols || Y->cols * K == T->cols));
    if (!Y->backend->ops->gat_aggregate)
        return TMA_ERR_UNSUPPORTED;
    TIMED_IO(Y->backend, GNN_OP_GAT_AGG, 2.0 * (double)blk->num_edges * (double)T->cols,
             4.0 * (double)blk->num_edges * (double)T->cols,
             Y->backend->ops->gat_aggregate(Y->backend, blk, T, S, self0, alpha, Y));
}

tma_status_t tma_gnn_op_gat_aggregate_bwd(const tma_gnn_block_t *blk, const tensor_t *T, const tensor_t *S,
                                          const tensor_t *alpha, const tensor_t *a_src, const tensor_t *a_dst,
                                          const tensor_t *dY, tensor_t *dE, tensor_t *dS, tensor_t *dT,
                                          tensor_t *da_src, tensor_t *da_dst)
{
    const int64_t K = a_src->rows;
    REQUIRE("gat_aggregate_bwd", block_ok(blk) && gat_shapes_ok(T, a_src, a_dst) && IS(S, TMA_GNN_F32) &&
                                     IS(alpha, TMA_GNN_F32) && IS(dY, TMA_GNN_F32) && IS(dE, TMA_GNN_F32) &&
                                     IS(dS, TMA_GNN_F32) && IS(dT, TMA_GNN_F32));
    REQUIRE("gat_aggregate_bwd", S->rows == T->rows && S->cols == 2 * K && T->rows >= blk->num_src &&
                                     blk->num_dst <= T->rows && alpha->rows == blk->num_edges && alpha->cols == K);
    REQUIRE("gat_aggregate_bwd", dY->rows == blk->num_dst && (dY->cols == T->cols || dY->cols * K == T->cols));
    REQUIRE("gat_aggregate_bwd", dE->rows == blk->num_edges && dE->cols == K && dS->rows == S->rows &&
                                     dS->cols == S->cols && dT->rows == T->rows && dT->cols == T->cols);
    REQUIRE("gat_aggregate_bwd", IS(da_src, TMA_GNN_F32) && IS(da_dst, TMA_GNN_F32) &&
                                     da_src->rows == K && da_src->cols == a_src->cols && da_dst->rows == K &&
                                     da_dst->cols == a_src->cols);
    if (!dT->backend->ops->gat_aggregate_bwd)
        return TMA_ERR_UNSUPPORTED;
    TIMED_IO(dT->backend, GNN_OP_GAT_AGG_BWD, 6.0 * (double)blk->num_edges * (double)T->cols,
             8.0 * (double)blk->num_edges * (double)T->cols,
             dT->backend->ops->gat_aggregate_bwd(dT->backend, blk, T, S, alpha, a_src, a_dst, dY, dE, dS, dT, da_src,
                                                 da_dst));
}

/* ------------------------------------------------------------------ features */

tma_status_t tma_gnn_feat_create(tma_gnn_backend_t *b, const void *host, tma_feat_dtype_t dtype, int64_t num_nodes,
                                 int64_t dim, unsigned flags, tma_gnn_feat_t **f_p)
{
    if (num_nodes < 0 || dim < 1 || (!host && num_nodes > 0) || dtype > TMA_FEAT_BF16)
        return TMA_ERR_INVALID;
    return b->ops->feat_create(b, host, dtype, num_nodes, dim, flags, f_p);
}

void tma_gnn_feat_destroy(tma_gnn_backend_t *b, tma_gnn_feat_t *f)
{
    if (f)
        b->ops->feat_destroy(b, f);
}

void tma_gnn_feat_get_info(tma_gnn_backend_t *b, const tma_gnn_feat_t *f, tma_gnn_feat_info_t *info_p)
{
    b->ops->feat_info(f, info_p);
}

/* The bytes a feature op moves by row index, for the statistics' roofline:
 * each of `rows` feature rows, dense (dim floats) or CSR (its index-value
 * pairs; the rows of W they pick are a small table that stays in cache). */
static double feat_rows_bytes(const tma_gnn_feat_info_t *fi, int64_t rows)
{
    return (double)rows * (fi->sparse ? 8.0 * fi->nnz_per_row : 4.0 * (double)fi->dim);
}

/* A feature product's FLOPs: 2 per multiply-add, dense or over the stored entries. */
static double feat_flops(const tma_gnn_feat_info_t *fi, int64_t rows, int64_t cols)
{
    return 2.0 * (double)rows * (fi->sparse ? fi->nnz_per_row : (double)fi->dim) * (double)cols;
}

tma_status_t tma_gnn_op_feat_matmul(tma_gnn_feat_t *f, const tensor_t *ids, const tensor_t *W, float beta,
                                    tensor_t *out)
{
    tma_gnn_feat_info_t fi;
    out->backend->ops->feat_info(f, &fi);
    REQUIRE("feat_matmul", IS(ids, TMA_GNN_I64) && W->rows == fi.dim);
    REQUIRE("feat_matmul", out->rows == tma_gnn_tensor_numel(ids) && out->cols == W->cols);
    TIMED_IO(out->backend, GNN_OP_FEAT_MATMUL, feat_flops(&fi, out->rows, W->cols), feat_rows_bytes(&fi, out->rows),
          out->backend->ops->feat_matmul(out->backend, f, ids, W, beta, out));
}

tma_status_t tma_gnn_op_feat_matmul_grad(tma_gnn_feat_t *f, const tensor_t *ids, const tensor_t *dOut,
                                         tensor_t *dW)
{
    tma_gnn_feat_info_t fi;
    dW->backend->ops->feat_info(f, &fi);
    REQUIRE("feat_matmul_grad", IS(ids, TMA_GNN_I64) && dW->rows == fi.dim && dW->cols == dOut->cols);
    REQUIRE("feat_matmul_grad", dOut->rows == tma_gnn_tensor_numel(ids));
    TIMED_IO(dW->backend, GNN_OP_FEAT_MATMUL_GRAD, feat_flops(&fi, dOut->rows, dW->cols),
             feat_rows_bytes(&fi, dOut->rows),
          dW->backend->ops->feat_matmul_grad(dW->backend, f, ids, dOut, dW));
}

tma_status_t tma_gnn_op_feat_aggregate(tma_gnn_feat_t *f, const tensor_t *ids, const tma_gnn_block_t *blk,
                                       tensor_t *out)
{
    tma_gnn_feat_info_t fi;
    out->backend->ops->feat_info(f, &fi);
    REQUIRE("feat_aggregate", block_ok(blk) && IS(ids, TMA_GNN_I64));
    REQUIRE("feat_aggregate", tma_gnn_tensor_numel(ids) >= blk->num_src && out->rows == blk->num_dst &&
                                  out->cols == fi.dim);
    TIMED_IO(out->backend, GNN_OP_FEAT_AGGREGATE, 0, feat_rows_bytes(&fi, blk->num_edges),
             out->backend->ops->feat_aggregate(out->backend, f, ids, blk, out));
}

tma_status_t tma_gnn_op_feat_self_aggregate(tma_gnn_feat_t *f, const tensor_t *ids, const tma_gnn_block_t *blk,
                                            tensor_t *out)
{
    tma_gnn_backend_t *b = out->backend;
    if (!b->ops->feat_self_aggregate)
        return TMA_ERR_UNSUPPORTED;
    tma_gnn_feat_info_t fi;
    b->ops->feat_info(f, &fi);
    REQUIRE("feat_self_aggregate", block_ok(blk) && IS(ids, TMA_GNN_I64) && IS(out, TMA_GNN_F32) && !fi.sparse);
    REQUIRE("feat_self_aggregate", blk->num_src >= blk->num_dst && tma_gnn_tensor_numel(ids) >= blk->num_src);
    REQUIRE("feat_self_aggregate", out->rows == blk->num_dst && out->cols == 2 * fi.dim);
    TIMED_IO(b, GNN_OP_FEAT_SELF_AGG, 0, feat_rows_bytes(&fi, blk->num_edges + blk->num_dst),
             b->ops->feat_self_aggregate(b, f, ids, blk, out));
}
