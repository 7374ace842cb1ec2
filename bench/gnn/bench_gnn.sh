#!/bin/bash
# bench_gnn.sh: tma's GNN engine against its peers, side by side, on facebook-pages and a
# 2M-edge SBM: the PyTorch implementation written for it (bench/gnn/torch_gnn.py, "torch") and
# the same model written as a DGL user writes it (bench/gnn/dgl_gnn.py, "dgl": DGL's sampler
# and layers, in the venv bench/gnn/dgl_env.sh makes).  Training throughput (positive edges
# a second, sampling included), evaluation time (full-neighbourhood inference + MRR on
# the validation edges), peak RSS, and for tma the time by op against the sgemm rate.
# GAT (ENCODERS gat, HEADS heads) runs against DGL's GATConv only: torch_gnn.py has no GAT.
# The same model, fan-outs, batch size and thread count on every side; each side runs
# REPEATS times, alternating, and the best run of each counts (other jobs on a shared
# machine only ever slow a run down); before each run the script waits (up to QUIET_WAIT
# seconds) for the machine to be idle.  The ratios come last, for each peer P:
#   train_speedup_vs_P: X    eval_speedup_vs_P: Y    infer_speedup_vs_P: Z
# (the smallest over the runs; wall clock; the same training and evaluation ratios in CPU
# time, all threads, are printed just before them).
#
# Usage: bench/gnn/bench_gnn.sh [WORKDIR]     (from a build folder, after `make bench`)
# Environment: TMA_DATASETS (default ../shared/datasets), THREADS (2), SECONDS_PER_RUN (20),
#   REPEATS (3), ENCODERS ("gcn sage gat"), HEADS (GAT's heads: 4), BATCH (1024), PEERS ("torch dgl"), TORCH_PYTHON
#   (/usr/bin/python3), TMA_DGL_VENV (~/.cache/tma/dgl-venv, made by dgl_env.sh; the dgl side
#   is skipped when it is missing), GRAPHS ("facebook sbm2m"), QUIET_WAIT (120).
set -euo pipefail
BUILD=$(pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${1:-/tmp/tma-bench-gnn}
DATASETS=${TMA_DATASETS:-$SRC/../shared/datasets}
THREADS=${THREADS:-2}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-20}
REPEATS=${REPEATS:-3}
QUIET_WAIT=${QUIET_WAIT:-120}
ENCODERS=${ENCODERS:-"gcn sage gat"}
HEADS=${HEADS:-4}
BATCH=${BATCH:-1024}
PY=${TORCH_PYTHON:-/usr/bin/python3}
DGL_PY=${TMA_DGL_VENV:-$HOME/.cache/tma/dgl-venv}/bin/python
PEERS=${PEERS:-"torch dgl"}
GRAPHS=${GRAPHS:-"facebook sbm2m"}
TMA=$BUILD/tma
BENCH=$BUILD/bench/gnn/bench_gnn
[ -x "$BENCH" ] || { echo "bench_gnn.sh: build it first: make bench" >&2; exit 2; }
mkdir -p "$WORK"
peers=()
for p in $PEERS; do
  case $p in
    torch) peers+=(torch) ;;
    dgl)
      if [ -x "$DGL_PY" ] && "$DGL_PY" -c 'import dgl, torch' 2>/dev/null; then
        peers+=(dgl)
      else
        echo "bench_gnn.sh: skipping the dgl side: no working DGL in $DGL_PY;" \
             "make it with $SRC/bench/gnn/dgl_env.sh (several GiB from PyPI)" >&2
      fi ;;
    *) echo "bench_gnn.sh: unknown peer '$p' in PEERS (torch, dgl)" >&2; exit 2 ;;
  esac
done
# Every side: passive OpenMP waiting (see docs/model.md, Threads); OpenBLAS as configured.
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
     "torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?');" \
     "DGL $("$DGL_PY" -c 'import dgl, torch; print(dgl.__version__, "on torch", torch.__version__)' 2>/dev/null ||
           echo 'absent')"
echo "# peers: ${peers[*]:-none}"
echo "# settings: encoders $ENCODERS (gat: $HEADS heads), batch $BATCH, fanouts 25,10, hidden 256, threads $THREADS," \
     "${SECONDS_PER_RUN}s a run, best of $REPEATS; load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
