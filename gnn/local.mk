# gnn/: tensors and compute backends, layers, model, trainer, evaluator, weight files.
lib_LIBRARIES += gnn/libtma_gnn.a
gnn_libtma_gnn_a_SOURCES = \
	gnn/tma_gnn.h gnn/gnn_backend.h gnn/gnn_int.h \
	gnn/backend.c gnn/config.c gnn/model.c gnn/trainer.c gnn/evaluator.c gnn/weights.c \
	gnn/cpu/cpu_avx2.c gnn/cpu/cpu_generic.c \
	gnn/ref/ref_backend.c
# No errno from sqrtf and no FP-exception semantics: lets the compiler vectorise
# the element-wise kernels (selects instead of branches); results are unchanged.
gnn_libtma_gnn_a_CFLAGS = $(AM_CFLAGS) -fno-math-errno -fno-trapping-math
# The CPU kernels are one source compiled twice (AVX2 and baseline) by the two files above.
EXTRA_DIST += gnn/cpu/cpu_kernels.c
pkginclude_HEADERS += gnn/tma_gnn.h
TMA_ALL_LIBS += gnn/libtma_gnn.a
if HAVE_CUDA
gnn_libtma_gnn_a_SOURCES += gnn/cuda/cuda_backend.c
endif
