#!/bin/bash
# bench/paper/run.sh: the paper's comparison (the shape of its Tables 2 and 3):
# RandomTMA, SuperTMA, PSGD-PA, LLCG and GGS with M = 3 trainers, the same time
# budget each, several seeds, on facebook-pages and on an SBM with h = 0.9.
# Every run is a real `tma launch` (private etcd, coordinator, workers).
#
#   bench/paper/run.sh [-o OUT] [--budget SECONDS] [--seeds N] [--graphs "fb sbm"]
#                      [--variants "randomtma supertma psgd-pa llcg ggs"] [--tma PATH]
#                      [--table6 [--policies "continue reassign"]]
#                      [--interval-steps N --rounds R]
#
# Prints, per graph, `tma report` over its runs: the runs, then each variant's
# mean ± std of test MRR and convergence time, and the steps table.
#
# --table6 runs the paper's Table 6 drill instead (default variants randomtma,
# supertma, psgd-pa; graph fb): F = 1, the trainer of one shard never starts
# (fault.absent_shards), shard (seed - 1) mod 3 for each seed, so that with 3
# seeds every shard is dropped once; under each policy (continue: train with
# M - 1; reassign: a live worker trains on two shards). F = 0 is the plain
# runs of the same graph, variant and seed (made here if missing). Prints test
# MRR F = 0 against F = 1 per variant and policy, and the relative loss.
#
# --interval-steps N --rounds R: aggregate every N local steps and stop after R
# rounds instead of the time budget (every run then does the same work however
# loaded the machine is; --budget stays a cap).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=bench-paper-out; budget=120; seeds=3; graphs="fb sbm"
variants=""; table6=0; policies="continue reassign"; isteps=0; rounds=0
tma=${TMA:-$here/../../tma}
while [ $# -gt 0 ]; do
  case $1 in
    -o) out=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --graphs) graphs=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    --tma) tma=$2; shift 2 ;;
    --table6) table6=1; shift ;;
    --policies) policies=$2; shift 2 ;;
    --interval-steps) isteps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$variants" ]; then
  if ((table6)); then variants="randomtma supertma psgd-pa"; else variants="randomtma supertma psgd-pa llcg ggs"; fi
fi
((table6)) && [ "$graphs" = "fb sbm" ] && graphs=fb
datasets=${TMA_DATASETS:-$here/../../../shared/datasets}
mkdir -p "$out/graphs"
out=$(cd "$out" && pwd)
interval=$(( budget / 8 )); (( interval >= 5 )) || interval=5
agg='"interval_seconds": '$interval; dur='"train_seconds": '$budget
if (( isteps > 0 && rounds > 0 )); then
  agg='"interval_steps": '$isteps; dur='"train_seconds": '$budget', "rounds": '$rounds
elif (( isteps > 0 || rounds > 0 )); then
  echo "--interval-steps and --rounds go together" >&2; exit 2
fi

# The graphs, once.
if [[ " $graphs " == *" fb "* && ! -f $out/graphs/fb.tmag ]]; then
  "$tma" import "$datasets/facebook-pages" -o "$out/graphs/fb.tmag" --feat-dim 64 --seed 0 >/dev/null
fi
if [[ " $graphs " == *" sbm "* && ! -f $out/graphs/sbm.tmag ]]; then
  # Many small communities with h = 0.9: link prediction has signal (a
  # same-community negative is rare among 1000), and METIS cuts along classes.
  "$tma" gen sbm -o "$out/graphs/sbm.tmag" --nodes 50000 --classes 500 --avg-degree 16 --homophily 0.9 \
    --feat-dim 64 --noise 1.0 --seed 0 >/dev/null
fi

# run_one GRAPH VARIANT SEED RUNDIR [ABSENT_SHARD POLICY]: one tma launch, resumable.
run_one() {
  local g=$1 v=$2 s=$3 run=$4 absent=${5:-} policy=${6:-continue}
  [ -f "$run/result.json" ] && return 0
  rm -rf "$run"
  local name part fault
  name=$(basename "$(dirname "$run")")-$v-s$s
  part='"partition": {"shards": 3, "seed": '$s'},'
  [ "$v" = ggs ] && part=''
  fault='"start_timeout": 120'
  [ -n "$absent" ] && fault+=', "absent_shards": ['$absent'], "on_failure": "'$policy'"'
  cat > "$out/job-$g-$name.json" <<JSON
{"job": "paper-$g-$name", "variant": "$v", "workers": 3, "graph": "$out/graphs/$g.tmag", $part
 "aggregation": {$agg}, "duration": {$dur},
 "model": {"encoder": "gcn", "hidden": 128, "decoder_hidden": 128},
 "train": {"batch_size": 512, "seed": $s}, "fault": {$fault}}
JSON
  echo "== $g $name" >&2
  "$tma" launch "$out/job-$g-$name.json" -o "$run" --threads 1 -q > "$out/launch-$g-$name.txt" 2>&1 ||
    echo "run $g $name failed; see $out/launch-$g-$name.txt" >&2
}

if ((table6)); then
  for g in $graphs; do
    for ((s = 1; s <= seeds; s++)); do
      for v in $variants; do
        run_one "$g" "$v" "$s" "$out/runs/$g/$v-s$s"
        for p in $policies; do
          run_one "$g" "$v" "$s" "$out/runs/$g-F1-$p/$v-s$s" $(( (s - 1) % 3 )) "$p"
        done
      done
    done
    echo
    echo "### $g: Table 6 shape, M = 3, aggregation $agg, duration $dur, $seeds seed(s)"
    python3 - "$out/runs" "$g" "$variants" "$policies" <<'PY'
import json, os, statistics, sys
root, g, variants, policies = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
def mrrs(d, v):
    out = []
    if os.path.isdir(d):
        for n in sorted(os.listdir(d)):
            f = os.path.join(d, n, "result.json")
            if n.startswith(v + "-s") and os.path.exists(f):
                out.append(json.load(open(f))["test_mrr"])
    return out
def fmt(x):
    if not x: return "%-17s" % "-"
    sd = statistics.stdev(x) if len(x) > 1 else 0.0
    return "%.4f ± %.4f (%d)" % (statistics.mean(x), sd, len(x))
hdr = "%-10s %-20s" % ("variant", "F = 0")
for p in policies: hdr += " %-20s %8s" % ("F = 1 " + p, "loss")
print(hdr)
for v in variants:
    f0 = mrrs(os.path.join(root, g), v)
    row = "%-10s %-20s" % (v, fmt(f0))
    for p in policies:
        f1 = mrrs(os.path.join(root, g + "-F1-" + p), v)
        loss = "-" if not (f0 and f1) else "%.2f%%" % (100 * (1 - statistics.mean(f1) / statistics.mean(f0)))
        row += " %-20s %8s" % (fmt(f1), loss)
    print(row)
PY
  done
  exit 0
fi

for g in $graphs; do
  for ((s = 1; s <= seeds; s++)); do
    for v in $variants; do
      run_one "$g" "$v" "$s" "$out/runs/$g/$v-s$s"
    done
  done
  echo
  echo "### $g: M = 3, budget ${budget} s, aggregation every ${interval} s, $seeds seed(s)"
  "$tma" report "$out"/runs/$g/* -o "$out/$g.svg"
done
