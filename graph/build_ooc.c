/*
 * build_ooc.c: the builder out of core, for graphs larger than a memory
 * budget.  The same cleaning, split and negatives as build.c, and the same
 * bytes in the written .tmag, from edges that arrive block by block:
 *
 *  1. runs: each block of edges becomes keys u << 32 | v for both
 *     directions (self-loops counted and dropped); a buffer of keys is
 *     sorted in pieces in parallel, each piece deduplicated and spilled to
 *     a temporary file as a run, with its CRC32C;
 *  2. merge: a k-way merge of the runs (each checked against its CRC) into
 *     the full adjacency, deduplicated across runs, written as indptr and
 *     indices temporary files that are then mapped read-only;
 *  3. split: the ranks build.c's draw_split draws, from the same stream,
 *     found in one pass over the mapped rows;
 *  4. negatives: build.c's own, against the mapped adjacency;
 *  5. write: the training CSR (the full one less the evaluation edges)
 *     streamed into the .tmag, then the features in blocks of rows from the
 *     source, the labels and the evaluation sections.
 *
 * The temporary files sit beside the output (.tma-spill-XXXXXX) and are
 * unlinked as soon as they are opened: nothing is left behind, whatever
 * happens to the process.  Node ids must be below 2^31 (two to a key).
 * Anonymous memory stays within the budget; the mapped adjacency is
 * file-backed and read-only, so the kernel may drop its pages.
 */
#include "graph_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define COMP "graph"

#define OOC_MIN_BUDGET ((uint64_t)16 << 20)
#define OOC_IO_BUF ((size_t)1 << 20)
#define OOC_MIN_READ_KEYS 1024
#define OOC_MAX_NODES ((int64_t)1 << 31)
#define OOC_MAX_PIECES 64

/* ------------------------------------------------------------------ spill files */

typedef struct spill {
    int fd;
    const char *dir;
    uint64_t size; /* bytes written, buffered ones included */
    char *buf;
    size_t len;
} spill_t;

static tma_status_t spill_open(spill_t *s, const char *dir)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->dir = dir;
    char *tmpl = tma_path_join(dir, ".tma-spill-XXXXXX");
    s->buf = malloc(OOC_IO_BUF);
    if (!tmpl || !s->buf) {
        free(tmpl);
        tma_log_error(COMP, "out of memory for a spill buffer");
        return TMA_ERR_NOMEM;
    }
    s->fd = mkstemp(tmpl);
    int err = errno;
    if (s->fd >= 0)
        unlink(tmpl);
    free(tmpl);
    if (s->fd < 0) {
        tma_log_error(COMP, "cannot create a temporary file in %s: %s", dir, strerror(err));
        return TMA_ERR_IO;
    }
    return TMA_OK;
}

static tma_status_t spill_write_raw(spill_t *s, const void *data, size_t bytes)
{
    const char *p = data;
    while (bytes > 0) {
        ssize_t k = write(s->fd, p, bytes);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int err = k < 0 ? errno : ENOSPC;
            tma_log_error(COMP, "writing a temporary file in %s failed after %.1f MiB: %s%s", s->dir,
                          (double)s->size / (1 << 20), strerror(err),
                          err == ENOSPC ? " (free space there, or write the output to another file system)" : "");
            return TMA_ERR_IO;
        }
        p += k;
        bytes -= (size_t)k;
    }
    return TMA_OK;
}

static tma_status_t spill_flush(spill_t *s)
{
    tma_status_t st = s->len ? spill_write_raw(s, s->buf, s->len) : TMA_OK;
    s->len = 0;
    return st;
}

static tma_status_t spill_put(spill_t *s, const void *data, size_t bytes)
{
    s->size += bytes;
    if (s->len + bytes <= OOC_IO_BUF) {
        memcpy(s->buf + s->len, data, bytes);
        s->len += bytes;
        return TMA_OK;
    }
    tma_status_t st = spill_flush(s);
    if (st != TMA_OK)
        return st;
    if (bytes >= OOC_IO_BUF)
        return spill_write_raw(s, data, bytes);
    memcpy(s->buf, data, bytes);
    s->len = bytes;
    return TMA_OK;
}

static tma_status_t spill_put_i64(spill_t *s, int64_t x)
{
    return spill_put(s, &x, sizeof x);
}

