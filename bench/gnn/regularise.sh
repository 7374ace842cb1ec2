#!/bin/bash
# regularise.sh: the effect of model.dropout, train.weight_decay and a cosine
# train.lr_schedule on facebook-pages' test MRR (`tma train`, the default GCN
# otherwise), each against the plain config, over SEEDS, with a fixed number
# of steps (not seconds: the comparison does not depend on the machine's load).
# Prints a markdown table: per config the test MRR of each seed, their mean
# and standard deviation.
#
# Usage: bench/gnn/regularise.sh [WORKDIR]   (from a build folder)
# Environment: TMA_DATASETS, STEPS (600), SEEDS ("1 2 3"), THREADS (0).
set -euo pipefail
BUILD=$(pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${1:-/tmp/tma-bench-regularise}
DATASETS=${TMA_DATASETS:-$SRC/../shared/datasets}
STEPS=${STEPS:-600}
SEEDS=${SEEDS:-"1 2 3"}
THREADS=${THREADS:-0}
mkdir -p "$WORK"
G=$WORK/facebook-pages.tmag
[ -s "$G" ] || "$BUILD/tma" import "$DATASETS/facebook-pages" -o "$G" > /dev/null
declare -A CFG=(
  [plain]='{}'
  [dropout-0.3]='{"model": {"dropout": 0.3}}'
  [weight-decay-0.01]='{"train": {"weight_decay": 0.01}}'
  [cosine]="{\"train\": {\"lr_schedule\": {\"kind\": \"cosine\", \"warmup_steps\": 50, \"steps\": $STEPS}}}"
)
echo "# $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'); facebook-pages, $STEPS steps, seeds $SEEDS; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| config | test MRR per seed | mean | std |"
echo "|---|---|---|---|"
for name in plain dropout-0.3 weight-decay-0.01 cosine; do
  echo "${CFG[$name]}" > "$WORK/$name.json"
  mrrs=()
  for s in $SEEDS; do
    run=$WORK/run-$name-$s
    rm -rf "$run"
    "$BUILD/tma" train "$G" --config "$WORK/$name.json" --steps "$STEPS" --seed "$s" --threads "$THREADS" -q -o "$run" > /dev/null
    mrrs+=("$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['test_mrr'])" "$run/result.json")")
  done
  python3 - "$name" "${mrrs[@]}" <<'PY'
import statistics, sys
name, v = sys.argv[1], [float(x) for x in sys.argv[2:]]
sd = statistics.stdev(v) if len(v) > 1 else float("nan")
print(f"| {name} | {', '.join(f'{x:.4f}' for x in v)} | {statistics.mean(v):.4f} | {sd:.4f} |")
PY
done
