/*
 * etcd_local.c: a private single-member etcd for `tma launch`, started and
 * stopped with the job.  Its client and peer listeners are unix sockets in a
 * folder only the launching user may enter (0700), so no other user of the
 * machine can read or write the job's keys: there is no TCP port, no
 * password and no certificate to protect (docs/security.md says why this
 * and not etcd authentication or per-run client certificates).  etcd wants
 * unix URLs in its "host:port" form, relative to its working folder, so it
 * runs in the sockets' folder and the sockets are named NAME.sock:0.
 * Readiness is etcd's own /health endpoint, asked over the socket.
 */
#include "cli_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static int etcd_healthy(const char *socket_path)
{
    CURL *c = curl_easy_init();
    if (!c)
        return 0;
    char body[256] = "";
    curl_easy_setopt(c, CURLOPT_URL, "http://localhost/health");
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, socket_path);
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

/* A folder of this user's alone: created 0700, or an existing one made so. */
static tma_status_t private_dir(const char *dir)
{
    if (tma_mkdir_p(dir) != TMA_OK)
        return TMA_ERR_IO;
    if (chmod(dir, 0700) != 0) {
        tma_log_error(COMP, "%s: cannot make it private (chmod 700): %s", dir, strerror(errno));
        return TMA_ERR_IO;
    }
    return TMA_OK;
}

/* The longest socket path a sockaddr_un holds. */
#define SUN_PATH_MAX 107

tma_status_t cli_etcd_start(cli_etcd_t *e, const char *dir, const char *log_path)
{
    memset(e, 0, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "%s", dir);
    if (strlen(dir) + 32 >= sizeof e->dir || private_dir(dir) != TMA_OK)
        return TMA_ERR_IO;
    snprintf(e->sock_dir, sizeof e->sock_dir, "%s", dir);
    if (strlen(dir) + sizeof "/client.sock:0" - 1 > SUN_PATH_MAX) {
        /* The run folder's path is too long for a socket: a private folder in /tmp. */
        const char *tmp = getenv("TMPDIR") && strlen(getenv("TMPDIR")) < 64 ? getenv("TMPDIR") : "/tmp";
        snprintf(e->sock_dir, sizeof e->sock_dir, "%s/tma-etcd-XXXXXX", tmp);
        if (!mkdtemp(e->sock_dir)) {
            tma_log_error(COMP, "cannot make a folder for etcd's sockets in %s: %s", tmp, strerror(errno));
            e->sock_dir[0] = '\0';
            return TMA_ERR_IO;
        }
    }
    char data_dir[1100], sock[1100], peer[1100];
    snprintf(data_dir, sizeof data_dir, "%s/data", dir);
    snprintf(sock, sizeof sock, "%s/client.sock:0", e->sock_dir);
    snprintf(peer, sizeof peer, "%s/peer.sock:0", e->sock_dir);
    snprintf(e->client_url, sizeof e->client_url, "unix://%s", sock);
    /* Sockets a killed etcd left (a resumed launch starts it again on its
     * data) would stop the new one binding; one that answers is another
     * launch's, still running. */
    if (etcd_healthy(sock)) {
        tma_log_error(COMP, "an etcd already answers at %s: is another tma launch of this run folder running?", sock);
        return TMA_ERR_UNAVAILABLE;
    }
    unlink(sock);
    unlink(peer);
    char *argv[] = {"etcd", "--name", "tma", "--data-dir", data_dir,
                    "--listen-client-urls", "unix://client.sock:0", "--advertise-client-urls", "unix://client.sock:0",
                    "--listen-peer-urls", "unix://peer.sock:0", "--initial-advertise-peer-urls", "unix://peer.sock:0",
                    "--initial-cluster", "tma=unix://peer.sock:0", "--initial-cluster-state", "new",
                    "--log-level", "warn", "--logger", "zap", NULL};
    tma_status_t st = cli_proc_spawn_in(&e->proc, "etcd", argv, log_path, e->sock_dir);
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
        if (etcd_healthy(sock)) {
            tma_log_info(COMP, "private etcd at %s (data in %s)", e->client_url, data_dir);
            return TMA_OK;
        }
        tma_sleep(0.05);
    }
    if (e->proc.running) {
        cli_proc_stop(&e->proc, 2.0);
        tma_log_error(COMP, "etcd did not become healthy within 30 s");
    } else {
        tma_log_error(COMP, "the private etcd exited at start (exit %d)", cli_proc_exit_code(&e->proc));
    }
    if (log_path)
        print_log_tail(log_path);
    return TMA_ERR_UNAVAILABLE;
}

void cli_etcd_stop(cli_etcd_t *e, int keep_data)
{
    if (e->proc.pid > 0)
        cli_proc_stop(&e->proc, 5.0);
    if (e->sock_dir[0] && strcmp(e->sock_dir, e->dir) != 0)
        tma_remove_tree(e->sock_dir);
    if (!keep_data && e->dir[0])
        tma_remove_tree(e->dir);
}