results=()
for name in $GRAPHS; do
  G=$(graph_file "$name")
  for enc in $ENCODERS; do
    heads=()
    [ "$enc" = gat ] && heads=(--heads "$HEADS")
    rm -f "$WORK/$name-$enc".*.json
    for r in $(seq "$REPEATS"); do
      wait_quiet
      "$BENCH" "$G" --encoder "$enc" "${heads[@]}" --batch "$BATCH" --threads "$THREADS" --seconds "$SECONDS_PER_RUN" \
        > "$WORK/$name-$enc.tma.$r.json"
      for p in "${peers[@]}"; do
        [ "$enc.$p" = gat.torch ] && continue  # torch_gnn.py has no GAT
        wait_quiet
        case $p in torch) py=$PY ;; dgl) py=$DGL_PY ;; esac
        "$py" "$SRC/bench/gnn/${p}_gnn.py" "$G" --encoder "$enc" "${heads[@]}" --batch "$BATCH" --threads "$THREADS" \
          --seconds "$SECONDS_PER_RUN" 2> "$WORK/$name-$enc.$p.$r.err" > "$WORK/$name-$enc.$p.$r.json" ||
          { echo "bench_gnn.sh: the $p side failed on $name $enc; see $WORK/$name-$enc.$p.$r.err" >&2; exit 1; }
      done
    done
    results+=("$name-$enc")
  done
done

echo "# runs that started on a busy machine (no idle moment within ${QUIET_WAIT}s): $busy_waited of" \
     "$(((1 + ${#peers[@]}) * REPEATS * ${#results[@]}))"
python3 - "$WORK" "$REPEATS" "${peers[*]}" "${results[@]}" <<'PY'
import json, os, sys
work, reps, peers, names = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
def runs_of(name, impl):
    return [json.load(open(f"{work}/{name}.{impl}.{r}.json")) for r in range(1, reps + 1)]
roof_worst, score_worst = [0.0], [float("inf")]
def load(name, impl):
    runs = runs_of(name, impl)
    best = max(runs, key=lambda d: d["edges_per_second"])
    best["cpu_ms_per_step"] = min(d["cpu_ms_per_step"] for d in runs)
    best["eval_cpu_seconds"] = min(d["eval_cpu_seconds"] for d in runs)
    best["eval_seconds"] = min(d["eval_seconds"] for d in runs)
    best["eval_infer_seconds"] = min(d["eval_infer_seconds"] for d in runs)
    best["eval_score_seconds"] = min(d["eval_score_seconds"] for d in runs)
    best["peak_rss_mb"] = max(d["peak_rss_mb"] for d in runs)
    best.setdefault("compute_ms", best["step_ms"] - best["sample_ms"])  # tma reports the parts
    return best
worst = {p: {k: float("inf") for k in ("train", "eval", "infer", "train_cpu", "eval_cpu")} for p in peers}
gat_worst = {p: {k: float("inf") for k in ("train", "eval", "infer", "train_cpu", "eval_cpu")} for p in peers}
for name in names:
    t = load(name, "tma")
    # A peer without the encoder (torch_gnn.py has no GAT) has no runs.
    sides = [("tma", t)] + [(p, load(name, p)) for p in peers if os.path.exists(f"{work}/{name}.{p}.1.json")]
    wst = gat_worst if t["encoder"] == "gat" else worst
    def row(label, key, fmt, ratio=None, stat=None):
        """One line: each side's key, then for each peer how many times tma is faster, from a
        rate (ratio "rate") or a time ("time"); stat names the worst-case ratio it feeds."""
        line = f"{label:24}" + "".join(format(d.get(key, float("nan")), fmt) for _, d in sides)
        for p, d in sides[1:]:
            if ratio:
                r = t[key] / d[key] if ratio == "rate" else d[key] / t[key]
                line += f"{r:8.2f}"
                if stat:
                    wst[p][stat] = min(wst[p][stat], r)
        print(line)
    heads = f" ({t['heads']} heads)" if t["encoder"] == "gat" else ""
    print(f"\n## {name} ({t['graph']}), {t['encoder']}{heads}, batch {t['batch_size']}, {t['threads']} threads")
    print(f"{'':24}" + "".join(f"{s:>12}" for s, _ in sides) + "".join(f"{'x ' + p:>8}" for p, _ in sides[1:]))
    row("train edges/s", "edges_per_second", "12.0f", "rate", "train")
    row("  step ms", "step_ms", "12.1f")
    row("  of which sampling ms", "sample_ms", "12.1f")
    row("  of which compute ms", "compute_ms", "12.1f", "time")
    row("  CPU ms a step", "cpu_ms_per_step", "12.1f", "time", "train_cpu")
    row("eval s (infer + MRR)", "eval_seconds", "12.2f", "time", "eval")
    row("  eval CPU s", "eval_cpu_seconds", "12.2f", "time", "eval_cpu")
    row("  inference s", "eval_infer_seconds", "12.2f", "time", "infer")
    row("  scoring s", "eval_score_seconds", "12.2f", "time")
    row("val MRR (after the run)", "val_mrr", "12.4f")
    row("parameters", "params", "12.0f")
    row("peak RSS MB", "peak_rss_mb", "12.0f")
    if len({d.get("params") for _, d in sides}) > 1:
        print("NOTE: the sides' parameter counts differ: they do not train the same model")
    for p, d in sides[1:]:
        if "sampled_nodes" in d:
            print(f"{p} sampled per step: {d['sampled_nodes']:.0f} nodes, {d['sampled_edges']:.0f} edges")
    print(f"tma sampled per step: {t['sampled_nodes']:.0f} nodes, {t['sampled_edges']:.0f} edges")
    print(f"tma dense products: {t['gemm_gflop_per_step']:.2f} GFLOP a step; at the sgemm rate measured here "
          f"({t['sgemm_rate_gflops']:.0f} GFLOP/s) {t['gemm_ideal_ms_per_step']:.1f} ms, measured "
          f"{t['gemm_ms_per_step']:.1f} ms ({t['gemm_achieved_gflops']:.0f} GFLOP/s); the step takes {t['step_ms']:.1f} ms")
    ops = sorted(t["op_ms_per_step"].items(), key=lambda kv: -kv[1])
    print("tma ms a step by op: " + ", ".join(f"{k} {v:.1f}" for k, v in ops if v >= 0.05)
          + f"; sampling {t['sample_ms']:.1f}")
    print(f"tma evaluation: {t['eval_gemm_gflop']:.0f} GFLOP of dense products in {t['eval_gemm_seconds']:.2f} s "
          f"of {t['eval_seconds']:.2f} s")
    if t.get("roofline_ms_per_step"):
        r = t["step_ms"] / t["roofline_ms_per_step"]
        roof_worst[0] = max(roof_worst[0], r)
        print(f"tma roofline: {t['roofline_ms_per_step']:.1f} ms a step = {t['gemm_gflop_per_step']:.2f} GFLOP at "
              f"{t['sgemm_rate_gflops']:.0f} GFLOP/s ({t['gemm_ideal_ms_per_step']:.1f} ms) + "
              f"{t['gathered_mb_per_step']:.0f} MB gathered at {t['gather_rate_gbs']:.1f} GB/s; "
              f"the step takes {t['step_ms']:.1f} ms, {r:.2f}x its roofline")
    if t.get("eval_score_of_sgemm"):
        f = min(d["eval_score_of_sgemm"] for d in runs_of(name, "tma"))
        score_worst[0] = min(score_worst[0], max(d["eval_score_of_sgemm"] for d in runs_of(name, "tma")))
        print(f"tma scoring: {t['eval_score_gflop']:.0f} GFLOP, {t['eval_score_gflops']:.0f} GFLOP/s in the best run; "
              f"{max(d['eval_score_of_sgemm'] for d in runs_of(name, 'tma')) * 100:.0f} % of the sgemm rate at best, "
              f"{f * 100:.0f} % at worst")
