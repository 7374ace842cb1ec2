#!/bin/bash
# test_launch.sh: tma launch runs a whole job from a dataset folder (import,
# partition, a private etcd, the coordinator and workers) and prints the test
# MRR; every progress line shows the MRR of the round it names; SIGTERM stops
# every process it started, leaves a valid run folder with the private etcd's
# data kept for --resume (removed after a job that finished), and exits 143;
# a job the coordinator refuses exits 2 naming why; a missing etcd binary is
# a clear error.
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
cd "$TMP_ROOT"
cat > job.json <<JSON
{"job": "launch", "dataset": "$TMA_FIXTURES/cora", "import": {"feat_dim": 32, "seed": 3},
 "workers": 2, "aggregation": {"interval_seconds": 2}, "duration": {"train_seconds": 8},
 "model": {"hidden": 32, "decoder_hidden": 32}, "train": {"batch_size": 128}}
JSON
"$TMA" launch job.json -o run1 --json > res1.json 2> out1.txt || { cat out1.txt >&2; fail "tma launch failed"; }
cmp -s res1.json run1/result.json || fail "tma launch --json did not print result.json (the human lines go to stderr)"
grep -q "^test MRR " out1.txt || { cat out1.txt >&2; fail "no test MRR printed"; }
grep -q "^round   2 " out1.txt || { cat out1.txt >&2; fail "no progress lines"; }
check_run run1 >/dev/null || fail "run folder invalid"
for f in graph.tmag partition/partition.json job.json logs/coordinator.log logs/worker-0.log logs/etcd.log mrr.svg; do
  [ -e "run1/$f" ] || fail "run1/$f is missing"
done
[ ! -e run1/etcd ] || fail "the private etcd's data folder was not removed"
# Every progress line, the launcher's and the coordinator's log's, shows the
# validation MRR of the round it names (metrics.jsonl's).
python3 - run1 out1.txt run1/logs/coordinator.log <<'PY' || fail "a progress line shows another round's MRR"
import json, re, sys
val = {}
for l in open(sys.argv[1] + "/metrics.jsonl"):
    r = json.loads(l)
    val[r["round"]] = r["val_mrr"]
for f in sys.argv[2:]:
    seen = 0
    for l in open(f):
        m = re.search(r"round +(\d+) \|.*\| val MRR (\S+) ", l)
        if not m:
            continue
        seen += 1
        t, shown = int(m.group(1)), m.group(2)
        want = "(skipped)" if val[t] is None else "%.4f" % val[t]
        if shown != want:
            sys.exit("%s: round %d shows val MRR %s, metrics.jsonl has %s" % (f, t, shown, want))
    if seen < 3:
        sys.exit("%s: %d progress lines" % (f, seen))
PY

# launch_signalled CONFIG RUN OUT PATTERN SIGNAL SECONDS: tma launch CONFIG -o RUN
# (its output in OUT) gets SIGNAL once OUT has a line matching PATTERN; sets
# rc to its exit status (124: still running SECONDS later).
launch_signalled() {
  "$TMA" launch "$1" -o "$2" > "$3" 2>&1 &
  local pid=$!
  track $pid
  wait_for 60 grep -q "$4" "$3" || { cat "$3" >&2; fail "tma launch $1 did not get to '$4'"; }
  kill "-$5" $pid
  wait_exit $pid "$6"; rc=$?
}

# SIGTERM in the middle: the coordinator still tests the best round.
sed 's/"train_seconds": 8/"train_seconds": 120/' job.json > long.json
launch_signalled long.json run2 out2.txt "^round   2 " TERM 60
[ "$rc" -ne 124 ] || fail "tma launch did not stop within 60 s of SIGTERM"
[ "$rc" -eq 143 ] || { cat out2.txt >&2; fail "tma launch stopped by SIGTERM exited $rc, not 143 (stopped, not finished)"; }
grep -q "^test MRR " out2.txt || { cat out2.txt >&2; fail "no test MRR printed after SIGTERM"; }
[ "$(json run2/result.json 'd["stopped"]')" = interrupted ] || fail "result.json does not say it was interrupted"
check_run run2 >/dev/null || fail "interrupted run folder invalid"
[ -d run2/etcd/data ] || fail "the private etcd's data folder was not kept after SIGTERM (tma launch --resume needs it)"
grep -q "tma launch --resume .*run2 continues it" out2.txt || { cat out2.txt >&2; fail "no word on --resume"; }
# (The harness fails this test if any process it started is still alive.)

# Ctrl-C while the graph is being generated (30M R-MAT edges: seconds):
# the step ends there, the launch says where it was interrupted, exits 130
# and removes the run folder it made (nothing was trained).
cat > big.json <<'JSON'
{"job": "bigg", "generate": {"kind": "rmat", "scale": 21, "edges": 30000000, "feat_dim": 8, "seed": 1},
 "workers": 2, "duration": {"train_seconds": 2}}
JSON
launch_signalled big.json run4 out4.txt "^preparing the graph" INT 30
[ "$rc" -eq 130 ] || { cat out4.txt >&2; fail "tma launch interrupted while preparing the graph exited $rc, not 130"; }
grep -qE "interrupted while (preparing the graph|partitioning); nothing was trained" out4.txt ||
  { cat out4.txt >&2; fail "the launch did not say where it was interrupted"; }
! grep -q "failed" out4.txt || { cat out4.txt >&2; fail "an interrupted step was reported as failed"; }
[ ! -e run4 ] || fail "the interrupted launch left its run folder: $(ls -R run4 | head)"

# A job the coordinator refuses before its first round (eval.where "workers"
# on a partition without inference files, as an older tma made them): exit
# 2 with the coordinator's reason, no --resume offered (it would be refused
# the same way), and the run folder it made removed.
cp -r run1/partition oldpart
rm -f oldpart/*.infer.tmag
python3 - oldpart/partition.json <<'PY' || fail "cannot rewrite partition.json"
import json, sys
d = json.load(open(sys.argv[1]))
d.pop("inference")
json.dump(d, open(sys.argv[1], "w"))
PY
cat > old.json <<'JSON'
{"job": "oldp", "graph": "run1/graph.tmag", "partition": {"dir": "oldpart"}, "workers": 2,
 "aggregation": {"interval_steps": 5}, "duration": {"rounds": 2}, "eval": {"where": "workers"}}
JSON
timeout 120 "$TMA" launch old.json -o run5 > out5.txt 2>&1; rc=$?
[ "$rc" -eq 2 ] || { cat out5.txt >&2; fail "a job the coordinator refused: tma launch exited $rc, not 2"; }
grep -q "refused the job before its first round" out5.txt && grep -q "has no inference files" out5.txt ||
  { cat out5.txt >&2; fail "the launch did not say that the coordinator refused the job, and why"; }
! grep -q -- "--resume" out5.txt || { cat out5.txt >&2; fail "a refused job was offered --resume"; }
[ ! -e run5 ] || fail "the refused launch left its run folder: $(ls run5)"

# --keep keeps the data folder; a missing etcd binary is named.
mkdir bin && ln -s "$TMA" bin/tma
PATH="$TMP_ROOT/bin:/usr/local/bin/nonexistent" "$TMA" launch job.json -o run3 > out3.txt 2>&1; rc=$?
[ "$rc" -eq 1 ] || fail "launch without etcd exited $rc"
grep -q "etcd program was not found.*etcd-server" out3.txt || { cat out3.txt >&2; fail "the missing etcd is not named"; }
echo "launch: finished job, clean SIGTERM, clear error without etcd"
