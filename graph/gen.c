/*
 * gen.c: synthetic graphs for `tma gen`: a stochastic block model with
 * homophily h and class-correlated features (the paper's Lemma 1 setting,
 * generalised to k classes), and R-MAT power-law graphs for scale tests.
 *
 * Edges are drawn in fixed blocks of GEN_BLOCK, block b from random stream
 * b, so a graph depends on its seed only, never on the thread count.  Both
 * generators hand their edges to the shared builder (cleaning, split,
 * negatives).
 */
#include "graph_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COMP "gen"
#define GEN_BLOCK 65536
#define SALT_EDGES 0x65646765ull
#define SALT_LABELS 0x6c6162656cull
#define SALT_CENTROID 0x63656e74ull
#define SALT_NOISE 0x6e6f697365ull
#define SALT_REL 0x72656c6174ull

/* Draws edges [first, first + count) of m into pairs[0 .. 2 * count), each
 * from draw(ctx, rng, &u, &v): block b of GEN_BLOCK from random stream b, in
 * parallel (first is a multiple of GEN_BLOCK). */
typedef void (*edge_fn)(const void *ctx, tma_rng_t *rng, int64_t *u, int64_t *v);

static void draw_blocks(int64_t *pairs, int64_t first, int64_t count, uint64_t seed, edge_fn draw, const void *ctx)
{
    const int64_t b0 = first / GEN_BLOCK, blocks = (count + GEN_BLOCK - 1) / GEN_BLOCK;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = b0; b < b0 + blocks; b++) {
        tma_rng_t rng;
        tma_rng_seed(&rng, seed ^ SALT_EDGES, (uint64_t)b);
        int64_t end = (b + 1) * GEN_BLOCK < first + count ? (b + 1) * GEN_BLOCK : first + count;
        for (int64_t i = b * GEN_BLOCK; i < end; i++)
            draw(ctx, &rng, &pairs[2 * (i - first)], &pairs[2 * (i - first) + 1]);
    }
}

/* Fills el with `m` edges. */
static tma_status_t draw_edges(tma_edge_list_t *el, int64_t m, uint64_t seed, edge_fn draw, const void *ctx)
{
    tma_status_t st = tma_edge_list_reserve(el, m > 0 ? m : 1);
    if (st != TMA_OK)
        return st;
    draw_blocks(el->pairs, 0, m, seed, draw, ctx);
    el->count = m;
    return TMA_OK;
}

/* An out-of-core build's source: the same edges, block by block, and the
 * feature rows on demand. */
typedef struct gen_stream {
    edge_fn draw;
    const void *ctx;
    uint64_t seed;
    int64_t m, drawn;
    void (*rows)(const void *ctx, int64_t first, int64_t count, float *out);
} gen_stream_t;

static int64_t stream_next(void *p, int64_t *pairs, int64_t cap)
{
    gen_stream_t *s = p;
    int64_t count = s->m - s->drawn < cap ? s->m - s->drawn : cap;
    draw_blocks(pairs, s->drawn, count, s->seed, s->draw, s->ctx);
    s->drawn += count;
    return count;
}

static void stream_rows(void *p, int64_t first, int64_t count, float *out)
{
    const gen_stream_t *s = p;
    s->rows(s->ctx, first, count, out);
}

/* Builds and writes the streamed graph out of core. */
static tma_status_t gen_ooc(gen_stream_t *s, graph_ooc_source_t *src, const tma_graph_build_opts_t *b,
                            uint64_t budget, const char *out, double t0, tma_gen_report_t *rep, uint64_t *id_p)
{
    src->next = stream_next;
    src->block = GEN_BLOCK;
    src->features = stream_rows;
    src->ctx = s;
    rep->seconds_generate = 0;
    tma_status_t st = graph_build_ooc(src, b, budget, out, &rep->build, id_p, &rep->homophily);
    if (st != TMA_OK)
        return st;
    rep->nodes = src->num_nodes;
    rep->feature_dim = src->feature_dim;
    rep->feat_dtype = src->feat_dtype;
    rep->num_classes = src->labels ? src->num_classes : 0;
    rep->seconds = tma_clock_now() - t0;
    return TMA_OK;
}

