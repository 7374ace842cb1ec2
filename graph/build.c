/*
 * build.c: the graph builder every importer and generator goes through.
 *
 * From an undirected edge list it builds the full adjacency as CSR (degree
 * count, scatter of both directions, then each row sorted and deduplicated,
 * which drops duplicate edges without a global sort), draws the seeded
 * validation/test split, draws each evaluation edge's fixed negatives
 * against the full graph, and finally removes the evaluation edges so that
 * the same arrays become the training CSR.  Peak memory is the input pairs
 * plus one adjacency array (16 bytes an undirected edge each).
 *
 * Determinism whatever the thread count: the scatter's order is undone by
 * the row sort, the split comes from one sequential stream, and each
 * evaluation edge's negatives from a stream of its own.
 */
#include "graph_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COMP "graph"

/* Stream salts, so the split and the negatives never share random numbers
 * with each other or with a generator seeded the same way. */
#define SALT_NEG 0x4e6e6761746976ull

/* ------------------------------------------------------------------ edge lists */

tma_status_t tma_edge_list_reserve(tma_edge_list_t *el, int64_t cap)
{
    if (cap <= el->cap)
        return TMA_OK;
    size_t bytes;
    if (cap < 0 || tma_mul_overflow((size_t)cap, 2 * sizeof(int64_t), &bytes)) {
        tma_log_error(COMP, "edge list of %" PRId64 " edges is too large", cap);
        return TMA_ERR_NOMEM;
    }
    int64_t *p = realloc(el->pairs, bytes);
    if (!p) {
        tma_log_error(COMP, "out of memory growing an edge list to %" PRId64 " edges", cap);
        return TMA_ERR_NOMEM;
    }
    el->pairs = p;
    if (el->rels) {
        int32_t *r = realloc(el->rels, (size_t)cap * sizeof *r);
        if (!r) {
            tma_log_error(COMP, "out of memory growing an edge list to %" PRId64 " edges", cap);
            return TMA_ERR_NOMEM;
        }
        el->rels = r;
    }
    el->cap = cap;
    return TMA_OK;
}

tma_status_t tma_edge_list_push_rel(tma_edge_list_t *el, int64_t u, int64_t v, int32_t r)
{
    if (!el->rels) {
        /* The first typed edge: the list becomes typed, with room for its capacity. */
        el->rels = malloc((size_t)(el->cap > 0 ? el->cap : 1) * sizeof *el->rels);
        if (!el->rels) {
            tma_log_error(COMP, "out of memory for an edge list's relations");
            return TMA_ERR_NOMEM;
        }
    }
    tma_status_t st = tma_edge_list_push(el, u, v);
    if (st != TMA_OK)
        return st;
    el->rels[el->count - 1] = r;
    return TMA_OK;
}

void tma_edge_list_free(tma_edge_list_t *el)
{
    free(el->rels);
    free(el->pairs);
    memset(el, 0, sizeof *el);
}

void tma_graph_build_opts_init(tma_graph_build_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->val = -1;
    o->test = -1;
    o->negatives = TMA_GRAPH_DEFAULT_NEGATIVES;
}

/* ------------------------------------------------------------------ sorting */

