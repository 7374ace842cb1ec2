#!/bin/bash
# eval_ranks.sh: the distributed evaluation (issue 28) against the single
# evaluator on one R-MAT graph: the memory of every role, the evaluation's
# wall and CPU time, the validation and test MRR of both paths, and the
# training steps/s beside each.
#
# It generates the graph (tma gen rmat), partitions it for each M of MS and
# each scheme of SCHEMES (tma partition: shards and their inference files),
# and for each partition and each WHERE runs one job in step mode (RandomTMA
# on a random partition, SuperTMA on supernode:N, PSGD-PA on metis) with
# "eval": {"where": WHERE},
# starting the roles itself: a private etcd on free loopback ports with its own
# data dir, `tma coordinator`, and M x `tma worker --threads 1`. With
# WHERE=workers every role runs under `prlimit --data=BYTES` (RLIMIT_DATA caps
# the private writable mappings, that is the anonymous memory; this machine
# has no cgroup memory controller): the coordinator at COORD_CAP_MB, each
# worker at 1.2 x (graph file bytes / M) + WORKER_EXTRA_MB. WHERE=coordinator
# runs uncapped (the coordinator maps the whole graph and holds two N x hidden
# tables). Each role runs under /usr/bin/time -v (its CPU time and maximum
# RSS, which also catches what falls between two samples); its peak RssAnon
# and RssFile are sampled from /proc/PID/status every 0.5 s until it exits.
# The coordinator logs at debug level for its evaluation seconds ("round R:
# validation MRR X (S s)"); the workers log each layer of each evaluation
# ("evaluation N, layer L: X s (Y s waiting for rows), ...").
#
# Usage: bench/eval_ranks.sh [WORKDIR]        (from the build folder)
# Environment: SCALE (23: 2^23 nodes), EDGES (100000000 drawn), FEAT_DIM (64),
#   HIDDEN (64: encoder and decoder width), STEPS (20 local steps a round),
#   ROUNDS (3), MS ("3 4": the worker counts), WHERES ("workers coordinator"),
#   COORD_CAP_MB (300), WORKER_EXTRA_MB (768), MEMORY (tma gen/partition
#   --memory; default theirs), TABLE_DTYPE (eval.table_dtype of the ranks:
#   f32 or bf16; default the config's), RANK_CACHE_MB (eval.rank_cache_mb:
#   MiB a rank keeps of fetched rows; default the config's), JOB_TIMEOUT (3600 s a job),
#   SCHEMES ("random"; also supernode[:N] or metis), CLUSTERER (tma partition
#   --clusterer for those; default its own, auto), PHASE_CAP_MB (generation and
#   partition under prlimit --data=; 0, the default, is none), BATCH (512:
#   train.batch_size), FANOUTS (train.fanouts as JSON; default the config's),
#   DROP=1 removes each partition once its jobs are done (for a disk that
#   cannot hold them all), KEEP=1 keeps the graph and partitions, REUSE=1 uses
#   the ones a KEEP=1 run left in WORKDIR. Each job's folder WORKDIR/M<M>-<WHERE> keeps its run
#   folder and, per role, ROLE.log, ROLE.time (time -v), ROLE.peak (peak
#   RssAnon and RssFile, KiB) and rc.txt; WORKDIR/summary.txt repeats what is
#   printed. Partitions other than random are WORKDIR/rmat-SCHEME-M and
#   their jobs' folders WORKDIR/SCHEME-M<M>-<WHERE> (a ':' in SCHEME as '_').
set -euo pipefail
BUILD=$(pwd)
T=${TMA_BIN:-$BUILD/tma}
W=${1:-${TMPDIR:-/tmp}/tma-bench-eval-ranks}
SCALE=${SCALE:-23}; EDGES=${EDGES:-100000000}; FEAT_DIM=${FEAT_DIM:-64}; HIDDEN=${HIDDEN:-64}
STEPS=${STEPS:-20}; ROUNDS=${ROUNDS:-3}; MS=${MS:-3 4}; WHERES=${WHERES:-workers coordinator}
SCHEMES=${SCHEMES:-random}; BATCH=${BATCH:-512}
PHASE_CAP=$(( ${PHASE_CAP_MB:-0} << 20 ))
COORD_CAP_MB=${COORD_CAP_MB:-300}; WORKER_EXTRA_MB=${WORKER_EXTRA_MB:-768}; JOB_TIMEOUT=${JOB_TIMEOUT:-3600}
ETCD=${TMA_ETCD:-$(command -v etcd || true)}
[ -x "$T" ] || { echo "eval_ranks.sh: no tma at $T (run it from the build folder)" >&2; exit 2; }
[ -x "$ETCD" ] || { echo "eval_ranks.sh: no etcd (set TMA_ETCD)" >&2; exit 2; }
T=$(readlink -f "$T")
mkdir -p "$W"
W=$(readlink -f "$W")
G=$W/rmat.tmag
TD_JSON=
[ -z "${TABLE_DTYPE:-}" ] || TD_JSON=", \"table_dtype\": \"$TABLE_DTYPE\""
[ -z "${RANK_CACHE_MB:-}" ] || TD_JSON="$TD_JSON, \"rank_cache_mb\": $RANK_CACHE_MB"
MEM=()
[ -z "${MEMORY:-}" ] || MEM=(--memory "$MEMORY")
CLU=()
[ -z "${CLUSTERER:-}" ] || CLU=(--clusterer "$CLUSTERER")
FAN_JSON=
[ -z "${FANOUTS:-}" ] || FAN_JSON=", \"fanouts\": $FANOUTS"
exec > >(tee -a "$W/summary.txt") 2>&1

