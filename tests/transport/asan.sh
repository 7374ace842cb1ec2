#!/bin/bash
# asan.sh: builds the transport's integration tests with AddressSanitizer and
# its leak checker (clang -fsanitize=address) and runs them: the 100
# connect/close cycles, the round trips and bad frames, and the SIGKILL
# tests.  Any invalid access or leaked byte fails the test.  The peer
# processes are the ordinary build's tests/transport/transport_peer.
. "$TMA_SRCDIR/tests/lib.sh"

S=$TMA_SRCDIR
cflags="$(pkg-config --cflags ucx)"
libs="$(pkg-config --libs ucx libcjson libcrypto) -lpthread -lm"
cd "$TMP_ROOT" || hard "no temporary folder"
# shellcheck disable=SC2086
tma_clang asan $cflags -c "$S"/transport/*.c "$S"/common/*.c \
  "$S/tests/tma_test.c" "$S/tests/transport/peer_proc.c" || fail "ASan build failed"
# An archive, so that only what the tests use is linked (common/ may grow
# files that need other libraries).
ar rcs libtma_asan.a ./*.o || fail "ar failed"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
for t in test_transport_cycles test_transport test_transport_kill; do
  # shellcheck disable=SC2086
  tma_clang asan $cflags -o "$t" "$S/tests/transport/$t.c" libtma_asan.a $libs || fail "ASan build of $t failed"
  start=$SECONDS
  "./$t" >"$t.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then
    grep -v ' INFO ' "$t.log" | tail -n 60 >&2
    fail "$t under AddressSanitizer: exit $rc"
  fi
  echo "$t under AddressSanitizer: passed in $((SECONDS - start)) s"
done
exit 0