/* Reads bytes at off; a short read means the file lost data under us. */
static tma_status_t spill_read(const spill_t *s, void *data, size_t bytes, uint64_t off)
{
    char *p = data;
    while (bytes > 0) {
        ssize_t k = pread(s->fd, p, bytes, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            tma_log_error(COMP, "a temporary file in %s is torn: %s at offset %" PRIu64, s->dir,
                          k < 0 ? strerror(errno) : "it ends early", off);
            return TMA_ERR_IO;
        }
        p += k;
        off += (uint64_t)k;
        bytes -= (size_t)k;
    }
    return TMA_OK;
}

/* Maps the whole (flushed) file read-only. */
static tma_status_t spill_map(spill_t *s, const void **data_p)
{
    tma_status_t st = spill_flush(s);
    if (st != TMA_OK)
        return st;
    void *p = mmap(NULL, s->size, PROT_READ, MAP_SHARED, s->fd, 0);
    if (p == MAP_FAILED) {
        tma_log_error(COMP, "cannot map a temporary file in %s: %s", s->dir, strerror(errno));
        return TMA_ERR_IO;
    }
    *data_p = p;
    return TMA_OK;
}

static void spill_close(spill_t *s)
{
    if (s->fd >= 0)
        close(s->fd);
    free(s->buf);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}

/* ------------------------------------------------------------------ the build */

typedef struct run {
    uint64_t off, count;
    uint32_t crc;
} run_t;

typedef struct ooc {
    const graph_ooc_source_t *src;
    uint64_t budget;
    int64_t n;
    spill_t runs_file, indptr_file, indices_file;
    run_t *runs;
    int64_t nruns, cap_runs;
    int64_t m_in, loops, scattered, entries;
    int64_t max_id; /* the largest node id of any edge */
    const int64_t *indptr, *indices; /* mapped */
} ooc_t;

static tma_status_t push_run(ooc_t *b, const int64_t *keys, int64_t count)
{
    if (b->nruns == b->cap_runs) {
        int64_t cap = b->cap_runs ? 2 * b->cap_runs : 64;
        run_t *r = realloc(b->runs, (size_t)cap * sizeof *r);
        if (!r) {
            tma_log_error(COMP, "out of memory listing %" PRId64 " sorted runs", cap);
            return TMA_ERR_NOMEM;
        }
        b->runs = r;
        b->cap_runs = cap;
    }
    size_t bytes = (size_t)count * sizeof *keys;
    b->runs[b->nruns++] = (run_t){b->runs_file.size, (uint64_t)count, tma_crc32c(0, keys, bytes)};
    return spill_put(&b->runs_file, keys, bytes);
}

/* Sorts keys[0..len) in pieces, one a thread, deduplicates each and spills
 * each as a run. */
static tma_status_t flush_runs(ooc_t *b, int64_t *keys, int64_t len)
{
    if (len == 0)
        return TMA_OK;
    int pieces = tma_cpus_usable();
    if (pieces > OOC_MAX_PIECES)
        pieces = OOC_MAX_PIECES;
    if (pieces < 1 || len < (int64_t)pieces * 65536)
        pieces = 1;
    int64_t kept[OOC_MAX_PIECES];
#pragma omp parallel for schedule(dynamic, 1)
    for (int p = 0; p < pieces; p++) {
        int64_t a = len * p / pieces, e = len * (p + 1) / pieces, k = 0;
        graph_sort_i64(keys + a, e - a);
        for (int64_t i = a; i < e; i++)
            if (k == 0 || keys[i] != keys[a + k - 1])
                keys[a + k++] = keys[i];
        kept[p] = k;
    }
    tma_status_t st = TMA_OK;
    for (int p = 0; p < pieces && st == TMA_OK; p++)
        st = push_run(b, keys + len * p / pieces, kept[p]);
    return st;
}

