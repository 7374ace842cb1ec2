#!/bin/bash
# test_fault_chaos.sh (scenario 10): a seeded random sequence of SIGKILLs,
# pauses (SIGSTOP/SIGCONT, some past the lease) and restarts of workers across
# a run.  Each run must finish with a valid result and every round recorded
# once, and leave nothing behind.  `make check` runs one seed; `make
# check-chaos` runs CHAOS_RUNS (20) seeds in a loop.
source "$TMA_SRCDIR/tests/lib.sh"
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
cd "$TMP_ROOT"
runs=${CHAOS_RUNS:-1}
seed0=${CHAOS_SEED:-$(( $(date +%s) % 100000 ))}
etcd_start 1
fault_graph
for ((run = 0; run < runs; run++)); do
  seed=$((seed0 + run))
  RANDOM=$seed
  name="chaos$run"
  WORKER_PIDS=()
  TRAIN=22 write_job $name.json $name '"fault": {"on_failure": "reassign", "lease_ttl": 3, "round_deadline": 4, "start_timeout": 20}'
  start_coordinator $name-coord.log --config $name.json --run-dir $name-run
  for i in 0 1 2; do start_worker $name-w$i.log --job $name --name w$i; done
  start_worker $name-b.log --job $name --name backup --backup
  wait_round $name-run 1 || { dump_logs $name-coord.log; fail "seed $seed: no first round"; }
  actions=""
  paused=()
  end=$((SECONDS + 14))
  n=4
  while (( SECONDS < end )); do
    sleep "1.$((RANDOM % 10))"
    live=()
    for p in "${WORKER_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && live+=("$p"); done
    (( ${#live[@]} )) || { start_worker $name-n$n.log --job $name --name n$n; n=$((n + 1)); actions+=" start"; continue; }
    victim=${live[$((RANDOM % ${#live[@]}))]}
    case $((RANDOM % 4)) in
      0) kill -KILL "$victim"; actions+=" kill"
         start_worker $name-n$n.log --job $name --name n$n; n=$((n + 1)) ;;
      1) kill -STOP "$victim"; paused+=("$victim"); actions+=" pause"
         ( sleep "$((1 + RANDOM % 6))"; kill -CONT "$victim" 2>/dev/null ) & track $! ;;
      2) start_worker $name-n$n.log --job $name --name n$n; n=$((n + 1)); actions+=" start" ;;
      3) actions+=" -" ;;
    esac
  done
  for p in "${paused[@]}"; do kill -CONT "$p" 2>/dev/null; done
  logs=($name-*.log)
  finish_job "${logs[@]}"
  check_run $name-run >/dev/null || { dump_logs $name-coord.log; fail "seed $seed: run folder invalid (actions:$actions)"; }
  rounds=$(python3 -c "import json; print(sum(1 for _ in open('$name-run/metrics.jsonl')))")
  echo "seed $seed: actions:$actions -> $rounds rounds, result $(json $name-run/result.json 'd["test_mrr"]')"
done
