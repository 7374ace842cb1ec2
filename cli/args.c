/* args.c: a small long-option parser for the tma subcommands. */
#include "cli_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tma %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'tma %s --help'.\n", cmd);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int cli_exit_from_status(tma_status_t st)
{
    if (st == TMA_OK)
        return CLI_EXIT_OK;
    return st == TMA_ERR_CONFIG || st == TMA_ERR_INVALID ? CLI_EXIT_USAGE : CLI_EXIT_RUNTIME;
}

int cli_check_threads(const char *cmd, const char *flag, int64_t n)
{
    if (n >= 0 && n <= CLI_MAX_THREADS)
        return CLI_EXIT_OK;
    return cli_usage_error(cmd, "%s: expected 0 to %d (0: $OMP_NUM_THREADS, else one per CPU this process may use), "
                                "got %lld",
                           flag, CLI_MAX_THREADS, (long long)n);
}

int cli_exit_code(tma_status_t st, const volatile sig_atomic_t *flag)
{
    int sig = flag ? *flag : 0;
    if (sig || st == TMA_ERR_CANCELLED)
        return CLI_EXIT_SIGNAL_BASE + (sig > 0 ? sig : SIGTERM);
    return cli_exit_from_status(st);
}

int cli_print_json(const cJSON *o)
{
    char *t = cJSON_PrintUnformatted(o);
    if (!t)
        return CLI_EXIT_RUNTIME;
    printf("%s\n", t);
    cJSON_free(t);
    return CLI_EXIT_OK;
}

int cli_print_file(const char *path)
{
    char *text;
    size_t len;
    if (tma_file_read_all(path, &text, &len) != TMA_OK)
        return CLI_EXIT_RUNTIME;
    fwrite(text, 1, len, stdout);
    if (len && text[len - 1] != '\n')
        putchar('\n');
    free(text);
    return CLI_EXIT_OK;
}

void cli_print_help(const cli_spec_t *spec)
{
    printf("Usage: tma %s %s\n\n", spec->cmd, spec->usage);
    if (spec->description)
        printf("%s\n\n", spec->description);
    printf("Options:\n");
    for (const cli_opt_t *o = spec->opts; o && o->name; o++) {
        char left[64];
        if (!o->help)
            continue; /* a hidden option (testing and drills) */
        if (o->short_name)
            snprintf(left, sizeof left, "-%c, --%s%s%s", o->short_name, o->name,
                     o->metavar ? " " : "", o->metavar ? o->metavar : "");
        else
            snprintf(left, sizeof left, "    --%s%s%s", o->name, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
        printf("  %-28s %s\n", left, o->help ? o->help : "");
    }
    printf("  %-28s %s\n", "-h, --help", "show this help and exit");
}

static const cli_opt_t *find_long(const cli_spec_t *spec, const char *name, size_t len)
{
    for (const cli_opt_t *o = spec->opts; o && o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

static const cli_opt_t *find_short(const cli_spec_t *spec, char c)
{
    for (const cli_opt_t *o = spec->opts; o && o->name; o++)
        if (o->short_name == c)
            return o;
    return NULL;
}

static int store(const cli_spec_t *spec, const cli_opt_t *o, const char *shown, const char *val)
{
    switch (o->kind) {
    case CLI_FLAG:
        *(int *)o->dest = 1;
        break;
    case CLI_STR:
        if (!*val)
            return cli_usage_error(spec->cmd, "%s: expected a value, got an empty string", shown);
        *(const char **)o->dest = val;
        break;
    case CLI_INT: {
        int64_t v;
        if (tma_parse_i64(val, &v) != 0)
            return cli_usage_error(spec->cmd, "%s: expected an integer, got '%s'", shown, val);
        *(int64_t *)o->dest = v;
        break;
    }
    case CLI_DOUBLE: {
        double v;
        if (tma_parse_double(val, &v) != 0)
            return cli_usage_error(spec->cmd, "%s: expected a number, got '%s'", shown, val);
        *(double *)o->dest = v;
        break;
    }
    }
    if (o->seen)
        *o->seen = 1;
    return CLI_PARSE_OK;
}

int cli_parse(const cli_spec_t *spec, int argc, char **argv, char **pos, int *npos_p)
{
    int npos = 0, only_pos = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (!only_pos && strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (!only_pos && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
            cli_print_help(spec);
            return CLI_PARSE_HELP;
        }
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (npos >= CLI_MAX_POS) {
                cli_usage_error(spec->cmd, "too many arguments (at most %d)", CLI_MAX_POS);
                return CLI_PARSE_ERROR;
            }
            pos[npos++] = a;
            continue;
        }
        const cli_opt_t *o;
        const char *val = NULL;
        char shown[96];
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(spec, name, len);
            snprintf(shown, sizeof shown, "--%.*s", (int)len, name);
            if (!o) {
                tma_suggest_t sg;
                tma_suggest_init(&sg);
                for (const cli_opt_t *c = spec->opts; c && c->name; c++)
                    if (c->help) /* hidden options are not suggested */
                        tma_suggest_add(&sg, name, len, c->name);
                const char *near = tma_suggest_best(&sg, len);
                if (near)
                    return cli_usage_error(spec->cmd, "unknown option '%s'; did you mean '--%s'?", shown, near);
                return cli_usage_error(spec->cmd, "unknown option '%s'", shown);
            }
            if (eq) {
                if (o->kind == CLI_FLAG)
                    return cli_usage_error(spec->cmd, "%s takes no value", shown);
                val = eq + 1;
            }
        } else {
            if (a[2] != '\0') {
                /* -ofile */
                o = find_short(spec, a[1]);
                if (o && o->kind != CLI_FLAG)
                    val = a + 2;
                else
                    return cli_usage_error(spec->cmd, "unknown option '%s'", a);
            } else {
                o = find_short(spec, a[1]);
            }
            snprintf(shown, sizeof shown, "-%c", a[1]);
            if (!o)
                return cli_usage_error(spec->cmd, "unknown option '%s'", a);
        }
        if (o->kind != CLI_FLAG && !val) {
            if (i + 1 >= argc)
                return cli_usage_error(spec->cmd, "%s needs a value (%s)", shown,
                                       o->metavar ? o->metavar : "value");
            val = argv[++i];
        }
        if (store(spec, o, shown, val ? val : "") != CLI_PARSE_OK)
            return CLI_PARSE_ERROR;
    }
    if (npos < spec->min_pos) {
        cli_usage_error(spec->cmd, "missing argument (usage: tma %s %s)", spec->cmd, spec->usage);
        return CLI_PARSE_ERROR;
    }
    if (spec->max_pos >= 0 && npos > spec->max_pos) {
        cli_usage_error(spec->cmd, "unexpected argument '%s'", pos[spec->max_pos]);
        return CLI_PARSE_ERROR;
    }
    *npos_p = npos;
    return CLI_PARSE_OK;
}

int cli_args_parse(const cli_spec_t *spec, int argc, char **argv, cli_args_t *a)
{
    a->npos = 0;
    int pr = cli_parse(spec, argc, argv, a->pos, &a->npos);
    a->exit = pr == CLI_PARSE_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    return pr == CLI_PARSE_OK;
}
