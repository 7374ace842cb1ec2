/*
 * tma_common.h: the base layer every other tma library builds on: status
 * codes, leveled logging, seeded random numbers, clocks, CRC32C, aligned
 * buffers, files (atomic writes, mmap, directories), JSON config helpers
 * over cJSON, and the default compute thread count.
 *
 * Thread-safety: everything here is safe to call from several threads at once
 * except where an object's comment says otherwise.  The only process-wide
 * state is the log configuration (level, tag, sink), set once at start-up.
 */
#ifndef TMA_COMMON_H
#define TMA_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TMA_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))

/* ------------------------------------------------------------------ status */

/*
 * 0 is success, negative values are errors.  The hundreds say what a failure
 * breaks, so recovery code can switch on tma_status_group():
 *   -1xx  the input (a file, config, flag or request is wrong; retrying will not help)
 *   -2xx  this process or machine (I/O, memory, a device)
 *   -3xx  a peer or the network (retry, fail over, or declare the peer dead)
 *   -4xx  the job's coordination state (a compare failed, a lease expired, fenced)
 */
typedef int tma_status_t;

enum {
    TMA_OK = 0,

    TMA_ERR_INVALID = -100,   /* bad argument or usage */
    TMA_ERR_FORMAT = -101,    /* malformed input file or record */
    TMA_ERR_CHECKSUM = -102,  /* stored checksum does not match the data */
    TMA_ERR_CONFIG = -103,    /* bad configuration value or key */
    TMA_ERR_NOT_FOUND = -104, /* file, key or item does not exist */
    TMA_ERR_MISMATCH = -105,  /* data made for another graph, model or version */
    TMA_ERR_RANGE = -106,     /* a value is out of its allowed range */

    TMA_ERR_IO = -200,          /* read/write/open failed */
    TMA_ERR_NOMEM = -201,       /* out of host memory */
    TMA_ERR_UNSUPPORTED = -202, /* not supported by this build or platform */
    TMA_ERR_DEVICE = -203,      /* a CUDA or cuBLAS call failed */
    TMA_ERR_NO_DEVICE = -204,   /* no usable GPU */
    TMA_ERR_DEVICE_NOMEM = -205,/* out of device memory */
    TMA_ERR_INTERNAL = -206,    /* a bug: an invariant did not hold */

    TMA_ERR_UNAVAILABLE = -300, /* the service or peer cannot be reached */
    TMA_ERR_TIMEOUT = -301,     /* no answer within the deadline */
    TMA_ERR_PEER_FAILED = -302, /* the peer died or closed mid-operation */
    TMA_ERR_MALFORMED = -303,   /* a message or response could not be parsed */
    TMA_ERR_PERMISSION = -304,  /* authentication or authorisation refused */
    TMA_ERR_CLOSED = -305,      /* the local object was closed */

    TMA_ERR_COMPARE_FAILED = -400, /* a transaction's compare did not hold */
    TMA_ERR_LEASE_EXPIRED = -401,  /* the lease is gone */
    TMA_ERR_FENCED = -402,         /* a newer epoch or owner took over */
    TMA_ERR_CANCELLED = -403,      /* stopped on request */
    TMA_ERR_COMPACTED = -404,      /* the revision asked for was compacted */
};

typedef enum {
    TMA_GROUP_OK = 0,
    TMA_GROUP_INPUT = 1,
    TMA_GROUP_SYSTEM = 2,
    TMA_GROUP_PEER = 3,
    TMA_GROUP_JOB = 4,
} tma_status_group_t;

/* A short constant description ("checksum mismatch"); never NULL. */
const char *tma_status_str(tma_status_t st);
/* Which of the groups above a status belongs to. */
tma_status_group_t tma_status_group(tma_status_t st);

/* ------------------------------------------------------------------ logging */

typedef enum {
    TMA_LOG_ERROR = 0,
    TMA_LOG_WARN = 1,
    TMA_LOG_INFO = 2,
    TMA_LOG_DEBUG = 3,
} tma_log_level_t;

/* Messages above this level are dropped.  Default: INFO, or the TMA_LOG_LEVEL
 * environment variable (error|warn|info|debug) read on first use. */
