# fault_lib.sh: scaffolding for the failure-injection suite (sourced after
# tests/lib.sh and tests/coordinator/dist_lib.sh).  Jobs are short, time-based
# rounds on cora with a small model, so faults land in the middle of training.

# fault_graph: cora and a random 3-shard partition in the current folder.
fault_graph() {
  make_graph g.tmag
  "$TMA" partition g.tmag --scheme random --shards "${1:-3}" --seed 2 -o part >/dev/null || fail "partition"
}

# write_job FILE NAME 'EXTRA' : a job config; EXTRA is JSON members appended
# to the object (may override keys given earlier: the last one wins in cJSON).
write_job() {
  local file=$1 name=$2 extra=${3:-}
  cat > "$file" <<JSON
{"job": "$name", "graph": "g.tmag", "partition": {"dir": "part"}, "workers": ${WORKERS:-3},
 "aggregation": {"interval_seconds": ${INTERVAL:-1.5}}, "duration": {"train_seconds": ${TRAIN:-20}},
 "model": {"hidden": 32, "decoder_hidden": 32}, "train": {"batch_size": 128, "threads": 1},
 "eval": {"threads": 1}${extra:+, $extra}}
JSON
}

# rounds_json RUN EXPR: evaluates a Python expression over the list of round
# records `R` of RUN/metrics.jsonl; exits non-zero when it is false.
rounds_check() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
R = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if l.strip()]
ok = eval(sys.argv[2])
if not ok:
    sys.stderr.write("round check failed: %s (%s)\n" % (sys.argv[3], sys.argv[2]))
    for r in R:
        sys.stderr.write("  round %d t=%.1f workers=%s missed=%s lost=%s moves=%s\n" % (
            r["round"], r["time"], [w["id"] for w in r["workers"]], r["missed"], r["lost"],
            [(m["shard"], m["from"], m["to"]) for m in r["moves"]]))
    sys.exit(1)
PY
}

# finish_job LOGS...: waits for the coordinator (120 s) and every worker (30 s).
finish_job() {
  wait_exit "$COORD_PID" 120 || { dump_logs "$@"; fail "the coordinator did not finish"; }
  local p
  for p in "${WORKER_PIDS[@]}"; do
    if kill -0 "$p" 2>/dev/null; then
      wait_exit "$p" 30 >/dev/null
      [ $? -ne 124 ] || { dump_logs "$@"; fail "worker $p did not stop after the job ended"; }
    fi
  done
}

# wait_round RUN N: waits until metrics.jsonl has round N (60 s).
wait_round() {
  wait_for 60 python3 -c "
import json, sys
R = [json.loads(l) for l in open('$1/metrics.jsonl') if l.strip()]
sys.exit(0 if R and R[-1]['round'] >= $2 else 1)"
}

# on_put MARK KEY REGEX SIG PID...: in the background, watches the etcd key
# /tma/KEY (etcd's JSON gateway, first endpoint) and, as soon as a value
# matching REGEX is put, sends SIG (KILL, STOP, ...) to each PID (after
# ON_PUT_DELAY seconds, default 0) and creates the file MARK.  A PID given as
# @FILE is read from FILE then (so the watch can start before the process).
# Returns once the watch is in place; exits after acting; tracked, so cleanup
# ends it.
on_put() {
  local mark=$1 key=$2 re=$3 sig=$4; shift 4
  rm -f "$mark" "$mark.ready"
  python3 - "${ETCD_ENDPOINTS%%,*}" "/tma/$key" "$re" "$sig" "$mark" "${ON_PUT_DELAY:-0}" "$@" <<'PY' &
import base64, json, os, re, signal, sys, time, urllib.request
url, key, rx, sig, mark, delay = sys.argv[1:7]
pids = sys.argv[7:]
b64 = lambda s: base64.b64encode(s.encode()).decode()
req = urllib.request.Request(url + "/v3/watch", method="POST",
                             data=json.dumps({"create_request": {"key": b64(key)}}).encode())
with urllib.request.urlopen(req) as resp:
    buf = b""
    while True:
        while b"\n" not in buf:
            try:  # what has arrived (a line iterator would wait for a full buffer)
                chunk = resp.read1(65536)
            except Exception:  # etcd went away
                chunk = b""
            if not chunk:
                sys.exit(1)
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        if not line.strip():
            continue
        res = json.loads(line).get("result", {})
        if res.get("created"):
            open(mark + ".ready", "w").close()
        for ev in res.get("events", []):
            kv = ev.get("kv", {})
            if ev.get("type", "PUT") == "PUT" and re.search(rx, base64.b64decode(kv.get("value", "")).decode()):
                time.sleep(float(delay))
                for p in pids:
                    os.kill(int(open(p[1:]).read()) if p.startswith("@") else int(p), getattr(signal, "SIG" + sig))
                open(mark, "w").close()
                sys.exit(0)
PY
  track $!
  wait_for 20 test -e "$mark.ready" || hard "the watch on /tma/$key did not start"
}

# checkpoint_round FILE: the round a weights file holds (its header).
checkpoint_round() {
  python3 -c "import struct,sys; d=open(sys.argv[1],'rb').read(40); print(struct.unpack('<Q', d[32:40])[0])" "$1"
}

# small_disk SIZE: mounts a tmpfs of SIZE (e.g. 2m) on $TMP_ROOT/disk, a disk
# a test can fill; the EXIT trap ends every process, then unmounts it.
# Returns 1 when no tmpfs can be mounted (not root).
small_disk() {
  mkdir -p "$TMP_ROOT/disk"
  mount -t tmpfs -o size="$1" tmpfs "$TMP_ROOT/disk" 2>/dev/null || return 1
  trap _small_disk_cleanup EXIT
}
_small_disk_cleanup() {
  local p
  for p in "${_tma_pids[@]:-}"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  umount -l "$TMP_ROOT/disk" 2>/dev/null
  _tma_cleanup
}
