/* test_average.c: the coordinator's pure functions: the average
 * (coordinator/average.c), the weighted mean summed in member-id order in
 * double, so the result does not depend on the order the tensors arrived
 * in; and the checkpoint names (coordinator/publish.c). */
#include "tma_test.h"
#include "coord_int.h"

#include <stdlib.h>
#include <string.h>

#define P 1000

static void test_weighted_mean(void)
{
    static float a[P], b[P], out[P];
    static double acc[P];
    for (int j = 0; j < P; j++) {
        a[j] = (float)j;
        b[j] = (float)(2 * j + 4);
    }
    coord_contrib_t in[2] = {{7, 1.0, a}, {3, 3.0, b}};
    ASSERT_EQ(coord_average(in, 2, P, acc, out), 2);
    for (int j = 0; j < P; j++)
        CHECK_MSG(out[j] == (float)((1.0 * j + 3.0 * (2 * j + 4)) / 4.0), "out[%d] = %g", j, (double)out[j]);
}

static void test_nothing_arrived(void)
{
    static float out[P];
    static double acc[P];
    for (int j = 0; j < P; j++)
        out[j] = 42.0f;
    ASSERT_EQ(coord_average(NULL, 0, P, acc, out), 0);
    for (int j = 0; j < P; j++)
        CHECK_MSG(out[j] == 42.0f, "out[%d] = %g changed", j, (double)out[j]);
}

/* 1e8 + 1 - 1e8 is 0 in float (the spacing at 1e8 is 8) but 1 in double:
 * the sum runs in double and in id order (1e8, 1, -1e8). */
static void test_double_accumulation(void)
{
    float big[1] = {1e8f}, one[1] = {1.0f}, neg[1] = {-1e8f}, out[1];
    double acc[1];
    coord_contrib_t in[3] = {{30, 1.0, neg}, {10, 1.0, big}, {20, 1.0, one}};
    ASSERT_EQ(coord_average(in, 3, 1, acc, out), 3);
    CHECK_MSG(out[0] == (float)(1.0 / 3.0), "out = %.9g, expected %.9g", (double)out[0], 1.0 / 3.0);
}

/* The same contributions in any order give the same bits. */
static void test_order_independent(void)
{
    enum { N = 6 };
    static float x[N][P], ref[P], out[P];
    static double acc[P];
    tma_rng_t rng;
    tma_rng_seed(&rng, 12345, 0);
    coord_contrib_t in[N];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < P; j++)
            x[i][j] = (float)(tma_rng_uniform(&rng) * 2.0 - 1.0) * (float)(1 << (i * 3));
        in[i] = (coord_contrib_t){(uint32_t)(100 + 17 * i), 1.0 + (double)i, x[i]};
    }
    ASSERT_EQ(coord_average(in, N, P, acc, ref), N);
    for (int trial = 0; trial < 20; trial++) {
        for (int i = N - 1; i > 0; i--) {
            int k = (int)tma_rng_below(&rng, (uint64_t)(i + 1));
            coord_contrib_t t = in[i];
            in[i] = in[k];
            in[k] = t;
        }
        ASSERT_EQ(coord_average(in, N, P, acc, out), N);
        CHECK_MSG(memcmp(out, ref, sizeof out) == 0, "trial %d: the result depends on the arrival order", trial);
    }
}

static void test_checkpoint_names(void)
{
    char *p = coord_checkpoint_path("/run", 42, 7);
    ASSERT_STR_EQ(p, "/run/checkpoint-r000042-e7.tmaw");
    int64_t r = -1;
    uint64_t e = 0;
    ASSERT_EQ(coord_checkpoint_parse("checkpoint-r000042-e7.tmaw", &r, &e), 0);
    ASSERT_EQ(r, 42);
    ASSERT_EQ(e, 7);
    ASSERT_EQ(coord_checkpoint_parse("checkpoint-r1234567-e123456789.tmaw", &r, &e), 0);
    ASSERT_EQ(r, 1234567);
    ASSERT_EQ(e, 123456789);
    static const char *const bad[] = {"checkpoint.tmaw", "checkpoint-r1-e2.tmaw.tmp", "checkpoint-r-1-e2.tmaw",
                                      "checkpoint-r1.tmaw", "best.tmaw", "checkpoint-rx-e2.tmaw", ""};
    for (size_t i = 0; i < TMA_ARRAY_LEN(bad); i++)
        CHECK_MSG(coord_checkpoint_parse(bad[i], &r, &e) != 0, "\"%s\" taken for a checkpoint name", bad[i]);
    free(p);
}

int main(void)
{
    test_weighted_mean();
    test_nothing_arrived();
    test_double_accumulation();
    test_order_independent();
    test_checkpoint_names();
    return tma_test_done();
}
