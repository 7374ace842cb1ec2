# dist_lib.sh: helpers for the distributed-job tests (sourced; it sources tests/lib.sh).
# Every process started here is tracked, so the EXIT trap of lib.sh ends it.
source "$TMA_SRCDIR/tests/lib.sh"

export UCX_TLS=${UCX_TLS:-tcp}
export OMP_WAIT_POLICY=PASSIVE
TMA=${TMA_BIN:?}

# make_graph OUT: cora (tests/data/cora) with 32-dimensional projected features (fast, real).
make_graph() {
  "$TMA" import "$TMA_FIXTURES/cora" -o "$1" --feat-dim 32 >/dev/null || fail "tma import cora"
}

# The roles of these helpers wait up to 30 s for etcd at start (--etcd-wait),
# as a supervisor's would: test_fault_chaos.sh starts roles while the whole
# etcd cluster is down (without it they exit 1 after 2 s).
# start_coordinator LOG ARGS...: runs tma coordinator in the background; sets COORD_PID.
start_coordinator() {
  local log=$1; shift
  "$TMA" coordinator --etcd "$ETCD_ENDPOINTS" --etcd-wait 30 "$@" >>"$log" 2>&1 &
  COORD_PID=$!
  track "$COORD_PID"
}

# start_worker LOG ARGS...: runs tma worker in the background; appends to WORKER_PIDS.
WORKER_PIDS=()
start_worker() {
  local log=$1; shift
  "$TMA" worker --etcd "$ETCD_ENDPOINTS" --etcd-wait 30 --threads 1 "$@" >>"$log" 2>&1 &
  WORKER_PIDS+=($!)
  track "$!"
}

# start_job CONFIG JOB [PREFIX [N]]: the coordinator of CONFIG (log
# PREFIXcoord.log, run folder PREFIXrun) and N workers (default 3) of job JOB,
# named w0.. (logs PREFIXw0.log..).  Sets COORD_PID; appends to WORKER_PIDS.
start_job() {
  local config=$1 job=$2 p=${3:-} n=${4:-3} i
  start_coordinator "${p}coord.log" --config "$config" --run-dir "${p}run"
  for ((i = 0; i < n; i++)); do start_worker "${p}w$i.log" --job "$job" --name "w$i"; done
}

# need_unshare: skips the test (77) unless private mount namespaces can be
# made here (`unshare -m`: util-linux, and root).
need_unshare() {
  command -v unshare >/dev/null 2>&1 || skip "unshare is missing (Debian package util-linux)"
  unshare -m --propagation private true 2>/dev/null || skip "unshare -m needs root (CAP_SYS_ADMIN)"
}

# start_worker_ns LOG DIR ARGS...: a worker (as start_worker) in a private
# mount namespace in which $TMP_ROOT/DIR is bind-mounted over the partition
# folder $TMP_ROOT/part: a node that holds only what DIR holds.
start_worker_ns() {
  local log=$1 dir=$2; shift 2
  unshare -m --propagation private sh -c 'd=$1; p=$2; shift 2; mount --bind "$d" "$p" && exec "$@"' sh \
    "$TMP_ROOT/$dir" "$TMP_ROOT/part" "$TMA" worker --etcd "$ETCD_ENDPOINTS" --threads 1 "$@" >>"$log" 2>&1 &
  WORKER_PIDS+=($!)
  track "$!"
}

# job_members JOB N: the job has N registered members.
job_members() {
  [ "$(etcdctl get --prefix "/tma/$1/members/" --keys-only | grep -c members/)" -eq "$2" ]
}

# wait_exit PID SECONDS: waits for PID to end; returns its exit code (124 on timeout).
wait_exit() {
  local pid=$1 end=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    if (( SECONDS >= end )); then return 124; fi
    sleep 0.1
  done
  wait "$pid"
}

# dump_logs FILES...: shows the end of each log (for a failing test).
dump_logs() {
  local f
  for f in "$@"; do echo "---- $f" >&2; tail -n 30 "$f" >&2; done
}

# job_done NAME LOG...: the job NAME (run folder NAME-run) finishes: its coordinator
# within 120 s, then each worker within 30 s, and the run folder is valid (check_run);
# otherwise the ends of the LOGs and a failure.
job_done() {
  local name=$1 p; shift
  wait_exit "$COORD_PID" 120 || { dump_logs "$@"; fail "job $name did not finish"; }
  for p in "${WORKER_PIDS[@]}"; do wait_exit "$p" 30 || fail "job $name: a worker did not stop"; done
  check_run "$name-run" >/dev/null || { dump_logs "$@"; fail "job $name: run folder invalid"; }
}

