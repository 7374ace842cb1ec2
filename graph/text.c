/*
 * text.c: a line reader over plain or gzip text (zlib's gz* functions read
 * both), with line numbers for error messages, and strict field parsers.
 * A gzip stream that ends early is reported as truncated rather than taken
 * for the end of the data.
 */
#include "graph_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COMP "import"
#define READ_CHUNK (1u << 20)
#define MAX_LINE ((size_t)1 << 30)

tma_status_t graph_text_open(graph_text_reader_t *tr, const char *path)
{
    memset(tr, 0, sizeof *tr);
    if (!tma_file_exists(path)) {
        tma_log_error(COMP, "%s: no such file", path);
        return TMA_ERR_NOT_FOUND;
    }
    tr->path = strdup(path);
    tr->cap = 2 * READ_CHUNK;
    tr->buf = malloc(tr->cap + 1);
    if (!tr->path || !tr->buf) {
        graph_text_close(tr);
        return TMA_ERR_NOMEM;
    }
    tr->gz = gzopen(path, "rb");
    if (!tr->gz) {
        tma_log_error(COMP, "%s: cannot open: %s", path, strerror(errno));
        graph_text_close(tr);
        return TMA_ERR_IO;
    }
    gzbuffer(tr->gz, 1u << 18);
    return TMA_OK;
}

void graph_text_close(graph_text_reader_t *tr)
{
    if (tr->gz)
        gzclose(tr->gz);
    free(tr->buf);
    free(tr->path);
    memset(tr, 0, sizeof *tr);
}

/* Reads more bytes after the unconsumed ones; 0 at the end of the data. */
static int fill(graph_text_reader_t *tr)
{
    if (tr->start > 0) {
        memmove(tr->buf, tr->buf + tr->start, tr->end - tr->start);
        tr->end -= tr->start;
        tr->start = 0;
    }
    if (tr->cap - tr->end < READ_CHUNK) {
        if (tr->cap >= MAX_LINE) {
            tma_log_error(COMP, "%s:%" PRId64 ": line longer than %zu bytes", tr->path, tr->line + 1,
                          MAX_LINE);
            return TMA_ERR_FORMAT;
        }
        char *nb = realloc(tr->buf, 2 * tr->cap + 1);
        if (!nb) {
            tma_log_error(COMP, "%s: out of memory reading a long line", tr->path);
            return TMA_ERR_NOMEM;
        }
        tr->buf = nb;
        tr->cap *= 2;
    }
    int got = gzread(tr->gz, tr->buf + tr->end, (unsigned)(tr->cap - tr->end));
    if (got > 0) {
        tr->end += (size_t)got;
        return 1;
    }
    int errnum = Z_OK;
    const char *msg = gzerror(tr->gz, &errnum);
    if (got < 0 || errnum != Z_OK) {
        if (errnum == Z_BUF_ERROR)
            tma_log_error(COMP, "%s:%" PRId64 ": truncated gzip data (the stream ends early)", tr->path,
                          tr->line + 1);
        else if (errnum == Z_ERRNO)
            tma_log_error(COMP, "%s:%" PRId64 ": read error: %s", tr->path, tr->line + 1, strerror(errno));
        else
            tma_log_error(COMP, "%s:%" PRId64 ": corrupt gzip data: %s", tr->path, tr->line + 1,
                          msg ? msg : "?");
        return TMA_ERR_FORMAT;
    }
    tr->eof = 1;
    return 0;
}

int graph_text_next(graph_text_reader_t *tr, char **line_p, size_t *len_p)
{
    for (;;) {
        char *s = tr->buf + tr->start;
        char *nl = memchr(s, '\n', tr->end - tr->start);
        if (nl || (tr->eof && tr->end > tr->start)) {
            size_t len = nl ? (size_t)(nl - s) : tr->end - tr->start;
            tr->start += nl ? len + 1 : len;
            if (len > 0 && s[len - 1] == '\r')
                len--;
            s[len] = '\0'; /* buf has one spare byte past cap for the last line */
            tr->line++;
            if (memchr(s, '\0', len)) {
                tma_log_error(COMP, "%s:%" PRId64 ": a NUL byte: this is not a text file", tr->path, tr->line);
                return TMA_ERR_FORMAT;
            }
            *line_p = s;
            *len_p = len;
            return 1;
        }
        if (tr->eof)
            return 0;
        int r = fill(tr);
        if (r < 0)
            return r;
    }
}

char *graph_text_field(char **p)
{
    char *s = *p;
    while (*s == ' ' || *s == '\t' || *s == ',')
        s++;
    if (!*s) {
        *p = s;
        return NULL;
    }
    char *tok = s;
    while (*s && *s != ' ' && *s != '\t' && *s != ',')
        s++;
    if (*s)
        *s++ = '\0';
    *p = s;
    return tok;
}

tma_status_t graph_text_parse_id(const graph_text_reader_t *tr, const char *tok, const char *what,
                               int64_t *val_p)
{
    const char *s = tok;
    if (*s == '+')
        s++;
    uint64_t v = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9'; s++, digits++) {
        if (v > (uint64_t)(INT64_MAX - 9) / 10) {
            tma_log_error(COMP, "%s:%" PRId64 ": %s '%s' is too large", tr->path, tr->line, what, tok);
            return TMA_ERR_FORMAT;
        }
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (digits == 0 || *s) {
        int64_t neg;
        if (tok[0] == '-' && tma_parse_i64(tok, &neg) == 0)
            tma_log_error(COMP, "%s:%" PRId64 ": %s is negative (%s)", tr->path, tr->line, what, tok);
        else
            tma_log_error(COMP, "%s:%" PRId64 ": %s '%s' is not a non-negative integer", tr->path, tr->line,
                          what, tok);
        return TMA_ERR_FORMAT;
    }
    *val_p = (int64_t)v;
    return TMA_OK;
}

tma_status_t graph_text_parse_float(const graph_text_reader_t *tr, const char *tok, const char *what,
                                  float *val_p)
{
    double d;
    if (tma_parse_double(tok, &d) != 0 || fabs(d) > 3.4e38) {
        tma_log_error(COMP, "%s:%" PRId64 ": %s '%s' is not a finite number", tr->path, tr->line, what, tok);
        return TMA_ERR_FORMAT;
    }
    *val_p = (float)d;
    return TMA_OK;
}
