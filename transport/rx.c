/*
 * rx.c: arrivals.  The active-message callback checks each frame's header;
 * a tensor's chunks are received straight into its destination (a posted
 * buffer or one from the receive pool), held while there is none, and
 * checked against their CRC (long ones by the checker thread); a complete
 * tensor goes to the receive queue that tma_transport_recv() reads.
 */
#include "transport_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ pool and posts (lock held) */

static void pool_put_locked(tma_transport_t *t, pbuf_t *b)
{
    b->next = t->pool_free;
    t->pool_free = b;
    if (t->held_waiting)
        t->retry = 1;
}

/* A buffer of at least `bytes`: the best-fitting free one, else a new one
 * if the limit allows (dropping free buffers that do not fit to make room);
 * NULL when the pool is full of buffers in use. */
static pbuf_t *pool_get_locked(tma_transport_t *t, size_t bytes)
{
    pbuf_t **best = NULL;
    for (pbuf_t **pp = &t->pool_free; *pp; pp = &(*pp)->next) {
        size_t cap = (*pp)->cap;
        if (cap >= bytes && cap / 2 <= bytes + POOL_ALIGN && (!best || cap < (*best)->cap))
            best = pp;
    }
    if (best) {
        pbuf_t *b = *best;
        *best = b->next;
        return b;
    }
    size_t need = (bytes + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN;
    if (need == 0)
        need = POOL_ALIGN;
    while (t->pool_total + need > t->pool_limit && t->pool_free) {
        pbuf_t *b = t->pool_free;
        t->pool_free = b->next;
        t->pool_total -= b->cap;
        tma_free_huge(b->data, b->cap);
        free(b);
    }
    if (t->pool_total + need > t->pool_limit)
        return NULL;
    pbuf_t *b = malloc(sizeof *b);
    void *data = b ? tma_alloc_huge(need) : NULL;
    if (!data) {
        free(b);
        tma_log_error(COMP, "out of memory for a %zu-byte receive buffer", need);
        return NULL;
    }
    b->data = data;
    b->cap = need;
    b->next = NULL;
    t->pool_total += need;
    return b;
}

static post_t *post_match_locked(tma_transport_t *t, uint32_t peer, uint32_t tag, size_t bytes)
{
    for (post_t *p = t->posts; p; p = p->next) {
        if (p->state == POST_FREE && p->peer == peer && p->bytes == bytes &&
            (p->tag == TMA_TRANSPORT_ANY_TAG || p->tag == tag))
            return p;
    }
    return NULL;
}

static void post_unlink_locked(tma_transport_t *t, post_t *p)
{
    for (post_t **pp = &t->posts; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            return;
        }
    }
}

/* Gives a node's destination back: the pool buffer, or the post (to FREE,
 * so a later tensor can land there). */
static void node_release_dest_locked(tma_transport_t *t, node_t *n)
{
    if (n->pbuf) {
        pool_put_locked(t, n->pbuf);
        n->pbuf = NULL;
    }
    if (n->post) {
        n->post->state = POST_FREE;
        n->post = NULL;
        pthread_cond_broadcast(&t->rx_cond);
        if (t->held_waiting)
            t->retry = 1;
    }
}

void transport_node_free_locked(tma_transport_t *t, node_t *n)
{
    if (n->post) {
        post_unlink_locked(t, n->post);
        free(n->post);
        n->post = NULL;
        pthread_cond_broadcast(&t->rx_cond);
    }
    if (n->pbuf)
        pool_put_locked(t, n->pbuf);
    free(n);
}

void transport_queue_append_locked(tma_transport_t *t, node_t *n)
{
    n->next = NULL;
    if (t->q_tail)
        t->q_tail->next = n;
    else
        t->q_head = n;
    t->q_tail = n;
    pthread_cond_broadcast(&t->rx_cond);
}

/* ------------------------------------------------------------------ assembly */

/*
 * A tensor arrives as one or more chunks (frames), each received straight
 * into its place in the tensor's destination and checked against its own
 * CRC as soon as it has landed.  The tensor is queued for recv()
 * when every chunk has arrived and passed; a bad chunk flags the peer and
 * the tensor is dropped once its other chunks have settled.
 */

/* Picks where a tensor lands: a matching post, else a pool buffer.
 * 0 when nothing is free (its chunks are held). */
