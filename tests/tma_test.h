/*
 * tma_test.h: the small assertion kit shared by tma's C tests.  A failed
 * check prints file:line and the expression, and the test exits 1 at the
 * end (checks continue so one run shows every failure).  The ASSERT_*
 * comparisons (after libuv's test/task.h) also print both operands' values;
 * like CHECK they count the failure and go on.  tma_test_skip() exits 77,
 * automake's "skipped", with a reason on stderr.
 */
#ifndef TMA_TEST_H
#define TMA_TEST_H

#include <sys/types.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#define CHECK_NEAR(a, b, tol) TMA_ASSERT_NEAR_("CHECK_NEAR", a, b, tol)

/*
 * Comparisons that print both operands, with their C types, when they fail:
 *   ASSERT_EQ/NE/LT/LE/GT/GE(a, b)  numbers (integer, enum, bool, float, double)
 *   ASSERT_STR_EQ(a, b)             strings (NULL never matches)
 *   ASSERT_NULL(p), ASSERT_NOT_NULL(p)
 *   ASSERT_NEAR(a, b, tol)          doubles: |a - b| <= tol
 * Each operand is evaluated once, and the comparison is `a OP b` exactly as C
 * would do it (same types, same conversions): they replace CHECK(a OP b)
 * one for one.  An integer operand is printed as int64 or, when unsigned, as
 * uint64; when either operand is floating, both are printed as doubles
 * (%.17g).  A pointer or array operand does not compile (use ASSERT_NULL,
 * ASSERT_STR_EQ or CHECK).
 */
#define TMA_TEST_UNSIGNED_(x)                                                                      \
    _Generic((x), unsigned char: 1, unsigned short: 1, unsigned int: 1, unsigned long: 1,          \
             unsigned long long: 1, default: 0)
/* __builtin_classify_type (gcc, clang): 1 integer, 2 char, 3 enum, 4 bool. */
#define TMA_TEST_INTEGER_(x) (__builtin_classify_type(x) >= 1 && __builtin_classify_type(x) <= 4)
/* 8: a real floating type (float, double, long double). */
#define TMA_TEST_FLOAT_(x) (__builtin_classify_type(x) == 8)

/* The C type of an integer operand, for the failure message. */
#define TMA_TEST_TYPE_(x)                                                                          \
    _Generic((x), _Bool: "_Bool", char: "char", signed char: "signed char",                        \
             unsigned char: "unsigned char", short: "short", unsigned short: "unsigned short",     \
             int: "int", unsigned int: "unsigned int", long: "long", unsigned long: "unsigned long", \
             long long: "long long", unsigned long long: "unsigned long long", float: "float",       \
             double: "double", long double: "long double", default: "enum")

void tma_test_fail_cmp(const char *file, int line, const char *name, const char *expr_a,
                       const char *op, const char *expr_b, const char *a_type, int a_unsigned,
                       uint64_t a_bits, const char *b_type, int b_unsigned, uint64_t b_bits);
void tma_test_fail_fcmp(const char *file, int line, const char *name, const char *expr_a,
                        const char *op, const char *expr_b, const char *a_type, double a,
                        const char *b_type, double b);

#define TMA_ASSERT_CMP_(name, a, op, b)                                                            \
    do {                                                                                           \
        __typeof__(a) tma_a_ = (a);                                                                \
        __typeof__(b) tma_b_ = (b);                                                                \
        _Static_assert((TMA_TEST_INTEGER_(tma_a_) || TMA_TEST_FLOAT_(tma_a_)) &&                   \
                           (TMA_TEST_INTEGER_(tma_b_) || TMA_TEST_FLOAT_(tma_b_)),                 \
                       name " compares numbers");                                                  \
        if (!(tma_a_ op tma_b_)) {                                                                 \
            if (TMA_TEST_FLOAT_(tma_a_) || TMA_TEST_FLOAT_(tma_b_))                                \
                tma_test_fail_fcmp(__FILE__, __LINE__, name, #a, #op, #b, TMA_TEST_TYPE_(tma_a_),  \
                                   (double)tma_a_, TMA_TEST_TYPE_(tma_b_), (double)tma_b_);        \
            else                                                                                   \
                tma_test_fail_cmp(__FILE__, __LINE__, name, #a, #op, #b, TMA_TEST_TYPE_(tma_a_),   \
                                  TMA_TEST_UNSIGNED_(tma_a_), (uint64_t)tma_a_,                    \
                                  TMA_TEST_TYPE_(tma_b_), TMA_TEST_UNSIGNED_(tma_b_),              \
                                  (uint64_t)tma_b_);                                               \
        }                                                                                          \
    } while (0)

