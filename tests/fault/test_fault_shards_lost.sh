#!/bin/bash
# test_fault_shards_lost.sh: step mode, three coordinators in turn.  The
# leader pauses the moment round 3 commits (pause=commit@3).  A standby
# takes over, re-stamps the shard records with its epoch, and dies in its
# first round before committing it (crash=aggregate@4).  The shard records
# now carry the epoch of a leader that committed nothing, so they count for
# nobody: every worker drops its shard, and the third coordinator takes
# over with no owner on record and deals the shards afresh.  Each worker
# loads its shard from none, holds no weights, and says so in its ready
# record ("fresh"): the third coordinator sends them its global weights,
# and the job reaches its last round and an undisturbed run's model.  The
# first leader, resumed, finds itself fenced: it does not release the
# workers' evaluator ranks, which the third coordinator still needs for the
# job's last evaluation (before, it did, and that evaluation failed).
# Before, a takeover took every worker with a ready record for one still
# training: none was sent weights, each waited for them, and the first
# round waited for their tensors, for ever (the chaos loop, seed 48257).
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

export ROUNDS=8
FAULT='"fault": {"lease_ttl": 3, "round_deadline": 5, "start_timeout": 20}'
TMA_FAULT=pause=commit@3 step_pair d "$FAULT" f-c1.log
first=$FIRST
WORKER_FAULT=delay_step=0.02 faulted_workers d
wait_for 20 grep -q "leading job df" f-c1.log || fail "no leader"
TMA_FAULT=crash=aggregate@4 start_coordinator f-c2.log --job df --standby
second=$COORD_PID
paused() { grep -q "injected pause at commit in round 3" f-c1.log && ps -o stat= -p "$first" | grep -q T; }
wait_for 60 paused || { dump_logs f-c1.log; fail "the leader never paused at round 3's commit"; }
wait_for 30 grep -q "took over job df at round 3 " f-c2.log || { dump_logs f-c2.log; fail "the standby did not take over"; }
start_coordinator f-c3.log --job df --standby
third=$COORD_PID
wait_exit "$second" 60 > /dev/null
grep -q "injected crash at aggregate in round 4" f-c2.log || { dump_logs f-c2.log; fail "the standby did not die in round 4"; }
wait_for 30 grep -q "took over job df at round 3 " f-c3.log || { dump_logs f-c3.log; fail "the third coordinator did not take over"; }
kill -CONT "$first"
wait_exit "$first" 30
[ $? -ne 124 ] || { dump_logs f-c1.log; fail "the paused leader did not stop once fenced"; }
finish_pair "$third"
grep -q "assigned -> member" f-c3.log ||
  { dump_logs f-c3.log; fail "the third coordinator found owners on record: the test did not make them count for nobody"; }
grep -q "member(s) ready: sending them the current global weights" f-c3.log ||
  { dump_logs f-c3.log; fail "the third coordinator sent no weights to the workers that reloaded their shards"; }
rounds_check f-run "(len(R) == $ROUNDS + 1 and R[4]['epoch'] != R[3]['epoch'] and len(R[-1]['workers']) == 3 and
  R[-1]['eval'] == 'ok')" \
  "the third coordinator did not lead from round 4 to the last round with the three workers, or did not evaluate it" ||
  { dump_logs f-c3.log; fail "rounds"; }
same_model u-run f-run 0.03 || fail "the final model of the faulted run is far from the undisturbed one's"
echo "step mode: workers that lost and reloaded their shards got the new leader's weights; the job finished"
