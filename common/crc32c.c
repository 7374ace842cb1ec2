/*
 * crc32c.c: CRC32C (Castagnoli polynomial 0x82F63B78, reflected).  x86-64
 * hosts with SSE4.2 use the crc32 instruction, 8 bytes at a time; those that
 * also have VPCLMULQDQ and AVX2 fold long buffers with carry-less multiplies
 * (below); others use a slicing-by-8 table.  All give identical results
 * (tested).
 *
 * The crc32 instruction takes three cycles but can start one every cycle, so
 * long buffers are cut into three adjacent blocks whose CRCs run side by
 * side and are then joined: the CRC register is linear over GF(2), so the
 * CRC of A followed by B is the CRC of B started from zero, XORed with A's
 * register advanced over len(B) zero bytes.  That advance is a 32x32 bit
 * matrix, applied through four 256-entry tables made once per block size.
 * This runs about three times as fast as one stream (the transport checks
 * every tensor it sends and receives).
 *
 * Folding, for buffers of at least FOLD_MIN bytes: the CRC register of a
 * message is (M(x) * x^32) mod P, so a 128-bit block A followed by D more
 * bits of message can be replaced by A * x^D mod P, reduced to 96 bits, and
 * XORed into the block D bits later.  In the reflected bit order a 128-bit
 * block is two 64-bit halves H (the higher powers, the first 8 bytes) and L,
 * and A * x^D = H * x^(D+64) + L * x^D; one carry-less multiply of each half
 * by a constant congruent to that power does it (the constants are made at
 * start-up from the polynomial, see fold_const).  Eight 16-byte lanes, two per
 * 256-bit register, run side by side over 128-byte strides (the multiply
 * takes several cycles but can start every cycle), are then folded into one
 * block, which the crc32 instruction reduces to the 32-bit register.  This
 * moves about twice as many bytes per cycle as the crc32 instruction can.
 */
#include "tma_common.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define POLY 0x82F63B78u
#define BLOCK_LONG 8192u /* bytes in each of the three streams */
#define BLOCK_SHORT 256u
#define FOLD_MIN 512u /* shorter buffers do not repay the set-up of folding */

static uint32_t g_table[8][256];
static uint32_t g_shift_long[4][256];  /* advance a register over BLOCK_LONG zero bytes */
static uint32_t g_shift_short[4][256]; /* ... over BLOCK_SHORT zero bytes */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_have_hw;
static int g_have_fold;
/* Folding constants, for distances of 1024 bits (the main loop), 256 bits
 * (one 256-bit register into the next) and 128 bits (one lane into the
 * next): {for H, for L} as the two 64-bit halves of a 128-bit lane. */
static uint64_t g_fold1024[2], g_fold256[2], g_fold128[2];

/* A 32x32 matrix over GF(2) as its 32 columns: column i is the image of bit i. */
static uint32_t gf2_apply(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (int i = 0; vec; i++, vec >>= 1)
        if (vec & 1)
            sum ^= mat[i];
    return sum;
}

static void gf2_square(uint32_t *out, const uint32_t *mat)
{
    for (int i = 0; i < 32; i++)
        out[i] = gf2_apply(mat, mat[i]);
}

/* Tables that advance a CRC register over `bytes` zero bytes (a power of 2). */
static void make_shift(uint32_t tab[4][256], uint32_t bytes)
{
    uint32_t a[32], b[32], *cur = a, *next = b, *tmp;
    /* One zero bit: shift right, folding in the polynomial for the low bit. */
    cur[0] = POLY;
    for (int i = 1; i < 32; i++)
        cur[i] = 1u << (i - 1);
    /* Squaring doubles the number of zero bits: 3 squarings make a byte. */
    for (uint32_t bits = 1; bits < 8 * bytes; bits *= 2) {
        gf2_square(next, cur);
        tmp = cur;
        cur = next;
        next = tmp;
    }
    for (uint32_t v = 0; v < 256; v++)
        for (int k = 0; k < 4; k++)
            tab[k][v] = gf2_apply(cur, v << (8 * k));
}

static inline uint32_t shift_reg(uint32_t tab[4][256], uint32_t crc)
{
    return tab[0][crc & 0xff] ^ tab[1][(crc >> 8) & 0xff] ^ tab[2][(crc >> 16) & 0xff] ^
           tab[3][crc >> 24];
}

