# coordinator/: the TMA server: rounds, aggregation, evaluator thread,
# baselines (LLCG, GGS), state and failover, run folder files.
lib_LIBRARIES += coordinator/libtma_coordinator.a
coordinator_libtma_coordinator_a_SOURCES = coordinator/coordinator.c coordinator/evaluator.c \
	coordinator/runfiles.c coordinator/coord_int.h
pkginclude_HEADERS += coordinator/tma_coordinator.h
TMA_ALL_LIBS += coordinator/libtma_coordinator.a
