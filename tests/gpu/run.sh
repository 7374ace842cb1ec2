#!/bin/bash
# tests/gpu/run.sh: everything the CUDA backend needs a GPU for, in one go, on a
# machine with an NVIDIA GPU and the CUDA toolkit (made for one H200; about 6 to 8
# minutes there, inside the 10 a device call may take):
#   1. builds tma with CUDA (configure --with-cuda) in _build_gpu/, timing nvcc
#      (the backend is the module _build_gpu/tma-cuda.so, which tma loads);
#   2. runs every GPU test (tests/gpu/*, and the CPU/reference tests the backend
#      rests on) and fails if any of them was skipped; then test_ops and
#      test_cuda_step again under compute-sanitizer (memcheck) where it exists;
#   3. benchmarks, CPU against GPU: training throughput and evaluation time on
#      facebook-pages (imported with --feat-dim 128) and a 10M-edge R-MAT graph,
#      the dense products' achieved TFLOP/s (ops timed to completion) against the
#      cuBLAS FP32 sgemm peak measured in the same run (bench/gpu/bench_sgemm);
#   4. writes gpu_table.md, gpu_results.json(l), gpu_run.log and
#      gpu_details.tar.gz (every log and benchmark output) to the --out folder,
#      printing the table last.
#
# Usage: tests/gpu/run.sh [--carry DIR] [--out DIR] [--jobs N] [--bench-seconds S]
#                         [--only tests|bench] [--build-only]
#   --carry DIR  what tests/gpu/prepare.sh made on a machine with the network:
#                DIR/debs/*.deb (the build's libraries, unpacked into a private
#                prefix when the system lacks them and apt-get cannot install
#                them), DIR/datasets/facebook-pages and DIR/autotools.tar
#                (configure and Makefile.in, for a machine without autotools)
#   --out DIR    results (default: $OUT when set, else ./gpu-results)
#   --only       run the tests or the benchmarks alone (both by default)
#   --build-only no GPU needed: check that the CUDA build works here, then stop
#                (TMA_GPU_FORCE_CARRY=1 uses the --carry packages even where
#                the system has the libraries, to try that path)
# Datasets: $TMA_DATASETS, else DIR/datasets, else ../shared/datasets beside the checkout.
# From a fresh checkout it runs ./bootstrap (autoconf, automake); from an
# unpacked `make dist` tarball it uses the shipped configure.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
SRC=$PWD

CARRY="" OUT_DIR="${OUT:-$SRC/gpu-results}" JOBS=$(nproc) BENCH_S=10 ONLY="" BUILD_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --carry) CARRY=$(cd "$2" && pwd) || exit 2; shift 2 ;;
    --out) OUT_DIR=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --bench-seconds) BENCH_S=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --build-only) BUILD_ONLY=1; shift ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT_DIR" || exit 1
OUT_DIR=$(cd "$OUT_DIR" && pwd)
# Everything is written to W; OUT_DIR gets the summary and one tarball of the
# details when the script ends, however it ends (a device call brings back
# only a few files).
W=$(mktemp -d "${TMPDIR:-/tmp}/tma-gpu-XXXXXX") || exit 1
finish() {
  for f in gpu_run.log gpu_results.jsonl gpu_results.json gpu_table.md; do
    [ -f "$W/$f" ] && cp "$W/$f" "$OUT_DIR/"
  done
  tar czf "$OUT_DIR/gpu_details.tar.gz" -C "$W" . 2>/dev/null
}
trap finish EXIT
LOG=$W/gpu_run.log
: > "$LOG"
RES=$W/gpu_results.jsonl
: > "$RES"
T_START=$SECONDS
say() { echo "[gpu $(( SECONDS - T_START ))s] $*" | tee -a "$LOG" >&2; }
die() { say "FAILED: $*"; exit 1; }
# record KEY JSON: one result line
record() { printf '{"%s": %s}\n' "$1" "$2" >> "$RES"; }

# --- 0. a GPU -----------------------------------------------------------------------------
if [ $BUILD_ONLY -eq 0 ]; then
  command -v nvidia-smi > /dev/null && nvidia-smi -L >> "$LOG" 2>&1 || die "no GPU: nvidia-smi does not list one"
  GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
else
  GPU_NAME="none (--build-only)"
