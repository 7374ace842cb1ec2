/*
 * member.c: a worker's membership: a lease kept alive in the background, a
 * member id that is never reused, and members/<id> bound to the lease.  When
 * the lease is lost the worker has been fenced: the coordinator treats it as
 * dead and refuses whatever it still sends under that id.
 */
#include "tma_fault.h"

#include <stdlib.h>
#include <string.h>

#define COMP "member"

struct tma_member {
    tma_kv_t *kv;
    int64_t lease;
    uint32_t id;
    tma_member_lost_fn lost_fn;
    void *arg;
    int lost; /* atomic */
    tma_lease_guard_t *guard;
};

static void on_lost(void *arg, tma_status_t why)
{
    tma_member_t *m = arg;
    if (__atomic_exchange_n(&m->lost, 1, __ATOMIC_SEQ_CST))
        return;
    tma_log_warn(COMP, "member %u lost its lease %llx (%s): fenced", m->id, (unsigned long long)m->lease,
                 tma_status_str(why));
    if (m->lost_fn)
        m->lost_fn(m->arg, why);
}

/* Takes the next id from the job's counter with a compare-and-swap loop. */
static tma_status_t next_id(tma_kv_t *kv, const char *job, uint32_t *id_p)
{
    char key[TMA_KEY_MAX];
    tma_job_key(key, job, TMA_KEY_NEXT_ID);
    for (int attempt = 0; attempt < 100; attempt++) {
        tma_kv_result_t res;
        memset(&res, 0, sizeof res);
        int64_t cur = 0, modrev = 0;
        tma_status_t st = tma_kv_get(kv, key, &res);
        if (st == TMA_OK) {
            if (tma_parse_i64(res.pairs[0].value, &cur) != 0 || cur < 0 || cur >= UINT32_MAX - 1) {
                tma_log_error(COMP, "%s: not a member counter: \"%s\"", key, res.pairs[0].value);
                tma_kv_result_free(&res);
                return TMA_ERR_MALFORMED;
            }
            modrev = res.pairs[0].mod_revision;
            tma_kv_result_free(&res);
        } else if (st != TMA_ERR_NOT_FOUND) {
            return st;
        }
        char val[32];
        int n = snprintf(val, sizeof val, "%lld", (long long)(cur + 1));
        st = tma_kv_cas(kv, key, modrev, val, (size_t)n, 0, NULL);
        if (st == TMA_OK) {
            *id_p = (uint32_t)cur;
            return TMA_OK;
        }
        if (st != TMA_ERR_COMPARE_FAILED)
            return st;
    }
    tma_log_error(COMP, "%s: too much contention taking a member id", key);
    return TMA_ERR_UNAVAILABLE;
}

/* Writes members/<id> bound to the member's lease, with rec's id and lease
 * filled in. */
static tma_status_t put_rec(tma_member_t *m, const char *job, tma_job_member_rec_t *rec)
{
    rec->id = m->id;
    rec->lease = m->lease;
    char *val = tma_job_member_rec_encode(rec);
    if (!val)
        return TMA_ERR_NOMEM;
    char key[TMA_KEY_MAX];
    tma_job_key_n(key, job, TMA_KEY_MEMBERS, m->id);
    tma_status_t st = tma_kv_put(m->kv, key, val, strlen(val), m->lease, NULL);
    free(val);
    return st;
}

tma_status_t tma_member_join(tma_kv_t *kv, const char *job, int64_t ttl, tma_job_member_rec_t *rec,
                             tma_member_lost_fn lost_fn, void *arg, tma_member_t **m_p)
{
    tma_member_t *m = calloc(1, sizeof *m);
    if (!m)
        return TMA_ERR_NOMEM;
    m->kv = kv;
    m->lost_fn = lost_fn;
    m->arg = arg;
    tma_status_t st = tma_kv_lease_grant(kv, ttl, &m->lease, NULL);
    if (st != TMA_OK) {
        tma_log_error(COMP, "job %s: cannot get a lease from etcd: %s", job, tma_status_str(st));
        free(m);
        return st;
    }
    st = next_id(kv, job, &m->id);
    if (st != TMA_OK)
        goto fail;
    st = put_rec(m, job, rec);
    if (st != TMA_OK)
        goto fail;
    st = tma_lease_guard_start(kv, m->lease, on_lost, m, &m->guard);
    if (st != TMA_OK)
        goto fail;
    tma_log_info(COMP, "joined job %s as member %u (lease %llx, ttl %llds)", job, m->id,
                 (unsigned long long)m->lease, (long long)ttl);
    *m_p = m;
    return TMA_OK;
fail:
    tma_kv_lease_revoke(kv, m->lease);
    free(m);
    return st;
}

tma_status_t tma_member_update(tma_member_t *m, const char *job, tma_job_member_rec_t *rec)
{
    tma_status_t st = put_rec(m, job, rec);
    if (st != TMA_OK)
        tma_log_warn(COMP, "job %s: cannot update the record of member %u: %s", job, m->id, tma_status_str(st));
    return st;
}

void tma_member_leave(tma_member_t *m)
{
    if (!m)
        return;
    tma_lease_guard_stop(m->guard);
    if (!__atomic_load_n(&m->lost, __ATOMIC_SEQ_CST))
        (void)tma_kv_lease_revoke(m->kv, m->lease);
    free(m);
}

void tma_member_abandon(tma_member_t *m)
{
    if (!m)
        return;
    tma_lease_guard_stop(m->guard);
    free(m);
}

int tma_member_silent(const tma_member_t *m)
{
    return m && tma_lease_guard_silent(m->guard);
}

void tma_member_stall_keepalive(tma_member_t *m, double seconds)
{
    tma_log_warn(COMP, "injected: member %u stops renewing its lease for %.1f s", m->id, seconds);
    tma_lease_guard_stall(m->guard, seconds);
}
