/*
 * evalrank.c: a worker's evaluator rank (eval.where "workers",
 * docs/architecture.md "A distributed evaluation").
 *
 * Its own transport, listening (its address in the member record), and its
 * own thread, so nothing here waits on training or takes the training
 * loop's messages.  The coordinator's evaluator connects and drives each
 * evaluation step by step (TMA_TAG_EVAL_BEGIN, then TMA_TAG_EVAL_STEP:
 * each layer, then the scoring of a split); the ranks connect to each other
 * (the lower member id to the higher) and fetch rows of their neighbours'
 * owners (TMA_TAG_EVAL_FETCH, TMA_TAG_EVAL_ROWS).  One thread does it all:
 * while it waits for rows it serves the requests of the others, so no two
 * ranks wait on each other.  Every tensor is checksummed by the transport
 * and every connection proves the job token.
 */
#include "worker_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The rank's thread runs at this nice value (Linux: per thread): on a
 * machine whose cores the trainer and the rank share, the trainer keeps
 * most of a contended core and evaluation takes the rest; where a core is
 * free the rank runs at full speed. */
#define RANK_NICE 10

/* Seconds a rank waits for a lower member's rank to connect to it before it
 * connects itself (normally the lower connects; the transport keeps one
 * connection when both do). */
#define RANK_REACH_WAIT_S 2.0

/* Seconds a rank waits for the rows it asked another rank for before it
 * asks again, doubling each time up to RANK_FETCH_RESEND_MAX_S: a request
 * or its answer can be lost with a connection that fails and is replaced.
 * A connection to that rank that ends or changes asks again at once.  An
 * answer counts only for the request it names. */
#define RANK_FETCH_RESEND_S 5.0
#define RANK_FETCH_RESEND_MAX_S 40.0

#define COMP "evaluator"

struct worker_eval {
    tma_transport_t *tr;
    pthread_t thread;
    int started;
    int quit;       /* atomic: the worker asks the thread to end */
    int released;   /* atomic: the coordinator said the job ends, or its connection ended after one */
    tma_gnn_config_t cfg;
    const tma_partition_info_t *pinfo;
    worker_shards_t *shards; /* the worker's mapped shard files: the rank takes references, never maps its own */
    tma_job_view_t *view;
    const tma_inject_t *inj;
    uint32_t self;

    /* the evaluation under way */
    int active;
    int64_t seq;
    uint64_t epoch;
    /* What this rank answered for it: the coordinator sends a step again when
     * no answer came (a message lost with a connection), and a step already
     * taken is answered again, not taken twice. */
    int64_t begun_seq; /* the evaluation whose start was answered (-1 none), with begun_st */
    tma_status_t begun_st;
    int layers_done; /* its layers done, in order */
    int begin_dropped; /* TMA_FAULT drop=begin@N: done */
    int rows_dropped;  /* TMA_FAULT drop=rows@N: done */
    int32_t S;
    int64_t *owner; /* [S]: each shard's owner (member id, -1 none) */
    int nheld;
    int32_t *held; /* [S]: the shards open, nheld of them */
    int32_t *want; /* [S]: scratch */
    int64_t *fo, *fcnt, *fgot; /* [S]: a fetch's owners, its rows from each, answered */
    double *fnext, *fwait;     /* [S]: when to ask each owner (again), and the wait after that */
    uint64_t req_id;           /* the fetch under way (its requests and answers name it) */
    tma_graph_t **g;
    tma_graph_infer_t **inf;
    tma_gnn_rank_t *rk;
    /* A coordinator's message that came while a fetch waited for rows (it
     * ends that evaluation): kept for the main loop, which acts on it next,
     * so a BEGIN of the next evaluation is never lost. */
    int has_pending;
    tma_transport_msg_t pending;
    /* this evaluation's traffic, for the log */
    int64_t rows_in, bytes_in, rows_out, bytes_out;
    double fetch_wait;