void tma_log_set_level(tma_log_level_t level);
tma_log_level_t tma_log_get_level(void);
/* Parses "error", "warn", "info", "debug"; TMA_ERR_INVALID otherwise. */
tma_status_t tma_log_parse_level(const char *name, tma_log_level_t *level_p);
/* A short tag naming this process in every line ("worker-2"); copied. */
void tma_log_set_tag(const char *tag);
/* Where lines go (default stderr).  The stream is not closed by tma. */
void tma_log_set_stream(FILE *stream);

/* One line: "<time> <LEVEL> [tag] component: message".  Thread-safe. */
void tma_log_msg(tma_log_level_t level, const char *component, const char *fmt, ...) TMA_PRINTF(3, 4);
void tma_log_vmsg(tma_log_level_t level, const char *component, const char *fmt, va_list ap);

#define tma_log_error(comp, ...) tma_log_msg(TMA_LOG_ERROR, comp, __VA_ARGS__)
#define tma_log_warn(comp, ...) tma_log_msg(TMA_LOG_WARN, comp, __VA_ARGS__)
#define tma_log_info(comp, ...) tma_log_msg(TMA_LOG_INFO, comp, __VA_ARGS__)
#define tma_log_debug(comp, ...)                                                                   \
    do {                                                                                           \
        if (tma_log_get_level() >= TMA_LOG_DEBUG)                                                  \
            tma_log_msg(TMA_LOG_DEBUG, comp, __VA_ARGS__);                                         \
    } while (0)

/* ------------------------------------------------------------------ random numbers */

/* xoshiro256** seeded through splitmix64.  A value type: copy it to fork a
 * stream; one generator must not be shared between threads. */
typedef struct tma_rng {
    uint64_t s[4];
} tma_rng_t;

/* Seeds from (seed, stream): different streams give independent sequences. */
void tma_rng_seed(tma_rng_t *rng, uint64_t seed, uint64_t stream);
uint64_t tma_rng_next(tma_rng_t *rng);
/* Uniform in [0, n) without modulo bias; n > 0. */
uint64_t tma_rng_below(tma_rng_t *rng, uint64_t n);
/* Uniform in [0, 1). */
double tma_rng_uniform(tma_rng_t *rng);
/* Standard normal (Box-Muller). */
double tma_rng_normal(tma_rng_t *rng);
/* Fisher-Yates shuffle of n int64 values. */
void tma_rng_shuffle_i64(tma_rng_t *rng, int64_t *v, int64_t n);

/* A stateless 64-bit mix (splitmix64 finaliser): hash(seed ^ key) gives
 * per-item random values that do not depend on thread count or order. */
static inline uint64_t tma_hash64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* ------------------------------------------------------------------ clocks */

/* Monotonic time in seconds (for intervals and deadlines). */
double tma_clock_now(void);
/* Monotonic time in nanoseconds. */
uint64_t tma_clock_ns(void);
/* Wall-clock time in seconds since the Unix epoch (for records). */
double tma_clock_wall(void);
/* Sleeps for the given seconds (<= 0 returns at once); restarts on EINTR. */
void tma_sleep(double seconds);

/* ------------------------------------------------------------------ CPUs and threads */

/* The CPUs this process may run on: the count of its affinity mask (what
 * Slurm, taskset or a cpuset allow), not every online CPU of the host. */
int tma_cpus_usable(void);

/* ------------------------------------------------------------------ memory budgets (mem.c) */

/* "512M", "4G", "1.5GiB", "100000" (bytes): K/M/G/T are powers of 1024.
 * TMA_ERR_INVALID for anything else. */
tma_status_t tma_parse_bytes(const char *s, uint64_t *bytes_p);
/* The budget of a command given none: half of physical memory, or what
 * RLIMIT_DATA (`ulimit -d`, `prlimit --data`) leaves the process when that is
 * less; `why` gets which, for the report. */
uint64_t tma_memory_budget_default(char *why, size_t why_size);
/* `budget` narrowed to what RLIMIT_DATA leaves, when a limit is set. */
uint64_t tma_memory_budget_cap(uint64_t budget);
/* The compute threads to use when none were asked for: OMP_NUM_THREADS
 * when set (its first number), else tma_cpus_usable().  *source_p (may be
 * NULL) names which, for logs.  TMA_ERR_INVALID, logged, when
 * OMP_NUM_THREADS is not a number in 1..1024. */
