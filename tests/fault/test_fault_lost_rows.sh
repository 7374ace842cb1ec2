#!/bin/bash
# test_fault_lost_rows.sh: a rank's request for another rank's rows is lost
# (eval.where "workers"), as when a connection fails and is replaced with
# the message in it: worker f1's rank ignores the first request for rows of
# evaluation 3 it receives (TMA_FAULT drop=rows@3).  The asking rank asks
# again after 5 s, and takes only the answer to its latest request: no
# evaluation fails, and the job reaches the undisturbed run's rounds and
# model.  Before, the asking rank waited eval.rank_timeout (here 120 s) for
# the answer, then the evaluation was recorded as skipped.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1
lost_message_pair r rows@3
grep -q "injected: a request for rows of evaluation 3 from member" f-w1.log ||
  { dump_logs f-w1.log; fail "worker f1's rank was asked for no rows in evaluation 3, or did not drop the request"; }
grep -q "evaluation 3: asking member .* for its rows again" f-w0.log f-w2.log ||
  { dump_logs f-w0.log f-w2.log; fail "no rank asked again for the rows of the lost request"; }
lost_message_ok
echo "a lost request for rows was sent again: no evaluation failed, the job finished"
