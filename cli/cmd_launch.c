/*
 * cmd_launch.c: `tma launch job.json`: a whole distributed job on this
 * machine, in four phases: prepare the graph (tma import / tma gen) and the
 * partition (tma partition) when the config asks for them, spawn the roles
 * (a private etcd on unix sockets in RUN/etcd unless --etcd, the coordinator and
 * the workers, logs in RUN/logs/), and supervise them: progress from the
 * run folder, and on Ctrl-C or SIGTERM an orderly stop (the coordinator
 * first, so it still tests the best round and writes result.json).
 * Children die with the launcher even if it is SIGKILLed (PR_SET_PDEATHSIG).
 * A job that does not finish keeps its private etcd's data, from which
 * --resume RUN continues it (the coordinator takes it over from `state`;
 * launch_resume.c checks the run folder).
 */
#include "cli_int.h"
#include "tma_fault.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COMP "launch"

static volatile sig_atomic_t g_stop;

/* One launch: the flags, the job, and what the phases acquired (released
 * by launch_close in reverse order). */
typedef struct launch {
    /* flags */
    const char *config_path, *out;
    cli_etcd_flags_t ef; /* --etcd and its TLS/auth flags (an external etcd) */
    int keep, quiet, json, force;
    int64_t workers, backups, threads;
    double seconds;
    const char *metrics_listen; /* --metrics-listen ADDR:PORT (metrics.listen) */
    const char *resume;         /* --resume RUN: continue the run there */
    /* the job and the run folder */
    tma_job_t *job;
    char *exe, *run_dir, *logs, *job_path;
    int made_run_dir; /* the run folder did not exist before: removed again if the job is refused */
    int refused;      /* the coordinator refused the job (exit 2) before its first round */
    FILE *say; /* the human lines: stdout, or stderr under --json */
    /* the roles */
    cli_etcd_t etcd;
    int etcd_started;
    const char *url; /* etcd client URLs the roles use */
    char threads_s[16];
    cli_proc_t *procs; /* [0] the coordinator, then workers and backups */
    int nprocs;
} launch_t;

static char *self_exe(void)
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    return strdup(buf);
}

/* Runs a tma subcommand to completion with the launcher's output as its own
 * (stderr under --json, so stdout holds only the result):
 * TMA_ERR_CONFIG when it refused its flags (exit 2: they come from the
 * config), TMA_ERR_CANCELLED when stopped, TMA_ERR_IO for other failures. */
static tma_status_t run_step(const launch_t *L, char **argv)
{
    cli_proc_t p;
    argv[0] = L->exe;
    if (cli_proc_spawn(&p, argv[1], argv, L->json ? "/dev/stderr" : NULL) != TMA_OK)
        return TMA_ERR_IO;
    while (cli_proc_poll(&p)) {
        if (g_stop) {
            cli_proc_stop(&p, 5.0);
            return TMA_ERR_CANCELLED;
        }
        tma_sleep(0.05);
    }
    int code = cli_proc_exit_code(&p);
    return code == CLI_EXIT_OK ? TMA_OK : code == CLI_EXIT_USAGE ? TMA_ERR_CONFIG : TMA_ERR_IO;
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

/* The metrics lines written since the last call, one progress line each. */
typedef struct progress {
    char *metrics_path;
    long offset;
    double best;
    tma_job_run_budget_t budget;
    FILE *out;
    int64_t shown; /* the last round shown */
    ino_t ino;     /* the file read: one a coordinator rewrote (a takeover) is read again from its start */
} progress_t;

static void show_progress(progress_t *pr)
{
    FILE *f = fopen(pr->metrics_path, "r");
    if (!f)
        return;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && sb.st_ino != pr->ino) {
        pr->ino = sb.st_ino;
        pr->offset = 0;
    }
    if (fseek(f, pr->offset, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    char line[65536], out[512];
    while (fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n')
            break; /* a line still being written */
        pr->offset += (long)len;
        cJSON *o = cJSON_Parse(line);
        if (!o)
            continue;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "round");
        const int64_t round = cJSON_IsNumber(r) ? (int64_t)r->valuedouble : pr->shown + 1;
        tma_job_run_progress_line(o, &pr->budget, &pr->best, out, sizeof out); /* every line: the best so far */
        if (round > pr->shown) {
            fprintf(pr->out, "%s\n", out);
            fflush(pr->out);
            pr->shown = round;
        }
        cJSON_Delete(o);
    }
    fclose(f);
}

static void print_result(FILE *out, const char *run_dir)
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
    const cJSON *ties = cJSON_GetObjectItemCaseSensitive(r, "ties");
    fprintf(out, "\n");
    if (cJSON_IsNumber(test))
        fprintf(out, "test MRR            %.4f (ties %s)\n", test->valuedouble,
                cJSON_IsString(ties) ? ties->valuestring : "pessimistic");
    else
        fprintf(out, "test MRR            n/a (no evaluated round)\n");
    if (cJSON_IsNumber(val) && cJSON_IsNumber(br))
        fprintf(out, "best validation MRR %.4f (round %d)\n", val->valuedouble, (int)br->valuedouble);
    if (cJSON_IsNumber(conv))
        fprintf(out, "convergence         %.1f s (within 1%% of the best validation MRR)\n", conv->valuedouble);
    if (cJSON_IsNumber(tr))
        fprintf(out, "training time       %.1f s\n", tr->valuedouble);
    fprintf(out, "run folder          %s (result.json, metrics.jsonl, best.tmaw, mrr.svg, logs/)\n", run_dir);
    cJSON_Delete(r);
    free(path);
}

