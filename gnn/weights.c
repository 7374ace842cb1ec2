/*
 * weights.c: weight files.  Layout (little-endian):
 *
 *   0   char[8] magic "TMAWGHT\0"
 *   8   u32     version (1)
 *   12  u32     header size (128)
 *   16  u64     model-config hash (tma_gnn_config_hash)
 *   24  u64     parameter count (floats)
 *   32  u64     round or step the weights come from
 *   40  u32     length of the model section's JSON text
 *   44  u32     CRC32C of that text
 *   48  u32     CRC32C of the parameter block
 *   52  u32[18] reserved, 0
 *   124 u32     CRC32C of bytes 0..123
 *   128         the JSON text, then zeros up to a multiple of 64 bytes
 *   ...         the parameter block, float32
 *
 * Written atomically (temp file, fsync, rename); read through a map and
 * checked field by field before anything is used.
 */
#include "tma_gnn.h"

#include <stdlib.h>
#include <string.h>

#define COMP "weights"

#define WMAGIC "TMAWGHT"
#define WHEADER 128

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static int64_t json_end(uint32_t len) { return (WHEADER + (int64_t)len + 63) / 64 * 64; }

tma_status_t tma_gnn_weights_write(const char *path, const tma_gnn_config_t *cfg, const float *params,
                                   uint64_t round)
{
    int64_t count = tma_gnn_param_count(cfg);
    if (count < 0)
        return TMA_ERR_CONFIG;
    cJSON *m = tma_gnn_config_model_json(cfg);
    char *text = m ? cJSON_PrintUnformatted(m) : NULL;
    cJSON_Delete(m);
    if (!text)
        return TMA_ERR_NOMEM;
    uint32_t len = (uint32_t)strlen(text);
    unsigned char hdr[WHEADER];
    memset(hdr, 0, sizeof hdr);
    memcpy(hdr, WMAGIC, 8);
    put32(hdr + 8, TMA_GNN_WEIGHTS_VERSION);
    put32(hdr + 12, WHEADER);
    put64(hdr + 16, tma_gnn_config_hash(cfg));
    put64(hdr + 24, (uint64_t)count);
    put64(hdr + 32, round);
    put32(hdr + 40, len);
    put32(hdr + 44, tma_crc32c(0, text, len));
    put32(hdr + 48, tma_crc32c(0, params, (size_t)count * sizeof(float)));
    put32(hdr + 124, tma_crc32c(0, hdr, 124));

    static const unsigned char zeros[64];
    tma_afile_t *af;
    tma_status_t st = tma_afile_open(path, &af);
    if (st == TMA_OK) {
        int64_t pad = json_end(len) - WHEADER - len;
        st = tma_afile_write(af, hdr, sizeof hdr);
        st = st ? st : tma_afile_write(af, text, len);
        st = st ? st : tma_afile_write(af, zeros, (size_t)pad);
        st = st ? st : tma_afile_write(af, params, (size_t)count * sizeof(float));
        if (st == TMA_OK)
            st = tma_afile_commit(af);
        else
            tma_afile_abort(af);
    }
    free(text);
    if (st != TMA_OK)
        tma_log_error(COMP, "%s: could not write the weight file: %s", path, tma_status_str(st));
    return st;
}

static tma_status_t model_from_text(const char *path, const char *text, size_t len, tma_gnn_config_t *cfg_p)
{
    cJSON *m;
    tma_status_t st = tma_json_parse(text, len, path, &m);
    if (st != TMA_OK)
        return TMA_ERR_FORMAT;
    st = tma_gnn_config_from_sections(m, NULL, NULL, path, cfg_p);
    cJSON_Delete(m);
    return st == TMA_OK ? TMA_OK : TMA_ERR_FORMAT;
}

static void describe(const tma_gnn_config_t *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s, %d layers, hidden %d, decoder %d x %d, %lld input features",
             tma_gnn_encoder_name(c->encoder), c->layers, c->hidden, c->decoder_layers, c->decoder_hidden,
             (long long)c->feature_dim);
}