# Every process this script starts, ended on exit (by its own id).
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

echo "# $(date -u '+%F %T UTC'), commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# machine: $(nproc) CPUs, $(free -m | awk '/Mem:/ {printf "%.1f GiB", $2 / 1024}'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# phase NAME CMD... (phase_lib.sh): wall, CPU and peak RSS of a step.
. "$(dirname "$0")/phase_lib.sh"

if [ "${REUSE:-0}" = 1 ] && [ -s "$G" ]; then
  echo "reusing $G"
else
  phase generate "$T" gen rmat -o "$G" --scale "$SCALE" --edges "$EDGES" --feat-dim "$FEAT_DIM" --seed 1 "${MEM[@]}"
  grep -E '^  (nodes|edges|train|val|test|seconds)' "$W/generate.out" | sed 's/^/  /' || true
fi
GBYTES=$(stat -c %s "$G")
echo "## file sizes (bytes)"
echo "graph $(basename "$G") $GBYTES"

# partition M SCHEME: the partition folder, made unless REUSE=1 finds it; in P.
partition() {
  local m=$1 scheme=$2 tag
  tag=${scheme//:/_}
  P=$W/rmat-$tag-$m
  if ! { [ "${REUSE:-0}" = 1 ] && [ -s "$P/partition.json" ]; }; then
    rm -rf "$P"
    local extra=()
    [ "$scheme" = random ] || extra=("${CLU[@]}")
    phase "partition-$tag-$m" "$T" partition "$G" --scheme "$scheme" --shards "$m" --seed 1 -o "$P" \
      "${MEM[@]}" "${extra[@]}"
    grep -E 'clusterer|edge_ratio' "$W/partition-$tag-$m.out" | sed 's/^/  /' || true
  fi
  local f
  for f in "$P"/shard-*.tmag; do echo "M=$m $scheme $(basename "$f") $(stat -c %s "$f")"; done
  du -sb "$P" | awk -v g="$GBYTES" '{printf "  the partition folder: %.0f bytes, %.2f times the graph\n", $1, $1 / g}'
}

# sample PID OUT: peak RssAnon and RssFile (KiB) of PID, every 0.5 s until it ends.
sample() {
  local pid=$1 out=$2 a f ma=0 mf=0
  while [ -r "/proc/$pid/status" ]; do
    read -r a f < <(awk '/^RssAnon/ {a = $2} /^RssFile/ {f = $2} END {print a + 0, f + 0}' "/proc/$pid/status" 2>/dev/null) ||
      break
    [ "$a" -gt "$ma" ] && ma=$a
    [ "$f" -gt "$mf" ] && mf=$f
    echo "$ma $mf" > "$out"
    sleep 0.5
  done
}

# spawn DIR NAME CAP_BYTES CMD...: CMD in the background under /usr/bin/time -v
# (and prlimit --data when CAP_BYTES is not 0), its log DIR/NAME.log, its
# sampler writing DIR/NAME.peak; the pid of the wrapper (its exit status is
# CMD's) is left in SPAWNED, CMD's own in CHILD.
spawn() {
  local d=$1 name=$2 cap=$3; shift 3
  local pre=()
  [ "$cap" = 0 ] || pre=(prlimit --data="$cap")
  "${pre[@]}" /usr/bin/time -v -o "$d/$name.time" "$@" > "$d/$name.log" 2>&1 &
  SPAWNED=$!
  PIDS+=("$SPAWNED")
  local child="" i
  for ((i = 0; i < 100; i++)); do
    child=$(pgrep -P "$SPAWNED" | head -1 || true)
    [ -z "$child" ] || break
    sleep 0.05
  done
  CHILD=$child
  [ -n "$child" ] && { PIDS=("$child" "${PIDS[@]}"); sample "$child" "$d/$name.peak" & PIDS+=("$!"); }
  return 0
}

for M in $MS; do
 for SCHEME in $SCHEMES; do
  case $SCHEME in
  random) VARIANT=randomtma PRE= ;;
  supernode*) VARIANT=supertma PRE=${SCHEME//:/_}- ;;
  metis) VARIANT=psgd-pa PRE=metis- ;;
  *) echo "eval_ranks.sh: unknown scheme $SCHEME (random, supernode[:N] or metis)" >&2; exit 2 ;;
  esac
  partition "$M" "$SCHEME"
  WCAP=$(python3 -c "print(int(1.2 * $GBYTES / $M) + ($WORKER_EXTRA_MB << 20))")
  for WHERE in $WHERES; do
    D=$W/${PRE}M$M-$WHERE
    rm -rf "$D"; mkdir -p "$D"
    JOB=evalranks-${PRE//_/-}m$M-$WHERE
    cat > "$D/job.json" <<JSON
{"job": "$JOB", "variant": "$VARIANT", "workers": $M, "graph": "$G",
 "partition": {"dir": "$P"},
 "aggregation": {"interval_steps": $STEPS}, "duration": {"rounds": $ROUNDS, "train_seconds": 7200},
 "model": {"encoder": "gcn", "hidden": $HIDDEN, "decoder_hidden": $HIDDEN},
 "train": {"batch_size": $BATCH, "seed": 1, "threads": 1$FAN_JSON},
 "eval": {"where": "$WHERE", "threads": 1, "rank_timeout": 1800$TD_JSON},
 "fault": {"start_timeout": 600, "round_deadline": 1800}}
JSON
    CCAP=0 CAP=0
    if [ "$WHERE" = workers ]; then CCAP=$((COORD_CAP_MB << 20)) CAP=$WCAP; fi
    read -r CPORT PPORT <<< "$(python3 -c '
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')"
    URL=http://127.0.0.1:$CPORT PEER=http://127.0.0.1:$PPORT
    "$ETCD" --name e --data-dir "$D/etcd" --listen-client-urls "$URL" --advertise-client-urls "$URL" \
      --listen-peer-urls "$PEER" --initial-advertise-peer-urls "$PEER" --initial-cluster "e=$PEER" \
      --logger zap --log-outputs stderr --log-level warn > "$D/etcd.log" 2>&1 &
    EPID=$!; PIDS+=("$EPID")
    for ((i = 0; i < 100; i++)); do curl -sf "$URL/health" > /dev/null 2>&1 && break; sleep 0.1; done
    echo "## M=$M $SCHEME ($VARIANT) where=$WHERE (caps: coordinator $CCAP, each worker $CAP bytes; 0 = none); $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    t0=$(date +%s.%N)
    TMA_LOG_LEVEL=debug spawn "$D" coordinator "$CCAP" "$T" coordinator --etcd "$URL" --config "$D/job.json" \
      --run-dir "$D/run"
    CPID=$SPAWNED
    ROLES=("$CHILD")
    WPIDS=()
    for ((k = 1; k <= M; k++)); do
      spawn "$D" "worker$k" "$CAP" "$T" worker --etcd "$URL" --job "$JOB" --threads 1 --name "w$k"
      WPIDS+=("$SPAWNED"); ROLES+=("$CHILD")
    done
    # Wait for every role, with a deadline.
    deadline=$(( $(date +%s) + JOB_TIMEOUT ))
    while :; do
      alive=0
      for p in "$CPID" "${WPIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ "$alive" = 0 ] && break
      if [ "$(date +%s)" -gt "$deadline" ]; then
        echo "  the job ran past ${JOB_TIMEOUT} s: stopping it"
        for p in "${ROLES[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
        sleep 10
        for p in "${ROLES[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
      fi
      sleep 1
    done
    wall=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
    : > "$D/rc.txt"
    rc=0; wait "$CPID" || rc=$?; echo "coordinator $rc" >> "$D/rc.txt"
    for ((k = 1; k <= M; k++)); do rc=0; wait "${WPIDS[$((k - 1))]}" || rc=$?; echo "worker$k $rc" >> "$D/rc.txt"; done
    kill "$EPID" 2>/dev/null || true; wait "$EPID" 2>/dev/null || true
    sleep 1   # the samplers' last write
    echo "  job wall $wall s; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
    python3 - "$D" "$CCAP" "$CAP" <<'PY'
import json, os, re, sys
d, ccap, wcap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rcs = dict(l.split() for l in open(f"{d}/rc.txt"))
def cpu(name):
    t = open(f"{d}/{name}.time").read() if os.path.exists(f"{d}/{name}.time") else ""
    u = re.search(r"User time \(seconds\): ([\d.]+)", t); s = re.search(r"System time \(seconds\): ([\d.]+)", t)
    return float(u.group(1)) + float(s.group(1)) if u and s else float("nan")
def maxrss(name):   # /usr/bin/time's: the whole run, between the samples too
    t = open(f"{d}/{name}.time").read() if os.path.exists(f"{d}/{name}.time") else ""
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", t)
    return int(m.group(1)) / 1024 if m else float("nan")
def peak(name):
    try:
        a, f = open(f"{d}/{name}.peak").read().split()
        return int(a) / 1024, int(f) / 1024
    except (OSError, ValueError):
        return float("nan"), float("nan")
print("  | role | cap (MiB) | peak RssAnon (MiB) | peak RssFile (MiB) | max RSS, time -v (MiB) | CPU (s) | exit |")
print("  |---|---:|---:|---:|---:|---:|---:|")
for name in sorted(rcs, key=lambda n: (n != "coordinator", len(n), n)):
    cap = ccap if name == "coordinator" else wcap
    a, f = peak(name)
    caps = "none" if cap == 0 else f"{cap / 2**20:,.0f}"
    print(f"  | {name} | {caps} | {a:,.0f} | {f:,.0f} | {maxrss(name):,.0f} | {cpu(name):.1f} | {rcs[name]} |")
run = f"{d}/run"
res = json.load(open(f"{run}/result.json")) if os.path.exists(f"{run}/result.json") else None
lines = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if l.strip()] if os.path.exists(f"{run}/metrics.jsonl") else []
print(f"  result.json: {'present' if res else 'MISSING'}; metrics.jsonl rounds: {len(lines)}; eval per round: "
      + ", ".join(f"r{m['round']} {m.get('eval')}" for m in lines))
