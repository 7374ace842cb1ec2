# lib.sh: helpers for tma's shell tests (sourced).  Runs under tests/harness.sh,
# which sets TMA_BIN, TMA_SRCDIR, TMA_ETCD and friends.
set -u
# Once per test: sourced again (dist_lib.sh and fault_lib.sh source it too)
# it would make a second TMP_ROOT, leaving the first behind, and forget the
# processes tracked so far.
[ -z "${_tma_lib_sourced:-}" ] || return 0
_tma_lib_sourced=1
# Graphs kept in the repository (tests/data/README.md): tests read these, never
# the optional datasets folder ($TMA_DATASETS, for make check-datasets only).
TMA_FIXTURES=${TMA_SRCDIR:?TMA_SRCDIR is not set: run the test through make check}/tests/data
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
hard() { echo "ERROR: $*" >&2; exit 99; }

# need PROGRAM PACKAGE: a test that runs PROGRAM checks for it first and fails
# with one line naming it and the Debian package that brings it (./check
# installs every package the tests need: .ci/packages, .ci/packages-test).
# PROGRAM may be a path (an empty one: configure found none).
_need_hint="run ./check, which installs every package the tests need, or apt-get install"
need() {
  local prog=$1 pkg=$2
  if [[ $prog == */* ]]; then [ -x "$prog" ] && return 0
  elif [ -n "$prog" ] && command -v "$prog" >/dev/null 2>&1; then return 0
  fi
  fail "this test needs ${3:-$prog} (Debian package $pkg): $_need_hint $pkg"
}
# need_py PYTHON MODULE PACKAGE: the same for a Python module.
need_py() {
  local py=$1 mod=$2 pkg=$3
  [ -n "$py" ] && "$py" -c "import $mod" >/dev/null 2>&1 ||
    fail "this test needs the Python module $mod${py:+ in $py} (Debian package $pkg): $_need_hint $pkg"
}
# Every shell test reads JSON and picks ports with python3.
need python3 python3

TMP_ROOT=$(mktemp -d "${TMPDIR:-/tmp}/tma-test-XXXXXX") || hard "mktemp failed"
_tma_pids=()
_tma_cleanup() {
  local p
  for p in "${_tma_pids[@]:-}"; do
    [ -n "$p" ] && kill -KILL "$p" 2>/dev/null
  done
  wait 2>/dev/null
  [ -n "${TMA_TEST_KEEP:-}" ] || rm -rf "$TMP_ROOT"
}
trap _tma_cleanup EXIT

# track PID: remember a background process so cleanup ends it.
track() { _tma_pids+=("$1"); }

# expect_fail CODE PATTERN -- cmd...: cmd must exit CODE and print PATTERN (grep -E) on stderr.
expect_fail() {
  local code=$1 pat=$2; shift 3
  local err=$TMP_ROOT/stderr.$$ rc
  "$@" >/dev/null 2>"$err"; rc=$?
  [ "$rc" -eq "$code" ] || { cat "$err" >&2; fail "expected exit $code, got $rc: $*"; }
  grep -qE -- "$pat" "$err" || { cat "$err" >&2; fail "stderr of '$*' lacks /$pat/"; }
}

# wait_for SECONDS CMD...: polls CMD until it succeeds or the deadline passes.
wait_for() {
  local secs=$1; shift
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    (( SECONDS >= end )) && return 1
    sleep 0.1
  done
}

# json FILE EXPR: prints a field of a JSON file via python3 (EXPR uses d).
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# ---- etcd (real members on free loopback ports; see also tests/tma_test_etcd.h)
# etcd_start [N]: starts an N-member cluster (default 1) under $TMP_ROOT and
# waits until every member is healthy.  Sets ETCD_ENDPOINTS (comma-separated
# client URLs), ETCD_URLS[i] and ETCD_PIDS[i].  Extra etcd flags may be given
# in the array ETCD_EXTRA_ARGS.  Members are killed by the EXIT trap.
ETCD_URLS=(); ETCD_PIDS=(); ETCD_PEERS=(); ETCD_DIRS=(); ETCD_CLUSTER=""; ETCD_ENDPOINTS=""
ETCD_EXTRA_ARGS=()
_etcd_free_ports() {
  python3 -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}
_etcd_spawn() {
  local i=$1 client=${ETCD_URLS[$1]} peer=${ETCD_PEERS[$1]}
  "${TMA_ETCD:?TMA_ETCD is not set}" --name "m$i" --data-dir "${ETCD_DIRS[$i]}" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "$ETCD_CLUSTER" --initial-cluster-token "tma-test-$$" \
    --initial-cluster-state new --heartbeat-interval 50 --election-timeout 500 \
    --logger zap --log-outputs stderr --log-level warn "${ETCD_EXTRA_ARGS[@]}" \
    >>"${ETCD_DIRS[$i]}.log" 2>&1 &
  ETCD_PIDS[$i]=$!
  track "${ETCD_PIDS[$i]}"
}
_etcd_healthy() {
  ETCDCTL_API=3 "${TMA_ETCDCTL:?TMA_ETCDCTL is not set}" --endpoints "${ETCD_URLS[$1]}" \
    --dial-timeout 1s --command-timeout 1s endpoint health >/dev/null 2>&1
}
_etcd_wait() {
  local i
  for i in "$@"; do
    if ! wait_for 60 _etcd_healthy "$i"; then
      tail -n 40 "${ETCD_DIRS[$i]}.log" >&2
      return 1
    fi
  done
}
etcd_start() {
  local n=${1:-1} i ports
  need "${TMA_ETCD:-}" etcd-server etcd
  need "${TMA_ETCDCTL:-}" etcd-client etcdctl
  ports=($(_etcd_free_ports $((2 * n)))) || hard "no free ports"
  ETCD_URLS=(); ETCD_PEERS=(); ETCD_DIRS=(); ETCD_CLUSTER=""
  for ((i = 0; i < n; i++)); do
    ETCD_URLS[$i]="http://127.0.0.1:${ports[$((2 * i))]}"
    ETCD_PEERS[$i]="http://127.0.0.1:${ports[$((2 * i + 1))]}"
    ETCD_DIRS[$i]="$TMP_ROOT/etcd-m$i"
    ETCD_CLUSTER+="${ETCD_CLUSTER:+,}m$i=${ETCD_PEERS[$i]}"
  done
  ETCD_ENDPOINTS=$(IFS=,; echo "${ETCD_URLS[*]}")
  for ((i = 0; i < n; i++)); do _etcd_spawn "$i"; done
  _etcd_wait $(seq 0 $((n - 1))) || hard "etcd did not become healthy"
}
# etcd_kill I: SIGKILLs member I.
etcd_kill() {
  kill -KILL "${ETCD_PIDS[$1]}" 2>/dev/null
  wait "${ETCD_PIDS[$1]}" 2>/dev/null
  return 0
}
# etcd_restart I: starts member I again on its data folder and ports.
etcd_restart() {
  etcd_kill "$1"
  _etcd_spawn "$1"
  _etcd_wait "$1" || hard "etcd member $1 did not come back"
}
# etcdctl ARGS...: etcdctl against the cluster started by etcd_start.
etcdctl() {
  ETCDCTL_API=3 "${TMA_ETCDCTL:?TMA_ETCDCTL is not set}" --endpoints "$ETCD_ENDPOINTS" "$@"
}

# The one clang rule of the fuzz and ASan builds (tests/*/fuzz*.sh, asan.sh):
#   tma_clang fuzz|asan ARGS...
# runs clang with that kind's sanitizers (fuzz: libFuzzer, ASan and UBSan,
# UBSan fatal; asan: ASan with frame pointers), -g -O1, config.h, every
# source folder and tests/ on the include path and cJSON's flags, then ARGS
# (sources, -c or -o, libraries).  No clang: a hard error naming the package.
tma_clang() {
  local kind=$1 san inc="" d
  shift
  need "${CLANG:-clang}" clang
  case $kind in
  fuzz) san="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined" ;;
  asan) san="-fsanitize=address -fno-omit-frame-pointer" ;;
  *) hard "tma_clang: unknown kind '$kind' (fuzz or asan)" ;;
  esac
  for d in common graph gnn kv transport job fault tests; do inc="$inc -I$TMA_SRCDIR/$d"; done
  # shellcheck disable=SC2086,SC2046
  "${CLANG:-clang}" -g -O1 $san -include "$TMA_BUILDDIR/config.h" -D_GNU_SOURCE -I"$TMA_BUILDDIR" $inc \
    $(pkg-config --cflags libcjson) "$@"
}

