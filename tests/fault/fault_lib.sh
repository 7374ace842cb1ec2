# fault_lib.sh: scaffolding for the failure-injection suite (sourced; it
# sources tests/coordinator/dist_lib.sh, and so tests/lib.sh).  Jobs are short,
# time-based rounds on cora with a small model, so faults land in the middle of
# training.
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"

# fault_setup [MEMBERS [SHARDS]]: the start of a fault test, in its
# temporary folder: an etcd cluster of MEMBERS (default 1) and fault_graph.
fault_setup() {
  cd "$TMP_ROOT" || hard "cd $TMP_ROOT"
  etcd_start "${1:-1}"
  fault_graph "${2:-3}"
}

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

# step_job FILE NAME 'EXTRA' : a step-mode job (aggregation.interval_steps
# STEPS, default 15; duration.rounds ROUNDS, default 8; VARIANT, default
# randomtma; ggs has no partition; EVAL: more members of the eval section),
# the model and data of write_job.  Step mode does not depend on
# timing: a run with a fault is compared with an undisturbed one.
step_job() {
  local file=$1 name=$2 extra=${3:-}
  cat > "$file" <<JSON
{"job": "$name", "graph": "g.tmag", $(if [ "${VARIANT:-randomtma}" != ggs ]; then echo '"partition": {"dir": "part"},'; fi)
 "workers": ${WORKERS:-3}, "variant": "${VARIANT:-randomtma}", "aggregation": {"interval_steps": ${STEPS:-15}},
 "duration": {"rounds": ${ROUNDS:-8}}, "model": {"hidden": 32, "decoder_hidden": 32},
 "train": {"batch_size": 128, "threads": 1}, "eval": {"threads": 1${EVAL:+, $EVAL}}${extra:+, $extra}}
JSON
}

# same_model RUN_A RUN_B TOL: both runs reached the same last round, and
# the test MRRs of their final models (the last round's checkpoint: the best
# round depends on which rounds the evaluator had time for) differ by at
# most TOL.
same_model() {
  local run mrr=() last=() ck
  for run in "$1" "$2"; do
    ck=$(ls "$run"/checkpoint-r*-e*.tmaw | sort | tail -n 1)
    last+=("$(checkpoint_round "$ck")")
    "$TMA" eval g.tmag "$ck" --split test --json --threads 1 > "$run/.final-eval.json" || return 1
    mrr+=("$(json "$run/.final-eval.json" 'd["mrr"]')")
  done
  echo "$1: round ${last[0]}, final test MRR ${mrr[0]}; $2: round ${last[1]}, final test MRR ${mrr[1]}"
  [ "${last[0]}" = "${last[1]}" ] || return 1
  python3 -c "import sys; sys.exit(0 if abs(${mrr[0]} - ${mrr[1]}) <= $3 else 1)"
}

# start_undisturbed JOB.json JOB [ARGS...]: the reference run of a pair
# (u-c.log, u-w0..2.log, run folder u-run; ARGS for its coordinator),
# started beside the faulted one (f-*).
start_undisturbed() {
  start_coordinator u-c.log --config "$1" --run-dir u-run "${@:3}"
  UNDISTURBED=$COORD_PID
  local i
  for i in 0 1 2; do start_worker u-w$i.log --job "$2" --name u$i; done
}

# step_pair P 'FAULT' LOG [ARGS...]: the two jobs of a step-mode pair, Pu
# (undisturbed, started with its workers; UNDISTURBED_ARGS for its
# coordinator) and Pf (u.json, f.json: step_job with the job config members
# FAULT); starts Pf's coordinator (log LOG, run folder f-run, ARGS; TMA_FAULT
# as the caller's environment has it) and sets FIRST to its pid.  The
# caller starts Pf's workers (f-w0..2.log), as its fault needs them.
step_pair() {
  local p=$1 fault=$2 log=$3; shift 3
  step_job u.json "${p}u" "$fault"
  step_job f.json "${p}f" "$fault"
  # shellcheck disable=SC2086
  TMA_FAULT= start_undisturbed u.json "${p}u" ${UNDISTURBED_ARGS:-}
  start_coordinator "$log" --config f.json --run-dir f-run "$@"
  FIRST=$COORD_PID
}

# faulted_workers P: the three workers of a pair's job Pf (f-w0..2.log,
# names f0..f2), each with TMA_FAULT=$WORKER_FAULT (none by default).
faulted_workers() {
  local i
  for i in 0 1 2; do TMA_FAULT=${WORKER_FAULT:-} start_worker f-w$i.log --job "${1}f" --name f$i; done
}