fi
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
[ -x "$CUDA_HOME/bin/nvcc" ] || CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")") ||
  die "no nvcc (set CUDA_HOME)"
say "GPU: $GPU_NAME; CUDA toolkit: $CUDA_HOME ($("$CUDA_HOME/bin/nvcc" --version | tail -1))"

# --- 1. the build's libraries ---------------------------------------------------------------------
have_deps() {
  for p in libcurl libcjson ucx openblas zlib libcrypto libmicrohttpd; do pkg-config --exists "$p" 2>/dev/null || return 1; done
  echo '#include <metis.h>' | cc -E -x c - > /dev/null 2>&1
}
CONF_ENV=()
P=/tmp/tma-deps
unpack_carry() { # the carried Debian packages, unpacked into a private prefix (never into /)
  [ -d "$P/usr" ] && return 0
  [ -n "$CARRY" ] && ls "$CARRY"/debs/*.deb > /dev/null 2>&1 || return 1
  mkdir -p "$P"
  local d pkg so have
  for d in "$CARRY"/debs/*.deb; do
    pkg=$(dpkg-deb -f "$d" Package)
    case $pkg in
      *-dev|etcd-*|pkg*) ;;  # headers, link names and tools: always
      *) # A runtime library the system already has stays the system's (it may be newer, and the
         # system's own programs, python3 with torch among them, must keep finding theirs).
         have=0
         for so in $(dpkg-deb -c "$d" | grep -oE '[^/ ]+\.so\.[0-9]+' | sort -u); do  # sonames
           have=1
           ldconfig -p | grep -q "^[[:space:]]*$so " || { have=0; break; }
         done
         if [ $have -eq 1 ]; then echo "carry: $pkg: the system has its libraries" >> "$LOG"; continue; fi ;;
    esac
    dpkg-deb -x "$d" "$P" || die "cannot unpack $d"
  done
}
rm -rf "$P"
if [ -n "${TMA_GPU_FORCE_CARRY:-}" ] || ! have_deps; then
  PKGS="build-essential autoconf automake pkg-config libucx-dev libmetis-dev libcjson-dev libcurl4-openssl-dev
        libopenblas-dev zlib1g-dev libssl-dev libmicrohttpd-dev python3 etcd-server etcd-client"
  if [ -z "${TMA_GPU_FORCE_CARRY:-}" ] && [ "$(id -u)" -eq 0 ] && command -v apt-get > /dev/null &&
     DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y --no-install-recommends $PKGS >> "$LOG" 2>&1 &&
     have_deps; then
    say "installed the build's packages with apt-get"
  elif unpack_carry; then
    L=$P/usr/lib/x86_64-linux-gnu
    # Debian's OpenBLAS is reached through alternatives links that dpkg-deb -x does not make.
    for f in "$L"/openblas-pthread/libopenblas*.so*; do [ -e "$f" ] && ln -sf "$f" "$L/$(basename "$f")"; done
    for so in "$L"/lib*.so.[0-9]*; do
      base=${so%%.so.*}.so
      [ -e "$base" ] || ln -sf "$(basename "$so")" "$base"
    done
    # A -dev package's link name whose library was left to the system points there instead.
    for l in "$L"/lib*.so; do
      [ -L "$l" ] && [ ! -e "$l" ] || continue
      t=$(basename "$(readlink "$l")")                        # libcurl.so.4.8.0
      t=$(echo "$t" | sed -E 's/^(.*\.so\.[0-9]+).*/\1/')     # its soname, libcurl.so.4
      sys=$(ldconfig -p | awk -v n="$t" '$1 == n && /x86-64/ {print $NF; exit}')
      [ -n "$sys" ] && ln -sf "$sys" "$l"
    done
    I=$P/usr/include
    [ -x "$P/usr/bin/pkgconf" ] && ! command -v pkg-config > /dev/null && export PATH=$PATH:$P/usr/bin
    # The libraries the system lacks, found by the programs (DT_RPATH: also for the libraries'
    # own dependencies) and by scripts that start them.
    export LD_LIBRARY_PATH=$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    CONF_ENV=(CPPFLAGS="-I$I -I$I/x86_64-linux-gnu" LDFLAGS="-L$L -Wl,--disable-new-dtags,-rpath,$L"
              CURL_CFLAGS="-I$I/x86_64-linux-gnu" CURL_LIBS="-L$L -lcurl"
              CJSON_CFLAGS="-I$I/cjson" CJSON_LIBS="-L$L -lcjson"
              UCX_CFLAGS="-I$I" UCX_LIBS="-L$L -lucp -luct -lucs -lucm"
              OPENBLAS_CFLAGS="-I$I/x86_64-linux-gnu/openblas-pthread" OPENBLAS_LIBS="-L$L -lopenblas"
              CRYPTO_CFLAGS="-I$I" CRYPTO_LIBS="-L$L -lcrypto"
              ZLIB_CFLAGS="" ZLIB_LIBS="-L$L -lz")
    say "using the carried packages unpacked in $P"
  else
    die "the build's libraries are missing (pkg-config: libcurl libcjson ucx openblas zlib; metis.h) and
         apt-get could not install them; run tests/gpu/prepare.sh where there is a network and pass --carry"
  fi
fi
# etcd (test_cuda_roles.sh runs a real one): the system's, else the carried one.
if ! command -v etcd > /dev/null; then
  if unpack_carry && [ -x "$P/usr/bin/etcd" ]; then
    export PATH=$P/usr/bin:$PATH
    say "using the carried etcd"
  else
    say "no etcd here (and none carried): test_cuda_roles.sh will fail"
  fi
fi

# --- 2. build ---------------------------------------------------------------------------------------
# The carried configure was made from this checkout by prepare.sh: it replaces one a
# previous run left (a device keeps ignored files between calls, and a configure
# older than the checkout's *.mk names sources that are gone).
if [ -n "$CARRY" ] && [ -f "$CARRY/autotools.tar" ]; then
  tar xf "$CARRY/autotools.tar" || die "cannot unpack $CARRY/autotools.tar"
  touch aclocal.m4 && touch configure Makefile.in config.h.in  # newer than their sources: no automake rerun
fi
if [ ! -x configure ]; then
  command -v autoreconf > /dev/null || die "a fresh checkout needs autoconf and automake (or use a make dist tarball)"
  ./bootstrap >> "$LOG" 2>&1 || die "./bootstrap failed (see $LOG)"
fi
B=$SRC/_build_gpu
mkdir -p "$B" && cd "$B" || exit 1
say "configure --with-cuda=$CUDA_HOME"
env "${CONF_ENV[@]}" ../configure --with-cuda="$CUDA_HOME" >> "$LOG" 2>&1 || die "configure failed (see $LOG)"
grep -q '^#define HAVE_CUDA 1' config.h || die "configure did not enable CUDA"
# nvcc's share first, alone, timed (the CI budget question: under ~2 minutes on 2 cores).
t0=$(date +%s%N)
make -j2 gnn/cuda/cuda_backend.o gnn/cuda/cuda_kernels.o >> "$LOG" 2>&1 || die "nvcc failed (see $LOG)"
NVCC_S=$(( ($(date +%s%N) - t0) / 1000000000 ))
say "nvcc: both .cu files in ${NVCC_S}s with -j2"
record nvcc_seconds_j2 "$NVCC_S"
make -j"$JOBS" >> "$LOG" 2>&1 || die "make failed (see $LOG)"
make -j"$JOBS" bench >> "$LOG" 2>&1 || die "make bench failed (see $LOG)"
./tma --version | grep -q "CUDA support: compiled in" || die "tma --version does not report CUDA"
# The CUDA backend is the module tma-cuda.so beside tma; the test and benchmark
# programs in subfolders (and compute-sanitizer's runs) find it through this.
[ -f tma-cuda.so ] || die "the build made no tma-cuda.so"
export TMA_CUDA_MODULE=$B/tma-cuda.so
if [ $BUILD_ONLY -eq 1 ]; then
  say "built with CUDA in $B (--build-only: no GPU checks)"
  exit 0
fi

# --- 3. tests -----------------------------------------------------------------------------------------
if [ "$ONLY" != bench ]; then
GPU_TESTS="tests/gpu/test_cuda_nodev tests/gpu/test_cuda_cli.sh tests/gpu/test_cuda_ops.sh tests/gpu/test_cuda_step
           tests/gpu/test_cuda_roles.sh tests/gpu/test_cuda_hetero.sh"
BASE_TESTS="tests/gnn/test_ops tests/gnn/test_trainer tests/gnn/test_gradcheck"
say "tests: $GPU_TESTS $BASE_TESTS"
make -j"$JOBS" check TESTS="$GPU_TESTS $BASE_TESTS" >> "$LOG" 2>&1
rc=$?
for t in $GPU_TESTS $BASE_TESTS; do
  trs=${t%.sh}.trs; [ -f "$trs" ] || trs=$t.trs
  r=$(sed -n 's/^:test-result: //p' "$trs" 2>/dev/null | head -1)
  say "  ${r:-MISSING} $t"
  record "test:$t" "\"${r:-MISSING}\""
  cp "${trs%.trs}.log" "$W/$(basename "${trs%.trs}").log" 2>/dev/null
  [ "$r" = PASS ] || rc=1
done
[ $rc -eq 0 ] || die "a GPU test failed or was skipped (logs in $W)"
if command -v compute-sanitizer > /dev/null; then
  for t in "tests/gnn/test_ops" "tests/gpu/test_cuda_step"; do
    say "compute-sanitizer memcheck: $t"
    TMA_TEST_BACKENDS=cuda TMA_TEST_TOL=1e-5 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 \
      "./$t" > "$W/sanitizer_$(basename "$t").log" 2>&1
    case $? in
      0) record "sanitizer:$t" '"PASS"' ;;
      124) say "  memcheck of $t ran out of its 120 s (not an error report)"; record "sanitizer:$t" '"timeout"' ;;
      *) record "sanitizer:$t" '"FAIL"'
         die "compute-sanitizer reports errors in $t (see $W/sanitizer_$(basename "$t").log)" ;;
    esac
  done
