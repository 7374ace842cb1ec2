#!/bin/bash
# test_job_determinism.sh: in step-interval mode with a fixed seed, two runs
# of the same job produce identical weights, and every aggregation result is
# exactly the mean of the weights the workers sent (checked from the
# coordinator's dumps of the tensors it received and the result it sent).
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
cd "$TMP_ROOT"
etcd_start 1
make_graph g.tmag
"$TMA" partition g.tmag --scheme random --shards 3 --seed 4 -o part >/dev/null || fail "partition"
run_job() { # NAME
  cat > $1.json <<JSON
{"job": "$1", "graph": "g.tmag", "partition": {"dir": "part"}, "workers": 3,
 "aggregation": {"interval_steps": 4}, "duration": {"rounds": 4},
 "model": {"hidden": 32, "decoder_hidden": 32}, "train": {"batch_size": 128, "threads": 1, "seed": 7}}
JSON
  WORKER_PIDS=()
  start_coordinator $1-coord.log --config $1.json --run-dir $1-run --dump-dir $1-dump
  for i in 0 1 2; do start_worker $1-w$i.log --job $1; done
  job_done $1 $1-coord.log $1-w0.log
}
run_job a
run_job b
"$TMA_TORCH_PYTHON" - <<'PY' || fail "weights differ or an aggregate is not the mean"
import glob, json, os, struct, sys
import numpy as np

def load(path):
    # docs/model.md: a 128-byte header, the model section as JSON text, then the block.
    b = open(path, "rb").read()
    if b[:8] != b"TMAWGHT\0":
        sys.exit(path + ": not a weight file")
    count, = struct.unpack_from("<Q", b, 24)
    return np.frombuffer(b, dtype="<f4", count=count, offset=len(b) - 4 * count)

for r in range(1, 5):
    for run in ("a", "b"):
        locs = sorted(glob.glob(f"{run}-dump/r{r:06d}-local-*.tmaw"),
                      key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0]))
        if len(locs) != 3:
            sys.exit(f"run {run} round {r}: {len(locs)} local tensors")
        acc = np.zeros_like(load(locs[0]), dtype=np.float64)
        for p in locs:               # member-id order, accumulated in double
            acc += load(p).astype(np.float64)
        mean = (acc / 3.0).astype(np.float32)
        glob_w = load(f"{run}-dump/r{r:06d}-global-0.tmaw")
        if not np.array_equal(mean, glob_w):
            sys.exit(f"run {run} round {r}: the global weights are not the exact mean "
                     f"(max diff {np.abs(mean - glob_w).max()})")
    ga = load(f"a-dump/r{r:06d}-global-0.tmaw")
    gb = load(f"b-dump/r{r:06d}-global-0.tmaw")
    if not np.array_equal(ga, gb):
        sys.exit(f"round {r}: runs a and b differ (max diff {np.abs(ga - gb).max()})")
print("4 rounds: exact means, identical runs")
PY
# The final checkpoint: the newest round's (its name carries the epoch, which differs).
last_checkpoint() { ls "$1"/checkpoint-r*.tmaw | sort | tail -n 1; }
cmp "$(last_checkpoint a-run)" "$(last_checkpoint b-run)" ||
  fail "the final checkpoints differ byte for byte"
echo "two runs: identical weights; every aggregate is the exact mean"
