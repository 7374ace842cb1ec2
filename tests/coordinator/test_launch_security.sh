#!/bin/bash
# test_launch_security.sh: a job launched by one user cannot be read, steered
# or joined by another user of the machine (docs/security.md).  A second
# local user, made here, tries while the job trains: to read the run folder
# and the token, to write `stop` and to delete the `coordinator` key in the
# private etcd, and to join the coordinator as member 0 with a guessed token
# and with a replayed hello.  Every attempt fails (the etcd ones at the
# socket's permissions, the transport ones refused and logged by the
# coordinator); a stop forged by someone with etcd access but without the
# leader's epoch is ignored; and the job's result is byte for byte the one
# of an undisturbed run of the same seed in step mode.  The token appears in
# no run file, log or etcd key.
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root to create a second local user (useradd)"
need useradd passwd
need userdel passwd
need runuser util-linux
need curl curl
PEER=$TMA_BUILDDIR/tests/transport/transport_peer
[ -x "$PEER" ] || hard "$PEER is not built"

EVE=tmaeve$$
# useradd fails while another process holds /etc/passwd's lock (another
# test creating its user at the same moment): try again for a while.
made=0
for _ in $(seq 20); do
  useradd -M -s /usr/sbin/nologin "$EVE" 2>"$TMP_ROOT/useradd.err" && { made=1; break; }
  sleep 0.5
done
(( made )) || { cat "$TMP_ROOT/useradd.err" >&2; hard "useradd $EVE failed"; }
trap 'userdel "$EVE" 2>/dev/null; _tma_cleanup' EXIT
as_eve() { runuser -u "$EVE" -- "$@"; }

# The test folder must be open to the other user, so that only the run
# folder's own permissions stand in the way.
chmod 755 "$TMP_ROOT"
cd "$TMP_ROOT"
cp "$PEER" ./transport_peer && chmod 755 transport_peer
JOB=sec
cat > job.json <<JSON
{"job": "$JOB", "generate": {"kind": "sbm", "nodes": 2000, "classes": 20, "avg_degree": 8, "feat_dim": 16,
  "seed": 1, "val": 100, "test": 100},
 "workers": 2, "aggregation": {"interval_steps": 8}, "duration": {"rounds": 8},
 "fault": {"round_deadline": 120},
 "model": {"hidden": 16, "decoder_hidden": 16}, "train": {"batch_size": 128, "threads": 1, "seed": 7}}
JSON
# A slow step (0.1 s) gives the attacks time while the job trains; in step
# mode it changes no result.
export TMA_FAULT=delay_step=0.1
unset TMA_JOB_TOKEN

# 1. The undisturbed run.
"$TMA" launch job.json -o run1 -q > out1.txt 2>&1 || { cat out1.txt >&2; fail "the undisturbed run failed"; }

