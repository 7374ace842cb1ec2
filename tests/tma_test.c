/* tma_test.c: helpers for the C tests (see tma_test.h). */
#include "tma_test.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tma_test_failures;

int tma_test_done(void)
{
    if (tma_test_failures) {
        fprintf(stderr, "%d check(s) failed\n", tma_test_failures);
        return 1;
    }
    return 0;
}

static void print_operand(int is_unsigned, uint64_t bits)
{
    if (is_unsigned)
        fprintf(stderr, "%" PRIu64, bits);
    else
        fprintf(stderr, "%" PRId64, (int64_t)bits);
}

void tma_test_fail_cmp(const char *file, int line, const char *name, const char *expr_a,
                       const char *op, const char *expr_b, const char *a_type, int a_unsigned,
                       uint64_t a_bits, const char *b_type, int b_unsigned, uint64_t b_bits)
{
    fprintf(stderr, "%s:%d: %s failed: %s %s %s (", file, line, name, expr_a, op, expr_b);
    fprintf(stderr, "(%s) %s = ", a_type, expr_a);
    print_operand(a_unsigned, a_bits);
    fprintf(stderr, ", (%s) %s = ", b_type, expr_b);
    print_operand(b_unsigned, b_bits);
    fputs(")\n", stderr);
    tma_test_failures++;
}

void tma_test_fail_fcmp(const char *file, int line, const char *name, const char *expr_a,
                        const char *op, const char *expr_b, const char *a_type, double a,
                        const char *b_type, double b)
{
    fprintf(stderr, "%s:%d: %s failed: %s %s %s ((%s) %s = %.17g, (%s) %s = %.17g)\n", file, line,
            name, expr_a, op, expr_b, a_type, expr_a, a, b_type, expr_b, b);
    tma_test_failures++;
}

void tma_test_skip(const char *reason)
{
    fprintf(stderr, "SKIP: %s\n", reason);
    exit(77);
}

char *tma_test_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char *tmpl = tma_strdup_printf("%s/tma-test-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!tmpl || !mkdtemp(tmpl)) {
        fprintf(stderr, "cannot create a temporary directory\n");
        exit(99);
    }
    return tmpl;
}

void tma_test_cleanup_dir(char *dir)
{
    if (!dir)
        return;
    if (!getenv("TMA_TEST_KEEP"))
        tma_remove_tree(dir);
    free(dir);
}

char *tma_test_dataset(const char *name)
{
    const char *base = getenv("TMA_DATASETS");
    char *p = base && *base ? tma_path_join(base, name) : NULL;
    if (!p || !tma_dir_exists(p)) {
        fprintf(stderr, "SKIP: dataset folder %s is missing (configure --with-datasets=DIR)\n", p ? p : name);
        free(p);
        exit(77);
    }
    return p;
}

char *tma_test_fixture(const char *name)
{
    const char *src = getenv("TMA_SRCDIR");
    if (!src || !*src) {
        fprintf(stderr, "TMA_SRCDIR is not set; run the test through make check\n");
        exit(99);
    }
    char *p = tma_strdup_printf("%s/tests/data/%s", src, name);
    if (!p || (!tma_dir_exists(p) && !tma_file_exists(p))) {
        fprintf(stderr, "test fixture %s is missing from the source tree\n", p ? p : name);
        exit(99);
    }
    return p;
}

int tma_test_wait_for(int (*cond)(void *arg), void *arg, double seconds)
{
    double deadline = tma_clock_now() + seconds;
    while (tma_clock_now() < deadline) {
        if (cond(arg))
            return 1;
        tma_sleep(0.01);
    }
    return cond(arg) ? 1 : 0;
}

/* Whether every thread of the process in arg (a pid_t *) is stopped. */
static int all_threads_stopped(void *arg)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task", (long)*(pid_t *)arg);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int all = 1, seen = 0;
    for (struct dirent *de; all && (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        char stat[384], buf[512];
        if (snprintf(stat, sizeof stat, "%.63s/%.255s/stat", path, de->d_name) >= (int)sizeof stat)
            continue;
        FILE *f = fopen(stat, "r");
        if (!f)
            continue; /* a thread that just ended */
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        /* "TID (comm) STATE ...": comm may hold spaces and parentheses. */
        const char *rp = strrchr(buf, ')');
        seen++;
        all = rp && rp[1] == ' ' && (rp[2] == 'T' || rp[2] == 't');
    }
    closedir(d);
    return all && seen > 0;
}

int tma_test_stop_process(pid_t pid)
{
    if (kill(pid, SIGSTOP) != 0)
        return 0;
    return tma_test_wait_for(all_threads_stopped, &pid, 10);
}

void tma_test_under_valgrind(int argc, char **argv)
{
    const char *no = getenv("TMA_TEST_NO_VALGRIND");
    if ((no && *no && strcmp(no, "0") != 0) || getenv("TMA_TEST_IN_VALGRIND"))
        return;
    const char *vg = getenv("TMA_VALGRIND");
    if (!vg || !*vg) {
        fprintf(stderr, "valgrind is required for this test but TMA_VALGRIND is empty "
                        "(install valgrind and re-run configure, or set TMA_TEST_NO_VALGRIND=1)\n");
        exit(99);
    }
    setenv("TMA_TEST_IN_VALGRIND", "1", 1);
    char **args = calloc((size_t)argc + 16, sizeof(char *));
    if (!args)
        exit(99);
    int k = 0;
    args[k++] = (char *)vg;
    args[k++] = "--quiet";
    args[k++] = "--error-exitcode=3";
    args[k++] = "--leak-check=full";
    args[k++] = "--errors-for-leak-kinds=definite,indirect";
    args[k++] = "--show-leak-kinds=definite,indirect";
    args[k++] = "--num-callers=30";
    for (int i = 0; i < argc; i++)
        args[k++] = argv[i];
    args[k] = NULL;
    fflush(NULL);
    execv(vg, args);
    fprintf(stderr, "cannot run %s: %s\n", vg, strerror(errno));
    exit(99);
}
