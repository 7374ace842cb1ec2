#!/bin/bash
# test_hetero_cli.sh: heterogeneous models through the tma program: rgcn +
# distmult, gcn + distmult and rgcn + mlp train with `tma train` on the
# MovieLens fixture and on a typed SBM (result.json valid, the resolved
# relations recorded, same seed same result), `tma eval` of their weights
# agrees with the run, a graph with other relations is refused, an untyped
# graph gives distmult one relation, `tma export` writes them, and bad model keys are refused by name.
. "$TMA_SRCDIR/tests/lib.sh"
D=$TMA_FIXTURES
T=$TMA_BIN
cd "$TMP_ROOT" || hard "cd"

"$T" import "$D/movielens-mini" -o ml.tmag --val 4 --test 4 --negatives 5 > /dev/null || fail "import movielens"
"$T" gen sbm -o ts.tmag --nodes 600 --classes 20 --noise 3 --node-types 2 --relations 3 --feat-dim 12 --seed 5 \
  --val 60 --test 60 --negatives 30 > /dev/null || fail "gen typed sbm"

config() { # ENCODER DECODER > config
  printf '{"model": {"encoder": "%s", "decoder": "%s", "hidden": 16, "decoder_hidden": 16, "bases": 2},
 "train": {"batch_size": 32, "fanouts": [4, 3], "lr": 0.01, "threads": 2, "seed": 3}}\n' "$1" "$2"
}

for m in rgcn:distmult gcn:distmult rgcn:mlp; do
  enc=${m%:*} dec=${m#*:}
  config "$enc" "$dec" > "$enc-$dec.json"
  # MovieLens fixture (10 relation ids: 5 ratings and their inverses).
  "$T" train ml.tmag --config "$enc-$dec.json" --steps 20 -o "ml-$enc-$dec" -q > ml.out 2> ml.err ||
    { cat ml.err; fail "$enc + $dec on movielens-mini"; }
  python3 - "ml-$enc-$dec" "$enc" "$dec" <<'PY' || fail "$enc + $dec: bad run folder"
import json, math, sys
run, enc, dec = sys.argv[1:]
res = json.load(open(run + "/result.json"))
cfg = json.load(open(run + "/config.json"))["model"]
assert 0 < res["test_mrr"] <= 1 and math.isfinite(res["test_mrr"]), res
assert res["steps"] == 20 and res["encoder"] == enc, res
assert cfg["encoder"] == enc and cfg["decoder"] == dec and cfg["relations"] == 10, cfg
assert ("bases" in cfg) == (enc == "rgcn"), cfg
# RGCN projects each node type (user: 8 features, movie: 20) to the hidden width first.
assert cfg.get("type_dims") == ([8, 20] if enc == "rgcn" else None), cfg
PY
  # The typed SBM: learning, and the same seed gives the same result.
  for r in a b; do
    "$T" train ts.tmag --config "$enc-$dec.json" --steps 150 --eval-every-seconds 1000 -o "ts-$enc-$dec-$r" -q \
      > "ts-$r.out" 2> ts.err || { cat ts.err; fail "$enc + $dec on the typed SBM"; }
  done
  cmp -s ts-a.out ts-b.out || fail "$enc + $dec: same seed, test MRR $(cat ts-a.out) and $(cat ts-b.out)"
  cmp -s "ts-$enc-$dec-a/best.tmaw" "ts-$enc-$dec-b/best.tmaw" || fail "$enc + $dec: same seed, other weights"
  # tma eval of the weights gives the run's test MRR.
  "$T" eval ts.tmag "ts-$enc-$dec-a/best.tmaw" --json > ev.json || fail "tma eval $enc + $dec"
  python3 - ev.json "ts-$enc-$dec-a/result.json" <<'PY' || fail "tma eval disagrees with the run ($enc + $dec)"
import json, sys
e, r = (json.load(open(f)) for f in sys.argv[1:])
assert abs(e["mrr"] - r["test_mrr"]) < 1e-9, (e["mrr"], r["test_mrr"])
PY
done

# A model for 6 relation ids does not fit a graph with 4.
"$T" gen sbm -o r2.tmag --nodes 300 --classes 5 --node-types 2 --relations 2 --feat-dim 12 --negatives 10 > /dev/null ||
  fail "gen r2"
expect_fail 2 'trained with 6 relation ids but r2.tmag has 4' -- "$T" eval r2.tmag ts-rgcn-distmult-a/best.tmaw
# On an untyped graph DistMult has one relation.
"$T" gen sbm -o plain.tmag --nodes 300 --feat-dim 8 --negatives 10 > /dev/null || fail "gen sbm"
"$T" train plain.tmag --config gcn-distmult.json --steps 10 -o plain-run -q > /dev/null 2>&1 || fail "distmult untyped"
[ "$(json plain-run/config.json 'd["model"]["relations"]')" = 1 ] || fail "untyped graph: relations is not 1"
# An untyped model's config names none of the new keys.
"$T" train plain.tmag --steps 2 -o gcn-run -q > /dev/null 2>&1 || fail "gcn untyped"
[ "$(json gcn-run/config.json '[k for k in ("decoder", "bases", "relations") if k in d["model"]]')" = "[]" ] ||
  fail "an untyped gcn model's config names decoder, bases or relations"

# Export writes them: RGCN layers as PyG's RGCNConv, the per-type input
# projection, DistMult's diagonals, and the relation ids in model.json.
"$T" export ts-rgcn-distmult-a -o exp > /dev/null || fail "tma export of rgcn + distmult"
python3 - <<'PY' || fail "tma export of rgcn + distmult: bad model.npz or model.json"
import json, zipfile
names = sorted(n[:-4] for n in zipfile.ZipFile("exp/model.npz").namelist())
want = sorted(["input.0.weight", "input.0.bias", "input.1.weight", "input.1.bias", "decoder.relation.weight"] +
              ["encoder.%d.%s" % (l, k) for l in (0, 1) for k in ("weight", "comp", "root", "bias")] +
              ["encoder.0.norm.weight", "encoder.0.norm.bias", "encoder.0.act.weight"])
assert names == want, names
ex = json.load(open("exp/model.json"))["export"]
assert ex["relation_ids"] == 6 and ex["inverse"] == [3, 4, 5, 0, 1, 2], ex
assert len(ex["node_types"]) == 2 and len(ex["type_feat_dims"]) == 2 and len(ex["relation_names"]) == 6, ex
PY
# Bad keys are named.
echo '{"model": {"decoder": "transe"}}' > bad1.json
expect_fail 2 'model.decoder' -- "$T" train ts.tmag --config bad1.json --steps 1 -o bad1
echo '{"model": {"encoder": "rgcn", "bases": 0}}' > bad2.json
expect_fail 2 '"bases" = 0 is out of range' -- "$T" train ts.tmag --config bad2.json --steps 1 -o bad2
echo '{"model": {"encoder": "rgcn", "relations": 4}}' > bad3.json
expect_fail 2 'relations' -- "$T" train ts.tmag --config bad3.json --steps 1 -o bad3
echo "hetero cli: rgcn/gcn x distmult/mlp on movielens-mini and a typed SBM"
