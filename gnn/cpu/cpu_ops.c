/*
 * cpu_ops.c: the CPU backend's the ops table: memory, the optimizer, init and fini, and the table
 * itself. Compiled twice, for AVX2 and for the baseline ISA (see cpu_int.h).
 */
#include "cpu_int.h"

/* ------------------------------------------------------------------ memory */

static tma_status_t cpu_alloc(tma_gnn_backend_t *b, size_t bytes, void **p_p)
{
    void *p = tma_alloc_aligned(bytes);
    if (!p) {
        tma_log_error(COMP, "out of memory allocating %zu bytes", bytes);
        return TMA_ERR_NOMEM;
    }
    /* Tensors live as long as their trainer or evaluator, and ops gather
     * their rows at random (an embedding table, a layer's input). */
    tma_advise_huge(p, bytes);
    *p_p = p;
    return TMA_OK;
}

static void cpu_free(tma_gnn_backend_t *b, void *p) { tma_free_aligned(p); }

static tma_status_t cpu_memcpy(tma_gnn_backend_t *b, void *dst, const void *src, size_t bytes)
{
    if (dst != src)
        memcpy(dst, src, bytes);
    return TMA_OK;
}

static tma_status_t cpu_fill(tma_gnn_backend_t *b, tensor_t *x, float v)
{
    int64_t n = tma_gnn_tensor_numel(x);
    float *p = F(x);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        p[i] = v;
    return TMA_OK;
}

/* ------------------------------------------------------------------ optimizer */

static tma_status_t cpu_sumsq(tma_gnn_backend_t *b, const tensor_t *t, double *out_p)
{
    const int64_t n = tma_gnn_tensor_numel(t);
    const float *x = CF(t);
    double part[NCHUNK];
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (n > PAR_MIN)
    for (int c = 0; c < NCHUNK; c++) {
        int64_t i0 = n * c / NCHUNK, i1 = n * (c + 1) / NCHUNK;
        double acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = i0; i < i1; i++)
            acc += (double)x[i] * x[i];
        part[c] = acc;
    }
    double s = 0;
    for (int c = 0; c < NCHUNK; c++)
        s += part[c];
    *out_p = s;
    return TMA_OK;
}

static tma_status_t cpu_scale(tma_gnn_backend_t *b, tensor_t *t, float s)
{
    const int64_t n = tma_gnn_tensor_numel(t);
    float *x = F(t);
#pragma omp parallel for simd num_threads(NT(b)) schedule(static) if (parallel : n > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        x[i] *= s;
    return TMA_OK;
}

static tma_status_t cpu_dropout(tma_gnn_backend_t *b, const tensor_t *xt, float p, uint64_t key, tensor_t *yt)
{
    const uint32_t thresh = gnn_dropout_threshold(p);
    const float s = 1.0f / (1.0f - p);
    const int64_t n = tma_gnn_tensor_numel(xt);
    const float *x = CF(xt);
    float *y = F(yt);
#pragma omp parallel for num_threads(NT(b)) schedule(static) if (parallel : n > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        y[i] = gnn_dropout_keep(key, i, thresh) ? x[i] * s : 0.0f;
    return TMA_OK;
}

static tma_status_t cpu_adam(tma_gnn_backend_t *b, tensor_t *p, const tensor_t *g, tensor_t *m, tensor_t *v,
                             const tma_gnn_adam_t *h)
{
    /* PyTorch's single-tensor Adam, in float32 as it computes it. */
    const int64_t n = tma_gnn_tensor_numel(p);
    const double bc1 = 1.0 - pow(h->beta1, (double)h->step), bc2 = 1.0 - pow(h->beta2, (double)h->step);
    const float step_size = (float)(h->lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    const float b1 = h->beta1, b2 = h->beta2, c1 = 1.0f - h->beta1, c2 = 1.0f - h->beta2, eps = h->eps;
    float *pp = F(p), *mm = F(m), *vv = F(v);
    const float *gg = CF(g);
#pragma omp parallel for simd num_threads(NT(b)) schedule(static) if (parallel : n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float gi = gg[i];
        float mi = mm[i] * b1 + gi * c1;
        float vi = vv[i] * b2 + gi * gi * c2;
        mm[i] = mi;
        vv[i] = vi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        pp[i] = pp[i] - step_size * (mi / denom);
    }
    return TMA_OK;
}

/* ------------------------------------------------------------------ the table */

/*
 * Whether this backend runs the own products (cpu_gemm.c): the AVX2 build
 * does on a processor with AVX-512F unless TMA_CPU_GEMM=openblas (for
 * comparing the two); the baseline build never does.
 */
