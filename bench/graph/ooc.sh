#!/bin/bash
# ooc.sh: graphs out of core (tma gen/import/partition --memory), measured.
#
#   bench/graph/ooc.sh throughput [WORKDIR]
#     The same graphs built in memory and out of core, side by side: tma gen
#     rmat (SCALE, EDGES, FEAT_DIM) and tma import of an edges.txt of about
#     IMPORT_EDGES lines; edges/s, wall time, peak anonymous and
#     file-backed memory (RssAnon/RssFile from /proc every 0.1 s), and that
#     both wrote the same bytes.  Then tma partition --scheme random into 4
#     shards of the generated graph, capped and not.
#
#   bench/graph/ooc.sh big [WORKDIR]
#     A graph larger than this machine's memory: an R-MAT of BIG_SCALE and
#     BIG_EDGES with BIG_FEAT_DIM features, generated with --memory 4G under
#     prlimit --data=CAP, then partitioned (random, 4 shards) under the same
#     cap; wall time and peak memory of each phase.
#
# Run from the build folder; one benchmark at a time (it says the load average).
set -euo pipefail
MODE=${1:?usage: ooc.sh throughput|big [WORKDIR]}
T=$(readlink -f "${TMA_BIN:-$(pwd)/tma}")
[ -x "$T" ] || { echo "ooc.sh: no tma at $T (run it from the build folder)" >&2; exit 2; }
W=${2:-${TMPDIR:-/tmp}/tma-bench-ooc}
mkdir -p "$W"
echo "# $(date -u +%F) machine: $(nproc) CPUs, $(free -g | awk '/Mem:/ {print $2}') GiB, $(df -h "$W" | awk 'NR==2 {print $4}') free in $W"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# measure NAME CMD...: runs CMD, samples its RssAnon/RssFile, prints one line.
measure() {
  local name=$1; shift
  local t0 pa=0 pf=0 a f p rc=0
  t0=$(date +%s.%N)
  "$@" >"$W/$name.out" 2>"$W/$name.err" & p=$!
  while kill -0 $p 2>/dev/null; do
    read -r a f < <(awk '/^RssAnon/ {a = $2} /^RssFile/ {f = $2} END {print a + 0, f + 0}' /proc/$p/status 2>/dev/null || echo "0 0")
    [ "$a" -gt "$pa" ] && pa=$a
    [ "$f" -gt "$pf" ] && pf=$f
    sleep 0.1
  done
  wait $p || rc=$?
  [ $rc -eq 0 ] || { echo "$name failed ($rc):"; tail -5 "$W/$name.err"; exit 1; }
  printf "%-26s wall %7.1f s  peak RssAnon %7.0f MiB  RssFile %7.0f MiB\n" "$name" \
    "$(echo "$(date +%s.%N) - $t0" | bc)" "$((pa / 1024))" "$((pf / 1024))"
}
rate() {  # rate NAME EDGES: edges/s from the report's seconds
  awk -v n="$1" -v m="$2" '/^  seconds/ {printf "  %-24s %.2f M input edges/s (%s s in the report)\n", n, m / $2 / 1e6, $2}' "$W/$1.out"
}

case $MODE in
throughput)
  SCALE=${SCALE:-22}; EDGES=${EDGES:-64000000}; FEAT_DIM=${FEAT_DIM:-16}; IMPORT_EDGES=${IMPORT_EDGES:-20000000}
  MEM=${MEM:-1G}
  gen=(gen rmat --scale "$SCALE" --edges "$EDGES" --feat-dim "$FEAT_DIM" --seed 1)
  measure gen-in-memory "$T" "${gen[@]}" -o "$W/mem.tmag" --memory 16G
  rate gen-in-memory "$EDGES"
  measure gen-out-of-core "$T" "${gen[@]}" -o "$W/ooc.tmag" --memory "$MEM"
  rate gen-out-of-core "$EDGES"
  grep 'memory budget' "$W/gen-out-of-core.out" | sed 's/^/  /'
  cmp "$W/mem.tmag" "$W/ooc.tmag" && echo "  same bytes ($(stat -c %s "$W/mem.tmag") bytes)"
  rm -f "$W/ooc.tmag"
  measure partition-random-4 "$T" partition "$W/mem.tmag" --scheme random --shards 4 --seed 1 -o "$W/p"
  tail -n 1 "$W/partition-random-4.out" | sed 's/^/  /'
  rm -rf "$W/p" "$W/mem.tmag"
  mkdir -p "$W/ds"
  awk -v m="$IMPORT_EDGES" 'BEGIN {srand(7); for (i = 0; i < m; i++) printf "%d %d\n", int(rand() * rand() * 4000000), int(rand() * 4000000)}' >"$W/ds/edges.txt"
  echo "  edges.txt: $IMPORT_EDGES lines, $(stat -c %s "$W/ds/edges.txt") bytes"
  measure import-in-memory "$T" import "$W/ds" -o "$W/imem.tmag" --memory 16G
  rate import-in-memory "$IMPORT_EDGES"
  measure import-out-of-core "$T" import "$W/ds" -o "$W/iooc.tmag" --memory "$MEM"
  rate import-out-of-core "$IMPORT_EDGES"
  cmp "$W/imem.tmag" "$W/iooc.tmag" && echo "  same bytes ($(stat -c %s "$W/imem.tmag") bytes)"
  rm -rf "$W/ds" "$W/imem.tmag" "$W/iooc.tmag"
  ;;
big)
  BIG_SCALE=${BIG_SCALE:-22}; BIG_EDGES=${BIG_EDGES:-64000000}; BIG_FEAT_DIM=${BIG_FEAT_DIM:-1664}
  CAP=${CAP:-$((5 << 30))}
  measure gen-capped prlimit --data="$CAP" "$T" gen rmat --scale "$BIG_SCALE" --edges "$BIG_EDGES" \
    --feat-dim "$BIG_FEAT_DIM" --seed 1 --memory 4G -o "$W/big.tmag"
  grep -E '^  (nodes|edges|memory budget|seconds)' "$W/gen-capped.out" | sed 's/^/  /'
  echo "  graph file $(stat -c %s "$W/big.tmag") bytes; machine memory $(free -b | awk '/Mem:/ {print $2}') bytes; cap $CAP"
  measure partition-capped prlimit --data="$CAP" "$T" partition "$W/big.tmag" --scheme random --shards 4 --seed 1 \
    --memory 4G -o "$W/big-4"
  head -n 1 "$W/partition-capped.out" | sed 's/^/  /'
  tail -n 1 "$W/partition-capped.out" | sed 's/^/  /'
  du -sb "$W/big-4" | awk '{printf "  shards %.2f GB\n", $1 / 1e9}'
  [ "${KEEP:-0}" = 1 ] || rm -rf "$W/big.tmag" "$W/big-4"
  ;;
*) echo "ooc.sh: unknown mode $MODE (throughput or big)" >&2; exit 2 ;;
esac
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
