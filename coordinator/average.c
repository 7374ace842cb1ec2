/*
 * average.c: the weighted mean of the tensors of one round (or one GGS
 * step), as a pure function so it can be tested on its own
 * (tests/coordinator/test_average.c).  It sums in increasing member-id
 * order and in double, so the result is the same bit for bit whatever
 * order the tensors arrived in.
 */
#include "coord_int.h"

#include <string.h>

int coord_average(const coord_contrib_t *in, int n, int64_t P, double *acc, float *out)
{
    if (n <= 0)
        return 0;
    double wsum = 0;
    memset(acc, 0, (size_t)P * sizeof *acc);
    /* The contributions are not sorted: visit ids in increasing order. */
    uint32_t last = 0;
    for (int k = 0; k < n; k++) {
        const coord_contrib_t *next = NULL;
        for (int i = 0; i < n; i++) {
            if (k > 0 && in[i].id <= last)
                continue;
            if (!next || in[i].id < next->id)
                next = &in[i];
        }
        last = next->id;
        const double w = next->weight;
        const float *x = next->x;
#pragma omp parallel for schedule(static)
        for (int64_t j = 0; j < P; j++)
            acc[j] += w * (double)x[j];
        wsum += w;
    }
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < P; j++)
        out[j] = (float)(acc[j] / wsum);
    return n;
}
