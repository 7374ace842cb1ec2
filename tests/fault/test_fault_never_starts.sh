#!/bin/bash
# test_fault_never_starts.sh (scenario 4, the paper's F = 1): one of three
# workers never starts.  continue: training goes on with M-1 after the start
# timeout, its shard dropped.  reassign: a backup takes that shard.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1
TRAIN=10 write_job c.json fc '"fault": {"on_failure": "continue", "lease_ttl": 3, "start_timeout": 3}'
start_job c.json fc c- 2
finish_job c-coord.log c-w0.log c-w1.log
check_run c-run >/dev/null || fail "continue: run folder invalid"
grep -q "only 2 of 3 workers registered" c-coord.log || fail "continue: the missing worker was not reported"
rounds_check c-run "R[0]['owners'].count(-1) == 1 and all(len(r['workers']) == 2 for r in R[1:]) and len(R) > 3" \
  "continue: not M-1 with one shard dropped" || fail "continue"

WORKER_PIDS=()
TRAIN=10 write_job r.json fr '"fault": {"on_failure": "reassign", "lease_ttl": 3, "start_timeout": 3}'
start_job r.json fr r- 2
start_worker r-b.log --job fr --name backup --backup
finish_job r-coord.log r-w0.log r-w1.log r-b.log
check_run r-run >/dev/null || fail "reassign: run folder invalid"
rounds_check r-run "R[0]['owners'].count(-1) == 0 and all(len(r['workers']) == 3 for r in R[1:])" \
  "reassign: the backup did not take the never-started worker's shard" || fail "reassign"
rounds_check r-run "any(m['reason'] == 'worker never started' and m['to'] >= 0 for m in R[0]['moves'])" \
  "reassign: no move recorded" || fail "reassign: move record"
# The drill of the paper's Table 6: a chosen shard's trainer is absent from the start.
WORKER_PIDS=()
TRAIN=6 write_job a.json fa '"fault": {"on_failure": "continue", "lease_ttl": 3, "start_timeout": 20, "absent_shards": [0]}'
start_job a.json fa a- 2
finish_job a-coord.log a-w0.log a-w1.log
check_run a-run >/dev/null || fail "absent: run folder invalid"
rounds_check a-run "R[0]['owners'][0] == -1 and R[0]['owners'][1] >= 0 and R[0]['owners'][2] >= 0 and all(len(r['workers']) == 2 for r in R[1:])" \
  "absent_shards: shard 0 was not the dropped one" || fail "absent_shards"
grep -q "only" a-coord.log && fail "absent_shards: the coordinator waited for a third worker"
echo "F = 1: continue trained with 2 workers; reassign gave the shard to the backup; absent_shards dropped shard 0"
