#!/bin/bash
# test_fault_lost_start.sh: the start of an evaluation is lost on its way to
# a rank (eval.where "workers"), as when a connection fails and is replaced
# with the message in it: worker f1's rank ignores the first start of
# evaluation 3 it receives (TMA_FAULT drop=begin@3).  The coordinator sends
# an unanswered start again after 5 s: no evaluation fails, and the job
# reaches the undisturbed run's rounds and model.  Before, the coordinator
# waited eval.rank_timeout (here 120 s) for an answer that never came, then
# recorded that evaluation as skipped.
source "$TMA_SRCDIR/tests/lib.sh"
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

export ROUNDS=8
FAULT='"fault": {"lease_ttl": 3, "round_deadline": 30, "start_timeout": 20}'
export EVAL='"where": "workers", "rank_timeout": 120'
TMA_LOG_LEVEL=debug step_pair l "$FAULT" f-c1.log
TMA_FAULT=delay_step=0.02 start_worker f-w0.log --job lf --name f0
TMA_FAULT=delay_step=0.02,drop=begin@3 start_worker f-w1.log --job lf --name f1
TMA_FAULT=delay_step=0.02 start_worker f-w2.log --job lf --name f2
finish_pair "$FIRST"
grep -q "injected: the start of evaluation 3 ignored" f-w1.log ||
  { dump_logs f-w1.log; fail "worker f1's rank was not sent evaluation 3, or did not drop its start"; }
grep -q "evaluation 3: starting sent again to member" f-c1.log ||
  { dump_logs f-c1.log; fail "the coordinator did not send the lost start again"; }
rounds_check f-run "len(R) == $ROUNDS + 1 and not [r for r in R if 'eval_reason' in r] and R[-1]['eval'] == 'ok'" \
  "an evaluation failed, or not every round was recorded" || { dump_logs f-c1.log; fail "evaluations"; }
same_model u-run f-run 0.03 || fail "the final model of the faulted run is far from the undisturbed one's"
echo "a lost start of an evaluation was sent again: no evaluation failed, the job finished"