# faulted_with_backup P FAULT1: the faulted job's workers f0..f2 and a
# backup fb (f-w0..2.log, f-backup.log), each sleeping 20 ms after a step
# (the model does not change) so rounds last long enough for a loss to be
# confirmed mid-job; f1 also gets TMA_FAULT item FAULT1.
faulted_with_backup() {
  local d=delay_step=0.02
  TMA_FAULT=$d start_worker f-w0.log --job "${1}f" --name f0
  TMA_FAULT=$d,$2 start_worker f-w1.log --job "${1}f" --name f1
  TMA_FAULT=$d start_worker f-w2.log --job "${1}f" --name f2
  TMA_FAULT=$d start_worker f-backup.log --job "${1}f" --name fb --backup
}

# restart_faulted JOB: once every faulted worker (f-w0..2.log) saw its
# coordinator go, starts `tma coordinator --job JOB` (f-c2.log); then
# finish_pair.
restart_faulted() {
  local i
  for i in 0 1 2; do
    wait_for 30 grep -qE "connection to the coordinator ended|sending to the coordinator failed" f-w$i.log ||
      { dump_logs f-w$i.log; fail "worker f$i did not see the coordinator go"; }
  done
  start_coordinator f-c2.log --job "$1"
  finish_pair "$COORD_PID"
}

# finish_pair PID: both runs of the pair finish (the faulted one under the
# coordinator PID, logging to f-c2.log) and their run folders are valid.
finish_pair() {
  local second=$1 faulted=("${WORKER_PIDS[@]:3}")
  COORD_PID=$UNDISTURBED
  WORKER_PIDS=("${WORKER_PIDS[@]:0:3}")
  finish_job u-c.log u-w0.log
  COORD_PID=$second
  WORKER_PIDS=("${faulted[@]}")
  finish_job f-c2.log f-w0.log f-w1.log f-w2.log
  check_run u-run >/dev/null || fail "the undisturbed run folder is invalid"
  check_run f-run >/dev/null || { dump_logs f-c2.log; fail "the faulted run folder is invalid"; }
}

# lost_message_pair P DROP: a step-mode pair evaluated on the ranks
# (eval.where "workers", eval.rank_timeout 120 s; 8 rounds), the faulted
# job's worker f1 with TMA_FAULT drop=DROP (logs f-c1.log at debug level,
# f-w0..2.log); both jobs run to their end.
lost_message_pair() {
  export ROUNDS=8
  export EVAL='"where": "workers", "rank_timeout": 120'
  TMA_LOG_LEVEL=debug step_pair "$1" '"fault": {"lease_ttl": 3, "round_deadline": 30, "start_timeout": 20}' f-c1.log
  TMA_FAULT=delay_step=0.02 start_worker f-w0.log --job "${1}f" --name f0
  TMA_FAULT=delay_step=0.02,drop=$2 start_worker f-w1.log --job "${1}f" --name f1
  TMA_FAULT=delay_step=0.02 start_worker f-w2.log --job "${1}f" --name f2
  finish_pair "$FIRST"
}

# lost_message_ok: after lost_message_pair, no evaluation of the faulted
# run failed, every round was recorded, and its final model is the
# undisturbed run's.
lost_message_ok() {
  rounds_check f-run "len(R) == $ROUNDS + 1 and not [r for r in R if 'eval_reason' in r] and R[-1]['eval'] == 'ok'" \
    "an evaluation failed, or not every round was recorded" || { dump_logs f-c1.log; fail "evaluations"; }
  same_model u-run f-run 0.03 || fail "the final model of the faulted run is far from the undisturbed one's"
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

# netns_cut_job JOB: job JOB of j.json (run folder run) across the namespaces
# of netns_start: its coordinator and workers w0 and w1 in role m's, the
# worker "cut" in role p's (logs coord.log, w0.log, w1.log and cut.log; the
# coordinator and the cut worker give etcd 2 s).  Sets COORD_PID and CUT_PID.
netns_cut_job() {
  local job=$1 w
  bg_ns m "$TMA" coordinator --etcd "$ETCD_ENDPOINTS" --config j.json --run-dir run --etcd-timeout 2 >coord.log 2>&1
  COORD_PID=$!; track $COORD_PID
  for w in 0 1; do
    bg_ns m "$TMA" worker --etcd "$ETCD_ENDPOINTS" --job "$job" --name w$w --threads 1 >w$w.log 2>&1
    WORKER_PIDS+=($!); track $!
  done
  bg_ns p "$TMA" worker --etcd "$ETCD_ENDPOINTS" --job "$job" --name cut --threads 1 --etcd-timeout 2 >cut.log 2>&1
  CUT_PID=$!; WORKER_PIDS+=($CUT_PID); track $CUT_PID
}
