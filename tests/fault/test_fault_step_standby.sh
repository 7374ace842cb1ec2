#!/bin/bash
# test_fault_step_standby.sh (issue 30, item 9): step mode with a standby.
# The leader dies inside round 4 after averaging, before sending W[4] back
# (crash=broadcast@4); the standby takes over when its lease lapses, waits
# for the workers, which hold round 4's weights, and redoes round 4 with all
# three.  Then a worker is SIGKILLed at its first step of round 7 (reassign:
# the backup takes its shard and starts from the current global weights).  Checked against an
# undisturbed run of the same seed side by side: the same rounds, and up to
# the kill the same model: the test MRR of round 6's global model (dumped by
# the standby after the takeover) equals the undisturbed run's within 0.005
# (summation order only); the final model is trained on by the backup for
# the killed worker's shard (another worker's random batches), so its test
# MRR is only bounded, within 0.03 of the undisturbed run's.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

export ROUNDS=20
FAULT='"fault": {"lease_ttl": 3, "round_deadline": 5, "start_timeout": 20, "on_failure": "reassign"}'
UNDISTURBED_ARGS="--dump-dir udump" TMA_FAULT=crash=broadcast@4 step_pair s "$FAULT" f-c1.log --dump-dir fdump
first=$FIRST
# The faulted run's workers sleep 20 ms after each step (the model does not
# change), so the rounds after the kill last long enough for the loss to be
# confirmed and the backup to train.
faulted_with_backup s crash=step@7
wait_for 20 grep -q "leading job sf" f-c1.log || fail "no leader"
start_coordinator f-c2.log --job sf --standby --dump-dir fdump
standby=$COORD_PID
wait_for 20 grep -q "standing by" f-c2.log || { dump_logs f-c2.log; fail "the standby did not stand by"; }
wait_exit "$first" 90 >/dev/null
grep -q "injected crash at broadcast in round 4" f-c1.log || { dump_logs f-c1.log; fail "no injected crash"; }
wait_for 30 grep -q "took over job sf at round 3" f-c2.log || { dump_logs f-c2.log; fail "the standby did not take over at round 3"; }
finish_pair "$standby"
grep -q "injected crash at step in round 7" f-w1.log || { dump_logs f-w1.log; fail "worker f1 did not crash in round 7"; }
rounds_check f-run "len(R) == $ROUNDS + 1 and all(len(r['workers']) == 3 and r['missed'] == [] for r in R[1:7])" \
  "a round up to 6 lacked a worker" || { dump_logs f-c2.log; fail "rounds"; }
rounds_check f-run "(R[4]['epoch'] != R[3]['epoch'] and len(R[-1]['workers']) == 3 and
  any(m['reason'] == 'owner lost' for r in R[7:] for m in r['moves']))" \
  "round 4 was not redone by the standby, or the backup did not train" || { dump_logs f-c2.log f-backup.log; fail "takeover"; }
# Round 6 (after the takeover, before the kill): the undisturbed model.
mkdir -p u6 f6
cp udump/r000006-global-0.tmaw u6/checkpoint-r000006-e1.tmaw && cp fdump/r000006-global-0.tmaw f6/checkpoint-r000006-e1.tmaw ||
  fail "no dumped global model of round 6"
same_model u6 f6 0.005 || fail "round 6 of the faulted run is not the undisturbed one's"
same_model u-run f-run 0.03 || fail "the final model of the faulted run is far from the undisturbed one's"
echo "step mode: the standby redid round 4 with all three workers; after a worker kill the backup trained on"
