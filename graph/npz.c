/*
 * npz.c: NumPy .npz files: the file is mapped, the zip end record and
 * central directory are parsed (ZIP64 included, as numpy writes it).  A
 * stored member (np.savez) is read in place: its array is a pointer into the
 * map after its local header and .npy header.  A deflated member
 * (np.savez_compressed, scipy.sparse.save_npz) is inflated once into a
 * buffer the reader owns.  Each member's CRC-32 is checked when it is first
 * used.  The .npy header parser also reads a whole .npy file (graph_npy_open:
 * `features.npy` beside an edge list).
 */
#include "graph_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define COMP "import"

typedef struct npz_member {
    char *name; /* without ".npy" */
    uint16_t method, flags;
    uint32_t crc;
    uint64_t csize, usize, local_off;
    unsigned char *inflated; /* a deflated member's bytes, once read */
} npz_member_t;

struct graph_npz {
    char *path;
    tma_mmap_t map;
    npz_member_t *m;
    size_t n;
};

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

const char *graph_npz_path(const graph_npz_t *z) { return z->path; }

void graph_npz_close(graph_npz_t *z)
{
    if (!z)
        return;
    for (size_t i = 0; i < z->n; i++) {
        free(z->m[i].name);
        free(z->m[i].inflated);
    }
    free(z->m);
    tma_mmap_close(&z->map);
    free(z->path);
    free(z);
}

static tma_status_t bad_zip(const graph_npz_t *z, const char *what)
{
    tma_log_error(COMP, "%s: not a readable .npz (zip) file: %s", z->path, what);
    return TMA_ERR_FORMAT;
}

/* Fills in 64-bit values from a ZIP64 extra field where the 32-bit ones are
 * saturated, in the order the format defines. */
static int zip64_extra(const unsigned char *ex, size_t len, npz_member_t *mb, int need_u, int need_c,
                       int need_o)
{
    size_t i = 0;
    while (i + 4 <= len) {
        uint16_t id = rd16(ex + i), sz = rd16(ex + i + 2);
        if (i + 4 + sz > len)
            return -1;
        if (id == 0x0001) {
            const unsigned char *q = ex + i + 4, *end = q + sz;
            if (need_u) {
                if (q + 8 > end)
                    return -1;
                mb->usize = rd64(q);
                q += 8;
            }
            if (need_c) {
                if (q + 8 > end)
                    return -1;
                mb->csize = rd64(q);
                q += 8;
            }
            if (need_o) {
                if (q + 8 > end)
                    return -1;
                mb->local_off = rd64(q);
            }
            return 0;
        }
        i += 4 + sz;
    }
    return need_u || need_c || need_o ? -1 : 0;
}

