#!/bin/bash
# test_ogb_split.sh: `tma import` of an OGB link dataset with an official
# split (raw/ + split/time/*.pt, the ogbl-citation2 layout) keeps the split
# and every per-edge negative exactly as given (no re-split, no 2,000 cap),
# through tma-ogb-split from the build tree and from an install-like bin/;
# tma train and tma eval rank with those negatives and report the tie rule
# and Hits@K; --resplit keeps the old behaviour; and every kind of bad split
# is refused with an error naming it, writing nothing.  The dataset is written here with
# torch (tests/graph/ogb_fixture.py).
. "$TMA_SRCDIR/tests/lib.sh"
PY=${TMA_TORCH_PYTHON:-/usr/bin/python3}
"$PY" -c 'import torch, numpy' 2>/dev/null ||
  skip "no python3 with torch and numpy (Debian python3-torch, .ci/packages-test): the fixture's .pt files need it"
export TMA_PYTHON=$PY
FX=$TMA_SRCDIR/tests/graph/ogb_fixture.py
T=$TMA_BIN
cd "$TMP_ROOT" || hard "cd"

"$PY" "$FX" make ds || hard "writing the fixture"
"$T" import ds -o g.tmag > import.out || fail "import of the OGB fixture"
grep -q '^  split  *official, as given in ds/split/time' import.out || fail "the report does not say the split is official: $(cat import.out)"
grep -q '^  validation edges  *2050$' import.out && grep -q '^  test edges  *300$' import.out ||
  fail "evaluation edge counts: $(cat import.out)"
"$PY" "$FX" check ds g.tmag || fail "the .tmag does not carry the split as given"
"$T" info g.tmag --json > info.json || fail "tma info"
[ "$(json info.json 'd["split"], d["val_edges"], d["test_edges"], d["negatives_per_edge"], d["train_edges"]')" = \
  "given 2050 300 1000 9000" ] || fail "tma info: $(cat info.json)"

# Training and evaluation take the given negatives (some are the head, its neighbours or the
# positive itself) and report the tie rule and Hits@K they used.
echo '{"model": {"hidden": 16, "decoder_hidden": 16}, "train": {"batch_size": 64}, "eval": {"ties": "mean", "hits": [1, 10]}}' > small.json
"$T" train g.tmag --config small.json --steps 3 -o run -q > /dev/null || fail "tma train on the given split"
[ "$(json run/result.json 'd["ties"], "test_hits@1" in d, "test_hits@10" in d')" = "mean True True" ] ||
  fail "result.json: $(cat run/result.json)"
tail -n 1 run/metrics.jsonl > last.json
[ "$(json last.json 'd["ties"], "val_hits@10" in d')" = "mean True" ] || fail "metrics line: $(cat last.json)"
"$T" eval g.tmag run/best.tmaw --ties mean --json > eval.json || fail "tma eval"
[ "$(json eval.json '"%.6f" % d["mrr"], d["edges"], d["ties"]')" = "$(json run/result.json '"%.6f" % d["test_mrr"]') 300 mean" ] ||
  fail "tma eval disagrees with result.json: $(cat eval.json)"

# Installed layout: tma and tma-ogb-split side by side in one bin/ folder.
mkdir -p inst/bin && cp "$T" "$TMA_BUILDDIR/tma-ogb-split" inst/bin/ || hard "copying the programs"
inst/bin/tma import ds -o inst.tmag > /dev/null || fail "import with the tool beside an installed tma"
cmp -s g.tmag inst.tmag || fail "the installed tool gave another file"
# ... and without it: the error names the converter and what to do.
rm inst/bin/tma-ogb-split
expect_fail 1 'tma-ogb-split, which was not found.*TMA_OGB_SPLIT' -- inst/bin/tma import ds -o none.tmag
TMA_OGB_SPLIT=$TMP_ROOT/nowhere expect_fail 1 "not an executable file at $TMP_ROOT/nowhere" -- "$T" import ds -o none.tmag

# --resplit: tma's own seeded split, as before (at most 2,000 a split).
"$T" import ds -o re.tmag --resplit --negatives 5 > re.out || fail "import --resplit"
grep -q '^  split  *drawn (seed 0)' re.out && grep -q '^  validation edges  *450$' re.out ||
  fail "--resplit report: $(cat re.out)"
expect_fail 1 'official split: --val, --test and --negatives do not apply' -- "$T" import ds -o none.tmag --val 100
expect_fail 1 'official split: --val, --test and --negatives do not apply' -- "$T" import ds -o none.tmag --negatives 10
expect_fail 1 "no split named 'other'" -- "$T" import ds -o none.tmag --split other
mkdir ds/split/second
expect_fail 1 'holds several splits .*--split NAME' -- "$T" import ds -o none.tmag
"$T" import ds -o named.tmag --split time > /dev/null || fail "--split time"
rmdir ds/split/second

# torch missing for the interpreter that runs the converter.
printf '#!/bin/sh\nexec %s -S "$@"\n' "$PY" > nosite && chmod +x nosite
TMA_PYTHON=$TMP_ROOT/nosite expect_fail 1 'needs PyTorch.*install the Debian package python3-torch' -- "$T" import ds -o none.tmag
tail -n 1 "$TMP_ROOT/stderr.$$" | grep -qi "not found" &&
  { cat "$TMP_ROOT/stderr.$$"; fail "the last line says 'not found' for a missing Python module"; }
# Without TMA_PYTHON the converter runs under the Python configure found with
# torch (its #! line), also when the python3 on the PATH has none.
case ${TMA_TORCH_PYTHON:-} in
  /*) mkdir -p nopy && cp nosite nopy/python3
      env -u TMA_PYTHON PATH="$TMP_ROOT/nopy:$PATH" "$T" import ds -o bypath.tmag > /dev/null 2> bypath.err ||
        { cat bypath.err; fail "the converter did not run under configure's $TMA_TORCH_PYTHON"; } ;;
  *) echo "configure found no Python with torch: the converter's #! line is not checked" ;;
esac

# Bad splits: each refused, naming the file and what is wrong.
bad() {
  local defect=$1 pat=$2
  rm -rf "bad-$defect"
  "$PY" "$FX" make "bad-$defect" "$defect" || hard "writing the $defect fixture"
  expect_fail 1 "$pat" -- "$T" import "bad-$defect" -o "bad-$defect.tmag"
  [ ! -e "bad-$defect.tmag" ] || fail "$defect: a file was written"
}
bad float-dtype 'valid.pt: .source_node. has dtype torch.float32, expected an integer dtype'
bad neg-1d "test.pt: 'target_node_neg' has shape \(300,\), expected 2 dimension"
bad neg-rows "test.pt: 'target_node_neg' has shape \(299, 1000\), expected \(300, K\)"
bad id-range "test.pt: 'target_node'\[5\] = 3004 is outside the graph's node ids \[0, 3000\)"
bad negative-id "valid.pt: 'target_node_neg'\[\(3, 9\)\] = -2 is outside"
bad k-differs 'valid.pt has 1000 negatives per edge and test.pt 500'
bad train-edge 'validation edge .* is also a training edge'
bad no-neg-key "test.pt: no 'target_node_neg' in it"
bad missing-test 'test.pt: missing'
bad not-torch 'valid.pt: not a readable torch.save file'
echo "OGB split: 2050 + 300 evaluation edges and their 1000 negatives each kept exactly; bad splits refused"
