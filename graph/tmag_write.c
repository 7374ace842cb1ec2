/*
 * tmag_write.c: writing .tmag files (docs/formats.md): the streaming
 * section writer (a section at a time, appended in pieces, each checksummed
 * as it goes, the header last), tma_graph_write on top of it, and the
 * content id a graph's sections hash to.
 */
#include "graph_int.h"
#include "tmag_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define COMP "graph"

/* ------------------------------------------------------------------ writing */

typedef struct sec_src {
    uint32_t id;
    uint32_t elem_size;
    const void *data;
    uint64_t count;
} sec_src_t;

static int collect_sections(const tma_graph_t *g, sec_src_t *s)
{
    int n = 0;
    s[n++] = (sec_src_t){SEC_INDPTR, 8, g->indptr, (uint64_t)g->num_nodes + 1};
    s[n++] = (sec_src_t){SEC_INDICES, 8, g->indices, 2 * (uint64_t)g->num_train_edges};
    s[n++] = (sec_src_t){SEC_FEATURES, (uint32_t)tma_feat_dtype_size(g->feat_dtype), g->features,
                         (uint64_t)g->num_nodes * (uint64_t)g->feature_dim};
    if (g->labels)
        s[n++] = (sec_src_t){SEC_LABELS, 4, g->labels, (uint64_t)g->num_nodes};
    s[n++] = (sec_src_t){SEC_VAL_EDGES, 8, g->val_edges, 2 * (uint64_t)g->num_val};
    s[n++] = (sec_src_t){SEC_TEST_EDGES, 8, g->test_edges, 2 * (uint64_t)g->num_test};
    s[n++] = (sec_src_t){SEC_VAL_NEG, 8, g->val_neg, (uint64_t)g->num_val * (uint64_t)g->num_negatives};
    s[n++] = (sec_src_t){SEC_TEST_NEG, 8, g->test_neg, (uint64_t)g->num_test * (uint64_t)g->num_negatives};
    if (g->kind == TMA_GRAPH_SHARD)
        s[n++] = (sec_src_t){SEC_GLOBAL_IDS, 8, g->global_ids, (uint64_t)g->num_nodes};
    if (g->node_type) {
        s[n++] = (sec_src_t){SEC_NODE_TYPES, 4, g->node_type, (uint64_t)g->num_nodes};
        s[n++] = (sec_src_t){SEC_EDGE_RELS, 4, g->edge_rel, 2 * (uint64_t)g->num_train_edges};
        s[n++] = (sec_src_t){SEC_VAL_RELS, 4, g->val_rel, (uint64_t)g->num_val};
        s[n++] = (sec_src_t){SEC_TEST_RELS, 4, g->test_rel, (uint64_t)g->num_test};
        s[n++] = (sec_src_t){SEC_TYPE_FEAT_DIM, 4, g->type_feat_dim, (uint64_t)g->num_node_types};
        if (g->names)
            s[n++] = (sec_src_t){SEC_NAMES, 1, g->names, (uint64_t)g->names_bytes};
    }
    return n;
}

uint64_t tma_graph_content_id(const tma_graph_t *g)
{
    sec_src_t s[TMAG_MAX_SECTIONS];
    int n = collect_sections(g, s);
    uint64_t h = tmag_content_id_start((uint64_t)g->num_nodes, (uint64_t)g->num_edges, (uint32_t)g->feat_dtype);
    for (int i = 0; i < n; i++) {
        uint64_t crc = s[i].count ? graph_section_crc(s[i].data, s[i].count * s[i].elem_size) : 0;
        h = tma_hash64(h ^ ((uint64_t)s[i].id << 32 | crc)) ^ s[i].count;
    }
    return h ? h : 1;
}

/* ------------------------------------------------------------------ streaming writer */

#define TMAG_CRC_CHUNK ((uint64_t)16 << 20)

struct tmag_writer {
    tma_afile_t *af;
    char *path;
    tmag_header_t h;
    int nsec;
    int open;             /* a section is open */
    uint64_t sec_bytes;   /* bytes appended to the open section */
    uint32_t cur_crc;     /* CRC of the open chunk so far */
    uint64_t cur_len;     /* bytes in the open chunk */
    uint32_t *crcs;       /* the open section's finished chunk CRCs */
    uint64_t ncrcs, cap_crcs;
    int failed;           /* an earlier call failed: only abort is allowed */
};

