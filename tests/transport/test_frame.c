/* test_frame.c: the transport's pure frame and hello codecs, byte by byte. */
#include "tma_test.h"
#include "tma_transport.h"
#include "transport_int.h"

#include <string.h>

#define MAXP (1u << 20)

static void le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static tma_transport_frame_t tensor_frame(uint64_t len)
{
    tma_transport_frame_t f;
    memset(&f, 0, sizeof f);
    f.version = TMA_TRANSPORT_VERSION;
    f.type = TMA_TRANSPORT_FRAME_TENSOR;
    f.tag = 9;
    f.sender = 42;
    f.job_id = tma_transport_job_id("job-a");
    f.epoch = 0x0102030405060708ull;
    f.round = 77;
    f.length = len;
    f.total = len;
    f.seq = 0xbeef;
    return f;
}

/* The documented layout, checked at fixed offsets. */
static void test_layout(void)
{
    float payload[3] = {1.0f, -2.0f, 0.5f};
    tma_transport_frame_t f = tensor_frame(sizeof payload);
    unsigned char h[TMA_TRANSPORT_HEADER_BYTES];
    tma_transport_frame_encode(&f, payload, sizeof payload, h);
    ASSERT_EQ(memcmp(h, "TMAF", 4), 0);
    ASSERT_EQ(h[4], 2);     /* version */
    ASSERT_EQ(h[5], 0);
    ASSERT_EQ(h[6], 3);     /* type */
    ASSERT_EQ(h[7], 0);
    ASSERT_EQ(h[8], 9);     /* tag, sender */
    ASSERT_EQ(h[12], 42);
    ASSERT_EQ(h[24], 0x08); /* epoch, little-endian */
    ASSERT_EQ(h[31], 0x01);
    ASSERT_EQ(h[32], 77);   /* round, length */
    ASSERT_EQ(h[40], 12);
    ASSERT_EQ(h[48], 12);   /* total */
    ASSERT_EQ(h[55], 0);
    ASSERT_EQ(h[56], 0);    /* chunk */
    ASSERT_EQ(h[57], 0);
    ASSERT_EQ(h[58], 0xef); /* seq */
    ASSERT_EQ(h[59], 0xbe);
    uint32_t crc = tma_crc32c(tma_crc32c(0, h, 60), payload, sizeof payload);
    ASSERT_EQ(h[60], crc & 0xff);
    ASSERT_EQ(h[63], crc >> 24);
    ASSERT_EQ(f.crc, crc);
    ASSERT_NE(tma_transport_job_id("job-a"), tma_transport_job_id("job-b"));
    ASSERT_EQ(tma_transport_job_id(""), 0xcbf29ce484222325ull); /* FNV-1a offset basis */
}

static void test_roundtrip(void)
{
    float payload[5] = {3, 1, 4, 1, 5};
    tma_transport_frame_t f = tensor_frame(sizeof payload), g;
    unsigned char h[TMA_TRANSPORT_HEADER_BYTES];
    tma_transport_frame_encode(&f, payload, sizeof payload, h);
    const char *why = NULL;
    CHECK_OK(tma_transport_frame_decode(h, sizeof h, MAXP, &g, &why));
    ASSERT_EQ(g.type, f.type);
    ASSERT_EQ(g.tag, f.tag);
    ASSERT_EQ(g.sender, f.sender);
    ASSERT_EQ(g.job_id, f.job_id);
    ASSERT_EQ(g.epoch, f.epoch);
    ASSERT_EQ(g.round, f.round);
    ASSERT_EQ(g.length, f.length);
    ASSERT_EQ(g.crc, f.crc);
    ASSERT_EQ(g.total, f.total);
    ASSERT_EQ(g.chunk, f.chunk);
    ASSERT_EQ(g.seq, f.seq);
    CHECK_OK(tma_transport_frame_verify(&g, payload, sizeof payload));
    /* A flipped payload bit, a shorter payload, a damaged header field. */
    payload[2] = 4.5f;
    CHECK_STATUS(tma_transport_frame_verify(&g, payload, sizeof payload), TMA_ERR_CHECKSUM);
    payload[2] = 4;
    CHECK_STATUS(tma_transport_frame_verify(&g, payload, sizeof payload - 4), TMA_ERR_CHECKSUM);
    g.round++;
    CHECK_STATUS(tma_transport_frame_verify(&g, payload, sizeof payload), TMA_ERR_CHECKSUM);
    /* An empty tensor is a valid frame. */
    f = tensor_frame(0);
    tma_transport_frame_encode(&f, NULL, 0, h);
    CHECK_OK(tma_transport_frame_decode(h, sizeof h, MAXP, &g, NULL));
    CHECK_OK(tma_transport_frame_verify(&g, NULL, 0));
}