static void insertion_sort(int64_t *a, int64_t n)
{
    for (int64_t i = 1; i < n; i++) {
        int64_t x = a[i], j = i;
        while (j > 0 && a[j - 1] > x) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

static void sift_down(int64_t *a, int64_t root, int64_t n)
{
    for (;;) {
        int64_t c = 2 * root + 1;
        if (c >= n)
            return;
        if (c + 1 < n && a[c + 1] > a[c])
            c++;
        if (a[root] >= a[c])
            return;
        int64_t t = a[root];
        a[root] = a[c];
        a[c] = t;
        root = c;
    }
}

static void heap_sort(int64_t *a, int64_t n)
{
    for (int64_t i = n / 2 - 1; i >= 0; i--)
        sift_down(a, i, n);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t t = a[0];
        a[0] = a[i];
        a[i] = t;
        sift_down(a, 0, i);
    }
}

static void intro_sort(int64_t *a, int64_t n, int depth)
{
    while (n > 24) {
        if (depth-- == 0) {
            heap_sort(a, n);
            return;
        }
        /* Median of three as the pivot; Hoare partition. */
        int64_t x = a[0], y = a[n / 2], z = a[n - 1];
        int64_t p = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        int64_t i = -1, j = n;
        for (;;) {
            do
                i++;
            while (a[i] < p);
            do
                j--;
            while (a[j] > p);
            if (i >= j)
                break;
            int64_t t = a[i];
            a[i] = a[j];
            a[j] = t;
        }
        /* Recurse into the smaller side, loop on the larger. */
        if (j + 1 < n - j - 1) {
            intro_sort(a, j + 1, depth);
            a += j + 1;
            n -= j + 1;
        } else {
            intro_sort(a + j + 1, n - j - 1, depth);
            n = j + 1;
        }
    }
    insertion_sort(a, n);
}

void graph_sort_i64(int64_t *a, int64_t n)
{
    int depth = 2;
    for (int64_t k = n; k > 1; k >>= 1)
        depth += 2;
    intro_sort(a, n, depth);
}

/* ------------------------------------------------------------------ adjacency */

/* Both builders' last step: the counts of the cleaning and the arrays in g
 * (indptr[n] entries were kept of `entries` scattered). */
/* Sorts each CSR row and drops repeated keys (keys equal once shifted right
 * by `shift`: the neighbour, whatever the packed low bits); cursor[v] becomes
 * row v's new length. */
static void sort_dedup_rows(const int64_t *indptr, int64_t *indices, int64_t n, int shift, int64_t *cursor)
{
#pragma omp parallel for schedule(dynamic, 1024)
    for (int64_t v = 0; v < n; v++) {
        int64_t *row = indices + indptr[v];
        int64_t d = indptr[v + 1] - indptr[v], k = 0;
        graph_sort_i64(row, d);
        for (int64_t e = 0; e < d; e++)
            if (k == 0 || (row[e] >> shift) != (row[k - 1] >> shift))
                row[k++] = row[e];
        cursor[v] = k;
    }
}

static void adjacency_done(tma_graph_t *g, tma_graph_build_report_t *rep, int64_t m_in, int64_t loops,
                           int64_t entries, int64_t *indptr, int64_t *indices)
{
    const int64_t out = indptr[g->num_nodes];
    rep->input_edges = m_in;
    rep->self_loops = loops;
    rep->duplicates = (entries - out) / 2;
    rep->edges = out / 2;
    g->indptr = indptr;
    g->indices = indices;
}

/* Builds the cleaned full adjacency into g->indptr / g->indices (owned by
 * g) and frees the pairs as soon as they are scattered. */
static tma_status_t build_adjacency(tma_graph_t *g, tma_edge_list_t *el, tma_graph_build_report_t *rep)
{
    const int64_t n = g->num_nodes, m_in = el->count;
    const int64_t *pairs = el->pairs;
    int64_t *indptr = tma_graph_alloc(g, ((size_t)n + 1) * sizeof(int64_t));
    if (!indptr)
        return TMA_ERR_NOMEM;
    memset(indptr, 0, ((size_t)n + 1) * sizeof(int64_t));

    /* Degrees (into indptr[v + 1]), self-loops and the first bad edge. */
    int64_t loops = 0, bad = INT64_MAX;
#pragma omp parallel for schedule(static) reduction(+ : loops) reduction(min : bad)
    for (int64_t i = 0; i < m_in; i++) {
        int64_t u = pairs[2 * i], v = pairs[2 * i + 1];
        if (u < 0 || u >= n || v < 0 || v >= n) {
            bad = i < bad ? i : bad;
        } else if (u == v) {
            loops++;
        } else {
            __atomic_fetch_add(&indptr[u + 1], 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&indptr[v + 1], 1, __ATOMIC_RELAXED);
        }
    }
    if (bad != INT64_MAX) {
        tma_log_error(COMP, "edge %" PRId64 " (%" PRId64 ", %" PRId64 ") names a node outside [0, %" PRId64 ")",
                      bad, pairs[2 * bad], pairs[2 * bad + 1], n);
        return TMA_ERR_RANGE;
    }
    for (int64_t v = 0; v < n; v++)
        indptr[v + 1] += indptr[v];
    const int64_t entries = indptr[n];

    int64_t *indices = tma_graph_alloc(g, (size_t)(entries ? entries : 1) * sizeof(int64_t));
    int64_t *cursor = malloc(((size_t)n + 1) * sizeof(int64_t));
    if (!indices || !cursor) {
        free(cursor);
        if (!cursor)
            tma_log_error(COMP, "out of memory (%" PRId64 " nodes)", n);
        return TMA_ERR_NOMEM;
    }
    memcpy(cursor, indptr, ((size_t)n + 1) * sizeof(int64_t));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m_in; i++) {
        int64_t u = pairs[2 * i], v = pairs[2 * i + 1];
        if (u == v)
            continue;
        indices[__atomic_fetch_add(&cursor[u], 1, __ATOMIC_RELAXED)] = v;
        indices[__atomic_fetch_add(&cursor[v], 1, __ATOMIC_RELAXED)] = u;
    }
    tma_edge_list_free(el);

    /* Sort and deduplicate each row; cursor[v] becomes the row's new length. */
    sort_dedup_rows(indptr, indices, n, 0, cursor);
    /* Compact the rows left (in order: a row only ever moves down). */
    int64_t out = 0;
    for (int64_t v = 0; v < n; v++) {
        int64_t a = indptr[v], k = cursor[v];
        if (out != a)
            memmove(indices + out, indices + a, (size_t)k * sizeof(int64_t));
        indptr[v] = out;
        out += k;
    }
    indptr[n] = out;
    free(cursor);
    adjacency_done(g, rep, m_in, loops, entries, indptr, indices);
    return TMA_OK;
}