/* Phase 1: every edge of the source into sorted, deduplicated runs. */
static tma_status_t make_runs(ooc_t *b)
{
    const graph_ooc_source_t *src = b->src;
    /* A chunk of pairs (1/16 of the budget) and a key buffer (5/8). */
    int64_t chunk = (int64_t)(b->budget / 16 / 16) / src->block * src->block;
    if (chunk < src->block)
        chunk = src->block;
    int64_t cap_keys = (int64_t)(b->budget * 5 / 8 / 8);
    if (cap_keys < 4 * chunk)
        cap_keys = 4 * chunk;
    int64_t *pairs = malloc((size_t)chunk * 2 * sizeof *pairs), *keys = malloc((size_t)cap_keys * sizeof *keys);
    tma_status_t st = TMA_OK;
    if (!pairs || !keys) {
        tma_log_error(COMP, "out of memory for the out-of-core buffers (%.0f MiB)",
                      (double)(chunk * 16 + cap_keys * 8) / (1 << 20));
        st = TMA_ERR_NOMEM;
        goto done;
    }
    int64_t len = 0;
    for (;;) {
        int64_t got = src->next(src->ctx, pairs, chunk);
        if (got < 0) {
            st = TMA_ERR_FORMAT;
            goto done;
        }
        if (got == 0)
            break;
        if (len + 2 * got > cap_keys) {
            if ((st = flush_runs(b, keys, len)) != TMA_OK)
                goto done;
            len = 0;
        }
        for (int64_t i = 0; i < got; i++) {
            int64_t u = pairs[2 * i], v = pairs[2 * i + 1];
            if (u < 0 || u >= b->n || v < 0 || v >= b->n) {
                tma_log_error(COMP, "edge %" PRId64 " (%" PRId64 ", %" PRId64 ") names a node outside [0, %" PRId64
                              ")", b->m_in + i, u, v, b->n);
                st = TMA_ERR_RANGE;
                goto done;
            }
            if (u > b->max_id || v > b->max_id)
                b->max_id = u > v ? u : v;
            if (u == v) {
                b->loops++;
                continue;
            }
            keys[len++] = u << 32 | v;
            keys[len++] = v << 32 | u;
        }
        b->m_in += got;
    }
    b->scattered = 2 * (b->m_in - b->loops);
    st = flush_runs(b, keys, len);
done:
    free(pairs);
    free(keys);
    return st;
}

/* The node count a source tells only at the end of its edges. */
static tma_status_t final_nodes(ooc_t *b)
{
    if (!b->src->final_nodes)
        return TMA_OK;
    int64_t n = b->src->final_nodes(b->src->ctx);
    if (n < 0)
        return TMA_ERR_FORMAT;
    if (n < 1 || n > OOC_MAX_NODES || n < b->max_id + 1) {
        tma_log_error(COMP, "the out-of-core builder takes 1 to 2^31 nodes, covering every edge's ids, not %" PRId64,
                      n);
        return TMA_ERR_UNSUPPORTED;
    }
    b->n = n;
    return TMA_OK;
}

typedef struct reader {
    int64_t *buf;
    int64_t pos, len;
    uint64_t left, off; /* keys still in the file, and where they start */
    uint32_t crc, want;
    int run;
} reader_t;

static tma_status_t reader_fill(ooc_t *b, reader_t *r, int64_t cap)
{
    int64_t take = (int64_t)(r->left < (uint64_t)cap ? r->left : (uint64_t)cap);
    tma_status_t st = spill_read(&b->runs_file, r->buf, (size_t)take * 8, r->off);
    if (st != TMA_OK)
        return st;
    r->crc = tma_crc32c(r->crc, r->buf, (size_t)take * 8);
    r->off += (uint64_t)take * 8;
    r->left -= (uint64_t)take;
    r->pos = 0;
    r->len = take;
    if (r->left == 0 && r->crc != r->want) {
        tma_log_error(COMP, "a temporary file in %s is torn: sorted run %d does not match its checksum",
                      b->runs_file.dir, r->run);
        return TMA_ERR_CHECKSUM;
    }
    return TMA_OK;
}

static int reader_less(const reader_t *x, const reader_t *y)
{
    return x->buf[x->pos] < y->buf[y->pos];
}

static void heap_down(reader_t **h, int64_t n, int64_t i)
{
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && reader_less(h[c + 1], h[c]))
            c++;
        if (!reader_less(h[c], h[i]))
            return;
        reader_t *t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
}

/* Appends key's entry to the adjacency files; rows before its node are closed. */
static tma_status_t emit(ooc_t *b, int64_t key, int64_t *row_p)
{
    const int64_t u = key >> 32;
    tma_status_t st = TMA_OK;
    for (; *row_p < u && st == TMA_OK; (*row_p)++)
        st = spill_put_i64(&b->indptr_file, b->entries);
    if (st != TMA_OK)
        return st;
    b->entries++;
    return spill_put_i64(&b->indices_file, key & 0xffffffff);
}

