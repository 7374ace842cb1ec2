#!/bin/bash
# test_bad_input.sh: every case of the bad-input corpus (tests/graph/bad/<case>/:
# the dataset, an `expect` file with the error as an extended regex, and
# optional extra `args`) makes `tma import` exit 1 with that error on stderr
# and leave nothing behind in the output folder.  Then the usage errors
# (exit 2) of import, gen and partition, and partition's runtime errors.
. "$TMA_SRCDIR/tests/lib.sh"

bad=$TMA_SRCDIR/tests/graph/bad
n=0
for d in "$bad"/*/; do
  name=$(basename "$d")
  pat=$(head -n 1 "$d/expect")
  args=()
  [ -f "$d/args" ] && read -r -a args < "$d/args"
  out=$TMP_ROOT/out-$name
  mkdir -p "$out"
  expect_fail 1 "$pat" -- "$TMA_BIN" import "$d" -o "$out/g.tmag" "${args[@]}"
  # The last line adds no status word that misleads after the error
  # ("not supported by this build" for a Fortran-order array).
  tail -n 1 "$TMP_ROOT/stderr.$$" | grep -q "nothing was written (the error above says why)" ||
    { cat "$TMP_ROOT/stderr.$$"; fail "$name: the last line is not 'nothing was written (the error above says why)'"; }
  [ -z "$(ls -A "$out")" ] || fail "$name: files left behind: $(ls -A "$out")"
  n=$((n + 1))
done
[ "$n" -ge 35 ] || fail "only $n bad-input cases found under $bad"
echo "ok: $n bad-input cases"

out=$TMP_ROOT/out
mkdir -p "$out"
good=$TMA_SRCDIR/tests/graph/data/small-edges
expect_fail 1 'no-such-dataset: no such file or folder' -- "$TMA_BIN" import "$TMP_ROOT/no-such-dataset" -o "$out/g.tmag"
expect_fail 1 'edges\.txt is a file but not a \.npz' -- "$TMA_BIN" import "$good/edges.txt" -o "$out/g.tmag"
expect_fail 1 'several \.npz files' -- "$TMA_BIN" import "$TMA_SRCDIR/tests/graph/data" -o "$out/g.tmag"
[ -z "$(ls -A "$out")" ] || fail "files left behind: $(ls -A "$out")"

# Usage errors name the flag and exit 2.
expect_fail 2 '-o G\.tmag is required' -- "$TMA_BIN" import "$good"
expect_fail 2 '--val: expected a fraction in \[0, 1\) or a whole count' -- "$TMA_BIN" import "$good" -o "$out/g.tmag" --val 1.5
expect_fail 2 '--test: expected a fraction' -- "$TMA_BIN" import "$good" -o "$out/g.tmag" --test -0.1
expect_fail 2 '--val: expected a number' -- "$TMA_BIN" import "$good" -o "$out/g.tmag" --val abc
expect_fail 2 '--negatives: expected a count' -- "$TMA_BIN" import "$good" -o "$out/g.tmag" --negatives -1
expect_fail 2 '--feat-dim: expected a dimension' -- "$TMA_BIN" import "$good" -o "$out/g.tmag" --feat-dim 0
expect_fail 2 '--seed: expected an integer in \[0, 2\^53\)' -- "$TMA_BIN" import "$good" -o "$out/g.tmag" --seed -4
expect_fail 2 "unknown option '--bogus'" -- "$TMA_BIN" import "$good" -o "$out/g.tmag" --bogus
expect_fail 2 "unknown model 'ba'" -- "$TMA_BIN" gen ba -o "$out/g.tmag"
expect_fail 2 '--homophily: expected a probability' -- "$TMA_BIN" gen sbm -o "$out/g.tmag" --homophily 1.2
expect_fail 2 '--classes: expected a count in \[1, nodes\]' -- "$TMA_BIN" gen sbm -o "$out/g.tmag" --nodes 10 --classes 11
expect_fail 2 '--nodes 5000 does not fit --scale 12' -- "$TMA_BIN" gen rmat -o "$out/g.tmag" --scale 12 --nodes 5000
expect_fail 2 '--scheme: expected random, supernode, supernode:N' -- "$TMA_BIN" partition "$out/g.tmag" --scheme supernode:x --shards 2 -o "$out/p"
expect_fail 2 '--shards: expected a count' -- "$TMA_BIN" partition "$out/g.tmag" --scheme random --shards 0 -o "$out/p"
expect_fail 2 '--shards: .*required' -- "$TMA_BIN" partition "$out/g.tmag" --scheme random -o "$out/p"
expect_fail 2 'supernode:2: needs at least as many clusters as --shards' -- "$TMA_BIN" partition "$out/g.tmag" --scheme supernode:2 --shards 3 -o "$out/p"
[ -z "$(ls -A "$out")" ] || fail "files left behind: $(ls -A "$out")"

# Partition's runtime errors: a missing or corrupt graph, a shard as input,
# more shards or clusters than nodes.  No partition.json appears.
expect_fail 1 'g\.tmag: cannot open' -- "$TMA_BIN" partition "$out/g.tmag" --scheme random --shards 2 -o "$out/p"
head -c 5000 /dev/urandom > "$out/junk.tmag"
expect_fail 1 'junk\.tmag: not a \.tmag graph file' -- "$TMA_BIN" partition "$out/junk.tmag" --scheme random --shards 2 -o "$out/p"
"$TMA_BIN" import "$good" -o "$out/g.tmag" --val 1 --test 0 --negatives 1 >/dev/null || fail "import of $good"
expect_fail 1 '--shards must be in \[1, min\(nodes' -- "$TMA_BIN" partition "$out/g.tmag" --scheme random --shards 5 -o "$out/p"
expect_fail 1 'supernode:5 asks for more clusters than the 4 nodes' -- "$TMA_BIN" partition "$out/g.tmag" --scheme supernode:5 --shards 2 -o "$out/p"
"$TMA_BIN" partition "$out/g.tmag" --scheme random --shards 2 -o "$out/p" >/dev/null || fail "partition of the small graph"
expect_fail 1 'is a shard, not a whole graph' -- "$TMA_BIN" partition "$out/p/shard-00000.tmag" --scheme random --shards 1 -o "$out/q"
[ ! -e "$out/q/partition.json" ] || fail "a failed partition left partition.json"
echo "ok: usage and runtime errors"
