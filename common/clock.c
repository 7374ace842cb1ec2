/* clock.c: monotonic and wall clocks, an EINTR-safe sleep and the deadline
 * wait on CLOCK_MONOTONIC condition variables. */
#include "tma_common.h"

#include <errno.h>
#include <time.h>

uint64_t tma_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double tma_clock_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double tma_clock_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void tma_sleep(double seconds)
{
    if (!(seconds > 0))
        return;
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int tma_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t ca;
    int r = pthread_condattr_init(&ca);
    if (r != 0)
        return r;
    r = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (r == 0)
        r = pthread_cond_init(cond, &ca);
    pthread_condattr_destroy(&ca);
    return r;
}

int tma_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, double deadline)
{
    if (deadline <= 0) {
        pthread_cond_wait(cond, mutex);
        return 1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    double rem = deadline - now;
    if (!(rem > 0))
        return 0;
    ts.tv_sec += (time_t)rem;
    ts.tv_nsec += (long)((rem - (double)(time_t)rem) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cond, mutex, &ts);
    return 1;
}
