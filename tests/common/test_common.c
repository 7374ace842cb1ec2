/* test_common.c: the common layer: statuses, RNG, CRC32C, files, JSON helpers, default threads. */
#include "tma_test.h"

#include <dirent.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

uint32_t tma_crc32c_sw(uint32_t crc, const void *data, size_t len);

static void test_status(void)
{
    ASSERT_EQ(tma_status_group(TMA_OK), TMA_GROUP_OK);
    ASSERT_EQ(tma_status_group(TMA_ERR_FORMAT), TMA_GROUP_INPUT);
    ASSERT_EQ(tma_status_group(TMA_ERR_IO), TMA_GROUP_SYSTEM);
    ASSERT_EQ(tma_status_group(TMA_ERR_TIMEOUT), TMA_GROUP_PEER);
    ASSERT_EQ(tma_status_group(TMA_ERR_FENCED), TMA_GROUP_JOB);
    ASSERT_STR_EQ(tma_status_str(TMA_ERR_CHECKSUM), "checksum mismatch");
    ASSERT_STR_EQ(tma_status_str(-12345), "unknown error");
}

static void test_rng(void)
{
    tma_rng_t a, b, c;
    tma_rng_seed(&a, 42, 0);
    tma_rng_seed(&b, 42, 0);
    tma_rng_seed(&c, 42, 1);
    int same = 1, diff = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = tma_rng_next(&a), y = tma_rng_next(&b), z = tma_rng_next(&c);
        same &= x == y;
        diff += x != z;
    }
    CHECK(same);
    ASSERT_GT(diff, 95);
    /* below(n) is uniform: chi-square over 10 buckets. */
    int64_t counts[10] = {0};
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        uint64_t v = tma_rng_below(&a, 10);
        ASSERT_LT(v, 10);
        counts[v < 10 ? v : 0]++;
    }
    double chi = 0;
    for (int k = 0; k < 10; k++) {
        double e = n / 10.0;
        chi += (counts[k] - e) * (counts[k] - e) / e;
    }
    CHECK_MSG(chi < 30, "chi-square %g", chi); /* df=9: p < 1e-3 beyond 27.9 */
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++) {
        double u = tma_rng_uniform(&a);
        ASSERT_GE(u, 0);
        ASSERT_LT(u, 1);
        double g = tma_rng_normal(&a);
        sum += g;
        sq += g * g;
    }
    CHECK_NEAR(sum / n, 0.0, 0.02);
    CHECK_NEAR(sq / n, 1.0, 0.02);
    int64_t v[100];
    for (int i = 0; i < 100; i++)
        v[i] = i;
    tma_rng_shuffle_i64(&a, v, 100);
    int64_t s = 0;
    int moved = 0;
    for (int i = 0; i < 100; i++) {
        s += v[i];
        moved += v[i] != i;
    }
    ASSERT_EQ(s, 4950);
    ASSERT_GT(moved, 80);
    ASSERT_NE(tma_hash64(1), tma_hash64(2));
}

