/*
 * test_cuda_nodev.c: the CUDA backend's answer to "is there a GPU?", which
 * every GPU test's skip decision rests on, checked against the machine on
 * every build and machine (it runs, and must pass, where there is no GPU):
 *   - a build without CUDA refuses "cuda" with TMA_ERR_UNSUPPORTED;
 *   - a CUDA build on a machine without an NVIDIA GPU refuses it with
 *     TMA_ERR_NO_DEVICE, and the logged reason says "no usable GPU";
 *   - a CUDA build with a GPU starts "cuda" and "cuda:0", and refuses an
 *     index the machine does not have with TMA_ERR_NO_DEVICE;
 *   - tma_gnn_cuda_device_count (which loads the CUDA module) agrees;
 *   - malformed names are TMA_ERR_INVALID, and "cpu" works regardless;
 *   - a trainer and an evaluator configured for a missing device fail with
 *     the same status, and a CPU trainer still steps.
 */
#include "tma_test.h"
#include "gnn/gnn_testutil.h"
#include "gpu_testutil.h"

#include <string.h>

/* The error lines logged by the last try_create. */
static char last_error[2048];

static tma_status_t try_create(const char *device)
{
    tma_gnn_backend_t *b = NULL;
    FILE *log = tmpfile();
    ASSERT_NOT_NULL(log);
    tma_log_set_stream(log);
    tma_status_t st = tma_gnn_backend_create(device, 1, &b);
    tma_log_set_stream(stderr);
    rewind(log);
    size_t n = fread(last_error, 1, sizeof last_error - 1, log);
    last_error[n] = '\0';
    fclose(log);
    if (st == TMA_OK) {
        ASSERT_NOT_NULL(b);
        tma_gnn_backend_destroy(b);
    } else {
        ASSERT_NULL(b);
    }
    return st;
}

int main(void)
{
    const int built = tma_gnn_cuda_built();
    const int visible = gpu_test_gpu_visible();
    fprintf(stderr, "CUDA backend %s; NVIDIA device files %s\n", built ? "built in" : "not built in",
            visible ? "present" : "absent");

    /* The CPU is unaffected, and names are checked before any device is asked. */
    CHECK_OK(try_create("cpu"));
    const char *bad[] = {"cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cudax", "gpu", "CUDA"};
    for (size_t i = 0; i < TMA_ARRAY_LEN(bad); i++) {
        tma_status_t st = try_create(bad[i]);
        CHECK_MSG(st == TMA_ERR_INVALID, "\"%s\": %s, expected an invalid device", bad[i], tma_status_str(st));
    }

    /* The probe: the GPUs the CUDA runtime sees, 0 for anything wrong. */
    const int count = tma_gnn_cuda_device_count();
    fprintf(stderr, "tma_gnn_cuda_device_count: %d\n", count);
    CHECK_MSG(built && visible ? count > 0 : count == 0, "%d GPUs counted (built %d, visible %d)", count, built,
              visible);

    tma_status_t st = try_create("cuda");
    if (!built) {
        CHECK_MSG(st == TMA_ERR_UNSUPPORTED, "no CUDA in this build, yet \"cuda\" gave %s", tma_status_str(st));
        CHECK_MSG(strstr(last_error, "no CUDA backend") != NULL, "unclear error: \"%s\"", last_error);
    } else if (!visible) {
        CHECK_MSG(st == TMA_ERR_NO_DEVICE, "no GPU here, yet \"cuda\" gave %s", tma_status_str(st));
        CHECK_MSG(strstr(last_error, "no usable GPU") != NULL, "unclear error: \"%s\"", last_error);
        fprintf(stderr, "the backend says: %s\n", last_error);
        st = try_create("cuda:3");
        CHECK_MSG(st == TMA_ERR_NO_DEVICE, "no GPU here, yet \"cuda:3\" gave %s", tma_status_str(st));
    } else {
        CHECK_MSG(st == TMA_OK, "a GPU is visible, yet \"cuda\" gave %s (%s)", tma_status_str(st), last_error);
        CHECK_OK(try_create("cuda:0"));
        st = try_create("cuda:1023");
        CHECK_MSG(st == TMA_ERR_NO_DEVICE, "\"cuda:1023\" gave %s", tma_status_str(st));
        CHECK_MSG(strstr(last_error, "no usable GPU of that index") != NULL, "unclear error: \"%s\"", last_error);
    }

    /* Trainer and evaluator on a missing device: the same status, cleanly. */
    if (st != TMA_OK) {
        gnn_test_graph_opts_t o;
        gnn_test_graph_defaults(&o);
        tma_graph_t *g = gnn_test_graph(&o);
        tma_gnn_config_t c;
        tma_gnn_config_default(&c);
        snprintf(c.device, sizeof c.device, "%s", visible ? "cuda:1023" : "cuda");
        snprintf(c.eval_device, sizeof c.eval_device, "%s", c.device);
        tma_gnn_trainer_t *tr = NULL;
        tma_gnn_evaluator_t *ev = NULL;
        tma_status_t want = built ? TMA_ERR_NO_DEVICE : TMA_ERR_UNSUPPORTED;
        st = tma_gnn_trainer_create(&c, &g, 1, &tr);
        CHECK_MSG(st == want && tr == NULL, "trainer on %s: %s", c.device, tma_status_str(st));
        st = tma_gnn_evaluator_create(&c, g, &ev);
        CHECK_MSG(st == want && ev == NULL, "evaluator on %s: %s", c.device, tma_status_str(st));
        /* cpu still trains */
        snprintf(c.device, sizeof c.device, "cpu");
        c.batch_size = 32;
        c.hidden = 16;
        c.decoder_hidden = 8;
        CHECK_OK(tma_gnn_trainer_create(&c, &g, 1, &tr));
        float loss = 0;
        CHECK_OK(tma_gnn_trainer_step(tr, &loss));
        ASSERT_GT(loss, 0);
        tma_gnn_trainer_destroy(tr);
        tma_graph_destroy(g);
    }
    return tma_test_done();
}
