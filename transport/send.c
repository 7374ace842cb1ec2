/*
 * send.c: the send window.  tma_transport_send_many() cuts a tensor into
 * frames, checksums each one and queues it for every peer while earlier
 * frames are in flight; the progress thread hands each frame to UCX and
 * completes it.  Test faults (tma_transport_test_inject) are applied by one
 * hook, send_fault().
 */
#include "transport_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void send_finish(tma_transport_t *t, cmd_t *cmd, ucs_status_t status)
{
    conn_t *c = cmd->conn;
    for (cmd_t **pp = &t->active_sends; *pp; pp = &(*pp)->active_next) {
        if (*pp == cmd) {
            *pp = cmd->active_next;
            STAT_SUB(t, tx_active, 1);
            break;
        }
    }
    tma_status_t st;
    if (status == UCS_OK) {
        st = TMA_OK;
    } else if (cmd->timed_out) {
        st = TMA_ERR_TIMEOUT;
    } else if (status == UCS_ERR_CANCELED && t->shutdown) {
        st = TMA_ERR_CLOSED;
    } else {
        st = TMA_ERR_PEER_FAILED;
    }
    cmd->conn = NULL;
    transport_cmd_complete(t, cmd, st);
    if (c)
        transport_conn_unref(c);
}

static void send_done_cb(void *req, ucs_status_t status, void *user_data)
{
    cmd_t *cmd = user_data;
    ucp_request_free(req);
    send_finish(cmd->conn->t, cmd, status);
}

void transport_do_send(tma_transport_t *t, cmd_t *cmd)
{
    conn_t *c = t->shutdown ? NULL : transport_conn_open_by_peer(t, cmd->peer);
    if (!c) {
        transport_cmd_complete(t, cmd, t->shutdown ? TMA_ERR_CLOSED : TMA_ERR_UNAVAILABLE);
        return;
    }
    cmd->conn = c;
    c->refs++;
    ucp_request_param_t p;
    memset(&p, 0, sizeof p);
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p.cb.send = send_done_cb;
    p.user_data = cmd;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    p.memory_type = UCS_MEMORY_TYPE_HOST;
    void *req = ucp_am_send_nbx(c->ep, AM_ID, cmd->hdr, cmd->hdr_len, cmd->data, cmd->send_len, &p);
    if (req == NULL) {
        send_finish(t, cmd, UCS_OK);
    } else if (UCS_PTR_IS_ERR(req)) {
        send_finish(t, cmd, UCS_PTR_STATUS(req));
    } else {
        cmd->req = req;
        cmd->active_next = t->active_sends;
        t->active_sends = cmd;
        STAT_ADD(t, tx_active, 1);
    }
}

/* ------------------------------------------------------------------ the window (API) */

tma_status_t transport_check_mem(tma_transport_mem_t mem, const char *what)
{
    if (mem == TMA_TRANSPORT_MEM_HOST)
        return TMA_OK;
    if (mem == TMA_TRANSPORT_MEM_CUDA) {
        tma_log_error(COMP,
                      "%s: CUDA memory is not supported (this UCX cannot send device memory): "
                      "pass a host copy, as the workers do with the trainer's parameter and "
                      "gradient blocks",
                      what);
        return TMA_ERR_UNSUPPORTED;
    }
    tma_log_error(COMP, "%s: unknown memory type %d", what, (int)mem);
    return TMA_ERR_INVALID;
}

/* Waits until the n sends of one window slot are done and records the first
 * failure of each peer. */
