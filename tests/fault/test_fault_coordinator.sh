#!/bin/bash
# test_fault_coordinator.sh (scenario 6): the coordinator is SIGKILLed.
# (a) A standby (tma coordinator --standby) takes over when the leader's lease
#     lapses and resumes from the last completed round.
# (b) A coordinator killed inside a round (crash=aggregate) is restarted with
#     the command that started it (--config FILE, no token in it: the job's
#     token is the one in etcd, or every worker would be refused) and resumes.
# Both: workers keep training meanwhile and reconnect; the job finishes with
# a valid result; metrics.jsonl keeps every round exactly once.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

# (a) standby
TRAIN=20 write_job a.json ca '"fault": {"lease_ttl": 3, "round_deadline": 5, "start_timeout": 20}'
start_coordinator a-coord.log --config a.json --run-dir a-run
leader=$COORD_PID
for i in 0 1 2; do start_worker a-w$i.log --job ca --name w$i; done
wait_for 20 grep -q "leading job ca" a-coord.log || fail "(a) no leader"
start_coordinator a-standby.log --job ca --standby
standby=$COORD_PID
wait_for 20 grep -q "standing by" a-standby.log || { dump_logs a-standby.log; fail "(a) the standby did not stand by"; }
wait_round a-run 4 || fail "(a) no round 4"
kill -KILL "$leader"
wait_exit "$leader" 5 >/dev/null
wait_for 20 grep -q "took over job ca at round" a-standby.log || { dump_logs a-standby.log; fail "(a) the standby did not take over"; }
took=$(sed -n 's/.*took over job ca at round \([0-9]*\).*/\1/p' a-standby.log)
COORD_PID=$standby
finish_job a-standby.log a-w0.log a-w1.log a-w2.log
check_run a-run >/dev/null || { dump_logs a-standby.log; fail "(a) run folder invalid"; }
rounds_check a-run "max(r['epoch'] for r in R) > min(r['epoch'] for r in R) and len(R) > $took + 3 and len(R[-1]['workers']) == 3" \
  "(a) the standby did not carry on with all workers" || fail "(a)"
grep -q "connected to the coordinator" a-w0.log && [ "$(grep -c 'connected to the coordinator' a-w0.log)" -ge 2 ] ||
  { dump_logs a-w0.log; fail "(a) worker 0 did not reconnect to the new coordinator"; }

# (b) restart after a crash inside round 3
WORKER_PIDS=()
TRAIN=20 write_job b.json cb '"fault": {"lease_ttl": 3, "round_deadline": 5, "start_timeout": 20}'
TMA_FAULT=crash=aggregate@3 start_coordinator b-coord.log --config b.json --run-dir b-run
first=$COORD_PID
for i in 0 1 2; do start_worker b-w$i.log --job cb --name w$i; done
wait_exit "$first" 60 >/dev/null
grep -q "injected crash at aggregate in round 3" b-coord.log || { dump_logs b-coord.log; fail "(b) no injected crash"; }
start_coordinator b-coord2.log --config b.json --run-dir b-run
finish_job b-coord2.log b-w0.log b-w1.log b-w2.log
grep -q "took over job cb at round 2" b-coord2.log || { dump_logs b-coord2.log; fail "(b) did not resume from round 2"; }
check_run b-run >/dev/null || { dump_logs b-coord2.log; fail "(b) run folder invalid"; }
rounds_check b-run "len(R) > 6 and R[3]['epoch'] != R[2]['epoch']" "(b) round 3 was not redone by the new coordinator" || fail "(b)"
rounds_check b-run "len(R[-1]['workers']) == 3" "(b) the workers did not train under the restarted coordinator" || fail "(b)"
if grep -q "a wrong job token" b-coord2.log; then dump_logs b-coord2.log; fail "(b) the restarted coordinator refused the workers"; fi
echo "(a) the standby took over at round $took; (b) a restarted coordinator redid round 3 and finished"
