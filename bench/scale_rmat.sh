#!/bin/bash
# scale_rmat.sh: a large R-MAT graph end to end on this machine, with the wall
# time and peak memory of each phase: generate (tma gen rmat), partition
# (random, 3 shards), and a 3-worker RandomTMA job in step mode that
# validates every round and tests the best round (tma launch, private etcd).
# The peak memory of the job's processes is each one's VmHWM, sampled from
# /proc every second until it exits (the last sample is within a second of
# its end), per role: the coordinator (it maps the whole graph and runs
# full-graph inference to evaluate) and the largest worker.
#
# Usage: bench/scale_rmat.sh [WORKDIR]        (from the build folder)
# Environment: SCALE (23: 2^23 nodes), EDGES (100000000), FEAT_DIM (16),
#   HIDDEN (64: encoder and decoder width), STEPS (50 local steps a round),
#   ROUNDS (4), THREADS (1 per process), KEEP=1 keeps the graph and shards,
#   REUSE=1 trains on the graph and shards a KEEP=1 run left in WORKDIR,
#   EVAL_COPY_MB (eval.feature_copy_mb; default: the config's, 1024).
set -euo pipefail
BUILD=$(pwd)
T=${TMA_BIN:-$BUILD/tma}
W=${1:-${TMPDIR:-/tmp}/tma-bench-scale}
SCALE=${SCALE:-23}; EDGES=${EDGES:-100000000}; FEAT_DIM=${FEAT_DIM:-16}; HIDDEN=${HIDDEN:-64}
STEPS=${STEPS:-50}; ROUNDS=${ROUNDS:-4}; THREADS=${THREADS:-1}
[ -x "$T" ] || { echo "scale_rmat.sh: no tma at $T (run it from the build folder)" >&2; exit 2; }
T=$(readlink -f "$T")   # the path the job's processes run under, for the memory sampler
mkdir -p "$W"
G=$W/rmat.tmag P=$W/rmat-random-3 RUN=$W/run
echo "# machine: $(nproc) CPUs, $(free -g | awk '/Mem:/ {print $2}') GiB; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# phase NAME CMD... (phase_lib.sh): wall, CPU and peak RSS of a step.
. "$(dirname "$0")/phase_lib.sh"

rm -rf "$RUN"
if [ "${REUSE:-0}" = 1 ] && [ -s "$G" ] && [ -s "$P/partition.json" ]; then
  echo "reusing $G and $P"
else
  rm -rf "$P"
  phase generate "$T" gen rmat -o "$G" --scale "$SCALE" --edges "$EDGES" --feat-dim "$FEAT_DIM" --seed 1
  grep -E '^  (nodes|edges|train|seconds)' "$W/generate.out" | sed 's/^/  /'
  phase partition "$T" partition "$G" --scheme random --shards 3 --seed 1 -o "$P"
  tail -n 3 "$W/partition.out" | sed 's/^/  /'
fi
ls -l "$G" | awk '{printf "  graph file %.2f GB\n", $5 / 1e9}'
du -sb "$P" | awk '{printf "  shards %.2f GB\n", $1 / 1e9}'

EVAL_JSON=
[ -z "${EVAL_COPY_MB:-}" ] || EVAL_JSON=", \"eval\": {\"feature_copy_mb\": $EVAL_COPY_MB}"
cat > "$W/job.json" <<JSON
{"job": "scale-rmat", "variant": "randomtma", "workers": 3, "graph": "$G",
 "partition": {"dir": "$P"},
 "aggregation": {"interval_steps": $STEPS}, "duration": {"rounds": $ROUNDS, "train_seconds": 7200},
 "model": {"encoder": "gcn", "hidden": $HIDDEN, "decoder_hidden": $HIDDEN},
 "train": {"batch_size": 512, "seed": 1}, "fault": {"start_timeout": 600}$EVAL_JSON}
JSON
# The job, with a sampler of every tma process's peak RSS (VmHWM) by role.
: > "$W/hwm.txt"
(
  while :; do
    for p in $(pgrep -f "$T (coordinator|worker)" || true); do
      role=$(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | awk '{print $2}') || continue
      read -r hwm anon < <(awk '/VmHWM/ {h = $2} /RssAnon/ {a = $2} END {print h, a}' "/proc/$p/status" 2>/dev/null) || continue
      [ -n "$hwm" ] && echo "$p $role $hwm $anon" >> "$W/hwm.txt"
    done
    sleep 1
  done
) &
sampler=$!
trap 'kill $sampler 2>/dev/null || true' EXIT
phase train "$T" launch "$W/job.json" -o "$RUN" --threads "$THREADS" -q
kill $sampler 2>/dev/null || true
awk '{last[$1] = $3; role[$1] = $2; if ($4 > anon[$1]) anon[$1] = $4}
  END {for (p in last) {r = role[p]; if (last[p] > peak[r]) peak[r] = last[p]; if (anon[p] > pa[r]) pa[r] = anon[p]; n[r]++}
       for (r in peak) printf "  %-12s %d process(es), the largest peaked at %.2f GiB (VmHWM), %.2f GiB anonymous\n", r, n[r], peak[r] / 1048576, pa[r] / 1048576}' "$W/hwm.txt"
python3 - "$RUN/result.json" "$RUN/metrics.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rounds = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
print(f"  test MRR {r.get('test_mrr')}, best round {r.get('best_round')}, training {r.get('train_seconds', 0):.1f} s, "
      f"{len(rounds)} rounds in metrics.jsonl; validated: "
      + ", ".join(f"r{m['round']} {m['val_mrr']:.4f}" for m in rounds if m.get('val_mrr') is not None))
PY
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "${KEEP:-0}" = 1 ] || rm -rf "$G" "$P"
