#!/bin/bash
# test_job_bad_config.sh: a bad job config is refused before anything starts
# (no etcd, no coordinator, no workers), with an error naming what is wrong;
# a worker pointed at a job that does not exist gives up with a clear error.
source "$TMA_SRCDIR/tests/coordinator/dist_lib.sh"
cd "$TMP_ROOT"
make_graph g.tmag
"$TMA" partition g.tmag --scheme random --shards 3 -o part3 >/dev/null || fail "partition"
"$TMA" gen sbm -o other.tmag --nodes 3000 --feat-dim 32 --seed 4 >/dev/null || fail "gen sbm"
"$TMA" partition other.tmag --scheme random --shards 3 -o other-part >/dev/null || fail "partition other.tmag"

# case NAME 'JSON' 'expected stderr fragment'
n=0
case_() {
  n=$((n + 1))
  printf '%s\n' "$2" > "bad-$n.json"
  local err=$TMP_ROOT/err-$n rc
  "$TMA" launch "bad-$n.json" -o "run-$n" >/dev/null 2>"$err"; rc=$?
  [ "$rc" -eq 2 ] || { cat "$err" >&2; fail "$1: tma launch exited $rc, not 2 (a bad config)"; }
  grep -qE -- "$3" "$err" || { cat "$err" >&2; fail "$1: the error does not say /$3/"; }
  [ ! -e "run-$n/logs/etcd.log" ] && [ ! -e "run-$n/logs/coordinator.log" ] ||
    fail "$1: something was started before the config was refused"
  # The coordinator refuses it too, before it talks to etcd (none runs here).
  "$TMA" coordinator --etcd http://127.0.0.1:9 --config "bad-$n.json" >/dev/null 2>"$err.c"; rc=$?
  [ "$rc" -eq 2 ] || { cat "$err.c" >&2; fail "$1: tma coordinator exited $rc, not 2 (a bad config)"; }
  grep -qE -- "$3" "$err.c" || { cat "$err.c" >&2; fail "$1: tma coordinator's error does not say /$3/"; }
}
case_ "unknown variant" '{"graph": "g.tmag", "partition": {"dir": "part3"}, "variant": "fedavg"}' '"variant" = "fedavg"'
case_ "negative interval" '{"graph": "g.tmag", "partition": {"dir": "part3"}, "aggregation": {"interval_seconds": -5}}' 'interval_seconds'
case_ "missing partition" '{"graph": "g.tmag", "partition": {"dir": "nowhere"}}' 'nowhere.*(partition.json|cannot open)'
case_ "more trainers than shards" '{"graph": "g.tmag", "partition": {"dir": "part3"}, "workers": 4}' 'more trainers than shards|less than workers'
case_ "partition of another graph" '{"graph": "g.tmag", "partition": {"dir": "other-part"}}' 'another graph'
case_ "scheme that does not fit" '{"graph": "g.tmag", "variant": "psgd-pa", "partition": {"dir": "part3"}}' 'does not fit variant psgd-pa'
case_ "unknown key" '{"graph": "g.tmag", "partition": {"dir": "part3"}, "aggregaton": {}}' 'unknown key "aggregaton"'
# A graph that is not there is a missing input: exit 1, as in every command
# that reads one (tma train, eval, partition, info), before anything starts.
printf '%s\n' '{"graph": "nope.tmag"}' > nograph.json
expect_fail 1 'nope.tmag' -- "$TMA" launch nograph.json -o run-nograph
[ ! -e run-nograph ] || fail "missing graph: tma launch made its run folder"
expect_fail 1 'nope.tmag' -- "$TMA" coordinator --etcd http://127.0.0.1:9 --config nograph.json
case_ "bad model key" '{"graph": "g.tmag", "partition": {"dir": "part3"}, "model": {"hidden": 0}}' 'hidden'
case_ "not JSON" '{"graph": "g.tmag",' 'invalid JSON'
case_ "ranks without shards" '{"graph": "g.tmag", "variant": "ggs", "eval": {"where": "workers"}}' 'eval.where "workers" needs shards.*ggs'
case_ "unknown eval place" '{"graph": "g.tmag", "partition": {"dir": "part3"}, "eval": {"where": "everywhere"}}' 'eval.where: "everywhere" is not a place'
case_ "negative rank cache" '{"graph": "g.tmag", "partition": {"dir": "part3"}, "eval": {"rank_cache_mb": -1}}' 'rank_cache_mb'
case_ "unknown table type" '{"graph": "g.tmag", "partition": {"dir": "part3"}, "eval": {"table_dtype": "f16"}}' 'table_dtype: "f16" is not a table type'
case_ "unknown clusterer" '{"graph": "g.tmag", "variant": "supertma", "partition": {"clusterer": "kmeans"}}' 'partition.clusterer = "kmeans" is not metis, lp or auto'
case_ "clusterer for random" '{"graph": "g.tmag", "partition": {"dir": "part3", "clusterer": "lp"}}' 'randomtma.*uses no clusterer'

# A worker for a job nobody started gives up after --wait with a clear error.
etcd_start 1
"$TMA" worker --etcd "$ETCD_ENDPOINTS" --job ghost --wait 1 2>err-w; rc=$?
[ "$rc" -eq 1 ] || fail "worker for a missing job exited $rc"
grep -q "no config in etcd" err-w || { cat err-w >&2; fail "worker's error"; }
# Usage errors are exit 2 and name the flag.
expect_fail 2 "--threads" -- "$TMA" worker --etcd "$ETCD_ENDPOINTS" --job x --threads many
expect_fail 2 "--job" -- "$TMA" worker --etcd "$ETCD_ENDPOINTS"
expect_fail 2 "--etcd" -- "$TMA" coordinator --job x
expect_fail 2 "unknown option" -- "$TMA" launch bad-1.json --bogus
echo "$n bad configs refused before anything started"