/* x^n mod P in the reflected 32-bit form (bit i is the coefficient of
 * x^(31-i)): multiplying by x shifts right, and x^32 = P's low terms. */
static uint32_t xpow_mod(uint32_t n)
{
    uint32_t v = 0x80000000u; /* x^0 */
    while (n--)
        v = (v >> 1) ^ (POLY & (0u - (v & 1u)));
    return v;
}

/*
 * The 64-bit multiplier for a 64-bit half h whose bit i is the coefficient of
 * x^(63-i): the carry-less product of h and c has bit k for the sum of
 * h_i c_j with i + j = k, which reads as the 128-bit reflected block (bit k
 * for x^(127-k)) of h(x) * C(x) when c's bit j stands for x^(64-j).  For a
 * product congruent to h * x^e take C = x * (x^(e-1) mod P): degrees 1 to 32,
 * bits 32 to 63 of c, which is the reflected form of x^(e-1) mod P shifted up
 * by 32.
 */
static uint64_t fold_const(uint32_t e)
{
    return (uint64_t)xpow_mod(e - 1) << 32;
}

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        g_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            g_table[t][i] = (g_table[t - 1][i] >> 8) ^ g_table[0][g_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    g_have_hw = __builtin_cpu_supports("sse4.2") != 0;
    g_have_fold = g_have_hw && __builtin_cpu_supports("vpclmulqdq") &&
                  __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul");
#endif
    /* A lane followed by D bits: H times x^(D+64), L times x^D. */
    g_fold1024[0] = fold_const(1024 + 64);
    g_fold1024[1] = fold_const(1024);
    g_fold256[0] = fold_const(256 + 64);
    g_fold256[1] = fold_const(256);
    g_fold128[0] = fold_const(128 + 64);
    g_fold128[1] = fold_const(128);
    make_shift(g_shift_long, BLOCK_LONG);
    make_shift(g_shift_short, BLOCK_SHORT);
}

static uint32_t crc_sw(uint32_t crc, const unsigned char *p, size_t len)
{
    while (len && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ g_table[0][(crc ^ *p++) & 0xff];
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = g_table[7][w & 0xff] ^ g_table[6][(w >> 8) & 0xff] ^ g_table[5][(w >> 16) & 0xff] ^
              g_table[4][(w >> 24) & 0xff] ^ g_table[3][(w >> 32) & 0xff] ^
              g_table[2][(w >> 40) & 0xff] ^ g_table[1][(w >> 48) & 0xff] ^ g_table[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ g_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__)
static inline uint64_t load64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* Three streams over three adjacent blocks of `block` bytes, joined. */
__attribute__((target("sse4.2"))) static uint64_t crc_hw3(uint64_t c0, const unsigned char **pp,
                                                           size_t *len_p, size_t block,
                                                           uint32_t tab[4][256])
{
    const unsigned char *p = *pp;
    size_t len = *len_p;
    while (len >= 3 * block) {
        uint64_t c1 = 0, c2 = 0;
        const unsigned char *end = p + block;
        do {
            c0 = __builtin_ia32_crc32di(c0, load64(p));
            c1 = __builtin_ia32_crc32di(c1, load64(p + block));
            c2 = __builtin_ia32_crc32di(c2, load64(p + 2 * block));
            p += 8;
        } while (p < end);
        c0 = shift_reg(tab, (uint32_t)c0) ^ (uint32_t)c1;
        c0 = shift_reg(tab, (uint32_t)c0) ^ (uint32_t)c2;
        p += 2 * block;
        len -= 3 * block;
    }
    *pp = p;
    *len_p = len;
    return c0;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p,
                                                           size_t len)
{
    uint64_t c = crc;
    while (len && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        len--;
    }
    c = crc_hw3(c, &p, &len, BLOCK_LONG, g_shift_long);
    c = crc_hw3(c, &p, &len, BLOCK_SHORT, g_shift_short);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        len -= 8;
    }
    while (len--)
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return (uint32_t)c;
}

#define FOLD_TARGET __attribute__((target("avx2,pclmul,vpclmulqdq,sse4.2")))

/* Each 128-bit lane of x times x^D (k holds the lane constants), plus y. */
FOLD_TARGET static inline __m256i fold256(__m256i x, __m256i k, __m256i y)
{
    __m256i h = _mm256_clmulepi64_epi128(x, k, 0x00);
    __m256i l = _mm256_clmulepi64_epi128(x, k, 0x11);
    return _mm256_xor_si256(_mm256_xor_si256(h, l), y);
}

FOLD_TARGET static inline __m128i fold128(__m128i x, __m128i k, __m128i y)
{
    __m128i h = _mm_clmulepi64_si128(x, k, 0x00);
    __m128i l = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(h, l), y);
}

