/* rng.c: xoshiro256** (Blackman and Vigna) seeded through splitmix64. */
#include "tma_common.h"

#include <math.h>

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void tma_rng_seed(tma_rng_t *rng, uint64_t seed, uint64_t stream)
{
    uint64_t x = tma_hash64(seed) ^ tma_hash64(stream * 0xd1342543de82ef95ull + 0x632be59bd9b4e019ull);
    for (int i = 0; i < 4; i++) {
        x += 0x9e3779b97f4a7c15ull;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        rng->s[i] = z ^ (z >> 31);
    }
    if ((rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]) == 0)
        rng->s[0] = 1;
}

uint64_t tma_rng_next(tma_rng_t *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t tma_rng_below(tma_rng_t *rng, uint64_t n)
{
    /* Lemire's multiply-shift with rejection of the biased low range. */
    uint64_t x = tma_rng_next(rng);
    __uint128_t m = (__uint128_t)x * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t thresh = (0 - n) % n;
        while (lo < thresh) {
            x = tma_rng_next(rng);
            m = (__uint128_t)x * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double tma_rng_uniform(tma_rng_t *rng)
{
    return (double)(tma_rng_next(rng) >> 11) * 0x1.0p-53;
}

double tma_rng_normal(tma_rng_t *rng)
{
    double u1 = tma_rng_uniform(rng);
    double u2 = tma_rng_uniform(rng);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void tma_rng_shuffle_i64(tma_rng_t *rng, int64_t *v, int64_t n)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)tma_rng_below(rng, (uint64_t)i + 1);
        int64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}
