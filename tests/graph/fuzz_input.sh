#!/bin/bash
# fuzz_input.sh: builds the libFuzzer target for the importers' parsers (npz
# reader, text/gzip line reader and field parsers) with clang
# (-fsanitize=fuzzer,address,undefined) and runs it for TMA_FUZZ_SECONDS
# (default 15) from the seed corpus in tests/fuzz/corpus/graph.  New inputs go
# to a temporary folder, so the committed corpus is never modified.  A crash,
# leak or failed invariant fails the test; the input is kept.
. "$TMA_SRCDIR/tests/lib.sh"

S=$TMA_SRCDIR
secs=${TMA_FUZZ_SECONDS:-15}
exe=$TMP_ROOT/fuzz_graph_input

# shellcheck disable=SC2046
tma_clang fuzz \
  "$S/tests/fuzz/fuzz_graph_input.c" "$S/graph/npz.c" "$S/graph/text.c" "$S"/common/*.c \
  -o "$exe" $(pkg-config --libs libcjson) -lz -lm -lpthread || fail "building the fuzz target failed"

mkdir -p "$TMP_ROOT/corpus" "$TMP_ROOT/crash"
TMPDIR=$TMP_ROOT "$exe" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 -print_funcs=0 \
  -artifact_prefix="$TMP_ROOT/crash/" "$TMP_ROOT/corpus" "$S/tests/fuzz/corpus/graph" \
  >"$TMP_ROOT/fuzz.log" 2>&1
rc=$?
tail -n 12 "$TMP_ROOT/fuzz.log"
if [ "$rc" -ne 0 ]; then
  keep=${TMPDIR:-/tmp}/tma-fuzz-graph-crash.$$
  cp -r "$TMP_ROOT/crash" "$keep" 2>/dev/null
  fail "the fuzz target failed (exit $rc); crashing input kept in $keep"
fi
grep -q "Done .* runs in" "$TMP_ROOT/fuzz.log" || fail "the fuzzer did not finish its run"
exit 0
