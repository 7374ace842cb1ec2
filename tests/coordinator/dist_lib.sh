# dist_lib.sh: helpers for the distributed-job tests (sourced after tests/lib.sh).
# Every process started here is tracked, so the EXIT trap of lib.sh ends it.

export UCX_TLS=${UCX_TLS:-tcp}
export OMP_WAIT_POLICY=PASSIVE
TMA=${TMA_BIN:?}

# make_graph OUT: cora with 32-dimensional projected features (fast, real).
make_graph() {
  "$TMA" import "$TMA_DATASETS/cora" -o "$1" --feat-dim 32 >/dev/null || fail "tma import cora"
}

# start_coordinator LOG ARGS...: runs tma coordinator in the background; sets COORD_PID.
start_coordinator() {
  local log=$1; shift
  "$TMA" coordinator --etcd "$ETCD_ENDPOINTS" "$@" >>"$log" 2>&1 &
  COORD_PID=$!
  track "$COORD_PID"
}

# start_worker LOG ARGS...: runs tma worker in the background; appends to WORKER_PIDS.
WORKER_PIDS=()
start_worker() {
  local log=$1; shift
  "$TMA" worker --etcd "$ETCD_ENDPOINTS" --threads 1 "$@" >>"$log" 2>&1 &
  WORKER_PIDS+=($!)
  track "$!"
}

# wait_exit PID SECONDS: waits for PID to end; returns its exit code (124 on timeout).
wait_exit() {
  local pid=$1 end=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    if (( SECONDS >= end )); then return 124; fi
    sleep 0.1
  done
  wait "$pid"
}

# dump_logs FILES...: shows the end of each log (for a failing test).
dump_logs() {
  local f
  for f in "$@"; do echo "---- $f" >&2; tail -n 30 "$f" >&2; done
}

# check_run RUN: metrics.jsonl has rounds 0..R, each once, in order; result.json
# and best.tmaw are there and valid.  Prints R.
check_run() {
  "${TMA_TORCH_PYTHON:-python3}" - "$1" <<'PY' || return 1
import json, math, os, sys
run = sys.argv[1]
rounds = [json.loads(l)["round"] for l in open(os.path.join(run, "metrics.jsonl")) if l.strip()]
if rounds != list(range(len(rounds))):
    sys.exit("metrics.jsonl rounds are not 0..R once each: %s" % rounds)
res = json.load(open(os.path.join(run, "result.json")))
for k in ("test_mrr", "best_val_mrr", "best_round", "convergence_seconds", "train_seconds", "variant"):
    if k not in res:
        sys.exit("result.json lacks " + k)
if res["test_mrr"] is None or not (0 < res["test_mrr"] <= 1):
    sys.exit("test_mrr is %r" % res["test_mrr"])
if not os.path.getsize(os.path.join(run, "best.tmaw")):
    sys.exit("best.tmaw is empty")
print(rounds[-1])
PY
  "$TMA" eval "$(json "$1/result.json" 'd.get("graph","")' 2>/dev/null || true)" "$1/best.tmaw" >/dev/null 2>&1 || true
}
