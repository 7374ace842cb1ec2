#!/bin/bash
# test_fault_kill_worker.sh (scenario 1): a worker is SIGKILLed mid-training.
# continue: the job goes on with M-1 owners and the dead one's shard is
# dropped.  reassign: a backup worker takes the shard and trains on it within
# the lease TTL plus the shard's load time.  Both: the job finishes, rounds go
# on after the fault, every round is recorded once, the result is valid.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

# --- continue
write_job c.json kc '"fault": {"on_failure": "continue", "lease_ttl": 3, "round_deadline": 5, "start_timeout": 20}'
start_job c.json kc c-
victim=${WORKER_PIDS[1]}
wait_round c-run 3 || { dump_logs c-coord.log; fail "no round 3"; }
kill -KILL "$victim"
t_kill=$SECONDS
finish_job c-coord.log c-w0.log c-w2.log
check_run c-run >/dev/null || fail "continue: run folder invalid"
# The dead member: present before, gone after; its shard dropped (owner -1).
rounds_check c-run "any(len(r['workers']) == 3 for r in R) and len(R[-1]['workers']) == 2 and R[-1]['owners'].count(-1) == 1" \
  "continue: the job did not go on with M-1 and a dropped shard" || fail "continue"
rounds_check c-run "any(m['to'] == -1 and m['reason'] == 'owner lost' for r in R for m in r['moves'])" \
  "continue: no drop recorded" || fail "continue: move record"
rounds_check c-run "sum(1 for r in R if len(r['workers']) == 2) >= 3" "rounds after the fault" || fail "continue: rounds stopped"

# --- reassign with a backup
WORKER_PIDS=()
write_job r.json kr '"fault": {"on_failure": "reassign", "lease_ttl": 3, "round_deadline": 5, "start_timeout": 20}'
start_job r.json kr r-
start_worker r-b.log --job kr --name backup --backup
victim=${WORKER_PIDS[2]}
wait_round r-run 3 || { dump_logs r-coord.log; fail "no round 3"; }
kill -KILL "$victim"
t0=$(date +%s.%N)
# The backup trains: its log says so within lease TTL (3 s) + loading, well under 10 s.
wait_for 15 grep -q "training on 1 shard" r-b.log || { dump_logs r-coord.log r-b.log; fail "the backup never trained"; }
t1=$(date +%s.%N)
took=$(python3 -c "print(round($t1 - $t0, 2))")
finish_job r-coord.log r-w0.log r-w1.log r-b.log
check_run r-run >/dev/null || fail "reassign: run folder invalid"
rounds_check r-run "R[-1]['owners'].count(-1) == 0 and len(R[-1]['workers']) == 3" \
  "reassign: the backup does not own the shard at the end" || fail "reassign"
rounds_check r-run "any(m['reason'] == 'owner lost' and m['to'] >= 0 for r in R for m in r['moves'])" \
  "reassign: no move to the backup recorded" || fail "reassign: move record"
echo "continue: went on with M-1; reassign: the backup trained ${took}s after the kill"
