# phase_lib.sh: what scale_rmat.sh and eval_ranks.sh share (sourced, not run).
#
# phase NAME CMD...: runs CMD under /usr/bin/time -v, its output in
# $W/NAME.out and the timing in $W/NAME.time, and prints the phase's wall
# time, CPU time and peak RSS; exits the script with CMD's last lines when
# CMD fails. The caller sets W (the work folder).
phase() {
  local name=$1; shift
  /usr/bin/time -v "$@" > "$W/$name.out" 2> "$W/$name.time" || { echo "$name failed:"; tail -20 "$W/$name.time"; exit 1; }
  awk -v n="$name" -F': ' '
    /Elapsed \(wall clock\)/ {wall = $2}
    /User time/ {u = $2} /System time/ {s = $2}
    /Maximum resident set size/ {rss = $2}
    END {printf "%-12s wall %s  CPU %.0f s  peak RSS %.2f GiB\n", n, wall, u + s, rss / 1048576}' "$W/$name.time"
}