tma_status_t tmag_writer_begin(const tma_graph_t *meta, const char *path, tmag_writer_t **w_p)
{
    *w_p = NULL;
    tmag_writer_t *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return TMA_ERR_NOMEM;
    }
    tma_status_t st = tma_afile_open(path, &w->af);
    if (st != TMA_OK) {
        free(w->path);
        free(w);
        return st;
    }
    tmag_header_t *h = &w->h;
    memcpy(h->magic, TMAG_MAGIC, 8);
    h->version = TMA_TMAG_VERSION_UNTYPED; /* version 2 once a node type section is written */
    h->header_bytes = TMAG_HEADER_BYTES;
    h->kind = (uint32_t)meta->kind;
    h->flags = meta->given_split ? TMAG_FLAG_GIVEN_SPLIT : 0u;
    h->num_nodes = (uint64_t)meta->num_nodes;
    h->num_edges = (uint64_t)meta->num_edges;
    h->num_train_edges = (uint64_t)meta->num_train_edges;
    h->num_val = (uint64_t)meta->num_val;
    h->num_test = (uint64_t)meta->num_test;
    h->feature_dim = (uint32_t)meta->feature_dim;
    h->num_negatives = (uint32_t)meta->num_negatives;
    h->num_classes = (uint32_t)meta->num_classes;
    h->shard_index = (uint32_t)meta->shard_index;
    h->num_shards = (uint32_t)meta->num_shards;
    h->split_seed = meta->split_seed;
    h->graph_id = meta->graph_id;
    h->num_node_types = (uint32_t)meta->num_node_types;
    h->num_relations = (uint32_t)meta->num_relations;
    h->feat_dtype = (uint32_t)meta->feat_dtype;
    /* A placeholder header: the real one is written by tmag_writer_end. */
    static const char zeros[TMAG_HEADER_BYTES];
    st = tma_afile_write(w->af, zeros, TMAG_HEADER_BYTES);
    if (st != TMA_OK) {
        tmag_writer_abort(w);
        return st;
    }
    *w_p = w;
    return TMA_OK;
}

static tma_status_t writer_fail(tmag_writer_t *w, tma_status_t st, const char *what)
{
    w->failed = 1;
    tma_log_error(COMP, "%s: %s", w->path, what);
    return st;
}

tma_status_t tmag_writer_section_begin(tmag_writer_t *w, uint32_t id, uint32_t elem_size)
{
    if (w->failed)
        return TMA_ERR_INVALID;
    if (w->open || w->nsec == TMAG_MAX_SECTIONS || elem_size == 0)
        return writer_fail(w, TMA_ERR_INTERNAL, "section begun out of order or past the section table");
    for (int i = 0; i < w->nsec; i++)
        if (w->h.sections[i].id == id)
            return writer_fail(w, TMA_ERR_INTERNAL, "section written twice");
    w->h.sections[w->nsec] = (tmag_section_t){id, elem_size, tma_afile_offset(w->af), 0, 0, 0};
    w->open = 1;
    w->sec_bytes = w->cur_len = w->ncrcs = 0;
    w->cur_crc = 0;
    return TMA_OK;
}

static int push_crc(tmag_writer_t *w, uint64_t n)
{
    if (w->ncrcs + n > w->cap_crcs) {
        uint64_t cap = w->cap_crcs ? w->cap_crcs : 64;
        while (cap < w->ncrcs + n)
            cap *= 2;
        uint32_t *c = realloc(w->crcs, cap * sizeof *c);
        if (!c)
            return -1;
        w->crcs = c;
        w->cap_crcs = cap;
    }
    return 0;
}

/* The CRC of each full 16 MiB chunk, as section_crc takes them: a block that
 * starts on a chunk boundary has its whole chunks checksummed in parallel. */
tma_status_t tmag_writer_append(tmag_writer_t *w, const void *data, size_t bytes)
{
    if (w->failed)
        return TMA_ERR_INVALID;
    if (!w->open)
        return writer_fail(w, TMA_ERR_INTERNAL, "append outside a section");
    const char *p = data;
    size_t left = bytes;
    while (left) {
        if (w->cur_len == 0 && left >= TMAG_CRC_CHUNK) {
            uint64_t k = left / TMAG_CRC_CHUNK;
            if (push_crc(w, k) != 0)
                return writer_fail(w, TMA_ERR_NOMEM, "out of memory for chunk checksums");
            uint32_t *out = w->crcs + w->ncrcs;
#pragma omp parallel for schedule(dynamic, 1)
            for (uint64_t c = 0; c < k; c++)
                out[c] = tma_crc32c(0, p + c * TMAG_CRC_CHUNK, TMAG_CRC_CHUNK);
            w->ncrcs += k;
            p += k * TMAG_CRC_CHUNK;
            left -= k * TMAG_CRC_CHUNK;
            continue;
        }
        uint64_t take = TMAG_CRC_CHUNK - w->cur_len;
        if (take > left)
            take = left;
        w->cur_crc = tma_crc32c(w->cur_crc, p, take);
        w->cur_len += take;
        p += take;
        left -= take;
        if (w->cur_len == TMAG_CRC_CHUNK) {
            if (push_crc(w, 1) != 0)
                return writer_fail(w, TMA_ERR_NOMEM, "out of memory for chunk checksums");
            w->crcs[w->ncrcs++] = w->cur_crc;
            w->cur_crc = 0;
            w->cur_len = 0;
        }
    }
    tma_status_t st = bytes ? tma_afile_write(w->af, data, bytes) : TMA_OK;
    if (st != TMA_OK)
        return writer_fail(w, st, "write failed");
    w->sec_bytes += bytes;
    return TMA_OK;
}