tma_status_t tma_threads_default(int *threads_p, const char **source_p);
/* requested when > 0 (an explicit --threads or config value), else
 * tma_threads_default(). */
tma_status_t tma_threads_resolve(int requested, int *threads_p);

/* ------------------------------------------------------------------ deadline waits */

/*
 * Condition variables whose timed waits run on CLOCK_MONOTONIC, so a
 * deadline is a tma_clock_now() value and a jump of the wall clock neither
 * cuts a wait short nor stretches it.  Every timed wait in the libraries
 * goes through these two functions.
 */
/* pthread_cond_init with a CLOCK_MONOTONIC condattr; returns its result. */
int tma_cond_init(pthread_cond_t *cond);
/* Waits on cond (mutex held) until signalled or until the monotonic
 * `deadline` (seconds, as tma_clock_now) passes; deadline <= 0 waits
 * without a limit.  Returns 0 once the deadline has passed (without
 * waiting if it already had), 1 otherwise (signalled, or woken
 * spuriously: callers re-check their condition in a loop). */
int tma_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, double deadline);

/* ------------------------------------------------------------------ checksums */

/* CRC32C (Castagnoli), hardware-accelerated where SSE4.2 is present.
 * Start with crc = 0; feed chunks by passing the previous result. */
uint32_t tma_crc32c(uint32_t crc, const void *data, size_t len);

/* ------------------------------------------------------------------ memory */

/* 64-byte aligned allocation; NULL on failure (size 0 gives a valid pointer).
 * Free with tma_free_aligned(), which accepts NULL. */
void *tma_alloc_aligned(size_t size);
void tma_free_aligned(void *p);
/* A large buffer for streaming (network buffers, tensors sent or received
 * whole): anonymous memory, page aligned, in transparent huge pages where the
 * kernel allows (madvise), so that streaming it costs fewer TLB misses and
 * its first touch fewer page faults.  Contents are zero.  NULL on failure.  Free with tma_free_huge() and the same size; it accepts NULL. */
void *tma_alloc_huge(size_t size);
void tma_free_huge(void *p, size_t size);
/* Asks for transparent huge pages (where the kernel allows: madvise) for
 * the whole 2 MiB pages inside [p, p + size), memory the caller allocated
 * and has not touched yet: for a table read at random rows, where every
 * row read from 4 KiB pages would cost a TLB miss.  Advice only: nothing
 * changes when it is refused. */
void tma_advise_huge(void *p, size_t size);
/* Overflow-checked a*b; returns 0 and sets *r_p, or -1 on overflow. */
int tma_mul_overflow(size_t a, size_t b, size_t *r_p);

/* ------------------------------------------------------------------ files */

/* A file written atomically: bytes go to a temporary file beside `path`;
 * commit fsyncs it, renames it over `path` and fsyncs the directory, so a
 * reader sees the old file or the complete new one, never a partial one. */
typedef struct tma_afile tma_afile_t;

tma_status_t tma_afile_open(const char *path, tma_afile_t **af_p);
tma_status_t tma_afile_write(tma_afile_t *af, const void *data, size_t len);
/* Writes at an absolute offset (for headers filled in last). */
tma_status_t tma_afile_pwrite(tma_afile_t *af, const void *data, size_t len, uint64_t offset);
/* Bytes written so far (the current append offset). */
uint64_t tma_afile_offset(const tma_afile_t *af);
/* Commits and frees `af` (also on failure, where the temp file is removed). */
tma_status_t tma_afile_commit(tma_afile_t *af);
/* Discards the temporary file and frees `af`; accepts NULL. */
void tma_afile_abort(tma_afile_t *af);
/* Whole-buffer convenience. */
tma_status_t tma_file_write_atomic(const char *path, const void *data, size_t len);

/* A read-only memory map of a whole file. */
typedef struct tma_mmap {
    const void *data;
    size_t size;
} tma_mmap_t;

tma_status_t tma_mmap_open(const char *path, tma_mmap_t *map_p);
/* Accepts a zeroed map; leaves it zeroed. */
void tma_mmap_close(tma_mmap_t *map);

