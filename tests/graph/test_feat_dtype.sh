#!/bin/bash
# test_feat_dtype.sh: half-precision features (--feat-dtype f16 | bf16).
# `tma gen` and `tma import` store the float32 features rounded to nearest
# even, checked against numpy's float16 and PyTorch's bfloat16 conversions
# (the reference, not tma's own code), every other section unchanged; a
# float16 features.npy is kept as it is; a 16-bit table generated in memory
# never exists in float32 whole; `tma info` shows the type; the
# Python package returns the right numpy dtype; a partition keeps the type
# and the rows; training on an f16 or bf16 SBM is deterministic and its test
# MRR close to the f32 graph's; a bad --feat-dtype is refused (exit 2) and a
# file with an unknown feature type is refused naming it.
. "$TMA_SRCDIR/tests/lib.sh"
PY=/usr/bin/python3
need_py "$PY" numpy python3-numpy
export PYTHONPATH=$TMA_SRCDIR/python PYTHONDONTWRITEBYTECODE=1
d=$TMP_ROOT

# Checks B.tmag against A.tmag (its f32 twin): the features are A's rounded
# to type DT by the reference conversion, every other array is identical,
# and open_graph returns numpy's type for it.
same_but_features() {  # A B DT
  "$PY" - "$@" <<'PY' || fail "$2: not the f32 graph's features rounded to $3"
import sys
import numpy as np
import tma
a, b, dt = tma.open_graph(sys.argv[1]), tma.open_graph(sys.argv[2]), sys.argv[3]
assert a.header["feat_dtype"] == 0 and a.features.dtype == np.float32
x = np.asarray(a.features)
if dt == "f16":
    assert b.features.dtype == np.float16, b.features.dtype
    want = x.astype(np.float16)
    assert np.array_equal(np.asarray(b.features).view(np.uint16), want.view(np.uint16)), "f16 bits differ"
else:
    try:
        import torch
        want = torch.from_numpy(x.copy()).to(torch.bfloat16).to(torch.float32).numpy()
    except ImportError:  # the same rounding, written out: nearest, ties to even
        u = x.view(np.uint32).astype(np.uint64)
        want = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    got = np.asarray(b.features, dtype=np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), "bf16 values differ"
assert b.header["feat_dtype"] == {"f16": 1, "bf16": 2}[dt]
for k in ("indptr", "indices", "labels", "val_edges", "test_edges", "val_neg", "test_neg"):
    va, vb = getattr(a, k), getattr(b, k)
    assert (va is None) == (vb is None) and (va is None or np.array_equal(va, vb)), k
assert not np.array_equal(np.asarray(b.features, dtype=np.float32), x), "nothing was rounded"
PY
}

info_type() { "$TMA_BIN" info "$1" | awk '$1 == "feature_type" {print $2}'; }

# --- generation --------------------------------------------------------------
sbm=(gen sbm --nodes 3000 --feat-dim 16 --seed 1 --negatives 100)
for dt in f32 f16 bf16; do
  "$TMA_BIN" "${sbm[@]}" --feat-dtype $dt -o "$d/s-$dt.tmag" --json >"$d/s-$dt.json" || fail "gen sbm --feat-dtype $dt failed"
  [ "$(json "$d/s-$dt.json" 'd["feature_type"]')" = $dt ] || fail "gen's report: feature_type is not $dt"
  [ "$(info_type "$d/s-$dt.tmag")" = $dt ] || fail "tma info does not show feature_type $dt"
  [ "$("$TMA_BIN" info "$d/s-$dt.tmag" --json | json /dev/stdin 'd["feature_type"]')" = $dt ] ||
    fail "tma info --json does not show feature_type $dt"
  "$TMA_BIN" gen rmat --scale 10 --feat-dim 8 --seed 2 --feat-dtype $dt -o "$d/m-$dt.tmag" >/dev/null ||
    fail "gen rmat --feat-dtype $dt failed"
done
"$TMA_BIN" "${sbm[@]}" -o "$d/s-default.tmag" >/dev/null || fail "gen sbm failed"
cmp "$d/s-default.tmag" "$d/s-f32.tmag" || fail "--feat-dtype f32 is not the default's bytes"
for dt in f16 bf16; do
  same_but_features "$d/s-f32.tmag" "$d/s-$dt.tmag" $dt
  same_but_features "$d/m-f32.tmag" "$d/m-$dt.tmag" $dt
  [ "$(json "$d/s-$dt.json" 'd["graph_id"]')" != "$(json "$d/s-f32.json" 'd["graph_id"]')" ] ||
    fail "the $dt graph has the f32 graph's id"
done
size32=$(stat -c %s "$d/s-f32.tmag") size16=$(stat -c %s "$d/s-f16.tmag")
[ "$size16" -lt "$size32" ] || fail "the f16 file ($size16 bytes) is not smaller than the f32 one ($size32)"
echo "ok: gen sbm and rmat with f16 and bf16 features: the f32 values rounded to nearest even, the rest identical"

