#!/bin/bash
# test_eval_ranks.sh: a distributed evaluation (eval.where "workers") gives
# the single evaluator's numbers.  Each model runs twice under tma launch in
# step mode with the same seed, once evaluated by the coordinator and once
# by evaluator ranks on the three workers (four shards: one worker holds
# two); every round both evaluated has the same validation MRR and Hits@K,
# and the test MRR the ranks give the best weights is what tma eval gives.
# GCN + MLP on cora; RGCN + DistMult on a typed SBM.  The coordinator of the
# ranked run reads only the graph's header (it logs so), and the ranks
# connect to each other (the workers log their rows fetched).  While the
# ranks hold their shards, no worker maps a shard file twice (/proc/W/maps).
source "$TMA_SRCDIR/tests/lib.sh"
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
cd "$TMP_ROOT"
make_graph g.tmag
"$TMA" gen sbm -o typed.tmag --nodes 1200 --classes 12 --noise 2 --node-types 2 --relations 3 --feat-dim 12 \
  --seed 4 --negatives 20 > /dev/null || fail "gen typed sbm"

# watch_maps JOB PID: until PID ends, samples /proc/W/maps of each worker of
# JOB every 0.05 s; of the samples where a worker maps an inference file (its
# rank holds its shards), prints how many there were and the most mappings
# of one shard file a worker had (1: the rank reads the trainer's mapping).
watch_maps() {
  python3 - "$1" "$2" <<'PY'
import os, re, sys, time
job, pid = sys.argv[1], int(sys.argv[2])
samples, most = 0, 0
while os.path.exists("/proc/%d" % pid) and open("/proc/%d/stat" % pid).read().split(")")[-1].split()[0] != "Z":
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            args = open("/proc/%s/cmdline" % d, "rb").read().split(b"\0")
            if b"worker" not in args or b"--job" not in args or args[args.index(b"--job") + 1] != job.encode():
                continue
            maps = open("/proc/%s/maps" % d).read().splitlines()
        except (OSError, IndexError):
            continue
        if not any(l.endswith(".infer.tmag") for l in maps):
            continue
        samples += 1
        counts = {}
        for l in maps:
            m = re.search(r"(shard-\d+\.tmag)$", l)
            if m:
                counts[m.group(1)] = counts.get(m.group(1), 0) + 1
        most = max([most] + list(counts.values()))
    time.sleep(0.05)
print(samples, most)
PY
}

run() { # NAME GRAPH WHERE MODEL [watch]
  cat > $1.json <<JSON
{"job": "$1", "variant": "randomtma", "workers": 3, "graph": "$2", "partition": {"shards": 4, "seed": 3},
 "aggregation": {"interval_steps": 6}, "duration": {"rounds": 4},
 "model": $4, "train": {"batch_size": 64, "fanouts": [5, 3], "lr": 0.01, "threads": 1, "seed": 9},
 "eval": {"threads": 1, "where": "$3", "rank_timeout": 60}}
JSON
  timeout 300 "$TMA" launch $1.json -o $1-run > $1.out 2>&1 &
  local lpid=$!
  track $lpid
  [ -z "${5:-}" ] || watch_maps $1 $lpid > $1.maps
  wait $lpid || { tail -n 40 $1.out >&2; fail "tma launch $1 failed"; }
  check_run $1-run >/dev/null || { tail -n 40 $1.out >&2; fail "$1: run folder invalid"; }
  # A rank reads its shards through the worker's own mappings: each shard
  # file is mapped once in a worker's process, never a second time for the rank.
  [ -z "${5:-}" ] || { read n most < $1.maps; [ "$n" -gt 0 ] && [ "$most" -eq 1 ]; } ||
    fail "$1: a worker mapped a shard file $most times while its rank held its shards ($n samples)"
  [ -z "${5:-}" ] || echo "$1: in $n samples of a worker whose rank held its shards, each shard file mapped once"
}

