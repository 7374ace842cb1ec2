#!/bin/bash
# test_fault_budget.sh (issue 13, item 2): the training budget is training
# time elapsed, also when rounds run late.  One worker sleeps 3 s after each
# step, so every round waits for it (rounds take longer than the 0.5 s
# interval); the coordinator is killed after round 1 and restarted (a
# takeover).  The job must stop at or right after its 6 s budget: the round
# that reaches the budget is the last, so training ends within one round (at
# most the round deadline) of it, not after every scheduled round has run late.
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 1
budget=6 slow=3 deadline=4
TRAIN=$budget INTERVAL=0.5 write_job j.json bu \
  '"fault": {"lease_ttl": 3, "round_deadline": '$deadline', "start_timeout": 20}'
start_coordinator c1.log --config j.json --run-dir run
first=$COORD_PID
for i in 0 1; do start_worker w$i.log --job bu --name w$i; done
TMA_FAULT=delay_step=$slow start_worker w2.log --job bu --name w2
logs=(c1.log c2.log w0.log w1.log w2.log)
wait_round run 1 || { dump_logs "${logs[@]}"; fail "no round 1"; }
kill -KILL "$first"
wait_exit "$first" 10 >/dev/null
start_coordinator c2.log --job bu
wait_for 30 grep -q "took over job bu at round" c2.log || { dump_logs c2.log; fail "the restarted coordinator did not take over"; }
# The rest of the budget and one slow round, with room for a loaded machine.
wait_exit "$COORD_PID" $((budget + deadline + 30)) >/dev/null
[ $? -ne 124 ] || { dump_logs "${logs[@]}"; fail "the job ran far past its budget after the takeover"; }
finish_job "${logs[@]}"
check_run run >/dev/null || { dump_logs "${logs[@]}"; fail "run folder invalid"; }
python3 - run $budget $deadline <<'PY' || { dump_logs c2.log; fail "the training budget was overrun"; }
import json, sys
run, budget, deadline = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
res = json.load(open(run + "/result.json"))
R = [json.loads(l) for l in open(run + "/metrics.jsonl") if l.strip()]
# The round that reaches the budget is the last; a round lasts at most its deadline.
limit = budget + deadline + 1.5
if res["stopped"] != "time" or res["train_seconds"] > limit:
    sys.exit("train_seconds %.1f (stopped: %s) for a %.0f s budget; at most %.1f expected; rounds at %s" % (
        res["train_seconds"], res["stopped"], budget, limit, [round(r["time"], 1) for r in R]))
if R[-1]["time"] < budget:
    sys.exit("the last round (%d) came at %.1f s, before the end of the %.0f s budget" % (R[-1]["round"], R[-1]["time"], budget))
PY
echo "budget ${budget}s with rounds running late and a takeover: trained $(json run/result.json 'd["train_seconds"]') s"
