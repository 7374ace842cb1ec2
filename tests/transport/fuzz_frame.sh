#!/bin/bash
# fuzz_frame.sh: builds the libFuzzer target for the transport's frame and
# hello decoders and the hello's MAC check with clang (-fsanitize=fuzzer,address,undefined) and runs it
# for TMA_FUZZ_SECONDS (default 20) from the seed corpus in
# tests/fuzz/corpus/transport.  New inputs go to a temporary folder, so the
# committed corpus is never modified.  A crash, leak or failed invariant
# fails the test; the input that caused it is kept in the test's log folder.
. "$TMA_SRCDIR/tests/lib.sh"

S=$TMA_SRCDIR
secs=${TMA_FUZZ_SECONDS:-20}
exe=$TMP_ROOT/fuzz_transport_frame

tma_clang fuzz \
  "$S/tests/fuzz/fuzz_transport_frame.c" "$S/transport/frame.c" "$S/transport/auth.c" "$S/common/crc32c.c" \
  "$S/common/log.c" "$S/common/status.c" $(pkg-config --cflags --libs libcrypto) \
  -o "$exe" -lpthread || fail "building the fuzz target failed"

mkdir -p "$TMP_ROOT/corpus" "$TMP_ROOT/crash"
"$exe" -max_total_time="$secs" -max_len=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$TMP_ROOT/crash/" "$TMP_ROOT/corpus" "$S/tests/fuzz/corpus/transport" \
  >"$TMP_ROOT/fuzz.log" 2>&1
rc=$?
tail -n 15 "$TMP_ROOT/fuzz.log"
if [ "$rc" -ne 0 ]; then
  keep=${TMPDIR:-/tmp}/tma-fuzz-transport-crash.$$
  cp -r "$TMP_ROOT/crash" "$keep" 2>/dev/null
  fail "the fuzz target failed (exit $rc); crashing input kept in $keep"
fi
grep -q "Done .* runs in" "$TMP_ROOT/fuzz.log" || fail "the fuzzer did not finish its run"
exit 0