    /* buffers, grown as needed */
    float *tx;
    size_t tx_cap;
    int64_t *ids;
    size_t ids_cap;
};

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = need + need / 2 + 16;
    void *q = realloc(*p, n * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

static tma_status_t send_to(worker_eval_t *e, uint32_t peer, uint32_t tag, int64_t seq, const float *data, size_t n)
{
    tma_transport_meta_t meta = {tag, e->epoch, (uint64_t)seq};
    return tma_transport_send(e->tr, peer, &meta, data, n, TMA_TRANSPORT_MEM_HOST, TMA_MIN(e->cfg.eval_rank_timeout, 30.0));
}

static void reply_done(worker_eval_t *e, tma_status_t st, int what, int64_t arg)
{
    float d[3] = {(float)st, (float)what, (float)arg};
    tma_status_t s2 = send_to(e, TMA_COORD_PEER, TMA_TAG_EVAL_DONE, e->seq, d, 3);
    if (s2 != TMA_OK)
        tma_log_warn(COMP, "evaluation %lld: cannot answer the coordinator: %s", (long long)e->seq, tma_status_str(s2));
}

/* Another rank's request: the rows of our nodes at a level. */
static void serve(worker_eval_t *e, const tma_transport_msg_t *m)
{
    const float *f = m->data;
    tma_status_t st = TMA_OK;
    int64_t n = m->count >= 4 ? (int64_t)f[1] : -1;
    const int level = m->count >= 4 ? (int)f[0] : -1;
    const int64_t rid = m->count >= 4 ? tma_eval_get_i64(f + 2) : 0;
    if (e->inj && e->inj->drop_rows_round == (int64_t)m->meta.round && !e->rows_dropped) {
        e->rows_dropped = 1; /* a test's fault: this request is lost */
        tma_log_warn(COMP, "injected: a request for rows of evaluation %llu from member %u ignored",
                     (unsigned long long)m->meta.round, m->peer);
        return;
    }
    /* A layer's request names distinct rows of ours, a scoring chunk's at
     * most its pairs: never more (no request makes this rank allocate more). */
    const int64_t most = (e->rk ? tma_gnn_rank_rows_held(e->rk) : 0) +
                         (int64_t)e->cfg.eval_batch_edges * (1 + (e->nheld ? e->inf[0]->num_negatives : 0));
    if (n < 0 || m->count != (size_t)(4 + 2 * n) || !e->rk || !e->active || (int64_t)m->meta.round != e->seq ||
        level < 0 || level > e->cfg.layers || n > most)
        st = TMA_ERR_MALFORMED;
    const int64_t cols = st == TMA_OK ? tma_gnn_rank_cols(e->rk, level) : 0;
    if (st == TMA_OK && (grow((void **)&e->ids, &e->ids_cap, (size_t)n + 1, sizeof *e->ids) ||
                         grow((void **)&e->tx, &e->tx_cap, (size_t)(n * cols + 3), sizeof *e->tx)))
        st = TMA_ERR_NOMEM;
    if (st == TMA_OK) {
        for (int64_t i = 0; i < n; i++)
            e->ids[i] = tma_eval_get_i64(f + 4 + 2 * i);
        st = tma_gnn_rank_rows(e->rk, level, e->ids, n, e->tx + 3);
    }
    if (st == TMA_OK) {
        e->rows_out += n;
        e->bytes_out += n * cols * (int64_t)sizeof(float);
    }
    if (st != TMA_OK)
        tma_log_warn(COMP, "member %u's request for rows (evaluation %llu) refused: %s", m->peer,
                     (unsigned long long)m->meta.round, tma_status_str(st));
    /* The answer names the request: status, the request's id, the rows. */
    float bad[3] = {(float)st, 0, 0};
    tma_eval_put_i64(bad + 1, rid);
    tma_status_t s2;
    if (st == TMA_OK) {
        memcpy(e->tx, bad, sizeof bad);
        s2 = send_to(e, m->peer, TMA_TAG_EVAL_ROWS, (int64_t)m->meta.round, e->tx, (size_t)(n * cols + 3));
    } else {
        s2 = send_to(e, m->peer, TMA_TAG_EVAL_ROWS, (int64_t)m->meta.round, bad, 3);
    }
    if (s2 != TMA_OK)
        tma_log_warn(COMP, "cannot send rows to member %u: %s", m->peer, tma_status_str(s2));
}

/* The first of the n members ids[] that is no longer in the job (its lease
 * lapsed: a rank cut off by the network never answers), or -1. */
static int64_t first_gone(tma_job_view_t *view, const int64_t *ids, int n)
{
    tma_job_view_snap_t s;
    if (tma_job_view_snapshot(view, &s) != TMA_OK)
        return -1;
    int64_t gone = -1;
    for (int j = 0; j < n && gone < 0; j++)
        if (!tma_job_view_snap_member(&s, (uint32_t)ids[j]))
            gone = ids[j];
    tma_job_view_snap_free(&s);
    return gone;
}

/* Whether the coordinator key is epoch's (or unknown): that coordinator leads. */
static int leads(worker_eval_t *e, uint64_t epoch)
{
    tma_job_view_snap_t s;
    if (!e->view || tma_job_view_snapshot(e->view, &s) != TMA_OK)
        return 1;
    const int ok = !s.has_coord || s.coord_epoch == epoch;
    tma_job_view_snap_free(&s);
    return ok;
}

/* The job's state says it ended (its result is written): no evaluation follows. */
static int job_over(tma_job_view_t *view)
{
    tma_job_view_snap_t s;
    if (tma_job_view_snapshot(view, &s) != TMA_OK)
        return 0;
    const int over = s.has_state && (strcmp(s.state.phase, "done") == 0 || strcmp(s.state.phase, "failed") == 0);
    tma_job_view_snap_free(&s);
    return over;
}

/* A coordinator's connection ended: its evaluation is over, unless a newer
 * coordinator's connection replaced it (it drives its own evaluations). */
static int coord_gone(worker_eval_t *e, const tma_transport_msg_t *m)
{
    return m->event.kind != TMA_TRANSPORT_EV_CONNECTED && m->event.reason != TMA_ERR_FENCED &&
           tma_transport_wait_peer(e->tr, TMA_COORD_PEER, 0) != TMA_OK;
}

/* A connection to rank `peer`: the lower member id connects to the higher;
 * the higher waits for it. */
static tma_status_t reach(worker_eval_t *e, uint32_t peer)
{
    if (tma_transport_wait_peer(e->tr, peer, 0) == TMA_OK)
        return TMA_OK;
    if (peer < e->self) {
        /* A slice at a time: the worker may end the rank meanwhile, and a
         * peer that left the job never connects.  A lower rank that needs
         * nothing of this one (scoring asks for rows one way only) never
         * connects either: past RANK_REACH_WAIT_S this rank connects itself. */
        const double t0 = tma_clock_now();
        double next_check = t0 + 1.0;
        const int64_t who = peer;
        while (tma_clock_now() - t0 < RANK_REACH_WAIT_S) {
            if (tma_transport_wait_peer(e->tr, peer, 0.2) == TMA_OK)
                return TMA_OK;
            if (__atomic_load_n(&e->quit, __ATOMIC_SEQ_CST))
                return TMA_ERR_CANCELLED;
            const double now = tma_clock_now();
            if (now >= next_check) {
                next_check = now + 1.0;
                if (e->view && first_gone(e->view, &who, 1) >= 0)
                    return TMA_ERR_PEER_FAILED;
            }
        }
    }
    tma_job_view_snap_t s;
    tma_status_t st = e->view ? tma_job_view_snapshot(e->view, &s) : TMA_ERR_UNAVAILABLE;
    if (st != TMA_OK)
        return st;
    char addr[128] = "";
    for (int i = 0; i < s.n_members; i++)
        if (s.members[i].rec.id == peer)
            snprintf(addr, sizeof addr, "%s", s.members[i].rec.eval_address);
    tma_job_view_snap_free(&s);
    if (!addr[0]) {
        tma_log_warn(COMP, "member %u has no evaluator address", peer);
        return TMA_ERR_UNAVAILABLE;
    }
    uint32_t got = 0;
    st = tma_transport_connect(e->tr, addr, TMA_MIN(e->cfg.eval_rank_timeout, 10.0), &got);
    if (st == TMA_OK && got != peer) {
        tma_log_warn(COMP, "%s answers as member %u, not %u", addr, got, peer);
        tma_transport_disconnect(e->tr, got, 1.0);
        st = TMA_ERR_MISMATCH;
    }
    return st;
}

/* A coordinator's message that only repeats this evaluation's start or a
 * layer step of it (sent again for want of an answer). */
static int repeat_of_current(const worker_eval_t *e, const tma_transport_msg_t *m)
{
    if ((int64_t)m->meta.round != e->seq || m->meta.epoch != e->epoch)
        return 0;
    if (m->meta.tag == TMA_TAG_EVAL_BEGIN)
        return e->begun_seq == e->seq;
    return m->meta.tag == TMA_TAG_EVAL_STEP && m->count == 4 && (int)((const float *)m->data)[0] == TMA_EVAL_LAYER;
}

/* Asks owner j of the fetch under way (e->fo[j]) for its rows among ids[]:
 * level, count, the request's id, the nodes. */
static tma_status_t ask(worker_eval_t *e, int level, const int64_t *ids, int64_t n, int j)
{
    const int64_t o = e->fo[j];
    if (grow((void **)&e->tx, &e->tx_cap, (size_t)(4 + 2 * e->fcnt[j]), sizeof *e->tx))
        return TMA_ERR_NOMEM;
    int64_t c = 0;
    e->tx[0] = (float)level;
    e->tx[1] = (float)e->fcnt[j];
    tma_eval_put_i64(e->tx + 2, (int64_t)e->req_id);
    for (int64_t i = 0; i < n; i++)
        if (e->owner[TMA_INFER_SHARD(ids[i])] == o)
            tma_eval_put_i64(e->tx + 4 + 2 * c++, ids[i]);
    tma_status_t st = reach(e, (uint32_t)o);
    st = st ? st : send_to(e, (uint32_t)o, TMA_TAG_EVAL_FETCH, e->seq, e->tx, (size_t)(4 + 2 * c));
    if (st != TMA_OK)
        tma_log_warn(COMP, "evaluation %lld: cannot ask member %lld for rows: %s", (long long)e->seq, (long long)o,
                     tma_status_str(st));
    return st;
}

/* The rows of other ranks' nodes (tma_gnn_fetch_fn): one request to each
 * owner, asked again when no answer comes (RANK_FETCH_RESEND_S), then
 * serving others until every answer is in. */
static tma_status_t fetch(void *arg, int level, const int64_t *ids, int64_t n, int64_t cols, float *out)
{
    worker_eval_t *e = arg;
    /* The distinct owners, in order of first appearance (a few). */
    int64_t *owners = e->fo, *cnt = e->fcnt, *got = e->fgot;
    int no = 0;
    for (int64_t i = 0; i < n; i++) {
        const int32_t k = TMA_INFER_SHARD(ids[i]);
        const int64_t o = k >= 0 && k < e->S ? e->owner[k] : -1;
        int j = 0;
        while (j < no && owners[j] != o)
            j++;
        if (o < 0 || o == (int64_t)e->self)
            return TMA_ERR_RANGE;
        if (j == no) {
            owners[no] = o;
            cnt[no] = got[no] = 0;
            e->fnext[no] = 0; /* ask at once */
            e->fwait[no] = RANK_FETCH_RESEND_S;
            no++;
        }
        cnt[j]++;
    }
    e->req_id++;
    tma_status_t st = TMA_OK;
    const double t0 = tma_clock_now(), deadline = t0 + e->cfg.eval_rank_timeout;
    double next_check = t0 + 1.0;
    int left = no;
    while (st == TMA_OK && left > 0) {
        if (__atomic_load_n(&e->quit, __ATOMIC_SEQ_CST))
            return TMA_ERR_CANCELLED;
        if (tma_clock_now() >= next_check) {
            next_check = tma_clock_now() + 1.0;
            const int64_t gone = first_gone(e->view, owners, no);
            if (gone >= 0) {
                tma_log_warn(COMP, "evaluation %lld: member %lld left the job before sending its rows",
                             (long long)e->seq, (long long)gone);
                return TMA_ERR_PEER_FAILED;
            }
        }
        if (tma_clock_now() > deadline) {
            tma_log_warn(COMP, "evaluation %lld: rows did not come within eval.rank_timeout", (long long)e->seq);
            return TMA_ERR_TIMEOUT;
        }
        for (int j = 0; j < no; j++) {
            if (got[j] || tma_clock_now() < e->fnext[j])
                continue;
            if (e->fnext[j] > 0)
                tma_log_info(COMP, "evaluation %lld: asking member %lld for its rows again", (long long)e->seq,
                             (long long)owners[j]);
            const tma_status_t sa = ask(e, level, ids, n, j);
            if (sa == TMA_ERR_NOMEM || sa == TMA_ERR_CANCELLED || sa == TMA_ERR_PEER_FAILED)
                return sa;
            /* Not reached or not sent: tried again in a second, until the
             * owner leaves the job or eval.rank_timeout. */
            e->fnext[j] = tma_clock_now() + (sa == TMA_OK ? e->fwait[j] : 1.0);
            if (sa == TMA_OK)
                e->fwait[j] = TMA_MIN(2 * e->fwait[j], RANK_FETCH_RESEND_MAX_S);
        }
        tma_transport_msg_t m;
        if (tma_transport_recv(e->tr, TMA_TRANSPORT_ANY_PEER, TMA_TRANSPORT_ANY_TAG, 0.2, &m) != TMA_OK)
            continue;
        int j = 0;
        while (j < no && (uint32_t)owners[j] != m.peer)
            j++;
        if (m.kind == TMA_TRANSPORT_MSG_EVENT) {
            if (m.peer == TMA_COORD_PEER && coord_gone(e, &m)) {
                tma_log_warn(COMP, "evaluation %lld: the connection to the coordinator ended", (long long)e->seq);
                st = TMA_ERR_PEER_FAILED;
            } else if (m.peer != TMA_COORD_PEER && j < no && !got[j]) {
                /* The request or its answer may have gone with the old
                 * connection: asked again at once (a rank that left the
                 * job is found by first_gone). */
                tma_log_info(COMP, "evaluation %lld: the connection to member %u %s: its rows are asked for again",
                             (long long)e->seq, m.peer,
                             m.event.kind == TMA_TRANSPORT_EV_CONNECTED ? "was replaced" : "ended");
                e->fnext[j] = tma_clock_now();
            }
        } else if (m.meta.tag == TMA_TAG_EVAL_FETCH) {
            serve(e, &m);
        } else if (m.peer == TMA_COORD_PEER && repeat_of_current(e, &m)) {
            /* The step under way (or this evaluation's start), sent again: it
             * is answered when it is done. */
        } else if (m.peer == TMA_COORD_PEER) {
            /* The coordinator speaks between steps only, sending again only
             * what is under way: this evaluation is over.  Its message (an
             * abort, or the next evaluation's start) is the main loop's. */
            tma_log_info(COMP, "evaluation %lld: the coordinator abandoned it", (long long)e->seq);
            if (!e->has_pending) {
                e->pending = m;
                e->has_pending = 1;
                return TMA_ERR_CANCELLED;
            }
            st = TMA_ERR_CANCELLED;
        } else if (m.meta.tag == TMA_TAG_EVAL_ROWS && j < no && (int64_t)m.meta.round == e->seq && got[j] == 0 &&
                   m.count >= 3 && tma_eval_get_i64((const float *)m.data + 1) == (int64_t)e->req_id) {
            /* (An answer to an earlier request, asked again, is dropped.) */
            const float *f = m.data;
            if (m.count == 3 && f[0] != 0)
                st = (tma_status_t)(int)f[0];
            else if (m.count != (size_t)(3 + cnt[j] * cols) || f[0] != 0)
                st = TMA_ERR_MALFORMED;
            else {
                int64_t c = 0;
                for (int64_t i = 0; i < n; i++)
                    if (e->owner[TMA_INFER_SHARD(ids[i])] == owners[j])
                        memcpy(out + i * cols, f + 3 + (c++) * cols, (size_t)cols * sizeof(float));
                got[j] = 1;
                left--;
                e->rows_in += cnt[j];
                e->bytes_in += cnt[j] * cols * (int64_t)sizeof(float);
            }
            if (st != TMA_OK)
                tma_log_warn(COMP, "evaluation %lld: member %u sent no usable rows: %s", (long long)e->seq, m.peer,
                             tma_status_str(st));
        }
        tma_transport_msg_release(e->tr, &m);
    }
    e->fetch_wait += tma_clock_now() - t0;
    return st;
}

static void close_shards(worker_eval_t *e)
{
    tma_gnn_rank_destroy(e->rk);
    e->rk = NULL;
    for (int i = 0; i < e->nheld; i++) {
        worker_shards_put(e->shards, e->g[i]);
        tma_graph_infer_close(e->inf[i]);
    }
    e->nheld = 0;
}

/* The rank over the shards the coordinator says this member owns (opened
 * again only when they change).  The shard files are the worker's own
 * mappings (worker_shards_get: the trainer's, when it holds the shard). */
static tma_status_t open_shards(worker_eval_t *e, const int32_t *want, int n)
{
    if (e->rk && n == e->nheld && memcmp(want, e->held, (size_t)n * sizeof *want) == 0)
        return TMA_OK;
    tma_status_t st = TMA_OK;
    tma_gnn_rank_shard_t *rs = calloc((size_t)n, sizeof *rs);
    tma_graph_t **keep = calloc((size_t)n, sizeof *keep);
    if (!rs || !keep) {
        free(rs);
        free(keep);
        return TMA_ERR_NOMEM;
    }
    /* A shard of the last set that stays is held across the change, so it is
     * not unmapped and mapped again when the trainer does not hold it. */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < e->nheld; j++)
            if (e->held[j] == want[i] && worker_shards_get(e->shards, want[i], &keep[i]) != TMA_OK)
                keep[i] = NULL;
    close_shards(e);
    for (int i = 0; i < n && st == TMA_OK; i++) {
        const int32_t k = want[i];
        char *nm = tma_partition_infer_name(k), *path = nm ? tma_path_join(e->pinfo->dir, nm) : NULL;
        st = path ? worker_shards_get(e->shards, k, &e->g[i]) : TMA_ERR_NOMEM;
        if (st == TMA_OK) {
            st = tma_graph_infer_open(path, 0, k, e->S, e->pinfo->graph_id, e->pinfo->shard_nodes, &e->inf[i]);
            if (st != TMA_OK)
                worker_shards_put(e->shards, e->g[i]);
        }
        if (st == TMA_OK) {
            e->held[e->nheld++] = k;
            rs[i].shard = e->g[i];
            rs[i].inf = e->inf[i];
        } else {
            tma_log_error(COMP, "shard %d: cannot open its files for evaluation (%s): tma partition writes %s "
                          "beside each shard",
                          k, tma_status_str(st), nm ? nm : "the inference file");
        }
        free(nm);
        free(path);
    }
    st = st ? st : tma_gnn_rank_create(&e->cfg, rs, n, fetch, e, &e->rk);
    free(rs);
    if (st != TMA_OK)
        close_shards(e);
    for (int i = 0; i < n; i++)
        worker_shards_put(e->shards, keep[i]);
    free(keep);
    return st;
}

