/* test_fault_unit.c: the pure parts of fault/: the shard policies and
 * failure-injection specs (job configs, keys and records: tests/job). */
#include "tma_test.h"
#include "tma_fault.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_policies(void)
{
    int64_t edges[6] = {10, 20, 30, 40, 50, 60};
    tma_shard_map_t map;
    CHECK_OK(tma_shard_map_create(6, edges, &map));
    tma_shard_move_t mv[8];
    /* Members 4, 2 (backup), 9, 1: the three non-backups by id are 1, 4, 9. */
    tma_live_member_t live[4] = {{4, 0}, {2, 1}, {9, 0}, {1, 0}};
    int n = tma_policy_initial(&map, live, 4, 3, mv);
    ASSERT_EQ(n, 6);
    ASSERT_EQ(map.owner[0], 1);
    ASSERT_EQ(map.owner[1], 4);
    ASSERT_EQ(map.owner[2], 9);
    ASSERT_EQ(map.owner[3], 1);
    ASSERT_EQ(map.owner[5], 9);
    ASSERT_EQ(tma_shard_map_count(&map, 2, NULL), 0);

    /* Only two of three came: slot 2's shards stay orphaned. */
    tma_shard_map_t m2;
    CHECK_OK(tma_shard_map_create(3, edges, &m2));
    tma_live_member_t two[2] = {{5, 0}, {6, 0}};
    n = tma_policy_initial(&m2, two, 2, 3, mv);
    ASSERT_EQ(n, 2);
    ASSERT_EQ(m2.owner[0], 5);
    ASSERT_EQ(m2.owner[1], 6);
    ASSERT_EQ(m2.owner[2], -1);

    /* Shard 1 absent (the F = 1 drill): the others go to 2 slots, shard 1 stays orphaned. */
    tma_shard_map_t m3;
    CHECK_OK(tma_shard_map_create(4, edges, &m3));
    int32_t absent[1] = {1};
    n = tma_policy_initial_absent(&m3, two, 2, 3, absent, 1, mv);
    ASSERT_EQ(n, 3);
    ASSERT_EQ(m3.owner[0], 5);
    ASSERT_EQ(m3.owner[1], -1);
    ASSERT_EQ(m3.owner[2], 6);
    ASSERT_EQ(m3.owner[3], 5);
    tma_shard_map_free(&m3);

    /* continue: member 4's shards are dropped. */
    tma_shard_map_t c;
    CHECK_OK(tma_shard_map_create(6, edges, &c));
    memcpy(c.owner, map.owner, sizeof edges);
    n = tma_policy_lost(&c, 4, TMA_POLICY_CONTINUE, live, 4, mv);
    ASSERT_EQ(n, 2);
    ASSERT_EQ(c.owner[1], -1);
    ASSERT_EQ(c.owner[4], -1);
    ASSERT_EQ(mv[0].from, 4);
    ASSERT_EQ(mv[0].to, -1);

    /* reassign: the first goes to the idle backup 2, the second to the least-loaded. */
    n = tma_policy_lost(&map, 4, TMA_POLICY_REASSIGN, live, 4, mv);
    ASSERT_EQ(n, 2);
    ASSERT_EQ(map.owner[1], 2);
    /* After shard 1 (20 edges) went to 2: loads 1: 10+40=50, 2: 20, 9: 30+60=90: shard 4 goes to 2. */
    CHECK_MSG(map.owner[4] == 2, "owner %lld", (long long)map.owner[4]);
    ASSERT_EQ(tma_shard_map_count(&map, 4, NULL), 0);

    /* A joiner takes an orphan; a backup under reassign takes every orphan. */
    n = tma_policy_joined(&c, 11, 0, TMA_POLICY_CONTINUE, mv);
    ASSERT_EQ(n, 1);
    ASSERT_EQ(c.owner[1], 11);
    n = tma_policy_joined(&c, 12, 1, TMA_POLICY_REASSIGN, mv);
    ASSERT_EQ(n, 1);
    ASSERT_EQ(c.owner[4], 12);
    /* No orphans: a joiner takes one shard from a member that owns several. */
    n = tma_policy_joined(&c, 13, 0, TMA_POLICY_CONTINUE, mv);
    ASSERT_EQ(n, 1);
    ASSERT_EQ(mv[0].to, 13);
    CHECK_MSG(mv[0].from == 1 || mv[0].from == 9, "the shard came from member %lld", (long long)mv[0].from);
    /* A backup without orphans stays idle. */
    n = tma_policy_joined(&c, 14, 1, TMA_POLICY_REASSIGN, mv);
    ASSERT_EQ(n, 0);
    /* Every shard has exactly one owner, and no owner is a lost member. */
    for (int k = 0; k < 6; k++) {
        ASSERT_GE(c.owner[k], 0);
        ASSERT_NE(c.owner[k], 4);
    }
    tma_shard_map_free(&map);
    tma_shard_map_free(&m2);
    tma_shard_map_free(&c);
}

