/* test_fault_unit.c: the pure parts of fault/: records, the meta block,
 * the shard policies, failure-injection specs and job configs. */
#include "tma_test.h"
#include "tma_fault.h"

#include <string.h>

static void test_records(void)
{
    tma_member_rec_t m = {7, (int64_t)1 << 60, 1, "w7", "hostA", 1234, "cpu"}, m2;
    char *s = tma_member_rec_encode(&m);
    CHECK_OK(tma_member_rec_decode("k", s, strlen(s), &m2));
    CHECK(m2.id == 7 && m2.lease == ((int64_t)1 << 60) && m2.backup == 1 && m2.pid == 1234);
    CHECK(strcmp(m2.name, "w7") == 0 && strcmp(m2.device, "cpu") == 0);
    free(s);
    /* Untrusted values: every malformed one is refused, none crashes. */
    const char *bad[] = {"", "[]", "{", "{\"id\": -1, \"lease\": 5, \"pid\": 1}", "{\"id\": 1.5, \"lease\": 5, \"pid\": 1}",
                         "{\"id\": 1, \"lease\": 0, \"pid\": 1}", "{\"id\": 1, \"lease\": \"x\", \"pid\": 1}",
                         "{\"id\": 1, \"lease\": 2, \"pid\": 1, \"backup\": 3}", "{\"id\": \"1\"}", "null"};
    for (size_t i = 0; i < TMA_ARRAY_LEN(bad); i++)
        CHECK_MSG(tma_member_rec_decode("k", bad[i], strlen(bad[i]), &m2) == TMA_ERR_MALFORMED, "%s", bad[i]);

    tma_shard_rec_t r = {3, -1, 99, 12}, r2;
    s = tma_shard_rec_encode(&r);
    CHECK_OK(tma_shard_rec_decode("k", s, strlen(s), &r2));
    CHECK(r2.shard == 3 && r2.owner == -1 && r2.epoch == 99 && r2.since_round == 12);
    free(s);
    CHECK(tma_shard_rec_decode("k", "{\"shard\":1}", 11, &r2) == TMA_ERR_MALFORMED);

    tma_ready_rec_t rd = {42, 3, {0, 5, 9}}, rd2;
    s = tma_ready_rec_encode(&rd);
    CHECK_OK(tma_ready_rec_decode("k", s, strlen(s), &rd2));
    CHECK(rd2.n_shards == 3 && rd2.shards[1] == 5 && rd2.lease == 42);
    free(s);
    const char *too_many = "{\"lease\": 1, \"shards\": [0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,"
                           "0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5]}";
    CHECK(tma_ready_rec_decode("k", too_many, strlen(too_many), &rd2) == TMA_ERR_MALFORMED);
    CHECK(tma_ready_rec_decode("k", "{\"lease\":1,\"shards\":[-1]}", 25, &rd2) == TMA_ERR_MALFORMED);

    tma_state_rec_t st, st2;
    memset(&st, 0, sizeof st);
    st.epoch = 5;
    st.round = 17;
    st.train_elapsed = 123.5;
    st.best_round = -1;
    snprintf(st.phase, sizeof st.phase, "training");
    snprintf(st.run_dir, sizeof st.run_dir, "/tmp/run");
    s = tma_state_rec_encode(&st);
    CHECK_OK(tma_state_rec_decode("k", s, strlen(s), &st2));
    CHECK(st2.round == 17 && st2.best_round == -1 && st2.train_elapsed == 123.5 && strcmp(st2.phase, "training") == 0);
    free(s);

    int64_t round;
    uint64_t epoch;
    s = tma_agg_rec_encode(9, 77);
    CHECK_OK(tma_agg_rec_decode("k", s, strlen(s), &round, &epoch));
    CHECK(round == 9 && epoch == 77);
    free(s);

    char key[TMA_KEY_MAX];
    CHECK(strcmp(tma_fault_key_n(key, "j", "shards", 12), "/tma/j/shards/00000012") == 0);
    CHECK(tma_fault_key_number(key) == 12);
    CHECK(tma_fault_key_number("/tma/j/shards/x") == -1);

    /* The meta block round-trips through floats bit for bit. */
    tma_msg_meta_t meta, back;
    memset(&meta, 0, sizeof meta);
    meta.magic = TMA_META_MAGIC;
    meta.lease = INT64_C(0x7abcdef012345678);
    meta.steps_total = 1000;
    meta.steps_round = 10;
    meta.loss = 0.25;
    meta.n_shards = 2;
    meta.shards[0] = 4;
    meta.shards[1] = 7;
    float block[TMA_META_FLOATS];
    tma_msg_meta_pack(&meta, block);
    CHECK_OK(tma_msg_meta_unpack(block, &back));
    CHECK(memcmp(&meta, &back, sizeof meta) == 0);
    block[0] = 1.0f;
    CHECK(tma_msg_meta_unpack(block, &back) == TMA_ERR_MALFORMED);
}