/* len >= 128 (FOLD_MIN in use).  Folds the whole 16-byte blocks and finishes the rest
 * with the crc32 instruction. */
FOLD_TARGET static uint32_t crc_fold(uint32_t crc, const unsigned char *p, size_t len)
{
    const __m256i k1024 = _mm256_set_epi64x((long long)g_fold1024[1], (long long)g_fold1024[0],
                                            (long long)g_fold1024[1], (long long)g_fold1024[0]);
    const __m256i k256 = _mm256_set_epi64x((long long)g_fold256[1], (long long)g_fold256[0],
                                           (long long)g_fold256[1], (long long)g_fold256[0]);
    const __m128i k128 = _mm_set_epi64x((long long)g_fold128[1], (long long)g_fold128[0]);
    /* The register enters as the first 32 bits of message: XORed into them,
     * it stands for itself times x^(length), as the CRC needs. */
    __m256i y0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)p),
                                  _mm256_set_epi64x(0, 0, 0, (long long)crc));
    __m256i y1 = _mm256_loadu_si256((const __m256i *)(p + 32));
    __m256i y2 = _mm256_loadu_si256((const __m256i *)(p + 64));
    __m256i y3 = _mm256_loadu_si256((const __m256i *)(p + 96));
    p += 128;
    len -= 128;
    while (len >= 128) {
        y0 = fold256(y0, k1024, _mm256_loadu_si256((const __m256i *)p));
        y1 = fold256(y1, k1024, _mm256_loadu_si256((const __m256i *)(p + 32)));
        y2 = fold256(y2, k1024, _mm256_loadu_si256((const __m256i *)(p + 64)));
        y3 = fold256(y3, k1024, _mm256_loadu_si256((const __m256i *)(p + 96)));
        p += 128;
        len -= 128;
    }
    /* Registers in message order: each into the next, 256 bits on. */
    y1 = fold256(y0, k256, y1);
    y2 = fold256(y1, k256, y2);
    y3 = fold256(y2, k256, y3);
    __m128i a = fold128(_mm256_castsi256_si128(y3), k128, _mm256_extracti128_si256(y3, 1));
    while (len >= 16) {
        a = fold128(a, k128, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        len -= 16;
    }
    /* The block's register from zero is (A * x^32) mod P. */
    uint64_t c = __builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(a));
    c = __builtin_ia32_crc32di(c, (uint64_t)_mm_extract_epi64(a, 1));
    return crc_hw((uint32_t)c, p, len);
}
#endif

uint32_t tma_crc32c_sw(uint32_t crc, const void *data, size_t len);
uint32_t tma_crc32c_sw(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&g_once, crc_init);
    return ~crc_sw(~crc, (const unsigned char *)data, len);
}

/* Test hook (declared in the test, not in the header): the CRC by one path,
 * 1 the crc32 instruction in three streams, 2 folding (len >= 128); returns
 * 0 and sets *crc_p, or -1 where this CPU lacks the path. */
int tma_crc32c_path(int path, uint32_t crc, const void *data, size_t len, uint32_t *crc_p);
int tma_crc32c_path(int path, uint32_t crc, const void *data, size_t len, uint32_t *crc_p)
{
    pthread_once(&g_once, crc_init);
#if defined(__x86_64__)
    if (path == 1 && g_have_hw) {
        *crc_p = ~crc_hw(~crc, (const unsigned char *)data, len);
        return 0;
    }
    if (path == 2 && g_have_fold && len >= 128) {
        *crc_p = ~crc_fold(~crc, (const unsigned char *)data, len);
        return 0;
    }
#else
    (void)path, (void)crc, (void)data, (void)len, (void)crc_p;
#endif
    return -1;
}

uint32_t tma_crc32c(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&g_once, crc_init);
#if defined(__x86_64__)
    if (g_have_fold && len >= FOLD_MIN)
        return ~crc_fold(~crc, (const unsigned char *)data, len);
    if (g_have_hw)
        return ~crc_hw(~crc, (const unsigned char *)data, len);
#endif
    return ~crc_sw(~crc, (const unsigned char *)data, len);
}
