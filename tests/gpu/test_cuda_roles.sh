#!/bin/bash
# test_cuda_roles.sh: the distributed roles on a device (real etcd, processes).
# Without a usable GPU (or without CUDA in the build): a coordinator whose
# evaluator is on cuda, and a worker told --device cuda, each fail with a clear
# error and exit 1 instead of hanging; with a GPU, a small cora job runs with the
# evaluator and the workers on the GPU and finishes with a valid run.
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
cd "$TMP_ROOT"
etcd_start 1
make_graph g.tmag
"$TMA" partition g.tmag --scheme random --shards 2 --seed 1 -o part >/dev/null || fail "partition"
job() { # NAME EVAL_DEVICE WORKER_DEVICES [WORKERS]
  cat > "$1.json" <<JSON
{"job": "$1", "variant": "randomtma", "workers": ${4:-2}, "graph": "g.tmag", "partition": {"dir": "part"},
 "aggregation": {"interval_steps": 10}, "duration": {"rounds": 4},
 "model": {"hidden": 32, "decoder_hidden": 32}, "train": {"batch_size": 128, "threads": 1},
 "devices": {"evaluator": "$2", "workers": $3}, "fault": {"start_timeout": 60}}
JSON
}

if "$TMA" --version | grep -q "CUDA support: compiled in"; then
  if ls /dev/nvidia[0-9]* > /dev/null 2>&1; then
    job gpujob cuda '["cuda:0", "cuda"]'
    start_coordinator coord.log --config gpujob.json --run-dir run
    for i in 0 1; do start_worker w$i.log --job gpujob --name w$i; done
    wait_exit "$COORD_PID" 120; rc=$?
    [ "$rc" -eq 0 ] || { dump_logs coord.log w0.log w1.log; fail "the GPU job's coordinator exited $rc"; }
    for p in "${WORKER_PIDS[@]}"; do wait_exit "$p" 30 || { dump_logs w0.log w1.log; fail "a GPU worker failed"; }; done
    grep -q "trains on cuda" w0.log || { dump_logs w0.log; fail "worker 0 did not report its device"; }
    check_run run > /dev/null || fail "the GPU job's run folder is not valid"
    echo "checked: a job with the evaluator and workers on the GPU"
    exit 0
  fi
  why='no usable GPU'
else
  why='no CUDA backend'
fi

# The evaluator on cuda: the coordinator fails at start-up.
job evaljob cuda '"cpu"'
start_coordinator coord-eval.log --config evaljob.json --run-dir run-eval
wait_exit "$COORD_PID" 30; rc=$?
[ "$rc" -eq 1 ] || { dump_logs coord-eval.log; fail "coordinator with its evaluator on cuda exited $rc"; }
grep -q "$why" coord-eval.log || { dump_logs coord-eval.log; fail "coordinator's error does not say '$why'"; }

# A worker on cuda (the job itself on cpu): it fails when it creates its trainer.
job cpujob cpu '"cpu"' 1
start_coordinator coord.log --config cpujob.json --run-dir run
start_worker w0.log --job cpujob --name w0 --device cuda
wait_exit "${WORKER_PIDS[0]}" 60; rc=$?
[ "$rc" -eq 1 ] || { dump_logs coord.log w0.log; fail "worker with --device cuda exited $rc"; }
grep -q "$why" w0.log || { dump_logs w0.log; fail "worker's error does not say '$why'"; }
kill -TERM "$COORD_PID" 2>/dev/null
wait_exit "$COORD_PID" 30 > /dev/null
echo "checked: roles on a missing device fail with '$why'"
