/*
 * ggs.c: the GGS baseline, synchronous SGD: every step the coordinator
 * collects the gradients of the participating workers, averages them, lets
 * its replica apply them (the variant's after_average hook) and sends the
 * new parameters back.  Every evaluation interval (seconds or steps) the
 * steps since the last one make a round: recorded and evaluated like a
 * round of the other variants.
 */
#include "coord_int.h"

#include <stdlib.h>
#include <string.h>

#define COMP COORD_COMP

/* One synchronous step with the current participants.  *n_p = 0 when there
 * were none (nothing happened). */
static tma_status_t ggs_sync_step(coord_t *c, int *n_p, int *n_got_p, int *n_exp_p)
{
    tma_job_view_snap_t s;
    tma_status_t st = tma_job_view_snapshot(c->view, &s);
    if (st != TMA_OK)
        return st;
    uint32_t *ids = malloc((size_t)(s.n_members + 1) * sizeof *ids);
    int n = ids ? coord_expect_participants(c, &s, ids) : 0;
    tma_job_view_snap_free(&s);
    *n_p = n;
    if (n == 0) {
        free(ids);
        return TMA_OK;
    }
    int64_t step = c->ggs_step + 1;
    coord_collect(c, step, TMA_TAG_GRADS, tma_clock_now() + c->job->round_deadline, 0, n_exp_p);
    int n_got = coord_average_slots(c);
    *n_got_p = n_got;
    if (n_got > 0) {
        st = coord_after_average(c, n_got);
        if (st != TMA_OK) {
            free(ids);
            return st;
        }
        c->ggs_step = step;
        for (int i = 0; i < c->n_slots; i++)
            if (c->slots[i].used && c->slots[i].got) {
                c->slots[i].steps++;
                c->slots[i].loss_sum += c->slots[i].meta.loss;
            }
    }
    coord_push_global(c, ids, n, c->ggs_step);
    free(ids);
    return TMA_OK;
}

/* The steps since the last evaluation as round c->round + 1. */
static tma_status_t ggs_round(coord_t *c, int64_t steps_since, double agg_acc)
{
    int64_t t = c->round + 1;
    tma_job_view_snap_t s;
    tma_status_t st = tma_job_view_snapshot(c->view, &s);
    if (st != TMA_OK)
        return st;
    int n_alive = 0;
    uint32_t *alive = coord_member_ids(&s, &n_alive);
    tma_job_view_snap_free(&s);
    if (!alive)
        return TMA_ERR_NOMEM;
    for (int i = 0; i < c->n_slots; i++)
        c->slots[i].expected = c->slots[i].used && c->slots[i].steps > 0;
    cJSON *rec = coord_round_record(c, t, coord_train_elapsed(c), alive, n_alive, agg_acc);
    cJSON_AddNumberToObject(rec, "sync_steps", (double)steps_since);
    free(alive);
    st = coord_publish_round(c, t, rec);
    if (st != TMA_OK)
        return st;
    for (int i = 0; i < c->n_slots; i++) {
        c->slots[i].steps = 0;
        c->slots[i].loss_sum = 0;
    }
    return TMA_OK;
}

tma_status_t coord_ggs_loop(coord_t *c)
{
    tma_status_t st = TMA_OK;
    double next_eval = c->job->interval_steps > 0 ? 0 : coord_train_elapsed(c) + c->job->interval_s;
    int64_t steps_since = 0;
    double agg_acc = 0;
    while (!coord_stopping(c)) {
        if (c->job->train_s > 0 && coord_train_elapsed(c) >= c->job->train_s)
            break;
        if (c->job->rounds > 0 && c->round >= c->job->rounds)
            break;
        if ((st = coord_idle(c, 0, 1)) != TMA_OK)
            break;
        int n = 0, n_got = 0, n_exp = 0;
        double t0 = tma_clock_now();
        if ((st = ggs_sync_step(c, &n, &n_got, &n_exp)) != TMA_OK)
            break;
        if (n == 0) {
            if ((st = coord_idle(c, 0.1, 1)) != TMA_OK)
                break;
            continue;
        }
        steps_since += n_got > 0;
        agg_acc += tma_clock_now() - t0;
        int due = c->job->interval_steps > 0 ? steps_since >= c->job->interval_steps
                                             : coord_train_elapsed(c) >= next_eval;
        if (due && n_got > 0) {
            if ((st = ggs_round(c, steps_since, agg_acc)) != TMA_OK)
                break;
            steps_since = 0;
            agg_acc = 0;
            next_eval += c->job->interval_s;
        }
    }
    return st;
}