#   tma_fuzz NAME EXE SEEDS [LIBFUZZER ARGS...]
# runs the libFuzzer target EXE (built with `tma_clang fuzz`) for
# TMA_FUZZ_SECONDS (default 20) from the seed corpus SEEDS (a folder that
# must not be empty; it is never written: new inputs go to a temporary
# corpus).  A crash, leak, timeout or failed invariant fails the test with
# the log's tail and keeps the input as $TMA_BUILDDIR/tests/fuzz-NAME-*;
# fewer than 1,000 inputs run also fails.
tma_fuzz() {
  local name=$1 exe=$2 seeds=$3 rc runs
  shift 3
  [ -n "$(ls -A "$seeds" 2>/dev/null)" ] || fail "the seed corpus $seeds is empty"
  mkdir -p "$TMP_ROOT/corpus-$name" "$TMA_BUILDDIR/tests"
  (cd "$TMP_ROOT" && TMPDIR=$TMP_ROOT "$exe" -max_total_time="${TMA_FUZZ_SECONDS:-20}" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -print_funcs=0 -artifact_prefix="$TMA_BUILDDIR/tests/fuzz-$name-" \
    "$@" "$TMP_ROOT/corpus-$name" "$seeds") > "$TMP_ROOT/fuzz-$name.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$TMP_ROOT/fuzz-$name.log" >&2
    fail "the fuzz target $name failed (exit $rc); the input is kept in $TMA_BUILDDIR/tests/fuzz-$name-*"
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$TMP_ROOT/fuzz-$name.log")
  [ "${runs:-0}" -gt 1000 ] || { tail -n 20 "$TMP_ROOT/fuzz-$name.log" >&2; fail "the fuzzer $name ran only ${runs:-0} inputs"; }
  echo "fuzz $name: $runs inputs in ${TMA_FUZZ_SECONDS:-20} s, no failure"
}