static tma_status_t finish(tma_graph_t *g, tma_edge_list_t *el, const tma_graph_build_opts_t *b, double t0,
                           tma_gen_report_t *rep)
{
    rep->seconds_generate = tma_clock_now() - t0;
    tma_status_t st = tma_graph_build(g, el, b, &rep->build);
    if (st != TMA_OK)
        return st;
    rep->nodes = g->num_nodes;
    rep->feature_dim = g->feature_dim;
    rep->feat_dtype = g->feat_dtype;
    rep->num_classes = g->num_classes;
    rep->homophily = tma_graph_homophily(g);
    rep->seconds = tma_clock_now() - t0;
    return TMA_OK;
}

static tma_status_t check_common(const tma_graph_build_opts_t *b, uint64_t seed, int32_t feat_dim)
{
    if (seed >= (uint64_t)TMA_GRAPH_MAX_SEED || b->seed >= (uint64_t)TMA_GRAPH_MAX_SEED) {
        tma_log_error(COMP, "--seed must be below 2^53");
        return TMA_ERR_INVALID;
    }
    if (feat_dim < 1 || feat_dim > (1 << 20)) {
        tma_log_error(COMP, "--feat-dim must be in [1, 2^20], got %d", feat_dim);
        return TMA_ERR_INVALID;
    }
    return TMA_OK;
}

/* ------------------------------------------------------------------ SBM */

typedef struct sbm_ctx {
    int64_t n;
    int32_t k;
    double h;
    const int32_t *label;
    int64_t *cstart; /* [k + 1]: class c's nodes are members[cstart[c] .. cstart[c + 1]) */
    int64_t *members;
    float *centroids; /* [k * F] */
    int32_t F;
    double noise;
    uint64_t seed;
    int32_t types; /* a typed SBM's node types T (0: untyped) */
} sbm_ctx_t;

static void sbm_edge(const void *ctx, tma_rng_t *rng, int64_t *u_p, int64_t *v_p)
{
    const sbm_ctx_t *c = ctx;
    int64_t u = (int64_t)tma_rng_below(rng, (uint64_t)c->n);
    int32_t cu = c->label[u], cv = cu;
    if (c->k > 1 && tma_rng_uniform(rng) >= c->h) {
        cv = (int32_t)tma_rng_below(rng, (uint64_t)c->k - 1);
        cv += cv >= cu;
    }
    int64_t size = c->cstart[cv + 1] - c->cstart[cv], v = u;
    /* Redraw a self-loop a few times; a class of one node keeps it (dropped later). */
    for (int tries = 0; v == u && tries < 8; tries++)
        v = c->members[c->cstart[cv] + (int64_t)tma_rng_below(rng, (uint64_t)size)];
    *u_p = u;
    *v_p = v;
}

/* A typed SBM's node v is of type v mod T; type t has max(1, F - t) real
 * feature columns, the rest zero. */
static inline int32_t sbm_type_width(int32_t F, int32_t t)
{
    return F - t > 1 ? F - t : 1;
}

/* The typed SBM's additions: each node's type and each type's width (its
 * rows were zeroed past it by sbm_rows), each edge a seeded uniform
 * relation (a hash of its index, so any thread count agrees). */
static tma_status_t sbm_types(const tma_gen_sbm_opts_t *o, const tma_gen_typed_opts_t *to, tma_graph_t *g,
                              tma_edge_list_t *el)
{
    const int64_t n = g->num_nodes;
    const int32_t T = to->node_types, R = to->relations, F = o->feat_dim;
    int32_t *type = tma_graph_alloc(g, (size_t)n * sizeof(int32_t));
    int32_t *width = tma_graph_alloc(g, (size_t)T * sizeof(int32_t));
    el->rels = malloc((size_t)(el->cap > 0 ? el->cap : 1) * sizeof *el->rels);
    if (!type || !width || !el->rels) {
        tma_log_error(COMP, "out of memory for a typed SBM");
        return TMA_ERR_NOMEM;
    }
    for (int32_t t = 0; t < T; t++)
        width[t] = sbm_type_width(F, t);
    for (int64_t v = 0; v < n; v++)
        type[v] = (int32_t)(v % T);
    for (int64_t i = 0; i < el->count; i++)
        el->rels[i] = (int32_t)(tma_hash64((o->seed ^ SALT_REL) + (uint64_t)i) % (uint64_t)R);
    g->num_node_types = T;
    g->num_relations = R;
    g->node_type = type;
    g->type_feat_dim = width;
    return TMA_OK;
}

