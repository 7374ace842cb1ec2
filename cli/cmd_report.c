/*
 * cmd_report.c: `tma report RUN [RUN...]`: the paper's tables from run
 * folders.  Table 2's shape (variant, edge ratio r, test MRR, convergence
 * time), grouped by variant with mean and standard deviation when several
 * runs (seeds) share one; Table 3's shape (the least and most steps a
 * worker finished, and their difference); and one SVG with every run's
 * validation MRR against training time.  It reads every run folder alike:
 * `tma train`'s and distributed jobs' (docs/formats.md, "Run folders").
 */
#include "cli_int.h"
#include "tma_job.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct run_row {
    const char *dir;
    char variant[32];
    char label[96];
    char graph_id[40], ties[24], stopped[24];
    int interrupted; /* stopped by a signal or failed: left out of the means unless --all */
    double r, test, conv, best_val, train_s;
    int64_t rounds;
    int64_t steps_min, steps_max;
    int n;
    double *times, *vals;
} run_row_t;

static double num(const cJSON *o, const char *k)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(it) ? it->valuedouble : NAN;
}

/* A string field into buf ("?" when absent). */
static void str(const cJSON *o, const char *k, char *buf, size_t cap)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    snprintf(buf, cap, "%s", cJSON_IsString(it) ? it->valuestring : "?");
}

/* Total steps per worker id over metrics.jsonl. */
static void steps_range(const char *path, int64_t *min_p, int64_t *max_p)
{
    *min_p = *max_p = -1;
    char *text;
    size_t len;
    if (tma_file_read_all(path, &text, &len) != TMA_OK)
        return;
    int64_t ids[1024], steps[1024];
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *ws = o ? cJSON_GetObjectItemCaseSensitive(o, "workers") : NULL;
        for (const cJSON *w = ws ? ws->child : NULL; w; w = w->next) {
            double id = num(w, "id"), s = num(w, "steps");
            if (!isfinite(id) || !isfinite(s))
                continue;
            int k = 0;
            while (k < n && ids[k] != (int64_t)id)
                k++;
            if (k == n && n < 1024) {
                ids[n] = (int64_t)id;
                steps[n++] = 0;
            }
            if (k < n)
                steps[k] += (int64_t)s;
        }
        cJSON_Delete(o);
    }
    free(text);
    for (int k = 0; k < n; k++) {
        if (*min_p < 0 || steps[k] < *min_p)
            *min_p = steps[k];
        if (steps[k] > *max_p)
            *max_p = steps[k];
    }
}

static int load_row(const char *dir, run_row_t *row)
{
    memset(row, 0, sizeof *row);
    row->dir = dir;
    char *rp = tma_path_join(dir, "result.json");
    char *mp = tma_path_join(dir, "metrics.jsonl");
    cJSON *res = NULL;
    int ok = rp && mp && tma_json_load_file(rp, &res) == TMA_OK;
    double version = ok ? num(res, "schema_version") : NAN;
    if (ok && isfinite(version) && version > TMA_RUN_SCHEMA_VERSION) {
        fprintf(stderr, "tma report: %s: result.json has schema version %g; this tma reads up to %d (upgrade tma)\n",
                dir, version, TMA_RUN_SCHEMA_VERSION);
        cJSON_Delete(res);
        free(rp);
        free(mp);
        return 0;
    }
    if (ok) {
        str(res, "variant", row->variant, sizeof row->variant);
        str(res, "graph_id", row->graph_id, sizeof row->graph_id);
        str(res, "ties", row->ties, sizeof row->ties);
        str(res, "stopped", row->stopped, sizeof row->stopped);
        row->interrupted = strcmp(row->stopped, "interrupted") == 0 || strcmp(row->stopped, "failed") == 0;
        row->r = num(res, "edge_ratio");
        row->test = num(res, "test_mrr");
        row->conv = num(res, "convergence_seconds");
        row->best_val = num(res, "best_val_mrr");
        row->train_s = num(res, "train_seconds");
        row->rounds = (int64_t)num(res, "rounds");
        const char *base = strrchr(dir, '/');
        base = base && base[1] ? base + 1 : dir;
        snprintf(row->label, sizeof row->label, "%s (%s)", row->variant, base);
        int64_t *rounds = NULL;
        if (tma_job_run_read_metrics(mp, &rounds, &row->times, &row->vals, &row->n) != TMA_OK)
            row->n = 0;
        free(rounds);
        steps_range(mp, &row->steps_min, &row->steps_max);
        if (row->steps_min < 0 && isfinite(num(res, "steps")))
            row->steps_min = row->steps_max = (int64_t)num(res, "steps"); /* tma train: one trainer */
    } else {
        fprintf(stderr, "tma report: %s: no readable result.json (is it a finished run folder?)\n", dir);
    }
    cJSON_Delete(res);
    free(rp);
    free(mp);
    return ok;
}

