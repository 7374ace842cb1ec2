#!/bin/bash
# fuzz_frame.sh: builds the libFuzzer target for the transport's frame and
# hello decoders and the hello's MAC check with clang, ASan and UBSan, and
# runs it (tma_fuzz, tests/lib.sh) from the seed corpus in
# tests/fuzz/corpus/transport.
. "$TMA_SRCDIR/tests/lib.sh"

S=$TMA_SRCDIR
exe=$TMP_ROOT/fuzz_transport_frame
# shellcheck disable=SC2046
tma_clang fuzz \
  "$S/tests/fuzz/fuzz_transport_frame.c" "$S/transport/frame.c" "$S/transport/auth.c" "$S/common/crc32c.c" \
  "$S/common/log.c" "$S/common/status.c" $(pkg-config --cflags --libs libcrypto) \
  -o "$exe" -lpthread || fail "building the fuzz target failed"
tma_fuzz transport-frame "$exe" "$S/tests/fuzz/corpus/transport" -max_len=2048