static int rx_pick_dest(tma_transport_t *t, node_t *n)
{
    int ok = 1;
    pthread_mutex_lock(&t->lock);
    post_t *p = post_match_locked(t, n->conn->peer, n->frame.tag, n->bytes);
    if (p) {
        p->state = POST_BUSY;
        p->conn_uid = n->conn->uid;
        n->post = p;
        n->data = p->buf;
    } else if (n->bytes == 0) {
        n->data = NULL;
    } else {
        n->pbuf = pool_get_locked(t, n->bytes);
        if (n->pbuf)
            n->data = n->pbuf->data;
        else
            ok = 0, t->held_waiting = 1; /* the next freed buffer retries it */
    }
    n->have_dest = ok;
    pthread_mutex_unlock(&t->lock);
    if (!ok && n->bytes > t->pool_limit && !n->warned) {
        n->warned = 1;
        tma_log_warn(COMP,
                     "a %zu-byte tensor from peer %u is larger than the receive pool (%" PRIu64
                     " bytes): it waits for a posted buffer",
                     n->bytes, n->conn->peer, t->pool_limit);
    }
    return ok;
}

static void assembling_unlink(conn_t *c, node_t *n)
{
    for (node_t **pp = &c->assembling; *pp; pp = &(*pp)->next) {
        if (*pp == n) {
            *pp = n->next;
            n->next = NULL;
            n->listed = 0;
            c->n_assembling--;
            return;
        }
    }
}

/* Queues a complete tensor, or frees a failed one whose chunks all settled. */
static void node_settle(tma_transport_t *t, node_t *n)
{
    conn_t *c = n->conn;
    if (n->failed) {
        if (n->chunks_busy)
            return; /* the last chunk to settle frees it */
        assembling_unlink(c, n);
        pthread_mutex_lock(&t->lock);
        node_release_dest_locked(t, n);
        pthread_mutex_unlock(&t->lock);
        free(n);
        transport_conn_unref(c);
        return;
    }
    if (n->chunks_done < n->nchunks)
        return;
    assembling_unlink(c, n);
    n->kind = TMA_TRANSPORT_MSG_TENSOR;
    n->peer = c->peer;
    n->conn_uid = c->uid;
    n->lease = c->outgoing ? 0 : c->lease;
    n->conn = NULL;
    pthread_mutex_lock(&t->lock);
    if (n->post)
        n->post->state = POST_FILLED;
    transport_queue_append_locked(t, n);
    pthread_mutex_unlock(&t->lock);
    transport_conn_unref(c);
}

static void *chunk_dest(const chunk_t *k)
{
    return (char *)k->node->data + (size_t)k->frame.chunk * TMA_TRANSPORT_CHUNK_BYTES;
}

static void queue_chunk(chunk_t **head, chunk_t **tail, chunk_t *k)
{
    k->next = NULL;
    if (*tail)
        (*tail)->next = k;
    else
        *head = k;
    *tail = k;
}

/* A chunk's data has been checked (k->crc_ok) or did not arrive (status):
 * count it in its tensor and queue the tensor once it is complete. */
void transport_chunk_settle(tma_transport_t *t, chunk_t *k, ucs_status_t status)
{
    node_t *n = k->node;
    conn_t *c = k->conn;
    if (status == UCS_OK && !n->failed) {
        if (!k->crc_ok) {
            n->failed = 1;
            if (!transport_conn_gone(c))
                transport_conn_flag(c, TMA_ERR_CHECKSUM, "checksum mismatch");
        } else {
            n->chunks_done += tma_transport_frame_chunks(&k->frame);
        }
    } else if (status != UCS_OK) {
        if (!n->failed)
            tma_log_debug(COMP, "a tensor from peer %u did not arrive: %s", c->peer,
                          ucs_status_string(status));
        n->failed = 1;
    }
    if (k->active)
        STAT_SUB(t, rx_active, 1);
    n->chunks_busy--;
    free(k);
    node_settle(t, n);
    transport_conn_unref(c);
}

/*
 * A chunk's data landed (status UCS_OK) or failed to.  Long chunks go to the
 * checker thread, so that the progress thread goes on receiving while their
 * CRC is computed, but at most CHECK_AWAY_MAX at a time: the progress thread
 * checks the others itself, so that a checker starved of CPU slows the
 * arrivals down instead of letting finished frames (and with them tensors
 * counted against MAX_ASSEMBLING, and pool buffers) pile up.  Short ones are
 * checked here.
 */
