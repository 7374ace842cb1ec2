/*
 * wire.c: the meta block a worker appends to every tensor it sends (the
 * bytes of tma_msg_meta_t carried as floats, bit for bit).  The unpacker
 * treats the block as untrusted input.
 */
#include "tma_job.h"

#include <string.h>

_Static_assert(sizeof(tma_msg_meta_t) <= TMA_META_FLOATS * sizeof(float), "meta fits its block");

void tma_msg_meta_pack(const tma_msg_meta_t *m, float out[TMA_META_FLOATS])
{
    memset(out, 0, TMA_META_FLOATS * sizeof(float));
    memcpy(out, m, sizeof *m);
}

tma_status_t tma_msg_meta_unpack(const float in[TMA_META_FLOATS], tma_msg_meta_t *m_p)
{
    tma_msg_meta_t m;
    memcpy(&m, in, sizeof m);
    if (m.magic != TMA_META_MAGIC || m.n_shards > TMA_META_MAX_SHARDS || m.steps_total < 0 ||
        m.steps_round < 0)
        return TMA_ERR_MALFORMED;
    for (uint32_t i = 0; i < m.n_shards; i++)
        if (m.shards[i] < 0)
            return TMA_ERR_MALFORMED;
    *m_p = m;
    return TMA_OK;
}
