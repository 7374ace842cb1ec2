/*
 * npy.c: numpy's .npy and .npz formats, written (for `tma export`): a .npy
 * is a magic, a version, a Python-dict header padded to 64 bytes, then the
 * raw little-endian data; a .npz is a zip archive of NAME.npy members,
 * stored uncompressed (numpy reads it as it reads its own np.savez).
 * Written atomically.
 */
#include "tma_common.h"

#include <stdlib.h>
#include <string.h>

#define COMP "npy"

/* zip's CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), four bits
 * at a time: common/ needs no zlib for it. */
static uint32_t crc32_ieee(uint32_t crc, const void *data, size_t n)
{
    static const uint32_t t[16] = {0x00000000, 0x1DB71064, 0x3B6E20C8, 0x26D930AC, 0x76DC4190, 0x6B6B51F4,
                                   0x4DB26158, 0x5005713C, 0xEDB88320, 0xF00F9344, 0xD6D6A3E8, 0xCB61B38C,
                                   0x9B64C2B0, 0x86D3D2D4, 0xA00AE278, 0xBDBDF21C};
    const unsigned char *p = data;
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        crc = (crc >> 4) ^ t[crc & 15];
        crc = (crc >> 4) ^ t[crc & 15];
    }
    return ~crc;
}

static size_t elem_size(tma_npy_dtype_t t) { return t == TMA_NPY_I64 ? 8 : 4; }

static int64_t elem_count(const tma_npy_array_t *a)
{
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++)
        n *= a->shape[d];
    return n;
}

/* The .npy header (format 1.0): magic, version, length, dict, padding. */
static size_t npy_header(const tma_npy_array_t *a, char *buf, size_t cap)
{
    char shape[80] = "";
    int k = 0;
    for (int d = 0; d < a->ndim; d++)
        k += snprintf(shape + k, sizeof shape - (size_t)k, d ? " %lld," : "%lld,", (long long)a->shape[d]);
    if (a->ndim > 1)
        shape[k - 1] = '\0'; /* (n,) for one dimension, (n, m) for more, as numpy writes them */
    char dict[160];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     a->dtype == TMA_NPY_I64 ? "<i8" : "<f4", shape);
    size_t total = 10 + (size_t)n + 1;
    total = (total + 63) / 64 * 64;
    if (total > cap)
        return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    uint16_t hlen = (uint16_t)(total - 10);
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', total - 10 - (size_t)n - 1);
    buf[total - 1] = '\n';
    return total;
}

static tma_status_t check_array(const char *path, const tma_npy_array_t *a)
{
    int bad_dim = 0;
    for (int d = 0; d < a->ndim && a->ndim <= TMA_NPY_MAX_DIMS; d++)
        bad_dim |= a->shape[d] < 0;
    if (a->ndim < 1 || a->ndim > TMA_NPY_MAX_DIMS || bad_dim ||
        (elem_count(a) > 0 && !a->data) || !a->name || strlen(a->name) > 200) {
        tma_log_error(COMP, "%s: array %s: bad shape, name or data (a bug)", path, a->name ? a->name : "?");
        return TMA_ERR_INVALID;
    }
    return TMA_OK;
}

tma_status_t tma_npy_write(const char *path, const tma_npy_array_t *a)
{
    tma_status_t st = check_array(path, a);
    if (st != TMA_OK)
        return st;
    char head[256];
    size_t hl = npy_header(a, head, sizeof head);
    tma_afile_t *af;
    if ((st = tma_afile_open(path, &af)) != TMA_OK)
        return st;
    st = tma_afile_write(af, head, hl);
    if (st == TMA_OK)
        st = tma_afile_write(af, a->data, (size_t)elem_count(a) * elem_size(a->dtype));
    if (st != TMA_OK) {
        tma_afile_abort(af);
        return st;
    }
    return tma_afile_commit(af);
}

static void put16(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
    put16(p, v);
    put16(p + 2, v >> 16);
}

