#!/bin/bash
# tma-job.sh FORM JOB.json: a tma job inside a Slurm allocation; the batch
# scripts tma-cpu.sbatch (FORM cpu) and tma-gpu.sbatch (FORM gpu) run it.
#
# - etcd: TMA_ETCD_ENDPOINTS names the site's cluster; without it an etcd
#   runs on the first node (this one), its data in the run folder and its URL
#   handed to the steps in their environment; it stops when the job does,
#   and its data is removed once the job has its result.
# - The job name is tma-<job id> (tma-<array id>_<task> in an array), so
#   resubmitting the script starts a new job; TMA_JOB=<name> resumes an
#   earlier one instead.  The run folder is TMA_RUNS/<name>.
# - The coordinator is one step (one task); the workers are one step.
#   cpu: every task but the coordinator's is a worker, the last TMA_BACKUPS
#   of them backups; with several nodes the coordinator has the first node
#   to itself.  gpu: every task is a worker, on GPU $SLURM_LOCALID of its
#   node; the coordinator shares the first node (--overlap).
# - Every step gets --cpus-per-task (Slurm 22.05's srun no longer inherits
#   it) and every tma process as many threads.
# - A signal (the time limit's --signal, preemption, scancel --signal=TERM)
#   suspends the job: the coordinator writes nothing more and leaves the
#   last completed round's checkpoint; the script then requeues the job
#   (TMA_REQUEUE=0: it does not), and the requeued job resumes from it.
#
# Environment (all optional):
#   TMA                 the tma program (default: tma on PATH)
#   TMA_ETCD_ENDPOINTS  client URLs of an etcd cluster to use
#   TMA_ETCD_OPTS       more tma flags for etcd (TLS, auth: --etcd-ca FILE ...)
#   TMA_JOB             the job name (default tma-<job id>); an earlier
#                       job's name resumes that job
#   TMA_RUNS            where run folders go, on a shared file system
#                       (default $SLURM_SUBMIT_DIR/runs)
#   TMA_BACKUPS         cpu: how many of the workers are backups (default 0)
#   TMA_EVAL_DEVICE     the coordinator's evaluator device (default: the config's)
#   TMA_REQUEUE         1 (default): requeue the job when a signal suspended it
#   TMA_STAGE           a node-local folder (e.g. /tmp or $SLURM_TMPDIR): the
#                       partition (partition.json and the shard and inference
#                       files of the config's partition.dir, read on this, the
#                       first node) is copied with sbcast to TMA_STAGE/<job name>
#                       on every node of the job, and the workers read it there
#                       (--data-dir): no shared file system is needed for the
#                       shards.  Every node gets every shard (the deal is made at
#                       run time, and a reassigned shard must be found on its new
#                       owner's node); a worker maps only the shards it is dealt.
#                       Removed from the nodes when the job has its result.
set -uo pipefail

form=${1:-}
config=${2:-}
case "$form" in cpu|gpu) ;; *) echo "usage: tma-job.sh cpu|gpu JOB.json (inside a Slurm allocation)" >&2; exit 2 ;; esac
[ -n "${SLURM_JOB_ID:-}" ] || { echo "tma-job.sh: not inside a Slurm job (no SLURM_JOB_ID)" >&2; exit 2; }
[ -f "$config" ] || { echo "tma-job.sh: the job config '$config' is not a file" >&2; exit 2; }
config=$(realpath "$config") || exit 2
tma=${TMA:-tma}
cpus=${SLURM_CPUS_PER_TASK:-1}
# Since Slurm 22.05 srun does not inherit --cpus-per-task from sbatch: give
# it to every step, and every tma process its thread count.
export SRUN_CPUS_PER_TASK=$cpus OMP_NUM_THREADS=$cpus
# A name of its own for every submission (a requeued job keeps its id).
if [ -n "${SLURM_ARRAY_JOB_ID:-}" ]; then
  job=${TMA_JOB:-tma-${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}}
else
  job=${TMA_JOB:-tma-$SLURM_JOB_ID}
fi
run=${TMA_RUNS:-$SLURM_SUBMIT_DIR/runs}/$job
backups=${TMA_BACKUPS:-0}
workers=$((SLURM_NTASKS - 1))
[ "$form" = gpu ] && workers=$SLURM_NTASKS backups=0
mkdir -p -m 700 "$run" || exit 1  # tma refuses a run folder others may write
say() { echo "tma-slurm $(date +%T) [$job]: $*"; }
read -r -a etcd_flags <<<"${TMA_ETCD_OPTS:-}"

if (( workers < 1 || backups >= workers )); then
  say "need at least one worker task (cpu: beside the coordinator's) and fewer backups than workers" \
      "(tasks $SLURM_NTASKS, TMA_BACKUPS $backups)"
  exit 2