/* Phase 2: the runs merged into the full adjacency, mapped. */
static tma_status_t merge_runs(ooc_t *b)
{
    const int64_t R = b->nruns;
    int64_t cap = R ? (int64_t)(b->budget / 2 / 8) / R : 0;
    if (cap > (1 << 17))
        cap = 1 << 17;
    if (R > 0 && cap < OOC_MIN_READ_KEYS) {
        tma_log_error(COMP, "%" PRId64 " sorted runs are too many to merge within the memory budget of %.0f MiB; "
                      "give a larger --memory (at least %.0f MiB)",
                      R, (double)b->budget / (1 << 20), (double)R * OOC_MIN_READ_KEYS * 8 * 2 / (1 << 20) + 16);
        return TMA_ERR_NOMEM;
    }
    tma_status_t st = spill_flush(&b->runs_file);
    if (st != TMA_OK)
        return st;
    reader_t *rd = calloc((size_t)(R ? R : 1), sizeof *rd);
    reader_t **heap = calloc((size_t)(R ? R : 1), sizeof *heap);
    int64_t *bufs = malloc((size_t)(R ? R * cap : 1) * sizeof *bufs);
    if (!rd || !heap || !bufs) {
        tma_log_error(COMP, "out of memory merging %" PRId64 " sorted runs", R);
        st = TMA_ERR_NOMEM;
        goto done;
    }
    int64_t nh = 0;
    for (int64_t i = 0; i < R; i++) {
        rd[i] = (reader_t){bufs + i * cap, 0, 0, b->runs[i].count, b->runs[i].off, 0, b->runs[i].crc, (int)i};
        if (rd[i].left == 0)
            continue;
        if ((st = reader_fill(b, &rd[i], cap)) != TMA_OK)
            goto done;
        heap[nh++] = &rd[i];
    }
    for (int64_t i = nh / 2 - 1; i >= 0; i--)
        heap_down(heap, nh, i);
    int64_t row = 0, last = -1;
    if ((st = spill_put_i64(&b->indptr_file, 0)) != TMA_OK)
        goto done;
    while (nh > 0) {
        reader_t *r = heap[0];
        int64_t key = r->buf[r->pos++];
        /* Sorted runs merge in order, within the node range: anything else
         * is a damaged file, caught before it is acted on (a wild node id
         * would close billions of rows), not only at its run's checksum. */
        if (key < last || (key >> 32) >= b->n || (key & 0xffffffff) >= b->n) {
            tma_log_error(COMP, "a temporary file in %s is torn: sorted run %d holds an entry out of order or "
                          "outside the %" PRId64 " nodes", b->runs_file.dir, r->run, b->n);
            st = TMA_ERR_CHECKSUM;
            goto done;
        }
        if (key != last && (st = emit(b, key, &row)) != TMA_OK)
            goto done;
        last = key;
        if (r->pos == r->len) {
            if (r->left == 0) {
                heap[0] = heap[--nh];
            } else if ((st = reader_fill(b, r, cap)) != TMA_OK) {
                goto done;
            }
        }
        heap_down(heap, nh, 0);
    }
    for (; row < b->n && st == TMA_OK; row++)
        st = spill_put_i64(&b->indptr_file, b->entries);
done:
    free(rd);
    free(heap);
    free(bufs);
    spill_close(&b->runs_file);
    if (st != TMA_OK)
        return st;
    if (b->entries == 0) {
        tma_log_error(COMP, "no edges left after dropping %" PRId64 " self-loops and %" PRId64 " duplicates",
                      b->loops, (b->scattered - b->entries) / 2);
        return TMA_ERR_INVALID;
    }
    const void *ip, *ix;
    if ((st = spill_map(&b->indptr_file, &ip)) != TMA_OK)
        return st;
    b->indptr = ip;
    if ((st = spill_map(&b->indices_file, &ix)) != TMA_OK)
        return st;
    b->indices = ix;
    return TMA_OK;
}

typedef struct rank_ix {
    int64_t rank, i;
} rank_ix_t;

static int rank_cmp(const void *x, const void *y)
{
    const rank_ix_t *a = x, *c = y;
    return (a->rank > c->rank) - (a->rank < c->rank);
}

/* Phase 3: build.c's draw_split over the mapped rows: the same ranks and
 * orientations from the same stream, each rank found in one row pass. */
