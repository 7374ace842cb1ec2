/*
 * partition_infer.c: a shard's inference file, shard-NNNNN.infer.tmag
 * (docs/formats.md): the full training-graph rows of the shard's nodes, each
 * entry naming its neighbour by shard and local id, with the neighbour's
 * degree; and the evaluation edges whose head the shard holds (its duties).
 * An evaluator rank computes its nodes' embeddings from it, fetching the
 * rows of other shards' nodes from their owners, and never needs the graph.
 */
#include "graph_int.h"
#include "tmag_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define COMP "partition"

/* Values streamed a block at a time. */
#define INFER_BLOCK ((int64_t)1 << 16)

char *tma_partition_infer_name(int32_t k)
{
    return tma_strdup_printf("shard-%05d.infer.tmag", k);
}

typedef struct infer_src {
    const tma_graph_t *g;
    const int32_t *part;
    const int64_t *local;
    const int64_t *nodes;
    int64_t ns;
    int32_t s;
} infer_src_t;

enum { COL_INDPTR, COL_GIDS, COL_TYPES, ENT_NBR, ENT_DEG, ENT_REL };

/* Streams one section: a value a node (COL_*) or an entry (ENT_*) of the
 * shard's full rows, a block at a time. */
static tma_status_t stream(tmag_writer_t *w, const infer_src_t *x, int what, void *buf)
{
    const tma_graph_t *g = x->g;
    const int wide = what == COL_INDPTR || what == COL_GIDS || what == ENT_NBR;
    tma_status_t st = tmag_writer_section_begin(w, what == COL_INDPTR ? SEC_INDPTR
                                                   : what == COL_GIDS ? SEC_GLOBAL_IDS
                                                   : what == COL_TYPES ? SEC_NODE_TYPES
                                                   : what == ENT_NBR   ? SEC_INDICES
                                                   : what == ENT_DEG   ? SEC_NBR_DEG
                                                                       : SEC_EDGE_RELS,
                                                (uint32_t)(wide ? 8 : 4));
    int64_t *b64 = buf;
    int32_t *b32 = buf;
    int64_t k = 0, run = 0;
#define PUT(v)                                                                                                   \
    do {                                                                                                         \
        if (wide)                                                                                                \
            b64[k++] = (v);                                                                                      \
        else                                                                                                     \
            b32[k++] = (int32_t)(v);                                                                             \
        if (k == INFER_BLOCK) {                                                                                  \
            st = st ? st : tmag_writer_append(w, buf, (size_t)k * (wide ? 8 : 4));                              \
            k = 0;                                                                                               \
        }                                                                                                        \
    } while (0)
    if (what == COL_INDPTR)
        PUT(0);
    for (int64_t i = 0; i < x->ns && st == TMA_OK; i++) {
        const int64_t v = x->nodes[i];
        if (what == COL_INDPTR) {
            run += tma_graph_degree(g, v);
            PUT(run);
        } else if (what == COL_GIDS) {
            PUT(v);
        } else if (what == COL_TYPES) {
            PUT(g->node_type[v]);
        } else {
            for (int64_t e = g->indptr[v]; e < g->indptr[v + 1]; e++) {
                const int64_t u = g->indices[e];
                if (what == ENT_NBR)
                    PUT(TMA_INFER_PACK(x->part[u], x->local[u]));
                else if (what == ENT_DEG)
                    PUT(tma_graph_degree(g, u));
                else
                    PUT(g->edge_rel[e]);
            }
        }
    }
#undef PUT
    if (st == TMA_OK && k)
        st = tmag_writer_append(w, buf, (size_t)k * (wide ? 8 : 4));
    return st ? st : tmag_writer_section_end(w);
}

