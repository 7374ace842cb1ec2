#!/bin/bash
# test_cuda_cli.sh: `tma train --device` and `tma eval --device` on every machine.
# Without a usable GPU (or without CUDA in the build) --device cuda fails with a
# clear error, exit 1, and leaves no run folder, while --device cpu is unaffected;
# with a GPU, training and evaluation on cuda work and agree with the CPU.
. "$TMA_SRCDIR/tests/lib.sh"

W="$TMA_BUILDDIR/tests/gnn/write_test_graph"
G=$TMP_ROOT/g.tmag
"$W" "$G" 400 24 0 1 || hard "cannot write the test graph"
cat > "$TMP_ROOT/small.json" <<'JSON'
{"model": {"encoder": "sage", "hidden": 16, "decoder_hidden": 16},
 "train": {"batch_size": 64, "fanouts": [5, 5], "lr": 0.01, "threads": 2, "seed": 3}}
JSON

# --- bad names: usage errors naming the flag or key ---------------------------
expect_fail 2 "--device: expected cpu, cuda or cuda:N, got 'gpu'" -- \
  "$TMA_BIN" train "$G" --device gpu --steps 5 -o "$TMP_ROOT/bad1"
expect_fail 2 "--device: expected cpu, cuda or cuda:N, got 'cuda:x'" -- \
  "$TMA_BIN" train "$G" --device cuda:x --steps 5 -o "$TMP_ROOT/bad2"
expect_fail 2 "--device: expected cpu, cuda or cuda:N, got 'cuda:'" -- \
  "$TMA_BIN" eval "$G" "$TMP_ROOT/none.tmaw" --device cuda:
sed 's/"seed": 3}/"seed": 3, "device": "tpu"}/' "$TMP_ROOT/small.json" > "$TMP_ROOT/tpu.json"
expect_fail 2 'train.device: "tpu" is not a device' -- \
  "$TMA_BIN" train "$G" --config "$TMP_ROOT/tpu.json" --steps 5 -o "$TMP_ROOT/bad3"
for d in bad1 bad2 bad3; do [ ! -e "$TMP_ROOT/$d" ] || fail "a refused run left $d behind"; done

# --- cpu is unaffected ----------------------------------------------------------
RUN=$TMP_ROOT/cpu
"$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --device cpu --steps 30 -q -o "$RUN" \
  > /dev/null 2> "$TMP_ROOT/cpu.err" || { cat "$TMP_ROOT/cpu.err" >&2; fail "tma train --device cpu failed"; }
grep -q "device cpu" "$TMP_ROOT/cpu.err" || [ -s "$RUN/result.json" ] || fail "no result for --device cpu"
[ "$(json "$RUN/config.json" "d['train']['device']")" = cpu ] || fail "config.json lacks train.device"
cpu_mrr=$("$TMA_BIN" eval "$G" "$RUN/best.tmaw" --device cpu) || fail "tma eval --device cpu failed"

# --- cuda --------------------------------------------------------------------------
if ! "$TMA_BIN" --version | grep -q "CUDA support: compiled in"; then
  expect_fail 1 'no CUDA backend \(configure --with-cuda\)' -- \
    "$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --device cuda --steps 5 -o "$TMP_ROOT/nocuda"
  expect_fail 1 'no CUDA backend' -- "$TMA_BIN" eval "$G" "$RUN/best.tmaw" --device cuda
  [ ! -e "$TMP_ROOT/nocuda" ] || fail "a failed --device cuda run left its folder behind"
  echo "checked: this build has no CUDA backend, and says so"
  exit 0
fi
# --- the CUDA module (tma-cuda.so, loaded only when a CUDA device is asked for) ---
# tma itself links no CUDA library; a module that is missing, cannot load its
# CUDA libraries, or is not tma's, is a clear error naming the file, never a crash.
! ldd "$TMA_BIN" | grep -E 'libcudart|libcublas' || fail "tma links the CUDA libraries itself"
[ -f "$TMA_CUDA_MODULE" ] || fail "no CUDA module at $TMA_CUDA_MODULE (tests/harness.sh sets it)"
# It sees none of the program's symbols: every tma_ function it calls is its own.
need nm binutils
und=$(nm -u "$TMA_CUDA_MODULE" | awk '$2 ~ /^tma_/ {print $2}' | tr '\n' ' ')
[ -z "$und" ] || fail "the CUDA module needs tma symbols the program does not export: $und"
TMA_CUDA_MODULE=$TMP_ROOT/none.so expect_fail 1 "no usable GPU: cannot load the CUDA backend's module $TMP_ROOT/none.so" -- \
  "$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --device cuda --steps 5 -o "$TMP_ROOT/nomod"
