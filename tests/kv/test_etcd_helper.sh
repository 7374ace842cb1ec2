#!/bin/bash
# test_etcd_helper.sh: the etcd helpers of tests/lib.sh that shell tests use:
# a 3-member cluster starts healthy, keeps serving with a member killed,
# and the member comes back on its data folder with the data.
source "$TMA_SRCDIR/tests/lib.sh"
etcd_start 3
[ "${#ETCD_URLS[@]}" -eq 3 ] || fail "expected 3 client URLs, got ${#ETCD_URLS[@]}"
[ "$ETCD_ENDPOINTS" = "${ETCD_URLS[0]},${ETCD_URLS[1]},${ETCD_URLS[2]}" ] || fail "ETCD_ENDPOINTS is $ETCD_ENDPOINTS"
etcdctl put /t/a one >/dev/null || fail "put on a fresh cluster"
etcd_kill 1
kill -0 "${ETCD_PIDS[1]}" 2>/dev/null && fail "member 1 still runs after etcd_kill"
# A put caught in the leader change may time out inside etcd: retry until the
# two members left have a leader (idempotent).
wait_for 30 etcdctl --command-timeout 3s put /t/b two || fail "put with a member down"
etcd_restart 1
out=$(ETCDCTL_API=3 "$TMA_ETCDCTL" --endpoints "${ETCD_URLS[1]}" get --print-value-only /t/b) ||
  fail "get from the restarted member"
[ "$out" = two ] || fail "the restarted member returned '$out' for /t/b"
echo "etcd helpers: 3 members, kill and restart work"
