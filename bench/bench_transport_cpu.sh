#!/bin/bash
# bench_transport_cpu.sh: CPU seconds per GiB moved (both processes, user +
# system) of the tma transport and of `ucx_perftest -t tag_bw -E sleep`, side
# by side, plus the wall-clock MiB/s of each run.  On a shared machine the
# MiB/s follow whatever CPU the other jobs leave, while the CPU per GiB
# changes much less with the load: it is the figure to compare there.
#
#   bench/bench_transport_cpu.sh BUILDDIR [OTHER_BUILDDIR]
#
# With OTHER_BUILDDIR (for example a build of main) its bench_transport runs
# too, alternating with BUILDDIR's, as "tma (other)".  Whole runs are
# measured, set-up and warm-up included (the same for all: perftest's
# warm-up is 2 messages, tma's 4), so use TOTAL large enough for that to
# matter little.  Environment: UCX_TLS (default tcp), UCX_NET_DEVICES
# (default lo), REPEATS (default 3), SIZES (bytes), TOTAL (bytes per run,
# default 2 GiB), UNTOUCHED (1: tma's send buffer left unwritten, as
# perftest leaves its own; see bench_transport.c).
set -u
B=${1:?usage: bench_transport_cpu.sh BUILDDIR [OTHER_BUILDDIR]}
O=${2:-}
command -v ucx_perftest >/dev/null || { echo "ucx_perftest is missing (apt-get install ucx-utils)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
for d in "$B" ${O:+"$O"}; do
  [ -x "$d/bench/bench_transport" ] || { echo "no $d/bench/bench_transport: build first" >&2; exit 2; }
done
export UCX_TLS=${UCX_TLS:-tcp} UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
export TMA_JOB_TOKEN=bench-token
REPEATS=${REPEATS:-3}
TOTAL=${TOTAL:-2147483648}
SIZES=${SIZES:-"4194304 67108864 1073741824"}
HZ=$(getconf CLK_TCK)
tmp=$(mktemp -d)
srv_pid=""
cleanup() {
  [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null
  exec 9>&- 2>/dev/null
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

source "$(dirname "$0")/transport_lib.sh"

proc_cpu() { # pid -> CPU seconds so far (user + system, all threads)
  awk -v hz="$HZ" '{sub(/^.*\) /, ""); print ($12 + $13) / hz}' "/proc/$1/stat"
}

# One tma run of build $1: prints "MiB/s core-seconds".
tma_once() {
  local bw=$1/bench/bench_transport s=$2 n=$3 addr c0 c1 out
  rm -f "$tmp/in" "$tmp/srv.out"
  mkfifo "$tmp/in"
  "$bw" --listen 127.0.0.1:0 <"$tmp/in" >"$tmp/srv.out" 2>"$tmp/srv.err" &
  srv_pid=$!
  exec 9>"$tmp/in"
  for _ in $(seq 100); do grep -q ADDR "$tmp/srv.out" && break; sleep 0.1; done
  addr=$(awk '/^ADDR/{print $2}' "$tmp/srv.out")
  c0=$(proc_cpu "$srv_pid")
  /usr/bin/time -f "TIME %U %S" -o "$tmp/time" "$bw" --connect "$addr" --bytes "$s" --iters "$n" \
    --warmup 4 ${UNTOUCHED:+--untouched "$UNTOUCHED"} >"$tmp/cli.out" 2>>"$tmp/cli.err"
  c1=$(proc_cpu "$srv_pid")
  exec 9>&-
  wait "$srv_pid" 2>/dev/null
  srv_pid=""
  out=$(awk '{for (i = 1; i < NF; i++) if ($i == "MiBps") print $(i + 1)}' "$tmp/cli.out")
  awk -v m="${out:-0}" -v c0="$c0" -v c1="$c1" '/^TIME/{print m, $2 + $3 + c1 - c0}' "$tmp/time"
}

# One perftest run (-E sleep): prints "MiB/s core-seconds".
rx_host=127.0.0.1
pf_srv=(/usr/bin/time -f "TIME %U %S" -o "$tmp/ptime")
pf_cli=(/usr/bin/time -f "TIME %U %S" -o "$tmp/ctime")
perftest_once() {
  local out
  out=$(perftest_pair "$1" "$2" sleep)
  if [ -z "$out" ]; then
    echo "0 0"
    return
  fi
  cat "$tmp/ptime" "$tmp/ctime" | awk -v m="$out" '/^TIME/{c += $2 + $3} END{print m, c}'
}

echo "UCX_TLS=$UCX_TLS UCX_NET_DEVICES=$UCX_NET_DEVICES, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| message | run | MiB/s | core-s per GiB (both processes) |"
echo "|---:|---|---:|---:|"
for s in $SIZES; do
  n=$((TOTAL / s))
  [ "$n" -gt 1000 ] && n=1000
  [ "$n" -lt 4 ] && n=4
  # GiB each moved, warm-up included.
  gib_pf=$(awk -v s="$s" -v n="$n" 'BEGIN{print s * (n + 2) / 1073741824}')
  gib=$(awk -v s="$s" -v n="$n" 'BEGIN{print s * (n + 4) / 1073741824}')
  label=$(awk -v s="$s" 'BEGIN{if (s >= 1073741824) printf "%d GiB", s / 1073741824; else printf "%d MiB", s / 1048576}')
  for r in $(seq "$REPEATS"); do
    read -r m c < <(perftest_once "$s" "$n")
    awk -v l="$label" -v r="$r" -v m="$m" -v c="$c" -v g="$gib_pf" \
      'BEGIN{printf "| %s | perftest -E sleep #%d | %.0f | %.2f |\n", l, r, m, c / g}'
    read -r m c < <(tma_once "$B" "$s" "$n")
    awk -v l="$label" -v r="$r" -v m="$m" -v c="$c" -v g="$gib" \
      'BEGIN{printf "| %s | tma #%d | %.0f | %.2f |\n", l, r, m, c / g}'
    if [ -n "$O" ]; then
      read -r m c < <(tma_once "$O" "$s" "$n")
      awk -v l="$label" -v r="$r" -v m="$m" -v c="$c" -v g="$gib" \
        'BEGIN{printf "| %s | tma (other) #%d | %.0f | %.2f |\n", l, r, m, c / g}'
    fi
  done
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
