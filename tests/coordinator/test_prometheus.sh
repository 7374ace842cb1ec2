#!/bin/bash
# test_prometheus.sh: `tma launch --metrics-listen` makes the coordinator
# serve /metrics; a real Prometheus server scrapes it and its HTTP API
# (/api/v1/query) gives the round and the validation MRR of metrics.jsonl.
# The endpoint answers 405 to POST and 404 off /metrics, listens on the
# configured address only, and 100 idle connections holding every slot do
# not stop rounds; it is gone when the job ends.  A malformed
# metrics.listen is refused by name (exit 2).  In step mode,
# tma_round_duration_seconds is the median of the last rounds' durations in
# metrics.jsonl, and the alert rules of docs/operations.md pass promtool and
# do not fire on a healthy job.
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
need prometheus prometheus
need promtool prometheus
need curl curl
cd "$TMP_ROOT"
read -r MPORT PPORT <<< "$(_etcd_free_ports 2)"

# A malformed address is refused by name before anything starts.
cat > bad.json <<JSON
{"job": "bad", "dataset": "$TMA_FIXTURES/cora", "metrics": {"listen": "localhost:99999"}}
JSON
expect_fail 2 'metrics\.listen' -- "$TMA" launch bad.json -o badrun
[ ! -e badrun ] || fail "a refused config left a run folder"

# A step-mode job with a long budget; the test ends it with SIGTERM.
cat > job.json <<JSON
{"job": "prom", "dataset": "$TMA_FIXTURES/cora", "import": {"feat_dim": 32, "seed": 3},
 "workers": 2, "aggregation": {"interval_steps": 5}, "duration": {"train_seconds": 300},
 "model": {"hidden": 32, "decoder_hidden": 32}, "train": {"batch_size": 128}}
JSON
expect_fail 2 'metrics-listen' -- "$TMA" launch job.json -o badrun --metrics-listen 127.0.0.1
[ ! -e badrun ] || fail "a refused flag left a run folder"
"$TMA" launch job.json -o run --metrics-listen "127.0.0.1:$MPORT" > out.txt 2>&1 &
lpid=$!
track $lpid
M="http://127.0.0.1:$MPORT/metrics"
# metric NAME: the value of an unlabelled sample in the endpoint's text.
metric() { curl -sf --max-time 5 "$M" | awk -v n="$1" '$1 == n {print $2}'; }
round_at_least() { local r; r=$(metric tma_round); [ -n "$r" ] && [ "${r%.*}" -ge "$1" ]; }
wait_for 120 round_at_least 2 || { cat out.txt >&2; fail "the endpoint never showed round 2"; }
[ "$(json run/job.json 'd["metrics"]["listen"]')" = "127.0.0.1:$MPORT" ] || fail "job.json lacks metrics.listen"
body=$(curl -sf --max-time 5 "$M") || fail "GET /metrics failed"
for m in 'tma_job_phase{phase="training"} 1' tma_coordinator_epoch tma_train_seconds tma_train_budget_seconds \
         'tma_workers_alive 2' 'tma_backups_idle 0' 'tma_worker_steps_per_second{worker=' tma_aggregation_seconds \
         tma_validation_mrr tma_validation_best_mrr tma_evaluation_seconds tma_failures_detected_total \
         tma_shards_moved_total tma_etcd_request_errors_total tma_round_duration_seconds; do
  grep -qF "$m" <<< "$body" || { echo "$body" >&2; fail "/metrics lacks $m"; }
done
curl -sI --max-time 5 "$M" | grep -qi '^content-type: text/plain; version=0.0.4' || fail "not the text exposition format"
# The round duration of that scrape: the median gap between the commits of
# the last (at most 8) rounds up to its round, as metrics.jsonl has them.
sround=$(awk '$1 == "tma_round" {print $2}' <<< "$body")
sdur=$(awk '$1 == "tma_round_duration_seconds" {print $2}' <<< "$body")
line_of() { python3 -c 'import json,sys; sys.exit(not any(json.loads(l)["round"] == int(float(sys.argv[2])) for l in open(sys.argv[1])))' run/metrics.jsonl "$1"; }
wait_for 30 line_of "$sround" || fail "metrics.jsonl has no line for round $sround"
python3 - run/metrics.jsonl "$sround" "$sdur" <<'PY' || fail "tma_round_duration_seconds is not the median of metrics.jsonl's round times"
import json, statistics, sys
wall = {r["round"]: r["wall"] for r in map(json.loads, open(sys.argv[1]))}
t, d = int(float(sys.argv[2])), float(sys.argv[3])
gaps = [wall[r] - wall[r - 1] for r in range(max(1, t - 7), t + 1)]
if abs(statistics.median(gaps) - d) > 1e-6:
    sys.exit("round %d: tma_round_duration_seconds %r, the median of %r is %r" % (t, d, gaps, statistics.median(gaps)))
print("round %d: tma_round_duration_seconds %.3f s, the median of %d rounds" % (t, d, len(gaps)))
PY
# The documented alert rules are valid.
python3 - "$TMA_SRCDIR/docs/operations.md" > rules.yml <<'PY' || fail "no alert rules in docs/operations.md"
import sys
text = open(sys.argv[1]).read()
start = text.index("```yaml", text.index("alert rules")) + len("```yaml")
print(text[start:text.index("```", start)])
PY
promtool check rules rules.yml > promtool.txt 2>&1 || { cat promtool.txt >&2; fail "promtool refuses docs/operations.md's alert rules"; }

