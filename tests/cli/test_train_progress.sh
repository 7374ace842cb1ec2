#!/bin/bash
# test_train_progress.sh: `tma train`'s progress lines and its mrr.svg.
# Without a terminal: a line per validation and the final line once (also
# when the last step was validated as it was taken).  On a terminal (script
# gives one): the refreshed line's MRR is that of the validation it names,
# the current step's or "at step K".  mrr.svg: titled with the graph's name
# (not its path), a run under 3 minutes in seconds, the curve from round 0
# at t = 0, the best round and the test MRR of result.json marked.
. "$TMA_SRCDIR/tests/lib.sh"
need script bsdutils
cd "$TMP_ROOT" || hard "cd"
"$TMA_BUILDDIR/tests/gnn/write_test_graph" g.tmag 400 16 0 3 || hard "cannot write the test graph"

# Every step validated: the last one too, so no validation is left for the end.
"$TMA_BIN" train g.tmag --steps 5 --eval-every-seconds 0.000001 --threads 1 -o r1 > r1.out 2> r1.err ||
  { cat r1.err; fail "tma train failed"; }
[ "$(grep -c '^\[train\] step 5/5 ' r1.err)" -eq 1 ] || { cat r1.err; fail "the final progress line is not printed once"; }
[ "$(grep -c '^\[train\] step ' r1.err)" -eq 6 ] || { cat r1.err; fail "not one line per validation (round 0 and 5 steps)"; }

# On a terminal: refreshed every 0.5 s of training, validated every 0.3 s.
script -qec "'$TMA_BIN' train g.tmag --steps 400 --eval-every-seconds 0.3 --threads 1 -o r2" /dev/null > r2.tty ||
  { cat r2.tty; fail "tma train on a terminal failed"; }
python3 - r2.tty r2/metrics.jsonl <<'PY' || fail "a refreshed line shows another validation's MRR than it names"
import json, re, sys
text = open(sys.argv[1], errors="replace", newline="").read().replace("\r\n", "\n")  # the terminal's line ends
val = {r["steps"]: r["val_mrr"] for r in map(json.loads, open(sys.argv[2]))}
seen = named = 0
for seg in re.split(r"[\r\n]+", text):
    m = re.search(r"step (\d+)/400 .*?val (\d\.\d{4})(?: at step (\d+))? \(best", seg)
    if not m:
        continue
    step, mrr, at = int(m.group(1)), float(m.group(2)), m.group(3)
    k = int(at) if at else step
    assert k in val, ("no validation at step %d" % k, seg)
    assert abs(val[k] - mrr) < 6e-5, (seg, val[k])
    assert not at or k < step, seg
    seen += 1; named += bool(at)
assert seen >= 2, "too few progress lines on the terminal: %r" % text[-400:]
# The line ends as the final one: the last state of the refreshed line, then a new line.
last = [seg for seg in text.split("\r") if seg.startswith("[train] step")][-1]
assert last.startswith("[train] step 400/400") and "\n" in last, repr(last)
print("%d refreshed lines, %d naming an earlier validation" % (seen, named))
PY

python3 - r2 <<'PY' || fail "mrr.svg is not what it should be"
import json, re, sys
run = sys.argv[1]
svg = open(run + "/mrr.svg").read()
res = json.load(open(run + "/result.json"))
title = re.search(r'font-size="15">([^<]*)<', svg).group(1)
assert title.startswith("g: validation MRR") and "/" not in title, title
assert "training time (seconds)" in svg
assert re.search(r'points="70\.0,', svg), "the curve does not start at t = 0"
assert "best: round %d, %.4f" % (res["best_round"], res["best_val_mrr"]) in svg
assert 'class="best"' in svg and 'class="test"' in svg
assert "test MRR %.4f" % res["test_mrr"] in svg
ticks = [float(t) for t in re.findall(r'text-anchor="middle">([0-9.]+)</text>', svg)]
steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:])}
assert ticks[0] == 0 and len(steps) == 1, ticks
s = steps.pop()
m = s / 10 ** __import__("math").floor(__import__("math").log10(s))
assert any(abs(m - k) < 1e-9 for k in (1, 2, 2.5, 5)), ("not a round tick step", ticks)
PY
echo "tma train: the final line once, each refreshed line's MRR its named validation's; mrr.svg marked and in seconds"
