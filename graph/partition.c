/*
 * partition.c: `tma partition`'s library side.  Node assignments (random,
 * supernode, metis) over the training graph, the shard files (the induced
 * training subgraph of each shard, local ids in global-id order so rows
 * stay sorted), the shard statistics of the paper (edge ratio r, label and
 * feature discrepancy), partition.json, and its loader.
 *
 * Buffers for the shard being written are allocated once, at the size of
 * the largest shard, and reused for every shard.
 */
#include "graph_int.h"
#include "tmag_int.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <metis.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP "partition"
#define SALT_RANDOM 0x72616e646f6dull
#define SALT_DEAL 0x6465616cull

_Static_assert(sizeof(idx_t) == sizeof(int32_t), "METIS must be built with 32-bit idx_t");

/* Shards are streamed a block of nodes at a time: SHARD_BLOCK nodes, or
 * fewer where their entries pass SHARD_BLOCK_ENTRIES (at least one node). */
#define SHARD_BLOCK 4096
#define SHARD_BLOCK_ENTRIES ((int64_t)1 << 20)

/* ------------------------------------------------------------------ schemes */

const char *tma_partition_scheme_str(tma_partition_scheme_t s)
{
    switch (s) {
    case TMA_PARTITION_RANDOM: return "random";
    case TMA_PARTITION_SUPERNODE: return "supernode";
    case TMA_PARTITION_METIS: return "metis";
    }
    return "?";
}

tma_status_t tma_partition_scheme_parse(const char *s, tma_partition_opts_t *o)
{
    if (strcmp(s, "random") == 0) {
        o->scheme = TMA_PARTITION_RANDOM;
        o->num_clusters = 0;
        return TMA_OK;
    }
    if (strcmp(s, "metis") == 0) {
        o->scheme = TMA_PARTITION_METIS;
        o->num_clusters = 0;
        return TMA_OK;
    }
    int64_t n;
    if (strncmp(s, "supernode:", 10) == 0 && tma_parse_i64(s + 10, &n) == 0 && n >= 1 && n <= INT32_MAX) {
        o->scheme = TMA_PARTITION_SUPERNODE;
        o->num_clusters = n;
        return TMA_OK;
    }
    return TMA_ERR_INVALID;
}

const char *tma_clusterer_str(tma_clusterer_t c)
{
    switch (c) {
    case TMA_CLUSTERER_AUTO: return "auto";
    case TMA_CLUSTERER_METIS: return "metis";
    case TMA_CLUSTERER_LP: return "lp";
    }
    return "?";
}

tma_status_t tma_clusterer_parse(const char *s, tma_clusterer_t *c)
{
    for (tma_clusterer_t k = TMA_CLUSTERER_AUTO; k <= TMA_CLUSTERER_LP; k++)
        if (strcmp(s, tma_clusterer_str(k)) == 0) {
            *c = k;
            return TMA_OK;
        }
    return TMA_ERR_INVALID;
}

/* Bytes beyond the per-node arrays: METIS's graph and its coarsening
 * copies, or label propagation's four per-node arrays. */
static double clusterer_bytes(const tma_graph_t *g, tma_clusterer_t c)
{
    const double n = (double)g->num_nodes, entries = 2.0 * (double)g->num_train_edges;
    return c == TMA_CLUSTERER_LP ? 16 * n : (n + 1 + entries) * sizeof(idx_t) * 4 + 4 * n;
}

static double base_bytes(const tma_graph_t *g)
{
    return 28 * (double)g->num_nodes + (double)SHARD_BLOCK * ((double)g->feature_dim * 4 + 12) +
           (double)SHARD_BLOCK_ENTRIES * 16;
}

tma_clusterer_t tma_partition_clusterer(const tma_graph_t *g, const tma_partition_opts_t *o)
{
    if (o->scheme == TMA_PARTITION_RANDOM || o->clusterer != TMA_CLUSTERER_AUTO)
        return o->scheme == TMA_PARTITION_RANDOM ? TMA_CLUSTERER_AUTO : o->clusterer;
    if (g->num_nodes > INT32_MAX || 2 * g->num_train_edges > INT32_MAX)
        return TMA_CLUSTERER_LP;
    const double base = base_bytes(g);
    if (o->memory && base + clusterer_bytes(g, TMA_CLUSTERER_METIS) > (double)o->memory &&
        base + clusterer_bytes(g, TMA_CLUSTERER_LP) <= (double)o->memory)
        return TMA_CLUSTERER_LP;
    return TMA_CLUSTERER_METIS;
}

/* g cut into `parts` by the clusterer c (resolved: METIS or LP). */
static tma_status_t cluster_parts(const tma_graph_t *g, int64_t parts, uint64_t seed, tma_clusterer_t c,
                                  int32_t *part)
{
    return c == TMA_CLUSTERER_LP ? tma_graph_partition_lp(g, parts, seed, part)
                                 : tma_graph_partition_metis(g, parts, seed, part);
}

tma_status_t tma_graph_partition_random(const tma_graph_t *g, int32_t shards, uint64_t seed, int32_t *part)
{
    if (shards < 1) {
        tma_log_error(COMP, "the shard count must be at least 1, got %d", shards);
        return TMA_ERR_INVALID;
    }
    const uint64_t key = tma_hash64(seed ^ SALT_RANDOM);
    const int64_t n = g->num_nodes;
#pragma omp parallel for schedule(static)
    for (int64_t v = 0; v < n; v++)
        part[v] = (int32_t)(((__uint128_t)tma_hash64(key ^ (uint64_t)v) * (uint64_t)shards) >> 64);
    return TMA_OK;
}

