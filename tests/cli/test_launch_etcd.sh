#!/bin/bash
# test_launch_etcd.sh: `tma launch --etcd URL`, `tma coordinator` and `tma
# worker` with an etcd that cannot be used fail within seconds with exit 1
# and one line naming the URL and why (curl's reason): a refused loopback
# port, and a real etcd that is stopped (SIGSTOP: it accepts connections but
# never answers).  A launch leaves no run folder; a coordinator checks its
# config first (a bad one is exit 2 with no etcd at all); one endpoint of a
# list that answers is enough; --etcd-wait S keeps a role waiting for etcd.
. "$TMA_SRCDIR/tests/lib.sh"
cd "$TMP_ROOT" || hard "cd"
"$TMA_BUILDDIR/tests/gnn/write_test_graph" g.tmag 300 8 0 3 || hard "cannot write the test graph"
"$TMA_BIN" partition g.tmag --scheme random --shards 2 -o part >/dev/null || hard "partition"
cat > job.json <<JSON
{"job": "le", "graph": "$TMP_ROOT/g.tmag", "workers": 2, "duration": {"train_seconds": 2}}
JSON
cat > role.json <<JSON
{"job": "le", "graph": "$TMP_ROOT/g.tmag", "partition": {"dir": "$TMP_ROOT/part"}, "workers": 2,
 "duration": {"train_seconds": 2}}
JSON
port=$(_etcd_free_ports 1)
url=http://127.0.0.1:$port
err=$TMP_ROOT/stderr.$$

# one_line: stderr of the last expect_fail is one line (no log lines around it).
one_line() { [ "$(wc -l < "$err")" -eq 1 ] || { cat "$err" >&2; fail "$1: more than one line on stderr"; }; }

t0=$SECONDS
expect_fail 1 "etcd at $url did not answer within 2 s" -- "$TMA_BIN" launch job.json -o r1 --etcd "$url" -q
grep -q "Couldn't connect\|refused" "$err" || fail "no reason from curl for a refused port: $(cat "$err")"
one_line "launch, refused port"
[ ! -e r1 ] || fail "a launch that could not reach etcd made its run folder"

# The roles: the same line, within the default 2 s wait.
for role in "worker --job le" "coordinator --config role.json --run-dir rc"; do
  t1=$SECONDS
  # shellcheck disable=SC2086
  expect_fail 1 "^tma ${role%% *}: etcd at $url did not answer within 2 s: .*Couldn't connect.*--etcd-wait" -- \
    "$TMA_BIN" $role --etcd "$url"
  one_line "${role%% *}, refused port"
  (( SECONDS - t1 <= 6 )) || fail "tma ${role%% *} took $((SECONDS - t1)) s to give up on a refused port"
done
[ ! -e rc ] || fail "a coordinator that could not reach etcd made its run folder"
# A bad config is refused first (exit 2, naming it), without etcd's 2 s.
printf '{"graph": "g.tmag", "partition": {"dir": "part"}, "variant": "fedavg"}\n' > bad.json
expect_fail 2 '"variant" = "fedavg"' -- "$TMA_BIN" coordinator --etcd "$url" --config bad.json
expect_fail 2 "--etcd-wait: expected seconds" -- "$TMA_BIN" worker --etcd "$url" --job le --etcd-wait 0

etcd_start
# One endpoint of a list that answers is enough: the worker gets past the
# check and waits for its job (which nobody started).
expect_fail 1 "no config in etcd" -- "$TMA_BIN" worker --etcd "$url,${ETCD_URLS[0]}" --job ghost --wait 1

kill -STOP "${ETCD_PIDS[0]}"
t1=$SECONDS
expect_fail 1 "etcd at ${ETCD_URLS[0]} did not answer within 2 s" -- \
  "$TMA_BIN" launch job.json -o r2 --etcd "${ETCD_URLS[0]}" -q
(( SECONDS - t1 <= 10 )) || fail "the check of a stopped etcd took $((SECONDS - t1)) s"
[ ! -e r2 ] || fail "a launch whose etcd did not answer made its run folder"
t1=$SECONDS
expect_fail 1 "etcd at ${ETCD_URLS[0]} did not answer within 2 s" -- \
  "$TMA_BIN" worker --etcd "${ETCD_URLS[0]}" --job ghost
one_line "worker, stopped etcd"
(( SECONDS - t1 <= 10 )) || fail "the worker's check of a stopped etcd took $((SECONDS - t1)) s"

# --etcd-wait: a worker started while etcd is stopped waits for it, and goes
# on (to its job, which nobody started) once etcd answers.
"$TMA_BIN" worker --etcd "${ETCD_URLS[0]}" --job ghost --wait 1 --etcd-wait 60 2> waiting.err &
waiting=$!
track "$waiting"
sleep 4
kill -0 "$waiting" 2>/dev/null || { cat waiting.err >&2; fail "a worker with --etcd-wait 60 gave up within 4 s"; }
kill -CONT "${ETCD_PIDS[0]}"
wait_for 30 sh -c "! kill -0 $waiting" || fail "the waiting worker did not go on once etcd answered"
wait "$waiting"; rc=$?
[ "$rc" -eq 1 ] && grep -q "no config in etcd" waiting.err ||
  { cat waiting.err >&2; fail "the waiting worker exited $rc without reaching etcd"; }
echo "an unusable etcd is named within seconds ($((SECONDS - t0)) s in all); --etcd-wait waits"
