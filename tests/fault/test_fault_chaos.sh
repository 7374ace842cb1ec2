#!/bin/bash
# test_fault_chaos.sh (scenario 10): a seeded random sequence of faults across
# a run, on a 3-member etcd cluster with the run folder on a small tmpfs:
# workers SIGKILLed, paused (SIGSTOP/SIGCONT, some past the lease) and
# started; the coordinator SIGKILLed (taken over by a standby when one is
# running, else restarted with `tma coordinator --job`) and paused past its
# lease; standbys started; one etcd member killed and restarted; the whole
# cluster down for a few seconds; the whole cluster frozen (SIGSTOP) past the
# lease TTL, so every lease expires when it resumes; a control record
# (`coordinator` or a `shards/<k>`) overwritten with a value that does not
# decode; the run folder's disk filled for a few seconds.  Half of the
# seeds (odd ones) run the job in step mode (`interval_steps`,
# `duration.rounds`), where a coordinator restart must not run the rounds
# left without the workers; those runs must reach every round, and their
# final model is compared with an undisturbed step-mode run of the same
# seed.  The script acts as the operator's supervisor: when no coordinator
# process is left and the job is not done, it starts one.  Each run must
# finish with a valid result, every round once, the best weights matching
# result.json, and leave nothing behind.  `make check` runs one seed; `make
# check-chaos` runs CHAOS_RUNS (20) seeds in a loop and prints the figures of
# docs/faults.md (faults by kind, jobs finished, rounds lost, time from the end
# of each fault to the next committed round).
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
cd "$TMP_ROOT"
runs=${CHAOS_RUNS:-1}
seed0=${CHAOS_SEED:-$(( $(date +%s) % 100000 ))}
CHAOS_ROUNDS=24   # step mode: 15 steps of 0.05 s or more a round, about 20 s of rounds
# A step-mode run ends within this test MRR of the undisturbed one: killed,
# paused-past-the-lease or fenced workers start again from the global weights
# with a fresh optimizer state (0.0053 apart at most in 27 step-mode seeds; a model
# frozen by a restart, issue 30 item 1, is 0.03 or more below).
CHAOS_MRR_TOL=${CHAOS_MRR_TOL:-0.015}
have_disk=1
small_disk 4m || { have_disk=0; echo "no tmpfs could be mounted (needs root): the disk faults are left out"; }
etcd_start 3
fault_graph
: > all-faults.tsv; : > all-runs.tsv
# The undisturbed step-mode run the step-mode seeds are compared with (every
# seed runs the same job: the seed only draws the faults).
if (( runs > 1 || seed0 % 2 )); then
  STEPS=15 ROUNDS=$CHAOS_ROUNDS step_job ref.json chaosref \
    '"fault": {"on_failure": "reassign", "lease_ttl": 3, "round_deadline": 4, "start_timeout": 20}'
  WORKER_PIDS=()
  start_coordinator ref-c.log --config ref.json --run-dir ref-run
  for i in 0 1 2; do start_worker ref-w$i.log --job chaosref --name w$i; done
  start_worker ref-b.log --job chaosref --name backup --backup
  finish_job ref-c.log ref-w0.log
  check_run ref-run >/dev/null || fail "the undisturbed step-mode run folder is invalid"
fi

