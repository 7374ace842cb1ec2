#!/bin/bash
# test_job_node_local.sh: a job without a shared file system.  The same
# step-mode job (same seed) runs twice: once with every worker reading the
# shared partition folder, once with each worker in its own mount namespace
# (`unshare -m`) where the partition folder holds only partition.json and
# that worker's own shard (a per-node folder bind-mounted over it; the third
# worker finds it through --data-dir instead, with the shared path hidden).
# Both runs train to the end and give the same final model and test MRR.
# A worker whose --data-dir holds another partition stops with an error
# naming the folder.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
need_unshare
fault_setup 1
HOST=$(hostname)

# Each node's folder: partition.json and its one shard (with the shard's
# inference file: the workers evaluate).
for i in 0 1 2; do
  mkdir -p node$i
  cp part/partition.json node$i/
  cp part/shard-0000$i.tmag part/shard-0000$i.infer.tmag node$i/
done
mkdir -p empty


WORKERS=3 STEPS=10 ROUNDS=5 step_job s.json nls
WORKERS=3 STEPS=10 ROUNDS=5 step_job n.json nln

# The shared folder.
start_coordinator s-c.log --config s.json --run-dir s-run
for i in 0 1 2; do start_worker s-w$i.log --job nls --name s$i; done
job_done s s-c.log s-w0.log s-w1.log s-w2.log

# Node-local folders.  Workers register one after another, so worker i is
# the i-th member and the initial deal gives it shard i, the one its node has.
WORKER_PIDS=()
start_coordinator n-c.log --config n.json --run-dir n-run
# A partition of another seed under --data-dir: refused before joining.
"$TMA" partition g.tmag --scheme random --shards 3 --seed 9 -o other >/dev/null || fail "partition (seed 9)"
"$TMA" worker --etcd "$ETCD_ENDPOINTS" --job nln --threads 1 --data-dir other > bad.log 2>&1 &
bad=$!
track $bad
wait_exit $bad 60
rc=$?
[ "$rc" -eq 1 ] || { cat bad.log >&2; fail "a worker with another partition's --data-dir exited $rc, not 1"; }
grep -q "node $HOST: other/partition.json (--data-dir) holds 3 shards of seed 9.*another partition" bad.log ||
  { cat bad.log >&2; fail "the wrong --data-dir was not named"; }
job_members nln 0 || fail "the refused worker registered"
expect_fail 2 "--data-dir $TMP_ROOT/nowhere: no such folder" -- \
  "$TMA" worker --etcd "$ETCD_ENDPOINTS" --job nln --data-dir "$TMP_ROOT/nowhere"

start_worker_ns n-w0.log node0 --job nln --name n0
wait_for 30 job_members nln 1 || { dump_logs n-w0.log; fail "worker n0 did not register"; }
start_worker_ns n-w1.log node1 --job nln --name n1
wait_for 30 job_members nln 2 || { dump_logs n-w1.log; fail "worker n1 did not register"; }
# The third sees an empty partition folder and finds its own through --data-dir.
start_worker_ns n-w2.log empty --job nln --name n2 --data-dir "$TMP_ROOT/node2"
wait_for 30 job_members nln 3 || { dump_logs n-w2.log; fail "worker n2 did not register"; }
# What each worker sees where the partition folder is.
for i in 0 1 2; do
  seen=$(ls "/proc/${WORKER_PIDS[$i]}/root$TMP_ROOT/part" | tr '\n' ' ')
  want="partition.json shard-0000$i.infer.tmag shard-0000$i.tmag "
  [ "$i" = 2 ] && want=""
  [ "$seen" = "$want" ] || fail "worker n$i sees '$seen' in the partition folder, expected '$want'"
done
job_done n n-c.log n-w0.log n-w1.log n-w2.log
grep -q "partition: $TMP_ROOT/node2 (--data-dir), 3 shards" n-w2.log || fail "n2 did not use --data-dir"
grep -l "refuses shard" n-w*.log && fail "a worker refused a shard its node holds"

# Same model, same test MRR.
last_checkpoint() { ls "$1"/checkpoint-r*.tmaw | sort | tail -n 1; }
cmp "$(last_checkpoint s-run)" "$(last_checkpoint n-run)" || fail "the final checkpoints differ"
s_mrr=$(json s-run/result.json 'd["test_mrr"]')
n_mrr=$(json n-run/result.json 'd["test_mrr"]')
[ "$s_mrr" = "$n_mrr" ] || fail "test MRR $s_mrr (shared folder) != $n_mrr (node-local folders)"
echo "shared folder and node-local shards: the same final model, test MRR $s_mrr"
