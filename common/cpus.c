/* cpus.c: how many compute threads a process should use when nobody said:
 * the CPUs it may run on (its affinity mask, which Slurm, taskset, cgroup
 * cpusets and numactl narrow), or OMP_NUM_THREADS when that is set. */
#include "tma_common.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP "common"

int tma_cpus_usable(void)
{
    /* The mask may be wider than a cpu_set_t on very large machines: grow
     * it until the kernel accepts its size. */
    for (int ncpu = CPU_SETSIZE; ncpu <= (1 << 20); ncpu *= 2) {
        cpu_set_t *set = CPU_ALLOC((size_t)ncpu);
        if (!set)
            break;
        size_t size = CPU_ALLOC_SIZE((size_t)ncpu);
        CPU_ZERO_S(size, set);
        if (sched_getaffinity(0, size, set) == 0) {
            int n = CPU_COUNT_S(size, set);
            CPU_FREE(set);
            return n > 0 ? n : 1;
        }
        int err = errno;
        CPU_FREE(set);
        if (err != EINVAL)
            break;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

tma_status_t tma_threads_default(int *threads_p, const char **source_p)
{
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && *env) {
        /* OpenMP allows a list ("8,2") for nested levels: tma's threads are
         * the first level. */
        char *end;
        errno = 0;
        long n = strtol(env, &end, 10);
        while (*end == ' ' || *end == '\t')
            end++;
        if (errno || end == env || (*end != '\0' && *end != ',') || n < 1 || n > 1024) {
            tma_log_error(COMP, "OMP_NUM_THREADS=\"%s\": expected a number of threads in 1..1024 (or unset it)", env);
            return TMA_ERR_INVALID;
        }
        *threads_p = (int)n;
        if (source_p)
            *source_p = "OMP_NUM_THREADS";
        return TMA_OK;
    }
    *threads_p = tma_cpus_usable();
    if (source_p)
        *source_p = "the CPUs this process may use";
    return TMA_OK;
}

tma_status_t tma_threads_resolve(int requested, int *threads_p)
{
    if (requested > 0) {
        *threads_p = requested;
        return TMA_OK;
    }
    return tma_threads_default(threads_p, NULL);
}
