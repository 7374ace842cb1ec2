/*
 * fuzz_transport_frame.c: libFuzzer target for the transport's frame and
 * hello decoders (transport/frame.c) and the hello's challenge and response
 * (transport/auth.c).  Input: the bytes of one frame as it would arrive,
 * header then payload.  Beyond "no crash, no read past the input" (ASan),
 * it checks that an accepted header is canonical (encoding the decoded
 * fields gives back the same 60 bytes), that a decoded hello re-encodes to
 * the same bytes, and that a proof or challenge MAC built from fuzzed bytes
 * never matches the one a listener expects (the key is not in the input).
 * Built and run by tests/transport/fuzz_frame.sh.
 */
#include "tma_transport.h"

#include <stdlib.h>
#include <string.h>

#define MAX_PAYLOAD (1u << 20)

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* What a listener of job "fuzz-job" with this token would expect as the
 * proof of a hello; a fuzzed proof that matches it means the check is
 * broken (or the fuzzer found a SHA-256 collision). */
static const char key[] = "fuzz-token-not-in-any-input";

static void check_proof(const tma_transport_hello_t *h, uint32_t sender, const unsigned char *proof)
{
    unsigned char nonce_s[TMA_TRANSPORT_NONCE_BYTES] = {0}, want[TMA_TRANSPORT_MAC_BYTES];
    if (tma_transport_hello_mac(key, sizeof key - 1, TMA_TRANSPORT_MAC_CONNECTOR, h->job, h->job_len,
                                sender, 0, h->lease, h->nonce, nonce_s, want) != TMA_OK)
        abort();
    if (tma_transport_mac_equal(want, proof))
        abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    tma_transport_frame_t f;
    const char *why = NULL;
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
            tma_transport_hello_t h;
            if (f.type == TMA_TRANSPORT_FRAME_HELLO &&
                tma_transport_hello_decode(payload, plen, &h, &why) == TMA_OK) {
                if (h.job < (const char *)payload || h.job + h.job_len != (const char *)payload + plen)
                    abort();
                /* The hello's last bytes stand in for the proof that follows it. */
                if (plen >= TMA_TRANSPORT_MAC_BYTES)
                    check_proof(&h, f.sender, payload + plen - TMA_TRANSPORT_MAC_BYTES);
            }
        }
    } else if (!why) {
        abort(); /* every refusal says why */
    }
    /* The hello decoder on its own, over the raw bytes: what it accepts
     * encodes back to the same bytes. */
    tma_transport_hello_t h;
    if (tma_transport_hello_decode(data, size, &h, &why) == TMA_OK) {
        char job[TMA_TRANSPORT_JOB_MAX + 1];
        unsigned char again[TMA_TRANSPORT_HELLO_MAX];
        if (h.job_len == 0 || h.job_len > TMA_TRANSPORT_JOB_MAX || TMA_TRANSPORT_HELLO_FIXED + h.job_len != size)
            abort();
        memcpy(job, h.job, h.job_len);
        job[h.job_len] = '\0';
        size_t n = memchr(job, '\0', h.job_len) ? 0 : tma_transport_hello_encode(job, h.lease, h.nonce, again, sizeof again);
        if (n && (n != size || memcmp(again, data, size) != 0))
            abort();
        check_proof(&h, 1, data + size - TMA_TRANSPORT_MAC_BYTES);
    }
    return 0;
}