/* A shard refused by its owner (its file is missing on the owner's node)
 * goes to a member that did not refuse it, under either policy, and no
 * policy deals it back to a member that refused it. */
static void test_policy_refused(void)
{
    const int64_t edges[3] = {10, 20, 30};
    tma_live_member_t live[3] = {{1, 0}, {2, 0}, {3, 1}};
    tma_shard_move_t mv[4];
    tma_shard_map_t m;
    CHECK_OK(tma_shard_map_create(3, edges, &m));
    m.owner[0] = 1;
    m.owner[1] = 2;
    m.owner[2] = 1;
    /* Not refused: nothing moves. */
    ASSERT_EQ(tma_policy_refused(&m, 0, live, 3, mv), 0);
    ASSERT_EQ(tma_shard_map_refuse(&m, 0, 1), 1);
    ASSERT_EQ(tma_shard_map_refuse(&m, 0, 1), 0);
    CHECK(tma_shard_map_refused(&m, 0, 1));
    CHECK(!tma_shard_map_refused(&m, 0, 2));
    /* The idle backup 3 takes it. */
    ASSERT_EQ(tma_policy_refused(&m, 0, live, 3, mv), 1);
    ASSERT_EQ(mv[0].from, 1);
    ASSERT_EQ(mv[0].to, 3);
    ASSERT_EQ(m.owner[0], 3);
    /* 3 refuses it too: the least-loaded member that did not refuse it, 2. */
    ASSERT_EQ(tma_shard_map_refuse(&m, 0, 3), 1);
    ASSERT_EQ(tma_policy_refused(&m, 0, live, 3, mv), 1);
    ASSERT_EQ(m.owner[0], 2);
    /* Everybody refused it: orphaned. */
    ASSERT_EQ(tma_shard_map_refuse(&m, 0, 2), 1);
    ASSERT_EQ(tma_policy_refused(&m, 0, live, 3, mv), 1);
    ASSERT_EQ(mv[0].to, -1);
    ASSERT_EQ(m.owner[0], -1);
    /* A member that refused the orphan does not take it when idle; it takes
     * a shard it did not refuse from one that owns several instead. */
    m.owner[1] = 1; /* 1 owns shards 1 and 2, 3 owns nothing */
    ASSERT_EQ(tma_policy_joined(&m, 3, 0, TMA_POLICY_CONTINUE, mv), 1);
    ASSERT_EQ(mv[0].from, 1);
    ASSERT_EQ(mv[0].to, 3);
    ASSERT_NE(mv[0].shard, 0);
    /* A lost owner's shard under reassign skips a member that refused it. */
    tma_shard_map_t r;
    CHECK_OK(tma_shard_map_create(1, edges, &r));
    r.owner[0] = 1;
    ASSERT_EQ(tma_shard_map_refuse(&r, 0, 3), 1);
    ASSERT_EQ(tma_policy_lost(&r, 1, TMA_POLICY_REASSIGN, live, 3, mv), 1);
    ASSERT_EQ(r.owner[0], 2);
    /* A member that is gone is forgotten. */
    tma_shard_map_forget(&m, 2);
    CHECK(!tma_shard_map_refused(&m, 0, 2));
    CHECK(tma_shard_map_refused(&m, 0, 3));
    tma_shard_map_free(&r);
    tma_shard_map_free(&m);
}

