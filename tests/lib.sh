# lib.sh: helpers for tma's shell tests (sourced).  Runs under tests/harness.sh,
# which sets TMA_BIN, TMA_DATASETS, TMA_ETCD and friends.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
hard() { echo "ERROR: $*" >&2; exit 99; }

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