static void begin(worker_eval_t *e, const tma_transport_msg_t *m)
{
    const float *f = m->data;
    const int64_t S = m->count >= 1 ? (int64_t)f[0] : -1;
    if ((int64_t)m->meta.round == e->seq && m->meta.epoch == e->epoch && e->begun_seq == e->seq) {
        reply_done(e, e->begun_st, TMA_EVAL_BEGIN, 0); /* the same start again: answered again */
        return;
    }
    if (m->meta.epoch == e->epoch && (int64_t)m->meta.round < e->seq)
        return; /* an older evaluation's start, late: that evaluation is over */
    e->seq = (int64_t)m->meta.round;
    e->layers_done = 0;
    e->epoch = m->meta.epoch;
    e->active = 0;
    tma_status_t st = TMA_OK;
    if (S != e->S || m->count < (size_t)(1 + S)) {
        tma_log_warn(COMP, "evaluation %lld: a malformed start (%zu values)", (long long)e->seq, m->count);
        st = TMA_ERR_MALFORMED;
    }
    int n = 0;
    for (int32_t k = 0; k < e->S && st == TMA_OK; k++) {
        e->owner[k] = (int64_t)f[1 + k];
        if (e->owner[k] == (int64_t)e->self)
            e->want[n++] = k;
    }
    if (st == TMA_OK && n == 0)
        st = TMA_ERR_NOT_FOUND;
    st = st ? st : open_shards(e, e->want, n);
    /* The parameters: the model's block, as the rank's layout has it. */
    if (st == TMA_OK && m->count != (size_t)(1 + S + tma_gnn_rank_param_count(e->rk))) {
        tma_log_warn(COMP, "evaluation %lld: %zu parameters, the model has %lld", (long long)e->seq,
                     m->count - (size_t)(1 + S), (long long)tma_gnn_rank_param_count(e->rk));
        st = TMA_ERR_MISMATCH;
    }
    st = st ? st : tma_gnn_rank_begin(e->rk, f + 1 + S);
    e->active = st == TMA_OK;
    if (st != TMA_OK)
        tma_log_warn(COMP, "evaluation %lld cannot start here: %s", (long long)e->seq, tma_status_str(st));
    e->begun_seq = e->seq;
    e->begun_st = st;
    reply_done(e, st, TMA_EVAL_BEGIN, 0);
}

