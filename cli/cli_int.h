/*
 * cli_int.h: the pieces shared by the tma subcommands: the option parser,
 * the command table entry type and the exit-code conventions.
 *
 * Exit codes: 0 success, 1 runtime error, 2 usage error.  Errors go to
 * stderr and name the flag, file, line or key at fault.
 */
#ifndef TMA_CLI_INT_H
#define TMA_CLI_INT_H

#include <stdint.h>

#include "tma_common.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_RUNTIME = 1, CLI_EXIT_USAGE = 2 };

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

/* Parses argv (argv[0] is the command name).  Positional arguments are
 * stored in pos[] (which must hold CLI_MAX_POS entries) and counted in *npos_p.
 * Prints help (returns CLI_PARSE_HELP) or a usage error naming the flag
 * (returns CLI_PARSE_ERROR). */
int cli_parse(const cli_spec_t *spec, int argc, char **argv, char **pos, int *npos_p);
/* Prints "tma CMD: message" and a hint to use --help; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) TMA_PRINTF(2, 3);
/* Maps a runtime status to an exit code (0 or 1). */
int cli_exit_from_status(tma_status_t st);
/* Prints the full help of a command to stdout. */
void cli_print_help(const cli_spec_t *spec);

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command_t;

/* The subcommands, one file each. */
int cli_cmd_info(int argc, char **argv);
int cli_cmd_train(int argc, char **argv);
int cli_cmd_eval(int argc, char **argv);

#endif
