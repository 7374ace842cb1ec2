#!/bin/bash
# test_tfevents.sh: the TensorBoard event files of `tma train` and of a
# distributed job (tma launch), read with TensorBoard's own EventAccumulator
# and compared value by value with metrics.jsonl.  TensorBoard lives in the
# test venv that ./check makes (.ci/ogb-venv; TMA_TB_PYTHON points elsewhere).
. "$TMA_SRCDIR/tests/lib.sh"
TB_PY=${TMA_TB_PYTHON:-$TMA_SRCDIR/.ci/ogb-venv/bin/python}
[ -x "$TB_PY" ] ||
  skip "no python with the tensorboard package at $TB_PY: ./check creates it (/usr/bin/python3 -m venv --system-site-packages .ci/ogb-venv; .ci/ogb-venv/bin/pip install tensorboard==2.21.0), or set TMA_TB_PYTHON"
timeout 120 "$TB_PY" -c 'from tensorboard.backend.event_processing.event_accumulator import EventAccumulator' ||
  skip "$TB_PY cannot import tensorboard's EventAccumulator: pip install tensorboard==2.21.0 into it (./check does)"
CHECK=$TMA_SRCDIR/tests/gnn/tfevents_check.py
cd "$TMP_ROOT" || hard "cd"
"$TMA_BIN" gen sbm -o g.tmag --nodes 600 >/dev/null || hard "tma gen"
cat > small.json <<'JSON'
{"model": {"encoder": "gcn", "hidden": 16, "decoder_hidden": 16},
 "train": {"batch_size": 64, "fanouts": [5, 5], "threads": 2, "seed": 3}}
JSON

# --- tma train: loss, edge rate, validation values per validation round.
"$TMA_BIN" train g.tmag --config small.json --steps 200 --eval-every-seconds 0.01 -o run-train -q \
  > train.out 2> train.err || { cat train.err; fail "tma train failed"; }
timeout 120 "$TB_PY" "$CHECK" run-train || fail "tma train: the event file disagrees with metrics.jsonl"

# --- "metrics": {"tensorboard": false} turns them off; a wrong value is refused by name.
cat > off.json <<'JSON'
{"model": {"hidden": 16, "decoder_hidden": 16}, "train": {"batch_size": 64, "threads": 2}, "metrics": {"tensorboard": false}}
JSON
"$TMA_BIN" train g.tmag --config off.json --steps 20 -o run-off -q > off.out 2> off.err || { cat off.err; fail "tma train (tensorboard off) failed"; }
[ -s run-off/metrics.jsonl ] || fail "tensorboard off: no metrics.jsonl"
ls run-off | grep -q tfevents && fail "tensorboard off: an event file was written"
sed 's/false/"no"/' off.json > bad.json
"$TMA_BIN" train g.tmag --config bad.json --steps 20 -o run-bad > bad.out 2> bad.err && fail "a string tensorboard was accepted"
grep -q tensorboard bad.err || { cat bad.err; fail "the error does not name metrics.tensorboard"; }

# --- a distributed job: per round and per worker values.
if command -v etcd >/dev/null; then
  cat > job.json <<'JSON'
{"job": "tb", "workers": 2, "graph": "g.tmag", "partition": {"scheme": "random"},
 "aggregation": {"interval_seconds": 0.5}, "duration": {"rounds": 4},
 "model": {"hidden": 16, "decoder_hidden": 16}, "train": {"batch_size": 64}, "eval": {"max_edges": 100}}
JSON
  timeout 300 "$TMA_BIN" launch job.json -o run-job -q > launch.out 2> launch.err ||
    { tail -n 30 launch.err; fail "tma launch failed"; }
  timeout 120 "$TB_PY" "$CHECK" run-job || fail "tma launch: the event file disagrees with metrics.jsonl"
else
  echo "# no etcd (Debian package etcd-server): the distributed half is not run"
fi
exit 0
