/*
 * cmd_train.c: `tma train G.tmag [--config model.json] [--seconds T | --steps N]
 * [--eval-every-seconds E] -o RUN`: one trainer on the whole training graph
 * (the centralized baseline).  Training time excludes the pauses for
 * validation; every validation is a round: it appends a line to
 * RUN/metrics.jsonl and a better validation MRR rewrites RUN/best.tmaw; at
 * the end the best weights are tested and RUN/result.json written, in the
 * run folder's one format (job/run.c), so `tma report` reads it like a
 * distributed run.  Ctrl-C (SIGINT) or SIGTERM ends training early, still
 * writes the results, and exits 128 + the signal.
 *
 * Every validation also saves the run's state, RUN/last.opt (the weights,
 * the optimizer state, the step and time spent, the best so far: one file,
 * renamed into place, written before the files it vouches for) and
 * RUN/last.tmaw (the latest weights), so `--resume RUN` continues a run that
 * was stopped or killed from its last validation; in step mode it ends with
 * the weights of a run that never stopped, bit for bit.
 */
#include "cli_int.h"
#include "tma_gnn.h"
#include "tma_job.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop;

/* The flags. */
typedef struct train_flags {
    const char *graph, *config, *out, *encoder, *device, *init, *resume;
    double seconds, eval_every, lr;
    int64_t steps, threads, seed, batch;
    int seen_seconds, seen_steps, seen_eval, seen_lr, seen_seed, quiet, json, force;
} train_flags_t;

typedef struct train_run {
    const train_flags_t *f;
    char *run_dir; /* absolute */
    tma_graph_t *g;
    tma_gnn_config_t cfg;
    tma_gnn_trainer_t *tr;
    tma_gnn_evaluator_t *ev;
    float *params;
    tma_gnn_opt_state_t opt; /* the trainer's optimizer state, saved with last.opt */
    char *graph_abs;          /* the graph's absolute path, for result.json and --resume */
    int tensorboard;
    char *metrics_path, *best_path, *last_path, *opt_path;
    tma_tfevents_t *tb; /* RUN/events.out.tfevents.* */
    double started; /* wall clock */
    /* progress */
    double train_s; /* training time so far (evaluations excluded) */
    int64_t steps;
    double loss_sum, last_loss;
    int64_t loss_n;
    double last_val, best_val, best_at;
    int64_t best_step, best_round, last_eval_step;
    int evals;     /* validations done in this process or before a resume (0: none) */
    int64_t round; /* the last validation's round: 0 the weights training starts from; -1 none */
    int tty;
    int64_t printed_step; /* the step of the last progress line (not a tty): -1 none */
    cJSON *resumed; /* --resume: the progress object of RUN/last.opt */
    char *resume_config; /* --resume: RUN/config.json */
} train_run_t;

/* A number that reads back the same double (cJSON prints 15 digits when
 * they come within its tolerance); null when not finite. */
static void add_exact(cJSON *o, const char *key, double v)
{
    char text[40];
    snprintf(text, sizeof text, "%.17g", v);
    cJSON_AddRawToObject(o, key, isfinite(v) ? text : "null");
}

/* The state after the validation in progress, `line` its metrics line,
 * into RUN/last.opt: what --resume needs beyond config.json. */
static tma_status_t save_state(train_run_t *r, const cJSON *line)
{
    const train_flags_t *f = r->f;
    tma_status_t st = tma_gnn_trainer_get_opt(r->tr, &r->opt);
    if (st != TMA_OK)
        return st;
    char gid[24];
    snprintf(gid, sizeof gid, "%016llx", (unsigned long long)r->g->graph_id);
    cJSON *o = cJSON_CreateObject();
    cJSON *budget = o ? cJSON_AddObjectToObject(o, "budget") : NULL;
    cJSON *l = line ? cJSON_Duplicate(line, 1) : NULL;
    if (!budget || !l) {
        cJSON_Delete(o);
        cJSON_Delete(l);
        return TMA_ERR_NOMEM;
    }
    if (f->seen_steps)
        cJSON_AddNumberToObject(budget, "steps", (double)f->steps);
    else
        add_exact(budget, "seconds", f->seconds);
    cJSON_AddStringToObject(o, "graph", r->graph_abs);
    cJSON_AddStringToObject(o, "graph_id", gid);
    add_exact(o, "eval_every_seconds", f->eval_every);
    cJSON_AddBoolToObject(o, "tensorboard", r->tensorboard);
    add_exact(o, "started", r->started);
    add_exact(o, "train_seconds", r->train_s);
    cJSON_AddNumberToObject(o, "steps", (double)r->steps);
    cJSON_AddNumberToObject(o, "rounds", (double)r->round);
    add_exact(o, "last_val_mrr", r->last_val);
    add_exact(o, "best_val_mrr", r->best_val);
    add_exact(o, "best_at_seconds", r->best_at);
    cJSON_AddNumberToObject(o, "best_step", (double)r->best_step);
    cJSON_AddNumberToObject(o, "best_round", (double)r->best_round);
    cJSON_AddItemToObject(o, "line", l);
    st = tma_gnn_opt_write(r->opt_path, &r->cfg, r->params, &r->opt, o);
    cJSON_Delete(o);
    return st;
}