static void test_crc(void)
{
    const char *s = "123456789";
    ASSERT_EQ(tma_crc32c(0, s, 9), 0xE3069283u);
    ASSERT_EQ(tma_crc32c_sw(0, s, 9), 0xE3069283u);
    /* Chunked equals whole; hardware equals table, at odd offsets and lengths. */
    unsigned char buf[4099];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 131 + 7);
    for (size_t off = 0; off < 9; off++) {
        size_t len = sizeof buf - off;
        uint32_t whole = tma_crc32c(0, buf + off, len);
        ASSERT_EQ(whole, tma_crc32c_sw(0, buf + off, len));
        uint32_t part = tma_crc32c(0, buf + off, 1000);
        part = tma_crc32c(part, buf + off + 1000, len - 1000);
        ASSERT_EQ(part, whole);
    }
    ASSERT_EQ(tma_crc32c(0, buf, 0), 0);
    /* Long buffers take the three-stream path (blocks of 3 x 8 KiB and
     * 3 x 256 bytes): every length around those block edges, and splits. */
    size_t big_len = 3 * 8192 * 4 + 3 * 256 * 2 + 64;
    unsigned char *big = malloc(big_len + 8);
    tma_rng_t r;
    tma_rng_seed(&r, 11, 0);
    for (size_t i = 0; i < big_len + 8; i++)
        big[i] = (unsigned char)tma_rng_next(&r);
    size_t lens[] = {767, 768, 769, 3 * 256 + 8, 24575, 24576, 24577, 24576 + 768 + 5, big_len};
    for (size_t i = 0; i < TMA_ARRAY_LEN(lens); i++) {
        for (size_t off = 0; off < 3; off++) {
            uint32_t want = tma_crc32c_sw(0, big + off, lens[i]);
            CHECK_MSG(tma_crc32c(0, big + off, lens[i]) == want, "len %zu off %zu", lens[i], off);
            uint32_t part = tma_crc32c(0x12345678u, big + off, lens[i] / 3);
            part = tma_crc32c(part, big + off + lens[i] / 3, lens[i] - lens[i] / 3);
            ASSERT_EQ(part, tma_crc32c_sw(tma_crc32c_sw(0x12345678u, big + off, lens[i] / 3),
                                          big + off + lens[i] / 3, lens[i] - lens[i] / 3));
        }
    }
    free(big);

    /* Random lengths (short, around the block sizes, long), offsets and
     * start values against the table. */
    size_t huge_len = (3u << 20) + 77;
    unsigned char *h = malloc(huge_len + 64);
    for (size_t i = 0; i < huge_len + 64; i++)
        h[i] = (unsigned char)tma_rng_next(&r);
    for (int i = 0; i < 400; i++) {
        size_t len = i < 300 ? tma_rng_next(&r) % 4096 : tma_rng_next(&r) % 200000;
        if (i == 399)
            len = huge_len;
        size_t off = tma_rng_next(&r) % 64;
        uint32_t seed = (uint32_t)tma_rng_next(&r);
        CHECK_MSG(tma_crc32c(seed, h + off, len) == tma_crc32c_sw(seed, h + off, len),
                  "len %zu off %zu", len, off);
    }
    free(h);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void test_files(void)
{
    char *dir = tma_test_tmpdir("common");
    char *path = tma_path_join(dir, "a.bin");
    CHECK_OK(tma_file_write_atomic(path, "hello", 5));
    char *data;
    size_t len;
    CHECK_OK(tma_file_read_all(path, &data, &len));
    ASSERT_EQ(len, 5);
    ASSERT_EQ(memcmp(data, "hello", 5), 0);
    ASSERT_EQ(data[5], '\0');
    free(data);

    /* An aborted write leaves the old file and no temporary behind. */
    tma_afile_t *af;
    CHECK_OK(tma_afile_open(path, &af));
    CHECK_OK(tma_afile_write(af, "XXXXXXXXXX", 10));
    ASSERT_EQ(count_entries(dir), 2);
    tma_afile_abort(af);
    ASSERT_EQ(count_entries(dir), 1);
    CHECK_OK(tma_file_read_all(path, &data, &len));
    ASSERT_EQ(len, 5);
    free(data);

    /* pwrite patches a header after the body. */
    CHECK_OK(tma_afile_open(path, &af));
    CHECK_OK(tma_afile_write(af, "....body", 8));
    ASSERT_EQ(tma_afile_offset(af), 8);
    CHECK_OK(tma_afile_pwrite(af, "HEAD", 4, 0));
    CHECK_OK(tma_afile_commit(af));
    tma_mmap_t m = {0};
    CHECK_OK(tma_mmap_open(path, &m));
    ASSERT_EQ(m.size, 8);
    if (m.size == 8) {
        ASSERT_EQ(memcmp(m.data, "HEADbody", 8), 0);
    }
    tma_mmap_close(&m);
    ASSERT_NULL(m.data);
    ASSERT_EQ(count_entries(dir), 1);

    CHECK_STATUS(tma_mmap_open("/nonexistent/x", &m), TMA_ERR_NOT_FOUND);
    char *deep = tma_path_join(dir, "x/y/z");
    CHECK_OK(tma_mkdir_p(deep));
    CHECK_OK(tma_mkdir_p(deep));
    CHECK(tma_dir_exists(deep));
    CHECK(!tma_file_exists(deep));
    char *sub = tma_path_join(dir, "x");
    CHECK_OK(tma_remove_tree(sub));
    CHECK(!tma_dir_exists(sub));
    CHECK_OK(tma_remove_tree(sub));
    free(sub);
    free(deep);
    free(path);
    tma_test_cleanup_dir(dir);
}

