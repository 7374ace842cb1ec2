/*
 * fuzz_kv.c: libFuzzer target for the etcd client's response parsers.
 * The first byte picks the parser, the rest is the body:
 *   0 range  1 put  2 deleterange  3 txn       (tma_kv_parse_result)
 *   4 lease answer                             (tma_kv_parse_lease)
 *   5 watch stream, split on newlines          (tma_kv_parse_watch, one arena reused)
 *   6 error answer: 2 more bytes give the HTTP status (tma_kv_parse_error)
 *   7 authenticate answer                      (tma_kv_parse_auth)
 * Every parsed structure is walked so that a bad pointer or length in it
 * shows up under AddressSanitizer.
 */
#include "kv_int.h"

#include <string.h>

static volatile size_t sink;

static void touch_pair(const tma_kv_pair_t *p)
{
    sink += p->key_len + p->value_len + (size_t)p->mod_revision;
    if (p->key_len)
        sink += (unsigned char)p->key[p->key_len - 1] + (unsigned char)p->key[p->key_len];
    if (p->value_len)
        sink += (unsigned char)p->value[p->value_len - 1] + (unsigned char)p->value[p->value_len];
}

static void touch_result(const tma_kv_result_t *r)
{
    for (size_t i = 0; i < r->n_pairs; i++)
        touch_pair(&r->pairs[i]);
    for (size_t i = 0; i < r->n_results; i++)
        touch_result(&r->results[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned sel = data[0] % 8;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    switch (sel) {
    case 0:
    case 1:
    case 2:
    case 3: {
        tma_kv_result_t r;
        memset(&r, 0, sizeof(r));
        if (tma_kv_parse_result((tma_kv_op_type_t)sel, body, len, &r) == TMA_OK) {
            touch_result(&r);
            tma_kv_result_free(&r);
        }
        break;
    }
    case 4: {
        tma_kv_lease_resp_t l;
        if (tma_kv_parse_lease(body, len, &l) == TMA_OK)
            sink += (size_t)l.id + (size_t)l.ttl;
        break;
    }
    case 5: {
        kv_arena_t *arena = NULL;
        size_t start = 0;
        while (start <= len) {
            const char *nl = memchr(body + start, '\n', len - start);
            size_t n = nl ? (size_t)(nl - (body + start)) : len - start;
            tma_kv_watch_resp_t w;
            tma_kv_error_t err;
            kv_arena_reset(&arena);
            if (tma_kv_parse_watch(body + start, n, &arena, &w, &err) == TMA_OK) {
                sink += strlen(w.cancel_reason);
                for (size_t i = 0; i < w.n_events; i++) {
                    touch_pair(&w.events[i].kv);
                    if (w.events[i].has_prev)
                        touch_pair(&w.events[i].prev_kv);
                }
            } else {
                sink += strlen(err.message);
            }
            start += n + 1;
        }
        kv_arena_free(arena);
        break;
    }
    case 6: {
        if (len < 2)
            return 0;
        long http = 100 + (long)((data[1] | data[2] << 8) % 500);
        tma_kv_error_t e;
        tma_kv_parse_error(http, body + 2, len - 2, &e);
        sink += strlen(e.message);
        break;
    }
    case 7: {
        char token[256];
        if (tma_kv_parse_auth(body, len, token, sizeof(token)) == TMA_OK)
            sink += strlen(token);
        break;
    }
    }
    return 0;
}