tma_status_t tma_graph_gen_sbm(const tma_gen_sbm_opts_t *o, const tma_graph_build_opts_t *b, tma_graph_t **g_p,
                               tma_gen_report_t *rep_p)
{
    return tma_graph_gen_sbm_typed(o, NULL, b, g_p, rep_p);
}

static tma_status_t sbm_check(const tma_gen_sbm_opts_t *o, const tma_gen_typed_opts_t *to,
                              const tma_graph_build_opts_t *b)
{
    tma_status_t st = check_common(b, o->seed, o->feat_dim);
    if (st != TMA_OK)
        return st;
    if (o->classes < 1 || o->nodes < 2 || o->nodes < o->classes || o->nodes >= ((int64_t)1 << 40)) {
        tma_log_error(COMP, "--classes must be >= 1 and --nodes at least 2 and at least --classes (got %" PRId64
                      " nodes, %d classes)", o->nodes, o->classes);
        return TMA_ERR_INVALID;
    }
    if (!(o->homophily >= 0 && o->homophily <= 1) || (o->classes == 1 && o->homophily < 1)) {
        tma_log_error(COMP, "--homophily must be in [0, 1] (and 1 with a single class), got %g", o->homophily);
        return TMA_ERR_INVALID;
    }
    if (to && (to->node_types < 1 || to->node_types > TMA_GRAPH_MAX_NODE_TYPES || to->node_types > o->nodes ||
               to->relations < 1 || to->relations > TMA_GRAPH_MAX_RELATIONS)) {
        tma_log_error(COMP, "--node-types must be in [1, min(nodes, %d)] and --relations in [1, %d], got %d and %d",
                      TMA_GRAPH_MAX_NODE_TYPES, TMA_GRAPH_MAX_RELATIONS, to->node_types, to->relations);
        return TMA_ERR_INVALID;
    }
    if (!(o->avg_degree > 0) || o->avg_degree * (double)o->nodes / 2 > 4e12 || !(o->noise >= 0) ||
        !isfinite(o->noise)) {
        tma_log_error(COMP, "--avg-degree must be positive (and not absurd) and --noise >= 0");
        return TMA_ERR_INVALID;
    }
    return TMA_OK;
}

static void sbm_free(sbm_ctx_t *c)
{
    free(c->cstart);
    free(c->members);
    free(c->centroids);
}

/* Balanced classes (v mod k, shuffled) into label[], each class's members,
 * and the class centroids ~ N(0, I). */
static tma_status_t sbm_prepare(const tma_gen_sbm_opts_t *o, int32_t *label, sbm_ctx_t *c)
{
    const int64_t n = o->nodes;
    const int32_t k = o->classes, F = o->feat_dim;
    *c = (sbm_ctx_t){n, k, o->homophily, label, NULL, NULL, NULL, F, o->noise, o->seed, 0};
    c->cstart = calloc((size_t)k + 1, sizeof *c->cstart);
    c->members = malloc((size_t)n * sizeof *c->members);
    c->centroids = malloc((size_t)k * (size_t)F * sizeof(float));
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    if (!c->cstart || !c->members || !c->centroids || !perm) {
        tma_log_error(COMP, "out of memory for %" PRId64 " nodes", n);
        free(perm);
        sbm_free(c);
        return TMA_ERR_NOMEM;
    }
    tma_rng_t rng;
    tma_rng_seed(&rng, o->seed ^ SALT_LABELS, 0);
    for (int64_t v = 0; v < n; v++)
        perm[v] = v % k;
    tma_rng_shuffle_i64(&rng, perm, n);
    for (int64_t v = 0; v < n; v++) {
        label[v] = (int32_t)perm[v];
        c->cstart[label[v] + 1]++;
    }
    for (int32_t i = 0; i < k; i++)
        c->cstart[i + 1] += c->cstart[i];
    memcpy(perm, c->cstart, (size_t)k * sizeof *perm); /* perm reused as per-class cursors */
    for (int64_t v = 0; v < n; v++)
        c->members[perm[label[v]]++] = v;
    free(perm);
    tma_rng_seed(&rng, o->seed ^ SALT_CENTROID, 0);
    for (int64_t i = 0; i < (int64_t)k * F; i++)
        c->centroids[i] = (float)tma_rng_normal(&rng);
    return TMA_OK;
}

