# transport_lib.sh: what bench_transport.sh and bench_transport_cpu.sh share
# (sourced, not run).
#
# perftest_pair SIZE ITERS MODE: one `ucx_perftest -t tag_bw` run, a server
# and a client with -E MODE (poll or sleep), the client retried while the
# server is not listening yet and the whole pair again on another random
# port when the server died (a port in use).  The caller sets:
#   tmp                a scratch folder (pf.srv, pf.out, pf.err are written there)
#   rx_host            the address the client connects to
#   pf_srv, pf_cli     arrays: the commands each side runs through, e.g.
#                      (env LD_PRELOAD=X) or (/usr/bin/time -o F); may be empty
# and may define rx / tx (run a command on the receiving / sending side; by
# default as it is).  Prints the client's final MiB/s, or nothing when five
# pairs failed; the client's stderr is left in $tmp/pf.err.
declare -F rx >/dev/null || rx() { "$@"; }
declare -F tx >/dev/null || tx() { "$@"; }
perftest_pair() {
  local s=$1 n=$2 mode=$3 port pid out
  for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 20000))
    rx "${pf_srv[@]}" ucx_perftest -p "$port" -E "$mode" >"$tmp/pf.srv" 2>&1 &
    pid=$!
    out=""
    for _ in $(seq 50); do
      tx "${pf_cli[@]}" ucx_perftest "$rx_host" -p "$port" -t tag_bw -s "$s" -n "$n" -w 2 -E "$mode" \
        >"$tmp/pf.out" 2>"$tmp/pf.err"
      out=$(awk '/^Final:/{print $7}' "$tmp/pf.out")
      [ -n "$out" ] && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    # A server that served its client ends by itself (and has written
    # whatever its wrapper writes at exit); one that did not is ended.
    [ -n "$out" ] || kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    [ -n "$out" ] && { echo "$out"; return; }
  done
}
