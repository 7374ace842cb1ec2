/*
 * cuda_backend.c: the CUDA backend's ops table.  The kernels are not written
 * yet (a later issue fills this table with cuBLAS and kernels); until then a
 * CUDA build links this placeholder, and asking for a "cuda" device fails
 * cleanly with TMA_ERR_UNSUPPORTED.
 */
#include "gnn_backend.h"

#define COMP "gnn-cuda"

static tma_status_t cuda_init(tma_gnn_backend_t *b, const char *device)
{
    tma_log_error(COMP, "device \"%s\": the CUDA backend is not implemented in this version of tma; use --device cpu",
                  device);
    return TMA_ERR_UNSUPPORTED;
}

const tma_gnn_ops_t tma_gnn_cuda_ops = {
    .name = "cuda",
    .host_addressable = 0,
    .init = cuda_init,
};
