#!/bin/bash
# feat_dtype.sh: what storing the features as f16 or bf16 costs in test MRR.
#
#   bench/graph/feat_dtype.sh [DATASETS] [WORKDIR]
#
# An SBM (SBM_NODES nodes, 4 classes, h = 0.9, FEAT_DIM features, noise 1)
# and, when DATASETS/facebook-pages exists, facebook-pages (--feat-dim 128)
# are written with --feat-dtype f32, f16 and bf16 (the same graph otherwise);
# tma train (GraphSAGE, step mode: STEPS steps, one validation at the end)
# runs on each with seeds 1 2 3.  Prints one markdown row per graph and type:
# the file size, the test MRR of each seed, their mean, the mean of the
# per-seed differences from f32, and the mean training time a step (noisy
# on a shared machine: the MRR is the point).  Run from the build folder;
# it prints the load average before and after.
set -euo pipefail
T=$(readlink -f "${TMA_BIN:-$(pwd)/tma}")
[ -x "$T" ] || { echo "feat_dtype.sh: no tma at $T (run it from the build folder)" >&2; exit 2; }
DATASETS=${1:-}
W=${2:-${TMPDIR:-/tmp}/tma-bench-feat-dtype}
SBM_NODES=${SBM_NODES:-20000} FEAT_DIM=${FEAT_DIM:-64} STEPS=${STEPS:-3000}
mkdir -p "$W"
echo "# $(date -u +%F) machine: $(nproc) CPUs, $(free -g | awk '/Mem:/ {print $2}') GiB;" \
  "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
cat >"$W/model.json" <<'JSON'
{"model": {"encoder": "sage", "hidden": 64, "decoder_hidden": 64},
 "train": {"batch_size": 256, "fanouts": [10, 5], "lr": 0.005, "threads": 2}}
JSON
graphs=(sbm)
for dt in f32 f16 bf16; do
  "$T" gen sbm --nodes "$SBM_NODES" --classes 4 --homophily 0.9 --feat-dim "$FEAT_DIM" --noise 1 \
    --negatives 100 --seed 1 --feat-dtype $dt -o "$W/sbm-$dt.tmag" >/dev/null
  if [ -n "$DATASETS" ] && [ -d "$DATASETS/facebook-pages" ]; then
    "$T" import "$DATASETS/facebook-pages" --feat-dim 128 --negatives 100 --seed 1 --feat-dtype $dt \
      -o "$W/fb-$dt.tmag" >/dev/null
    [ "${graphs[*]}" = sbm ] && graphs+=(fb)
  fi
done
echo "| graph | features | file | test MRR, seeds 1 / 2 / 3 | mean | mean difference from f32 | ms a step |"
echo "|---|---|---:|---|---:|---:|---:|"
for g in "${graphs[@]}"; do
  for dt in f32 f16 bf16; do
    for s in 1 2 3; do
      "$T" train "$W/$g-$dt.tmag" --config "$W/model.json" --seed $s --steps "$STEPS" \
        --eval-every-seconds 1000000 -q --json -o "$W/run-$g-$dt-$s" --force >"$W/run-$g-$dt-$s.json"
    done
    python3 - "$W" "$g" "$dt" <<'PY'
import json, os, sys
w, g, dt = sys.argv[1:]
r = lambda t, s: json.load(open("%s/run-%s-%s-%d.json" % (w, g, t, s)))
m = lambda t, s: r(t, s)["test_mrr"]
ms = sum(r(dt, s)["train_seconds"] / r(dt, s)["steps"] for s in (1, 2, 3)) / 3 * 1000
got = [m(dt, s) for s in (1, 2, 3)]
diff = sum(m(dt, s) - m("f32", s) for s in (1, 2, 3)) / 3
size = os.path.getsize("%s/%s-%s.tmag" % (w, g, dt)) / 2**20
print("| %s | %s | %.1f MiB | %s | %.4f | %s | %.1f |" % (g, dt, size, " / ".join("%.4f" % x for x in got),
      sum(got) / 3, "" if dt == "f32" else "%+.4f" % diff, ms))
PY
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