print()
ran = lambda w: w["train"] < float("inf")
for p in peers:
    if not ran(worst[p]):
        continue
    print(f"train_speedup_vs_{p}_cpu_time: {worst[p]['train_cpu']:.2f}")
    print(f"eval_speedup_vs_{p}_cpu_time: {worst[p]['eval_cpu']:.2f}")
for p in peers:
    if ran(gat_worst[p]):
        print(f"gat_train_speedup_vs_{p}_cpu_time: {gat_worst[p]['train_cpu']:.2f}")
        print(f"gat_train_speedup_vs_{p}: {gat_worst[p]['train']:.2f}")
        print(f"gat_eval_speedup_vs_{p}: {gat_worst[p]['eval']:.2f}")
for p in peers:
    if not ran(worst[p]):
        continue
    print(f"train_speedup_vs_{p}: {worst[p]['train']:.2f}")
    print(f"eval_speedup_vs_{p}: {worst[p]['eval']:.2f}")
    print(f"infer_speedup_vs_{p}: {worst[p]['infer']:.2f}")
# The goals of docs/benchmarks.md ("tma against DGL"), each from the numbers above.
print()
goal = lambda ok: "met" if ok else "NOT met"
if "dgl" in peers and ran(gat_worst["dgl"]):
    w = gat_worst["dgl"]["train"]
    print(f"goal GAT training >= 2x DGL's GATConv on every graph: {w:.2f}x, {goal(w >= 2)}")
if "dgl" in peers and ran(worst["dgl"]):
    w = worst["dgl"]
    print(f"goal training >= 3x DGL on every graph and encoder: {w['train']:.2f}x, {goal(w['train'] >= 3)}")
    print(f"goal evaluation >= 2x DGL everywhere: {w['eval']:.2f}x, {goal(w['eval'] >= 2)}")
    print(f"goal full-graph inference >= 2x DGL: {w['infer']:.2f}x, {goal(w['infer'] >= 2)}")
if score_worst[0] < float("inf"):
    print(f"goal scoring >= 85 % of the sgemm rate: {score_worst[0] * 100:.0f} % (best run, worst graph), "
          f"{goal(score_worst[0] >= 0.85)}")
if roof_worst[0] > 0:
    print(f"goal each training step within 2x of its roofline: {roof_worst[0]:.2f}x at worst, {goal(roof_worst[0] <= 2)}")
PY