# A 16-bit table generated in memory is narrowed a block at a time: the
# process never holds the graph's float32 table (here 256 MiB; the f16 one
# is 128 MiB).  Its peak RSS (getrusage) stays below the float32 table's size.
for kind in rmat sbm typed-sbm; do
  case $kind in
  rmat) args=(gen rmat --scale 14 --edges 50000) ;;
  sbm) args=(gen sbm --nodes 16384 --avg-degree 4) ;;
  typed-sbm) args=(gen sbm --nodes 16384 --avg-degree 4 --node-types 3 --relations 2) ;;
  esac
  peak=$("$PY" - "$TMA_BIN" "${args[@]}" --feat-dim 4096 --feat-dtype f16 --memory 16G -o "$d/wide16.tmag" <<'PY'
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)  # KiB
PY
) || fail "gen $kind --feat-dim 4096 --feat-dtype f16 failed"
  [ "$peak" -lt $((256 << 10)) ] ||
    fail "gen $kind --feat-dtype f16 in memory peaked at $peak KiB: the 256 MiB float32 table was held"
  echo "ok: gen $kind f16 in memory peaked at $((peak >> 10)) MiB, under the float32 table's 256 MiB"
  rm -f "$d/wide16.tmag"
done

# --- import ------------------------------------------------------------------
mkdir -p "$d/ds"
awk 'BEGIN{srand(3); for(i=0;i<4000;i++) printf "%d %d\n", int(rand()*500), int(rand()*500)}' >"$d/ds/edges.txt"
awk 'BEGIN{srand(4); for(v=0;v<500;v++) for(j=0;j<6;j++) printf "%d %d %.7f\n", v, j, (rand()-0.5)*3}' \
  >"$d/ds/features.txt"
for dt in f32 f16 bf16; do
  "$TMA_BIN" import "$d/ds" --feat-dtype $dt --negatives 20 -o "$d/i-$dt.tmag" --json >"$d/i-$dt.json" ||
    fail "import --feat-dtype $dt failed"
  [ "$(json "$d/i-$dt.json" 'd["feature_type"]')" = $dt ] || fail "import's report: feature_type is not $dt"
done
for dt in f16 bf16; do same_but_features "$d/i-f32.tmag" "$d/i-$dt.tmag" $dt; done
# A float16 features.npy: kept as it is with --feat-dtype f16 (mapped in
# place), widened exactly by default.
rm "$d/ds/features.txt"
"$PY" - "$d/ds/features.npy" <<'PY' || hard "cannot write features.npy"
import sys
import numpy as np
np.save(sys.argv[1], np.random.default_rng(6).normal(size=(500, 6)).astype(np.float16))
PY
"$TMA_BIN" import "$d/ds" --feat-dtype f16 --negatives 20 -o "$d/n16.tmag" --json >"$d/n16.json" || fail "import of a float16 npy failed"
[ "$(json "$d/n16.json" 'd["features_mapped"]')" = True ] || fail "the float16 features.npy was not kept in place"
"$TMA_BIN" import "$d/ds" --negatives 20 -o "$d/n32.tmag" >/dev/null || fail "import of a float16 npy as f32 failed"
"$PY" - "$d/ds/features.npy" "$d/n16.tmag" "$d/n32.tmag" <<'PY' || fail "a float16 features.npy is not stored as given"
import sys
import numpy as np
import tma
x = np.load(sys.argv[1])
g16, g32 = tma.open_graph(sys.argv[2]), tma.open_graph(sys.argv[3])
assert g16.features.dtype == np.float16 and np.array_equal(np.asarray(g16.features).view(np.uint16), x.view(np.uint16))
assert g32.features.dtype == np.float32 and np.array_equal(np.asarray(g32.features), x.astype(np.float32))
PY
# A PyG-style .npz whose x is float16: the same values stored.
"$PY" - "$d/pyg.npz" <<'PY' || hard "cannot write pyg.npz"
import sys
import numpy as np
r = np.random.default_rng(7)
np.savez(sys.argv[1], edge_index=r.integers(0, 400, size=(2, 3000)),
         x=r.normal(size=(400, 5)).astype(np.float16))
PY
"$TMA_BIN" import "$d/pyg.npz" --feat-dtype f16 --negatives 20 -o "$d/z16.tmag" >/dev/null || fail "import of a float16 npz failed"
"$PY" - "$d/pyg.npz" "$d/z16.tmag" <<'PY' || fail "a float16 npz array is not stored as given"
import sys
import numpy as np
import tma
x, g = np.load(sys.argv[1])["x"], tma.open_graph(sys.argv[2])
assert g.features.dtype == np.float16 and np.array_equal(np.asarray(g.features).view(np.uint16), x.view(np.uint16))
PY
echo "ok: import with f16 and bf16 features; a float16 features.npy and npz array kept as float16"

