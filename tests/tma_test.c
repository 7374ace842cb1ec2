/* tma_test.c: helpers for the C tests (see tma_test.h). */
#include "tma_test.h"

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
    if (!base || !*base) {
        fprintf(stderr, "TMA_DATASETS is not set; run the test through make check\n");
        exit(99);
    }
    char *p = tma_path_join(base, name);
    if (!p || !tma_dir_exists(p)) {
        fprintf(stderr, "dataset folder %s is missing (configure --with-datasets=DIR)\n", p ? p : name);
        exit(99);
    }
    return p;
}