tma_status_t tma_graph_partition_metis(const tma_graph_t *g, int64_t parts, uint64_t seed, int32_t *part)
{
    const int64_t n = g->num_nodes, entries = 2 * g->num_train_edges;
    if (n > INT32_MAX || entries > INT32_MAX) {
        tma_log_error(COMP,
                      "the training graph has %" PRId64 " nodes and %" PRId64 " adjacency entries; METIS (32-bit "
                      "idx_t) takes at most 2^31 - 1 of each: use --clusterer lp (or --scheme random)",
                      n, entries);
        return TMA_ERR_RANGE;
    }
    if (parts < 1 || parts > n) {
        tma_log_error(COMP, "METIS cannot cut %" PRId64 " nodes into %" PRId64 " parts", n, parts);
        return TMA_ERR_INVALID;
    }
    if (parts == 1) {
        memset(part, 0, (size_t)n * sizeof *part);
        return TMA_OK;
    }
    if (entries == 0) {
        tma_log_error(COMP, "the training graph has no edges: METIS has nothing to cut (use --scheme random)");
        return TMA_ERR_INVALID;
    }
    idx_t *xadj = malloc(((size_t)n + 1) * sizeof *xadj), *adjncy = malloc((size_t)entries * sizeof *adjncy);
    if (!xadj || !adjncy) {
        free(xadj);
        free(adjncy);
        tma_log_error(COMP, "out of memory preparing METIS input");
        return TMA_ERR_NOMEM;
    }
#pragma omp parallel for schedule(static)
    for (int64_t v = 0; v <= n; v++)
        xadj[v] = (idx_t)g->indptr[v];
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < entries; e++)
        adjncy[e] = (idx_t)g->indices[e];
    idx_t nv = (idx_t)n, ncon = 1, np = (idx_t)parts, objval = 0;
    idx_t options[METIS_NOPTIONS];
    METIS_SetDefaultOptions(options);
    options[METIS_OPTION_SEED] = (idx_t)(seed % INT32_MAX);
    options[METIS_OPTION_NUMBERING] = 0;
    int r = METIS_PartGraphKway(&nv, &ncon, xadj, adjncy, NULL, NULL, NULL, &np, NULL, NULL, options, &objval,
                                (idx_t *)part);
    free(xadj);
    free(adjncy);
    if (r != METIS_OK) {
        tma_log_error(COMP, "METIS_PartGraphKway into %" PRId64 " parts failed (%s)", parts,
                      r == METIS_ERROR_MEMORY  ? "out of memory"
                      : r == METIS_ERROR_INPUT ? "input error"
                                               : "error");
        return r == METIS_ERROR_MEMORY ? TMA_ERR_NOMEM : TMA_ERR_INTERNAL;
    }
    tma_log_debug(COMP, "METIS cut %" PRId64 " edges into %" PRId64 " parts", (int64_t)objval, parts);
    return TMA_OK;
}

tma_status_t tma_graph_partition_supernode(const tma_graph_t *g, int64_t clusters, int32_t shards, uint64_t seed,
                                           tma_clusterer_t clusterer, int32_t *cluster, int32_t *part)
{
    if (shards < 1 || clusters < shards) {
        tma_log_error(COMP, "supernode:%" PRId64 " needs at least as many clusters as shards (%d)", clusters, shards);
        return TMA_ERR_INVALID;
    }
    const int64_t n = g->num_nodes;
    int32_t *cl = cluster ? cluster : malloc((size_t)n * sizeof *cl);
    int64_t *order = malloc((size_t)clusters * sizeof *order);
    int32_t *deal = malloc((size_t)clusters * sizeof *deal);
    tma_status_t st = TMA_OK;
    if (!cl || !order || !deal) {
        tma_log_error(COMP, "out of memory");
        st = TMA_ERR_NOMEM;
        goto done;
    }
    if ((st = cluster_parts(g, clusters, seed, clusterer, cl)) != TMA_OK)
        goto done;
    /* Shuffle the clusters, then deal them round-robin: shard cluster counts
     * differ by at most one. */
    for (int64_t c = 0; c < clusters; c++)
        order[c] = c;
    tma_rng_t rng;
    tma_rng_seed(&rng, seed ^ SALT_DEAL, 0);
    tma_rng_shuffle_i64(&rng, order, clusters);
    for (int64_t i = 0; i < clusters; i++)
        deal[order[i]] = (int32_t)(i % shards);
#pragma omp parallel for schedule(static)
    for (int64_t v = 0; v < n; v++)
        part[v] = deal[cl[v]];
done:
    if (cl != cluster)
        free(cl);
    free(order);
    free(deal);
    return st;
}

/* ------------------------------------------------------------------ results */

void tma_partition_result_destroy(tma_partition_result_t *r)
{
    if (!r)
        return;
    free(r->shard_nodes);
    free(r->shard_edges);
    free(r->shard_clusters);
    free(r->shard_label_tv);
    free(r->shard_feature_dist);
    free(r);
}

static tma_partition_result_t *result_create(int32_t s)
{
    tma_partition_result_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->shard_nodes = calloc((size_t)s, sizeof(int64_t));
    r->shard_edges = calloc((size_t)s, sizeof(int64_t));
    r->shard_label_tv = calloc((size_t)s, sizeof(double));
    r->shard_feature_dist = calloc((size_t)s, sizeof(double));
    if (!r->shard_nodes || !r->shard_edges || !r->shard_label_tv || !r->shard_feature_dist) {
        tma_partition_result_destroy(r);
        return NULL;
    }
    return r;
}

/* ------------------------------------------------------------------ the folder */

static char *shard_name(int32_t s)
{
    return tma_strdup_printf("shard-%05d.tmag", s);
}

/* Removes partition.json first (the folder stops being complete), then
 * shard files of an earlier run. */