static void test_policies(void)
{
    int64_t edges[6] = {10, 20, 30, 40, 50, 60};
    tma_shard_map_t map;
    CHECK_OK(tma_shard_map_create(6, edges, &map));
    tma_shard_move_t mv[8];
    /* Members 4, 2 (backup), 9, 1: the three non-backups by id are 1, 4, 9. */
    tma_live_member_t live[4] = {{4, 0}, {2, 1}, {9, 0}, {1, 0}};
    int n = tma_policy_initial(&map, live, 4, 3, mv);
    CHECK(n == 6);
    CHECK(map.owner[0] == 1 && map.owner[1] == 4 && map.owner[2] == 9 && map.owner[3] == 1 && map.owner[5] == 9);
    CHECK(tma_shard_map_count(&map, 2, NULL) == 0);

    /* Only two of three came: slot 2's shards stay orphaned. */
    tma_shard_map_t m2;
    CHECK_OK(tma_shard_map_create(3, edges, &m2));
    tma_live_member_t two[2] = {{5, 0}, {6, 0}};
    n = tma_policy_initial(&m2, two, 2, 3, mv);
    CHECK(n == 2 && m2.owner[0] == 5 && m2.owner[1] == 6 && m2.owner[2] == -1);

    /* continue: member 4's shards are dropped. */
    tma_shard_map_t c;
    CHECK_OK(tma_shard_map_create(6, edges, &c));
    memcpy(c.owner, map.owner, sizeof edges);
    n = tma_policy_lost(&c, 4, TMA_POLICY_CONTINUE, live, 4, mv);
    CHECK(n == 2 && c.owner[1] == -1 && c.owner[4] == -1 && mv[0].from == 4 && mv[0].to == -1);

    /* reassign: the first goes to the idle backup 2, the second to the least-loaded. */
    n = tma_policy_lost(&map, 4, TMA_POLICY_REASSIGN, live, 4, mv);
    CHECK(n == 2);
    CHECK(map.owner[1] == 2);
    /* After shard 1 (20 edges) went to 2: loads 1: 10+40=50, 2: 20, 9: 30+60=90: shard 4 goes to 2. */
    CHECK_MSG(map.owner[4] == 2, "owner %lld", (long long)map.owner[4]);
    CHECK(tma_shard_map_count(&map, 4, NULL) == 0);

    /* A joiner takes an orphan; a backup under reassign takes every orphan. */
    n = tma_policy_joined(&c, 11, 0, TMA_POLICY_CONTINUE, mv);
    CHECK(n == 1 && c.owner[1] == 11);
    n = tma_policy_joined(&c, 12, 1, TMA_POLICY_REASSIGN, mv);
    CHECK(n == 1 && c.owner[4] == 12);
    /* No orphans: a joiner takes one shard from a member that owns several. */
    n = tma_policy_joined(&c, 13, 0, TMA_POLICY_CONTINUE, mv);
    CHECK(n == 1 && mv[0].to == 13 && (mv[0].from == 1 || mv[0].from == 9));
    /* A backup without orphans stays idle. */
    n = tma_policy_joined(&c, 14, 1, TMA_POLICY_REASSIGN, mv);
    CHECK(n == 0);
    /* Every shard has exactly one owner, and no owner is a lost member. */
    for (int k = 0; k < 6; k++)
        CHECK(c.owner[k] >= 0 && c.owner[k] != 4);
    tma_shard_map_free(&map);
    tma_shard_map_free(&m2);
    tma_shard_map_free(&c);
}

