/*
 * graph_int.h: helpers shared by the graph library's own files and not part
 * of its public interface: the random projection behind features, an
 * in-place sort of int64 runs, a line reader over plain or gzip text, and
 * the .npz (zip of .npy) reader.
 */
#ifndef TMA_GRAPH_INT_H
#define TMA_GRAPH_INT_H

#include "tma_graph.h"

#include <zlib.h>

/* ------------------------------------------------------------------ features (feat.c) */

/*
 * The seeded random projection: a fixed D-column matrix R with entries
 * +-1/sqrt(D) (a Rademacher / Achlioptas projection, which preserves squared
 * norms in expectation).  Row j of R is generated from tma_hash64, so any
 * entry is computed on demand and nothing of size (input dim x D) is kept.
 * Adds x * R[j, :] to row[0..D).
 */
void graph_feat_project_add(float *row, int32_t dim, int64_t j, float x, uint64_t seed);
/* Features of graphs without any: row v = R[v, :] (the projection of a
 * one-hot id), for v in [0, n).  Parallel; deterministic. */
void graph_feat_random_ids(float *features, int64_t n, int32_t dim, uint64_t seed);
/* The same rows [first, first + count) into rows[0 .. count * dim). */
void graph_feat_random_rows(float *rows, int64_t first, int64_t count, int32_t dim, uint64_t seed);
/* The seed the projection uses for a given import/generation seed. */
uint64_t graph_feat_seed(uint64_t seed);
/* Stores g's float32 features as type t (nothing for TMA_FEAT_F32): rounded
 * in place when f32 is the buffer g->features points to and g owns (pass
 * it), else into a new buffer of g's (f32 NULL: the features are mapped or
 * not g's to change).  Sets g->feat_dtype.  TMA_ERR_NOMEM (logged). */
tma_status_t graph_feat_store_as(tma_graph_t *g, float *f32, tma_feat_dtype_t t);

/* ------------------------------------------------------------------ graph storage (tmag.c) */

/* Hands the file map *map to g, which unmaps it when destroyed (*map is
 * zeroed): an imported graph's features may point straight into a mapped
 * features.npy.  TMA_ERR_INVALID when g already holds a map. */
tma_status_t graph_keep_map(tma_graph_t *g, tma_mmap_t *map);

/* ------------------------------------------------------------------ sorting (build.c) */

/* Sorts a[0..n) ascending (introsort; in place). */
void graph_sort_i64(int64_t *a, int64_t n);

/* ------------------------------------------------------------------ the builder's steps (build.c) */

/* The split's stream salt (tma_rng_seed(seed ^ GRAPH_SALT_SPLIT, 0)). */
#define GRAPH_SALT_SPLIT 0x5b1170dd5eedull
/* The validation and test counts of o->val and o->test against m cleaned
 * edges, leaving at least one training edge (logged when not). */
tma_status_t graph_split_counts(const tma_graph_build_opts_t *o, int64_t m, int64_t *nv_p, int64_t *nt_p);
/* k distinct ranks in [0, m), in random order (Floyd's algorithm, then a
 * shuffle), from one sequential stream. */
tma_status_t graph_sample_ranks(int64_t m, int64_t k, tma_rng_t *rng, int64_t *out);
/* Index of the first entry > v in v's sorted row. */
int64_t graph_upper_start(const tma_graph_t *g, int64_t v);
/* The K fixed negative tails of each of the n evaluation edges (untyped)
 * against g's full adjacency (only indptr, indices and num_nodes are read). */
tma_status_t graph_draw_all_negatives(const tma_graph_t *g, const int64_t *eval, int64_t n, int32_t K,
                                      uint64_t seed, int64_t *neg);

/* ------------------------------------------------------------------ the builder out of core (build_ooc.c) */

/* Where an out-of-core build takes its graph from: edges in blocks, feature
 * rows on demand, the labels (held by the source) if any. */
typedef struct graph_ooc_source {
    /* The node count; 0 when only the end of the edges tells it: then
     * final_nodes gives it (or -1 after logging an error). */
    int64_t num_nodes;
    int64_t (*final_nodes)(void *ctx);
    /* The next up to `cap` edges into pairs[0 .. 2 * count) (cap is a
     * multiple of `block`); the count, 0 at the end, -1 after logging an
     * error. */
    int64_t (*next)(void *ctx, int64_t *pairs, int64_t cap);
    int64_t block;
    /* Feature rows [first, first + count) into rows[0 .. count * feature_dim). */
    void (*features)(void *ctx, int64_t first, int64_t count, float *rows);
    void *ctx;
    int32_t feature_dim;
    tma_feat_dtype_t feat_dtype; /* rows are narrowed to it as they are written */
    int32_t num_classes;
    const int32_t *labels; /* [num_nodes], or NULL */
} graph_ooc_source_t;