fi

# ---- etcd: the site's, or one on this (the first) node for this job.
etcd_pid=
stop_etcd() {
  [ -n "$etcd_pid" ] || return 0
  kill -TERM "$etcd_pid" 2>/dev/null
  wait "$etcd_pid" 2>/dev/null
  etcd_pid=
}
if [ -z "${TMA_ETCD_ENDPOINTS:-}" ]; then
  # The node's first IPv4 address (hostname -I may list an IPv6 one first,
  # which a URL would need in brackets); loopback on a node without one.
  host=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -m 1 -E '^[0-9]+(\.[0-9]+){3}$')
  host=${host:-127.0.0.1}
  # A port from the job id, the next pair when it is taken: a port something
  # else listens on (another job's etcd on a shared node) is skipped before
  # etcd starts, as probing it afterwards would reach the other program.
  # The data lives in the run folder so that a requeued job finds its state
  # again.
  listening() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
  # owns PID PORT: PID itself listens on TCP port PORT (its socket's inode,
  # from /proc/net/tcp, is among its open files): started, and not beaten
  # to the port by another program between the check above and its bind.
  owns() {
    local hex inode
    hex=$(printf '%04X' "$2")
    for inode in $(awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p {print $10}' \
                     /proc/net/tcp /proc/net/tcp6 2>/dev/null); do
      ls -l "/proc/$1/fd" 2>/dev/null | grep -qF "socket:[$inode]" && return 0
    done
    return 1
  }
  for try in 0 1 2 3 4 5 6 7; do
    port=$((20000 + (SLURM_JOB_ID * 2 + try * 2) % 40000))
    if listening "$host" "$port" || listening 127.0.0.1 $((port + 1)); then continue; fi
    url=http://$host:$port
    etcd --name tma --data-dir "$run/etcd" \
      --listen-client-urls "$url" --advertise-client-urls "$url" \
      --listen-peer-urls "http://127.0.0.1:$((port + 1))" \
      --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))" \
      --initial-cluster "tma=http://127.0.0.1:$((port + 1))" >>"$run/etcd.log" 2>&1 &
    etcd_pid=$!
    up=0
    for _ in $(seq 300); do
      kill -0 "$etcd_pid" 2>/dev/null || break
      owns "$etcd_pid" "$port" && listening "$host" "$port" && { up=1; break; }
      sleep 0.1
    done
    (( up )) && kill -0 "$etcd_pid" 2>/dev/null && break
    kill -TERM "$etcd_pid" 2>/dev/null
    wait "$etcd_pid" 2>/dev/null
    etcd_pid=
  done
  [ -n "$etcd_pid" ] || { say "etcd did not start (see $run/etcd.log)"; exit 1; }
  export TMA_ETCD_ENDPOINTS=$url
  say "etcd at $TMA_ETCD_ENDPOINTS (data in $run/etcd)"
fi
trap 'stop_etcd' EXIT

# ---- the steps.
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")

# ---- staging: the partition to node-local storage, with sbcast.
data_flag=() stage=
if [ -n "${TMA_STAGE:-}" ]; then
  part=$(python3 - "$config" <<'PY'
import json, os, sys
try:
    d = (json.load(open(sys.argv[1])).get("partition") or {}).get("dir")
except (OSError, ValueError) as e:
    sys.exit("cannot read %s: %s" % (sys.argv[1], e))
if not isinstance(d, str) or not d:
    sys.exit("%s names no partition.dir to stage" % sys.argv[1])
print(d if os.path.isabs(d) else os.path.join(os.path.dirname(sys.argv[1]), d))
PY
) || { say "TMA_STAGE: the partition to stage is unknown (above)"; exit 2; }
  [ -f "$part/partition.json" ] || { say "TMA_STAGE: $part holds no partition.json (run tma partition)"; exit 2; }
  stage=$TMA_STAGE/$job
  srun --ntasks="${#nodes[@]}" --ntasks-per-node=1 --cpus-per-task=1 mkdir -p -m 700 "$stage" ||
    { say "TMA_STAGE: cannot make $stage on the nodes"; exit 1; }
  files=("$part"/partition.json "$part"/shard-*.tmag)
  for f in "${files[@]}"; do
    sbcast --force "$f" "$stage/${f##*/}" || { say "TMA_STAGE: sbcast of $f to $stage failed"; exit 1; }
  done
  data_flag=(--data-dir "$stage")
  say "staged ${#files[@]} files of $part to $stage on ${#nodes[@]} node(s) with sbcast"
