#!/bin/bash
# test_fuzz_wire.sh: builds the libFuzzer target for the meta block and the
# ready record (tests/fuzz/fuzz_job_wire.c) with clang, AddressSanitizer and
# UBSan, and runs it for a fixed 20 s from the seed corpus
# (tests/fuzz/corpus/job/).  New inputs go to a temporary folder; a crash is
# kept as tests/job/fuzz-wire-crash-* in the build folder.
source "$TMA_SRCDIR/tests/lib.sh"
S=$TMA_SRCDIR B=$TMA_BUILDDIR
seeds=$S/tests/fuzz/corpus/job
[ -n "$(ls -A "$seeds" 2>/dev/null)" ] || fail "the seed corpus $seeds is empty"

bin=$TMP_ROOT/fuzz_job_wire
tma_clang fuzz $(pkg-config --cflags libcurl) \
  "$S/tests/fuzz/fuzz_job_wire.c" "$S/job/wire.c" "$S/job/records.c" "$S"/common/*.c \
  $(pkg-config --libs libcjson) -lm -lpthread -o "$bin" 2>"$TMP_ROOT/build.log" ||
  { cat "$TMP_ROOT/build.log" >&2; fail "the fuzz target did not build"; }

mkdir -p "$TMP_ROOT/corpus" "$B/tests/job"
cd "$TMP_ROOT" || hard "cd $TMP_ROOT"
"$bin" -max_total_time=20 -timeout=10 -rss_limit_mb=2048 -max_len=1200 -print_final_stats=1 \
  -artifact_prefix="$B/tests/job/fuzz-wire-" "$TMP_ROOT/corpus" "$seeds" 2>"$TMP_ROOT/fuzz.log"
rc=$?
grep -E "stat::number_of_executed_units|INITED|DONE" "$TMP_ROOT/fuzz.log" >&2
if [ "$rc" -ne 0 ]; then
  tail -n 60 "$TMP_ROOT/fuzz.log" >&2
  fail "the fuzz target found a failure (exit $rc); the input is in $B/tests/job/"
fi
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$TMP_ROOT/fuzz.log")
[ "${runs:-0}" -gt 1000 ] || fail "the fuzzer ran only ${runs:-0} inputs"
echo "fuzz_job_wire: $runs inputs, no failure"
