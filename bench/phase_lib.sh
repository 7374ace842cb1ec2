# phase_lib.sh: what scale_rmat.sh and eval_ranks.sh share (sourced, not run).
#
# phase NAME CMD...: runs CMD under /usr/bin/time -v (and under prlimit
# --data=PHASE_CAP when PHASE_CAP is set and not 0), its output in
# $W/NAME.out and the timing in $W/NAME.time; samples CMD's RssAnon and
# RssFile from /proc/PID/status every 0.2 s; prints the phase's wall time,
# CPU time, peak RSS (time -v's) and the sampled peaks; exits the script with
# CMD's last lines when CMD fails. The caller sets W (the work folder).
phase() {
  local name=$1; shift
  local pre=() tp child="" a f pa=0 pf=0 i rc=0
  [ "${PHASE_CAP:-0}" = 0 ] || pre=(prlimit --data="$PHASE_CAP")
  /usr/bin/time -v "${pre[@]}" "$@" > "$W/$name.out" 2> "$W/$name.time" &
  tp=$!
  for ((i = 0; i < 100; i++)); do
    child=$(pgrep -P "$tp" | head -1 || true)
    [ -z "$child" ] || break
    sleep 0.05
  done
  while [ -n "$child" ] && [ -r "/proc/$child/status" ]; do
    read -r a f < <(awk '/^RssAnon/ {a = $2} /^RssFile/ {f = $2} END {print a + 0, f + 0}' \
      "/proc/$child/status" 2>/dev/null || echo "0 0")
    [ "$a" -gt "$pa" ] && pa=$a
    [ "$f" -gt "$pf" ] && pf=$f
    sleep 0.2
  done
  wait "$tp" || rc=$?
  [ "$rc" = 0 ] || { echo "$name failed ($rc):"; tail -20 "$W/$name.time"; exit 1; }
  awk -v n="$name" -v pa="$pa" -v pf="$pf" -v cap="${PHASE_CAP:-0}" -F': ' '
    /Elapsed \(wall clock\)/ {wall = $2}
    /User time/ {u = $2} /System time/ {s = $2}
    /Maximum resident set size/ {rss = $2}
    END {printf "%-12s wall %s  CPU %.0f s  peak RSS %.2f GiB (RssAnon %.0f MiB, RssFile %.0f MiB sampled)%s\n",
                n, wall, u + s, rss / 1048576, pa / 1024, pf / 1024,
                cap == "0" ? "" : "  under prlimit --data=" cap}' "$W/$name.time"
}
