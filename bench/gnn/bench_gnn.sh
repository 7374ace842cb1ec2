#!/bin/bash
# bench_gnn.sh: tma's GNN engine against the PyTorch implementation (bench/gnn/torch_gnn.py),
# side by side, on facebook-pages and a 2M-edge SBM: training throughput (positive edges
# a second, sampling included), evaluation time (full-neighbourhood inference + MRR on
# the validation edges), peak RSS, and for tma the time by op against the sgemm rate.
# The same model, sampler, fan-outs, batch size and thread count on both sides; each
# side runs REPEATS times, alternating, and the best run of each counts (other jobs on
# a shared machine only ever slow a run down); before each run the script waits (up to
# QUIET_WAIT seconds) for the machine to be idle.  The ratios come last:
#   train_speedup_vs_torch: X    eval_speedup_vs_torch: Y    (the smallest over the runs)
# (wall clock; the same ratios in CPU time, all threads, are printed just before them).
#
# Usage: bench/gnn/bench_gnn.sh [WORKDIR]     (from a build folder, after `make bench`)
# Environment: TMA_DATASETS (default ../shared/datasets), THREADS (2), SECONDS_PER_RUN (30),
#   REPEATS (3), ENCODERS ("gcn sage"), BATCH (1024), TORCH_PYTHON (/usr/bin/python3), GRAPHS
#   ("facebook sbm2m"), QUIET_WAIT (120).
set -euo pipefail
BUILD=$(pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${1:-/tmp/tma-bench-gnn}
DATASETS=${TMA_DATASETS:-$SRC/../shared/datasets}
THREADS=${THREADS:-2}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-20}
REPEATS=${REPEATS:-3}
QUIET_WAIT=${QUIET_WAIT:-120}
ENCODERS=${ENCODERS:-"gcn sage"}
BATCH=${BATCH:-1024}
PY=${TORCH_PYTHON:-/usr/bin/python3}
GRAPHS=${GRAPHS:-"facebook sbm2m"}
TMA=$BUILD/tma
BENCH=$BUILD/bench/gnn/bench_gnn
[ -x "$BENCH" ] || { echo "bench_gnn.sh: build it first: make bench" >&2; exit 2; }
mkdir -p "$WORK"
# Both sides: passive OpenMP waiting (see docs/model.md, Threads); OpenBLAS as configured.
export OMP_WAIT_POLICY=passive

graph_file() {
  case $1 in
    facebook)
      [ -s "$WORK/facebook-pages.tmag" ] || "$TMA" import "$DATASETS/facebook-pages" -o "$WORK/facebook-pages.tmag" >&2
      echo "$WORK/facebook-pages.tmag" ;;
    sbm2m)
      [ -s "$WORK/sbm2m.tmag" ] || "$TMA" gen sbm --nodes 200000 --avg-degree 20 --classes 16 --homophily 0.9 \
        --feat-dim 128 --seed 1 -o "$WORK/sbm2m.tmag" >&2
      echo "$WORK/sbm2m.tmag" ;;
    *) echo "unknown graph $1" >&2; exit 2 ;;
  esac
}

# Waits until no other process has been runnable for 2 s (procs_running counts the
# reader itself), or QUIET_WAIT seconds have passed; prints how long it waited.
busy_waited=0
wait_quiet() {
  local start=$SECONDS quiet=0
  while (( SECONDS - start < QUIET_WAIT )); do
    local r
    r=$(awk '/^procs_running/ {print $2}' /proc/stat)
    if (( r <= 1 )); then quiet=$((quiet + 1)); else quiet=0; fi
    (( quiet >= 10 )) && return 0
    sleep 0.2
  done
  busy_waited=$((busy_waited + 1))
}

echo "# machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'), $(free -g | awk '/Mem:/ {print $2}') GiB;" \
     "OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null || echo '?');" \
     "torch $("$PY" -c 'import torch; print(torch.__version__)')"
echo "# settings: encoders $ENCODERS, batch $BATCH, fanouts 25,10, hidden 256, threads $THREADS," \
     "${SECONDS_PER_RUN}s a run, best of $REPEATS; load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
results=()
for name in $GRAPHS; do
  G=$(graph_file "$name")
  for enc in $ENCODERS; do
    for r in $(seq "$REPEATS"); do
      wait_quiet
      "$BENCH" "$G" --encoder "$enc" --batch "$BATCH" --threads "$THREADS" --seconds "$SECONDS_PER_RUN" \
        > "$WORK/$name-$enc.tma.$r.json"
      wait_quiet
      "$PY" "$SRC/bench/gnn/torch_gnn.py" "$G" --encoder "$enc" --batch "$BATCH" --threads "$THREADS" \
        --seconds "$SECONDS_PER_RUN" 2>/dev/null > "$WORK/$name-$enc.torch.$r.json"
    done
    results+=("$name-$enc")
  done
done