static tma_status_t clear_dir(const char *dir)
{
    tma_status_t st = tma_mkdir_p(dir);
    if (st != TMA_OK)
        return st;
    char *pj = tma_path_join(dir, "partition.json");
    if (!pj)
        return TMA_ERR_NOMEM;
    if (unlink(pj) != 0 && tma_file_exists(pj)) {
        tma_log_error(COMP, "%s: cannot remove the old partition.json", pj);
        free(pj);
        return TMA_ERR_IO;
    }
    free(pj);
    DIR *d = opendir(dir);
    if (!d) {
        tma_log_error(COMP, "%s: cannot open the folder", dir);
        return TMA_ERR_IO;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "shard-", 6) == 0 && len > 11 && strcmp(e->d_name + len - 5, ".tmag") == 0) {
            char *p = tma_path_join(dir, e->d_name);
            if (p)
                unlink(p);
            free(p);
        }
    }
    closedir(d);
    return TMA_OK;
}

/* Reused block buffers: memory bounded by the block, not the shard. */
typedef struct shard_bufs {
    int64_t *i64;   /* SHARD_BLOCK + 1 */
    int32_t *i32;   /* SHARD_BLOCK */
    unsigned char *features; /* SHARD_BLOCK feature rows as stored (f32, f16 or bf16) */
    float *row;              /* D: one row widened, for the statistics */
    int64_t *entries; /* cap_entries */
    int32_t *rels;    /* cap_entries (typed graphs) */
    int64_t cap_entries;
} shard_bufs_t;

static void bufs_free(shard_bufs_t *b)
{
    tma_free_aligned(b->i64);
    tma_free_aligned(b->i32);
    tma_free_aligned(b->features);
    tma_free_aligned(b->row);
    tma_free_aligned(b->entries);
    tma_free_aligned(b->rels);
}

typedef struct layout {
    int64_t *start; /* [S + 1]: shard s's nodes are order[start[s] .. start[s + 1]) */
    int64_t *order; /* nodes grouped by shard, ascending within a shard */
    int64_t *local; /* node -> its id within its shard */
    int64_t *sdeg;  /* node -> neighbours in its own shard */
} layout_t;

static void layout_free(layout_t *l)
{
    free(l->start);
    free(l->order);
    free(l->local);
    free(l->sdeg);
}

static tma_status_t make_layout(const tma_graph_t *g, const int32_t *part, int32_t S, layout_t *l)
{
    const int64_t n = g->num_nodes;
    l->start = calloc((size_t)S + 1, sizeof(int64_t));
    l->order = malloc((size_t)n * sizeof(int64_t));
    l->local = malloc((size_t)n * sizeof(int64_t));
    l->sdeg = malloc((size_t)n * sizeof(int64_t));
    if (!l->start || !l->order || !l->local || !l->sdeg) {
        tma_log_error(COMP, "out of memory laying out %" PRId64 " nodes", n);
        return TMA_ERR_NOMEM;
    }
    for (int64_t v = 0; v < n; v++)
        l->start[part[v] + 1]++;
    for (int32_t s = 0; s < S; s++)
        l->start[s + 1] += l->start[s];
    int64_t *cur = malloc((size_t)S * sizeof(int64_t));
    if (!cur)
        return TMA_ERR_NOMEM;
    memcpy(cur, l->start, (size_t)S * sizeof(int64_t));
    for (int64_t v = 0; v < n; v++) {
        int64_t p = cur[part[v]]++;
        l->order[p] = v;
        l->local[v] = p - l->start[part[v]];
    }
    free(cur);
#pragma omp parallel for schedule(dynamic, 4096)
    for (int64_t v = 0; v < n; v++) {
        int64_t k = 0;
        const int32_t s = part[v];
        for (int64_t e = g->indptr[v]; e < g->indptr[v + 1]; e++)
            k += part[g->indices[e]] == s;
        l->sdeg[v] = k;
    }
    return TMA_OK;
}

/* The entry sections (adjacency, or with `rels` the relation ids) of nodes
 * [0, ns), streamed in blocks of at most SHARD_BLOCK_ENTRIES entries (more
 * only for one node of a larger degree). */
static tma_status_t stream_entries(tmag_writer_t *w, const tma_graph_t *g, const int32_t *part, const layout_t *l,
                                   const int64_t *nodes, int64_t ns, int32_t s, shard_bufs_t *b, int rels)
{
    tma_status_t st = TMA_OK;
    for (int64_t i0 = 0; i0 < ns && st == TMA_OK;) {
        int64_t i1 = i0, ent = 0;
        while (i1 < ns && (i1 == i0 || ent + l->sdeg[nodes[i1]] <= SHARD_BLOCK_ENTRIES))
            ent += l->sdeg[nodes[i1++]];
        if (ent > b->cap_entries) {
            tma_free_aligned(b->entries);
            tma_free_aligned(b->rels);
            b->rels = NULL;
            b->entries = tma_alloc_aligned((size_t)ent * sizeof(int64_t));
            if (b->entries && tma_graph_is_typed(g))
                b->rels = tma_alloc_aligned((size_t)ent * sizeof(int32_t));
            b->cap_entries = b->entries && (b->rels || !tma_graph_is_typed(g)) ? ent : 0;
            if (!b->cap_entries) {
                tma_log_error(COMP, "out of memory for %" PRId64 " shard entries", ent);
                return TMA_ERR_NOMEM;
            }
        }
        int64_t out = 0;
        /* Local ids follow global order, so each row stays sorted. */
        for (int64_t i = i0; i < i1; i++) {
            const int64_t v = nodes[i];
            for (int64_t e = g->indptr[v]; e < g->indptr[v + 1]; e++) {
                int64_t u = g->indices[e];
                if (part[u] != s)
                    continue;
                if (rels)
                    b->rels[out] = g->edge_rel[e];
                else
                    b->entries[out] = l->local[u];
                out++;
            }
        }
        st = rels ? tmag_writer_append(w, b->rels, (size_t)out * sizeof(int32_t))
                  : tmag_writer_append(w, b->entries, (size_t)out * sizeof(int64_t));
        i0 = i1;
    }
    return st;
}

