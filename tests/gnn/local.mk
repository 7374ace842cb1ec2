# tests/gnn/: the compute backends, gradients, the trainer, weight files,
# PyTorch parity and `tma train` / `tma eval` / `tma export`.
check_LIBRARIES += tests/gnn/libgnn_testutil.a
tests_gnn_libgnn_testutil_a_SOURCES = tests/gnn/gnn_testutil.c tests/gnn/gnn_testutil.h
TMA_GNN_TEST_LDADD = tests/gnn/libgnn_testutil.a $(TMA_TEST_LDADD)

# The C unit tests.
GNN_UNIT_TESTS = tests/gnn/test_ops tests/gnn/test_gradcheck tests/gnn/test_config tests/gnn/test_metrics \
	tests/gnn/test_weights tests/gnn/test_trainer tests/gnn/test_rank tests/gnn/test_noalloc
check_PROGRAMS += $(GNN_UNIT_TESTS)
TESTS += $(GNN_UNIT_TESTS)
tests_gnn_test_noalloc_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc \
	-Wl,--wrap=posix_memalign

# The scripts, and the programs and Python they run: PyTorch parity (parity_dump,
# hetero_dump), the CLI on a written test graph (write_test_graph), OGB's
# evaluator against tma's ranks (ogb_rank).
check_PROGRAMS += tests/gnn/parity_dump tests/gnn/hetero_dump tests/gnn/write_test_graph tests/gnn/ogb_rank
GNN_SCRIPT_TESTS = tests/gnn/test_parity.sh tests/gnn/test_hetero_parity.sh tests/gnn/test_train_cli.sh \
	tests/gnn/test_train_resume.sh tests/gnn/test_export.sh tests/gnn/test_hetero_cli.sh tests/gnn/test_gat_cli.sh \
	tests/gnn/test_ogb_eval.sh tests/gnn/test_tfevents.sh tests/gnn/test_auc.sh
dist_check_SCRIPTS += $(GNN_SCRIPT_TESTS)
TESTS += $(GNN_SCRIPT_TESTS)
EXTRA_DIST += tests/gnn/parity_torch.py tests/gnn/hetero_torch.py tests/gnn/ogb_eval.py tests/gnn/tfevents_check.py
