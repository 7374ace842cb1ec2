/*
 * cmd_train.c: `tma train G.tmag [--config model.json] [--seconds T | --steps N]
 * [--eval-every-seconds E] -o RUN`: one trainer on the whole training graph
 * (the centralized baseline).  Training time excludes the pauses for
 * validation; every evaluation appends a line to RUN/metrics.jsonl and a
 * better validation MRR rewrites RUN/best.tmaw; at the end the best weights
 * are tested and RUN/result.json written.  Ctrl-C (SIGINT) or SIGTERM ends
 * training early and still writes the results.
 */
#include "cli_int.h"
#include "tma_gnn.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

typedef struct train_run {
    const char *run_dir;
    const char *graph_path;
    tma_graph_t *g;
    tma_gnn_config_t cfg;
    tma_gnn_trainer_t *tr;
    tma_gnn_evaluator_t *ev;
    float *params;
    FILE *metrics;
    char *best_path;
    /* progress */
    double train_s;     /* training time so far (evaluations excluded) */
    int64_t steps;
    double loss_sum;
    int64_t loss_n;
    double last_val, best_val, best_at;
    int64_t best_step, last_eval_step;
    int evals;
    int tty;
    /* the curve, for the convergence time */
    double *curve_t, *curve_v;
    int curve_n, curve_cap;
} train_run_t;

/* One validation pass: metrics line, best weights, progress. */
static tma_status_t evaluate(train_run_t *r)
{
    tma_status_t st = tma_gnn_trainer_get_params(r->tr, r->params);
    double mrr = 0;
    if (st == TMA_OK)
        st = tma_gnn_evaluator_mrr(r->ev, r->params, TMA_GNN_SPLIT_VAL, &mrr);
    if (st != TMA_OK)
        return st;
    double infer_s, score_s;
    tma_gnn_evaluator_last_timing(r->ev, &infer_s, &score_s);
    r->evals++;
    r->last_val = mrr;
    r->last_eval_step = r->steps;
    if (r->evals == 1 || mrr > r->best_val) {
        r->best_val = mrr;
        r->best_at = r->train_s;
        r->best_step = r->steps;
        st = tma_gnn_weights_write(r->best_path, &r->cfg, r->params, (uint64_t)r->steps);
        if (st != TMA_OK)
            return st;
    }
    if (r->curve_n == r->curve_cap) {
        int cap = r->curve_cap ? 2 * r->curve_cap : 64;
        double *t = realloc(r->curve_t, (size_t)cap * sizeof *t), *v = t ? realloc(r->curve_v, (size_t)cap * sizeof *v)
                                                                          : NULL;
        if (t)
            r->curve_t = t;
        if (!t || !v)
            return TMA_ERR_NOMEM;
        r->curve_v = v;
        r->curve_cap = cap;
    }
    r->curve_t[r->curve_n] = r->train_s;
    r->curve_v[r->curve_n] = mrr;
    r->curve_n++;
    double loss = r->loss_n ? r->loss_sum / (double)r->loss_n : NAN;
    double eps = r->train_s > 0 ? (double)r->steps * r->cfg.batch_size / r->train_s : 0;
    fprintf(r->metrics,
            "{\"time\": %.3f, \"steps\": %lld, \"loss\": %.6f, \"val_mrr\": %.6f, \"best_val_mrr\": %.6f, "
            "\"edges_per_second\": %.1f, \"eval_seconds\": %.3f}\n",
            r->train_s, (long long)r->steps, isfinite(loss) ? loss : -1.0, mrr, r->best_val, eps, infer_s + score_s);
    fflush(r->metrics);
    r->loss_sum = 0;
    r->loss_n = 0;
    return TMA_OK;
}

static void progress(const train_run_t *r, double budget_s, int64_t budget_steps, double loss, int final)
{
    double sps = r->train_s > 0 ? (double)r->steps / r->train_s : 0;
    char budget[48];
    if (budget_steps > 0)
        snprintf(budget, sizeof budget, "step %lld/%lld", (long long)r->steps, (long long)budget_steps);
    else
        snprintf(budget, sizeof budget, "%.0f/%.0fs, step %lld", r->train_s, budget_s, (long long)r->steps);
    char val[64] = "val -";
    if (r->evals)
        snprintf(val, sizeof val, "val %.4f (best %.4f)", r->last_val, r->best_val);
    fprintf(stderr, "%s[train] %s  %.1f steps/s  %.0f edges/s  loss %.4f  %s%s", r->tty ? "\r" : "", budget, sps,
            sps * r->cfg.batch_size, loss, val, r->tty && !final ? "   " : "\n");
    fflush(stderr);
}