ev, last_eval, test_s = {}, None, None
def stamp(l):
    h, m, sec = l.split()[0].split(":")
    return int(h) * 3600 + int(m) * 60 + float(sec)
for l in open(f"{d}/coordinator.log", errors="replace"):
    m = re.search(r"round (\d+): validation MRR ([\d.]+) \(([\d.]+) s\)", l)
    if m:
        ev[int(m.group(1))] = float(m.group(3))
        last_eval = stamp(l)
    elif "result: test MRR" in l and last_eval is not None:
        test_s = (stamp(l) - last_eval) % 86400   # the test of the best round, from the log's times
for m in lines:
    sps = [w.get("steps_per_s") for w in m.get("workers", [])]
    v = m.get("val_mrr")
    print(f"  round {m['round']}: val_mrr {v if v is None else f'{v:.6f}'}, eval {ev.get(m['round'], '-')} s, "
          f"steps/s " + " ".join(f"{s:.2f}" for s in sps if s is not None))
if res:
    print(f"  test_mrr {res.get('test_mrr')}, best_round {res.get('best_round')}, "
          f"rounds_evaluated {res.get('rounds_evaluated')}, rounds_skipped {res.get('rounds_skipped')}, "
          + (f"test about {test_s:.1f} s (the log's time from the last validation)" if test_s and test_s > 0.05
             else "tested with the best round's evaluation"))
