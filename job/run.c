/*
 * run.c: the run folder, the one output format of `tma train` and of a
 * distributed job: making the folder, metrics.jsonl lines and reading them
 * back, the paper's convergence time, the progress line built from a
 * metrics line, result.json in its one schema, and the SVG plot of
 * validation MRR against training time (written directly: no plotting
 * tool needed).
 */
#include "tma_job.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COMP "run"

char *tma_job_run_path(const char *run_dir, const char *name)
{
    return tma_path_join(run_dir, name);
}

void tma_job_run_private_files(void)
{
    mode_t um = umask(077);
    umask(um | 077);
}

tma_status_t tma_job_run_make_dir(const char *dir, char **abs_p)
{
    /* A run folder holds the model, checkpoints a resume loads and the
     * job's logs (docs/security.md): one made here is the user's alone; an
     * existing one keeps its mode, but only if it is the user's and nobody
     * else may write in it (replace a checkpoint, plant a file). */
    int existed = tma_dir_exists(dir);
    tma_status_t st = tma_mkdir_p(dir);
    if (st != TMA_OK)
        return st;
    if (!existed && chmod(dir, 0700) != 0) {
        tma_log_error(COMP, "%s: cannot make it private (chmod 700): %s", dir, strerror(errno));
        return TMA_ERR_IO;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        tma_log_error(COMP, "%s: %s", dir, strerror(errno));
        return TMA_ERR_IO;
    }
    if (sb.st_uid != geteuid()) {
        tma_log_error(COMP, "%s: the run folder belongs to user id %u, not to you (%u): its owner could read the "
                            "model and replace checkpoints; choose a folder of your own",
                      dir, (unsigned)sb.st_uid, (unsigned)geteuid());
        return TMA_ERR_INVALID;
    }
    if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
        tma_log_error(COMP, "%s: the run folder is writable by %s (mode %03o): anyone who can write there could "
                            "replace checkpoints; chmod go-w it or choose another folder",
                      dir, sb.st_mode & S_IWOTH ? "every user" : "its group", (unsigned)(sb.st_mode & 0777));
        return TMA_ERR_INVALID;
    }
    /* Absolute, so the roles and the records name it from any directory. */
    char *abs = realpath(dir, NULL);
    if (!abs)
        abs = strdup(dir);
    if (!abs)
        return TMA_ERR_NOMEM;
    *abs_p = abs;
    return TMA_OK;
}

/* The files whose presence means a run was written here. */
static const char *const run_results[] = {"result.json", "metrics.jsonl", "best.tmaw", "last.tmaw", "last.opt",
                                           NULL};

int tma_job_run_holds_run(const char *dir)
{
    for (const char *const *n = run_results; *n; n++) {
        char *p = tma_path_join(dir, *n);
        int e = p && tma_file_exists(p);
        free(p);
        if (e)
            return 1;
    }
    return 0;
}

tma_status_t tma_job_run_clear_results(const char *dir)
{
    static const char *const more[] = {"mrr.svg", NULL};
    const char *const *lists[] = {run_results, more};
    for (size_t l = 0; l < TMA_ARRAY_LEN(lists); l++)
        for (const char *const *n = lists[l]; *n; n++) {
            char *p = tma_path_join(dir, *n);
            if (!p)
                return TMA_ERR_NOMEM;
            int bad = unlink(p) != 0 && errno != ENOENT;
            if (bad)
                tma_log_error(COMP, "%s: cannot remove the previous run's file: %s", p, strerror(errno));
            free(p);
            if (bad)
                return TMA_ERR_IO;
        }
    return TMA_OK;
}

/* One line, all or nothing: a failed or short write (a full disk) is cut
 * back to where the file ended, so no torn line is ever left behind. */
