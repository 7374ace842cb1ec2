#!/bin/bash
# test_status_run.sh: `tma status RUN` on a running `tma launch`'s run folder
# finds the job and its private etcd by itself; `--watch` looks again every
# second (the rounds go up, the members show their launch names and the last
# validation MRR) and ends by itself when the job is done; once the launch
# has ended, `tma status RUN` says so and where the results are (exit 1); a
# folder that is no launch's, or no argument, is a usage error (exit 2).
. "$TMA_SRCDIR/tests/lib.sh"
need "${TMA_ETCD:-}" etcd-server etcd
cd "$TMP_ROOT" || hard "cd"
"$TMA_BUILDDIR/tests/gnn/write_test_graph" g.tmag 400 16 0 3 || hard "cannot write the test graph"
cat > job.json <<JSON
{"job": "stw", "graph": "$TMP_ROOT/g.tmag", "workers": 2, "aggregation": {"interval_seconds": 1},
 "duration": {"train_seconds": 8}, "model": {"hidden": 16, "decoder_hidden": 16}, "train": {"batch_size": 64}}
JSON
PATH=$(dirname "$TMA_ETCD"):$PATH "$TMA_BIN" launch job.json -o run -q > launch.out 2>&1 &
launch=$!
track "$launch"
wait_for 60 test -s run/etcd/client-url || { cat launch.out; fail "the launch recorded no etcd address"; }
wait_for 60 sh -c "'$TMA_BIN' status run --json 2>/dev/null | grep -q '\"phase\":\"training\"'" ||
  { cat launch.out; "$TMA_BIN" status run; fail "tma status RUN never saw the job training"; }
timeout 60 "$TMA_BIN" status run --watch > watch.out 2> watch.err
rc=$?
[ $rc -eq 0 ] || { cat watch.err; fail "tma status RUN --watch exited $rc (124: it did not end with the job)"; }
python3 - watch.out <<'PY' || fail "the --watch output is not what it should be: $(cat watch.out)"
import re, sys
text = open(sys.argv[1]).read()
rounds = [int(r) for r in re.findall(r"phase\s+\w+, round (\d+)", text)]
assert len(rounds) >= 3, rounds                      # looked again several times
assert rounds == sorted(rounds) and rounds[-1] > rounds[0], rounds
assert re.search(r"phase\s+done", text), "the last look is not the finished job"
assert "worker-0" in text and "worker-1" in text, "no launch names"
assert re.search(r"validation\s+MRR 0\.\d+ at round \d+", text), "no last validation"
PY
wait "$launch" || { cat launch.out; fail "the launch failed"; }
expect_fail 1 "has ended.*result.json" -- "$TMA_BIN" status run
mkdir -p notarun
expect_fail 2 "not a launched job's run folder" -- "$TMA_BIN" status notarun
expect_fail 2 "give a run folder" -- "$TMA_BIN" status
echo "tma status RUN --watch followed the launch to its end"