# 2. The same job, attacked while it trains.
"$TMA" launch job.json -o run2 -q > out2.txt 2>&1 &
lpid=$!
track $lpid
clog=run2/logs/coordinator.log
wait_for 120 grep -Eq "round +1 \|" "$clog" || { cat out2.txt >&2; dump_logs "$clog"; fail "the job did not start training"; }
cpid=$(pgrep -P $lpid -f " coordinator ") || fail "no coordinator process under tma launch"
epid=$(pgrep -P $lpid -x etcd) || fail "no private etcd under tma launch"
addr=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$clog" | head -n1)
[ -n "$addr" ] || fail "the coordinator's address is not in its log"
sock=$TMP_ROOT/run2/etcd/client.sock:0
TOKEN=$(tr '\0' '\n' < /proc/$cpid/environ | sed -n 's/^TMA_JOB_TOKEN=//p')
[ ${#TOKEN} -eq 32 ] || fail "the coordinator did not get a generated token in its environment"

# The run folder, the token and the processes' environment are closed to others.
[ "$(stat -c %a run2)" = 700 ] || fail "the run folder is $(stat -c %a run2), not 700"
as_eve cat run2/job.json > eve-read.txt 2>&1 && fail "the other user read run2/job.json"
grep -q "Permission denied" eve-read.txt || { cat eve-read.txt >&2; fail "reading job.json: no refusal"; }
as_eve cat /proc/$cpid/environ > eve-env.txt 2>&1 && fail "the other user read the coordinator's environment"
grep -q "Permission denied" eve-env.txt || { cat eve-env.txt >&2; fail "reading environ: no refusal"; }

# The private etcd: no TCP port, and its socket refuses the other user.
ss -ltnp | grep -q "pid=$epid," && fail "the private etcd listens on a TCP port"
as_eve env ETCDCTL_API=3 "$TMA_ETCDCTL" --endpoints "unix://$sock" --dial-timeout 2s --command-timeout 3s \
  put /tma/$JOB/stop x > eve-stop.txt 2>&1 && fail "the other user wrote stop"
as_eve curl -sS --unix-socket "$sock" http://localhost/v3/kv/deleterange \
  -d "{\"key\": \"$(printf /tma/$JOB/coordinator | base64)\"}" > eve-del.txt 2>&1 &&
  fail "the other user deleted the coordinator key"
grep -q "Couldn't connect" eve-del.txt || { cat eve-del.txt >&2; fail "deleting the coordinator key: no refusal"; }
# Why: the kernel refuses the other user the socket (EACCES), not a network error.
as_eve python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$sock" \
  > eve-connect.txt 2>&1 && fail "the other user connected to the private etcd's socket"
grep -q "Permission denied" eve-connect.txt || { cat eve-connect.txt >&2; fail "the etcd socket: no permission refusal"; }

# The transport: member 0 with a guessed token, then a replay of a recorded
# hello and proof of member 0 (recorded against a listener of the same job
# and token, so the recording is genuine; the coordinator's fresh nonce
# makes it worthless).
as_eve ./transport_peer --job $JOB --id 0 --token 0123456789abcdef0123456789abcdef --connect "$addr" \
  --mode sink > eve-guess.txt 2>&1 < /dev/null
grep -q "CONNECT-FAILED" eve-guess.txt || { cat eve-guess.txt >&2; fail "a guessed token was not refused"; }
coproc AUX { exec runuser -u "$EVE" -- ./transport_peer --job $JOB --id 4294967280 --token "$TOKEN" \
  --listen 127.0.0.1:0 --mode sink; }
track $AUX_PID
read -r -t 30 line <&"${AUX[0]}"
aux=${line#ADDR }
[ "$aux" != "$line" ] || fail "the recording listener did not start ($line)"
as_eve ./transport_peer --job $JOB --id 0 --token "$TOKEN" --connect "$aux" --mode replay --replay-to "$addr" \
  > eve-replay.txt 2>&1 < /dev/null || { cat eve-replay.txt >&2; fail "a replayed hello got in"; }
grep -q "REPLAY-REFUSED" eve-replay.txt || { cat eve-replay.txt >&2; fail "the replay was not refused"; }
kill $AUX_PID 2>/dev/null

# Someone with etcd access but not the leader's epoch: a stop of an older epoch is ignored.
curl -sS --unix-socket "$sock" http://localhost/v3/kv/put -d "{\"key\": \"$(printf /tma/$JOB/stop | base64)\",
  \"value\": \"$(printf '{"epoch": 1, "reason": "forged"}' | base64 -w0)\"}" > root-stop.txt ||
  fail "writing a forged stop as the launching user failed"
cfg=$(curl -sS --unix-socket "$sock" http://localhost/v3/kv/range -d "{\"key\": \"$(printf /tma/$JOB/config | base64)\"}" |
  python3 -c 'import base64,json,sys; print(base64.b64decode(json.load(sys.stdin)["kvs"][0]["value"]).decode())')
echo "$cfg" | grep -q '"token":"(hidden)"' || fail "etcd's config key does not hide the token: $cfg"

# All of this happened while the job trained.
kill -0 $lpid 2>/dev/null && [ ! -e run2/result.json ] || fail "the job ended before the attacks were done"
wait_exit $lpid 180; rc=$?
[ "$rc" -eq 0 ] || { cat out2.txt >&2; dump_logs "$clog"; fail "the attacked job exited $rc"; }

# Refused and logged: both hellos by the coordinator, the forged stop by the workers.
[ "$(grep -c "refused member 0 connecting from .*proof does not match" "$clog")" -eq 2 ] ||
  { dump_logs "$clog"; fail "the coordinator did not log both refused hellos"; }
grep -q "ignored stop written at revision" run2/logs/worker-0.log ||
  { dump_logs run2/logs/worker-0.log; fail "the forged stop was not logged as ignored"; }
# The token is in no file of the run folder (logs included).
grep -rlF "$TOKEN" run2 && fail "the token is written in the run folder"
grep -q '"token":[[:space:]]*"(hidden)"' run2/job.json || fail "run2/job.json does not show the token as (hidden)"

# The same result as the undisturbed run.
# The final checkpoint: the newest round's (its name carries the epoch, which differs).
last_checkpoint() { ls "$1"/checkpoint-r*.tmaw | sort | tail -n 1; }
[ -n "$(last_checkpoint run1)" ] || fail "no checkpoint in run1"
cmp "$(last_checkpoint run1)" "$(last_checkpoint run2)" ||
  fail "the attacked run's final weights differ from the undisturbed run's"
[ "$(json run1/result.json 'd["test_mrr"]')" = "$(json run2/result.json 'd["test_mrr"]')" ] ||
  fail "the attacked run's test MRR differs"
echo "security: run folder, environment, etcd and transport closed to another user; forged stop ignored; same result"