/* Scores a split and sends each duty's edge and counts. */
static tma_status_t score(worker_eval_t *e, tma_gnn_split_t split, int64_t limit)
{
    const int64_t n = tma_gnn_rank_duties(e->rk, split, limit), per = 1 + e->inf[0]->num_negatives;
    int64_t *edges = malloc((size_t)TMA_MAX(n, 1) * sizeof *edges);
    float *logits = malloc((size_t)TMA_MAX(n * per, 1) * sizeof *logits);
    int32_t *above = malloc((size_t)TMA_MAX(n, 1) * sizeof *above), *ties = malloc((size_t)TMA_MAX(n, 1) * sizeof *ties);
    float *out = malloc((size_t)(2 + 4 * n) * sizeof *out);
    int64_t got = 0;
    tma_status_t st = edges && logits && above && ties && out ? tma_gnn_rank_score(e->rk, split, limit, edges, logits, &got)
                                                              : TMA_ERR_NOMEM;
    if (st == TMA_OK && got != n)
        st = TMA_ERR_INTERNAL;
    if (st == TMA_OK) {
        tma_gnn_metrics_count(logits, n, per, above, ties);
        out[0] = 0;
        out[1] = (float)n;
        for (int64_t i = 0; i < n; i++) {
            tma_eval_put_i64(out + 2 + 4 * i, edges[i]);
            out[2 + 4 * i + 2] = (float)above[i];
            out[2 + 4 * i + 3] = (float)ties[i];
        }
        st = send_to(e, TMA_COORD_PEER, TMA_TAG_EVAL_RESULT, e->seq, out, (size_t)(2 + 4 * n));
    }
    free(edges);
    free(logits);
    free(above);
    free(ties);
    free(out);
    return st;
}

