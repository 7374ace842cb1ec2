/*
 * weights.c: weight files and optimizer state files.  Layout (little-endian):
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
 * Optimizer state files (last.opt) share the layout with magic "TMAOPTS\0",
 * the Adam step count at 32, the batch RNG at 56 (u64[4]), the caller's
 * progress object as the JSON text, and three blocks: the parameters, then
 * Adam's first and second moments (the CRC at 48 covers all three).
 *
 * Written atomically (temp file, fsync, rename); read through a map and
 * checked field by field before anything is used.
 */
#include "gnn_int.h"

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

/* The header fields both kinds of file share (the rest is 0 or the
 * caller's): magic, version, header size, config hash, parameter count, the
 * round or step, the JSON text's length and checksum, the blocks' checksum. */
static void header_fill(unsigned char *hdr, const char *magic, uint32_t version, uint64_t hash, int64_t count,
                        uint64_t round, const char *text, uint32_t len, const float *const *blocks, int nblocks)
{
    memcpy(hdr, magic, 8);
    put32(hdr + 8, version);
    put32(hdr + 12, WHEADER);
    put64(hdr + 16, hash);
    put64(hdr + 24, (uint64_t)count);
    put64(hdr + 32, round);
    put32(hdr + 40, len);
    put32(hdr + 44, tma_crc32c(0, text, len));
    uint32_t crc = 0;
    for (int i = 0; i < nblocks; i++)
        crc = tma_crc32c(crc, blocks[i], (size_t)count * sizeof(float));
    put32(hdr + 48, crc);
    put32(hdr + 124, tma_crc32c(0, hdr, 124));
}

/* Header, JSON text, padding, then the blocks of `count` floats, atomically. */
static tma_status_t file_write(const char *path, const char *what, const unsigned char *hdr, const char *text,
                               uint32_t len, const float *const *blocks, int nblocks, int64_t count)
{
    static const unsigned char zeros[64];
    tma_afile_t *af;
    tma_status_t st = tma_afile_open(path, &af);
    if (st == TMA_OK) {
        int64_t pad = json_end(len) - WHEADER - len;
        st = tma_afile_write(af, hdr, WHEADER);
        st = st ? st : tma_afile_write(af, text, len);
        st = st ? st : tma_afile_write(af, zeros, (size_t)pad);
        for (int i = 0; i < nblocks && st == TMA_OK; i++)
            st = tma_afile_write(af, blocks[i], (size_t)count * sizeof(float));
        if (st == TMA_OK)
            st = tma_afile_commit(af);
        else
            tma_afile_abort(af);
    }
    if (st != TMA_OK)
        tma_log_error(COMP, "%s: could not write the %s: %s", path, what, tma_status_str(st));
    return st;
}

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
    header_fill(hdr, WMAGIC, TMA_GNN_WEIGHTS_VERSION, tma_gnn_config_hash(cfg), count, round, text, len, &params, 1);
    tma_status_t st = file_write(path, "weight file", hdr, text, len, &params, 1, count);
    free(text);
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
    char dec[64];
    if (gnn_decoder_of(c)->relational)
        snprintf(dec, sizeof dec, "%s decoder", tma_gnn_decoder_name(c->decoder));
    else
        snprintf(dec, sizeof dec, "%s decoder %d x %d", tma_gnn_decoder_name(c->decoder), c->decoder_layers,
                 c->decoder_hidden);
    snprintf(buf, n, "%s, %d layers, hidden %d, %s, %lld input features", tma_gnn_encoder_name(c->encoder), c->layers,
             c->hidden, dec, (long long)c->feature_dim);
}

#define REFUSE(code, ...)                                                                          \
    do {                                                                                           \
        tma_log_error(COMP, __VA_ARGS__);                                                          \
        st = code;                                                                                 \
        goto out;                                                                                  \
    } while (0)

/* The checks both kinds of file share, on a mapped file: magic, header
 * checksum, version, sizes (header, JSON text, `nblocks` blocks of the
 * header's parameter count), the text's and the blocks' checksums.  `what`
 * names the kind in errors. */
