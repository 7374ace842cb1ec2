#!/bin/bash
# bench/fault/detect.sh: how fast failures are noticed and repaired, on real
# processes: a worker of a running job (3 workers, 1 backup, reassign, lease
# TTL 3 s) is SIGKILLed (noticed through the UCX connection) or SIGSTOPped
# (noticed when its lease expires); measured from the signal to the
# coordinator's first log line about it, and to the backup's first training
# step on the moved shard.  Goals: detection <= 1 s after SIGKILL and
# <= lease TTL after SIGSTOP; backup training <= 2 s + shard load time.
#
#   bench/fault/detect.sh [--trials N] [--graph G.tmag] [--tma PATH]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
trials=5; tma=${TMA:-$here/../../tma}; graph=""
while [ $# -gt 0 ]; do
  case $1 in
    --trials) trials=$2; shift 2 ;;
    --graph) graph=$2; shift 2 ;;
    --tma) tma=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
datasets=${TMA_DATASETS:-$here/../../../shared/datasets}
work=$(mktemp -d "${TMPDIR:-/tmp}/tma-bench-fault-XXXXXX")
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill -KILL "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
if [ -z "$graph" ]; then
  "$tma" import "$datasets/facebook-pages" -o g.tmag --feat-dim 64 >/dev/null || exit 1
  graph=$work/g.tmag
fi
"$tma" partition "$graph" --scheme random --shards 3 -o part >/dev/null || exit 1
ports=$(python3 -c 'import socket; s=[socket.socket() for _ in range(2)]; [x.bind(("127.0.0.1",0)) for x in s]; print(" ".join(str(x.getsockname()[1]) for x in s))')
set -- $ports
url=http://127.0.0.1:$1
etcd --name b --data-dir etcd --listen-client-urls $url --advertise-client-urls $url \
  --listen-peer-urls http://127.0.0.1:$2 --initial-advertise-peer-urls http://127.0.0.1:$2 \
  --initial-cluster b=http://127.0.0.1:$2 --log-level error >etcd.log 2>&1 &
pids+=($!)
for _ in $(seq 100); do etcdctl --endpoints $url endpoint health >/dev/null 2>&1 && break; sleep 0.1; done

logtime() { # LOGFILE PATTERN -> epoch seconds of the first matching line
  local l; l=$(grep -m1 -- "$2" "$1" | cut -d' ' -f1) || return 1
  [ -n "$l" ] && date -d "today $l" +%s.%N
}
results=()
for mode in kill stop; do
  for ((t = 1; t <= trials; t++)); do
    job=d$mode$t
    cat > $job.json <<JSON
{"job": "$job", "graph": "$graph", "partition": {"dir": "$work/part"}, "workers": 3,
 "aggregation": {"interval_seconds": 2}, "duration": {"train_seconds": 40},
 "model": {"hidden": 64, "decoder_hidden": 64}, "train": {"batch_size": 256, "threads": 1},
 "fault": {"on_failure": "reassign", "lease_ttl": 3, "round_deadline": 5}}
JSON
    "$tma" coordinator --etcd $url --config $job.json --run-dir $job-run >$job-coord.log 2>&1 & cpid=$!; pids+=($cpid)
    wp=()
    for i in 0 1 2; do "$tma" worker --etcd $url --job $job --threads 1 >$job-w$i.log 2>&1 & wp+=($!); pids+=($!); done
    "$tma" worker --etcd $url --job $job --threads 1 --backup >$job-b.log 2>&1 & bpid=$!; pids+=($bpid)
    for _ in $(seq 300); do grep -q "round 2 " $job-coord.log && break; sleep 0.1; done
    victim=${wp[1]}
    id=$(sed -n 's/.*joined job '$job' as member \([0-9]*\).*/\1/p' $job-w1.log | head -n1)
    t0=$(date +%s.%N)
    if [ $mode = kill ]; then kill -KILL $victim; else kill -STOP $victim; fi
    for _ in $(seq 200); do grep -q "training on 1 shard" $job-b.log && break; sleep 0.05; done
    if [ $mode = kill ]; then
      det=$(logtime $job-coord.log "member $id: connection")
    else
      det=$(logtime $job-coord.log "member $id is gone")
    fi
    trained=$(logtime $job-b.log "training on 1 shard")
    load=$(sed -n 's/.*loaded .* in \([0-9.]*\) s/\1/p' $job-b.log | head -n1)
    kill -KILL $cpid $bpid "${wp[@]}" 2>/dev/null; kill -CONT $victim 2>/dev/null
    wait $cpid $bpid "${wp[@]}" 2>/dev/null
    if [ -n "$det" ] && [ -n "$trained" ]; then
      results+=("$mode $(python3 -c "print('%.3f %.3f %s' % ($det - $t0, $trained - $t0, '${load:-0}'))")")
    else
      results+=("$mode failed")
    fi
    echo "${results[-1]}" >&2
  done
done
python3 - "${results[@]}" <<'PY'
import statistics, sys
rows = {}
for r in sys.argv[1:]:
    p = r.split()
    if p[1] != "failed":
        rows.setdefault(p[0], []).append(tuple(map(float, p[1:])))
print("%-8s %6s %22s %22s %12s" % ("signal", "trials", "detection s (med/max)", "backup trains s (med/max)", "load s (med)"))
for m, v in rows.items():
    d = [x[0] for x in v]; b = [x[1] for x in v]; l = [x[2] for x in v]
    print("%-8s %6d %12.3f / %6.3f %12.3f / %6.3f %12.3f" % ("SIGKILL" if m == "kill" else "SIGSTOP", len(v),
          statistics.median(d), max(d), statistics.median(b), max(b), statistics.median(l)))
PY
