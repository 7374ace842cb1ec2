/*
 * gpu_testutil.c: see gpu_testutil.h.
 */
#include "gpu_testutil.h"
#include "tma_test.h"

#include <glob.h>
#include <stdio.h>

int gpu_test_gpu_visible(void)
{
    glob_t gl;
    int n = 0;
    if (glob("/dev/nvidia[0-9]*", 0, NULL, &gl) == 0) {
        n = (int)gl.gl_pathc;
        globfree(&gl);
    }
    return n > 0;
}

void gpu_test_require(void)
{
    tma_gnn_backend_t *b = NULL;
    tma_log_level_t lvl = tma_log_get_level();
    tma_log_set_level(TMA_LOG_ERROR);
    tma_status_t st = tma_gnn_backend_create("cuda", 1, &b);
    tma_log_set_level(lvl);
    if (st == TMA_OK) {
        tma_gnn_backend_destroy(b);
        return;
    }
    if (st == TMA_ERR_UNSUPPORTED)
        tma_test_skip("this build has no CUDA backend (configure --with-cuda); no GPU test runs");
    if (st == TMA_ERR_NO_DEVICE)
        tma_test_skip("no GPU: the CUDA backend finds no usable GPU on this machine (see the error above)");
    fprintf(stderr, "the CUDA backend failed to start: %s\n", tma_status_str(st));
    exit(1);
}