/* Feature rows [first, first + count): the class centroid plus noise * N(0, I)
 * (typed: zero past the row's type's width). */
static void sbm_rows(const void *ctx, int64_t first, int64_t count, float *out)
{
    const sbm_ctx_t *c = ctx;
    const int32_t F = c->F;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) {
        const int64_t v = first + i;
        tma_rng_t r;
        tma_rng_seed(&r, c->seed ^ SALT_NOISE, (uint64_t)v);
        const float *cen = c->centroids + (int64_t)c->label[v] * F;
        for (int32_t j = 0; j < F; j++)
            out[i * F + j] = cen[j] + (float)(c->noise * tma_rng_normal(&r));
        if (c->types > 0)
            for (int32_t j = sbm_type_width(F, (int32_t)(v % c->types)); j < F; j++)
                out[i * F + j] = 0.0f;
    }
}

/* The features of g's n rows, made by rows() and stored as t.  A 16-bit
 * table is made 4 MiB of float32 at a time and narrowed block by block, so
 * no float32 table of the whole graph is ever held: the same bytes as
 * narrowing the whole table (the rounding is element by element). */
static tma_status_t gen_features(tma_graph_t *g, int32_t F, tma_feat_dtype_t t,
                                 void (*rows)(const void *, int64_t, int64_t, float *), const void *ctx)
{
    const int64_t n = g->num_nodes;
    const size_t cells = (size_t)n * (size_t)F, esz = tma_feat_dtype_size(t);
    char *dst = tma_graph_alloc(g, cells ? cells * esz : 1);
    if (!dst)
        return TMA_ERR_NOMEM;
    g->features = (float *)dst;
    g->feature_dim = F;
    g->feat_dtype = t;
    if (t == TMA_FEAT_F32) {
        rows(ctx, 0, n, (float *)dst);
        return TMA_OK;
    }
    const int64_t blk = TMA_MAX((int64_t)1, TMA_MIN(n, ((int64_t)1 << 20) / TMA_MAX(F, 1)));
    float *tmp = malloc((size_t)blk * (size_t)TMA_MAX(F, 1) * sizeof(float));
    if (!tmp)
        return TMA_ERR_NOMEM;
    for (int64_t r0 = 0; r0 < n; r0 += blk) {
        const int64_t m = TMA_MIN(blk, n - r0);
        rows(ctx, r0, m, tmp);
        tma_feat_narrow(tmp, (size_t)m * (size_t)F, t, dst + (size_t)r0 * (size_t)F * esz);
    }
    free(tmp);
    return TMA_OK;
}

tma_status_t tma_graph_gen_sbm_typed(const tma_gen_sbm_opts_t *o, const tma_gen_typed_opts_t *to,
                                     const tma_graph_build_opts_t *b, tma_graph_t **g_p, tma_gen_report_t *rep_p)
{
    tma_gen_report_t rep;
    memset(&rep, 0, sizeof rep);
    double t0 = tma_clock_now();
    tma_status_t st = sbm_check(o, to, b);
    if (st != TMA_OK)
        return st;
    const int64_t n = o->nodes;
    tma_graph_t *g = NULL;
    tma_edge_list_t el = {0};
    sbm_ctx_t ctx = {0};
    if ((st = tma_graph_create(&g)) != TMA_OK)
        return st;
    g->num_nodes = n;
    int32_t *label = tma_graph_alloc(g, (size_t)n * sizeof(int32_t));
    if (!label) {
        st = TMA_ERR_NOMEM;
        goto done;
    }
    if ((st = sbm_prepare(o, label, &ctx)) != TMA_OK)
        goto done;
    ctx.types = to ? to->node_types : 0;
    g->labels = label;
    g->num_classes = o->classes;
    if ((st = gen_features(g, o->feat_dim, o->feat_dtype, sbm_rows, &ctx)) != TMA_OK)
        goto done;
    rep.features = TMA_FEAT_GENERATED;
    if ((st = draw_edges(&el, llround(o->avg_degree * (double)n / 2), o->seed, sbm_edge, &ctx)) != TMA_OK)
        goto done;
    if (to && (st = sbm_types(o, to, g, &el)) != TMA_OK)
        goto done;
    st = finish(g, &el, b, t0, &rep);
done:
    tma_edge_list_free(&el);
    sbm_free(&ctx);
    if (st != TMA_OK) {
        tma_graph_destroy(g);
        return st;
    }
    *g_p = g;
    if (rep_p)
        *rep_p = rep;
    return TMA_OK;
}