now() { echo "$EPOCHREALTIME"; }
alive() { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null && echo "$p"; done; }
# fault KIND START [END]: one line of the run's fault log.
fault() { printf '%s\t%s\t%s\t%s\n' "$seed" "$1" "$2" "${3:-$2}" >> "$name-faults.tsv"; actions+=" $1"; }
# The leader's pid, from its record in etcd (empty while etcd is down).
leader_pid() {
  etcdctl --dial-timeout 1s --command-timeout 1s get "/tma/$name/coordinator" --print-value-only 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])' 2>/dev/null
}
job_done() {
  [ -e "$run_dir/result.json" ] &&
    etcdctl --dial-timeout 1s --command-timeout 1s get "/tma/$name/state" --print-value-only 2>/dev/null |
    python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)["phase"] != "done")' 2>/dev/null
}
# Starts a coordinator when none is left (the supervisor's one rule).
supervise() {
  (( ${#coords[@]} )) && [ -n "$(alive "${coords[@]}")" ] && return
  job_done && return
  start_coordinator $name-c$nc.log --job $name
  coords+=($COORD_PID); nc=$((nc + 1)); restarts=$((restarts + 1))
}
etcd_all_up() {
  local i
  (( EPOCHSECONDS >= etcd_thaw )) || return 1
  for i in 0 1 2; do [ -z "${etcd_back[$i]:-}" ] || return 1; done
}
# A worker: in a step-mode run each step takes DELAY seconds longer (no
# effect on the model), so the rounds last about a second, as in time mode.
chaos_worker() {
  if (( step )); then TMA_FAULT=delay_step=0.05 start_worker "$@"; else start_worker "$@"; fi
}
# A record overwritten with a value that does not decode, as a stray writer
# would (a plain put: no lease).  Nothing happens while etcd does not answer.
damage_record() {
  local key
  if (( RANDOM % 2 )); then key=coordinator; else key=shards/0000000$((RANDOM % 3)); fi
  etcdctl --dial-timeout 1s --command-timeout 1s put "/tma/$name/$key" '{"damaged": true}' >/dev/null 2>&1 &&
    fault "bad-record" "$(now)"
}
# Brings back paused processes, etcd members and the disk whose fault has run
# its time ("force": all now).  (No background sleeps: they would outlive a run.)
heal() {
  local i e t=${EPOCHSECONDS} keep=()
  for e in "${resume_at[@]:-}"; do
    [ -n "$e" ] || continue
    local at pid kind from
    IFS=: read -r at pid kind from <<<"$e"
    if [ "${1:-}" = force ] || (( t >= at )); then
      kill -CONT "$pid" 2>/dev/null
      [ "$kind" = - ] || fault "$kind" "$from" "$(now)"
    else
      keep+=("$e")
    fi
  done
  resume_at=("${keep[@]:-}")
  for i in 0 1 2; do
    if [ -n "${etcd_back[$i]:-}" ] && { [ "${1:-}" = force ] || (( t >= ${etcd_back[$i]%%:*} )); }; then
      _etcd_spawn "$i"
      [ "${etcd_back[$i]#*:}" = last ] && fault "${etcd_kind[$i]}" "${etcd_from[$i]}" "$(now)"
      etcd_back[$i]=""
    fi
  done
  if [ -n "$disk_back" ] && { [ "${1:-}" = force ] || (( t >= disk_back )); }; then
    rm -f disk/fill
    fault disk-full "$disk_from" "$(now)"
    disk_back=""
  fi
}

for ((run = 0; run < runs; run++)); do
  seed=$((seed0 + run))
  RANDOM=$seed
  name="chaos$run"
  run_dir=$name-run
  (( have_disk )) && run_dir=disk/$name-run
  WORKER_PIDS=(); coords=(); nc=1; restarts=0; actions=""
  etcd_back=(); etcd_kind=(); etcd_from=(); disk_back=""; disk_from=""; resume_at=(); etcd_thaw=0
  step=$((seed % 2)); sfx=""
  fault_keys='"fault": {"on_failure": "reassign", "lease_ttl": 3, "round_deadline": 4, "start_timeout": 20}'
  if (( step )); then
    sfx=-step
    STEPS=15 ROUNDS=$CHAOS_ROUNDS step_job $name.json $name "$fault_keys"
  else
    TRAIN=22 write_job $name.json $name "$fault_keys"
  fi
  start_coordinator $name-c0.log --config $name.json --run-dir $run_dir
  coords+=($COORD_PID)
  for i in 0 1 2; do chaos_worker $name-w$i.log --job $name --name w$i; done
  chaos_worker $name-b.log --job $name --name backup --backup
  wait_round $run_dir 1 || { dump_logs $name-c0.log; fail "seed $seed: no first round"; }
  end=$((SECONDS + 14))
  n=4
  while (( SECONDS < end )); do
    sleep "1.$((RANDOM % 10))"
    heal
    supervise
    live=($(alive "${WORKER_PIDS[@]}"))
    (( ${#live[@]} )) || { chaos_worker $name-n$n.log --job $name --name n$n; n=$((n + 1)); actions+=" start"; continue; }
    victim=${live[$((RANDOM % ${#live[@]}))]}
    case $((RANDOM % 12)) in
      0) kill -KILL "$victim"; fault worker-kill "$(now)"
         chaos_worker $name-n$n.log --job $name --name n$n; n=$((n + 1)) ;;
      1) kill -STOP "$victim"; resume_at+=("$((EPOCHSECONDS + 1 + RANDOM % 6)):$victim:worker-pause:$(now)") ;;
      2) chaos_worker $name-n$n.log --job $name --name n$n; n=$((n + 1)); actions+=" start" ;;
      3) actions+=" -" ;;
      4) lp=$(leader_pid)
         if [ -n "$lp" ] && kill -0 "$lp" 2>/dev/null; then
           others=$(alive "${coords[@]}" | grep -vx "$lp" | wc -l)
           kill -KILL "$lp"
           if (( others )); then fault coord-kill-standby$sfx "$(now)"; else fault coord-kill$sfx "$(now)"; fi
         fi ;;
      5) lp=$(leader_pid)
         if [ -n "$lp" ] && kill -0 "$lp" 2>/dev/null; then
           kill -STOP "$lp"; resume_at+=("$((EPOCHSECONDS + 4 + RANDOM % 3)):$lp:coord-pause:$(now)")
         fi ;;
      6) start_coordinator $name-c$nc.log --job $name --standby
         coords+=($COORD_PID); nc=$((nc + 1)); actions+=" standby" ;;
      7) if etcd_all_up; then
           i=$((RANDOM % 3)); etcd_kill $i
           etcd_back[$i]="$((EPOCHSECONDS + 2 + RANDOM % 4)):last"; etcd_kind[$i]=etcd-member; etcd_from[$i]=$(now)
         fi ;;
      8) if etcd_all_up; then
           back=$((EPOCHSECONDS + 2 + RANDOM % 3)); from=$(now)
           for i in 0 1 2; do
             etcd_kill $i; etcd_back[$i]="$back:"; etcd_kind[$i]=etcd-cluster; etcd_from[$i]=$from
           done
           etcd_back[2]="$back:last"
         fi ;;
      9) if (( have_disk )) && [ -z "$disk_back" ]; then
           dd if=/dev/zero of=disk/fill bs=4k 2>/dev/null
           disk_from=$(now); disk_back=$((EPOCHSECONDS + 1 + RANDOM % 3))
         fi ;;
      10) # Every member stopped past the lease TTL (3 s): a paused VM, a long fsync.
         if etcd_all_up; then
           etcd_thaw=$((EPOCHSECONDS + 4 + RANDOM % 3)); from=$(now)
           for i in 0 1 2; do
             kill -STOP "${ETCD_PIDS[$i]}"
             resume_at+=("$etcd_thaw:${ETCD_PIDS[$i]}:$( ((i == 2)) && echo etcd-freeze || echo -):$from")
           done
         fi ;;
      11) etcd_all_up && damage_record ;;
    esac
  done
  # The end of the chaos: everything comes back; the supervisor sees the job through.
  heal force
  _etcd_wait 0 1 2 || hard "seed $seed: etcd did not come back"
  logs=($name-*.log)
  deadline=$((SECONDS + 240))
  until job_done; do
    (( SECONDS < deadline )) || { dump_logs "${logs[@]}"; fail "seed $seed: the job did not finish (actions:$actions)"; }
    supervise
    sleep 0.5
  done
  for p in "${coords[@]}" "${WORKER_PIDS[@]}"; do
    wait_exit "$p" 60 >/dev/null
    [ $? -ne 124 ] || { dump_logs "${logs[@]}"; fail "seed $seed: process $p did not stop after the job ended"; }
  done
  check_run $run_dir >/dev/null || { dump_logs "${logs[@]}"; fail "seed $seed: run folder invalid (actions:$actions)"; }
  model=""
  if (( step )); then
    rounds_check $run_dir "len(R) == $CHAOS_ROUNDS + 1" "seed $seed: not every round of the step-mode job" ||
      { dump_logs "${logs[@]}"; fail "seed $seed: rounds (actions:$actions)"; }
    model=$(same_model ref-run $run_dir $CHAOS_MRR_TOL) ||
      { dump_logs "${logs[@]}"; fail "seed $seed: the final model is far from the undisturbed run's: $model (actions:$actions)"; }
    model="; $model"
  fi
  touch $name-faults.tsv
  summary=$(python3 - $run_dir $name-faults.tsv <<'PY'
import json, sys
R = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if l.strip()]
F = [l.rstrip("\n").split("\t") for l in open(sys.argv[2]) if l.strip()]
out = []
with open("all-faults.tsv", "a") as af:
    for seed, kind, start, end in F:
        later = [r["wall"] for r in R if r["wall"] > float(end)]
        rec = "%.1f" % (min(later) - float(end)) if later else "-"
        out.append("%s=%s" % (kind, rec))
        af.write("%s\t%s\t%s\n" % (seed, kind, rec))