/* The typed adjacency: as build_adjacency, but each entry is scattered as
 * the key (neighbour << REL_BITS | c), c the pair's relation id seen from
 * its lower end (r for u -> v with u < v, else r + R), the same in both
 * rows; sorting a row then keeps, for a pair given twice, the one with the
 * smallest c in both rows, so the rows stay each other's inverse.  The id
 * stored in a row is c from the lower end and inverse(c) from the upper.
 * Sequential: typed graphs here are small (MovieLens, tests). */
#define REL_BITS 21
static tma_status_t build_adjacency_typed(tma_graph_t *g, tma_edge_list_t *el, tma_graph_build_report_t *rep)
{
    const int64_t n = g->num_nodes, m_in = el->count;
    const int32_t R = g->num_relations;
    if (R < 1 || R > TMA_GRAPH_MAX_RELATIONS || n >= ((int64_t)1 << (62 - REL_BITS))) {
        tma_log_error(COMP, "a typed graph needs 1 to %d relations and fewer than 2^%d nodes", TMA_GRAPH_MAX_RELATIONS,
                      62 - REL_BITS);
        return TMA_ERR_INVALID;
    }
    const int64_t *pairs = el->pairs;
    const int32_t *rels = el->rels;
    int64_t *indptr = tma_graph_alloc(g, ((size_t)n + 1) * sizeof(int64_t));
    if (!indptr)
        return TMA_ERR_NOMEM;
    memset(indptr, 0, ((size_t)n + 1) * sizeof(int64_t));
    int64_t loops = 0;
    for (int64_t i = 0; i < m_in; i++) {
        int64_t u = pairs[2 * i], v = pairs[2 * i + 1];
        if (u < 0 || u >= n || v < 0 || v >= n) {
            tma_log_error(COMP, "edge %" PRId64 " (%" PRId64 ", %" PRId64 ") names a node outside [0, %" PRId64 ")",
                          i, u, v, n);
            return TMA_ERR_RANGE;
        }
        if (rels[i] < 0 || rels[i] >= R) {
            tma_log_error(COMP, "edge %" PRId64 " (%" PRId64 ", %" PRId64 ") has relation %d, outside [0, %d)", i,
                          u, v, rels[i], R);
            return TMA_ERR_RANGE;
        }
        if (u == v) {
            loops++;
        } else {
            indptr[u + 1]++;
            indptr[v + 1]++;
        }
    }
    for (int64_t v = 0; v < n; v++)
        indptr[v + 1] += indptr[v];
    const int64_t entries = indptr[n];
    int64_t *indices = tma_graph_alloc(g, (size_t)(entries ? entries : 1) * sizeof(int64_t));
    int32_t *erel = tma_graph_alloc(g, (size_t)(entries ? entries : 1) * sizeof(int32_t));
    int64_t *cursor = malloc(((size_t)n + 1) * sizeof(int64_t));
    if (!indices || !erel || !cursor) {
        free(cursor);
        if (!cursor)
            tma_log_error(COMP, "out of memory (%" PRId64 " nodes)", n);
        return TMA_ERR_NOMEM;
    }
    memcpy(cursor, indptr, ((size_t)n + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < m_in; i++) {
        int64_t u = pairs[2 * i], v = pairs[2 * i + 1];
        if (u == v)
            continue;
        int64_t c = u < v ? rels[i] : rels[i] + R;
        indices[cursor[u]++] = v << REL_BITS | c;
        indices[cursor[v]++] = u << REL_BITS | c;
    }
    tma_edge_list_free(el);
    sort_dedup_rows(indptr, indices, n, REL_BITS, cursor);
    int64_t out = 0;
    for (int64_t v = 0; v < n; v++) {
        int64_t a = indptr[v], k = cursor[v];
        indptr[v] = out;
        for (int64_t e = 0; e < k; e++) {
            int64_t key = indices[a + e], w = key >> REL_BITS;
            int32_t c = (int32_t)(key & (((int64_t)1 << REL_BITS) - 1));
            indices[out + e] = w;
            erel[out + e] = v < w ? c : (c < R ? c + R : c - R);
        }
        out += k;
    }
    indptr[n] = out;
    free(cursor);
    adjacency_done(g, rep, m_in, loops, entries, indptr, indices);
    g->edge_rel = erel;
    return TMA_OK;
}

/* ------------------------------------------------------------------ split */

/* Resolves a --val/--test value against m cleaned edges. */
static tma_status_t eval_count(double x, int64_t m, const char *name, int64_t *n_p)
{
    int64_t k;
    if (x < 0) {
        k = (int64_t)llround(TMA_GRAPH_DEFAULT_EVAL_FRACTION * (double)m);
        if (k > TMA_GRAPH_DEFAULT_EVAL_MAX)
            k = TMA_GRAPH_DEFAULT_EVAL_MAX;
    } else if (x < 1) {
        k = (int64_t)llround(x * (double)m);
    } else {
        if (x != floor(x) || x > 9e18) {
            tma_log_error(COMP, "%s edges: %g is neither a fraction below 1 nor a whole count", name, x);
            return TMA_ERR_INVALID;
        }
        k = (int64_t)x;
    }
    *n_p = k;
    return TMA_OK;
}

tma_status_t graph_split_counts(const tma_graph_build_opts_t *o, int64_t m, int64_t *nv_p, int64_t *nt_p)
{
    tma_status_t st;
    if ((st = eval_count(o->val, m, "validation", nv_p)) != TMA_OK ||
        (st = eval_count(o->test, m, "test", nt_p)) != TMA_OK)
        return st;
    if (*nv_p + *nt_p >= m) {
        tma_log_error(COMP,
                      "%" PRId64 " validation + %" PRId64 " test edges leave no training edge of the %" PRId64
                      " edges; ask for fewer (--val, --test)",
                      *nv_p, *nt_p, m);
        return TMA_ERR_INVALID;
    }
    return TMA_OK;
}

/* A set of int64 keys >= 0 (open addressing), for Floyd's sampling. */
typedef struct i64_set {
    int64_t *slot;
    uint64_t mask;
} i64_set_t;

static int set_insert(i64_set_t *s, int64_t key)
{
    uint64_t h = tma_hash64((uint64_t)key) & s->mask;
    while (s->slot[h] != -1) {
        if (s->slot[h] == key)
            return 0;
        h = (h + 1) & s->mask;
    }
    s->slot[h] = key;
    return 1;
}

/* k distinct ranks in [0, m), in random order (Floyd's algorithm, then a
 * shuffle), from one sequential stream. */
tma_status_t graph_sample_ranks(int64_t m, int64_t k, tma_rng_t *rng, int64_t *out)
{
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)k)
        cap <<= 1;
    i64_set_t s = {malloc(cap * sizeof(int64_t)), cap - 1};
    if (!s.slot) {
        tma_log_error(COMP, "out of memory sampling %" PRId64 " evaluation edges", k);
        return TMA_ERR_NOMEM;
    }
    memset(s.slot, 0xff, cap * sizeof(int64_t));
    int64_t n = 0;
    for (int64_t j = m - k; j < m; j++) {
        int64_t t = (int64_t)tma_rng_below(rng, (uint64_t)j + 1);
        out[n++] = set_insert(&s, t) ? t : (set_insert(&s, j), j);
    }
    free(s.slot);
    tma_rng_shuffle_i64(rng, out, k);
    return TMA_OK;
}

