/*
 * runfiles.c: the run folder's files: metrics.jsonl lines, reading them
 * back, the paper's convergence time, and the SVG plot of validation MRR
 * against training time (written directly: no plotting tool needed).
 */
#include "coord_int.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP "run"

char *tma_run_path(const char *run_dir, const char *name)
{
    return tma_path_join(run_dir, name);
}

/* One line, all or nothing: a failed or short write (a full disk) is cut
 * back to where the file ended, so no torn line is ever left behind. */
tma_status_t tma_run_append_line(const char *path, const cJSON *obj)
{
    char *text = cJSON_PrintUnformatted(obj);
    if (!text)
        return TMA_ERR_NOMEM;
    size_t n = strlen(text);
    text[n] = '\n'; /* replaces the NUL; written with its length */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    tma_status_t st = TMA_OK;
    if (fd < 0) {
        tma_log_error(COMP, "%s: cannot open for appending: %s", path, strerror(errno));
        st = TMA_ERR_IO;
    } else {
        off_t start = lseek(fd, 0, SEEK_END);
        size_t off = 0;
        while (off < n + 1) {
            ssize_t w = write(fd, text + off, n + 1 - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                tma_log_error(COMP, "%s: write failed: %s", path, w < 0 ? strerror(errno) : "no progress");
                st = TMA_ERR_IO;
                break;
            }
            off += (size_t)w;
        }
        if (st == TMA_OK && fsync(fd) != 0) {
            tma_log_error(COMP, "%s: fsync failed: %s", path, strerror(errno));
            st = TMA_ERR_IO;
        }
        if (st != TMA_OK && start >= 0 && ftruncate(fd, start) != 0)
            tma_log_error(COMP, "%s: cannot cut a failed line back off: %s", path, strerror(errno));
        close(fd);
    }
    cJSON_free(text);
    return st;
}

int coord_io_retry(coord_io_retry_t *r, tma_status_t st, int give_up)
{
    int waitable = tma_status_group(st) != TMA_GROUP_INPUT && st != TMA_ERR_NOMEM && st != TMA_ERR_FENCED;
    if (give_up || !waitable) {
        tma_log_error(COMP, "%s: writing %s failed (%s)%s", r->path, r->what, tma_status_str(st),
                      r->tries ? "; no more retries" : "");
        return 0;
    }
    double now = tma_clock_now();
    if (r->tries == 0 || now >= r->warn_at) {
        tma_log_warn(COMP, "%s: cannot write %s (%s): the job waits and retries every second; %s", r->path,
                     r->what, tma_status_str(st),
                     tma_status_group(st) == TMA_GROUP_PEER ? "etcd is unreachable"
                                                            : "free space on that file system (is the disk full?)");
        r->warn_at = now + 10.0;
    }
    r->tries++;
    tma_sleep(1.0);
    return 1;
}

void coord_io_retry_end(coord_io_retry_t *r, tma_status_t st)
{
    if (st == TMA_OK && r->tries > 0)
        tma_log_info(COMP, "%s: %s written after %d retr%s", r->path, r->what, r->tries, r->tries == 1 ? "y" : "ies");
}

tma_status_t tma_run_read_metrics(const char *path, int64_t **rounds_p, double **times_p, double **vals_p,
                                int *n_p)
{
    char *text;
    size_t len;
    tma_status_t st = tma_file_read_all(path, &text, &len);
    if (st != TMA_OK)
        return st;
    int cap = 64, n = 0;
    int64_t *rounds = malloc((size_t)cap * sizeof *rounds);
    double *times = malloc((size_t)cap * sizeof *times);
    double *vals = malloc((size_t)cap * sizeof *vals);
    int lineno = 0;
    char *save = NULL;
    st = TMA_OK;
    for (char *line = strtok_r(text, "\n", &save); line && rounds && times && vals;
         line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        if (!*line)
            continue;
        cJSON *o = cJSON_Parse(line);
        const cJSON *r = o ? cJSON_GetObjectItemCaseSensitive(o, "round") : NULL;
        const cJSON *t = o ? cJSON_GetObjectItemCaseSensitive(o, "time") : NULL;
        const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, "val_mrr") : NULL;
        if (!cJSON_IsNumber(r) || !cJSON_IsNumber(t)) {
            tma_log_error(COMP, "%s:%d: not a metrics line (needs \"round\" and \"time\")", path, lineno);
            cJSON_Delete(o);
            st = TMA_ERR_FORMAT;
            break;
        }
        if (n == cap) {
            cap *= 2;
            int64_t *r2 = realloc(rounds, (size_t)cap * sizeof *rounds);
            if (r2)
                rounds = r2;
            double *t2 = realloc(times, (size_t)cap * sizeof *times);
            if (t2)
                times = t2;
            double *v2 = realloc(vals, (size_t)cap * sizeof *vals);
            if (v2)
                vals = v2;
            if (!r2 || !t2 || !v2) {
                cJSON_Delete(o);
                st = TMA_ERR_NOMEM;
                break;
            }
        }
        rounds[n] = (int64_t)r->valuedouble;
        times[n] = t->valuedouble;
        vals[n] = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        n++;
        cJSON_Delete(o);
    }
    free(text);
    if (!rounds || !times || !vals)
        st = TMA_ERR_NOMEM;
    if (st != TMA_OK) {
        free(rounds);
        free(times);
        free(vals);
        return st;
    }
    *rounds_p = rounds;
    *times_p = times;
    *vals_p = vals;
    *n_p = n;
    return TMA_OK;
}

