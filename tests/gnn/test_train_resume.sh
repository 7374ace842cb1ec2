#!/bin/bash
# test_train_resume.sh: `tma train` keeps last.tmaw and last.opt in its run
# folder, and `--resume RUN` continues a run stopped by SIGINT or killed by
# SIGKILL partway: in step mode the resumed run ends with the weights (and
# Adam moments) of a run that never stopped, byte for byte, with its rounds
# in metrics.jsonl once each.  Also: a time budget carried over, what a
# resume refuses (finished runs, missing or damaged state, another graph,
# flags that would change the run), and `--init` (mismatches named, a
# finished run's best.tmaw as the start).
. "$TMA_SRCDIR/tests/lib.sh"

W="$TMA_BUILDDIR/tests/gnn/write_test_graph"
G=$TMP_ROOT/g.tmag
G12=$TMP_ROOT/g12.tmag
"$W" "$G" 500 32 0 1 || hard "cannot write the test graph"
"$W" "$G12" 300 12 0 2 || hard "cannot write the second test graph"
cat > "$TMP_ROOT/small.json" <<'JSON'
{"model": {"encoder": "gcn", "hidden": 16, "decoder_hidden": 16, "dropout": 0.1},
 "train": {"batch_size": 64, "fanouts": [5, 5], "lr": 0.01, "threads": 2, "seed": 3,
           "lr_schedule": {"kind": "cosine", "steps": 4000, "warmup_steps": 50}}}
JSON
# Enough steps that a kill lands partway even on a fast machine; the
# validations come often, so the first ones appear early even under load.
STEPS=4000
TRAIN=("$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --steps $STEPS --eval-every-seconds 0.05)

# The reference: a run that never stops.
"${TRAIN[@]}" -q -o "$TMP_ROOT/ref" > /dev/null 2> "$TMP_ROOT/ref.err" || { cat "$TMP_ROOT/ref.err" >&2; fail "the reference run failed"; }
for f in last.tmaw last.opt best.tmaw result.json; do
  [ -s "$TMP_ROOT/ref/$f" ] || fail "the run folder lacks $f"
done

# lines RUN: how many metrics lines RUN has (0 when none yet).
lines() { [ -f "$1/metrics.jsonl" ] && wc -l < "$1/metrics.jsonl" || echo 0; }
at_least() { [ "$(lines "$1")" -ge "$2" ]; }

# same_state A B: A's and B's last.tmaw are the same bytes, and their
# last.opt the same weights and Adam moments (the progress JSON differs:
# times, rounds).
same_state() {
  cmp "$1/last.tmaw" "$2/last.tmaw" || return 1
  python3 - "$1/last.opt" "$2/last.opt" <<'PY'
import struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:])
for x in (a, b):
    assert x[:8] == b"TMAOPTS\0", "bad magic"
ca, sa = struct.unpack_from("<QQ", a, 24)
cb, sb = struct.unpack_from("<QQ", b, 24)
assert (ca, sa) == (cb, sb), ("count and steps differ", ca, sa, cb, sb)
n = 3 * 4 * ca   # weights, Adam m, Adam v
assert a[-n:] == b[-n:], "the weights or Adam moments differ"
assert a[56:88] == b[56:88], "the batch RNG differs"
PY
}

# metrics_ok RUN: rounds 0..n once each, steps never going back, and
# result.json's steps and rounds agreeing with the last line.
metrics_ok() {
  python3 - "$1" <<'PY'
import json, sys
run = sys.argv[1]
rows = [json.loads(l) for l in open(run + "/metrics.jsonl")]
rounds = [r["round"] for r in rows]
assert rounds == list(range(len(rows))), rounds
assert all(rows[i]["steps"] <= rows[i + 1]["steps"] for i in range(len(rows) - 1)), [r["steps"] for r in rows]
res = json.load(open(run + "/result.json"))
assert res["rounds"] == len(rows) - 1 and res["steps"] == rows[-1]["steps"], (res, rows[-1])
assert res["stopped"] in ("steps", "time"), res["stopped"]
best = max(r["val_mrr"] for r in rows)
assert abs(best - res["best_val_mrr"]) < 1e-9 and rows[res["best_round"]]["val_mrr"] == best, res
PY
}

