"""tfevents_check.py RUN [FILES]: every value of RUN/metrics.jsonl that the
event files should hold, read back with TensorBoard's own EventAccumulator
from the folder (as `tensorboard --logdir` reads a run: its files in order,
a restart's SessionLog.START dropping the steps it redoes), each step of a
tag once, and no value there that metrics.jsonl lacks.  FILES: the number
of event files RUN must hold (default 1; a resumed run has one more per
process that wrote to it)."""
import glob
import json
import math
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

run = sys.argv[1]
nfiles = int(sys.argv[2]) if len(sys.argv) > 2 else 1
files = sorted(glob.glob(run + "/events.out.tfevents.*"))
assert len(files) == nfiles, f"expected {nfiles} event file(s) in {run}, found {files}"
acc = EventAccumulator(run, size_guidance={"scalars": 0})
acc.Reload()
got = {}
for tag in acc.Tags()["scalars"]:
    steps = [e.step for e in acc.Scalars(tag)]
    twice = sorted({s for s in steps if steps.count(s) > 1})
    assert not twice, f"{tag}: steps {twice} shown more than once (of {steps})"
    got[tag] = {e.step: e.value for e in acc.Scalars(tag)}

want = {}
def put(tag, step, v):
    if v is not None and math.isfinite(v):
        want.setdefault(tag, {})[step] = v

for line in open(run + "/metrics.jsonl"):
    r = json.loads(line)
    t = r["round"]
    put("val/mrr", t, r.get("val_mrr"))
    for k, v in r.items():
        if k.startswith("val_hits@"):
            put("val/hits@" + k[9:], t, v)
    put("val/eval_seconds", t, r.get("eval_seconds"))
    put("round/aggregation_seconds", t, r.get("agg_seconds"))
    if "alive" in r:
        put("round/alive_workers", t, len(r["alive"]))
    if r.get("loss") is not None and r["loss"] >= 0:
        put("train/loss", t, r["loss"])
    put("train/edges_per_second", t, r.get("edges_per_second"))
    for w in r.get("workers", []):
        put(f"train/steps_per_second/{w['id']}", t, w.get("steps_per_s"))
        put(f"train/loss/{w['id']}", t, w.get("loss"))

assert "val/mrr" in want, "metrics.jsonl has no validated round: the test proves nothing"
assert set(got) == set(want), f"tags differ: only in events {set(got) - set(want)}, only in metrics {set(want) - set(got)}"
n = 0
for tag, steps in want.items():
    assert set(got[tag]) == set(steps), f"{tag}: steps {sorted(got[tag])} in events, {sorted(steps)} in metrics.jsonl"
    for step, v in steps.items():
        # float32 in the event file
        assert math.isclose(got[tag][step], v, rel_tol=1e-6, abs_tol=1e-30), f"{tag} step {step}: {got[tag][step]} != {v}"
        n += 1
print(f"{run}: {len(files)} event file(s), {len(want)} tags, {n} values equal to metrics.jsonl, each step once")
