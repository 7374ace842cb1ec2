#!/bin/bash
# bench_transport.sh: tma transport throughput against `ucx_perftest -t tag_bw`,
# side by side in one invocation, on this machine's loopback.
#
#   bench/bench_transport.sh [BUILDDIR] > table.md
#
# For each message size (1 MiB .. 1 GiB) it runs, REPEATS times and
# alternating, ucx_perftest tag_bw (server and client, same UCX_TLS and
# UCX_NET_DEVICES) in both of its wait modes -- busy polling (its default)
# and sleeping on events (-E sleep, how tma's progress thread waits) -- and
# bench/bench_transport (one receiver process, one sender process), and
# prints the best MiB/s of each (and the worst, in brackets: the spread on a
# shared machine); the ratio is best against the better perftest's best.
# tma's number includes what perftest does not do: a CRC32C over every
# message on both sides.  tma's receiver takes pooled buffers (4 untimed
# messages first, so the pool is warm: fresh pages cost ~13 us each here).
# Environment: UCX_TLS (default tcp), UCX_NET_DEVICES (default lo), REPEATS
# (default 3), SIZES (bytes, space separated), THREADS (tma sender threads,
# default 1), TOTAL (bytes per run, default 4 GiB), UNTOUCHED (1: tma's send
# buffer left unwritten, as perftest leaves its own; see bench_transport.c).
set -u
B=${1:-_build}
BW=$B/bench/bench_transport
[ -x "$BW" ] || { echo "no $BW: build first (make)" >&2; exit 2; }
command -v ucx_perftest >/dev/null || { echo "ucx_perftest is missing (apt-get install ucx-utils)" >&2; exit 2; }
export UCX_TLS=${UCX_TLS:-tcp} UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
export TMA_JOB_TOKEN=bench-token
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-1}
TOTAL=${TOTAL:-4294967296}
SIZES=${SIZES:-"1048576 4194304 16777216 67108864 268435456 1073741824"}
tmp=$(mktemp -d)
srv_pid=""
cleanup() {
  [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null
  exec 9>&- 2>/dev/null
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# The tma receiver: serves until its stdin (fd 9 here) closes.
mkfifo "$tmp/in"
"$BW" --listen 127.0.0.1:0 <"$tmp/in" >"$tmp/srv.out" 2>"$tmp/srv.err" &
srv_pid=$!
exec 9>"$tmp/in"
for _ in $(seq 100); do grep -q ADDR "$tmp/srv.out" && break; sleep 0.1; done
addr=$(awk '/^ADDR/{print $2}' "$tmp/srv.out")
[ -n "$addr" ] || { cat "$tmp/srv.err" >&2; echo "the tma receiver did not start" >&2; exit 1; }

# Which UCX transport carries tma's data.
lanes=$(TMA_LOG_LEVEL=debug "$BW" --connect "$addr" --bytes 4096 --iters 1 --warmup 0 2>&1 |
        sed -n 's/.*lanes: //p' | grep -v ' cm ' | head -n 1)

perftest_once() { # size iters mode -> MiB/s
  local port pid out
  for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 20000))
    ucx_perftest -p "$port" -E "$3" >"$tmp/pf.srv" 2>&1 &
    pid=$!
    out=""
    for _ in $(seq 50); do
      out=$(ucx_perftest 127.0.0.1 -p "$port" -t tag_bw -s "$1" -n "$2" -w 2 -E "$3" 2>/dev/null |
            awk '/^Final:/{print $7}')
      [ -n "$out" ] && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    [ -n "$out" ] && { echo "$out"; return; }
  done
  echo 0
}

tma_once() { # size iters -> MiB/s (the line also has both sides' CPU seconds: kept in $tmp/tma.log)
  "$BW" --connect "$addr" --bytes "$1" --iters "$2" --warmup 4 --threads "$THREADS" \
    ${UNTOUCHED:+--untouched "$UNTOUCHED"} 2>>"$tmp/cli.err" |
    tee -a "$tmp/tma.log" | awk '{for (i = 1; i < NF; i++) if ($i == "MiBps") print $(i + 1)}'
}

max() { awk -v a="$1" -v b="$2" 'BEGIN{print (a > b) ? a : b}'; }
min() { awk -v a="$1" -v b="$2" 'BEGIN{print (a < b) ? a : b}'; }

echo "UCX_TLS=$UCX_TLS UCX_NET_DEVICES=$UCX_NET_DEVICES, $(nproc) cores, $(ucx_info -v | sed -n 's/# Version //p' | head -n1), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tma data lane: ${lanes:-unknown}"
echo
echo "| message | perftest tag_bw, polling MiB/s, best (worst) of $REPEATS | perftest tag_bw, -E sleep MiB/s, best (worst) | tma transport MiB/s, best (worst) | tma / best perftest (bests) |"
echo "|---:|---:|---:|---:|---:|"
for s in $SIZES; do
  iters=$((TOTAL / s))
  [ "$iters" -gt 1000 ] && iters=1000
  [ "$iters" -lt 4 ] && iters=4
  best_poll=0 low_poll=1e30
  best_sleep=0 low_sleep=1e30
  best_tma=0 low_tma=1e30
  for _ in $(seq "$REPEATS"); do
    v=$(perftest_once "$s" "$iters" poll)
    best_poll=$(max "$best_poll" "$v") low_poll=$(min "$low_poll" "$v")
    v=$(perftest_once "$s" "$iters" sleep)
    best_sleep=$(max "$best_sleep" "$v") low_sleep=$(min "$low_sleep" "$v")
    v=$(tma_once "$s" "$iters")
    v=${v:-0}
    best_tma=$(max "$best_tma" "$v") low_tma=$(min "$low_tma" "$v")
  done
  awk -v s="$s" -v p="$best_poll" -v q="$best_sleep" -v t="$best_tma" \
      -v lp="$low_poll" -v lq="$low_sleep" -v lt="$low_tma" 'BEGIN{
    if (s >= 1073741824) l = sprintf("%d GiB", s / 1073741824); else l = sprintf("%d MiB", s / 1048576);
    b = p > q ? p : q;
    printf "| %s | %.0f (%.0f) | %.0f (%.0f) | %.0f (%.0f) | %.2f |\n", l, p, lp, q, lq, t, lt, (b > 0 ? t / b : 0) }'
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tma CPU seconds per run (sender, receiver), last run of each size:"
awk '{print "  " $2 " bytes x " $4 ": " $10 " s, " $12 " s"}' "$tmp/tma.log" | awk '{k = $1} {last[k] = $0} END {for (k in last) print last[k]}' | sort -n -k1