static void fmt(char *out, size_t cap, double v, double scale, const char *unit)
{
    if (isfinite(v))
        snprintf(out, cap, "%.2f%s", v * scale, unit);
    else
        snprintf(out, cap, "n/a");
}

/* Table 2's rows: one a run (into out's "runs", and printed unless as_json). */
static void report_runs(const run_row_t *rows, int n, int as_json, int all, cJSON *out)
{
    cJSON *jr = cJSON_AddArrayToObject(out, "runs");
    if (!as_json) {
        printf("%-44s %-11s %6s %9s %11s %10s %9s %9s %7s\n", "run", "variant", "r", "test MRR", "conv (min)",
               "best val", "steps min", "steps max", "diff");
    }
    for (int i = 0; i < n; i++) {
        const run_row_t *r = &rows[i];
        double diff = r->steps_max > 0 ? (double)(r->steps_max - r->steps_min) / (double)r->steps_max : NAN;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "run", r->dir);
        cJSON_AddStringToObject(o, "variant", r->variant);
        cJSON_AddNumberToObject(o, "edge_ratio", r->r);
        cJSON_AddNumberToObject(o, "test_mrr", r->test);
        cJSON_AddNumberToObject(o, "convergence_seconds", r->conv);
        cJSON_AddNumberToObject(o, "best_val_mrr", r->best_val);
        cJSON_AddNumberToObject(o, "steps_min", (double)r->steps_min);
        cJSON_AddNumberToObject(o, "steps_max", (double)r->steps_max);
        cJSON_AddStringToObject(o, "stopped", r->stopped);
        cJSON_AddBoolToObject(o, "in_means", all || !r->interrupted);
        cJSON_AddItemToArray(jr, o);
        if (!as_json) {
            char a[32], b[32], c[32], d[32], e[32];
            fmt(a, sizeof a, r->r, 1, "");
            fmt(b, sizeof b, r->test, 100, "%");
            fmt(c, sizeof c, r->conv, 1.0 / 60, "");
            fmt(d, sizeof d, r->best_val, 100, "%");
            fmt(e, sizeof e, diff, 100, "%");
            printf("%-44.44s %-11s %6s %9s %11s %10s %9lld %9lld %7s%s\n", r->dir, r->variant, a, b, c, d,
                   (long long)r->steps_min, (long long)r->steps_max, e,
                   r->interrupted ? (all ? "  (stopped early)" : "  (stopped early: not in the means)") : "");
        }
    }
}

/* Groups by variant: mean and standard deviation over runs (seeds), into
 * out's "groups" (and printed unless as_json). */
static void report_groups(const run_row_t *rows, int n, int as_json, int all, cJSON *out)
{
    cJSON *jg = cJSON_AddArrayToObject(out, "groups");
    if (!as_json)
        printf("\n%-11s %5s %6s %18s %18s\n", "variant", "runs", "r", "test MRR (%)", "conv (min)");
    for (int i = 0; i < n; i++) {
        int first = 1;
        for (int j = 0; j < i; j++)
            first &= strcmp(rows[j].variant, rows[i].variant) != 0;
        if (!first)
            continue;
        double st[3][3] = {{0}}; /* r, test, conv: n, sum, sumsq */
        for (int j = i; j < n; j++) {
            if (strcmp(rows[j].variant, rows[i].variant) != 0 || (rows[j].interrupted && !all))
                continue;
            double v[3] = {rows[j].r, rows[j].test * 100, rows[j].conv / 60};
            for (int k = 0; k < 3; k++)
                if (isfinite(v[k])) {
                    st[k][0] += 1;
                    st[k][1] += v[k];
                    st[k][2] += v[k] * v[k];
                }
        }
        double mean[3], sd[3];
        for (int k = 0; k < 3; k++) {
            mean[k] = st[k][0] > 0 ? st[k][1] / st[k][0] : NAN;
            sd[k] = st[k][0] > 1 ? sqrt(fmax(0, (st[k][2] - st[k][0] * mean[k] * mean[k]) / (st[k][0] - 1))) : 0;
        }
        for (int k = 0; k < 3; k++)
            if (st[k][0] < 2)
                sd[k] = NAN; /* the spread of one run is not 0: there is none */
        cJSON *g = cJSON_CreateObject();
        cJSON_AddStringToObject(g, "variant", rows[i].variant);
        cJSON_AddNumberToObject(g, "runs", st[1][0]);
        const char *keys[] = {"edge_ratio", "test_mrr_mean", "test_mrr_std", "convergence_minutes_mean",
                              "convergence_minutes_std"};
        const double vals[] = {mean[0], mean[1] / 100, sd[1] / 100, mean[2], sd[2]};
        for (size_t k = 0; k < TMA_ARRAY_LEN(keys); k++) {
            if (isfinite(vals[k]))
                cJSON_AddNumberToObject(g, keys[k], vals[k]);
            else
                cJSON_AddNullToObject(g, keys[k]);
        }
        cJSON_AddItemToArray(jg, g);
        if (!as_json) {
            char m1[32], s1[32], m2[32], s2[32];
            fmt(m1, sizeof m1, mean[1], 1, "");
            fmt(s1, sizeof s1, sd[1], 1, "");
            fmt(m2, sizeof m2, mean[2], 1, "");
            fmt(s2, sizeof s2, sd[2], 1, "");
            printf("%-11s %5.0f %6.3f %10s ± %5s %10s ± %5s\n", rows[i].variant, st[1][0], mean[0], m1, s1, m2, s2);
        }
    }
}

