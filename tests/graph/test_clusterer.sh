#!/bin/bash
# test_clusterer.sh: `tma partition --clusterer lp`, the streaming clusterer
# (label propagation with capped groups, packed into the parts and refined)
# for the METIS-based schemes.  On a homophilous SBM it keeps about as many
# edges inside the shards as METIS (within 0.05 of METIS's edge ratio; far
# above random's 1/4) with shards within 4% of an equal share, and its
# supernode mini-clusters are dealt as METIS's are.  The same seed gives the
# same shards.  `auto` (the default) takes METIS when it fits the memory
# budget and lp when only lp does, and says so; an explicit metis over the
# budget names --clusterer lp.  Bad values are usage errors (exit 2).
. "$TMA_SRCDIR/tests/lib.sh"
d=$TMP_ROOT
"$TMA_BIN" gen sbm --nodes 100000 --avg-degree 20 --classes 4 --feat-dim 8 --seed 2 -o "$d/s.tmag" >/dev/null ||
  fail "gen sbm"
part() { "$TMA_BIN" partition "$d/s.tmag" --shards 4 --seed 1 "$@"; }
stat_of() { json "$1/partition.json" "$2"; }
part --scheme metis --clusterer metis -o "$d/metis" >/dev/null || fail "metis"
part --scheme metis --clusterer lp -o "$d/lp" >"$d/lp.out" || fail "lp"
part --scheme metis --clusterer lp -o "$d/lp2" >/dev/null || fail "lp again"
part --scheme random -o "$d/random" >/dev/null || fail "random"
grep -q "scheme metis (clusterer lp)" "$d/lp.out" || fail "the summary does not name the clusterer: $(cat "$d/lp.out")"
[ "$(stat_of "$d/lp" 'd["clusterer"]')" = lp ] || fail "partition.json does not record the clusterer"
[ "$(stat_of "$d/metis" 'd["clusterer"]')" = metis ] || fail "partition.json does not record METIS"
[ "$(stat_of "$d/random" '"clusterer" in d')" = False ] || fail "a random partition names a clusterer"
[ "$(cd "$d/lp" && sha256sum shard-*.tmag)" = "$(cd "$d/lp2" && sha256sum shard-*.tmag)" ] ||
  fail "the same seed gave other shards"
em=$(stat_of "$d/metis" 'd["edge_ratio"]') el=$(stat_of "$d/lp" 'd["edge_ratio"]') er=$(stat_of "$d/random" 'd["edge_ratio"]')
echo "edge ratio: metis $em, lp $el, random $er"
python3 -c "import sys; sys.exit(0 if $el >= $em - 0.05 and $el > $er + 0.4 else 1)" ||
  fail "lp kept $el of the edges inside shards (METIS $em, random $er)"
python3 - "$d/lp/partition.json" <<'PY' || fail "lp shards unbalanced"
import json, sys
d = json.load(open(sys.argv[1]))
n = d["shard_nodes"]
if max(n) > 1.04 * sum(n) / len(n):
    sys.exit("shard nodes %s" % n)
PY
part --scheme supernode:2000 --clusterer lp -o "$d/super" >/dev/null || fail "supernode with lp"
[ "$(stat_of "$d/super" 'd["clusterer"]')" = lp ] || fail "supernode did not record lp"
[ "$(stat_of "$d/super" 'd["shard_clusters"] == [500] * 4')" = True ] ||
  fail "mini-clusters not dealt evenly: $(stat_of "$d/super" 'd["shard_clusters"]')"
es=$(stat_of "$d/super" 'd["edge_ratio"]')
python3 -c "import sys; sys.exit(0 if $er + 0.02 < $es < $em else 1)" || fail "supernode with lp: edge ratio $es"

# auto: METIS within the budget; lp where only lp fits, said once.
mm=$(part --scheme metis --clusterer metis -o "$d/x" | sed -n 's/.*about \([0-9]*\) MiB of the.*/\1/p')
ml=$(part --scheme metis --clusterer lp -o "$d/x" | sed -n 's/.*about \([0-9]*\) MiB of the.*/\1/p')
[ -n "$mm" ] && [ -n "$ml" ] && [ "$ml" -lt "$mm" ] || fail "estimates: metis '$mm' MiB, lp '$ml' MiB"
budget=$(( (ml + mm) / 2 + 1 ))M
part --scheme metis -o "$d/auto" --memory "$budget" >"$d/auto.out" 2>"$d/auto.err" || { cat "$d/auto.err"; fail "auto"; }
[ "$(stat_of "$d/auto" 'd["clusterer"]')" = lp ] || fail "auto under a $budget budget did not use lp"
grep -q "METIS cannot take this graph (over the memory budget): clustering by label propagation" "$d/auto.err" ||
  fail "auto did not say it used lp: $(cat "$d/auto.err")"
part --scheme metis -o "$d/auto2" >/dev/null 2>"$d/auto2.err" || fail "auto with the default budget"
[ "$(stat_of "$d/auto2" 'd["clusterer"]')" = metis ] || fail "auto did not use METIS where it fits"
expect_fail 1 'with clusterer metis needs about [0-9]+ MiB.*--clusterer lp' -- \
  "$TMA_BIN" partition "$d/s.tmag" --shards 4 --scheme metis --clusterer metis -o "$d/x" --memory "$budget"
expect_fail 2 "--clusterer: expected metis, lp or auto, got 'kmeans'" -- \
  "$TMA_BIN" partition "$d/s.tmag" --shards 4 --scheme metis --clusterer kmeans -o "$d/x"
expect_fail 2 '--clusterer lp: the random scheme uses no clusterer' -- \
  "$TMA_BIN" partition "$d/s.tmag" --shards 4 --scheme random --clusterer lp -o "$d/x"
echo "ok: lp edge ratio $el (METIS $em, random $er), supernode $es; auto picks by the budget"
