#!/bin/bash
# harness.sh: automake's LOG_COMPILER for every tma test.
#
# Runs one test in a session of its own with a time limit.  When the test ends
# (or is killed at the limit) every process still in that session is listed,
# killed, and the test fails: a test must end every process it starts.
# Exit codes pass through (0 pass, 77 skip, 99 hard error, other fail).
set -u
limit=${TMA_TEST_TIMEOUT:-600}
export TMA_DATASETS="${TMA_DATASETS:-/work/shared/datasets}"
export TMA_ETCD="${TMA_ETCD:-/usr/bin/etcd}"
export TMA_ETCDCTL="${TMA_ETCDCTL:-/usr/bin/etcdctl}"
export TMA_TORCH_PYTHON="${TMA_TORCH_PYTHON:-/usr/bin/python3}"
export TMA_GNUPLOT="${TMA_GNUPLOT:-/usr/bin/gnuplot}"
export TMA_VALGRIND="${TMA_VALGRIND_BIN:-/usr/bin/valgrind}"
export TMA_BUILDDIR="${TMA_BUILDDIR:-/work/wt/graph/_asan}"
export TMA_SRCDIR="${TMA_SRCDIR:-/work/wt/graph/_asan/..}"
export TMA_BIN="${TMA_BIN:-$TMA_BUILDDIR/tma}"
export TMA_LOG_LEVEL="${TMA_LOG_LEVEL:-info}"

case "$1" in
  *.sh) set -- bash "$@" ;;
  *.py) set -- "${TMA_TORCH_PYTHON:-python3}" "$@" ;;
esac

# In a non-interactive shell a background job is not a process-group leader,
# so setsid execs in place and the job's pid is the new session's id.
setsid "$@" &
sid=$!
start=$SECONDS
timed_out=0
while kill -0 "$sid" 2>/dev/null; do
  if (( SECONDS - start >= limit )); then
    echo "harness: $* ran past its limit of ${limit}s; killing it" >&2
    kill -KILL "$sid" 2>/dev/null
    timed_out=1
    break
  fi
  # A zombie counts as ended: reap it through wait below.
  state=$(ps -o stat= -p "$sid" 2>/dev/null)
  case "$state" in Z*) break ;; esac
  sleep 0.2
done
wait "$sid"
rc=$?
(( timed_out )) && rc=1

# Anything left in the session is a leak.
leftover=$(ps -e -o pid=,sid=,args= | awk -v s="$sid" '$2 == s && $1 != s {print}')
if [ -n "$leftover" ]; then
  echo "harness: the test left processes behind (killing them):" >&2
  echo "$leftover" >&2
  echo "$leftover" | awk '{print $1}' | xargs -r kill -KILL 2>/dev/null
  [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] && rc=1
fi
exit "$rc"
