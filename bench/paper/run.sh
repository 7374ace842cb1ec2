#!/bin/bash
# bench/paper/run.sh: the paper's comparison (the shape of its Tables 2 and 3):
# RandomTMA, SuperTMA, PSGD-PA, LLCG and GGS with M = 3 trainers, the same time
# budget each, several seeds, on facebook-pages and on an SBM with h = 0.9;
# and its ablations (Tables 4, 5, 6 and 8) in step mode.
# Every run is a real `tma launch` (private etcd, coordinator, workers).
#
#   bench/paper/run.sh [-o OUT] [--budget SECONDS] [--seeds N] [--graphs "fb sbm big ml"]
#                      [--variants "randomtma supertma psgd-pa llcg ggs"] [--tma PATH]
#                      [--interval-steps N --rounds R] [--clusterer metis|lp]
#                      [--table6 [--policies "continue reassign"]]
#                      [--table8 [--models "gcn-mlp gcn-distmult rgcn-mlp rgcn-distmult"]
#                                [--hidden H] [--bases B]]
#                      [--table4 [--intervals "5 50 500"] [--total-steps T]]
#                      [--table5 [--workers-list "3 5 8"]]
#
# Prints, per graph, `tma report` over its runs: the runs, then each variant's
# mean ± std of test MRR and convergence time, and the steps table.
#
# --interval-steps N --rounds R: aggregate every N local steps and stop after R
# rounds instead of the time budget (every run then does the same work however
# loaded the machine is; --budget stays a cap, 1800 s unless given, 120 s in
# time mode). The tables below always run in
# step mode.
#
# --clusterer C: partition.clusterer of the jobs that cluster (supertma,
# psgd-pa, llcg): metis or lp, the streaming clusterer (default: tma's auto).
# Give each clusterer its own -o folder to compare them.
#
# --table6 runs the paper's Table 6 drill instead (default variants randomtma,
# supertma, psgd-pa; graph fb): F = 1, the trainer of one shard never starts
# (fault.absent_shards), shard (seed - 1) mod 3 for each seed, so that with 3
# seeds every shard is dropped once; under each policy (continue: train with
# M - 1; reassign: a live worker trains on two shards). F = 0 is the plain
# runs of the same graph, variant and seed (made here if missing). Prints test
# MRR F = 0 against F = 1 per variant and policy, and the relative loss.
#
# --table8: Table 8's shape on MovieLens 100K (graph ml, the stand-in for the
# paper's E-comm graph): each model ENCODER-DECODER of --models (encoders gcn,
# rgcn with --bases bases; decoders mlp, distmult; all --hidden wide) under
# randomtma, supertma and psgd-pa, M = 3, plus the centralized `tma train` of
# the same model for R x N steps (as many as each trainer does). Default
# --interval-steps 50 --rounds 10.
#
# --table4: Table 4's shape: the aggregation interval at each of --intervals
# (in local steps), each run --total-steps steps a worker (rounds = T / N, so
# every interval is equal work), variants randomtma supertma psgd-pa llcg,
# graph fb.
#
# --table5: Table 5's shape: M trainers for each M of --workers-list, same
# variants and graph as --table4, --interval-steps N --rounds R (default 50 x
# 10), with the edge ratio r that each partition keeps.
#
# The tables print mean ± std over the seeds of test MRR and of the convergence
# (training seconds, and local steps, to within 1 % of the best validation MRR),
# and the load average before and after.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=bench-paper-out; budget=""; seeds=3; graphs=""
variants=""; table=""; policies="continue reassign"; isteps=0; rounds=0
models="gcn-mlp gcn-distmult rgcn-mlp rgcn-distmult"; hidden=64; bases=4
intervals="5 50 500"; total_steps=1000; workers_list="3 5 8"; clusterer=""
tma=${TMA:-$here/../../tma}
while [ $# -gt 0 ]; do
  case $1 in
    -o) out=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --graphs) graphs=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    --tma) tma=$2; shift 2 ;;
    --table6|--table8|--table4|--table5) table=${1#--table}; shift ;;
    --policies) policies=$2; shift 2 ;;
    --interval-steps) isteps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --hidden) hidden=$2; shift 2 ;;
    --bases) bases=$2; shift 2 ;;
    --intervals) intervals=$2; shift 2 ;;
    --total-steps) total_steps=$2; shift 2 ;;
    --workers-list) workers_list=$2; shift 2 ;;
    --clusterer) clusterer=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
case $table in
  "") def_variants="randomtma supertma psgd-pa llcg ggs"; def_graphs="fb sbm" ;;
  6|8) def_variants="randomtma supertma psgd-pa"; def_graphs=fb ;;
  4|5) def_variants="randomtma supertma psgd-pa llcg"; def_graphs=fb ;;
