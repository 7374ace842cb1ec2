/*
 * tmag.c: the .tmag file (docs/formats.md) and the tma_graph_t lifetime.
 *
 * A file is a 4 KiB header (magic, version, counts, a table of sections and
 * a CRC32C of the header) followed by page-aligned sections, each with its
 * own CRC32C.  Opening maps the file and points the graph's arrays into the
 * map, so a graph of any size opens in the time it takes to checksum it.
 */
#include "graph_int.h"
#include "tmag_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define COMP "graph"

struct tma_graph_store {
    tma_mmap_t map;
    void **owned;
    size_t n_owned, cap_owned;
};

/* ------------------------------------------------------------------ lifetime */

tma_status_t tma_graph_create(tma_graph_t **g_p)
{
    tma_graph_t *g = calloc(1, sizeof *g);
    if (!g)
        return TMA_ERR_NOMEM;
    g->store = calloc(1, sizeof *g->store);
    if (!g->store) {
        free(g);
        return TMA_ERR_NOMEM;
    }
    g->num_node_types = 1;
    g->num_relations = 1;
    *g_p = g;
    return TMA_OK;
}

void *tma_graph_alloc(tma_graph_t *g, size_t bytes)
{
    struct tma_graph_store *s = g->store;
    if (s->n_owned == s->cap_owned) {
        size_t cap = s->cap_owned ? s->cap_owned * 2 : 16;
        void **n = realloc(s->owned, cap * sizeof *n);
        if (!n) {
            tma_log_error(COMP, "out of memory");
            return NULL;
        }
        s->owned = n;
        s->cap_owned = cap;
    }
    void *p = tma_alloc_aligned(bytes);
    if (!p) {
        tma_log_error(COMP, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    s->owned[s->n_owned++] = p;
    return p;
}

tma_status_t graph_keep_map(tma_graph_t *g, tma_mmap_t *map)
{
    if (g->store->map.data)
        return TMA_ERR_INVALID;
    g->store->map = *map;
    memset(map, 0, sizeof *map);
    return TMA_OK;
}

void tma_graph_destroy(tma_graph_t *g)
{
    if (!g)
        return;
    if (g->store) {
        for (size_t i = 0; i < g->store->n_owned; i++)
            tma_free_aligned(g->store->owned[i]);
        free(g->store->owned);
        tma_mmap_close(&g->store->map);
        free(g->store);
    }
    free(g);
}

/* ------------------------------------------------------------------ queries */

int tma_graph_has_edge(const tma_graph_t *g, int64_t u, int64_t v)
{
    int64_t lo = g->indptr[u], hi = g->indptr[u + 1];
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int64_t x = g->indices[mid];
        if (x == v)
            return 1;
        if (x < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* The i-th name of the names blob, or NULL. */
static const char *nth_name(const tma_graph_t *g, int64_t i)
{
    if (!g->names)
        return NULL;
    int64_t off = 0;
    for (int64_t k = 0; off < g->names_bytes; k++) {
        const char *p = g->names + off;
        size_t len = strnlen(p, (size_t)(g->names_bytes - off));
        if (k == i)
            return off + (int64_t)len < g->names_bytes ? p : NULL;
        off += (int64_t)len + 1;
    }
    return NULL;
}

const char *tma_graph_node_type_name(const tma_graph_t *g, int32_t t, char *buf, size_t size)
{
    const char *p = t >= 0 && t < g->num_node_types ? nth_name(g, t) : NULL;
    if (p)
        snprintf(buf, size, "%s", p);
    else
        snprintf(buf, size, "type%d", t);
    return buf;
}

const char *tma_graph_relation_name(const tma_graph_t *g, int32_t r, char *buf, size_t size)
{
    const char *p = r >= 0 && r < g->num_relations ? nth_name(g, (int64_t)g->num_node_types + r) : NULL;
    if (p)
        snprintf(buf, size, "%s", p);
    else
        snprintf(buf, size, "rel%d", r);
    return buf;
}

/* The types and relations of a typed graph for `tma info`: per node type
 * its name, nodes and real feature width; per base relation its name and
 * training edges (each counted once, in its forward direction). */
static void info_types(const tma_graph_t *g, cJSON *o)
{
    const int32_t T = g->num_node_types, R = g->num_relations;
    int64_t *cnt = calloc((size_t)T + (size_t)R, sizeof *cnt);
    cJSON *types = cJSON_CreateArray(), *rels = cJSON_CreateArray();
    if (!cnt || !types || !rels) {
        free(cnt);
        cJSON_Delete(types);
        cJSON_Delete(rels);
        return;
    }
    for (int64_t v = 0; v < g->num_nodes; v++)
        cnt[g->node_type[v]]++;
    for (int64_t e = 0; e < 2 * g->num_train_edges; e++)
        if (g->edge_rel[e] < R)
            cnt[T + g->edge_rel[e]]++;
    char name[256];
    for (int32_t t = 0; t < T; t++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", tma_graph_node_type_name(g, t, name, sizeof name));
        cJSON_AddNumberToObject(x, "nodes", (double)cnt[t]);
        cJSON_AddNumberToObject(x, "feature_dim", g->type_feat_dim[t]);
        cJSON_AddItemToArray(types, x);
    }
    for (int32_t r = 0; r < R; r++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", tma_graph_relation_name(g, r, name, sizeof name));
        cJSON_AddNumberToObject(x, "id", r);
        cJSON_AddNumberToObject(x, "inverse_id", r + R);
        cJSON_AddNumberToObject(x, "train_edges", (double)cnt[T + r]);
        cJSON_AddItemToArray(rels, x);
    }
    free(cnt);
    cJSON_AddNumberToObject(o, "num_node_types", T);
    cJSON_AddNumberToObject(o, "num_relations", R);
    cJSON_AddItemToObject(o, "node_types", types);
    cJSON_AddItemToObject(o, "relations", rels);
}

cJSON *tma_graph_info_json(const tma_graph_t *g)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    int64_t max_deg = 0, isolated = 0;
    for (int64_t v = 0; v < g->num_nodes; v++) {
        int64_t d = tma_graph_degree(g, v);
        if (d > max_deg)
            max_deg = d;
        isolated += d == 0;
    }
    char id[32];
    snprintf(id, sizeof id, "%016" PRIx64, g->graph_id);
    cJSON_AddStringToObject(o, "kind", g->kind == TMA_GRAPH_SHARD ? "shard" : "graph");
    cJSON_AddNumberToObject(o, "nodes", (double)g->num_nodes);
    cJSON_AddNumberToObject(o, "edges", (double)g->num_edges);
    cJSON_AddNumberToObject(o, "feature_dim", g->feature_dim);
    cJSON_AddStringToObject(o, "feature_type", tma_feat_dtype_str(g->feat_dtype));
    cJSON_AddNumberToObject(o, "train_edges", (double)g->num_train_edges);
    cJSON_AddNumberToObject(o, "val_edges", (double)g->num_val);
    cJSON_AddNumberToObject(o, "test_edges", (double)g->num_test);
    cJSON_AddNumberToObject(o, "negatives_per_edge", g->num_negatives);
    cJSON_AddBoolToObject(o, "has_labels", g->labels != NULL);
    cJSON_AddNumberToObject(o, "num_classes", g->num_classes);
    cJSON_AddNumberToObject(o, "avg_train_degree",
                            g->num_nodes ? 2.0 * (double)g->num_train_edges / (double)g->num_nodes : 0.0);
    cJSON_AddNumberToObject(o, "max_train_degree", (double)max_deg);
    cJSON_AddNumberToObject(o, "isolated_train_nodes", (double)isolated);
    cJSON_AddNumberToObject(o, "split_seed", (double)g->split_seed);
    cJSON_AddStringToObject(o, "split", g->given_split ? "given" : "drawn");
    cJSON_AddStringToObject(o, "graph_id", id);
    if (g->kind == TMA_GRAPH_SHARD) {
        cJSON_AddNumberToObject(o, "shard_index", g->shard_index);
        cJSON_AddNumberToObject(o, "num_shards", g->num_shards);
    }
    if (tma_graph_is_typed(g))
        info_types(g, o);
    return o;
}

/* ------------------------------------------------------------------ validation */

static tma_status_t check_pairs(const char *what, const char *name, const int64_t *e, int64_t n,
                                int64_t nodes)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t u = e[2 * i], v = e[2 * i + 1];
        if (u < 0 || u >= nodes || v < 0 || v >= nodes || u == v) {
            tma_log_error(COMP, "%s: %s edge %" PRId64 " (%" PRId64 ", %" PRId64
                                ") is out of range or a self-loop (nodes: %" PRId64 ")",
                          what, name, i, u, v, nodes);
            return TMA_ERR_FORMAT;
        }
    }
    return TMA_OK;
}

static tma_status_t check_negatives(const tma_graph_t *g, const char *what, const char *name,
                                    const int64_t *edges, const int64_t *neg, int64_t n)
{
    int64_t bad = -1;
    const int64_t k = g->num_negatives;
#pragma omp parallel for schedule(static) reduction(max : bad)
    for (int64_t i = 0; i < n; i++) {
        int64_t u = edges[2 * i];
        for (int64_t j = 0; j < k; j++) {
            int64_t t = neg[i * k + j];
            if (t < 0 || t >= g->num_nodes || (!g->given_split && (t == u || tma_graph_has_edge(g, u, t))))
                bad = i > bad ? i : bad;
        }
    }
    if (bad < 0 && g->node_type) {
        /* Typed: every negative is of the positive tail's type. */
        int64_t badt = -1;
#pragma omp parallel for schedule(static) reduction(max : badt)
        for (int64_t i = 0; i < n; i++) {
            int32_t want = g->node_type[edges[2 * i + 1]];
            for (int64_t j = 0; j < k; j++)
                if (g->node_type[neg[i * k + j]] != want)
                    badt = i > badt ? i : badt;
        }
        if (badt >= 0) {
            tma_log_error(COMP, "%s: %s negatives of edge %" PRId64 " include a node whose type is not the "
                                "tail's (node type %d)",
                          what, name, badt, g->node_type[edges[2 * badt + 1]]);
            return TMA_ERR_FORMAT;
        }
    }
    if (bad >= 0) {
        tma_log_error(COMP, "%s: %s negatives of edge %" PRId64 " include %s", what, name, bad,
                      g->given_split ? "an out-of-range node" : "an out-of-range node, the head itself, or a neighbour");
        return TMA_ERR_FORMAT;
    }
    return TMA_OK;
}

/* Whether every entry v -> w has its w -> v (and, with_rel, of the inverse
 * relation id).  Rows are sorted and free of duplicates (checked before),
 * so the adjacency is symmetric exactly when the multiset of pairs
 * {min, max} seen from the lower end equals the one seen from the upper end:
 * compare their counts and sums of a 64-bit hash of each pair (with the
 * relation id as seen from the lower end).  One streaming, parallel pass
 * instead of a binary search per entry (45 s instead of 1 s on 100M edges);
 * an asymmetric graph passes only on a 2^-64 hash collision. */
static int symmetric(const tma_graph_t *g, int with_rel)
{
    uint64_t up = 0, down = 0;
    int64_t nup = 0, ndown = 0;
#pragma omp parallel for schedule(dynamic, 4096) reduction(+ : up, down, nup, ndown)
    for (int64_t v = 0; v < g->num_nodes; v++) {
        for (int64_t e = g->indptr[v]; e < g->indptr[v + 1]; e++) {
            int64_t w = g->indices[e];
            uint64_t lo = (uint64_t)(w < v ? w : v), hi = (uint64_t)(w < v ? v : w);
            uint64_t h = tma_hash64(tma_hash64(lo) + hi);
            if (with_rel)
                h = tma_hash64(h + (uint64_t)(w > v ? g->edge_rel[e] : tma_graph_rel_inverse(g, g->edge_rel[e])));
            if (w > v) {
                up += h;
                nup++;
            } else {
                down += h;
                ndown++;
            }
        }
    }
    return up == down && nup == ndown;
}

/* The relation id of entry u -> w, or -1 when there is none. */
static int32_t entry_rel(const tma_graph_t *g, int64_t u, int64_t w)
{
    int64_t lo = g->indptr[u], hi = g->indptr[u + 1];
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (g->indices[mid] == w)
            return g->edge_rel[mid];
        if (g->indices[mid] < w)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static tma_status_t check_rel_ids(const char *what, const char *name, const int32_t *r, int64_t n, int32_t ids)
{
    for (int64_t i = 0; i < n; i++) {
        if (r[i] < 0 || r[i] >= ids) {
            tma_log_error(COMP, "%s: %s relation id %d at index %" PRId64 " is outside [0, %d)", what, name, r[i],
                          i, ids);
            return TMA_ERR_FORMAT;
        }
    }
    return TMA_OK;
}

/* The invariants of a typed graph's fields (version 2); untyped graphs must
 * have none of them. */
static tma_status_t validate_types(const tma_graph_t *g, const char *what)
{
    const int64_t n = g->num_nodes;
    const int32_t T = g->num_node_types, R = g->num_relations;
    if (T < 1 || T > TMA_GRAPH_MAX_NODE_TYPES || R < 1 || R > TMA_GRAPH_MAX_RELATIONS) {
        tma_log_error(COMP, "%s: num_node_types %d or num_relations %d is outside [1, %d] / [1, %d]", what, T, R,
                      TMA_GRAPH_MAX_NODE_TYPES, TMA_GRAPH_MAX_RELATIONS);
        return TMA_ERR_FORMAT;
    }
    if (!g->node_type) {
        if (T != 1 || R != 1 || g->edge_rel || g->val_rel || g->test_rel || g->type_feat_dim || g->names) {
            tma_log_error(COMP, "%s: an untyped graph (no node types) has %d node types, %d relations or typed "
                                "arrays",
                          what, T, R);
            return TMA_ERR_FORMAT;
        }
        return TMA_OK;
    }
    if ((g->num_train_edges > 0 && !g->edge_rel) || (g->num_val > 0 && !g->val_rel) ||
        (g->num_test > 0 && !g->test_rel) || !g->type_feat_dim) {
        tma_log_error(COMP, "%s: a typed graph without its relation ids or per-type feature widths", what);
        return TMA_ERR_FORMAT;
    }
    for (int64_t v = 0; v < n; v++) {
        if (g->node_type[v] < 0 || g->node_type[v] >= T) {
            tma_log_error(COMP, "%s: node_type of node %" PRId64 " is %d, outside [0, %d)", what, v, g->node_type[v],
                          T);
            return TMA_ERR_FORMAT;
        }
    }
    for (int32_t t = 0; t < T; t++) {
        if (g->type_feat_dim[t] < 0 || g->type_feat_dim[t] > g->feature_dim) {
            tma_log_error(COMP, "%s: type_feat_dim of node type %d is %d, outside [0, feature_dim %d]", what, t,
                          g->type_feat_dim[t], g->feature_dim);
            return TMA_ERR_FORMAT;
        }
    }
    int64_t pad = -1;
    const int32_t D = g->feature_dim;
#pragma omp parallel for schedule(static) reduction(max : pad)
    for (int64_t v = 0; v < n; v++)
        for (int32_t j = g->type_feat_dim[g->node_type[v]]; j < D; j++)
            if (tma_graph_feat_at(g, v * D + j) != 0.0f) {
                pad = v > pad ? v : pad;
                break;
            }
    if (pad >= 0) {
        tma_log_error(COMP, "%s: features of node %" PRId64 " (type %d) are not zero beyond its type's width %d",
                      what, pad, g->node_type[pad], g->type_feat_dim[g->node_type[pad]]);
        return TMA_ERR_FORMAT;
    }
    tma_status_t st;
    if ((st = check_rel_ids(what, "edge_rel", g->edge_rel, 2 * g->num_train_edges, 2 * R)) != TMA_OK ||
        (st = check_rel_ids(what, "validation", g->val_rel, g->num_val, 2 * R)) != TMA_OK ||
        (st = check_rel_ids(what, "test", g->test_rel, g->num_test, 2 * R)) != TMA_OK)
        return st;
    if (g->num_train_edges > 0 && !symmetric(g, 1)) {
        /* Name the first entry whose reverse entry is missing or not its inverse. */
        for (int64_t v = 0; v < n; v++)
            for (int64_t e = g->indptr[v]; e < g->indptr[v + 1]; e++) {
                int32_t back = entry_rel(g, g->indices[e], v);
                if (back != tma_graph_rel_inverse(g, g->edge_rel[e])) {
                    tma_log_error(COMP, "%s: edge_rel: entry %" PRId64 " -> %" PRId64 " has relation id %d but "
                                        "%" PRId64 " -> %" PRId64 " has %d, not its inverse %d",
                                  what, v, g->indices[e], g->edge_rel[e], g->indices[e], v, back,
                                  tma_graph_rel_inverse(g, g->edge_rel[e]));
                    return TMA_ERR_FORMAT;
                }
            }
        tma_log_error(COMP, "%s: edge_rel: relation ids are not stored with their inverses", what);
        return TMA_ERR_FORMAT;
    }
    if (g->names) {
        int64_t count = 0, len = 0;
        for (int64_t i = 0; i < g->names_bytes; i++) {
            if (g->names[i] == '\0') {
                if (len == 0)
                    break;
                count++;
                len = 0;
            } else {
                len++;
            }
        }
        if (len != 0 || count != (int64_t)T + R || g->names_bytes <= 0) {
            tma_log_error(COMP, "%s: the names section does not hold %d non-empty NUL-terminated names "
                                "(%d node types + %d relations)",
                          what, T + R, T, R);
            return TMA_ERR_FORMAT;
        }
    }
    return TMA_OK;
}

/* The invariants every graph holds; `full` adds the O(m log d) symmetry check
 * and the check that evaluation edges are not training edges. */
static tma_status_t validate(const tma_graph_t *g, const char *what, int full)
{
    const int64_t n = g->num_nodes;
    if (n < 0 || g->num_train_edges < 0 || g->num_val < 0 || g->num_test < 0 || g->feature_dim < 0 ||
        g->num_negatives < 0 || g->num_classes < 0) {
        tma_log_error(COMP, "%s: negative count in the header", what);
        return TMA_ERR_FORMAT;
    }
    if ((unsigned)g->feat_dtype > TMA_FEAT_BF16) {
        tma_log_error(COMP, "%s: feature type %u is unknown", what, (unsigned)g->feat_dtype);
        return TMA_ERR_INVALID;
    }
    if (!g->indptr || (g->num_train_edges > 0 && !g->indices)) {
        tma_log_error(COMP, "%s: missing adjacency arrays", what);
        return TMA_ERR_FORMAT;
    }
    if (g->indptr[0] != 0 || g->indptr[n] != 2 * g->num_train_edges) {
        tma_log_error(COMP, "%s: CSR row pointers do not span the %" PRId64 " adjacency entries", what,
                      2 * g->num_train_edges);
        return TMA_ERR_FORMAT;
    }
    int64_t bad_row = -1;
#pragma omp parallel for schedule(dynamic, 4096) reduction(max : bad_row)
    for (int64_t v = 0; v < n; v++) {
        int64_t a = g->indptr[v], b = g->indptr[v + 1];
        if (a > b || a < 0 || b > 2 * g->num_train_edges) {
            bad_row = v > bad_row ? v : bad_row;
            continue;
        }
        int64_t prev = -1;
        for (int64_t e = a; e < b; e++) {
            int64_t u = g->indices[e];
            if (u <= prev || u >= n || u == v) {
                bad_row = v > bad_row ? v : bad_row;
                break;
            }
            prev = u;
        }
    }
    if (bad_row >= 0) {
        tma_log_error(COMP,
                      "%s: adjacency row of node %" PRId64
                      " is broken (non-monotone pointers, unsorted or duplicate neighbours, a "
                      "self-loop, or an id out of range)",
                      what, bad_row);
        return TMA_ERR_FORMAT;
    }
    if (full && !symmetric(g, 0)) {
        /* Only now the exact (random-access) scan, to name the node. */
        int64_t asym = -1;
#pragma omp parallel for schedule(dynamic, 4096) reduction(max : asym)
        for (int64_t v = 0; v < n; v++)
            for (int64_t e = g->indptr[v]; e < g->indptr[v + 1]; e++)
                if (!tma_graph_has_edge(g, g->indices[e], v)) {
                    asym = v > asym ? v : asym;
                    break;
                }
        if (asym >= 0)
            tma_log_error(COMP, "%s: edge at node %" PRId64 " is stored in one direction only", what,
                          asym);
        else
            tma_log_error(COMP, "%s: the adjacency is not symmetric", what);
        return TMA_ERR_FORMAT;
    }
    if (g->feature_dim > 0 && n > 0 && !g->features) {
        tma_log_error(COMP, "%s: feature_dim is %d but there are no features", what, g->feature_dim);
        return TMA_ERR_FORMAT;
    }
    if (g->labels) {
        for (int64_t v = 0; v < n; v++) {
            if (g->labels[v] < 0 || g->labels[v] >= g->num_classes) {
                tma_log_error(COMP, "%s: label of node %" PRId64 " is %d, outside [0, %d)", what, v,
                              g->labels[v], g->num_classes);
                return TMA_ERR_FORMAT;
            }
        }
    }
    tma_status_t st;
    if ((st = validate_types(g, what)) != TMA_OK)
        return st;
    if ((st = check_pairs(what, "validation", g->val_edges, g->num_val, n)) != TMA_OK ||
        (st = check_pairs(what, "test", g->test_edges, g->num_test, n)) != TMA_OK)
        return st;
    if (g->num_val + g->num_test > 0 && g->num_negatives > 0) {
        if ((g->num_val && !g->val_neg) || (g->num_test && !g->test_neg)) {
            tma_log_error(COMP, "%s: evaluation edges without their negatives", what);
            return TMA_ERR_FORMAT;
        }
        if ((st = check_negatives(g, what, "validation", g->val_edges, g->val_neg, g->num_val)) != TMA_OK ||
            (st = check_negatives(g, what, "test", g->test_edges, g->test_neg, g->num_test)) != TMA_OK)
            return st;
    }
    if (full) {
        for (int s = 0; s < 2; s++) {
            const int64_t *e = s ? g->test_edges : g->val_edges;
            int64_t m = s ? g->num_test : g->num_val;
            for (int64_t i = 0; i < m; i++) {
                if (tma_graph_has_edge(g, e[2 * i], e[2 * i + 1])) {
                    tma_log_error(COMP, "%s: %s edge (%" PRId64 ", %" PRId64 ") is also a training edge",
                                  what, s ? "test" : "validation", e[2 * i], e[2 * i + 1]);
                    return TMA_ERR_FORMAT;
                }
            }
        }
    }
    if (g->kind == TMA_GRAPH_SHARD) {
        if (!g->global_ids && n > 0) {
            tma_log_error(COMP, "%s: a shard without its global id map", what);
            return TMA_ERR_FORMAT;
        }
        if (g->num_shards <= 0 || g->shard_index < 0 || g->shard_index >= g->num_shards) {
            tma_log_error(COMP, "%s: shard index %d of %d is out of range", what, g->shard_index,
                          g->num_shards);
            return TMA_ERR_FORMAT;
        }
        for (int64_t v = 0; v < n; v++) {
            if (g->global_ids[v] < 0) {
                tma_log_error(COMP, "%s: negative global id at local node %" PRId64, what, v);
                return TMA_ERR_FORMAT;
            }
        }
    } else if (g->kind != TMA_GRAPH_FULL) {
        tma_log_error(COMP, "%s: unknown graph kind %d", what, (int)g->kind);
        return TMA_ERR_FORMAT;
    }
    return TMA_OK;
}

tma_status_t tma_graph_validate(const tma_graph_t *g, const char *what)
{
    return validate(g, what, 1);
}

/* ------------------------------------------------------------------ checksums */

/* CRC of a large array in parallel chunks, combined by hashing the chunk CRCs
 * in order: the same bytes always give the same value, whatever the thread
 * count, because the chunk size is fixed. */
uint32_t graph_section_crc(const void *data, uint64_t bytes)
{
    const uint64_t chunk = 16u << 20;
    uint64_t nchunks = (bytes + chunk - 1) / chunk;
    if (nchunks <= 1)
        return tma_crc32c(0, data, bytes);
    uint32_t *crcs = malloc(nchunks * sizeof *crcs);
    if (!crcs) {
        return tma_crc32c(0, data, bytes) ^ 0x5a5a5a5au; /* differs: forces a clear mismatch */
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (uint64_t c = 0; c < nchunks; c++) {
        uint64_t off = c * chunk;
        uint64_t len = bytes - off < chunk ? bytes - off : chunk;
        crcs[c] = tma_crc32c(0, (const char *)data + off, len);
    }
    uint32_t r = tma_crc32c(0, crcs, nchunks * sizeof *crcs);
    free(crcs);
    return r;
}

/* ------------------------------------------------------------------ reading */

static const tmag_section_t *find_section(const tmag_header_t *h, uint32_t id)
{
    for (uint32_t i = 0; i < h->num_sections; i++)
        if (h->sections[i].id == id)
            return &h->sections[i];
    return NULL;
}

/* Points *dst at section `id` after checking its element size, count, bounds
 * and (unless skipped) checksum.  A missing optional section leaves NULL. */
tma_status_t tmag_bind_section(const char *path, const tma_mmap_t *m, const tmag_header_t *h,
                                 uint32_t id, const char *name, uint32_t elem_size, uint64_t count,
                                 int required, int verify, const void **dst)
{
    const tmag_section_t *s = find_section(h, id);
    *dst = NULL;
    if (!s) {
        if (required && count > 0) {
            tma_log_error(COMP, "%s: the %s section is missing", path, name);
            return TMA_ERR_FORMAT;
        }
        return TMA_OK;
    }
    uint64_t bytes;
    if (s->elem_size != elem_size || s->count != count ||
        __builtin_mul_overflow(s->count, (uint64_t)s->elem_size, &bytes)) {
        tma_log_error(COMP, "%s: the %s section holds %" PRIu64 " items of %u bytes, expected %" PRIu64
                            " of %u",
                      path, name, s->count, s->elem_size, count, elem_size);
        return TMA_ERR_FORMAT;
    }
    if (s->offset < TMAG_HEADER_BYTES || s->offset % 8 != 0 || s->offset > m->size ||
        bytes > m->size - s->offset) {
        tma_log_error(COMP, "%s: truncated: the %s section needs bytes up to %" PRIu64
                            " but the file has %zu",
                      path, name, s->offset + bytes, m->size);
        return TMA_ERR_FORMAT;
    }
    const void *p = (const char *)m->data + s->offset;
    if (verify && bytes && graph_section_crc(p, bytes) != s->crc) {
        tma_log_error(COMP, "%s: checksum mismatch in the %s section: the file is corrupted", path, name);
        return TMA_ERR_CHECKSUM;
    }
    *dst = bytes ? p : NULL;
    return TMA_OK;
}

/* Checks the header at `data` (`avail` bytes of it readable) of a file of
 * `size` bytes: magic, version, header checksum, count ranges and the file
 * size it records.  Logs what is wrong, naming path. */
tma_status_t tmag_header_check(const char *path, const void *data, size_t avail, size_t size, tmag_header_t *h_p)
{
    if (size < TMAG_HEADER_BYTES || avail < TMAG_HEADER_BYTES) {
        if (size >= 8 && avail >= 8 && memcmp(data, TMAG_MAGIC, 8) != 0)
            tma_log_error(COMP, "%s: not a .tmag graph file (bad magic)", path);
        else
            tma_log_error(COMP, "%s: truncated: %zu bytes, shorter than the %u-byte header", path, size,
                          TMAG_HEADER_BYTES);
        return TMA_ERR_FORMAT;
    }
    tmag_header_t h;
    memcpy(&h, data, sizeof h);
    if (memcmp(h.magic, TMAG_MAGIC, 8) != 0) {
        tma_log_error(COMP, "%s: not a .tmag graph file (bad magic)", path);
        return TMA_ERR_FORMAT;
    }
    if (h.version != TMA_TMAG_VERSION && h.version != TMA_TMAG_VERSION_UNTYPED) {
        tma_log_error(COMP, "%s: .tmag version %u, this tma reads versions %d to %d; re-import the graph", path,
                      h.version, TMA_TMAG_VERSION_UNTYPED, TMA_TMAG_VERSION);
        return TMA_ERR_MISMATCH;
    }
    uint32_t want_crc;
    memcpy(&want_crc, (const char *)data + TMAG_HEADER_BYTES - 4, 4);
    if (h.header_bytes != TMAG_HEADER_BYTES || tma_crc32c(0, data, TMAG_HEADER_BYTES - 4) != want_crc) {
        tma_log_error(COMP, "%s: header checksum mismatch: the file is corrupted", path);
        return TMA_ERR_CHECKSUM;
    }
    const uint64_t lim = (uint64_t)1 << 40;
    if (h.num_sections > TMAG_MAX_SECTIONS || h.num_nodes >= lim || h.num_train_edges >= lim ||
        h.num_val >= lim || h.num_test >= lim || h.num_edges >= lim || h.feature_dim > (1u << 24) ||
        h.num_negatives > (1u << 20) || h.num_classes > (1u << 24) || h.kind > TMAG_KIND_INFER ||
        h.num_shards > (1u << 24)) {
        tma_log_error(COMP, "%s: header counts are out of range", path);
        return TMA_ERR_FORMAT;
    }
    if (h.feat_dtype > TMA_FEAT_BF16) {
        tma_log_error(COMP, "%s: feature type %u is unknown (this tma reads 0 float32, 1 float16, 2 bfloat16); "
                      "a newer tma wrote it", path, h.feat_dtype);
        return TMA_ERR_MISMATCH;
    }
    if ((h.version == TMA_TMAG_VERSION_UNTYPED && (h.num_node_types != 0 || h.num_relations != 0)) ||
        (h.version == TMA_TMAG_VERSION && (h.num_node_types < 1 || h.num_node_types > TMA_GRAPH_MAX_NODE_TYPES ||
                                           h.num_relations < 1 || h.num_relations > TMA_GRAPH_MAX_RELATIONS))) {
        tma_log_error(COMP, "%s: header: num_node_types %u and num_relations %u are out of range for version %u "
                            "(version 1: both 0; version 2: 1 to %d and 1 to %d)",
                      path, h.num_node_types, h.num_relations, h.version, TMA_GRAPH_MAX_NODE_TYPES,
                      TMA_GRAPH_MAX_RELATIONS);
        return TMA_ERR_FORMAT;
    }
    if (h.file_bytes != size) {
        tma_log_error(COMP, "%s: %s: the file has %zu bytes, its header says %" PRIu64, path,
                      size < h.file_bytes ? "truncated" : "trailing bytes", size, h.file_bytes);
        return TMA_ERR_FORMAT;
    }
    *h_p = h;
    return TMA_OK;
}

tma_status_t tmag_header_read(const char *path, tmag_header_t *h_p)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        tma_log_error(COMP, "%s: cannot open: %s", path, strerror(e));
        return e == ENOENT ? TMA_ERR_NOT_FOUND : TMA_ERR_IO;
    }
    struct stat sb;
    char *buf = malloc(TMAG_HEADER_BYTES);
    tma_status_t st = TMA_OK;
    ssize_t got = 0;
    if (!buf) {
        st = TMA_ERR_NOMEM;
    } else if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        tma_log_error(COMP, "%s: not a regular file", path);
        st = TMA_ERR_IO;
    } else if ((got = pread(fd, buf, TMAG_HEADER_BYTES, 0)) < 0) {
        tma_log_error(COMP, "%s: cannot read: %s", path, strerror(errno));
        st = TMA_ERR_IO;
    } else {
        st = tmag_header_check(path, buf, (size_t)got, (size_t)sb.st_size, h_p);
    }
    free(buf);
    close(fd);
    return st;
}

