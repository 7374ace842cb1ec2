#!/bin/bash
# test_typed_cli.sh: typed graphs through the tma program: import of the
# MovieLens-format fixture (tests/data/movielens-mini) and of the generic
# typed layout with their reports, tma info's types and relations, a bad
# typed line named file:line, the typed SBM (the same bytes on 1 or 2
# threads; untyped graphs still written as version 1), and partitions by
# every scheme whose shards keep the types.
. "$TMA_SRCDIR/tests/lib.sh"
D=$TMA_FIXTURES
T=$TMA_BIN
cd "$TMP_ROOT" || hard "cd"

field() { sed -n "s/^  $1  *//p" "$2"; }
version() { python3 -c "import struct,sys; print(struct.unpack_from('<I', open(sys.argv[1],'rb').read(), 8)[0])" "$1"; }

# MovieLens: counts, types, relations with their inverses.
"$T" import "$D/movielens-mini" -o ml.tmag --val 4 --test 4 --negatives 5 > ml.out || fail "import movielens: $(cat ml.out)"
grep -q '(movielens layout)' ml.out || fail "movielens layout: $(cat ml.out)"
[ "$(field nodes ml.out) $(field edges ml.out) $(field 'train edges' ml.out)" = "14 36 28" ] || fail "movielens counts: $(cat ml.out)"
grep -q '^  node types  *user: 6 nodes, 8 features' ml.out || fail "movielens user type: $(cat ml.out)"
grep -q '^  *movie: 8 nodes, 20 features' ml.out || fail "movielens movie type: $(cat ml.out)"
grep -q 'rating5: .* (ids 4 and 9)' ml.out || fail "movielens relations: $(cat ml.out)"
[ "$(version ml.tmag)" = 2 ] || fail "a typed graph is version 2"
"$T" info ml.tmag --json > ml.json || fail "info movielens"
[ "$(json ml.json 'd["num_node_types"], d["num_relations"], [t["name"] for t in d["node_types"]], d["relations"][0]["name"], d["relations"][0]["inverse_id"]')" = \
  "2 5 ['user', 'movie'] rating1 5" ] || fail "info --json: $(cat ml.json)"
"$T" info ml.tmag > ml.info || fail "info"
grep -q '^node_type  *1 movie: 8 nodes, 20 features' ml.info || fail "info text: $(cat ml.info)"
grep -q '^relation  *2 rating3:' ml.info || fail "info text relations: $(cat ml.info)"
"$T" import "$D/movielens-mini" -o mlj.tmag --val 4 --test 4 --negatives 5 --json > mlj.json || fail "import --json"
[ "$(json mlj.json 'd["layout"], d["num_node_types"], d["num_relations"]')" = "movielens 2 5" ] || fail "import --json: $(cat mlj.json)"
cmp -s ml.tmag mlj.tmag || fail "the same import gave two files"
expect_fail 1 'feat-dim does not apply' -- "$T" import "$D/movielens-mini" -o x.tmag --feat-dim 8
[ ! -e x.tmag ] || fail "a failed import left a file"

# A broken MovieLens copy is named file:line.
mkdir mlbad && cp "$D"/movielens-mini/u.* mlbad/ || hard "copy"
printf '1\t2\t7\t880000000\n' >> mlbad/u.data
expect_fail 1 'u.data:37: rating 7 is outside \[1, 5\]' -- "$T" import mlbad -o x.tmag

# The generic typed layout.
mkdir typed
printf '0 query\n1 query\n2 query\n3 item\n4 item\n5 item\n6 item\n' > typed/node_types.txt
printf '0 3 click\n0 4 click\n1 4 click\n1 5 click\n2 5 click\n2 6 click\n3 4 similar\n5 6 similar\n4 5 similar\n' > typed/edges.txt
"$T" import typed -o typed.tmag --val 1 --test 1 --negatives 2 --feat-dim 4 > typed.out || fail "import typed: $(cat typed.out)"
grep -q '(typed layout)' typed.out && grep -q '^  node types  *query: 3 nodes, 4 features' typed.out &&
  grep -q 'similar: ' typed.out || fail "typed report: $(cat typed.out)"
printf '0 3 click\n0 4\n' > typed/edges.txt
expect_fail 1 'edges.txt:2: too few fields' -- "$T" import typed -o x.tmag
printf '0 3 click\n0 9 click\n' > typed/edges.txt
expect_fail 1 'edges.txt:2: node 9 has no type' -- "$T" import typed -o x.tmag
printf '0 query\n1\n' > typed/node_types.txt
expect_fail 1 'node_types.txt:2: too few fields' -- "$T" import typed -o x.tmag

# The typed SBM: the same bytes on 1 or 2 threads; its types in tma info.
for th in 1 2; do
  OMP_NUM_THREADS=$th "$T" gen sbm -o ts$th.tmag --nodes 3000 --node-types 3 --relations 4 --feat-dim 8 --seed 5 \
    --negatives 10 > ts.out || fail "gen typed sbm: $(cat ts.out)"
done
cmp -s ts1.tmag ts2.tmag || fail "the typed SBM differs between 1 and 2 threads"
grep -q '^  node types  *type0: 1000 nodes, 8 features' ts.out && grep -q 'type2: 1000 nodes, 6 features' ts.out ||
  fail "typed sbm report: $(cat ts.out)"
"$T" gen sbm -o us.tmag --nodes 3000 --feat-dim 8 --seed 5 --negatives 10 > /dev/null || fail "gen sbm"
[ "$(version us.tmag)" = 1 ] || fail "an untyped graph must stay version 1"
"$T" info us.tmag --json > us.json || fail "info untyped"
[ "$(json us.json '"num_node_types" in d')" = False ] || fail "untyped info lists types"
expect_fail 2 'relations' -- "$T" gen sbm -o x.tmag --relations 3
expect_fail 2 'node-types' -- "$T" gen sbm -o x.tmag --nodes 10 --node-types 11 --relations 1
"$T" gen sbm --help | grep -q -- '--node-types' || fail "gen sbm --help lacks --node-types"

# Partitions by every scheme keep the types in their shards.
for s in random supernode:30 metis; do
  "$T" partition ts1.tmag --scheme $s --shards 3 --seed 1 -o "p-$s" > /dev/null || fail "partition $s"
  n=0
  for k in 0 1 2; do
    "$T" info "p-$s/shard-0000$k.tmag" --json > sh.json || fail "info shard $s $k"
    [ "$(json sh.json 'd["num_node_types"], d["num_relations"], d["node_types"][2]["feature_dim"]')" = "3 4 6" ] ||
      fail "shard $k of $s: $(cat sh.json)"
    n=$((n + $(json sh.json 'sum(t["nodes"] for t in d["node_types"])')))
  done
  [ "$n" = 3000 ] || fail "$s shards hold $n typed nodes"
done
echo ok