esac
[ "$table" = 8 ] && def_graphs=ml
if [[ $table == [58] ]] && (( isteps == 0 && rounds == 0 )); then isteps=50; rounds=10; fi
variants=${variants:-$def_variants}; graphs=${graphs:-$def_graphs}
# The time budget: the comparison's; in the step-mode tables only a cap, so a
# generous one (a run capped before its steps is not the equal work they promise).
if [ -z "$budget" ]; then
  if (( isteps > 0 )) || [ "$table" = 4 ]; then budget=1800; else budget=120; fi
fi
datasets=${TMA_DATASETS:-$here/../../../shared/datasets}
mkdir -p "$out/graphs"
out=$(cd "$out" && pwd)
interval=$(( budget / 8 )); (( interval >= 5 )) || interval=5

# set_duration N R: aggregate every N steps for R rounds (step mode), or with
# N = R = 0 every $interval seconds for $budget seconds.
set_duration() {
  if (( $1 > 0 && $2 > 0 )); then
    agg='"interval_steps": '$1; dur='"train_seconds": '$budget', "rounds": '$2
  elif (( $1 > 0 || $2 > 0 )); then
    echo "--interval-steps and --rounds go together" >&2; exit 2
  else
    agg='"interval_seconds": '$interval; dur='"train_seconds": '$budget
  fi
}
set_duration "$isteps" "$rounds"

# What run_one launches, besides the graph, variant and seed: the tables change these.
workers=3
model_json() {  # model_json ENCODER DECODER HIDDEN
  local m='"encoder": "'$1'", "hidden": '$3', "decoder_hidden": '$3
  [ "$1" = rgcn ] && m+=', "bases": '$bases
  [ "$2" = distmult ] && m+=', "decoder": "distmult"'
  echo "{$m}"
}
model=$(model_json gcn mlp 128)

# The graphs, once.
if [[ " $graphs " == *" fb "* && ! -f $out/graphs/fb.tmag ]]; then
  "$tma" import "$datasets/facebook-pages" -o "$out/graphs/fb.tmag" --feat-dim 64 --seed 0 >/dev/null
fi
if [[ " $graphs " == *" sbm "* && ! -f $out/graphs/sbm.tmag ]]; then
  # Many small communities with h = 0.9: link prediction has signal (a
  # same-community negative is rare among 1000), and METIS cuts along classes.
  "$tma" gen sbm -o "$out/graphs/sbm.tmag" --nodes 50000 --classes 500 --avg-degree 16 --homophily 0.9 \
    --feat-dim 64 --noise 1.0 --seed 0 >/dev/null
fi
if [[ " $graphs " == *" big "* && ! -f $out/graphs/big.tmag ]]; then
  # The larger graph of Table 4: the same kind of SBM, 8x the nodes and 10x the
  # edges (4M), lower homophily and noisier features (test MRR ~0.7 rather than
  # ~0.8), the size at which 36 runs still fit a session on 2 cores.
  "$tma" gen sbm -o "$out/graphs/big.tmag" --nodes 400000 --classes 2000 --avg-degree 20 --homophily 0.8 \
    --feat-dim 64 --noise 2.0 --seed 0 >/dev/null
fi
if [[ " $graphs " == *" ml "* && ! -f $out/graphs/ml.tmag ]]; then
  # MovieLens 100K: users and movies with their own features, one relation per rating.
  "$tma" import "$datasets/movielens-100k" -o "$out/graphs/ml.tmag" >/dev/null
fi

# run_one GRAPH VARIANT SEED RUNDIR [ABSENT_SHARD POLICY]: one tma launch of
# $workers workers with $model, $agg and $dur; resumable.
run_one() {
  local g=$1 v=$2 s=$3 run=$4 absent=${5:-} policy=${6:-continue}
  [ -f "$run/result.json" ] && return 0
  rm -rf "$run"
  local name part fault
  name=$(basename "$(dirname "$run")")-$v-s$s
  part='"partition": {"shards": '$workers', "seed": '$s'},'
  [ -n "$clusterer" ] && [ "$v" != randomtma ] &&
    part='"partition": {"shards": '$workers', "seed": '$s', "clusterer": "'$clusterer'"},'
  [ "$v" = ggs ] && part=''
  fault='"start_timeout": 120'
  [ -n "$absent" ] && fault+=', "absent_shards": ['$absent'], "on_failure": "'$policy'"'
  cat > "$out/job-$g-$name.json" <<JSON
{"job": "paper-$g-$name", "variant": "$v", "workers": $workers, "graph": "$out/graphs/$g.tmag", $part
 "aggregation": {$agg}, "duration": {$dur},
 "model": $model,
 "train": {"batch_size": 512, "seed": $s}, "fault": {$fault}}
JSON
  echo "== $g $name" >&2
  "$tma" launch "$out/job-$g-$name.json" -o "$run" --threads 1 -q > "$out/launch-$g-$name.txt" 2>&1 ||
    echo "run $g $name failed; see $out/launch-$g-$name.txt" >&2
}

