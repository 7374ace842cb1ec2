/* test_job_unit.c: the pure parts of job/: records, the meta block, the
 * key table, the variant descriptors and job configs. */
#include "tma_test.h"
#include "tma_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_records(void)
{
    tma_job_member_rec_t m = {7, (int64_t)1 << 60, 1, "w7", "hostA", 1234, "cpu", "10.0.0.7:4100"}, m2;
    char *s = tma_job_member_rec_encode(&m);
    CHECK_OK(tma_job_member_rec_decode("k", s, strlen(s), &m2));
    ASSERT_EQ(m2.id, 7);
    ASSERT_EQ(m2.lease, ((int64_t)1 << 60));
    ASSERT_EQ(m2.backup, 1);
    ASSERT_EQ(m2.pid, 1234);
    ASSERT_STR_EQ(m2.name, "w7");
    ASSERT_STR_EQ(m2.device, "cpu");
    ASSERT_STR_EQ(m2.eval_address, "10.0.0.7:4100");
    free(s);
    /* Untrusted values: every malformed one is refused, none crashes. */
    const char *bad[] = {"", "[]", "{", "{\"id\": -1, \"lease\": 5, \"pid\": 1}", "{\"id\": 1.5, \"lease\": 5, \"pid\": 1}",
                         "{\"id\": 1, \"lease\": 0, \"pid\": 1}", "{\"id\": 1, \"lease\": \"x\", \"pid\": 1}",
                         "{\"id\": 1, \"lease\": 2, \"pid\": 1, \"backup\": 3}", "{\"id\": \"1\"}", "null",
                         "{\"id\": 1, \"lease\": 2, \"pid\": 1, \"eval_address\": 5}"};
    for (size_t i = 0; i < TMA_ARRAY_LEN(bad); i++)
        CHECK_MSG(tma_job_member_rec_decode("k", bad[i], strlen(bad[i]), &m2) == TMA_ERR_MALFORMED, "%s", bad[i]);

    tma_job_shard_rec_t r = {3, -1, 99, 12}, r2;
    s = tma_job_shard_rec_encode(&r);
    CHECK_OK(tma_job_shard_rec_decode("k", s, strlen(s), &r2));
    ASSERT_EQ(r2.shard, 3);
    ASSERT_EQ(r2.owner, -1);
    ASSERT_EQ(r2.epoch, 99);
    ASSERT_EQ(r2.since_round, 12);
    free(s);
    ASSERT_EQ(tma_job_shard_rec_decode("k", "{\"shard\":1}", 11, &r2), TMA_ERR_MALFORMED);

    int32_t rd_shards[3] = {0, 5, 9};
    tma_job_ready_rec_t rd = {42, 3, rd_shards, 0, NULL, 0}, rd2;
    s = tma_job_ready_rec_encode(&rd);
    CHECK_OK(tma_job_ready_rec_decode("k", s, strlen(s), &rd2));
    ASSERT_EQ(rd2.n_shards, 3);
    ASSERT_EQ(rd2.shards[1], 5);
    ASSERT_EQ(rd2.lease, 42);
    ASSERT_EQ(rd2.n_refused, 0);
    ASSERT_EQ(rd2.fresh, 0);
    CHECK(strstr(s, "refused") == NULL);
    tma_job_ready_rec_free(&rd2);
    free(s);
    /* A worker that loaded its shards from none and holds no weights says so;
     * a record without the field (an older worker's) is not fresh. */
    rd.fresh = 1;
    s = tma_job_ready_rec_encode(&rd);
    CHECK_OK(tma_job_ready_rec_decode("k", s, strlen(s), &rd2));
    ASSERT_EQ(rd2.fresh, 1);
    tma_job_ready_rec_free(&rd2);
    free(s);
    rd.fresh = 0;
    CHECK_OK(tma_job_ready_rec_decode("k", "{\"lease\":1,\"shards\":[0]}", 24, &rd2));
    ASSERT_EQ(rd2.fresh, 0);
    tma_job_ready_rec_free(&rd2);
    ASSERT_EQ(tma_job_ready_rec_decode("k", "{\"lease\":1,\"shards\":[0],\"fresh\":1}", 34, &rd2), TMA_ERR_MALFORMED);
    /* Shards refused (their files are missing on the worker's node). */
    int32_t rd_refused[2] = {1, 7};
    rd.n_refused = 2;
    rd.refused = rd_refused;
    s = tma_job_ready_rec_encode(&rd);
    CHECK_OK(tma_job_ready_rec_decode("k", s, strlen(s), &rd2));
    ASSERT_EQ(rd2.n_shards, 3);
    ASSERT_EQ(rd2.n_refused, 2);
    ASSERT_EQ(rd2.refused[1], 7);
    tma_job_ready_rec_free(&rd2);
    free(s);
    const char *bad_refused = "{\"lease\":1,\"shards\":[0],\"refused\":[\"x\"]}";
    ASSERT_EQ(tma_job_ready_rec_decode("k", bad_refused, strlen(bad_refused), &rd2), TMA_ERR_MALFORMED);
    const char *not_list = "{\"lease\":1,\"shards\":[0],\"refused\":3}";
    ASSERT_EQ(tma_job_ready_rec_decode("k", not_list, strlen(not_list), &rd2), TMA_ERR_MALFORMED);
    /* Any number of shards: a survivor may own all of a 90-shard job's. */
    int32_t many[90];
    for (int i = 0; i < 90; i++)
        many[i] = i;
    tma_job_ready_rec_t rdm = {7, 90, many, 0, NULL, 0};
    s = tma_job_ready_rec_encode(&rdm);
    CHECK_OK(tma_job_ready_rec_decode("k", s, strlen(s), &rd2));
    ASSERT_EQ(rd2.n_shards, 90);
    ASSERT_EQ(rd2.shards[89], 89);
    tma_job_ready_rec_free(&rd2);
    free(s);
    ASSERT_EQ(tma_job_ready_rec_decode("k", "{\"lease\":1,\"shards\":[-1]}", 25, &rd2), TMA_ERR_MALFORMED);

    tma_job_state_rec_t st, st2;
    memset(&st, 0, sizeof st);
    st.epoch = 5;
    st.round = 17;
    st.train_elapsed = 123.5;
    st.best_round = -1;
    snprintf(st.phase, sizeof st.phase, "training");
    snprintf(st.run_dir, sizeof st.run_dir, "/tmp/run");
    s = tma_job_state_rec_encode(&st);
    CHECK_OK(tma_job_state_rec_decode("k", s, strlen(s), &st2));
    ASSERT_EQ(st2.round, 17);
    ASSERT_EQ(st2.best_round, -1);
    ASSERT_EQ(st2.train_elapsed, 123.5);
    ASSERT_STR_EQ(st2.phase, "training");
    free(s);

    int64_t round;
    uint64_t epoch;
    s = tma_job_agg_rec_encode(9, 77);
    CHECK_OK(tma_job_agg_rec_decode("k", s, strlen(s), &round, &epoch));
    ASSERT_EQ(round, 9);
    ASSERT_EQ(epoch, 77);
    free(s);

    char key[TMA_KEY_MAX];
    ASSERT_STR_EQ(tma_job_key_n(key, "j", TMA_KEY_SHARDS, 12), "/tma/j/shards/00000012");
    ASSERT_EQ(tma_job_key_number(key), 12);
    ASSERT_EQ(tma_job_key_number("/tma/j/shards/x"), -1);

    /* The meta block round-trips through floats bit for bit, with any
     * number of shards (up to the partition's S). */
    enum { S = 90 };
    tma_job_msg_meta_t meta, back;
    memset(&meta, 0, sizeof meta);
    meta.magic = TMA_META_MAGIC;
    meta.lease = INT64_C(0x7abcdef012345678);
    meta.steps_total = 1000;
    meta.steps_round = 10;
    meta.loss = 0.25;
    meta.n_shards = 60;
    int32_t shards[S], got[S];
    for (int i = 0; i < S; i++)
        shards[i] = (i * 7) % S;
    float block[TMA_META_HEAD_FLOATS + S];
    ASSERT_EQ(tma_job_msg_meta_floats(S), (int64_t)TMA_ARRAY_LEN(block));
    ASSERT_EQ(tma_job_msg_meta_floats(0), TMA_META_HEAD_FLOATS);
    tma_job_msg_meta_pack(&meta, shards, S, block);
    CHECK_OK(tma_job_msg_meta_unpack(block, S, &back, got));
    ASSERT_EQ(memcmp(&meta, &back, sizeof meta), 0);
    ASSERT_EQ(memcmp(shards, got, 60 * sizeof *got), 0);
    /* More shards than the partition has, or a shard number outside it. */
    ASSERT_EQ(tma_job_msg_meta_unpack(block, 59, &back, got), TMA_ERR_MALFORMED);
    int32_t outside = S;
    memcpy(&block[TMA_META_HEAD_FLOATS + 3], &outside, sizeof outside);
    ASSERT_EQ(tma_job_msg_meta_unpack(block, S, &back, got), TMA_ERR_MALFORMED);
    block[0] = 1.0f;
    ASSERT_EQ(tma_job_msg_meta_unpack(block, S, &back, got), TMA_ERR_MALFORMED);
    /* Received tensors: the first NaN or infinity, or -1. */
    float x[4] = {0.0f, 1.0f, -2.0f, 3.0f};
    ASSERT_EQ(tma_job_first_nonfinite(x, 4), -1);
    x[2] = INFINITY;
    ASSERT_EQ(tma_job_first_nonfinite(x, 4), 2);
    x[1] = NAN;
    ASSERT_EQ(tma_job_first_nonfinite(x, 4), 1);
}