(unset TMA_CUDA_MODULE; cp "$TMA_BIN" "$TMP_ROOT/tma-alone"
 expect_fail 1 "module tma-cuda.so is neither beside the program \($TMP_ROOT\)" -- \
   "$TMP_ROOT/tma-alone" eval "$G" "$RUN/best.tmaw" --device cuda) || exit 1
if command -v cc > /dev/null; then
  # A module whose CUDA runtime is gone: it needs a libcudart.so.99 that was deleted.
  echo 'void tma_gnn_cuda_module(void) {}' > "$TMP_ROOT/m.c"
  cc -shared -fPIC -Wl,-soname,libcudart.so.99 -o "$TMP_ROOT/libcudart.so.99" -x c /dev/null &&
    cc -shared -fPIC -o "$TMP_ROOT/nolib.so" "$TMP_ROOT/m.c" -Wl,--no-as-needed "$TMP_ROOT/libcudart.so.99" &&
    rm "$TMP_ROOT/libcudart.so.99" || hard "cannot build the test's module"
  TMA_CUDA_MODULE=$TMP_ROOT/nolib.so expect_fail 1 "module $TMP_ROOT/nolib.so: libcudart.so.99: cannot open" -- \
    "$TMA_BIN" eval "$G" "$RUN/best.tmaw" --device cuda
  # Some other library where the module should be.
  cc -shared -fPIC -o "$TMP_ROOT/other.so" -x c /dev/null || hard "cannot build the test's library"
  TMA_CUDA_MODULE=$TMP_ROOT/other.so expect_fail 1 "other.so is not tma's CUDA module" -- \
    "$TMA_BIN" eval "$G" "$RUN/best.tmaw" --device cuda
fi
[ ! -e "$TMP_ROOT/nomod" ] || fail "a run without the CUDA module left its folder behind"

if ! ls /dev/nvidia[0-9]* > /dev/null 2>&1; then
  expect_fail 1 'no usable GPU: cudaGetDeviceCount failed' -- \
    "$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --device cuda --steps 5 -o "$TMP_ROOT/nogpu"
  expect_fail 1 'no usable GPU' -- \
    "$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --device cuda:2 --steps 5 -o "$TMP_ROOT/nogpu"
  expect_fail 1 'no usable GPU: cudaGetDeviceCount failed' -- "$TMA_BIN" eval "$G" "$RUN/best.tmaw" --device cuda
  [ ! -e "$TMP_ROOT/nogpu" ] || fail "a failed --device cuda run left its folder behind"
  echo "checked: no GPU here, and --device cuda says so"
  exit 0
fi
# A GPU: train there, evaluate the same weights on both.
GRUN=$TMP_ROOT/gpu
"$TMA_BIN" train "$G" --config "$TMP_ROOT/small.json" --device cuda --steps 30 -q -o "$GRUN" \
  > /dev/null 2> "$TMP_ROOT/gpu.err" || { cat "$TMP_ROOT/gpu.err" >&2; fail "tma train --device cuda failed"; }
[ "$(json "$GRUN/config.json" "d['train']['device']")" = cuda ] || fail "config.json: train.device is not cuda"
gpu_mrr=$("$TMA_BIN" eval "$G" "$RUN/best.tmaw" --device cuda) || fail "tma eval --device cuda failed"
python3 - "$cpu_mrr" "$gpu_mrr" <<'PY' || fail "eval MRR differs: cpu '$cpu_mrr', cuda '$gpu_mrr'"
import sys
a, b = (float(s.split()[1]) for s in sys.argv[1:3])
assert abs(a - b) <= 0.01, (a, b)
PY
expect_fail 1 'no usable GPU of that index' -- "$TMA_BIN" eval "$G" "$RUN/best.tmaw" --device cuda:1023
echo "checked: training and evaluation on cuda"