#define ASSERT_EQ(a, b) TMA_ASSERT_CMP_("ASSERT_EQ", a, ==, b)
#define ASSERT_NE(a, b) TMA_ASSERT_CMP_("ASSERT_NE", a, !=, b)
#define ASSERT_LT(a, b) TMA_ASSERT_CMP_("ASSERT_LT", a, <, b)
#define ASSERT_LE(a, b) TMA_ASSERT_CMP_("ASSERT_LE", a, <=, b)
#define ASSERT_GT(a, b) TMA_ASSERT_CMP_("ASSERT_GT", a, >, b)
#define ASSERT_GE(a, b) TMA_ASSERT_CMP_("ASSERT_GE", a, >=, b)

#define ASSERT_STR_EQ(a, b)                                                                        \
    do {                                                                                           \
        const char *tma_a_ = (a), *tma_b_ = (b);                                                   \
        if (!tma_a_ || !tma_b_ || strcmp(tma_a_, tma_b_) != 0) {                                   \
            fprintf(stderr, "%s:%d: ASSERT_STR_EQ failed: %s = \"%s\", %s = \"%s\"\n", __FILE__,   \
                    __LINE__, #a, tma_a_ ? tma_a_ : "(null)", #b, tma_b_ ? tma_b_ : "(null)");     \
            tma_test_failures++;                                                                   \
        }                                                                                          \
    } while (0)

#define TMA_ASSERT_PTR_(name, p, want_null)                                                        \
    do {                                                                                           \
        const void *tma_p_ = (p);                                                                  \
        if ((tma_p_ == NULL) != (want_null)) {                                                     \
            fprintf(stderr, "%s:%d: %s failed: %s = %p\n", __FILE__, __LINE__, name, #p, tma_p_);  \
            tma_test_failures++;                                                                   \
        }                                                                                          \
    } while (0)
#define ASSERT_NULL(p) TMA_ASSERT_PTR_("ASSERT_NULL", p, 1)
#define ASSERT_NOT_NULL(p) TMA_ASSERT_PTR_("ASSERT_NOT_NULL", p, 0)

#define TMA_ASSERT_NEAR_(name, a, b, tol)                                                          \
    do {                                                                                           \
        double tma_a_ = (double)(a), tma_b_ = (double)(b);                                         \
        if (!(fabs(tma_a_ - tma_b_) <= (tol))) {                                                   \
            fprintf(stderr, "%s:%d: %s failed: %s = %.9g, %s = %.9g, tol %g\n", __FILE__,          \
                    __LINE__, name, #a, tma_a_, #b, tma_b_, (double)(tol));                        \
            tma_test_failures++;                                                                   \
        }                                                                                          \
    } while (0)
#define ASSERT_NEAR(a, b, tol) TMA_ASSERT_NEAR_("ASSERT_NEAR", a, b, tol)

/* Exit status for the harness: 0 when every check passed, else 1. */
int tma_test_done(void);
/* Prints the reason and exits 77 (automake: skipped). */
void tma_test_skip(const char *reason) __attribute__((noreturn));
/* A fresh temporary directory (removed by tma_test_cleanup_dir). */
char *tma_test_tmpdir(const char *tag);
void tma_test_cleanup_dir(char *dir);
/* $TMA_DATASETS/<name>, for `make check-datasets` only: the test skips (77)
 * when the folder is missing (the datasets are optional). */
char *tma_test_dataset(const char *name);
/* $TMA_SRCDIR/tests/data/<name>, a fixture kept in the repository; the test
 * fails hard (99) if it is missing. */
char *tma_test_fixture(const char *name);
/* Polls cond(arg) every 10 ms until it returns non-zero (returns 1) or
 * `seconds` pass (returns 0, after one last try). */
int tma_test_wait_for(int (*cond)(void *arg), void *arg, double seconds);
/* Sends SIGSTOP to pid and waits (up to 10 s) until every one of its
 * threads is stopped (each /proc/PID/task/TID/stat): kill() returns before a
 * process running on another core stops, and it may still answer a request
 * meanwhile.  Returns 1 once stopped, 0 if it did not stop in time. */
int tma_test_stop_process(pid_t pid);
/* Re-executes the test under valgrind memcheck (errors and definite or
 * indirect leaks exit 3) unless it already runs under it; call it first
 * thing in main.  valgrind comes from $TMA_VALGRIND (set by the harness);
 * without it the test fails hard (99).  TMA_TEST_NO_VALGRIND=1 runs the
 * test natively (quick local runs). */
void tma_test_under_valgrind(int argc, char **argv);

#endif
