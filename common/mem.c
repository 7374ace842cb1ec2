/* mem.c: memory budgets: a size with a K/M/G/T suffix, and the budget a
 * command takes when nobody gave one (a share of physical memory, narrowed
 * to what RLIMIT_DATA leaves the process). */
#include "tma_common.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

tma_status_t tma_parse_bytes(const char *s, uint64_t *bytes_p)
{
    if (!s || !isdigit((unsigned char)*s))
        return TMA_ERR_INVALID;
    errno = 0;
    char *end;
    double x = strtod(s, &end);
    if (errno || end == s || !(x >= 0))
        return TMA_ERR_INVALID;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1024.0; end++; break;
    case 'M': mult = 1024.0 * 1024; end++; break;
    case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    x *= mult;
    if (*end || x >= 1.8e19)
        return TMA_ERR_INVALID;
    *bytes_p = (uint64_t)x;
    return TMA_OK;
}

/* The process's VmData now (what RLIMIT_DATA counts), or 0 when unknown. */
static uint64_t vm_data_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmData: %" SCNu64, &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

/* What RLIMIT_DATA leaves the process, less a margin for thread stacks and
 * the allocator's own overhead; UINT64_MAX without a limit. */
static uint64_t data_limit_left(uint64_t *lim_p)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_DATA, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return UINT64_MAX;
    uint64_t used = vm_data_now(), lim = (uint64_t)rl.rlim_cur, margin = (uint64_t)48 << 20;
    *lim_p = lim;
    return lim > used + margin ? (lim - used - margin) * 7 / 8 : 0;
}

uint64_t tma_memory_budget_default(char *why, size_t why_size)
{
    double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    uint64_t budget = ram > 0 ? (uint64_t)(ram / 2) : (uint64_t)1 << 30, lim = 0;
    snprintf(why, why_size, "half of physical memory");
    uint64_t left = data_limit_left(&lim);
    if (left < budget) {
        budget = left;
        snprintf(why, why_size, "what the data limit (ulimit -d, %.0f MiB) leaves", (double)lim / (1 << 20));
    }
    return budget;
}

uint64_t tma_memory_budget_cap(uint64_t budget)
{
    uint64_t lim = 0, left = data_limit_left(&lim);
    return left < budget ? left : budget;
}
