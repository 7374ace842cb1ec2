#!/bin/bash
# test_fault_unreachable.sh (issue 13, item 3): nobody can reach the
# coordinator.  transport.host is "auto" (this host's first non-loopback
# IPv4 address) while UCX_NET_DEVICES=lo keeps UCX off that interface, so no
# worker ever connects.  Within the start timeout the job fails with one
# clear error naming the advertised address, the interface it resolves to
# and the UCX setting that rules it out; the workers say the same, and
# leave because the failed start sets stop.  Skips (77) on a host with no
# non-loopback IPv4 address.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
read -r ifname addr < <(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {split($4, a, "/"); print $2, a[1]; exit}')
[ -n "${addr:-}" ] || skip "this host has no non-loopback IPv4 address"
fault_setup 1

TRAIN=60 write_job j.json un '"transport": {"host": "auto"}, "fault": {"start_timeout": 4, "lease_ttl": 3}'
export UCX_NET_DEVICES=lo
start=$SECONDS
start_job j.json un
wait_exit "$COORD_PID" 60 >/dev/null
rc=$?
[ "$rc" -ne 124 ] || { dump_logs coord.log; fail "the coordinator did not give up"; }
[ "$rc" -ne 0 ] || { dump_logs coord.log; fail "the coordinator exited 0 although no worker could connect"; }
(( SECONDS - start <= 40 )) || fail "the job took $((SECONDS - start)) s to fail (start_timeout 4 s)"
grep -E "ERROR.*none could connect to the coordinator at $addr:[0-9]+ .*interface $ifname .*UCX_NET_DEVICES=lo" coord.log ||
  { dump_logs coord.log; fail "the coordinator's error does not name the address, the interface and the UCX setting"; }
for i in 0 1 2; do
  wait_exit "${WORKER_PIDS[$i]}" 30 >/dev/null
  [ $? -ne 124 ] || { dump_logs w$i.log; fail "worker $i still runs after the start failed"; }
  grep -qE "cannot reach the coordinator at $addr:[0-9]+ .*interface $ifname .*UCX_NET_DEVICES=lo" w$i.log ||
    { dump_logs w$i.log; fail "worker $i does not say why it cannot reach the coordinator"; }
done
echo "the job failed in $((SECONDS - start)) s naming $addr, $ifname and UCX_NET_DEVICES=lo; the workers said the same and left"