/*
 * One validation pass, one round.  The state goes first (last.opt), then
 * best.tmaw, last.tmaw and the metrics line: a process killed in between
 * leaves a state that --resume completes them from (it holds this round's
 * weights and line), never files ahead of the state.
 */
static tma_status_t evaluate(train_run_t *r)
{
    tma_status_t st = tma_gnn_trainer_get_params(r->tr, r->params);
    tma_gnn_metrics_t m;
    if (st == TMA_OK)
        st = tma_gnn_evaluator_metrics(r->ev, r->params, TMA_GNN_SPLIT_VAL, &m);
    if (st != TMA_OK)
        return st;
    const double mrr = m.mrr;
    double infer_s, score_s;
    tma_gnn_evaluator_last_timing(r->ev, &infer_s, &score_s);
    r->evals++;
    r->round++;
    r->last_val = mrr;
    r->last_eval_step = r->steps;
    const int better = r->evals == 1 || mrr > r->best_val;
    if (better) {
        r->best_val = mrr;
        r->best_at = r->train_s;
        r->best_step = r->steps;
        r->best_round = r->round;
    }
    double loss = r->loss_n ? r->loss_sum / (double)r->loss_n : NAN;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return TMA_ERR_NOMEM;
    cJSON_AddNumberToObject(o, "round", (double)r->round);
    cJSON_AddNumberToObject(o, "time", r->train_s);
    cJSON_AddNumberToObject(o, "wall", tma_clock_wall());
    cJSON_AddNumberToObject(o, "steps", (double)r->steps);
    if (isfinite(loss))
        cJSON_AddNumberToObject(o, "loss", loss);
    else
        cJSON_AddNullToObject(o, "loss"); /* round 0: no step yet */
    cJSON_AddNumberToObject(o, "val_mrr", mrr);
    add_exact(o, "best_val_mrr", r->best_val);
    cJSON_AddNumberToObject(o, "edges_per_second",
                            r->train_s > 0 ? (double)r->steps * r->cfg.batch_size / r->train_s : 0);
    cJSON_AddNumberToObject(o, "eval_seconds", infer_s + score_s);
    tma_gnn_metrics_json(&m, "val_", o);
    r->loss_sum = 0;
    r->loss_n = 0;
    st = save_state(r, o);
    if (st == TMA_OK && better)
        st = tma_gnn_weights_write(r->best_path, &r->cfg, r->params, (uint64_t)r->round);
    /* last.tmaw's round is the step, so two runs that reach one step write
     * the same bytes. */
    if (st == TMA_OK)
        st = tma_gnn_weights_write(r->last_path, &r->cfg, r->params, (uint64_t)r->steps);
    if (st == TMA_OK)
        st = tma_job_run_append_line(r->metrics_path, o);
    if (st == TMA_OK)
        st = tma_job_run_tb_line(r->tb, o);
    cJSON_Delete(o);
    return st;
}

static void progress(train_run_t *r, int final)
{
    const train_flags_t *f = r->f;
    /* Without a tty a line is printed at each validation; the final one
     * only when it says something new (a last validation). */
    if (!r->tty && final && r->printed_step == r->steps)
        return;
    r->printed_step = r->steps;
    double sps = r->train_s > 0 ? (double)r->steps / r->train_s : 0;
    char budget[48];
    if (f->seen_steps)
        snprintf(budget, sizeof budget, "step %lld/%lld", (long long)r->steps, (long long)f->steps);
    else
        snprintf(budget, sizeof budget, "%.0f/%.0fs, step %lld", r->train_s, f->seconds, (long long)r->steps);
    /* The validation it shows is named by its step when the line has
     * moved past it (a tty's line is refreshed between validations). */
    char val[96] = "val -";
    if (r->evals && r->last_eval_step == r->steps)
        snprintf(val, sizeof val, "val %.4f (best %.4f)", r->last_val, r->best_val);
    else if (r->evals)
        snprintf(val, sizeof val, "val %.4f at step %lld (best %.4f)", r->last_val, (long long)r->last_eval_step,
                 r->best_val);
    char loss[24] = "-";
    if (isfinite(r->last_loss))
        snprintf(loss, sizeof loss, "%.4f", r->last_loss);
    fprintf(stderr, "%s[train] %s  %.1f steps/s  %.0f edges/s  loss %s  %s%s", r->tty ? "\r" : "", budget, sps,
            sps * r->cfg.batch_size, loss, val, r->tty && !final ? "   " : "\n");
    fflush(stderr);
}

