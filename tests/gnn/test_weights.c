/* test_weights.c: weight files: round trip, and refusal of truncated,
 * corrupted, foreign and mismatched files, each with its status. */
#include "tma_test.h"
#include "tma_gnn.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *slurp(const char *path, size_t *len)
{
    char *d;
    CHECK_OK(tma_file_read_all(path, &d, len));
    return d;
}

static tma_status_t read_it(const char *path, const tma_gnn_config_t *expect)
{
    float *p = NULL;
    int64_t n;
    uint64_t round;
    tma_gnn_config_t cfg;
    tma_status_t st = tma_gnn_weights_read(path, expect, &cfg, &p, &n, &round);
    free(p);
    return st;
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);
    char *dir = tma_test_tmpdir("weights");
    char *path = tma_path_join(dir, "w.tmaw"), *bad = tma_path_join(dir, "bad.tmaw");
    tma_gnn_config_t cfg;
    tma_gnn_config_default(&cfg);
    cfg.encoder = TMA_GNN_ENCODER_GCN;
    cfg.hidden = 20;
    cfg.decoder_hidden = 9;
    cfg.feature_dim = 17;
    int64_t n = tma_gnn_param_count(&cfg);
    float *w = malloc((size_t)n * 4);
    CHECK_OK(tma_gnn_params_init(&cfg, 11, w));
    CHECK_OK(tma_gnn_weights_write(path, &cfg, w, 42));
    ASSERT_EQ(count_files(dir), 1); /* no temporary file left */

    float *r = NULL;
    int64_t rn = 0;
    uint64_t round = 0;
    tma_gnn_config_t got;
    CHECK_OK(tma_gnn_weights_read(path, &cfg, &got, &r, &rn, &round));
    ASSERT_EQ(rn, n);
    ASSERT_EQ(round, 42);
    ASSERT_EQ(memcmp(r, w, (size_t)n * 4), 0);
    ASSERT_EQ(got.encoder, cfg.encoder);
    ASSERT_EQ(got.hidden, 20);
    ASSERT_EQ(got.decoder_hidden, 9);
    ASSERT_EQ(got.feature_dim, 17);
    ASSERT_EQ(tma_gnn_config_hash(&got), tma_gnn_config_hash(&cfg));
    free(r);
    /* Without an expected config the file describes itself. */
    CHECK_OK(tma_gnn_weights_read(path, NULL, &got, &r, &rn, NULL));
    free(r);

    /* Another model is refused as a mismatch. */
    tma_gnn_config_t other = cfg;
    other.hidden = 21;
    CHECK_STATUS(read_it(path, &other), TMA_ERR_MISMATCH);
    other = cfg;
    other.encoder = TMA_GNN_ENCODER_SAGE;
    CHECK_STATUS(read_it(path, &other), TMA_ERR_MISMATCH);
    /* Training settings do not matter. */
    other = cfg;
    other.lr = 0.3;
    other.batch_size = 5;
    CHECK_OK(read_it(path, &other));

    size_t len;
    char *good = slurp(path, &len);
    char *buf = malloc(len + 16);
    /* Truncated anywhere, or with bytes appended. */
    size_t cuts[] = {0, 7, 64, 127, 128, 200, len - 1};
    for (size_t i = 0; i < TMA_ARRAY_LEN(cuts); i++) {
        CHECK_OK(tma_file_write_atomic(bad, good, cuts[i]));
        tma_status_t st = read_it(bad, &cfg);
        CHECK_MSG(st == TMA_ERR_FORMAT || st == TMA_ERR_CHECKSUM || st == TMA_ERR_IO, "cut at %zu: %d", cuts[i], st);
        ASSERT_NE(st, TMA_OK);
    }
    memcpy(buf, good, len);
    memset(buf + len, 0, 16);
    CHECK_OK(tma_file_write_atomic(bad, buf, len + 16));
    CHECK_STATUS(read_it(bad, &cfg), TMA_ERR_FORMAT);
    /* A flipped bit in the parameters, the config text, or the header. */
    size_t flips[] = {len - 5, 130, 20, 9};
    tma_status_t want[] = {TMA_ERR_CHECKSUM, TMA_ERR_CHECKSUM, TMA_ERR_CHECKSUM, TMA_ERR_CHECKSUM};
    for (size_t i = 0; i < TMA_ARRAY_LEN(flips); i++) {
        memcpy(buf, good, len);
        buf[flips[i]] ^= 0x10;
        CHECK_OK(tma_file_write_atomic(bad, buf, len));
        CHECK_STATUS(read_it(bad, &cfg), want[i]);
    }
    /* Not a weight file at all. */
    CHECK_OK(tma_file_write_atomic(bad,
                                   "this is not a weight file, not even close; it has text in it........................"
                                   "..............................................................",
                                   150));
    CHECK_STATUS(read_it(bad, &cfg), TMA_ERR_FORMAT);
    /* A future version (header checksum fixed up so only the version is wrong). */
    memcpy(buf, good, len);
    uint32_t v = 2, crc;
    memcpy(buf + 8, &v, 4);
    crc = tma_crc32c(0, buf, 124);
    memcpy(buf + 124, &crc, 4);
    CHECK_OK(tma_file_write_atomic(bad, buf, len));
    CHECK_STATUS(read_it(bad, &cfg), TMA_ERR_FORMAT);
    /* A missing file. */
    ASSERT_NE(read_it("/nonexistent/w.tmaw", &cfg), TMA_OK);

    /* Rewriting replaces the file whole. */
    w[0] += 1.0f;
    CHECK_OK(tma_gnn_weights_write(path, &cfg, w, 43));
    CHECK_OK(tma_gnn_weights_read(path, &cfg, NULL, &r, &rn, &round));
    ASSERT_EQ(round, 43);
    ASSERT_EQ(r[0], w[0]);
    free(r);
    /* A config that cannot describe a layout is refused before writing. */
    tma_gnn_config_t unresolved = cfg;
    unresolved.feature_dim = 0;
    ASSERT_NE(tma_gnn_weights_write(bad, &unresolved, w, 1), TMA_OK);

    free(good);
    free(buf);

    /* The optimizer state file: weights, moments, steps and RNG back as
     * written, the progress object too; the same checks refuse damage. */
    char *opt = tma_path_join(dir, "last.opt");
    tma_gnn_opt_state_t s = {.steps = 1234};
    tma_rng_seed(&s.rng, 5, 6);
    s.adam_m = malloc((size_t)n * 4);
    s.adam_v = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        s.adam_m[i] = (float)i * 0.25f;
        s.adam_v[i] = (float)(n - i) * 1e-3f;
    }
    cJSON *prog = cJSON_CreateObject();
    cJSON_AddRawToObject(prog, "train_seconds", "0.30000000000000004");
    CHECK_OK(tma_gnn_opt_write(opt, &cfg, w, &s, prog));
    float *ow = NULL;
    tma_gnn_opt_state_t os;
    memset(&os, 0, sizeof os);
    cJSON *oprog = NULL;
    CHECK_OK(tma_gnn_opt_read(opt, &cfg, &ow, &os, &oprog));
    ASSERT_EQ(os.steps, 1234);
    ASSERT_EQ(memcmp(&os.rng, &s.rng, sizeof s.rng), 0);
    ASSERT_EQ(memcmp(ow, w, (size_t)n * 4), 0);
    ASSERT_EQ(memcmp(os.adam_m, s.adam_m, (size_t)n * 4), 0);
    ASSERT_EQ(memcmp(os.adam_v, s.adam_v, (size_t)n * 4), 0);
    ASSERT_EQ(cJSON_GetObjectItem(oprog, "train_seconds")->valuedouble, 0.1 + 0.2); /* as the text says */
    free(ow);
    free(os.adam_m);
    free(os.adam_v);
    cJSON_Delete(oprog);
    other = cfg;
    other.hidden = 21;
    ASSERT_EQ(tma_gnn_opt_read(opt, &other, &ow, &os, &oprog), TMA_ERR_MISMATCH);
    good = slurp(opt, &len);
    buf = malloc(len + 16);
    size_t oflips[] = {len - 3, len - 4 * (size_t)n - 3, 60, 130};
    for (size_t i = 0; i < TMA_ARRAY_LEN(oflips); i++) {
        memcpy(buf, good, len);
        buf[oflips[i]] ^= 0x10;
        CHECK_OK(tma_file_write_atomic(bad, buf, len));
        ASSERT_EQ(tma_gnn_opt_read(bad, &cfg, &ow, &os, &oprog), TMA_ERR_CHECKSUM);
    }
    CHECK_OK(tma_file_write_atomic(bad, good, len - 4));
    ASSERT_EQ(tma_gnn_opt_read(bad, &cfg, &ow, &os, &oprog), TMA_ERR_FORMAT);
    /* A weight file is not a state file, nor the other way round. */
    ASSERT_EQ(tma_gnn_opt_read(path, &cfg, &ow, &os, &oprog), TMA_ERR_FORMAT);
    CHECK_STATUS(read_it(opt, &cfg), TMA_ERR_FORMAT);
    cJSON_Delete(prog);
    free(s.adam_m);
    free(s.adam_v);
    free(opt);

    free(good);
    free(buf);
    free(w);
    free(path);
    free(bad);
    tma_test_cleanup_dir(dir);
    return tma_test_done();
}
