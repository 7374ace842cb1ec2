/*
 * wire.c: the meta block a worker appends to every tensor it sends (the
 * bytes of tma_job_msg_meta_t and its shard numbers carried as floats, bit for
 * bit; docs/transport.md).  The unpacker treats the block as untrusted
 * input, and the tensors' values are checked before anyone takes them.
 */
#include "tma_job.h"

#include <math.h>
#include <string.h>

_Static_assert(sizeof(tma_job_msg_meta_t) <= TMA_META_HEAD_FLOATS * sizeof(float), "the head fits its floats");

void tma_job_msg_meta_pack(const tma_job_msg_meta_t *m, const int32_t *shards, int S, float *out)
{
    memset(out, 0, (size_t)tma_job_msg_meta_floats(S) * sizeof(float));
    memcpy(out, m, sizeof *m);
    memcpy(out + TMA_META_HEAD_FLOATS, shards, (size_t)m->n_shards * sizeof(int32_t));
}

tma_status_t tma_job_msg_meta_unpack(const float *in, int S, tma_job_msg_meta_t *m_p, int32_t *shards_p)
{
    tma_job_msg_meta_t m;
    memcpy(&m, in, sizeof m);
    if (m.magic != TMA_META_MAGIC || m.n_shards > (uint32_t)(S > 0 ? S : 0) || m.steps_total < 0 ||
        m.steps_round < 0)
        return TMA_ERR_MALFORMED;
    const float *sh = in + TMA_META_HEAD_FLOATS;
    for (uint32_t i = 0; i < m.n_shards; i++) {
        int32_t k;
        memcpy(&k, sh + i, sizeof k);
        if (k < 0 || k >= S)
            return TMA_ERR_MALFORMED;
    }
    memcpy(shards_p, sh, (size_t)m.n_shards * sizeof(int32_t));
    *m_p = m;
    return TMA_OK;
}

int64_t tma_job_first_nonfinite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return i;
    return -1;
}