/* The header's scalars into g. */
static void graph_from_header(tma_graph_t *g, const tmag_header_t *h)
{
    g->kind = (tma_graph_kind_t)h->kind;
    g->num_nodes = (int64_t)h->num_nodes;
    g->num_edges = (int64_t)h->num_edges;
    g->num_train_edges = (int64_t)h->num_train_edges;
    g->num_val = (int64_t)h->num_val;
    g->num_test = (int64_t)h->num_test;
    g->feature_dim = (int32_t)h->feature_dim;
    g->feat_dtype = (tma_feat_dtype_t)h->feat_dtype;
    g->num_negatives = (int32_t)h->num_negatives;
    g->num_classes = (int32_t)h->num_classes;
    g->shard_index = (int32_t)h->shard_index;
    g->num_shards = (int32_t)h->num_shards;
    g->split_seed = h->split_seed;
    g->graph_id = h->graph_id;
    g->given_split = (h->flags & TMAG_FLAG_GIVEN_SPLIT) != 0;
}

tma_status_t tma_graph_open(const char *path, unsigned flags, tma_graph_t **g_p)
{
    tma_graph_t *g;
    tma_status_t st = tma_graph_create(&g);
    if (st != TMA_OK)
        return st;
    tma_mmap_t *m = &g->store->map;
    st = tma_mmap_open(path, m);
    if (st != TMA_OK)
        goto fail;
    tmag_header_t h;
    if ((st = tmag_header_check(path, m->data, m->size, m->size, &h)) != TMA_OK)
        goto fail;
    if (h.kind == TMAG_KIND_INFER) {
        tma_log_error(COMP, "%s is a shard's inference file (kind 2), not a graph: open the shard-NNNNN.tmag "
                      "beside it", path);
        st = TMA_ERR_FORMAT;
        goto fail;
    }
    graph_from_header(g, &h);

    int verify = !(flags & TMA_GRAPH_OPEN_NO_VERIFY);
    const uint64_t n = h.num_nodes;
    const void *p;
#define BIND(id, name, esz, cnt, req, field, type)                                                 \
    do {                                                                                           \
        st = tmag_bind_section(path, m, &h, id, name, esz, cnt, req, verify, &p);                       \
        if (st != TMA_OK)                                                                          \
            goto fail;                                                                             \
        g->field = (type)p;                                                                        \
    } while (0)
    BIND(SEC_INDPTR, "row pointer", 8, n + 1, 1, indptr, const int64_t *);
    BIND(SEC_INDICES, "adjacency", 8, 2 * h.num_train_edges, 1, indices, const int64_t *);
    BIND(SEC_FEATURES, "feature", (uint32_t)tma_feat_dtype_size(g->feat_dtype), n * h.feature_dim, 1, features,
         const void *);
    BIND(SEC_LABELS, "label", 4, n, (h.flags & TMAG_FLAG_LABELS) != 0, labels, const int32_t *);
    BIND(SEC_VAL_EDGES, "validation edge", 8, 2 * h.num_val, 1, val_edges, const int64_t *);
    BIND(SEC_TEST_EDGES, "test edge", 8, 2 * h.num_test, 1, test_edges, const int64_t *);
    BIND(SEC_VAL_NEG, "validation negative", 8, h.num_val * h.num_negatives, 1, val_neg, const int64_t *);
    BIND(SEC_TEST_NEG, "test negative", 8, h.num_test * h.num_negatives, 1, test_neg, const int64_t *);
    BIND(SEC_GLOBAL_IDS, "global id", 8, n, h.kind == TMA_GRAPH_SHARD, global_ids, const int64_t *);
    if (h.version == TMA_TMAG_VERSION) {
        g->num_node_types = (int32_t)h.num_node_types;
        g->num_relations = (int32_t)h.num_relations;
        BIND(SEC_NODE_TYPES, "node type", 4, n, 1, node_type, const int32_t *);
        BIND(SEC_EDGE_RELS, "edge relation", 4, 2 * h.num_train_edges, 1, edge_rel, const int32_t *);
        BIND(SEC_VAL_RELS, "validation relation", 4, h.num_val, 1, val_rel, const int32_t *);
        BIND(SEC_TEST_RELS, "test relation", 4, h.num_test, 1, test_rel, const int32_t *);
        BIND(SEC_TYPE_FEAT_DIM, "type feature width", 4, h.num_node_types, 1, type_feat_dim, const int32_t *);
        const tmag_section_t *ns = find_section(&h, SEC_NAMES);
        if (ns && (ns->count == 0 || ns->count > TMAG_MAX_NAMES_BYTES)) {
            tma_log_error(COMP, "%s: the names section holds %" PRIu64 " bytes, expected 1 to %u", path, ns->count,
                          TMAG_MAX_NAMES_BYTES);
            st = TMA_ERR_FORMAT;
            goto fail;
        }
        BIND(SEC_NAMES, "names", 1, ns ? ns->count : 0, 0, names, const char *);
        g->names_bytes = g->names ? (int64_t)ns->count : 0;
        if (n == 0) {
            /* An empty typed shard: still typed, with nothing to point at. */
            static const int32_t no_types[1];
            g->node_type = no_types;
        }
        if (n > 0 && !g->node_type) {
            tma_log_error(COMP, "%s: a version %u file without its node type section", path, h.version);
            st = TMA_ERR_FORMAT;
            goto fail;
        }
    }
#undef BIND
    if (!g->indptr) {
        tma_log_error(COMP, "%s: the row pointer section is missing", path);
        st = TMA_ERR_FORMAT;
        goto fail;
    }
    st = validate(g, path, 0);
    if (st != TMA_OK)
        goto fail;
    *g_p = g;
    return TMA_OK;
fail:
    tma_graph_destroy(g);
    return st;
}

