#!/bin/bash
# prom_scrape.sh: the coordinator's round time with and without the
# Prometheus endpoint under 20 scrapes a second (issue 33).  A 2-worker
# RandomTMA job on Cora (tests/data) in step mode, ROUNDS rounds of STEPS
# local steps, launched PAIRS times each way, alternating: without
# metrics.listen, then with it while a loop GETs /metrics 20 times a second.  The
# round time is the median gap between consecutive rounds' commit times
# (metrics.jsonl "wall"); also the median aggregation seconds.
#
# Usage: bench/prom_scrape.sh [WORKDIR]     (from the build folder)
# Environment: ROUNDS (40), STEPS (20), PAIRS (3).
set -euo pipefail
T=$(readlink -f "${TMA_BIN:-$(pwd)/tma}")
SRC=$(cd "$(dirname "$0")/.." && pwd)
W=${1:-${TMPDIR:-/tmp}/tma-bench-prom}
ROUNDS=${ROUNDS:-40}; STEPS=${STEPS:-20}; PAIRS=${PAIRS:-3}
rm -rf "$W"; mkdir -p "$W"
echo "# $(date -u +%F) machine: $(nproc) CPUs; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
cat > "$W/job.json" <<JSON
{"job": "prom-bench", "dataset": "$SRC/tests/data/cora", "import": {"feat_dim": 32, "seed": 3},
 "workers": 2, "aggregation": {"interval_steps": $STEPS}, "duration": {"rounds": $ROUNDS, "train_seconds": 600},
 "model": {"hidden": 32, "decoder_hidden": 32}, "train": {"batch_size": 128, "seed": 1}}
JSON
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
stats() {  # stats RUN: median round gap and aggregation seconds, rounds 2..
  python3 - "$1/metrics.jsonl" <<'PY'
import json, statistics, sys
R = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
w = [r["wall"] for r in R if r.get("round", 0) >= 1]
gaps = [b - a for a, b in zip(w, w[1:])]
agg = [r["agg_seconds"] for r in R if r.get("agg_seconds") is not None]
print("%d rounds, round time median %.1f ms (p90 %.1f), aggregation median %.2f ms" % (
    len(R), 1e3 * statistics.median(gaps), 1e3 * sorted(gaps)[int(0.9 * len(gaps))],
    1e3 * statistics.median(agg) if agg else float("nan")))
PY
}
for ((i = 0; i < PAIRS; i++)); do
  "$T" launch "$W/job.json" -o "$W/plain$i" -q > /dev/null 2>&1
  printf "%-34s %s\n" "without the endpoint ($i)" "$(stats "$W/plain$i")"
  "$T" launch "$W/job.json" -o "$W/scraped$i" -q --metrics-listen "127.0.0.1:$port" > /dev/null 2>&1 &
  lp=$!
  # 20 GETs a second, paced, until the launch ends (one process, no curl per scrape).
  n=$(python3 - "$port" "$lp" <<'PY'
import os, sys, time, urllib.request
port, pid = sys.argv[1], int(sys.argv[2])
n, t = 0, time.monotonic()
while True:
    try:
        os.kill(pid, 0)
    except OSError:
        break
    try:
        urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=1).read()
        n += 1
    except OSError:
        pass
    t += 0.05
    time.sleep(max(0.0, t - time.monotonic()))
print(n)
PY
)
  wait $lp
  printf "%-34s %s; %d scrapes answered\n" "with it, scraped 20 times a second ($i)" "$(stats "$W/scraped$i")" "$n"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$W"
