#!/bin/bash
# bench_ucx_crc.sh: what a CRC32C over every byte costs a plain UCX
# active-message stream on this machine's loopback, and whether folding it
# into UCX's copies (a generic datatype) would be cheaper than a separate
# pass (bench/bench_ucx_crc.c says how each mode works).
#
#   bench/bench_ucx_crc.sh [BUILDDIR] > table.md      (after `make bench`)
#
# Runs, REPEATS times and alternating: mode none, mode pass, and mode fused
# with UCX's default TCP segments and with segments of SEGS (each a value of
# UCX_TCP_TX_SEG_SIZE and UCX_TCP_RX_SEG_SIZE), and prints the best and
# worst MiB/s and the CPU seconds per GiB of each side (of the best run).
# Environment: UCX_TLS (default tcp), UCX_NET_DEVICES (default lo), REPEATS
# (default 3), BYTES (default 64 MiB), ITERS (default 32), WINDOW (messages in
# flight, default 2), SEGS (default "256k 1m").
set -u
B=${1:-_build}
BIN=$B/bench/bench_ucx_crc
[ -x "$BIN" ] || { echo "no $BIN: build it first (make bench)" >&2; exit 2; }
export UCX_TLS=${UCX_TLS:-tcp} UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
REPEATS=${REPEATS:-3}
BYTES=${BYTES:-67108864}
ITERS=${ITERS:-32}
WINDOW=${WINDOW:-2}
SEGS=${SEGS:-"256k 1m"}
tmp=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# once MODE [SEG] -> "MiB/s cpu_send cpu_recv", or "0 0 0" when the run failed
once() {
  local mode=$1 seg=${2:-} port out recv
  for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 20000))
    ( [ -n "$seg" ] && export UCX_TCP_TX_SEG_SIZE=$seg UCX_TCP_RX_SEG_SIZE=$seg
      exec "$BIN" --listen "$port" --mode "$mode" --bytes "$BYTES" --iters "$ITERS" --window "$WINDOW" ) \
      >"$tmp/srv.out" 2>"$tmp/srv.err" &
    pid=$!
    out=""
    for _ in $(seq 50); do
      out=$( [ -n "$seg" ] && export UCX_TCP_TX_SEG_SIZE=$seg UCX_TCP_RX_SEG_SIZE=$seg
             timeout 300 "$BIN" --connect "127.0.0.1:$port" --mode "$mode" --bytes "$BYTES" \
               --iters "$ITERS" --window "$WINDOW" 2>>"$tmp/cli.err")
      [ -n "$out" ] && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    wait "$pid"
    local src=$?
    pid=""
    recv=$(awk '/^cpu_recv/{print $2}' "$tmp/srv.out")
    if [ -n "$out" ] && [ "$src" = 0 ] && [ -n "$recv" ]; then
      echo "$out" | awk -v r="$recv" '{for (i = 1; i < NF; i++) {if ($i == "MiBps") m = $(i + 1); if ($i == "cpu_send") c = $(i + 1)} print m, c, r}'
      return
    fi
    [ -n "$out" ] && { cat "$tmp/srv.err" >&2; break; } # it ran and failed: do not retry
  done
  echo "0 0 0"
}

echo "UCX_TLS=$UCX_TLS UCX_NET_DEVICES=$UCX_NET_DEVICES, $(nproc) cores, $(ucx_info -v | sed -n 's/# Version //p' | head -n1), $BYTES-byte messages x $ITERS, $WINDOW in flight, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| mode | MiB/s, best (worst) of $REPEATS | sender core-s/GiB | receiver core-s/GiB |"
echo "|---|---:|---:|---:|"
runs=("none" "pass" "fused")
for s in $SEGS; do runs+=("fused $s"); done
declare -A best low cs cr
for r in "${runs[@]}"; do best[$r]=0 low[$r]=1e30 cs[$r]=0 cr[$r]=0; done
for _ in $(seq "$REPEATS"); do
  for r in "${runs[@]}"; do
    read -r m a c < <(once $r)
    if awk -v m="$m" -v b="${best[$r]}" 'BEGIN{exit !(m > b)}'; then best[$r]=$m cs[$r]=$a cr[$r]=$c; fi
    if awk -v m="$m" -v l="${low[$r]}" 'BEGIN{exit !(m < l)}'; then low[$r]=$m; fi
  done
done
for r in "${runs[@]}"; do
  label=$r
  [ "$r" = fused ] && label="fused, UCX's default segments"
  case $r in "fused "*) label="fused, segments of ${r#fused }";; esac
  printf "| %s | %.0f (%.0f) | %.2f | %.2f |\n" "$label" "${best[$r]}" "${low[$r]}" "${cs[$r]}" "${cr[$r]}"
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
