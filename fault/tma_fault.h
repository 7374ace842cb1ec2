/*
 * tma_fault.h: how a job survives failures: leases that survive etcd
 * outages, membership (leased member keys with ids never reused), the shard
 * map with its recovery policies, and the failure-injection points.  The
 * job's config, keys, records and view are in tma_job.h, one layer down;
 * docs/faults.md describes the guarantees.
 *
 * Thread-safety: shard maps are plain values; functions on them are pure.
 * A membership object may be used from any thread.  The injection object is
 * read-only after creation.
 */
#ifndef TMA_FAULT_H
#define TMA_FAULT_H

#include <stdint.h>

#include "tma_common.h"
#include "tma_job.h"
#include "tma_kv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ leases that survive etcd outages */

/*
 * Keeps a lease alive (tma_kv_lease_keep) and tells the owner it is lost
 * only when etcd confirms it: when no endpoint could renew it (etcd down),
 * the guard keeps asking etcd for its time to live, and keeps it again if
 * it survived (a restarted cluster refreshes its leases).  Meanwhile the
 * lease is "silent": etcd has not answered for longer than its TTL, so the
 * owner must presume it lost (etcd may well have expired it) and stop doing
 * work that counts only under it, until etcd answers.  Thread-safe.
 */
typedef struct tma_lease_guard tma_lease_guard_t;
typedef void (*tma_lease_lost_fn)(void *arg, tma_status_t why);

tma_status_t tma_lease_guard_start(tma_kv_t *kv, int64_t lease, tma_lease_lost_fn lost_fn, void *arg,
                                   tma_lease_guard_t **g_p);
/* Stops renewing (the lease then expires by itself unless revoked); accepts NULL. */
void tma_lease_guard_stop(tma_lease_guard_t *g);
/* 1 while etcd has not answered for longer than the lease's TTL (the kv
 * keeper gave up renewing it and the guard is asking etcd), else 0.  A
 * lock-free read for a training loop. */
int tma_lease_guard_silent(const tma_lease_guard_t *g);
/* Injected stall: no renewals for `seconds`, then checks with etcd and
 * keeps the lease again if it is still there. */
void tma_lease_guard_stall(tma_lease_guard_t *g, double seconds);

/* ------------------------------------------------------------------ membership (worker side) */

typedef struct tma_member tma_member_t;

/* Called once, on the kv keeper thread, when the member's lease is lost
 * (expired, or no endpoint could renew it in time): the worker has been
 * fenced and must stop training and register again. */
typedef void (*tma_member_lost_fn)(void *arg, tma_status_t why);

/*
 * Registers a worker: grants a lease of ttl seconds kept alive in the
 * background, takes a fresh member id from the job's counter (ids are never
 * reused, so a re-registered worker is a new member and nothing it sent
 * before can be counted again), and writes members/<id> bound to the lease.
 * rec supplies name, host, pid, device and backup; its id and lease are
 * filled in.  The caller owns *m_p (tma_member_leave).
 */
tma_status_t tma_member_join(tma_kv_t *kv, const char *job, int64_t ttl, tma_job_member_rec_t *rec,
                             tma_member_lost_fn lost_fn, void *arg, tma_member_t **m_p);
/* Rewrites members/<id> (same id and lease) from rec, e.g. with the device
 * the worker chose once it knew its id.  Logged on failure. */
tma_status_t tma_member_update(tma_member_t *m, const char *job, tma_job_member_rec_t *rec);
/* Revokes the lease (its keys vanish at once) and frees m.  Accepts NULL. */
void tma_member_leave(tma_member_t *m);
/* Frees m without revoking: the lease expires by itself (a fenced worker). */
void tma_member_abandon(tma_member_t *m);
/* Stops renewing the lease for `seconds`, then renews again (an injected
 * stall); if the lease expired meanwhile, the lost callback runs. */
