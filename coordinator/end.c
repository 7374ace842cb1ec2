/*
 * end.c: the end of a job: set `stop` (with the state "stopping", in one
 * transaction, so a coordinator that dies before the result is written is
 * followed by one that only finishes the job), let the evaluator finish,
 * test the best round, write result.json and the validation-MRR plot, and
 * record the final state ("done", or "failed" when the result could not be
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
    int64_t best_round;
    double best_val, best_time;
    coord_eval_best(c->ev, &best_round, &best_val, &best_time);
    char stkey[TMA_KEY_MAX], skey[TMA_KEY_MAX];
    tma_job_key(stkey, c->job->name, TMA_KEY_STOP);
    tma_job_key(skey, c->job->name, TMA_KEY_STATE);
    const char *keys[2] = {stkey, skey};
    char *vals[2] = {tma_stop_rec_encode(c->epoch, reason),
                     coord_state_encode(c, "stopping", c->round, train_s, best_round, best_val)};
    tma_status_t st = vals[0] && vals[1] ? coord_guarded_put(c, 2, keys, vals, 1) : TMA_ERR_NOMEM;
    free(vals[0]);
    free(vals[1]);
    if (st != TMA_OK)
        tma_log_warn(COMP, "could not set stop in etcd: %s", tma_status_str(st));
}

tma_status_t coord_eval_weights_file(coord_t *c, const char *path, tma_gnn_split_t split, double *mrr_p,
                                     uint64_t *round_p)
{
    float *params = NULL;
    int64_t count = 0;
    uint64_t r = 0;
    tma_status_t st = tma_gnn_weights_read(path, &c->cfg, NULL, &params, &count, &r);
    if (st != TMA_OK)
        return st;
    tma_gnn_evaluator_t *ev;
    st = tma_gnn_evaluator_create(&c->cfg, c->graph, &ev);
    if (st == TMA_OK) {
        st = tma_gnn_evaluator_mrr(ev, params, split, mrr_p);
        tma_gnn_evaluator_destroy(ev);
    }
    free(params);
    if (st == TMA_OK && round_p)
        *round_p = r;
    return st;
}

/* The test MRR of best.tmaw (NaN when there is none or testing failed). */
static double test_best(coord_t *c, int64_t best_round, const char *best_path)
{
    double test_mrr = NAN;
    if (best_round < 0 || !best_path)
        return test_mrr;
    tma_status_t st = coord_eval_weights_file(c, best_path, TMA_GNN_SPLIT_TEST, &test_mrr, NULL);
    if (st != TMA_OK)
        tma_log_error(COMP, "testing the best round failed: %s", tma_status_str(st));
    return test_mrr;
}

/* Convergence from the metrics file (the paper's definition), and the
 * plot.  -1 when no round was evaluated. */
static double convergence_and_plot(coord_t *c)
{
    int64_t *rounds = NULL;
    double *times = NULL, *vals = NULL;
    int n = 0;
    double conv = -1;
    if (tma_run_read_metrics(c->metrics_path, &rounds, &times, &vals, &n) == TMA_OK) {
        conv = tma_run_convergence_time(times, vals, n, NULL, NULL);
        const char *label = c->vd->name;
        const double *tp = times, *vp = vals;
        char title[192];
        snprintf(title, sizeof title, "%s: validation MRR (%s, M = %d)", c->job->name, label, c->job->workers);
        tma_run_plot_svg(c->plot_path, title, 1, &label, &tp, &vp, &n);
    }
    free(rounds);
    free(times);
    free(vals);
    return conv;
}

static void add_number_or_null(cJSON *o, const char *key, int have, double v)
{
    if (have)
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

static tma_status_t write_result(coord_t *c, const char *reason, double train_s, double test_mrr, double conv,
                                 const char *best_path)
{
    int64_t best_round, evaluated, skipped;
    double best_val, best_time;
    coord_eval_best(c->ev, &best_round, &best_val, &best_time);
    coord_eval_counts(c->ev, &evaluated, &skipped);
    cJSON *res = cJSON_CreateObject();
    cJSON_AddStringToObject(res, "job", c->job->name);
    cJSON_AddStringToObject(res, "variant", c->vd->name);
    cJSON_AddNumberToObject(res, "workers", c->job->workers);
    if (c->pinfo) {
        cJSON_AddStringToObject(res, "partition", c->job->partition_scheme);
        cJSON_AddNumberToObject(res, "edge_ratio", c->pinfo->edge_ratio);
    } else {
        cJSON_AddNumberToObject(res, "edge_ratio", 1.0);
    }
    add_number_or_null(res, "test_mrr", isfinite(test_mrr), test_mrr);
    add_number_or_null(res, "best_val_mrr", best_round >= 0, best_val);
    add_number_or_null(res, "best_round", best_round >= 0, (double)best_round);
    add_number_or_null(res, "best_at_seconds", best_round >= 0, best_time);
    add_number_or_null(res, "convergence_seconds", conv >= 0, conv);
    cJSON_AddNumberToObject(res, "train_seconds", train_s);
    cJSON_AddNumberToObject(res, "rounds", (double)c->round);
    cJSON_AddNumberToObject(res, "rounds_evaluated", (double)evaluated);
    cJSON_AddNumberToObject(res, "rounds_skipped", (double)skipped);
    cJSON_AddStringToObject(res, "stopped", reason);
    cJSON_AddStringToObject(res, "best_weights", best_path ? best_path : "");
    coord_io_retry_t rt = {c->result_path, "the result", 0, 0};
    tma_status_t st;
    while ((st = tma_json_write_file(c->result_path, res)) != TMA_OK && coord_io_retry(&rt, st, coord_stopping(c)))
        ;
    coord_io_retry_end(&rt, st);
    cJSON_Delete(res);
    if (st == TMA_OK)
        tma_log_info(COMP, "result: test MRR %.4f (best round %lld, validation %.4f); written to %s",
                     isfinite(test_mrr) ? test_mrr : 0.0, (long long)best_round, best_round >= 0 ? best_val : 0.0,
                     c->result_path);
    return st;
}

tma_status_t coord_finish(coord_t *c, const char *reason)
{
    double train_s = coord_train_elapsed(c);
    c->clock_start = 0;
    c->elapsed_base = train_s;
    publish_stop(c, reason, train_s);
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
    char *best_path = tma_run_path(c->run_dir, "best.tmaw");
    double test_mrr = test_best(c, best_round, best_path);
    double conv = convergence_and_plot(c);
    tma_status_t wst = write_result(c, reason, train_s, test_mrr, conv, best_path);
    free(best_path);
    /* The final state, written once (no retry: the job is over). */
    char *sv = coord_state_encode(c, wst == TMA_OK ? "done" : "failed", c->round, train_s, best_round, best_val);
    (void)coord_put_key(c, TMA_KEY_STATE, sv, 0);
    free(sv);
    return wst;
}
