/*
 * ranks.c: the coordinator's side of a distributed evaluation (eval.where
 * "workers"; docs/architecture.md "A distributed evaluation").
 *
 * The owners of the shards are the evaluator ranks.  One evaluation: the
 * owners from the job view (each shard must have a live owner with an
 * evaluator address), the parameters to each rank with the shard map, then
 * layer by layer (every rank done with a layer before any starts the next),
 * then the scoring of the split: each rank sends, for the evaluation edges
 * whose head it holds, the negatives above the positive and tied with it,
 * and the metrics are summed here in edge order, the same numbers as the
 * single evaluator's.  Its own transport (no listener), used by the
 * evaluator thread alone.  A rank that fails, leaves or does not answer
 * within eval.rank_timeout ends the evaluation with the reason, the others
 * told to drop it; nothing is reported from a partial table.  A start or a
 * layer step a rank has not answered is sent to it again every
 * RANK_RESEND_S seconds (a message can be lost with a connection that
 * fails and is replaced); the rank answers one it already took again
 * without taking it twice, and an answer counts only for the step it names.
 */
#include "coord_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define COMP "evaluator"

/* Seconds before an unanswered start or layer step is sent to its rank again. */
#define RANK_RESEND_S 5.0

/* The step a DONE wait is for: what the DONE must name, and the message to
 * send again to a rank that has not answered. */
typedef struct {
    int what;
    int64_t arg;
    uint32_t tag;
    const float *data;
    size_t count;
} rank_step_t;

struct coord_ranks {
    tma_transport_t *tr;
    tma_job_view_t *view;
    tma_gnn_config_t cfg;
    int32_t S;
    int64_t num_edges[2]; /* validation, test */
    int64_t negatives;
    uint64_t epoch;
    int64_t seq;
    const int *fenced;
    volatile sig_atomic_t *stop_flag;
    int64_t P;
    /* this evaluation */
    int n;
    uint32_t *rank;  /* [S]: the ranks (member ids) */
    char (*addr)[128]; /* [S]: the address each was reached at */
    int *answered;   /* [S] */
    float *begin;    /* 1 + S + P */
    int32_t *above, *ties; /* [edges] */
    uint8_t *seen;   /* [edges] */
    int split;       /* the split being scored: 0 validation, 1 test */
};

tma_status_t coord_ranks_create(const coord_ranks_cfg_t *c, coord_ranks_t **r_p)
{
    coord_ranks_t *r = calloc(1, sizeof *r);
    if (!r)
        return TMA_ERR_NOMEM;
    r->view = c->view;
    r->cfg = *c->cfg;
    r->S = c->num_shards;
    r->num_edges[0] = c->num_val;
    r->num_edges[1] = c->num_test;
    for (int t = 0; t < 2; t++)
        if (r->cfg.eval_max_edges > 0)
            r->num_edges[t] = TMA_MIN(r->num_edges[t], r->cfg.eval_max_edges);
    r->negatives = c->negatives;
    r->epoch = c->epoch;
    r->fenced = c->fenced;
    r->stop_flag = c->stop_flag;
    r->P = tma_gnn_param_count(&r->cfg);
    const int64_t most = TMA_MAX(TMA_MAX(r->num_edges[0], r->num_edges[1]), 1);
    r->rank = malloc((size_t)r->S * sizeof *r->rank);
    r->addr = calloc((size_t)r->S, sizeof *r->addr);
    r->answered = malloc((size_t)r->S * sizeof *r->answered);
    r->begin = malloc((size_t)(1 + r->S + r->P) * sizeof *r->begin);
    r->above = malloc((size_t)most * sizeof *r->above);
    r->ties = malloc((size_t)most * sizeof *r->ties);
    r->seen = malloc((size_t)most);
    tma_transport_config_t tc;
    tma_transport_config_init(&tc);
    tc.job = c->job;
    tc.token = c->token;
    tc.self_id = TMA_COORD_PEER;
    tma_status_t st = r->rank && r->addr && r->answered && r->begin && r->above && r->ties && r->seen && r->P > 0
                          ? tma_transport_create(&tc, &r->tr)
                          : TMA_ERR_NOMEM;
    if (st != TMA_OK) {
        coord_ranks_destroy(r);
        return st;
    }
    *r_p = r;
    return TMA_OK;
}

/* A step (abort, release) to each of n ranks, as best it can: one that is gone is not waited for. */
static void tell_each(coord_ranks_t *r, const uint32_t *peers, size_t n, int what)
{
    float step[4] = {(float)what, 0, 0, 0};
    tma_transport_meta_t meta = {TMA_TAG_EVAL_STEP, r->epoch, (uint64_t)r->seq};
    for (size_t i = 0; i < n; i++)
        tma_transport_send(r->tr, peers[i], &meta, step, 4, TMA_TRANSPORT_MEM_HOST, 2.0);
}