per_eval = {}   # evaluation -> [(worker, seconds summed over layers, waiting, MiB fetched)]
for name in sorted(rcs):
    if not name.startswith("worker"):
        continue
    for l in open(f"{d}/{name}.log", errors="replace"):
        m = re.search(r"evaluation (\d+), layer (\d+): ([\d.]+) s \(([\d.]+) s waiting for rows\), (\d+) rows "
                      r"\(([\d.]+) MiB\) fetched, (\d+) rows \(([\d.]+) MiB\) served"
                      r"(?:, (\d+) rows from its cache \(of (\d+)\))?", l)
        if m:
            e = per_eval.setdefault(int(m.group(1)), {}).setdefault(name, [0.0, 0.0, 0.0])
            e[0] += float(m.group(3)); e[1] += float(m.group(4)); e[2] += float(m.group(6))
            print(f"  {name} eval {m.group(1)} layer {m.group(2)}: {m.group(3)} s ({m.group(4)} s waiting), "
                  f"fetched {m.group(5)} rows {m.group(6)} MiB, served {m.group(7)} rows {m.group(8)} MiB"
                  + (f", {m.group(9)} rows from its cache (of {m.group(10)})" if m.group(9) else ""))
for e in sorted(per_eval):
    r = per_eval[e]
    print(f"  evaluation {e} (the evaluated rounds in order, then the test), layers summed: "
          + ", ".join(f"{n} {v[0]:.1f} s ({v[1]:.1f} s waiting, {v[2]:.0f} MiB fetched)" for n, v in sorted(r.items())))
for name in sorted(rcs):
    if rcs[name] != "0":
        print(f"  {name} exited {rcs[name]}; the end of its log:")
        for l in open(f"{d}/{name}.log", errors="replace").readlines()[-8:]:
            print("    " + l.rstrip())
PY
  done
  [ "${DROP:-0}" != 1 ] || { rm -rf "$P"; echo "  (the partition folder removed: DROP=1)"; }
 done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%T UTC')"
if [ "${KEEP:-0}" != 1 ]; then
  rm -rf "$G" "$W"/rmat-*-[0-9]*
  for D in "$W"/*M[0-9]*-*; do rm -rf "$D/etcd" "$D"/run/*.tmaw "$D"/run/checkpoints 2>/dev/null || true; done
fi