/* The flags (table-driven) into *f; CLI_GO_ON, or the exit code to end
 * with (0 after the help). */
static int train_parse(train_flags_t *f, int argc, char **argv)
{
    f->threads = INT64_MIN; /* unset: the config's train.threads */
    f->seed = -1;
    const cli_opt_t opts[] = {
        {"config", 'c', CLI_STR, &f->config, "FILE",
         "model and training config (JSON; default: the defaults in docs/model.md, \"Configuration\")", NULL},
        {"seconds", 0, CLI_DOUBLE, &f->seconds, "T", "train for T seconds of training time (default 60)",
         &f->seen_seconds},
        {"steps", 0, CLI_INT, &f->steps, "N", "train for N steps instead", &f->seen_steps},
        {"eval-every-seconds", 0, CLI_DOUBLE, &f->eval_every, "E",
         "validate every E seconds of training (default: a tenth of --seconds, or 30)", &f->seen_eval},
        {"output", 'o', CLI_STR, &f->out, "RUN", "run folder to create (required); one that holds a run is refused",
         NULL},
        {"force", 0, CLI_FLAG, &f->force, NULL, "replace the run in an -o folder that holds one", NULL},
        {"init", 0, CLI_STR, &f->init, "WEIGHTS",
         "start from these weights (a .tmaw of the same model) instead of fresh ones: fine-tuning", NULL},
        {"resume", 0, CLI_STR, &f->resume, "RUN",
         "continue the run in RUN from its last validation (RUN/last.opt), into RUN; G.tmag may be left out. "
         "--steps or --seconds set a new total budget",
         NULL},
        {"encoder", 0, CLI_STR, &f->encoder, "NAME", "override model.encoder: gcn, sage, mlp, rgcn or gat", NULL},
        {"threads", 0, CLI_INT, &f->threads, "N", "override train.threads (0: $OMP_NUM_THREADS, else one per CPU this process may use)", NULL},
        {"device", 0, CLI_STR, &f->device, "DEV",
         "cpu, cuda or cuda:N: override train.device and eval.device (sampling stays on the CPU)", NULL},
        {"seed", 0, CLI_INT, &f->seed, "S", "override train.seed", &f->seen_seed},
        {"batch-size", 0, CLI_INT, &f->batch, "B", "override train.batch_size", NULL},
        {"lr", 0, CLI_DOUBLE, &f->lr, "LR", "override train.lr", &f->seen_lr},
        {"quiet", 'q', CLI_FLAG, &f->quiet, NULL, "no progress lines", NULL},
        {"json", 0, CLI_FLAG, &f->json, NULL, "print result.json on stdout instead of \"test_mrr X\"", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {
        "train",
        "G.tmag [--config model.json] [--seconds T | --steps N] [--eval-every-seconds E] [--device DEV] -o RUN | "
        "[G.tmag] --resume RUN",
        "Trains one link-prediction model on the whole training graph of G.tmag (the centralized baseline), "
        "validating every E seconds. RUN receives config.json, metrics.jsonl (one line per validation, a round), "
        "best.tmaw (the best validated weights), mrr.svg and result.json (the schema of every run folder: "
        "test_mrr, best_val_mrr, convergence_seconds, train_seconds, ...). Training time excludes validation "
        "pauses. Every validation also saves last.tmaw (the latest weights) and last.opt (the optimizer state and "
        "the run's progress), from which --resume RUN continues a stopped or killed run. Ctrl-C or SIGTERM stops "
        "training early: the results are still written, and tma exits 130 or 143.",
        opts, 0, 1};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;
    if (f->threads != INT64_MIN && cli_check_threads("train", "--threads", f->threads) != CLI_EXIT_OK)
        return CLI_EXIT_USAGE;
    f->graph = args.npos ? args.pos[0] : NULL;
    if (f->resume) {
        /* The run's own config, seed and folder: only what does not change
         * the steps taken may be given again. */
        const struct {
            int given;
            const char *flag;
        } fixed[] = {{!!f->config, "--config"}, {!!f->encoder, "--encoder"}, {f->seen_seed, "--seed"},
                     {f->batch != 0, "--batch-size"}, {f->seen_lr, "--lr"}, {!!f->init, "--init"},
                     {!!f->out, "-o"}, {f->force, "--force"}};
        for (size_t i = 0; i < TMA_ARRAY_LEN(fixed); i++)
            if (fixed[i].given)
                return cli_usage_error("train", "--resume continues the run in %s with its own config and folder: "
                                                "drop %s", f->resume, fixed[i].flag);
    } else if (!f->graph) {
        return cli_usage_error("train", "expected the graph G.tmag (or --resume RUN)");
    }
    if (!f->out && !f->resume)
        return cli_usage_error("train", "-o RUN is required (the run folder to create)");
    if (f->seen_seconds && f->seen_steps)
        return cli_usage_error("train", "--seconds and --steps exclude each other");
    if (f->seen_seconds && !(f->seconds > 0 && f->seconds < 1e9))
        return cli_usage_error("train", "--seconds: expected a positive number of seconds, got %g", f->seconds);
    if (f->seen_steps && f->steps < 1)
        return cli_usage_error("train", "--steps: expected a positive count, got %lld", (long long)f->steps);
    if (f->seen_eval && !(f->eval_every > 0))
        return cli_usage_error("train", "--eval-every-seconds: expected a positive number, got %g", f->eval_every);
    if (f->seen_seed && f->seed < 0)
        return cli_usage_error("train", "--seed: expected a non-negative integer");
    if (f->device && !tma_gnn_device_valid(f->device))
        return cli_usage_error("train", "--device: expected cpu, cuda or cuda:N, got '%s'", f->device);
    if (!f->seen_seconds && !f->seen_steps && !f->resume)
        f->seconds = 60;
    if (!f->seen_eval && !f->resume)
        f->eval_every = f->seen_steps ? 30 : f->seconds / 10;
    return CLI_GO_ON;
}

/* metrics.tensorboard of --config (default on); -1 (logged) when the
 * section is wrong. */
static int train_tensorboard(const train_flags_t *f)
{
    int on = 1;
    cJSON *root = NULL;
    if (f->config && tma_json_load_file(f->config, &root) == TMA_OK &&
        tma_job_run_metrics_section(root, f->config, &on, NULL, 0) != TMA_OK)
        on = -1;
    cJSON_Delete(root);
    return on;
}

/* The model config: --config or the defaults, then the flags over it. */
static int train_config(const train_flags_t *f, tma_gnn_config_t *cfg)
{
    if (f->config) {
        if (tma_gnn_config_load(f->config, cfg) != TMA_OK || train_tensorboard(f) < 0)
            return CLI_EXIT_USAGE;
    } else {
        tma_gnn_config_default(cfg);
    }
    if (f->encoder) {
        if (tma_gnn_encoder_parse(f->encoder, &cfg->encoder) != TMA_OK)
            return cli_usage_error("train", "--encoder: expected gcn, sage, mlp, rgcn or gat, got '%s'", f->encoder);
    }
    if (f->threads != INT64_MIN)
        cfg->threads = (int)f->threads; /* checked in train_parse */
    if (f->seen_seed)
        cfg->seed = (uint64_t)f->seed;
    if (f->batch)
        cfg->batch_size = (int)TMA_MIN(TMA_MAX(f->batch, -1), (int64_t)1 << 30);
    if (f->seen_lr)
        cfg->lr = f->lr;
    if (f->device) {
        snprintf(cfg->device, sizeof cfg->device, "%s", f->device);
        snprintf(cfg->eval_device, sizeof cfg->eval_device, "%s", f->device);
    }
    return tma_gnn_config_validate(cfg, "tma train") == TMA_OK ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

/* A number of the progress object of last.opt; *ok cleared when it lacks it. */
static double progress_num(const cJSON *o, const char *key, int *ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v))
        *ok = 0;
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/*
 * --resume RUN, before the graph is opened: the config (RUN/config.json),
 * the state (RUN/last.opt: weights into r->params, the optimizer state into
 * r->opt) and the progress it records: the graph, the budget (unless the
 * flags give a new one), the cadence, the steps, time and best so far.  An
 * exit code (2 for a folder that holds no resumable run, naming the file;
 * 1 for a damaged state), or CLI_GO_ON.
 */
static int train_resume_state(train_flags_t *f, train_run_t *r)
{
    char *opt_path = tma_path_join(f->resume, "last.opt");
    r->resume_config = tma_path_join(f->resume, "config.json");
    if (!opt_path || !r->resume_config) {
        free(opt_path);
        return CLI_EXIT_RUNTIME;
    }
    int rc = CLI_EXIT_USAGE;
    struct stat sb;
    if (stat(f->resume, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "tma train: --resume %s: no such run folder\n", f->resume);
        goto out;
    }
    if (!tma_file_exists(opt_path) || !tma_file_exists(r->resume_config)) {
        fprintf(stderr, "tma train: %s: missing: %s holds no run of tma train that can be resumed\n",
                tma_file_exists(r->resume_config) ? opt_path : r->resume_config, f->resume);
        goto out;
    }
    f->config = r->resume_config;
    if ((rc = train_config(f, &r->cfg)) != CLI_EXIT_OK)
        goto out;
    tma_status_t st = tma_gnn_opt_read(opt_path, &r->cfg, &r->params, &r->opt, &r->resumed);
    if (st != TMA_OK) {
        fprintf(stderr, "tma train: %s: cannot resume from it (%s)\n", opt_path, tma_status_str(st));
        rc = st == TMA_ERR_MISMATCH || st == TMA_ERR_NOT_FOUND ? CLI_EXIT_USAGE : CLI_EXIT_RUNTIME;
        goto out;
    }
    const cJSON *o = r->resumed, *budget = cJSON_GetObjectItemCaseSensitive(o, "budget");
    const cJSON *graph = cJSON_GetObjectItemCaseSensitive(o, "graph");
    const cJSON *tb = cJSON_GetObjectItemCaseSensitive(o, "tensorboard");
    int ok = cJSON_IsObject(budget) && cJSON_IsString(graph) && cJSON_IsBool(tb) &&
             cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "line"));
    const int step_budget = cJSON_HasObjectItem(budget, "steps");
    const double budget_n = progress_num(budget, step_budget ? "steps" : "seconds", &ok);
    const double eval_every = progress_num(o, "eval_every_seconds", &ok);
    r->started = progress_num(o, "started", &ok);
    r->train_s = progress_num(o, "train_seconds", &ok);
    r->steps = (int64_t)progress_num(o, "steps", &ok);
    r->round = (int64_t)progress_num(o, "rounds", &ok);
    r->evals = (int)r->round + 1;
    r->last_val = progress_num(o, "last_val_mrr", &ok);
    r->best_val = progress_num(o, "best_val_mrr", &ok);
    r->best_at = progress_num(o, "best_at_seconds", &ok);
    r->best_step = (int64_t)progress_num(o, "best_step", &ok);
    r->best_round = (int64_t)progress_num(o, "best_round", &ok);
    if (!ok || r->steps != r->opt.steps || r->round < 0 || r->best_round < 0 || r->best_round > r->round) {
        fprintf(stderr, "tma train: %s: the run's progress is incomplete or inconsistent; it cannot be resumed\n",
                opt_path);
        rc = CLI_EXIT_RUNTIME;
        goto out;
    }
    r->last_eval_step = r->steps;
    r->tensorboard = cJSON_IsTrue(tb);
    if (!f->graph)
        f->graph = graph->valuestring;
    if (!f->seen_steps && !f->seen_seconds) {
        f->seen_steps = step_budget;
        f->steps = (int64_t)budget_n;
        f->seconds = budget_n;
    }
    if (!f->seen_eval)
        f->eval_every = eval_every;
    /* A run that spent its budget and wrote its result is finished; one
     * stopped by a signal, or killed before its result, is not. */
    const int spent = f->seen_steps ? r->steps >= f->steps : r->train_s >= f->seconds;
    char *res_path = tma_path_join(f->resume, "result.json");
    cJSON *res = NULL;
    const char *stopped = "";
    if (spent && res_path && tma_file_exists(res_path) && tma_json_load_file(res_path, &res) == TMA_OK &&
        cJSON_IsString(cJSON_GetObjectItemCaseSensitive(res, "stopped")))
        stopped = cJSON_GetObjectItemCaseSensitive(res, "stopped")->valuestring;
    const int finished = spent && *stopped && strcmp(stopped, "interrupted") != 0;
    if (finished)
        fprintf(stderr, "tma train: %s finished (%s: %lld steps, %.1f s of training); give a larger --steps or "
                        "--seconds to continue it\n",
                f->resume, stopped, (long long)r->steps, r->train_s);
    cJSON_Delete(res);
    free(res_path);
    rc = finished ? CLI_EXIT_USAGE : CLI_GO_ON;
out:
    free(opt_path);
    return rc;
}