tma_status_t tma_job_run_append_line(const char *path, const cJSON *obj)
{
    char *text = cJSON_PrintUnformatted(obj);
    if (!text)
        return TMA_ERR_NOMEM;
    size_t n = strlen(text);
    text[n] = '\n'; /* replaces the NUL; written with its length */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
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

tma_status_t tma_job_run_trim_metrics(const char *path, int64_t last_round, const cJSON *line)
{
    char *text = NULL;
    size_t len = 0;
    tma_status_t st = tma_file_exists(path) ? tma_file_read_all(path, &text, &len) : TMA_OK;
    if (st != TMA_OK)
        return st;
    /* The kept lines go back in place of the old ones: never longer than
     * the file plus the one line added. */
    char *add = line ? cJSON_PrintUnformatted(line) : NULL;
    char *out = malloc(len + (add ? strlen(add) : 0) + 2);
    size_t n = 0;
    int64_t last_kept = 0;
    int lineno = 0;
    if (!out || (line && !add))
        st = TMA_ERR_NOMEM;
    for (char *p = text; st == TMA_OK && p && p < text + len;) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        size_t ll = nl ? (size_t)(nl - p) : (size_t)(text + len - p);
        lineno++;
        cJSON *o = cJSON_ParseWithLength(p, ll);
        const cJSON *r = o ? cJSON_GetObjectItemCaseSensitive(o, "round") : NULL;
        if (!cJSON_IsNumber(r) && !nl) {
            /* A line cut short by a kill: it never counted. */
            tma_log_warn(COMP, "%s:%d: dropping a torn last line", path, lineno);
        } else if (!cJSON_IsNumber(r)) {
            tma_log_error(COMP, "%s:%d: not a metrics line (needs \"round\")", path, lineno);
            st = TMA_ERR_FORMAT;
        } else if ((int64_t)r->valuedouble <= last_round) {
            memcpy(out + n, p, ll);
            n += ll;
            out[n++] = '\n';
            last_kept = (int64_t)r->valuedouble;
        }
        cJSON_Delete(o);
        p = nl ? nl + 1 : NULL;
    }
    if (st == TMA_OK && add && last_kept < last_round) {
        size_t al = strlen(add);
        memcpy(out + n, add, al);
        n += al;
        out[n++] = '\n';
    }
    if (st == TMA_OK && (text || n))
        st = tma_file_write_atomic(path, out, n);
    cJSON_free(add);
    free(out);
    free(text);
    return st;
}

