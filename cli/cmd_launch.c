/*
 * cmd_launch.c: `tma launch job.json`: a whole distributed job on this
 * machine.  It prepares the graph (tma import / tma gen) and the partition
 * (tma partition) when the config asks for them, starts a private etcd on
 * free loopback ports (or uses --etcd), the coordinator and the workers as
 * child processes (logs in RUN/logs/), shows progress from the run folder,
 * and on Ctrl-C or SIGTERM stops them in order (the coordinator first, so it
 * still tests the best round and writes result.json).  Children die with the
 * launcher even if it is SIGKILLed (PR_SET_PDEATHSIG).
 */
#include "cli_int.h"
#include "tma_fault.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COMP "launch"

static volatile sig_atomic_t g_stop;

static char *self_exe(void)
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    return strdup(buf);
}

/* Runs a tma subcommand to completion with the terminal as its output. */
static int run_step(const char *exe, char **argv)
{
    cli_proc_t p;
    argv[0] = (char *)exe;
    if (cli_proc_spawn(&p, argv[1], argv, NULL) != TMA_OK)
        return -1;
    while (cli_proc_poll(&p)) {
        if (g_stop) {
            cli_proc_stop(&p, 5.0);
            return -1;
        }
        tma_sleep(0.05);
    }
    return cli_proc_exit_code(&p);
}

/* Turns {"nodes": 5000, "avg_degree": 10} into "--nodes 5000 --avg-degree 10". */
static int json_to_flags(const cJSON *obj, const char *skip, char **argv, int n, int cap, char *store, size_t store_cap)
{
    size_t used = 0;
    for (const cJSON *it = obj ? obj->child : NULL; it; it = it->next) {
        if (skip && strcmp(it->string, skip) == 0)
            continue;
        if (n + 2 >= cap)
            return -1;
        char *flag = store + used;
        int w = snprintf(flag, store_cap - used, "--%s", it->string);
        if (w < 0 || (size_t)w >= store_cap - used)
            return -1;
        for (char *p = flag; *p; p++)
            if (*p == '_')
                *p = '-';
        used += (size_t)w + 1;
        char *val = store + used;
        if (cJSON_IsNumber(it))
            w = snprintf(val, store_cap - used, "%.17g", it->valuedouble);
        else if (cJSON_IsString(it))
            w = snprintf(val, store_cap - used, "%s", it->valuestring);
        else
            return -2;
        if (w < 0 || (size_t)w >= store_cap - used)
            return -1;
        used += (size_t)w + 1;
        argv[n++] = flag;
        argv[n++] = val;
    }
    return n;
}

/* ------------------------------------------------------------------ progress */

typedef struct progress {
    char *metrics_path;
    long offset;
    double best;
    int64_t last_round;
    double total_s;
    int64_t total_rounds;
} progress_t;

static void show_progress(progress_t *pr, int workers)
{
    FILE *f = fopen(pr->metrics_path, "r");
    if (!f)
        return;
    if (fseek(f, pr->offset, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    char line[65536];
    while (fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n')
            break; /* a line still being written */
        pr->offset += (long)len;
        cJSON *o = cJSON_Parse(line);
        if (!o)
            continue;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "round");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "time");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "val_mrr");
        const cJSON *ws = cJSON_GetObjectItemCaseSensitive(o, "workers");
        const cJSON *alive = cJSON_GetObjectItemCaseSensitive(o, "alive");
        const cJSON *missed = cJSON_GetObjectItemCaseSensitive(o, "missed");
        char sps[256] = "";
        size_t off = 0;
        for (const cJSON *w = ws ? ws->child : NULL; w && off < sizeof sps - 20; w = w->next) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(w, "id");
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(w, "steps_per_s");
            if (cJSON_IsNumber(id) && cJSON_IsNumber(s))
                off += (size_t)snprintf(sps + off, sizeof sps - off, " %d:%.1f", (int)id->valuedouble, s->valuedouble);
        }
        double val = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        if (isfinite(val) && val > pr->best)
            pr->best = val;
        char vs[32];
        if (isfinite(val))
            snprintf(vs, sizeof vs, "%.4f", val);
        else
            snprintf(vs, sizeof vs, "(skipped)");
        int nmissed = cJSON_GetArraySize(missed);
        char when[48];
        if (pr->total_s > 0)
            snprintf(when, sizeof when, "%5.1f/%.1f min", cJSON_IsNumber(t) ? t->valuedouble / 60.0 : 0.0,
                     pr->total_s / 60.0);
        else
            snprintf(when, sizeof when, "%5.1f min, %lld rounds", cJSON_IsNumber(t) ? t->valuedouble / 60.0 : 0.0,
                     (long long)pr->total_rounds);
        printf("round %3d | %s | alive %d/%d%s | steps/s%s | val MRR %s (best %.4f)\n",
               cJSON_IsNumber(r) ? (int)r->valuedouble : -1, when, cJSON_GetArraySize(alive), workers,
               nmissed ? " (a worker missed the round)" : "", sps[0] ? sps : " -", vs, pr->best > 0 ? pr->best : 0.0);
        fflush(stdout);
        cJSON_Delete(o);
    }
    fclose(f);
}

