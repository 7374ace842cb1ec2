#!/bin/bash
# test_fault_shard_missing.sh: workers dealt a shard whose file their node
# lacks.  Two workers, two shards, each in a private mount namespace
# (`unshare -m`) whose partition folder holds partition.json and only the
# other worker's shard, so the initial deal gives each a shard it does not
# have.  Each refuses it with an error naming the file and the node, the
# coordinator deals it to the other (the one that did not refuse it), and
# the job trains to the end on the swapped deal.  Then a third worker whose
# node holds no shard at all joins a job in which the two others own one
# shard each: it refuses what it is dealt and the job still ends, with the
# shards where their files are.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
need_unshare
fault_setup 1 2
HOST=$(hostname)
mkdir -p has0 has1 none
for d in has0 has1 none; do cp part/partition.json $d/; done
cp part/shard-00000.tmag part/shard-00000.infer.tmag has0/
cp part/shard-00001.tmag part/shard-00001.infer.tmag has1/

# member_id LOG: the member id a worker's log names.
member_id() { grep -om1 'joined job [^ ]* as member [0-9]*' "$1" | awk '{print $NF}'; }

# --- the swap: a registers first (slot 0, shard 0) but holds only shard 1.
WORKERS=2 STEPS=10 ROUNDS=4 step_job s.json sm '"fault": {"lease_ttl": 3, "start_timeout": 30}'
start_coordinator s-c.log --config s.json --run-dir s-run
start_worker_ns s-a.log has1 --job sm --name a
wait_for 30 job_members sm 1 || { dump_logs s-a.log; fail "worker a did not register"; }
start_worker_ns s-b.log has0 --job sm --name b
job_done s s-c.log s-a.log s-b.log
a=$(member_id s-a.log) b=$(member_id s-b.log)
[ -n "$a" ] && [ -n "$b" ] || fail "no member ids in the workers' logs"
grep -q "node $HOST: shard 0's file $TMP_ROOT/part/shard-00000.tmag is missing" s-a.log ||
  { dump_logs s-a.log; fail "worker a did not name the missing file and the node"; }
# b refuses shard 1 only when it was dealt it before the move of a's refusal
# left a idle and a took shard 1 from b (under load, b may join after that).
if grep -q "member $b (b on $HOST) refused shard 1" s-c.log; then
  grep -q "node $HOST: shard 1's file $TMP_ROOT/part/shard-00001.tmag is missing" s-b.log ||
    { dump_logs s-b.log; fail "worker b did not name the missing file and the node"; }
fi
grep -q "member $a (a on $HOST) refused shard 0" s-c.log || { dump_logs s-c.log; fail "the coordinator did not report a's refusal"; }
rounds_check s-run "R[-1]['owners'] == [$b, $a]" "the shards did not end with the workers that hold them" ||
  fail "swap: owners"
# The second shard moves for its refusal too, or, when the first move left
# its owner idle, as the idle member's take from one that owns two.
rounds_check s-run "any(m['reason'] == 'shard file missing on its node' for m in R[0]['moves'])" \
  "no refusal recorded as a move" || fail "swap: moves"
rounds_check s-run "all(sorted(w['id'] for w in r['workers']) == sorted([$a, $b]) for r in R[1:])" \
  "a round did not count both workers" || fail "swap: rounds"

# --- a worker whose node holds no shard joins a running job and takes none.
WORKER_PIDS=()
WORKERS=2 STEPS=10 ROUNDS=40 step_job j.json jm '"fault": {"lease_ttl": 3, "start_timeout": 30}'
start_coordinator j-c.log --config j.json --run-dir j-run
# Slow steps (0.2 s a round): the job outlasts what follows.
TMA_FAULT=delay_step=0.02 start_worker_ns j-a.log has0 --job jm --name a
wait_for 30 job_members jm 1 || { dump_logs j-a.log; fail "worker a did not register"; }
TMA_FAULT=delay_step=0.02 start_worker_ns j-b.log has1 --job jm --name b
wait_round j-run 2 || { dump_logs j-c.log; fail "job jm did not reach round 2"; }
# Idle with no orphan, it is dealt nothing: it may only take a shard from
# a member that owns several.  Kill b: under continue its shard is an
# orphan the newcomer is offered, and must refuse.
start_worker_ns j-c2.log none --job jm --name c
wait_for 30 job_members jm 3 || { dump_logs j-c2.log; fail "worker c did not register"; }
kill -KILL "${WORKER_PIDS[1]}"
wait_for 60 grep -q "refuses shard 1" j-c2.log || { dump_logs j-c.log j-c2.log; fail "c did not refuse shard 1"; }
grep -q "node $HOST: shard 1's file $TMP_ROOT/part/shard-00001.tmag is missing" j-c2.log ||
  fail "c did not name the file and the node"
# The job goes on with a alone and ends; nothing waits on c.
WORKER_PIDS=("${WORKER_PIDS[0]}" "${WORKER_PIDS[2]}")
job_done j j-c.log j-a.log j-c2.log
c=$(member_id j-c2.log)
rounds_check j-run "R[-1]['owners'][1] in (-1,) and $c not in R[-1]['owners']" \
  "the refused shard did not stay orphaned, or c owns a shard" || fail "join: owners"
grep -q "shard 1: every live member refused it" j-c.log || fail "the coordinator did not say nobody can train shard 1"
echo "refused shards went to the worker that holds them; a worker without files took none and the jobs ended"
