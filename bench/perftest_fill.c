/*
 * perftest_fill.c: an LD_PRELOAD library that makes ucx_perftest send data
 * that lives in memory, as tma's sender does (bench/bench_transport.sh).
 *
 * ucx_perftest takes its buffers from posix_memalign() (from malloc() for
 * small messages) and never writes its send buffer: every page of it is then the kernel's shared zero page, and
 * the kernel's copy into the socket reads the same 4 KiB again and again
 * (its resident set stays at a few MiB while it sends 1 GiB messages).  A
 * tensor is real data, read from memory.  Preloaded into both perftest
 * processes, this fills every posix_memalign() and malloc() block of at
 * least 1 MiB with a byte pattern as it is allocated, before perftest's timing starts, so
 * that perftest's sender reads resident, non-zero pages; nothing else of
 * perftest changes.  At exit it says on stderr how many bytes it filled
 * ("perftest_fill: filled N bytes in K blocks"), so that a script can tell
 * that it took effect.
 *
 * Built as bench/perftest_fill.so (bench/transport.mk).  Not part of tma.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define FILL_MIN ((size_t)1 << 20)

typedef int (*posix_memalign_fn)(void **, size_t, size_t);

static size_t g_bytes, g_blocks;

static void fill(void *block, size_t size)
{
    unsigned char *p = block;
    for (size_t i = 0; i < size; i++)
        p[i] = (unsigned char)(i * 131u + 7u);
    g_bytes += size;
    g_blocks++;
}

/* glibc's own allocator, exported for wrappers like this one (dlsym may
 * itself allocate, so it cannot be used to find malloc). */
extern void *__libc_malloc(size_t size);

void *malloc(size_t size)
{
    void *p = __libc_malloc(size);
    if (p && size >= FILL_MIN)
        fill(p, size);
    return p;
}

int posix_memalign(void **ptr, size_t alignment, size_t size)
{
    static posix_memalign_fn real;
    if (!real)
        real = (posix_memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
    if (!real)
        return ENOMEM; /* no libc below us */
    int rc = real(ptr, alignment, size);
    if (rc == 0 && size >= FILL_MIN)
        fill(*ptr, size);
    return rc;
}

__attribute__((destructor)) static void report(void)
{
    fprintf(stderr, "perftest_fill: filled %zu bytes in %zu blocks\n", g_bytes, g_blocks);
}
