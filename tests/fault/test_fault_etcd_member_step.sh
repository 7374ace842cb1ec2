#!/bin/bash
# test_fault_etcd_member_step.sh (issue 30, the suite's step-mode and GGS
# rows): an etcd member is SIGKILLed under a running job, once in a
# RandomTMA step-mode job (after round 3) and once in a GGS job (after
# round 3, the member the clients talk to first each time).  The clients
# fail over to the two others and nothing else happens: each job reaches
# the rounds of an undisturbed run of the same seed that shares the same
# cluster, with every worker in every round, and its final test MRR
# (within 0.005 for RandomTMA: member ids may pair with other shards, so the
# average adds the same tensors in another order; GGS: within 0.005 too,
# its steps are synchronous and its batches seeded).
source "$TMA_SRCDIR/tests/fault/fault_lib.sh"
fault_setup 3
FAULT='"fault": {"lease_ttl": 4, "round_deadline": 5, "start_timeout": 20}'

# run_variant VARIANT PREFIX MEMBER: the pair in folder VARIANT; etcd member
# MEMBER killed once the faulted run has round 3.
run_variant() {
  mkdir -p "$1" && cd "$1" || hard "cd $1"
  ln -sf ../g.tmag g.tmag && ln -sfn ../part part
  WORKER_PIDS=()
  VARIANT=$1 step_pair "$2" "$FAULT" f-c.log
  faulted=$FIRST
  WORKER_FAULT=delay_step=0.01 faulted_workers "$2"
  wait_round f-run 3 || { dump_logs f-c.log; fail "$1: no round 3"; }
  etcd_kill "$3"
  finish_pair "$faulted"
  rounds_check f-run "len(R) == $ROUNDS + 1 and all(len(r['workers']) == 3 and r['missed'] == [] for r in R[1:])" \
    "$1: a round lacked a worker" || { dump_logs f-c.log; fail "$1: rounds"; }
  same_model u-run f-run 0.005 || fail "$1: the model of the run that lost an etcd member is not the undisturbed one's"
  cd ..
}

export ROUNDS=8
run_variant randomtma s 0
etcd_restart 0
export STEPS=20
run_variant ggs g 1
echo "an etcd member killed under a step-mode RandomTMA job and a GGS job: both reached the undisturbed models"
