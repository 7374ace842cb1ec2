/*
 * crc32c.c: CRC32C (Castagnoli polynomial 0x82F63B78, reflected).  x86-64
 * hosts with SSE4.2 use the crc32 instruction, 8 bytes at a time; others use
 * a slicing-by-8 table.  Both give identical results (tested).
 *
 * The crc32 instruction takes three cycles but can start one every cycle, so
 * long buffers are cut into three adjacent blocks whose CRCs run side by
 * side and are then joined: the CRC register is linear over GF(2), so the
 * CRC of A followed by B is the CRC of B started from zero, XORed with A's
 * register advanced over len(B) zero bytes.  That advance is a 32x32 bit
 * matrix, applied through four 256-entry tables made once per block size.
 * This runs about three times as fast as one stream (the transport checks
 * every tensor it sends and receives).
 */
#include "tma_common.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u
#define BLOCK_LONG 8192u /* bytes in each of the three streams */
#define BLOCK_SHORT 256u

static uint32_t g_table[8][256];
static uint32_t g_shift_long[4][256];  /* advance a register over BLOCK_LONG zero bytes */
static uint32_t g_shift_short[4][256]; /* ... over BLOCK_SHORT zero bytes */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_have_hw;

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
    g_have_hw = __builtin_cpu_supports("sse4.2");
#endif
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
#endif

uint32_t tma_crc32c_sw(uint32_t crc, const void *data, size_t len);
uint32_t tma_crc32c_sw(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&g_once, crc_init);
    return ~crc_sw(~crc, (const unsigned char *)data, len);
}

uint32_t tma_crc32c(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&g_once, crc_init);
#if defined(__x86_64__)
    if (g_have_hw)
        return ~crc_hw(~crc, (const unsigned char *)data, len);
#endif
    return ~crc_sw(~crc, (const unsigned char *)data, len);
}
