#!/bin/bash
# test_fault_poison.sh (issue 13, item 10): received tensors are checked for
# NaN and infinity.  Worker w0 sends weights with a NaN in round 3
# (poison=weights@3): the coordinator refuses them and flags the sender in
# the round's record ("poisoned").  The coordinator broadcasts a global model
# with a NaN in round 5 (poison=global@5): every worker refuses it and trains
# on.  The job ends with finite, valid results.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

TRAIN=10 INTERVAL=1 write_job j.json pz '"fault": {"lease_ttl": 3, "round_deadline": 5, "start_timeout": 20}'
TMA_FAULT=poison=global@5 start_coordinator coord.log --config j.json --run-dir run
TMA_FAULT=poison=weights@3 start_worker w0.log --job pz --name w0
for i in 1 2; do start_worker w$i.log --job pz --name w$i; done
finish_job coord.log w0.log w1.log w2.log
check_run run >/dev/null || { dump_logs coord.log; fail "run folder invalid"; }
id=$(sed -n 's/.*joined job pz as member \([0-9]*\).*/\1/p' w0.log | head -n1)
grep -q "round 3: refused a tensor from member $id: NaN" coord.log || { dump_logs coord.log; fail "the NaN weights were not refused"; }
rounds_check run "R[3]['poisoned'] == [$id] and $id in R[3]['missed'] and len(R[3]['workers']) == 2" \
  "round 3 did not flag member $id and go on without it" || fail "poisoned round"
rounds_check run "all(r.get('poisoned', []) == [] for r in R if r['round'] != 3)" "a round flagged a healthy worker" || fail "flags"
for i in 0 1 2; do
  grep -q "global weights of round 5 .* hold NaN or infinite values: refused" w$i.log ||
    { dump_logs w$i.log; fail "worker $i took the poisoned global model of round 5"; }
done
rounds_check run "all(len(r['workers']) == 3 for r in R[6:]) and all(r['val_mrr'] is None or r['val_mrr'] == r['val_mrr'] for r in R)" \
  "the job did not train on with three healthy workers" || fail "after the poison"
echo "member $id's NaN weights were refused and flagged; the NaN global model was refused by every worker"
