/*
 * tma_test_etcd.c: starts, kills and restarts real etcd members for tests
 * (see tma_test_etcd.h).  The pids of live members are kept in a small
 * process-wide table so an atexit handler can end them when a test fails
 * and exits early: this is test code, where that is the point.
 */
#include "tma_test_etcd.h"
#include "tma_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#define MAX_MEMBERS 9
#define MAX_LIVE 64

typedef struct member {
    int client_port, peer_port;
    char *url;  /* client URL */
    char *dir;  /* data folder */
    char *log;  /* stdout + stderr of the process */
    pid_t pid;  /* 0 when not running */
} member_t;

struct tma_test_etcd {
    int n;
    char *root;
    char *endpoints;
    char *initial_cluster;
    char *token;
    const tma_test_tls_t *tls;
    const char *const *extra_args;
    member_t m[MAX_MEMBERS];
};

/* ------------------------------------------------------------------ process table */

static pid_t live_pids[MAX_LIVE];
static int atexit_armed;

static void kill_live(void)
{
    for (int i = 0; i < MAX_LIVE; i++) {
        if (live_pids[i] > 0) {
            kill(live_pids[i], SIGKILL);
            waitpid(live_pids[i], NULL, 0);
            live_pids[i] = 0;
        }
    }
}

static void live_add(pid_t pid)
{
    if (!atexit_armed) {
        atexit(kill_live);
        atexit_armed = 1;
    }
    for (int i = 0; i < MAX_LIVE; i++) {
        if (live_pids[i] == 0) {
            live_pids[i] = pid;
            return;
        }
    }
    fprintf(stderr, "tma_test_etcd: more than %d live members\n", MAX_LIVE);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    exit(99);
}

static void live_remove(pid_t pid)
{
    for (int i = 0; i < MAX_LIVE; i++) {
        if (live_pids[i] == pid)
            live_pids[i] = 0;
    }
}

/* ------------------------------------------------------------------ helpers */

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tma_test_etcd: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(99);
}

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        die("out of memory");
    va_end(ap);
    return s;
}