static void step(worker_eval_t *e, const tma_transport_msg_t *m)
{
    const float *f = m->data;
    if (m->count != 4 || (int64_t)m->meta.round != e->seq || m->meta.epoch != e->epoch) {
        if (m->count == 4 && ((int)f[0] == TMA_EVAL_ABORT || (int)f[0] == TMA_EVAL_RELEASE))
            return; /* another evaluation's (or coordinator's): nobody waits for an answer */
        /* Answered as refused (under the step's own number), so a coordinator
         * that sent it is not left waiting for eval.rank_timeout. */
        tma_log_warn(COMP, "a malformed or stale evaluation step refused (evaluation %llu; this rank is at %lld)",
                     (unsigned long long)m->meta.round, (long long)e->seq);
        const int score = m->count >= 1 && (int)f[0] == TMA_EVAL_SCORE;
        float d[3] = {(float)TMA_ERR_MALFORMED, m->count >= 1 ? f[0] : -1, m->count >= 2 ? f[1] : 0};
        send_to(e, TMA_COORD_PEER, score ? TMA_TAG_EVAL_RESULT : TMA_TAG_EVAL_DONE, (int64_t)m->meta.round, d,
                score ? 2 : 3);
        return;
    }
    const int what = (int)f[0];
    const int64_t arg = (int64_t)f[1], limit = tma_eval_get_i64(f + 2);
    tma_status_t st = TMA_OK;
    switch (what) {
    case TMA_EVAL_LAYER: {
        if (e->active && arg >= 0 && arg < e->layers_done) {
            reply_done(e, TMA_OK, what, arg); /* sent again: done already */
            return;
        }
        if (arg == 0)
            tma_inject_point(e->inj, "rank", e->seq); /* a test's fault: the rank fails mid-evaluation */
        const double t0 = tma_clock_now();
        e->rows_in = e->bytes_in = e->rows_out = e->bytes_out = 0;
        e->fetch_wait = 0;
        st = e->active ? tma_gnn_rank_layer(e->rk, (int)arg) : TMA_ERR_INVALID;
        if (st == TMA_OK && arg == e->layers_done)
            e->layers_done++;
        reply_done(e, st, what, arg);
        if (st == TMA_OK) {
            int64_t hits = 0, cap = 0;
            tma_gnn_rank_cache_stats(e->rk, &hits, NULL, &cap);
            tma_log_info(COMP, "evaluation %lld, layer %lld: %.2f s (%.2f s waiting for rows), %lld rows "
                         "(%.1f MiB) fetched, %lld rows (%.1f MiB) served, %lld rows from its cache (of %lld)",
                         (long long)e->seq, (long long)arg, tma_clock_now() - t0, e->fetch_wait,
                         (long long)e->rows_in, (double)e->bytes_in / (1 << 20), (long long)e->rows_out,
                         (double)e->bytes_out / (1 << 20), (long long)hits, (long long)cap);
        }
        break;
    }
    case TMA_EVAL_SCORE:
        st = e->active ? score(e, arg == 1 ? TMA_GNN_SPLIT_TEST : TMA_GNN_SPLIT_VAL, limit) : TMA_ERR_INVALID;
        if (st != TMA_OK) {
            float r[2] = {(float)st, 0};
            send_to(e, TMA_COORD_PEER, TMA_TAG_EVAL_RESULT, e->seq, r, 2);
        }
        break;
    case TMA_EVAL_ABORT:
        e->active = 0;
        break;
    case TMA_EVAL_RELEASE:
        e->active = 0;
        /* Only the leader lets the ranks go: a coordinator fenced before it
         * knew it (a paused one resumed) must not, as the new one may still
         * need them for the job's last evaluations. */
        if (leads(e, m->meta.epoch))
            __atomic_store_n(&e->released, 1, __ATOMIC_SEQ_CST);
        else
            tma_log_info(COMP, "a release from coordinator epoch %llu, which no longer leads: ignored",
                         (unsigned long long)m->meta.epoch);
        break;
    default:
        tma_log_warn(COMP, "unknown evaluation step %d refused", what);
    }
    if (st != TMA_OK && st != TMA_ERR_CANCELLED)
        tma_log_warn(COMP, "evaluation %lld: step %d (%lld) failed: %s", (long long)e->seq, what, (long long)arg,
                     tma_status_str(st));
    if (st != TMA_OK)
        e->active = 0;
}

