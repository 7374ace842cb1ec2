#!/bin/bash
# test_threads_devices.sh: the defaults a launcher relies on.  Threads: the
# CPUs the process may use (its affinity mask, here narrowed by taskset),
# OMP_NUM_THREADS when set, an explicit --threads over both, a bad
# OMP_NUM_THREADS refused by name.  Devices: devices.workers is indexed by
# the launcher's local rank (SLURM_LOCALID) when there is one, --device
# overrides the config, and the member record (tma status) names the device
# the worker really trains on.
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
need taskset util-linux
cd "$TMP_ROOT" || hard "cd"
unset OMP_NUM_THREADS SLURM_LOCALID OMPI_COMM_WORLD_LOCAL_RANK
"$TMA" gen sbm -o g.tmag --nodes 1000 >/dev/null || fail "tma gen"
cpu0=$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')

# ---- tma train: "... N thread(s), device cpu" on its first line.
# train_threads CMD...: the thread count CMD (a tma train) reports.
train_threads() {
  rm -rf run-train
  "$@" 2>&1 | sed -n 's/.* \([0-9]*\) thread(s).*/\1/p' | head -n 1
}
TRAIN=("$TMA" train g.tmag --steps 5 -o run-train)
n=$(train_threads taskset -c "$cpu0" "${TRAIN[@]}")
[ "$n" = 1 ] || fail "tma train under taskset -c $cpu0 used '$n' threads, expected 1 (the CPUs it may use)"
n=$(OMP_NUM_THREADS=3 train_threads taskset -c "$cpu0" "${TRAIN[@]}")
[ "$n" = 3 ] || fail "tma train with OMP_NUM_THREADS=3 used '$n' threads"
n=$(OMP_NUM_THREADS=4,2 train_threads "${TRAIN[@]}")
[ "$n" = 4 ] || fail "tma train with OMP_NUM_THREADS=4,2 used '$n' threads (the first level is 4)"
n=$(OMP_NUM_THREADS=3 train_threads "${TRAIN[@]}" --threads 2)
[ "$n" = 2 ] || fail "tma train --threads 2 with OMP_NUM_THREADS=3 used '$n' threads"
# A bad OMP_NUM_THREADS is a bad configuration: exit 2, as every bad config (tma --help).
OMP_NUM_THREADS=lots expect_fail 2 'OMP_NUM_THREADS="lots"' -- "$TMA" train g.tmag --steps 5 -o bad

# ---- workers: threads and devices in a real job.
etcd_start 1
"$TMA" partition g.tmag --scheme random --shards 2 --seed 1 -o part >/dev/null || fail "partition"
job() {
  cat > "$1.json" <<JSON
{"job": "$1", "workers": 2, "graph": "g.tmag", "partition": {"dir": "part"},
 "aggregation": {"interval_seconds": 1}, "duration": {"train_seconds": 8},
 "model": {"hidden": 16, "decoder_hidden": 16}, "train": {"batch_size": 64}, "eval": {"max_edges": 100},
 "devices": {"workers": $2}}
JSON
}
# status_has JOB EXPR: tma status --json of JOB satisfies EXPR (over d).
status_has() {
  "$TMA" status --etcd "$ETCD_ENDPOINTS" --job "$1" --json > "st-$1.json" 2>/dev/null &&
    json "st-$1.json" "$2" | grep -qx True
}
# run_worker LOG [VAR=VALUE...] [taskset ...] -- ARGS...: tma worker in the background.
run_worker() {
  local log=$1; shift
  local pre=()
  while [ "$1" != -- ]; do pre+=("$1"); shift; done
  shift
  env "${pre[@]}" "$TMA" worker --etcd "$ETCD_ENDPOINTS" "$@" >>"$log" 2>&1 &
  WORKER_PIDS+=($!)
  track $!
}
finish() {
  wait_exit "$COORD_PID" 120; local rc=$?
  [ "$rc" -eq 0 ] || { dump_logs "$@"; fail "coordinator exited with $rc"; }
  local p
  for p in "${WORKER_PIDS[@]}"; do
    wait_exit "$p" 30; rc=$?
    [ "$rc" -eq 0 ] || { dump_logs "$@"; fail "a worker exited with $rc"; }
  done
  WORKER_PIDS=()
}

# Entry 0 is a GPU this build or host lacks: a worker that took it would
# fail.  The first worker (member 0) has local rank 1 and so trains on
# entry 1; the second (member 1, no local rank) takes entry 1 by its id, and
# its record, first written with entry 0, is corrected.
job ranks '["cuda:7", "cpu"]'
start_coordinator c-ranks.log --config ranks.json --run-dir run-ranks
run_worker w0.log SLURM_LOCALID=1 taskset -c "$cpu0" -- --job ranks --name ranked
wait_for 60 status_has ranks 'len(d["members"]) == 1' || { dump_logs c-ranks.log w0.log; fail "the first worker did not join"; }
run_worker w1.log OMP_NUM_THREADS=2 -- --job ranks --name byid
both_cpu() { status_has ranks '[(m["name"], m["device"]) for m in sorted(d["members"], key=lambda m: m["id"])] == [("ranked", "cpu"), ("byid", "cpu")]'; }
wait_for 60 both_cpu || { cat st-ranks.json >&2; dump_logs c-ranks.log w0.log w1.log; fail "tma status does not show both workers on cpu"; }
finish c-ranks.log w0.log w1.log
grep -q "member 0 trains on cpu with 1 thread(s)" w0.log || { cat w0.log >&2; fail "worker under taskset: not 1 thread on cpu"; }
grep -q "member 1 trains on cpu with 2 thread(s)" w1.log || { cat w1.log >&2; fail "worker with OMP_NUM_THREADS=2: not 2 threads on cpu"; }

# --device overrides devices.workers, and the record says so.
job override '["cuda:7"]'
start_coordinator c-override.log --config override.json --run-dir run-override
run_worker w2.log -- --job override --device cpu --threads 1
run_worker w3.log -- --job override --device cpu --threads 1
all_cpu() { status_has override 'len(d["members"]) == 2 and all(m["device"] == "cpu" for m in d["members"])'; }
wait_for 60 all_cpu || { cat st-override.json >&2; dump_logs c-override.log w2.log; fail "--device cpu is not in the member records"; }
finish c-override.log w2.log w3.log
grep -q "trains on cpu with 1 thread(s)" w2.log || { cat w2.log >&2; fail "--device cpu --threads 1 not honoured"; }
echo "threads: affinity, OMP_NUM_THREADS and --threads honoured; devices by local rank, --device, records true"