tma_status_t tma_graph_gen_sbm_file(const tma_gen_sbm_opts_t *o, const tma_graph_build_opts_t *b, uint64_t budget,
                                    const char *out, tma_gen_report_t *rep_p, uint64_t *graph_id_p)
{
    tma_gen_report_t rep;
    memset(&rep, 0, sizeof rep);
    double t0 = tma_clock_now();
    tma_status_t st = sbm_check(o, NULL, b);
    if (st != TMA_OK)
        return st;
    const int64_t n = o->nodes;
    /* The per-node arrays the source holds come out of the budget. */
    const uint64_t held = (uint64_t)n * (sizeof(int32_t) + sizeof(int64_t));
    int32_t *label = malloc((size_t)n * sizeof *label);
    sbm_ctx_t ctx = {0};
    if (!label) {
        tma_log_error(COMP, "out of memory for %" PRId64 " labels", n);
        return TMA_ERR_NOMEM;
    }
    if ((st = sbm_prepare(o, label, &ctx)) == TMA_OK) {
        gen_stream_t s = {sbm_edge, &ctx, o->seed, llround(o->avg_degree * (double)n / 2), 0, sbm_rows};
        graph_ooc_source_t src = {.num_nodes = n, .feature_dim = o->feat_dim, .num_classes = o->classes,
                                  .labels = label, .feat_dtype = o->feat_dtype};
        rep.features = TMA_FEAT_GENERATED;
        st = gen_ooc(&s, &src, b, budget > held ? budget - held : 0, out, t0, &rep, graph_id_p);
        sbm_free(&ctx);
    }
    free(label);
    if (st == TMA_OK && rep_p)
        *rep_p = rep;
    return st;
}

/* ------------------------------------------------------------------ R-MAT */

typedef struct rmat_ctx {
    int64_t n;
    int32_t scale;
} rmat_ctx_t;

/* Quadrant thresholds in 1/65536: a = 0.57, a + b = 0.76, a + b + c = 0.95. */
#define RMAT_A 37356u
#define RMAT_AB 49807u
#define RMAT_ABC 62259u

static void rmat_edge(const void *ctx, tma_rng_t *rng, int64_t *u_p, int64_t *v_p)
{
    const rmat_ctx_t *c = ctx;
    for (;;) {
        uint64_t u = 0, v = 0, bits = 0;
        for (int l = 0; l < c->scale; l++) {
            /* Four levels from each 64-bit draw, 16 bits of probability each. */
            if ((l & 3) == 0)
                bits = tma_rng_next(rng);
            uint32_t r = (uint32_t)(bits & 0xffff);
            bits >>= 16;
            u <<= 1;
            v <<= 1;
            if (r >= RMAT_ABC) {
                u |= 1;
                v |= 1;
            } else if (r >= RMAT_AB) {
                u |= 1;
            } else if (r >= RMAT_A) {
                v |= 1;
            }
        }
        if ((int64_t)u < c->n && (int64_t)v < c->n) {
            *u_p = (int64_t)u;
            *v_p = (int64_t)v;
            return;
        }
    }
}

typedef struct rmat_feat {
    rmat_ctx_t rmat;
    int32_t F;
    uint64_t seed;
} rmat_feat_t;

