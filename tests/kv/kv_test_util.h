/*
 * kv_test_util.h: pieces shared by the kv tests that run against a real
 * etcd: their start and end, a client with chosen timeouts, a watch recorder that keeps every
 * update it receives, and a lease-loss recorder.
 */
#ifndef TMA_KV_TEST_UTIL_H
#define TMA_KV_TEST_UTIL_H

#include <pthread.h>

#include "tma_kv.h"
#include "tma_test.h"
#include "tma_test_etcd.h"

/* A client for the endpoints; stops the test when it cannot be made. */
tma_kv_t *kvt_connect(const char *endpoints, double request_timeout_s);

/* The start of a test against real etcd members: valgrind's re-run
 * (tma_test_under_valgrind), curl's global state, an etcd of `members`
 * members into *etcd_p, and a client of it with the request timeout. */
tma_kv_t *kvt_start(int argc, char **argv, int members, double request_timeout_s, tma_test_etcd_t **etcd_p);
/* The end: stops the members and curl's global state; the exit status. */
int kvt_finish(tma_test_etcd_t *etcd);

/* The whole of a test against one etcd member: kvt_start, each of tests[0..n)
 * in order with the client, the client destroyed, then `after` (may be
 * NULL), kvt_finish.  Returns the exit status. */
typedef void kvt_test_fn(tma_kv_t *kv);
int kvt_run(int argc, char **argv, double request_timeout_s, kvt_test_fn *const *tests, size_t n, void (*after)(void),
            tma_test_etcd_t **etcd_p);

typedef struct kvt_event {
    tma_kv_event_type_t type;
    char key[96];
    char value[96];
    int64_t mod_revision;
    int has_prev;
    char prev_value[96];
} kvt_event_t;

/* Records what a watch delivers.  Thread-safe. */
typedef struct kvt_recorder {
    pthread_mutex_t mu;
    kvt_event_t *ev;
    size_t n, cap;
    size_t n_updates;
    size_t out_of_order; /* events whose revision went backwards */
    tma_status_t end_status; /* TMA_OK until an update ends the watch */
    int64_t compact_revision;
    size_t want;             /* for kvt_wait_events */
    tma_kv_watch_t *stop_on_event; /* stopped from inside the callback when set */
} kvt_recorder_t;

void kvt_recorder_init(kvt_recorder_t *r);
void kvt_recorder_free(kvt_recorder_t *r);
/* The tma_kv_watch_fn to pass with the recorder as arg. */
void kvt_recorder_fn(void *arg, const tma_kv_watch_update_t *u);
size_t kvt_recorder_count(kvt_recorder_t *r);
/* Waits until the recorder holds n events; 1 when it does. */
int kvt_wait_events(kvt_recorder_t *r, size_t n, double seconds);
/* Waits until an update ended the watch; 1 when one did. */
int kvt_wait_end(kvt_recorder_t *r, double seconds);

/* Records lease losses. */
typedef struct kvt_lost {
    int calls;       /* atomic */
    int64_t lease;
    tma_status_t why;
} kvt_lost_t;
void kvt_lost_fn(void *arg, int64_t lease, tma_status_t why);
int kvt_lost_calls(kvt_lost_t *l);

/* 1 when key exists (stops the test on a request failure). */
int kvt_exists(tma_kv_t *kv, const char *key);

#endif