else
  say "no compute-sanitizer here: memory checks not run"
  record "sanitizer" '"not available"'
fi
fi

if [ "$ONLY" != tests ]; then
# --- 4. benchmarks ----------------------------------------------------------------------------------
say "cuBLAS sgemm peak"
./bench/gpu/bench_sgemm --sizes 4096,8192,16384 > "$W/sgemm.json" 2>> "$LOG" || die "bench_sgemm failed"
record sgemm "$(cat "$W/sgemm.json")"

DS=${TMA_DATASETS:-}
[ -n "$DS" ] && [ -d "$DS/facebook-pages" ] || DS=${CARRY:+$CARRY/datasets}
[ -n "$DS" ] && [ -d "$DS/facebook-pages" ] || DS=$SRC/../shared/datasets
G=$B/gpu-graphs
mkdir -p "$G"
GRAPHS=()
if [ -d "$DS/facebook-pages" ]; then
  ./tma import "$DS/facebook-pages" --feat-dim 128 -o "$G/fb.tmag" >> "$LOG" 2>&1 || die "import facebook-pages failed"
  GRAPHS+=(fb)
else
  say "no facebook-pages under \$TMA_DATASETS, --carry DIR/datasets or ../shared/datasets: that row is skipped"
  record "graph:fb" '"dataset missing"'
