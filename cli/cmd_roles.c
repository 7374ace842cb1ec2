/*
 * cmd_roles.c: `tma coordinator` and `tma worker`, the two roles of a
 * distributed job, and the etcd flags and signal handling they share with
 * `tma launch` and `tma status`.
 */
#include "cli_int.h"
#include "tma_coordinator.h"
#include "tma_worker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_etcd_config(const char *cmd, cli_etcd_flags_t *f, tma_kv_config_t *cfg)
{
    tma_kv_config_init(cfg);
    if (!f->endpoints)
        return cli_usage_error(cmd, "--etcd URLS is required (e.g. --etcd http://127.0.0.1:2379)");
    cfg->endpoints = f->endpoints;
    if (f->timeout != 0) {
        if (!(f->timeout > 0 && f->timeout <= 3600))
            return cli_usage_error(cmd, "--etcd-timeout: expected seconds in (0, 3600]");
        cfg->request_timeout_s = f->timeout;
    }
    cfg->allow_plain_password = f->insecure;
    cfg->ca_file = f->ca;
    cfg->cert_file = f->cert;
    cfg->key_file = f->key;
    if (f->user) {
        cfg->user = f->user;
        const char *env = getenv("TMA_ETCD_PASSWORD");
        if (f->password_file) {
            char *text;
            size_t len;
            if (tma_file_read_all(f->password_file, &text, &len) != TMA_OK)
                return cli_usage_error(cmd, "--etcd-password-file: cannot read %s", f->password_file);
            struct stat sb;
            if (stat(f->password_file, &sb) == 0 && (sb.st_mode & 077))
                tma_log_warn("etcd", "--etcd-password-file %s: other users may read it (chmod 600 %s)",
                             f->password_file, f->password_file);
            while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
                text[--len] = '\0';
            snprintf(f->password, sizeof f->password, "%s", text);
            free(text);
        } else if (env) {
            snprintf(f->password, sizeof f->password, "%s", env);
        } else {
            return cli_usage_error(cmd, "--etcd-user needs a password: set TMA_ETCD_PASSWORD or "
                                        "--etcd-password-file");
        }
        cfg->password = f->password;
    }
    return CLI_EXIT_OK;
}

/* One endpoint's ping, in a thread of its own: a hung member uses its own
 * time, not the others'. */
typedef struct {
    tma_kv_config_t cfg;
    char url[1024];
    double timeout_s;
    tma_status_t st;
    char why[1536];
    pthread_t thread;
    int started;
} etcd_ping_t;

static void *etcd_ping_one(void *arg)
{
    etcd_ping_t *p = arg;
    tma_kv_t *kv;
    p->cfg.endpoints = p->url;
    p->cfg.request_timeout_s = 3 * p->timeout_s; /* one attempt may use all of timeout_s */
    p->cfg.connect_timeout_s = TMA_MIN(p->cfg.connect_timeout_s, p->timeout_s);
    p->st = tma_kv_create(&p->cfg, &kv);
    if (p->st != TMA_OK) {
        snprintf(p->why, sizeof p->why, "%.1024s: %s", p->url, tma_status_str(p->st));
        return NULL;
    }
    p->st = tma_kv_ping(kv, p->timeout_s, p->why, sizeof p->why);
    tma_kv_destroy(kv);
    return NULL;
}

/* Pings every endpoint of cfg at once for up to timeout_s: TMA_OK when
 * one answers, else the reasons, "URL: why; URL: why", in why. */
static tma_status_t etcd_ping_all(const tma_kv_config_t *cfg, double timeout_s, char *why, size_t cap)
{
    size_t n = 1;
    for (const char *c = cfg->endpoints; *c; c++)
        n += *c == ',';
    etcd_ping_t *p = calloc(n, sizeof *p);
    if (!p)
        return TMA_ERR_NOMEM;
    const char *s = cfg->endpoints;
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(s, ",");
        p[i].cfg = *cfg;
        p[i].timeout_s = timeout_s;
        snprintf(p[i].url, sizeof p[i].url, "%.*s", (int)len, s);
        s += len + (s[len] == ',');
        p[i].started = pthread_create(&p[i].thread, NULL, etcd_ping_one, &p[i]) == 0;
        if (!p[i].started)
            etcd_ping_one(&p[i]);
    }
    tma_status_t st = TMA_ERR_UNAVAILABLE;
    size_t at = 0;
    why[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (p[i].started)
            pthread_join(p[i].thread, NULL);
        if (p[i].st == TMA_OK) {
            st = TMA_OK;
        } else if (at < cap) {
            /* One endpoint: the line names it already. */
            const char *w = p[i].why;
            size_t ul = strlen(p[i].url);
            if (n == 1 && strncmp(w, p[i].url, ul) == 0 && w[ul] == ':' && w[ul + 1] == ' ')
                w += ul + 2;
            at += (size_t)snprintf(why + at, cap - at, "%s%s", i ? "; " : "", w);
        }
    }
    free(p);
    return st;
}

