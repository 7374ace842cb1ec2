#!/bin/bash
# test_hetero_parity.sh: the PyTorch oracle for the heterogeneous layers (RGCN
# with bases, DistMult, the per-type input projection), forward and backward.
# hetero_dump runs them on each backend and seed; hetero_torch.py recomputes
# them from the definitions in float64 and must agree within 1e-5.  The
# backends come from TMA_TEST_BACKENDS (default cpu,cpu-generic,ref;
# tests/gpu/test_cuda_hetero.sh asks cuda).  Skipped (77) only where a
# requested backend is absent; without torch and numpy it fails naming them.
. "$TMA_SRCDIR/tests/lib.sh"

need_py "${TMA_TORCH_PYTHON:-}" torch python3-torch
need_py "$TMA_TORCH_PYTHON" numpy python3-numpy

dump="$TMA_BUILDDIR/tests/gnn/hetero_dump"
script="$TMA_SRCDIR/tests/gnn/hetero_torch.py"
dirs=()
IFS=, read -r -a backends <<<"${TMA_TEST_BACKENDS:-cpu,cpu-generic,ref}"
for backend in "${backends[@]}"; do
  for seed in 1 2 3; do
    dir="$TMP_ROOT/$backend-$seed"
    mkdir -p "$dir"
    rc=0; "$dump" "$dir" "$backend" "$seed" || rc=$?
    [ $rc -eq 77 ] && skip "backend $backend is not built in or has no device here"
    [ $rc -eq 0 ] || fail "hetero_dump $backend $seed failed"
    dirs+=("$dir")
  done
done
"$TMA_TORCH_PYTHON" "$script" "${dirs[@]}" || fail "tma's heterogeneous layers disagree with PyTorch (see above)"
echo "${#dirs[@]} cases agree with PyTorch"