# --- partition ---------------------------------------------------------------
"$TMA_BIN" partition "$d/s-f16.tmag" --scheme random --shards 3 --seed 1 -o "$d/p16" >/dev/null ||
  fail "partition of an f16 graph failed"
for k in 0 1 2; do
  [ "$(info_type "$d/p16/shard-0000$k.tmag")" = f16 ] || fail "shard $k is not f16"
done
"$PY" - "$d/s-f16.tmag" "$d/p16" <<'PY' || fail "the shards' rows are not the parent's"
import glob, sys
import numpy as np
import tma
g = tma.open_graph(sys.argv[1])
seen = 0
for p in sorted(glob.glob(sys.argv[2] + "/shard-?????.tmag")):
    s = tma.open_graph(p)
    _, off, count = s.header["sections"][9]  # global ids
    gids = np.asarray(np.memmap(p, dtype="<i8", mode="r", offset=off, shape=(count,)))
    assert s.features.dtype == np.float16
    assert np.array_equal(np.asarray(s.features).view(np.uint16), np.asarray(g.features)[gids].view(np.uint16)), p
    seen += len(gids)
assert seen == g.header["num_nodes"], seen
PY
echo "ok: a partition of an f16 graph has f16 shards holding the parent's rows"

# --- training ----------------------------------------------------------------
# Step mode (one validation, at the end), so a run is a pure function of the
# graph and the seed: the f16 run twice gives the same weights.  Rounding the
# features to f16 (relative error 2^-11) or bf16 (2^-8) perturbs training
# about as much as another seed does: on this SBM the f32 test MRR ranges
# 0.125 to 0.149 over seeds 1-5 (standard deviation about 0.009) and f16 and
# bf16 were within 0.008 of f32 for each seed.  The tolerance, 0.03, is some
# three seed deviations: a broken widening (zeros, garbage, wrong rows) loses
# far more (random features give about 0.02 on 100 negatives).
cat >"$d/model.json" <<'JSON'
{"model": {"encoder": "sage", "hidden": 32, "decoder_hidden": 32},
 "train": {"batch_size": 128, "fanouts": [5, 5], "lr": 0.01, "threads": 2, "seed": 3}}
JSON
train() {  # GRAPH RUN
  "$TMA_BIN" train "$1" --config "$d/model.json" --steps 1000 --eval-every-seconds 100000 -q --json -o "$2" \
    >"$2.json" 2>"$2.err" || fail "tma train $1 failed: $(tail -3 "$2.err")"
  json "$2.json" 'd["test_mrr"]'
}
m32=$(train "$d/s-f32.tmag" "$d/t32")
m16=$(train "$d/s-f16.tmag" "$d/t16")
m16b=$(train "$d/s-f16.tmag" "$d/t16b")
mbf=$(train "$d/s-bf16.tmag" "$d/tbf")
cmp "$d/t16/best.tmaw" "$d/t16b/best.tmaw" || fail "two f16 runs with one seed wrote different weights"
[ "$m16" = "$m16b" ] || fail "two f16 runs with one seed: test MRR $m16 and $m16b"
for m in "f16 $m16" "bf16 $mbf"; do
  set -- $m
  python3 -c "import sys; sys.exit(0 if abs($2 - $m32) <= 0.03 and $m32 > 0.08 else 1)" ||
    fail "$1 test MRR $2 is not within 0.03 of f32's $m32"
done
echo "ok: step-mode training deterministic on f16; test MRR f32 $m32, f16 $m16, bf16 $mbf"

# --- bad input ---------------------------------------------------------------
mkdir -p "$d/out"
expect_fail 2 "--feat-dtype: expected f32, f16 or bf16, got 'f8'" -- "$TMA_BIN" gen sbm --nodes 100 --feat-dtype f8 -o "$d/out/g.tmag"
expect_fail 2 "--feat-dtype: expected f32, f16 or bf16, got 'F16'" -- "$TMA_BIN" gen rmat --scale 8 --feat-dtype F16 -o "$d/out/g.tmag"
expect_fail 2 "--feat-dtype: expected f32, f16 or bf16, got 'half'" -- "$TMA_BIN" import "$d/ds" --feat-dtype half -o "$d/out/g.tmag"
[ -z "$(ls -A "$d/out")" ] || fail "a refused --feat-dtype left files: $(ls -A "$d/out")"
# An unknown feature type in an intact header (a newer writer's).
"$PY" - "$d/s-f16.tmag" "$d/bad.tmag" <<'PY' || hard "cannot write the bad file"
import struct, sys
from tma._format import crc32c
b = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<I", b, 120, 7)
struct.pack_into("<I", b, 4092, crc32c(bytes(b[:4092])))
open(sys.argv[2], "wb").write(b)
PY
expect_fail 1 'bad.tmag: feature type 7 is unknown' -- "$TMA_BIN" info "$d/bad.tmag"
echo "ok: bad --feat-dtype refused (exit 2), an unknown feature type refused"
