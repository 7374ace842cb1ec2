#!/bin/bash
# test_launch_resume.sh: tma launch --resume RUN continues a launched job
# that was interrupted (SIGINT: the launcher stops its roles in order) or
# killed (SIGKILL of the launcher: its roles die with it) mid-run, from its
# last committed round, into the same run folder: in step mode the resumed
# job ends with the final weights of an uninterrupted launch of the same
# seed, byte for byte (each worker continues the optimizer state its shard
# set saved), and metrics.jsonl has every round once, as has TensorBoard's
# view of the run's event files.  A finished run, a
# folder without a launched run or without its etcd, a config of another
# job (or of the same job with another model) and flags that would change
# the job are refused with exit 2, naming what is wrong.
source "$TMA_SRCDIR/tests/lib.sh"
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
command -v etcd > /dev/null 2>&1 || skip "tma launch starts etcd, which is missing (Debian package etcd-server)"
cd "$TMP_ROOT"
make_graph g.tmag
ROUNDS=16
cat > job.json <<JSON
{"job": "res", "graph": "g.tmag", "workers": 3, "partition": {"shards": 3, "seed": 4},
 "aggregation": {"interval_steps": 4}, "duration": {"rounds": $ROUNDS},
 "model": {"hidden": 32, "decoder_hidden": 32}, "train": {"batch_size": 128, "threads": 1, "seed": 7},
 "eval": {"threads": 1}}
JSON
timeout 300 "$TMA" launch job.json -o ref -q > ref.out 2>&1 || { cat ref.out >&2; fail "the uninterrupted launch"; }
last_checkpoint() { ls "$1"/checkpoint-r*.tmaw | sort | tail -n 1; }
# No process of a launch whose run folder is $1 is left (its roles name the folder).
launch_gone() { ! pgrep -f -- "$TMP_ROOT/$1/" > /dev/null; }

# interrupt SIG RUN: a launch stopped by SIG once round 4 is committed (each
# step slowed by 50 ms: the job is then far from its end).
interrupt() {
  local sig=$1 run=$2 lp rc
  TMA_FAULT=delay_step=0.05 "$TMA" launch job.json -o "$run" > "$run.out" 2>&1 &
  lp=$!
  track $lp
  wait_for 120 grep -q '"round":4,' "$run/metrics.jsonl" || { cat "$run.out" >&2; fail "$run: no round 4"; }
  kill -"$sig" $lp
  wait_exit $lp 60; rc=$?
  [ "$rc" -eq $((128 + $(kill -l "$sig"))) ] || { cat "$run.out" >&2; fail "$run: the launch stopped by $sig exited $rc"; }
  wait_for 30 launch_gone "$run" || fail "$run: processes of the $sig-stopped launch are left: $(pgrep -af -- "$run/")"
  [ -d "$run/etcd/data" ] || fail "$run: the private etcd's data was not kept for --resume"
  [ ! -e "$run/result.json" ] || [ "$(json "$run/result.json" 'd["stopped"]')" = interrupted ] ||
    fail "$run: result.json does not say the run was interrupted"
}

# resume RUN ARGS...: tma launch ARGS... --resume RUN ends the job like the
# uninterrupted one.
resume() {
  local run=$1 t0=$SECONDS
  shift
  timeout 300 "$TMA" launch "$@" --resume "$run" > "$run-2.out" 2>&1 ||
    { cat "$run-2.out" "$run/logs/coordinator.log" >&2; fail "tma launch --resume $run"; }
  local from
  from=$(sed -n 's/.*resuming job res at round \([0-9]*\) .*/\1/p' "$run/logs/coordinator.log")
  [ -n "$from" ] && [ "$from" -ge 4 ] && [ "$from" -lt $ROUNDS ] ||
    { tail -n 20 "$run/logs/coordinator.log" >&2; fail "$run: not resumed mid-run (from round '$from')"; }
  [ "$(grep -c "continuing the optimizer state of round $from " "$run"/logs/worker-*.log | awk -F: '{s += $2} END {print s}')" -eq 3 ] ||
    { grep -h "optimizer state" "$run"/logs/worker-*.log >&2; fail "$run: not every worker continued its optimizer state"; }
  cmp "$(last_checkpoint ref)" "$(last_checkpoint "$run")" ||
    fail "$run: the final weights differ from the uninterrupted launch's"
  python3 - "$run/metrics.jsonl" $ROUNDS <<'PY' || fail "$run: metrics.jsonl does not have every round once"
import json, sys
rounds = [json.loads(l)["round"] for l in open(sys.argv[1])]
if rounds != list(range(int(sys.argv[2]) + 1)):
    sys.exit("rounds %s" % rounds)
PY
  if [ -n "$TB_PY" ]; then
    timeout 120 "$TB_PY" "$TMA_SRCDIR/tests/gnn/tfevents_check.py" "$run" 2 ||
      fail "$run: TensorBoard does not show every round once, with metrics.jsonl's values"
  fi
  check_run "$run" > /dev/null || fail "$run: run folder invalid"
  [ "$(json "$run/result.json" 'd["stopped"]')" = rounds ] || fail "$run: result.json does not say it ran its rounds"
  [ ! -e "$run/etcd" ] || fail "$run: the private etcd's data was kept after the job finished"
  echo "$run: resumed from round $from, $ROUNDS rounds, final weights identical ($((SECONDS - t0)) s)"
}

# TensorBoard's own reader, from the venv ./check makes (as test_tfevents.sh).
TB_PY=${TMA_TB_PYTHON:-$TMA_SRCDIR/.ci/ogb-venv/bin/python}
if ! { [ -x "$TB_PY" ] && timeout 120 "$TB_PY" -c 'import tensorboard' 2> /dev/null; }; then
  echo "# no python with the tensorboard package at $TB_PY (./check makes it): the event files are not read"
  TB_PY=
fi
interrupt INT int
grep -q "tma launch --resume .*int continues it" int.out || { cat int.out >&2; fail "the launch did not say how to resume"; }
cp -r int noetcd
rm -rf noetcd/etcd
resume int
interrupt KILL kill
resume kill job.json # the config given again: the run's own

# Refusals (exit 2), nothing started.
expect_fail 2 "ref finished \(stopped by rounds" -- "$TMA" launch --resume ref
expect_fail 2 "noetcd/etcd/data: missing" -- "$TMA" launch --resume noetcd
mkdir empty
expect_fail 2 "empty/job.json: missing" -- "$TMA" launch --resume empty
expect_fail 2 "drop -o" -- "$TMA" launch --resume noetcd -o x
expect_fail 2 "drop --workers" -- "$TMA" launch --resume noetcd --workers 2
sed 's/"job": "res"/"job": "other"/' job.json > other.json
expect_fail 2 "holds a run of job res, not of job other" -- "$TMA" launch other.json --resume noetcd
sed 's/"hidden": 32/"hidden": 64/' job.json > wider.json
expect_fail 2 "\"model.hidden\" is 32 there, 64 in .*wider.json" -- "$TMA" launch wider.json --resume noetcd
expect_fail 2 "expected the job config job.json \(or --resume RUN\)" -- "$TMA" launch
echo "launch --resume: after SIGINT and SIGKILL, the final weights of an uninterrupted launch; refusals named"
