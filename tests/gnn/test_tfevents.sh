#!/bin/bash
# test_tfevents.sh: the TensorBoard event files of `tma train` (also killed
# and resumed) and of a distributed job (tma launch), read with TensorBoard's
# own EventAccumulator and compared value by value with metrics.jsonl.
# TensorBoard lives in the test venv that ./check makes (.ci/ogb-venv;
# TMA_TB_PYTHON points elsewhere).
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

# --- tma train killed and resumed: TensorBoard shows each round once, with
# the values metrics.jsonl keeps.  The kill's worst moments are made sure
# of: the event file loses the state's own round (killed between the state
# and its event) and shows the round after it with a value no run made
# (killed after that round's event, before its state).
"$TMA_BIN" train g.tmag --config small.json --steps 4000 --eval-every-seconds 0.02 -o run-kill -q \
  > kill.out 2> kill.err &
pid=$!
track $pid
enough() { [ -f run-kill/metrics.jsonl ] && [ "$(wc -l < run-kill/metrics.jsonl)" -ge 3 ]; }
wait_for 120 enough || fail "tma train: no third validation within 120 s"
kill -KILL $pid
wait $pid
timeout 120 "$TB_PY" - run-kill <<'PY' || fail "cannot rewrite the killed run's event file"
import glob, json, struct, sys
from tensorboard.compat.proto import event_pb2
from tensorboard.summary.writer.record_writer import RecordWriter
run = sys.argv[1]
st = open(run + "/last.opt", "rb").read()
n, = struct.unpack_from("<I", st, 40)
state_round = json.loads(st[128:128 + n])["rounds"]
path, = glob.glob(run + "/events.out.tfevents.*")
data, records, pos = open(path, "rb").read(), [], 0
while pos + 12 <= len(data):
    size, = struct.unpack_from("<Q", data, pos)
    if pos + 16 + size > len(data):
        break  # a record the kill cut short
    records.append(data[pos + 12:pos + 12 + size])
    pos += 16 + size
with open(path, "wb") as f:
    w = RecordWriter(f)
    for r in records:
        e = event_pb2.Event.FromString(r)
        if e.step < state_round or e.HasField("file_version"):
            w.write(r)
    e = event_pb2.Event(wall_time=1.0, step=state_round + 1)
    e.summary.value.add(tag="val/mrr", simple_value=12345.0)
    w.write(e.SerializeToString())
print(f"{path}: rounds from {state_round} dropped, a false round {state_round + 1} added")
PY
"$TMA_BIN" train --resume run-kill -q > resume.out 2> resume.err || { cat resume.err; fail "tma train --resume failed"; }
timeout 120 "$TB_PY" "$CHECK" run-kill 2 || fail "tma train --resume: TensorBoard's view disagrees with metrics.jsonl"

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