# Only GET /metrics exists, and only on the configured address.
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST -d x=1 "$M")
[ "$code" = 405 ] || fail "POST /metrics answered $code, not 405"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$MPORT/")
[ "$code" = 404 ] || fail "GET / answered $code, not 404"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$MPORT/metrics/x")
[ "$code" = 404 ] || fail "GET /metrics/x answered $code, not 404"
# 127.0.0.2 is this host too (127/8 is the loopback), but not the address bound.
for addr in 127.0.0.2 $(hostname -I 2>/dev/null); do
  [[ $addr == *:* ]] && addr="[$addr]"
  if curl -s -o /dev/null --max-time 3 "http://$addr:$MPORT/metrics"; then
    fail "the endpoint answers on $addr, not only on 127.0.0.1"
  fi
done

# Many idle clients hold every connection slot: rounds go on all the same.
python3 - "$MPORT" 100 20 > idle.txt 2>&1 <<'PY' &
import socket, sys, time
socks = []
for _ in range(int(sys.argv[2])):
    try:
        socks.append(socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2))
    except OSError:
        pass
print("open", len(socks), flush=True)
time.sleep(float(sys.argv[3]))
PY
ipid=$!
track $ipid
wait_for 30 grep -q '^open' idle.txt || fail "the idle clients did not connect"
lines() { wc -l < run/metrics.jsonl; }
n0=$(lines)
more_rounds() { [ "$(lines)" -ge $((n0 + 3)) ]; }
wait_for 60 more_rounds || fail "rounds stopped while 100 idle clients were connected (metrics.jsonl: $n0 -> $(lines))"
kill $ipid 2>/dev/null; wait $ipid 2>/dev/null
wait_for 30 curl -sf --max-time 2 "$M" || fail "the endpoint did not answer again after the idle clients"

# A real Prometheus scrapes it; its API gives round and MRR.
cat > prom.yml <<YML
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: tma
    static_configs: [{targets: ["127.0.0.1:$MPORT"]}]
YML
prometheus --config.file=prom.yml --storage.tsdb.path=tsdb --web.listen-address="127.0.0.1:$PPORT" \
  > prometheus.log 2>&1 &
ppid=$!
track $ppid
# query EXPR [TIME]: the first result's value, or nothing.
query() {
  curl -sf --max-time 5 "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1" \
    ${2:+--data-urlencode "time=$2"} |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}
scraped() { local v; v=$(query 'tma_round{job="tma"}'); [ -n "$v" ] && [ "${v%.*}" -ge 3 ]; }
wait_for 90 scraped || { tail -n 20 prometheus.log >&2; fail "Prometheus has no tma_round >= 3"; }
[ "$(query 'up{job="tma"}')" = 1 ] || fail "Prometheus says the target is down"
at=$(python3 -c 'import time; print(time.time())')
vround=$(query tma_validation_round "$at")
vmrr=$(query tma_validation_mrr "$at")
[ -n "$vround" ] && [ -n "$vmrr" ] || fail "Prometheus has no validation MRR (round '$vround', MRR '$vmrr')"
has_line() { python3 -c 'import json,sys; sys.exit(not any(json.loads(l)["round"] == int(float(sys.argv[2])) for l in open(sys.argv[1])))' run/metrics.jsonl "$vround"; }
wait_for 30 has_line || fail "metrics.jsonl has no line for round $vround"
python3 - run/metrics.jsonl "$vround" "$vmrr" <<'PY' || fail "Prometheus's validation MRR is not metrics.jsonl's"
import json, sys
t, v = int(float(sys.argv[2])), float(sys.argv[3])
line = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["round"] == t][0]
if abs(line["val_mrr"] - v) > 1e-9:
    sys.exit("round %d: Prometheus %r, metrics.jsonl %r" % (t, v, line["val_mrr"]))
PY
r=$(query 'max_over_time(tma_round{job="tma"}[1m])')
[ -n "$r" ] && [ "${r%.*}" -ge 3 ] || fail "no round series in Prometheus ($r)"
# TmaNoRound's bound exists in step mode, and its condition is false while rounds come.
[ -n "$(query '3 * (tma_aggregation_interval_seconds{job="tma"} or tma_round_duration_seconds{job="tma"})')" ] ||
  fail "Prometheus has no round time for TmaNoRound in step mode"
no_round=$(python3 - rules.yml <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"alert: TmaNoRound\n\s*#[^\n]*\n\s*#[^\n]*\n\s*expr: >\n((?:\s{10}.*\n)+)", text)
print(" ".join(m.group(1).split()))
PY
) || fail "no TmaNoRound expression in the rules"
[ -z "$(query "$no_round")" ] || fail "TmaNoRound fires while rounds come: $no_round"
kill -TERM $ppid
wait_exit $ppid 30 >/dev/null; [ $? -ne 124 ] || fail "prometheus did not stop"

# The job ends: the endpoint goes with it.
kill -TERM $lpid
wait_exit $lpid 60; rc=$?
[ "$rc" -eq 143 ] || { cat out.txt >&2; fail "tma launch stopped by SIGTERM exited $rc, not 143"; }
! curl -s -o /dev/null --max-time 3 "$M" || fail "the endpoint is still up after the job ended"
exit 0
