/*
 * auth.c: the keyed half of the hello: the HMAC-SHA256 that the listener
 * (in its challenge) and the connector (in its proof) compute over both
 * nonces, the job, the two member ids and the connector's lease, and fresh
 * nonces.  The MAC, the random bytes and the constant-time comparison are
 * OpenSSL's libcrypto, never code of our own.
 */
#include "transport_int.h"

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

/* The role label starts the MAC's input, so a listener's MAC can never be
 * sent back as a connector's proof. */
static const char *const role_label[] = {"tma-hello-listener", "tma-hello-connector"};

tma_status_t tma_transport_hello_mac(const char *token, size_t token_len, tma_transport_mac_role_t role,
                                     const char *job, size_t job_len, uint32_t connector,
                                     uint32_t listener, uint64_t lease,
                                     const unsigned char nonce_c[TMA_TRANSPORT_NONCE_BYTES],
                                     const unsigned char nonce_s[TMA_TRANSPORT_NONCE_BYTES],
                                     unsigned char mac[TMA_TRANSPORT_MAC_BYTES])
{
    if (!token || token_len == 0 || token_len > TMA_TRANSPORT_TOKEN_MAX || !job || job_len == 0 ||
        job_len > TMA_TRANSPORT_JOB_MAX || (role != TMA_TRANSPORT_MAC_LISTENER && role != TMA_TRANSPORT_MAC_CONNECTOR))
        return TMA_ERR_INVALID;
    /* label NUL, u16 job length, job, u32 connector, u32 listener, u64 lease,
     * nonce_c, nonce_s: every field fixed-size or length-prefixed, so two
     * different inputs never give the same bytes. */
    unsigned char msg[32 + 2 + TMA_TRANSPORT_JOB_MAX + 16 + 2 * TMA_TRANSPORT_NONCE_BYTES];
    size_t n = 0;
    size_t ll = strlen(role_label[role]) + 1;
    memcpy(msg, role_label[role], ll);
    n += ll;
    msg[n++] = (unsigned char)job_len;
    msg[n++] = (unsigned char)(job_len >> 8);
    memcpy(msg + n, job, job_len);
    n += job_len;
    for (int i = 0; i < 4; i++)
        msg[n++] = (unsigned char)(connector >> (8 * i));
    for (int i = 0; i < 4; i++)
        msg[n++] = (unsigned char)(listener >> (8 * i));
    for (int i = 0; i < 8; i++)
        msg[n++] = (unsigned char)(lease >> (8 * i));
    memcpy(msg + n, nonce_c, TMA_TRANSPORT_NONCE_BYTES);
    n += TMA_TRANSPORT_NONCE_BYTES;
    memcpy(msg + n, nonce_s, TMA_TRANSPORT_NONCE_BYTES);
    n += TMA_TRANSPORT_NONCE_BYTES;
    unsigned int out_len = 0;
    if (!HMAC(EVP_sha256(), token, (int)token_len, msg, n, mac, &out_len) ||
        out_len != TMA_TRANSPORT_MAC_BYTES)
        return TMA_ERR_NOMEM;
    return TMA_OK;
}

int tma_transport_mac_equal(const unsigned char *a, const unsigned char *b)
{
    return CRYPTO_memcmp(a, b, TMA_TRANSPORT_MAC_BYTES) == 0;
}

tma_status_t transport_nonce(unsigned char nonce[TMA_TRANSPORT_NONCE_BYTES])
{
    if (RAND_bytes(nonce, TMA_TRANSPORT_NONCE_BYTES) != 1) {
        tma_log_error(COMP, "OpenSSL's RAND_bytes gave no nonce: the connection is not made");
        return TMA_ERR_UNAVAILABLE;
    }
    return TMA_OK;
}
