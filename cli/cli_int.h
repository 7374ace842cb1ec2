/*
 * cli_int.h: the pieces shared by the tma subcommands: the option parser,
 * the command table entry type and the exit-code conventions.
 *
 * Exit codes, the same for every command (listed by `tma --help`): 0 the
 * work is done; 1 it failed (unreadable or malformed input data, I/O, a
 * device, etcd, a failed job); 2 a flag, an argument or a config is wrong (nothing was started);
 * 128 + N stopped by signal N (130 Ctrl-C, 143 SIGTERM) before the work was
 * done, after writing what there is.  Errors go to stderr and name the
 * flag, file, line or key at fault.
 */
#ifndef TMA_CLI_INT_H
#define TMA_CLI_INT_H

#include <stdint.h>

#include "tma_common.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_RUNTIME = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_SIGNAL_BASE = 128 };

typedef enum {
    CLI_FLAG,   /* dest: int*, set to 1 */
    CLI_STR,    /* dest: const char** (points into argv) */
    CLI_INT,    /* dest: int64_t* */
    CLI_DOUBLE, /* dest: double* */
} cli_kind_t;

typedef struct cli_opt {
    const char *name; /* long name without dashes */
    char short_name;  /* one-letter alias, or 0 */
    cli_kind_t kind;
    void *dest;
    const char *metavar; /* shown in help, e.g. "N" */
    const char *help;
    int *seen; /* optional: set to 1 when the option was given */
} cli_opt_t;

typedef struct cli_spec {
    const char *cmd;         /* "import" */
    const char *usage;       /* "SRC -o G.tmag [options]" */
    const char *description; /* one paragraph */
    const cli_opt_t *opts;   /* terminated by an entry with name == NULL */
    int min_pos, max_pos;    /* positional argument count bounds (max -1: any) */
} cli_spec_t;

enum { CLI_PARSE_OK = 0, CLI_PARSE_HELP = 1, CLI_PARSE_ERROR = 2 };

/* The most positional arguments a command line may carry. */
#define CLI_MAX_POS 256

/* A command's parsed command line. */
typedef struct cli_args {
    char *pos[CLI_MAX_POS]; /* the positional arguments */
    int npos;
    int exit; /* when cli_args_parse returned 0: the exit code to end with */
} cli_args_t;
/* cli_parse for a command: 1 to go on; 0 when the command is done: after
 * printing the help (a->exit 0) or a usage error naming the flag (2). */
int cli_args_parse(const cli_spec_t *spec, int argc, char **argv, cli_args_t *a);
/* "Go on" where a function returns an exit code or this. */
#define CLI_GO_ON (-1)

/* Parses argv (argv[0] is the command name).  Positional arguments are
 * stored in pos[] (which must hold CLI_MAX_POS entries) and counted in *npos_p.
 * Prints help (returns CLI_PARSE_HELP) or a usage error naming the flag
 * (returns CLI_PARSE_ERROR). */
int cli_parse(const cli_spec_t *spec, int argc, char **argv, char **pos, int *npos_p);
/* Prints "tma CMD: message" and a hint to use --help; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) TMA_PRINTF(2, 3);
/* The one range check of every --threads-like flag: CLI_EXIT_OK for 0
 * (the default count) to 1024, else a usage error naming the range. */
#define CLI_MAX_THREADS 1024
int cli_check_threads(const char *cmd, const char *flag, int64_t n);
/* Maps a status to an exit code: 0, 2 for a bad config or argument
 * (TMA_ERR_CONFIG, TMA_ERR_INVALID), 1 otherwise. */
int cli_exit_from_status(tma_status_t st);
/* Prints the full help of a command to stdout. */
void cli_print_help(const cli_spec_t *spec);
/* --json: prints o on stdout as one line; 0, or 1 when out of memory. */
int cli_print_json(const cJSON *o);
/* --json of a command whose result is a file (result.json,
 * partition.json): prints it on stdout; 0, or 1 when it cannot be read. */
int cli_print_file(const char *path);

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command_t;

/* ------------------------------------------------------------------ child processes (proc.c) */

#include <sys/types.h>

typedef struct cli_proc {
    char name[64];
    pid_t pid;
    int running;
    int status; /* waitpid status once it has exited */
} cli_proc_t;

