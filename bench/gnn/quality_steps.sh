#!/bin/bash
# quality_steps.sh: test MRR in step mode (deterministic: the same numbers on
# any machine at any load), 3 seeds each, one `tma train` at a time:
#   1. GAT against GCN and SAGE on facebook-pages and on the SBM of the
#      paper's comparison (bench/paper/run.sh: 50,000 nodes, 500 classes,
#      average degree 16, h = 0.9, 64 noisy class features);
#   2. model.dropout, train.weight_decay and train.negatives K = 1 / 4 / 16
#      on facebook-pages (GCN).
# Every run: hidden 128 (GAT: 4 heads of 32, averaged in the last layer),
# decoder hidden 128, batch 512, lr 0.005, STEPS steps, validated and tested
# once, at the end (--eval-every-seconds far past the run: the weights tested
# are the last ones, whatever the machine's speed).  The training seconds are
# printed too; they depend on the load, the MRR does not.
# Prints markdown tables (per config the test MRR of each seed, mean and
# standard deviation), the commit and the load average before and after.
#
# Usage: bench/gnn/quality_steps.sh [WORKDIR]   (from a build folder)
# Environment: TMA_DATASETS, STEPS (250), SEEDS ("1 2 3"), THREADS (0),
#   PARTS ("encoders-fb encoders-sbm options-fb").
set -euo pipefail
BUILD=$(pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${1:-/tmp/tma-bench-quality-steps}
DATASETS=${TMA_DATASETS:-$SRC/../shared/datasets}
STEPS=${STEPS:-250}
SEEDS=${SEEDS:-"1 2 3"}
THREADS=${THREADS:-0}
PARTS=${PARTS:-"encoders-fb encoders-sbm options-fb"}
mkdir -p "$WORK"
FB=$WORK/facebook-pages.tmag
SBM=$WORK/sbm.tmag
[ -s "$FB" ] || "$BUILD/tma" import "$DATASETS/facebook-pages" -o "$FB" > /dev/null
[ -s "$SBM" ] || "$BUILD/tma" gen sbm -o "$SBM" --nodes 50000 --classes 500 --avg-degree 16 --homophily 0.9 \
  --feat-dim 64 --noise 1.0 --seed 0 > /dev/null

commit=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?')
git -C "$SRC" diff --quiet HEAD 2>/dev/null || commit="$commit (with uncommitted changes)"
echo "# $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'); commit $commit; $STEPS steps, seeds $SEEDS"
echo "# before: $(uptime)"
start=$SECONDS

# model JSON of an encoder, with extra model keys; train JSON with extra keys.
config() { # ENCODER EXTRA-MODEL EXTRA-TRAIN
  local heads=""
  [ "$1" = gat ] && heads=', "heads": 4'
  printf '{"model": {"encoder": "%s", "hidden": 128, "decoder_hidden": 128%s%s}, "train": {"batch_size": 512, "lr": 0.005%s}}\n' \
    "$1" "$heads" "$2" "$3"
}

# row GRAPH NAME CONFIG-JSON: one table row over SEEDS.  A run of the same
# graph, config and seed made earlier by this invocation is not made again
# (step mode: it would give the same numbers).
declare -A done_runs=()
row() {
  local g=$1 name=$2 cfg=$WORK/${2%% *}-$(basename "$1" .tmag).json mrrs=() secs=()
  echo "$3" > "$cfg"
  local key
  key=$( (echo "$g $STEPS $THREADS"; cat "$cfg") | md5sum | cut -c1-12)
  for s in $SEEDS; do
    local run=$WORK/run-$key-$s
    if [ -z "${done_runs[$run]:-}" ]; then
      rm -rf "$run"
      "$BUILD/tma" train "$g" --config "$cfg" --steps "$STEPS" --eval-every-seconds 1000000 --seed "$s" \
        --threads "$THREADS" -q -o "$run" > /dev/null
      done_runs[$run]=1
    fi
    mrrs+=("$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['test_mrr'])" "$run/result.json")")
    secs+=("$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['train_seconds'])" "$run/result.json")")
  done
  python3 - "$name" "${#mrrs[@]}" "${mrrs[@]}" "${secs[@]}" <<'PY'
import statistics, sys
name, n = sys.argv[1], int(sys.argv[2])
v, t = [float(x) for x in sys.argv[3:3 + n]], [float(x) for x in sys.argv[3 + n:]]
sd = statistics.stdev(v) if len(v) > 1 else float("nan")
print(f"| {name} | {', '.join(f'{x:.4f}' for x in v)} | {statistics.mean(v):.4f} | {sd:.4f} | "
      f"{statistics.mean(t):.0f} |")
PY
}

header() {
  echo
  echo "$1"
  echo
  echo "| config | test MRR per seed | mean | std | training s (mean) |"
  echo "|---|---|---|---|---|"
}

for part in $PARTS; do
  case $part in
    encoders-fb|encoders-sbm)
      g=$FB; [ "$part" = encoders-sbm ] && g=$SBM
      header "## $part: $(basename "$g" .tmag)"
      for e in gcn sage gat; do row "$g" "$e" "$(config "$e" "" "")"; done ;;
    options-fb)
      header "## options-fb: facebook-pages, GCN"
      row "$FB" "plain (K = 1)" "$(config gcn "" "")"
      row "$FB" dropout-0.3 "$(config gcn ', "dropout": 0.3' "")"
      row "$FB" weight-decay-0.01 "$(config gcn "" ', "weight_decay": 0.01')"
      row "$FB" negatives-4 "$(config gcn "" ', "negatives": 4')"
      row "$FB" negatives-16 "$(config gcn "" ', "negatives": 16')" ;;
    *) echo "quality_steps.sh: unknown part '$part'" >&2; exit 2 ;;
  esac
done
echo
echo "# after: $(uptime); $((SECONDS - start)) s"
