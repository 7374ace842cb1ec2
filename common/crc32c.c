/*
 * crc32c.c: CRC32C (Castagnoli polynomial 0x82F63B78, reflected).  x86-64
 * hosts with SSE4.2 use the crc32 instruction, 8 bytes at a time; others use
 * a slicing-by-8 table.  Both give identical results (tested).
 */
#include "tma_common.h"

#include <pthread.h>
#include <string.h>

static uint32_t g_table[8][256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_have_hw;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        g_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            g_table[t][i] = (g_table[t - 1][i] >> 8) ^ g_table[0][g_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    g_have_hw = __builtin_cpu_supports("sse4.2");
#endif
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
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p,
                                                           size_t len)
{
    uint64_t c = crc;
    while (len && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        len--;
    }
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