# check_run RUN: metrics.jsonl has rounds 0..R, each once, in order; result.json
# and best.tmaw are there and valid.  Prints R.
check_run() {
  "${TMA_TORCH_PYTHON:-python3}" - "$1" <<'PY' || return 1
import json, math, os, sys
run = sys.argv[1]
rounds = [json.loads(l)["round"] for l in open(os.path.join(run, "metrics.jsonl")) if l.strip()]
if rounds != list(range(len(rounds))):
    sys.exit("metrics.jsonl rounds are not 0..R once each: %s" % rounds)
res = json.load(open(os.path.join(run, "result.json")))
for k in ("test_mrr", "best_val_mrr", "best_round", "convergence_seconds", "train_seconds", "variant"):
    if k not in res:
        sys.exit("result.json lacks " + k)
if res["test_mrr"] is None or not (0 < res["test_mrr"] <= 1):
    sys.exit("test_mrr is %r" % res["test_mrr"])
if not os.path.getsize(os.path.join(run, "best.tmaw")):
    sys.exit("best.tmaw is empty")
print(rounds[-1])
PY
  # The best checkpoint is the best round's model: evaluating it again gives
  # the recorded validation MRR.
  # Same thread count as the coordinator's evaluator: sums in the same order.
  local graph threads
  graph=$(json "$1/config.json" 'd["graph"]') || return 1
  threads=$(json "$1/config.json" 'd["eval"]["threads"]') || return 1
  [ "$threads" -gt 0 ] 2>/dev/null || threads=$(nproc)
  "$TMA" eval "$graph" "$1/best.tmaw" --split val --json --threads "$threads" > "$1/.check-eval.json" || return 1
  python3 - "$1" <<'PY' || return 1
import json, sys
run = sys.argv[1]
ev = json.load(open(run + "/.check-eval.json"))
res = json.load(open(run + "/result.json"))
if ev["round"] != res["best_round"] or abs(ev["mrr"] - res["best_val_mrr"]) > 2e-3:  # BLAS thread counts reorder sums: ties may move
    sys.exit("best.tmaw is round %s with validation MRR %s; result.json says round %s, %s" % (
        ev["round"], ev["mrr"], res["best_round"], res["best_val_mrr"]))
PY
}

# netns_setup PREFIX BRIDGE NET ROLE...: a network namespace PREFIX+ROLE per
# role, each joined to BRIDGE by a veth pair (inside: "v" PREFIX ROLE, on the
# bridge: "p" PREFIX ROLE) with address NET.i (i = 1, 2, ... in role order).
# Sets netns_cleanup as the EXIT trap: it ends every process in the
# namespaces, removes them and the bridge, then runs _tma_cleanup.
# in_ns ROLE CMD... runs in the foreground in ROLE's namespace, bg_ns in the
# background (`ip netns exec` also gives the process its namespace's /sys,
# where UCX lists devices).
netns_setup() {
  _ns_prefix=$1; _ns_br=$2; local net=$3; shift 3; _ns_roles=("$@")
  trap netns_cleanup EXIT
  ip link add "$_ns_br" type bridge || hard "cannot make a bridge"
  ip link set "$_ns_br" up
  local i=1 r ns
  for r in "${_ns_roles[@]}"; do
    ns="$_ns_prefix$r"
    ip netns add "$ns" || hard "ip netns add $ns"
    ip link add "v$ns" type veth peer name "p$ns" || hard "veth"
    ip link set "v$ns" netns "$ns"
    ip link set "p$ns" master "$_ns_br" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$net.$i/24" dev "v$ns"
    ip -n "$ns" link set "v$ns" up
    i=$((i + 1))
  done
}
netns_cleanup() {
  local p r
  for p in "${_tma_pids[@]:-}"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null; done
  # `ip netns exec` may fork: end whatever still runs inside each namespace.
  for r in "${_ns_roles[@]}"; do ip netns pids "$_ns_prefix$r" 2>/dev/null | xargs -r kill -KILL 2>/dev/null; done
  wait 2>/dev/null
  for r in "${_ns_roles[@]}"; do ip netns del "$_ns_prefix$r" 2>/dev/null; done
  ip link del "$_ns_br" 2>/dev/null
  _tma_cleanup
}
in_ns() { local r=$1; shift; ip netns exec "$_ns_prefix$r" "$@"; }
# netns_etcd ROLE IP FROM: a one-member etcd in ROLE's namespace on IP (data
# in ./etcd-data, log in ./etcd.log), healthy as seen from role FROM's
# namespace; sets ETCD_ENDPOINTS.
netns_etcd() {
  local role=$1 ip=$2 from=$3
  ETCD_ENDPOINTS="http://$ip:2379"
  bg_ns "$role" "$TMA_ETCD" --name m0 --data-dir etcd-data --listen-client-urls "$ETCD_ENDPOINTS" \
    --advertise-client-urls "$ETCD_ENDPOINTS" --listen-peer-urls "http://$ip:2380" \
    --initial-advertise-peer-urls "http://$ip:2380" --initial-cluster "m0=http://$ip:2380" \
    --logger zap --log-level warn >etcd.log 2>&1
  track $!
  wait_for 30 in_ns "$from" "$TMA_ETCDCTL" --endpoints "$ETCD_ENDPOINTS" --dial-timeout 1s endpoint health ||
    { cat etcd.log >&2; hard "etcd cannot be reached from another namespace"; }
}
bg_ns() { local r=$1; shift; ( exec ip netns exec "$_ns_prefix$r" "$@" ) & }
# The bridge side of ROLE's link (set it down to cut ROLE off).
netns_link() { echo "p$_ns_prefix$1"; }
# netns_start TAG ROLES...: skips (77) where network namespaces cannot be made
# (no root, no iproute2); else netns_setup for ROLES, with namespaces
# tma<TAG><n><role> on the bridge tma<TAG>b<n> (n from the test's pid) and a
# subnet of their own, NET (10.a.b: the k-th role has the address NET.k).
netns_start() {
  local tag=$1 sfx=$(( $$ % 100000 )); shift
  need ip iproute2
  ip netns add "tma${tag}probe$sfx" 2>/dev/null || skip "network namespaces cannot be made here (needs root)"
  ip netns del "tma${tag}probe$sfx"
  NET="10.$(( (sfx % 200) + 20 )).$(( (sfx / 200) % 250 ))"
  netns_setup "tma$tag$sfx" "tma${tag}b$sfx" "$NET" "$@"
}
