/*
 * bench_kv.c: latency of the etcd client, one request at a time, against a
 * running etcd: put, get, txn (a compare-and-swap) and watch delivery (from
 * issuing a put to the watcher's callback).  With --etcdctl it also runs
 * `etcdctl watch` (etcd's own tool, over gRPC) in one process on the same
 * keys and times when each event line reaches this program, side by side
 * with this client's watch on the very same puts.
 *
 *   bench_kv --endpoints http://127.0.0.1:2379 [-n 2000] [--etcdctl /usr/bin/etcdctl]
 *
 * Prints one line per measurement: name, count, mean, p50, p90, p99, max (µs).
 */
#include "kv_int.h" /* the parser, for the parse-only row */
#include "tma_kv.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#define WATCH_PREFIX "/bench/watch/"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *name, uint64_t *ns, int n)
{
    if (n <= 0) {
        printf("%-26s %6d  (no samples)\n", name, n);
        return;
    }
    qsort(ns, (size_t)n, sizeof(*ns), cmp_u64);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += (double)ns[i];
    printf("%-26s %6d %9.1f %9.1f %9.1f %9.1f %9.1f\n", name, n, sum / n / 1e3,
           ns[n / 2] / 1e3, ns[(int)(n * 0.9)] / 1e3, ns[(int)(n * 0.99)] / 1e3, ns[n - 1] / 1e3);
    fflush(stdout);
}

static void die_st(const char *what, tma_status_t st)
{
    fprintf(stderr, "bench_kv: %s: %s\n", what, tma_status_str(st));
    exit(1);
}

/* ------------------------------------------------------------------ watch arrival times */

typedef struct arrivals {
    int n;
    uint64_t *ns; /* arrival time of event i (0: not yet), atomic */
} arrivals_t;

static int key_index(const char *key, size_t len)
{
    size_t plen = strlen(WATCH_PREFIX);
    if (len <= plen || memcmp(key, WATCH_PREFIX, plen) != 0)
        return -1;
    int64_t v;
    char buf[32];
    size_t k = TMA_MIN(len - plen, sizeof(buf) - 1);
    memcpy(buf, key + plen, k);
    buf[k] = '\0';
    return tma_parse_i64(buf, &v) == 0 && v >= 0 && v < INT32_MAX ? (int)v : -1;
}

static void on_watch(void *arg, const tma_kv_watch_update_t *u)
{
    arrivals_t *a = arg;
    uint64_t now = tma_clock_ns();
    for (size_t i = 0; i < u->n_events; i++) {
        int k = key_index(u->events[i].kv.key, u->events[i].kv.key_len);
        if (k >= 0 && k < a->n)
            __atomic_store_n(&a->ns[k], now, __ATOMIC_RELEASE);
    }
}

/* etcdctl watch prints "PUT", the key, the value, one a line. */
typedef struct ctl_watch {
    pid_t pid;
    FILE *out;
    pthread_t th;
    arrivals_t *a;
} ctl_watch_t;

static void *ctl_reader(void *arg)
{
    ctl_watch_t *c = arg;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, c->out)) > 0) {
        uint64_t now = tma_clock_ns();
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        int k = key_index(line, (size_t)len);
        if (k >= 0 && k < c->a->n)
            __atomic_store_n(&c->a->ns[k], now, __ATOMIC_RELEASE);
    }
    free(line);
    return NULL;
}

static void ctl_start(ctl_watch_t *c, const char *etcdctl, const char *endpoints, arrivals_t *a)
{
    int fd[2];
    if (pipe(fd) != 0) {
        perror("pipe");
        exit(1);
    }
    char *eps = tma_strdup_printf("--endpoints=%s", endpoints);
    fflush(NULL);
    c->pid = fork();
    if (c->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        setenv("ETCDCTL_API", "3", 1);
        execl(etcdctl, etcdctl, eps, "watch", "--prefix", WATCH_PREFIX, (char *)NULL);
        _exit(127);
    }
    free(eps);
    close(fd[1]);
    c->out = fdopen(fd[0], "r");
    c->a = a;
    pthread_create(&c->th, NULL, ctl_reader, c);
}