/* The checks of both paths; *c gets the node count, scale and feature seed. */
static tma_status_t rmat_check(const tma_gen_rmat_opts_t *o, const tma_graph_build_opts_t *b, rmat_feat_t *c)
{
    tma_status_t st = check_common(b, o->seed, o->feat_dim);
    if (st != TMA_OK)
        return st;
    int32_t scale = o->scale;
    int64_t n = o->nodes;
    if (scale < 0 || scale > 40 || n < 0 || n > ((int64_t)1 << 40) || (scale == 0 && n == 0)) {
        tma_log_error(COMP, "give --scale S in [1, 40] or --nodes N in [2, 2^40]");
        return TMA_ERR_INVALID;
    }
    if (scale == 0)
        while (((int64_t)1 << scale) < n)
            scale++;
    if (n == 0)
        n = (int64_t)1 << scale;
    if (n < 2 || n > ((int64_t)1 << scale)) {
        tma_log_error(COMP, "--nodes %" PRId64 " does not fit --scale %d (at most 2^%d nodes)", n, scale, scale);
        return TMA_ERR_INVALID;
    }
    if (o->edges < 1 || o->edges > ((int64_t)1 << 36)) {
        tma_log_error(COMP, "--edges must be in [1, 2^36], got %" PRId64, o->edges);
        return TMA_ERR_INVALID;
    }
    *c = (rmat_feat_t){{n, scale}, o->feat_dim, graph_feat_seed(o->seed)};
    return TMA_OK;
}

static void rmat_rows(const void *ctx, int64_t first, int64_t count, float *out)
{
    const rmat_feat_t *c = ctx;
    graph_feat_random_rows(out, first, count, c->F, c->seed);
}

tma_status_t tma_graph_gen_rmat(const tma_gen_rmat_opts_t *o, const tma_graph_build_opts_t *b, tma_graph_t **g_p,
                                tma_gen_report_t *rep_p)
{
    tma_gen_report_t rep;
    memset(&rep, 0, sizeof rep);
    double t0 = tma_clock_now();
    rmat_feat_t c;
    tma_status_t st = rmat_check(o, b, &c);
    if (st != TMA_OK)
        return st;
    const int64_t n = c.rmat.n;
    tma_graph_t *g = NULL;
    tma_edge_list_t el = {0};
    if ((st = tma_graph_create(&g)) != TMA_OK)
        return st;
    g->num_nodes = n;
    rep.features = TMA_FEAT_DEFAULT;
    if ((st = gen_features(g, o->feat_dim, o->feat_dtype, rmat_rows, &c)) != TMA_OK ||
        (st = draw_edges(&el, o->edges, o->seed, rmat_edge, &c.rmat)) != TMA_OK)
        goto done;
    st = finish(g, &el, b, t0, &rep);
done:
    tma_edge_list_free(&el);
    if (st != TMA_OK) {
        tma_graph_destroy(g);
        return st;
    }
    *g_p = g;
    if (rep_p)
        *rep_p = rep;
    return TMA_OK;
}

tma_status_t tma_graph_gen_rmat_file(const tma_gen_rmat_opts_t *o, const tma_graph_build_opts_t *b,
                                     uint64_t budget, const char *out, tma_gen_report_t *rep_p, uint64_t *graph_id_p)
{
    tma_gen_report_t rep;
    memset(&rep, 0, sizeof rep);
    double t0 = tma_clock_now();
    rmat_feat_t c;
    tma_status_t st = rmat_check(o, b, &c);
    if (st != TMA_OK)
        return st;
    /* draw reads the R-MAT context, rows the whole of c. */
    gen_stream_t s = {rmat_edge, &c, o->seed, o->edges, 0, rmat_rows};
    graph_ooc_source_t src = {.num_nodes = c.rmat.n, .feature_dim = o->feat_dim, .feat_dtype = o->feat_dtype};
    rep.features = TMA_FEAT_DEFAULT;
    st = gen_ooc(&s, &src, b, budget, out, t0, &rep, graph_id_p);
    if (st == TMA_OK && rep_p)
        *rep_p = rep;
    return st;
}

uint64_t tma_graph_gen_peak_bytes(int64_t nodes, int64_t edges, int32_t feat_dim, int sbm)
{
    /* Features, the drawn pairs and the adjacency beside them (two entries
     * an edge), indptr and the scatter cursors; the SBM's labels, members
     * and shuffle. */
    double b = (double)nodes * feat_dim * 4 + (double)edges * 32 + (double)nodes * 16;
    if (sbm)
        b += (double)nodes * 20;
    return b > 1.8e19 ? UINT64_MAX : (uint64_t)b;
}