void coord_ranks_destroy(coord_ranks_t *r)
{
    if (!r)
        return;
    /* The ranks linger after the job's stop for its last evaluations: let
     * them go, unless another coordinator leads now (it may need them). */
    if (r->tr && !(r->fenced && __atomic_load_n(r->fenced, __ATOMIC_SEQ_CST))) {
        uint32_t peers[256];
        size_t np = 0;
        tma_transport_peers(r->tr, peers, 256, &np);
        tell_each(r, peers, TMA_MIN(np, (size_t)256), TMA_EVAL_RELEASE);
    }
    tma_transport_destroy(r->tr);
    void *owned[] = {r->rank, r->addr, r->answered, r->begin, r->above, r->ties, r->seen, r};
    for (size_t i = 0; i < TMA_ARRAY_LEN(owned); i++)
        free(owned[i]);
}

static int give_up(const coord_ranks_t *r)
{
    return (r->fenced && __atomic_load_n(r->fenced, __ATOMIC_SEQ_CST)) || (r->stop_flag && *r->stop_flag > 1);
}

/* The ranks: each shard's owner, live, with an address; connected. */
static tma_status_t gather_ranks(coord_ranks_t *r, char *why, size_t cap)
{
    tma_job_view_snap_t s;
    tma_status_t st = tma_job_view_snapshot(r->view, &s);
    if (st != TMA_OK) {
        snprintf(why, cap, "the job view is unavailable");
        return st;
    }
    r->n = 0;
    float *owner = r->begin + 1;
    r->begin[0] = (float)r->S;
    /* The live owners first; a shard without one (dropped under the
     * `continue` policy, or its owner gone) is evaluated by a live rank in
     * turn: its rows are still part of the graph. */
    int orphans = 0;
    for (int32_t k = 0; k < r->S; k++) {
        const int64_t o = k < s.n_shards && s.shard_present[k] ? s.shards[k].owner : -1;
        const tma_job_view_member_t *m = NULL;
        for (int i = 0; i < s.n_members && o >= 0; i++)
            if (s.members[i].rec.id == (uint32_t)o && s.members[i].rec.eval_address[0])
                m = &s.members[i];
        owner[k] = m ? (float)o : -1.0f;
        orphans += !m;
        if (!m)
            continue;
        int j = 0;
        while (j < r->n && r->rank[j] != (uint32_t)o)
            j++;
        if (j < r->n)
            continue;
        r->rank[r->n] = (uint32_t)o;
        if (st == TMA_OK && (tma_transport_wait_peer(r->tr, (uint32_t)o, 0) != TMA_OK ||
                             strcmp(r->addr[r->n], m->rec.eval_address) != 0)) {
            uint32_t got = 0;
            st = tma_transport_connect(r->tr, m->rec.eval_address, TMA_MIN(r->cfg.eval_rank_timeout, 10.0), &got);
            if (st == TMA_OK && got != (uint32_t)o) {
                tma_transport_disconnect(r->tr, got, 1.0);
                st = TMA_ERR_MISMATCH;
            }
            if (st != TMA_OK)
                snprintf(why, cap, "member %lld's rank at %s cannot be reached (%s)", (long long)o, m->rec.eval_address,
                         tma_status_str(st));
            snprintf(r->addr[r->n], sizeof r->addr[0], "%s", m->rec.eval_address);
        }
        r->n++;
    }
    if (st == TMA_OK && r->n == 0) {
        snprintf(why, cap, "no shard has a live owner with an evaluator rank");
        st = TMA_ERR_UNAVAILABLE;
    }
    for (int32_t k = 0, i = 0; k < r->S && st == TMA_OK && orphans; k++)
        if (owner[k] < 0)
            owner[k] = (float)r->rank[i++ % r->n];
    tma_job_view_snap_free(&s);
    return st;
}

/* The index of the first rank whose member is no longer in the job, or -1. */
static int rank_gone(coord_ranks_t *r)
{
    tma_job_view_snap_t s;
    if (tma_job_view_snapshot(r->view, &s) != TMA_OK)
        return -1;
    int gone = -1;
    for (int j = 0; j < r->n && gone < 0; j++)
        if (!tma_job_view_snap_member(&s, r->rank[j]))
            gone = j;
    tma_job_view_snap_free(&s);
    return gone;
}

static int rank_index(const coord_ranks_t *r, uint32_t peer)
{
    for (int j = 0; j < r->n; j++)
        if (r->rank[j] == peer)
            return j;
    return -1;
}