static tma_status_t file_check(const char *path, const char *what, const tma_mmap_t *map, const char *magic,
                               uint32_t version, int nblocks)
{
    const unsigned char *p = map->data;
    tma_status_t st = TMA_OK;
    if (map->size < WHEADER || memcmp(p, magic, 8) != 0)
        REFUSE(TMA_ERR_FORMAT, "%s: not a tma %s (%s)", path, what,
               map->size < WHEADER ? "shorter than the 128-byte header" : "bad magic");
    if (get32(p + 124) != tma_crc32c(0, p, 124))
        REFUSE(TMA_ERR_CHECKSUM, "%s: the header checksum does not match (the file is corrupted)", path);
    if (get32(p + 8) != version || get32(p + 12) != WHEADER)
        REFUSE(TMA_ERR_FORMAT, "%s: %s version %u is not supported (this tma reads version %u)", path, what,
               get32(p + 8), version);
    const uint64_t count = get64(p + 24);
    const uint32_t len = get32(p + 40);
    if (count > ((uint64_t)1 << 40) || len > (1u << 20))
        REFUSE(TMA_ERR_FORMAT, "%s: implausible sizes in the header (%llu parameters, %u bytes of JSON)", path,
               (unsigned long long)count, len);
    const uint64_t want = (uint64_t)json_end(len) + (uint64_t)nblocks * count * sizeof(float);
    if (map->size != want)
        REFUSE(TMA_ERR_FORMAT, "%s: %s: the header promises %llu bytes, the file has %zu", path,
               map->size < want ? "truncated" : "trailing bytes", (unsigned long long)want, map->size);
    if (get32(p + 44) != tma_crc32c(0, p + WHEADER, len))
        REFUSE(TMA_ERR_CHECKSUM, "%s: the %s section's checksum does not match (the file is corrupted)", path,
               nblocks > 1 ? "JSON" : "model");
    if (get32(p + 48) != tma_crc32c(0, p + json_end(len), (size_t)nblocks * count * sizeof(float)))
        REFUSE(TMA_ERR_CHECKSUM, "%s: the %s block's checksum does not match (the file is corrupted)", path,
               nblocks > 1 ? "state" : "parameter");
out:
    return st;
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
    if ((st = file_check(path, "weight file", &map, WMAGIC, TMA_GNN_WEIGHTS_VERSION, 1)) != TMA_OK)
        goto out;
    const uint64_t count = get64(p + 24);
    const uint32_t len = get32(p + 40);
    const unsigned char *block = p + json_end(len);
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
out:
    free(params);
    tma_mmap_close(&map);
    return st;
}

/* ------------------------------------------------------------------ optimizer state */

/* The state file's header is the weight file's (same offsets for the hash,
 * count, step, JSON and block checksums) with the batch RNG at 56..87. */
#define OMAGIC "TMAOPTS"
#define ORNG 56

tma_status_t tma_gnn_opt_write(const char *path, const tma_gnn_config_t *cfg, const float *params,
                               const tma_gnn_opt_state_t *s, const cJSON *progress)
{
    int64_t count = tma_gnn_param_count(cfg);
    if (count < 0 || s->steps < 0)
        return TMA_ERR_CONFIG;
    char *text = cJSON_PrintUnformatted(progress);
    if (!text)
        return TMA_ERR_NOMEM;
    uint32_t len = (uint32_t)strlen(text);
    const float *blocks[3] = {params, s->adam_m, s->adam_v};
    unsigned char hdr[WHEADER];
    memset(hdr, 0, sizeof hdr);
    for (int i = 0; i < 4; i++)
        put64(hdr + ORNG + 8 * i, s->rng.s[i]);
    header_fill(hdr, OMAGIC, TMA_GNN_OPT_VERSION, tma_gnn_config_hash(cfg), count, (uint64_t)s->steps, text, len,
                blocks, 3);
    tma_status_t st = file_write(path, "optimizer state file", hdr, text, len, blocks, 3, count);
    free(text);
    return st;
}

tma_status_t tma_gnn_opt_read(const char *path, const tma_gnn_config_t *expect, float **params_p,
                              tma_gnn_opt_state_t *s_p, cJSON **progress_p)
{
    tma_mmap_t map = {0};
    tma_status_t st = tma_mmap_open(path, &map);
    if (st != TMA_OK)
        return st;
    const unsigned char *p = map.data;
    float *blocks[3] = {NULL, NULL, NULL};
    cJSON *progress = NULL;
    if ((st = file_check(path, "optimizer state file", &map, OMAGIC, TMA_GNN_OPT_VERSION, 3)) != TMA_OK)
        goto out;
    const uint64_t count = get64(p + 24), steps = get64(p + 32);
    const uint32_t len = get32(p + 40);
    if (tma_gnn_config_hash(expect) != get64(p + 16) || tma_gnn_param_count(expect) != (int64_t)count)
        REFUSE(TMA_ERR_MISMATCH,
               "%s: the optimizer state is for another model (config hash %016llx, %llu parameters; this run's "
               "is %016llx, %lld parameters)",
               path, (unsigned long long)get64(p + 16), (unsigned long long)count,
               (unsigned long long)tma_gnn_config_hash(expect), (long long)tma_gnn_param_count(expect));
    if (steps > (uint64_t)INT64_MAX)
        REFUSE(TMA_ERR_FORMAT, "%s: implausible step count %llu", path, (unsigned long long)steps);
    if (tma_json_parse((const char *)p + WHEADER, len, path, &progress) != TMA_OK || !cJSON_IsObject(progress))
        REFUSE(TMA_ERR_FORMAT, "%s: the JSON section is not an object", path);
    for (int i = 0; i < 3; i++) {
        if (!(blocks[i] = malloc(count ? count * sizeof(float) : 1)))
            REFUSE(TMA_ERR_NOMEM, "%s: out of memory for %llu parameters", path, (unsigned long long)count);
        memcpy(blocks[i], p + json_end(len) + (uint64_t)i * count * sizeof(float), count * sizeof(float));
    }
    *params_p = blocks[0];
    s_p->adam_m = blocks[1];
    s_p->adam_v = blocks[2];
    s_p->steps = (int64_t)steps;
    for (int i = 0; i < 4; i++)
        s_p->rng.s[i] = get64(p + ORNG + 8 * i);
    *progress_p = progress;
    progress = NULL;
    memset(blocks, 0, sizeof blocks);
out:
    for (int i = 0; i < 3; i++)
        free(blocks[i]);
    cJSON_Delete(progress);
    tma_mmap_close(&map);
    return st;
}
#undef REFUSE
