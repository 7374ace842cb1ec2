/*
 * peer_proc.h: starting, reading and ending transport_peer processes from a
 * C test, and a send from a thread of its own.  Every process started here is ended by peer_proc_kill() or
 * peer_proc_end(); a test calls one of them on every path.
 */
#ifndef TMA_PEER_PROC_H
#define TMA_PEER_PROC_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "tma_transport.h"

typedef struct peer_proc {
    pid_t pid;
    int out_fd; /* its stdout */
    int in_fd;  /* its stdin: closing it asks it to exit */
    char buf[4096];
    size_t len;
    char addr[64]; /* from its "ADDR" line, when it listens */
} peer_proc_t;

/* Starts tests/transport/transport_peer with the given arguments (NULL
 * terminated; --job and --token of the tests are added).  Waits for its
 * READY line (and ADDR, when it listens) up to timeout_s; 0 on success. */
int peer_proc_start(peer_proc_t *p, double timeout_s, const char *arg0, ...);
/* Reads lines until one starts with `prefix`; copies it to out.  0 found,
 * -1 on timeout or end of output. */
int peer_proc_expect(peer_proc_t *p, const char *prefix, double timeout_s, char *out, size_t cap);
/* SIGKILLs it and reaps it. */
void peer_proc_kill(peer_proc_t *p);
/* Closes its stdin and waits up to timeout_s for it to exit (then kills
 * it); returns its exit status, or -1 when it had to be killed. */
int peer_proc_end(peer_proc_t *p, double timeout_s);
/* The tests' job name and token. */
#define PEER_JOB "tma-test"
#define PEER_TOKEN "s3cret-token"
/* Sets UCX_NET_DEVICES=lo (unless set) so everything stays on loopback. */
void peer_env_setup(void);

/* A configuration with the tests' job and token, member id and listener. */
void peer_config(tma_transport_config_t *cfg, uint32_t id, const char *listen);
/* A transport from peer_config; the test fails hard if it cannot be made. */
tma_transport_t *peer_transport(uint32_t id, const char *listen);

/* Checks that t has one peer, member id `id` (fails the test otherwise). */
void peer_check_sole(tma_transport_t *t, uint32_t id);

/* tma_transport_send(t, peer, &meta, x, n, host memory, timeout_s) in a
 * thread of its own, for a test that acts while the send is in flight. */
typedef struct peer_send {
    tma_transport_t *t;
    uint32_t peer;
    tma_transport_meta_t meta;
    const float *x;
    size_t n;
    double timeout_s;
    tma_status_t st; /* the send's status, once done */
    double done_at;  /* when the send returned */
    int done;        /* 1 once it returned (read with __atomic_load_n) */
    pthread_t thread;
} peer_send_t;
/* Starts the send s describes (the fields up to timeout_s). */
void peer_send_start(peer_send_t *s);
/* Waits for the send to return; its status. */
tma_status_t peer_send_join(peer_send_t *s);

#endif