/* Reads a whole file into a NUL-terminated malloc'd buffer (caller frees). */
tma_status_t tma_file_read_all(const char *path, char **data_p, size_t *len_p);
/* mkdir -p; existing directories are fine. */
tma_status_t tma_mkdir_p(const char *path);
/* rm -rf of a path; a missing path is fine. */
tma_status_t tma_remove_tree(const char *path);
int tma_file_exists(const char *path);
int tma_dir_exists(const char *path);
/* Joins dir and name into a malloc'd string (caller frees); NULL on OOM. */
char *tma_path_join(const char *dir, const char *name);
/* malloc'd printf; NULL on OOM. */
char *tma_strdup_printf(const char *fmt, ...) TMA_PRINTF(1, 2);

/* ------------------------------------------------------------------ feature element types (half.c) */

/* How node features are stored (a .tmag's features section): float32, IEEE
 * float16 or bfloat16.  Every consumer widens rows to float32. */
typedef enum {
    TMA_FEAT_F32 = 0,
    TMA_FEAT_F16 = 1,
    TMA_FEAT_BF16 = 2,
} tma_feat_dtype_t;

/* Bytes an element: 4 or 2. */
static inline size_t tma_feat_dtype_size(tma_feat_dtype_t t)
{
    return t == TMA_FEAT_F32 ? 4 : 2;
}
/* "f32", "f16", "bf16" ("?" for another value). */
const char *tma_feat_dtype_str(tma_feat_dtype_t t);
/* Parses one of those names; TMA_ERR_INVALID (not logged) otherwise. */
tma_status_t tma_feat_dtype_parse(const char *s, tma_feat_dtype_t *t_p);
/* Exact widenings (subnormals, infinities and NaNs with their payload
 * included).  Inline and without branches, so that a loop over a row runs
 * in SIMD lanes: training widens every feature row it gathers.  float16:
 * the exponent rebiased (15 -> 127), then selected by masks for infinity
 * and NaN (all ones) and for zero and subnormals (2^-14 (1 + m/1024) -
 * 2^-14 = m 2^-24, exact in float). */
static inline float tma_f16_to_f32(uint16_t h)
{
    const uint32_t ones = 0x7c00u << 13;
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13, s;
    const uint32_t e = o & ones;
    o += 112u << 23;
    const uint32_t t = o + (1u << 23);
    float x;
    memcpy(&x, &t, 4);
    x -= 6.103515625e-05f; /* 2^-14 */
    memcpy(&s, &x, 4);
    const uint32_t is_ones = 0u - (uint32_t)(e == ones), is_zero = 0u - (uint32_t)(e == 0);
    const uint32_t r = (o & ~(is_ones | is_zero)) | ((o + (112u << 23)) & is_ones) | (s & is_zero) |
                       ((uint32_t)h & 0x8000u) << 16;
    memcpy(&x, &r, 4);
    return x;
}
static inline float tma_bf16_to_f32(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}
/* Narrowings rounded to nearest, ties to even; overflow gives infinity,
 * NaN stays NaN. */
uint16_t tma_f32_to_f16(float x);
uint16_t tma_f32_to_bf16(float x);
/* n elements of type t at src widened into dst (a copy for float32). */
void tma_feat_widen(const void *src, tma_feat_dtype_t t, size_t n, float *dst);
/* n floats narrowed into dst as type t (a copy for float32).  dst may be
 * src itself (in place: the output is never longer than the input). */
void tma_feat_narrow(const float *src, size_t n, tma_feat_dtype_t t, void *dst);

/* ------------------------------------------------------------------ numpy files (npy.c) */

/* numpy's .npy and .npz, written for other tools (`tma export`): float32 or
 * int64, little-endian, row-major, 1 to TMA_NPY_MAX_DIMS dimensions. */
#define TMA_NPY_MAX_DIMS 3
typedef enum { TMA_NPY_F32, TMA_NPY_I64 } tma_npy_dtype_t;
typedef struct tma_npy_array {
    const char *name; /* the member name in an .npz (NAME.npy); at most 200 bytes */
    tma_npy_dtype_t dtype;
    int ndim;         /* 1 to TMA_NPY_MAX_DIMS */
    int64_t shape[TMA_NPY_MAX_DIMS];
    const void *data;
} tma_npy_array_t;
/* Writes one array as a .npy file, atomically. */
tma_status_t tma_npy_write(const char *path, const tma_npy_array_t *a);
/* Writes n arrays as an .npz (a zip of stored NAME.npy members, as
 * np.savez), atomically; TMA_ERR_UNSUPPORTED past 4 GiB (no zip64). */
