#!/bin/bash
# test_report.sh: tma report pools only runs that compare: runs of different
# graphs (graph_id) or tie rules are refused together (exit 2, naming both);
# interrupted runs are marked and left out of the means unless --all; the
# spread of one run is n/a (null in JSON), not 0; --json writes no plot
# unless -o asks for one.
. "$TMA_SRCDIR/tests/lib.sh"
cd "$TMP_ROOT" || hard "cd"
W=$TMA_BUILDDIR/tests/gnn/write_test_graph
"$W" a.tmag 300 8 0 3 || hard "graph a"
"$W" b.tmag 300 8 0 4 || hard "graph b"
for r in a1:a:1 a2:a:2 b1:b:1; do
  IFS=: read -r name g seed <<<"$r"
  "$TMA_BIN" train $g.tmag --steps 5 --seed $seed --eval-every-seconds 1000 -q -o $name > /dev/null 2>&1 ||
    hard "tma train $name"
done
[ "$(json a1/result.json 'd["graph_id"]')" != "$(json b1/result.json 'd["graph_id"]')" ] || hard "the graphs have one id"

expect_fail 2 "differ in their graph.*a1.*b1" -- "$TMA_BIN" report a1 a2 b1 --json
cp -r a2 a2mean
python3 - a2mean/result.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["ties"] = "mean"; json.dump(d, open(sys.argv[1], "w"))
PY
expect_fail 2 "differ in their tie rule" -- "$TMA_BIN" report a1 a2mean --json

# Two runs: a mean and a spread; --json alone draws nothing.
"$TMA_BIN" report a1 a2 --json > two.json || fail "tma report a1 a2"
[ ! -e report.svg ] || fail "tma report --json wrote report.svg"
[ "$(json two.json 'd["groups"][0]["runs"]')" = 2 ] || fail "two runs are not one group of 2: $(cat two.json)"
[ "$(json two.json 'd["groups"][0]["test_mrr_std"] is not None')" = True ] || fail "no spread for two runs"
# One run: no spread.
"$TMA_BIN" report a1 --json > one.json || fail "tma report a1"
[ "$(json one.json 'd["groups"][0]["test_mrr_std"]')" = None ] || fail "the spread of one run is not null: $(cat one.json)"
"$TMA_BIN" report a1 -o one.svg > one.txt || fail "tma report a1 (text)"
grep -q "± *n/a" one.txt || { cat one.txt >&2; fail "the text report does not print n/a for one run's spread"; }
[ -s one.svg ] || fail "tma report -o one.svg drew nothing"

# An interrupted run: marked, and out of the means unless --all.
cp -r a2 a2int
python3 - a2int/result.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["stopped"] = "interrupted"; json.dump(d, open(sys.argv[1], "w"))
PY
"$TMA_BIN" report a1 a2int --json > int.json || fail "tma report a1 a2int"
[ "$(json int.json 'd["groups"][0]["runs"]')" = 1 ] || fail "the interrupted run was pooled: $(cat int.json)"
[ "$(json int.json '[r["in_means"] for r in d["runs"]]')" = "[True, False]" ] || fail "in_means: $(cat int.json)"
"$TMA_BIN" report a1 a2int --all --json > all.json || fail "tma report --all"
[ "$(json all.json 'd["groups"][0]["runs"]')" = 2 ] || fail "--all left the interrupted run out"
"$TMA_BIN" report a1 a2int -o int.svg > int.txt || fail "tma report a1 a2int (text)"
grep -q "a2int.*stopped early: not in the means" int.txt || { cat int.txt >&2; fail "the interrupted run is not marked"; }
echo "tma report pools only comparable runs"
