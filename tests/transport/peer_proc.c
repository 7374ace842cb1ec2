/* peer_proc.c: transport_peer processes for the C tests (see peer_proc.h). */
#include "peer_proc.h"

#include "tma_common.h"
#include "tma_test.h"
#include "tma_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void peer_env_setup(void)
{
    setenv("UCX_NET_DEVICES", "lo", 0);
    /* A peer process must not inherit a token by accident. */
    unsetenv("TMA_JOB_TOKEN");
    signal(SIGPIPE, SIG_IGN);
}

int peer_proc_start(peer_proc_t *p, double timeout_s, const char *arg0, ...)
{
    const char *argv[64];
    int n = 0;
    const char *dir = getenv("TMA_BUILDDIR");
    char *exe = tma_strdup_printf("%s/tests/transport/transport_peer", dir ? dir : ".");
    argv[n++] = exe;
    argv[n++] = "--job";
    argv[n++] = PEER_JOB;
    va_list ap;
    va_start(ap, arg0);
    int has_token = 0, listens = 0;
    for (const char *a = arg0; a && n < 60; a = va_arg(ap, const char *)) {
        has_token |= !strcmp(a, "--token");
        listens |= !strcmp(a, "--listen");
        argv[n++] = a;
    }
    va_end(ap);
    if (!has_token) {
        argv[n++] = "--token";
        argv[n++] = PEER_TOKEN;
    }
    argv[n] = NULL;

    memset(p, 0, sizeof *p);
    p->out_fd = p->in_fd = -1;
    int out[2], in[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(in, O_CLOEXEC) != 0) {
        free(exe);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        free(exe);
        return -1;
    }
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(in[0], 0);
        /* Nothing else of ours (UCX sockets, other peers' pipes) may live on
         * in the child, or closing them here would not be seen there. */
        if (close_range(3, ~0u, 0) != 0)
            for (int fd = 3; fd < 4096; fd++)
                close(fd);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    free(exe);
    close(out[1]);
    close(in[0]);
    p->pid = pid;
    p->out_fd = out[0];
    p->in_fd = in[1];
    char line[256];
    if (listens) {
        if (peer_proc_expect(p, "ADDR ", timeout_s, line, sizeof line) != 0)
            goto fail;
        snprintf(p->addr, sizeof p->addr, "%.63s", line + 5);
    }
    if (peer_proc_expect(p, "READY", timeout_s, line, sizeof line) != 0)
        goto fail;
    return 0;
fail:
    fprintf(stderr, "peer_proc: the peer process did not get ready\n");
    peer_proc_kill(p);
    return -1;
}

int peer_proc_expect(peer_proc_t *p, const char *prefix, double timeout_s, char *out, size_t cap)
{
    double deadline = tma_clock_now() + timeout_s;
    for (;;) {
        char *nl;
        while ((nl = memchr(p->buf, '\n', p->len)) != NULL) {
            size_t l = (size_t)(nl - p->buf);
            *nl = '\0';
            int hit = strncmp(p->buf, prefix, strlen(prefix)) == 0;
            if (hit && out)
                snprintf(out, cap, "%s", p->buf);
            memmove(p->buf, nl + 1, p->len - l - 1);
            p->len -= l + 1;
            if (hit)
                return 0;
        }
        double left = deadline - tma_clock_now();
        if (left <= 0 || p->out_fd < 0)
            return -1;
        struct pollfd pf = {.fd = p->out_fd, .events = POLLIN};
        int r = poll(&pf, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        if (p->len == sizeof p->buf)
            p->len = 0; /* a runaway line: drop it */
        ssize_t got = read(p->out_fd, p->buf + p->len, sizeof p->buf - p->len);
        if (got <= 0)
            return -1;
        p->len += (size_t)got;
    }
}

static void peer_proc_close_fds(peer_proc_t *p)
{
    if (p->out_fd >= 0)
        close(p->out_fd);
    if (p->in_fd >= 0)
        close(p->in_fd);
    p->out_fd = p->in_fd = -1;
}

void peer_proc_kill(peer_proc_t *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
        p->pid = 0;
    }
    peer_proc_close_fds(p);
}

int peer_proc_end(peer_proc_t *p, double timeout_s)
{
    if (p->pid <= 0)
        return -1;
    if (p->in_fd >= 0) {
        close(p->in_fd);
        p->in_fd = -1;
    }
    double deadline = tma_clock_now() + timeout_s;
    for (;;) {
        int status;
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid) {
            p->pid = 0;
            peer_proc_close_fds(p);
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        if (tma_clock_now() > deadline) {
            peer_proc_kill(p);
            return -1;
        }
        tma_sleep(0.01);
    }
}

void peer_config(tma_transport_config_t *cfg, uint32_t id, const char *listen)
{
    tma_transport_config_init(cfg);
    cfg->job = PEER_JOB;
    cfg->token = PEER_TOKEN;
    cfg->self_id = id;
    cfg->listen = listen;
}

tma_transport_t *peer_transport(uint32_t id, const char *listen)
{
    tma_transport_config_t cfg;
    peer_config(&cfg, id, listen);
    tma_transport_t *t = NULL;
    if (tma_transport_create(&cfg, &t) != TMA_OK) {
        fprintf(stderr, "cannot create a transport for member %u\n", id);
        exit(99);
    }
    return t;
}

void peer_check_sole(tma_transport_t *t, uint32_t id)
{
    size_t n;
    uint32_t ids[8];
    tma_transport_peers(t, ids, 8, &n);
    ASSERT_EQ(n, 1);
    ASSERT_EQ(ids[0], id);
}

static void *peer_send_main(void *arg)
{
    peer_send_t *s = arg;
    s->st = tma_transport_send(s->t, s->peer, &s->meta, s->x, s->n, TMA_TRANSPORT_MEM_HOST, s->timeout_s);
    s->done_at = tma_clock_now();
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

void peer_send_start(peer_send_t *s)
{
    s->st = TMA_ERR_INVALID;
    s->done = 0;
    if (pthread_create(&s->thread, NULL, peer_send_main, s) != 0) {
        fprintf(stderr, "peer_send_start: cannot start a thread\n");
        exit(99);
    }
}

tma_status_t peer_send_join(peer_send_t *s)
{
    pthread_join(s->thread, NULL);
    return s->st;
}