tma_status_t tma_gnn_weights_read(const char *path, const tma_gnn_config_t *expect, tma_gnn_config_t *cfg_p,
                                  float **params_p, int64_t *count_p, uint64_t *round_p)
{
    tma_mmap_t map = {0};
    tma_status_t st = tma_mmap_open(path, &map);
    if (st != TMA_OK)
        return st;
    const unsigned char *p = map.data;
    tma_gnn_config_t file_cfg;
    float *params = NULL;
#define REFUSE(code, ...)                                                                          \
    do {                                                                                           \
        tma_log_error(COMP, __VA_ARGS__);                                                          \
        st = code;                                                                                 \
        goto out;                                                                                  \
    } while (0)
    if (map.size < WHEADER || memcmp(p, WMAGIC, 8) != 0)
        REFUSE(TMA_ERR_FORMAT, "%s: not a tma weight file (%s)", path,
               map.size < WHEADER ? "shorter than the 128-byte header" : "bad magic");
    if (get32(p + 124) != tma_crc32c(0, p, 124))
        REFUSE(TMA_ERR_CHECKSUM, "%s: the header checksum does not match (the file is corrupted)", path);
    if (get32(p + 8) != TMA_GNN_WEIGHTS_VERSION || get32(p + 12) != WHEADER)
        REFUSE(TMA_ERR_FORMAT, "%s: weight file version %u is not supported (this tma reads version %d)", path,
               get32(p + 8), TMA_GNN_WEIGHTS_VERSION);
    const uint64_t count = get64(p + 24);
    const uint32_t len = get32(p + 40);
    if (count > ((uint64_t)1 << 40) || len > (1u << 20))
        REFUSE(TMA_ERR_FORMAT, "%s: implausible sizes in the header (%llu parameters, %u bytes of config)", path,
               (unsigned long long)count, len);
    const uint64_t want = (uint64_t)json_end(len) + count * sizeof(float);
    if (map.size != want)
        REFUSE(TMA_ERR_FORMAT, "%s: %s: the header promises %llu bytes, the file has %zu", path,
               map.size < want ? "truncated" : "trailing bytes", (unsigned long long)want, map.size);
    if (get32(p + 44) != tma_crc32c(0, p + WHEADER, len))
        REFUSE(TMA_ERR_CHECKSUM, "%s: the model section's checksum does not match (the file is corrupted)",
               path);
    const unsigned char *block = p + json_end(len);
    if (get32(p + 48) != tma_crc32c(0, block, count * sizeof(float)))
        REFUSE(TMA_ERR_CHECKSUM, "%s: the parameter block's checksum does not match (the file is corrupted)",
               path);
    if ((st = model_from_text(path, (const char *)p + WHEADER, len, &file_cfg)) != TMA_OK)
        REFUSE(TMA_ERR_FORMAT, "%s: the model section is not a valid model config", path);
    if (tma_gnn_config_hash(&file_cfg) != get64(p + 16) || tma_gnn_param_count(&file_cfg) != (int64_t)count)
        REFUSE(TMA_ERR_FORMAT, "%s: the model section disagrees with the header's hash or parameter count", path);
    if (expect && tma_gnn_config_hash(expect) != get64(p + 16)) {
        char a[160], b[160], d[160];
        describe(&file_cfg, a, sizeof a);
        describe(expect, b, sizeof b);
        tma_gnn_config_model_diff(&file_cfg, expect, d, sizeof d);
        REFUSE(TMA_ERR_MISMATCH, "%s: the weights are for another model: %s (%s, not this one's %s)", path, d, a,
               b);
    }
    params = malloc(count ? count * sizeof(float) : 1);
    if (!params)
        REFUSE(TMA_ERR_NOMEM, "%s: out of memory for %llu parameters", path, (unsigned long long)count);
    memcpy(params, block, count * sizeof(float));
    if (cfg_p)
        *cfg_p = file_cfg;
    *params_p = params;
    params = NULL;
    if (count_p)
        *count_p = (int64_t)count;
    if (round_p)
        *round_p = get64(p + 32);
    st = TMA_OK;
#undef REFUSE
out:
    free(params);
    tma_mmap_close(&map);
    return st;
}