/* Each kind of damage is refused with its own reason. */
static void expect_bad(const unsigned char *h, size_t len, const char *want)
{
    tma_transport_frame_t g;
    const char *why = NULL;
    tma_status_t st = tma_transport_frame_decode(h, len, MAXP, &g, &why);
    CHECK_MSG(st == TMA_ERR_MALFORMED, "expected '%s', got status %d", want, st);
    CHECK_MSG(why && strstr(why, want), "expected '%s', got '%s'", want, why ? why : "(null)");
}

static void expect_bad_max(const unsigned char *h, uint64_t max, const char *want)
{
    tma_transport_frame_t g;
    const char *why = NULL;
    ASSERT_EQ(tma_transport_frame_decode(h, TMA_TRANSPORT_HEADER_BYTES, max, &g, &why),
              TMA_ERR_MALFORMED);
    CHECK_MSG(why && strstr(why, want), "expected '%s', got '%s'", want, why ? why : "(null)");
}

static void test_bad_headers(void)
{
    float payload[4] = {0};
    tma_transport_frame_t f = tensor_frame(sizeof payload);
    unsigned char good[TMA_TRANSPORT_HEADER_BYTES], h[TMA_TRANSPORT_HEADER_BYTES];
    tma_transport_frame_encode(&f, payload, sizeof payload, good);

    for (size_t len = 0; len < TMA_TRANSPORT_HEADER_BYTES; len++)
        expect_bad(good, len, "truncated");
    expect_bad(NULL, 64, "truncated");

    struct {
        tma_transport_fault_t fault;
        const char *why;
    } cases[] = {
        {TMA_TRANSPORT_FAULT_MAGIC, "magic"},
        {TMA_TRANSPORT_FAULT_VERSION, "version"},
        {TMA_TRANSPORT_FAULT_TYPE, "type"},
    };
    for (size_t i = 0; i < TMA_ARRAY_LEN(cases); i++) {
        memcpy(h, good, sizeof h);
        size_t hl = sizeof h, sl = sizeof payload;
        transport_frame_damage(h, cases[i].fault, &hl, &sl);
        expect_bad(h, hl, cases[i].why);
    }
    /* Header faults that decode but fail the checksum. */
    tma_transport_fault_t crc_faults[] = {TMA_TRANSPORT_FAULT_HEADER_BYTE, TMA_TRANSPORT_FAULT_JOB};
    for (size_t i = 0; i < TMA_ARRAY_LEN(crc_faults); i++) {
        memcpy(h, good, sizeof h);
        size_t hl = sizeof h, sl = sizeof payload;
        transport_frame_damage(h, crc_faults[i], &hl, &sl);
        tma_transport_frame_t g;
        CHECK_OK(tma_transport_frame_decode(h, hl, MAXP, &g, NULL));
        CHECK_STATUS(tma_transport_frame_verify(&g, payload, sizeof payload), TMA_ERR_CHECKSUM);
    }
    /* The length fault makes the header disagree with its tensor. */
    memcpy(h, good, sizeof h);
    size_t hl = sizeof h, sl = sizeof payload;
    transport_frame_damage(h, TMA_TRANSPORT_FAULT_LENGTH, &hl, &sl);
    tma_transport_frame_t g;
    expect_bad(h, hl, "chunk length");
    hl = sizeof h;
    transport_frame_damage(h, TMA_TRANSPORT_FAULT_TRUNCATE, &hl, &sl);
    ASSERT_EQ(sl, sizeof payload - 4);
    transport_frame_damage(h, TMA_TRANSPORT_FAULT_SHORT_HEADER, &hl, &sl);
    ASSERT_EQ(hl, 40);

    /* Lengths: over the limit, not whole floats, wrong for control frames. */
    f = tensor_frame((uint64_t)MAXP + 4);
    tma_transport_frame_encode(&f, NULL, 0, h);
    expect_bad(h, sizeof h, "largest");
    f = tensor_frame(6);
    tma_transport_frame_encode(&f, NULL, 0, h);
    expect_bad(h, sizeof h, "multiple of 4");
    f = tensor_frame(UINT64_MAX - 3);
    tma_transport_frame_encode(&f, NULL, 0, h);
    expect_bad(h, sizeof h, "largest");

    /* Chunks of a 10 MiB + 8 byte tensor: three of them, 4, 4 and 2 MiB + 8.
     * A frame carries whole chunks from its first one, or runs to the end. */
    const uint64_t C = TMA_TRANSPORT_CHUNK_BYTES, total = 10 * 1048576 + 8;
    const uint64_t big_max = 1ull << 40;
    struct {
        uint16_t chunk;
        uint64_t length;
        const char *why; /* NULL: valid */
    } chunks[] = {
        {0, C, NULL},
        {1, C, NULL},
        {2, total - 2 * C, NULL},
        {0, 2 * C, NULL},
        {1, total - C, NULL},
        {0, total, NULL},
        {0, C - 4, "chunk length"},
        {0, C + 4, "chunk length"},
        {0, 0, "chunk length"},
        {1, 2 * C, "chunk length"},
        {2, C, "chunk length"},
        {2, total - 2 * C - 4, "chunk length"},
        {0, total + 4, "chunk length"},
        {3, 0, "beyond the end"},
        {65535, 8, "beyond the end"},
    };
    for (size_t i = 0; i < TMA_ARRAY_LEN(chunks); i++) {
        f = tensor_frame(chunks[i].length);
        f.total = total;
        f.chunk = chunks[i].chunk;
        tma_transport_frame_encode(&f, NULL, 0, h);
        if (chunks[i].why) {
            expect_bad_max(h, big_max, chunks[i].why);
        } else {
            CHECK_OK(tma_transport_frame_decode(h, sizeof h, big_max, &g, NULL));
            ASSERT_EQ(g.chunk, chunks[i].chunk);
            ASSERT_EQ(g.length, chunks[i].length);
            ASSERT_EQ(g.total, total);
        }
    }
    /* A frame carries at most TMA_TRANSPORT_FRAME_MAX_BYTES. */
    f = tensor_frame(TMA_TRANSPORT_FRAME_MAX_BYTES + C);
    f.total = 100 * C;
    tma_transport_frame_encode(&f, NULL, 0, h);
    expect_bad_max(h, big_max, "longer than 64 MiB");
    f.length = TMA_TRANSPORT_FRAME_MAX_BYTES;
    tma_transport_frame_encode(&f, NULL, 0, h);
    CHECK_OK(tma_transport_frame_decode(h, sizeof h, big_max, &g, NULL));
    ASSERT_EQ(tma_transport_frame_chunks(&g), TMA_TRANSPORT_FRAME_MAX_BYTES / C);
    f.chunk = 99;
    f.length = C;
    tma_transport_frame_encode(&f, NULL, 0, h);
    CHECK_OK(tma_transport_frame_decode(h, sizeof h, big_max, &g, NULL));
    ASSERT_EQ(tma_transport_frame_chunks(&g), 1);
    f.chunk = 98;
    f.length = C + 4;
    tma_transport_frame_encode(&f, NULL, 0, h);
    expect_bad_max(h, big_max, "chunk length");
    /* More chunks than a u16 can index. */
    f = tensor_frame(C);
    f.total = (uint64_t)TMA_TRANSPORT_MAX_CHUNKS * C + 4;
    tma_transport_frame_encode(&f, NULL, 0, h);
    expect_bad_max(h, big_max, "more chunks");
    f.total = (uint64_t)TMA_TRANSPORT_MAX_CHUNKS * C;
    f.chunk = 65535;
    tma_transport_frame_encode(&f, NULL, 0, h);
    CHECK_OK(tma_transport_frame_decode(h, sizeof h, big_max, &g, NULL));
    /* An empty tensor has one empty chunk. */
    f = tensor_frame(0);
    f.chunk = 1;
    tma_transport_frame_encode(&f, NULL, 0, h);
    expect_bad(h, sizeof h, "beyond the end");
    f.chunk = 0;
    f.length = 4;
    tma_transport_frame_encode(&f, NULL, 0, h);
    expect_bad(h, sizeof h, "chunk length");
    f.length = 0;
    tma_transport_frame_encode(&f, NULL, 0, h);
    CHECK_OK(tma_transport_frame_decode(h, sizeof h, MAXP, &g, NULL));
    ASSERT_EQ(tma_transport_frame_chunks(&g), 1);
    struct {
        uint16_t type;
        uint64_t len;
        uint32_t tag;
        const char *why;
    } ctl[] = {
        {TMA_TRANSPORT_FRAME_HELLO, 4, 0, "hello length"},
        {TMA_TRANSPORT_FRAME_HELLO, TMA_TRANSPORT_HELLO_FIXED, 0, "hello length"},
        {TMA_TRANSPORT_FRAME_CHALLENGE, TMA_TRANSPORT_CHALLENGE_BYTES - 1, 0, "challenge length"},
        {TMA_TRANSPORT_FRAME_PROOF, TMA_TRANSPORT_PROOF_BYTES + 1, 0, "proof length"},
        {TMA_TRANSPORT_FRAME_HELLO, TMA_TRANSPORT_HELLO_MAX + 1, 0, "hello length"},
        {TMA_TRANSPORT_FRAME_HELLO_ACK, 4, 0, "hello-ack length"},
        {TMA_TRANSPORT_FRAME_BYE, 8, 0, "bye length"},
        {TMA_TRANSPORT_FRAME_BYE, 0, 5, "control frame with tensor fields"},
        {0, 0, 0, "type"},
        {7, 0, 0, "type"},
    };
    for (size_t i = 0; i < TMA_ARRAY_LEN(ctl); i++) {
        f = tensor_frame(ctl[i].len);
        f.type = ctl[i].type;
        f.tag = ctl[i].tag;
        f.total = 0;
        f.seq = 0;
        tma_transport_frame_encode(&f, NULL, 0, h);
        expect_bad(h, sizeof h, ctl[i].why);
    }
    /* Control frames must leave total, chunk and seq at zero. */
    for (int field = 0; field < 3; field++) {
        f = tensor_frame(0);
        f.type = TMA_TRANSPORT_FRAME_BYE;
        f.tag = 0;
        f.total = field == 0 ? 4 : 0;
        f.chunk = field == 1 ? 1 : 0;
        f.seq = field == 2 ? 1 : 0;
        tma_transport_frame_encode(&f, NULL, 0, h);
        expect_bad(h, sizeof h, "control frame with tensor fields");
    }
    /* A valid header followed by more bytes decodes (the rest is payload). */
    unsigned char big[TMA_TRANSPORT_HEADER_BYTES + 16];
    memcpy(big, good, sizeof good);
    CHECK_OK(tma_transport_frame_decode(big, sizeof big, MAXP, &g, NULL));
}