static tma_status_t own_gemm_init(cpu_state_t *cs)
{
    const char *env = getenv("TMA_CPU_GEMM");
    if (env && strcmp(env, "own") != 0 && strcmp(env, "openblas") != 0) {
        tma_log_error(COMP, "TMA_CPU_GEMM=\"%s\": expected own or openblas (unset: own where the processor has "
                            "AVX-512F)", env);
        return TMA_ERR_CONFIG;
    }
#ifdef CPU_OWN_GEMM
    if (env && strcmp(env, "openblas") == 0)
        return TMA_OK;
    if (!tma_gnn_gemm512_available()) {
        if (env)
            tma_log_info(COMP, "TMA_CPU_GEMM=own: this processor has no AVX-512F; OpenBLAS runs every product");
        return TMA_OK;
    }
    cs->pack = tma_alloc_aligned(GEMM_PACK_FLOATS * sizeof(float));
    if (!cs->pack) {
        tma_log_error(COMP, "out of memory for the CPU backend's packed weight");
        return TMA_ERR_NOMEM;
    }
    tma_log_debug(COMP, "products: own AVX-512 kernels for the tall ones, OpenBLAS for the rest");
#endif
    return TMA_OK;
}

static void cpu_fini(tma_gnn_backend_t *b);

static tma_status_t cpu_init(tma_gnn_backend_t *b, const char *device)
{
    cpu_state_t *cs = calloc(1, sizeof *cs);
    if (cs)
        cs->part = tma_alloc_aligned(2 * (size_t)NCHUNK * SCRATCH_COLS * sizeof(double));
    /* Reserved, not touched: a page is first written by the product that needs it. */
    if (cs && b->threads > 1 && b->threads <= MM_MAX_SLICES)
        cs->mm_part = tma_alloc_aligned((size_t)(b->threads - 1) * MM_PART_FLOATS * sizeof(float));
    if (!cs || !cs->part || (b->threads > 1 && b->threads <= MM_MAX_SLICES && !cs->mm_part)) {
        if (cs) {
            tma_free_aligned(cs->part);
            tma_free_aligned(cs->mm_part);
        }
        free(cs);
        tma_log_error(COMP, "out of memory for the CPU backend's scratch");
        return TMA_ERR_NOMEM;
    }
    b->impl = cs;
    blas_one_thread();
    const tma_status_t st = own_gemm_init(cs);
    if (st != TMA_OK)
        cpu_fini(b);
    return st;
}

static void cpu_fini(tma_gnn_backend_t *b)
{
    cpu_state_t *cs = b->impl;
    if (cs) {
        tma_free_aligned(cs->part);
        tma_free_aligned(cs->mm_part);
        tma_free_aligned(cs->pack);
    }
    free(cs);
    b->impl = NULL;
}

const tma_gnn_ops_t CPU_OPS_NAME = {
    .name = CPU_OPS_LABEL,
    .host_addressable = 1,
    .init = cpu_init,
    .fini = cpu_fini,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .fill = cpu_fill,
    .matmul = cpu_matmul,
    .add_bias = cpu_add_bias,
    .colsum = cpu_colsum,
    .spmm = cpu_spmm,
    .spmm_t = cpu_spmm_t,
    .prelu_bwd = cpu_prelu_bwd,
    .bias_prelu = cpu_bias_prelu,
    .ln_prelu_fwd = cpu_ln_prelu_fwd,
    .ln_prelu_bwd = cpu_ln_prelu_bwd,
    .pair_mul = cpu_pair_mul,
    .pair_mul_bwd = cpu_pair_mul_bwd,
    .score_mlp = cpu_score_mlp,
    .matmul_bias = cpu_matmul_bias,
    .layer_infer = cpu_layer_infer,
    .feat_self_aggregate = cpu_feat_self_aggregate,
    .bce_logits = cpu_bce_logits,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .dropout = cpu_dropout,
    .adam = cpu_adam,
    .feat_create = cpu_feat_create,
    .feat_destroy = cpu_feat_destroy,
    .feat_info = cpu_feat_info,
    .feat_matmul = cpu_feat_matmul,
    .feat_matmul_grad = cpu_feat_matmul_grad,
    .feat_aggregate = cpu_feat_aggregate,
    .rgcn_aggregate = cpu_rgcn_aggregate,
    .rgcn_aggregate_bwd = cpu_rgcn_aggregate_bwd,
    .distmult = cpu_distmult,
    .distmult_bwd = cpu_distmult_bwd,
    .gat_scores = cpu_gat_scores,
    .gat_aggregate = cpu_gat_aggregate,
    .gat_aggregate_bwd = cpu_gat_aggregate_bwd,
    .rows_gather = cpu_rows_gather,
    .rows_scatter = cpu_rows_scatter,
};

CPU_ISA_END
