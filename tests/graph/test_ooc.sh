#!/bin/bash
# test_ooc.sh: graphs larger than the memory a process may use.  `tma gen`
# under a `prlimit --data=` cap smaller than the graph file builds it out of
# core, and the file is byte for byte the one the uncapped, in-memory run
# writes; `tma partition --scheme random` under the same cap writes the same
# shards.  Then the forced out-of-core SBM against the in-memory one, and the
# budget's errors: a bad --memory (exit 2), a budget too small to make
# progress (exit 1, nothing left behind, no temporary file either).  And
# `tma import` of an edge list out of core against the in-memory import.
# The generator's and importer's comparisons run for every --feat-dtype.
. "$TMA_SRCDIR/tests/lib.sh"
need prlimit util-linux

d=$TMP_ROOT
cap=$((192 << 20))
# About 280 MB: 65,536 nodes of 1,024 features, beyond the cap.
gen=(gen rmat --scale 16 --edges 400000 --feat-dim 1024 --negatives 100 --seed 3 --json)

prlimit --data=$cap "$TMA_BIN" "${gen[@]}" -o "$d/cap.tmag" >"$d/cap.json" || fail "capped gen failed"
size=$(stat -c %s "$d/cap.tmag")
[ "$size" -gt "$cap" ] || hard "the graph ($size bytes) is not larger than the cap ($cap)"
[ "$(json "$d/cap.json" 'd["out_of_core"]')" = True ] || fail "the capped gen did not go out of core: $(cat "$d/cap.json")"
[ "$(json "$d/cap.json" 'd["memory_budget"] < '$cap)" = True ] || fail "budget not narrowed to the cap"
prlimit --data=$cap "$TMA_BIN" partition "$d/cap.tmag" --scheme random --shards 3 --seed 1 -o "$d/pcap" >/dev/null ||
  fail "capped partition failed"
sum_cap=$(cd "$d" && sha256sum cap.tmag | cut -c1-64)
shards_cap=$(cd "$d/pcap" && sha256sum shard-*.tmag)
rm -rf "$d/cap.tmag" "$d/pcap"

"$TMA_BIN" "${gen[@]}" -o "$d/free.tmag" --memory 16G >"$d/free.json" || fail "uncapped gen failed"
[ "$(json "$d/free.json" 'd["out_of_core"]')" = False ] || fail "the uncapped gen went out of core"
"$TMA_BIN" partition "$d/free.tmag" --scheme random --shards 3 --seed 1 -o "$d/pfree" >/dev/null ||
  fail "uncapped partition failed"
[ "$(cd "$d" && sha256sum free.tmag | cut -c1-64)" = "$sum_cap" ] || fail "out of core and in memory wrote different graphs"
[ "$(cd "$d/pfree" && sha256sum shard-*.tmag)" = "$shards_cap" ] || fail "capped and uncapped partitions differ"
rm -rf "$d/free.tmag" "$d/pfree"
echo "ok: R-MAT of $size bytes generated and partitioned under a $cap-byte cap, identical to the uncapped run"

# A tight cap never hangs a process: a threaded OpenBLAS (asked for here)
# used to start a pool whose 128 MiB buffers the cap refused, and its thread
# retried forever, so that exit() hung; tma runs OpenBLAS single-threaded.
rc=0
OPENBLAS_NUM_THREADS=2 timeout -s KILL 120 prlimit --data=$((100 << 20)) "$TMA_BIN" gen rmat --scale 16 \
  --edges 2000000 -o "$d/tight.tmag" >"$d/tight.out" 2>&1 || rc=$?
[ $rc -ne 137 ] || fail "tma gen under a 100 MiB cap hung (killed after 120 s)"
[ $rc -eq 0 ] || fail "tma gen under a 100 MiB cap: exit $rc: $(tail -3 "$d/tight.out")"
rm -f "$d/tight.tmag"
echo "ok: a 100 MiB cap with OPENBLAS_NUM_THREADS=2 set: done, no hang"