void tma_member_stall_keepalive(tma_member_t *m, double seconds);
/* 1 while etcd has not answered for longer than the member's lease TTL
 * (tma_lease_guard_silent): the worker presumes its lease lost and stops
 * training until etcd answers, when it goes on (the lease survived) or is
 * fenced (it did not).  Lock-free. */
int tma_member_silent(const tma_member_t *m);

/* ------------------------------------------------------------------ the shard map and the policies */

/* A member that refused a shard dealt to it (its file is missing or wrong
 * on the member's node): no policy deals that shard to it again. */
typedef struct tma_shard_refusal {
    int32_t shard;
    int64_t member;
} tma_shard_refusal_t;

typedef struct tma_shard_map {
    int n;           /* shards */
    int64_t *owner;  /* [n]: member id, or -1 when nobody trains it */
    int64_t *edges;  /* [n]: training edges (load and averaging weight) */
    tma_shard_refusal_t *refusals; /* [n_refusals] */
    int n_refusals, cap_refusals;
} tma_shard_map_t;

/* What the coordinator knows of a live member. */
typedef struct tma_live_member {
    uint32_t id;
    int backup;
} tma_live_member_t;

typedef struct tma_shard_move {
    int32_t shard;
    int64_t from; /* -1: was orphaned */
    int64_t to;   /* -1: dropped */
} tma_shard_move_t;

/* Allocates a map of n orphaned shards with the given edge counts. */
tma_status_t tma_shard_map_create(int n, const int64_t *edges, tma_shard_map_t *map_p);
void tma_shard_map_free(tma_shard_map_t *map);
/* Shards and training edges a member owns. */
int tma_shard_map_count(const tma_shard_map_t *map, int64_t member, int64_t *edges_p);
/* Records that `member` refused `shard`: 1 when new, 0 when known already,
 * -1 out of memory. */
int tma_shard_map_refuse(tma_shard_map_t *map, int32_t shard, int64_t member);
/* 1 when `member` refused `shard`. */
int tma_shard_map_refused(const tma_shard_map_t *map, int32_t shard, int64_t member);
/* Forgets the refusals of a member that is gone. */
void tma_shard_map_forget(tma_shard_map_t *map, int64_t member);

/* The initial deal: trainer slot i (0 <= i < workers) is the i-th non-backup
 * member by id, and shard k goes to slot k mod workers; the shards of slots
 * no member filled (fewer came than `workers`) stay orphaned.  Writes the
 * moves (at most map->n) and returns their count. */
int tma_policy_initial(tma_shard_map_t *map, const tma_live_member_t *live, int n_live, int workers,
                       tma_shard_move_t *moves);
/* The same with some shards absent from the start (fault.absent_shards):
 * they are left orphaned and the others are dealt to workers - n_absent
 * slots. */
int tma_policy_initial_absent(tma_shard_map_t *map, const tma_live_member_t *live, int n_live, int workers,
                              const int32_t *absent, int n_absent, tma_shard_move_t *moves);
/* A member is gone: its shards are dropped (continue) or handed to a backup
 * that owns nothing (lowest id first), else to the live member with the
 * fewest training edges (reassign).  Returns the number of moves. */
int tma_policy_lost(tma_shard_map_t *map, int64_t lost, tma_job_policy_t policy, const tma_live_member_t *live,
                    int n_live, tma_shard_move_t *moves);
/* The owner of `shard` refused it (its file is missing on the owner's
 * node; recorded with tma_shard_map_refuse first): whatever the policy, it
 * goes to a backup that owns nothing, else to the live member with the
 * fewest training edges, among the members that did not refuse it; to
 * nobody (-1, orphaned) when every live member did.  Returns the number of
 * moves (0 when its owner did not refuse it). */
int tma_policy_refused(tma_shard_map_t *map, int32_t shard, const tma_live_member_t *live, int n_live,
                       tma_shard_move_t *moves);
