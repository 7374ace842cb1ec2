#!/bin/bash
# quality.sh: test MRR of the GCN, SAGE and MLP encoders on cora, citeseer and
# facebook-pages with a fixed training-time budget each (`tma train`, default config:
# docs/model.md, "Configuration"), as a markdown table.  Validation every tenth of the budget; the test MRR is
# that of the best validated weights.
#
# Usage: bench/gnn/quality.sh [WORKDIR]   (from a build folder)
# Environment: TMA_DATASETS, SMALL_SECONDS (cora, citeseer: 60), FB_SECONDS (facebook-pages: 300),
#   ENCODERS ("gcn sage mlp"), DATASETS_LIST ("cora citeseer facebook-pages"), THREADS (0), SEED (0).
set -euo pipefail
BUILD=$(pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${1:-/tmp/tma-bench-quality}
DATASETS=${TMA_DATASETS:-$SRC/../shared/datasets}
SMALL_SECONDS=${SMALL_SECONDS:-60}
FB_SECONDS=${FB_SECONDS:-300}
ENCODERS=${ENCODERS:-"gcn sage mlp"}
DATASETS_LIST=${DATASETS_LIST:-"cora citeseer facebook-pages"}
THREADS=${THREADS:-0}
SEED=${SEED:-0}
mkdir -p "$WORK"
echo "# $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'); budgets: cora/citeseer ${SMALL_SECONDS}s, facebook-pages ${FB_SECONDS}s; seed $SEED"
echo
echo "| dataset | encoder | test MRR | best val MRR | converged at (s) | steps | edges/s |"
echo "|---|---|---|---|---|---|---|"
for d in $DATASETS_LIST; do
  G=$WORK/$d.tmag
  [ -s "$G" ] || "$BUILD/tma" import "$DATASETS/$d" -o "$G" > /dev/null
  secs=$SMALL_SECONDS
  [ "$d" = facebook-pages ] && secs=$FB_SECONDS
  for e in $ENCODERS; do
    run=$WORK/run-$d-$e-$SEED
    rm -rf "$run"
    "$BUILD/tma" train "$G" --encoder "$e" --seconds "$secs" --threads "$THREADS" --seed "$SEED" -q -o "$run" > /dev/null
    python3 - "$run/result.json" "$d" "$e" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['test_mrr']:.4f} | {r['best_val_mrr']:.4f} | "
      f"{r['convergence_seconds']:.0f} | {r['steps']} | {r['edges_per_second']:.0f} |")
PY
  done
done