static void *eval_main(void *arg)
{
    worker_eval_t *e = arg;
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), RANK_NICE) != 0)
        tma_log_debug(COMP, "the evaluator rank's thread keeps its priority (setpriority failed)");
    while (!__atomic_load_n(&e->quit, __ATOMIC_SEQ_CST)) {
        tma_transport_msg_t m;
        tma_status_t st = TMA_OK;
        if (e->has_pending) {
            m = e->pending;
            e->has_pending = 0;
        } else {
            st = tma_transport_recv(e->tr, TMA_TRANSPORT_ANY_PEER, TMA_TRANSPORT_ANY_TAG, 0.2, &m);
        }
        if (st == TMA_ERR_CLOSED)
            break;
        if (st != TMA_OK)
            continue;
        if (m.kind == TMA_TRANSPORT_MSG_EVENT) {
            if (m.peer == TMA_COORD_PEER && coord_gone(e, &m))
                e->active = 0;
        } else if (m.meta.tag == TMA_TAG_EVAL_FETCH) {
            serve(e, &m);
        } else if (m.peer == TMA_COORD_PEER && m.meta.tag == TMA_TAG_EVAL_BEGIN && m.meta.epoch >= e->epoch) {
            if (e->inj && e->inj->drop_begin_round == (int64_t)m.meta.round && !e->begin_dropped) {
                e->begin_dropped = 1; /* a test's fault: this start is lost */
                tma_log_warn(COMP, "injected: the start of evaluation %lld ignored", (long long)m.meta.round);
            } else {
                begin(e, &m);
            }
        } else if (m.peer == TMA_COORD_PEER && m.meta.tag == TMA_TAG_EVAL_STEP && m.meta.epoch >= e->epoch) {
            step(e, &m);
        }
        tma_transport_msg_release(e->tr, &m);
    }
    return NULL;
}

