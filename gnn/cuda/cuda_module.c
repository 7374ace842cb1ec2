/*
 * cuda_module.c: the entry of tma-cuda.so, the CUDA backend's module
 * (gnn_backend.h).  The module sees none of the program's symbols, so the
 * few of tma's functions the backend calls are defined here and forward to
 * what the program lent in gnn_cuda_host_t: its log (the program's level
 * and stream) and its parser of device names.
 */
#include "gnn_backend.h"

#include <stddef.h>

/* cuda_backend.cu */
extern const tma_gnn_ops_t tma_gnn_cuda_ops;
int cuda_device_count(void);

/* Set once by the entry, before the program uses the ops table. */
static const gnn_cuda_host_t *host;

void tma_log_msg(tma_log_level_t level, const char *component, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    host->log_vmsg(level, component, fmt, ap);
    va_end(ap);
}

tma_log_level_t tma_log_get_level(void) { return host->log_get_level(); }

tma_status_t tma_gnn_device_parse(const char *device, int *gpu_p) { return host->device_parse(device, gpu_p); }

static const gnn_cuda_module_t module = {
    .version = PACKAGE_VERSION,
    .ops_size = sizeof(tma_gnn_ops_t),
    .backend_size = sizeof(tma_gnn_backend_t),
    .ops = &tma_gnn_cuda_ops,
    .device_count = cuda_device_count,
};

/* The one exported symbol (gnn/cuda/tma-cuda.map). */
const gnn_cuda_module_t *tma_gnn_cuda_module(const gnn_cuda_host_t *h);

const gnn_cuda_module_t *tma_gnn_cuda_module(const gnn_cuda_host_t *h)
{
    host = h;
    return &module;
}