/* A per-node i64 or i32 section of the shard's nodes, a block at a time. */
enum { COL_INDPTR, COL_GIDS, COL_LABELS, COL_TYPES };

static tma_status_t stream_column(tmag_writer_t *w, const tma_graph_t *g, const layout_t *l, const int64_t *nodes,
                                  int64_t ns, shard_bufs_t *b, int col)
{
    tma_status_t st = TMA_OK;
    int64_t run = 0;
    if (col == COL_INDPTR)
        st = tmag_writer_append(w, &run, sizeof run);
    for (int64_t i0 = 0; i0 < ns && st == TMA_OK; i0 += SHARD_BLOCK) {
        const int64_t k = TMA_MIN(ns - i0, (int64_t)SHARD_BLOCK);
        for (int64_t i = 0; i < k; i++) {
            const int64_t v = nodes[i0 + i];
            if (col == COL_INDPTR)
                b->i64[i] = run += l->sdeg[v];
            else if (col == COL_GIDS)
                b->i64[i] = v;
            else
                b->i32[i] = col == COL_LABELS ? g->labels[v] : g->node_type[v];
        }
        st = col == COL_INDPTR || col == COL_GIDS ? tmag_writer_append(w, b->i64, (size_t)k * sizeof(int64_t))
                                                  : tmag_writer_append(w, b->i32, (size_t)k * sizeof(int32_t));
    }
    return st;
}

static tma_status_t section(tmag_writer_t *w, uint32_t id, uint32_t size, const void *data, size_t bytes)
{
    tma_status_t st = tmag_writer_section_begin(w, id, size);
    if (st == TMA_OK && bytes)
        st = tmag_writer_append(w, data, bytes);
    return st == TMA_OK ? tmag_writer_section_end(w) : st;
}

/* Writes shard s with the streaming writer, a block of nodes at a time, in
 * tma_graph_write's section order (the same bytes), and measures it. */
static tma_status_t write_shard(const tma_graph_t *g, const int32_t *part, const layout_t *l, int32_t s, int32_t S,
                                shard_bufs_t *b, const char *path, const double *gmean, const double *gdist,
                                tma_partition_result_t *r)
{
    double t0 = tma_clock_now();
    const int64_t *nodes = l->order + l->start[s];
    const int64_t ns = l->start[s + 1] - l->start[s];
    const int32_t D = g->feature_dim;
    int64_t entries = 0;
    for (int64_t i = 0; i < ns; i++)
        entries += l->sdeg[nodes[i]];
    double *fsum = calloc((size_t)(D > 0 ? D : 1), sizeof(double));
    int64_t *hist = calloc((size_t)(g->num_classes > 0 ? g->num_classes : 1), sizeof(int64_t));
    tma_graph_t *meta;
    tma_status_t st = fsum && hist ? tma_graph_create(&meta) : TMA_ERR_NOMEM;
    if (st != TMA_OK) {
        free(fsum);
        free(hist);
        return st;
    }
    meta->kind = TMA_GRAPH_SHARD;
    meta->num_nodes = ns;
    meta->num_edges = meta->num_train_edges = entries / 2;
    meta->feature_dim = D;
    meta->feat_dtype = g->feat_dtype;
    meta->num_classes = g->num_classes;
    meta->shard_index = s;
    meta->num_shards = S;
    meta->split_seed = g->split_seed;
    meta->graph_id = g->graph_id;
    if (tma_graph_is_typed(g)) {
        meta->num_node_types = g->num_node_types;
        meta->num_relations = g->num_relations;
    }
    tmag_writer_t *w = NULL;
    st = tmag_writer_begin(meta, path, &w);
    tma_graph_destroy(meta);
    if (st == TMA_OK && (st = tmag_writer_section_begin(w, SEC_INDPTR, 8)) == TMA_OK &&
        (st = stream_column(w, g, l, nodes, ns, b, COL_INDPTR)) == TMA_OK)
        st = tmag_writer_section_end(w);
    if (st == TMA_OK && (st = tmag_writer_section_begin(w, SEC_INDICES, 8)) == TMA_OK &&
        (st = stream_entries(w, g, part, l, nodes, ns, s, b, 0)) == TMA_OK)
        st = tmag_writer_section_end(w);
    /* Features, and the statistics summed in node order (deterministic). */
    /* Rows are copied as stored (a float16 graph keeps float16 shards). */
    const size_t rb = tma_graph_feat_row_bytes(g);
    if (st == TMA_OK)
        st = tmag_writer_section_begin(w, SEC_FEATURES, (uint32_t)tma_feat_dtype_size(g->feat_dtype));
    for (int64_t i0 = 0; i0 < ns && st == TMA_OK; i0 += SHARD_BLOCK) {
        const int64_t k = TMA_MIN(ns - i0, (int64_t)SHARD_BLOCK);
        for (int64_t i = 0; i < k; i++) {
            const int64_t v = nodes[i0 + i];
            if (D > 0)
                memcpy(b->features + (size_t)i * rb, (const char *)g->features + (size_t)v * rb, rb);
            tma_feat_widen(b->features + (size_t)i * rb, g->feat_dtype, (size_t)D, b->row);
            for (int32_t j = 0; j < D; j++)
                fsum[j] += b->row[j];
            if (g->labels)
                hist[g->labels[v]]++;
        }
        st = tmag_writer_append(w, b->features, (size_t)k * rb);
    }
    if (st == TMA_OK)
        st = tmag_writer_section_end(w);
    if (st == TMA_OK && g->labels && (st = tmag_writer_section_begin(w, SEC_LABELS, 4)) == TMA_OK &&
        (st = stream_column(w, g, l, nodes, ns, b, COL_LABELS)) == TMA_OK)
        st = tmag_writer_section_end(w);
    /* A shard has no evaluation edges or negatives. */
    static const uint32_t empty8[] = {SEC_VAL_EDGES, SEC_TEST_EDGES, SEC_VAL_NEG, SEC_TEST_NEG};
    for (size_t i = 0; i < sizeof empty8 / sizeof empty8[0] && st == TMA_OK; i++)
        st = section(w, empty8[i], 8, NULL, 0);
    if (st == TMA_OK && (st = tmag_writer_section_begin(w, SEC_GLOBAL_IDS, 8)) == TMA_OK &&
        (st = stream_column(w, g, l, nodes, ns, b, COL_GIDS)) == TMA_OK)
        st = tmag_writer_section_end(w);
    if (st == TMA_OK && tma_graph_is_typed(g)) {
        /* Types ride along; the partition itself never looked at them. */
        if ((st = tmag_writer_section_begin(w, SEC_NODE_TYPES, 4)) == TMA_OK &&
            (st = stream_column(w, g, l, nodes, ns, b, COL_TYPES)) == TMA_OK)
            st = tmag_writer_section_end(w);
        if (st == TMA_OK && (st = tmag_writer_section_begin(w, SEC_EDGE_RELS, 4)) == TMA_OK &&
            (st = stream_entries(w, g, part, l, nodes, ns, s, b, 1)) == TMA_OK)
            st = tmag_writer_section_end(w);
        if (st == TMA_OK)
            st = section(w, SEC_VAL_RELS, 4, NULL, 0);
        if (st == TMA_OK)
            st = section(w, SEC_TEST_RELS, 4, NULL, 0);
        if (st == TMA_OK)
            st = section(w, SEC_TYPE_FEAT_DIM, 4, g->type_feat_dim, (size_t)g->num_node_types * sizeof(int32_t));
        if (st == TMA_OK && g->names)
            st = section(w, SEC_NAMES, 1, g->names, (size_t)g->names_bytes);
    }
    if (st == TMA_OK) {
        st = tmag_writer_end(w, NULL);
        w = NULL;
    }
    tmag_writer_abort(w);

    double d2 = 0, tv = 0;
    for (int32_t j = 0; j < D; j++) {
        double diff = (ns ? fsum[j] / (double)ns : 0) - gmean[j];
        d2 += diff * diff;
    }
    for (int32_t c = 0; c < g->num_classes; c++)
        tv += fabs((ns ? (double)hist[c] / (double)ns : 0) - gdist[c]);
    r->shard_nodes[s] = ns;
    r->shard_edges[s] = entries / 2;
    r->shard_feature_dist[s] = ns ? sqrt(d2) : -1;
    r->shard_label_tv[s] = g->labels && ns ? tv / 2 : -1;
    free(fsum);
    free(hist);
    r->seconds_write += tma_clock_now() - t0;
    tma_log_debug(COMP, "shard %d: %" PRId64 " nodes written in %.3f s", s, ns, tma_clock_now() - t0);
    return st;
}