# run_central GRAPH SEED RUNDIR STEPS: the centralized `tma train` of $model, resumable.
run_central() {
  local g=$1 s=$2 run=$3 steps=$4
  [ -f "$run/result.json" ] && return 0
  rm -rf "$run"
  local name
  name=$(basename "$(dirname "$run")")-central-s$s
  echo '{"model": '"$model"', "train": {"batch_size": 512}}' > "$out/train-$g-$name.json"
  echo "== $g $name" >&2
  "$tma" train "$out/graphs/$g.tmag" --config "$out/train-$g-$name.json" --steps "$steps" \
    --eval-every-seconds 1 --seed "$s" --threads 1 -q -o "$run" > "$out/train-$g-$name.txt" 2>&1 ||
    echo "run $g $name failed; see $out/train-$g-$name.txt" >&2
}

# grid TITLE GRAPH ROWS COL=LABEL...: every variant (row) of every column, seeds
# 1..$seeds, all run before; prints the table from runs/GRAPH-COL/ROW-sS.
grid() {
  local title=$1 g=$2 rows=$3; shift 3
  echo
  echo "### $g: $title, $seeds seed(s); load average before: $load0, after: $(cut -d' ' -f1-3 /proc/loadavg)"
  python3 "$here/tables.py" grid "$out/runs" "$g" "$rows" "$@"
}
# sweep GRAPH PREFIX SETTER "X...": for each seed and each X, SETTER X (which
# changes what run_one launches), then every variant into runs/GRAPH-PREFIXX/.
sweep() {
  local g=$1 prefix=$2 setter=$3 xs=$4 s x v
  for ((s = 1; s <= seeds; s++)); do
    for x in $xs; do
      "$setter" "$x"
      for v in $variants; do
        run_one "$g" "$v" "$s" "$out/runs/$g-$prefix$x/$v-s$s"
      done
    done
  done
}
load0=$(cut -d' ' -f1-3 /proc/loadavg)

case $table in
6)
  for g in $graphs; do
    for ((s = 1; s <= seeds; s++)); do
      for v in $variants; do
        run_one "$g" "$v" "$s" "$out/runs/$g/$v-s$s"
        for p in $policies; do
          run_one "$g" "$v" "$s" "$out/runs/$g-F1-$p/$v-s$s" $(( (s - 1) % 3 )) "$p"
        done
      done
    done
    echo
    echo "### $g: Table 6 shape, M = 3, aggregation $agg, duration $dur, $seeds seed(s)"
    python3 "$here/tables.py" table6 "$out/runs" "$g" "$variants" "$policies"
  done ;;
8)
  for g in $graphs; do
    cols=()
    for m in $models; do
      model=$(model_json "${m%-*}" "${m#*-}" "$hidden")
      for ((s = 1; s <= seeds; s++)); do
        for v in $variants; do
          run_one "$g" "$v" "$s" "$out/runs/$g-$m/$v-s$s"
        done
        run_central "$g" "$s" "$out/runs/$g-$m/central-s$s" $(( isteps * rounds ))
      done
      cols+=("$m=$m")
    done
    grid "Table 8 shape, M = 3, hidden $hidden, rgcn $bases bases, every $isteps steps x $rounds rounds" \
      "$g" "$variants central" "${cols[@]}"
  done ;;
4)
  for i in $intervals; do
    (( total_steps % i == 0 )) || { echo "--total-steps $total_steps is not a multiple of $i" >&2; exit 2; }
  done
  # Every interval is the same work: total_steps local steps a worker.
  set_interval() { set_duration "$1" $(( total_steps / $1 )); }
  for g in $graphs; do
    sweep "$g" i set_interval "$intervals"
    cols=(); for i in $intervals; do cols+=("i$i=every $i"); done
    grid "Table 4 shape, M = 3, $total_steps steps a worker" "$g" "$variants" "${cols[@]}"
  done ;;
5)
  set_workers() { workers=$1; }
  for g in $graphs; do
    sweep "$g" m set_workers "$workers_list"
    cols=(); for m in $workers_list; do cols+=("m$m=M = $m"); done
    grid "Table 5 shape, every $isteps steps x $rounds rounds" "$g" "$variants" "${cols[@]}"
  done ;;
"")
  for g in $graphs; do
    for ((s = 1; s <= seeds; s++)); do
      for v in $variants; do
        run_one "$g" "$v" "$s" "$out/runs/$g/$v-s$s"
      done
    done
    echo
    echo "### $g: M = 3, budget ${budget} s, aggregation every ${interval} s, $seeds seed(s)"
    "$tma" report "$out"/runs/$g/* -o "$out/$g.svg"
  done ;;
esac