int tma_test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket: %s", strerror(errno));
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        die("bind 127.0.0.1:0: %s", strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

static void print_log_tail(const member_t *m)
{
    char *text = NULL;
    size_t len = 0;
    if (tma_file_read_all(m->log, &text, &len) != TMA_OK)
        return;
    size_t from = len > 4000 ? len - 4000 : 0;
    fprintf(stderr, "---- %s (last %zu bytes)\n%s\n----\n", m->log, len - from, text + from);
    free(text);
}

static void run_or_die(const char *cmd)
{
    int rc = system(cmd);
    if (rc != 0)
        die("command failed (%d): %s", rc, cmd);
}

/* ------------------------------------------------------------------ TLS material */

void tma_test_tls_make(const char *dir, tma_test_tls_t *tls)
{
    memset(tls, 0, sizeof(*tls));
    tls->ca = xprintf("%s/ca.pem", dir);
    tls->server_cert = xprintf("%s/server.pem", dir);
    tls->server_key = xprintf("%s/server.key", dir);
    tls->client_cert = xprintf("%s/client.pem", dir);
    tls->client_key = xprintf("%s/client.key", dir);
    tls->client_cn_cert = xprintf("%s/client-cn.pem", dir);
    tls->client_cn_key = xprintf("%s/client-cn.key", dir);
    tls->other_ca = xprintf("%s/other-ca.pem", dir);
    char *ext_srv = xprintf("%s/server.ext", dir), *ext_cli = xprintf("%s/client.ext", dir);
    FILE *f = fopen(ext_srv, "w");
    if (!f)
        die("cannot write %s", ext_srv);
    fprintf(f, "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
               "extendedKeyUsage=serverAuth,clientAuth\n");
    fclose(f);
    f = fopen(ext_cli, "w");
    if (!f)
        die("cannot write %s", ext_cli);
    fprintf(f, "extendedKeyUsage=clientAuth\n");
    fclose(f);
    const char *key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    char *cmds[] = {
        xprintf("cd '%s' && openssl req -x509 %s -keyout ca.key -out ca.pem -days 2 "
                "-subj /CN=tma-test-ca", dir, key),
        xprintf("cd '%s' && openssl req -x509 %s -keyout other-ca.key -out other-ca.pem -days 2 "
                "-subj /CN=tma-test-other-ca", dir, key),
        xprintf("cd '%s' && openssl req %s -keyout server.key -out server.csr -subj /CN=127.0.0.1 "
                "&& openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
                "-out server.pem -days 2 -extfile server.ext", dir, key),
        xprintf("cd '%s' && openssl req %s -keyout client.key -out client.csr "
                "-subj /O=tma-test && openssl x509 -req -in client.csr -CA ca.pem "
                "-CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile client.ext",
                dir, key),
        xprintf("cd '%s' && openssl req %s -keyout client-cn.key -out client-cn.csr "
                "-subj /CN=tma-test-client && openssl x509 -req -in client-cn.csr -CA ca.pem "
                "-CAkey ca.key -CAcreateserial -out client-cn.pem -days 2 -extfile client.ext",
                dir, key),
    };
    for (size_t i = 0; i < TMA_ARRAY_LEN(cmds); i++) {
        char *quiet = xprintf("(%s) >/dev/null 2>&1 || (%s)", cmds[i], cmds[i]);
        run_or_die(quiet);
        free(quiet);
        free(cmds[i]);
    }
    free(ext_srv);
    free(ext_cli);
}

void tma_test_tls_free(tma_test_tls_t *tls)
{
    free(tls->ca);
    free(tls->server_cert);
    free(tls->server_key);
    free(tls->client_cert);
    free(tls->client_key);
    free(tls->client_cn_cert);
    free(tls->client_cn_key);
    free(tls->other_ca);
    memset(tls, 0, sizeof(*tls));
}

/* ------------------------------------------------------------------ members */

static const char *etcd_bin(void)
{
    const char *b = getenv("TMA_ETCD");
    if (!b || !*b)
        die("TMA_ETCD is not set (configure found no etcd; install etcd-server)");
    return b;
}

static void spawn_member(tma_test_etcd_t *e, int i)
{
    member_t *m = &e->m[i];
    const char *scheme = e->tls ? "https" : "http";
    char *name = xprintf("m%d", i);
    char *client = xprintf("%s://127.0.0.1:%d", scheme, m->client_port);
    char *peer = xprintf("http://127.0.0.1:%d", m->peer_port);
    const char *args[64];
    int k = 0;
    args[k++] = etcd_bin();
    args[k++] = "--name";
    args[k++] = name;
    args[k++] = "--data-dir";
    args[k++] = m->dir;
    args[k++] = "--listen-client-urls";
    args[k++] = client;
    args[k++] = "--advertise-client-urls";
    args[k++] = client;
    args[k++] = "--listen-peer-urls";
    args[k++] = peer;
    args[k++] = "--initial-advertise-peer-urls";
    args[k++] = peer;
    args[k++] = "--initial-cluster";
    args[k++] = e->initial_cluster;
    args[k++] = "--initial-cluster-token";
    args[k++] = e->token;
    args[k++] = "--initial-cluster-state=new";
    /* Quick elections keep failover tests short on a loaded machine. */
    args[k++] = "--heartbeat-interval=50";
    args[k++] = "--election-timeout=500";
    args[k++] = "--logger=zap";
    args[k++] = "--log-outputs=stderr";
    args[k++] = "--log-level=warn";
    if (e->tls) {
        args[k++] = "--cert-file";
        args[k++] = e->tls->server_cert;
        args[k++] = "--key-file";
        args[k++] = e->tls->server_key;
        args[k++] = "--trusted-ca-file";
        args[k++] = e->tls->ca;
        args[k++] = "--client-cert-auth";
    }
    for (const char *const *x = e->extra_args; x && *x && k < 62; x++)
        args[k++] = *x;
    args[k] = NULL;

    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        FILE *log = freopen(m->log, "a", stdout);
        if (!log || dup2(fileno(stdout), 2) < 0)
            _exit(126);
        execv(args[0], (char *const *)args);
        fprintf(stderr, "exec %s: %s\n", args[0], strerror(errno));
        _exit(127);
    }
    m->pid = pid;
    live_add(pid);
    free(name);
    free(client);
    free(peer);
}