static double convergence_time(const train_run_t *r)
{
    /* The paper's definition: the first time validation MRR came within 1%
     * (relative) of its best. */
    for (int i = 0; i < r->curve_n; i++)
        if (r->curve_v[i] >= 0.99 * r->best_val)
            return r->curve_t[i];
    return r->best_at;
}

static tma_status_t write_result(train_run_t *r, double test_mrr, tma_gnn_timing_t *tm)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return TMA_ERR_NOMEM;
    cJSON_AddNumberToObject(o, "test_mrr", test_mrr);
    cJSON_AddNumberToObject(o, "best_val_mrr", r->best_val);
    cJSON_AddNumberToObject(o, "best_at_seconds", r->best_at);
    cJSON_AddNumberToObject(o, "best_step", (double)r->best_step);
    cJSON_AddNumberToObject(o, "convergence_seconds", convergence_time(r));
    cJSON_AddNumberToObject(o, "train_seconds", r->train_s);
    cJSON_AddNumberToObject(o, "steps", (double)r->steps);
    cJSON_AddNumberToObject(o, "edges_per_second",
                            r->train_s > 0 ? (double)r->steps * r->cfg.batch_size / r->train_s : 0);
    cJSON_AddNumberToObject(o, "evaluations", r->evals);
    cJSON_AddStringToObject(o, "encoder", tma_gnn_encoder_name(r->cfg.encoder));
    cJSON_AddStringToObject(o, "graph", r->graph_path);
    char idhex[24];
    snprintf(idhex, sizeof idhex, "%016llx", (unsigned long long)r->g->graph_id);
    cJSON_AddStringToObject(o, "graph_id", idhex);
    cJSON_AddBoolToObject(o, "stopped_early", stop_requested != 0);
    cJSON *t = cJSON_AddObjectToObject(o, "step_seconds");
    double b = tm->batches ? (double)tm->batches : 1;
    cJSON_AddNumberToObject(t, "sample", tm->sample / b);
    cJSON_AddNumberToObject(t, "forward", tm->forward / b);
    cJSON_AddNumberToObject(t, "backward", tm->backward / b);
    cJSON_AddNumberToObject(t, "optimizer", tm->optimizer / b);
    char *path = tma_path_join(r->run_dir, "result.json");
    tma_status_t st = path ? tma_json_write_file(path, o) : TMA_ERR_NOMEM;
    free(path);
    cJSON_Delete(o);
    return st;
}

static int run_exists(const char *dir)
{
    static const char *const names[] = {"result.json", "metrics.jsonl", "best.tmaw", NULL};
    for (const char *const *n = names; *n; n++) {
        char *p = tma_path_join(dir, *n);
        int e = p && tma_file_exists(p);
        free(p);
        if (e)
            return 1;
    }
    return 0;
}

