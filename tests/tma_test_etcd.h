/*
 * tma_test_etcd.h: real etcd clusters for tests.  tma_test_etcd_start()
 * runs N members of the etcd binary in $TMA_ETCD on free loopback ports,
 * each with its own data folder under a fresh temporary folder, and waits
 * until every member answers /health.  Members can be killed (SIGKILL) and
 * restarted on the same data folder and ports.
 *
 * Every process started here is also killed when the test process exits
 * (atexit) and, should the test crash or be killed, by the kernel
 * (PR_SET_PDEATHSIG): start clusters from the main thread.  Any failure to
 * start is a hard test error (exit 99) with the member's log on stderr.
 */
#ifndef TMA_TEST_ETCD_H
#define TMA_TEST_ETCD_H

#include <sys/types.h>

/* Certificates made with openssl for a TLS test. */
typedef struct tma_test_tls {
    char *ca;          /* the CA that signed the server and client certificates */
    char *server_cert; /* for 127.0.0.1 / localhost, server and client auth */
    char *server_key;
    char *client_cert; /* no Common Name (O=tma-test): etcd 3.4's gateway refuses
                          client certificates with one once auth is enabled */
    char *client_key;
    char *client_cn_cert; /* CN=tma-test-client */
    char *client_cn_key;
    char *other_ca;    /* an unrelated CA: verifying the server with it must fail */
} tma_test_tls_t;

/* Makes the certificates in dir (which must exist). */
void tma_test_tls_make(const char *dir, tma_test_tls_t *tls);
void tma_test_tls_free(tma_test_tls_t *tls);

typedef struct tma_test_etcd_opts {
    /* When set, client URLs are https:// with these certificates and client
     * certificates are required (--client-cert-auth). */
    const tma_test_tls_t *tls;
    /* More etcd flags, NULL-terminated (e.g. "--auth-token-ttl=2"). */
    const char *const *extra_args;
} tma_test_etcd_opts_t;

typedef struct tma_test_etcd tma_test_etcd_t;

/* Starts n members (1..9); opts may be NULL. */
tma_test_etcd_t *tma_test_etcd_start(int n, const tma_test_etcd_opts_t *opts);
/* The comma-separated client URLs of every member. */
const char *tma_test_etcd_endpoints(const tma_test_etcd_t *e);
/* Member i's client URL. */
const char *tma_test_etcd_endpoint(const tma_test_etcd_t *e, int i);
pid_t tma_test_etcd_pid(const tma_test_etcd_t *e, int i);
/* SIGKILLs member i and reaps it. */
void tma_test_etcd_kill(tma_test_etcd_t *e, int i);
/* Starts member i again on its data folder and ports; waits until healthy. */
void tma_test_etcd_restart(tma_test_etcd_t *e, int i);
/* 1 when member i answers /health with true. */
int tma_test_etcd_healthy(const tma_test_etcd_t *e, int i);
/* Kills every member and removes the folders; accepts NULL. */
void tma_test_etcd_stop(tma_test_etcd_t *e);

/* Runs $TMA_ETCDCTL against the cluster (with its TLS flags) with the
 * NULL-terminated arguments; returns its exit status (-1: could not run). */
int tma_test_etcdctl(const tma_test_etcd_t *e, const char *arg, ...) __attribute__((sentinel));

/* A TCP port on 127.0.0.1 that was free a moment ago. */
int tma_test_free_port(void);

#endif