/* Sends a step to every rank. */
static tma_status_t send_all(coord_ranks_t *r, uint32_t tag, const float *data, size_t count, char *why, size_t cap)
{
    tma_transport_meta_t meta = {tag, r->epoch, (uint64_t)r->seq};
    /* A rank cut off by the network does not take its step: bounded well below
     * rank_timeout, as a round's broadcast is. */
    tma_status_t st = tma_transport_send_many(r->tr, r->rank, (size_t)r->n, &meta, data, count, TMA_TRANSPORT_MEM_HOST,
                                              TMA_MIN(r->cfg.eval_rank_timeout, 30.0), NULL);
    if (st != TMA_OK)
        snprintf(why, cap, "a rank could not be sent the evaluation's step (%s)", tma_status_str(st));
    return st;
}

/* Waits for every rank's answer (tag) to this evaluation; each is handed
 * to on_answer (may be NULL: a DONE whose status is checked here). */
static tma_status_t wait_all(coord_ranks_t *r, uint32_t tag, const char *what, const rank_step_t *step,
                             tma_status_t (*on_answer)(coord_ranks_t *r, const tma_transport_msg_t *m), char *why,
                             size_t cap)
{
    double next_resend = tma_clock_now() + RANK_RESEND_S;
    for (int j = 0; j < r->n; j++)
        r->answered[j] = 0;
    int left = r->n;
    const double deadline = tma_clock_now() + r->cfg.eval_rank_timeout;
    double next_check = tma_clock_now() + 1.0;
    tma_status_t st = TMA_OK;
    while (left > 0 && st == TMA_OK) {
        if (give_up(r)) {
            snprintf(why, cap, "the coordinator stops");
            return TMA_ERR_CANCELLED;
        }
        if (tma_clock_now() >= next_check) {
            /* A rank cut off by the network never answers: its lease lapses. */
            next_check = tma_clock_now() + 1.0;
            const int j = rank_gone(r);
            if (j >= 0) {
                snprintf(why, cap, "member %u left the job during %s", r->rank[j], what);
                return TMA_ERR_PEER_FAILED;
            }
        }
        if (step && tma_clock_now() >= next_resend) {
            tma_transport_meta_t meta = {step->tag, r->epoch, (uint64_t)r->seq};
            for (int j = 0; j < r->n; j++)
                if (!r->answered[j] &&
                    tma_transport_send(r->tr, r->rank[j], &meta, step->data, step->count, TMA_TRANSPORT_MEM_HOST,
                                       2.0) == TMA_OK)
                    tma_log_debug(COMP, "evaluation %lld: %s sent again to member %u (no answer in %.0f s)",
                                  (long long)r->seq, what, r->rank[j], RANK_RESEND_S);
            next_resend = tma_clock_now() + RANK_RESEND_S;
        }
        if (tma_clock_now() > deadline) {
            for (int j = 0; j < r->n; j++)
                if (!r->answered[j]) {
                    snprintf(why, cap, "member %u's rank did not finish %s within eval.rank_timeout (%.0f s)",
                             r->rank[j], what, r->cfg.eval_rank_timeout);
                    break;
                }
            return TMA_ERR_TIMEOUT;
        }
        tma_transport_msg_t m;
        if (tma_transport_recv(r->tr, TMA_TRANSPORT_ANY_PEER, TMA_TRANSPORT_ANY_TAG, 0.2, &m) != TMA_OK)
            continue;
        const int j = rank_index(r, m.peer);
        if (m.kind == TMA_TRANSPORT_MSG_EVENT) {
            if (j >= 0 && m.event.kind != TMA_TRANSPORT_EV_CONNECTED) {
                snprintf(why, cap, "member %u's rank went away during %s (%s)", m.peer, what,
                         tma_transport_event_str(m.event.kind));
                st = TMA_ERR_PEER_FAILED;
            }
        } else if (j >= 0 && !r->answered[j] && m.meta.tag == tag && (int64_t)m.meta.round == r->seq &&
                   (!step || (m.count == 3 && (int)((const float *)m.data)[1] == step->what &&
                              (int64_t)((const float *)m.data)[2] == step->arg))) {
            const float *f = m.data;
            st = m.count >= 1 && f[0] != 0 ? (tma_status_t)(int)f[0]
                 : on_answer          ? on_answer(r, &m)
                 : m.count == 3       ? TMA_OK
                                      : TMA_ERR_MALFORMED;
            if (st != TMA_OK)
                snprintf(why, cap, "member %u's rank failed %s: %s", m.peer, what, tma_status_str(st));
            r->answered[j] = 1;
            left--;
        }
        tma_transport_msg_release(r->tr, &m);
    }
    return st;
}

