/*
 * file.c: atomic file writes (temp file, fsync, rename, fsync of the
 * directory), read-only maps, whole-file reads and directory helpers.  Every
 * failure is logged once here with the path and the system's reason.
 */
#include "tma_common.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define COMP "file"

struct tma_afile {
    int fd;
    uint64_t offset;
    char *path;
    char *tmp;
};

void *tma_alloc_aligned(size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 64) != 0)
        return NULL;
    return p;
}

void tma_free_aligned(void *p) { free(p); }

#define HUGE_PAGE_BYTES ((size_t)2 << 20)

/* Rounded up to whole huge pages: Linux places anonymous maps whose length
 * is a multiple of the huge page size on a huge page boundary, which THP
 * needs to back all of it. */
static size_t huge_len(size_t size)
{
    if (size == 0)
        size = 1;
    if (size >= HUGE_PAGE_BYTES)
        return (size + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
    return (size + 4095) / 4096 * 4096;
}

void *tma_alloc_huge(size_t size)
{
    size_t len = huge_len(size);
    if (len < size)
        return NULL;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (len >= HUGE_PAGE_BYTES)
        (void)madvise(p, len, MADV_HUGEPAGE); /* advice only: 4 KiB pages still work */
#endif
    return p;
}

void tma_advise_huge(void *p, size_t size)
{
#ifdef MADV_HUGEPAGE
    if (!p || size < 2 * HUGE_PAGE_BYTES)
        return;
    const uintptr_t a = ((uintptr_t)p + HUGE_PAGE_BYTES - 1) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1);
    const uintptr_t e = ((uintptr_t)p + size) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1);
    if (e > a)
        (void)madvise((void *)a, e - a, MADV_HUGEPAGE); /* advice only: 4 KiB pages still work */
#else
    (void)p;
    (void)size;
#endif
}

void tma_free_huge(void *p, size_t size)
{
    if (p)
        munmap(p, huge_len(size));
}

int tma_mul_overflow(size_t a, size_t b, size_t *r_p)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return -1;
    *r_p = r;
    return 0;
}

char *tma_strdup_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : s;
}

char *tma_path_join(const char *dir, const char *name)
{
    if (!dir || !*dir)
        return strdup(name);
    size_t dl = strlen(dir);
    return tma_strdup_printf("%s%s%s", dir, dir[dl - 1] == '/' ? "" : "/", name);
}

int tma_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int tma_dir_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static tma_status_t errno_status(int e)
{
    switch (e) {
    case ENOENT: return TMA_ERR_NOT_FOUND;
    case ENOMEM: return TMA_ERR_NOMEM;
    case EACCES:
    case EPERM: return TMA_ERR_PERMISSION;
    default: return TMA_ERR_IO;
    }
}

/* Writes all of data at offset off, or at the file position when off < 0
 * (in pieces of at most 1 GiB, retrying on EINTR). */