# The SBM (labels, class-centroid features, homophily) forced out of core,
# with each feature type.
for dt in f32 f16 bf16; do
  sbm=(gen sbm --nodes 60000 --avg-degree 24 --classes 5 --feat-dim 16 --seed 9 --json --feat-dtype $dt)
  "$TMA_BIN" "${sbm[@]}" -o "$d/a.tmag" --memory 16G >"$d/a.json" || fail "in-memory SBM ($dt) failed"
  "$TMA_BIN" "${sbm[@]}" -o "$d/b.tmag" --memory 20M >"$d/b.json" || fail "out-of-core SBM ($dt) failed"
  [ "$(json "$d/b.json" 'd["out_of_core"] and d["spilled_runs"] > 1')" = True ] || fail "SBM not out of core: $(cat "$d/b.json")"
  [ "$(json "$d/b.json" 'd["feature_type"]')" = $dt ] || fail "SBM out of core: feature type not $dt"
  cmp "$d/a.tmag" "$d/b.tmag" || fail "the SBM ($dt) out of core differs from the one in memory"
  for k in homophily edges duplicates self_loops; do
    [ "$(json "$d/a.json" "d.get('$k')")" = "$(json "$d/b.json" "d.get('$k')")" ] || fail "report's $k differs"
  done
  echo "ok: SBM ($dt) out of core ($(json "$d/b.json" 'd["spilled_runs"]') runs) identical to in memory"
done

# tma import of the edge-list layout out of core: edges.txt in blocks of
# lines, sparse features.txt and labels.txt, then a features.npy (mapped in
# place in memory, streamed out of core) with and without --feat-dim.
mkdir -p "$d/ds"
awk 'BEGIN{srand(7); print "src dst"; for(i=0;i<900000;i++) printf "%d %d\n", int(rand()*rand()*150000), int(rand()*150000)}' \
  >"$d/ds/edges.txt"
awk 'BEGIN{srand(8); for(i=0;i<60000;i++) printf "%d %d %.3f\n", int(rand()*150000), int(rand()*40), rand()}' \
  >"$d/ds/features.txt"
awk 'BEGIN{srand(9); for(i=0;i<150000;i++) printf "%d %d\n", i, int(rand()*6)}' >"$d/ds/labels.txt"
import_both() {  # NAME ARGS...: the same import in memory and out of core, compared
  local name=$1; shift
  "$TMA_BIN" import "$d/ds" -o "$d/$name-mem.tmag" --memory 16G --json "$@" >"$d/$name-mem.json" 2>/dev/null ||
    fail "$name: import in memory failed"
  "$TMA_BIN" import "$d/ds" -o "$d/$name-ooc.tmag" --memory 20M --json "$@" >"$d/$name-ooc.json" 2>"$d/$name.err" ||
    fail "$name: import out of core failed: $(cat "$d/$name.err")"
  [ "$(json "$d/$name-ooc.json" 'd["out_of_core"]')" = True ] || fail "$name: not out of core: $(cat "$d/$name-ooc.json")"
  [ "$(json "$d/$name-mem.json" 'd["out_of_core"]')" = False ] || fail "$name: in memory went out of core"
  cmp "$d/$name-mem.tmag" "$d/$name-ooc.tmag" || fail "$name: out of core differs from in memory"
  [ "$(json "$d/$name-ooc.json" 'd["ignored"]')" = "$(json "$d/$name-mem.json" 'd["ignored"]')" ] ||
    fail "$name: the ignored files differ"
  rm -f "$d/$name-mem.tmag" "$d/$name-ooc.tmag"
}
import_both sparse
import_both sparse-f16 --feat-dtype f16
import_both sparse-bf16 --feat-dtype bf16
rm "$d/ds/features.txt" "$d/ds/labels.txt"
write_npy() {  # PATH DESCR ('<f4' or '<f2'): 150000 x 8 seeded uniform values
  python3 - "$1" "$2" <<'PY'
import struct, sys, random
rows, cols, descr = 150000, 8, sys.argv[2]
random.seed(5)
hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d), }" % (descr, rows, cols)
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    f.write(struct.pack("<%d%s" % (rows * cols, "f" if descr == "<f4" else "e"),
                        *[random.uniform(-1, 1) for _ in range(rows * cols)]))