tma_status_t tma_npz_write(const char *path, const tma_npy_array_t *arrays, int n);

/* ------------------------------------------------------------------ JSON (cJSON) */

/* Parses a JSON file; a syntax error is reported with the file, line and
 * column.  The caller owns *root_p (cJSON_Delete). */
tma_status_t tma_json_load_file(const char *path, cJSON **root_p);
/* Parses a JSON text; `what` names it in errors. */
tma_status_t tma_json_parse(const char *text, size_t len, const char *what, cJSON **root_p);
/* Writes `root` to `path` atomically, pretty-printed, with a final newline. */
tma_status_t tma_json_write_file(const char *path, const cJSON *root);

/*
 * Typed getters for config objects.  `ctx` names the object in errors
 * ("job.json: model").  A missing key yields the default; a key of the wrong
 * type or out of [min, max] is an error (TMA_ERR_CONFIG) naming ctx and key.
 */
tma_status_t tma_json_get_int(const cJSON *obj, const char *key, int64_t def, int64_t min,
                              int64_t max, const char *ctx, int64_t *val_p);
tma_status_t tma_json_get_double(const cJSON *obj, const char *key, double def, double min,
                                 double max, const char *ctx, double *val_p);
tma_status_t tma_json_get_bool(const cJSON *obj, const char *key, int def, const char *ctx,
                               int *val_p);
/* *val_p points into obj (not copied); def may be NULL. */
tma_status_t tma_json_get_string(const cJSON *obj, const char *key, const char *def,
                                 const char *ctx, const char **val_p);
/* Fails naming the first key of obj that is not in the NULL-terminated list. */
tma_status_t tma_json_check_keys(const cJSON *obj, const char *const *allowed, const char *ctx);

/* "Did you mean": the candidate closest to a misspelt word (edit distance,
 * at most a third of its length, at least 1).  Feed every candidate with
 * tma_suggest_add (word: len bytes, not NUL-terminated), then
 * tma_suggest_best gives it, or NULL when none is close. */
typedef struct tma_suggest {
    const char *best;
    int dist;
} tma_suggest_t;
void tma_suggest_init(tma_suggest_t *s);
void tma_suggest_add(tma_suggest_t *s, const char *word, size_t len, const char *cand);
const char *tma_suggest_best(const tma_suggest_t *s, size_t len);

/* ------------------------------------------------------------------ misc */

#define TMA_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TMA_MAX(a, b) ((a) > (b) ? (a) : (b))
#define TMA_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Strict number parsing for flags and text files: the whole string must be
 * a number in range; returns 0 on success, -1 otherwise. */
int tma_parse_i64(const char *s, int64_t *val_p);
int tma_parse_double(const char *s, double *val_p);

/* The package version string ("0.1.0"). */
const char *tma_version(void);

/* ------------------------------------------------------------------ TensorBoard event files (tfevents.c) */

/*
 * An events.out.tfevents.<time>.<host>.<pid> file in a folder, made anew
 * (O_EXCL) with its file_version record; scalars are appended one Event
 * (a step, several tags) at a time.  Errors are logged, naming the file.
 */
typedef struct tma_tfevents tma_tfevents_t;
tma_status_t tma_tfevents_open(const char *dir, tma_tfevents_t **w_p);
tma_status_t tma_tfevents_scalars(tma_tfevents_t *w, double wall, int64_t step, int n, const char *const *tags,
                                  const float *values);
/* A restart: an Event with SessionLog START at `step`, flushed.  TensorBoard
 * then drops every value it read at a step >= `step` (from this file or an
 * earlier one of the folder), so a process that redoes steps another wrote
 * writes this first and each step is shown once, with its new values. */
tma_status_t tma_tfevents_restart(tma_tfevents_t *w, double wall, int64_t step);
tma_status_t tma_tfevents_flush(tma_tfevents_t *w);
const char *tma_tfevents_path(const tma_tfevents_t *w);
void tma_tfevents_close(tma_tfevents_t *w); /* NULL: nothing */

#ifdef __cplusplus
}
#endif
#endif /* TMA_COMMON_H */
