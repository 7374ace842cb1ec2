/*
 * backend_cuda.c: finds and loads the CUDA backend's module, tma-cuda.so
 * (gnn_backend.h says why it is a module and where it is looked for).
 * Loaded once a process and never unloaded: the CUDA runtime registers its
 * kernels when the module loads and does not expect them to go away.  The
 * registry (backend.c) calls it only in a build with CUDA.
 */
#include "gnn_backend.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const gnn_cuda_host_t cuda_host = {
    .log_vmsg = tma_log_vmsg,
    .log_get_level = tma_log_get_level,
    .device_parse = tma_gnn_device_parse,
};

/* The outcome of the one load (process-wide, written once under pthread_once). */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const gnn_cuda_module_t *loaded;
static char load_why[4096 + 1024]; /* room for a path and the words around it */

/* The folder of the running program, or "" when /proc cannot say. */
static void self_dir(char *dir, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", dir, n - 1);
    dir[len > 0 ? len : 0] = '\0';
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        dir[0] = '\0';
}

static int file_exists(const char *path) { return access(path, F_OK) == 0; }

/* The module's path into `path`: see gnn_cuda_module_load.  0 when a
 * candidate exists (or TMA_CUDA_MODULE names one, existing or not), else -1
 * with the places looked in written to load_why. */
static int find_module(char *path, size_t n)
{
    const char *env = getenv("TMA_CUDA_MODULE");
    if (env && *env) {
        snprintf(path, n, "%s", env);
        return 0;
    }
    char dir[4096];
    self_dir(dir, sizeof dir);
    /* The build tree: beside tma. */
    if (dir[0] && snprintf(path, n, "%s/%s", dir, GNN_CUDA_MODULE_FILE) < (int)n && file_exists(path))
        return 0;
    /* An install: $(pkglibdir), under the same prefix as the program's
     * $(bindir) (a DESTDIR staging tree, or one moved whole), else as configured. */
    const size_t dl = strlen(dir), bl = strlen(TMA_BINDIR);
    if (dl >= bl && strcmp(dir + dl - bl, TMA_BINDIR) == 0 &&
        snprintf(path, n, "%.*s%s/%s", (int)(dl - bl), dir, TMA_PKGLIBDIR, GNN_CUDA_MODULE_FILE) < (int)n &&
        file_exists(path))
        return 0;
    if (snprintf(path, n, "%s/%s", TMA_PKGLIBDIR, GNN_CUDA_MODULE_FILE) < (int)n && file_exists(path))
        return 0;
    snprintf(load_why, sizeof load_why,
             "the CUDA backend's module %s is neither beside the program (%s) nor in %s; reinstall tma, or set "
             "TMA_CUDA_MODULE to the file",
             GNN_CUDA_MODULE_FILE, dir[0] ? dir : "unknown", TMA_PKGLIBDIR);
    return -1;
}

static void load(void)
{
    char path[4096];
    if (find_module(path, sizeof path) != 0)
        return;
    if (!file_exists(path)) {
        snprintf(load_why, sizeof load_why, "cannot load the CUDA backend's module %s: %s", path, strerror(errno));
        return;
    }
    /* RTLD_LOCAL: cuBLAS and the CUDA runtime stay the module's own. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        /* dlerror names the library that is missing (libcudart.so.N, ...). */
        snprintf(load_why, sizeof load_why, "cannot load the CUDA backend's module %s: %s", path, dlerror());
        return;
    }
    gnn_cuda_module_entry_t entry;
    *(void **)&entry = dlsym(h, GNN_CUDA_MODULE_ENTRY);
    const gnn_cuda_module_t *m = entry ? entry(&cuda_host) : NULL;
    if (!m) {
        snprintf(load_why, sizeof load_why, "%s is not tma's CUDA module (it has no %s)", path,
                 GNN_CUDA_MODULE_ENTRY);
    } else if (strcmp(m->version, PACKAGE_VERSION) != 0 || m->ops_size != sizeof(tma_gnn_ops_t) ||
               m->backend_size != sizeof(tma_gnn_backend_t)) {
        snprintf(load_why, sizeof load_why,
                 "the CUDA module %s was built for another tma (version %s, tables of %zu and %zu bytes; this "
                 "program is %s with %zu and %zu): install both from one build",
                 path, m->version, m->ops_size, m->backend_size, PACKAGE_VERSION, sizeof(tma_gnn_ops_t),
                 sizeof(tma_gnn_backend_t));
    } else {
        loaded = m;
        return;
    }
    /* Kept loaded: its constructors registered kernels with the CUDA runtime. */
}

tma_status_t gnn_cuda_module_load(const gnn_cuda_module_t **mod_p, const char **why_p)
{
    pthread_once(&load_once, load);
    if (!loaded) {
        *why_p = load_why;
        return TMA_ERR_NO_DEVICE;
    }
    *mod_p = loaded;
    return TMA_OK;
}
