#!/bin/bash
# partition_quality.sh: the paper's observation on homophilous graphs, as a
# markdown table: for facebook-pages and an SBM with h = 0.9, partitioned into
# S = 3 shards, metis keeps the most training edges but has the largest label
# and feature discrepancy, random keeps r ~ 1/S with the smallest, supernode:N
# lies between.  Each row is the mean over three partition seeds.  The
# METIS-based schemes run with each clusterer of CLUSTERERS (default "metis
# lp": METIS and the streaming label propagation clusterer) side by side, and
# a third graph, a 10M-edge SBM (1M nodes), is added with BIG=1 (GRAPHS="big"
# for it alone).  SEEDS (default "0 1 2") are the partition seeds.
#
# Usage: bench/partition_quality.sh [WORKDIR]
#   TMA_BIN (default ./_build/tma or ./tma), TMA_DATASETS (default ../shared/datasets)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
T=${TMA_BIN:-$( [ -x "$here/_build/tma" ] && echo "$here/_build/tma" || echo "$here/tma")}
D=${TMA_DATASETS:-$(cd "$here/.." && pwd)/shared/datasets}
W=${1:-${TMPDIR:-/tmp}/tma-bench-quality}
PY=${PYTHON:-python3}
mkdir -p "$W"
cd "$W"

[[ " ${GRAPHS:-fb} " != *" fb "* ]] ||
  "$T" import "$D/facebook-pages" -o fb.tmag --feat-dim 128 --negatives 100 --seed 1 > fb.out
[[ " ${GRAPHS:-sbm} " != *" sbm "* ]] ||
  "$T" gen sbm -o sbm.tmag --nodes 30000 --classes 4 --avg-degree 10 --homophily 0.9 --feat-dim 32 --noise 1.0 \
  --seed 1 --negatives 100 > sbm.out

graphs=${GRAPHS:-fb sbm}
if [ "${BIG:-0}" = 1 ] || [[ " $graphs " == *" big "* ]]; then
  "$T" gen sbm -o big.tmag --nodes 1000000 --classes 8 --avg-degree 20 --homophily 0.9 --feat-dim 16 \
    --noise 1.0 --seed 1 --negatives 100 > big.out
  [[ " $graphs " == *" big "* ]] || graphs+=" big"
fi
S=3
echo "| graph | scheme | clusterer | edge_ratio r | label_tv | feature_mean_dist | seconds | max RSS MiB |"
echo "|---|---|---|---|---|---|---|---|"
for g in $graphs; do
  schemes="random supernode:3000 supernode:300 supernode:30 metis"
  [ "$g" = big ] && schemes="random supernode:3000 metis"
  for scheme in $schemes; do
    cls=${CLUSTERERS:-metis lp}
    [ "$scheme" = random ] && cls=-
    for cl in $cls; do
      for seed in ${SEEDS:-0 1 2}; do
        flag=(); [ "$cl" = - ] || flag=(--clusterer "$cl")
        /usr/bin/time -f %M -o "rss-$g-$scheme-$cl-$seed" "$T" partition "$g.tmag" --scheme "$scheme" \
          "${flag[@]}" --shards $S --seed $seed -o "p-$g-$scheme-$cl-$seed" > /dev/null
      done
      $PY - "$g" "$scheme" "$cl" $(for seed in ${SEEDS:-0 1 2}; do echo "p-$g-$scheme-$cl-$seed/partition.json"; done) <<'PYEOF'
import json, os, sys
name = {"fb": "facebook-pages (--feat-dim 128)", "sbm": "SBM n=30000, k=4, h=0.9",
        "big": "SBM n=1M, 10M edges, k=8, h=0.9"}[sys.argv[1]]
ds = [json.load(open(p)) for p in sys.argv[4:]]
rss = [int(open(os.path.dirname(p).replace("p-", "rss-", 1)).read().split()[-1]) / 1024 for p in sys.argv[4:]]
mean = lambda k: sum(d[k] for d in ds) / len(ds)
print("| %s | %s | %s | %.3f | %.4f | %.4f | %.2f | %.0f |" % (name, sys.argv[2], sys.argv[3], mean("edge_ratio"),
      mean("label_tv"), mean("feature_mean_dist"), mean("seconds"), max(rss)))
PYEOF
    done
  done
done
for g in sbm big; do
  [ -f $g.out ] && grep -E '^  (homophily|edges) ' $g.out | sed "s/^/# $g: /" >&2
done
exit 0