/* --resume, once the run folder is open: completes what a process killed
 * after saving its state left undone (the round's metrics line, best.tmaw
 * when that round was the best, last.tmaw) and drops what it wrote after
 * the state (later metrics lines). */
static tma_status_t train_resume_files(train_run_t *r)
{
    const cJSON *line = cJSON_GetObjectItemCaseSensitive(r->resumed, "line");
    tma_status_t st = tma_job_run_trim_metrics(r->metrics_path, r->round, line);
    if (st != TMA_OK)
        return st;
    uint64_t round = 0;
    float *w = NULL;
    const int have_best = tma_file_exists(r->best_path);
    if (have_best)
        st = tma_gnn_weights_read(r->best_path, &r->cfg, NULL, &w, NULL, &round);
    free(w);
    if (st != TMA_OK)
        return st;
    if (!have_best || round != (uint64_t)r->best_round) {
        if (r->best_round != r->round) {
            fprintf(stderr, "tma train: %s holds round %llu, the state of %s says the best is round %lld; the run "
                            "cannot be resumed\n", r->best_path, (unsigned long long)round, r->run_dir,
                    (long long)r->best_round);
            return TMA_ERR_FORMAT;
        }
        if ((st = tma_gnn_weights_write(r->best_path, &r->cfg, r->params, (uint64_t)r->round)) != TMA_OK)
            return st;
    }
    return tma_gnn_weights_write(r->last_path, &r->cfg, r->params, (uint64_t)r->steps);
}

