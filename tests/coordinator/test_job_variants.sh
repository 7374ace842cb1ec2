#!/bin/bash
# test_job_variants.sh: every variant of the paper runs in the same engine and
# finishes with a valid result: supertma (supernode shards), psgd-pa (metis
# shards), llcg (metis + correction steps at the coordinator, which change the
# average), ggs (every worker on the full graph, gradients averaged every step).
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
cd "$TMP_ROOT"
etcd_start 1
make_graph g.tmag
"$TMA" partition g.tmag --scheme supernode:60 --shards 3 -o p-super >/dev/null || fail "supernode partition"
"$TMA" partition g.tmag --scheme metis --shards 3 -o p-metis >/dev/null || fail "metis partition"
common='"model": {"hidden": 32, "decoder_hidden": 32}, "train": {"batch_size": 128, "threads": 1}'
run() { # NAME VARIANT PARTITION_JSON EXTRA [WORKERS]
  local name=$1
  WORKER_PIDS=()
  echo "{\"job\": \"$name\", \"variant\": \"$2\", \"graph\": \"g.tmag\", $3 \"workers\": ${5:-3}, $common, $4}" > $name.json
  start_coordinator $name-coord.log --config $name.json --run-dir $name-run --dump-dir $name-dump
  for ((i = 0; i < ${5:-3}; i++)); do start_worker $name-w$i.log --job $name; done
  job_done $name $name-coord.log $name-w0.log
  [ "$(json $name-run/result.json 'd["variant"]')" = "$2" ] || fail "$name: result.json names another variant"
}
run super supertma '"partition": {"dir": "p-super"},' '"aggregation": {"interval_steps": 5}, "duration": {"rounds": 4}'
run psgd psgd-pa '"partition": {"dir": "p-metis"},' '"aggregation": {"interval_steps": 5}, "duration": {"rounds": 4}'
run llcg llcg '"partition": {"dir": "p-metis"},' '"aggregation": {"interval_steps": 5}, "duration": {"rounds": 4}, "llcg": {"correction_steps": 3}'
run ggs ggs '' '"aggregation": {"interval_steps": 5}, "duration": {"rounds": 4}' 2
# LLCG: the global model is the average corrected on the full graph: it differs from the plain mean.
"$TMA_TORCH_PYTHON" - <<'PY' || fail "llcg: the correction steps did not change the average"
import glob, struct, sys
import numpy as np
def load(p):
    b = open(p, "rb").read(); n, = struct.unpack_from("<Q", b, 24)
    return np.frombuffer(b, dtype="<f4", count=n, offset=len(b) - 4 * n)
for r in range(1, 5):
    loc = [load(p) for p in sorted(glob.glob(f"llcg-dump/r{r:06d}-local-*.tmaw"))]
    mean = (sum(x.astype(np.float64) for x in loc) / len(loc)).astype(np.float32)
    g = load(f"llcg-dump/r{r:06d}-global-0.tmaw")
    if np.array_equal(mean, g):
        sys.exit(f"round {r}: global == plain mean")
PY
# GGS: synchronous steps: every evaluation round has 5 steps of each worker.
python3 - <<'PY' || fail "ggs: steps per round"
import json
for l in open("ggs-run/metrics.jsonl"):
    r = json.loads(l)
    if r["round"] > 0:
        assert r["sync_steps"] == 5 and all(w["steps"] == 5 for w in r["workers"]), r
PY
echo "supertma, psgd-pa, llcg and ggs jobs finished"
