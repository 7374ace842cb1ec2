#!/bin/bash
# test_launch_names.sh: one name per worker.  `tma launch` with 3 workers
# and a backup: each worker's launch name is its log file (logs/NAME.log),
# the tag of its log lines ([NAME]), its name in `tma status` (beside the
# member id its log says it joined as) and in the progress lines and
# metrics.jsonl; the progress lines count the backup apart ("alive 3/3 + 1
# backup") and list the workers in name order; tma status lists workers,
# then backups, each by name.
. "$TMA_SRCDIR/tests/lib.sh"
need "${TMA_ETCD:-}" etcd-server etcd
cd "$TMP_ROOT" || hard "cd"
"$TMA_BUILDDIR/tests/gnn/write_test_graph" g.tmag 400 16 0 3 || hard "cannot write the test graph"
cat > job.json <<JSON
{"job": "names", "graph": "$TMP_ROOT/g.tmag", "workers": 3, "aggregation": {"interval_seconds": 1},
 "duration": {"train_seconds": 6}, "model": {"hidden": 16, "decoder_hidden": 16},
 "train": {"batch_size": 64, "threads": 1}}
JSON
PATH=$(dirname "$TMA_ETCD"):$PATH "$TMA_BIN" launch job.json -o run --backups 1 > launch.out 2>&1 &
launch=$!
track "$launch"
# (A backup owns no shard: it stays "loading".)
grep_ready() {
  "$TMA_BIN" status run > status.now 2>/dev/null && [ "$(grep -c ' ready' status.now)" -eq 3 ] &&
    grep -q backup-0 status.now && cp status.now status.out
}
wait_for 60 grep_ready || { cat launch.out status.now; fail "tma status RUN never showed 3 workers ready and a backup"; }
wait "$launch" || { cat launch.out; fail "the launch failed"; }
grep -q "started the coordinator and 3 worker(s) plus 1 backup(s)" launch.out ||
  { cat launch.out; fail "the launch's start line does not count the backup"; }

python3 - <<'PY' || { cat launch.out status.out; fail "the names do not agree"; }
import json, re, sys
names = ["worker-0", "worker-1", "worker-2", "backup-0"]
status = open("status.out").read()
# tma status: "    ID  NAME  DEVICE ready [backup] shards [..]", workers then backups, by name
rows = re.findall(r"^\s+(\d+)\s+(\S+)\s+\S+\s+(?:ready|loading)", status, re.M)
assert [n for _, n in rows] == names, ("tma status order", rows)
ids = {n: int(i) for i, n in rows}
for n in names:
    log = open("run/logs/%s.log" % n).read()
    joined = re.findall(r"\[%s\] member: joined job names as member (\d+)" % n, log)
    assert joined and int(joined[0]) == ids[n], (n, "log says member", joined, "status says", ids[n])
    tagged = [l for l in log.splitlines() if re.match(r"\S+ (INFO|WARN|ERROR|DEBUG) ", l)]
    assert tagged and all("[%s]" % n in l for l in tagged), (n, "a log line without its tag",
                                                                 [l for l in tagged if "[%s]" % n not in l][:3])
R = [json.loads(l) for l in open("run/metrics.jsonl") if l.strip()]
for r in R[1:]:
    for w in r["workers"]:
        assert ids[w["name"]] == w["id"], ("metrics.jsonl", w)
out = open("launch.out").read()
lines = [l for l in out.splitlines() if l.startswith("round ") and not l.startswith("round   0")]
assert lines, "no progress line past round 0"
for l in lines:
    assert "alive 3/3 + 1 backup |" in l, l
    sps = re.search(r"steps/s (.*?) \|", l).group(1)
    assert [p.split()[0] for p in sps.split(", ")] == names[:3], l
PY
echo "worker-0..2 and backup-0: the same name in their logs, tma status, metrics.jsonl and the progress lines"
