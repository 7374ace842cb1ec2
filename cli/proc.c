/*
 * proc.c: child processes for `tma launch`: spawn with output to a log file,
 * poll for exit, stop with SIGTERM then SIGKILL after a grace period.
 *
 * Children get PR_SET_PDEATHSIG(SIGKILL), so even a launcher that is itself
 * SIGKILLed leaves no orphans behind.
 */
#include "cli_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define COMP "launch"

tma_status_t cli_proc_spawn(cli_proc_t *p, const char *name, char *const argv[], const char *log_path)
{
    return cli_proc_spawn_in(p, name, argv, log_path, NULL);
}

tma_status_t cli_proc_spawn_in(cli_proc_t *p, const char *name, char *const argv[], const char *log_path,
                               const char *cwd)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    pid_t parent = getpid();
    int log_fd = -1;
    if (log_path) {
        log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log_fd < 0) {
            tma_log_error(COMP, "%s: cannot open log file %s: %s", name, log_path, strerror(errno));
            return TMA_ERR_IO;
        }
    }
    /* A pipe closed on exec tells the parent whether exec worked. */
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) != 0) {
        if (log_fd >= 0)
            close(log_fd);
        return TMA_ERR_IO;
    }
    pid_t pid = fork();
    if (pid < 0) {
        tma_log_error(COMP, "%s: fork failed: %s", name, strerror(errno));
        close(ep[0]);
        close(ep[1]);
        if (log_fd >= 0)
            close(log_fd);
        return TMA_ERR_IO;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        /* Own process group: Ctrl-C reaches the launcher only, which stops
         * the children in order. */
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) {
            dup2(devnull, 0);
            close(devnull);
        }
        if (log_fd >= 0) {
            dup2(log_fd, 1);
            dup2(log_fd, 2);
        }
        if (!cwd || chdir(cwd) == 0)
            execvp(argv[0], argv);
        int e = errno;
        (void)!write(ep[1], &e, sizeof e);
        _exit(127);
    }
    close(ep[1]);
    if (log_fd >= 0)
        close(log_fd);
    int child_errno = 0;
    ssize_t n;
    do {
        n = read(ep[0], &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    close(ep[0]);
    if (n == (ssize_t)sizeof child_errno) {
        waitpid(pid, NULL, 0);
        tma_log_error(COMP, "%s: cannot run %s: %s", name, argv[0], strerror(child_errno));
        return child_errno == ENOENT ? TMA_ERR_NOT_FOUND : TMA_ERR_IO;
    }
    p->pid = pid;
    p->running = 1;
    return TMA_OK;
}

int cli_proc_poll(cli_proc_t *p)
{
    if (!p->running)
        return 0;
    int status;
    pid_t r = waitpid(p->pid, &status, WNOHANG);
    if (r == p->pid) {
        p->running = 0;
        p->status = status;
        return 0;
    }
    return 1;
}

int cli_proc_exit_code(const cli_proc_t *p)
{
    if (p->running)
        return -1;
    if (WIFEXITED(p->status))
        return WEXITSTATUS(p->status);
    return 128 + (WIFSIGNALED(p->status) ? WTERMSIG(p->status) : 0);
}

void cli_proc_signal(cli_proc_t *p, int sig)
{
    if (p->running && p->pid > 0)
        kill(p->pid, sig);
}

int cli_proc_wait(cli_proc_t *p, double timeout)
{
    double end = tma_clock_now() + timeout;
    while (cli_proc_poll(p)) {
        if (tma_clock_now() >= end)
            return 0;
        tma_sleep(0.02);
    }
    return 1;
}

void cli_proc_stop(cli_proc_t *p, double grace)
{
    if (!p->running)
        return;
    cli_proc_signal(p, SIGTERM);
    if (!cli_proc_wait(p, grace)) {
        tma_log_warn(COMP, "%s (pid %d) did not stop within %.0f s; killing it", p->name, (int)p->pid,
                     grace);
        cli_proc_signal(p, SIGKILL);
        cli_proc_wait(p, 5.0);
    }
}

void cli_procs_stop(cli_proc_t *procs, int n, double grace)
{
    for (int i = n - 1; i >= 0; i--)
        cli_proc_signal(&procs[i], SIGTERM);
    double end = tma_clock_now() + grace;
    for (int i = 0; i < n; i++)
        cli_proc_wait(&procs[i], TMA_MAX(0.0, end - tma_clock_now()));
    for (int i = 0; i < n; i++) {
        if (!cli_proc_poll(&procs[i]))
            continue;
        tma_log_warn(COMP, "%s (pid %d) did not stop within %.0f s; killing it", procs[i].name, (int)procs[i].pid,
                     grace);
        cli_proc_signal(&procs[i], SIGKILL);
        cli_proc_wait(&procs[i], 5.0);
    }
}

tma_status_t cli_free_port(const char *host, int *port_p)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return TMA_ERR_IO;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = 0;
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        close(fd);
        return TMA_ERR_INVALID;
    }
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        close(fd);
        return TMA_ERR_IO;
    }
    *port_p = ntohs(a.sin_port);
    close(fd);
    return TMA_OK;
}