int tma_test_etcd_healthy(const tma_test_etcd_t *e, int i)
{
    const member_t *m = &e->m[i];
    char body[256] = "";
    /* libcurl's default writer fwrite()s to WRITEDATA: a memory stream. */
    FILE *mem = fmemopen(body, sizeof(body) - 1, "w");
    CURL *h = curl_easy_init();
    char *url = xprintf("%s/health", m->url);
    int ok = 0;
    if (mem && h) {
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 1000L);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, mem);
        if (e->tls) {
            curl_easy_setopt(h, CURLOPT_CAINFO, e->tls->ca);
            curl_easy_setopt(h, CURLOPT_SSLCERT, e->tls->client_cert);
            curl_easy_setopt(h, CURLOPT_SSLKEY, e->tls->client_key);
        }
        CURLcode cc = curl_easy_perform(h);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        fflush(mem);
        ok = cc == CURLE_OK && code == 200 && strstr(body, "\"health\":\"true\"") != NULL;
    }
    if (mem)
        fclose(mem);
    if (h)
        curl_easy_cleanup(h);
    free(url);
    return ok;
}

/* Waits until members [from, to) are healthy; returns -1 (with the log of
 * the member at fault printed) when one exits or the deadline passes. */
static int wait_healthy(tma_test_etcd_t *e, int from, int to, double seconds)
{
    double deadline = tma_clock_now() + seconds;
    for (;;) {
        int all = 1;
        for (int i = from; i < to; i++) {
            member_t *m = &e->m[i];
            int status;
            if (m->pid > 0 && waitpid(m->pid, &status, WNOHANG) == m->pid) {
                fprintf(stderr, "tma_test_etcd: member %d exited during start-up (status %d)\n", i,
                        status);
                live_remove(m->pid);
                m->pid = 0;
                print_log_tail(m);
                return -1;
            }
            if (!tma_test_etcd_healthy(e, i))
                all = 0;
        }
        if (all)
            return 0;
        if (tma_clock_now() > deadline) {
            fprintf(stderr, "tma_test_etcd: members not healthy after %.0f s\n", seconds);
            for (int i = from; i < to; i++)
                print_log_tail(&e->m[i]);
            return -1;
        }
        tma_sleep(0.05);
    }
}

static void kill_member(member_t *m)
{
    if (m->pid > 0) {
        kill(m->pid, SIGKILL);
        waitpid(m->pid, NULL, 0);
        live_remove(m->pid);
        m->pid = 0;
    }
}

static void free_layout(tma_test_etcd_t *e)
{
    for (int i = 0; i < e->n; i++) {
        free(e->m[i].url);
        free(e->m[i].dir);
        free(e->m[i].log);
        e->m[i].url = e->m[i].dir = e->m[i].log = NULL;
    }
    free(e->endpoints);
    free(e->initial_cluster);
    e->endpoints = e->initial_cluster = NULL;
}