static int write_full(int fd, const void *data, size_t len, int64_t off)
{
    const char *p = data;
    while (len > 0) {
        size_t want = len > (1u << 30) ? (1u << 30) : len;
        ssize_t n = off < 0 ? write(fd, p, want) : pwrite(fd, p, want, (off_t)off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
        if (off >= 0)
            off += n;
    }
    return 0;
}

tma_status_t tma_afile_open(const char *path, tma_afile_t **af_p)
{
    tma_afile_t *af = calloc(1, sizeof *af);
    if (!af)
        return TMA_ERR_NOMEM;
    af->fd = -1;
    af->path = strdup(path);
    af->tmp = tma_strdup_printf("%s.tmp.XXXXXX", path);
    if (!af->path || !af->tmp) {
        tma_afile_abort(af);
        return TMA_ERR_NOMEM;
    }
    af->fd = mkstemp(af->tmp);
    if (af->fd < 0) {
        int e = errno;
        tma_log_error(COMP, "%s: cannot create a file there: %s", path, strerror(e));
        free(af->tmp);
        af->tmp = NULL;
        tma_afile_abort(af);
        return errno_status(e);
    }
    /* mkstemp makes 0600; a result file should be readable like any other. */
    mode_t um = umask(0);
    umask(um);
    (void)fchmod(af->fd, 0666 & ~um);
    *af_p = af;
    return TMA_OK;
}

tma_status_t tma_afile_write(tma_afile_t *af, const void *data, size_t len)
{
    if (write_full(af->fd, data, len, -1) != 0) {
        tma_log_error(COMP, "%s: write failed: %s", af->path, strerror(errno));
        return TMA_ERR_IO;
    }
    af->offset += len;
    return TMA_OK;
}

tma_status_t tma_afile_pwrite(tma_afile_t *af, const void *data, size_t len, uint64_t offset)
{
    if (offset > (uint64_t)INT64_MAX - len) {
        tma_log_error(COMP, "%s: a write at offset %" PRIu64 " is past any file's end", af->path, offset);
        return TMA_ERR_INVALID;
    }
    if (write_full(af->fd, data, len, (int64_t)offset) != 0) {
        tma_log_error(COMP, "%s: write failed: %s", af->path, strerror(errno));
        return TMA_ERR_IO;
    }
    return TMA_OK;
}

uint64_t tma_afile_offset(const tma_afile_t *af) { return af->offset; }

static void fsync_parent(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return;
    int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    free(copy);
}

tma_status_t tma_afile_commit(tma_afile_t *af)
{
    tma_status_t st = TMA_OK;
    if (fsync(af->fd) != 0) {
        tma_log_error(COMP, "%s: fsync failed: %s", af->path, strerror(errno));
        st = TMA_ERR_IO;
    }
    if (close(af->fd) != 0 && st == TMA_OK) {
        tma_log_error(COMP, "%s: close failed: %s", af->path, strerror(errno));
        st = TMA_ERR_IO;
    }
    af->fd = -1;
    if (st == TMA_OK && rename(af->tmp, af->path) != 0) {
        tma_log_error(COMP, "%s: rename from %s failed: %s", af->path, af->tmp, strerror(errno));
        st = TMA_ERR_IO;
    }
    if (st == TMA_OK) {
        fsync_parent(af->path);
        free(af->tmp);
        af->tmp = NULL;
    }
    tma_afile_abort(af);
    return st;
}

void tma_afile_abort(tma_afile_t *af)
{
    if (!af)
        return;
    if (af->fd >= 0)
        close(af->fd);
    if (af->tmp)
        unlink(af->tmp);
    free(af->tmp);
    free(af->path);
    free(af);
}

tma_status_t tma_file_write_atomic(const char *path, const void *data, size_t len)
{
    tma_afile_t *af;
    tma_status_t st = tma_afile_open(path, &af);
    if (st != TMA_OK)
        return st;
    st = tma_afile_write(af, data, len);
    if (st != TMA_OK) {
        tma_afile_abort(af);
        return st;
    }
    return tma_afile_commit(af);
}

tma_status_t tma_mmap_open(const char *path, tma_mmap_t *map_p)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        tma_log_error(COMP, "%s: cannot open: %s", path, strerror(e));
        return errno_status(e);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        tma_log_error(COMP, "%s: not a regular file", path);
        close(fd);
        return TMA_ERR_IO;
    }
    void *p = NULL;
    if (st.st_size > 0) {
        p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            tma_log_error(COMP, "%s: mmap failed: %s", path, strerror(e));
            close(fd);
            return errno_status(e);
        }
    }
    close(fd);
    map_p->data = p;
    map_p->size = (size_t)st.st_size;
    return TMA_OK;
}

void tma_mmap_close(tma_mmap_t *map)
{
    if (map && map->data && map->size)
        munmap((void *)map->data, map->size);
    if (map) {
        map->data = NULL;
        map->size = 0;
    }
}

tma_status_t tma_file_read_all(const char *path, char **data_p, size_t *len_p)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        tma_log_error(COMP, "%s: cannot open: %s", path, strerror(e));
        return errno_status(e);
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return TMA_ERR_NOMEM;
    }
    for (;;) {
        if (cap - len < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                close(fd);
                return TMA_ERR_NOMEM;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            tma_log_error(COMP, "%s: read failed: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return TMA_ERR_IO;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    *data_p = buf;
    if (len_p)
        *len_p = len;
    return TMA_OK;
}

tma_status_t tma_mkdir_p(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return TMA_ERR_NOMEM;
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = '\0';
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            tma_log_error(COMP, "%s: cannot create directory: %s", p, strerror(errno));
            free(p);
            return TMA_ERR_IO;
        }
        *s = '/';
    }
    if (mkdir(p, 0777) != 0 && errno != EEXIST) {
        tma_log_error(COMP, "%s: cannot create directory: %s", p, strerror(errno));
        free(p);
        return TMA_ERR_IO;
    }
    if (!tma_dir_exists(p)) {
        tma_log_error(COMP, "%s: exists and is not a directory", p);
        free(p);
        return TMA_ERR_IO;
    }
    free(p);
    return TMA_OK;
}

tma_status_t tma_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? TMA_OK : TMA_ERR_IO;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d)
            return TMA_ERR_IO;
        struct dirent *de;
        tma_status_t res = TMA_OK;
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            char *child = tma_path_join(path, de->d_name);
            if (!child) {
                res = TMA_ERR_NOMEM;
                break;
            }
            tma_status_t r = tma_remove_tree(child);
            if (r != TMA_OK)
                res = r;
            free(child);
        }
        closedir(d);
        if (rmdir(path) != 0 && res == TMA_OK)
            res = TMA_ERR_IO;
        return res;
    }
    return unlink(path) == 0 ? TMA_OK : TMA_ERR_IO;
}