static void test_keys(void)
{
    char key[TMA_KEY_MAX];
    ASSERT_STR_EQ(tma_job_prefix(key, "j"), "/tma/j/");
    ASSERT_STR_EQ(tma_job_key(key, "j", TMA_KEY_STATE), "/tma/j/state");
    ASSERT_STR_EQ(tma_job_key(key, "j", TMA_KEY_NEXT_ID), "/tma/j/next_id");
    ASSERT_STR_EQ(tma_job_key(key, "j", TMA_KEY_METRICS), "/tma/j/metrics/");
    ASSERT_STR_EQ(tma_job_key_n(key, "j", TMA_KEY_READY, 3), "/tma/j/ready/00000003");
    /* The watcher's side of the same table. */
    static const struct {
        const char *suffix;
        tma_job_key_t kind;
    } kinds[] = {
        {"config", TMA_KEY_CONFIG},       {"coordinator", TMA_KEY_COORDINATOR}, {"members/00000001", TMA_KEY_MEMBERS},
        {"ready/00000002", TMA_KEY_READY}, {"shards/00000003", TMA_KEY_SHARDS}, {"agg", TMA_KEY_AGG},
        {"stop", TMA_KEY_STOP},           {"state", TMA_KEY_STATE},             {"metrics/00000004", TMA_KEY_METRICS},
        {"best", TMA_KEY_BEST},           {"next_id", TMA_KEY_NEXT_ID},         {"states", TMA_KEY_NONE},
        {"members", TMA_KEY_NONE},        {"membersx/1", TMA_KEY_NONE},         {"", TMA_KEY_NONE},
        {"agg/1", TMA_KEY_NONE},
    };
    for (size_t i = 0; i < TMA_ARRAY_LEN(kinds); i++)
        CHECK_MSG(tma_job_key_kind(kinds[i].suffix) == kinds[i].kind, "%s: %d, expected %d", kinds[i].suffix,
                  (int)tma_job_key_kind(kinds[i].suffix), (int)kinds[i].kind);
    /* Every key the writers make is recognised by the watcher. */
    for (int k = 0; k < TMA_KEY_COUNT; k++) {
        tma_job_key_t single = tma_job_key_kind(tma_job_key(key, "j", (tma_job_key_t)k) + strlen("/tma/j/"));
        char numbered[TMA_KEY_MAX];
        tma_job_key_n(numbered, "j", (tma_job_key_t)k, 7);
        tma_job_key_t folder = tma_job_key_kind(numbered + strlen("/tma/j/"));
        CHECK_MSG(single == (tma_job_key_t)k || folder == (tma_job_key_t)k, "key %d (%s) is not recognised", k, key);
    }
    char *s = tma_job_stop_rec_encode(12, "time");
    ASSERT_STR_EQ(s, "{\"epoch\":12,\"reason\":\"time\"}");
    free(s);
}

