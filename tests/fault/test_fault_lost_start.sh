#!/bin/bash
# test_fault_lost_start.sh: the start of an evaluation is lost on its way to
# a rank (eval.where "workers"), as when a connection fails and is replaced
# with the message in it: worker f1's rank ignores the first start of
# evaluation 3 it receives (TMA_FAULT drop=begin@3).  The coordinator sends
# an unanswered start again after 5 s: no evaluation fails, and the job
# reaches the undisturbed run's rounds and model.  Before, the coordinator
# waited eval.rank_timeout (here 120 s) for an answer that never came, then
# recorded that evaluation as skipped.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1
lost_message_pair l begin@3
grep -q "injected: the start of evaluation 3 ignored" f-w1.log ||
  { dump_logs f-w1.log; fail "worker f1's rank was not sent evaluation 3, or did not drop its start"; }
grep -q "evaluation 3: starting sent again to member" f-c1.log ||
  { dump_logs f-c1.log; fail "the coordinator did not send the lost start again"; }
lost_message_ok
echo "a lost start of an evaluation was sent again: no evaluation failed, the job finished"