int cli_cmd_train(int argc, char **argv)
{
    const char *config_path = NULL, *out = NULL, *encoder = NULL, *device = NULL;
    double seconds = 0, eval_every = 0, lr = 0;
    int64_t steps = 0, threads = -1, seed = -1, batch = 0;
    int seen_seconds = 0, seen_steps = 0, seen_eval = 0, seen_lr = 0, seen_seed = 0, quiet = 0;
    const cli_opt_t opts[] = {
        {"config", 'c', CLI_STR, &config_path, "FILE", "model and training config (JSON; default: DESIGN §5)", NULL},
        {"seconds", 0, CLI_DOUBLE, &seconds, "T", "train for T seconds of training time (default 60)", &seen_seconds},
        {"steps", 0, CLI_INT, &steps, "N", "train for N steps instead", &seen_steps},
        {"eval-every-seconds", 0, CLI_DOUBLE, &eval_every, "E",
         "validate every E seconds of training (default: a tenth of --seconds, or 30)", &seen_eval},
        {"output", 'o', CLI_STR, &out, "RUN", "run folder to create (required)", NULL},
        {"encoder", 0, CLI_STR, &encoder, "NAME", "override model.encoder: gcn, sage or mlp", NULL},
        {"threads", 0, CLI_INT, &threads, "N", "override train.threads (0: $OMP_NUM_THREADS, else one per CPU this process may use)", NULL},
        {"device", 0, CLI_STR, &device, "DEV",
         "cpu, cuda or cuda:N: override train.device and eval.device (sampling stays on the CPU)", NULL},
        {"seed", 0, CLI_INT, &seed, "S", "override train.seed", &seen_seed},
        {"batch-size", 0, CLI_INT, &batch, "B", "override train.batch_size", NULL},
        {"lr", 0, CLI_DOUBLE, &lr, "LR", "override train.lr", &seen_lr},
        {"quiet", 'q', CLI_FLAG, &quiet, NULL, "no progress lines", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {
        "train", "G.tmag [--config model.json] [--seconds T | --steps N] [--eval-every-seconds E] [--device DEV] -o RUN",
        "Trains one link-prediction model on the whole training graph of G.tmag (the centralized baseline), "
        "validating every E seconds. RUN receives config.json, metrics.jsonl (one line per validation), "
        "best.tmaw (the best validated weights) and result.json (test_mrr, best_val_mrr, best_at_seconds, "
        "convergence_seconds, train_seconds, steps, ...). Training time excludes validation pauses.",
        opts, 1, 1};
    char *pos[CLI_MAX_POS];
    int npos;
    int pr = cli_parse(&spec, argc, argv, pos, &npos);
    if (pr != CLI_PARSE_OK)
        return pr == CLI_PARSE_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (!out)
        return cli_usage_error("train", "-o RUN is required (the run folder to create)");
    if (seen_seconds && seen_steps)
        return cli_usage_error("train", "--seconds and --steps exclude each other");
    if (seen_seconds && !(seconds > 0 && seconds < 1e9))
        return cli_usage_error("train", "--seconds: expected a positive number of seconds, got %g", seconds);
    if (seen_steps && steps < 1)
        return cli_usage_error("train", "--steps: expected a positive count, got %lld", (long long)steps);
    if (seen_eval && !(eval_every > 0))
        return cli_usage_error("train", "--eval-every-seconds: expected a positive number, got %g", eval_every);
    if (!seen_seconds && !seen_steps)
        seconds = 60;
    if (!seen_eval)
        eval_every = seen_steps ? 30 : seconds / 10;

    train_run_t r;
    memset(&r, 0, sizeof r);
    r.run_dir = out;
    r.graph_path = pos[0];
    r.tty = isatty(2) && !quiet;
    tma_status_t st;
    if (config_path) {
        if ((st = tma_gnn_config_load(config_path, &r.cfg)) != TMA_OK)
            return CLI_EXIT_USAGE;
    } else {
        tma_gnn_config_default(&r.cfg);
    }
    if (encoder) {
        int found = 0;
        for (int e = 0; e < 3; e++)
            if (strcmp(encoder, tma_gnn_encoder_name((tma_gnn_encoder_t)e)) == 0) {
                r.cfg.encoder = (tma_gnn_encoder_t)e;
                found = 1;
            }
        if (!found)
            return cli_usage_error("train", "--encoder: expected gcn, sage or mlp, got '%s'", encoder);
    }
    if (threads >= 0)
        r.cfg.threads = (int)TMA_MIN(threads, 1 << 20);
    if (seen_seed) {
        if (seed < 0)
            return cli_usage_error("train", "--seed: expected a non-negative integer");
        r.cfg.seed = (uint64_t)seed;
    }
    if (batch)
        r.cfg.batch_size = (int)TMA_MIN(TMA_MAX(batch, -1), (int64_t)1 << 30);
    if (seen_lr)
        r.cfg.lr = lr;
    if (device) {
        if (!tma_gnn_device_valid(device))
            return cli_usage_error("train", "--device: expected cpu, cuda or cuda:N, got '%s'", device);
        snprintf(r.cfg.device, sizeof r.cfg.device, "%s", device);
        snprintf(r.cfg.eval_device, sizeof r.cfg.eval_device, "%s", device);
    }
    if (tma_gnn_config_validate(&r.cfg, "tma train") != TMA_OK)
        return CLI_EXIT_USAGE;

    int rc = CLI_EXIT_RUNTIME;
    if ((st = tma_graph_open(pos[0], 0, &r.g)) != TMA_OK)
        return CLI_EXIT_RUNTIME;
    if (r.g->num_val < 1 || r.g->num_test < 1) {
        fprintf(stderr, "tma train: %s has no validation or test edges (is it a shard? train on the full graph)\n",
                pos[0]);
        goto out;
    }
    if ((st = tma_gnn_config_resolve(&r.cfg, r.g)) != TMA_OK)
        goto out;
    if (run_exists(out)) {
        fprintf(stderr, "tma train: %s already holds a run (result.json, metrics.jsonl or best.tmaw); "
                        "choose another -o or remove it\n", out);
        goto out;
    }
    /* The trainer and evaluator first: a device that is not there fails
     * before the run folder exists. */
    if ((st = tma_gnn_trainer_create(&r.cfg, &r.g, 1, &r.tr)) != TMA_OK ||
        (st = tma_gnn_evaluator_create(&r.cfg, r.g, &r.ev)) != TMA_OK)
        goto out;
    if ((st = tma_mkdir_p(out)) != TMA_OK)
        goto out;
    {
        /* The resolved config alone, so `--config RUN/config.json` repeats the run. */
        cJSON *cj = tma_gnn_config_to_json(&r.cfg);
        char *path = tma_path_join(out, "config.json");
        st = cj && path ? tma_json_write_file(path, cj) : TMA_ERR_NOMEM;
        cJSON_Delete(cj);
        free(path);
        if (st != TMA_OK)
            goto out;
    }
    r.best_path = tma_path_join(out, "best.tmaw");
    char *mpath = tma_path_join(out, "metrics.jsonl");
    r.metrics = mpath ? fopen(mpath, "w") : NULL;
    if (!r.metrics) {
        fprintf(stderr, "tma train: cannot create %s\n", mpath ? mpath : "metrics.jsonl");
        free(mpath);
        goto out;
    }
    free(mpath);
    r.params = malloc((size_t)tma_gnn_trainer_param_count(r.tr) * sizeof *r.params);
    if (!r.params)
        goto out;
    if (!quiet)
        fprintf(stderr, "[train] %s on %s: %lld nodes, %lld training edges, %lld parameters, batch %d, %d thread(s), "
                        "device %s\n",
                tma_gnn_encoder_name(r.cfg.encoder), pos[0], (long long)r.g->num_nodes,
                (long long)r.g->num_train_edges, (long long)tma_gnn_trainer_param_count(r.tr), r.cfg.batch_size,
                tma_gnn_backend_threads(tma_gnn_trainer_backend(r.tr)), r.cfg.device);

    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    double next_eval = eval_every, next_print = 0, last_loss = NAN;
    while (!stop_requested) {
        if (seen_steps ? r.steps >= steps : r.train_s >= seconds)
            break;
        double t0 = tma_clock_now();
        float loss;
        st = tma_gnn_trainer_step(r.tr, &loss);
        r.train_s += tma_clock_now() - t0;
        if (st != TMA_OK)
            break;
        r.steps++;
        r.loss_sum += loss;
        r.loss_n++;
        last_loss = loss;
        if (r.train_s >= next_eval) {
            if ((st = evaluate(&r)) != TMA_OK)
                break;
            next_eval = r.train_s + eval_every;
            if (!quiet && !r.tty)
                progress(&r, seconds, seen_steps ? steps : 0, last_loss, 0);
        }
        if (!quiet && r.tty && r.train_s >= next_print) {
            progress(&r, seconds, seen_steps ? steps : 0, last_loss, 0);
            next_print = r.train_s + 0.5;
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (st != TMA_OK)
        goto out;
    if (stop_requested && !quiet)
        fprintf(stderr, "\n[train] stopping on request after %lld steps\n", (long long)r.steps);
    /* The final weights are validated too, so the best includes them
     * (unless the last validation already saw them). */
    if ((r.evals == 0 || r.curve_n == 0 || r.last_eval_step != r.steps) && (st = evaluate(&r)) != TMA_OK)
        goto out;
    if (!quiet)
        progress(&r, seconds, seen_steps ? steps : 0, last_loss, 1);

    /* Test the best validated weights. */
    {
        float *best = NULL;
        int64_t n = 0;
        double test_mrr = 0;
        if ((st = tma_gnn_weights_read(r.best_path, &r.cfg, NULL, &best, &n, NULL)) != TMA_OK)
            goto out;
        st = tma_gnn_evaluator_mrr(r.ev, best, TMA_GNN_SPLIT_TEST, &test_mrr);
        free(best);
        if (st != TMA_OK)
            goto out;
        tma_gnn_timing_t tm;
        tma_gnn_trainer_timing(r.tr, &tm);
        if ((st = write_result(&r, test_mrr, &tm)) != TMA_OK)
            goto out;
        if (!quiet)
            fprintf(stderr, "[train] test MRR %.4f (best validation MRR %.4f at %.1fs, step %lld); results in %s\n",
                    test_mrr, r.best_val, r.best_at, (long long)r.best_step, out);
        printf("test_mrr %.6f\n", test_mrr);
    }
    rc = CLI_EXIT_OK;
out:
    if (rc != CLI_EXIT_OK && st != TMA_OK)
        fprintf(stderr, "tma train: failed: %s\n", tma_status_str(st));
    if (r.metrics)
        fclose(r.metrics);
    free(r.params);
    free(r.best_path);
    free(r.curve_t);
    free(r.curve_v);
    tma_gnn_evaluator_destroy(r.ev);
    tma_gnn_trainer_destroy(r.tr);
    tma_graph_destroy(r.g);
    return rc;
}