static void test_variants(void)
{
    /* One descriptor per variant, named as the config names it. */
    static const char *const names[] = {"randomtma", "supertma", "psgd-pa", "llcg", "ggs"};
    for (int v = 0; v < (int)TMA_ARRAY_LEN(names); v++) {
        const tma_job_variant_desc_t *d = tma_job_variant_desc((tma_job_variant_t)v);
        ASSERT_NOT_NULL(d);
        if (d) {
            ASSERT_EQ(d->variant, (tma_job_variant_t)v);
            ASSERT_STR_EQ(d->name, names[v]);
        }
        tma_job_variant_t back;
        CHECK_OK(tma_job_variant_parse(names[v], &back));
        ASSERT_EQ(back, (tma_job_variant_t)v);
        /* Gradients travel as GRADS, weights as LOCAL; a partition exactly when shards are used. */
        ASSERT_EQ(d->tag, (d->averages == TMA_AVERAGE_GRADS ? (uint32_t)TMA_TAG_GRADS : (uint32_t)TMA_TAG_LOCAL));
        ASSERT_EQ((d->scheme != NULL), (d->uses_shards != 0));
    }
    ASSERT_NULL(tma_job_variant_desc((tma_job_variant_t)5));
    CHECK(tma_job_variant_desc(TMA_VARIANT_GGS)->after_average && !tma_job_variant_desc(TMA_VARIANT_GGS)->uses_shards);
    CHECK(tma_job_variant_desc(TMA_VARIANT_LLCG)->after_average && tma_job_variant_desc(TMA_VARIANT_LLCG)->corrects);
    CHECK(!tma_job_variant_desc(TMA_VARIANT_RANDOMTMA)->after_average);
    char scheme[64];
    tma_job_default_scheme(TMA_VARIANT_SUPERTMA, 4, 100000, scheme, sizeof scheme);
    ASSERT_STR_EQ(scheme, "supernode:2000");
    tma_job_default_scheme(TMA_VARIANT_LLCG, 4, 100000, scheme, sizeof scheme);
    ASSERT_STR_EQ(scheme, "metis");
    tma_job_default_scheme(TMA_VARIANT_GGS, 4, 100000, scheme, sizeof scheme);
    ASSERT_STR_EQ(scheme, "");
}