static cJSON *i64_array(const int64_t *v, int32_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (int32_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static cJSON *stat_array(const double *v, int32_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (int32_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, v[i] < 0 ? cJSON_CreateNull() : cJSON_CreateNumber(v[i]));
    return a;
}

static tma_status_t write_json(const tma_graph_t *g, const char *graph_path, const char *dir,
                               const tma_partition_result_t *r)
{
    const int32_t S = r->opts.num_shards;
    cJSON *o = cJSON_CreateObject();
    char id[32], *abs = realpath(graph_path, NULL);
    snprintf(id, sizeof id, "%016" PRIx64, g->graph_id);
    cJSON_AddStringToObject(o, "scheme", tma_partition_scheme_str(r->opts.scheme));
    if (r->opts.scheme == TMA_PARTITION_SUPERNODE)
        cJSON_AddNumberToObject(o, "clusters", (double)r->opts.num_clusters);
    if (r->opts.scheme != TMA_PARTITION_RANDOM)
        cJSON_AddStringToObject(o, "clusterer", tma_clusterer_str(r->opts.clusterer));
    cJSON_AddNumberToObject(o, "shards", S);
    cJSON_AddNumberToObject(o, "seed", (double)r->opts.seed);
    cJSON_AddStringToObject(o, "graph", graph_path);
    cJSON_AddStringToObject(o, "graph_abspath", abs ? abs : graph_path);
    cJSON_AddStringToObject(o, "graph_id", id);
    cJSON_AddNumberToObject(o, "nodes", (double)r->nodes);
    cJSON_AddNumberToObject(o, "train_edges", (double)r->train_edges);
    cJSON_AddNumberToObject(o, "edge_ratio", r->edge_ratio);
    cJSON_AddBoolToObject(o, "inference", 1); /* shard-NNNNN.infer.tmag beside each shard */
    cJSON_AddItemToObject(o, "label_tv", r->label_tv < 0 ? cJSON_CreateNull() : cJSON_CreateNumber(r->label_tv));
    cJSON_AddNumberToObject(o, "feature_mean_dist", r->feature_mean_dist);
    cJSON_AddItemToObject(o, "shard_nodes", i64_array(r->shard_nodes, S));
    cJSON_AddItemToObject(o, "shard_edges", i64_array(r->shard_edges, S));
    if (r->shard_clusters)
        cJSON_AddItemToObject(o, "shard_clusters", i64_array(r->shard_clusters, S));
    cJSON_AddItemToObject(o, "shard_label_tv", stat_array(r->shard_label_tv, S));
    cJSON_AddItemToObject(o, "shard_feature_dist", stat_array(r->shard_feature_dist, S));
    cJSON *files = cJSON_CreateArray();
    for (int32_t s = 0; s < S; s++) {
        char *nm = shard_name(s);
        cJSON_AddItemToArray(files, cJSON_CreateString(nm ? nm : "?"));
        free(nm);
    }
    cJSON_AddItemToObject(o, "files", files);
    cJSON_AddNumberToObject(o, "assign_seconds", r->seconds_assign);
    cJSON_AddNumberToObject(o, "shard_seconds", r->seconds_shards);
    cJSON_AddNumberToObject(o, "extract_seconds", r->seconds_extract);
    cJSON_AddNumberToObject(o, "write_seconds", r->seconds_write);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    free(abs);
    char *path = tma_path_join(dir, "partition.json");
    tma_status_t st = path ? tma_json_write_file(path, o) : TMA_ERR_NOMEM;
    free(path);
    cJSON_Delete(o);
    return st;
}

/* Buffers for the largest shard of the layout (reused shard after shard). */
static tma_status_t bufs_alloc(const tma_graph_t *g, shard_bufs_t *b)
{
    b->i64 = tma_alloc_aligned((SHARD_BLOCK + 1) * sizeof(int64_t));
    b->i32 = tma_alloc_aligned(SHARD_BLOCK * sizeof(int32_t));
    b->features = tma_alloc_aligned((size_t)SHARD_BLOCK * tma_graph_feat_row_bytes(g) + 1);
    b->row = tma_alloc_aligned(((size_t)g->feature_dim + 1) * sizeof(float));
    if (!b->i64 || !b->i32 || !b->features || !b->row) {
        tma_log_error(COMP, "out of memory for a block of %d shard nodes", SHARD_BLOCK);
        return TMA_ERR_NOMEM;
    }
    return TMA_OK;
}

uint64_t tma_partition_peak_bytes(const tma_graph_t *g, const tma_partition_opts_t *o)
{
    double b = base_bytes(g);
    if (o->scheme != TMA_PARTITION_RANDOM)
        b += clusterer_bytes(g, tma_partition_clusterer(g, o));
    return b > 1.8e19 ? UINT64_MAX : (uint64_t)b;
}

/* Every shard's file and, beside it, its inference file (its full rows and
 * duties, for an evaluator rank), then the statistics over the shards. */
static tma_status_t write_shards(const tma_graph_t *g, const int32_t *part, const layout_t *l, int32_t S,
                                 shard_bufs_t *b, const char *dir, const double *gmean, const double *gdist,
                                 tma_partition_result_t *r)
{
    int64_t kept = 0;
    double tv_sum = 0, fd_sum = 0;
    int32_t nonempty = 0;
    tma_status_t st = TMA_OK;
    for (int32_t s = 0; s < S && st == TMA_OK; s++) {
        char *nm = shard_name(s), *path = nm ? tma_path_join(dir, nm) : NULL;
        free(nm);
        st = path ? write_shard(g, part, l, s, S, b, path, gmean, gdist, r) : TMA_ERR_NOMEM;
        free(path);
        const double ti = tma_clock_now();
        nm = tma_partition_infer_name(s);
        path = nm ? tma_path_join(dir, nm) : NULL;
        free(nm);
        if (st == TMA_OK)
            st = path ? graph_infer_write(g, part, l->local, l->order + l->start[s], l->start[s + 1] - l->start[s], s,
                                          S, path)
                      : TMA_ERR_NOMEM;
        free(path);
        r->seconds_write += tma_clock_now() - ti;
        kept += r->shard_edges[s];
        if (r->shard_nodes[s] > 0) {
            nonempty++;
            tv_sum += r->shard_label_tv[s];
            fd_sum += r->shard_feature_dist[s];
        }
    }
    r->edge_ratio = g->num_train_edges ? (double)kept / (double)g->num_train_edges : 0;
    r->label_tv = g->labels ? tv_sum / nonempty : -1;
    r->feature_mean_dist = fd_sum / nonempty;
    return st;
}

tma_status_t tma_partition_run(const tma_graph_t *g, const char *graph_path, const tma_partition_opts_t *o,
                               const char *dir, tma_partition_result_t **res_p)
{
    const double t0 = tma_clock_now();
    const int64_t n = g->num_nodes;
    const int32_t S = o->num_shards, D = g->feature_dim;
    if (g->kind != TMA_GRAPH_FULL) {
        tma_log_error(COMP, "%s is a shard, not a whole graph: partition the graph it came from", graph_path);
        return TMA_ERR_INVALID;
    }
    if (S < 1 || S > n || S > (1 << 20)) {
        tma_log_error(COMP, "--shards must be in [1, min(nodes, 2^20)] (nodes: %" PRId64 "), got %d", n, S);
        return TMA_ERR_INVALID;
    }
    if (o->seed >= (uint64_t)TMA_GRAPH_MAX_SEED) {
        tma_log_error(COMP, "--seed must be below 2^53");
        return TMA_ERR_INVALID;
    }
    const uint64_t need = tma_partition_peak_bytes(g, o);
    const tma_clusterer_t cl = tma_partition_clusterer(g, o);
    if (o->memory && need > o->memory) {
        tma_log_error(COMP, "%s: the %s scheme%s%s needs about %.0f MiB for %" PRId64 " nodes and %" PRId64
                      " training edges, over the memory budget of %.0f MiB: give a larger --memory%s",
                      graph_path, tma_partition_scheme_str(o->scheme), cl ? " with clusterer " : "",
                      cl ? tma_clusterer_str(cl) : "", (double)need / (1 << 20), n, g->num_train_edges,
                      (double)o->memory / (1 << 20),
                      cl == TMA_CLUSTERER_METIS ? ", or use --clusterer lp (label propagation, 16 bytes a node)"
                      : cl == TMA_CLUSTERER_LP  ? ", or use --scheme random"
                                                : "");
        return TMA_ERR_NOMEM;
    }
    if (o->scheme != TMA_PARTITION_RANDOM && o->clusterer == TMA_CLUSTERER_AUTO && cl == TMA_CLUSTERER_LP)
        tma_log_info(COMP, "%s: METIS cannot take this graph (%s): clustering by label propagation "
                           "(--clusterer lp)",
                     graph_path,
                     g->num_nodes > INT32_MAX || 2 * g->num_train_edges > INT32_MAX
                         ? "2^31 or more nodes or adjacency entries"
                         : "over the memory budget");
    tma_partition_result_t *r = result_create(S);
    int32_t *part = malloc((size_t)n * sizeof *part), *cluster = NULL;
    double *gmean = calloc((size_t)(D > 0 ? D : 1), sizeof(double));
    double *gdist = calloc((size_t)(g->num_classes > 0 ? g->num_classes : 1), sizeof(double));
    layout_t l = {0};
    shard_bufs_t b = {0};
    tma_status_t st = TMA_OK;
    if (!r || !part || !gmean || !gdist) {
        tma_log_error(COMP, "out of memory for %" PRId64 " nodes", n);
        st = TMA_ERR_NOMEM;
        goto done;
    }
    r->opts = *o;
    r->opts.clusterer = cl; /* as resolved */
    r->nodes = n;
    r->train_edges = g->num_train_edges;
    switch (o->scheme) {
    case TMA_PARTITION_RANDOM:
        st = tma_graph_partition_random(g, S, o->seed, part);
        break;
    case TMA_PARTITION_METIS:
        st = cluster_parts(g, S, o->seed, cl, part);
        break;
    case TMA_PARTITION_SUPERNODE:
        if (o->num_clusters > n) {
            tma_log_error(COMP, "supernode:%" PRId64 " asks for more clusters than the %" PRId64 " nodes", o->num_clusters, n);
            st = TMA_ERR_INVALID;
            goto done;
        }
        r->shard_clusters = calloc((size_t)S, sizeof(int64_t));
        cluster = malloc((size_t)n * sizeof *cluster);
        if (!r->shard_clusters || !cluster) {
            st = TMA_ERR_NOMEM;
            goto done;
        }
        st = tma_graph_partition_supernode(g, o->num_clusters, S, o->seed, cl, cluster, part);
        if (st == TMA_OK) {
            /* Clusters per shard, as dealt (a cluster METIS left empty still counts). */
            for (int64_t i = 0; i < o->num_clusters; i++)
                r->shard_clusters[i % S]++;
        }
        break;
    default:
        tma_log_error(COMP, "unknown partition scheme %d", (int)o->scheme);
        st = TMA_ERR_INVALID;
    }
    if (st != TMA_OK)
        goto done;
    r->seconds_assign = tma_clock_now() - t0;

    double tl = tma_clock_now();
    if ((st = make_layout(g, part, S, &l)) != TMA_OK)
        goto done;
    r->seconds_extract = tma_clock_now() - tl;
    tma_log_debug(COMP, "layout of %" PRId64 " nodes: %.3f s", n, r->seconds_extract);
    if ((st = clear_dir(dir)) != TMA_OK)
        goto done;
    /* The whole graph's feature mean and label distribution. */
    for (int64_t v = 0; v < n; v++) {
        for (int32_t j = 0; j < D; j++)
            gmean[j] += tma_graph_feat_at(g, v * D + j);
        if (g->labels)
            gdist[g->labels[v]] += 1;
    }
    for (int32_t j = 0; j < D; j++)
        gmean[j] /= (double)n;
    for (int32_t c = 0; c < g->num_classes; c++)
        gdist[c] /= (double)n;

    if ((st = bufs_alloc(g, &b)) != TMA_OK || (st = write_shards(g, part, &l, S, &b, dir, gmean, gdist, r)) != TMA_OK)
        goto done;
    r->seconds = tma_clock_now() - t0;
    r->seconds_shards = r->seconds - r->seconds_assign;
    st = write_json(g, graph_path, dir, r);
done:
    bufs_free(&b);
    layout_free(&l);
    free(part);
    free(cluster);
    free(gmean);
    free(gdist);
    if (st != TMA_OK) {
        tma_partition_result_destroy(r);
        return st;
    }
    *res_p = r;
    return TMA_OK;
}

/* ------------------------------------------------------------------ loading a partition folder */

void tma_partition_info_destroy(tma_partition_info_t *info)
{
    if (!info)
        return;
    if (info->shard_paths)
        for (int32_t s = 0; s < info->num_shards; s++)
            free(info->shard_paths[s]);
    free(info->shard_paths);
    free(info->shard_nodes);
    free(info->shard_edges);
    free(info->dir);
    free(info->scheme);
    free(info->graph_path);
    free(info);
}

/* An array of exactly n non-negative integers under `key`. */
static tma_status_t json_i64_array(const cJSON *root, const char *key, int32_t n, const char *ctx, int64_t **out_p)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n) {
        tma_log_error(COMP, "%s: \"%s\" must be an array of %d numbers", ctx, key, n);
        return TMA_ERR_CONFIG;
    }
    int64_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v)
        return TMA_ERR_NOMEM;
    int32_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, a)
    {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble != floor(it->valuedouble)) {
            tma_log_error(COMP, "%s: \"%s\"[%d] is not a non-negative integer", ctx, key, i);
            free(v);
            return TMA_ERR_CONFIG;
        }
        v[i++] = (int64_t)it->valuedouble;
    }
    *out_p = v;
    return TMA_OK;
}