fi
say "generating the 10M-edge R-MAT graph"
./tma gen rmat --nodes 1000000 --edges 10000000 --feat-dim 128 -o "$G/rmat10m.tmag" >> "$LOG" 2>&1 ||
  die "tma gen rmat failed"
GRAPHS+=(rmat10m)

# The same weights scored on the CPU and the GPU over every validation edge of each graph: the
# large graph's inference runs in many chunks, which the unit tests' small graphs do not need.
eval_parity() { # NAME
  local g=$1 r=$W/parity_$1
  mkdir -p "$r"
  say "eval parity on $g: the same weights on cpu and cuda"
  ./tma train "$G/$g.tmag" --steps 40 --eval-every-seconds 1000 --device cpu -o "$r/run" >> "$LOG" 2>&1 &&
  ./tma eval "$G/$g.tmag" "$r/run/best.tmaw" --split val --device cpu --json --scores "$r/cpu.npz" > "$r/cpu.json" 2>> "$LOG" &&
  ./tma eval "$G/$g.tmag" "$r/run/best.tmaw" --split val --device cuda --json --scores "$r/cuda.npz" > "$r/cuda.json" 2>> "$LOG" ||
    { say "eval parity on $g: a command failed (see $LOG)"; record "parity:$g" '"failed"'; return; }
  python3 - "$r" "$g" <<'PYP' >> "$RES"
import json, sys
import numpy as np
r, g = sys.argv[1], sys.argv[2]
a, b = np.load(r + "/cpu.npz")["score"], np.load(r + "/cuda.npz")["score"]
rel = float(np.max(np.abs(a.astype(np.float64) - b)) / max(1e-30, float(np.max(np.abs(a)))))
bad = int(np.sum(np.abs(a.astype(np.float64) - b) > 1e-4 * np.max(np.abs(a))))
mc, mg = json.load(open(r + "/cpu.json")), json.load(open(r + "/cuda.json"))
print(json.dumps({"parity:" + g: {"max_rel": rel, "scores_off": bad, "scores": int(a.size),
                                  "mrr_cpu": mc.get("mrr"), "mrr_cuda": mg.get("mrr")}}))
PYP
  tail -1 "$RES" | tee -a "$LOG" >&2
}
for g in "${GRAPHS[@]}"; do eval_parity "$g"; done