/* ------------------------------------------------------------------ the phases */

/* The flags (table-driven) and the job config they override.  Returns
 * CLI_EXIT_OK with L->job set, or the exit code to end with (help: 0). */
static int launch_parse(launch_t *L, int argc, char **argv)
{
    const cli_opt_t opts[] = {
        {"output", 'o', CLI_STR, &L->out, "RUN", "the run folder (default runs/JOB-DATE-TIME); one that holds a run is refused",
         NULL},
        {"force", 0, CLI_FLAG, &L->force, NULL, "replace the run in an -o folder that holds one", NULL},
        {"etcd", 0, CLI_STR, &L->ef.endpoints, "URLS",
         "use this etcd instead of starting a private one (http://, https:// or unix:///PATH)", NULL},
        CLI_ETCD_SECURE_OPTS(L->ef),
        {"keep", 0, CLI_FLAG, &L->keep, NULL, "keep the private etcd's data folder (RUN/etcd)", NULL},
        {"workers", 0, CLI_INT, &L->workers, "M", "override the config's number of workers", NULL},
        {"backups", 0, CLI_INT, &L->backups, "B", "also start B backup workers (tma worker --backup)", NULL},
        {"seconds", 0, CLI_DOUBLE, &L->seconds, "T", "override the training time (duration.train_seconds)", NULL},
        {"metrics-listen", 0, CLI_STR, &L->metrics_listen, "ADDR:PORT",
         "serve Prometheus metrics at http://ADDR:PORT/metrics from the coordinator (metrics.listen)", NULL},
        {"resume", 0, CLI_STR, &L->resume, "RUN",
         "continue the run in RUN that was interrupted or killed, from its last committed round, into RUN "
         "(job.json may be left out; given, it must be the run's config)",
         NULL},
        {"threads", 0, CLI_INT, &L->threads, "N", "compute threads per process (default: the cores shared out)", NULL},
        {"quiet", 'q', CLI_FLAG, &L->quiet, NULL, "no progress lines", NULL},
        {"json", 0, CLI_FLAG, &L->json, NULL, "print result.json on stdout (the progress lines go to stderr)", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {"launch", "job.json [-o RUN] [options] | [job.json] --resume RUN [options]",
                             "Runs a whole distributed job on this machine: prepares the graph and partition the "
                             "config asks for, starts a private etcd only this user can reach (unless --etcd), the "
                             "coordinator and the workers, shows progress, and collects the results in the run "
                             "folder. Ctrl-C "
                             "stops the job cleanly: the best round is still tested and result.json written; "
                             "--resume RUN continues it later.",
                             opts, 0, 1};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;
    if (L->workers < 0 || L->workers > TMA_JOB_MAX_WORKERS)
        return cli_usage_error("launch", "--workers: expected 1..%d", TMA_JOB_MAX_WORKERS);
    if (L->backups < 0 || L->backups > 64)
        return cli_usage_error("launch", "--backups: expected 0..64");
    if (cli_check_threads("launch", "--threads", L->threads) != CLI_EXIT_OK)
        return CLI_EXIT_USAGE;
    if (L->seconds < 0)
        return cli_usage_error("launch", "--seconds: expected a positive number");
    struct sockaddr_storage sa;
    unsigned salen;
    if (L->metrics_listen && (strlen(L->metrics_listen) >= sizeof L->job->metrics_listen ||
                              tma_job_listen_parse(L->metrics_listen, &sa, &salen) != TMA_OK))
        return cli_usage_error("launch", "--metrics-listen: expected ADDR:PORT with a numeric address and a port "
                                         "1..65535, such as 127.0.0.1:9464");
    if (!args.npos && !L->resume)
        return cli_usage_error("launch", "expected the job config job.json (or --resume RUN)");
    /* A resumed run is the job that ran: only what does not change it may be given again. */
    const struct {
        int given;
        const char *flag;
    } fixed[] = {{!!L->out, "-o"}, {L->force, "--force"}, {L->workers > 0, "--workers"},
                 {L->seconds > 0, "--seconds"}, {!!L->metrics_listen, "--metrics-listen"}};
    for (size_t i = 0; L->resume && i < TMA_ARRAY_LEN(fixed); i++)
        if (fixed[i].given)
            return cli_usage_error("launch", "--resume continues the run in %s as it was launched: drop %s",
                                   L->resume, fixed[i].flag);
    int rc = cli_etcd_check_external("launch", &L->ef);
    if (rc != CLI_EXIT_OK)
        return rc;
    L->config_path = args.npos ? args.pos[0] : NULL;
    L->say = L->json ? stderr : stdout;
    if (L->resume)
        return cli_launch_resume_job(L->resume, L->config_path, &L->job);
    if (L->out && !L->force && tma_job_run_holds_run(L->out)) {
        fprintf(stderr, "tma launch: %s already holds a run (result.json, metrics.jsonl or best.tmaw); choose another "
                        "-o, --force to replace it, or --resume it\n", L->out);
        return CLI_EXIT_USAGE;
    }
    tma_status_t st = tma_job_load(L->config_path, &L->job);
    if (st != TMA_OK)
        return st == TMA_ERR_NOMEM ? CLI_EXIT_RUNTIME : CLI_EXIT_USAGE; /* the error named the file or key */
    tma_job_t *job = L->job;
    /* A graph the config names must be there before a run folder is made
     * (exit 1, as every command answers a missing graph). */
    if (job->source == TMA_SOURCE_GRAPH && job->graph && access(job->graph, R_OK) != 0) {
        fprintf(stderr, "tma launch: cannot read the graph %s (\"graph\" in %s): %s\n", job->graph, L->config_path,
                strerror(errno));
        return CLI_EXIT_RUNTIME;
    }
    if (job->init && access(job->init, R_OK) != 0) {
        fprintf(stderr, "tma launch: cannot read the weights %s (\"init\" in %s): %s\n", job->init, L->config_path,
                strerror(errno));
        return CLI_EXIT_RUNTIME;
    }
    if (L->workers > 0) {
        job->workers = (int)L->workers;
        if (job->variant != TMA_VARIANT_GGS && job->shards < job->workers)
            job->shards = job->workers;
    }
    if (L->seconds > 0)
        job->train_s = L->seconds;
    if (L->metrics_listen)
        snprintf(job->metrics_listen, sizeof job->metrics_listen, "%s", L->metrics_listen);
    return CLI_EXIT_OK;
}

/* The run folder (absolute, so the roles find it from any directory) and
 * its logs/. */
static tma_status_t launch_open_run(launch_t *L)
{
    if (L->resume) {
        L->run_dir = strdup(L->resume);
    } else if (L->out) {
        L->run_dir = strdup(L->out);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        L->run_dir = tma_strdup_printf("runs/%s-%s", L->job->name, stamp);
    }
    char *abs;
    if (!L->run_dir)
        return TMA_ERR_NOMEM;
    struct stat sb;
    L->made_run_dir = stat(L->run_dir, &sb) != 0;
    if (tma_job_run_make_dir(L->run_dir, &abs) != TMA_OK)
        return TMA_ERR_IO;
    free(L->run_dir);
    L->run_dir = abs;
    if (L->force && tma_job_run_clear_results(L->run_dir) != TMA_OK)
        return TMA_ERR_IO;
    /* A new run continues no optimizer state of an old one in the folder. */
    char *states = L->resume ? NULL : tma_path_join(L->run_dir, "worker-state");
    if (states)
        tma_remove_tree(states);
    free(states);
    L->logs = tma_path_join(L->run_dir, "logs");
    if (!L->logs || tma_mkdir_p(L->logs) != TMA_OK)
        return TMA_ERR_IO;
    fprintf(L->say, "tma launch: %s job %s (%s, %d worker%s), run folder %s\n", L->resume ? "resuming" : "starting",
            L->job->name, tma_job_variant_name(L->job->variant), L->job->workers, L->job->workers == 1 ? "" : "s",
            L->run_dir);
    fflush(L->say);
    return TMA_OK;
}

/* Phase 1: the graph, by `tma import` or `tma gen` into RUN/graph.tmag when
 * the config names a dataset or a generator. */
static tma_status_t launch_prepare_graph(launch_t *L)
{
    tma_job_t *job = L->job;
    if (job->source == TMA_SOURCE_GRAPH)
        return TMA_OK;
    const char *section = job->source == TMA_SOURCE_DATASET ? "import" : "generate";
    char *graph_path = tma_path_join(L->run_dir, "graph.tmag");
    if (!graph_path)
        return TMA_ERR_NOMEM;
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
            tma_log_error(COMP, "%s: generate.kind must be \"sbm\" or \"rmat\"", L->config_path);
            free(graph_path);
            return TMA_ERR_CONFIG;
        }
        av[n++] = "gen";
        av[n++] = kind->valuestring;
        n = json_to_flags(job->generate, "kind", av, n, 150, store, sizeof store);
    }
    if (n < 0) {
        tma_log_error(COMP, "%s: the %s options must be numbers or strings", L->config_path, section);
        free(graph_path);
        return TMA_ERR_CONFIG;
    }
    av[n++] = "-o";
    av[n++] = graph_path;
    av[n] = NULL;
    fprintf(L->say, "preparing the graph: tma %s %s ...\n", av[1], av[2]);
    fflush(L->say);
    tma_status_t st = run_step(L, av);
    if (st != TMA_OK && st != TMA_ERR_CANCELLED) {
        tma_log_error(COMP, "preparing the graph failed (the error above names the option; in the job config "
                            "it is the key of the same name in \"%s\")", section);
        free(graph_path);
        return st;
    }
    free(job->graph);
    job->graph = graph_path;
    job->source = TMA_SOURCE_GRAPH;
    return TMA_OK;
}