static void test_inject(void)
{
    tma_inject_t inj;
    CHECK_OK(tma_inject_parse("crash=send@3,delay_step=0.01,drop=weights@2,stall_keepalive=4.5@6", &inj));
    CHECK(inj.active && inj.crash_round == 3 && strcmp(inj.crash_point, "send") == 0);
    CHECK(inj.delay_step == 0.01 && inj.drop_round == 2 && inj.stall_round == 6 && inj.stall_seconds == 4.5);
    const char *bad[] = {"crash=nowhere@1", "crash=send", "delay_step=-1", "drop=grads@1", "bogus=1", "x",
                         "stall_keepalive=0@1", "crash=send@-2"};
    for (size_t i = 0; i < TMA_ARRAY_LEN(bad); i++) {
        CHECK_MSG(tma_inject_parse(bad[i], &inj) == TMA_ERR_CONFIG, "%s", bad[i]);
        CHECK(!inj.active);
    }
    CHECK_OK(tma_inject_parse("", &inj));
    CHECK(!inj.active);
    /* An unarmed point does nothing (we are still alive). */
    tma_inject_crash_point(&inj, "send", 3);
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
    CHECK(job->variant == TMA_VARIANT_RANDOMTMA && job->workers == 3 && job->shards == 3);
    CHECK(job->interval_s == 120 && job->train_s == 600 && job->on_failure == TMA_POLICY_CONTINUE);
    CHECK(strcmp(job->graph, "/data/g.tmag") == 0);
    cJSON *back = tma_job_to_json(job);
    tma_job_t *again;
    CHECK_OK(tma_job_parse(back, "again", "/", &again));
    CHECK(again->workers == job->workers && again->interval_s == job->interval_s &&
          strcmp(again->graph, job->graph) == 0);
    cJSON_Delete(back);
    tma_job_destroy(again);
    tma_job_destroy(job);

    CHECK_OK(parse_text("{\"graph\": \"/g.tmag\", \"variant\": \"llcg\", \"workers\": 2, \"partition\": {\"shards\": 4},"
                        " \"aggregation\": {\"interval_steps\": 5}, \"duration\": {\"rounds\": 3},"
                        " \"llcg\": {\"correction_steps\": 2}, \"fault\": {\"on_failure\": \"reassign\"}}",
                        &job));
    CHECK(job->variant == TMA_VARIANT_LLCG && job->shards == 4 && job->interval_steps == 5 && job->rounds == 3);
    CHECK(job->train_s == 0 && job->llcg_steps == 2 && job->on_failure == TMA_POLICY_REASSIGN);
    tma_job_destroy(job);

    const char *bad[] = {
        "{}",                                                                  /* no graph */
        "{\"graph\": \"g\", \"dataset\": \"d\"}",                              /* two sources */
        "{\"graph\": \"g\", \"variant\": \"fedavg\"}",                         /* unknown variant */
        "{\"graph\": \"g\", \"aggregation\": {\"interval_seconds\": -1}}",     /* negative interval */
        "{\"graph\": \"g\", \"aggregation\": {\"interval_seconds\": 1, \"interval_steps\": 2}}",
        "{\"graph\": \"g\", \"workers\": 4, \"partition\": {\"shards\": 3}}",  /* more trainers than shards */
        "{\"graph\": \"g\", \"partition\": {\"scheme\": \"metis\"}}",          /* randomtma with metis */
        "{\"graph\": \"g\", \"variant\": \"ggs\", \"partition\": {}}",         /* ggs has no partition */
        "{\"graph\": \"g\", \"llcg\": {\"correction_steps\": 2}}",             /* llcg options elsewhere */
        "{\"graph\": \"g\", \"fault\": {\"on_failure\": \"retry\"}}",
        "{\"graph\": \"g\", \"fault\": {\"lease_ttl\": 1}}",
        "{\"graph\": \"g\", \"unknown\": 1}",
        "{\"graph\": \"g\", \"model\": {\"encoder\": \"gat\"}}",
        "{\"graph\": \"g\", \"devices\": {\"workers\": [\"tpu\"]}}",
        "{\"graph\": \"g\", \"job\": \"bad name!\"}",
        "{\"graph\": \"g\", \"duration\": {\"train_seconds\": 0}}",
        "{\"graph\": 5}",
        "[1]",
    };
    for (size_t i = 0; i < TMA_ARRAY_LEN(bad); i++)
        CHECK_MSG(parse_text(bad[i], &job) == TMA_ERR_CONFIG, "accepted: %s", bad[i]);
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);
    test_records();
    test_policies();
    test_inject();
    test_jobs();
    return tma_test_done();
}