bench() { # NAME GRAPH ARGS...: one bench_gnn run into $W/bench_NAME.json
  local name=$1 g=$2; shift 2
  say "bench_gnn $name"
  if timeout 200 ./bench/gnn/bench_gnn "$G/$g.tmag" --threads "$JOBS" "$@" > "$W/bench_$name.json" \
       2>> "$LOG"; then
    record "bench:$name" "$(cat "$W/bench_$name.json")"
  else
    say "bench_gnn $name failed or ran out of time (see $LOG)"
    record "bench:$name" '"failed"'
  fi
}
for g in "${GRAPHS[@]}"; do
  bench "${g}_cpu" "$g" --device cpu --seconds "$BENCH_S"
  bench "${g}_cuda" "$g" --device cuda --seconds "$BENCH_S"
  # per-op times to completion: the dense products' achieved rate on the GPU
  bench "${g}_cuda_ops" "$g" --device cuda --steps 100 --no-eval --sync-timing
  # and the evaluation's ops timed to completion: where its time goes
  bench "${g}_cuda_evalops" "$g" --device cuda --steps 5 --sync-timing
done
fi

# --- 5. the table --------------------------------------------------------------------------------------
python3 - "$RES" "$W" "$GPU_NAME" "$(( SECONDS - T_START ))" <<'PY'
import json, sys
res, out, gpu, secs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
d = {}
for line in open(res):
    d.update(json.loads(line))
json.dump(d, open(out + "/gpu_results.json", "w"), indent=1)
peak = d.get("sgemm", {}).get("peak_tflops", 0)
rows = ["| graph | device | train edges/s | step ms | eval s | val MRR | dense TFLOP/s (share of the sgemm peak: cuBLAS, or OpenBLAS for cpu) |",
        "|---|---|---|---|---|---|---|"]
for g in ("fb", "rmat10m"):
    for dev in ("cpu", "cuda"):
        b = d.get("bench:%s_%s" % (g, dev))
        if not isinstance(b, dict):
            rows.append("| %s | %s | %s | | | | |" % (g, dev, b or "not run"))
            continue
        ops = d.get("bench:%s_cuda_ops" % g) if dev == "cuda" else b
        if isinstance(ops, dict):
            rate = ops.get("gemm_achieved_gflops", 0) / 1e3
            ref = peak if dev == "cuda" else ops.get("sgemm_rate_gflops", 0) / 1e3
            dense = "%.2f (%.0f%% of %.2f)" % (rate, 100 * rate / ref if ref else 0, ref)
        else:
            dense = "n/a"
        rows.append("| %s | %s | %.0f | %.2f | %.2f | %.4f | %s |" % (
            g, dev, b["edges_per_second"], b["step_ms"], b.get("eval_seconds", 0), b.get("val_mrr", 0), dense))
tests = ", ".join("%s %s" % (k.split(":", 1)[1].split("/")[-1], v) for k, v in d.items() if k.startswith("test:"))
text = "\n".join(["GPU: %s; cuBLAS FP32 sgemm peak %.2f TFLOP/s (sizes %s: %s); nvcc -j2 %.0f s; run %s s" % (
    gpu, peak, d.get("sgemm", {}).get("sizes"), d.get("sgemm", {}).get("tflops"), float(d.get("nvcc_seconds_j2", 0)),
    secs), "tests: " + tests, ""] + rows)
open(out + "/gpu_table.md", "w").write(text + "\n")
print(text)
PY
