/*
 * device.c: the device a worker trains on, chosen once for all its
 * incarnations: --device; else the job's one devices.workers entry; else
 * the entry the launcher's local rank picks, so the workers of one node
 * spread over its GPUs whatever their member ids (ids grow with every
 * failure, so two live workers may share one modulo n).  Without a local
 * rank, join() picks by the first member id.
 */
#include "worker_int.h"

#include <stdlib.h>

#define COMP "worker"

/* The rank a launcher gives each of its processes on one node (Slurm's
 * SLURM_LOCALID, Open MPI's OMPI_COMM_WORLD_LOCAL_RANK), or -1. */
static int local_rank(void)
{
    static const char *const vars[] = {"SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && *end == '\0' && r >= 0 && r < (1 << 20))
            return (int)r;
    }
    return -1;
}

tma_status_t worker_device_choose(const char *opt_device, const tma_job_t *job, char *device, size_t cap,
                                  int *fixed_p)
{
    const int n = job->n_worker_devices, rank = local_rank();
    const char *d = opt_device               ? opt_device
                    : (n == 1 || rank >= 0) ? job->worker_devices[n == 1 ? 0 : rank % n]
                                            : job->worker_devices[0];
    snprintf(device, cap, "%s", d);
    *fixed_p = opt_device || n == 1 || rank >= 0;
    if (!tma_gnn_device_valid(device)) {
        tma_log_error(COMP, "device \"%s\": expected cpu, cuda or cuda:N", device);
        return TMA_ERR_INVALID;
    }
    return TMA_OK;
}
