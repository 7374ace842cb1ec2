/*
 * test_evalrank.c: a worker's evaluator rank (worker/evalrank.c) answers a
 * step it cannot take.  A coordinator's transport (this test) connects to a
 * started rank and sends it a layer step and a scoring step of an
 * evaluation whose start it never saw (as when that start was lost): the
 * rank answers each at once, refused under the step's own number, so the
 * coordinator's evaluation fails in a moment instead of waiting for
 * eval.rank_timeout.  An abort of another evaluation gets no answer (nobody
 * waits for one).  Before, the rank dropped such steps without a word.
 * Then a real evaluation: the rank holds shard 0 and member 3 (a lower id,
 * which never connects) holds shard 1; its first layer waits for member 3
 * to connect, and the worker ending the rank meanwhile ends that wait at
 * once.  Before, the rank's thread waited out eval.rank_timeout (120 s
 * here) and the worker with it.
 */
#include "../gnn/gnn_testutil.h"
#include "tma_test.h"
#include "worker_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sends step {what, arg, 0, 0} of evaluation `seq`. */
static void send_step(tma_transport_t *tr, uint32_t peer, int64_t seq, int what, int arg)
{
    const float d[4] = {(float)what, (float)arg, 0, 0};
    tma_transport_meta_t meta = {TMA_TAG_EVAL_STEP, 0, (uint64_t)seq};
    CHECK_OK(tma_transport_send(tr, peer, &meta, d, 4, TMA_TRANSPORT_MEM_HOST, 5.0));
}

/* The rank's next answer within `wait` seconds: its tag, number and first value (status). */
static tma_status_t answer(tma_transport_t *tr, double wait, uint32_t *tag, int64_t *seq, float *status)
{
    const double until = tma_clock_now() + wait;
    while (tma_clock_now() < until) {
        tma_transport_msg_t m;
        if (tma_transport_recv(tr, TMA_TRANSPORT_ANY_PEER, TMA_TRANSPORT_ANY_TAG, 0.2, &m) != TMA_OK)
            continue;
        const int tensor = m.kind == TMA_TRANSPORT_MSG_TENSOR && m.count >= 1;
        if (tensor) {
            *tag = m.meta.tag;
            *seq = (int64_t)m.meta.round;
            *status = ((const float *)m.data)[0];
        }
        tma_transport_msg_release(tr, &m);
        if (tensor)
            return TMA_OK;
    }
    return TMA_ERR_TIMEOUT;
}

int main(void)
{
    char *dir = tma_test_tmpdir("evalrank");
    tma_partition_info_t *pinfo = gnn_test_partition(dir, 300, 2, 5);

    tma_gnn_config_t cfg;
    tma_gnn_config_default(&cfg);
    cfg.eval_rank_timeout = 300; /* the default: what a silent rank would cost */
    worker_eval_cfg_t ec = {.job = "evalrank", .token = "a test token of the job", .listen = "127.0.0.1:0",
                            .self_id = 7, .lease = 1, .cfg = &cfg, .pinfo = pinfo};
    worker_eval_t *e;
    CHECK_OK(worker_eval_start(&ec, &e));

    tma_transport_config_t tc;
    tma_transport_config_init(&tc);
    tc.job = ec.job;
    tc.token = ec.token;
    tc.self_id = TMA_COORD_PEER;
    tma_transport_t *coord;
    CHECK_OK(tma_transport_create(&tc, &coord));
    uint32_t got = 0;
    CHECK_OK(tma_transport_connect(coord, worker_eval_address(e), 10.0, &got));
    ASSERT_EQ(got, 7u);

    /* Layer 0 and the scoring of evaluation 5, whose start the rank never saw. */
    uint32_t tag = 0;
    int64_t seq = -1;
    float st = 0;
    send_step(coord, got, 5, TMA_EVAL_LAYER, 0);
    CHECK_MSG(answer(coord, 10.0, &tag, &seq, &st) == TMA_OK, "no answer to a layer step of an unstarted evaluation");
    ASSERT_EQ(tag, (uint32_t)TMA_TAG_EVAL_DONE);
    ASSERT_EQ(seq, 5);
    ASSERT_EQ((int)st, (int)TMA_ERR_MALFORMED);
    send_step(coord, got, 6, TMA_EVAL_SCORE, 0);
    CHECK_MSG(answer(coord, 10.0, &tag, &seq, &st) == TMA_OK, "no answer to a scoring step of an unstarted evaluation");
    ASSERT_EQ(tag, (uint32_t)TMA_TAG_EVAL_RESULT);
    ASSERT_EQ(seq, 6);
    ASSERT_EQ((int)st, (int)TMA_ERR_MALFORMED);
    /* Another evaluation's abort: dropped without an answer. */
    send_step(coord, got, 9, TMA_EVAL_ABORT, 0);
    ASSERT_EQ(answer(coord, 1.5, &tag, &seq, &st), TMA_ERR_TIMEOUT);
    fprintf(stderr, "a rank answers steps of an evaluation it never started (refused), and drops a stray abort\n");
    tma_transport_destroy(coord);
    worker_eval_stop(e, 0);

    /* Evaluation 1: shard 0 here (member 7), shard 1 at member 3, absent. */
    worker_shards_t *sh;
    CHECK_OK(worker_shards_create(pinfo, &sh));
    tma_graph_t *s0;
    CHECK_OK(tma_graph_open(pinfo->shard_paths[0], 0, &s0));
    cfg.eval_rank_timeout = 120;
    CHECK_OK(tma_gnn_config_resolve(&cfg, s0));
    ec.shards = sh;
    CHECK_OK(worker_eval_start(&ec, &e));
    CHECK_OK(tma_transport_create(&tc, &coord));
    CHECK_OK(tma_transport_connect(coord, worker_eval_address(e), 10.0, &got));
    const int64_t P = tma_gnn_param_count(&cfg);
    float *begin = calloc((size_t)(3 + P), sizeof *begin);
    begin[0] = 2;
    begin[1] = 7;
    begin[2] = 3;
    CHECK_OK(tma_gnn_params_init(&cfg, 1, begin + 3));
    tma_transport_meta_t bm = {TMA_TAG_EVAL_BEGIN, 0, 1};
    CHECK_OK(tma_transport_send(coord, got, &bm, begin, (size_t)(3 + P), TMA_TRANSPORT_MEM_HOST, 5.0));
    CHECK_MSG(answer(coord, 30.0, &tag, &seq, &st) == TMA_OK, "no answer to the start");
    ASSERT_EQ(tag, (uint32_t)TMA_TAG_EVAL_DONE);
    ASSERT_EQ((int)st, (int)TMA_OK);
    send_step(coord, got, 1, TMA_EVAL_LAYER, 0);
    tma_sleep(1.0); /* the layer waits for member 3 */
    const double t0 = tma_clock_now();
    worker_eval_stop(e, 0);
    const double took = tma_clock_now() - t0;
    fprintf(stderr, "the rank ended %.2f s after it was told to, while waiting for a rank that never came\n", took);
    CHECK_MSG(took < 30.0, "ending the rank took %.1f s: it waited for the absent rank (eval.rank_timeout 120 s)", took);
    tma_transport_destroy(coord);
    free(begin);
    tma_graph_destroy(s0);
    worker_shards_destroy(sh);
    tma_partition_info_destroy(pinfo);
    tma_test_cleanup_dir(dir);
    return tma_test_done();
}