static void print_result(const char *run_dir)
{
    char *path = tma_path_join(run_dir, "result.json");
    cJSON *r = NULL;
    if (!path || tma_json_load_file(path, &r) != TMA_OK) {
        free(path);
        return;
    }
    const cJSON *test = cJSON_GetObjectItemCaseSensitive(r, "test_mrr");
    const cJSON *val = cJSON_GetObjectItemCaseSensitive(r, "best_val_mrr");
    const cJSON *br = cJSON_GetObjectItemCaseSensitive(r, "best_round");
    const cJSON *conv = cJSON_GetObjectItemCaseSensitive(r, "convergence_seconds");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(r, "train_seconds");
    printf("\n");
    if (cJSON_IsNumber(test))
        printf("test MRR            %.4f\n", test->valuedouble);
    else
        printf("test MRR            n/a (no evaluated round)\n");
    if (cJSON_IsNumber(val) && cJSON_IsNumber(br))
        printf("best validation MRR %.4f (round %d)\n", val->valuedouble, (int)br->valuedouble);
    if (cJSON_IsNumber(conv))
        printf("convergence         %.1f s (within 1%% of the best validation MRR)\n", conv->valuedouble);
    if (cJSON_IsNumber(tr))
        printf("training time       %.1f s\n", tr->valuedouble);
    printf("run folder          %s (result.json, metrics.jsonl, best.tmaw, mrr.svg, logs/)\n", run_dir);
    cJSON_Delete(r);
    free(path);
}

/* ------------------------------------------------------------------ the command */