/* Every run's validation curve in one SVG at plot (TMA_OK with no plot). */
static tma_status_t report_plot(const run_row_t *rows, int n, const char *plot)
{
    const char **labels = calloc((size_t)n, sizeof *labels);
    const double **ts = calloc((size_t)n, sizeof *ts), **vs = calloc((size_t)n, sizeof *vs);
    int *counts = calloc((size_t)n, sizeof *counts);
    tma_status_t pst = plot ? TMA_ERR_NOMEM : TMA_OK;
    if (plot && labels && ts && vs && counts) {
        for (int i = 0; i < n; i++) {
            labels[i] = rows[i].label;
            ts[i] = rows[i].times;
            vs[i] = rows[i].vals;
            counts[i] = rows[i].n;
        }
        pst = tma_job_run_plot_svg(plot, "validation MRR against training time", n, labels, ts, vs, counts, NULL);
    }
    free(labels);
    free(ts);
    free(vs);
    free(counts);
    return pst;
}

int cli_cmd_report(int argc, char **argv)
{
    const char *plot = NULL;
    int as_json = 0, all = 0;
    const cli_opt_t opts[] = {
        {"output", 'o', CLI_STR, &plot, "FILE",
         "the SVG plot of every run's curve (default report.svg; with --json only when given)", NULL},
        {"json", 0, CLI_FLAG, &as_json, NULL, "print the rows and groups as JSON", NULL},
        {"all", 0, CLI_FLAG, &all, NULL, "count interrupted or failed runs in the means too", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {"report", "RUN [RUN...] [-o plot.svg]",
                             "Prints the paper's Table 2 (variant, edge ratio r, test MRR, convergence time) for "
                             "run folders, grouped by variant with mean and standard deviation over runs, and its "
                             "Table 3 (steps finished per worker: least, most, difference), and draws every run's "
                             "validation MRR against training time in one SVG. Runs of different graphs (graph id) "
                             "or tie rules are refused together; interrupted or failed runs are marked and left "
                             "out of the means unless --all.",
                             opts, 1, -1};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;
    run_row_t *rows = calloc((size_t)args.npos, sizeof *rows);
    if (!rows)
        return CLI_EXIT_RUNTIME;
    int n = 0, bad = 0;
    for (int i = 0; i < args.npos; i++) {
        if (load_row(args.pos[i], &rows[n]))
            n++;
        else
            bad++;
    }
    if (n == 0) {
        free(rows);
        return CLI_EXIT_RUNTIME;
    }
    /* Means over runs of different graphs or tie rules compare nothing. */
    for (int i = 1; i < n; i++) {
        const char *what = strcmp(rows[i].graph_id, rows[0].graph_id) != 0 ? "graph (graph_id)"
                           : strcmp(rows[i].ties, rows[0].ties) != 0   ? "tie rule (ties)"
                                                                       : NULL;
        if (!what)
            continue;
        fprintf(stderr, "tma report: the runs differ in their %s: %s has %s, %s has %s; report them apart\n", what,
                rows[0].dir, what[0] == 'g' ? rows[0].graph_id : rows[0].ties, rows[i].dir,
                what[0] == 'g' ? rows[i].graph_id : rows[i].ties);
        for (int j = 0; j < n; j++) {
            free(rows[j].times);
            free(rows[j].vals);
        }
        free(rows);
        return CLI_EXIT_USAGE;
    }
    if (!plot && !as_json)
        plot = "report.svg";
    cJSON *out = cJSON_CreateObject();
    report_runs(rows, n, as_json, all, out);
    report_groups(rows, n, as_json, all, out);
    tma_status_t pst = report_plot(rows, n, plot);
    if (as_json) {
        cJSON_AddStringToObject(out, "plot", plot && pst == TMA_OK ? plot : "");
        cli_print_json(out);
    } else if (pst == TMA_OK) {
        printf("\nplot: %s\n", plot);
    }
    cJSON_Delete(out);
    for (int i = 0; i < n; i++) {
        free(rows[i].times);
        free(rows[i].vals);
    }
    free(rows);
    return bad || pst != TMA_OK ? CLI_EXIT_RUNTIME : CLI_EXIT_OK;
}