/* The graph, the trainer and evaluator, then the run folder (so a device
 * that is not there fails before it exists) with config.json.  TMA_ERR_CONFIG
 * when the config does not fit the graph or the folder holds a run. */
static tma_status_t train_open(train_run_t *r)
{
    const train_flags_t *f = r->f;
    tma_status_t st = tma_graph_open(f->graph, 0, &r->g);
    if (st != TMA_OK)
        return st;
    if (r->g->num_val < 1 || r->g->num_test < 1) {
        fprintf(stderr, "tma train: %s has no validation or test edges (is it a shard? train on the full graph)\n",
                f->graph);
        return TMA_ERR_CONFIG;
    }
    const uint64_t hash = tma_gnn_config_hash(&r->cfg);
    if (r->resumed) {
        char gid[24];
        snprintf(gid, sizeof gid, "%016llx", (unsigned long long)r->g->graph_id);
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(r->resumed, "graph_id");
        if (!cJSON_IsString(want) || strcmp(want->valuestring, gid) != 0) {
            fprintf(stderr, "tma train: %s (graph id %s) is not the graph the run in %s trained on (%s)\n", f->graph,
                    gid, f->resume, cJSON_IsString(want) ? want->valuestring : "?");
            return TMA_ERR_CONFIG;
        }
    }
    if ((st = tma_gnn_config_resolve(&r->cfg, r->g)) != TMA_OK)
        return st == TMA_ERR_NOMEM ? st : TMA_ERR_CONFIG;
    if (r->resumed && tma_gnn_config_hash(&r->cfg) != hash) {
        fprintf(stderr, "tma train: %s/config.json does not resolve to the model of its last.opt on %s\n", f->resume,
                f->graph);
        return TMA_ERR_CONFIG;
    }
    if (!r->resumed && !f->force && tma_job_run_holds_run(f->out)) {
        fprintf(stderr, "tma train: %s already holds a run (result.json, metrics.jsonl, best.tmaw or last.opt); "
                        "choose another -o, --force to replace it, or --resume it\n", f->out);
        return TMA_ERR_CONFIG;
    }
    if ((st = tma_gnn_trainer_create(&r->cfg, &r->g, 1, &r->tr)) != TMA_OK)
        return st;
    const int64_t np = tma_gnn_trainer_param_count(r->tr);
    if (f->init) {
        /* Warm start, before the run folder exists: the weights must be
         * this model's (the error names the first field that differs). */
        float *w = NULL;
        uint64_t round = 0;
        st = tma_gnn_weights_read(f->init, &r->cfg, NULL, &w, NULL, &round);
        if (st == TMA_OK)
            st = tma_gnn_trainer_set_params(r->tr, w);
        free(w);
        if (st != TMA_OK)
            return st == TMA_ERR_MISMATCH ? TMA_ERR_CONFIG : st;
        if (!f->quiet)
            fprintf(stderr, "[train] starting from %s (round %llu)\n", f->init, (unsigned long long)round);
    }
    if (r->resumed) {
        /* The weights and optimizer state of the last validation. */
        if ((st = tma_gnn_trainer_set_params(r->tr, r->params)) != TMA_OK ||
            (st = tma_gnn_trainer_set_opt(r->tr, &r->opt)) != TMA_OK)
            return st;
    } else {
        r->params = malloc((size_t)np * sizeof *r->params);
        r->opt.adam_m = malloc((size_t)np * sizeof *r->opt.adam_m);
        r->opt.adam_v = malloc((size_t)np * sizeof *r->opt.adam_v);
        r->tensorboard = train_tensorboard(f) > 0;
        if (!r->params || !r->opt.adam_m || !r->opt.adam_v)
            return TMA_ERR_NOMEM;
    }
    if ((st = tma_gnn_evaluator_create(&r->cfg, r->g, &r->ev)) != TMA_OK ||
        (st = tma_job_run_make_dir(r->resumed ? f->resume : f->out, &r->run_dir)) != TMA_OK ||
        (f->force && (st = tma_job_run_clear_results(r->run_dir)) != TMA_OK))
        return st;
    r->graph_abs = realpath(f->graph, NULL);
    r->best_path = tma_job_run_path(r->run_dir, "best.tmaw");
    r->last_path = tma_job_run_path(r->run_dir, "last.tmaw");
    r->opt_path = tma_job_run_path(r->run_dir, "last.opt");
    r->metrics_path = tma_job_run_path(r->run_dir, "metrics.jsonl");
    if (!r->graph_abs || !r->best_path || !r->last_path || !r->opt_path || !r->metrics_path)
        return TMA_ERR_NOMEM;
    if (r->resumed) {
        st = train_resume_files(r);
    } else {
        /* The resolved config alone, so `--config RUN/config.json` repeats the run. */
        cJSON *cj = tma_gnn_config_to_json(&r->cfg);
        char *path = tma_job_run_path(r->run_dir, "config.json");
        st = cj && path ? tma_json_write_file(path, cj) : TMA_ERR_NOMEM;
        cJSON_Delete(cj);
        free(path);
    }
    if (st == TMA_OK && r->tensorboard)
        st = tma_tfevents_open(r->run_dir, &r->tb);
    if (st == TMA_OK && r->tb && r->resumed) {
        /* The killed process may have shown rounds from this one on (or
         * died before showing this one): TensorBoard drops them, and this
         * round is shown again from the state's own line. */
        const cJSON *line = cJSON_GetObjectItemCaseSensitive(r->resumed, "line");
        st = tma_tfevents_restart(r->tb, tma_clock_wall(), r->round);
        if (st == TMA_OK && cJSON_IsObject(line))
            st = tma_job_run_tb_line(r->tb, line);
    }
    if (st == TMA_OK && !f->quiet && r->resumed)
        fprintf(stderr, "[train] resuming %s at step %lld, %.1f s of training, round %lld (best validation MRR %.4f)\n",
                r->run_dir, (long long)r->steps, r->train_s, (long long)r->round, r->best_val);
    if (st == TMA_OK && !f->quiet)
        fprintf(stderr, "[train] %s on %s: %lld nodes, %lld training edges, %lld parameters, batch %d, %d thread(s), "
                        "device %s; MRR ties %s\n",
                tma_gnn_encoder_name(r->cfg.encoder), f->graph, (long long)r->g->num_nodes,
                (long long)r->g->num_train_edges, (long long)np, r->cfg.batch_size,
                tma_gnn_backend_threads(tma_gnn_trainer_backend(r->tr)), r->cfg.device,
                tma_gnn_ties_name(r->cfg.eval_ties));
    return st;
}

