#!/bin/bash
# test_fault_ggs_standby.sh (issue 30, the suite's GGS rows): GGS in step
# mode with a standby coordinator; the leader is SIGKILLed a few sync steps
# after round 3 committed and the standby takes over (its lease lapses);
# later a worker is SIGKILLed (on_failure continue: GGS goes on with the
# other two).  The job ends with all its rounds; every round between the
# takeover and the kill has sync steps of all three workers, every round
# after the kill's detection two; the final test MRR is within 0.03 of an
# undisturbed run's (the steps after the kill average two workers' batches).
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

FAULT='"fault": {"lease_ttl": 3, "round_deadline": 5, "start_timeout": 20}'
export VARIANT=ggs ROUNDS=12 STEPS=20
step_pair g "$FAULT" f-c1.log
first=$FIRST
ON_PUT_DELAY=0.05 on_put killed gf/state '"round":3,' KILL "$first"
WORKER_FAULT=delay_step=0.01 faulted_workers g
wait_for 20 grep -q "leading job gf" f-c1.log || fail "no leader"
start_coordinator f-c2.log --job gf --standby
standby=$COORD_PID
wait_for 20 grep -q "standing by" f-c2.log || { dump_logs f-c2.log; fail "the standby did not stand by"; }
wait_for 60 test -e killed || { dump_logs f-c1.log; fail "the leader was not killed after round 3"; }
wait_for 30 grep -q "took over job gf" f-c2.log || { dump_logs f-c2.log; fail "the standby did not take over"; }
took=$(sed -n 's/.*took over job gf at round \([0-9]*\).*/\1/p' f-c2.log)
wait_round f-run $((took + 3)) || { dump_logs f-c2.log; fail "no round after the takeover"; }
kill -KILL "${WORKER_PIDS[4]}"
finish_pair "$standby"
rounds_check f-run "len(R) == $ROUNDS + 1 and all(len(r['workers']) == 3 for r in R[$took + 1:$took + 3])" \
  "a round after the takeover lacked a worker" || { dump_logs f-c2.log; fail "rounds"; }
rounds_check f-run "len(R[-1]['workers']) == 2 and R[-1]['sync_steps'] == $STEPS" \
  "the last round is not two workers' full round" || { dump_logs f-c2.log; fail "after the kill"; }
same_model u-run f-run 0.03 || fail "the final model of the faulted run is far from the undisturbed one's"
echo "GGS: the standby took over at round $took; after a worker kill the other two trained to the end"