/* Starts argv[0] (PATH search) with stdout/stderr appended to log_path (or
 * inherited when NULL), in its own process group, killed if the launcher dies.
 * TMA_ERR_NOT_FOUND when the program does not exist. */
tma_status_t cli_proc_spawn(cli_proc_t *p, const char *name, char *const argv[], const char *log_path);
/* The same, run in folder cwd (NULL: this one). */
tma_status_t cli_proc_spawn_in(cli_proc_t *p, const char *name, char *const argv[], const char *log_path,
                               const char *cwd);
/* 1 while running; reaps it otherwise. */
int cli_proc_poll(cli_proc_t *p);
/* Exit code once ended (128 + signal for a signal), -1 while running. */
int cli_proc_exit_code(const cli_proc_t *p);
void cli_proc_signal(cli_proc_t *p, int sig);
/* Waits up to timeout seconds; 1 if it ended. */
int cli_proc_wait(cli_proc_t *p, double timeout);
/* SIGTERM, then SIGKILL after `grace` seconds; reaps it. */
void cli_proc_stop(cli_proc_t *p, double grace);
/* SIGTERM to each of n processes (the last started first), one shared wait
 * of grace seconds for them all, then SIGKILL for those still running. */
void cli_procs_stop(cli_proc_t *procs, int n, double grace);
/* A currently free TCP port on host (IPv4 literal). */
tma_status_t cli_free_port(const char *host, int *port_p);

/* ------------------------------------------------------------------ private etcd (etcd_local.c) */

typedef struct cli_etcd {
    cli_proc_t proc;
    char dir[1024];        /* the private folder (0700): data/ and, when the path fits, the sockets */
    char sock_dir[1024];   /* where the sockets are: dir, or a mkdtemp folder in /tmp */
    char client_url[1200]; /* unix:///.../client.sock:0 */
} cli_etcd_t;

/* Starts a one-member etcd whose client and peer listeners are unix sockets
 * in a folder only this user may enter (dir, made 0700; data in dir/data),
 * and waits until it is healthy (30 s).  No TCP port is opened, so no other
 * user of the machine can reach it (docs/security.md).  TMA_ERR_NOT_FOUND,
 * with a message naming the package, when the etcd program is missing. */
tma_status_t cli_etcd_start(cli_etcd_t *e, const char *dir, const char *log_path);
/* Stops it and removes its folder unless keep_data (the sockets' folder in
 * /tmp always). */
void cli_etcd_stop(cli_etcd_t *e, int keep_data);

/* ------------------------------------------------------------------ tma launch --resume (launch_resume.c) */

struct tma_job;
/* The job that ran in the run folder `run` (its job.json), checked to be
 * resumable: a run that finished by its budget is refused, and `config`
 * (may be NULL), when given, must be that job (its name, then every key but
 * the graph's source, the partition's folder and scheme and the transport;
 * the first that differs is named).  CLI_EXIT_OK with *job_p (the caller's),
 * else the exit code, the error printed. */
int cli_launch_resume_job(const char *run, const char *config, struct tma_job **job_p);

/* ------------------------------------------------------------------ etcd flags (roles.c) */

#include <signal.h>

#include "tma_kv.h"

/* --etcd URLS and the TLS/auth flags every etcd-speaking command takes. */
typedef struct cli_etcd_flags {
    const char *endpoints, *ca, *cert, *key, *user, *password_file;
    double timeout;
    int insecure; /* --insecure-etcd: a password may go over plain http */
    char password[256];
    char timeout_arg[32]; /* --etcd-timeout as passed on to the roles */
} cli_etcd_flags_t;

/* The TLS and authentication flags (tma launch has its own --etcd). */
#define CLI_ETCD_SECURE_OPTS(f) \
    {"etcd-ca", 0, CLI_STR, &(f).ca, "FILE", "CA certificate to verify etcd (https URLs)", NULL}, \
    {"etcd-cert", 0, CLI_STR, &(f).cert, "FILE", "client certificate for etcd", NULL}, \
    {"etcd-key", 0, CLI_STR, &(f).key, "FILE", "client key for etcd", NULL}, \
    {"etcd-user", 0, CLI_STR, &(f).user, "NAME", \
     "etcd user (password from $TMA_ETCD_PASSWORD or --etcd-password-file)", NULL}, \
    {"etcd-password-file", 0, CLI_STR, &(f).password_file, "FILE", "file holding the etcd password", NULL}, \
    {"insecure-etcd", 0, CLI_FLAG, &(f).insecure, NULL, \
     "allow sending the etcd password over plain http:// (refused otherwise)", NULL}, \
    {"etcd-timeout", 0, CLI_DOUBLE, &(f).timeout, "S", "seconds per etcd request (default 5)", NULL}