tma_status_t tma_job_run_read_metrics(const char *path, int64_t **rounds_p, double **times_p, double **vals_p,
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

double tma_job_run_convergence_time(const double *times, const double *vals, int n, double *best_p,
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

/* A tick step of about a fifth of span: 1, 2, 2.5 or 5 times a power of ten. */
static double nice_step(double span)
{
    double raw = span / 5.0, mag = pow(10.0, floor(log10(raw))), norm = raw / mag;
    return (norm <= 1.0 ? 1.0 : norm <= 2.0 ? 2.0 : norm <= 2.5 ? 2.5 : norm <= 5.0 ? 5.0 : 10.0) * mag;
}

tma_status_t tma_job_run_plot_svg(const char *path, const char *title, int nseries, const char *const *labels,
                                  const double *const *times, const double *const *vals, const int *counts,
                                  const tma_job_run_plot_marks_t *marks)
{
    static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    const double W = 720, H = 440, L = 70, R = 190, T = 40, B = 50;
    double tmax = 0, vmax = 0;
    for (int s = 0; s < nseries; s++)
        for (int i = 0; i < counts[s]; i++) {
            if (times[s][i] > tmax)
                tmax = times[s][i];
            if (isfinite(vals[s][i]) && vals[s][i] > vmax)
                vmax = vals[s][i];
        }
    double test = marks && isfinite(marks->test_mrr) ? marks->test_mrr : NAN;
    if (isfinite(test) && test > vmax)
        vmax = test;
    /* Seconds for a run under 3 minutes, else minutes; both axes from 0 to
     * a whole number of round tick steps. */
    int in_s = tmax < 180.0;
    double tu = in_s ? 1.0 : 60.0;
    double tstep = nice_step(tmax > 0 ? tmax / tu : 1.0), vstep = nice_step(vmax > 0 ? fmin(vmax, 1.0) : 1.0);
    double xmax = tstep * ceil(tmax / tu / tstep - 1e-9), ymax = fmin(1.0, vstep * ceil(vmax / vstep - 1e-9));
    if (xmax <= 0)
        xmax = tstep * 5;
    if (ymax <= 0)
        ymax = vstep * 5;
    char *tmp = tma_strdup_printf("%s.tmp", path);
    if (!tmp)
        return TMA_ERR_NOMEM;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666); /* less the umask */
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
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
#define PX(t) (L + pw * ((t) / tu) / xmax)
#define PY(v) (T + ph - ph * (v) / ymax)
    /* Axes, grid and ticks at the round values. */
    for (int k = 0; k * vstep <= ymax + 1e-9; k++) {
        double v = k * vstep, y = PY(v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, y, L + pw, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", L - 6, y + 4, v);
    }
    for (int k = 0; k * tstep <= xmax + 1e-9; k++) {
        double x = L + pw * k * tstep / xmax;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x, T + ph + 18, k * tstep);
    }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n",
            L, T, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">training time (%s)</text>\n", L + pw / 2,
            H - 12, in_s ? "seconds" : "minutes");
    fprintf(f, "<text transform=\"translate(18,%.1f) rotate(-90)\" text-anchor=\"middle\">validation MRR</text>\n",
            T + ph / 2);
    for (int s = 0; s < nseries; s++) {
        const char *c = colors[s % TMA_ARRAY_LEN(colors)];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c);
        for (int i = 0; i < counts[s]; i++)
            if (isfinite(vals[s][i]))
                fprintf(f, "%.1f,%.1f ", PX(times[s][i]), PY(vals[s][i]));
        fprintf(f, "\"/>\n");
        for (int i = 0; i < counts[s]; i++)
            if (isfinite(vals[s][i]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", PX(times[s][i]),
                        PY(vals[s][i]), c);
        double ly = T + 14 + 18 * s;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                L + pw + 12, ly - 4, L + pw + 32, ly - 4, c);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", L + pw + 38, ly);
        svg_escape(f, labels[s]);
        fprintf(f, "</text>\n");
    }
    /* The best round (a ring around its point) and the test MRR of its
     * weights (a dashed line), each with its legend entry. */
    double ly = T + 14 + 18 * nseries;
    if (marks && marks->best_round >= 0 && isfinite(marks->best_val)) {
        fprintf(f, "<circle class=\"best\" cx=\"%.1f\" cy=\"%.1f\" r=\"7\" fill=\"none\" stroke=\"black\" "
                   "stroke-width=\"1.5\"/>\n", PX(marks->best_time), PY(marks->best_val));
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"none\" stroke=\"black\" stroke-width=\"1.5\"/>\n",
                L + pw + 22, ly - 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">best: round %lld, %.4f</text>\n", L + pw + 38, ly,
                (long long)marks->best_round, marks->best_val);
        ly += 18;
    }
    if (isfinite(test)) {
        fprintf(f, "<line class=\"test\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" "
                   "stroke-dasharray=\"6,4\"/>\n", L, PY(test), L + pw, PY(test));
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" "
                   "stroke-dasharray=\"6,4\"/>\n", L + pw + 12, ly - 4, L + pw + 32, ly - 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">test MRR %.4f</text>\n", L + pw + 38, ly, test);
    }
#undef PX
#undef PY
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

/* ------------------------------------------------------------------ progress */

static double item_num(const cJSON *o, const char *key, double dflt)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(it) ? it->valuedouble : dflt;
}

typedef struct {
    char label[72];
    double sps;
} progress_worker_t;

static int progress_worker_cmp(const void *a, const void *b)
{
    /* worker-2 before worker-10 */
    return strverscmp(((const progress_worker_t *)a)->label, ((const progress_worker_t *)b)->label);
}

static int id_in(const cJSON *arr, double id)
{
    for (const cJSON *e = arr ? arr->child : NULL; e; e = e->next)
        if (cJSON_IsNumber(e) && e->valuedouble == id)
            return 1;
    return 0;
}

