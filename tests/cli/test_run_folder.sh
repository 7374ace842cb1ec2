#!/bin/bash
# test_run_folder.sh: no command overwrites a run by surprise. `tma train` and
# `tma launch` refuse an -o folder that holds a run (exit 2, the folder left
# as it was) unless --force, which replaces it; a launch whose job is refused
# as a usage error (exit 2) after it made its run folder removes the folder
# again; a missing graph is exit 1 in every command that reads one.
. "$TMA_SRCDIR/tests/lib.sh"
cd "$TMP_ROOT" || hard "cd"
umask 022
G=$TMA_BUILDDIR/tests/gnn/write_test_graph
"$G" g.tmag 400 16 0 3 || hard "cannot write the test graph"

# --- tma train ---------------------------------------------------------------
"$TMA_BIN" train g.tmag --steps 6 --eval-every-seconds 1000 -o t -q > /dev/null 2>&1 || fail "the first tma train failed"
cp t/result.json first.json
expect_fail 2 "t already holds a run.*--force" -- "$TMA_BIN" train g.tmag --steps 6 -o t -q
[ "$(wc -l < "$TMP_ROOT/stderr.$$")" -eq 1 ] ||
  { cat "$TMP_ROOT/stderr.$$"; fail "tma train says more than the one line about the folder (a status word after it)"; }
cmp -s t/result.json first.json || fail "a refused tma train changed the run in its -o folder"
"$TMA_BIN" train g.tmag --steps 9 --eval-every-seconds 1000 -o t -q --force > /dev/null 2>&1 ||
  fail "tma train --force into a folder that holds a run failed"
[ "$(json t/result.json 'd["steps"]')" = 9 ] || fail "tma train --force did not replace result.json (steps $(json t/result.json 'd["steps"]'))"
# (Round 0 and the last round: 2 lines.)
[ "$(wc -l < t/metrics.jsonl)" -eq 2 ] || fail "tma train --force kept the old run's metrics lines ($(wc -l < t/metrics.jsonl) lines)"

# --- tma launch --------------------------------------------------------------
mkdir -p held
echo '{"test_mrr": 0.5}' > held/result.json
cat > job.json <<JSON
{"job": "rf", "graph": "$TMP_ROOT/g.tmag", "workers": 2, "aggregation": {"interval_seconds": 1},
 "duration": {"train_seconds": 2}, "model": {"hidden": 16, "decoder_hidden": 16}, "train": {"batch_size": 64}}
JSON
expect_fail 2 "held already holds a run.*--force" -- "$TMA_BIN" launch job.json -o held -q
[ "$(cat held/result.json)" = '{"test_mrr": 0.5}' ] || fail "a refused tma launch changed result.json"
[ ! -e held/logs ] || fail "a refused tma launch left logs/ in the folder"
"$TMA_BIN" launch job.json -o held -q --force > launch.out 2>&1 || { cat launch.out >&2; fail "tma launch --force failed"; }
[ "$(json held/result.json 'd["variant"]')" = randomtma ] || fail "tma launch --force did not replace result.json"
# Run files are the user's alone (issue 30, item 6): every file in both run
# folders, checkpoints, the best model, result, metrics, plots, events and
# logs, is 0600 whatever the umask (022 here): also in held/, the user's own
# folder made 0755 before the launch (kept as it is).
[ "$(stat -c %a t)" = 700 ] || fail "the run folder tma train made is mode $(stat -c %a t), not 700"
[ "$(stat -c %a held)" = 755 ] || fail "the user's own run folder changed its mode to $(stat -c %a held)"
for run in t held; do
  open=$(find "$run" -type f ! -perm 600 -printf '%p %m\n')
  [ -z "$open" ] || fail "run files readable by others: $open"
  [ "$(find "$run" -type f | wc -l)" -ge 5 ] || fail "$run has too few files: $(ls -R "$run")"
done

# A job refused in a later phase (here tma gen's flags) leaves no run folder.
cat > bad.json <<JSON
{"job": "bad", "generate": {"kind": "sbm", "nodes": 0, "classes": 2, "feat_dim": 8, "seed": 1},
 "workers": 2, "duration": {"train_seconds": 2}}
JSON
expect_fail 2 "nodes" -- "$TMA_BIN" launch bad.json -o refused -q
[ ! -e refused ] || fail "a launch refused with exit 2 left its run folder behind: $(ls -R refused | head)"

# --- a missing graph: exit 1 everywhere ---------------------------------------
M=$TMP_ROOT/missing.tmag
sed "s|$TMP_ROOT/g.tmag|$M|" job.json > miss.json
expect_fail 1 "missing.tmag" -- "$TMA_BIN" launch miss.json -o m1 -q
expect_fail 1 "missing.tmag" -- "$TMA_BIN" train "$M" --steps 3 -o m2 -q
expect_fail 1 "missing.tmag" -- "$TMA_BIN" eval "$M" t/best.tmaw
expect_fail 1 "missing.tmag" -- "$TMA_BIN" partition "$M" --scheme random --shards 2 -o m3
expect_fail 1 "missing.tmag" -- "$TMA_BIN" info "$M"
echo "run folders are refused, replaced with --force, and cleaned up after a refused launch"
