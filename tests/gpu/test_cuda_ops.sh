#!/bin/bash
# test_cuda_ops.sh: every op of the CUDA backend against the plain-C reference
# (tests/gnn/test_ops, fresh random inputs, NaN-poisoned outputs) with the
# issue's tolerance, relative error <= 1e-5.  Skipped (77) without a GPU.
. "$TMA_SRCDIR/tests/lib.sh"
# Not exec: lib.sh's EXIT trap removes the test's temporary folder.
TMA_TEST_BACKENDS=cuda TMA_TEST_TOL=1e-5 "$TMA_BUILDDIR/tests/gnn/test_ops"
exit $?