/* Phase 2: the partition, by `tma partition` into RUN/partition when the
 * variant uses shards and the config names no partition folder. */
static tma_status_t launch_prepare_partition(launch_t *L)
{
    tma_job_t *job = L->job;
    if (!job->vd->uses_shards || job->partition_dir)
        return TMA_OK;
    tma_graph_t *g;
    tma_status_t st = tma_graph_open_header(job->graph, &g);
    if (st != TMA_OK)
        return st; /* logged, naming the file "graph" gives: exit 1, as every command for a missing graph */
    int64_t nodes = g->num_nodes;
    tma_graph_destroy(g);
    char scheme[64], shards[32], seed[32];
    if (job->partition_scheme[0])
        snprintf(scheme, sizeof scheme, "%s", job->partition_scheme);
    else
        tma_job_default_scheme(job->variant, job->shards, nodes, scheme, sizeof scheme);
    snprintf(shards, sizeof shards, "%d", job->shards);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)job->partition_seed);
    char *part_dir = tma_path_join(L->run_dir, "partition");
    if (!part_dir)
        return TMA_ERR_NOMEM;
    const char *cl = job->partition_clusterer[0] ? job->partition_clusterer : "auto";
    char *av[] = {NULL, "partition", job->graph, "--scheme", scheme, "--clusterer", (char *)cl, "--shards", shards,
                  "--seed", seed, "-o", part_dir, NULL};
    fprintf(L->say, "partitioning: tma partition --scheme %s --clusterer %s --shards %s\n", scheme, cl, shards);
    fflush(L->say);
    if ((st = run_step(L, av)) != TMA_OK) {
        if (st != TMA_ERR_CANCELLED)
            tma_log_error(COMP, "partitioning failed");
        free(part_dir);
        return st;
    }
    job->partition_dir = part_dir;
    return TMA_OK;
}

