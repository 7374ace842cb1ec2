# worker/: the trainer loop of a distributed job.
lib_LIBRARIES += worker/libtma_worker.a
worker_libtma_worker_a_SOURCES = worker/worker.c worker/state.c worker/device.c worker/evalrank.c worker/shards.c worker/worker_int.h
worker_libtma_worker_a_CPPFLAGS = $(TMA_BASE_CPPFLAGS) $(TMA_INC_WORKER)
pkginclude_HEADERS += worker/tma_worker.h
TMA_ALL_LIBS += worker/libtma_worker.a