tma_status_t worker_eval_start(const worker_eval_cfg_t *c, worker_eval_t **e_p)
{
    worker_eval_t *e = calloc(1, sizeof *e);
    if (!e)
        return TMA_ERR_NOMEM;
    e->cfg = *c->cfg;
    e->pinfo = c->pinfo;
    e->shards = c->shards;
    e->view = c->view;
    e->inj = c->inj;
    e->self = c->self_id;
    e->begun_seq = -1;
    e->S = c->pinfo->num_shards;
    e->owner = malloc((size_t)e->S * sizeof *e->owner);
    e->held = malloc((size_t)e->S * sizeof *e->held);
    e->want = malloc((size_t)e->S * sizeof *e->want);
    e->fo = malloc((size_t)e->S * sizeof *e->fo);
    e->fcnt = malloc((size_t)e->S * sizeof *e->fcnt);
    e->fgot = malloc((size_t)e->S * sizeof *e->fgot);
    e->fnext = malloc((size_t)e->S * sizeof *e->fnext);
    e->fwait = malloc((size_t)e->S * sizeof *e->fwait);
    e->g = calloc((size_t)e->S, sizeof *e->g);
    e->inf = calloc((size_t)e->S, sizeof *e->inf);
    tma_status_t st = e->owner && e->held && e->want && e->fo && e->fcnt && e->fgot && e->fnext && e->fwait && e->g &&
                               e->inf ? TMA_OK : TMA_ERR_NOMEM;
    const char *listen = c->listen;
    tma_transport_config_t tc;
    tma_transport_config_init(&tc);
    tc.job = c->job;
    tc.token = c->token;
    tc.self_id = c->self_id;
    tc.self_lease = (uint64_t)c->lease;
    tc.listen = listen;
    st = st ? st : tma_transport_create(&tc, &e->tr);
    if (st == TMA_OK && pthread_create(&e->thread, NULL, eval_main, e) != 0)
        st = TMA_ERR_NOMEM;
    if (st != TMA_OK) {
        tma_log_error(COMP, "cannot start the evaluator rank on %s: %s", listen, tma_status_str(st));
        worker_eval_stop(e, 0);
        return st;
    }
    e->started = 1;
    tma_log_info(COMP, "evaluator rank listening on %s", tma_transport_address(e->tr));
    *e_p = e;
    return TMA_OK;
}