/* "init" must hold weights of the job's model on its graph, before any
 * role starts: another model is exit 2 naming the field that differs, a
 * missing or damaged file exit 1 naming it. */
static tma_status_t launch_check_init(const tma_job_t *job)
{
    tma_graph_t *g;
    tma_status_t st = tma_graph_open_header(job->graph, &g);
    if (st != TMA_OK)
        return st;
    tma_gnn_config_t cfg = job->model;
    float *w = NULL;
    st = tma_gnn_config_resolve(&cfg, g);
    if (st == TMA_OK)
        st = tma_job_init_weights(job, &cfg, &w);
    else if (st != TMA_ERR_NOMEM)
        st = TMA_ERR_CONFIG; /* logged: the model does not fit the graph */
    free(w);
    tma_graph_destroy(g);
    return st;
}

/* The resolved job, checked against its files, as RUN/job.json: what the
 * coordinator reads. */
static tma_status_t launch_write_job(launch_t *L)
{
    tma_job_t *job = L->job;
    /* The roles inherit the token in their environment, which only this
     * user can read (/proc/PID/environ is 0400); job.json shows "(hidden)". */
    tma_status_t st = tma_job_ensure_token(job);
    if (st != TMA_OK || setenv("TMA_JOB_TOKEN", job->token, 1) != 0)
        return st != TMA_OK ? st : TMA_ERR_NOMEM;
    if (strcmp(job->host, "auto") == 0 && !L->ef.endpoints)
        snprintf(job->host, sizeof job->host, "127.0.0.1");
    st = tma_job_check_files(job);
    if (st != TMA_OK)
        return st == TMA_ERR_NOMEM ? st : TMA_ERR_CONFIG; /* logged, naming the file or key */
    if (L->resume)
        return TMA_OK; /* its job.json stays; the coordinator reads the job from etcd */
    if (job->init && (st = launch_check_init(job)) != TMA_OK)
        return st;
    L->job_path = tma_path_join(L->run_dir, "job.json");
    cJSON *j = tma_job_to_json(job);
    st = j && L->job_path ? tma_json_write_file(L->job_path, j) : TMA_ERR_NOMEM;
    cJSON_Delete(j);
    return st;
}