int cli_etcd_wait(const char *cmd, const tma_kv_config_t *cfg, double wait_s, volatile sig_atomic_t *stop)
{
    /* Pings until one answers or wait_s passes, each at most 2 s: an etcd
     * that is down, unreachable or refusing TLS shows up now, not after
     * the graph is prepared or a worker has waited for its job. */
    tma_kv_t *kv;
    if (tma_kv_create(cfg, &kv) != TMA_OK)
        return cli_usage_error(cmd, "--etcd: the etcd settings are refused (the error above says why)");
    tma_kv_destroy(kv);
    double deadline = tma_clock_now() + wait_s;
    char why[4096];
    for (;;) {
        double left = deadline - tma_clock_now();
        if (etcd_ping_all(cfg, TMA_MAX(0.1, TMA_MIN(2.0, left)), why, sizeof why) == TMA_OK)
            return CLI_EXIT_OK;
        if (stop && *stop)
            return CLI_EXIT_SIGNAL_BASE + *stop;
        if (tma_clock_now() >= deadline)
            break;
        tma_sleep(TMA_MIN(0.25, deadline - tma_clock_now()));
    }
    fprintf(stderr, "tma %s: etcd at %s did not answer within %g s: %s; start etcd there, check --etcd and its TLS "
                    "flags%s\n",
            cmd, cfg->endpoints, wait_s, why, stop ? ", or give --etcd-wait SECONDS to wait longer for it" : "");
    return CLI_EXIT_RUNTIME;
}

int cli_etcd_check_external(const char *cmd, cli_etcd_flags_t *f)
{
    if (!f->endpoints) {
        if (f->ca || f->cert || f->key || f->user || f->password_file || f->insecure || f->timeout != 0)
            return cli_usage_error(cmd, "the --etcd-* flags are for an etcd given with --etcd URLS");
        return CLI_EXIT_OK;
    }
    tma_kv_config_t cfg;
    int rc = cli_etcd_config(cmd, f, &cfg);
    if (rc != CLI_EXIT_OK)
        return rc;
    /* The probe's client checks the URLs, the TLS files and where a password
     * may go, then reads once. */
    if ((rc = cli_etcd_wait(cmd, &cfg, 2.0, NULL)) != CLI_EXIT_OK)
        return rc;
    /* The roles inherit the password in their environment, never on a
     * command line (which every user can read in /proc). */
    if (f->user && setenv("TMA_ETCD_PASSWORD", f->password, 1) != 0)
        return CLI_EXIT_RUNTIME;
    return CLI_EXIT_OK;
}

int cli_etcd_flags_argv(cli_etcd_flags_t *f, char **av, int n, int cap)
{
    const struct {
        const char *flag, *val;
    } pass[] = {{"--etcd-ca", f->ca}, {"--etcd-cert", f->cert}, {"--etcd-key", f->key}, {"--etcd-user", f->user}};
    for (size_t i = 0; i < TMA_ARRAY_LEN(pass); i++) {
        if (pass[i].val && n + 2 < cap) {
            av[n++] = (char *)pass[i].flag;
            av[n++] = (char *)pass[i].val;
        }
    }
    if (f->timeout > 0 && n + 2 < cap) {
        snprintf(f->timeout_arg, sizeof f->timeout_arg, "%.17g", f->timeout);
        av[n++] = "--etcd-timeout";
        av[n++] = f->timeout_arg;
    }
    if (f->insecure && n + 1 < cap)
        av[n++] = "--insecure-etcd";
    return n;
}

static volatile sig_atomic_t *g_stop_flag;

