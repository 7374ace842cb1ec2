#!/bin/bash
# test_slurm.sh: the shipped batch script examples/slurm/tma-cpu.sbatch (and
# the tma-job.sh it runs) on a real single-host Slurm (Debian's slurmctld,
# slurmd and munge), set up here in a temp folder on free ports and stopped
# at the end.  Three jobs:
#   A  fault.on_failure continue, the partition staged to node-local storage
#      with sbcast (TMA_STAGE): the workers read their shards there; one
#      worker step's process SIGKILLed; the job goes on with M-1 and writes
#      its result, and the staged copy is removed;
#   B  reassign with one backup task: a worker killed, the backup takes its
#      shard;
#   C  scancel --signal=TERM mid-job: the coordinator suspends (no result,
#      the checkpoint stays), the script requeues the job, and the requeued
#      job resumes from the checkpoint and finishes;
#   E  TERM with TMA_REQUEUE=0: the job suspends and ends; F, the script
#      submitted again with TMA_JOB=<E's name>, resumes and finishes it;
#   D  the GPU form (tma-gpu.sbatch) on two GPUs Slurm hands out without
#      device files: its steps start and worker r takes cuda:r.
# This host's CPUs are few, so the jobs ask --overcommit and their steps
# share CPUs (SLURM_OVERLAP); on a cluster each task has its own.
# Skips (77) only when the Slurm daemons are missing or cannot start here.
. "$TMA_SRCDIR/tests/lib.sh"
TMA=$TMA_BIN
SCRIPT=$TMA_SRCDIR/examples/slurm/tma-cpu.sbatch
export PATH=$PATH:/usr/sbin:/sbin

need munged munge
need slurmctld slurmctld
need slurmd slurmd
for p in sbatch squeue scontrol scancel; do need "$p" slurm-client; done
need "${TMA_ETCD:-}" etcd-server etcd
# The batch script starts etcd by name.
PATH=$(dirname "$(command -v "$TMA_ETCD")"):$PATH

S=$TMP_ROOT/slurm
mkdir -p "$S/state" "$S/spool" "$S/log" || hard "mkdir"
chmod 700 "$S"
user=$(id -un)
MARK="TMA_SLURM_TEST=$TMP_ROOT"