tma_status_t graph_npz_open(const char *path, graph_npz_t **z_p)
{
    graph_npz_t *z = calloc(1, sizeof *z);
    if (!z || !(z->path = strdup(path))) {
        free(z);
        return TMA_ERR_NOMEM;
    }
    tma_status_t st = tma_mmap_open(path, &z->map);
    if (st != TMA_OK)
        goto fail;
    const unsigned char *d = z->map.data;
    const size_t size = z->map.size;
    if (size < 22) {
        st = bad_zip(z, size == 0 ? "the file is empty" : "too short for a zip end record");
        goto fail;
    }
    /* The end-of-central-directory record, found from the end (it may be
     * followed by a comment of up to 64 KiB). */
    size_t eocd = SIZE_MAX;
    for (size_t i = size - 22 + 1; i-- > 0 && size - i <= 22 + 65535;) {
        if (rd32(d + i) == 0x06054b50) {
            eocd = i;
            break;
        }
    }
    if (eocd == SIZE_MAX) {
        st = bad_zip(z, "no end-of-central-directory record (truncated, or not a zip)");
        goto fail;
    }
    uint64_t count = rd16(d + eocd + 10), cd_size = rd32(d + eocd + 12), cd_off = rd32(d + eocd + 16);
    if (count == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu) {
        if (eocd < 20 || rd32(d + eocd - 20) != 0x07064b50) {
            st = bad_zip(z, "ZIP64 locator missing");
            goto fail;
        }
        uint64_t z64 = rd64(d + eocd - 20 + 8);
        if (z64 > size - 56 || rd32(d + z64) != 0x06064b50) {
            st = bad_zip(z, "ZIP64 end record missing");
            goto fail;
        }
        count = rd64(d + z64 + 32);
        cd_size = rd64(d + z64 + 40);
        cd_off = rd64(d + z64 + 48);
    }
    if (cd_off > size || cd_size > size - cd_off || count > cd_size / 46 + 1) {
        st = bad_zip(z, "the central directory lies outside the file (truncated?)");
        goto fail;
    }
    z->m = calloc(count ? count : 1, sizeof *z->m);
    if (!z->m) {
        st = TMA_ERR_NOMEM;
        goto fail;
    }
    const unsigned char *p = d + cd_off, *end = d + cd_off + cd_size;
    for (uint64_t k = 0; k < count; k++) {
        if (end - p < 46 || rd32(p) != 0x02014b50) {
            st = bad_zip(z, "broken central directory entry");
            goto fail;
        }
        npz_member_t *mb = &z->m[z->n];
        mb->flags = rd16(p + 8);
        mb->method = rd16(p + 10);
        mb->crc = rd32(p + 16);
        mb->csize = rd32(p + 20);
        mb->usize = rd32(p + 24);
        size_t nlen = rd16(p + 28), xlen = rd16(p + 30), clen = rd16(p + 32);
        mb->local_off = rd32(p + 42);
        if ((size_t)(end - p) < 46 + nlen + xlen + clen) {
            st = bad_zip(z, "broken central directory entry");
            goto fail;
        }
        if (zip64_extra(p + 46 + nlen, xlen, mb, mb->usize == 0xffffffffu, mb->csize == 0xffffffffu,
                        mb->local_off == 0xffffffffu) != 0) {
            st = bad_zip(z, "broken ZIP64 extra field");
            goto fail;
        }
        const char *nm = (const char *)p + 46;
        size_t base = nlen >= 4 && memcmp(nm + nlen - 4, ".npy", 4) == 0 ? nlen - 4 : nlen;
        mb->name = strndup(nm, base);
        if (!mb->name) {
            st = TMA_ERR_NOMEM;
            goto fail;
        }
        z->n++;
        p += 46 + nlen + xlen + clen;
    }
    *z_p = z;
    return TMA_OK;
fail:
    graph_npz_close(z);
    return st;
}

/* Parses the Python dict literal of an .npy header; `where` names the file
 * (and array) in errors. */