/* A zip header: the local one (30 bytes) or the central one (46 bytes). */
static size_t zip_header(unsigned char *h, int central, uint32_t crc, uint32_t size, size_t name_len,
                         uint32_t local_offset)
{
    size_t n = central ? 46 : 30;
    memset(h, 0, n);
    put32(h, central ? 0x02014b50 : 0x04034b50);
    unsigned char *p = h + 4;
    if (central) {
        put16(p, 20); /* made by: version 2.0 */
        p += 2;
    }
    put16(p, 20); /* needed to extract: 2.0; then flags 0, method 0 (stored), time, date 0 */
    put32(p + 10, crc);
    put32(p + 14, size);
    put32(p + 18, size);
    put16(p + 22, (uint32_t)name_len);
    if (central)
        put32(p + 36, local_offset); /* after: extra, comment, disk, attributes (all 0) */
    return n;
}

tma_status_t tma_npz_write(const char *path, const tma_npy_array_t *arrays, int n)
{
    tma_status_t st = TMA_OK;
    for (int i = 0; i < n && st == TMA_OK; i++)
        st = check_array(path, &arrays[i]);
    if (st != TMA_OK)
        return st;
    uint32_t *crcs = calloc((size_t)n + 1, sizeof *crcs), *sizes = calloc((size_t)n + 1, sizeof *sizes),
             *offsets = calloc((size_t)n + 1, sizeof *offsets);
    tma_afile_t *af = NULL;
    if (!crcs || !sizes || !offsets)
        st = TMA_ERR_NOMEM;
    else
        st = tma_afile_open(path, &af);
    unsigned char h[64];
    char head[256], name[220];
    for (int i = 0; i < n && st == TMA_OK; i++) {
        const tma_npy_array_t *a = &arrays[i];
        size_t hl = npy_header(a, head, sizeof head);
        uint64_t bytes = (uint64_t)elem_count(a) * elem_size(a->dtype), size = hl + bytes;
        if (size > 0xffffffffu || tma_afile_offset(af) + size > 0xffffffffu) {
            tma_log_error(COMP, "%s: over 4 GiB (zip64 is not written)", path);
            st = TMA_ERR_UNSUPPORTED;
            break;
        }
        crcs[i] = crc32_ieee(crc32_ieee(0, head, hl), a->data, (size_t)bytes);
        sizes[i] = (uint32_t)size;
        offsets[i] = (uint32_t)tma_afile_offset(af);
        int nl = snprintf(name, sizeof name, "%s.npy", a->name);
        st = tma_afile_write(af, h, zip_header(h, 0, crcs[i], sizes[i], (size_t)nl, 0));
        st = st ? st : tma_afile_write(af, name, (size_t)nl);
        st = st ? st : tma_afile_write(af, head, hl);
        st = st ? st : tma_afile_write(af, a->data, (size_t)bytes);
    }
    uint32_t cd_start = af ? (uint32_t)tma_afile_offset(af) : 0;
    for (int i = 0; i < n && st == TMA_OK; i++) {
        int nl = snprintf(name, sizeof name, "%s.npy", arrays[i].name);
        st = tma_afile_write(af, h, zip_header(h, 1, crcs[i], sizes[i], (size_t)nl, offsets[i]));
        st = st ? st : tma_afile_write(af, name, (size_t)nl);
    }
    if (st == TMA_OK) {
        /* The end of central directory record. */
        memset(h, 0, 22);
        put32(h, 0x06054b50);
        put16(h + 8, (uint32_t)n);
        put16(h + 10, (uint32_t)n);
        put32(h + 12, (uint32_t)tma_afile_offset(af) - cd_start);
        put32(h + 16, cd_start);
        st = tma_afile_write(af, h, 22);
    }
    free(crcs);
    free(sizes);
    free(offsets);
    if (st != TMA_OK) {
        tma_afile_abort(af);
        return st;
    }
    return tma_afile_commit(af);
}