compare() { # A B GRAPH
  python3 - $1-run $2-run <<'PY' || fail "$1 and $2 disagree"
import json, sys
a, b = ([json.loads(l) for l in open(r + "/metrics.jsonl")] for r in sys.argv[1:3])
both = [(x, y) for x, y in zip(a, b) if x.get("eval") == "ok" and y.get("eval") == "ok"]
assert len(both) >= 2, "fewer than two rounds evaluated by both: %s %s" % (
    [x.get("eval") for x in a], [y.get("eval") for y in b])
for x, y in both:
    for k in x:
        if k.startswith("val_"):
            assert abs(x[k] - y[k]) <= 1e-9, (x["round"], k, x[k], y[k])
bad = [y for y in b if y.get("eval") not in ("ok", "skipped") or (y.get("eval") == "skipped" and "eval_reason" in y)]
assert not bad, "the ranks failed an evaluation: %s" % bad
ra, rb = (json.load(open(r + "/result.json")) for r in sys.argv[1:3])
# Which rounds were evaluated depends on timing (a busy evaluator skips to
# the newest model), so the best rounds may differ; on the same one the
# test MRR is the same (and tma eval checks the ranked one's below).
if ra["best_round"] == rb["best_round"]:
    assert abs(ra["test_mrr"] - rb["test_mrr"]) <= 1e-9, (ra["test_mrr"], rb["test_mrr"])
print("%d rounds evaluated by both agree; test MRR %.6f" % (len(both), rb["test_mrr"]))
PY
  "$TMA" eval $3 $2-run/best.tmaw --split test --json --threads 1 > $2-ev.json || fail "tma eval of $2's weights"
  python3 - $2-ev.json $2-run/result.json <<'PY' || fail "tma eval disagrees with $2's test MRR"
import json, sys
e, r = (json.load(open(f)) for f in sys.argv[1:])
assert abs(e["mrr"] - r["test_mrr"]) < 1e-9, (e["mrr"], r["test_mrr"])
PY
  grep -q "reads the graph's header, not the graph" $2-run/logs/coordinator.log ||
    { tail -n 20 $2-run/logs/coordinator.log >&2; fail "$2: the coordinator read more than the graph's header"; }
  [ "$(cat $2-run/logs/worker-*.log | grep -c "evaluator rank listening")" -eq 3 ] || fail "$2: not three evaluator ranks"
}

run gc g.tmag coordinator '{"hidden": 32, "decoder_hidden": 32}'
run gw g.tmag workers '{"hidden": 32, "decoder_hidden": 32}' watch
compare gc gw g.tmag
run hc typed.tmag coordinator '{"encoder": "rgcn", "decoder": "distmult", "hidden": 16, "bases": 2}'
run hw typed.tmag workers '{"encoder": "rgcn", "decoder": "distmult", "hidden": 16, "bases": 2}'
compare hc hw typed.tmag
# Nothing past the graph's header is read when the workers evaluate: a copy
# of the graph whose row pointers are damaged (its header intact) runs the
# job on the same partition, where the coordinator's own evaluator refuses
# it.  (Before, the job's file check walked every row of the graph.)
cp g.tmag bad.tmag
python3 - bad.tmag <<'PY' || fail "damaging the copy"
import os, sys
with open(sys.argv[1], "r+b") as f:  # the row pointers: the first section, after the header
    f.seek(4096 + 800)
    f.write(b"\xff" * 4096)
PY
for w in workers coordinator; do
  cat > bad-$w.json <<JSON
{"job": "bad$w", "variant": "randomtma", "workers": 3, "graph": "bad.tmag", "partition": {"dir": "gw-run/partition"},
 "aggregation": {"interval_steps": 6}, "duration": {"rounds": 2}, "model": {"hidden": 32, "decoder_hidden": 32},
 "train": {"batch_size": 64, "threads": 1, "seed": 9}, "eval": {"threads": 1, "where": "$w"}}
JSON
  timeout 300 "$TMA" launch bad-$w.json -o bad-$w-run > bad-$w.out 2>&1; echo $? > bad-$w.rc
done
[ "$(cat bad-workers.rc)" = 0 ] && [ "$(json bad-workers-run/result.json 'd["test_mrr"] is not None')" = True ] ||
  { tail -n 20 bad-workers.out >&2; fail "a job evaluating on the workers read the graph past its header"; }
[ "$(cat bad-coordinator.rc)" != 0 ] && grep -qE "checksum|corrupt" bad-coordinator-run/logs/coordinator.log ||
  { tail -n 20 bad-coordinator.out >&2; fail "the damaged graph was not noticed by the coordinator's own evaluator"; }
echo "evaluator ranks: the single evaluator's MRR and Hits@K for gcn+mlp and rgcn+distmult; the graph's body unread"