/* The private etcd (unless --etcd): unix sockets and data in RUN/etcd (0700). */
static tma_status_t launch_start_etcd(launch_t *L)
{
    if (L->ef.endpoints) {
        L->url = L->ef.endpoints;
        return TMA_OK;
    }
    char *etcd_dir = tma_path_join(L->run_dir, "etcd");
    char *elog = tma_path_join(L->logs, "etcd.log");
    char *data = tma_path_join(L->run_dir, "etcd/data");
    tma_status_t st = etcd_dir && elog && data ? TMA_OK : TMA_ERR_NOMEM;
    if (st == TMA_OK && L->resume && !tma_dir_exists(data)) {
        /* The job's progress lives there: without it there is nothing to take over. */
        fprintf(stderr, "tma launch: %s: missing: the etcd that held the job's state is gone (a run launched "
                        "with --etcd resumes with the same --etcd)\n", data);
        st = TMA_ERR_CONFIG;
    }
    if (st == TMA_OK) {
        if (!L->resume)
            tma_remove_tree(etcd_dir);
        st = cli_etcd_start(&L->etcd, etcd_dir, elog);
    }
    free(data);
    free(elog);
    free(etcd_dir);
    if (st != TMA_OK)
        return st;
    L->etcd_started = 1;
    L->url = L->etcd.client_url;
    /* Where `tma status RUN` finds it (the sockets may be in /tmp when the
     * run folder's path is too long for one). */
    char *urlf = tma_path_join(L->run_dir, "etcd/client-url");
    if (!urlf || tma_file_write_atomic(urlf, L->url, strlen(L->url)) != TMA_OK)
        tma_log_warn("launch", "cannot record the private etcd's address in the run folder: tma status RUN "
                               "will not find it (use --etcd %s --job %s)", L->url, L->job->name);
    free(urlf);
    return TMA_OK;
}

/* Starts one role `tma ROLE --etcd URL ARGS...` with its log in RUN/logs/NAME.log. */
static tma_status_t launch_spawn(launch_t *L, const char *role, const char *name, char *const *args)
{
    char *av[32];
    int n = 0;
    av[n++] = L->exe;
    av[n++] = (char *)role;
    av[n++] = "--etcd";
    av[n++] = (char *)L->url;
    n = cli_etcd_flags_argv(&L->ef, av, n, 20);
    for (; *args && n < 31; args++)
        av[n++] = *args;
    av[n] = NULL;
    char lname[80];
    snprintf(lname, sizeof lname, "%s.log", name);
    char *log = tma_path_join(L->logs, lname);
    tma_status_t st = log ? cli_proc_spawn(&L->procs[L->nprocs], name, av, log) : TMA_ERR_NOMEM;
    free(log);
    if (st == TMA_OK)
        L->nprocs++;
    return st;
}

static void print_last_error(FILE *out, const char *logs, const char *name);