/* The roles' wait for etcd at start (cli_etcd_wait). */
#define CLI_ETCD_WAIT_OPT(w) \
    {"etcd-wait", 0, CLI_DOUBLE, &(w), "S", \
     "seconds to wait at start for etcd to answer (default 2: fail at once, naming the URL and why, when it " \
     "does not); a role started with etcd or beside it may wait longer", NULL}
#define CLI_ETCD_OPTS(f) \
    {"etcd", 0, CLI_STR, &(f).endpoints, "URLS", \
     "etcd client URLs, comma-separated: http://, https:// or unix:///PATH (required)", NULL}, \
    CLI_ETCD_SECURE_OPTS(f)

/* tma launch --resume (launch_resume.c): the job's leader epoch now (the
 * coordinator key's create revision; 0: none), and the wait for a newer
 * one (the resumed coordinator leads), before the workers start: TMA_OK,
 * TMA_ERR_CANCELLED when *stop is set, TMA_ERR_CONFIG when the coordinator
 * exited 2 (it refused the job), TMA_ERR_IO when it failed. */
tma_status_t cli_launch_leader_epoch(const tma_kv_config_t *kc, const char *job, uint64_t *epoch_p);
tma_status_t cli_launch_await_leader(const tma_kv_config_t *kc, const char *job, uint64_t old, cli_proc_t *coord,
                                     volatile sig_atomic_t *stop);

/* Builds a kv config from the flags; a usage error (exit 2) names the flag. */
int cli_etcd_config(const char *cmd, cli_etcd_flags_t *f, tma_kv_config_t *cfg);
/* tma launch: checks an external etcd's flags (none without --etcd; a
 * password over plain http only with --insecure-etcd) and puts its password
 * in $TMA_ETCD_PASSWORD for the roles.  CLI_EXIT_OK or a usage error. */
int cli_etcd_check_external(const char *cmd, cli_etcd_flags_t *f);
/* Waits up to wait_s seconds (each try at most 2 s, every endpoint at
 * once) for etcd to answer a read: CLI_EXIT_OK when one endpoint answers,
 * CLI_EXIT_USAGE when the client refuses the settings, 128 + the signal
 * when *stop is set, else prints one line naming the URLs and each one's
 * reason (curl's words) and returns CLI_EXIT_RUNTIME.  stop is NULL for a
 * command without --etcd-wait (the line then does not offer it). */
int cli_etcd_wait(const char *cmd, const tma_kv_config_t *cfg, double wait_s, volatile sig_atomic_t *stop);
/* Appends the TLS/auth flags of f (never the password) to av[n..cap) for a
 * role's command line; returns the new n. */
int cli_etcd_flags_argv(cli_etcd_flags_t *f, char **av, int n, int cap);
/* SIGINT and SIGTERM set *flag to the signal's number (the first); a
 * second one exits at once. */
void cli_install_stop_handler(volatile sig_atomic_t *flag);
/* The exit code of a command whose work ended with st, given its stop
 * flag: 128 + the signal when it was stopped (or st is TMA_ERR_CANCELLED),
 * else cli_exit_from_status(st). */
int cli_exit_code(tma_status_t st, const volatile sig_atomic_t *flag);

/* The subcommands, one file each. */
int cli_cmd_info(int argc, char **argv);
int cli_cmd_import(int argc, char **argv);
int cli_cmd_gen(int argc, char **argv);
int cli_cmd_partition(int argc, char **argv);
int cli_cmd_coordinator(int argc, char **argv);
int cli_cmd_worker(int argc, char **argv);
int cli_cmd_launch(int argc, char **argv);
int cli_cmd_status(int argc, char **argv);
int cli_cmd_report(int argc, char **argv);