tma_status_t tma_partition_info_load(const char *dir, tma_partition_info_t **info_p)
{
    char *path = tma_path_join(dir, "partition.json");
    if (!path)
        return TMA_ERR_NOMEM;
    if (!tma_file_exists(path)) {
        tma_log_error(COMP, "%s is missing: %s is not a complete partition folder (run tma partition)", path, dir);
        free(path);
        return TMA_ERR_NOT_FOUND;
    }
    cJSON *root = NULL;
    tma_partition_info_t *info = calloc(1, sizeof *info);
    tma_status_t st = info ? tma_json_load_file(path, &root) : TMA_ERR_NOMEM;
    if (st != TMA_OK)
        goto fail;
    int64_t shards, seed, clusters, nodes, train;
    const char *scheme, *gid, *gpath;
    if ((st = tma_json_get_string(root, "scheme", NULL, path, &scheme)) != TMA_OK ||
        (st = tma_json_get_int(root, "shards", -1, 1, 1 << 20, path, &shards)) != TMA_OK ||
        (st = tma_json_get_int(root, "seed", -1, 0, TMA_GRAPH_MAX_SEED, path, &seed)) != TMA_OK ||
        (st = tma_json_get_int(root, "clusters", 0, 0, INT32_MAX, path, &clusters)) != TMA_OK ||
        (st = tma_json_get_int(root, "nodes", 0, 0, INT64_MAX, path, &nodes)) != TMA_OK ||
        (st = tma_json_get_int(root, "train_edges", 0, 0, INT64_MAX, path, &train)) != TMA_OK ||
        (st = tma_json_get_string(root, "graph_id", NULL, path, &gid)) != TMA_OK ||
        (st = tma_json_get_string(root, "graph_abspath", NULL, path, &gpath)) != TMA_OK ||
        (st = tma_json_get_double(root, "edge_ratio", -1, 0, 1, path, &info->edge_ratio)) != TMA_OK ||
        (st = tma_json_get_bool(root, "inference", 0, path, &info->inference)) != TMA_OK)
        goto fail;
    if (!scheme || !gid || !gpath || shards < 1 || seed < 0 || info->edge_ratio < 0) {
        tma_log_error(COMP, "%s: scheme, shards, seed, edge_ratio, graph_id and graph_abspath are required", path);
        st = TMA_ERR_CONFIG;
        goto fail;
    }
    tma_partition_opts_t po;
    if (tma_partition_scheme_parse(scheme, &po) != TMA_OK && strcmp(scheme, "supernode") != 0) {
        tma_log_error(COMP, "%s: unknown scheme \"%s\"", path, scheme);
        st = TMA_ERR_CONFIG;
        goto fail;
    }
    char *end;
    info->graph_id = strtoull(gid, &end, 16);
    if (*end || !*gid) {
        tma_log_error(COMP, "%s: graph_id \"%s\" is not a hex id", path, gid);
        st = TMA_ERR_CONFIG;
        goto fail;
    }
    info->num_shards = (int32_t)shards;
    info->seed = (uint64_t)seed;
    info->num_clusters = clusters;
    info->nodes = nodes;
    info->train_edges = train;
    info->dir = strdup(dir);
    info->scheme = strdup(scheme);
    info->graph_path = strdup(gpath);
    info->shard_paths = calloc((size_t)shards, sizeof(char *));
    if (!info->dir || !info->scheme || !info->graph_path || !info->shard_paths) {
        st = TMA_ERR_NOMEM;
        goto fail;
    }
    if ((st = json_i64_array(root, "shard_nodes", info->num_shards, path, &info->shard_nodes)) != TMA_OK ||
        (st = json_i64_array(root, "shard_edges", info->num_shards, path, &info->shard_edges)) != TMA_OK)
        goto fail;
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) != shards) {
        tma_log_error(COMP, "%s: \"files\" must list the %" PRId64 " shard files", path, shards);
        st = TMA_ERR_CONFIG;
        goto fail;
    }
    int32_t s = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, files)
    {
        if (!cJSON_IsString(it) || strchr(it->valuestring, '/')) {
            tma_log_error(COMP, "%s: \"files\"[%d] must be a file name in the folder", path, s);
            st = TMA_ERR_CONFIG;
            goto fail;
        }
        info->shard_paths[s] = tma_path_join(dir, it->valuestring);
        if (!info->shard_paths[s]) {
            st = TMA_ERR_NOMEM;
            goto fail;
        }
        s++;
    }
    cJSON_Delete(root);
    free(path);
    *info_p = info;
    return TMA_OK;
