/*
 * end.c: the end of a job: set `stop` (with the state "stopping", in one
 * transaction, so a coordinator that dies before the result is written is
 * followed by one that only finishes the job), let the evaluator finish,
 * test the best round, write result.json and the validation-MRR plot
 * (job/run.c), and record the final state ("done", or "failed" when the
 * result could not be
 * written).
 */
#include "coord_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COMP COORD_COMP

/* Sets the stop key (workers see it through their watch) and the state
 * "stopping" in one guarded transaction. */
static void publish_stop(coord_t *c, const char *reason, double train_s)
{
    tma_status_t st = coord_put_stop_state(c, reason, "stopping", train_s);
    if (st != TMA_OK)
        tma_log_warn(COMP, "could not set stop in etcd: %s", tma_status_str(st));
    coord_prom_phase(c->prom, "stopping", c->epoch);
}

/* The test metrics of best.tmaw (mrr NaN when there is none or testing failed). */
static void test_best(coord_t *c, int64_t best_round, const char *best_path, tma_gnn_metrics_t *m)
{
    tma_gnn_metrics_init(m, &c->cfg);
    m->mrr = NAN;
    if (best_round < 0 || !best_path)
        return;
    /* On the ranks the best round was tested when it was evaluated. */
    if (c->cfg.eval_on_workers > 0 && coord_eval_best_test(c->ev, best_round, m) == TMA_OK) {
        tma_log_info(COMP, "the best round %lld was tested on the ranks when it was evaluated", (long long)best_round);
        return;
    }
    tma_status_t st = coord_eval_weights_file(c, best_path, TMA_GNN_SPLIT_TEST, m, NULL);
    if (st != TMA_OK) {
        tma_log_error(COMP, "testing the best round failed: %s", tma_status_str(st));
        m->mrr = NAN;
    }
}

/* result.json in the run folder's one schema (job/run.c), and mrr.svg. */
static tma_status_t write_result(coord_t *c, const char *reason, double train_s, const tma_gnn_metrics_t *test,
                                 const char *best_path)
{
    const double test_mrr = test->mrr;
    tma_job_run_result_t r;
    memset(&r, 0, sizeof r);
    int64_t evaluated, skipped;
    coord_eval_best(c->ev, &r.best_round, &r.best_val_mrr, &r.best_at_seconds);
    coord_eval_counts(c->ev, &evaluated, &skipped);
    r.variant = c->vd->name;
    r.job = c->job->name;
    r.graph = c->job->graph;
    r.graph_id = c->graph->graph_id;
    r.workers = c->job->workers;
    r.edge_ratio = c->pinfo ? c->pinfo->edge_ratio : 1.0;
    r.test_mrr = test_mrr;
    r.train_seconds = train_s;
    r.rounds = c->round;
    r.stopped = reason;
    r.best_weights = best_path;
    /* A full disk: retried like every run-folder write (the extras are
     * consumed by each try, so they are built anew). */
    coord_io_retry_t rt = {c->result_path, "the result", 0, 0};
    tma_status_t st;
    do {
        cJSON *extra = cJSON_CreateObject();
        if (!extra)
            return TMA_ERR_NOMEM;
        if (c->pinfo)
            cJSON_AddStringToObject(extra, "partition", c->job->partition_scheme);
        cJSON_AddNumberToObject(extra, "rounds_evaluated", (double)evaluated);
        cJSON_AddNumberToObject(extra, "rounds_skipped", (double)skipped);
        if (isfinite(test_mrr))
            tma_gnn_metrics_json(test, "test_", extra);
        st = tma_job_run_write_result(c->run_dir, &r, extra, NULL);
    } while (st != TMA_OK && coord_io_retry(&rt, st, coord_stopping(c)));
    coord_io_retry_end(&rt, st);
    if (st == TMA_OK)
        tma_log_info(COMP, "result: test MRR %.4f (ties %s; best round %lld, validation %.4f); written to %s",
                     isfinite(test_mrr) ? test_mrr : 0.0, tma_gnn_ties_name(test->ties), (long long)r.best_round,
                     r.best_round >= 0 ? r.best_val_mrr : 0.0, c->result_path);
    return st;
}

tma_status_t coord_finish(coord_t *c, const char *reason)
{
    double train_s = coord_train_elapsed(c);
    c->clock_start = 0;
    c->elapsed_base = train_s;
    publish_stop(c, reason, train_s);
    tma_inject_point(&c->inj, "stop", c->round);
    tma_log_info(COMP, "training stopped (%s) after %.1f s and %lld round(s); finishing the evaluation", reason,
                 train_s, (long long)c->round);
    coord_eval_drain(c->ev);
    if (__atomic_load_n(&c->fenced, __ATOMIC_SEQ_CST))
        return TMA_ERR_FENCED; /* the job is another's: its result too */
    tma_status_t est = coord_eval_error(c->ev);
    if (est != TMA_OK)
        tma_log_error(COMP, "the evaluator could not write everything (%s): see its errors above; metrics.jsonl "
                            "may lack lines",
                      tma_status_str(est));
    tma_status_t bst = coord_eval_settle_best(c->ev);
    if (bst != TMA_OK)
        tma_log_error(COMP, "best.tmaw does not hold the best round: %s", tma_status_str(bst));

    int64_t best_round;
    double best_val, best_time;
    coord_eval_best(c->ev, &best_round, &best_val, &best_time);
    char *best_path = tma_job_run_path(c->run_dir, "best.tmaw");
    tma_gnn_metrics_t test;
    test_best(c, best_round, best_path, &test);
    tma_status_t wst = write_result(c, reason, train_s, &test, best_path);
    free(best_path);
    /* The final state, written once (no retry: the job is over). */
    char *sv = coord_state_encode(c, wst == TMA_OK ? "done" : "failed", c->round, train_s, best_round, best_val);
    (void)coord_put_key(c, TMA_KEY_STATE, sv, 0);
    free(sv);
    coord_prom_phase(c->prom, wst == TMA_OK ? "done" : "failed", c->epoch);
    return wst;
}