void tma_job_run_progress_line(const cJSON *rec, const tma_job_run_budget_t *b, double *best_p, char *buf, size_t cap)
{
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(rec, "workers");
    const cJSON *alive = cJSON_GetObjectItemCaseSensitive(rec, "alive");
    const cJSON *owners = cJSON_GetObjectItemCaseSensitive(rec, "owners");
    /* Each worker by its name (the launch's worker-N, its log's tag), in
     * name order. */
    progress_worker_t pw[64];
    int n = 0;
    for (const cJSON *w = ws ? ws->child : NULL; w && n < (int)TMA_ARRAY_LEN(pw); w = w->next) {
        double id = item_num(w, "id", NAN), sps = item_num(w, "steps_per_s", NAN);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(w, "name");
        if (!isfinite(id) || !isfinite(sps))
            continue;
        if (cJSON_IsString(name) && name->valuestring[0])
            snprintf(pw[n].label, sizeof pw[n].label, "%.64s", name->valuestring);
        else
            snprintf(pw[n].label, sizeof pw[n].label, "member-%d", (int)id);
        pw[n++].sps = sps;
    }
    qsort(pw, (size_t)n, sizeof *pw, progress_worker_cmp);
    char sps[512] = "";
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        if (off + strlen(pw[i].label) + 24 >= sizeof sps) {
            snprintf(sps + off, sizeof sps - off, " ...");
            break;
        }
        off += (size_t)snprintf(sps + off, sizeof sps - off, "%s %s %.1f", i ? "," : "", pw[i].label, pw[i].sps);
    }
    /* Backups standing by are counted apart from the workers the job asked
     * for ("backups"; a record without it: alive members that own no shard). */
    const cJSON *backups = cJSON_GetObjectItemCaseSensitive(rec, "backups");
    int n_alive = cJSON_GetArraySize(alive), n_spare = 0;
    for (const cJSON *a = alive ? alive->child : NULL; a; a = a->next)
        if (cJSON_IsNumber(a))
            n_spare += cJSON_IsArray(backups) ? id_in(backups, a->valuedouble)
                                              : cJSON_GetArraySize(owners) > 0 && !id_in(owners, a->valuedouble);
    char spare[32] = "";
    if (n_spare)
        snprintf(spare, sizeof spare, " + %d backup%s", n_spare, n_spare == 1 ? "" : "s");
    double val = item_num(rec, "val_mrr", NAN);
    if (isfinite(val) && !(val <= *best_p))
        *best_p = val;
    char vs[32];
    if (isfinite(val))
        snprintf(vs, sizeof vs, "%.4f", val);
    else
        snprintf(vs, sizeof vs, "(skipped)");
    double minutes = item_num(rec, "time", 0) / 60.0;
    char when[48];
    if (b->train_s > 0)
        snprintf(when, sizeof when, "%5.1f/%.1f min", minutes, b->train_s / 60.0);
    else
        snprintf(when, sizeof when, "%5.1f min, %lld rounds", minutes, (long long)b->rounds);
    int nmissed = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(rec, "missed"));
    snprintf(buf, cap, "round %3lld | %s | alive %d/%d%s%s | steps/s%s | val MRR %s (best %.4f) | aggregation %.2f s",
             (long long)item_num(rec, "round", -1), when, n_alive - n_spare, b->workers, spare,
             nmissed ? " (a worker missed the round)" : "", sps[0] ? sps : " -", vs,
             isfinite(*best_p) ? *best_p : 0.0, item_num(rec, "agg_seconds", 0));
}

/* ------------------------------------------------------------------ result.json */

/* The "wall" of the first metrics line: when training started. */
static double first_wall(const char *metrics_path)
{
    FILE *f = fopen(metrics_path, "r");
    if (!f)
        return 0;
    char line[4096];
    double wall = 0;
    if (fgets(line, sizeof line, f)) {
        /* A long line is cut; "wall" comes early in every record. */
        char *w = strstr(line, "\"wall\":");
        if (w)
            wall = strtod(w + 7, NULL);
    }
    fclose(f);
    return wall;
}

