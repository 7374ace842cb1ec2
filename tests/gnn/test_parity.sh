#!/bin/bash
# test_parity.sh: the PyTorch oracle.  For each model variant, parity_dump runs a few
# training steps and writes its batches, losses, gradients and parameters;
# parity_torch.py redoes the steps in PyTorch (float64) and must agree within 1e-4
# (the GAT cases, on the reference and the CPU backend: 1e-5).
. "$TMA_SRCDIR/tests/lib.sh"

need_py "${TMA_TORCH_PYTHON:-}" torch python3-torch
need_py "$TMA_TORCH_PYTHON" numpy python3-numpy
"$TMA_TORCH_PYTHON" -c 'import torch, numpy' 2>/dev/null || hard "$TMA_TORCH_PYTHON cannot import torch and numpy"

dump="$TMA_BUILDDIR/tests/gnn/parity_dump"
script="$TMA_SRCDIR/tests/gnn/parity_torch.py"
n=0
dirs=()
# encoder, sparse features, layers, decoder layers, clip (0: off), steps
while read -r enc sparse layers dlayers clip steps; do
  dir="$TMP_ROOT/case$n"; n=$((n + 1))
  mkdir -p "$dir"
  "$dump" "$dir" "$enc" "$sparse" "$layers" "$dlayers" "$clip" "$steps" || fail "parity_dump $enc failed"
  dirs+=("$dir")
done <<'CASES'
gcn 0 2 2 0.3 5
gcn 1 2 2 0.3 5
gcn 0 2 2 0 4
sage 0 2 2 0.3 5
sage 1 3 3 0.3 5
sage 1 2 2 5 4
mlp 0 2 2 0.3 5
mlp 1 2 1 0.3 4
CASES
# GAT (encoder, sparse, layers, decoder layers, clip, steps, heads) on each backend with its ops
for dev in ref cpu; do
  while read -r enc sparse layers dlayers clip steps heads; do
    dir="$TMP_ROOT/case$n"; n=$((n + 1))
    mkdir -p "$dir"
    TMA_TEST_BACKEND=$dev "$dump" "$dir" "$enc" "$sparse" "$layers" "$dlayers" "$clip" "$steps" "$heads" ||
      fail "parity_dump $enc on $dev failed"
    dirs+=("$dir")
  done <<'CASES'
gat 0 2 2 0.3 4 3
gat 1 2 2 0.3 4 3
gat 0 1 2 0 3 2
gat 0 3 1 0.3 3 1
CASES
done
"$TMA_TORCH_PYTHON" "$script" "${dirs[@]}" || fail "tma disagrees with PyTorch (see above)"
echo "all $n cases agree with PyTorch"
