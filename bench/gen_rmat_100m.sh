#!/bin/bash
# gen_rmat_100m.sh: time and peak memory of generating a 100M-edge R-MAT
# graph (2^23 nodes, 16 random features), written to WORKDIR (about 2.2 GB).
#
# Usage: bench/gen_rmat_100m.sh [WORKDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
T=${TMA_BIN:-$( [ -x "$here/_build/tma" ] && echo "$here/_build/tma" || echo "$here/tma")}
W=${1:-${TMPDIR:-/tmp}/tma-bench-rmat}
mkdir -p "$W"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -v "$T" gen rmat -o "$W/rmat100m.tmag" --scale 23 --edges 100000000 --feat-dim 16 --seed 1 \
  > "$W/report.txt" 2> "$W/time.txt"
cat "$W/report.txt"
grep -E 'Elapsed|Maximum resident|User time|System time|Percent of CPU' "$W/time.txt"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
ls -l "$W/rmat100m.tmag"
rm -f "$W/rmat100m.tmag"