/* The roles' etcd as a client config: the private one, or --etcd's. */
static tma_status_t launch_kv_config(launch_t *L, tma_kv_config_t *kc)
{
    if (L->ef.endpoints)
        return cli_etcd_config("launch", &L->ef, kc) == CLI_EXIT_OK ? TMA_OK : TMA_ERR_CONFIG;
    tma_kv_config_init(kc);
    kc->endpoints = L->url;
    return TMA_OK;
}

/* Phase 3: the roles: etcd, the coordinator, the workers and backups.
 * Threads: the cores shared out unless told. */
static tma_status_t launch_spawn_roles(launch_t *L)
{
    tma_job_t *job = L->job;
    tma_status_t st = launch_start_etcd(L);
    if (st != TMA_OK)
        return st;
    /* Threads: share out the CPUs this process may use unless told. */
    long ncpu = tma_cpus_usable();
    int per = L->threads > 0 ? (int)L->threads
                             : (job->model.threads > 0 ? job->model.threads : (int)TMA_MAX(1, ncpu / job->workers));
    snprintf(L->threads_s, sizeof L->threads_s, "%d", per);
    setenv("OMP_WAIT_POLICY", getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "PASSIVE", 1);

    /* Absent shards (the F >= 1 drill) have no trainer: start the others. */
    int nworkers = job->workers - job->n_absent;
    int total = 1 + nworkers + (int)L->backups;
    L->procs = calloc((size_t)total, sizeof *L->procs);
    if (!L->procs)
        return TMA_ERR_NOMEM;
    char *cargs[] = {"--job", job->name, "--config", L->job_path, "--run-dir", L->run_dir, "--fresh",
                     "--eval-threads", L->threads_s, NULL};
    char *rargs[] = {"--job", job->name, "--run-dir", L->run_dir, "--resume", "--eval-threads", L->threads_s, NULL};
    tma_kv_config_t kc;
    uint64_t old = 0;
    if (L->resume && (st = launch_kv_config(L, &kc)) == TMA_OK)
        st = cli_launch_leader_epoch(&kc, job->name, &old);
    if (st == TMA_OK)
        st = launch_spawn(L, "coordinator", "coordinator", L->resume ? rargs : cargs);
    /* Resumed, the workers start once the coordinator leads: before, the
     * `stop` an interrupted run left still carries the leader's epoch. */
    if (st == TMA_OK && L->resume) {
        st = cli_launch_await_leader(&kc, job->name, old, &L->procs[0], &g_stop);
        if (st != TMA_OK && st != TMA_ERR_CANCELLED)
            print_last_error(stderr, L->logs, "coordinator"); /* it refused the job, or failed */
    }
    char *states = tma_path_join(L->run_dir, "worker-state");
    for (int i = 0; st == TMA_OK && i < nworkers + (int)L->backups; i++) {
        int is_backup = i >= nworkers;
        char name[32];
        snprintf(name, sizeof name, "%s-%d", is_backup ? "backup" : "worker", is_backup ? i - nworkers : i);
        char *wargs[] = {"--job", job->name, "--name", name, "--threads", L->threads_s, "--wait", "120",
                         "--state-dir", states, is_backup ? "--backup" : NULL, NULL};
        st = states ? launch_spawn(L, "worker", name, wargs) : TMA_ERR_NOMEM;
    }
    free(states);
    if (st != TMA_OK)
        return st;
    char backups[40] = "";
    if (L->backups)
        snprintf(backups, sizeof backups, " plus %lld backup(s)", (long long)L->backups);
    fprintf(L->say, "%s etcd (%s), started the coordinator and %d worker(s)%s; logs in %s\n",
            L->etcd_started ? "started" : "using", L->url, nworkers, backups, L->logs);
    if (job->train_s > 0)
        fprintf(L->say, "training for %.0f s", job->train_s);
    else
        fprintf(L->say, "training for %lld rounds", (long long)job->rounds);
    if (job->interval_steps > 0)
        fprintf(L->say, ", aggregating every %lld steps\n", (long long)job->interval_steps);
    else
        fprintf(L->say, ", aggregating every %.0f s\n", job->interval_s);
    fflush(L->say);
    return TMA_OK;
}

/* The last ERROR line of a role's log (else its last line), so a failed
 * role says why where the user looks, not only in its log file. */
