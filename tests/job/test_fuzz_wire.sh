#!/bin/bash
# test_fuzz_wire.sh: builds the libFuzzer target for the meta block and the
# ready record (tests/fuzz/fuzz_job_wire.c) with clang, AddressSanitizer and
# UBSan, and runs it (tma_fuzz, tests/lib.sh) from the seed corpus
# (tests/fuzz/corpus/job/).
source "$TMA_SRCDIR/tests/lib.sh"
S=$TMA_SRCDIR
bin=$TMP_ROOT/fuzz_job_wire
# shellcheck disable=SC2046
tma_clang fuzz $(pkg-config --cflags libcurl) \
  "$S/tests/fuzz/fuzz_job_wire.c" "$S/job/wire.c" "$S/job/records.c" "$S"/common/*.c \
  $(pkg-config --libs libcjson) -lm -lpthread -o "$bin" 2>"$TMP_ROOT/build.log" ||
  { cat "$TMP_ROOT/build.log" >&2; fail "the fuzz target did not build"; }
tma_fuzz job-wire "$bin" "$S/tests/fuzz/corpus/job" -max_len=1200