static void send_slot_wait(tma_transport_t *t, cmd_t *slot, size_t n, tma_status_t *res)
{
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < n; i++) {
        while (!slot[i].done)
            pthread_cond_wait(&t->done_cond, &t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    for (size_t i = 0; i < n; i++) {
        if (res[i] == TMA_OK && slot[i].st != TMA_OK)
            res[i] = slot[i].st;
        slot[i].done = 0;
    }
}

/* Queues one frame for each of the n peers of a window slot; a peer that
 * failed gets nothing more (its slot is done at once). */
static void send_slot_queue(tma_transport_t *t, cmd_t *slot, const uint32_t *peers, size_t n,
                            const unsigned char *hdr, size_t hdr_len, const void *payload,
                            size_t send_len, double deadline, tma_status_t *res)
{
    pthread_mutex_lock(&t->lock);
    int closing = t->closing;
    for (size_t p = 0; p < n; p++) {
        cmd_t *c = &slot[p];
        memset(c, 0, sizeof *c);
        c->kind = CMD_SEND;
        c->peer = peers[p];
        c->hdr = hdr;
        c->hdr_len = hdr_len;
        c->data = payload;
        c->send_len = send_len;
        c->deadline = deadline;
        if (res[p] != TMA_OK || closing) {
            if (closing)
                res[p] = TMA_ERR_CLOSED;
            c->done = 1; /* nothing to send to a failed peer */
            continue;
        }
        transport_cmd_append_locked(t, c);
    }
    pthread_mutex_unlock(&t->lock);
    transport_wake(t);
}

/*
 * The test hook (tma_transport_test_inject): applies the fault injected for
 * this send to frame i of nframes, whose header hdr was just encoded from
 * *f.  A payload bit goes in the last frame (after the others landed), the
 * first frame's chunks again in the second, anything else in the first.
 * Returns the payload to send: for TMA_TRANSPORT_FAULT_PAYLOAD_BYTE a
 * damaged copy left in *copy_p (the caller's data is never touched), else
 * payload itself.
 */
static const unsigned char *send_fault(tma_transport_fault_t fault, size_t i, size_t nframes,
                                       size_t frame_bytes, tma_transport_frame_t *f,
                                       const unsigned char *payload, unsigned char *hdr,
                                       size_t *hdr_len_p, size_t *send_len_p, void **copy_p)
{
    switch (fault) {
    case TMA_TRANSPORT_FAULT_NONE:
        break;
    case TMA_TRANSPORT_FAULT_DUP_CHUNK:
        if (i == 1 && f->length == frame_bytes) {
            f->chunk = 0;
            tma_transport_frame_encode(f, payload, f->length, hdr);
        }
        break;
    case TMA_TRANSPORT_FAULT_PAYLOAD_BYTE:
        if (i == nframes - 1 && f->length) {
            unsigned char *copy = malloc(f->length);
            if (copy) {
                memcpy(copy, payload, f->length);
                copy[f->length / 2] ^= 0x10;
                *copy_p = copy;
                return copy;
            }
        }
        break;
    default:
        if (i == 0)
            transport_frame_damage(hdr, fault, hdr_len_p, send_len_p);
        break;
    }
    return payload;
}

/*
 * The send path: the tensor goes out in frames of whole chunks.  This thread
 * checksums frame i while up to SEND_WINDOW - 1 earlier frames are on their
 * way, so the CRC work can overlap the transfer.  A tensor of up to
 * SEND_WINDOW chunks goes one chunk per frame; longer ones in up to
 * SEND_WINDOW frames of up to SEND_FRAME_CHUNKS chunks: every frame costs a
 * rendezvous and several thread wake-ups on both sides, which measured ~15 %
 * of the CPU per byte with 4 MiB frames on loopback (docs/benchmarks.md).
 * Every frame goes to every peer before the next is checksummed; a peer that
 * failed gets no further frames.
 */
tma_status_t tma_transport_send_many(tma_transport_t *t, const uint32_t *peers, size_t n,
                                     const tma_transport_meta_t *meta, const float *data,
                                     size_t count, tma_transport_mem_t mem, double timeout_s,
                                     tma_status_t *status_p)
{
    tma_status_t st = transport_check_mem(mem, "send");
    if (st != TMA_OK)
        return st;
    size_t bytes;
    if (tma_mul_overflow(count, sizeof(float), &bytes) || bytes > t->max_message) {
        tma_log_error(COMP, "send: %zu values exceed the largest message (%" PRIu64 " bytes)",
                      count, t->max_message);
        return TMA_ERR_RANGE;
    }
    if (n == 0)
        return TMA_OK;
    if (!data && count)
        return TMA_ERR_INVALID;
    const size_t chunk = TMA_TRANSPORT_CHUNK_BYTES;
    size_t nchunks = bytes ? (bytes - 1) / chunk + 1 : 1;
    if (nchunks > TMA_TRANSPORT_MAX_CHUNKS) {
        tma_log_error(COMP, "send: %zu bytes need more than %u chunks", bytes,
                      TMA_TRANSPORT_MAX_CHUNKS);
        return TMA_ERR_RANGE;
    }
    size_t per = (nchunks + SEND_WINDOW - 1) / SEND_WINDOW;
    if (per > SEND_FRAME_CHUNKS)
        per = SEND_FRAME_CHUNKS;
    const size_t frame_bytes = per * chunk;
    size_t nframes = (nchunks + per - 1) / per;
    tma_status_t one_res, *res = status_p ? status_p : n == 1 ? &one_res : calloc(n, sizeof *res);
    cmd_t one_cmd[SEND_WINDOW];
    cmd_t *cmds = n == 1 ? one_cmd : calloc(SEND_WINDOW * n, sizeof *cmds);
    if (!res || !cmds) {
        if (res != status_p && res != &one_res)
            free(res);
        if (cmds != one_cmd)
            free(cmds);
        return TMA_ERR_NOMEM;
    }
    memset(cmds, 0, SEND_WINDOW * n * sizeof *cmds);
    for (size_t p = 0; p < n; p++)
        res[p] = TMA_OK;
    unsigned char hdr[SEND_WINDOW][TMA_TRANSPORT_HEADER_BYTES];
    void *copy = NULL;
    tma_transport_frame_t f;
    memset(&f, 0, sizeof f);
    f.version = TMA_TRANSPORT_VERSION;
    f.type = TMA_TRANSPORT_FRAME_TENSOR;
    f.tag = meta ? meta->tag : 0;
    f.epoch = meta ? meta->epoch : 0;
    f.round = meta ? meta->round : 0;
    f.sender = t->self_id;
    f.job_id = t->job_id;
    f.total = bytes;
    f.seq = (uint16_t)__atomic_fetch_add(&t->next_seq, 1, __ATOMIC_RELAXED);
    tma_transport_fault_t fault =
        (tma_transport_fault_t)__atomic_exchange_n(&t->fault, 0, __ATOMIC_RELAXED);
    double deadline = transport_deadline_from(timeout_s);

    for (size_t i = 0; i < nframes; i++) {
        size_t s = i % SEND_WINDOW, off = i * frame_bytes;
        cmd_t *slot = &cmds[s * n];
        if (i >= SEND_WINDOW)
            send_slot_wait(t, slot, n, res);
        const unsigned char *payload = (const unsigned char *)data + off;
        f.chunk = (uint16_t)(i * per);
        f.length = bytes - off < frame_bytes ? bytes - off : frame_bytes;
        tma_transport_frame_encode(&f, payload, f.length, hdr[s]);
        size_t hdr_len = TMA_TRANSPORT_HEADER_BYTES, send_len = f.length;
        payload = send_fault(fault, i, nframes, frame_bytes, &f, payload, hdr[s], &hdr_len,
                             &send_len, &copy);
        send_slot_queue(t, slot, peers, n, hdr[s], hdr_len, payload, send_len, deadline, res);
    }
    for (size_t i = 0; i < SEND_WINDOW && i < nframes; i++)
        send_slot_wait(t, &cmds[((nframes - 1 - i) % SEND_WINDOW) * n], n, res);
    st = TMA_OK;
    for (size_t p = 0; p < n; p++) {
        if (res[p] == TMA_OK) {
            STAT_ADD(t, msgs_sent, 1);
            STAT_ADD(t, bytes_sent, bytes);
        } else if (st == TMA_OK) {
            st = res[p];
        }
    }
    if (res != status_p && res != &one_res)
        free(res);
    if (cmds != one_cmd)
        free(cmds);
    free(copy);
    return st;
}

tma_status_t tma_transport_send(tma_transport_t *t, uint32_t peer, const tma_transport_meta_t *meta,
                                const float *data, size_t count, tma_transport_mem_t mem,
                                double timeout_s)
{
    return tma_transport_send_many(t, &peer, 1, meta, data, count, mem, timeout_s, NULL);
}
