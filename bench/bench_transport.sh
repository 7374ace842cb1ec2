#!/bin/bash
# bench_transport.sh: tma transport throughput against `ucx_perftest -t tag_bw`,
# side by side in one invocation, on this machine.
#
#   bench/bench_transport.sh [BUILDDIR] > table.md
#
# For each message size (1 MiB .. 1 GiB) it runs, REPEATS times and
# alternating: ucx_perftest tag_bw (server and client, same UCX_TLS and
# UCX_NET_DEVICES) as shipped, in both of its wait modes -- busy polling (its
# default) and sleeping on events (-E sleep, how tma's progress thread
# waits); ucx_perftest -E sleep again with BUILDDIR/bench/perftest_fill.so
# preloaded, which fills perftest's buffers when they are allocated (as
# shipped, perftest sends a buffer it never wrote: every page is the kernel's
# shared zero page, so its sender never reads memory; tma's sender reads a
# real tensor); and bench/bench_transport (one receiver process, one sender
# process, real values).  It prints the best MiB/s of each (and the worst,
# in brackets: the spread on a shared machine) and two ratios of bests: tma
# against the better perftest as shipped, and tma against perftest with
# data.  tma's number includes what perftest does not do: a CRC32C over
# every message on both sides.  tma's receiver takes pooled buffers (4
# untimed messages first, so the pool is warm: fresh pages cost ~13 us each
# on the development VM).
#
# Where the data travels:
#   LINK unset     loopback (lo): the CPU sets the pace.
#   LINK=veth      a veth pair between two network namespaces made for the run
#                  (receivers in one, senders in the other).
#   LINK=RATE      the same pair, each end shaped by `tc ... tbf rate RATE`
#                  (e.g. 10gbit): a link slower than the CPU, as between machines.
# The namespaces need root, ip and tc; they are removed at exit.
#
# Environment: UCX_TLS (default tcp), UCX_NET_DEVICES (loopback only;
# default lo), REPEATS (default 3), SIZES (bytes, space separated), THREADS
# (tma sender threads, default 1), TOTAL (bytes per run, default 4 GiB),
# UNTOUCHED (1: tma's send buffer left unwritten, as perftest as shipped
# leaves its own; see bench_transport.c), LINK (above).
set -u
B=${1:-_build}
BW=$B/bench/bench_transport
FILL=$(cd "$B/bench" 2>/dev/null && pwd)/perftest_fill.so
[ -x "$BW" ] || { echo "no $BW: build first (make bench)" >&2; exit 2; }
[ -f "$FILL" ] || { echo "no $B/bench/perftest_fill.so: build first (make bench)" >&2; exit 2; }
command -v ucx_perftest >/dev/null || { echo "ucx_perftest is missing (apt-get install ucx-utils)" >&2; exit 2; }
export UCX_TLS=${UCX_TLS:-tcp}
export TMA_JOB_TOKEN=bench-token
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-1}
TOTAL=${TOTAL:-4294967296}
SIZES=${SIZES:-"1048576 4194304 16777216 67108864 268435456 1073741824"}
LINK=${LINK:-}
tmp=$(mktemp -d)
srv_pid=""
ns_rx=tmabench-rx$$ ns_tx=tmabench-tx$$
cleanup() {
  [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null
  exec 9>&- 2>/dev/null
  if [ -n "$LINK" ]; then
    for ns in "$ns_rx" "$ns_tx"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null; done
  fi
  wait 2>/dev/null
  if [ -n "$LINK" ]; then
    ip netns del "$ns_rx" 2>/dev/null
    ip netns del "$ns_tx" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# rx CMD... / tx CMD...: run on the receiving / sending side.
if [ -z "$LINK" ]; then
  export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
  rx_host=127.0.0.1
  rx() { "$@"; }
  tx() { "$@"; }
  where="loopback, UCX_NET_DEVICES=$UCX_NET_DEVICES"
else
  for c in ip tc; do command -v "$c" >/dev/null || { echo "LINK needs $c (apt-get install iproute2)" >&2; exit 2; }; done
  [ "$(id -u)" = 0 ] || { echo "LINK needs root (network namespaces)" >&2; exit 2; }
  ip netns add "$ns_rx" && ip netns add "$ns_tx" || { echo "cannot make network namespaces" >&2; exit 1; }
  ip link add vrx$$ type veth peer name vtx$$ || { echo "cannot make a veth pair" >&2; exit 1; }
  ip link set vrx$$ netns "$ns_rx"
  ip link set vtx$$ netns "$ns_tx"
  ip -n "$ns_rx" addr add 10.201.0.2/24 dev vrx$$
  ip -n "$ns_tx" addr add 10.201.0.1/24 dev vtx$$
  for ns in "$ns_rx" "$ns_tx"; do ip -n "$ns" link set lo up; done
  ip -n "$ns_rx" link set vrx$$ up
  ip -n "$ns_tx" link set vtx$$ up
  if [ "$LINK" != veth ]; then
    for e in "$ns_rx vrx$$" "$ns_tx vtx$$"; do
      set -- $e
      ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$LINK" burst 4mb latency 20ms ||
        { echo "tc refused rate '$LINK' (try e.g. 10gbit)" >&2; exit 2; }
    done
  fi
  rx_host=10.201.0.2
  rx() { ip netns exec "$ns_rx" env UCX_NET_DEVICES=vrx$$ "$@"; }
  tx() { ip netns exec "$ns_tx" env UCX_NET_DEVICES=vtx$$ "$@"; }
  where="a veth pair between two network namespaces$([ "$LINK" != veth ] && echo ", each end shaped to $LINK (tc tbf)")"
fi

source "$(dirname "$0")/transport_lib.sh"

# The tma receiver: serves until its stdin (fd 9 here) closes.
mkfifo "$tmp/in"
rx "$BW" --listen "$rx_host:0" <"$tmp/in" >"$tmp/srv.out" 2>"$tmp/srv.err" &
srv_pid=$!
exec 9>"$tmp/in"
for _ in $(seq 100); do grep -q ADDR "$tmp/srv.out" && break; sleep 0.1; done
addr=$(awk '/^ADDR/{print $2}' "$tmp/srv.out")
[ -n "$addr" ] || { cat "$tmp/srv.err" >&2; echo "the tma receiver did not start" >&2; exit 1; }

# Which UCX transport carries tma's data.
lanes=$(TMA_LOG_LEVEL=debug tx "$BW" --connect "$addr" --bytes 4096 --iters 1 --warmup 0 2>&1 |
        sed -n 's/.*lanes: //p' | grep -v ' cm ' | head -n 1)

perftest_once() { # size iters mode [preload] -> MiB/s (0 when it failed)
  local pre=${4:-} out
  if [ -n "$pre" ]; then pf_srv=(env LD_PRELOAD="$pre"); else pf_srv=(); fi
  pf_cli=("${pf_srv[@]}")
  out=$(perftest_pair "$1" "$2" "$3")
  if [ -n "$out" ] && [ -n "$pre" ] && ! grep -q "perftest_fill: filled [1-9]" "$tmp/pf.err"; then
    echo "perftest_fill.so did not fill perftest's buffers: $(cat "$tmp/pf.err")" >&2
    out=0
  fi
  echo "${out:-0}"
}

tma_once() { # size iters -> MiB/s (the line also has both sides' CPU seconds: kept in $tmp/tma.log)
  tx "$BW" --connect "$addr" --bytes "$1" --iters "$2" --warmup 4 --threads "$THREADS" \
    ${UNTOUCHED:+--untouched "$UNTOUCHED"} 2>>"$tmp/cli.err" |
    tee -a "$tmp/tma.log" | awk '{for (i = 1; i < NF; i++) if ($i == "MiBps") print $(i + 1)}'
}

max() { awk -v a="$1" -v b="$2" 'BEGIN{print (a > b) ? a : b}'; }
min() { awk -v a="$1" -v b="$2" 'BEGIN{print (a < b) ? a : b}'; }

echo "$where; UCX_TLS=$UCX_TLS, $(nproc) cores, $(ucx_info -v | sed -n 's/# Version //p' | head -n1), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tma data lane: ${lanes:-unknown}"
echo
echo "| message | perftest polling | perftest -E sleep | perftest -E sleep, with data | tma | tma / best perftest as shipped | tma / perftest with data |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for s in $SIZES; do
  iters=$((TOTAL / s))
  [ "$iters" -gt 1000 ] && iters=1000
  [ "$iters" -lt 4 ] && iters=4
  best_poll=0 low_poll=1e30
  best_sleep=0 low_sleep=1e30
  best_fill=0 low_fill=1e30
  best_tma=0 low_tma=1e30
  for _ in $(seq "$REPEATS"); do
    v=$(perftest_once "$s" "$iters" poll)
    best_poll=$(max "$best_poll" "$v") low_poll=$(min "$low_poll" "$v")
    v=$(perftest_once "$s" "$iters" sleep)
    best_sleep=$(max "$best_sleep" "$v") low_sleep=$(min "$low_sleep" "$v")
    v=$(perftest_once "$s" "$iters" sleep "$FILL")
    best_fill=$(max "$best_fill" "$v") low_fill=$(min "$low_fill" "$v")
    v=$(tma_once "$s" "$iters")
    v=${v:-0}
    best_tma=$(max "$best_tma" "$v") low_tma=$(min "$low_tma" "$v")
  done
  awk -v s="$s" -v p="$best_poll" -v q="$best_sleep" -v f="$best_fill" -v t="$best_tma" \
      -v lp="$low_poll" -v lq="$low_sleep" -v lf="$low_fill" -v lt="$low_tma" 'BEGIN{
    if (s >= 1073741824) l = sprintf("%d GiB", s / 1073741824); else l = sprintf("%d MiB", s / 1048576);
    b = p > q ? p : q;
    printf "| %s | %.0f (%.0f) | %.0f (%.0f) | %.0f (%.0f) | %.0f (%.0f) | %.2f | %.2f |\n",
      l, p, lp, q, lq, f, lf, t, lt, (b > 0 ? t / b : 0), (f > 0 ? t / f : 0) }'
done
echo
echo "MiB/s, best (worst) of $REPEATS runs each."
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tma CPU seconds per run (sender, receiver), last run of each size:"
awk '{print "  " $2 " bytes x " $4 ": " $10 " s, " $12 " s"}' "$tmp/tma.log" | awk '{k = $1} {last[k] = $0} END {for (k in last) print last[k]}' | sort -n -k1
