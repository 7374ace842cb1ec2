# gnn/: tensors and compute backends, layers, model, trainer, evaluator, weight files.
lib_LIBRARIES += gnn/libtma_gnn.a
gnn_libtma_gnn_a_SOURCES = \
	gnn/tma_gnn.h gnn/gnn_backend.h gnn/gnn_int.h \
	gnn/backend.c gnn/backend_cuda.c gnn/config.c gnn/model.c gnn/model_kinds.c \
	gnn/enc_gcn.c gnn/enc_mlp.c gnn/enc_rgcn.c gnn/enc_gat.c gnn/dec_mlp.c gnn/dec_distmult.c gnn/dec_dot.c gnn/trainer.c gnn/evaluator.c gnn/rank.c gnn/weights.c gnn/hetero.c \
	gnn/cpu/cpu_gemm.c gnn/cpu/cpu_gemm_int.h \
	gnn/ref/ref_backend.c
# No errno from sqrtf and no FP-exception semantics: lets the compiler vectorise
# the element-wise kernels (selects instead of branches); results are unchanged.
gnn_libtma_gnn_a_CFLAGS = $(AM_CFLAGS) -fno-math-errno -fno-trapping-math
# gnn/cpu/: the CPU backend's op files, by kind, compiled twice: with CPU_ISA_AVX2
# (AVX2 + FMA, tma_gnn_cpu_avx2_ops) and without (the baseline ISA,
# tma_gnn_cpu_generic_ops); both builds' objects go into libtma_gnn.a.
GNN_CPU_SRCS = gnn/cpu/cpu_int.h gnn/cpu/cpu_ops.c gnn/cpu/cpu_dense.c gnn/cpu/cpu_aggregate.c \
	gnn/cpu/cpu_norm.c gnn/cpu/cpu_score.c gnn/cpu/cpu_hetero.c gnn/cpu/cpu_gat.c
noinst_LIBRARIES = gnn/libgnn_cpu_avx2.a gnn/libgnn_cpu_generic.a
gnn_libgnn_cpu_avx2_a_SOURCES = $(GNN_CPU_SRCS)
gnn_libgnn_cpu_avx2_a_CFLAGS = $(gnn_libtma_gnn_a_CFLAGS) -DCPU_ISA_AVX2
gnn_libgnn_cpu_generic_a_SOURCES = $(GNN_CPU_SRCS)
gnn_libgnn_cpu_generic_a_CFLAGS = $(gnn_libtma_gnn_a_CFLAGS)
gnn_libtma_gnn_a_LIBADD = $(gnn_libgnn_cpu_avx2_a_OBJECTS) $(gnn_libgnn_cpu_generic_a_OBJECTS)
# backend_cuda.c looks for the CUDA module in $(pkglibdir), also under a moved
# $(bindir) (make install DESTDIR=...).
gnn_libtma_gnn_a_CPPFLAGS = $(TMA_BASE_CPPFLAGS) $(TMA_INC_GNN) \
	-DTMA_PKGLIBDIR='"$(pkglibdir)"' -DTMA_BINDIR='"$(bindir)"'
gnn_libgnn_cpu_avx2_a_CPPFLAGS = $(gnn_libtma_gnn_a_CPPFLAGS)
gnn_libgnn_cpu_generic_a_CPPFLAGS = $(gnn_libtma_gnn_a_CPPFLAGS)
pkginclude_HEADERS += gnn/tma_gnn.h
TMA_ALL_LIBS += gnn/libtma_gnn.a
# gnn/cuda/: the CUDA backend, a module of its own, tma-cuda.so (gnn_backend.h):
# the only file that links cuBLAS and the CUDA runtime, loaded by
# gnn/backend_cuda.c when a process first asks for a CUDA device, so tma and
# the libraries never map CUDA.  Built beside tma (where the build tree's tma
# finds it; tests/harness.sh points TMA_CUDA_MODULE at it) and installed in
# $(pkglibdir).  nvcc compiles the .cu files (automake has no rule for .cu);
# the sources ship either way.
GNN_CUDA_SRCS = gnn/cuda/cuda_backend.cu gnn/cuda/cuda_kernels.cu
GNN_CUDA_HDRS = gnn/cuda/cuda_int.h gnn/gnn_backend.h gnn/tma_gnn.h common/tma_common.h graph/tma_graph.h
EXTRA_DIST += $(GNN_CUDA_SRCS) gnn/cuda/cuda_int.h gnn/cuda/tma-cuda.map
if HAVE_CUDA
tmacudadir = $(pkglibdir)
tmacuda_PROGRAMS = tma-cuda.so
# common/half.c too: the module sees none of the program's symbols, and the
# backend widens 16-bit features with it.
tma_cuda_so_SOURCES = gnn/cuda/cuda_module.c common/half.c
tma_cuda_so_CPPFLAGS = $(gnn_libtma_gnn_a_CPPFLAGS)
tma_cuda_so_CFLAGS = -std=gnu11 $(WARN_CFLAGS) $(SAN_CFLAGS) $(OPENMP_CFLAGS) -fPIC
tma_cuda_so_LDFLAGS = -shared -Wl,--version-script=$(srcdir)/gnn/cuda/tma-cuda.map $(SAN_CFLAGS)
GNN_CUDA_OBJS = gnn/cuda/cuda_backend.$(OBJEXT) gnn/cuda/cuda_kernels.$(OBJEXT)
tma_cuda_so_LDADD = $(GNN_CUDA_OBJS) $(CUDA_LIBS)
EXTRA_tma_cuda_so_DEPENDENCIES = $(srcdir)/gnn/cuda/tma-cuda.map
CLEANFILES += $(GNN_CUDA_OBJS)
GNN_NVCC = $(NVCC) $(NVCCFLAGS) -std=c++20 -include $(top_builddir)/config.h -D_GNU_SOURCE \
	-I$(top_srcdir)/common -I$(top_srcdir)/graph -I$(top_srcdir)/gnn $(CJSON_CFLAGS) \
	-Xcompiler -fPIC,-Wall,-Wno-unused-parameter,-Wno-unused-function
# local.mk too: objects an older build compiled without -fPIC cannot go into the module.
gnn/cuda/cuda_backend.$(OBJEXT): $(srcdir)/gnn/cuda/cuda_backend.cu $(GNN_CUDA_HDRS:%=$(srcdir)/%) config.h \
		$(srcdir)/gnn/local.mk
	@$(MKDIR_P) gnn/cuda
	$(AM_V_CC)$(GNN_NVCC) -c $(srcdir)/gnn/cuda/cuda_backend.cu -o $@
gnn/cuda/cuda_kernels.$(OBJEXT): $(srcdir)/gnn/cuda/cuda_kernels.cu $(srcdir)/gnn/cuda/cuda_int.h config.h \
		$(srcdir)/gnn/local.mk
	@$(MKDIR_P) gnn/cuda
	$(AM_V_CC)$(GNN_NVCC) -c $(srcdir)/gnn/cuda/cuda_kernels.cu -o $@
endif