/* A small section read with pread into memory the graph owns, checked. */
static tma_status_t read_small(const char *path, int fd, const tmag_header_t *h, tma_graph_t *g, uint32_t id,
                               const char *name, uint64_t max_bytes, void **out, uint64_t *bytes_p)
{
    const tmag_section_t *s = find_section(h, id);
    *out = NULL;
    *bytes_p = 0;
    if (!s || s->count == 0)
        return TMA_OK;
    uint64_t bytes;
    if (__builtin_mul_overflow(s->count, (uint64_t)s->elem_size, &bytes) || bytes > max_bytes ||
        s->offset < TMAG_HEADER_BYTES || s->offset > h->file_bytes || bytes > h->file_bytes - s->offset) {
        tma_log_error(COMP, "%s: the %s section is out of range", path, name);
        return TMA_ERR_FORMAT;
    }
    void *p = tma_graph_alloc(g, (size_t)bytes);
    if (!p)
        return TMA_ERR_NOMEM;
    if (pread(fd, p, (size_t)bytes, (off_t)s->offset) != (ssize_t)bytes) {
        tma_log_error(COMP, "%s: cannot read the %s section", path, name);
        return TMA_ERR_IO;
    }
    if (graph_section_crc(p, bytes) != s->crc) {
        tma_log_error(COMP, "%s: checksum mismatch in the %s section: the file is corrupted", path, name);
        return TMA_ERR_CHECKSUM;
    }
    *out = p;
    *bytes_p = bytes;
    return TMA_OK;
}

