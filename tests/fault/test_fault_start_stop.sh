#!/bin/bash
# test_fault_start_stop.sh (issue 13, item 8): a start that fails or is
# interrupted leaves the job in a state the workers act on: the coordinator
# sets `stop`, and every worker that joined leaves.
# (a) The coordinator is interrupted (SIGTERM) while it waits for workers to
#     register: it exits, and the one worker that joined leaves.
# (b) The job can be started again under the same name: the new start
#     clears the stop, and it runs to the end.
# A start that fails (no worker can reach the coordinator) is
# test_fault_unreachable.sh.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1

# (a) interrupted while waiting for the workers to register
write_job a.json sa '"fault": {"start_timeout": 60}'
start_coordinator a-coord.log --config a.json --run-dir a-run
wait_for 30 grep -q "waiting for 3 worker(s) to register" a-coord.log || { dump_logs a-coord.log; fail "(a) no leader"; }
start_worker a-w0.log --job sa --name w0
wait_for 30 grep -q "joined job sa as member" a-w0.log || { dump_logs a-w0.log; fail "(a) the worker did not join"; }
kill -TERM "$COORD_PID"
wait_exit "$COORD_PID" 20 >/dev/null
[ $? -ne 124 ] || fail "(a) the interrupted coordinator did not exit"
wait_exit "${WORKER_PIDS[0]}" 30 >/dev/null
[ $? -ne 124 ] || { dump_logs a-coord.log a-w0.log; fail "(a) the worker still runs after the start was interrupted"; }
grep -q "start was interrupted" a-coord.log || { dump_logs a-coord.log; fail "(a) no word of the interrupted start"; }

# (b) the same job name starts again and runs to the end
WORKER_PIDS=()
WORKERS=1 TRAIN=4 INTERVAL=1 write_job b.json sa '"fault": {"start_timeout": 20}'
start_coordinator b-coord.log --config b.json --run-dir b-run
wait_for 30 grep -q "waiting for 1 worker(s) to register" b-coord.log || { dump_logs b-coord.log; fail "(b) no leader"; }
start_worker b-w0.log --job sa --name w0
finish_job b-coord.log b-w0.log
check_run b-run >/dev/null || { dump_logs b-coord.log; fail "(b) run folder invalid"; }
echo "an interrupted start set stop and the worker left; the job then ran again"
