/*
 * main.c: the tma program: global options, then one subcommand.  Each
 * subcommand lives in its own cmd_*.c file and is listed in the table below.
 */
#include "cli_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

static const cli_command_t commands[] = {
    {"info", "print a .tmag graph's header, counts and statistics", cli_cmd_info},
    {"import", "read a dataset (edge list, OGB raw, .npz) into a .tmag graph", cli_cmd_import},
    {"gen", "generate a synthetic graph (sbm, rmat) into a .tmag graph", cli_cmd_gen},
    {"partition", "cut a graph's training edges into shards (random, supernode:N, metis)", cli_cmd_partition},
    {"train", "train one link-prediction model on a whole graph (centralized)", cli_cmd_train},
    {"eval", "test saved weights: MRR on a graph's test or validation edges", cli_cmd_eval},
    {"export", "weights to .npz (PyTorch names) and node embeddings to .npy", cli_cmd_export},
    {"launch", "run a whole distributed job on this machine (etcd, coordinator, workers)", cli_cmd_launch},
    {"coordinator", "run the coordinator of a distributed job", cli_cmd_coordinator},
    {"worker", "run a trainer of a distributed job", cli_cmd_worker},
    {"status", "show a running job's state from etcd", cli_cmd_status},
    {"report", "tables and plots from run folders (the paper's Tables 2 and 3)", cli_cmd_report},
};

static void print_usage(FILE *out)
{
    fprintf(out,
            "Usage: tma [--log-level error|warn|info|debug] COMMAND [options]\n"
            "       tma --version | --help | help COMMAND\n\n"
            "tma trains GNNs for link prediction on graphs too large for one machine, with\n"
            "time-based model aggregation over randomized graph partitions.\n\n"
            "Commands:\n");
    for (size_t i = 0; i < TMA_ARRAY_LEN(commands); i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun 'tma COMMAND --help' for a command's options.\n\n"
                 "Exit status (every command):\n"
                 "  0        the work is done\n"
                 "  1        it failed: unreadable or malformed input data, I/O, a device, etcd, a failed job\n"
                 "  2        a flag, an argument or a config is wrong (nothing was started)\n"
                 "  128+N    stopped by signal N before the work was done (130 Ctrl-C, 143 SIGTERM),\n"
                 "           after writing what there is\n");
}

static void print_version(void)
{
    printf("tma %s\n", tma_version());
    if (!tma_gnn_cuda_built()) {
        printf("CUDA support: not compiled in\n");
        return;
    }
    /* Compiled in is not usable: the backend is a module that may be missing
     * or lack its CUDA libraries. */
    const char *why = tma_gnn_cuda_module_problem();
    if (why)
        printf("CUDA support: compiled in, but unusable: %s\n", why);
    else
        printf("CUDA support: compiled in (module loaded; %d GPU(s) usable here)\n", tma_gnn_cuda_device_count());
}

/*
 * libgomp reads OMP_WAIT_POLICY when it loads, before main.  Its default
 * (idle threads spin) makes OpenMP's idle threads and OpenBLAS's threads
 * fight over the cores between the two kinds of work in a training step;
 * passive waiting avoids it.  So unless the user chose a policy, tma runs
 * itself again with OMP_WAIT_POLICY=PASSIVE (docs/model.md, "Threads").
 */
/*
 * The same re-run sets OPENBLAS_NUM_THREADS=1 (whatever it was): every product of
 * the CPU backend runs on single-threaded OpenBLAS (tma parallelises over
 * the outputs itself), but a threaded OpenBLAS starts its thread pool when
 * it is loaded, each thread reserving a 128 MiB buffer.  Under a data limit
 * (`ulimit -d`, prlimit --data) that reservation can fail, and the pool's
 * thread then retries forever, so that the process hangs in exit().
 */
static void ensure_passive_openmp(char **argv)
{
    int again = 0;
    if (!getenv("OMP_WAIT_POLICY") && setenv("OMP_WAIT_POLICY", "PASSIVE", 1) == 0)
        again = 1;
    const char *ob = getenv("OPENBLAS_NUM_THREADS");
    if ((!ob || strcmp(ob, "1") != 0) && setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0)
        again = 1;
    if (again)
        execv("/proc/self/exe", argv);
    /* If that failed, carry on as loaded. */
}

int main(int argc, char **argv)
{
    ensure_passive_openmp(argv);
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            print_version();
            return CLI_EXIT_OK;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_usage(stdout);
            return CLI_EXIT_OK;
        } else if (strncmp(a, "--log-level", 11) == 0) {
            const char *v = a[11] == '=' ? a + 12 : (a[11] == '\0' && i + 1 < argc ? argv[++i] : NULL);
            tma_log_level_t lv;
            if (!v || tma_log_parse_level(v, &lv) != TMA_OK) {
                fprintf(stderr, "tma: --log-level: expected error, warn, info or debug\n");
                return CLI_EXIT_USAGE;
            }
            tma_log_set_level(lv);
        } else {
            fprintf(stderr, "tma: unknown option '%s'\nTry 'tma --help'.\n", a);
            return CLI_EXIT_USAGE;
        }
    }
    if (i >= argc) {
        print_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[i];
    if (strcmp(name, "help") == 0) {
        if (i + 1 >= argc) {
            print_usage(stdout);
            return CLI_EXIT_OK;
        }
        name = argv[i + 1];
        for (size_t k = 0; k < TMA_ARRAY_LEN(commands); k++) {
            if (strcmp(commands[k].name, name) == 0) {
                char *hargv[] = {(char *)name, "--help", NULL};
                return commands[k].run(2, hargv);
            }
        }
        fprintf(stderr, "tma: unknown command '%s'\nTry 'tma --help'.\n", name);
        return CLI_EXIT_USAGE;
    }
    for (size_t k = 0; k < TMA_ARRAY_LEN(commands); k++) {
        if (strcmp(commands[k].name, name) == 0) {
            /* libcurl's global state is the program's to set up, not a library's. */
            if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                fprintf(stderr, "tma: libcurl failed to initialise\n");
                return CLI_EXIT_RUNTIME;
            }
            int rc = commands[k].run(argc - i, argv + i);
            curl_global_cleanup();
            return rc;
        }
    }
    tma_suggest_t sg;
    tma_suggest_init(&sg);
    for (size_t k = 0; k < TMA_ARRAY_LEN(commands); k++)
        tma_suggest_add(&sg, name, strlen(name), commands[k].name);
    const char *near = tma_suggest_best(&sg, strlen(name));
    if (near)
        fprintf(stderr, "tma: unknown command '%s'; did you mean '%s'?\nTry 'tma --help'.\n", name, near);
    else
        fprintf(stderr, "tma: unknown command '%s'\nTry 'tma --help'.\n", name);
    return CLI_EXIT_USAGE;
}