static tma_status_t draw_split(const ooc_t *b, const tma_graph_t *g, int64_t k, uint64_t seed, int64_t *eval)
{
    rank_ix_t *ri = malloc((size_t)(k ? k : 1) * sizeof *ri);
    int64_t *ranks = malloc((size_t)(k ? k : 1) * sizeof *ranks);
    tma_status_t st = TMA_OK;
    if (!ri || !ranks) {
        tma_log_error(COMP, "out of memory drawing the split");
        st = TMA_ERR_NOMEM;
        goto done;
    }
    tma_rng_t rng;
    tma_rng_seed(&rng, seed ^ GRAPH_SALT_SPLIT, 0);
    if ((st = graph_sample_ranks(b->entries / 2, k, &rng, ranks)) != TMA_OK)
        goto done;
    for (int64_t i = 0; i < k; i++) {
        ri[i] = (rank_ix_t){ranks[i], i};
        eval[2 * i] = (int64_t)(tma_rng_next(&rng) & 1); /* the orientation, for now */
    }
    qsort(ri, (size_t)k, sizeof *ri, rank_cmp);
    int64_t j = 0, upre = 0;
    for (int64_t v = 0; v < b->n && j < k; v++) {
        int64_t us = graph_upper_start(g, v), cnt = b->indptr[v + 1] - us;
        for (; j < k && ri[j].rank < upre + cnt; j++) {
            int64_t i = ri[j].i, w = b->indices[us + (ri[j].rank - upre)];
            int flip = (int)eval[2 * i];
            eval[2 * i] = flip ? w : v;
            eval[2 * i + 1] = flip ? v : w;
        }
        upre += cnt;
    }
done:
    free(ri);
    free(ranks);
    return st;
}

/* The writer's section [begin, appends, end] for an in-memory array. */
static tma_status_t write_array(tmag_writer_t *w, uint32_t id, uint32_t elem, const void *data, uint64_t count)
{
    tma_status_t st = tmag_writer_section_begin(w, id, elem);
    if (st == TMA_OK)
        st = tmag_writer_append(w, data, count * elem);
    if (st == TMA_OK)
        st = tmag_writer_section_end(w);
    return st;
}

/* Phase 5, the training CSR: the full one less the evaluation edges (both
 * directions, `removed`, sorted keys); counts the same-label entries. */
static tma_status_t write_csr(const ooc_t *b, tmag_writer_t *w, const int64_t *removed, int64_t nrem,
                              int64_t *buf, int64_t bufn, int64_t *same_p)
{
    const int64_t n = b->n;
    const int32_t *label = b->src->labels;
    tma_status_t st = tmag_writer_section_begin(w, SEC_INDPTR, 8);
    int64_t r = 0, len = 0;
    for (int64_t v = 0; v <= n && st == TMA_OK; v++) {
        while (r < nrem && (removed[r] >> 32) < v)
            r++;
        buf[len++] = b->indptr[v] - r;
        if (len == bufn || v == n) {
            st = tmag_writer_append(w, buf, (size_t)len * 8);
            len = 0;
        }
    }
    if (st == TMA_OK)
        st = tmag_writer_section_end(w);
    if (st == TMA_OK)
        st = tmag_writer_section_begin(w, SEC_INDICES, 8);
    int64_t same = 0;
    r = 0;
    for (int64_t v = 0; v < n && st == TMA_OK; v++) {
        for (int64_t e = b->indptr[v]; e < b->indptr[v + 1] && st == TMA_OK; e++) {
            int64_t x = b->indices[e];
            if (r < nrem && removed[r] == (v << 32 | x)) {
                r++;
                continue;
            }
            if (label)
                same += label[v] == label[x];
            buf[len++] = x;
            if (len == bufn) {
                st = tmag_writer_append(w, buf, (size_t)len * 8);
                len = 0;
            }
        }
    }
    if (st == TMA_OK && len)
        st = tmag_writer_append(w, buf, (size_t)len * 8);
    if (st == TMA_OK)
        st = tmag_writer_section_end(w);
    *same_p = same / 2;
    return st;
}

