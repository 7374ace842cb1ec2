# graph/: the .tmag file, importers, split, generators, partitioners, sampler.
lib_LIBRARIES += graph/libtma_graph.a
graph_libtma_graph_a_SOURCES = graph/tmag.c graph/sampler.c
include_HEADERS += graph/tma_graph.h
TMA_ALL_LIBS += graph/libtma_graph.a
