/*
 * half.c: the 16-bit feature element types (IEEE float16 and bfloat16):
 * their names, and conversions to and from float32.  Narrowing rounds to
 * nearest with ties to even, as numpy's astype(np.float16) and PyTorch's
 * bfloat16 conversion do, so a file written here holds the values those
 * tools would; widening is exact.
 */
#include "tma_common.h"

#include <string.h>

const char *tma_feat_dtype_str(tma_feat_dtype_t t)
{
    switch (t) {
    case TMA_FEAT_F32: return "f32";
    case TMA_FEAT_F16: return "f16";
    case TMA_FEAT_BF16: return "bf16";
    }
    return "?";
}

tma_status_t tma_feat_dtype_parse(const char *s, tma_feat_dtype_t *t_p)
{
    static const tma_feat_dtype_t all[] = {TMA_FEAT_F32, TMA_FEAT_F16, TMA_FEAT_BF16};
    for (size_t i = 0; s && i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(s, tma_feat_dtype_str(all[i])) == 0) {
            *t_p = all[i];
            return TMA_OK;
        }
    }
    return TMA_ERR_INVALID;
}

static inline uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

uint16_t tma_f32_to_f16(float x)
{
    const uint32_t u = f32_bits(x);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) /* inf, or nan kept quiet */
        return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0));
    if (a >= 0x477ff000u) /* rounds to 65520 or more: overflow */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        /* Below 2^-14: a subnormal half, a multiple of 2^-24.  Adding 0.5
         * (2^-1) puts the value's 2^-24 units in the low mantissa bits, and
         * the float addition itself rounds to nearest even. */
        const float r = bits_f32(a) + 0.5f;
        return (uint16_t)(sign | (uint16_t)(f32_bits(r) - 0x3f000000u));
    }
    /* Normal: rebias, then round the 13 dropped bits to nearest even (a
     * carry into the exponent is the right result). */
    const uint32_t odd = (a >> 13) & 1u;
    return (uint16_t)(sign | (uint16_t)((a - 0x38000000u + 0xfffu + odd) >> 13));
}

uint16_t tma_f32_to_bf16(float x)
{
    const uint32_t u = f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* nan kept quiet */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

void tma_feat_widen(const void *src, tma_feat_dtype_t t, size_t n, float *dst)
{
    const uint16_t *h = src;
    if (t == TMA_FEAT_F32) {
        memmove(dst, src, n * sizeof(float));
    } else if (t == TMA_FEAT_F16) {
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            dst[i] = tma_f16_to_f32(h[i]);
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            dst[i] = tma_bf16_to_f32(h[i]);
    }
}

void tma_feat_narrow(const float *src, size_t n, tma_feat_dtype_t t, void *dst)
{
    uint16_t *h = dst;
    /* In place, element i is read before h[i] (bytes 2i, 2i + 1) is
     * written, and h[i] lies below every element not yet read. */
    if (t == TMA_FEAT_F32)
        memmove(dst, src, n * sizeof(float));
    else if (t == TMA_FEAT_F16)
        for (size_t i = 0; i < n; i++)
            h[i] = tma_f32_to_f16(src[i]);
    else
        for (size_t i = 0; i < n; i++)
            h[i] = tma_f32_to_bf16(src[i]);
}