static void add_num_or_null(cJSON *o, const char *key, int have, double v)
{
    if (have)
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

/* The curve of metrics.jsonl: the convergence time (-1: no evaluated round)
 * and the plot. */
static double curve(const char *run_dir, const tma_job_run_result_t *r)
{
    char *mpath = tma_job_run_path(run_dir, "metrics.jsonl");
    char *plot = tma_job_run_path(run_dir, "mrr.svg");
    int64_t *rounds = NULL;
    double *times = NULL, *vals = NULL;
    int n = 0;
    double conv = -1;
    if (mpath && plot && tma_job_run_read_metrics(mpath, &rounds, &times, &vals, &n) == TMA_OK) {
        conv = tma_job_run_convergence_time(times, vals, n, NULL, NULL);
        const double *tp = times, *vp = vals;
        /* The graph by its name (the file's, less .tmag), not its path. */
        const char *slash = r->graph ? strrchr(r->graph, '/') : NULL;
        const char *base = slash ? slash + 1 : r->graph ? r->graph : "?";
        size_t blen = strlen(base);
        if (blen > 5 && strcmp(base + blen - 5, ".tmag") == 0)
            blen -= 5;
        char title[256];
        if (r->job)
            snprintf(title, sizeof title, "%s on %.*s: validation MRR (%s, M = %d)", r->job, (int)TMA_MIN(blen, 96),
                     base, r->variant, r->workers);
        else
            snprintf(title, sizeof title, "%.*s: validation MRR (%s)", (int)TMA_MIN(blen, 96), base, r->variant);
        tma_job_run_plot_marks_t marks = {r->best_round, r->best_at_seconds, r->best_val_mrr, r->test_mrr};
        (void)tma_job_run_plot_svg(plot, title, 1, &r->variant, &tp, &vp, &n, &marks);
    }
    free(rounds);
    free(times);
    free(vals);
    free(mpath);
    free(plot);
    return conv;
}

tma_status_t tma_job_run_write_result(const char *run_dir, const tma_job_run_result_t *r, cJSON *extra, double *conv_p)
{
    double conv = curve(run_dir, r);
    double started = r->started;
    if (!(started > 0)) {
        char *mpath = tma_job_run_path(run_dir, "metrics.jsonl");
        started = mpath ? first_wall(mpath) : 0;
        free(mpath);
    }
    char iso[40] = "";
    time_t ts = (time_t)started;
    struct tm tm;
    if (started > 0 && gmtime_r(&ts, &tm))
        strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char gid[24];
    snprintf(gid, sizeof gid, "%016llx", (unsigned long long)r->graph_id);
    int have_best = r->best_round >= 0;
    cJSON *o = cJSON_CreateObject();
    if (!o) {
        cJSON_Delete(extra);
        return TMA_ERR_NOMEM;
    }
    cJSON_AddNumberToObject(o, "schema_version", TMA_RUN_SCHEMA_VERSION);
    cJSON_AddStringToObject(o, "tma_version", tma_version());
    if (iso[0])
        cJSON_AddStringToObject(o, "started", iso);
    else
        cJSON_AddNullToObject(o, "started");
    cJSON_AddStringToObject(o, "variant", r->variant);
    if (r->job)
        cJSON_AddStringToObject(o, "job", r->job);
    cJSON_AddStringToObject(o, "graph", r->graph ? r->graph : "");
    cJSON_AddStringToObject(o, "graph_id", gid);
    cJSON_AddNumberToObject(o, "workers", r->workers);
    cJSON_AddNumberToObject(o, "edge_ratio", r->edge_ratio);
    add_num_or_null(o, "test_mrr", isfinite(r->test_mrr), r->test_mrr);
    add_num_or_null(o, "best_val_mrr", have_best, r->best_val_mrr);
    add_num_or_null(o, "best_round", have_best, (double)r->best_round);
    add_num_or_null(o, "best_at_seconds", have_best, r->best_at_seconds);
    add_num_or_null(o, "convergence_seconds", conv >= 0, conv);
    cJSON_AddNumberToObject(o, "train_seconds", r->train_seconds);
    cJSON_AddNumberToObject(o, "rounds", (double)r->rounds);
    cJSON_AddStringToObject(o, "stopped", r->stopped);
    cJSON_AddStringToObject(o, "best_weights", r->best_weights ? r->best_weights : "");
    /* What only one kind of run has (a partition, step timings) follows. */
    while (extra && extra->child) {
        cJSON *it = cJSON_DetachItemViaPointer(extra, extra->child);
        cJSON_DeleteItemFromObjectCaseSensitive(o, it->string);
        cJSON_AddItemToObject(o, it->string, it);
    }
    cJSON_Delete(extra);
    char *path = tma_job_run_path(run_dir, "result.json");
    tma_status_t st = path ? tma_json_write_file(path, o) : TMA_ERR_NOMEM;
    free(path);
    cJSON_Delete(o);
    if (st == TMA_OK && conv_p)
        *conv_p = conv;
    return st;
}