static void print_last_error(FILE *out, const char *logs, const char *name)
{
    char lname[64];
    snprintf(lname, sizeof lname, "%s.log", name);
    char *path = tma_path_join(logs, lname), *text = NULL;
    size_t len = 0;
    if (!path || tma_file_read_all(path, &text, &len) != TMA_OK) {
        free(path);
        return;
    }
    const char *best = NULL, *last = NULL;
    size_t best_n = 0, last_n = 0;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && text[j] != '\n')
            j++;
        if (j > i) {
            last = text + i;
            last_n = j - i;
            if (memmem(text + i, j - i, " ERROR ", 7) || memmem(text + i, j - i, "FAILED", 6)) {
                best = text + i;
                best_n = j - i;
            }
        }
        i = j + 1;
    }
    if (!best) {
        best = last;
        best_n = last_n;
    }
    if (best)
        fprintf(out, "  %s's last error (%s): %.*s\n", name, path, (int)TMA_MIN(best_n, (size_t)400), best);
    free(text);
    free(path);
}

/* Phase 4: supervise until the coordinator ends: progress lines, workers
 * that exit, the private etcd; on a stop request the coordinator gets
 * SIGTERM (it finishes the evaluation and writes the result).  Then the
 * workers, which leave on `stop`, get a moment before they are stopped. */
static void launch_supervise(launch_t *L)
{
    progress_t prog = {tma_job_run_path(L->run_dir, "metrics.jsonl"), 0, NAN,
                       {L->job->train_s, L->job->rounds, L->job->workers}, L->say, -1, 0};
    int show = !L->quiet && prog.metrics_path;
    if (show && L->resume) {
        /* The rounds of the run so far are not shown again. */
        int64_t *rounds = NULL;
        double *times = NULL, *vals = NULL;
        int n = 0;
        if (tma_job_run_read_metrics(prog.metrics_path, &rounds, &times, &vals, &n) == TMA_OK && n > 0)
            prog.shown = rounds[n - 1];
        free(rounds);
        free(times);
        free(vals);
    }
    int interrupted = 0;
    while (cli_proc_poll(&L->procs[0])) {
        if (g_stop && !interrupted) {
            interrupted = 1;
            fprintf(L->say, "stopping: the coordinator finishes the evaluation and writes the result ...\n");
            fflush(L->say);
            cli_proc_signal(&L->procs[0], SIGTERM);
        }
        for (int i = 1; i < L->nprocs; i++) {
            cli_proc_t *p = &L->procs[i];
            if (p->running && !cli_proc_poll(p) && cli_proc_exit_code(p) != 0) {
                fprintf(L->say, "%s exited (code %d); the coordinator applies fault.on_failure\n", p->name,
                        cli_proc_exit_code(p));
                print_last_error(L->say, L->logs, p->name);
            }
        }
        if (show)
            show_progress(&prog);
        if (L->etcd_started && !cli_proc_poll(&L->etcd.proc)) {
            tma_log_error(COMP, "the private etcd exited (code %d); see %s/etcd.log",
                          cli_proc_exit_code(&L->etcd.proc), L->logs);
            break;
        }
        tma_sleep(0.2);
    }
    if (show)
        show_progress(&prog);
    free(prog.metrics_path);
    if (L->procs[0].running)
        cli_proc_stop(&L->procs[0], 30.0);
    /* Workers see a finished job's stop and end by themselves; a coordinator
     * that failed or refused the job leaves them nothing to wait for. */
    const int failed = !g_stop && cli_proc_exit_code(&L->procs[0]) != CLI_EXIT_OK;
    double end = tma_clock_now() + (failed ? 0.0 : 15.0);
    for (int i = 1; i < L->nprocs; i++)
        while (cli_proc_poll(&L->procs[i]) && tma_clock_now() < end)
            tma_sleep(0.05);
}

/* The exit code from what the coordinator left: the result, printed.  A
 * stopped job is not a success: 128 + the signal. */
static int launch_result(launch_t *L)
{
    char *res = tma_path_join(L->run_dir, "result.json");
    int have = res && tma_file_exists(res);
    free(res);
    int code = cli_proc_exit_code(&L->procs[0]);
    char *metrics = tma_path_join(L->run_dir, "metrics.jsonl");
    struct stat sb;
    const int trained = metrics && stat(metrics, &sb) == 0 && sb.st_size > 0;
    free(metrics);
    if (!have && code == CLI_EXIT_USAGE && !L->resume && !trained && !g_stop) {
        /* Its config or partition, refused by name in its log: a --resume
         * would be refused the same way. */
        L->refused = 1;
        tma_log_error(COMP, "the coordinator refused the job before its first round (its error below); nothing was "
                            "trained%s",
                      L->made_run_dir ? ", and the run folder this launch made is removed" : "");
        print_last_error(stderr, L->logs, "coordinator");
        return CLI_EXIT_USAGE;
    }
    if (!have || (code != CLI_EXIT_OK && !(g_stop && code > CLI_EXIT_SIGNAL_BASE))) {
        tma_log_error(COMP, "the job did not finish; see %s/coordinator.log", L->logs);
        print_last_error(stderr, L->logs, "coordinator");
        return g_stop ? cli_exit_code(TMA_ERR_CANCELLED, &g_stop) : CLI_EXIT_RUNTIME;
    }
    print_result(L->say, L->run_dir);
    if (L->json) {
        char *path = tma_job_run_path(L->run_dir, "result.json");
        if (!path || cli_print_file(path) != CLI_EXIT_OK)
            code = -1;
        free(path);
        if (code < 0)
            return CLI_EXIT_RUNTIME;
    }
    if (g_stop)
        fprintf(L->say, "(interrupted: the result covers the training done until then)\n");
    return cli_exit_code(TMA_OK, &g_stop);
}