/* Builds and writes `out` as tma_graph_build then tma_graph_write would, byte
 * for byte, with at most `budget` bytes of buffers (untyped graphs, fewer
 * than 2^31 nodes; temporary files beside `out`, removed whatever happens).
 * *homophily_p: as tma_graph_homophily, -1 without labels. */
tma_status_t graph_build_ooc(const graph_ooc_source_t *src, const tma_graph_build_opts_t *o, uint64_t budget,
                             const char *out, tma_graph_build_report_t *rep_p, uint64_t *graph_id_p,
                             double *homophily_p);

/* ------------------------------------------------------------------ text input (text.c) */

/* A reader of lines from a plain or gzip file (zlib reads both), with the
 * line number kept for error messages.  CR before LF is stripped; lines are
 * NUL-terminated in place. */
typedef struct graph_text_reader {
    gzFile gz;
    char *path;
    char *buf;
    size_t cap, start, end;
    int64_t line; /* number of the line last returned (1-based) */
    int eof;
} graph_text_reader_t;

/* Opens `path`; TMA_ERR_NOT_FOUND (logged) when it is missing. */
tma_status_t graph_text_open(graph_text_reader_t *tr, const char *path);
/* Next line: 1 and *line_p set, 0 at the end, or a negative status after
 * logging a read error (a truncated or corrupt gzip stream). */
int graph_text_next(graph_text_reader_t *tr, char **line_p, size_t *len_p);
void graph_text_close(graph_text_reader_t *tr);

/* Splits the next field off *p (separators: spaces, tabs, commas).  Returns
 * the field NUL-terminated, or NULL when the line has no more fields. */
char *graph_text_field(char **p);
/* Parse a node id (a non-negative integer) or a finite float; on failure log
 * "<path>:<line>: <what>: ..." and return TMA_ERR_FORMAT. */
tma_status_t graph_text_parse_id(const graph_text_reader_t *tr, const char *tok, const char *what,
                               int64_t *val_p);
tma_status_t graph_text_parse_float(const graph_text_reader_t *tr, const char *tok, const char *what,
                                  float *val_p);

/* ------------------------------------------------------------------ npz (npz.c) */

typedef enum { NPY_BOOL, NPY_INT, NPY_UINT, NPY_FLOAT, NPY_BYTES } graph_npy_kind_t;

/* One array of an .npz file, pointing into the file's map (a stored member)
 * or into the reader's inflated copy (a deflated one); valid until
 * graph_npz_close.  Or a whole .npy file (graph_npy_open: name NULL), valid
 * until its map is closed. */
typedef struct graph_npy {
    const char *name;
    char descr[16];
    graph_npy_kind_t kind;
    int itemsize; /* NPY_FLOAT: 2 (float16), 4 or 8 */
    int fortran;  /* stored in Fortran (column-major) order */
    int ndim;
    int64_t shape[4];
    int64_t count;
    const void *data;
} graph_npy_t;

typedef struct graph_npz graph_npz_t;

/* Maps an .npz file and reads its zip central directory.  Members are
 * checked when they are asked for. */
tma_status_t graph_npz_open(const char *path, graph_npz_t **z_p);
void graph_npz_close(graph_npz_t *z);
/* Finds numeric array `name` (member name.npy), inflates it if it is
 * deflated, checks its CRC-32 and parses its .npy header.
 * TMA_ERR_NOT_FOUND (logged only when `required`), TMA_ERR_UNSUPPORTED for
 * other zip methods, encryption, Fortran order or an unreadable dtype,
 * TMA_ERR_FORMAT for a broken header, corrupt deflate data, truncated data
 * or byte strings, TMA_ERR_CHECKSUM for a CRC mismatch. */
tma_status_t graph_npz_get(graph_npz_t *z, const char *name, int required, graph_npy_t *a_p);
/* The 0-d byte-string array `name` (scipy's `format`, b'csr') into buf
 * (NUL-terminated); any other dtype or shape is TMA_ERR_FORMAT. */