/* Index of the first entry > v in v's sorted row. */
int64_t graph_upper_start(const tma_graph_t *g, int64_t v)
{
    int64_t lo = g->indptr[v], hi = g->indptr[v + 1];
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (g->indices[mid] > v)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Draws the evaluation edges: rank r counts the undirected edges (u < v) in
 * row-major order; each chosen edge gets a random orientation. */
static tma_status_t draw_split(tma_graph_t *g, int64_t nv, int64_t nt, uint64_t seed, int64_t *eval, int32_t *erel)
{
    const int64_t n = g->num_nodes, k = nv + nt;
    int64_t *upre = malloc(((size_t)n + 1) * sizeof(int64_t));
    int64_t *ranks = malloc((size_t)(k ? k : 1) * sizeof(int64_t));
    tma_status_t st = TMA_OK;
    if (!upre || !ranks) {
        tma_log_error(COMP, "out of memory drawing the split");
        st = TMA_ERR_NOMEM;
        goto done;
    }
    upre[0] = 0;
#pragma omp parallel for schedule(dynamic, 4096)
    for (int64_t v = 0; v < n; v++)
        upre[v + 1] = g->indptr[v + 1] - graph_upper_start(g, v);
    for (int64_t v = 0; v < n; v++)
        upre[v + 1] += upre[v];

    tma_rng_t rng;
    tma_rng_seed(&rng, seed ^ GRAPH_SALT_SPLIT, 0);
    st = graph_sample_ranks(upre[n], k, &rng, ranks);
    if (st != TMA_OK)
        goto done;
    for (int64_t i = 0; i < k; i++) {
        int64_t r = ranks[i];
        /* The node whose upper run holds rank r: last v with upre[v] <= r. */
        int64_t lo = 0, hi = n;
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            if (upre[mid] <= r)
                lo = mid;
            else
                hi = mid;
        }
        int64_t u = lo, pos = graph_upper_start(g, u) + (r - upre[u]), v = g->indices[pos];
        int flip = (int)(tma_rng_next(&rng) & 1);
        if (erel) {
            /* Typed: the edge in its forward direction, with its forward id. */
            int32_t c = g->edge_rel[pos];
            flip = c >= g->num_relations;
            erel[i] = flip ? c - g->num_relations : c;
        }
        if (flip) {
            int64_t t = u;
            u = v;
            v = t;
        }
        eval[2 * i] = u;
        eval[2 * i + 1] = v;
    }
done:
    free(ranks);
    free(upre);
    return st;
}