PY
}
write_npy "$d/ds/features.npy" '<f4'
import_both npy
[ "$(json "$d/npy-mem.json" 'd["features_mapped"]')" = True ] || fail "features.npy was not used in place in memory"
import_both npy-bf16 --feat-dtype bf16
import_both projected --feat-dim 12
import_both projected-f16 --feat-dim 12 --feat-dtype f16
# A float16 features.npy kept as float16: mapped in place in memory.
write_npy "$d/ds/features.npy" '<f2'
import_both npy16 --feat-dtype f16
[ "$(json "$d/npy16-mem.json" 'd["features_mapped"]')" = True ] || fail "a float16 features.npy was not used in place"
echo "ok: import out of core identical to in memory (sparse features and labels; features.npy, also projected;" \
  "f16 and bf16 too)"

# The budget's errors.
mkdir -p "$d/out"
expect_fail 2 '--memory: expected a size such as 512M' -- "$TMA_BIN" gen rmat --scale 8 -o "$d/out/g.tmag" --memory lots
expect_fail 2 '--memory: expected a size' -- "$TMA_BIN" gen sbm --nodes 100 -o "$d/out/g.tmag" --memory 0
expect_fail 1 'memory budget of 1\.0 MiB is too small to make progress' -- \
  "$TMA_BIN" gen rmat --scale 16 --edges 400000 -o "$d/out/g.tmag" --memory 1M
expect_fail 1 'typed SBM is built in memory only' -- \
  "$TMA_BIN" gen sbm --nodes 60000 --node-types 2 --relations 2 -o "$d/out/g.tmag" --memory 1M
"$TMA_BIN" gen sbm --nodes 20000 -o "$d/s.tmag" >/dev/null || fail "gen sbm failed"
expect_fail 1 'the metis scheme with clusterer metis needs about [0-9]+ MiB .* over the memory budget of 2 MiB.*--clusterer lp' -- \
  "$TMA_BIN" partition "$d/s.tmag" --scheme metis --shards 3 -o "$d/out/p" --memory 2M
expect_fail 1 'the random scheme needs about [0-9]+ MiB' -- \
  "$TMA_BIN" partition "$d/s.tmag" --scheme random --shards 3 -o "$d/out/p" --memory 2M
expect_fail 2 '--memory: expected a size' -- "$TMA_BIN" partition "$d/s.tmag" --scheme random --shards 3 -o "$d/out/p" --memory 4X
[ ! -e "$d/out/p/partition.json" ] || fail "a partition.json under a refused budget"
rm -rf "$d/out/p"
[ -z "$(ls -A "$d/out")" ] || fail "files left behind: $(ls -A "$d/out")"
echo "ok: budget errors"

# A spill folder that fills up: a clear error naming it, nothing left behind
# (in a private mount namespace, over a 6 MiB tmpfs).
need unshare util-linux
mkdir -p "$d/small"
unshare -m bash -c 'mount -t tmpfs -o size=6M tmpfs "$1" || exit 3
  "$2" gen rmat --scale 16 --edges 2000000 -o "$1/g.tmag" --memory 24M 2>"$1.err"; rc=$?
  ls -A "$1" >"$1.left"; exit $rc' _ "$d/small" "$TMA_BIN"
rc=$?
[ $rc -ne 3 ] || fail "cannot mount a tmpfs in a private mount namespace (run as root)"
[ $rc -eq 1 ] || fail "a full spill folder: exit $rc, expected 1 ($(cat "$d/small.err"))"
grep -q "writing a temporary file in $d/small failed.*No space left on device" "$d/small.err" ||
  fail "a full spill folder: unclear error: $(cat "$d/small.err")"
[ ! -s "$d/small.left" ] || fail "a full spill folder: left behind: $(cat "$d/small.left")"
echo "ok: a full spill folder"