static tma_status_t parse_text(const char *text, tma_job_t **job_p)
{
    cJSON *root = cJSON_Parse(text);
    if (!root)
        return TMA_ERR_FORMAT;
    tma_status_t st = tma_job_parse(root, "t.json", "/data", job_p);
    cJSON_Delete(root);
    return st;
}

static void test_jobs(void)
{
    tma_job_t *job;
    CHECK_OK(parse_text("{\"graph\": \"g.tmag\"}", &job));
    ASSERT_EQ(job->variant, TMA_VARIANT_RANDOMTMA);
    ASSERT_EQ(job->workers, 3);
    ASSERT_EQ(job->shards, 3);
    ASSERT_EQ(job->interval_s, 120);
    ASSERT_EQ(job->train_s, 600);
    ASSERT_EQ(job->on_failure, TMA_POLICY_CONTINUE);
    ASSERT_STR_EQ(job->graph, "/data/g.tmag");
    cJSON *back = tma_job_to_json(job);
    tma_job_t *again;
    CHECK_OK(tma_job_parse(back, "again", "/", &again));
    ASSERT_EQ(again->workers, job->workers);
    ASSERT_EQ(again->interval_s, job->interval_s);
    ASSERT_STR_EQ(again->graph, job->graph);
    cJSON_Delete(back);
    tma_job_destroy(again);
    tma_job_destroy(job);

    CHECK_OK(parse_text("{\"graph\": \"/g.tmag\", \"variant\": \"llcg\", \"workers\": 2, \"partition\": {\"shards\": 4},"
                        " \"aggregation\": {\"interval_steps\": 5}, \"duration\": {\"rounds\": 3},"
                        " \"llcg\": {\"correction_steps\": 2}, \"fault\": {\"on_failure\": \"reassign\"}}",
                        &job));
    ASSERT_EQ(job->variant, TMA_VARIANT_LLCG);
    ASSERT_EQ(job->shards, 4);
    ASSERT_EQ(job->interval_steps, 5);
    ASSERT_EQ(job->rounds, 3);
    ASSERT_EQ(job->train_s, 0);
    ASSERT_EQ(job->llcg_steps, 2);
    ASSERT_EQ(job->on_failure, TMA_POLICY_REASSIGN);
    tma_job_destroy(job);

    /* partition.node_dir: the folder on the workers' nodes, kept as given
     * (not beside the config) and carried in the resolved form. */
    CHECK_OK(parse_text("{\"graph\": \"g\", \"partition\": {\"dir\": \"p\", \"node_dir\": \"/local/p\"}}", &job));
    ASSERT_STR_EQ(job->partition_dir, "/data/p");
    ASSERT_STR_EQ(job->partition_node_dir, "/local/p");
    back = tma_job_to_json(job);
    CHECK_OK(tma_job_parse(back, "again", "/", &again));
    ASSERT_STR_EQ(again->partition_node_dir, "/local/p");
    cJSON_Delete(back);
    tma_job_destroy(again);
    tma_job_destroy(job);

    /* train.negatives and the dot decoder reach the workers: in the
     * config as etcd holds it, parsed as a worker parses it. */
    CHECK_OK(parse_text("{\"graph\": \"g\", \"model\": {\"decoder\": \"dot\"}, \"train\": {\"negatives\": 4}}", &job));
    ASSERT_EQ(job->model.negatives, 4);
    ASSERT_EQ(job->model.decoder, TMA_GNN_DECODER_DOT);
    back = tma_job_to_etcd_json(job);
    CHECK_OK(tma_job_parse(back, "again", "/", &again));
    ASSERT_EQ(again->model.negatives, 4);
    ASSERT_EQ(again->model.decoder, TMA_GNN_DECODER_DOT);
    cJSON_Delete(back);
    tma_job_destroy(again);
    tma_job_destroy(job);

    const char *bad[] = {
        "{}",                                                                  /* no graph */
        "{\"graph\": \"g\", \"train\": {\"negatives\": 0}}",                  /* at least one negative */
        "{\"graph\": \"g\", \"dataset\": \"d\"}",                              /* two sources */
        "{\"graph\": \"g\", \"variant\": \"fedavg\"}",                         /* unknown variant */
        "{\"graph\": \"g\", \"aggregation\": {\"interval_seconds\": -1}}",     /* negative interval */
        "{\"graph\": \"g\", \"aggregation\": {\"interval_seconds\": 1, \"interval_steps\": 2}}",
        "{\"graph\": \"g\", \"workers\": 4, \"partition\": {\"shards\": 3}}",  /* more trainers than shards */
        "{\"graph\": \"g\", \"partition\": {\"scheme\": \"metis\"}}",          /* randomtma with metis */
        "{\"graph\": \"g\", \"variant\": \"ggs\", \"partition\": {}}",         /* ggs has no partition */
        "{\"graph\": \"g\", \"partition\": {\"node_dir\": \"rel/p\"}}",        /* node_dir not absolute */
        "{\"graph\": \"g\", \"llcg\": {\"correction_steps\": 2}}",             /* llcg options elsewhere */
        "{\"graph\": \"g\", \"fault\": {\"on_failure\": \"retry\"}}",
        "{\"graph\": \"g\", \"fault\": {\"lease_ttl\": 1}}",
        "{\"graph\": \"g\", \"unknown\": 1}",
        "{\"graph\": \"g\", \"model\": {\"encoder\": \"gin\"}}",
        "{\"graph\": \"g\", \"devices\": {\"workers\": [\"tpu\"]}}",
        "{\"graph\": \"g\", \"job\": \"bad name!\"}",
        "{\"graph\": \"g\", \"duration\": {\"train_seconds\": 0}}",
        "{\"graph\": 5}",
        "[1]",
    };
    for (size_t i = 0; i < TMA_ARRAY_LEN(bad); i++)
        CHECK_MSG(parse_text(bad[i], &job) == TMA_ERR_CONFIG, "accepted: %s", bad[i]);
}

