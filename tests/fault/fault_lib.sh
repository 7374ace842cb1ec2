# fault_lib.sh: scaffolding for the failure-injection suite (sourced after
# tests/lib.sh and tests/coordinator/dist_lib.sh).  Jobs are short, time-based
# rounds on cora with a small model, so faults land in the middle of training.

# fault_graph: cora and a random 3-shard partition in the current folder.
fault_graph() {
  make_graph g.tmag
  "$TMA" partition g.tmag --scheme random --shards "${1:-3}" --seed 2 -o part >/dev/null || fail "partition"
}

# write_job FILE NAME 'EXTRA' : a job config; EXTRA is JSON members appended
# to the object (may override keys given earlier: the last one wins in cJSON).
write_job() {
  local file=$1 name=$2 extra=${3:-}
  cat > "$file" <<JSON
{"job": "$name", "graph": "g.tmag", "partition": {"dir": "part"}, "workers": ${WORKERS:-3},
 "aggregation": {"interval_seconds": ${INTERVAL:-1.5}}, "duration": {"train_seconds": ${TRAIN:-20}},
 "model": {"hidden": 32, "decoder_hidden": 32}, "train": {"batch_size": 128, "threads": 1},
 "eval": {"threads": 1}${extra:+, $extra}}
JSON
}

# rounds_json RUN EXPR: evaluates a Python expression over the list of round
# records `R` of RUN/metrics.jsonl; exits non-zero when it is false.
rounds_check() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
R = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if l.strip()]
ok = eval(sys.argv[2])
if not ok:
    sys.stderr.write("round check failed: %s (%s)\n" % (sys.argv[3], sys.argv[2]))
    for r in R:
        sys.stderr.write("  round %d t=%.1f workers=%s missed=%s lost=%s moves=%s\n" % (
            r["round"], r["time"], [w["id"] for w in r["workers"]], r["missed"], r["lost"],
            [(m["shard"], m["from"], m["to"]) for m in r["moves"]]))
    sys.exit(1)
PY
}

# finish_job LOGS...: waits for the coordinator (120 s) and every worker (30 s).
finish_job() {
  wait_exit "$COORD_PID" 120 || { dump_logs "$@"; fail "the coordinator did not finish"; }
  local p
  for p in "${WORKER_PIDS[@]}"; do
    if kill -0 "$p" 2>/dev/null; then
      wait_exit "$p" 30 >/dev/null
      [ $? -ne 124 ] || { dump_logs "$@"; fail "worker $p did not stop after the job ended"; }
    fi
  done
}

# wait_round RUN N: waits until metrics.jsonl has round N (60 s).
wait_round() {
  wait_for 60 python3 -c "
import json, sys
R = [json.loads(l) for l in open('$1/metrics.jsonl') if l.strip()]
sys.exit(0 if R and R[-1]['round'] >= $2 else 1)"
}