static tma_status_t write_features(const graph_ooc_source_t *src, tmag_writer_t *w, int64_t n)
{
    const int32_t F = src->feature_dim;
    int64_t rows = (int64_t)((4u << 20) / ((size_t)F * 4));
    if (rows < 1)
        rows = 1;
    float *buf = malloc((size_t)rows * (size_t)F * sizeof *buf);
    if (!buf) {
        tma_log_error(COMP, "out of memory for a block of feature rows");
        return TMA_ERR_NOMEM;
    }
    const size_t esz = tma_feat_dtype_size(src->feat_dtype);
    tma_status_t st = tmag_writer_section_begin(w, SEC_FEATURES, (uint32_t)esz);
    for (int64_t v = 0; v < n && st == TMA_OK; v += rows) {
        int64_t c = n - v < rows ? n - v : rows;
        src->features(src->ctx, v, c, buf);
        tma_feat_narrow(buf, (size_t)c * (size_t)F, src->feat_dtype, buf);
        st = tmag_writer_append(w, buf, (size_t)c * (size_t)F * esz);
    }
    free(buf);
    if (st == TMA_OK)
        st = tmag_writer_section_end(w);
    return st;
}

/* Phase 5: everything into `out`, section by section, in tma_graph_write's
 * order, so that the bytes are the in-memory path's. */
static tma_status_t write_graph(const ooc_t *b, const tma_graph_build_opts_t *o, const char *out, int64_t nv,
                                int64_t nt, const int64_t *eval, const int64_t *neg, uint64_t *graph_id_p,
                                double *homophily_p)
{
    const int64_t k = nv + nt, K = o->negatives;
    const graph_ooc_source_t *src = b->src;
    tma_graph_t meta;
    memset(&meta, 0, sizeof meta);
    meta.kind = TMA_GRAPH_FULL;
    meta.num_nodes = b->n;
    meta.num_edges = b->entries / 2;
    meta.num_train_edges = meta.num_edges - k;
    meta.num_val = nv;
    meta.num_test = nt;
    meta.feature_dim = src->feature_dim;
    meta.feat_dtype = src->feat_dtype;
    meta.num_negatives = (int32_t)K;
    meta.num_classes = src->labels ? src->num_classes : 0;
    meta.split_seed = o->seed;
    meta.num_node_types = 1;
    meta.num_relations = 1;
    const int64_t bufn = 1 << 16;
    int64_t *removed = malloc((size_t)(2 * k + 1) * sizeof *removed), *buf = malloc((size_t)bufn * sizeof *buf);
    tmag_writer_t *w = NULL;
    tma_status_t st = TMA_OK;
    if (!removed || !buf) {
        tma_log_error(COMP, "out of memory writing %s", out);
        st = TMA_ERR_NOMEM;
        goto done;
    }
    for (int64_t i = 0; i < k; i++) {
        removed[2 * i] = eval[2 * i] << 32 | eval[2 * i + 1];
        removed[2 * i + 1] = eval[2 * i + 1] << 32 | eval[2 * i];
    }
    graph_sort_i64(removed, 2 * k);
    int64_t same = 0;
    if ((st = tmag_writer_begin(&meta, out, &w)) != TMA_OK)
        goto done;
    if ((st = write_csr(b, w, removed, 2 * k, buf, bufn, &same)) != TMA_OK ||
        (st = write_features(src, w, b->n)) != TMA_OK ||
        (src->labels && (st = write_array(w, SEC_LABELS, 4, src->labels, (uint64_t)b->n)) != TMA_OK) ||
        (st = write_array(w, SEC_VAL_EDGES, 8, eval, 2 * (uint64_t)nv)) != TMA_OK ||
        (st = write_array(w, SEC_TEST_EDGES, 8, eval + 2 * nv, 2 * (uint64_t)nt)) != TMA_OK ||
        (st = write_array(w, SEC_VAL_NEG, 8, neg, (uint64_t)(nv * K))) != TMA_OK ||
        (st = write_array(w, SEC_TEST_NEG, 8, neg + nv * K, (uint64_t)(nt * K))) != TMA_OK) {
        tmag_writer_abort(w);
        goto done;
    }
    st = tmag_writer_end(w, graph_id_p);
    if (src->labels) {
        for (int64_t i = 0; i < k; i++)
            same += src->labels[eval[2 * i]] == src->labels[eval[2 * i + 1]];
        *homophily_p = (double)same / (double)meta.num_edges;
    } else {
        *homophily_p = -1;
    }
done:
    free(removed);
    free(buf);
    return st;
}

