/*
 * inject.c: failure-injection points.  Compiled into every build but inert
 * unless TMA_FAULT (or the hidden --fault flag) arms them; the test suite in
 * tests/fault/ drives real processes through them.  docs/faults.md lists them.
 */
#include "tma_fault.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP "inject"

void tma_inject_init(tma_inject_t *inj)
{
    memset(inj, 0, sizeof *inj);
    inj->crash_round = -1;
    inj->drop_round = -1;
    inj->drop_begin_round = -1;
    inj->drop_rows_round = -1;
    inj->stall_round = -1;
    inj->poison_round = -1;
    inj->pause_round = -1;
}

static const char *const points[] = {"step", "send", "recv", "aggregate", "broadcast", "commit", "stop", "eval", "rank"};

/* "X@N" into value X and round N. */
static int split_at(char *v, char **x_p, int64_t *round_p)
{
    char *at = strchr(v, '@');
    if (!at)
        return -1;
    *at = '\0';
    *x_p = v;
    return tma_parse_i64(at + 1, round_p) == 0 && *round_p >= 0 ? 0 : -1;
}

/* As split_at, and "X@*" gives TMA_INJECT_ANY_ROUND. */
static int split_at_any(char *v, char **x_p, int64_t *round_p)
{
    char *at = strchr(v, '@');
    if (at && strcmp(at + 1, "*") == 0) {
        *at = '\0';
        *x_p = v;
        *round_p = TMA_INJECT_ANY_ROUND;
        return 0;
    }
    return split_at(v, x_p, round_p);
}

tma_status_t tma_inject_parse(const char *spec, tma_inject_t *inj)
{
    tma_inject_init(inj);
    char *copy = strdup(spec ? spec : "");
    if (!copy)
        return TMA_ERR_NOMEM;
    tma_status_t st = TMA_OK;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) {
            tma_log_error(COMP, "TMA_FAULT: \"%s\" is not NAME=VALUE", item);
            st = TMA_ERR_CONFIG;
            break;
        }
        *eq = '\0';
        char *name = item, *val = eq + 1, *x;
        int64_t round;
        if (strcmp(name, "crash") == 0 || strcmp(name, "pause") == 0) {
            int ok = split_at_any(val, &x, &round) == 0;
            int known = 0;
            for (size_t i = 0; ok && i < TMA_ARRAY_LEN(points); i++)
                known |= strcmp(x, points[i]) == 0;
            if (!ok || !known) {
                tma_log_error(COMP, "TMA_FAULT: %s=POINT@ROUND (ROUND a number or *, any round) with POINT one "
                                    "of step, send, recv, aggregate, broadcast, stop, eval, rank",
                              name);
                st = TMA_ERR_CONFIG;
                break;
            }
            if (name[0] == 'c') {
                snprintf(inj->crash_point, sizeof inj->crash_point, "%s", x);
                inj->crash_round = round;
            } else {
                snprintf(inj->pause_point, sizeof inj->pause_point, "%s", x);
                inj->pause_round = round;
            }
        } else if (strcmp(name, "delay_step") == 0) {
            if (tma_parse_double(val, &inj->delay_step) != 0 || inj->delay_step < 0 || inj->delay_step > 3600) {
                tma_log_error(COMP, "TMA_FAULT: delay_step=SECONDS (0..3600), got \"%s\"", val);
                st = TMA_ERR_CONFIG;
                break;
            }
        } else if (strcmp(name, "drop") == 0) {
            if (split_at(val, &x, &round) != 0 ||
                (strcmp(x, "weights") != 0 && strcmp(x, "begin") != 0 && strcmp(x, "rows") != 0)) {
                tma_log_error(COMP, "TMA_FAULT: drop=weights@ROUND, drop=begin@EVALUATION or drop=rows@EVALUATION");
                st = TMA_ERR_CONFIG;
                break;
            }
            if (x[0] == 'w')
                inj->drop_round = round;
            else if (x[0] == 'b')
                inj->drop_begin_round = round;
            else
                inj->drop_rows_round = round;
        } else if (strcmp(name, "stall_keepalive") == 0) {
            if (split_at(val, &x, &round) != 0 || tma_parse_double(x, &inj->stall_seconds) != 0 ||
                inj->stall_seconds <= 0) {
                tma_log_error(COMP, "TMA_FAULT: stall_keepalive=SECONDS@ROUND");
                st = TMA_ERR_CONFIG;
                break;
            }
            inj->stall_round = round;
        } else if (strcmp(name, "poison") == 0) {
            if (split_at(val, &x, &round) != 0 || (strcmp(x, "weights") != 0 && strcmp(x, "global") != 0)) {
                tma_log_error(COMP, "TMA_FAULT: poison=weights@ROUND or poison=global@ROUND");
                st = TMA_ERR_CONFIG;
                break;
            }
            snprintf(inj->poison_what, sizeof inj->poison_what, "%s", x);
            inj->poison_round = round;
        } else {
            tma_log_error(COMP, "TMA_FAULT: unknown item \"%s\" (known: crash, pause, delay_step, drop, "
                                "stall_keepalive, poison)",
                          name);
            st = TMA_ERR_CONFIG;
            break;
        }
        inj->active = 1;
    }
    free(copy);
    if (st != TMA_OK)
        tma_inject_init(inj);
    else if (inj->active)
        tma_log_warn(COMP, "failure injection armed: %s", spec);
    return st;
}

tma_status_t tma_inject_from_env(tma_inject_t *inj)
{
    const char *spec = getenv("TMA_FAULT");
    if (!spec || !*spec) {
        tma_inject_init(inj);
        return TMA_OK;
    }
    return tma_inject_parse(spec, inj);
}

/* Whether (point, round) is the one armed as (at, at_round). */
static int armed(const tma_inject_t *inj, const char *at, int64_t at_round, const char *point, int64_t round)
{
    if (!inj || !inj->active || at_round == -1 || strcmp(at, point) != 0)
        return 0;
    return at_round == TMA_INJECT_ANY_ROUND || at_round == round;
}

void tma_inject_point(const tma_inject_t *inj, const char *point, int64_t round)
{
    if (armed(inj, inj ? inj->crash_point : "", inj ? inj->crash_round : -1, point, round)) {
        tma_log_warn(COMP, "injected crash at %s in round %lld", point, (long long)round);
        kill(getpid(), SIGKILL);
        pause();
    }
    if (armed(inj, inj ? inj->pause_point : "", inj ? inj->pause_round : -1, point, round)) {
        tma_log_warn(COMP, "injected pause at %s in round %lld (SIGSTOP: SIGCONT resumes)", point,
                     (long long)round);
        kill(getpid(), SIGSTOP); /* stops every thread; returns once continued */
    }
}

void tma_inject_poison(const tma_inject_t *inj, const char *what, int64_t round, float *x)
{
    if (!inj || !inj->active || inj->poison_round != round || strcmp(inj->poison_what, what) != 0)
        return;
    tma_log_warn(COMP, "injected: a NaN in the %s of round %lld", what, (long long)round);
    x[0] = NAN;
}