static void chunk_landed(tma_transport_t *t, chunk_t *k, ucs_status_t status)
{
    if (status == UCS_OK && !k->node->failed) {
        if (k->frame.length >= CHECK_AWAY_MIN && t->checker_started) {
            pthread_mutex_lock(&t->lock);
            int room = t->check_away < CHECK_AWAY_MAX;
            if (room) {
                t->check_away++;
                queue_chunk(&t->check_head, &t->check_tail, k);
                pthread_cond_signal(&t->check_cond);
            }
            pthread_mutex_unlock(&t->lock);
            if (room)
                return;
            /* The checker is behind: check here, which also holds back
             * further arrivals (else frames, tensors and pool buffers
             * would pile up behind a starved checker). */
        }
        k->crc_ok = tma_transport_frame_verify(&k->frame, chunk_dest(k), k->frame.length) == TMA_OK;
    }
    transport_chunk_settle(t, k, status);
}

static void chunk_rndv_cb(void *req, ucs_status_t status, size_t length, void *user_data)
{
    chunk_t *k = user_data;
    tma_transport_t *t = k->conn->t;
    ucp_request_free(req);
    if (status == UCS_OK && length != k->frame.length)
        status = UCS_ERR_MESSAGE_TRUNCATED;
    chunk_landed(t, k, status);
}

/*
 * The checker thread: computes the CRC of landed chunks and hands them back
 * to the progress thread, which owns the tensors.  It touches nothing but
 * the chunk's frame and its bytes, which stay put until the chunk settles.
 * It stops once destroy asks and the queue is empty.
 */