/* A member joined (or became idle): it takes every orphaned shard if it is a
 * backup under reassign, else one orphaned shard, else one shard from the
 * member that owns the most shards when that member owns more than one;
 * never a shard it refused.  Returns the number of moves (0: it stays
 * idle, as a spare).  Every policy skips the shards a member refused. */
int tma_policy_joined(tma_shard_map_t *map, int64_t joined, int backup, tma_job_policy_t policy,
                      tma_shard_move_t *moves);

/* ------------------------------------------------------------------ failure injection */

/*
 * Injection points for tests and drills, inert unless set through the
 * TMA_FAULT environment variable or the hidden --fault flag (docs/faults.md):
 *   crash=POINT@ROUND    SIGKILL this process at POINT in round ROUND, where
 *                        POINT is one of: step (a worker, at the first step
 *                        of that round), send (a worker, before sending its
 *                        weights), recv (a worker, after sending, before the
 *                        global weights arrive), aggregate (the coordinator,
 *                        after receiving, before averaging), broadcast (the
 *                        coordinator, after averaging, before sending),
 *                        commit (the coordinator, once the round's state
 *                        and record are in etcd, before its evaluation is
 *                        queued), stop (the coordinator, after it set `stop`, before
 *                        the last evaluation and result.json), eval (the
 *                        coordinator's evaluator, before it evaluates the
 *                        model of that round); ROUND may be *, any round
 *   pause=POINT@ROUND    SIGSTOP this process (all its threads) there instead;
 *                        it goes on when sent SIGCONT
 *   delay_step=SECONDS   sleep this long after every training step
 *   drop=weights@ROUND   a worker does not send its weights in ROUND
 *   drop=begin@N         a worker's evaluator rank ignores the first start of
 *                        evaluation N it receives (as if the message were lost)
 *   drop=rows@N          a worker's evaluator rank ignores the first request
 *                        for rows of evaluation N it receives (the same)
 *   stall_keepalive=SECONDS@ROUND  a worker stops renewing its lease for
 *                        SECONDS when ROUND begins
 *   poison=WHAT@ROUND    a NaN in the tensor sent in ROUND: weights (a worker's
 *                        local weights) or global (the coordinator's broadcast)
 * Items are separated by commas.
 */
#define TMA_INJECT_ANY_ROUND (-2)

typedef struct tma_inject {
    int active;
    char crash_point[16];
    int64_t crash_round; /* -1: none; TMA_INJECT_ANY_ROUND: any */
    double delay_step;
    int64_t drop_round; /* -1: none */
    int64_t drop_begin_round; /* -1: none */
    int64_t drop_rows_round;  /* -1: none */
    double stall_seconds;
    int64_t stall_round; /* -1: none */
    char poison_what[16]; /* "weights" or "global" */
    int64_t poison_round; /* -1: none */
    char pause_point[16];
    int64_t pause_round; /* -1: none; TMA_INJECT_ANY_ROUND: any */
} tma_inject_t;

/* An inert object. */
void tma_inject_init(tma_inject_t *inj);
/* Parses a spec (see above); TMA_ERR_CONFIG naming the item at fault. */
tma_status_t tma_inject_parse(const char *spec, tma_inject_t *inj);
/* Parses $TMA_FAULT when set (an inert object otherwise). */
tma_status_t tma_inject_from_env(tma_inject_t *inj);
/* A failure point: after a log line, SIGKILLs the process when
 * crash=(point, round) is armed, SIGSTOPs it when pause=(point, round) is
 * (returning once it is continued); nothing otherwise.  Every point that
 * tma_inject_parse accepts is one call of this in the code. */
void tma_inject_point(const tma_inject_t *inj, const char *point, int64_t round);
/* Puts a NaN into x[0], after a log line, when poison=WHAT@round is armed. */
void tma_inject_poison(const tma_inject_t *inj, const char *what, int64_t round, float *x);

#ifdef __cplusplus
}
#endif
#endif /* TMA_FAULT_H */