int cli_cmd_launch(int argc, char **argv)
{
    const char *out = NULL, *etcd_url = NULL;
    int keep = 0, quiet = 0;
    int64_t workers = 0, backups = 0, threads = 0;
    double seconds = 0;
    const cli_opt_t opts[] = {
        {"output", 'o', CLI_STR, &out, "RUN", "the run folder (default runs/JOB-DATE-TIME)", NULL},
        {"etcd", 0, CLI_STR, &etcd_url, "URLS", "use this etcd instead of starting a private one", NULL},
        {"keep", 0, CLI_FLAG, &keep, NULL, "keep the private etcd's data folder (RUN/etcd)", NULL},
        {"workers", 0, CLI_INT, &workers, "M", "override the config's number of workers", NULL},
        {"backups", 0, CLI_INT, &backups, "B", "also start B backup workers (tma worker --backup)", NULL},
        {"seconds", 0, CLI_DOUBLE, &seconds, "T", "override the training time (duration.train_seconds)", NULL},
        {"threads", 0, CLI_INT, &threads, "N", "compute threads per process (default: the cores shared out)", NULL},
        {"quiet", 'q', CLI_FLAG, &quiet, NULL, "no progress lines", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {"launch", "job.json [-o RUN] [options]",
                             "Runs a whole distributed job on this machine: prepares the graph and partition the "
                             "config asks for, starts a private etcd on loopback (unless --etcd), the coordinator "
                             "and the workers, shows progress, and collects the results in the run folder. Ctrl-C "
                             "stops the job cleanly: the best round is still tested and result.json written.",
                             opts, 1, 1};
    char *pos[CLI_MAX_POS];
    int npos;
    int pr = cli_parse(&spec, argc, argv, pos, &npos);
    if (pr != CLI_PARSE_OK)
        return pr == CLI_PARSE_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (workers < 0 || workers > TMA_JOB_MAX_WORKERS)
        return cli_usage_error("launch", "--workers: expected 1..%d", TMA_JOB_MAX_WORKERS);
    if (backups < 0 || backups > 64)
        return cli_usage_error("launch", "--backups: expected 0..64");
    if (threads < 0 || threads > 1024)
        return cli_usage_error("launch", "--threads: expected 0..1024");
    if (seconds < 0)
        return cli_usage_error("launch", "--seconds: expected a positive number");

    tma_job_t *job;
    if (tma_job_load(pos[0], &job) != TMA_OK)
        return CLI_EXIT_RUNTIME;
    if (workers > 0) {
        job->workers = (int)workers;
        if (job->variant != TMA_VARIANT_GGS && job->shards < job->workers)
            job->shards = job->workers;
    }
    if (seconds > 0)
        job->train_s = seconds;
    int rc = CLI_EXIT_RUNTIME;
    char *exe = self_exe();
    char *run_dir = NULL, *logs = NULL, *graph_path = NULL, *part_dir = NULL, *job_path = NULL, *etcd_dir = NULL;
    cli_etcd_t etcd;
    memset(&etcd, 0, sizeof etcd);
    int etcd_started = 0;
    cli_proc_t *procs = NULL;
    int nprocs = 0;
    cli_install_stop_handler(&g_stop);
    if (!exe)
        goto out;

    /* The run folder. */
    if (out) {
        run_dir = strdup(out);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        run_dir = tma_strdup_printf("runs/%s-%s", job->name, stamp);
    }
    if (!run_dir || tma_mkdir_p(run_dir) != TMA_OK)
        goto out;
    {
        char *abs = realpath(run_dir, NULL);
        if (abs) {
            free(run_dir);
            run_dir = abs;
        }
    }
    logs = tma_path_join(run_dir, "logs");
    if (!logs || tma_mkdir_p(logs) != TMA_OK)
        goto out;
    printf("tma launch: job %s (%s, %d worker%s), run folder %s\n", job->name, tma_variant_name(job->variant),
           job->workers, job->workers == 1 ? "" : "s", run_dir);
    fflush(stdout);

    /* The graph. */
    if (job->source != TMA_SOURCE_GRAPH) {
        graph_path = tma_path_join(run_dir, "graph.tmag");
        char store[8192];
        char *av[160];
        int n = 0;
        av[n++] = NULL;
        if (job->source == TMA_SOURCE_DATASET) {
            av[n++] = "import";
            av[n++] = job->dataset;
            n = json_to_flags(job->import_opts, NULL, av, n, 150, store, sizeof store);
        } else {
            const cJSON *kind = cJSON_GetObjectItemCaseSensitive(job->generate, "kind");
            if (!cJSON_IsString(kind)) {
                tma_log_error(COMP, "%s: generate.kind must be \"sbm\" or \"rmat\"", pos[0]);
                goto out;
            }
            av[n++] = "gen";
            av[n++] = kind->valuestring;
            n = json_to_flags(job->generate, "kind", av, n, 150, store, sizeof store);
        }
        if (n < 0) {
            tma_log_error(COMP, "%s: the %s options must be numbers or strings", pos[0],
                          job->source == TMA_SOURCE_DATASET ? "import" : "generate");
            goto out;
        }
        av[n++] = "-o";
        av[n++] = graph_path;
        av[n] = NULL;
        printf("preparing the graph: tma %s %s ...\n", av[1], av[2]);
        fflush(stdout);
        int code = run_step(exe, av);
        if (code != 0) {
            tma_log_error(COMP, "preparing the graph failed (the error above names the option; in the job config "
                                "it is the key of the same name in \"%s\")",
                          job->source == TMA_SOURCE_DATASET ? "import" : "generate");
            goto out;
        }
        free(job->graph);
        job->graph = strdup(graph_path);
        job->source = TMA_SOURCE_GRAPH;
    }
    /* The partition. */
    if (job->variant != TMA_VARIANT_GGS && !job->partition_dir) {
        part_dir = tma_path_join(run_dir, "partition");
        tma_graph_t *g;
        if (tma_graph_open(job->graph, TMA_GRAPH_OPEN_NO_VERIFY, &g) != TMA_OK)
            goto out;
        int64_t nodes = g->num_nodes;
        tma_graph_destroy(g);
        char scheme[64], shards[32], seed[32];
        if (job->partition_scheme[0])
            snprintf(scheme, sizeof scheme, "%s", job->partition_scheme);
        else
            tma_job_default_scheme(job->variant, job->shards, nodes, scheme, sizeof scheme);
        snprintf(shards, sizeof shards, "%d", job->shards);
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)job->partition_seed);
        char *av[] = {NULL, "partition", job->graph, "--scheme", scheme, "--shards", shards, "--seed", seed,
                      "-o", part_dir, NULL};
        printf("partitioning: tma partition --scheme %s --shards %s\n", scheme, shards);
        fflush(stdout);
        if (run_step(exe, av) != 0) {
            tma_log_error(COMP, "partitioning failed");
            goto out;
        }
        job->partition_dir = strdup(part_dir);
    }
    tma_job_ensure_token(job);
    if (strcmp(job->host, "auto") == 0 && !etcd_url)
        snprintf(job->host, sizeof job->host, "127.0.0.1");
    if (tma_job_check_files(job) != TMA_OK)
        goto out;
    job_path = tma_path_join(run_dir, "job.json");
    {
        cJSON *j = tma_job_to_json(job);
        tma_status_t st = j ? tma_json_write_file(job_path, j) : TMA_ERR_NOMEM;
        cJSON_Delete(j);
        if (st != TMA_OK)
            goto out;
    }

    /* etcd. */
    const char *url = etcd_url;
    if (!url) {
        etcd_dir = tma_path_join(run_dir, "etcd");
        char *elog = tma_path_join(logs, "etcd.log");
        tma_remove_tree(etcd_dir);
        tma_status_t st = elog ? cli_etcd_start(&etcd, etcd_dir, elog) : TMA_ERR_NOMEM;
        free(elog);
        if (st != TMA_OK)
            goto out;
        etcd_started = 1;
        url = etcd.client_url;
    }

    /* Threads: share out the CPUs this process may use unless told. */
    long ncpu = tma_cpus_usable();
    int per = threads > 0 ? (int)threads : (job->model.threads > 0 ? job->model.threads : (int)TMA_MAX(1, ncpu / job->workers));
    char per_s[16];
    snprintf(per_s, sizeof per_s, "%d", per);
    setenv("OMP_WAIT_POLICY", getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "PASSIVE", 1);

    /* Absent shards (the F >= 1 drill) have no trainer: start the others. */
    int nworkers = job->workers - job->n_absent;
    int total = 1 + nworkers + (int)backups;
    procs = calloc((size_t)total, sizeof *procs);
    if (!procs)
        goto out;
    {
        char *clog = tma_path_join(logs, "coordinator.log");
        char *av[] = {exe, "coordinator", "--etcd", (char *)url, "--job", job->name, "--config", job_path,
                      "--run-dir", run_dir, "--fresh", "--eval-threads", per_s, NULL};
        tma_status_t st = clog ? cli_proc_spawn(&procs[0], "coordinator", av, clog) : TMA_ERR_NOMEM;
        free(clog);
        if (st != TMA_OK)
            goto out;
        nprocs = 1;
    }
    for (int i = 0; i < nworkers + (int)backups; i++) {
        int is_backup = i >= nworkers;
        char name[32], lname[48];
        snprintf(name, sizeof name, "%s-%d", is_backup ? "backup" : "worker", is_backup ? i - nworkers : i);
        snprintf(lname, sizeof lname, "%s.log", name);
        char *wlog = tma_path_join(logs, lname);
        char *av[16];
        int n = 0;
        av[n++] = exe;
        av[n++] = "worker";
        av[n++] = "--etcd";
        av[n++] = (char *)url;
        av[n++] = "--job";
        av[n++] = job->name;
        av[n++] = "--name";
        av[n++] = name;
        av[n++] = "--threads";
        av[n++] = per_s;
        av[n++] = "--wait";
        av[n++] = "120";
        if (is_backup)
            av[n++] = "--backup";
        av[n] = NULL;
        tma_status_t st = wlog ? cli_proc_spawn(&procs[nprocs], name, av, wlog) : TMA_ERR_NOMEM;
        free(wlog);
        if (st != TMA_OK)
            goto stop_all;
        nprocs++;
    }
    printf("started etcd (%s), the coordinator and %d worker(s)%s; logs in %s\n", url, nworkers,
           backups ? " plus backups" : "", logs);
    if (job->train_s > 0)
        printf("training for %.0f s", job->train_s);
    else
        printf("training for %lld rounds", (long long)job->rounds);
    if (job->interval_steps > 0)
        printf(", aggregating every %lld steps\n", (long long)job->interval_steps);
    else
        printf(", aggregating every %.0f s\n", job->interval_s);
    fflush(stdout);

    progress_t prog;
    memset(&prog, 0, sizeof prog);
    prog.metrics_path = tma_path_join(run_dir, "metrics.jsonl");
    prog.total_s = job->train_s;
    prog.total_rounds = job->rounds;
    int interrupted = 0;
    while (cli_proc_poll(&procs[0])) {
        if (g_stop && !interrupted) {
            interrupted = 1;
            printf("stopping: the coordinator finishes the evaluation and writes the result ...\n");
            fflush(stdout);
            cli_proc_signal(&procs[0], SIGTERM);
        }
        for (int i = 1; i < nprocs; i++) {
            if (procs[i].running && !cli_proc_poll(&procs[i]) && cli_proc_exit_code(&procs[i]) != 0)
                printf("%s exited (code %d; see its log); the coordinator applies fault.on_failure\n",
                       procs[i].name, cli_proc_exit_code(&procs[i]));
        }
        if (!quiet && prog.metrics_path)
            show_progress(&prog, job->workers);
        if (etcd_started && !cli_proc_poll(&etcd.proc)) {
            tma_log_error(COMP, "the private etcd exited (code %d); see %s/etcd.log", cli_proc_exit_code(&etcd.proc),
                          logs);
            break;
        }
        tma_sleep(0.2);
    }
    if (!quiet && prog.metrics_path)
        show_progress(&prog, job->workers);
    free(prog.metrics_path);
    if (procs[0].running)
        cli_proc_stop(&procs[0], 30.0);
    /* Workers leave on `stop`; give them a moment, then make sure. */
    double end = tma_clock_now() + 15.0;
    for (int i = 1; i < nprocs; i++)
        while (cli_proc_poll(&procs[i]) && tma_clock_now() < end)
            tma_sleep(0.05);
stop_all:
    for (int i = nprocs - 1; i >= 0; i--)
        cli_proc_stop(&procs[i], 5.0);
    {
        char *res = tma_path_join(run_dir, "result.json");
        int have = res && tma_file_exists(res);
        free(res);
        if (have && nprocs > 0 && cli_proc_exit_code(&procs[0]) == 0) {
            print_result(run_dir);
            rc = g_stop ? CLI_EXIT_RUNTIME : CLI_EXIT_OK;
            if (g_stop)
                printf("(interrupted: the result covers the training done until then)\n");
        } else {
            tma_log_error(COMP, "the job did not finish; see %s/coordinator.log", logs);
        }
    }
out:
    for (int i = nprocs - 1; i >= 0; i--)
        cli_proc_stop(&procs[i], 5.0);
    if (etcd_started)
        cli_etcd_stop(&etcd, keep);
    free(procs);
    free(exe);
    free(run_dir);
    free(logs);
    free(graph_path);
    free(part_dir);
    free(job_path);
    free(etcd_dir);
    tma_job_destroy(job);
    return rc;
}