/* The duties of one split: its edges whose head is in shard s. */
static tma_status_t stream_duties(tmag_writer_t *w, const infer_src_t *x, int test, int64_t *row)
{
    const tma_graph_t *g = x->g;
    const int64_t n = test ? g->num_test : g->num_val, K = TMA_MAX(g->num_negatives, 0);
    const int64_t *edges = test ? g->test_edges : g->val_edges, *negs = test ? g->test_neg : g->val_neg;
    const int32_t *rel = test ? g->test_rel : g->val_rel;
    tma_status_t st = tmag_writer_section_begin(w, test ? SEC_TEST_DUTIES : SEC_VAL_DUTIES, 8);
    for (int64_t i = 0; i < n && st == TMA_OK; i++) {
        const int64_t u = edges[2 * i], v = edges[2 * i + 1];
        if (x->part[u] != x->s)
            continue;
        row[TMA_INFER_DUTY_EDGE] = i;
        row[TMA_INFER_DUTY_REL] = rel ? rel[i] : 0;
        row[TMA_INFER_DUTY_HEAD] = x->local[u];
        row[TMA_INFER_DUTY_TAIL] = TMA_INFER_PACK(x->part[v], x->local[v]);
        for (int64_t j = 0; j < K; j++) {
            const int64_t t = negs[i * K + j];
            row[TMA_INFER_DUTY_COLS + j] = TMA_INFER_PACK(x->part[t], x->local[t]);
        }
        st = tmag_writer_append(w, row, (size_t)(TMA_INFER_DUTY_COLS + K) * sizeof *row);
    }
    return st ? st : tmag_writer_section_end(w);
}

static int64_t count_duties(const infer_src_t *x, int test)
{
    const tma_graph_t *g = x->g;
    const int64_t n = test ? g->num_test : g->num_val;
    const int64_t *edges = test ? g->test_edges : g->val_edges;
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++)
        c += x->part[edges[2 * i]] == x->s;
    return c;
}

tma_status_t graph_infer_write(const tma_graph_t *g, const int32_t *part, const int64_t *local, const int64_t *nodes,
                               int64_t ns, int32_t s, int32_t S, const char *path)
{
    const infer_src_t x = {g, part, local, nodes, ns, s};
    const int typed = tma_graph_is_typed(g);
    const int64_t K = TMA_MAX(g->num_negatives, 0);
    int64_t entries = 0;
    for (int64_t i = 0; i < ns; i++)
        entries += tma_graph_degree(g, nodes[i]);
    tma_graph_t *meta;
    tma_status_t st = tma_graph_create(&meta);
    if (st != TMA_OK)
        return st;
    meta->kind = (tma_graph_kind_t)TMAG_KIND_INFER;
    meta->num_nodes = ns;
    meta->num_edges = entries;
    meta->num_val = count_duties(&x, 0);
    meta->num_test = count_duties(&x, 1);
    meta->feature_dim = g->feature_dim;
    meta->feat_dtype = g->feat_dtype;
    meta->num_negatives = (int32_t)K;
    meta->shard_index = s;
    meta->num_shards = S;
    meta->split_seed = g->split_seed;
    meta->graph_id = g->graph_id;
    if (typed) {
        meta->num_node_types = g->num_node_types;
        meta->num_relations = g->num_relations;
    }
    void *buf = malloc((size_t)INFER_BLOCK * sizeof(int64_t));
    int64_t *row = malloc((size_t)(TMA_INFER_DUTY_COLS + K) * sizeof *row);
    tmag_writer_t *w = NULL;
    st = buf && row ? tmag_writer_begin(meta, path, &w) : TMA_ERR_NOMEM;
    tma_graph_destroy(meta);
    static const int order[] = {COL_INDPTR, ENT_NBR, ENT_DEG, COL_GIDS, COL_TYPES, ENT_REL};
    for (size_t i = 0; i < TMA_ARRAY_LEN(order) && st == TMA_OK; i++)
        if (typed || (order[i] != COL_TYPES && order[i] != ENT_REL))
            st = stream(w, &x, order[i], buf);
    if (st == TMA_OK)
        st = stream_duties(w, &x, 0, row);
    if (st == TMA_OK)
        st = stream_duties(w, &x, 1, row);
    if (st == TMA_OK) {
        st = tmag_writer_end(w, NULL);
        w = NULL;
    }
    tmag_writer_abort(w);
    free(buf);
    free(row);
    if (st != TMA_OK)
        tma_log_error(COMP, "%s: cannot write shard %d's inference file: %s", path, s, tma_status_str(st));
    return st;
}

