#!/bin/bash
# test_train_cli.sh: `tma train` and `tma eval` end to end on a small graph: the run
# folder, agreement between the two commands, Ctrl-C, and refusal of bad input.
. "$TMA_SRCDIR/tests/lib.sh"

W="$TMA_BUILDDIR/tests/gnn/write_test_graph"
G=$TMP_ROOT/g.tmag
G2=$TMP_ROOT/g2.tmag
"$W" "$G" 500 32 0 1 || hard "cannot write the test graph"
"$W" "$G2" 300 12 0 2 || hard "cannot write the second test graph"
cat > "$TMP_ROOT/small.json" <<'JSON'
{"model": {"encoder": "gcn", "hidden": 16, "decoder_hidden": 16},
 "train": {"batch_size": 64, "fanouts": [5, 5], "lr": 0.01, "threads": 2, "seed": 3}}
JSON

# --- a run -----------------------------------------------------------------
RUN=$TMP_ROOT/run
"$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --steps 400 --eval-every-seconds 0.003 -o "$RUN" \
  > "$TMP_ROOT/train.out" 2> "$TMP_ROOT/train.err" || { cat "$TMP_ROOT/train.err"; fail "tma train failed"; }
for f in config.json metrics.jsonl best.tmaw result.json; do
  [ -s "$RUN/$f" ] || fail "run folder lacks $f"
done
for k in test_mrr best_val_mrr best_at_seconds convergence_seconds train_seconds steps schema_version \
         tma_version graph_id started variant best_round rounds stopped; do
  json "$RUN/result.json" "d['$k']" > /dev/null || fail "result.json lacks $k"