static tma_status_t parse_npy_header(const char *where, const char *h, size_t len, graph_npy_t *a)
{
    char tmp[4096];
    if (len >= sizeof tmp)
        len = sizeof tmp - 1;
    memcpy(tmp, h, len);
    tmp[len] = '\0';
    const char *dk = strstr(tmp, "'descr'"), *fk = strstr(tmp, "'fortran_order'"), *sk = strstr(tmp, "'shape'");
    if (!dk || !fk || !sk) {
        tma_log_error(COMP, "%s: .npy header lacks descr, fortran_order or shape", where);
        return TMA_ERR_FORMAT;
    }
    const char *q = strchr(dk + 7, '\'');
    const char *qe = q ? strchr(q + 1, '\'') : NULL;
    if (!q || !qe || (size_t)(qe - q - 1) >= sizeof a->descr) {
        tma_log_error(COMP, "%s: unreadable dtype in the .npy header (a structured dtype?)", where);
        return TMA_ERR_UNSUPPORTED;
    }
    memcpy(a->descr, q + 1, (size_t)(qe - q - 1));
    a->descr[qe - q - 1] = '\0';
    const char *fv = fk + 15;
    while (*fv == ' ' || *fv == ':')
        fv++;
    a->fortran = strncmp(fv, "True", 4) == 0;
    const char *sp = strchr(sk + 7, '(');
    if (!sp) {
        tma_log_error(COMP, "%s: unreadable shape in the .npy header", where);
        return TMA_ERR_FORMAT;
    }
    sp++;
    a->ndim = 0;
    a->count = 1;
    for (;;) {
        while (*sp == ' ' || *sp == ',')
            sp++;
        if (*sp == ')')
            break;
        char *e;
        long long v = strtoll(sp, &e, 10);
        if (e == sp || v < 0 || a->ndim == 4) {
            tma_log_error(COMP, "%s: unreadable shape (or more than 4 dimensions) in the .npy header", where);
            return TMA_ERR_FORMAT;
        }
        if (e[0] == 'L')
            e++;
        a->shape[a->ndim++] = v;
        if (__builtin_mul_overflow(a->count, (int64_t)v, &a->count)) {
            tma_log_error(COMP, "%s: shape too large", where);
            return TMA_ERR_FORMAT;
        }
        sp = e;
    }
    /* The dtype: byte order, kind, item size ("<i8", "|b1", "<f4"). */
    const char *ds = a->descr;
    char order = ds[0];
    if (order == '<' || order == '|' || order == '=')
        ds++;
    else if (order != '>')
        order = '=';
    else
        ds++;
    char kind = ds[0];
    char *e;
    long sz = strtol(ds + 1, &e, 10);
    int ok = *e == '\0';
    switch (kind) {
    case 'b': a->kind = NPY_BOOL; ok = ok && sz == 1; break;
    case 'i': a->kind = NPY_INT; ok = ok && (sz == 1 || sz == 2 || sz == 4 || sz == 8); break;
    case 'u': a->kind = NPY_UINT; ok = ok && (sz == 1 || sz == 2 || sz == 4 || sz == 8); break;
    case 'f': a->kind = NPY_FLOAT; ok = ok && (sz == 2 || sz == 4 || sz == 8); break;
    case 'S': a->kind = NPY_BYTES; ok = ok && sz >= 1 && sz <= 64; break;
    default: ok = 0;
    }
    if (ok && order == '>' && sz > 1 && a->kind != NPY_BYTES) {
        tma_log_error(COMP, "%s: dtype '%s' is big-endian; tma reads little-endian data: save a.astype('<%s')",
                      where, a->descr, ds);
        return TMA_ERR_UNSUPPORTED;
    }
    if (!ok) {
        tma_log_error(COMP,
                      "%s: dtype '%s' is not supported (tma reads little-endian bool, int8-64, uint8-64, "
                      "float16, float32 and float64, and short byte strings)",
                      where, a->descr);
        return TMA_ERR_UNSUPPORTED;
    }
    a->itemsize = (int)sz;
    return TMA_OK;
}

tma_status_t graph_npy_parse(const char *where, const unsigned char *p, uint64_t size, graph_npy_t *a_p)
{
    if (size < 10 || memcmp(p, "\x93NUMPY", 6) != 0) {
        tma_log_error(COMP, "%s: not an .npy array (bad magic%s)", where, size < 10 ? ", or truncated" : "");
        return TMA_ERR_FORMAT;
    }
    uint64_t hlen, hoff;
    if (p[6] == 1) {
        hlen = rd16(p + 8);
        hoff = 10;
    } else if ((p[6] == 2 || p[6] == 3) && size >= 12) {
        hlen = rd32(p + 8);
        hoff = 12;
    } else {
        tma_log_error(COMP, "%s: .npy format version %u is not supported", where, p[6]);
        return TMA_ERR_UNSUPPORTED;
    }
    if (hoff + hlen > size) {
        tma_log_error(COMP, "%s: truncated .npy header", where);
        return TMA_ERR_FORMAT;
    }
    graph_npy_t a;
    memset(&a, 0, sizeof a);
    tma_status_t st = parse_npy_header(where, (const char *)p + hoff, hlen, &a);
    if (st != TMA_OK)
        return st;
    uint64_t bytes = (uint64_t)a.count * (uint64_t)a.itemsize, have = size - hoff - hlen;
    if (bytes != have) {
        tma_log_error(COMP, "%s: its shape and dtype '%s' need %" PRIu64 " bytes of data, it holds %" PRIu64 "%s",
                      where, a.descr, bytes, have, bytes > have ? " (truncated?)" : "");
        return TMA_ERR_FORMAT;
    }
    a.data = p + hoff + hlen;
    *a_p = a;
    return TMA_OK;
}