/* Stops whatever still runs (one shared wait of 5 s, then SIGKILL), and frees. */
static void launch_close(launch_t *L)
{
    cli_procs_stop(L->procs, L->nprocs, 5.0);
    if (L->etcd_started)
        cli_etcd_stop(&L->etcd, L->keep);
    free(L->procs);
    free(L->exe);
    free(L->run_dir);
    free(L->logs);
    free(L->job_path);
    tma_job_destroy(L->job);
}

int cli_cmd_launch(int argc, char **argv)
{
    tma_job_run_private_files(); /* the run folder's files and logs, and the roles it starts */
    launch_t L;
    memset(&L, 0, sizeof L);
    int rc = launch_parse(&L, argc, argv);
    if (rc != CLI_EXIT_OK || !L.job)
        return rc;
    cli_install_stop_handler(&g_stop);
    L.exe = self_exe();
    tma_status_t st = L.exe ? TMA_OK : TMA_ERR_NOMEM;
    /* The phases, each stopped where it is by a Ctrl-C (the one running a
     * step ends that step). */
    static const char *const phases[] = {"making the run folder", "preparing the graph", "partitioning",
                                         "writing the job", "starting etcd and the roles"};
    tma_status_t (*const steps[])(launch_t *) = {launch_open_run, launch_prepare_graph, launch_prepare_partition,
                                                 launch_write_job, launch_spawn_roles};
    size_t phase = 0;
    int remove_run = 0;
    for (; phase < TMA_ARRAY_LEN(steps) && st == TMA_OK && !g_stop; phase++)
        st = steps[phase](&L);
    if (st == TMA_OK && !g_stop) {
        launch_supervise(&L);
        rc = launch_result(&L);
    } else if ((g_stop || st == TMA_ERR_CANCELLED) && L.resume) {
        fprintf(stderr, "tma launch: interrupted while %s; the run in %s is left to resume: tma launch --resume %s\n",
                phases[phase > 0 ? phase - 1 : 0], L.resume, L.resume);
        rc = cli_exit_code(TMA_ERR_CANCELLED, &g_stop);
    } else if (g_stop || st == TMA_ERR_CANCELLED) {
        /* Nothing trained yet: this launch's own run folder goes too. */
        const char *where = phases[phase > 0 ? phase - 1 : 0];
        fprintf(stderr, "tma launch: interrupted while %s; nothing was trained%s\n", where,
                L.made_run_dir ? ", and the run folder it made is removed" : "");
        remove_run = 1;
        rc = cli_exit_code(TMA_ERR_CANCELLED, &g_stop);
    } else {
        rc = cli_exit_code(st, &g_stop);
    }
    /* A job refused as a usage error (a phase's flags or config), or
     * interrupted before training, leaves no run folder behind when this
     * launch made it (removed once every process it started has ended). */
    char *made = (rc == CLI_EXIT_USAGE || remove_run) && L.made_run_dir && L.run_dir ? strdup(L.run_dir) : NULL;
    /* A job that trained but did not finish keeps its etcd: --resume goes on from its state there. */
    if (L.etcd_started && rc != CLI_EXIT_OK && !made && !L.keep && !remove_run && !L.refused) {
        L.keep = 1;
        fprintf(stderr, "tma launch: the job did not finish: its etcd data stays in %s/etcd; tma launch --resume %s "
                        "continues it\n", L.run_dir, L.run_dir);
    }
    launch_close(&L);
    if (made && tma_remove_tree(made) != TMA_OK)
        fprintf(stderr, "tma launch: could not remove the run folder %s\n", made);
    free(made);
    return rc;
}