/* ------------------------------------------------------------------ reading */

void tma_graph_infer_close(tma_graph_infer_t *inf)
{
    if (!inf)
        return;
    if (inf->map_) {
        tma_mmap_close(inf->map_);
        free(inf->map_);
    }
    free(inf);
}

/* Every packed node in range of its shard. */
static int64_t bad_packed(const int64_t *p, int64_t n, int64_t stride, int64_t first, int64_t cols, int32_t S,
                          const int64_t *shard_nodes)
{
    int64_t bad = -1;
#pragma omp parallel for schedule(static) reduction(max : bad)
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = first; j < cols; j++) {
            const int64_t v = p[i * stride + j];
            const int32_t sh = TMA_INFER_SHARD(v);
            if (v < 0 || sh >= S || TMA_INFER_LOCAL(v) >= shard_nodes[sh])
                bad = TMA_MAX(bad, i);
        }
    return bad;
}

static tma_status_t infer_check(const char *path, const tma_graph_infer_t *f, int32_t num_relations,
                                const int64_t *shard_nodes)
{
    const int64_t n = f->num_nodes, E = f->num_entries;
    const int32_t S = f->num_shards;
    if (n > 0 && (!f->indptr || f->indptr[0] != 0 || f->indptr[n] != E)) {
        tma_log_error(COMP, "%s: the row pointers do not run from 0 to the %" PRId64 " entries", path, E);
        return TMA_ERR_FORMAT;
    }
    for (int64_t i = 0; i < n; i++)
        if (f->indptr[i + 1] < f->indptr[i] || (i > 0 && f->global_ids[i] <= f->global_ids[i - 1])) {
            tma_log_error(COMP, "%s: row %" PRId64 ": row pointers decrease or global ids are not increasing", path,
                          i);
            return TMA_ERR_FORMAT;
        }
    int64_t bad = bad_packed(f->nbr, E, 1, 0, 1, S, shard_nodes);
    if (bad >= 0) {
        tma_log_error(COMP, "%s: entry %" PRId64 " names a node outside the partition's shards", path, bad);
        return TMA_ERR_FORMAT;
    }
    for (int64_t e = 0; e < E; e++)
        if (f->nbr_deg[e] < 1 || (f->rel && (f->rel[e] < 0 || f->rel[e] >= 2 * num_relations))) {
            tma_log_error(COMP, "%s: entry %" PRId64 ": degree %d or relation id out of range", path, e,
                          f->nbr_deg[e]);
            return TMA_ERR_FORMAT;
        }
    const int64_t W = TMA_INFER_DUTY_COLS + f->num_negatives;
    for (int t = 0; t < 2; t++) {
        const int64_t *d = f->duties[t];
        for (int64_t i = 0; i < f->num_duties[t]; i++)
            if (d[i * W + TMA_INFER_DUTY_EDGE] < 0 || d[i * W + TMA_INFER_DUTY_HEAD] < 0 ||
                d[i * W + TMA_INFER_DUTY_HEAD] >= n || d[i * W + TMA_INFER_DUTY_REL] < 0 ||
                d[i * W + TMA_INFER_DUTY_REL] >= TMA_MAX(num_relations, 1)) {
                tma_log_error(COMP, "%s: %s duty %" PRId64 ": edge index, relation or head out of range", path,
                              t ? "test" : "validation", i);
                return TMA_ERR_FORMAT;
            }
        bad = bad_packed(d, f->num_duties[t], W, TMA_INFER_DUTY_TAIL, W, S, shard_nodes);
        if (bad >= 0) {
            tma_log_error(COMP, "%s: %s duty %" PRId64 " names a node outside the partition's shards", path,
                          t ? "test" : "validation", bad);
            return TMA_ERR_FORMAT;
        }
    }
    return TMA_OK;
}