static void test_json(void)
{
    cJSON *root;
    const char *text = "{\"a\": 3, \"b\": 2.5, \"c\": \"x\", \"d\": true, \"e\": 1.5}";
    CHECK_OK(tma_json_parse(text, strlen(text), "t", &root));
    int64_t i;
    double d;
    const char *s;
    int b;
    CHECK_OK(tma_json_get_int(root, "a", 0, 0, 10, "t", &i));
    ASSERT_EQ(i, 3);
    CHECK_OK(tma_json_get_int(root, "zz", 7, 0, 10, "t", &i));
    ASSERT_EQ(i, 7);
    CHECK_STATUS(tma_json_get_int(root, "a", 0, 5, 10, "t", &i), TMA_ERR_CONFIG);
    CHECK_STATUS(tma_json_get_int(root, "e", 0, 0, 10, "t", &i), TMA_ERR_CONFIG);
    CHECK_STATUS(tma_json_get_int(root, "c", 0, 0, 10, "t", &i), TMA_ERR_CONFIG);
    CHECK_OK(tma_json_get_double(root, "b", 0, 0, 10, "t", &d));
    ASSERT_EQ(d, 2.5);
    CHECK_OK(tma_json_get_string(root, "c", NULL, "t", &s));
    ASSERT_STR_EQ(s, "x");
    CHECK_STATUS(tma_json_get_string(root, "a", NULL, "t", &s), TMA_ERR_CONFIG);
    CHECK_OK(tma_json_get_bool(root, "d", 0, "t", &b));
    ASSERT_EQ(b, 1);
    static const char *const ok_keys[] = {"a", "b", "c", "d", "e", NULL};
    static const char *const few_keys[] = {"a", NULL};
    CHECK_OK(tma_json_check_keys(root, ok_keys, "t"));
    CHECK_STATUS(tma_json_check_keys(root, few_keys, "t"), TMA_ERR_CONFIG);
    cJSON_Delete(root);
    CHECK_STATUS(tma_json_parse("{\"a\":", 5, "t", &root), TMA_ERR_CONFIG);
    CHECK_STATUS(tma_json_parse("{} x", 4, "t", &root), TMA_ERR_CONFIG);
    CHECK_STATUS(tma_json_parse("", 0, "t", &root), TMA_ERR_CONFIG);

    ASSERT_EQ(tma_parse_i64("123", &i), 0);
    ASSERT_EQ(i, 123);
    ASSERT_NE(tma_parse_i64("12x", &i), 0);
    ASSERT_NE(tma_parse_i64("", &i), 0);
    ASSERT_NE(tma_parse_i64("99999999999999999999", &i), 0);
    ASSERT_EQ(tma_parse_double("0.25", &d), 0);
    ASSERT_EQ(d, 0.25);
    ASSERT_NE(tma_parse_double("nan", &d), 0);
    ASSERT_NE(tma_parse_double("1e", &d), 0);
}

/* Huge-page buffers: zeroed, page aligned, usable to the last byte, at
 * sizes below, at and above a huge page; an impossible size is NULL. */