/* Picks ports and folders for every member. */
static void layout(tma_test_etcd_t *e, int attempt)
{
    const char *scheme = e->tls ? "https" : "http";
    size_t cap = 64 * (size_t)e->n;
    e->endpoints = calloc(1, cap);
    e->initial_cluster = calloc(1, cap);
    if (!e->endpoints || !e->initial_cluster)
        die("out of memory");
    for (int i = 0; i < e->n; i++) {
        member_t *m = &e->m[i];
        m->client_port = tma_test_free_port();
        do
            m->peer_port = tma_test_free_port();
        while (m->peer_port == m->client_port);
        m->url = xprintf("%s://127.0.0.1:%d", scheme, m->client_port);
        m->dir = xprintf("%s/m%d-try%d", e->root, i, attempt);
        m->log = xprintf("%s/m%d-try%d.log", e->root, i, attempt);
        snprintf(e->endpoints + strlen(e->endpoints), cap - strlen(e->endpoints), "%s%s",
                 i ? "," : "", m->url);
        snprintf(e->initial_cluster + strlen(e->initial_cluster),
                 cap - strlen(e->initial_cluster), "%sm%d=http://127.0.0.1:%d", i ? "," : "", i,
                 m->peer_port);
    }
}

tma_test_etcd_t *tma_test_etcd_start(int n, const tma_test_etcd_opts_t *opts)
{
    if (n < 1 || n > MAX_MEMBERS)
        die("tma_test_etcd_start: %d members (1..%d)", n, MAX_MEMBERS);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    tma_test_etcd_t *e = calloc(1, sizeof(*e));
    if (!e)
        die("out of memory");
    e->n = n;
    e->root = tma_test_tmpdir("etcd");
    e->token = xprintf("tma-test-%d", (int)getpid());
    if (opts) {
        e->tls = opts->tls;
        e->extra_args = opts->extra_args;
    }
    /* A port picked as free can be taken before etcd binds it: try again
     * with fresh ports. */
    for (int attempt = 0; attempt < 3; attempt++) {
        layout(e, attempt);
        for (int i = 0; i < n; i++)
            spawn_member(e, i);
        if (wait_healthy(e, 0, n, 60) == 0)
            return e;
        for (int i = 0; i < n; i++)
            kill_member(&e->m[i]);
        free_layout(e);
    }
    die("could not start a %d-member etcd cluster (logs above)", n);
}

const char *tma_test_etcd_endpoints(const tma_test_etcd_t *e)
{
    return e->endpoints;
}

const char *tma_test_etcd_endpoint(const tma_test_etcd_t *e, int i)
{
    return e->m[i].url;
}

pid_t tma_test_etcd_pid(const tma_test_etcd_t *e, int i)
{
    return e->m[i].pid;
}

void tma_test_etcd_kill(tma_test_etcd_t *e, int i)
{
    kill_member(&e->m[i]);
}

void tma_test_etcd_restart(tma_test_etcd_t *e, int i)
{
    kill_member(&e->m[i]);
    spawn_member(e, i);
    if (wait_healthy(e, i, i + 1, 60) != 0)
        die("member %d did not come back on %s", i, e->m[i].dir);
}

void tma_test_etcd_stop(tma_test_etcd_t *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->n; i++)
        kill_member(&e->m[i]);
    free_layout(e);
    tma_test_cleanup_dir(e->root);
    free(e->token);
    free(e);
    curl_global_cleanup();
}

int tma_test_etcdctl(const tma_test_etcd_t *e, const char *arg, ...)
{
    const char *bin = getenv("TMA_ETCDCTL");
    if (!bin || !*bin)
        die("TMA_ETCDCTL is not set (configure found no etcdctl; install etcd-client)");
    const char *args[64];
    int k = 0;
    char *eps = xprintf("--endpoints=%s", e->endpoints);
    args[k++] = bin;
    args[k++] = eps;
    if (e->tls) {
        args[k++] = "--cacert";
        args[k++] = e->tls->ca;
        args[k++] = "--cert";
        args[k++] = e->tls->client_cert;
        args[k++] = "--key";
        args[k++] = e->tls->client_key;
    }
    va_list ap;
    va_start(ap, arg);
    for (const char *a = arg; a && k < 63; a = va_arg(ap, const char *))
        args[k++] = a;
    va_end(ap);
    args[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        free(eps);
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        setenv("ETCDCTL_API", "3", 1);
        if (!freopen("/dev/null", "w", stdout))
            _exit(126);
        execv(bin, (char *const *)args);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    free(eps);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
