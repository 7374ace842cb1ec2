#!/bin/bash
# test_fuzz_kv.sh: builds the libFuzzer target for the etcd response parsers
# (tests/kv/fuzz_kv.c) with clang, AddressSanitizer and UBSan, and runs it
# (tma_fuzz, tests/lib.sh) from the seed corpus of real etcd answers
# (tests/fuzz/corpus/kv/).
source "$TMA_SRCDIR/tests/lib.sh"
S=$TMA_SRCDIR
bin=$TMP_ROOT/fuzz_kv
# shellcheck disable=SC2046
tma_clang fuzz $(pkg-config --cflags libcurl) \
  "$S/tests/kv/fuzz_kv.c" "$S/kv/parse.c" "$S"/common/*.c \
  $(pkg-config --libs libcjson) -lm -lpthread -o "$bin" 2>"$TMP_ROOT/build.log" ||
  { cat "$TMP_ROOT/build.log" >&2; fail "the fuzz target did not build"; }
tma_fuzz kv "$bin" "$S/tests/fuzz/corpus/kv"