tma_status_t tma_graph_infer_open(const char *path, unsigned flags, int32_t shard, int32_t num_shards,
                                  uint64_t graph_id, const int64_t *shard_nodes, tma_graph_infer_t **inf_p)
{
    tma_graph_infer_t *f = calloc(1, sizeof *f);
    tma_mmap_t *m = calloc(1, sizeof *m);
    if (!f || !m) {
        free(f);
        free(m);
        return TMA_ERR_NOMEM;
    }
    tma_status_t st = tma_mmap_open(path, m);
    if (st != TMA_OK) {
        free(m);
        free(f);
        return st;
    }
    f->map_ = m;
    tmag_header_t h;
    if ((st = tmag_header_check(path, m->data, m->size, m->size, &h)) != TMA_OK)
        goto fail;
    if (h.kind != TMAG_KIND_INFER) {
        tma_log_error(COMP, "%s: not a shard's inference file (kind %u, expected 2)", path, h.kind);
        st = TMA_ERR_FORMAT;
        goto fail;
    }
    if ((int32_t)h.shard_index != shard || (int32_t)h.num_shards != num_shards || h.graph_id != graph_id) {
        tma_log_error(COMP, "%s: the inference file of shard %u of %u of graph %016" PRIx64
                      ", expected shard %d of %d of graph %016" PRIx64 ": a file of another partition",
                      path, h.shard_index, h.num_shards, h.graph_id, shard, num_shards, graph_id);
        st = TMA_ERR_MISMATCH;
        goto fail;
    }
    f->shard = shard;
    f->num_shards = num_shards;
    f->graph_id = graph_id;
    f->num_nodes = (int64_t)h.num_nodes;
    f->num_entries = (int64_t)h.num_edges;
    f->num_negatives = (int32_t)h.num_negatives;
    f->num_duties[0] = (int64_t)h.num_val;
    f->num_duties[1] = (int64_t)h.num_test;
    if (f->num_nodes != shard_nodes[shard]) {
        tma_log_error(COMP, "%s: %" PRId64 " nodes, partition.json says shard %d has %" PRId64, path, f->num_nodes,
                      shard, shard_nodes[shard]);
        st = TMA_ERR_MISMATCH;
        goto fail;
    }
    const int verify = !(flags & TMA_GRAPH_OPEN_NO_VERIFY), typed = h.version == TMA_TMAG_VERSION;
    const uint64_t n = h.num_nodes, E = h.num_edges, W = TMA_INFER_DUTY_COLS + h.num_negatives;
    const void *p;
#define BIND(id, name, esz, cnt, req, field, type)                                                               \
    do {                                                                                                         \
        if ((st = tmag_bind_section(path, m, &h, id, name, esz, cnt, req, verify, &p)) != TMA_OK)                \
            goto fail;                                                                                           \
        f->field = (type)p;                                                                                      \
    } while (0)
    BIND(SEC_INDPTR, "row pointer", 8, n + 1, 1, indptr, const int64_t *);
    BIND(SEC_INDICES, "neighbour", 8, E, 1, nbr, const int64_t *);
    BIND(SEC_NBR_DEG, "neighbour degree", 4, E, 1, nbr_deg, const int32_t *);
    BIND(SEC_GLOBAL_IDS, "global id", 8, n, 1, global_ids, const int64_t *);
    BIND(SEC_VAL_DUTIES, "validation duty", 8, h.num_val * W, 1, duties[0], const int64_t *);
    BIND(SEC_TEST_DUTIES, "test duty", 8, h.num_test * W, 1, duties[1], const int64_t *);
    if (typed) {
        BIND(SEC_NODE_TYPES, "node type", 4, n, 1, node_type, const int32_t *);
        BIND(SEC_EDGE_RELS, "edge relation", 4, E, 1, rel, const int32_t *);
    }
#undef BIND
    if ((st = infer_check(path, f, typed ? (int32_t)h.num_relations : 0, shard_nodes)) != TMA_OK)
        goto fail;
    *inf_p = f;
    return TMA_OK;
fail:
    tma_graph_infer_close(f);
    return st;
}