# Every process of our jobs carries $MARK in its environment (sbatch
# --export=ALL): the batch shells, etcd, srun, the tma processes.
job_pids() {
  local f p
  for f in /proc/[0-9]*/environ; do
    p=${f#/proc/}; p=${p%/environ}
    [ "$p" != $$ ] && [ "$p" != "$BASHPID" ] || continue
    { tr '\0' '\n' <"$f"; } 2>/dev/null | grep -qxF "$MARK" && echo "$p"
  done
}
no_job_pids() { [ -z "$(job_pids)" ]; }

DAEMONS=()
slurm_cleanup() {
  if [ -n "${SLURM_CONF:-}" ] && [ -S "$S/munge.sock" ]; then
    scancel --user="$user" --full --signal=KILL >/dev/null 2>&1
    scancel --user="$user" >/dev/null 2>&1
  fi
  wait_for 30 no_job_pids || true
  local p
  for p in $(job_pids); do kill -KILL "$p" 2>/dev/null; done
  for p in "${DAEMONS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${DAEMONS[@]}"; do wait_exit_quiet "$p" 20 || kill -KILL "$p" 2>/dev/null; done
  _tma_cleanup
}
wait_exit_quiet() {
  local end=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null; do
    (( SECONDS >= end )) && return 1
    sleep 0.1
  done
  wait "$1" 2>/dev/null
  return 0
}
trap slurm_cleanup EXIT

daemon_logs() {
  local f
  for f in "$S"/munged.log "$S"/log/*.log; do
    [ -f "$f" ] && { echo "--- $f"; tail -n 25 "$f"; } >&2
  done
}

# ---- munge: a key of our own, 0400 and owned by the user munged runs as.
dd if=/dev/urandom of="$S/munge.key" bs=1024 count=1 2>/dev/null || hard "munge key"
chmod 0400 "$S/munge.key"
[ "$(stat -c %U:%a "$S/munge.key")" = "$user:400" ] || hard "munge key is not 0400 $user"
# --force: munged refuses root and loose folder permissions otherwise.
munged --force --foreground --socket="$S/munge.sock" --key-file="$S/munge.key" --pid-file="$S/munged.pid" \
  --log-file="$S/munged.log" --seed-file="$S/munge.seed" 2>>"$S/munged.log" &
DAEMONS+=($!); track $!
wait_for 20 test -S "$S/munge.sock" || { daemon_logs; skip "munged did not start"; }

# ---- slurm.conf: this host as the one node, with its real CPUs and memory.
read -r P_CTLD P_SLURMD <<<"$(_etcd_free_ports 2)"
node_line=$(slurmd -C 2>/dev/null | head -n 1)
node=$(sed -n 's/^NodeName=\([^ ]*\).*/\1/p' <<<"$node_line")
[ -n "$node" ] || skip "slurmd -C does not describe this host: $node_line"
cat >"$S/slurm.conf" <<EOF
ClusterName=tmatest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$P_CTLD
SlurmdPort=$P_SLURMD
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/munge.sock
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
# cgroups are not usable in every container: plain process tracking.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=10
# Two GPUs that are not (their device files are /dev/null and /dev/zero):
# enough for Slurm to hand them to steps (task/none constrains nothing), so
# the GPU form's steps and device choice can be checked on any host.
GresTypes=gpu
$node_line NodeAddr=127.0.0.1 Gres=gpu:2 State=UNKNOWN
PartitionName=tmatest Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
printf 'AutoDetect=off\nNodeName=%s Name=gpu File=/dev/null\nNodeName=%s Name=gpu File=/dev/zero\n' "$node" "$node" \
  >"$S/gres.conf"
export SLURM_CONF=$S/slurm.conf
slurmctld -D -i -f "$SLURM_CONF" >>"$S/log/slurmctld.out" 2>&1 &
DAEMONS+=($!); track $!
slurmd -D -f "$SLURM_CONF" >>"$S/log/slurmd.out" 2>&1 &
DAEMONS+=($!); track $!
node_idle() { [ "$(sinfo -h -n "$node" -o %T 2>/dev/null)" = idle ]; }
wait_for 60 node_idle || { daemon_logs; skip "slurmd did not come up on this host (logs above)"; }
note() { echo "$(date +%T) $*"; }
note "slurm $(slurmctld -V | awk '{print $2}') up: $node_line"

# ---- the data and the job configs.
W=$TMP_ROOT/work
mkdir -p "$W" && cd "$W" || hard "cd"
"$TMA" gen sbm -o g.tmag --nodes 2000 >/dev/null || fail "tma gen"
"$TMA" partition g.tmag --scheme random --shards 2 --seed 1 -o part >/dev/null || fail "tma partition"
write_job() {
  cat >"$1" <<JSON
{"graph": "g.tmag", "partition": {"dir": "part"}, "workers": 2,
 "aggregation": {"interval_seconds": 2}, "duration": {"train_seconds": 20},
 "fault": {"on_failure": "$2"},
 "model": {"hidden": 32, "decoder_hidden": 32}, "train": {"batch_size": 128},
 "eval": {"max_edges": 200}}
JSON
}
write_job continue.json continue
write_job reassign.json reassign

# The script's knobs come from the test alone.
unset TMA_ETCD_ENDPOINTS TMA_ETCD_OPTS TMA_JOB TMA_RUNS TMA_BACKUPS TMA_REQUEUE TMA_EVAL_DEVICE
# submit TASKS CONFIG [VAR=VALUE...]: prints the job id.
submit() {
  local tasks=$1 cfg=$2; shift 2
  local env=ALL,SLURM_OVERLAP=1,TMA=$TMA,TMA_SLURM_DIR=$TMA_SRCDIR/examples/slurm,$MARK
  local kv
  for kv in "$@"; do env+=,$kv; done
  sbatch --parsable --chdir="$W" --overcommit --nodes=1 --ntasks="$tasks" --cpus-per-task=1 --time=10 \
    --export="$env" "$SCRIPT" "$cfg"
}
out_of() { echo "$W/tma-$1.out"; }
run_of() { echo "$W/runs/tma-$1"; }
job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
job_done() { case "$(job_state "$1")" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) return 0 ;; esac; return 1; }
has_round() {
  python3 - "$1/metrics.jsonl" "$2" <<'PY'
import json, sys
try:
    R = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
except (OSError, ValueError):
    sys.exit(1)
sys.exit(0 if R and R[-1]["round"] >= int(sys.argv[2]) else 1)
PY
}
# reach JOB N: waits (up to 180 s) for round N of JOB; fails at once if the job ended.
reach() {
  wait_for 180 round_or_end "$1" "$2"
  has_round "$(run_of "$1")" "$2" || { show "$1"; fail "job $1 did not reach round $2"; }
}
round_or_end() { has_round "$(run_of "$1")" "$2" || job_done "$1"; }
# show JOB: its output, Slurm's view of it, and what the daemons said of it.
show() {
  echo "--- job $1:" >&2; tail -n 60 "$(out_of "$1")" >&2; scontrol show job "$1" >&2
  local f
  for f in "$S"/log/slurmctld.log "$S"/log/slurmd.log; do
    echo "--- $f, lines of job $1:" >&2
    grep -E "(JobId=|job[ _]?id[ =]?|job |StepId=)$1([^0-9]|$)" "$f" 2>/dev/null | tail -n 30 >&2
  done
}
# The processes of a job of THIS test's cluster: another Slurm test may run
# on the same machine at the same time (another checkout's make check), its
# job ids the same small numbers.  Job processes carry $MARK (sbatch
# --export=ALL); the step daemons carry this cluster's SLURM_CONF.
# env_of PID: the environment of PID, a variable a line.
env_of() { { tr '\0' '\n' <"/proc/$1/environ"; } 2>/dev/null; }
# no_procs JOB: no process of JOB is left on this node (no task or batch
# script with its SLURM_JOB_ID, no slurmstepd of its steps).
no_procs() {
  local f p env
  for f in /proc/[0-9]*/cmdline; do
    p=${f#/proc/}; p=${p%/cmdline}
    env=$(env_of "$p")
    if grep -qxF "$MARK" <<<"$env"; then
      grep -qx "SLURM_JOB_ID=$1" <<<"$env" && return 1
    elif grep -qxF "SLURM_CONF=$SLURM_CONF" <<<"$env"; then
      { tr '\0' ' ' <"$f"; } 2>/dev/null | grep -q "^slurmstepd: \[$1\." && return 1
    fi
  done
  return 0
}
# worker_pid JOB PROCID: the tma worker process of task PROCID of job JOB.
worker_pid() {
  local f p env
  for f in /proc/[0-9]*/cmdline; do
    p=${f#/proc/}; p=${p%/cmdline}
    { tr '\0' ' ' <"$f"; } 2>/dev/null | grep -q "^$TMA worker " || continue
    env=$(env_of "$p")
    grep -qxF "$MARK" <<<"$env" && grep -qx "SLURM_JOB_ID=$1" <<<"$env" && grep -qx "SLURM_PROCID=$2" <<<"$env" &&
      { echo "$p"; return 0; }
  done
  return 1
}
# rounds_check RUN EXPR WHAT: EXPR over the round records R must hold.
rounds_check() {
  python3 - "$1" "$2" "$3" <<'PY' || return 1
import json, sys
R = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if l.strip()]
if not eval(sys.argv[2]):
    sys.stderr.write("round check failed: %s (%s)\n" % (sys.argv[3], sys.argv[2]))
    for r in R:
        sys.stderr.write("  round %d t=%.1f epoch=%d workers=%s lost=%s moves=%s\n" % (r["round"], r["time"],
            r["epoch"], [w["id"] for w in r["workers"]], r["lost"], [(m["shard"], m["from"], m["to"]) for m in r["moves"]]))
    sys.exit(1)
PY
}
# finished JOB [RUN]: the job completed, wrote a valid result in RUN (by
# default its own run folder), every round once.
finished() {
  local j=$1 run=${2:-$(run_of "$1")}
  [ "$(job_state "$j")" = COMPLETED ] || { show "$j"; fail "job $j ended $(job_state "$j")"; }
  [ -f "$run/result.json" ] || { show "$j"; fail "job $j wrote no result.json"; }
  python3 - "$run/result.json" <<'PY' || { show "$j"; fail "job $j: bad result.json"; }
import json, math, sys
r = json.load(open(sys.argv[1]))
assert r["stopped"] == "time", r
assert r["rounds"] == 10, r
assert 0 < r["test_mrr"] <= 1 and math.isfinite(r["test_mrr"]), r
PY
  rounds_check "$run" '[r["round"] for r in R] == list(range(11))' "rounds 0..10 once each, in order" ||
    { show "$j"; fail "job $j: metrics.jsonl"; }
  grep -q "tma-slurm .*finished" "$(out_of "$j")" || { show "$j"; fail "job $j: no 'finished' line"; }
  # The etcd the script started is gone with its data.
  [ ! -e "$run/etcd" ] || fail "job $j left its etcd data in $run/etcd"
}

# ---- A and C run side by side (one CPU each), then B.
A=$(submit 3 continue.json TMA_STAGE=$W/stage) || fail "sbatch A"
C=$(submit 3 continue.json) || fail "sbatch C"
note "jobs A=$A (kill a worker, continue) C=$C (TERM, requeue)"

# A: one worker step's process killed after round 3.
reach "$A" 3
victim=$(worker_pid "$A" 1) || { show "$A"; fail "no worker process of task 1 in job A"; }
kill -KILL "$victim"
note "A: killed worker task 1 (pid $victim)"

# C: TERM to its steps after round 3; the job suspends and requeues itself.
reach "$C" 3
scancel --signal=TERM "$C" || fail "scancel --signal=TERM $C"
c_requeued() { scontrol show job "$C" | grep -q "Restarts=1" && [ "$(job_state "$C")" = PENDING ]; }
wait_for 90 c_requeued || { show "$C"; fail "job C was not requeued after TERM"; }
grep -q "coordinator: suspended after round" "$(out_of "$C")" || { show "$C"; fail "C: the coordinator did not suspend"; }
[ ! -f "$(run_of "$C")/result.json" ] || fail "C: a suspended job wrote a result"
compgen -G "$(run_of "$C")/checkpoint-r*-e*.tmaw" > /dev/null || fail "C: no checkpoint after suspending"
suspended_at=$(sed -n 's/.*coordinator: suspended after round \([0-9]*\).*/\1/p' "$(out_of "$C")" | head -n 1)
# Slurm holds a requeued job back for a while (BeginTime), long after its
# first run has ended on the node; let it go now, but only once nothing of
# that first run is left (its batch script and slurmstepd), as the hold
# would have ensured.
wait_for 60 no_procs "$C" || fail "job C's first run left processes behind"
# The hold also keeps slurmd from refusing the new run: slurmd revoked the
# first run's credential when it ended, and it refuses a credential made in
# the same second as that revocation or before (a launch failure, the job
# FAILED with no output).  Two seconds on, the new credential is newer.
sleep 2
scontrol update JobId="$C" StartTime=now || fail "scontrol update StartTime"
note "C: suspended after round $suspended_at and requeued"

B=$(submit 4 reassign.json TMA_BACKUPS=1) || fail "sbatch B"
note "job B=$B (kill a worker, reassign to the backup)"
# Worker tasks 0 and 1 own the shards; task 2 is the backup.
reach "$B" 3
victim=$(worker_pid "$B" 0) || { show "$B"; fail "no worker process of task 0 in job B"; }
kill -KILL "$victim"
note "B: killed worker task 0 (pid $victim)"

# E: TERM with TMA_REQUEUE=0: the job suspends and ends; F, the script
# submitted again with TMA_JOB naming E's job, resumes it (its etcd started
# on another port from the data in the run folder).
E=$(submit 3 continue.json TMA_REQUEUE=0) || fail "sbatch E"
note "job E=$E (TERM without requeue, then resubmitted)"
reach "$E" 2
scancel --signal=TERM "$E" || fail "scancel --signal=TERM $E"
wait_for 120 job_done "$E" || { show "$E"; fail "job E did not end after TERM"; }
[ "$(job_state "$E")" = COMPLETED ] || { show "$E"; fail "E: ended $(job_state "$E"), expected COMPLETED (suspended)"; }
grep -q "not requeueing" "$(out_of "$E")" || { show "$E"; fail "E: requeued despite TMA_REQUEUE=0"; }
[ ! -f "$(run_of "$E")/result.json" ] || fail "E: a suspended job wrote a result"
e_at=$(sed -n 's/.*coordinator: suspended after round \([0-9]*\).*/\1/p' "$(out_of "$E")" | head -n 1)
[ -n "$e_at" ] || { show "$E"; fail "E: the coordinator did not suspend"; }
F=$(submit 3 continue.json TMA_JOB=tma-$E) || fail "sbatch F"
note "E: suspended after round $e_at; job F=$F resumes it"

for j in "$A" "$B" "$C" "$F"; do
  wait_for 180 job_done "$j" || { show "$j"; fail "job $j did not end"; }
done

# A: the result, 1 thread a worker (the task's CPUs, not the node's), and
# after the loss rounds with one worker.
finished "$A"
grep -q "trains on cpu with 1 thread(s)" "$(out_of "$A")" || { show "$A"; fail "A: workers did not use the task's 1 CPU"; }
grep -q "staged 5 files of .* to $W/stage/tma-$A on 1 node(s) with sbcast" "$(out_of "$A")" ||
  { show "$A"; fail "A: the partition was not staged"; }
[ "$(grep -c "loaded $W/stage/tma-$A/shard-0000[01].tmag" "$(out_of "$A")")" -ge 2 ] ||
  { show "$A"; fail "A: the workers did not read the staged shards"; }
[ ! -e "$W/stage/tma-$A" ] || fail "A: the staged partition was left on the node"
rounds_check "$(run_of "$A")" \
  'any(r["lost"] for r in R) and len(R[-1]["workers"]) == 1 and all(len(r["workers"]) == 2 for r in R[1:4])' \
  "two workers until round 3, one lost, one to the end" || fail "A: rounds"

# B: the backup (a member that trained in no round before the kill) trains
# to the end beside the survivor.
finished "$B"
rounds_check "$(run_of "$B")" \
  'any(r["lost"] for r in R) and len(R[-1]["workers"]) == 2 and {w["id"] for w in R[-1]["workers"]} - {w["id"] for w in R[1]["workers"]}' \
  "the backup replaced the lost worker" || fail "B: rounds"

# C: resumed from its checkpoint under a new coordinator epoch, each round once.
finished "$C"
grep -q "resuming job tma-$C" "$(out_of "$C")" || { show "$C"; fail "C: the requeued job did not resume"; }
grep -q "took over job tma-$C at round $suspended_at" "$(out_of "$C")" || { show "$C"; fail "C: not resumed at round $suspended_at"; }
rounds_check "$(run_of "$C")" \
  "len({r['epoch'] for r in R}) == 2 and R[$suspended_at]['epoch'] != R[$suspended_at + 1]['epoch']" \
  "a new epoch from round $suspended_at + 1 on" || fail "C: rounds"

# F: E's job resumed at the round E stopped at, finished in E's run folder.
finished "$F" "$(run_of "$E")"
grep -q "resuming job tma-$E" "$(out_of "$F")" || { show "$F"; fail "F: did not resume tma-$E"; }
grep -q "took over job tma-$E at round $e_at" "$(out_of "$F")" || { show "$F"; fail "F: not resumed at round $e_at"; }
rounds_check "$(run_of "$E")" \
  "len({r['epoch'] for r in R}) == 2 and R[$e_at]['epoch'] != R[$e_at + 1]['epoch']" \
  "a new epoch from round $e_at + 1 on" || fail "F: rounds"

# D: the GPU form's wiring (tma-gpu.sbatch) on the two device-less GPUs:
# Slurm accepts its steps, and each worker takes the GPU of its local rank.
# Whether the trainer then runs depends on the build and the host, so the
# job is cancelled once both workers have named their device.
cat > gpu.json <<JSON
{"graph": "g.tmag", "partition": {"dir": "part"}, "workers": 2,
 "aggregation": {"interval_seconds": 2}, "duration": {"train_seconds": 20},
 "model": {"hidden": 32, "decoder_hidden": 32}, "train": {"batch_size": 128}}
JSON
D=$(sbatch --parsable --chdir="$W" --overcommit --nodes=1 --ntasks=2 --ntasks-per-node=2 --gpus-per-node=2 \
  --cpus-per-task=1 --time=10 --export="ALL,SLURM_OVERLAP=1,TMA=$TMA,TMA_SLURM_DIR=$TMA_SRCDIR/examples/slurm,$MARK" \
  "$TMA_SRCDIR/examples/slurm/tma-gpu.sbatch" gpu.json) || fail "sbatch D"
note "job D=$D (GPU form)"
gpu_ranks() {
  local out
  out=$(out_of "$D")
  grep -qE "\[worker-[0-9]+\].*cuda:0" "$out" && grep -qE "\[worker-[0-9]+\].*cuda:1" "$out"
}
gpu_seen() { gpu_ranks || job_done "$D"; }
wait_for 120 gpu_seen
gpu_ranks || { show "$D"; fail "D: the GPU form's workers did not take cuda:0 and cuda:1"; }
grep -q "gpu form: coordinator on $node, 2 workers" "$(out_of "$D")" || { show "$D"; fail "D: layout"; }
grep -q "coordinator: leading job tma-$D" "$(out_of "$D")" || { show "$D"; fail "D: the coordinator step did not start"; }
scancel "$D"
wait_for 60 job_done "$D" || { show "$D"; fail "job D did not end after scancel"; }
note "PASS: slurm A=$A B=$B C=$C D=$D E=$E F=$F"