done
[ "$(json "$RUN/result.json" "d['steps']")" = 400 ] || fail "expected 400 steps"
[ "$(json "$RUN/config.json" "d['model']['feature_dim']")" = 32 ] || fail "config.json lacks the resolved feature_dim"
lines=$(wc -l < "$RUN/metrics.jsonl")
[ "$lines" -ge 2 ] || fail "metrics.jsonl has $lines lines"
python3 - "$RUN" <<'PY' || fail "metrics.jsonl or result.json is inconsistent"
import json, sys
run = sys.argv[1]
rows = [json.loads(l) for l in open(run + "/metrics.jsonl")]
res = json.load(open(run + "/result.json"))
best = max(r["val_mrr"] for r in rows)
assert abs(best - res["best_val_mrr"]) < 1e-6, (best, res)
assert all(rows[i]["time"] <= rows[i + 1]["time"] for i in range(len(rows) - 1))
assert rows[-1]["steps"] == res["steps"]
conv = [r["time"] for r in rows if r["val_mrr"] >= 0.99 * best][0]
assert abs(conv - res["convergence_seconds"]) < 1e-3, (conv, res)
assert 0 < res["test_mrr"] <= 1 and res["train_seconds"] > 0
# The run folder's one schema: every line is a round (0, 1, ...; round 0 the
# weights training starts from, at t = 0 and step 0, as a distributed job's),
# the result names its variant, the last and the best round and the run's start.
assert [r["round"] for r in rows] == list(range(len(rows))), [r["round"] for r in rows]
assert rows[0]["time"] == 0 and rows[0]["steps"] == 0 and rows[0]["loss"] is None, rows[0]
assert res["variant"] == "centralized" and res["schema_version"] == 1 and res["stopped"] == "steps", res
assert res["rounds"] == len(rows) - 1 and rows[res["best_round"]]["val_mrr"] == res["best_val_mrr"], res
import datetime, re
assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", res["started"]), res["started"]
start = datetime.datetime.strptime(res["started"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
assert abs(start.timestamp() - rows[0]["wall"]) < 600, (res["started"], rows[0]["wall"])
assert re.fullmatch(r"[0-9a-f]{16}", res["graph_id"]) and res["graph_id"] != "0" * 16, res["graph_id"]
PY
[ -s "$RUN/mrr.svg" ] || fail "run folder lacks mrr.svg"
# tma report reads a tma train run like a distributed one.
(cd "$TMP_ROOT" && "$TMA_BIN" report "$RUN" --json -o "$TMP_ROOT/report.svg" > report.json) ||
  fail "tma report refused a tma train run"
python3 - "$TMP_ROOT/report.json" "$RUN/result.json" <<'PY' || fail "tma report's row differs from result.json"
import json, sys
rep, res = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
row = rep["runs"][0]
assert row["variant"] == "centralized" and row["test_mrr"] == res["test_mrr"], (row, res)
assert row["convergence_seconds"] == res["convergence_seconds"], (row, res)
assert row["steps_min"] == row["steps_max"] == res["steps"], (row, res)
PY
# --json prints result.json itself.
"$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --steps 20 -o "$TMP_ROOT/j" -q --json > "$TMP_ROOT/j.out" ||
  fail "tma train --json failed"
cmp -s "$TMP_ROOT/j.out" "$TMP_ROOT/j/result.json" || fail "tma train --json did not print result.json"
grep -q "^test_mrr " "$TMP_ROOT/train.out" || fail "tma train did not print test_mrr"
grep -q "test MRR" "$TMP_ROOT/train.err" || fail "tma train printed no progress"
grep -q "test MRR .*hits@100 [0-9.]*, auc 0\.[0-9]*;" "$TMP_ROOT/train.err" || fail "tma train printed no test AUC"

# tma eval agrees with the run: test MRR of the best weights, and their validation MRR.
want=$(json "$RUN/result.json" "'%.6f' % d['test_mrr']")
got=$("$TMA_BIN" eval "$G" "$RUN/best.tmaw" | awk '/^test_mrr/ {print $2}')
[ "$got" = "$want" ] || fail "tma eval says $got, the run said $want"
want=$(json "$RUN/result.json" "'%.6f' % d['best_val_mrr']")
got=$("$TMA_BIN" eval "$G" "$RUN/best.tmaw" --split val --json | python3 -c 'import json,sys; print("%.6f" % json.load(sys.stdin)["mrr"])')
[ "$got" = "$want" ] || fail "tma eval --split val says $got, the run's best was $want"
# bfloat16 tables (eval.table_dtype): tma train's evaluator and tma eval --table-dtype bf16 agree, and
# stay within bfloat16's rounding of float32's MRR (tests/gnn/test_rank bounds it at 0.02).
python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["eval"] = {"table_dtype": "bf16"}; print(json.dumps(c))' \
  "$TMP_ROOT/small.json" > "$TMP_ROOT/bf16.json"
"$TMA_BIN" train "$G" --config "$TMP_ROOT/bf16.json" --steps 60 --eval-every-seconds 1000 -o "$TMP_ROOT/bf16" -q \
  > /dev/null || fail "tma train with eval.table_dtype bf16"
want=$(json "$TMP_ROOT/bf16/result.json" "'%.6f' % d['test_mrr']")
got=$("$TMA_BIN" eval "$G" "$TMP_ROOT/bf16/best.tmaw" --table-dtype bf16 | awk '/^test_mrr/ {print $2}')
[ "$got" = "$want" ] || fail "tma eval --table-dtype bf16 says $got, the bf16 run said $want"
f32=$("$TMA_BIN" eval "$G" "$TMP_ROOT/bf16/best.tmaw" | awk '/^test_mrr/ {print $2}')
python3 -c "import sys; sys.exit(abs($got - $f32) > 0.02)" || fail "bf16 tables' test MRR $got, float32's $f32"

# The same seed gives the same run.
"$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --steps 60 --eval-every-seconds 1000 -o "$TMP_ROOT/a" -q > /dev/null || fail "run a"
"$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --steps 60 --eval-every-seconds 1000 -o "$TMP_ROOT/b" -q > /dev/null || fail "run b"
cmp -s "$TMP_ROOT/a/best.tmaw" "$TMP_ROOT/b/best.tmaw" || fail "two runs with one seed wrote different weights"
# ... and a run's config.json repeats it.
"$TMA_BIN" train "$G" --config "$TMP_ROOT/a/config.json" --steps 60 --eval-every-seconds 1000 -o "$TMP_ROOT/a2" -q > /dev/null || fail "run a2"
cmp -s "$TMP_ROOT/a/best.tmaw" "$TMP_ROOT/a2/best.tmaw" || fail "config.json did not repeat the run"
"$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --steps 60 --seed 4 --eval-every-seconds 1000 -o "$TMP_ROOT/c" -q > /dev/null || fail "run c"
cmp -s "$TMP_ROOT/a/best.tmaw" "$TMP_ROOT/c/best.tmaw" && fail "--seed made no difference"
# same_twice CONFIG NAME WHAT: two runs of CONFIG in step mode (into NAME1,
# NAME2) write the same weights, and not run a's (WHAT changes the run).
same_twice() {
  local r
  for r in "${2}1" "${2}2"; do
    "$TMA_BIN" train "$G" --config "$1" --steps 60 --eval-every-seconds 1000 -o "$TMP_ROOT/$r" -q > /dev/null ||
      fail "run $r"
  done
  cmp -s "$TMP_ROOT/${2}1/best.tmaw" "$TMP_ROOT/${2}2/best.tmaw" ||
    fail "two runs with $3 and one seed wrote different weights"
  cmp -s "$TMP_ROOT/a/best.tmaw" "$TMP_ROOT/${2}1/best.tmaw" && fail "$3 made no difference"
}
# model.dropout: its masks follow the seed and the step, so a run with it is
# the same run again; and it changes the run.
sed 's/"hidden": 16,/"hidden": 16, "dropout": 0.5,/' "$TMP_ROOT/small.json" > "$TMP_ROOT/drop.json"
same_twice "$TMP_ROOT/drop.json" d model.dropout
[ "$(json "$TMP_ROOT/d1/config.json" 'd["model"]["dropout"]')" = 0.5 ] || fail "config.json does not record the dropout"

# train.negatives: K tails a positive; step mode stays deterministic, K = 4
# changes the run, config.json records it, and the default (1) is not
# written (run a's config.json has no "negatives": the runs before it read
# the same).  0, a negative count and too many are refused by name.
sed 's/"seed": 3}/"seed": 3, "negatives": 4}/' "$TMP_ROOT/small.json" > "$TMP_ROOT/neg.json"
same_twice "$TMP_ROOT/neg.json" k "4 negatives"
[ "$(json "$TMP_ROOT/k1/config.json" 'd["train"]["negatives"]')" = 4 ] || fail "config.json does not record the negatives"
[ "$(json "$TMP_ROOT/a/config.json" '"negatives" in d["train"]')" = False ] || fail "config.json names the default negatives"
for k in 0 -3 1025; do
  sed "s/\"seed\": 3}/\"seed\": 3, \"negatives\": $k}/" "$TMP_ROOT/small.json" > "$TMP_ROOT/badneg.json"
  expect_fail 2 "\"negatives\" = $k is out of range \[1, 1024\]" -- \
    "$TMA_BIN" train "$G" --config "$TMP_ROOT/badneg.json" --steps 5 -o "$TMP_ROOT/badneg$k" -q
done

# Ctrl-C (SIGINT) or SIGTERM ends training early, still writes the results,
# and exits 128 + the signal: a stopped run is not a success.
for sig in INT:130 TERM:143; do
  name=${sig%:*} want=${sig#*:}
  "$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --seconds 120 --eval-every-seconds 0.2 -o "$TMP_ROOT/$name" \
    > /dev/null 2> "$TMP_ROOT/$name.err" &
  pid=$!
  track $pid
  wait_for 60 test -s "$TMP_ROOT/$name/metrics.jsonl" || fail "no validation within 60 s"
  kill -$name $pid
  wait_for 60 test -s "$TMP_ROOT/$name/result.json" || fail "no result.json after SIG$name"
  wait $pid; rc=$?
  [ "$rc" -eq "$want" ] || fail "tma train stopped by SIG$name exited $rc, not $want"
  [ "$(json "$TMP_ROOT/$name/result.json" "d['stopped']")" = interrupted ] ||
    fail "result.json does not say it was interrupted (SIG$name)"
done

# --- refusals --------------------------------------------------------------
expect_fail 2 "already holds a run|exclude" -- "$TMA_BIN" train "$G" --steps 5 --seconds 5 -o "$TMP_ROOT/x"
expect_fail 2 "already holds a run" -- "$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --steps 5 -o "$RUN"
expect_fail 2 "-o RUN is required" -- "$TMA_BIN" train "$G" --steps 5
expect_fail 2 "steps" -- "$TMA_BIN" train "$G" --steps 0 -o "$TMP_ROOT/x"
expect_fail 2 "seconds" -- "$TMA_BIN" train "$G" --seconds -3 -o "$TMP_ROOT/x"
expect_fail 2 "gin" -- "$TMA_BIN" train "$G" --encoder gin --steps 5 -o "$TMP_ROOT/x"
expect_fail 2 "unknown option '--bogus'" -- "$TMA_BIN" train "$G" --bogus -o "$TMP_ROOT/x"
# --init: warm start from saved weights. With a vanishing learning rate the
# run's best weights are the ones it started from (the same test MRR).
"$TMA_BIN" train "$G" --config "$RUN/config.json" --init "$RUN/best.tmaw" --lr 1e-30 --steps 2 \
  --eval-every-seconds 1000 -q -o "$TMP_ROOT/init" > /dev/null 2> "$TMP_ROOT/init.err" ||
  { cat "$TMP_ROOT/init.err" >&2; fail "tma train --init failed"; }
a=$("$TMA_BIN" eval "$G" "$RUN/best.tmaw" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["mrr"])')
b=$("$TMA_BIN" eval "$G" "$TMP_ROOT/init/best.tmaw" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["mrr"])')
[ "$a" = "$b" ] || fail "tma train --init did not start from the weights: test MRR $b, the weights' $a"
echo '{"model": {"hidden": 8}}' > "$TMP_ROOT/other.json"
expect_fail 2 "another model: hidden is [0-9]+ there, 8 here" -- \
  "$TMA_BIN" train "$G" --config "$TMP_ROOT/other.json" --init "$RUN/best.tmaw" --steps 2 -o "$TMP_ROOT/init2"
[ ! -e "$TMP_ROOT/init2" ] || fail "a refused --init left a run folder"
# one range check for --threads in every command
for cmd in "train $G -o $TMP_ROOT/x" "eval $G $RUN/best.tmaw" "export $RUN -o $TMP_ROOT/x" "launch $TMP_ROOT/typo.json"; do
  for n in -1 1025; do
    expect_fail 2 "threads: expected 0 to 1024 .*got $n" -- "$TMA_BIN" $cmd --threads $n
  done
done
# "did you mean" for a misspelt option, command and config key
expect_fail 2 "unknown option '--step'; did you mean '--steps'" -- "$TMA_BIN" train "$G" --step 5 -o "$TMP_ROOT/x"
expect_fail 2 "unknown command 'trian'; did you mean 'train'" -- "$TMA_BIN" trian "$G"
echo '{"model": {"encoder": "gcn", "hiden": 8}}' > "$TMP_ROOT/typo.json"
expect_fail 2 "unknown key \"hiden\"; did you mean \"hidden\"" -- "$TMA_BIN" train "$G" --config "$TMP_ROOT/typo.json" --steps 5 -o "$TMP_ROOT/x"
echo '{"model": {"hiden": 16}}' > "$TMP_ROOT/bad.json"
expect_fail 2 'unknown key "hiden"' -- "$TMA_BIN" train "$G" --config "$TMP_ROOT/bad.json" --steps 5 -o "$TMP_ROOT/x"
echo '{"train": {"fanouts": [5]}}' > "$TMP_ROOT/bad2.json"
expect_fail 2 "fanouts" -- "$TMA_BIN" train "$G" --config "$TMP_ROOT/bad2.json" --steps 5 -o "$TMP_ROOT/x"
echo '{"model": {' > "$TMP_ROOT/bad3.json"
expect_fail 2 "bad3.json" -- "$TMA_BIN" train "$G" --config "$TMP_ROOT/bad3.json" --steps 5 -o "$TMP_ROOT/x"
expect_fail 2 "nope.json" -- "$TMA_BIN" train "$G" --config "$TMP_ROOT/nope.json" --steps 5 -o "$TMP_ROOT/x"
echo '{"model": {"feature_dim": 7}}' > "$TMP_ROOT/bad4.json"
expect_fail 2 "feature_dim" -- "$TMA_BIN" train "$G" --config "$TMP_ROOT/bad4.json" --steps 5 -o "$TMP_ROOT/x"
expect_fail 1 "missing.tmag" -- "$TMA_BIN" train "$TMP_ROOT/missing.tmag" --steps 5 -o "$TMP_ROOT/x"
[ -e "$TMP_ROOT/x" ] && fail "a refused run left $TMP_ROOT/x behind"

expect_fail 2 "split" -- "$TMA_BIN" eval "$G" "$RUN/best.tmaw" --split train
expect_fail 2 "table-dtype" -- "$TMA_BIN" eval "$G" "$RUN/best.tmaw" --table-dtype f16
expect_fail 2 "table-dtype" -- "$TMA_BIN" eval "$G" "$RUN/best.tmaw" --table-dtype bf16 --device cuda
expect_fail 2 "" -- "$TMA_BIN" eval "$G"
expect_fail 2 "features" -- "$TMA_BIN" eval "$G2" "$RUN/best.tmaw"
cp "$RUN/best.tmaw" "$TMP_ROOT/corrupt.tmaw"
printf '\x55' | dd of="$TMP_ROOT/corrupt.tmaw" bs=1 seek=300 conv=notrunc 2>/dev/null
expect_fail 1 "checksum" -- "$TMA_BIN" eval "$G" "$TMP_ROOT/corrupt.tmaw"
head -c 100 "$RUN/best.tmaw" > "$TMP_ROOT/short.tmaw"
expect_fail 1 "short.tmaw" -- "$TMA_BIN" eval "$G" "$TMP_ROOT/short.tmaw"
expect_fail 1 "not a tma weight file" -- "$TMA_BIN" eval "$G" "$G"
echo ok