tma_status_t graph_npy_open(const char *path, tma_mmap_t *map_p, graph_npy_t *a_p)
{
    tma_mmap_t map;
    tma_status_t st = tma_mmap_open(path, &map);
    if (st != TMA_OK)
        return st;
    graph_npy_t a;
    if ((st = graph_npy_parse(path, map.data, map.size, &a)) != TMA_OK) {
        tma_mmap_close(&map);
        return st;
    }
    a.name = NULL;
    *map_p = map;
    *a_p = a;
    return TMA_OK;
}

static uint32_t crc32_of(const unsigned char *p, uint64_t n)
{
    /* zlib's crc32 takes uInt lengths: feed large members in pieces. */
    uLong crc = crc32(0L, Z_NULL, 0);
    for (uint64_t off = 0; off < n;) {
        uint64_t chunk = n - off > (1u << 30) ? (1u << 30) : n - off;
        crc = crc32(crc, p + off, (uInt)chunk);
        off += chunk;
    }
    return (uint32_t)crc;
}

/* Inflates a deflated member's csize bytes at src into a buffer of exactly
 * usize bytes (the raw deflate stream of zip method 8). */
static tma_status_t inflate_member(const graph_npz_t *z, npz_member_t *mb, const unsigned char *src)
{
    /* Deflate expands at most 1032:1: a larger claim is a corrupt header,
     * and must not become a huge allocation. */
    if (mb->usize / 1032 > mb->csize + 1) {
        tma_log_error(COMP, "%s: array %s: the zip entry claims %" PRIu64 " bytes from %" PRIu64
                      " compressed ones, more than deflate can give: the file is corrupted", z->path, mb->name,
                      mb->usize, mb->csize);
        return TMA_ERR_FORMAT;
    }
    unsigned char *buf = malloc(mb->usize ? mb->usize : 1);
    if (!buf) {
        tma_log_error(COMP, "%s: array %s: out of memory inflating %" PRIu64 " bytes", z->path, mb->name, mb->usize);
        return TMA_ERR_NOMEM;
    }
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
        free(buf);
        tma_log_error(COMP, "%s: array %s: cannot start zlib's inflate", z->path, mb->name);
        return TMA_ERR_NOMEM;
    }
    /* zlib counts in uInt: feed and drain in pieces of at most 1 GiB; stop
     * when the stream ends, breaks, or can go no further (Z_BUF_ERROR with
     * nothing left to give it). */
    uint64_t in_left = mb->csize, out_left = mb->usize;
    zs.next_in = (unsigned char *)src;
    zs.next_out = buf;
    int r;
    do {
        if (zs.avail_in == 0 && in_left > 0) {
            zs.avail_in = (uInt)(in_left > (1u << 30) ? (1u << 30) : in_left);
            in_left -= zs.avail_in;
        }
        if (zs.avail_out == 0 && out_left > 0) {
            zs.avail_out = (uInt)(out_left > (1u << 30) ? (1u << 30) : out_left);
            out_left -= zs.avail_out;
        }
        r = inflate(&zs, Z_NO_FLUSH);
    } while (r == Z_OK ||
             (r == Z_BUF_ERROR && ((zs.avail_in == 0 && in_left > 0) || (zs.avail_out == 0 && out_left > 0))));
    uint64_t produced = (uint64_t)zs.total_out;
    const char *msg = zs.msg;
    inflateEnd(&zs);
    if (r != Z_STREAM_END || produced != mb->usize || zs.avail_in != 0 || in_left != 0) {
        if (r == Z_DATA_ERROR)
            tma_log_error(COMP, "%s: array %s: corrupt deflate data (%s)", z->path, mb->name, msg ? msg : "?");
        else if (r == Z_STREAM_END)
            tma_log_error(COMP, "%s: array %s: the deflate stream gives %" PRIu64 " bytes, the zip entry says %" PRIu64
                          " (or data follows its end): the file is corrupted", z->path, mb->name, produced,
                          mb->usize);
        else
            tma_log_error(COMP, "%s: array %s: the deflate stream does not end where the zip entry does (truncated "
                          "or corrupted)", z->path, mb->name);
        free(buf);
        return TMA_ERR_FORMAT;
    }
    mb->inflated = buf;
    return TMA_OK;
}

