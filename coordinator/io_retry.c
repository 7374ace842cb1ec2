/*
 * io_retry.c: the retry of a run-folder or etcd write that failed for a
 * reason that may pass (a full disk, etcd unreachable): the job waits and
 * tries again every second with a warning naming the path, instead of
 * ending (coord_int.h shows the loop).
 */
#include "coord_int.h"

#define COMP COORD_COMP

int coord_io_retry(coord_io_retry_t *r, tma_status_t st, int give_up)
{
    int waitable = tma_status_group(st) != TMA_GROUP_INPUT && st != TMA_ERR_NOMEM && st != TMA_ERR_FENCED;
    if (give_up || !waitable) {
        tma_log_error(COMP, "%s: writing %s failed (%s)%s", r->path, r->what, tma_status_str(st),
                      r->tries ? "; no more retries" : "");
        return 0;
    }
    double now = tma_clock_now();
    if (r->tries == 0 || now >= r->warn_at) {
        tma_log_warn(COMP, "%s: cannot write %s (%s): the job waits and retries every second; %s", r->path,
                     r->what, tma_status_str(st),
                     tma_status_group(st) == TMA_GROUP_PEER ? "etcd is unreachable"
                                                            : "free space on that file system (is the disk full?)");
        r->warn_at = now + 10.0;
    }
    r->tries++;
    tma_sleep(1.0);
    return 1;
}

void coord_io_retry_end(coord_io_retry_t *r, tma_status_t st)
{
    if (st == TMA_OK && r->tries > 0)
        tma_log_info(COMP, "%s: %s written after %d retr%s", r->path, r->what, r->tries, r->tries == 1 ? "y" : "ies");
}