static void test_inject(void)
{
    tma_inject_t inj;
    CHECK_OK(tma_inject_parse("crash=send@3,delay_step=0.01,drop=weights@2,stall_keepalive=4.5@6", &inj));
    CHECK(inj.active);
    ASSERT_EQ(inj.crash_round, 3);
    ASSERT_STR_EQ(inj.crash_point, "send");
    ASSERT_EQ(inj.delay_step, 0.01);
    ASSERT_EQ(inj.drop_round, 2);
    ASSERT_EQ(inj.stall_round, 6);
    ASSERT_EQ(inj.stall_seconds, 4.5);
    ASSERT_EQ(inj.drop_begin_round, -1);
    ASSERT_EQ(inj.drop_rows_round, -1);
    CHECK_OK(tma_inject_parse("drop=begin@3,drop=rows@4", &inj));
    ASSERT_EQ(inj.drop_begin_round, 3);
    ASSERT_EQ(inj.drop_rows_round, 4);
    ASSERT_EQ(inj.drop_round, -1);
    CHECK_OK(tma_inject_parse("crash=stop@*", &inj));
    CHECK(inj.active);
    ASSERT_EQ(inj.crash_round, TMA_INJECT_ANY_ROUND);
    ASSERT_STR_EQ(inj.crash_point, "stop");
    /* Armed for another point: nothing happens at this one, in any round. */
    tma_inject_point(&inj, "send", 3);
    tma_inject_point(&inj, "send", TMA_INJECT_ANY_ROUND);
    /* At its point it kills, whatever the round. */
    for (int64_t round = 0; round < 8; round += 7) {
        pid_t pid = fork();
        if (pid == 0) {
            tma_inject_point(&inj, "stop", round);
            _exit(0);
        }
        int status = 0;
        ASSERT_GT(pid, 0);
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "round %lld: status %d", (long long)round,
                  status);
    }
    /* Every documented point fires, for crash and for pause, in its round
     * only: a pause stops the process until it is continued. */
    static const char *const points[] = {"step", "send", "recv", "aggregate", "broadcast", "stop", "eval"};
    for (size_t i = 0; i < TMA_ARRAY_LEN(points); i++) {
        for (int crash = 0; crash < 2; crash++) {
            char spec[64];
            snprintf(spec, sizeof spec, "%s=%s@2", crash ? "crash" : "pause", points[i]);
            CHECK_OK(tma_inject_parse(spec, &inj));
            pid_t pid = fork();
            if (pid == 0) {
                tma_inject_point(&inj, points[i], 1);
                tma_inject_point(&inj, points[(i + 1) % TMA_ARRAY_LEN(points)], 2);
                tma_inject_point(&inj, points[i], 2);
                _exit(3);
            }
            int status = 0;
            ASSERT_GT(pid, 0);
            ASSERT_EQ(waitpid(pid, &status, WUNTRACED), pid);
            if (crash) {
                CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "%s: status %d", spec, status);
                continue;
            }
            CHECK_MSG(WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP, "%s: status %d", spec, status);
            kill(pid, SIGCONT);
            ASSERT_EQ(waitpid(pid, &status, 0), pid);
            CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 3, "%s: status %d", spec, status);
        }
    }
    const char *bad[] = {"pause=nowhere@1", "pause=eval", "crash=nowhere@1", "crash=send", "delay_step=-1", "crash=stop@", "crash=stop@**",
                         "crash=stop*", "drop=grads@1", "bogus=1", "x",
                         "stall_keepalive=0@1", "crash=send@-2"};
    for (size_t i = 0; i < TMA_ARRAY_LEN(bad); i++) {
        CHECK_MSG(tma_inject_parse(bad[i], &inj) == TMA_ERR_CONFIG, "%s", bad[i]);
        CHECK(!inj.active);
    }
    CHECK_OK(tma_inject_parse("", &inj));
    CHECK(!inj.active);
    /* An unarmed point does nothing (we are still alive). */
    tma_inject_point(&inj, "send", 3);
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);
    test_policies();
    test_policy_refused();
    test_inject();
    return tma_test_done();
}
