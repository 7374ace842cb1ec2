#!/bin/bash
# test_npz_formats.sh: .npz files as PyG, scipy and DGL users write them,
# made at test time by numpy and scipy (tests/graph/make_formats.py): scipy's
# save_npz in csr, csc and coo, PyG-style edge_index / x / y, Cora's arrays
# re-saved deflated; each stored and deflated.  Each imports to exactly the
# .tmag of an edge list written from the same arrays.  Broken files
# (corrupt or truncated deflate streams, bad CRC, wrong dtypes, mismatched
# shapes, unknown arrays) make `tma import` exit 1 naming the array at fault,
# and write nothing.
. "$TMA_SRCDIR/tests/lib.sh"

PY=/usr/bin/python3
need_py "$PY" numpy python3-numpy
need_py "$PY" scipy.sparse python3-scipy
"$PY" "$TMA_SRCDIR/tests/graph/make_formats.py" "$TMP_ROOT/f" "$TMA_FIXTURES/cora/cora.npz" ||
  hard "make_formats.py failed"
cd "$TMP_ROOT" || hard "cd"

n=0
for d in f/good/*/; do
  name=$(basename "$d")
  ref=$d/ref
  [ "$name" = cora-deflated ] && ref=$TMA_FIXTURES/cora/cora.npz
  "$TMA_BIN" import "$d/g.npz" -o "$name.tmag" --negatives 5 --seed 3 > "$name.out" 2>&1 ||
    { cat "$name.out" >&2; fail "$name: import failed"; }
  grep -q '(npz layout)' "$name.out" || fail "$name: $(cat "$name.out")"
  "$TMA_BIN" import "$ref" -o "$name.ref.tmag" --negatives 5 --seed 3 > "$name.ref.out" 2>&1 ||
    { cat "$name.ref.out" >&2; fail "$name: import of the reference failed"; }
  cmp -s "$name.tmag" "$name.ref.tmag" ||
    fail "$name: the .npz and the edge list of the same arrays give different graphs: $(cat "$name.out" "$name.ref.out")"
  n=$((n + 1))
done
[ "$n" -ge 11 ] || fail "only $n good cases"
# A check that can fail: the graphs differ from one another where the
# arrays do (with features and labels, without; one edge fewer).
! cmp -s pyg-stored.tmag scipy-csr-stored.tmag || fail "PyG and scipy files gave the same graph"
! cmp -s scipy-csr-stored.tmag scipy-explicit-zero.tmag || fail "the explicit zeros were read as an edge"
[ "$(json <("$TMA_BIN" info pyg-deflated.tmag --json) 'd["nodes"], d["edges"], d["feature_dim"], d["has_labels"]')" = \
  "300 1200 16 True" ] || fail "pyg-deflated: $("$TMA_BIN" info pyg-deflated.tmag --json)"
[ "$(json <("$TMA_BIN" info scipy-coo-deflated.tmag --json) 'd["nodes"], d["edges"], d["has_labels"]')" = \
  "300 1200 False" ] || fail "scipy-coo-deflated: $("$TMA_BIN" info scipy-coo-deflated.tmag --json)"
echo "ok: $n good files"

n=0
for d in f/bad/*/; do
  name=$(basename "$d")
  mkdir -p "out-$name"
  expect_fail 1 "$(head -n 1 "$d/expect")" -- "$TMA_BIN" import "$d/g.npz" -o "out-$name/g.tmag"
  [ -z "$(ls -A "out-$name")" ] || fail "$name: files left behind: $(ls -A "out-$name")"
  n=$((n + 1))
done
[ "$n" -ge 18 ] || fail "only $n bad cases"
echo "ok: $n bad files"
