# graph/: the .tmag file, importers, split, generators, partitioners, sampler.
lib_LIBRARIES += graph/libtma_graph.a
graph_libtma_graph_a_SOURCES = graph/tmag.c graph/tmag_write.c graph/sampler.c
graph_libtma_graph_a_CPPFLAGS = $(TMA_BASE_CPPFLAGS) $(TMA_INC_GRAPH)
pkginclude_HEADERS += graph/tma_graph.h
TMA_ALL_LIBS += graph/libtma_graph.a
# The builder, importers, generators and partitioners.
graph_libtma_graph_a_SOURCES += graph/graph_int.h graph/tmag_int.h graph/build.c graph/feat.c graph/text.c \
	graph/npz.c graph/import.c graph/import_ogb.c graph/import_feat.c graph/import_npz.c graph/import_typed.c graph/import_int.h graph/gen.c graph/partition.c graph/partition_infer.c \
	graph/order.c graph/build_ooc.c
