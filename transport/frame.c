/*
 * frame.c: the transport's wire format, as pure functions (bytes in, fields
 * out) so that tests and the libFuzzer target can drive them without UCX.
 *
 * A frame is a 64-byte little-endian header (docs/transport.md) and a
 * payload.  The header's last four bytes hold the CRC32C of its first 60
 * bytes continued over the payload.  Decoding reads exactly the bytes it is
 * given and checks every field before anyone uses it.
 */
#include "transport_int.h"

#include <string.h>

enum {
    OFF_MAGIC = 0,
    OFF_VERSION = 4,
    OFF_TYPE = 6,
    OFF_TAG = 8,
    OFF_SENDER = 12,
    OFF_JOB = 16,
    OFF_EPOCH = 24,
    OFF_ROUND = 32,
    OFF_LENGTH = 40,
    OFF_TOTAL = 48,
    OFF_CHUNK = 56,
    OFF_SEQ = 58,
    OFF_CRC = 60,
};

/* The hello payload: u32 flags, u16 job length, u16 reserved, u64 lease,
 * nonce, job. */
enum { HELLO_FIXED = TMA_TRANSPORT_HELLO_FIXED, HELLO_OFF_LEASE = 8, HELLO_OFF_NONCE = 16 };

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

uint64_t tma_transport_job_id(const char *job)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (const unsigned char *p = (const unsigned char *)job; p && *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Header bytes 0..59 of a frame; the CRC field is left to the caller. */
static void header_fields(const tma_transport_frame_t *f, unsigned char *out)
{
    put32(out + OFF_MAGIC, TMA_TRANSPORT_MAGIC);
    put16(out + OFF_VERSION, f->version);
    put16(out + OFF_TYPE, f->type);
    put32(out + OFF_TAG, f->tag);
    put32(out + OFF_SENDER, f->sender);
    put64(out + OFF_JOB, f->job_id);
    put64(out + OFF_EPOCH, f->epoch);
    put64(out + OFF_ROUND, f->round);
    put64(out + OFF_LENGTH, f->length);
    put64(out + OFF_TOTAL, f->total);
    put16(out + OFF_CHUNK, f->chunk);
    put16(out + OFF_SEQ, f->seq);
}

void tma_transport_frame_encode(tma_transport_frame_t *f, const void *payload, size_t len,
                                unsigned char out[TMA_TRANSPORT_HEADER_BYTES])
{
    header_fields(f, out);
    uint32_t crc = tma_crc32c(0, out, OFF_CRC);
    if (len)
        crc = tma_crc32c(crc, payload, len);
    f->crc = crc;
    put32(out + OFF_CRC, crc);
}

uint32_t tma_transport_frame_chunks(const tma_transport_frame_t *f)
{
    const uint64_t chunk = TMA_TRANSPORT_CHUNK_BYTES;
    return f->length ? (uint32_t)((f->length - 1) / chunk + 1) : 1;
}

tma_status_t tma_transport_frame_decode(const void *bytes, size_t len, uint64_t max_payload,
                                        tma_transport_frame_t *f_p, const char **why_p)
{
    const unsigned char *p = bytes;
    const char *why = NULL;
    tma_transport_frame_t f;

    if (!bytes || len < TMA_TRANSPORT_HEADER_BYTES) {
        why = "truncated header";
        goto bad;
    }
    if (get32(p + OFF_MAGIC) != TMA_TRANSPORT_MAGIC) {
        why = "bad magic";
        goto bad;
    }
    f.version = get16(p + OFF_VERSION);
    if (f.version != TMA_TRANSPORT_VERSION) {
        why = "unsupported version";
        goto bad;
    }
    f.type = get16(p + OFF_TYPE);
    f.tag = get32(p + OFF_TAG);
    f.sender = get32(p + OFF_SENDER);
    f.job_id = get64(p + OFF_JOB);
    f.epoch = get64(p + OFF_EPOCH);
    f.round = get64(p + OFF_ROUND);
    f.length = get64(p + OFF_LENGTH);
    f.total = get64(p + OFF_TOTAL);
    f.chunk = get16(p + OFF_CHUNK);
    f.seq = get16(p + OFF_SEQ);
    f.crc = get32(p + OFF_CRC);
    switch (f.type) {
    case TMA_TRANSPORT_FRAME_HELLO:
        if (f.length < HELLO_FIXED + 1 || f.length > TMA_TRANSPORT_HELLO_MAX)
            why = "bad hello length";
        break;
    case TMA_TRANSPORT_FRAME_CHALLENGE:
        if (f.length != TMA_TRANSPORT_CHALLENGE_BYTES)
            why = "bad challenge length";
        break;
    case TMA_TRANSPORT_FRAME_PROOF:
        if (f.length != TMA_TRANSPORT_PROOF_BYTES)
            why = "bad proof length";
        break;
    case TMA_TRANSPORT_FRAME_HELLO_ACK:
        if (f.length != 8)
            why = "bad hello-ack length";
        break;
    case TMA_TRANSPORT_FRAME_BYE:
        if (f.length != 0)
            why = "bad bye length";
        break;
    case TMA_TRANSPORT_FRAME_TENSOR: {
        const uint64_t chunk = TMA_TRANSPORT_CHUNK_BYTES;
        uint64_t nchunks = f.total ? (f.total - 1) / chunk + 1 : 1;
        uint64_t off = (uint64_t)f.chunk * chunk;
        if (f.total > max_payload)
            why = "tensor longer than the largest message allowed";
        else if (f.total % sizeof(float))
            why = "tensor length is not a multiple of 4";
        else if (nchunks > TMA_TRANSPORT_MAX_CHUNKS)
            why = "tensor has more chunks than a chunk index can count";
        else if (f.chunk >= nchunks)
            why = "chunk index beyond the end of the tensor";
        else if (f.length > TMA_TRANSPORT_FRAME_MAX_BYTES)
            why = "frame longer than 64 MiB";
        else if (f.total == 0 ? f.length != 0
                              : f.length == 0 || f.length > f.total - off ||
                                    (f.length % chunk != 0 && f.length != f.total - off))
            why = "chunk length does not match the tensor length";
        break;
    }
    default:
        why = "unknown frame type";
        break;
    }
    if (!why && f.type != TMA_TRANSPORT_FRAME_TENSOR &&
        (f.tag != 0 || f.total != 0 || f.chunk != 0 || f.seq != 0))
        why = "control frame with tensor fields set";
    if (why)
        goto bad;
    *f_p = f;
    return TMA_OK;
bad:
    if (why_p)
        *why_p = why;
    return TMA_ERR_MALFORMED;
}

tma_status_t tma_transport_frame_verify(const tma_transport_frame_t *f, const void *payload,
                                        size_t len)
{
    unsigned char hdr[TMA_TRANSPORT_HEADER_BYTES];
    if (len != f->length)
        return TMA_ERR_CHECKSUM;
    /* Decoding accepted only the canonical encoding, so re-encoding the
     * fields gives back the exact bytes that were checksummed. */
    header_fields(f, hdr);
    uint32_t crc = tma_crc32c(0, hdr, OFF_CRC);
    if (len)
        crc = tma_crc32c(crc, payload, len);
    return crc == f->crc ? TMA_OK : TMA_ERR_CHECKSUM;
}

size_t tma_transport_hello_encode(const char *job, uint64_t lease,
                                  const unsigned char nonce[TMA_TRANSPORT_NONCE_BYTES],
                                  unsigned char *out, size_t cap)
{
    size_t jl = job ? strlen(job) : 0;
    if (jl == 0 || jl > TMA_TRANSPORT_JOB_MAX || HELLO_FIXED + jl > cap)
        return 0;
    put32(out, 0);
    put16(out + 4, (uint16_t)jl);
    put16(out + 6, 0);
    put64(out + HELLO_OFF_LEASE, lease);
    memcpy(out + HELLO_OFF_NONCE, nonce, TMA_TRANSPORT_NONCE_BYTES);
    memcpy(out + HELLO_FIXED, job, jl);
    return HELLO_FIXED + jl;
}

tma_status_t tma_transport_hello_decode(const void *payload, size_t len, tma_transport_hello_t *h_p,
                                        const char **why_p)
{
    const unsigned char *p = payload;
    const char *why = NULL;
    if (!payload || len < HELLO_FIXED) {
        why = "hello shorter than its fixed part";
    } else if (get32(p) != 0) {
        why = "hello flags are not zero";
    } else if (get16(p + 6) != 0) {
        why = "hello reserved field is not zero";
    } else {
        size_t jl = get16(p + 4);
        if (jl == 0 || jl > TMA_TRANSPORT_JOB_MAX)
            why = "hello job name length out of range";
        else if (HELLO_FIXED + jl != len)
            why = "hello lengths do not add up to its size";
        else {
            h_p->job = (const char *)p + HELLO_FIXED;
            h_p->job_len = jl;
            h_p->lease = get64(p + HELLO_OFF_LEASE);
            h_p->nonce = p + HELLO_OFF_NONCE;
            return TMA_OK;
        }
    }
    if (why_p)
        *why_p = why;
    return TMA_ERR_MALFORMED;
}

void transport_frame_damage(unsigned char hdr[TMA_TRANSPORT_HEADER_BYTES],
                            tma_transport_fault_t fault, size_t *hdr_len_p, size_t *send_len_p)
{
    switch (fault) {
    case TMA_TRANSPORT_FAULT_HEADER_BYTE:
        hdr[OFF_EPOCH] ^= 1;
        break;
    case TMA_TRANSPORT_FAULT_MAGIC:
        hdr[OFF_MAGIC] ^= 0xff;
        break;
    case TMA_TRANSPORT_FAULT_VERSION:
        put16(hdr + OFF_VERSION, 99);
        break;
    case TMA_TRANSPORT_FAULT_TYPE:
        put16(hdr + OFF_TYPE, 77);
        break;
    case TMA_TRANSPORT_FAULT_LENGTH:
        put64(hdr + OFF_LENGTH, get64(hdr + OFF_LENGTH) + 4);
        break;
    case TMA_TRANSPORT_FAULT_TRUNCATE:
        *send_len_p = *send_len_p >= 4 ? *send_len_p - 4 : 0;
        break;
    case TMA_TRANSPORT_FAULT_SHORT_HEADER:
        *hdr_len_p = 40;
        break;
    case TMA_TRANSPORT_FAULT_JOB:
        hdr[OFF_JOB] ^= 1;
        break;
    case TMA_TRANSPORT_FAULT_NONE:
    case TMA_TRANSPORT_FAULT_PAYLOAD_BYTE:
    case TMA_TRANSPORT_FAULT_DUP_CHUNK:
    case TMA_TRANSPORT_FAULT_REPLAY_HELLO:
        break;
    }
}

const char *tma_transport_event_str(tma_transport_event_kind_t kind)
{
    switch (kind) {
    case TMA_TRANSPORT_EV_CONNECTED:
        return "connected";
    case TMA_TRANSPORT_EV_CLOSED:
        return "closed";
    case TMA_TRANSPORT_EV_FAILED:
        return "failed";
    case TMA_TRANSPORT_EV_FLAGGED:
        return "flagged";
    }
    return "unknown";
}
