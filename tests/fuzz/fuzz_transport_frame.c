/*
 * fuzz_transport_frame.c: libFuzzer target for the transport's frame and
 * hello decoders (transport/frame.c).  Input: the bytes of one frame as it
 * would arrive, header then payload.  Beyond "no crash, no read past the
 * input" (ASan), it checks that an accepted header is canonical: encoding
 * the decoded fields gives back the same 60 bytes.
 * Built and run by tests/transport/fuzz_frame.sh.
 */
#include "tma_transport.h"

#include <stdlib.h>
#include <string.h>

#define MAX_PAYLOAD (1u << 20)

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    tma_transport_frame_t f;
    const char *why = NULL;
    const char *job, *token;
    size_t jl, tl;
    if (tma_transport_frame_decode(data, size, MAX_PAYLOAD, &f, &why) == TMA_OK) {
        tma_transport_frame_t g = f;
        unsigned char h[TMA_TRANSPORT_HEADER_BYTES];
        tma_transport_frame_encode(&g, NULL, 0, h);
        if (memcmp(h, data, 60) != 0 || f.length > MAX_PAYLOAD)
            abort();
        size_t plen = size - TMA_TRANSPORT_HEADER_BYTES;
        const unsigned char *payload = data + TMA_TRANSPORT_HEADER_BYTES;
        if (f.length == plen) {
            (void)tma_transport_frame_verify(&f, payload, plen);
            if (f.type == TMA_TRANSPORT_FRAME_HELLO &&
                tma_transport_hello_decode(payload, plen, &job, &jl, &token, &tl, &why) == TMA_OK) {
                if (job < (const char *)payload || job + jl > (const char *)payload + plen ||
                    token < job + jl || token + tl != (const char *)payload + plen)
                    abort();
            }
        }
    } else if (!why) {
        abort(); /* every refusal says why */
    }
    /* The hello decoder on its own, over the raw bytes. */
    if (tma_transport_hello_decode(data, size, &job, &jl, &token, &tl, &why) == TMA_OK) {
        if (8 + jl + tl != size || jl == 0 || tl == 0)
            abort();
    }
    return 0;
}
