#!/bin/bash
# partition_speed.sh: partition time and peak memory of random,
# supernode:15000 and metis (S = 3) on a ~10M-edge R-MAT graph, plus the
# random partition's in-memory phases against memcpy bandwidth measured in the
# same process (bench/bench_partition).  Prints markdown.
#
# Usage: bench/partition_speed.sh [WORKDIR]   (build first: make bench)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
B=${TMA_BUILDDIR:-$( [ -x "$here/_build/tma" ] && echo "$here/_build" || echo "$here")}
T=$B/tma
W=${1:-${TMPDIR:-/tmp}/tma-bench-speed}
PY=${PYTHON:-python3}
mkdir -p "$W"
cd "$W"

[ -f rmat10m.tmag ] || "$T" gen rmat -o rmat10m.tmag --scale 20 --edges 10500000 --feat-dim 16 --seed 1 > gen.out
"$T" info rmat10m.tmag --json > info.json
echo "graph: $($PY -c 'import json; d=json.load(open("info.json")); print("%d nodes, %d training edges, %d features" % (d["nodes"], d["train_edges"], d["feature_dim"]))')"
echo
echo "| scheme | wall s | assign s | extract s | write s | peak RSS MiB | edge_ratio |"
echo "|---|---|---|---|---|---|---|"
for scheme in random metis supernode:15000; do
  /usr/bin/time -v "$T" partition rmat10m.tmag --scheme $scheme --shards 3 --seed 0 -o "p-$scheme" > /dev/null 2> time.txt
  wall=$(awk -F': ' '/Elapsed/ {n = split($2, a, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + a[i]; print s}' time.txt)
  rss=$(awk -F': ' '/Maximum resident/ {printf "%.0f", $2 / 1024}' time.txt)
  $PY - "$scheme" "$wall" "$rss" "p-$scheme/partition.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[4]))
print("| %s | %s | %.3f | %.3f | %.3f | %s | %.4f |" % (sys.argv[1], sys.argv[2], d["assign_seconds"],
      d["extract_seconds"], d["write_seconds"], sys.argv[3], d["edge_ratio"]))
PYEOF
done
echo
# Three runs: on a shared machine the best one is the fair reading.
for i in 1 2 3; do
  echo "run $i (load average: $(cut -d' ' -f1 /proc/loadavg))"
  "$B/bench/bench_partition" rmat10m.tmag random 3 p-bw
done