/* ------------------------------------------------------------------ negatives */

/* K tails for head u: uniform over the nodes that are neither u nor a
 * neighbour of u in the full graph (g's CSR before the split is removed). */
static int draw_negatives(const tma_graph_t *g, int64_t u, int32_t k, tma_rng_t *rng, int64_t *out)
{
    const int64_t n = g->num_nodes;
    const int64_t *row = g->indices + g->indptr[u];
    const int64_t deg = g->indptr[u + 1] - g->indptr[u];
    const int64_t cand = n - 1 - deg;
    if (cand <= 0)
        return -1;
    if (cand * 4 >= n) {
        /* Rejection: at least a quarter of the draws are accepted. */
        for (int32_t j = 0; j < k;) {
            int64_t t = (int64_t)tma_rng_below(rng, (uint64_t)n);
            if (t != u && !tma_graph_has_edge(g, u, t))
                out[j++] = t;
        }
        return 0;
    }
    /* A head adjacent to most of the graph: pick the r-th non-neighbour by
     * walking the sorted row (rare; only tiny or dense graphs get here). */
    for (int32_t j = 0; j < k; j++) {
        /* Merge-walk the excluded set (the sorted row and u): every excluded
         * id at or below the candidate pushes it up by one. */
        int64_t t = (int64_t)tma_rng_below(rng, (uint64_t)cand), e = 0;
        int self = 0;
        for (;;) {
            int64_t x;
            if (!self && (e >= deg || u < row[e]))
                x = u;
            else if (e < deg)
                x = row[e];
            else
                break;
            if (x > t)
                break;
            t++;
            if (x == u && !self)
                self = 1;
            else
                e++;
        }
        out[j] = t;
    }
    return 0;
}

/* Typed: K tails for head u of node type t: uniform over the nodes of type
 * t (members[0..size), ascending) that are neither u nor a neighbour of u
 * in the full graph.  -1 when none qualifies, -2 out of memory. */
static int draw_negatives_typed(const tma_graph_t *g, int64_t u, const int64_t *members, int64_t size, int32_t k,
                                tma_rng_t *rng, int64_t *out)
{
    const int64_t *row = g->indices + g->indptr[u];
    const int64_t deg = g->indptr[u + 1] - g->indptr[u];
    const int32_t t = size > 0 ? g->node_type[members[0]] : -1;
    int64_t excluded = g->node_type[u] == t;
    for (int64_t e = 0; e < deg; e++)
        excluded += g->node_type[row[e]] == t;
    const int64_t cand = size - excluded;
    if (cand <= 0)
        return -1;
    if (cand * 4 >= size) {
        for (int32_t j = 0; j < k;) {
            int64_t x = members[tma_rng_below(rng, (uint64_t)size)];
            if (x != u && !tma_graph_has_edge(g, u, x))
                out[j++] = x;
        }
        return 0;
    }
    /* Few qualify: list them (both lists are sorted) and pick among them. */
    int64_t *list = malloc((size_t)cand * sizeof *list), c = 0, e = 0;
    if (!list)
        return -2;
    for (int64_t i = 0; i < size; i++) {
        int64_t x = members[i];
        while (e < deg && row[e] < x)
            e++;
        if (x != u && !(e < deg && row[e] == x))
            list[c++] = x;
    }
    for (int32_t j = 0; j < k; j++)
        out[j] = list[tma_rng_below(rng, (uint64_t)c)];
    free(list);
    return 0;
}

