# tests/gnn/: the compute backends, gradients, the trainer, weight files,
# PyTorch parity and `tma train` / `tma eval` / `tma export`.
check_LIBRARIES += tests/gnn/libgnn_testutil.a
tests_gnn_libgnn_testutil_a_SOURCES = tests/gnn/gnn_testutil.c tests/gnn/gnn_testutil.h
TMA_GNN_TEST_LDADD = tests/gnn/libgnn_testutil.a $(TMA_TEST_LDADD)

check_PROGRAMS += tests/gnn/test_ops
TESTS += tests/gnn/test_ops

check_PROGRAMS += tests/gnn/parity_dump
dist_check_SCRIPTS += tests/gnn/test_parity.sh
EXTRA_DIST += tests/gnn/parity_torch.py
TESTS += tests/gnn/test_parity.sh

check_PROGRAMS += tests/gnn/hetero_dump
dist_check_SCRIPTS += tests/gnn/test_hetero_parity.sh
EXTRA_DIST += tests/gnn/hetero_torch.py
TESTS += tests/gnn/test_hetero_parity.sh

check_PROGRAMS += tests/gnn/test_gradcheck
TESTS += tests/gnn/test_gradcheck

check_PROGRAMS += tests/gnn/test_config
TESTS += tests/gnn/test_config

check_PROGRAMS += tests/gnn/test_metrics
TESTS += tests/gnn/test_metrics

check_PROGRAMS += tests/gnn/test_weights
TESTS += tests/gnn/test_weights

check_PROGRAMS += tests/gnn/test_trainer
TESTS += tests/gnn/test_trainer

check_PROGRAMS += tests/gnn/test_rank
TESTS += tests/gnn/test_rank

check_PROGRAMS += tests/gnn/write_test_graph
dist_check_SCRIPTS += tests/gnn/test_train_cli.sh
TESTS += tests/gnn/test_train_cli.sh
dist_check_SCRIPTS += tests/gnn/test_train_resume.sh
TESTS += tests/gnn/test_train_resume.sh
dist_check_SCRIPTS += tests/gnn/test_export.sh
TESTS += tests/gnn/test_export.sh
dist_check_SCRIPTS += tests/gnn/test_hetero_cli.sh
TESTS += tests/gnn/test_hetero_cli.sh
dist_check_SCRIPTS += tests/gnn/test_gat_cli.sh
TESTS += tests/gnn/test_gat_cli.sh

check_PROGRAMS += tests/gnn/test_noalloc
tests_gnn_test_noalloc_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc \
	-Wl,--wrap=posix_memalign
TESTS += tests/gnn/test_noalloc

check_PROGRAMS += tests/gnn/ogb_rank
dist_check_SCRIPTS += tests/gnn/test_ogb_eval.sh tests/gnn/test_tfevents.sh tests/gnn/test_auc.sh
EXTRA_DIST += tests/gnn/ogb_eval.py tests/gnn/tfevents_check.py
TESTS += tests/gnn/test_ogb_eval.sh tests/gnn/test_tfevents.sh tests/gnn/test_auc.sh