/* The token's source decides where it may be written: never in the run
 * folder's JSON, in etcd only when it was in the config or generated. */
static const char *json_token(cJSON *o)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "transport"), "token");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* job's token is `token`, from src, and hidden in what etcd is given. */
static void check_hidden_token(const tma_job_t *job, const char *token, tma_job_token_src_t src)
{
    ASSERT_STR_EQ(job->token, token);
    ASSERT_EQ(job->token_src, src);
    cJSON *shared = tma_job_to_etcd_json(job);
    ASSERT_STR_EQ(json_token(shared), "(hidden)");
    cJSON_Delete(shared);
}

static void test_token(void)
{
    tma_job_t *job;
    unsetenv("TMA_JOB_TOKEN");
    CHECK_OK(parse_text("{\"graph\": \"g\", \"transport\": {\"token\": \"s3cret\"}}", &job));
    ASSERT_EQ(job->token_src, TMA_JOB_TOKEN_CONFIG);
    cJSON *run = tma_job_to_json(job), *shared = tma_job_to_etcd_json(job);
    ASSERT_STR_EQ(json_token(run), "(hidden)");
    ASSERT_STR_EQ(json_token(shared), "s3cret");
    /* The run folder's form parses back as "no token". */
    tma_job_t *again;
    CHECK_OK(tma_job_parse(run, "again", "/", &again));
    ASSERT_STR_EQ(again->token, "");
    ASSERT_EQ(again->token_src, TMA_JOB_TOKEN_NONE);
    cJSON_Delete(run);
    cJSON_Delete(shared);
    tma_job_destroy(job);

    /* From the environment: in neither place. */
    setenv("TMA_JOB_TOKEN", "from-env", 1);
    CHECK_OK(tma_job_ensure_token(again));
    check_hidden_token(again, "from-env", TMA_JOB_TOKEN_ENV);
    tma_job_destroy(again);
    unsetenv("TMA_JOB_TOKEN");

    /* Generated: 32 hex digits, shared through etcd only. */
    CHECK_OK(parse_text("{\"graph\": \"g\"}", &job));
    CHECK_OK(tma_job_ensure_token(job));
    ASSERT_EQ(strlen(job->token), 32);
    ASSERT_EQ(job->token_src, TMA_JOB_TOKEN_GENERATED);
    tma_job_destroy(job);

    /* A token file: read when it is the user's alone, refused otherwise. */
    char *dir = tma_test_tmpdir("job-token");
    char *path = tma_path_join(dir, "token");
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fputs("file-token\n", f);
    fclose(f);
    char *text = tma_strdup_printf("{\"graph\": \"g\", \"transport\": {\"token_file\": \"%s\"}}", path);
    chmod(path, 0600);
    CHECK_OK(parse_text(text, &job));
    CHECK_OK(tma_job_load_token(job));
    check_hidden_token(job, "file-token", TMA_JOB_TOKEN_FILE);
    tma_job_destroy(job);
    chmod(path, 0644);
    CHECK_OK(parse_text(text, &job));
    CHECK_STATUS(tma_job_load_token(job), TMA_ERR_CONFIG);
    ASSERT_STR_EQ(job->token, "");
    tma_job_destroy(job);
    CHECK_MSG(parse_text("{\"graph\": \"g\", \"transport\": {\"token\": \"a\", \"token_file\": \"/t\"}}", &job) ==
                  TMA_ERR_CONFIG,
              "accepted a token and a token file");
    free(text);
    free(path);
    tma_test_cleanup_dir(dir);
}

