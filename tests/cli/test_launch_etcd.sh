#!/bin/bash
# test_launch_etcd.sh: `tma launch --etcd URL` with an etcd that cannot be
# used fails within seconds, naming the URL and why (curl's reason), with
# exit 1 and no run folder: a refused loopback port, and a real etcd that is
# stopped (SIGSTOP: it accepts connections but never answers).
. "$TMA_SRCDIR/tests/lib.sh"
cd "$TMP_ROOT" || hard "cd"
"$TMA_BUILDDIR/tests/gnn/write_test_graph" g.tmag 300 8 0 3 || hard "cannot write the test graph"
cat > job.json <<JSON
{"job": "le", "graph": "$TMP_ROOT/g.tmag", "workers": 2, "duration": {"train_seconds": 2}}
JSON
port=$(_etcd_free_ports 1)
url=http://127.0.0.1:$port
t0=$SECONDS
expect_fail 1 "etcd at $url failed a first read within 2 s" -- "$TMA_BIN" launch job.json -o r1 --etcd "$url" -q
grep -q "Couldn't connect\|refused" "$TMP_ROOT/stderr.$$" || fail "no reason from curl for a refused port: $(cat "$TMP_ROOT/stderr.$$")"
[ ! -e r1 ] || fail "a launch that could not reach etcd made its run folder"

etcd_start
kill -STOP "${ETCD_PIDS[0]}"
t1=$SECONDS
expect_fail 1 "etcd at ${ETCD_URLS[0]} failed a first read within 2 s" -- \
  "$TMA_BIN" launch job.json -o r2 --etcd "${ETCD_URLS[0]}" -q
(( SECONDS - t1 <= 10 )) || fail "the check of a stopped etcd took $((SECONDS - t1)) s"
kill -CONT "${ETCD_PIDS[0]}"
[ ! -e r2 ] || fail "a launch whose etcd did not answer made its run folder"
echo "an unusable etcd is named within seconds ($((SECONDS - t0)) s in all)"
