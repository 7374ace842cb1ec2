/*
 * tfevents.c: TensorBoard event files (events.out.tfevents.*), written by
 * hand.  A file is a sequence of TFRecords (docs/formats.md, "TensorBoard
 * event files"): the payload's length as 8 bytes little endian, the masked
 * CRC-32C of those 8 bytes, the payload, its masked CRC-32C.  Each payload
 * is a protobuf `Event`; we write only five of its fields (wall_time, step,
 * file_version, summary, session_log) and of `Summary.Value` only tag and
 * simple_value, of `SessionLog` only status,
 * so a few lines of varint encoding replace a protobuf library and its
 * generated code.
 */
#include "tma_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define COMP "tfevents"

struct tma_tfevents {
    FILE *f;
    char *path;
};

/* TFRecord's mask: rotate right by 15 and add a constant. */
static uint32_t masked_crc(const void *p, size_t n)
{
    uint32_t c = tma_crc32c(0, p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* A growing byte buffer for one Event (about 40 bytes a scalar);
 * overflow records a failed allocation. */
typedef struct pbuf {
    uint8_t *b;
    size_t n, cap;
    int overflow;
} pbuf_t;

static void put_bytes(pbuf_t *p, const void *d, size_t n)
{
    if (p->overflow)
        return;
    if (p->n + n > p->cap) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap < p->n + n)
            cap *= 2;
        uint8_t *b = realloc(p->b, cap);
        if (!b) {
            p->overflow = 1;
            return;
        }
        p->b = b;
        p->cap = cap;
    }
    memcpy(p->b + p->n, d, n);
    p->n += n;
}

static void put_varint(pbuf_t *p, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        v >>= 7;
    } while (v);
    put_bytes(p, t, n);
}

/* Field number and wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32). */
static void put_key(pbuf_t *p, unsigned field, unsigned wire)
{
    put_varint(p, (uint64_t)field << 3 | wire);
}

static void put_le(pbuf_t *p, uint64_t v, int bytes)
{
    uint8_t t[8];
    for (int i = 0; i < bytes; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    put_bytes(p, t, (size_t)bytes);
}

static void put_double(pbuf_t *p, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    put_le(p, v, 8);
}

static void put_string(pbuf_t *p, unsigned field, const char *s)
{
    size_t n = strlen(s);
    put_key(p, field, 2);
    put_varint(p, n);
    put_bytes(p, s, n);
}

/* Event fields: 1 wall_time (double), 2 step (int64), 3 file_version, 5 summary. */
static void put_event_head(pbuf_t *p, double wall, int64_t step)
{
    put_key(p, 1, 1);
    put_double(p, wall);
    put_key(p, 2, 0);
    put_varint(p, (uint64_t)step);
}

static tma_status_t write_record(tma_tfevents_t *w, const pbuf_t *p)
{
    if (p->overflow) {
        tma_log_error(COMP, "%s: out of memory for an event: not written", w->path);
        return TMA_ERR_NOMEM;
    }
    uint8_t head[12];
    uint64_t len = p->n;
    for (int i = 0; i < 8; i++)
        head[i] = (uint8_t)(len >> (8 * i));
    uint32_t hc = masked_crc(head, 8), dc = masked_crc(p->b, p->n);
    for (int i = 0; i < 4; i++)
        head[8 + i] = (uint8_t)(hc >> (8 * i));
    uint8_t tail[4];
    for (int i = 0; i < 4; i++)
        tail[i] = (uint8_t)(dc >> (8 * i));
    if (fwrite(head, 1, sizeof head, w->f) != sizeof head || fwrite(p->b, 1, p->n, w->f) != p->n ||
        fwrite(tail, 1, sizeof tail, w->f) != sizeof tail) {
        tma_log_error(COMP, "%s: write failed: %s", w->path, strerror(errno));
        return TMA_ERR_IO;
    }
    return TMA_OK;
}

/* The time in a new file's name: now, or one past the newest event file
 * already in dir.  TensorBoard reads a folder's files in name order, so a
 * successor's file (its restart record) must come after its predecessor's,
 * also when it starts within the same second. */
static long long name_time(const char *dir, double wall)
{
    static const char prefix[] = "events.out.tfevents.";
    long long t = (long long)wall;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, prefix, sizeof prefix - 1) != 0)
            continue;
        char *end;
        long long u = strtoll(de->d_name + sizeof prefix - 1, &end, 10);
        if (end != de->d_name + sizeof prefix - 1 && *end == '.' && u >= t && u < t + 1000000)
            t = u + 1;
    }
    if (d)
        closedir(d);
    return t;
}