echo "# runs that started on a busy machine (no idle moment within ${QUIET_WAIT}s): $busy_waited of $((2 * REPEATS * ${#results[@]}))"
"$PY" - "$WORK" "$REPEATS" "${results[@]}" <<'PY'
import json, sys
work, reps, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(name, impl):
    runs = [json.load(open(f"{work}/{name}.{impl}.{r}.json")) for r in range(1, reps + 1)]
    best = max(runs, key=lambda d: d["edges_per_second"])
    best["cpu_ms_per_step"] = min(d["cpu_ms_per_step"] for d in runs)
    best["eval_cpu_seconds"] = min(d["eval_cpu_seconds"] for d in runs)
    best["eval_seconds"] = min(d["eval_seconds"] for d in runs)
    best["eval_infer_seconds"] = min(d["eval_infer_seconds"] for d in runs)
    best["eval_score_seconds"] = min(d["eval_score_seconds"] for d in runs)
    best["peak_rss_mb"] = max(d["peak_rss_mb"] for d in runs)
    return best
train, evals, train_cpu, evals_cpu = [], [], [], []
for name in names:
    t, p = load(name, "tma"), load(name, "torch")
    tr, er = t["edges_per_second"] / p["edges_per_second"], p["eval_seconds"] / t["eval_seconds"]
    tc_r, ec_r = p["cpu_ms_per_step"] / t["cpu_ms_per_step"], p["eval_cpu_seconds"] / t["eval_cpu_seconds"]
    train.append(tr); evals.append(er); train_cpu.append(tc_r); evals_cpu.append(ec_r)
    print(f"\n## {name} ({t['graph']}), {t['encoder']}, batch {t['batch_size']}, {t['threads']} threads")
    print(f"{'':24}{'tma':>12}{'torch':>12}{'ratio':>8}")
    print(f"{'train edges/s':24}{t['edges_per_second']:12.0f}{p['edges_per_second']:12.0f}{tr:8.2f}")
    print(f"{'  step ms':24}{t['step_ms']:12.1f}{p['step_ms']:12.1f}")
    print(f"{'  of which sampling ms':24}{t['sample_ms']:12.1f}{p['sample_ms']:12.1f}")
    tc = t['step_ms'] - t['sample_ms']
    print(f"{'  of which compute ms':24}{tc:12.1f}{p['compute_ms']:12.1f}{p['compute_ms'] / tc:8.2f}")
    print(f"{'  CPU ms a step':24}{t['cpu_ms_per_step']:12.1f}{p['cpu_ms_per_step']:12.1f}{tc_r:8.2f}")
    print(f"{'eval s (infer + MRR)':24}{t['eval_seconds']:12.2f}{p['eval_seconds']:12.2f}{er:8.2f}")
    print(f"{'  eval CPU s':24}{t['eval_cpu_seconds']:12.2f}{p['eval_cpu_seconds']:12.2f}{ec_r:8.2f}")
    print(f"{'  inference s':24}{t['eval_infer_seconds']:12.2f}{p['eval_infer_seconds']:12.2f}")
    print(f"{'  scoring s':24}{t['eval_score_seconds']:12.2f}{p['eval_score_seconds']:12.2f}")
    print(f"{'val MRR (after the run)':24}{t['val_mrr']:12.4f}{p['val_mrr']:12.4f}")
    print(f"{'peak RSS MB':24}{t['peak_rss_mb']:12.0f}{p['peak_rss_mb']:12.0f}")
    print(f"tma sampled per step: {t['sampled_nodes']:.0f} nodes, {t['sampled_edges']:.0f} edges")
    print(f"tma dense products: {t['gemm_gflop_per_step']:.2f} GFLOP a step; at the sgemm rate measured here "
          f"({t['sgemm_rate_gflops']:.0f} GFLOP/s) {t['gemm_ideal_ms_per_step']:.1f} ms, measured "
          f"{t['gemm_ms_per_step']:.1f} ms ({t['gemm_achieved_gflops']:.0f} GFLOP/s); the step takes {t['step_ms']:.1f} ms")
    ops = sorted(t["op_ms_per_step"].items(), key=lambda kv: -kv[1])
    print("tma ms a step by op: " + ", ".join(f"{k} {v:.1f}" for k, v in ops if v >= 0.05)
          + f"; sampling {t['sample_ms']:.1f}")
    print(f"tma evaluation: {t['eval_gemm_gflop']:.0f} GFLOP of dense products in {t['eval_gemm_seconds']:.2f} s "
          f"of {t['eval_seconds']:.2f} s")
print()
print(f"train_speedup_vs_torch_cpu_time: {min(train_cpu):.2f}")
print(f"eval_speedup_vs_torch_cpu_time: {min(evals_cpu):.2f}")
print(f"train_speedup_vs_torch: {min(train):.2f}")
print(f"eval_speedup_vs_torch: {min(evals):.2f}")
PY
