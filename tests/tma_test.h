/*
 * tma_test.h: the small assertion kit shared by tma's C tests.  A failed
 * check prints file:line and the expression, and the test exits 1 at the
 * end (checks continue so one run shows every failure).  tma_test_skip()
 * exits 77, automake's "skipped", with a reason on stderr.
 */
#ifndef TMA_TEST_H
#define TMA_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tma_common.h"

extern int tma_test_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            tma_test_failures++;                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            tma_test_failures++;                                                                   \
        }                                                                                          \
    } while (0)

/* A status call that must succeed; stops the test on failure. */
#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        tma_status_t st_ = (expr);                                                                 \
        if (st_ != TMA_OK) {                                                                       \
            fprintf(stderr, "%s:%d: %s returned %d (%s)\n", __FILE__, __LINE__, #expr, st_,        \
                    tma_status_str(st_));                                                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_STATUS(expr, want)                                                                   \
    do {                                                                                           \
        tma_status_t st_ = (expr);                                                                 \
        if (st_ != (want)) {                                                                       \
            fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s)\n", __FILE__, __LINE__,  \
                    #expr, st_, tma_status_str(st_), (int)(want), tma_status_str(want));           \
            tma_test_failures++;                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double a_ = (double)(a), b_ = (double)(b);                                                 \
        if (!(fabs(a_ - b_) <= (tol))) {                                                           \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %.9g, %s = %.9g, tol %g\n", __FILE__,  \
                    __LINE__, #a, a_, #b, b_, (double)(tol));                                      \
            tma_test_failures++;                                                                   \
        }                                                                                          \
    } while (0)

/* Exit status for the harness: 0 when every check passed, else 1. */
int tma_test_done(void);
/* Prints the reason and exits 77 (automake: skipped). */
void tma_test_skip(const char *reason) __attribute__((noreturn));
/* A fresh temporary directory (removed by tma_test_cleanup_dir). */
char *tma_test_tmpdir(const char *tag);
void tma_test_cleanup_dir(char *dir);
/* $TMA_DATASETS/<name>; the test fails hard (99) if the folder is missing. */
char *tma_test_dataset(const char *name);
/* Polls cond(arg) every 10 ms until it returns non-zero (returns 1) or
 * `seconds` pass (returns 0, after one last try). */
int tma_test_wait_for(int (*cond)(void *arg), void *arg, double seconds);
/* Re-executes the test under valgrind memcheck (errors and definite or
 * indirect leaks exit 3) unless it already runs under it; call it first
 * thing in main.  valgrind comes from $TMA_VALGRIND (set by the harness);
 * without it the test fails hard (99).  TMA_TEST_NO_VALGRIND=1 runs the
 * test natively (quick local runs). */
void tma_test_under_valgrind(int argc, char **argv);

#endif
