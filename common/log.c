/*
 * log.c: leveled, tagged log lines to one stream.  The configuration is the
 * one piece of process-wide state in tma: a process has one stderr.  Each
 * line is formatted into a local buffer and written with one fwrite under the
 * stream lock, so lines from threads never interleave.
 */
#include "tma_common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

static int g_level = -1; /* -1: not yet read from the environment */
static char g_tag[64];
static FILE *g_stream;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

tma_status_t tma_log_parse_level(const char *name, tma_log_level_t *level_p)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (!name)
        return TMA_ERR_INVALID;
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(name, names[i]) == 0) {
            *level_p = (tma_log_level_t)i;
            return TMA_OK;
        }
    }
    if (strcasecmp(name, "warning") == 0) {
        *level_p = TMA_LOG_WARN;
        return TMA_OK;
    }
    return TMA_ERR_INVALID;
}

tma_log_level_t tma_log_get_level(void)
{
    int lv = __atomic_load_n(&g_level, __ATOMIC_RELAXED);
    if (lv < 0) {
        tma_log_level_t parsed = TMA_LOG_INFO;
        const char *env = getenv("TMA_LOG_LEVEL");
        if (env && tma_log_parse_level(env, &parsed) != TMA_OK)
            parsed = TMA_LOG_INFO;
        lv = (int)parsed;
        __atomic_store_n(&g_level, lv, __ATOMIC_RELAXED);
    }
    return (tma_log_level_t)lv;
}

void tma_log_set_level(tma_log_level_t level)
{
    __atomic_store_n(&g_level, (int)level, __ATOMIC_RELAXED);
}

void tma_log_set_tag(const char *tag)
{
    pthread_mutex_lock(&g_lock);
    snprintf(g_tag, sizeof g_tag, "%s", tag ? tag : "");
    pthread_mutex_unlock(&g_lock);
}

void tma_log_set_stream(FILE *stream)
{
    pthread_mutex_lock(&g_lock);
    g_stream = stream;
    pthread_mutex_unlock(&g_lock);
}

void tma_log_vmsg(tma_log_level_t level, const char *component, const char *fmt, va_list ap)
{
    static const char *const names[] = {"ERROR", "WARN ", "INFO ", "DEBUG"};
    if ((int)level > (int)tma_log_get_level())
        return;
    char line[4096];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    pthread_mutex_lock(&g_lock);
    int n = snprintf(line, sizeof line, "%02d:%02d:%02d.%03d %s %s%s%s%s: ", tm.tm_hour, tm.tm_min,
                     tm.tm_sec, (int)(tv.tv_usec / 1000), names[level < 0 || level > 3 ? 0 : level],
                     g_tag[0] ? "[" : "", g_tag, g_tag[0] ? "] " : "", component ? component : "tma");
    FILE *out = g_stream ? g_stream : stderr;
    pthread_mutex_unlock(&g_lock);
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof line) {
        int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        if (m > 0)
            n = ((size_t)(n + m) < sizeof line - 1) ? n + m : (int)sizeof line - 2;
    }
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    line[n] = '\0';
    flockfile(out);
    fwrite(line, 1, (size_t)n, out);
    fflush(out);
    funlockfile(out);
}

void tma_log_msg(tma_log_level_t level, const char *component, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tma_log_vmsg(level, component, fmt, ap);
    va_end(ap);
}