static void test_alloc_huge(void)
{
    const size_t sizes[] = {1, 4095, 4097, 2u << 20, (3u << 20) + 5};
    for (size_t i = 0; i < TMA_ARRAY_LEN(sizes); i++) {
        unsigned char *p = tma_alloc_huge(sizes[i]);
        ASSERT_NOT_NULL(p);
        ASSERT_EQ((uintptr_t)p % 4096, 0);
        if (!p)
            continue;
        ASSERT_EQ(p[0], 0);
        ASSERT_EQ(p[sizes[i] - 1], 0);
        memset(p, 0xab, sizes[i]);
        ASSERT_EQ(p[sizes[i] - 1], 0xab);
        tma_free_huge(p, sizes[i]);
    }
    ASSERT_NULL(tma_alloc_huge(SIZE_MAX - 10));
    tma_free_huge(NULL, 10);
}

/* Bytes of [lo, hi) that lie in mappings marked for huge pages ("hg" in
 * /proc/self/smaps); -1 when smaps cannot be read.  Any such mapping that
 * reaches outside [lo, hi) sets *outside_p. */
static long long huge_advised_bytes(uintptr_t lo, uintptr_t hi, int *outside_p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    unsigned long long a = 0, e = 0;
    long long in = 0;
    *outside_p = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long x, y;
        if (sscanf(line, "%llx-%llx ", &x, &y) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            a = x;
            e = y;
        } else if (strncmp(line, "VmFlags:", 8) == 0 && strstr(line, " hg") && a < hi && e > lo) {
            if (a < lo || e > hi)
                *outside_p = 1;
            in += (long long)(TMA_MIN(e, hi) - TMA_MAX(a, lo));
        }
    }
    fclose(f);
    return in;
}

/* tma_advise_huge marks exactly the whole 2 MiB pages inside the block (a
 * random-access table's pages) and nothing around it; a block too small for
 * two huge pages is left alone.  The memory stays usable either way. */
static void test_advise_huge(void)
{
    const size_t big = ((size_t)9 << 20) + 123, small = (size_t)3 << 20;
    unsigned char *p = tma_alloc_aligned(big), *q = tma_alloc_aligned(small);
    ASSERT_NOT_NULL(p);
    ASSERT_NOT_NULL(q);
    if (!p || !q)
        return;
    tma_advise_huge(p, big);
    tma_advise_huge(q, small);
    tma_advise_huge(NULL, big);
    memset(p, 0x5a, big);
    memset(q, 0x5a, small);
    ASSERT_EQ(p[big - 1], 0x5a);
    int outside = 0;
    const uintptr_t lo = (uintptr_t)p, hi = lo + big;
    long long in = huge_advised_bytes(lo, hi, &outside);
    struct stat st;
    if (in < 0 || stat("/sys/kernel/mm/transparent_hugepage", &st) != 0) {
        /* No smaps or no THP in this kernel: the advice is refused, which is allowed. */
        fprintf(stderr, "  (no transparent huge pages here: only the memory's use is checked)\n");
    } else {
        const uintptr_t a = (lo + ((2u << 20) - 1)) & ~(uintptr_t)((2u << 20) - 1), e = hi & ~(uintptr_t)((2u << 20) - 1);
        ASSERT_EQ(in, (long long)(e - a));
        ASSERT_EQ(outside, 0);
        ASSERT_EQ(huge_advised_bytes((uintptr_t)q, (uintptr_t)q + small, &outside), 0);
    }
    tma_free_aligned(p);
    tma_free_aligned(q);
}

/* The deadline wait runs on CLOCK_MONOTONIC: a past deadline returns at
 * once, a future one is waited for (nobody signals here). */
static void test_cond_wait(void)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c;
    ASSERT_EQ(tma_cond_init(&c), 0);
    pthread_mutex_lock(&m);
    double t0 = tma_clock_now();
    ASSERT_EQ(tma_cond_wait_until(&c, &m, t0 - 1.0), 0);
    ASSERT_LT(tma_clock_now() - t0, 0.05);
    t0 = tma_clock_now();
    double deadline = t0 + 0.1;
    while (tma_cond_wait_until(&c, &m, deadline)) {
    }
    double waited = tma_clock_now() - t0;
    CHECK_MSG(waited >= 0.1 && waited < 5.0, "waited %.3f s for a 0.1 s deadline", waited);
    pthread_mutex_unlock(&m);
    pthread_cond_destroy(&c);
}

