#!/bin/bash
# test_cuda_hetero.sh: the CUDA backend's heterogeneous layers (RGCN with bases,
# DistMult, the per-type projection) against PyTorch at 1e-5, forward and
# backward (tests/gnn/test_hetero_parity.sh on cuda).  Its ops against the
# reference are in test_cuda_ops.sh (which tests/gpu/run.sh requires; this one
# it leaves out, as the GPU machine may have no torch).  Skipped (77) without a
# GPU or torch.
. "$TMA_SRCDIR/tests/lib.sh"
TMA_TEST_BACKENDS=cuda exec "$TMA_SRCDIR/tests/gnn/test_hetero_parity.sh"