/* Trains until the budget is spent or a stop is asked for, validating every
 * E seconds and once more at the end (unless the last validation already
 * saw the final weights). */
static tma_status_t train_loop(train_run_t *r)
{
    const train_flags_t *f = r->f;
    if (!r->resumed)
        r->started = tma_clock_wall();
    r->last_loss = NAN;
    double next_eval = r->train_s + f->eval_every, next_print = 0;
    tma_status_t st = TMA_OK;
    /* Round 0: the weights training starts from (fresh, or --init's), at
     * t = 0, as a distributed job's round 0 (a resumed run has it). */
    if (!r->resumed) {
        if ((st = evaluate(r)) != TMA_OK)
            return st;
        if (!f->quiet && !r->tty)
            progress(r, 0);
    }
    while (!g_stop && (f->seen_steps ? r->steps < f->steps : r->train_s < f->seconds)) {
        double t0 = tma_clock_now();
        float loss;
        st = tma_gnn_trainer_step(r->tr, &loss);
        r->train_s += tma_clock_now() - t0;
        if (st != TMA_OK)
            return st;
        r->steps++;
        r->loss_sum += loss;
        r->loss_n++;
        r->last_loss = loss;
        if (r->train_s >= next_eval) {
            if ((st = evaluate(r)) != TMA_OK)
                return st;
            next_eval = r->train_s + f->eval_every;
            if (!f->quiet && !r->tty)
                progress(r, 0);
        }
        if (!f->quiet && r->tty && r->train_s >= next_print) {
            progress(r, 0);
            next_print = r->train_s + 0.5;
        }
    }
    if (g_stop && !f->quiet)
        fprintf(stderr, "\n[train] stopping on request after %lld steps\n", (long long)r->steps);
    if ((r->evals == 0 || r->last_eval_step != r->steps) && (st = evaluate(r)) != TMA_OK)
        return st;
    if (!f->quiet)
        progress(r, 1);
    return TMA_OK;
}

