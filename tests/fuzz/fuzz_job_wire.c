/*
 * fuzz_job_wire.c: libFuzzer target for what a worker puts on the wire and
 * into etcd about its shards: the meta block after its tensors
 * (tma_job_msg_meta_unpack, job/wire.c) and the ready record
 * (tma_job_ready_rec_decode, job/records.c).  Input: one byte choosing the
 * partition's shard count S, then the bytes of a meta block (zero-padded to
 * its length); the whole input is also decoded as a ready record.  Beyond
 * "no crash, no read past the input" (ASan), an accepted meta block names
 * at most S shards, each in [0, S), and packs back to the same head.
 * Built and run by tests/job/fuzz_wire.sh.
 */
#include "tma_job.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 1)
        return 0;
    int S = data[0];
    size_t nf = (size_t)tma_job_msg_meta_floats(S);
    float *block = calloc(nf, sizeof(float));
    int32_t *shards = calloc((size_t)S + 1, sizeof(int32_t));
    if (!block || !shards)
        abort();
    memcpy(block, data + 1, TMA_MIN(size - 1, nf * sizeof(float)));
    tma_job_msg_meta_t m;
    if (tma_job_msg_meta_unpack(block, S, &m, shards) == TMA_OK) {
        if (m.n_shards > (uint32_t)S)
            abort();
        for (uint32_t i = 0; i < m.n_shards; i++)
            if (shards[i] < 0 || shards[i] >= S)
                abort();
        float *again = calloc(nf, sizeof(float));
        if (!again)
            abort();
        tma_job_msg_meta_pack(&m, shards, S, again);
        if (memcmp(again, block, sizeof m) != 0)
            abort();
        free(again);
    }
    tma_job_ready_rec_t r;
    if (tma_job_ready_rec_decode("fuzz", (const char *)data, size, &r) == TMA_OK) {
        for (int i = 0; i < r.n_shards; i++)
            if (r.shards[i] < 0)
                abort();
        tma_job_ready_rec_free(&r);
    }
    free(block);
    free(shards);
    return 0;
}