const char *worker_eval_address(const worker_eval_t *e)
{
    return tma_transport_address(e->tr);
}

void worker_eval_stop(worker_eval_t *e, double linger_s)
{
    if (!e)
        return;
    /* A coordinator that evaluates on the ranks may still need them for the
     * job's last evaluations: wait until it releases them, the job's state
     * says it is over, or no coordinator has been connected for a few
     * seconds (a connection replaced by a new leader's counts as one).  Also
     * when none has connected yet: a job whose training ended before its
     * first evaluation reached the ranks evaluates on them after the stop. */
    const double until = tma_clock_now() + linger_s;
    double lost_at = -1;
    /* The job's state is looked at once a second (a snapshot copies the view). */
    for (int tick = 0; e->started && !__atomic_load_n(&e->released, __ATOMIC_SEQ_CST) && tma_clock_now() < until &&
                       (tick % 10 != 0 || !job_over(e->view));
         tick++) {
        const double now = tma_clock_now();
        if (tma_transport_wait_peer(e->tr, TMA_COORD_PEER, 0) == TMA_OK)
            lost_at = -1;
        else if (lost_at < 0)
            lost_at = now;
        else if (now - lost_at > 5.0)
            break;
        tma_sleep(0.1);
    }
    __atomic_store_n(&e->quit, 1, __ATOMIC_SEQ_CST);
    if (e->started)
        pthread_join(e->thread, NULL);
    if (e->has_pending)
        tma_transport_msg_release(e->tr, &e->pending);
    tma_transport_destroy(e->tr);
    close_shards(e);
    void *owned[] = {e->owner, e->held, e->g, e->inf, e->tx, e->ids, e->want, e->fo, e->fcnt, e->fgot, e->fnext, e->fwait, e};
    for (size_t i = 0; i < TMA_ARRAY_LEN(owned); i++)
        free(owned[i]);
}

tma_status_t worker_eval_join(const worker_eval_cfg_t *c, tma_member_t *member, tma_job_member_rec_t *rec,
                              worker_eval_t **e_p)
{
    tma_status_t st = worker_eval_start(c, e_p);
    if (st != TMA_OK)
        return st;
    snprintf(rec->eval_address, sizeof rec->eval_address, "%s", worker_eval_address(*e_p));
    if ((st = tma_member_update(member, c->job, rec)) != TMA_OK) {
        worker_eval_stop(*e_p, 0);
        *e_p = NULL;
    }
    return st;
}

int worker_eval_files_here(const tma_partition_info_t *pinfo, int32_t k)
{
    char *nm = tma_partition_infer_name(k), *path = nm ? tma_path_join(pinfo->dir, nm) : NULL;
    const int ok = path && access(path, R_OK) == 0;
    if (!ok) {
        char host[256] = "?";
        gethostname(host, sizeof host - 1);
        tma_log_error(COMP, "node %s: shard %d's inference file %s is missing (the workers evaluate: copy it beside "
                      "the shard)", host, k, path ? path : "?");
    }
    free(nm);
    free(path);
    return ok;
}