/* The member's uncompressed bytes, CRC-checked: a pointer into the map for a
 * stored member, the inflated buffer (made on first use) for a deflated one. */
static tma_status_t member_bytes(graph_npz_t *z, npz_member_t *mb, const unsigned char **p_p)
{
    const unsigned char *d = z->map.data;
    const size_t size = z->map.size;
    const char *name = mb->name;
    if (mb->inflated) {
        *p_p = mb->inflated;
        return TMA_OK;
    }
    if (mb->flags & 1) {
        tma_log_error(COMP, "%s: array %s is encrypted", z->path, name);
        return TMA_ERR_UNSUPPORTED;
    }
    if (mb->method != 0 && mb->method != 8) {
        tma_log_error(COMP,
                      "%s: array %s uses zip compression method %u; tma reads stored (np.savez) and deflated "
                      "(np.savez_compressed) members: re-save it with one of those",
                      z->path, name, mb->method);
        return TMA_ERR_UNSUPPORTED;
    }
    if (mb->local_off > size || size - mb->local_off < 30 || rd32(d + mb->local_off) != 0x04034b50) {
        tma_log_error(COMP, "%s: array %s: local zip header missing (truncated file?)", z->path, name);
        return TMA_ERR_FORMAT;
    }
    uint64_t data_off = mb->local_off + 30 + rd16(d + mb->local_off + 26) + rd16(d + mb->local_off + 28);
    if ((mb->method == 0 && mb->csize != mb->usize) || data_off > size || mb->csize > size - data_off) {
        tma_log_error(COMP, "%s: array %s: data runs past the end of the file (truncated?)", z->path, name);
        return TMA_ERR_FORMAT;
    }
    const unsigned char *p = d + data_off;
    if (mb->method == 8) {
        tma_status_t st = inflate_member(z, mb, p);
        if (st != TMA_OK)
            return st;
        p = mb->inflated;
    }
    if (crc32_of(p, mb->usize) != mb->crc) {
        tma_log_error(COMP, "%s: array %s: CRC-32 mismatch: the file is corrupted", z->path, name);
        free(mb->inflated);
        mb->inflated = NULL;
        return TMA_ERR_CHECKSUM;
    }
    *p_p = p;
    return TMA_OK;
}

static npz_member_t *find_member(graph_npz_t *z, const char *name)
{
    npz_member_t *mb = NULL;
    for (size_t i = 0; i < z->n; i++)
        if (strcmp(z->m[i].name, name) == 0)
            mb = &z->m[i];
    return mb;
}

int graph_npz_has(graph_npz_t *z, const char *name) { return find_member(z, name) != NULL; }

char *graph_npz_names(const graph_npz_t *z)
{
    size_t len = 1;
    for (size_t i = 0; i < z->n; i++)
        len += strlen(z->m[i].name) + 2;
    char *out = malloc(len);
    if (!out)
        return NULL;
    out[0] = '\0';
    for (size_t i = 0; i < z->n; i++) {
        if (i)
            strcat(out, ", ");
        strcat(out, z->m[i].name);
    }
    return out;
}

/* Any array, byte strings included. */
static tma_status_t get_array(graph_npz_t *z, const char *name, int required, graph_npy_t *a_p)
{
    npz_member_t *mb = find_member(z, name);
    if (!mb) {
        if (required)
            tma_log_error(COMP, "%s: array %s is missing (the file holds %zu arrays)", z->path, name, z->n);
        return TMA_ERR_NOT_FOUND;
    }
    const unsigned char *p;
    tma_status_t st = member_bytes(z, mb, &p);
    if (st != TMA_OK)
        return st;
    char *where = tma_strdup_printf("%s: array %s", z->path, name);
    if (!where)
        return TMA_ERR_NOMEM;
    graph_npy_t a;
    st = graph_npy_parse(where, p, mb->usize, &a);
    free(where);
    if (st != TMA_OK)
        return st;
    if (a.fortran && a.ndim > 1) {
        tma_log_error(COMP,
                      "%s: array %s is stored in Fortran (column-major) order; tma reads C order: save "
                      "np.ascontiguousarray(a)",
                      z->path, name);
        return TMA_ERR_UNSUPPORTED;
    }
    a.name = mb->name;
    *a_p = a;
    return TMA_OK;
}