lost = sum(r.get("eval") == "lost" for r in R)
empty = sum(1 for r in R[1:] if not r["workers"])
with open("all-runs.tsv", "a") as ar:
    ar.write("%d\t%d\t%d\n" % (len(R), lost, empty))
print("%d rounds, %d evaluations lost, %d rounds without weights; recovery (s): %s" % (
    len(R), lost, empty, " ".join(out) or "-"))
PY
)
  echo "seed $seed$sfx: actions:$actions; $restarts coordinator restart(s) -> $summary; result $(json $run_dir/result.json 'd["test_mrr"]')$model"
  rm -rf "$run_dir"   # the tmpfs is small
done
# The figures over every run (docs/faults.md).
python3 - $runs <<'PY'
import collections, sys
F = [l.split("\t") for l in open("all-faults.tsv").read().splitlines() if l]
runs = [[int(x) for x in l.split("\t")] for l in open("all-runs.tsv").read().splitlines() if l]
print("%d of %s runs finished with a valid result: %d rounds, each once; %d evaluations lost, "
      "%d rounds aggregated no weights" % (len(runs), sys.argv[1], sum(r[0] for r in runs),
                                           sum(r[1] for r in runs), sum(r[2] for r in runs)))
by = collections.defaultdict(list)
for seed, kind, rec in F:
    by[kind].append(rec)
for kind in sorted(by):
    t = [float(x) for x in by[kind] if x != "-"]
    print("  %-20s %3d injected; next round after it ends: median %.1f s, max %.1f s" % (
        kind, len(by[kind]), sorted(t)[len(t) // 2] if t else float("nan"), max(t) if t else float("nan")))
PY
