#!/bin/bash
# test_fault_disk.sh (issue 13, item 6): the run folder's disk fills up.
# The run folder is on a small tmpfs; after round 3 a file fills it.  The
# coordinator must pause (a clear warning naming the path it cannot write)
# and retry, not end the job; once space is freed the job goes on and
# finishes normally: no torn line in metrics.jsonl, every round once,
# result.json "stopped": "time" and best.tmaw matching it.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
cd "$TMP_ROOT"
small_disk 2m || skip "cannot mount a tmpfs (needs root): no small disk to fill"
etcd_start 1
fault_graph
TRAIN=12 INTERVAL=1 write_job j.json dk '"fault": {"lease_ttl": 3, "round_deadline": 4, "start_timeout": 20}'
start_coordinator coord.log --config j.json --run-dir disk/run
for i in 0 1 2; do start_worker w$i.log --job dk --name w$i; done
logs=(coord.log w0.log w1.log w2.log)
wait_round disk/run 3 || { dump_logs "${logs[@]}"; fail "no round 3"; }
dd if=/dev/zero of=disk/fill bs=4k 2>/dev/null   # until the disk is full
wait_for 30 grep -q "disk/run/.*: cannot write .*retries" coord.log ||
  { dump_logs coord.log; fail "no warning naming the run folder's file once the disk was full"; }
kill -0 "$COORD_PID" || { dump_logs coord.log; fail "the coordinator ended on a full disk"; }
full_at=$(python3 -c "import json; print(sum(1 for _ in open('disk/run/metrics.jsonl')))")
rm -f disk/fill
wait_for 30 grep -q "written after" coord.log || { dump_logs coord.log; fail "no retry succeeded after space was freed"; }
finish_job "${logs[@]}"
check_run disk/run >/dev/null || { dump_logs "${logs[@]}"; fail "run folder invalid"; }
[ "$(json disk/run/result.json 'd["stopped"]')" = time ] ||
  { dump_logs coord.log; fail "result.json: stopped is $(json disk/run/result.json 'd["stopped"]'), not time"; }
end_at=$(python3 -c "import json; print(sum(1 for _ in open('disk/run/metrics.jsonl')))")
[ "$end_at" -gt $((full_at + 2)) ] || fail "the job did not go on after space was freed ($full_at -> $end_at rounds)"
echo "the disk filled at $full_at rounds; the job paused, went on and ended with $end_at rounds"