static void ctl_stop(ctl_watch_t *c)
{
    kill(c->pid, SIGTERM);
    waitpid(c->pid, NULL, 0);
    pthread_join(c->th, NULL);
    fclose(c->out);
}

static int arrived(arrivals_t *a, int i)
{
    return __atomic_load_n(&a->ns[i], __ATOMIC_ACQUIRE) != 0;
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    const char *endpoints = NULL, *etcdctl = NULL;
    int n = 2000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--endpoints") == 0 && i + 1 < argc)
            endpoints = argv[++i];
        else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (strcmp(argv[i], "--etcdctl") == 0 && i + 1 < argc)
            etcdctl = argv[++i];
        else {
            fprintf(stderr, "usage: bench_kv --endpoints URLS [-n N] [--etcdctl PATH]\n");
            return 2;
        }
    }
    if (!endpoints || n < 10 || n > 1000000) {
        fprintf(stderr, "usage: bench_kv --endpoints URLS [-n N>=10] [--etcdctl PATH]\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    tma_kv_config_t cfg;
    tma_kv_config_init(&cfg);
    cfg.endpoints = endpoints;
    tma_kv_t *kv;
    tma_status_t st = tma_kv_create(&cfg, &kv);
    if (st != TMA_OK)
        die_st("create", st);
    uint64_t *ns = calloc((size_t)n, sizeof(*ns));
    char key[64], value[64];
    memset(value, 'v', sizeof(value));

    /* Warm the connection. */
    for (int i = 0; i < 50; i++) {
        if ((st = tma_kv_put(kv, "/bench/warm", value, sizeof(value), 0, NULL)) != TMA_OK)
            die_st("warm-up put", st);
    }
    printf("%-26s %6s %9s %9s %9s %9s %9s\n", "operation (µs)", "n", "mean", "p50", "p90", "p99",
           "max");

    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "/bench/put/%d", i);
        uint64_t t0 = tma_clock_ns();
        if ((st = tma_kv_put(kv, key, value, sizeof(value), 0, NULL)) != TMA_OK)
            die_st("put", st);
        ns[i] = tma_clock_ns() - t0;
    }
    report("put (64 B value)", ns, n);

    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "/bench/put/%d", i);
        tma_kv_result_t r = {0};
        uint64_t t0 = tma_clock_ns();
        if ((st = tma_kv_get(kv, key, &r)) != TMA_OK)
            die_st("get", st);
        ns[i] = tma_clock_ns() - t0;
        tma_kv_result_free(&r);
    }
    report("get (one key)", ns, n);

    int64_t rev = 0;
    if ((st = tma_kv_put(kv, "/bench/cas", "0", 1, 0, &rev)) != TMA_OK)
        die_st("put", st);
    for (int i = 0; i < n; i++) {
        uint64_t t0 = tma_clock_ns();
        if ((st = tma_kv_cas(kv, "/bench/cas", rev, value, sizeof(value), 0, &rev)) != TMA_OK)
            die_st("cas", st);
        ns[i] = tma_clock_ns() - t0;
    }
    report("txn (compare-and-swap)", ns, n);

    tma_kv_range_opts_t ro = {.flags = TMA_KV_PREFIX, .limit = 100};
    for (int i = 0; i < n; i++) {
        tma_kv_result_t r = {0};
        uint64_t t0 = tma_clock_ns();
        if ((st = tma_kv_range(kv, "/bench/put/", &ro, &r)) != TMA_OK)
            die_st("range", st);
        ns[i] = tma_clock_ns() - t0;
        tma_kv_result_free(&r);
    }
    report("range (prefix, 100 keys)", ns, n);

    /* The client's own share of a range: parsing an answer of 100 pairs
     * shaped like the ones above (no network). */
    kv_buf_t body = {0};
    kv_buf_adds(&body, "{\"header\":{\"cluster_id\":\"1\",\"member_id\":\"2\",\"revision\":"
                       "\"4000\",\"raft_term\":\"2\"},\"kvs\":[");
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "/bench/put/%d", i);
        kv_buf_adds(&body, i ? ",{\"key\":\"" : "{\"key\":\"");
        kv_buf_add_b64(&body, key, strlen(key));
        kv_buf_addf(&body, "\",\"create_revision\":\"%d\",\"mod_revision\":\"%d\",\"version\":\"1\","
                           "\"value\":\"", 100 + i, 100 + i);
        kv_buf_add_b64(&body, value, sizeof(value));
        kv_buf_adds(&body, "\"}");
    }
    kv_buf_adds(&body, "],\"more\":true,\"count\":\"2000\"}");
    for (int i = 0; i < n; i++) {
        tma_kv_result_t r = {0};
        uint64_t t0 = tma_clock_ns();
        if ((st = tma_kv_parse_result(TMA_KV_OP_RANGE, body.data, body.len, &r)) != TMA_OK)
            die_st("parse", st);
        ns[i] = tma_clock_ns() - t0;
        tma_kv_result_free(&r);
    }
    char row[64];
    snprintf(row, sizeof(row), "parse range answer (%zu kB)", body.len / 1000);
    report(row, ns, n);
    kv_buf_free(&body);

    /* Watch delivery: this client's watch and, with --etcdctl, etcdctl's,
     * both on every put of the same loop. */
    arrivals_t mine = {n, calloc((size_t)n, sizeof(uint64_t))};
    arrivals_t theirs = {n, calloc((size_t)n, sizeof(uint64_t))};
    tma_kv_watch_opts_t wo = {.flags = TMA_KV_PREFIX};
    tma_kv_watch_t *w;
    if ((st = tma_kv_watch_start(kv, WATCH_PREFIX, &wo, on_watch, &mine, &w)) != TMA_OK)
        die_st("watch", st);
    ctl_watch_t ctl = {0};
    if (etcdctl) {
        ctl_start(&ctl, etcdctl, endpoints, &theirs);
        /* etcdctl says nothing when its watch is ready: put until it sees one. */
        double deadline = tma_clock_now() + 20;
        snprintf(key, sizeof(key), "%s%d", WATCH_PREFIX, 0);
        while (!arrived(&theirs, 0)) {
            if (tma_clock_now() > deadline) {
                fprintf(stderr, "bench_kv: etcdctl watch shows nothing\n");
                return 1;
            }
            tma_kv_put(kv, key, value, sizeof(value), 0, NULL);
            tma_sleep(0.05);
        }
    }
    uint64_t *issued = calloc((size_t)n, sizeof(uint64_t));
    for (int i = 0; i < n; i++) {
        __atomic_store_n(&mine.ns[i], 0, __ATOMIC_RELEASE);
        __atomic_store_n(&theirs.ns[i], 0, __ATOMIC_RELEASE);
    }
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "%s%d", WATCH_PREFIX, i);
        issued[i] = tma_clock_ns();
        if ((st = tma_kv_put(kv, key, value, sizeof(value), 0, NULL)) != TMA_OK)
            die_st("put", st);
        double deadline = tma_clock_now() + 10;
        while (!arrived(&mine, i) || (etcdctl && !arrived(&theirs, i))) {
            if (tma_clock_now() > deadline) {
                fprintf(stderr, "bench_kv: event %d never arrived\n", i);
                return 1;
            }
            usleep(20);
        }
    }
    tma_kv_watch_stop(w);
    for (int i = 0; i < n; i++)
        ns[i] = mine.ns[i] - issued[i];
    report("watch: tma_kv (put->event)", ns, n);
    if (etcdctl) {
        ctl_stop(&ctl);
        for (int i = 0; i < n; i++)
            ns[i] = theirs.ns[i] - issued[i];
        report("watch: etcdctl (put->line)", ns, n);
    }
    tma_kv_delete(kv, "/bench/", TMA_KV_PREFIX, NULL);
    tma_kv_destroy(kv);
    free(ns);
    free(issued);
    free(mine.ns);
    free(theirs.ns);
    curl_global_cleanup();
    return 0;
}