/* Tests the best validated weights and writes result.json. */
static tma_status_t train_finish(train_run_t *r)
{
    const train_flags_t *f = r->f;
    float *best = NULL;
    int64_t n = 0;
    tma_gnn_metrics_t test;
    tma_status_t st = tma_gnn_weights_read(r->best_path, &r->cfg, NULL, &best, &n, NULL);
    if (st != TMA_OK)
        return st;
    st = tma_gnn_evaluator_metrics(r->ev, best, TMA_GNN_SPLIT_TEST, &test);
    free(best);
    if (st != TMA_OK)
        return st;
    const double test_mrr = test.mrr;
    /* The graph's absolute path, so `tma export RUN` finds it from anywhere. */
    tma_job_run_result_t res = {"centralized", NULL, r->graph_abs, r->g->graph_id, r->started, 1, 1.0,
                                test_mrr, r->best_round, r->best_val, r->best_at, r->train_s, r->round,
                                g_stop ? "interrupted" : f->seen_steps ? "steps" : "time", r->best_path};
    tma_gnn_timing_t tm;
    tma_gnn_trainer_timing(r->tr, &tm);
    double b = tm.batches ? (double)tm.batches : 1;
    cJSON *x = cJSON_CreateObject();
    cJSON *t = x ? cJSON_AddObjectToObject(x, "step_seconds") : NULL;
    if (!t) {
        cJSON_Delete(x);
        return TMA_ERR_NOMEM;
    }
    cJSON_AddNumberToObject(x, "best_step", (double)r->best_step);
    cJSON_AddNumberToObject(x, "steps", (double)r->steps);
    cJSON_AddNumberToObject(x, "edges_per_second",
                            r->train_s > 0 ? (double)r->steps * r->cfg.batch_size / r->train_s : 0);
    cJSON_AddStringToObject(x, "encoder", tma_gnn_encoder_name(r->cfg.encoder));
    cJSON_AddNumberToObject(t, "sample", tm.sample / b);
    cJSON_AddNumberToObject(t, "forward", tm.forward / b);
    cJSON_AddNumberToObject(t, "backward", tm.backward / b);
    cJSON_AddNumberToObject(t, "optimizer", tm.optimizer / b);
    tma_gnn_metrics_json(&test, "test_", x);
    st = tma_job_run_write_result(r->run_dir, &res, x, NULL);
    if (st != TMA_OK)
        return st;
    if (!f->quiet)
    {
        fprintf(stderr, "[train] test MRR %.4f (ties %s", test_mrr, tma_gnn_ties_name(test.ties));
        for (int k = 0; k < test.num_hits; k++)
            fprintf(stderr, ", hits@%d %.4f", test.hits_k[k], test.hits[k]);
        if (isfinite(test.auc))
            fprintf(stderr, ", auc %.4f", test.auc);
        fprintf(stderr, "; best validation MRR %.4f at %.1fs, step %lld); results in %s\n", r->best_val, r->best_at,
                (long long)r->best_step, r->run_dir);
    }
    if (!f->json) {
        printf("test_mrr %.6f\n", test_mrr);
        return TMA_OK;
    }
    char *path = tma_job_run_path(r->run_dir, "result.json");
    st = path && cli_print_file(path) == CLI_EXIT_OK ? TMA_OK : TMA_ERR_IO;
    free(path);
    return st;
}