/* The default thread count: the affinity mask, or OMP_NUM_THREADS. */
static void test_threads_default(void)
{
    cpu_set_t saved, one;
    ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
    int first = 0;
    while (!CPU_ISSET(first, &saved))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    unsetenv("OMP_NUM_THREADS");
    int n = 0;
    ASSERT_EQ(tma_cpus_usable(), 1);
    ASSERT_EQ(tma_threads_default(&n, NULL), TMA_OK);
    ASSERT_EQ(n, 1);
    ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
    ASSERT_EQ(tma_cpus_usable(), CPU_COUNT(&saved));

    const char *source = NULL;
    setenv("OMP_NUM_THREADS", "6", 1);
    ASSERT_EQ(tma_threads_default(&n, &source), TMA_OK);
    ASSERT_EQ(n, 6);
    ASSERT_STR_EQ(source, "OMP_NUM_THREADS");
    setenv("OMP_NUM_THREADS", "3,2", 1);
    ASSERT_EQ(tma_threads_default(&n, NULL), TMA_OK);
    ASSERT_EQ(n, 3);
    ASSERT_EQ(tma_threads_resolve(5, &n), TMA_OK);
    ASSERT_EQ(n, 5);
    setenv("OMP_NUM_THREADS", "", 1);
    ASSERT_EQ(tma_threads_default(&n, NULL), TMA_OK);
    ASSERT_EQ(n, CPU_COUNT(&saved));
    static const char *const bad[] = {"0", "-2", "many", "4x", "2000", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("OMP_NUM_THREADS", bad[i], 1);
        n = -7;
        ASSERT_EQ(tma_threads_default(&n, NULL), TMA_ERR_INVALID);
        ASSERT_EQ(n, -7);
    }
    unsetenv("OMP_NUM_THREADS");
}

/* "Did you mean": the closest candidate within a third of the word's
 * length (swaps of neighbours count one), none when nothing is close. */
static void test_suggest(void)
{
    static const char *const cands[] = {"train", "partition", "launch", "workers", "eval", "export", NULL};
    const struct {
        const char *word, *want;
    } cases[] = {{"trian", "train"}, {"parition", "partition"}, {"lanch", "launch"}, {"workres", "workers"},
                 {"evl", "eval"},    {"frobnicate", NULL},      {"train", NULL},    {"x", NULL},
                 {"exprot", "export"}};
    for (size_t i = 0; i < TMA_ARRAY_LEN(cases); i++) {
        tma_suggest_t sg;
        tma_suggest_init(&sg);
        size_t len = strlen(cases[i].word);
        for (const char *const *c = cands; *c; c++)
            tma_suggest_add(&sg, cases[i].word, len, *c);
        const char *got = tma_suggest_best(&sg, len);
        CHECK_MSG(got == cases[i].want || (got && cases[i].want && strcmp(got, cases[i].want) == 0),
                  "suggest '%s': got %s, want %s", cases[i].word, got ? got : "none",
                  cases[i].want ? cases[i].want : "none");
    }
    /* Only the first len bytes of the word count (an option's "--name=value"). */
    tma_suggest_t sg;
    tma_suggest_init(&sg);
    tma_suggest_add(&sg, "trian=3", 5, "train");
    CHECK_MSG(tma_suggest_best(&sg, 5) && strcmp(tma_suggest_best(&sg, 5), "train") == 0, "a prefix of the word");
}

/* The 16-bit feature types, exhaustively over their bit patterns: widening
 * then narrowing gives the pattern back; the point halfway to the next
 * value rounds to the one with an even mantissa; just past it rounds up;
 * overflow, infinities and NaNs; the names. */