for sig in INT KILL; do
  run=$TMP_ROOT/$sig
  # tma itself in the background (not a shell around it), so the signal reaches it.
  "${TRAIN[@]}" -o "$run" > /dev/null 2> "$run.err" &
  pid=$!
  track $pid
  # A validation line (two, so some training lies behind the state), not a fixed sleep.
  wait_for 120 at_least "$run" 2 || fail "no validation within 120 s"
  kill -$sig $pid
  wait $pid
  rc=$?
  [ "$sig" = KILL ] && want=137 || want=130
  [ "$rc" -eq "$want" ] || { cat "$run.err" >&2; fail "tma train stopped by SIG$sig exited $rc, not $want"; }
  [ -s "$run/last.opt" ] || fail "SIG$sig: no last.opt"
  done_steps=$(tail -n 1 "$run/metrics.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["steps"])')
  [ "$done_steps" -lt $STEPS ] || fail "SIG$sig came after the run had finished: make it longer"
  if [ $sig = INT ]; then
    [ "$(json "$run/result.json" 'd["stopped"]')" = interrupted ] || fail "SIGINT: result.json not interrupted"
  else
    # What a kill at other moments leaves: a line of a round after the state
    # (written, then killed before the next state), a torn line, and the
    # state's own round missing (killed between the state and its line).
    python3 - "$run/metrics.jsonl" "$run/last.opt" <<'PY'
import json, struct, sys
p = sys.argv[1]
st = open(sys.argv[2], "rb").read()
n, = struct.unpack_from("<I", st, 40)
state_round = json.loads(st[128:128 + n])["rounds"]
rows = [json.loads(l) for l in open(p)]
rows = [r for r in rows if r["round"] != state_round]
with open(p, "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
PY
    echo '{"round": 999, "time": 1, "steps": 1}' >> "$run/metrics.jsonl"
    printf '{"round": 1000, "ti' >> "$run/metrics.jsonl"
    rm -f "$run/last.tmaw"
  fi
  # Resume without the graph (the state names it); the flags of the run stay.
  "$TMA_BIN" train --resume "$run" > "$run.out" 2> "$run.resume.err" ||
    { cat "$run.resume.err" >&2; fail "tma train --resume after SIG$sig failed"; }
  grep -q "resuming .* at step" "$run.resume.err" || fail "--resume after SIG$sig did not say where it resumed"
  grep -q '^test_mrr ' "$run.out" || fail "--resume after SIG$sig printed no test_mrr"
  [ "$(json "$run/result.json" 'd["steps"]')" = $STEPS ] || fail "the run resumed after SIG$sig did not end at $STEPS steps"
  same_state "$TMP_ROOT/ref" "$run" || fail "the run resumed after SIG$sig ended with other weights than one never stopped"
  metrics_ok "$run" || fail "metrics.jsonl of the run resumed after SIG$sig is wrong"
  cmp -s "$TMP_ROOT/ref/config.json" "$run/config.json" || fail "--resume changed config.json"
  # The resumed run's best weights are what it tested.
  want=$(json "$run/result.json" "'%.6f' % d['test_mrr']")
  got=$("$TMA_BIN" eval "$G" "$run/best.tmaw" | awk '/^test_mrr/ {print $2}')
  [ "$got" = "$want" ] || fail "after SIG$sig: tma eval of best.tmaw says $got, result.json $want"
done

# A finished run is not resumed unless given a larger budget, which it
# then continues (here: the one that ran 4000 steps to 4500).
expect_fail 2 "finished .*larger --steps" -- "$TMA_BIN" train --resume "$TMP_ROOT/ref"
"$TMA_BIN" train "$G" --resume "$TMP_ROOT/ref" --steps 4500 -q > /dev/null 2> "$TMP_ROOT/more.err" ||
  { cat "$TMP_ROOT/more.err" >&2; fail "--resume with a larger budget failed"; }
[ "$(json "$TMP_ROOT/ref/result.json" 'd["steps"]')" = 4500 ] || fail "--resume --steps 4500 did not train to 4500"
metrics_ok "$TMP_ROOT/ref" || fail "metrics.jsonl after extending a run is wrong"

# A time budget: the training time already spent counts.
run=$TMP_ROOT/time
"$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --seconds 3 --eval-every-seconds 0.05 -o "$run" \
  > /dev/null 2> "$run.err" &
pid=$!
track $pid
wait_for 120 at_least "$run" 2 || fail "no validation within 120 s (time budget)"
kill -INT $pid
wait $pid
[ $? -eq 130 ] || fail "tma train --seconds stopped by SIGINT did not exit 130"
spent=$(json "$run/result.json" 'd["train_seconds"]')
"$TMA_BIN" train --resume "$run" -q > /dev/null 2> "$run.resume.err" ||
  { cat "$run.resume.err" >&2; fail "--resume of a time budget failed"; }
python3 - "$run/result.json" "$spent" <<'PY' || fail "the resumed time budget is wrong"
import json, sys
res = json.load(open(sys.argv[1]))
assert res["stopped"] == "time" and 3 <= res["train_seconds"] < 3.5, res
assert float(sys.argv[2]) < 3, sys.argv[2]
PY
metrics_ok "$run" || fail "metrics.jsonl of the resumed time budget is wrong"

# --- what --resume refuses ----------------------------------------------------
expect_fail 2 "no such run folder" -- "$TMA_BIN" train --resume "$TMP_ROOT/none"
mkdir "$TMP_ROOT/empty"
expect_fail 2 "empty/config.json: missing" -- "$TMA_BIN" train --resume "$TMP_ROOT/empty"
cp -r "$TMP_ROOT/INT" "$TMP_ROOT/noopt"
rm "$TMP_ROOT/noopt/last.opt"
expect_fail 2 "noopt/last.opt: missing" -- "$TMA_BIN" train --resume "$TMP_ROOT/noopt" --steps 5000
cp -r "$TMP_ROOT/INT" "$TMP_ROOT/bad"
printf 'x' | dd of="$TMP_ROOT/bad/last.opt" bs=1 seek=3000 conv=notrunc 2> /dev/null
expect_fail 1 "bad/last.opt: .*checksum" -- "$TMA_BIN" train --resume "$TMP_ROOT/bad" --steps 5000
head -c 100 "$TMP_ROOT/INT/last.opt" > "$TMP_ROOT/bad/last.opt"
expect_fail 1 "bad/last.opt: not a tma optimizer state file" -- "$TMA_BIN" train --resume "$TMP_ROOT/bad" --steps 5000
cp "$TMP_ROOT/INT/last.tmaw" "$TMP_ROOT/bad/last.opt"
expect_fail 1 "bad/last.opt: not a tma optimizer state file \(bad magic\)" -- \
  "$TMA_BIN" train --resume "$TMP_ROOT/bad" --steps 5000
expect_fail 2 "is not the graph the run .* trained on" -- "$TMA_BIN" train "$G12" --resume "$TMP_ROOT/INT" --steps 5000
for flag in "--lr 0.1" "--seed 1" "--config $TMP_ROOT/small.json" "--batch-size 8" "-o $TMP_ROOT/x" "--force" \
            "--init $TMP_ROOT/INT/best.tmaw" "--encoder sage"; do
  # shellcheck disable=SC2086
  expect_fail 2 "drop ${flag%% *}" -- "$TMA_BIN" train --resume "$TMP_ROOT/INT" $flag
done
expect_fail 2 "expected the graph G.tmag \(or --resume RUN\)" -- "$TMA_BIN" train -o "$TMP_ROOT/x"
# A folder with a resumable run is a run: a new one there needs --force.
expect_fail 2 "already holds a run" -- "$TMA_BIN" train "$G" --steps 5 -o "$TMP_ROOT/INT"

# --- --init ---------------------------------------------------------------------
# From a finished run's best weights: with a vanishing learning rate the
# run's best weights are the ones it started from (the same test MRR).
"$TMA_BIN" train "$G" --config "$TMP_ROOT/INT/config.json" --init "$TMP_ROOT/INT/best.tmaw" --lr 1e-30 --steps 2 \
  --eval-every-seconds 1000 -q -o "$TMP_ROOT/init" > /dev/null 2> "$TMP_ROOT/init.err" ||
  { cat "$TMP_ROOT/init.err" >&2; fail "tma train --init failed"; }
a=$("$TMA_BIN" eval "$G" "$TMP_ROOT/INT/best.tmaw" | awk '/^test_mrr/ {print $2}')
b=$("$TMA_BIN" eval "$G" "$TMP_ROOT/init/best.tmaw" | awk '/^test_mrr/ {print $2}')
[ "$a" = "$b" ] || fail "tma train --init did not start from the weights: test MRR $b, the weights' $a"
# Another model is refused before a run folder is made, naming the field.
for case in 'encoder is gcn there, sage here:"encoder": "sage"' 'layers is 2 there, 3 here:"layers": 3' \
            'hidden is 16 there, 8 here:"hidden": 8' 'decoder is mlp there, distmult here:"decoder": "distmult"' \
            'decoder_hidden is 16 there, 32 here:"decoder_hidden": 32'; do
  want=${case%%:*} model=${case#*:}
  python3 - "$TMP_ROOT/small.json" "$TMP_ROOT/other.json" "{$model}" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["model"].update(json.loads(sys.argv[3]))
c["train"]["fanouts"] = [5] * c["model"].get("layers", 2)
json.dump(c, open(sys.argv[2], "w"))
PY
  expect_fail 2 "another model: $want" -- \
    "$TMA_BIN" train "$G" --config "$TMP_ROOT/other.json" --init "$TMP_ROOT/INT/best.tmaw" --steps 2 -o "$TMP_ROOT/init2"
  [ ! -e "$TMP_ROOT/init2" ] || fail "a refused --init ($model) left a run folder"
done
expect_fail 2 "another model: feature_dim is 32 there, 12 here" -- \
  "$TMA_BIN" train "$G12" --config "$TMP_ROOT/small.json" --init "$TMP_ROOT/INT/best.tmaw" --steps 2 -o "$TMP_ROOT/init2"
expect_fail 1 "init2.tmaw: cannot open" -- \
  "$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --init "$TMP_ROOT/init2.tmaw" --steps 2 -o "$TMP_ROOT/init2"
# last.tmaw is a weight file like any other: it starts a run too.
"$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --init "$TMP_ROOT/ref/last.tmaw" --steps 2 -q \
  -o "$TMP_ROOT/init3" > /dev/null || fail "--init from last.tmaw failed"
echo "resume and warm start: ok"