tma_status_t graph_build_ooc(const graph_ooc_source_t *src, const tma_graph_build_opts_t *o, uint64_t budget,
                             const char *out, tma_graph_build_report_t *rep_p, uint64_t *graph_id_p,
                             double *homophily_p)
{
    tma_graph_build_report_t rep;
    memset(&rep, 0, sizeof rep);
    double t0 = tma_clock_now();
    if (src->num_nodes < (src->final_nodes ? 0 : 1) || src->num_nodes > OOC_MAX_NODES) {
        tma_log_error(COMP, "the out-of-core builder takes 1 to 2^31 nodes, not %" PRId64, src->num_nodes);
        return TMA_ERR_UNSUPPORTED;
    }
    if (budget < OOC_MIN_BUDGET) {
        tma_log_error(COMP, "a memory budget of %.1f MiB is too small to make progress: building out of core "
                      "needs at least %.0f MiB beside the graph's per-node arrays",
                      (double)budget / (1 << 20), (double)OOC_MIN_BUDGET / (1 << 20));
        return TMA_ERR_NOMEM;
    }
    if (o->negatives < 0 || o->negatives > (1 << 20) || o->seed >= (uint64_t)TMA_GRAPH_MAX_SEED) {
        tma_log_error(COMP, "negatives must be in [0, 2^20] and the seed below 2^53");
        return TMA_ERR_INVALID;
    }
    char *dir = strdup(out), *slash = dir ? strrchr(dir, '/') : NULL;
    if (!dir)
        return TMA_ERR_NOMEM;
    if (slash)
        slash == dir ? (void)(slash[1] = '\0') : (void)(*slash = '\0');
    ooc_t b = {.src = src, .budget = budget, .n = src->num_nodes ? src->num_nodes : OOC_MAX_NODES, .max_id = -1};
    b.runs_file.fd = b.indptr_file.fd = b.indices_file.fd = -1;
    int64_t *eval = NULL, *neg = NULL;
    const char *spill_dir = slash ? dir : ".";
    tma_status_t st;
    if ((st = spill_open(&b.runs_file, spill_dir)) != TMA_OK ||
        (st = spill_open(&b.indptr_file, spill_dir)) != TMA_OK ||
        (st = spill_open(&b.indices_file, spill_dir)) != TMA_OK || (st = make_runs(&b)) != TMA_OK ||
        (st = final_nodes(&b)) != TMA_OK || (st = merge_runs(&b)) != TMA_OK)
        goto done;
    rep.input_edges = b.m_in;
    rep.self_loops = b.loops;
    rep.duplicates = (b.scattered - b.entries) / 2;
    rep.edges = b.entries / 2;
    double t1 = tma_clock_now();
    rep.seconds_adjacency = t1 - t0;

    const int64_t m = rep.edges;
    int64_t nv, nt;
    if ((st = graph_split_counts(o, m, &nv, &nt)) != TMA_OK)
        goto done;
    const int64_t k = nv + nt, K = o->negatives;
    tma_graph_t view;
    memset(&view, 0, sizeof view);
    view.num_nodes = b.n;
    view.indptr = b.indptr;
    view.indices = b.indices;
    eval = malloc((size_t)(k ? k : 1) * 2 * sizeof *eval);
    neg = malloc((size_t)(k * K > 0 ? k * K : 1) * sizeof *neg);
    if (!eval || !neg) {
        tma_log_error(COMP, "out of memory for %" PRId64 " evaluation edges and their negatives", k);
        st = TMA_ERR_NOMEM;
        goto done;
    }
    if ((st = draw_split(&b, &view, k, o->seed, eval)) != TMA_OK)
        goto done;
    double t2 = tma_clock_now();
    if ((st = graph_draw_all_negatives(&view, eval, k, (int32_t)K, o->seed, neg)) != TMA_OK)
        goto done;
    double t3 = tma_clock_now();
    if ((st = write_graph(&b, o, out, nv, nt, eval, neg, graph_id_p, homophily_p)) != TMA_OK)
        goto done;
    rep.train_edges = m - k;
    rep.val_edges = nv;
    rep.test_edges = nt;
    rep.negatives = (int32_t)K;
    rep.seconds_split = t2 - t1;
    rep.seconds_negatives = t3 - t2;
    rep.seconds_write = tma_clock_now() - t3;
    rep.out_of_core = 1;
    rep.spilled_runs = b.nruns;
    if (rep_p)
        *rep_p = rep;
done:
    if (b.indptr)
        munmap((void *)b.indptr, b.indptr_file.size);
    if (b.indices)
        munmap((void *)b.indices, b.indices_file.size);
    spill_close(&b.runs_file);
    spill_close(&b.indptr_file);
    spill_close(&b.indices_file);
    free(b.runs);
    free(eval);
    free(neg);
    free(dir);
    return st;
}
