#!/bin/bash
# fuzz_input.sh: builds the libFuzzer target for the importers' parsers (npz
# reader, text/gzip line reader and field parsers) with clang
# (-fsanitize=fuzzer,address,undefined) and runs it (tma_fuzz, tests/lib.sh)
# from the seed corpus in tests/fuzz/corpus/graph.
. "$TMA_SRCDIR/tests/lib.sh"

S=$TMA_SRCDIR
exe=$TMP_ROOT/fuzz_graph_input
# shellcheck disable=SC2046
tma_clang fuzz \
  "$S/tests/fuzz/fuzz_graph_input.c" "$S/graph/npz.c" "$S/graph/text.c" "$S"/common/*.c \
  -o "$exe" $(pkg-config --libs libcjson) -lz -lm -lpthread || fail "building the fuzz target failed"
tma_fuzz graph-input "$exe" "$S/tests/fuzz/corpus/graph" -max_len=4096