int cli_cmd_train(int argc, char **argv)
{
    tma_job_run_private_files();
    train_flags_t f;
    memset(&f, 0, sizeof f);
    int rc = train_parse(&f, argc, argv);
    if (rc != CLI_GO_ON)
        return rc;
    train_run_t r;
    memset(&r, 0, sizeof r);
    r.f = &f;
    r.tty = isatty(2) && !f.quiet;
    r.printed_step = -1;
    r.round = -1;
    if (f.resume)
        rc = train_resume_state(&f, &r);
    else
        rc = train_config(&f, &r.cfg);
    if (rc != CLI_EXIT_OK && rc != CLI_GO_ON)
        goto out;
    cli_install_stop_handler(&g_stop);
    tma_status_t st = train_open(&r);
    if (st == TMA_OK)
        st = train_loop(&r);
    if (st == TMA_OK)
        st = train_finish(&r);
    /* A refused config was named where it was found (a folder that holds
     * a run, a key): "bad configuration" after it would add nothing. */
    if (st != TMA_OK && st != TMA_ERR_CONFIG)
        fprintf(stderr, "tma train: failed: %s\n", tma_status_str(st));
    rc = cli_exit_code(st, &g_stop);
out:
    free(r.params);
    free(r.opt.adam_m);
    free(r.opt.adam_v);
    cJSON_Delete(r.resumed);
    free(r.resume_config);
    free(r.graph_abs);
    free(r.best_path);
    free(r.last_path);
    free(r.opt_path);
    free(r.metrics_path);
    tma_tfevents_close(r.tb);
    free(r.run_dir);
    tma_gnn_evaluator_destroy(r.ev);
    tma_gnn_trainer_destroy(r.tr);
    tma_graph_destroy(r.g);
    return rc;
}
