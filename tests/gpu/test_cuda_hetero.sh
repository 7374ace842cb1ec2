#!/bin/bash
# test_cuda_hetero.sh: the CUDA backend's heterogeneous layers (RGCN with bases,
# DistMult, the per-type projection) against PyTorch at 1e-5, forward and
# backward (tests/gnn/test_hetero_parity.sh on cuda); tests/gpu/run.sh runs it.
# Skipped (77) without a GPU; fails naming python3-torch without torch.
. "$TMA_SRCDIR/tests/lib.sh"
# Not exec: lib.sh's EXIT trap removes the test's temporary folder.
TMA_TEST_BACKENDS=cuda bash "$TMA_SRCDIR/tests/gnn/test_hetero_parity.sh"
exit $?