static void test_hello(void)
{
    unsigned char buf[TMA_TRANSPORT_HELLO_MAX], nonce[TMA_TRANSPORT_NONCE_BYTES];
    for (int i = 0; i < TMA_TRANSPORT_NONCE_BYTES; i++)
        nonce[i] = (unsigned char)(0xa0 + i);
    size_t n = tma_transport_hello_encode("job-a", 0x1122334455667788ull, nonce, buf, sizeof buf);
    ASSERT_EQ(n, TMA_TRANSPORT_HELLO_FIXED + 5);
    const char *why = NULL;
    tma_transport_hello_t h;
    CHECK_OK(tma_transport_hello_decode(buf, n, &h, &why));
    ASSERT_EQ(h.job_len, 5);
    ASSERT_EQ(memcmp(h.job, "job-a", 5), 0);
    ASSERT_EQ(h.lease, 0x1122334455667788ull);
    ASSERT_EQ(memcmp(h.nonce, nonce, sizeof nonce), 0);
    /* The token never travels: the hello holds the job, lease and nonce only. */
    ASSERT_EQ(buf[8], 0x88);
    ASSERT_EQ(buf[16], 0xa0);

    /* Too long, empty, or no room. */
    char longname[TMA_TRANSPORT_JOB_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    ASSERT_EQ(tma_transport_hello_encode(longname, 0, nonce, buf, sizeof buf), 0);
    ASSERT_EQ(tma_transport_hello_encode("", 0, nonce, buf, sizeof buf), 0);
    ASSERT_EQ(tma_transport_hello_encode("job", 0, nonce, buf, 10), 0);
    longname[TMA_TRANSPORT_JOB_MAX] = '\0';
    ASSERT_EQ(tma_transport_hello_encode(longname, 0, nonce, buf, sizeof buf), TMA_TRANSPORT_HELLO_MAX);

    /* Every truncation, and inconsistent lengths, are refused. */
    n = tma_transport_hello_encode("job-a", 9, nonce, buf, sizeof buf);
    for (size_t l = 0; l < n; l++)
        ASSERT_EQ(tma_transport_hello_decode(buf, l, &h, &why), TMA_ERR_MALFORMED);
    ASSERT_EQ(tma_transport_hello_decode(buf, n + 1, &h, &why), TMA_ERR_MALFORMED);
    unsigned char bad[sizeof buf];
    memcpy(bad, buf, n);
    bad[4] = 0; /* job length 0 */
    ASSERT_EQ(tma_transport_hello_decode(bad, n, &h, &why), TMA_ERR_MALFORMED);
    memcpy(bad, buf, n);
    bad[6] = 1; /* reserved */
    ASSERT_EQ(tma_transport_hello_decode(bad, n, &h, &why), TMA_ERR_MALFORMED);
    CHECK(why && strstr(why, "reserved"));
    memcpy(bad, buf, n);
    le32(bad, 1); /* flags */
    ASSERT_EQ(tma_transport_hello_decode(bad, n, &h, &why), TMA_ERR_MALFORMED);
    CHECK(why && strstr(why, "flags"));
    memcpy(bad, buf, n);
    bad[5] = 0xff; /* job length 0xff05 */
    ASSERT_EQ(tma_transport_hello_decode(bad, n, &h, &why), TMA_ERR_MALFORMED);
}

/* The hello MAC: a known answer computed outside tma (Python's hmac over the
 * bytes docs/transport.md lists), and every input changes it. */
static void test_hello_mac(void)
{
    unsigned char nc[TMA_TRANSPORT_NONCE_BYTES], ns[TMA_TRANSPORT_NONCE_BYTES];
    unsigned char mac[TMA_TRANSPORT_MAC_BYTES], other[TMA_TRANSPORT_MAC_BYTES];
    for (int i = 0; i < TMA_TRANSPORT_NONCE_BYTES; i++) {
        nc[i] = (unsigned char)i;
        ns[i] = (unsigned char)(32 + i);
    }
    const uint64_t lease = 0x1122334455667788ull;
    CHECK_OK(tma_transport_hello_mac("tok", 3, TMA_TRANSPORT_MAC_CONNECTOR, "job-a", 5, 7, 0, lease, nc,
                                     ns, mac));
    static const unsigned char want[TMA_TRANSPORT_MAC_BYTES] = {
        0x93, 0x97, 0x20, 0x58, 0x04, 0x81, 0x31, 0x8c, 0x90, 0xb6, 0x45, 0x71, 0xac, 0x56, 0xe2, 0x69,
        0x8a, 0x0f, 0x28, 0x77, 0x25, 0x96, 0x90, 0x8c, 0xe9, 0xff, 0x98, 0x63, 0x8b, 0xcd, 0xc5, 0xca};
    CHECK(tma_transport_mac_equal(mac, want));
    /* The listener's MAC over the same inputs differs (a challenge is never a proof). */
    CHECK_OK(tma_transport_hello_mac("tok", 3, TMA_TRANSPORT_MAC_LISTENER, "job-a", 5, 7, 0, lease, nc,
                                     ns, other));
    CHECK(!tma_transport_mac_equal(mac, other));
    /* Another key, member id, lease or nonce gives another MAC. */
    CHECK_OK(tma_transport_hello_mac("tol", 3, TMA_TRANSPORT_MAC_CONNECTOR, "job-a", 5, 7, 0, lease, nc,
                                     ns, other));
    CHECK(!tma_transport_mac_equal(mac, other));
    CHECK_OK(tma_transport_hello_mac("tok", 3, TMA_TRANSPORT_MAC_CONNECTOR, "job-a", 5, 8, 0, lease, nc,
                                     ns, other));
    CHECK(!tma_transport_mac_equal(mac, other));
    CHECK_OK(tma_transport_hello_mac("tok", 3, TMA_TRANSPORT_MAC_CONNECTOR, "job-a", 5, 7, 0, lease + 1,
                                     nc, ns, other));
    CHECK(!tma_transport_mac_equal(mac, other));
    ns[31] ^= 1;
    CHECK_OK(tma_transport_hello_mac("tok", 3, TMA_TRANSPORT_MAC_CONNECTOR, "job-a", 5, 7, 0, lease, nc,
                                     ns, other));
    CHECK(!tma_transport_mac_equal(mac, other));
    /* No key, no job. */
    CHECK_STATUS(tma_transport_hello_mac("", 0, TMA_TRANSPORT_MAC_CONNECTOR, "job-a", 5, 7, 0, lease,
                                         nc, ns, other),
                 TMA_ERR_INVALID);
    CHECK_STATUS(tma_transport_hello_mac("tok", 3, TMA_TRANSPORT_MAC_CONNECTOR, "", 0, 7, 0, lease, nc,
                                         ns, other),
                 TMA_ERR_INVALID);
}

int main(void)
{
    test_layout();
    test_roundtrip();
    test_bad_headers();
    test_hello();
    test_hello_mac();
    ASSERT_STR_EQ(tma_transport_event_str(TMA_TRANSPORT_EV_FLAGGED), "flagged");
    return tma_test_done();
}