static void on_stop_signal(int sig)
{
    if (g_stop_flag && *g_stop_flag) {
        /* A second signal: the user insists. */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    if (g_stop_flag)
        *g_stop_flag = sig;
}

void cli_install_stop_handler(volatile sig_atomic_t *flag)
{
    g_stop_flag = flag;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static volatile sig_atomic_t g_stop;

/* The coordinator's wait for etcd, once (a leader that lost its lease
 * opens the job again), after its config file is checked. */
typedef struct {
    const tma_kv_config_t *kc;
    double wait_s;
    int rc, done;
} coord_etcd_check_t;

static tma_status_t coord_etcd_check(void *arg)
{
    coord_etcd_check_t *e = arg;
    if (!e->done) {
        e->done = 1;
        e->rc = cli_etcd_wait("coordinator", e->kc, e->wait_s, &g_stop);
    }
    return e->rc == CLI_EXIT_OK ? TMA_OK : TMA_ERR_UNAVAILABLE;
}

static int fault_flag(const char *cmd, const char *spec, tma_inject_t *inj)
{
    tma_status_t st = spec ? tma_inject_parse(spec, inj) : tma_inject_from_env(inj);
    if (st != TMA_OK)
        return cli_usage_error(cmd, "bad failure-injection spec (see docs/faults.md)");
    return CLI_EXIT_OK;
}

int cli_cmd_coordinator(int argc, char **argv)
{
    tma_job_run_private_files();
    cli_etcd_flags_t ef;
    memset(&ef, 0, sizeof ef);
    const char *job = NULL, *config = NULL, *run_dir = NULL, *eval_device = NULL, *fault = NULL, *dump = NULL;
    const char *on_signal = "stop";
    int standby = 0, fresh = 0, resume = 0;
    int64_t eval_threads = 0;
    double etcd_wait = 2;
    const cli_opt_t opts[] = {
        CLI_ETCD_OPTS(ef),
        CLI_ETCD_WAIT_OPT(etcd_wait),
        {"job", 0, CLI_STR, &job, "NAME", "the job's name (default: the config's \"job\")", NULL},
        {"config", 0, CLI_STR, &config, "job.json", "the job config (omit to resume a job from etcd)", NULL},
        {"run-dir", 0, CLI_STR, &run_dir, "DIR", "the run folder (default runs/JOB)", NULL},
        {"standby", 0, CLI_FLAG, &standby, NULL, "wait for the leader's lease to lapse, then take over", NULL},
        {"fresh", 0, CLI_FLAG, &fresh, NULL, "delete a finished job's keys of the same name first", NULL},
        {"resume", 0, CLI_FLAG, &resume, NULL,
         "continue a job all of whose processes were stopped (also one an interruption ended) from its state in "
         "etcd: the leases they left are revoked and the shards dealt again to the workers that register",
         NULL},
        {"on-signal", 0, CLI_STR, &on_signal, "stop|suspend",
         "what SIGTERM or SIGINT does: stop the job (test, result.json; default) or suspend it (leave it in etcd "
         "for a coordinator to resume from its last checkpoint: a preempted batch job)",
         NULL},
        {"eval-device", 0, CLI_STR, &eval_device, "DEV", "device of the evaluator: cpu or cuda[:i]", NULL},
        {"eval-threads", 0, CLI_INT, &eval_threads, "N", "threads of the evaluator (default: the config's)", NULL},
        {"fault", 0, CLI_STR, &fault, "SPEC", NULL, NULL},
        {"dump-dir", 0, CLI_STR, &dump, "DIR", NULL, NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {"coordinator", "--etcd URLS --job NAME --config job.json [options]",
                             "Runs the coordinator of a distributed job (Algorithm 1 of the paper): publishes the "
                             "job in etcd, deals shards, raises agg every interval, averages the workers' weights, "
                             "evaluates, and writes the run folder. A coordinator started without --config, or "
                             "with --standby, takes the job over from etcd (resuming from the last completed "
                             "round).",
                             opts, 0, 0};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;
    tma_kv_config_t kc;
    int rc = cli_etcd_config("coordinator", &ef, &kc);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!(etcd_wait > 0 && etcd_wait <= 86400))
        return cli_usage_error("coordinator", "--etcd-wait: expected seconds in (0, 86400], got %g", etcd_wait);
    if (!job && !config)
        return cli_usage_error("coordinator", "give --job NAME (and --config job.json for a new job)");
    if (cli_check_threads("coordinator", "--eval-threads", eval_threads) != CLI_EXIT_OK)
        return CLI_EXIT_USAGE;
    if (resume && (standby || fresh || config))
        return cli_usage_error("coordinator", "--resume continues the job in etcd with its own config: drop %s",
                               standby ? "--standby" : fresh ? "--fresh" : "--config");
    if (strcmp(on_signal, "stop") != 0 && strcmp(on_signal, "suspend") != 0)
        return cli_usage_error("coordinator", "--on-signal: expected stop or suspend, got '%s'", on_signal);
    tma_inject_t inj;
    if ((rc = fault_flag("coordinator", fault, &inj)) != CLI_EXIT_OK)
        return rc;
    if (dump && tma_mkdir_p(dump) != TMA_OK)
        return CLI_EXIT_RUNTIME;
    tma_coordinator_opts_t o;
    memset(&o, 0, sizeof o);
    o.kv = &kc;
    o.job = job;
    o.config_path = config;
    o.run_dir = run_dir;
    o.standby = standby;
    o.fresh = fresh;
    o.resume = resume;
    o.suspend = strcmp(on_signal, "suspend") == 0;
    o.eval_device = eval_device;
    o.eval_threads = (int)eval_threads;
    o.inject = &inj;
    o.dump_dir = dump;
    coord_etcd_check_t check = {&kc, etcd_wait, CLI_EXIT_OK, 0};
    o.etcd_check = coord_etcd_check;
    o.etcd_check_arg = &check;
    cli_install_stop_handler(&g_stop);
    tma_status_t st = tma_coordinator_run(&o, &g_stop);
    return check.rc != CLI_EXIT_OK ? check.rc : cli_exit_code(st, &g_stop);
}

int cli_cmd_worker(int argc, char **argv)
{
    cli_etcd_flags_t ef;
    memset(&ef, 0, sizeof ef);
    const char *job = NULL, *name = NULL, *device = NULL, *fault = NULL, *data_dir = NULL, *state_dir = NULL;
    int backup = 0;
    int64_t threads = 0;
    double wait = 300, etcd_wait = 2;
    const cli_opt_t opts[] = {
        CLI_ETCD_OPTS(ef),
        CLI_ETCD_WAIT_OPT(etcd_wait),
        {"job", 0, CLI_STR, &job, "NAME", "the job to join (required)", NULL},
        {"backup", 0, CLI_FLAG, &backup, NULL, "a standby worker: takes shards only when an owner is lost", NULL},
        {"name", 0, CLI_STR, &name, "LABEL", "the worker's name: its log tag, and how tma status and the progress lines show it (default host:pid, "
         "with the tag worker-ID, ID its member id)", NULL},
        {"device", 0, CLI_STR, &device, "DEV",
         "cpu or cuda[:i] (default: the job's devices.workers entry the local rank picks)", NULL},
        {"threads", 0, CLI_INT, &threads, "N",
         "compute threads (default: the job's train.threads, else $OMP_NUM_THREADS, else the CPUs this process "
         "may use)",
         NULL},
        {"wait", 0, CLI_DOUBLE, &wait, "S", "seconds to wait for the job to appear in etcd (default 300)", NULL},
        {"data-dir", 0, CLI_STR, &data_dir, "DIR",
         "the partition folder on this node: partition.json and the shards this worker trains (default: the job's "
         "partition.node_dir, else partition.dir)",
         NULL},
        {"state-dir", 0, CLI_STR, &state_dir, "DIR",
         "keep the optimizer state of every round this worker sends in DIR, and continue a shard set's state "
         "when its training starts again from that round (a resumed job: tma launch --resume)",
         NULL},
        {"fault", 0, CLI_STR, &fault, "SPEC", NULL, NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {"worker", "--etcd URLS --job NAME [options]",
                             "Runs a trainer of a distributed job (Algorithm 2 of the paper). It needs only the "
                             "etcd endpoints and the job name: it reads the job from etcd, registers, loads the "
                             "shards it is given, trains, and takes part in every aggregation until the job stops.",
                             opts, 0, 0};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;
    tma_kv_config_t kc;
    int rc = cli_etcd_config("worker", &ef, &kc);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!(etcd_wait > 0 && etcd_wait <= 86400))
        return cli_usage_error("worker", "--etcd-wait: expected seconds in (0, 86400], got %g", etcd_wait);
    if (!job)
        return cli_usage_error("worker", "--job NAME is required");
    if (cli_check_threads("worker", "--threads", threads) != CLI_EXIT_OK)
        return CLI_EXIT_USAGE;
    if (!(wait >= 0))
        return cli_usage_error("worker", "--wait: expected seconds >= 0");
    if (device && !tma_gnn_device_valid(device))
        return cli_usage_error("worker", "--device: expected cpu, cuda or cuda:N, got '%s'", device);
    if (data_dir && !tma_dir_exists(data_dir))
        return cli_usage_error("worker", "--data-dir %s: no such folder on this node", data_dir);
    tma_inject_t inj;
    if ((rc = fault_flag("worker", fault, &inj)) != CLI_EXIT_OK)
        return rc;
    tma_worker_opts_t o;
    memset(&o, 0, sizeof o);
    o.kv = &kc;
    o.job = job;
    o.backup = backup;
    o.name = name;
    o.device = device;
    o.threads = (int)threads;
    o.wait_config = wait;
    o.data_dir = data_dir;
    o.state_dir = state_dir;
    o.inject = &inj;
    cli_install_stop_handler(&g_stop);
    if ((rc = cli_etcd_wait("worker", &kc, etcd_wait, &g_stop)) != CLI_EXIT_OK)
        return rc;
    tma_status_t st = tma_worker_run(&o, &g_stop);
    return cli_exit_code(st, &g_stop);
}