void *transport_checker_main(void *arg)
{
    tma_transport_t *t = arg;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        chunk_t *k = t->check_head;
        if (!k) {
            if (t->check_stop)
                break;
            pthread_cond_wait(&t->check_cond, &t->lock);
            continue;
        }
        t->check_head = k->next;
        if (!t->check_head)
            t->check_tail = NULL;
        pthread_mutex_unlock(&t->lock);
        k->crc_ok = tma_transport_frame_verify(&k->frame, chunk_dest(k), k->frame.length) == TMA_OK;
        pthread_mutex_lock(&t->lock);
        int was_empty = t->checked_head == NULL;
        queue_chunk(&t->checked_head, &t->checked_tail, k);
        if (was_empty) {
            /* The progress thread takes the whole list when it wakes, so one
             * wake-up per non-empty list is enough. */
            pthread_mutex_unlock(&t->lock);
            transport_wake(t);
            pthread_mutex_lock(&t->lock);
        }
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

/* Moves a chunk whose tensor has a destination; `data` is the UCX payload
 * (eager) or the rendezvous descriptor; `held` says UCX kept it for us. */
static void chunk_start(tma_transport_t *t, chunk_t *k, void *data, int held)
{
    if (k->node->failed) {
        if (held)
            ucp_am_data_release(t->worker, data);
        transport_chunk_settle(t, k, UCS_ERR_CANCELED);
        return;
    }
    if (!k->rndv) {
        if (k->frame.length)
            memcpy(chunk_dest(k), data, k->frame.length);
        if (held)
            ucp_am_data_release(t->worker, data);
        chunk_landed(t, k, UCS_OK);
        return;
    }
    ucp_request_param_t p;
    memset(&p, 0, sizeof p);
    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p.cb.recv_am = chunk_rndv_cb;
    p.user_data = k;
    p.memory_type = UCS_MEMORY_TYPE_HOST;
    /* Counted from here until its check is done. */
    k->active = 1;
    STAT_ADD(t, rx_active, 1);
    void *req = ucp_am_recv_data_nbx(t->worker, data, chunk_dest(k), k->frame.length, &p);
    if (req == NULL)
        chunk_landed(t, k, UCS_OK);
    else if (UCS_PTR_IS_ERR(req))
        chunk_landed(t, k, UCS_PTR_STATUS(req));
}

static void held_append(tma_transport_t *t, chunk_t *k)
{
    queue_chunk(&t->held_head, &t->held_tail, k);
    k->conn->held++;
    STAT_ADD(t, rx_held, 1);
}

/* Retries held chunks in order; a connection's later chunks never pass its
 * earlier ones. */
void transport_retry_held(tma_transport_t *t)
{
    chunk_t *k = t->held_head, *prev = NULL;
    uint64_t blocked[16];
    int nblocked = 0;
    while (k) {
        chunk_t *next = k->next;
        int skip = 0;
        for (int i = 0; i < nblocked; i++)
            skip |= blocked[i] == k->conn->uid;
        if (!skip && (k->node->have_dest || rx_pick_dest(t, k->node))) {
            if (prev)
                prev->next = next;
            else
                t->held_head = next;
            if (t->held_tail == k)
                t->held_tail = prev;
            k->conn->held--;
            STAT_SUB(t, rx_held, 1);
            void *desc = k->desc;
            k->desc = NULL;
            chunk_start(t, k, desc, 1);
        } else {
            if (!skip && nblocked < (int)TMA_ARRAY_LEN(blocked))
                blocked[nblocked++] = k->conn->uid;
            prev = k;
        }
        k = next;
    }
    if (!t->held_head) {
        pthread_mutex_lock(&t->lock);
        t->held_waiting = 0;
        pthread_mutex_unlock(&t->lock);
    }
}

/* Gives back the held chunks of c and fails its partly arrived tensors
 * (those with chunks still in UCX's hands go when the chunks settle). */
void transport_conn_drop_arrivals(conn_t *c)
{
    tma_transport_t *t = c->t;
    chunk_t **pp = &t->held_head, *prev = NULL;
    while (*pp) {
        chunk_t *k = *pp;
        if (k->conn != c) {
            prev = k;
            pp = &k->next;
            continue;
        }
        *pp = k->next;
        if (t->held_tail == k)
            t->held_tail = prev;
        ucp_am_data_release(t->worker, k->desc);
        STAT_SUB(t, rx_held, 1);
        c->held--;
        k->node->chunks_busy--;
        k->node->failed = 1;
        free(k);
        transport_conn_unref(c);
    }
    while (c->assembling) {
        node_t *n = c->assembling;
        n->failed = 1;
        if (n->chunks_busy) {
            /* Leave the list; the last chunk's settling frees it. */
            assembling_unlink(c, n);
        } else {
            node_settle(t, n);
        }
    }
}

/* A tensor chunk passed the header checks: find or start its tensor, then
 * receive it (or hold it until the tensor has a destination). */
static ucs_status_t on_chunk(tma_transport_t *t, conn_t *c, const tma_transport_frame_t *f,
                             void *data, int rndv, ucs_status_t drop)
{
    node_t *n = c->assembling;
    while (n && n->frame.seq != f->seq)
        n = n->next;
    if (n && (n->frame.total != f->total || n->frame.tag != f->tag || n->frame.epoch != f->epoch ||
              n->frame.round != f->round)) {
        transport_conn_flag(c, TMA_ERR_MALFORMED, "chunk does not belong to the tensor it names");
        return drop;
    }
    if (!n) {
        if (c->n_assembling >= MAX_ASSEMBLING) {
            transport_conn_flag(c, TMA_ERR_MALFORMED, "too many tensors arriving at once");
            return drop;
        }
        uint32_t nchunks =
            f->total ? (uint32_t)((f->total - 1) / TMA_TRANSPORT_CHUNK_BYTES + 1) : 1;
        n = calloc(1, sizeof *n + (nchunks + 63) / 64 * sizeof n->have[0]);
        if (!n) {
            tma_log_error(COMP, "out of memory: dropped a tensor from peer %u", c->peer);
            return drop;
        }
        n->frame = *f;
        n->bytes = f->total;
        n->nchunks = nchunks;
        n->conn = c;
        c->refs++;
        n->next = c->assembling;
        n->listed = 1;
        c->assembling = n;
        c->n_assembling++;
    }
    /* Each chunk must come exactly once (decode kept the frame inside the
     * tensor), or the tensor could complete with a chunk never written. */
    uint32_t first = f->chunk, nc = tma_transport_frame_chunks(f);
    for (uint32_t i = first; i < first + nc; i++) {
        if (n->have[i / 64] & (1ull << (i % 64))) {
            transport_conn_flag(c, TMA_ERR_MALFORMED, "a chunk of a tensor arrived twice");
            return drop;
        }
    }
    for (uint32_t i = first; i < first + nc; i++)
        n->have[i / 64] |= 1ull << (i % 64);
    chunk_t *k = calloc(1, sizeof *k);
    if (!k) {
        tma_log_error(COMP, "out of memory: dropped a tensor from peer %u", c->peer);
        n->failed = 1;
        node_settle(t, n);
        return drop;
    }
    k->node = n;
    k->conn = c;
    k->frame = *f;
    k->rndv = rndv;
    c->refs++;
    n->chunks_busy++;
    if (c->held > 0 || (!n->have_dest && !rx_pick_dest(t, n))) {
        k->desc = data;
        held_append(t, k);
        return UCS_INPROGRESS;
    }
    chunk_start(t, k, data, 0);
    return rndv ? UCS_INPROGRESS : UCS_OK;
}

ucs_status_t transport_am_cb(void *arg, const void *header, size_t header_length, void *data,
                             size_t length, const ucp_am_recv_param_t *param)
{
    tma_transport_t *t = arg;
    int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    ucs_status_t drop = rndv ? UCS_ERR_REJECTED : UCS_OK;
    conn_t *c = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
                    ? transport_conn_by_ep(t, param->reply_ep)
                    : NULL;
    if (!c) {
        STAT_ADD(t, frames_dropped, 1);
        tma_log_warn(COMP, "dropped a frame from an unknown endpoint");
        return drop;
    }
    if (transport_conn_gone(c))
        return drop;

    tma_transport_frame_t f;
    const char *why = NULL;
    char buf[96];
    if (tma_transport_frame_decode(header, header_length, t->max_message, &f, &why) != TMA_OK) {
        transport_conn_flag(c, TMA_ERR_MALFORMED, why);
        return drop;
    }
    if (header_length != TMA_TRANSPORT_HEADER_BYTES) {
        transport_conn_flag(c, TMA_ERR_MALFORMED, "header longer than 64 bytes");
        return drop;
    }
    /* A hello of another job is answered (and refused) by on_hello. */
    if (f.job_id != t->job_id && f.type != TMA_TRANSPORT_FRAME_HELLO) {
        transport_conn_flag(c, TMA_ERR_MALFORMED, "frame of another job");
        return drop;
    }
    if (f.length != length) {
        snprintf(buf, sizeof buf, "length mismatch: header says %" PRIu64 " bytes, %zu arrived",
                 f.length, length);
        transport_conn_flag(c, TMA_ERR_MALFORMED, buf);
        return drop;
    }
    if (c->authed && f.sender != c->peer) {
        transport_conn_flag(c, TMA_ERR_MALFORMED, "sender id differs from the one in its hello");
        return drop;
    }
    if (f.type != TMA_TRANSPORT_FRAME_TENSOR) {
        /* Control frames are small and come eagerly; check them now. */
        if (rndv) {
            transport_conn_flag(c, TMA_ERR_MALFORMED, "control frame sent by rendezvous");
            return drop;
        }
        if (tma_transport_frame_verify(&f, data, length) != TMA_OK) {
            transport_conn_flag(c, TMA_ERR_CHECKSUM, "checksum mismatch");
            return drop;
        }
        transport_conn_on_control(t, c, &f, data, length);
        return UCS_OK;
    }
    /* A tensor. */
    if (c->state != CONN_OPEN) {
        if (c->state == CONN_CLOSING)
            return drop; /* we are closing: late data is not delivered */
        transport_conn_flag(c, TMA_ERR_MALFORMED, "tensor before hello");
        return drop;
    }
    return on_chunk(t, c, &f, data, rndv, drop);
}

/* ------------------------------------------------------------------ receiving (API) */

tma_status_t tma_transport_post(tma_transport_t *t, uint32_t peer, uint32_t tag, float *buf,
                                size_t count, tma_transport_mem_t mem)
{
    tma_status_t st = transport_check_mem(mem, "post");
    if (st != TMA_OK)
        return st;
    size_t bytes;
    if (!buf || tma_mul_overflow(count, sizeof(float), &bytes))
        return TMA_ERR_INVALID;
    post_t *p = calloc(1, sizeof *p);
    if (!p)
        return TMA_ERR_NOMEM;
    p->peer = peer;
    p->tag = tag;
    p->buf = buf;
    p->bytes = bytes;
    p->state = POST_FREE;
    pthread_mutex_lock(&t->lock);
    for (post_t *q = t->posts; q; q = q->next) {
        if (q->buf == buf) {
            pthread_mutex_unlock(&t->lock);
            free(p);
            tma_log_error(COMP, "post: buffer %p is already posted", (void *)buf);
            return TMA_ERR_INVALID;
        }
    }
    post_t **pp = &t->posts;
    while (*pp)
        pp = &(*pp)->next;
    *pp = p;
    int kick = t->held_waiting;
    if (kick)
        t->retry = 1;
    pthread_mutex_unlock(&t->lock);
    if (kick)
        transport_wake(t);
    return TMA_OK;
}

tma_status_t tma_transport_post_cancel(tma_transport_t *t, float *buf, double timeout_s)
{
    double deadline = transport_deadline_from(timeout_s);
    int killed = 0;
    tma_status_t st = TMA_ERR_NOT_FOUND;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        post_t *p = t->posts;
        while (p && p->buf != buf)
            p = p->next;
        if (!p || p->state == POST_DELIVERED)
            break;
        if (p->state == POST_BUSY) {
            if (!killed && timeout_s >= 0 && tma_clock_now() >= deadline) {
                cmd_t *k = calloc(1, sizeof *k);
                if (k) {
                    k->kind = CMD_KILL;
                    k->detached = 1;
                    k->conn_uid = p->conn_uid;
                    k->reason = TMA_ERR_TIMEOUT;
                    killed = 1;
                    tma_log_warn(COMP, "a tensor still arriving into a cancelled post: closing "
                                       "that connection");
                    pthread_mutex_unlock(&t->lock);
                    if (transport_cmd_submit(t, k) != TMA_OK)
                        free(k);
                    pthread_mutex_lock(&t->lock);
                    continue;
                }
            }
            tma_cond_wait_until(&t->rx_cond, &t->lock, killed ? 0 : deadline);
            continue;
        }
        if (p->state == POST_FILLED) {
            node_t **pp = &t->q_head, *prev = NULL;
            while (*pp && (*pp)->post != p) {
                prev = *pp;
                pp = &(*pp)->next;
            }
            if (*pp) {
                node_t *n = *pp;
                *pp = n->next;
                if (t->q_tail == n)
                    t->q_tail = prev;
                n->post = NULL;
                free(n);
            }
        }
        post_unlink_locked(t, p);
        free(p);
        st = TMA_OK;
        break;
    }
    pthread_mutex_unlock(&t->lock);
    return st;
}