/* A rank's duties: edge, negatives above, tied. */
static tma_status_t take_counts(coord_ranks_t *r, const tma_transport_msg_t *m)
{
    const float *f = m->data;
    const int64_t n = m->count >= 2 ? (int64_t)f[1] : -1, ne = r->num_edges[r->split];
    if (n < 0 || m->count != (size_t)(2 + 4 * n))
        return TMA_ERR_MALFORMED;
    for (int64_t i = 0; i < n; i++) {
        const int64_t e = tma_eval_get_i64(f + 2 + 4 * i);
        const float above = f[2 + 4 * i + 2], ties = f[2 + 4 * i + 3];
        if (e < 0 || e >= ne || r->seen[e] || !(above >= 0) || !(ties >= 0) || above + ties > (float)r->negatives) {
            tma_log_warn(COMP, "member %u's rank sent a bad count for edge %lld", m->peer, (long long)e);
            return TMA_ERR_MALFORMED;
        }
        r->seen[e] = 1;
        r->above[e] = (int32_t)above;
        r->ties[e] = (int32_t)ties;
    }
    return TMA_OK;
}

/* The scoring of split t after the layers: every edge's counts, summed into m. */
static tma_status_t score_split(coord_ranks_t *r, int t, tma_gnn_metrics_t *m, char *why, size_t cap)
{
    const int64_t ne = r->num_edges[t];
    if (ne <= 0) {
        snprintf(why, cap, "the graph has no %s edges", t ? "test" : "validation");
        return TMA_ERR_NOT_FOUND;
    }
    float step[4] = {TMA_EVAL_SCORE, (float)t, 0, 0};
    tma_eval_put_i64(step + 2, r->cfg.eval_max_edges);
    memset(r->seen, 0, (size_t)ne);
    r->split = t;
    tma_status_t st = send_all(r, TMA_TAG_EVAL_STEP, step, 4, why, cap);
    st = st ? st
            : wait_all(r, TMA_TAG_EVAL_RESULT, t ? "scoring the test edges" : "scoring", NULL, take_counts, why, cap);
    for (int64_t e = 0; e < ne && st == TMA_OK; e++)
        if (!r->seen[e]) {
            snprintf(why, cap, "no rank scored %s edge %lld", t ? "test" : "validation", (long long)e);
            st = TMA_ERR_MALFORMED;
        }
    if (st == TMA_OK) {
        tma_gnn_metrics_init(m, &r->cfg);
        tma_gnn_metrics_add_counts(m, r->above, r->ties, ne, 1 + r->negatives);
        tma_gnn_metrics_finish(m);
    }
    return st;
}

tma_status_t coord_ranks_metrics(coord_ranks_t *r, const float *params, tma_gnn_split_t split,
                                 tma_gnn_metrics_t *m_p, tma_gnn_metrics_t *test_p, char *why, size_t cap)
{
    why[0] = '\0';
    r->seq++;
    tma_status_t st = gather_ranks(r, why, cap);
    if (st == TMA_OK) {
        memcpy(r->begin + 1 + r->S, params, (size_t)r->P * sizeof(float));
        st = send_all(r, TMA_TAG_EVAL_BEGIN, r->begin, (size_t)(1 + r->S + r->P), why, cap);
    }
    const rank_step_t start = {TMA_EVAL_BEGIN, 0, TMA_TAG_EVAL_BEGIN, r->begin, (size_t)(1 + r->S + r->P)};
    st = st ? st : wait_all(r, TMA_TAG_EVAL_DONE, "starting", &start, NULL, why, cap);
    for (int l = 0; l < r->cfg.layers && st == TMA_OK; l++) {
        float step[4] = {TMA_EVAL_LAYER, (float)l, 0, 0};
        const rank_step_t layer = {TMA_EVAL_LAYER, l, TMA_TAG_EVAL_STEP, step, 4};
        char what[32];
        snprintf(what, sizeof what, "layer %d", l);
        st = send_all(r, TMA_TAG_EVAL_STEP, step, 4, why, cap);
        st = st ? st : wait_all(r, TMA_TAG_EVAL_DONE, what, &layer, NULL, why, cap);
    }
    st = st ? st : score_split(r, split == TMA_GNN_SPLIT_TEST, m_p, why, cap);
    /* The test edges too, on the same embeddings (scoring is the cheap part). */
    if (st == TMA_OK && test_p && r->num_edges[1] > 0)
        st = score_split(r, 1, test_p, why, cap);
    if (st != TMA_OK) {
        tell_each(r, r->rank, (size_t)r->n, TMA_EVAL_ABORT); /* the others drop it */
        return st;
    }
    return TMA_OK;
}
