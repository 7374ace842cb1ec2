# tests/: every test runs through tests/harness.sh (time limit, leftover-process check).
TEST_EXTENSIONS = .sh .py
LOG_COMPILER = $(top_builddir)/tests/harness.sh
SH_LOG_COMPILER = $(top_builddir)/tests/harness.sh
PY_LOG_COMPILER = $(top_builddir)/tests/harness.sh
EXTRA_DIST += tests/harness.sh.in tests/lib.sh
# Fixtures kept in the repository (tests/data/README.md).
EXTRA_DIST += tests/data

# Small helpers shared by the C tests.
check_LIBRARIES = tests/libtma_test.a
tests_libtma_test_a_SOURCES = tests/tma_test.c tests/tma_test.h \
	tests/tma_test_etcd.c tests/tma_test_etcd.h

TMA_TEST_LDADD = tests/libtma_test.a $(TMA_ALL_LIBS) $(TMA_DEP_LIBS)
# Every test program links this unless it names its own _LDADD (the GPU
# tests); the programs outside tests/ all name theirs.
LDADD = tests/gnn/libgnn_testutil.a $(TMA_TEST_LDADD)

include tests/common/local.mk
include tests/graph/local.mk
include tests/kv/local.mk
include tests/transport/local.mk
include tests/gnn/local.mk
include tests/gpu/local.mk
include tests/job/local.mk
include tests/worker/local.mk
include tests/fault/local.mk
include tests/coordinator/local.mk
include tests/cli/local.mk
include tests/slurm/local.mk

# `make check-unit`: the C unit tests alone (every test that is a C program,
# none of the .sh/.py role, fault and CLI tests), four at a time unless make
# was given its own -j (most of their time is waiting on etcd and sockets).
check-unit:
	@unit=`for t in $(TESTS); do case $$t in *.sh|*.py) ;; *) echo $$t ;; esac; done | sort -u`; \
	case "$(MAKEFLAGS)" in *-j*|*jobserver*) jobs= ;; *) jobs=-j4 ;; esac; \
	$(MAKE) $(AM_MAKEFLAGS) $$jobs check TESTS="`echo $$unit`"
.PHONY: check-unit

# The Python package in python/ (docs/python.md).
TESTS += tests/python/test_python.sh tests/python/test_python_pyg.sh tests/python/test_torch_model.sh
EXTRA_DIST += tests/python/test_python.sh tests/python/test_python_pyg.sh tests/python/test_torch_model.sh \
	tests/python/test_tma_py.py python/pyproject.toml python/README.md python/tma/__init__.py python/tma/_format.py \
	python/tma/_graph.py python/tma/_run.py python/tma/_torch.py docs/python.md