tma_status_t graph_npz_get(graph_npz_t *z, const char *name, int required, graph_npy_t *a_p)
{
    graph_npy_t a;
    tma_status_t st = get_array(z, name, required, &a);
    if (st != TMA_OK)
        return st;
    if (a.kind == NPY_BYTES) {
        tma_log_error(COMP, "%s: array %s holds byte strings (%s); numbers are expected", z->path, name, a.descr);
        return TMA_ERR_FORMAT;
    }
    *a_p = a;
    return TMA_OK;
}

tma_status_t graph_npz_get_string(graph_npz_t *z, const char *name, char *buf, size_t size)
{
    graph_npy_t a;
    tma_status_t st = get_array(z, name, 1, &a);
    if (st != TMA_OK)
        return st;
    if (a.kind != NPY_BYTES || a.count != 1) {
        tma_log_error(COMP, "%s: array %s must be one byte string (dtype |S<n>, shape ()), not dtype %s with %" PRId64
                      " entries", z->path, name, a.descr, a.count);
        return TMA_ERR_FORMAT;
    }
    /* numpy pads a byte string with NULs to its item size. */
    size_t n = strnlen(a.data, (size_t)a.itemsize);
    if (n >= size) {
        tma_log_error(COMP, "%s: array %s: the string is too long (%zu bytes)", z->path, name, n);
        return TMA_ERR_FORMAT;
    }
    memcpy(buf, a.data, n);
    buf[n] = '\0';
    return TMA_OK;
}

tma_status_t graph_npy_check_int(const graph_npz_t *z, const graph_npy_t *a)
{
    if (a->kind == NPY_FLOAT || a->kind == NPY_BYTES) {
        tma_log_error(COMP, "%s: array %s holds floats (%s); integers are expected", z->path, a->name, a->descr);
        return TMA_ERR_FORMAT;
    }
    if (a->kind == NPY_UINT && a->itemsize == 8) {
        for (int64_t i = 0; i < a->count; i++) {
            uint64_t v;
            memcpy(&v, (const char *)a->data + 8 * i, 8);
            if (v > (uint64_t)INT64_MAX) {
                tma_log_error(COMP, "%s: array %s: entry %" PRId64 " does not fit in int64", z->path, a->name, i);
                return TMA_ERR_RANGE;
            }
        }
    }
    return TMA_OK;
}

/* The data may sit at any byte offset in the map: read through memcpy. */
#define LOAD(T, p, i)                                                                              \
    ({                                                                                             \
        T v_;                                                                                      \
        memcpy(&v_, (const char *)(p) + (size_t)(i) * sizeof(T), sizeof(T));                       \
        v_;                                                                                        \
    })

int64_t graph_npy_int(const graph_npy_t *a, int64_t i)
{
    switch (a->kind) {
    case NPY_BOOL:
    case NPY_UINT:
        switch (a->itemsize) {
        case 1: return LOAD(uint8_t, a->data, i);
        case 2: return LOAD(uint16_t, a->data, i);
        case 4: return LOAD(uint32_t, a->data, i);
        default: return (int64_t)LOAD(uint64_t, a->data, i);
        }
    case NPY_INT:
        switch (a->itemsize) {
        case 1: return LOAD(int8_t, a->data, i);
        case 2: return LOAD(int16_t, a->data, i);
        case 4: return LOAD(int32_t, a->data, i);
        default: return LOAD(int64_t, a->data, i);
        }
    case NPY_FLOAT:
        return (int64_t)graph_npy_float(a, i);
    case NPY_BYTES:
        break;
    }
    return 0;
}

float graph_npy_float(const graph_npy_t *a, int64_t i)
{
    if (a->kind == NPY_FLOAT) {
        switch (a->itemsize) {
        case 2: return tma_f16_to_f32(LOAD(uint16_t, a->data, i));
        case 4: return LOAD(float, a->data, i);
        default: return (float)LOAD(double, a->data, i);
        }
    }
    return (float)graph_npy_int(a, i);
}
