/*
 * etcd_local.c: a private single-member etcd for `tma launch`, on free
 * loopback ports with its own data directory, started and stopped with the
 * job.  Readiness is etcd's own /health endpoint.
 */
#include "cli_int.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP "launch"

static size_t collect(char *data, size_t size, size_t nmemb, void *arg)
{
    char *buf = arg;
    size_t have = strlen(buf), n = size * nmemb;
    if (have + n < 255) {
        memcpy(buf + have, data, n);
        buf[have + n] = '\0';
    }
    return size * nmemb;
}

static int etcd_healthy(const char *client_url)
{
    CURL *c = curl_easy_init();
    if (!c)
        return 0;
    char url[160], body[256] = "";
    snprintf(url, sizeof url, "%s/health", client_url);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 1000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, (void *)body);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    return rc == CURLE_OK && code == 200 && strstr(body, "\"true\"") != NULL;
}

static void print_log_tail(const char *log_path)
{
    char *text;
    size_t len;
    if (tma_file_read_all(log_path, &text, &len) != TMA_OK)
        return;
    const char *start = len > 1500 ? text + len - 1500 : text;
    tma_log_error(COMP, "last lines of %s:\n%s", log_path, start);
    free(text);
}

tma_status_t cli_etcd_start(cli_etcd_t *e, const char *data_dir, const char *log_path)
{
    memset(e, 0, sizeof *e);
    snprintf(e->data_dir, sizeof e->data_dir, "%s", data_dir);
    tma_status_t st = TMA_ERR_UNAVAILABLE;
    /* The free ports can be taken between probing and binding: retry. */
    for (int attempt = 0; attempt < 3; attempt++) {
        int cport, pport;
        if (cli_free_port("127.0.0.1", &cport) != TMA_OK || cli_free_port("127.0.0.1", &pport) != TMA_OK ||
            cport == pport)
            continue;
        snprintf(e->client_url, sizeof e->client_url, "http://127.0.0.1:%d", cport);
        char peer_url[64], cluster[96];
        snprintf(peer_url, sizeof peer_url, "http://127.0.0.1:%d", pport);
        snprintf(cluster, sizeof cluster, "tma=%s", peer_url);
        char *argv[] = {"etcd", "--name", "tma", "--data-dir", e->data_dir,
                        "--listen-client-urls", e->client_url, "--advertise-client-urls", e->client_url,
                        "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                        "--initial-cluster", cluster, "--initial-cluster-state", "new",
                        "--log-level", "warn", "--logger", "zap", NULL};
        st = cli_proc_spawn(&e->proc, "etcd", argv, log_path);
        if (st == TMA_ERR_NOT_FOUND) {
            tma_log_error(COMP, "the etcd program was not found on PATH: install the Debian package "
                                "etcd-server, or pass --etcd URL to use an etcd that is already running");
            return st;
        }
        if (st != TMA_OK)
            return st;
        double end = tma_clock_now() + 30.0;
        while (tma_clock_now() < end) {
            if (!cli_proc_poll(&e->proc))
                break;
            if (etcd_healthy(e->client_url)) {
                tma_log_info(COMP, "private etcd at %s (data in %s)", e->client_url, e->data_dir);
                return TMA_OK;
            }
            tma_sleep(0.05);
        }
        if (e->proc.running) {
            cli_proc_stop(&e->proc, 2.0);
            tma_log_error(COMP, "etcd did not become healthy within 30 s");
            print_log_tail(log_path);
            return TMA_ERR_TIMEOUT;
        }
        tma_log_warn(COMP, "etcd exited at start (exit %d); retrying on other ports",
                     cli_proc_exit_code(&e->proc));
        tma_remove_tree(e->data_dir);
    }
    tma_log_error(COMP, "could not start a private etcd");
    if (log_path)
        print_log_tail(log_path);
    return st == TMA_OK ? TMA_ERR_UNAVAILABLE : st;
}

void cli_etcd_stop(cli_etcd_t *e, int keep_data)
{
    if (e->proc.pid > 0)
        cli_proc_stop(&e->proc, 5.0);
    if (!keep_data && e->data_dir[0])
        tma_remove_tree(e->data_dir);
}