/* ------------------------------------------------------------------ removal */

static int64_t row_find(const tma_graph_t *g, int64_t u, int64_t v)
{
    int64_t lo = g->indptr[u], hi = g->indptr[u + 1];
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (g->indices[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Drops the evaluation edges from the CSR in place: mark both directions,
 * then compact (rows only move down). */
static tma_status_t remove_edges(tma_graph_t *g, const int64_t *eval, int64_t k)
{
    int64_t *indptr = (int64_t *)g->indptr, *indices = (int64_t *)g->indices;
    if (k == 0)
        return TMA_OK;
    /* Find every position before marking any: a marked row is no longer
     * sorted, so binary search must not see it. */
    int64_t *pos = malloc((size_t)k * 2 * sizeof *pos);
    if (!pos) {
        tma_log_error(COMP, "out of memory removing the evaluation edges");
        return TMA_ERR_NOMEM;
    }
    for (int64_t i = 0; i < k; i++) {
        int64_t u = eval[2 * i], v = eval[2 * i + 1];
        pos[2 * i] = row_find(g, u, v);
        pos[2 * i + 1] = row_find(g, v, u);
    }
    for (int64_t i = 0; i < 2 * k; i++)
        indices[pos[i]] = -1;
    free(pos);
    const int64_t n = g->num_nodes;
    int64_t out = 0;
    int32_t *erel = (int32_t *)g->edge_rel;
    for (int64_t v = 0; v < n; v++) {
        int64_t a = indptr[v], b = indptr[v + 1];
        indptr[v] = out;
        for (int64_t e = a; e < b; e++) {
            if (indices[e] >= 0) {
                if (erel)
                    erel[out] = erel[e];
                indices[out++] = indices[e];
            }
        }
    }
    indptr[n] = out;
    return TMA_OK;
}

/* ------------------------------------------------------------------ the builder */

/* The K fixed negative tails of each of the n evaluation edges (untyped):
 * nodes that are neither the head nor a neighbour of it. */
tma_status_t graph_draw_all_negatives(const tma_graph_t *g, const int64_t *eval, int64_t n, int32_t K,
                                       uint64_t seed, int64_t *neg)
{
    int64_t bad = -1;
#pragma omp parallel for schedule(dynamic, 8) reduction(max : bad)
    for (int64_t i = 0; i < n; i++) {
        tma_rng_t rng;
        tma_rng_seed(&rng, seed ^ SALT_NEG, (uint64_t)i);
        if (draw_negatives(g, eval[2 * i], K, &rng, neg + i * K) != 0)
            bad = i > bad ? i : bad;
    }
    if (bad >= 0 && K > 0) {
        tma_log_error(COMP, "node %" PRId64 " is adjacent to every other node: no negative tail exists for it",
                      eval[2 * bad]);
        return TMA_ERR_INVALID;
    }
    return TMA_OK;
}

/* The same on a typed graph: tails of the positive tail's node type only. */
static tma_status_t draw_all_negatives_typed(const tma_graph_t *g, const int64_t *eval, int64_t n, int32_t K,
                                             uint64_t seed, int64_t *neg)
{
    /* Each type's nodes, ascending, for drawing tails of the tail's type. */
    const int32_t T = g->num_node_types;
    int64_t *tstart = calloc((size_t)T + 1, sizeof *tstart), *members = malloc((size_t)g->num_nodes * sizeof *members);
    int64_t *cur = malloc(((size_t)T + 1) * sizeof *cur);
    tma_status_t st = TMA_OK;
    if (!tstart || !members || !cur) {
        tma_log_error(COMP, "out of memory grouping %" PRId64 " nodes by type", g->num_nodes);
        st = TMA_ERR_NOMEM;
        goto out;
    }
    for (int64_t v = 0; v < g->num_nodes; v++) {
        if (g->node_type[v] < 0 || g->node_type[v] >= T) {
            tma_log_error(COMP, "node %" PRId64 " has type %d, outside [0, %d)", v, g->node_type[v], T);
            st = TMA_ERR_RANGE;
            goto out;
        }
        tstart[g->node_type[v] + 1]++;
    }
    for (int32_t t = 0; t < T; t++)
        tstart[t + 1] += tstart[t];
    memcpy(cur, tstart, ((size_t)T + 1) * sizeof *cur);
    for (int64_t v = 0; v < g->num_nodes; v++)
        members[cur[g->node_type[v]]++] = v;
    int64_t bad = -1;
    int oom = 0;
#pragma omp parallel for schedule(dynamic, 8) reduction(max : bad) reduction(| : oom)
    for (int64_t i = 0; i < n; i++) {
        tma_rng_t rng;
        tma_rng_seed(&rng, seed ^ SALT_NEG, (uint64_t)i);
        int32_t t = g->node_type[eval[2 * i + 1]];
        int rc = draw_negatives_typed(g, eval[2 * i], members + tstart[t], tstart[t + 1] - tstart[t], K, &rng,
                                      neg + i * K);
        if (rc == -1)
            bad = i > bad ? i : bad;
        oom |= rc == -2;
    }
    if (oom) {
        tma_log_error(COMP, "out of memory drawing typed negatives");
        st = TMA_ERR_NOMEM;
    } else if (bad >= 0 && K > 0) {
        tma_log_error(COMP, "node %" PRId64 " is adjacent to every node of type %d: no negative tail exists for it",
                      eval[2 * bad], g->node_type[eval[2 * bad + 1]]);
        st = TMA_ERR_INVALID;
    }
out:
    free(tstart);
    free(members);
    free(cur);
    return st;
}

tma_status_t tma_graph_build(tma_graph_t *g, tma_edge_list_t *el, const tma_graph_build_opts_t *o,
                             tma_graph_build_report_t *rep_p)
{
    tma_graph_build_report_t rep;
    memset(&rep, 0, sizeof rep);
    tma_status_t st;
    double t0 = tma_clock_now();
    if (g->num_nodes <= 0) {
        tma_log_error(COMP, "a graph needs at least one node");
        tma_edge_list_free(el);
        return TMA_ERR_INVALID;
    }
    if (o->negatives < 0 || o->negatives > (1 << 20) || o->seed >= (uint64_t)TMA_GRAPH_MAX_SEED) {
        tma_log_error(COMP, "negatives must be in [0, 2^20] and the seed below 2^53");
        tma_edge_list_free(el);
        return TMA_ERR_INVALID;
    }
    const int typed = el->rels != NULL;
    if (typed && (!g->node_type || !g->type_feat_dim || g->num_node_types < 1)) {
        tma_log_error(COMP, "a typed edge list needs the graph's node types and per-type feature widths");
        tma_edge_list_free(el);
        return TMA_ERR_INVALID;
    }
    st = typed ? build_adjacency_typed(g, el, &rep) : build_adjacency(g, el, &rep);
    tma_edge_list_free(el);
    if (st != TMA_OK)
        return st;
    const int64_t m = rep.edges;
    double t1 = tma_clock_now();
    rep.seconds_adjacency = t1 - t0;
    if (m == 0) {
        tma_log_error(COMP, "no edges left after dropping %" PRId64 " self-loops and %" PRId64 " duplicates",
                      rep.self_loops, rep.duplicates);
        return TMA_ERR_INVALID;
    }

    int64_t nv, nt;
    if ((st = graph_split_counts(o, m, &nv, &nt)) != TMA_OK)
        return st;
    const int32_t K = o->negatives;
    int64_t *eval = tma_graph_alloc(g, (size_t)(nv + nt > 0 ? nv + nt : 1) * 2 * sizeof(int64_t));
    int64_t *neg = tma_graph_alloc(g, (size_t)((nv + nt) * K > 0 ? (nv + nt) * K : 1) * sizeof(int64_t));
    int32_t *erel = typed ? tma_graph_alloc(g, (size_t)(nv + nt > 0 ? nv + nt : 1) * sizeof(int32_t)) : NULL;
    if (!eval || !neg || (typed && !erel))
        return TMA_ERR_NOMEM;
    st = draw_split(g, nv, nt, o->seed, eval, erel);
    if (st != TMA_OK)
        return st;
    double t2 = tma_clock_now();

    st = typed ? draw_all_negatives_typed(g, eval, nv + nt, K, o->seed, neg)
               : graph_draw_all_negatives(g, eval, nv + nt, K, o->seed, neg);
    if (st != TMA_OK)
        return st;
    double t3 = tma_clock_now();

    if ((st = remove_edges(g, eval, nv + nt)) != TMA_OK)
        return st;
    g->kind = TMA_GRAPH_FULL;
    g->num_edges = m;
    g->num_train_edges = m - nv - nt;
    g->num_val = nv;
    g->num_test = nt;
    g->val_edges = eval;
    g->test_edges = eval + 2 * nv;
    g->num_negatives = K;
    g->val_neg = neg;
    g->test_neg = neg + nv * K;
    g->split_seed = o->seed;
    if (typed) {
        g->val_rel = erel;
        g->test_rel = erel + nv;
    }

    rep.train_edges = g->num_train_edges;
    rep.val_edges = nv;
    rep.test_edges = nt;
    rep.negatives = K;
    rep.seconds_split = t2 - t1 + (tma_clock_now() - t3);
    rep.seconds_negatives = t3 - t2;
    if (rep_p)
        *rep_p = rep;
    return TMA_OK;
}

/* ------------------------------------------------------------------ a given split */

tma_status_t tma_graph_build_given(tma_graph_t *g, tma_edge_list_t *el, const tma_graph_given_split_t *sp,
                                   uint64_t seed, const char *what, tma_graph_build_report_t *rep_p)
{
    tma_graph_build_report_t rep;
    memset(&rep, 0, sizeof rep);
    double t0 = tma_clock_now();
    if (g->num_nodes <= 0 || sp->num_val < 0 || sp->num_test < 0 || sp->negatives < 0 ||
        sp->negatives > (1 << 20)) {
        tma_log_error(COMP, "%s: a given split needs nodes, edge counts >= 0 and 0 to 2^20 negatives", what);
        tma_edge_list_free(el);
        return TMA_ERR_INVALID;
    }
    tma_status_t st = build_adjacency(g, el, &rep);
    tma_edge_list_free(el);
    if (st != TMA_OK)
        return st;
    double t1 = tma_clock_now();
    const int64_t nv = sp->num_val, nt = sp->num_test, K = sp->negatives;
    /* One block each for the edges and the negatives, laid out as the builder's. */
    int64_t *eval = tma_graph_alloc(g, (size_t)(nv + nt > 0 ? nv + nt : 1) * 2 * sizeof(int64_t));
    int64_t *neg = tma_graph_alloc(g, (size_t)((nv + nt) * K > 0 ? (nv + nt) * K : 1) * sizeof(int64_t));
    if (!eval || !neg)
        return TMA_ERR_NOMEM;
    memcpy(eval, sp->val_edges, (size_t)nv * 2 * sizeof(int64_t));
    memcpy(eval + 2 * nv, sp->test_edges, (size_t)nt * 2 * sizeof(int64_t));
    memcpy(neg, sp->val_neg, (size_t)(nv * K) * sizeof(int64_t));
    memcpy(neg + nv * K, sp->test_neg, (size_t)(nt * K) * sizeof(int64_t));
    g->kind = TMA_GRAPH_FULL;
    g->num_train_edges = rep.edges;
    g->num_edges = rep.edges + nv + nt;
    g->num_val = nv;
    g->num_test = nt;
    g->val_edges = eval;
    g->test_edges = eval + 2 * nv;
    g->num_negatives = (int32_t)K;
    g->val_neg = neg;
    g->test_neg = neg + nv * K;
    g->split_seed = seed;
    g->given_split = 1;
    /* Every invariant now, so a bad split fails the import, named, before anything is written. */
    if ((st = tma_graph_validate(g, what)) != TMA_OK)
        return st;
    rep.train_edges = rep.edges;
    rep.edges = g->num_edges;
    rep.val_edges = nv;
    rep.test_edges = nt;
    rep.negatives = (int32_t)K;
    rep.seconds_adjacency = t1 - t0;
    rep.seconds_split = tma_clock_now() - t1;
    if (rep_p)
        *rep_p = rep;
    return TMA_OK;
}

/* ------------------------------------------------------------------ statistics */

double tma_graph_homophily(const tma_graph_t *g)
{
    if (!g->labels || g->num_edges <= 0)
        return -1;
    int64_t same = 0;
#pragma omp parallel for schedule(dynamic, 4096) reduction(+ : same)
    for (int64_t v = 0; v < g->num_nodes; v++)
        for (int64_t e = g->indptr[v]; e < g->indptr[v + 1]; e++)
            same += g->labels[v] == g->labels[g->indices[e]];
    same /= 2; /* each training edge was seen from both ends */
    const int64_t *ev[2] = {g->val_edges, g->test_edges};
    const int64_t ec[2] = {g->num_val, g->num_test};
    for (int s = 0; s < 2; s++)
        for (int64_t i = 0; i < ec[s]; i++)
            same += g->labels[ev[s][2 * i]] == g->labels[ev[s][2 * i + 1]];
    return (double)same / (double)g->num_edges;
}
