#!/bin/bash
# test_fault_eval_rank.sh: an evaluator rank dies mid-evaluation (eval.where
# "workers").  Step mode, reassign, a backup; worker f1 crashes when its
# third evaluation's first layer starts (crash=rank@3).  The job must not
# hang: that evaluation is recorded as skipped with the reason (never a
# score from a partial table), the backup takes f1's shard, later rounds are
# evaluated on the ranks again, the job finishes with a valid result (the
# best model tested on the ranks), and the model is the undisturbed run's
# within the bound of the other worker-kill tests (the backup trains f1's
# shard from the current weights).
source "$TMA_SRCDIR/tests/lib.sh"
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

export ROUNDS=12
FAULT='"fault": {"lease_ttl": 3, "round_deadline": 5, "start_timeout": 20, "on_failure": "reassign"}'
export EVAL='"where": "workers", "rank_timeout": 10'
step_pair e "$FAULT" f-c1.log
faulted_with_backup e crash=rank@3
finish_pair "$FIRST"
grep -q "injected crash at rank in round 3" f-w1.log || { dump_logs f-w1.log; fail "worker f1 did not crash at its third evaluation"; }
grep -q "evaluator rank listening" f-backup.log || fail "the backup has no evaluator rank"
# The rounds the ranks were asked to evaluate (the others were overtaken by
# newer models): the third is the one f1 died in, skipped with the reason.
rounds_check f-run "len(R) == $ROUNDS + 1 and [r for r in R if r['eval'] == 'ok' or 'eval_reason' in r][2].get('eval_reason', '').find('rank') >= 0" \
  "the evaluation a rank died in was not recorded as skipped with the reason" || { dump_logs f-c1.log; fail "skipped"; }
rounds_check f-run "all(r['val_mrr'] is None for r in R if r['eval'] != 'ok') and R[-1]['eval'] == 'ok'" \
  "a failed evaluation has a score, or the last round was not evaluated" || fail "scores"
rounds_check f-run "any(m['reason'] == 'owner lost' for r in R for m in r['moves'])" "f1's shard did not move" || fail "move"
python3 - f-run <<'PY' || fail "the result"
import json, sys
res = json.load(open(sys.argv[1] + "/result.json"))
assert res["test_mrr"] is not None and 0 < res["test_mrr"] <= 1, res
PY
python3 -c "
import json
for l in open('f-run/metrics.jsonl'):
    r = json.loads(l)
    print('round %d: eval %s %s' % (r['round'], r['eval'], r.get('eval_reason', '')))"
same_model u-run f-run 0.03 || fail "the final model of the faulted run is far from the undisturbed one's"
echo "a rank died mid-evaluation: skipped with its reason, the job evaluated on and finished"