/* The run folder (issue 30, item 6): a new one is 0700, an existing one of
 * the user's keeps its mode, one writable by others or owned by another
 * user is refused; metrics.jsonl is 0600. */
static void test_run_dir(void)
{
    char base[] = "/tmp/tma-run-dir-XXXXXX";
    ASSERT_NOT_NULL(mkdtemp(base));
    char *abs = NULL, path[256];
    struct stat sb;
    snprintf(path, sizeof path, "%s/new/run", base);
    CHECK_OK(tma_job_run_make_dir(path, &abs));
    ASSERT_EQ(stat(path, &sb), 0);
    ASSERT_EQ((sb.st_mode & 0777), 0700);
    free(abs);
    ASSERT_EQ(chmod(path, 0750), 0);
    CHECK_OK(tma_job_run_make_dir(path, &abs)); /* the user's: keeps its mode */
    ASSERT_EQ(stat(path, &sb), 0);
    ASSERT_EQ((sb.st_mode & 0777), 0750);
    free(abs);
    cJSON *o = cJSON_CreateObject();
    char *mpath = tma_job_run_path(path, "metrics.jsonl");
    CHECK_OK(tma_job_run_append_line(mpath, o));
    ASSERT_EQ(stat(mpath, &sb), 0);
    ASSERT_EQ((sb.st_mode & 0777), 0600);
    cJSON_Delete(o);
    ASSERT_EQ(unlink(mpath), 0);
    free(mpath);
    ASSERT_EQ(chmod(path, 0777), 0);
    abs = NULL;
    ASSERT_EQ(tma_job_run_make_dir(path, &abs), TMA_ERR_INVALID);
    ASSERT_NULL(abs);
    ASSERT_EQ(chmod(path, 0770), 0);
    ASSERT_EQ(tma_job_run_make_dir(path, &abs), TMA_ERR_INVALID);
    ASSERT_NULL(abs);
    ASSERT_EQ(chmod(path, 0700), 0);
    if (geteuid() == 0) { /* only root can give a folder away */
        ASSERT_EQ(chown(path, 65534, 65534), 0);
        ASSERT_EQ(tma_job_run_make_dir(path, &abs), TMA_ERR_INVALID);
        ASSERT_NULL(abs);
    }
    ASSERT_EQ(rmdir(path), 0);
    snprintf(path, sizeof path, "%s/new", base);
    ASSERT_EQ(rmdir(path), 0);
    ASSERT_EQ(rmdir(base), 0);
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);
    test_records();
    test_keys();
    test_variants();
    test_jobs();
    test_token();
    test_run_dir();
    return tma_test_done();
}
