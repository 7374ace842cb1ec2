/* status.c: descriptions and groups of tma_status_t codes. */
#include "tma_common.h"

const char *tma_status_str(tma_status_t st)
{
    switch (st) {
    case TMA_OK: return "ok";
    case TMA_ERR_INVALID: return "invalid argument";
    case TMA_ERR_FORMAT: return "malformed input";
    case TMA_ERR_CHECKSUM: return "checksum mismatch";
    case TMA_ERR_CONFIG: return "bad configuration";
    case TMA_ERR_NOT_FOUND: return "not found";
    case TMA_ERR_MISMATCH: return "made for another graph, model or version";
    case TMA_ERR_RANGE: return "value out of range";
    case TMA_ERR_IO: return "I/O error";
    case TMA_ERR_NOMEM: return "out of memory";
    case TMA_ERR_UNSUPPORTED: return "not supported by this build";
    case TMA_ERR_DEVICE: return "GPU error";
    case TMA_ERR_NO_DEVICE: return "no usable GPU";
    case TMA_ERR_DEVICE_NOMEM: return "out of GPU memory";
    case TMA_ERR_INTERNAL: return "internal error";
    case TMA_ERR_UNAVAILABLE: return "unavailable";
    case TMA_ERR_TIMEOUT: return "timed out";
    case TMA_ERR_PEER_FAILED: return "peer failed";
    case TMA_ERR_MALFORMED: return "malformed message or response";
    case TMA_ERR_PERMISSION: return "permission denied";
    case TMA_ERR_CLOSED: return "closed";
    case TMA_ERR_COMPARE_FAILED: return "compare failed";
    case TMA_ERR_LEASE_EXPIRED: return "lease expired";
    case TMA_ERR_FENCED: return "fenced by a newer owner or epoch";
    case TMA_ERR_CANCELLED: return "cancelled";
    case TMA_ERR_COMPACTED: return "revision compacted";
    default: return "unknown error";
    }
}

tma_status_group_t tma_status_group(tma_status_t st)
{
    if (st >= 0)
        return TMA_GROUP_OK;
    if (st > -200)
        return TMA_GROUP_INPUT;
    if (st > -300)
        return TMA_GROUP_SYSTEM;
    if (st > -400)
        return TMA_GROUP_PEER;
    return TMA_GROUP_JOB;
}