fi
unstage() {
  [ -n "$stage" ] || return 0
  srun --ntasks="${#nodes[@]}" --ntasks-per-node=1 --cpus-per-task=1 rm -rf "$stage" ||
    say "TMA_STAGE: $stage could not be removed from every node"
}
coord_where=(--nodes=1 --nodelist="${nodes[0]}")
worker_where=(--nodes=1)
if [ "$form" = gpu ]; then
  # Workers take every task and the job's GPUs (each task sees its node's
  # GPUs and takes the one of its local rank); the coordinator none.
  coord_where+=(--overlap --gpus=0)
  worker_where=(--nodes="${#nodes[@]}")
elif (( ${#nodes[@]} > 1 )); then
  worker_where=(--nodes=$((${#nodes[@]} - 1)) --exclude="${nodes[0]}")
fi
eval_flag=()
[ -n "${TMA_EVAL_DEVICE:-}" ] && eval_flag=(--eval-device "$TMA_EVAL_DEVICE")
say "$form form: coordinator on ${nodes[0]}, $workers workers ($backups backups), $cpus CPUs each, run folder $run"
# A job that ran before (requeued, or resubmitted with TMA_JOB) is resumed
# from etcd and its checkpoint: the coordinator takes the config (and the
# job token) from etcd then.  A signal suspends the job instead of ending it.
config_flag=(--config "$config")
if [ -f "$run/config.json" ]; then
  say "resuming job $job from etcd and the checkpoint its state names in $run"
  config_flag=()
fi
srun --ntasks=1 --cpus-per-task="$cpus" "${coord_where[@]}" --kill-on-bad-exit=0 \
  "$tma" coordinator --etcd "$TMA_ETCD_ENDPOINTS" "${etcd_flags[@]}" --job "$job" "${config_flag[@]}" --run-dir "$run" \
  --eval-threads "$cpus" "${eval_flag[@]}" --on-signal suspend &
coord=$!
srun --ntasks="$workers" --cpus-per-task="$cpus" "${worker_where[@]}" --kill-on-bad-exit=0 \
  bash -c 'a=(); (( SLURM_PROCID >= $1 - $2 )) && a=(--backup)
           [ "$3" = gpu ] && a+=(--device "cuda:$SLURM_LOCALID"); shift 3
           exec "$@" "${a[@]}"' tma-worker "$workers" "$backups" "$form" \
  "$tma" worker --etcd "$TMA_ETCD_ENDPOINTS" "${etcd_flags[@]}" --job "$job" --threads "$cpus" "${data_flag[@]}" &
wstep=$!

# A signal to this shell (sbatch --signal=B:..., scancel --batch) goes on to
# the steps; Slurm signals the steps themselves otherwise.
forward() { say "got SIG$1: suspending"; kill -"$1" "$coord" "$wstep" 2>/dev/null; }
trap 'forward TERM' TERM
trap 'forward INT' INT
trap 'forward TERM' USR1   # a USR1 (--signal=USR1@...) suspends like TERM
# Polled (a trap runs as soon as the short wait returns).
coord_rc='' coord_end='' told=0
for (( ;; )); do
  if [ -z "$coord_rc" ] && ! kill -0 "$coord" 2>/dev/null; then
    wait "$coord"; coord_rc=$? coord_end=$SECONDS
  fi
  [ -n "$coord_rc" ] && ! kill -0 "$wstep" 2>/dev/null && break
  # Workers leave when the job stops or they are signalled; ones still
  # there 30 s after the coordinator are told to.
  if [ -n "$coord_rc" ] && (( !told && SECONDS - coord_end >= 30 )); then
    kill -TERM "$wstep" 2>/dev/null
    told=1
  fi
  sleep 1 & wait $!
done
wait "$wstep" 2>/dev/null

if [ -f "$run/result.json" ]; then
  say "finished: $run/result.json"
  unstage
  stop_etcd
  [ -n "${url:-}" ] && rm -rf "$run/etcd"
  exit 0
fi
# A coordinator suspended by the signal exits 128 + the signal (tma --help):
# stopped, not finished; its last committed round's checkpoint stays.
if (( coord_rc == 0 || coord_rc == 130 || coord_rc == 143 )); then
  say "suspended (the last committed round's checkpoint is in $run, named in etcd's state)"
  stop_etcd
  # Only a job still running (a time limit's or a user's --signal) is
  # requeued here: a cancelled job stays cancelled, and a preempted one is
  # requeued by Slurm itself.
  state=$(scontrol show job "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  if [ "${TMA_REQUEUE:-1}" = 1 ] && [ "$state" = RUNNING ]; then
    say "requeueing job $SLURM_JOB_ID: it resumes where it stopped"
    scontrol requeue "$SLURM_JOB_ID"
  else
    say "not requeueing (job state ${state:-unknown}); resume with TMA_JOB=$job"
  fi
  exit 0
fi
say "the coordinator failed (exit $coord_rc); see this log; etcd's data is kept in $run/etcd"
exit 1