double tma_run_convergence_time(const double *times, const double *vals, int n, double *best_p,
                              int *best_index_p)
{
    double best = -INFINITY;
    int bi = -1;
    for (int i = 0; i < n; i++)
        if (isfinite(vals[i]) && vals[i] > best) {
            best = vals[i];
            bi = i;
        }
    if (best_p)
        *best_p = bi >= 0 ? best : NAN;
    if (best_index_p)
        *best_index_p = bi;
    if (bi < 0)
        return -1;
    /* Within 1% relative to the best (the paper's definition). */
    for (int i = 0; i < n; i++)
        if (isfinite(vals[i]) && vals[i] >= 0.99 * best)
            return times[i];
    return times[bi];
}

static void svg_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

tma_status_t tma_run_plot_svg(const char *path, const char *title, int nseries, const char *const *labels,
                            const double *const *times, const double *const *vals, const int *counts)
{
    static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    const double W = 720, H = 440, L = 70, R = 180, T = 40, B = 50;
    double tmax = 0, vmax = 0;
    for (int s = 0; s < nseries; s++)
        for (int i = 0; i < counts[s]; i++) {
            if (times[s][i] / 60.0 > tmax)
                tmax = times[s][i] / 60.0;
            if (isfinite(vals[s][i]) && vals[s][i] > vmax)
                vmax = vals[s][i];
        }
    if (tmax <= 0)
        tmax = 1;
    vmax = vmax <= 0 ? 1 : fmin(1.0, ceil(vmax * 11.0) / 10.0);
    char *tmp = tma_strdup_printf("%s.tmp", path);
    if (!tmp)
        return TMA_ERR_NOMEM;
    FILE *f = fopen(tmp, "w");
    if (!f) {
        tma_log_error(COMP, "%s: cannot write the plot: %s", path, strerror(errno));
        free(tmp);
        return TMA_ERR_IO;
    }
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"15\">", L);
    svg_escape(f, title);
    fprintf(f, "</text>\n");
    double pw = W - L - R, ph = H - T - B;
    /* Axes and grid. */
    for (int k = 0; k <= 5; k++) {
        double y = T + ph - ph * k / 5.0;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, y, L + pw, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n", L - 6, y + 4, vmax * k / 5.0);
        double x = L + pw * k / 5.0;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.1f</text>\n", x, T + ph + 18,
                tmax * k / 5.0);
    }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n",
            L, T, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">training time (minutes)</text>\n",
            L + pw / 2, H - 12);
    fprintf(f, "<text transform=\"translate(18,%.1f) rotate(-90)\" text-anchor=\"middle\">validation MRR</text>\n",
            T + ph / 2);
    for (int s = 0; s < nseries; s++) {
        const char *c = colors[s % TMA_ARRAY_LEN(colors)];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c);
        for (int i = 0; i < counts[s]; i++)
            if (isfinite(vals[s][i]))
                fprintf(f, "%.1f,%.1f ", L + pw * (times[s][i] / 60.0) / tmax, T + ph - ph * vals[s][i] / vmax);
        fprintf(f, "\"/>\n");
        for (int i = 0; i < counts[s]; i++)
            if (isfinite(vals[s][i]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n",
                        L + pw * (times[s][i] / 60.0) / tmax, T + ph - ph * vals[s][i] / vmax, c);
        double ly = T + 14 + 18 * s;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                L + pw + 12, ly - 4, L + pw + 32, ly - 4, c);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", L + pw + 38, ly);
        svg_escape(f, labels[s]);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        tma_log_error(COMP, "%s: writing the plot failed", path);
        unlink(tmp);
        free(tmp);
        return TMA_ERR_IO;
    }
    free(tmp);
    return TMA_OK;
}
