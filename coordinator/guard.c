/*
 * guard.c: the leader's guarded writes to etcd.  Every write is one
 * transaction that holds only while the coordinator key still carries this
 * coordinator's epoch (a failed compare means another one took over: this
 * one is fenced).
 */
#include "coord_int.h"

#include <stdlib.h>
#include <string.h>

#define COMP COORD_COMP

tma_status_t coord_guarded_txn(tma_kv_t *kv, const char *job, uint64_t epoch, int *fenced, int n,
                               const char *const *keys, char *const *vals)
{
    char ckey[TMA_KEY_MAX];
    tma_job_key(ckey, job, TMA_KEY_COORDINATOR);
    tma_kv_cmp_t cmp = {ckey, TMA_KV_CMP_CREATE, TMA_KV_EQUAL, (int64_t)epoch, NULL, 0};
    tma_kv_op_t ops[16];
    if (n > 16)
        return TMA_ERR_INVALID;
    for (int i = 0; i < n; i++) {
        memset(&ops[i], 0, sizeof ops[i]);
        ops[i].key = keys[i];
        if (vals[i]) {
            ops[i].type = TMA_KV_OP_PUT;
            ops[i].value = vals[i];
            ops[i].value_len = strlen(vals[i]);
        } else {
            ops[i].type = TMA_KV_OP_DELETE;
        }
    }
    tma_kv_txn_t txn = {&cmp, 1, ops, (size_t)n, NULL, 0};
    tma_kv_result_t res;
    memset(&res, 0, sizeof res);
    tma_status_t st = tma_kv_txn(kv, &txn, &res);
    if (st == TMA_OK && !res.succeeded) {
        if (!__atomic_exchange_n(fenced, 1, __ATOMIC_SEQ_CST))
            tma_log_error(COMP, "another coordinator leads job %s now: this one (epoch %llu) is fenced and stops",
                          job, (unsigned long long)epoch);
        st = TMA_ERR_FENCED;
    }
    tma_kv_result_free(&res);
    return st;
}

/* Puts (and deletes for NULL values) in one guarded transaction.  With
 * `retry` it is retried while etcd is unreachable (a short outage pauses the
 * job rather than failing it). */
tma_status_t coord_guarded_put(coord_t *c, int n, const char *const *keys, char *const *vals, int retry)
{
    double warn_at = tma_clock_now() + 2.0;
    for (;;) {
        tma_status_t st = coord_guarded_txn(c->kv, c->job->name, c->epoch, &c->fenced, n, keys, vals);
        if (!retry || st == TMA_OK || tma_status_group(st) != TMA_GROUP_PEER || coord_stopping(c))
            return st;
        if (tma_clock_now() > warn_at) {
            tma_log_warn(COMP, "etcd is unreachable (%s); waiting for it", tma_status_str(st));
            warn_at = tma_clock_now() + 10.0;
        }
        tma_sleep(0.5);
    }
}

/* One single key of the job.  val is not taken over; NULL is out of memory
 * (the caller's encoder failed). */
tma_status_t coord_put_key(coord_t *c, tma_job_key_t k, char *val, int retry)
{
    if (!val)
        return TMA_ERR_NOMEM;
    char key[TMA_KEY_MAX];
    tma_job_key(key, c->job->name, k);
    const char *kp[1] = {key};
    char *vp[1] = {val};
    return coord_guarded_put(c, 1, kp, vp, retry);
}

tma_status_t coord_reassert_leader(coord_t *c, const tma_job_view_snap_t *s)
{
    if (!s->coord_present || s->coord_key_epoch != c->epoch || c->epoch == 0)
        return TMA_OK; /* gone or another's: the lease guard and the fencing check answer that */
    const tma_job_coord_rec_t *r = &s->coord, *m = &c->leader;
    if (s->has_coord && s->coord_key_lease == c->lease && r->lease == m->lease && r->pid == m->pid &&
        strcmp(r->address, m->address) == 0 && strcmp(r->host, m->host) == 0)
        return TMA_OK;
    char key[TMA_KEY_MAX];
    tma_job_key(key, c->job->name, TMA_KEY_COORDINATOR);
    tma_log_warn(COMP, "%s in etcd is not this leader's record (%s): writing it again", key,
                 !s->has_coord ? "it does not decode" : s->coord_key_lease != c->lease ? "not bound to its lease"
                                                                                   : "another address or pid");
    char *val = tma_job_coord_rec_encode(m);
    if (!val)
        return TMA_ERR_NOMEM;
    tma_kv_cmp_t cmp = {key, TMA_KV_CMP_CREATE, TMA_KV_EQUAL, (int64_t)c->epoch, NULL, 0};
    tma_kv_op_t op;
    memset(&op, 0, sizeof op);
    op.type = TMA_KV_OP_PUT;
    op.key = key;
    op.value = val;
    op.value_len = strlen(val);
    op.lease = c->lease;
    tma_kv_txn_t txn = {&cmp, 1, &op, 1, NULL, 0};
    tma_kv_result_t res;
    memset(&res, 0, sizeof res);
    tma_status_t st = tma_kv_txn(c->kv, &txn, &res);
    if (st == TMA_OK && !res.succeeded) {
        __atomic_store_n(&c->fenced, 1, __ATOMIC_SEQ_CST);
        st = TMA_ERR_FENCED;
    }
    tma_kv_result_free(&res);
    free(val);
    if (st != TMA_OK && st != TMA_ERR_FENCED)
        tma_log_warn(COMP, "%s: writing it again failed (%s); trying again at the next look", key,
                     tma_status_str(st));
    return st == TMA_ERR_FENCED ? st : TMA_OK;
}