fail:
    cJSON_Delete(root);
    free(path);
    tma_partition_info_destroy(info);
    return st;
}

tma_status_t tma_partition_shard_check(const tma_partition_info_t *info, int32_t k)
{
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    if (k < 0 || k >= info->num_shards) {
        tma_log_error(COMP, "%s: shard %d is out of range: the partition has %d shards", info->dir, k,
                      info->num_shards);
        return TMA_ERR_RANGE;
    }
    const char *path = info->shard_paths[k];
    /* The usual failure on a cluster without a shared file system, said in
     * one line with the node: the file was not copied here. */
    if (access(path, F_OK) != 0 && errno == ENOENT) {
        tma_log_error(COMP, "node %s: shard %d's file %s is missing (copy it there, or point --data-dir at a "
                            "folder that holds partition.json and this node's shards)",
                      host, k, path);
        return TMA_ERR_NOT_FOUND;
    }
    if (access(path, R_OK) != 0) {
        tma_log_error(COMP, "node %s: shard %d's file %s cannot be read: %s", host, k, path, strerror(errno));
        return TMA_ERR_IO;
    }
    tmag_header_t h;
    tma_status_t st = tmag_header_read(path, &h);
    if (st != TMA_OK) {
        tma_log_error(COMP, "node %s: shard %d's file %s is not a readable .tmag shard", host, k, path);
        return st;
    }
    if (h.kind != TMA_GRAPH_SHARD || h.graph_id != info->graph_id || (int32_t)h.shard_index != k ||
        (int32_t)h.num_shards != info->num_shards) {
        tma_log_error(COMP, "node %s: %s is %s %u of %u of graph %016" PRIx64 ", not shard %d of %d of graph %016" PRIx64
                            " (%s/partition.json): the folder mixes files of different partitions",
                      host, path, h.kind == TMA_GRAPH_SHARD ? "shard" : "a whole graph, not a shard;", h.shard_index,
                      h.num_shards, h.graph_id, k, info->num_shards, info->graph_id, info->dir);
        return TMA_ERR_MISMATCH;
    }
    return TMA_OK;
}
