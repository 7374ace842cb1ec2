#!/bin/bash
# bench_kv.sh: latency of the tma etcd client next to etcd's own tooling,
# in one run, against one private single-member etcd (data folder on tmpfs
# unless BENCH_TMPDIR says otherwise).
#
#   cd _build && make bench/bench_kv && ../bench/bench_kv.sh [N]      (N: requests per row, default 2000)
#
# What is compared, and how:
#  1. bench/bench_kv: this client (libcurl + cJSON over etcd's JSON gateway),
#     one request at a time: put, get, txn (compare-and-swap), prefix range
#     of 100 keys, and watch delivery (issuing a put -> the event in the
#     callback), with `etcdctl watch` (gRPC, one process) timed on the very
#     same puts (issuing the put -> its key line read from etcdctl's stdout).
#  2. the curl program, one process, N requests with the same JSON bodies to
#     the same gateway over one kept-alive connection (curl's own
#     %{time_total} per request): the floor for any gateway client.
#  3. `etcdctl check perf --load=s` (gRPC, 50 clients, about 150 puts/s for
#     60 s): etcd's own put check; it reports throughput, slowest request and
#     standard deviation only, so it is context, not a row-by-row match.
set -u
N=${1:-2000}
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${TMA_BUILDDIR:-$PWD}
BENCH=$BUILD/bench/bench_kv
[ -x "$BENCH" ] || { echo "build it first: make bench/bench_kv (in the build folder)" >&2; exit 2; }
export TMPDIR=${BENCH_TMPDIR:-/dev/shm}
export TMA_ETCD=${TMA_ETCD:-$(command -v etcd)}
export TMA_ETCDCTL=${TMA_ETCDCTL:-$(command -v etcdctl)}
command -v curl >/dev/null || { echo "the curl program is needed (apt-get install curl)" >&2; exit 2; }
source "$SRC/tests/lib.sh"

etcd_start 1
E=${ETCD_URLS[0]}
echo "# $(date -u +%F) $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo "# $("$TMA_ETCD" --version | head -1), $(curl --version | head -1 | cut -d' ' -f1-2), data on $TMPDIR, N=$N"
echo
echo "## 1. tma kv client (and etcdctl watch on the same puts)"
"$BENCH" --endpoints "$E" -n "$N" --etcdctl "$TMA_ETCDCTL" || fail "bench_kv failed"

b() { printf %s "$1" | base64 -w0; }
VAL=$(b "$(printf 'v%.0s' $(seq 64))")
# curl_row NAME PATH BODY-TEMPLATE: N requests (%d in the body becomes i).
curl_row() {
  local name=$1 path=$2 tmpl=$3 cfg=$TMP_ROOT/curl.cfg i
  : >"$cfg"
  for ((i = 0; i < N; i++)); do
    local body=${tmpl//@I@/$(b "/bench/curl/$i")}
    ((i)) && echo next >>"$cfg"
    printf 'url = "%s%s"\ndata = "%s"\noutput = "/dev/null"\nwrite-out = "%%{time_total}\\n"\n' \
      "$E" "$path" "${body//\"/\\\"}" >>"$cfg"
  done
  curl -s -K "$cfg" | sort -g | awk -v name="$name" '
    { v[NR] = $1 * 1e6; s += $1 * 1e6 }
    END { printf "%-26s %6d %9.1f %9.1f %9.1f %9.1f %9.1f\n", name, NR, s / NR, v[int(NR * 0.5) + 1],
          v[int(NR * 0.9) + 1], v[int(NR * 0.99) + 1], v[NR] }'
}
echo
echo "## 2. curl program, one process, same JSON, one kept-alive connection"
printf "%-26s %6s %9s %9s %9s %9s %9s\n" "operation (µs)" n mean p50 p90 p99 max
curl_row "put (64 B value)" /v3/kv/put "{\"key\":\"@I@\",\"value\":\"$VAL\"}"
curl_row "get (one key)" /v3/kv/range "{\"key\":\"@I@\"}"
curl -s "$E/v3/kv/put" -d "{\"key\":\"$(b /bench/cas)\",\"value\":\"$VAL\"}" >/dev/null
curl_row "txn (compare + put)" /v3/kv/txn "{\"compare\":[{\"target\":\"VERSION\",\"result\":\"GREATER\",\"key\":\"$(b /bench/cas)\",\"version\":\"0\"}],\"success\":[{\"request_put\":{\"key\":\"$(b /bench/cas)\",\"value\":\"$VAL\"}}]}"
curl_row "range (prefix, 100 keys)" /v3/kv/range "{\"key\":\"$(b /bench/curl/)\",\"range_end\":\"$(b /bench/curl0)\",\"limit\":\"100\"}"

echo
echo "## 3. etcdctl check perf --load=s (gRPC, 50 clients, 60 s)"
ETCDCTL_API=3 "$TMA_ETCDCTL" --endpoints "$E" check perf --load=s --prefix=/bench-perf/ --auto-compact 2>&1 |
  grep -E "Throughput|Slowest|Stddev|PASS|FAIL" | sed 's/^/    /'