tma_status_t tma_graph_open_header(const char *path, tma_graph_t **g_p)
{
    tmag_header_t h;
    tma_status_t st = tmag_header_read(path, &h);
    if (st != TMA_OK)
        return st;
    if (h.kind != TMA_GRAPH_FULL && h.kind != TMA_GRAPH_SHARD) {
        tma_log_error(COMP, "%s is not a graph (kind %u)", path, h.kind);
        return TMA_ERR_FORMAT;
    }
    tma_graph_t *g;
    if ((st = tma_graph_create(&g)) != TMA_OK)
        return st;
    graph_from_header(g, &h);
    if (h.version == TMA_TMAG_VERSION) {
        g->typed_header = 1;
        g->num_node_types = (int32_t)h.num_node_types;
        g->num_relations = (int32_t)h.num_relations;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        void *p = NULL;
        uint64_t bytes = 0;
        st = fd < 0 ? TMA_ERR_IO : TMA_OK;
        st = st ? st
                : read_small(path, fd, &h, g, SEC_TYPE_FEAT_DIM, "type feature width", 4ull * h.num_node_types, &p,
                             &bytes);
        if (st == TMA_OK && bytes != 4ull * h.num_node_types) {
            tma_log_error(COMP, "%s: the type feature width section is missing", path);
            st = TMA_ERR_FORMAT;
        }
        g->type_feat_dim = p;
        st = st ? st : read_small(path, fd, &h, g, SEC_NAMES, "names", TMAG_MAX_NAMES_BYTES, &p, &bytes);
        g->names = p;
        g->names_bytes = (int64_t)bytes;
        if (fd >= 0)
            close(fd);
    }
    if (st != TMA_OK) {
        tma_graph_destroy(g);
        return st;
    }
    *g_p = g;
    return TMA_OK;
}