tma_status_t graph_npz_get_string(graph_npz_t *z, const char *name, char *buf, size_t size);
/* 1 when the file has a member `name`.npy. */
int graph_npz_has(graph_npz_t *z, const char *name);
/* The members' names, comma-separated (malloc'd; NULL without memory). */
char *graph_npz_names(const graph_npz_t *z);
/* Parses an .npy image of `size` bytes at p (magic, header, data): the
 * dtype (little-endian bool, int8-64, uint8-64, float16-64, byte strings),
 * the shape, the order, and that the data is exactly as long as the shape
 * says.  `where` names the file (and array) in the errors logged:
 * TMA_ERR_FORMAT (bad magic, broken header, truncated or overlong data),
 * TMA_ERR_UNSUPPORTED (another dtype, big-endian data, an unknown version).
 * a_p->data points into p; a_p->name is left NULL. */
tma_status_t graph_npy_parse(const char *where, const unsigned char *p, uint64_t size, graph_npy_t *a_p);
/* Maps the .npy file `path` and parses it (graph_npy_parse, errors naming
 * the file).  On success *map_p holds the map, which the caller closes with
 * tma_mmap_close; a_p->data points into it.  Any order is accepted. */
tma_status_t graph_npy_open(const char *path, tma_mmap_t *map_p, graph_npy_t *a_p);
/* Element i (in storage order) converted; the array must be numeric
 * (checked by the getters below, which log naming the array). */
tma_status_t graph_npy_check_int(const graph_npz_t *z, const graph_npy_t *a);
int64_t graph_npy_int(const graph_npy_t *a, int64_t i);
float graph_npy_float(const graph_npy_t *a, int64_t i);
const char *graph_npz_path(const graph_npz_t *z);


/* ------------------------------------------------------------------ .tmag streaming writer (tmag.c) */

/* Section ids of the .tmag format (docs/formats.md). */
enum {
    SEC_INDPTR = 1,
    SEC_INDICES = 2,
    SEC_FEATURES = 3,
    SEC_LABELS = 4,
    SEC_VAL_EDGES = 5,
    SEC_TEST_EDGES = 6,
    SEC_VAL_NEG = 7,
    SEC_TEST_NEG = 8,
    SEC_GLOBAL_IDS = 9,
    /* Version 2: types. */
    SEC_NODE_TYPES = 10,
    SEC_EDGE_RELS = 11,
    SEC_VAL_RELS = 12,
    SEC_TEST_RELS = 13,
    SEC_TYPE_FEAT_DIM = 14,
    SEC_NAMES = 15,
    /* A shard's inference file (kind 2): section 1, 2, 9 (and typed 10, 11) as
     * a shard's, with packed neighbours; then these. */
    SEC_NBR_DEG = 16,
    SEC_VAL_DUTIES = 17,
    SEC_TEST_DUTIES = 18,
};

/* Shard s's inference file at `path` (partition_infer.c): the full rows of
 * its nodes (nodes[0, ns), in increasing global id), packed with part[] and
 * local[] (each node's shard and local id). */
tma_status_t graph_infer_write(const tma_graph_t *g, const int32_t *part, const int64_t *local, const int64_t *nodes,
                               int64_t ns, int32_t s, int32_t S, const char *path);

/* A .tmag written section by section, in blocks, without holding any section
 * in memory: begin takes the header's scalars from `meta` (its arrays are not
 * read), each section is begun, appended to in blocks of any size and ended
 * (its 16 MiB chunk checksums taken on the way, as the format says), and end
 * writes the header (the content id of a full graph from the section
 * checksums, as tma_graph_content_id) and renames the file into place.
 * Nothing is left under `path` unless end succeeds; after a failure only
 * abort (or end, which aborts) may be called.  The caller checks the content:
 * unlike tma_graph_write, nothing is validated here. */
typedef struct tmag_writer tmag_writer_t;

tma_status_t tmag_writer_begin(const tma_graph_t *meta, const char *path, tmag_writer_t **w_p);
tma_status_t tmag_writer_section_begin(tmag_writer_t *w, uint32_t id, uint32_t elem_size);
tma_status_t tmag_writer_append(tmag_writer_t *w, const void *data, size_t bytes);
tma_status_t tmag_writer_section_end(tmag_writer_t *w);
/* Commits and frees `w`, also on failure; *graph_id_p (may be NULL) gets the
 * header's graph id. */
tma_status_t tmag_writer_end(tmag_writer_t *w, uint64_t *graph_id_p);
/* Removes the temporary file and frees `w`; accepts NULL. */
void tmag_writer_abort(tmag_writer_t *w);

#endif