tma_status_t tma_tfevents_open(const char *dir, tma_tfevents_t **w_p)
{
    *w_p = NULL;
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0)
        strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    double wall = tma_clock_wall();
    tma_tfevents_t *w = calloc(1, sizeof *w);
    if (!w)
        return TMA_ERR_NOMEM;
    /* The pid keeps two writers of one second apart (a coordinator's successor). */
    w->path = tma_strdup_printf("%s/events.out.tfevents.%lld.%s.%ld", dir, name_time(dir, wall), host, (long)getpid());
    if (!w->path) {
        free(w);
        return TMA_ERR_NOMEM;
    }
    int fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || !(w->f = fdopen(fd, "wb"))) {
        tma_log_error(COMP, "%s: cannot create: %s", w->path, strerror(errno));
        if (fd >= 0)
            close(fd);
        free(w->path);
        free(w);
        return TMA_ERR_IO;
    }
    pbuf_t p = {.n = 0};
    put_event_head(&p, wall, 0);
    put_string(&p, 3, "brain.Event:2");
    tma_status_t st = write_record(w, &p);
    free(p.b);
    if (st == TMA_OK)
        st = tma_tfevents_flush(w);
    if (st != TMA_OK) {
        tma_tfevents_close(w);
        return st;
    }
    *w_p = w;
    return TMA_OK;
}

tma_status_t tma_tfevents_scalars(tma_tfevents_t *w, double wall, int64_t step, int n, const char *const *tags,
                                  const float *values)
{
    pbuf_t p = {.n = 0};
    put_event_head(&p, wall, step);
    /* Summary { repeated Value value = 1 }, Value { tag = 1, simple_value = 2 }. */
    pbuf_t s = {.n = 0};
    for (int i = 0; i < n; i++) {
        pbuf_t v = {.n = 0};
        put_string(&v, 1, tags[i]);
        put_key(&v, 2, 5);
        uint32_t bits;
        memcpy(&bits, &values[i], sizeof bits);
        put_le(&v, bits, 4);
        put_key(&s, 1, 2);
        put_varint(&s, v.n);
        put_bytes(&s, v.b, v.n);
        s.overflow |= v.overflow;
        free(v.b);
    }
    put_key(&p, 5, 2);
    put_varint(&p, s.n);
    put_bytes(&p, s.b, s.n);
    p.overflow |= s.overflow;
    free(s.b);
    tma_status_t st = write_record(w, &p);
    free(p.b);
    return st;
}

tma_status_t tma_tfevents_restart(tma_tfevents_t *w, double wall, int64_t step)
{
    pbuf_t p = {.n = 0};
    put_event_head(&p, wall, step);
    /* Event field 7, session_log: SessionLog { status (1) = START (1) }. */
    put_key(&p, 7, 2);
    put_varint(&p, 2);
    put_key(&p, 1, 0);
    put_varint(&p, 1);
    tma_status_t st = write_record(w, &p);
    free(p.b);
    return st == TMA_OK ? tma_tfevents_flush(w) : st;
}

tma_status_t tma_tfevents_flush(tma_tfevents_t *w)
{
    if (fflush(w->f) != 0) {
        tma_log_error(COMP, "%s: write failed: %s", w->path, strerror(errno));
        return TMA_ERR_IO;
    }
    return TMA_OK;
}

const char *tma_tfevents_path(const tma_tfevents_t *w)
{
    return w->path;
}

void tma_tfevents_close(tma_tfevents_t *w)
{
    if (!w)
        return;
    if (w->f && fclose(w->f) != 0)
        tma_log_error(COMP, "%s: close failed: %s", w->path, strerror(errno));
    free(w->path);
    free(w);
}