static int node_matches(const node_t *n, uint32_t peer, uint32_t tag)
{
    if (peer != TMA_TRANSPORT_ANY_PEER && n->peer != peer)
        return 0;
    return n->kind == TMA_TRANSPORT_MSG_EVENT || tag == TMA_TRANSPORT_ANY_TAG ||
           n->frame.tag == tag;
}

tma_status_t tma_transport_recv(tma_transport_t *t, uint32_t peer, uint32_t tag, double timeout_s,
                                tma_transport_msg_t *msg_p)
{
    double deadline = transport_deadline_from(timeout_s);
    for (;;) {
        node_t *n = NULL;
        tma_status_t st = TMA_OK;
        pthread_mutex_lock(&t->lock);
        for (;;) {
            if (t->closing) {
                st = TMA_ERR_CLOSED;
                break;
            }
            node_t *prev = NULL;
            for (n = t->q_head; n && !node_matches(n, peer, tag); n = n->next)
                prev = n;
            if (n) {
                if (prev)
                    prev->next = n->next;
                else
                    t->q_head = n->next;
                if (t->q_tail == n)
                    t->q_tail = prev;
                if (n->post)
                    n->post->state = POST_DELIVERED;
                break;
            }
            if (timeout_s == 0 || !tma_cond_wait_until(&t->rx_cond, &t->lock, deadline)) {
                st = TMA_ERR_TIMEOUT;
                break;
            }
        }
        pthread_mutex_unlock(&t->lock);
        if (st != TMA_OK)
            return st;

        memset(msg_p, 0, sizeof *msg_p);
        msg_p->kind = n->kind;
        msg_p->peer = n->peer;
        msg_p->priv_ = n;
        if (n->kind == TMA_TRANSPORT_MSG_EVENT) {
            msg_p->event = n->ev;
            return TMA_OK;
        }
        STAT_ADD(t, msgs_received, 1);
        STAT_ADD(t, bytes_received, n->bytes);
        msg_p->meta.tag = n->frame.tag;
        msg_p->meta.epoch = n->frame.epoch;
        msg_p->meta.round = n->frame.round;
        msg_p->peer_lease = n->lease;
        msg_p->data = n->data;
        msg_p->count = n->bytes / sizeof(float);
        msg_p->in_place = n->post != NULL;
        return TMA_OK;
    }
}

void tma_transport_msg_release(tma_transport_t *t, tma_transport_msg_t *msg)
{
    node_t *n = msg->priv_;
    if (n) {
        pthread_mutex_lock(&t->lock);
        transport_node_free_locked(t, n);
        int kick = t->retry;
        pthread_mutex_unlock(&t->lock);
        if (kick)
            transport_wake(t);
    }
    memset(msg, 0, sizeof *msg);
}