tma_status_t tmag_writer_section_end(tmag_writer_t *w)
{
    static const char zeros[TMAG_ALIGN];
    if (w->failed)
        return TMA_ERR_INVALID;
    if (!w->open)
        return writer_fail(w, TMA_ERR_INTERNAL, "section ended twice");
    tmag_section_t *s = &w->h.sections[w->nsec];
    if (w->sec_bytes % s->elem_size)
        return writer_fail(w, TMA_ERR_INTERNAL, "section length not a whole number of elements");
    if (w->cur_len) {
        if (push_crc(w, 1) != 0)
            return writer_fail(w, TMA_ERR_NOMEM, "out of memory for chunk checksums");
        w->crcs[w->ncrcs++] = w->cur_crc;
    }
    s->count = w->sec_bytes / s->elem_size;
    s->crc = w->ncrcs == 0 ? 0 : w->ncrcs == 1 ? w->crcs[0] : tma_crc32c(0, w->crcs, w->ncrcs * sizeof *w->crcs);
    if (s->id == SEC_LABELS)
        w->h.flags |= TMAG_FLAG_LABELS;
    if (s->id == SEC_NODE_TYPES)
        w->h.version = TMA_TMAG_VERSION;
    w->nsec++;
    w->open = 0;
    uint64_t pad = (TMAG_ALIGN - (tma_afile_offset(w->af) % TMAG_ALIGN)) % TMAG_ALIGN;
    tma_status_t st = pad ? tma_afile_write(w->af, zeros, pad) : TMA_OK;
    if (st != TMA_OK)
        return writer_fail(w, st, "write failed");
    return TMA_OK;
}

tma_status_t tmag_writer_end(tmag_writer_t *w, uint64_t *graph_id_p)
{
    tma_status_t st = TMA_OK;
    if (w->failed || w->open) {
        st = w->failed ? TMA_ERR_INVALID : TMA_ERR_INTERNAL;
        tmag_writer_abort(w);
        return st;
    }
    tmag_header_t *h = &w->h;
    h->num_sections = (uint32_t)w->nsec;
    if (h->version == TMA_TMAG_VERSION_UNTYPED)
        h->num_node_types = h->num_relations = 0;
    if (h->kind == TMA_GRAPH_FULL) {
        /* The content id, as tma_graph_content_id computes it. */
        uint64_t id = tmag_content_id_start(h->num_nodes, h->num_edges, h->feat_dtype);
        for (int i = 0; i < w->nsec; i++)
            id = tma_hash64(id ^ ((uint64_t)h->sections[i].id << 32 | h->sections[i].crc)) ^
                 h->sections[i].count;
        h->graph_id = id ? id : 1;
    }
    h->file_bytes = tma_afile_offset(w->af);
    unsigned char *hbuf = calloc(1, TMAG_HEADER_BYTES);
    if (!hbuf) {
        tmag_writer_abort(w);
        return TMA_ERR_NOMEM;
    }
    memcpy(hbuf, h, sizeof *h);
    uint32_t crc = tma_crc32c(0, hbuf, TMAG_HEADER_BYTES - 4);
    memcpy(hbuf + TMAG_HEADER_BYTES - 4, &crc, 4);
    st = tma_afile_pwrite(w->af, hbuf, TMAG_HEADER_BYTES, 0);
    free(hbuf);
    if (st != TMA_OK) {
        tmag_writer_abort(w);
        return st;
    }
    if (graph_id_p)
        *graph_id_p = h->graph_id;
    st = tma_afile_commit(w->af);
    w->af = NULL;
    tmag_writer_abort(w);
    return st;
}

void tmag_writer_abort(tmag_writer_t *w)
{
    if (!w)
        return;
    tma_afile_abort(w->af);
    free(w->crcs);
    free(w->path);
    free(w);
}

tma_status_t tma_graph_write(tma_graph_t *g, const char *path)
{
    tma_status_t st = tma_graph_validate(g, path);
    if (st != TMA_OK)
        return st;
    sec_src_t src[TMAG_MAX_SECTIONS];
    int nsec = collect_sections(g, src);
    tmag_writer_t *w;
    st = tmag_writer_begin(g, path, &w);
    if (st != TMA_OK)
        return st;
    for (int i = 0; i < nsec && st == TMA_OK; i++) {
        st = tmag_writer_section_begin(w, src[i].id, src[i].elem_size);
        if (st == TMA_OK)
            st = tmag_writer_append(w, src[i].data, src[i].count * src[i].elem_size);
        if (st == TMA_OK)
            st = tmag_writer_section_end(w);
    }
    if (st != TMA_OK) {
        tmag_writer_abort(w);
        return st;
    }
    uint64_t id;
    st = tmag_writer_end(w, &id);
    if (st == TMA_OK && g->kind == TMA_GRAPH_FULL)
        g->graph_id = id;
    return st;
}

