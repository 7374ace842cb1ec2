#!/bin/bash
# test_cli_graph.sh: the graph commands end to end: import of Cora
# (tests/data/) and of a generated 20000-node graph with their reports, gen,
# partition with its table and partition.json, byte-identical files for a seed
# on 1 or 2 threads, --json, and every command's --help.
. "$TMA_SRCDIR/tests/lib.sh"
D=$TMA_FIXTURES
T=$TMA_BIN
cd "$TMP_ROOT" || hard "cd"

field() { sed -n "s/^  $1  *//p" "$2"; }

# import: the report's counts and tma info agree with the dataset README.
"$T" import "$D/cora" -o cora.tmag --negatives 20 > cora.out || fail "import cora"
[ "$(field nodes cora.out)" = 2708 ] || fail "cora nodes: $(cat cora.out)"
[ "$(field edges cora.out)" = 5278 ] || fail "cora edges"
[ "$(field 'duplicates dropped' cora.out)" = 0 ] || fail "cora duplicates"
grep -q '^  features  *1433 (stored)' cora.out || fail "cora features: $(cat cora.out)"
grep -q '^  labels  *7 classes' cora.out || fail "cora labels"
"$T" info cora.tmag --json > cora.json || fail "info"
[ "$(json cora.json 'd["nodes"], d["edges"], d["val_edges"], d["test_edges"], d["train_edges"], d["has_labels"]')" = \
  "2708 5278 264 264 4750 True" ] || fail "info: $(cat cora.json)"
"$T" import "$D/cora/cora.npz" -o npz.tmag --negatives 20 > npz.out || fail "import cora.npz"
[ "$(field 'input edges' npz.out)" = 5429 ] && [ "$(field 'duplicates dropped' npz.out)" = 151 ] || fail "npz report: $(cat npz.out)"
cmp -s cora.tmag npz.tmag || fail "cora.npz and cora/ give different files"
"$T" import "$D/cora-ogb" -o ogb.tmag --negatives 20 --feat-dim 48 > ogb.out || fail "import cora-ogb"
grep -q '(ogb layout)' ogb.out && grep -q '^  features  *48 (projected from 1433)' ogb.out || fail "ogb report: $(cat ogb.out)"
"$T" import "$D/cora" -o split.tmag --val 0.1 --test 50 --negatives 5 > split.out || fail "import cora --val --test"
[ "$(field nodes split.out) $(field edges split.out) $(field 'validation edges' split.out) $(field 'test edges' split.out)" = "2708 5278 528 50" ] ||
  fail "cora --val 0.1 --test 50 report: $(cat split.out)"

# A graph large enough that the import's parallel loops split over threads:
# 20000 nodes, 100000 distinct edges (u < v), 300 sparse features, 4 labels.
python3 - big <<'PY' || hard "cannot write the generated graph"
import os, random, sys
d = sys.argv[1]; os.mkdir(d); r = random.Random(11); n = 20000
edges = set()
while len(edges) < 100000:
    u, v = r.randrange(n), r.randrange(n)
    if u != v: edges.add((min(u, v), max(u, v)))
with open(d + "/meta.txt", "w") as f: f.write("nodes %d\nfeature_dim 300\n" % n)
with open(d + "/edges.txt", "w") as f: f.writelines("%d %d\n" % e for e in sorted(edges))
with open(d + "/features.txt", "w") as f:
    f.writelines("%d %d %.3f\n" % (v, c, r.random()) for v in range(n) for c in sorted(r.sample(range(300), 6)))
with open(d + "/labels.txt", "w") as f: f.writelines("%d %d\n" % (v, r.randrange(4)) for v in range(n))
PY

# The same seed gives the same bytes on 1 or 2 threads; another seed differs.
OMP_NUM_THREADS=1 "$T" import big -o big1.tmag --feat-dim 32 --negatives 10 --seed 5 > big.out || fail "import big"
OMP_NUM_THREADS=2 "$T" import big -o big2.tmag --feat-dim 32 --negatives 10 --seed 5 > /dev/null || fail "import big"
cmp -s big1.tmag big2.tmag || fail "the import differs between 1 and 2 threads"
[ "$(field nodes big.out) $(field edges big.out) $(field 'validation edges' big.out)" = "20000 100000 2000" ] || fail "big: $(cat big.out)"
"$T" import big -o big3.tmag --feat-dim 32 --negatives 10 --seed 6 > /dev/null || fail "import big"
! cmp -s big1.tmag big3.tmag || fail "another seed gave the same file"

OMP_NUM_THREADS=1 "$T" gen sbm -o sbm1.tmag --nodes 8000 --classes 3 --avg-degree 8 --homophily 0.7 --feat-dim 8 --noise 0.5 --seed 2 --negatives 10 > sbm.out || fail "gen sbm"
OMP_NUM_THREADS=2 "$T" gen sbm -o sbm2.tmag --nodes 8000 --classes 3 --avg-degree 8 --homophily 0.7 --feat-dim 8 --noise 0.5 --seed 2 --negatives 10 > /dev/null || fail "gen sbm"
cmp -s sbm1.tmag sbm2.tmag || fail "gen sbm differs between 1 and 2 threads"
awk '$1 == "homophily" { exit !($2 > 0.68 && $2 < 0.72) }' sbm.out || fail "sbm homophily: $(cat sbm.out)"
OMP_NUM_THREADS=1 "$T" gen rmat -o rmat1.tmag --scale 13 --edges 60000 --feat-dim 4 --seed 2 --negatives 10 > rmat.out || fail "gen rmat"
OMP_NUM_THREADS=2 "$T" gen rmat -o rmat2.tmag --scale 13 --edges 60000 --feat-dim 4 --seed 2 --negatives 10 > /dev/null || fail "gen rmat"
cmp -s rmat1.tmag rmat2.tmag || fail "gen rmat differs between 1 and 2 threads"
[ "$(field nodes rmat.out) $(field 'input edges' rmat.out)" = "8192 60000" ] || fail "rmat: $(cat rmat.out)"

