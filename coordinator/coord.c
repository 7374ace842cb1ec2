/*
 * coord.c: the queries on the coordinator's state that every phase asks:
 * whether it is stopping (asked to, or fenced) and how many seconds it has
 * trained.  They sit below every other file of the folder, so the phases
 * can call them without calling each other.
 */
#include "coord_int.h"

int coord_stopping(coord_t *c)
{
    return (c->stop_flag && *c->stop_flag) || __atomic_load_n(&c->fenced, __ATOMIC_SEQ_CST);
}

double coord_train_elapsed(const coord_t *c)
{
    return c->elapsed_base + (c->clock_start > 0 ? tma_clock_now() - c->clock_start : 0);
}
