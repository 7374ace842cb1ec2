#!/bin/bash
# test_fault_bad_record.sh (issue 30, item 5): a step-mode job's
# shards/00000001 record is overwritten with a value that does not decode
# (written by someone other than the leader) after round 3.  Its owner drops
# the shard; the leader notices at its next round that the record is not
# its own and writes it again, so the owner loads the shard again and trains
# on: the last rounds count all three workers, and the final model's test
# MRR is within 0.03 of an undisturbed run of the same seed (the owner
# restarts from the global weights, and the rounds between the damage and
# the repair average two workers).  Later the leader's own coordinator
# record is overwritten the same way (a value that does not decode, no
# lease): the leader writes it again, bound to its lease, within a round,
# and the job trains on.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

export ROUNDS=20
FAULT='"fault": {"lease_ttl": 3, "round_deadline": 5, "start_timeout": 20}'
step_pair s "$FAULT" f-c2.log
faulted=$FIRST
# 20 ms after each step (no effect on the model): the rounds outlast the repair.
WORKER_FAULT=delay_step=0.02 faulted_workers s
wait_round f-run 3 || { dump_logs f-c2.log; fail "no round 3"; }
etcdctl put /tma/sf/shards/00000001 '{"shard": "one"}' >/dev/null || hard "etcdctl put"
# Then the leader's own record: a plain put of a value that does not decode
# (workers would ignore every agg) also detaches the key from its lease.
wait_round f-run 9 || { dump_logs f-c2.log; fail "no round 9"; }
etcdctl put /tma/sf/coordinator '{"address": 5}' >/dev/null || hard "etcdctl put"
wait_for 20 grep -q "coordinator in etcd is not this leader's record (it does not decode)" f-c2.log ||
  { dump_logs f-c2.log; fail "the leader did not notice its damaged coordinator record"; }
wait_for 10 eval 'etcdctl get /tma/sf/coordinator -w json | python3 -c "
import json, sys; kv = json.load(sys.stdin)[\"kvs\"][0]; sys.exit(0 if kv.get(\"lease\") and b\"address\" in __import__(\"base64\").b64decode(kv[\"value\"]) else 1)"' ||
  fail "the coordinator record was not written again with the leader's lease: $(etcdctl get /tma/sf/coordinator -w json)"
finish_pair "$faulted"
rounds_check f-run "len(R) == $ROUNDS + 1 and all(len(r['workers']) == 3 for r in R[-5:])" \
  "shard 1's owner did not train again after the record was repaired" || { dump_logs f-c2.log f-w1.log; fail "rounds"; }
grep -q "shards/00000001 in etcd does not name member" f-c2.log ||
  { dump_logs f-c2.log; fail "the leader did not notice its damaged record"; }
same_model u-run f-run 0.03 || fail "the final model of the faulted run is far from the undisturbed one's"
echo "a damaged shards/00000001 was written again by the leader; its owner trained on"