/* The split flags that `tma import` and `tma gen` share (cmd_import.c). */
struct tma_graph_build_opts;
struct tma_graph_build_report;
typedef struct cli_graph_flags {
    double val, test;
    int val_seen, test_seen;
    int64_t negatives, seed;
    int json;
    const char *feat_dtype; /* --feat-dtype (NULL: f32) */
} cli_graph_flags_t;
#define CLI_GRAPH_SPLIT_OPTS(f)                                                                \
    {"val", 0, CLI_DOUBLE, &(f).val, "X",                                                      \
     "validation edges: a fraction if X < 1, else a count (default 5%, at most 2000)",         \
     &(f).val_seen},                                                                           \
        {"test", 0, CLI_DOUBLE, &(f).test, "X", "test edges, as --val (same default)",         \
         &(f).test_seen},                                                                      \
        {"negatives", 0, CLI_INT, &(f).negatives, "K",                                         \
         "fixed negative tails per evaluation edge (default 1000)", NULL},                     \
        {"seed", 0, CLI_INT, &(f).seed, "S",                                                   \
         "seed of the split, negatives and features (and of gen's graph); default 0", NULL},          \
        {"feat-dtype", 0, CLI_STR, &(f).feat_dtype, "T",                                       \
         "store the features as f32 (default), f16 or bf16 (rounded to nearest even); "        \
         "training widens them to f32", NULL},                                                 \
        {"json", 0, CLI_FLAG, &(f).json, NULL, "print the report as one JSON object", NULL}
/* --memory SIZE: a command's working-memory budget (cmd_gen.c). */
#define CLI_MEMORY_OPT(s)                                                                                  \
    {"memory", 0, CLI_STR, &(s), "SIZE",                                                                   \
     "working-memory budget, K/M/G/T suffixes (default: half of physical memory, or what ulimit -d "      \
     "leaves); a graph that needs more is built out of core, in temporary files beside the output",       \
     NULL}
/* The budget from a --memory value (NULL: the default), with where it came
 * from in `why`; CLI_EXIT_OK or a usage error's exit code. */
int cli_memory_budget(const char *cmd, const char *flag, uint64_t *budget_p, char *why, size_t why_size);
/* Checks the flags into *b; returns CLI_EXIT_OK or a usage error's exit code. */
int cli_graph_build_flags(const char *cmd, const cli_graph_flags_t *f, struct tma_graph_build_opts *b);
/* --feat-dtype into *t_p; CLI_EXIT_OK or a usage error's exit code. */
int cli_graph_feat_dtype(const char *cmd, const cli_graph_flags_t *f, tma_feat_dtype_t *t_p);
/* The feature type as the reports' features line adds it: "" for f32 (the
 * line as it was before the type existed), else ", f16" or ", bf16". */
const char *cli_feat_dtype_note(tma_feat_dtype_t t);
/* The report of a written graph as JSON: "graph", "graph_id", "nodes",
 * then the builder's counts (caller adds the rest and owns it). */
cJSON *cli_build_report_json(const char *path, uint64_t graph_id, int64_t nodes,
                             const struct tma_graph_build_report *r);
/* Prints the builder's counts, one "  key value" line each. */
void cli_print_build_report(const struct tma_graph_build_report *r);
/* The node types and relations of a typed graph, one line each (tma import, tma gen). */
struct tma_graph;
void cli_print_types(const struct tma_graph *g);
int cli_cmd_train(int argc, char **argv);
int cli_cmd_eval(int argc, char **argv);
int cli_cmd_export(int argc, char **argv);

/* A weight file's model on a graph (cmd_eval.c, shared with export): its
 * config, parameters, round, the graph and an evaluator on `device`. */
#include "tma_gnn.h"
typedef struct cli_model {
    tma_gnn_config_t cfg;
    float *params;
    uint64_t round;
    tma_graph_t *g;
    tma_gnn_evaluator_t *ev;
} cli_model_t;
/* Opens it; an exit code (errors printed, naming the file; 2 when the
 * weights do not fit the graph).  `ties` NULL keeps the weights' eval.ties;
 * table_bf16 1 keeps the evaluator's tables in bfloat16 (eval.table_dtype).
 * Close it also on failure. */
int cli_model_open(const char *cmd, const char *graph, const char *weights, int64_t threads, const char *device,
                   int64_t max_edges, const tma_gnn_ties_t *ties, int table_bf16, cli_model_t *m);
void cli_model_close(cli_model_t *m);

#endif