# partition: the table, partition.json, same bytes on 1 or 2 threads.
for s in random supernode:200 metis; do
  OMP_NUM_THREADS=1 "$T" partition big1.tmag --scheme $s --shards 3 --seed 4 -o "p1-$s" > "p-$s.out" || fail "partition $s"
  OMP_NUM_THREADS=2 "$T" partition big1.tmag --scheme $s --shards 3 --seed 4 -o "p2-$s" > /dev/null || fail "partition $s"
  for k in 0 1 2; do
    cmp -s "p1-$s/shard-0000$k.tmag" "p2-$s/shard-0000$k.tmag" || fail "$s shard $k differs between 1 and 2 threads"
  done
  grep -qE '^ +2 +[0-9]+ +[0-9]+ ' "p-$s.out" && grep -q '^edge_ratio ' "p-$s.out" || fail "$s table: $(cat "p-$s.out")"
  j=p1-$s/partition.json
  [ "$(json "$j" 'sorted(k for k in ["scheme","shards","seed","edge_ratio","shard_nodes","shard_edges","label_tv","feature_mean_dist","seconds","graph","graph_abspath","graph_id","files"] if k not in d)')" = "[]" ] ||
    fail "$j lacks keys: $(cat "$j")"
  [ "$(json "$j" 'd["shards"], d["seed"], d["graph"], sum(d["shard_nodes"]), d["files"][2]')" = "3 4 big1.tmag 20000 shard-00002.tmag" ] || fail "$j: $(cat "$j")"
  [ "$(json "$j" 'd["graph_id"]')" = "$("$T" info big1.tmag --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["graph_id"])')" ] || fail "$j graph_id"
  [ "$(json "$j" 'abs(d["edge_ratio"] - sum(d["shard_edges"]) / d["train_edges"]) < 1e-12 and 0 <= d["label_tv"] <= 1')" = True ] || fail "$j stats"
  "$T" info "p1-$s/shard-00001.tmag" --json > shard.json || fail "info shard"
  [ "$(json shard.json 'd["kind"], d["shard_index"], d["num_shards"], d["val_edges"]')" = "shard 1 3 0" ] || fail "shard info: $(cat shard.json)"
done
[ "$(json p1-supernode:200/partition.json 'd["scheme"], d["clusters"], d["shard_clusters"]')" = "supernode 200 [67, 67, 66]" ] || fail "supernode json"
[ "$(json p1-random/partition.json 'd["scheme"], "clusters" in d')" = "random False" ] || fail "random json"
# supernode without N: the job config's default, about 50 nodes a cluster (at least 4 a shard)
"$T" partition big1.tmag --scheme supernode --shards 3 -o p-sn > /dev/null 2> p-sn.err || fail "partition supernode"
"$T" info big1.tmag --json > big1.info || fail "info big1"
nodes=$(json big1.info 'd["nodes"]')
want=$(( nodes / 50 > 12 ? (nodes / 50 < 15000 ? nodes / 50 : 15000) : 12 ))
[ "$(json p-sn/partition.json 'd["clusters"]')" = "$want" ] || fail "supernode default N: $(json p-sn/partition.json 'd["clusters"]'), want $want"
grep -q "supernode:$want (the job config's default" p-sn.err || fail "the default N is not printed: $(cat p-sn.err)"
# Without labels label_tv is null.
"$T" partition rmat1.tmag --scheme random --shards 2 -o prm > prm.out || fail "partition rmat"
[ "$(json prm/partition.json 'd["label_tv"]')" = None ] || fail "label_tv should be null without labels"
grep -q 'label_tv -' prm.out || fail "table without labels: $(cat prm.out)"

# --json: the same report as one JSON object (import, gen), partition.json (partition).
"$T" import "$D/cora" -o cs2.tmag --val 0.1 --test 50 --negatives 5 --json > cs.json || fail "import --json"
[ "$(json cs.json 'd["nodes"], d["edges"], d["val_edges"], d["test_edges"], d["graph"], d["classes"]')" = \
  "$(field nodes split.out) $(field edges split.out) $(field 'validation edges' split.out) $(field 'test edges' split.out) cs2.tmag 7" ] ||
  fail "import --json: $(cat cs.json)"
[ "$(json cs.json 'd["graph_id"]')" = "$(json <("$T" info cs2.tmag --json) 'd["graph_id"]')" ] || fail "import --json graph_id"
"$T" gen rmat -o rmat3.tmag --scale 13 --edges 60000 --feat-dim 4 --seed 2 --negatives 10 --json > rmat.json || fail "gen --json"
[ "$(json rmat.json 'd["nodes"], d["input_edges"], d["feature_dim"]')" = "8192 60000 4" ] || fail "gen --json: $(cat rmat.json)"
"$T" partition rmat1.tmag --scheme random --shards 2 -o prm2 --json > prm.json || fail "partition --json"
cmp -s prm.json prm2/partition.json || fail "partition --json did not print partition.json"

# Help texts.
"$T" --help | grep -q '^  import ' || fail "tma --help lacks import"
for c in import partition "gen sbm" "gen rmat"; do
  # shellcheck disable=SC2086
  "$T" $c --help > help.out || fail "tma $c --help"
  grep -q -- '--seed' help.out || fail "tma $c --help lacks --seed"
done
"$T" gen --help | grep -q 'rmat' || fail "tma gen --help"
echo ok