static void test_half(void)
{
    for (uint32_t bf = 0; bf < 2; bf++) {
        const tma_feat_dtype_t t = bf ? TMA_FEAT_BF16 : TMA_FEAT_F16;
        uint32_t bad = 0;
        for (uint32_t h = 0; h < 0x10000; h++) {
            const uint16_t x = (uint16_t)h;
            const int nan = bf ? (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) : (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
            const float w = bf ? tma_bf16_to_f32(x) : tma_f16_to_f32(x);
            uint16_t back;
            tma_feat_narrow(&w, 1, t, &back);
            if (nan) {
                bad += !isnan(w) || !isnan(bf ? tma_bf16_to_f32(back) : tma_f16_to_f32(back));
                continue;
            }
            bad += back != x;
            /* Halfway to the next larger magnitude (not past the largest finite). */
            const uint16_t next = (uint16_t)(x + 1);
            const int last = bf ? (h & 0x7fffu) >= 0x7f7fu : (h & 0x7fffu) >= 0x7bffu;
            if (last)
                continue;
            const float wn = bf ? tma_bf16_to_f32(next) : tma_f16_to_f32(next);
            const double mid = ((double)w + (double)wn) / 2;
            uint16_t r, up;
            float fm = (float)mid; /* exact: one more bit than the 16-bit type */
            tma_feat_narrow(&fm, 1, t, &r);
            bad += r != ((x & 1u) ? next : x);
            fm = nextafterf(fm, 2 * (float)wn);
            tma_feat_narrow(&fm, 1, t, &up);
            bad += up != next;
        }
        CHECK_MSG(bad == 0, "%s: %u bit patterns convert wrongly", tma_feat_dtype_str(t), bad);
    }
    /* Widening: known values, the array form as the scalar one. */
    uint16_t hs[6] = {0x0001, 0x3c00, 0x7c00, 0xfbff, 0x8000, 0x03ff};
    float ws[6];
    tma_feat_widen(hs, TMA_FEAT_F16, 6, ws);
    ASSERT_EQ(ws[0], 5.9604644775390625e-8f); /* 2^-24, the smallest subnormal */
    ASSERT_EQ(ws[1], 1.0f);
    CHECK(isinf(ws[2]) && ws[2] > 0);
    ASSERT_EQ(ws[3], -65504.0f);
    CHECK(ws[4] == 0.0f && signbit(ws[4]));
    ASSERT_EQ(ws[5], 1023 * 5.9604644775390625e-8f);
    ASSERT_EQ(tma_bf16_to_f32(0x3f80), 1.0f);
    ASSERT_EQ(tma_f32_to_f16(65519.996f), 0x7bff);
    ASSERT_EQ(tma_f32_to_f16(65520.0f), 0x7c00);
    ASSERT_EQ(tma_f32_to_f16(-1e30f), 0xfc00);
    ASSERT_EQ(tma_f32_to_bf16(3.4e38f), 0x7f80); /* past the largest bf16: rounds to infinity */
    ASSERT_EQ(tma_f32_to_f16(1e-9f), 0); /* below half the smallest subnormal */
    ASSERT_EQ(tma_f32_to_f16(-0.0f), 0x8000);
    tma_feat_dtype_t t;
    ASSERT_EQ(tma_feat_dtype_parse("bf16", &t), TMA_OK);
    ASSERT_EQ(t, TMA_FEAT_BF16);
    ASSERT_EQ(tma_feat_dtype_parse("half", &t), TMA_ERR_INVALID);
    ASSERT_EQ(strcmp(tma_feat_dtype_str(TMA_FEAT_F16), "f16"), 0);
    /* In place: narrowing the buffer it reads. */
    float buf[5] = {1.0f, -2.5f, 0.1f, 65504.0f, 3.0f};
    tma_feat_narrow(buf, 5, TMA_FEAT_F16, buf);
    const uint16_t *h = (const uint16_t *)buf;
    ASSERT_EQ(h[0], 0x3c00);
    ASSERT_EQ(h[1], 0xc100);
    ASSERT_EQ(h[2], 0x2e66);
    ASSERT_EQ(h[3], 0x7bff);
    ASSERT_EQ(h[4], 0x4200);
}

int main(void)
{
    test_status();
    test_rng();
    test_crc();
    test_alloc_huge();
    test_advise_huge();
    test_cond_wait();
    test_files();
    test_json();
    test_threads_default();
    test_suggest();
    test_half();
    return tma_test_done();
}
