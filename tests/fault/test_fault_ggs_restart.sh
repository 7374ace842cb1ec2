#!/bin/bash
# test_fault_ggs_restart.sh (issue 30, item 2): GGS (synchronous SGD) with
# rounds of interval_steps sync steps; the coordinator is SIGKILLed after
# round 3 and restarted with `tma coordinator --job`.  The new coordinator
# resumes from round 3's checkpoint and sends its parameters to each worker
# as it reconnects; the workers take its step numbering with them, so their
# gradients count again at once: every round after the restart has sync
# steps from all three workers, the job reaches the rounds of an undisturbed
# run of the same seed, and the final model's test MRR is that run's within
# 0.01 (the sync steps after round 3 before the kill are redone from round 3's
# parameters with a fresh Adam, on other batches: a few steps of difference
# out of 200; a model that learns nothing after the restart scores far less).
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

FAULT='"fault": {"lease_ttl": 4, "round_deadline": 5, "start_timeout": 20}'
export VARIANT=ggs ROUNDS=10 STEPS=20
step_pair g "$FAULT" f-c1.log
first=$FIRST
# Killed a few sync steps after round 3 committed (under load: maybe later).
ON_PUT_DELAY=0.05 on_put killed gf/state '"round":3,' KILL "$first"
faulted_workers g
wait_for 60 test -e killed || { dump_logs f-c1.log; fail "the coordinator was not killed after round 3"; }
wait_exit "$first" 10 >/dev/null
restart_faulted gf
took=$(sed -n 's/.*took over job gf at round \([0-9]*\).*/\1/p' f-c2.log)
[ -n "$took" ] || { dump_logs f-c2.log; fail "the restarted coordinator did not take over"; }
rounds_check f-run "len(R) == $ROUNDS + 1 and all(r['sync_steps'] == $STEPS and len(r['workers']) == 3 and
  all(w['steps'] == $STEPS for w in r['workers']) for r in R[$took + 1:])" \
  "a round after the restart lacked sync steps of a worker" || { dump_logs f-c2.log f-w0.log; fail "rounds"; }
same_model u-run f-run 0.01 || fail "the model of the faulted run is not the undisturbed one's"
echo "GGS: the restarted coordinator took over at round $took; every later round had all three workers' gradients"
