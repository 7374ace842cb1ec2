# coordinator/: the TMA server.  coord_int.h says which file holds which concern.
lib_LIBRARIES += coordinator/libtma_coordinator.a
coordinator_libtma_coordinator_a_SOURCES = coordinator/coordinator.c coordinator/setup.c \
	coordinator/start.c coordinator/takeover.c coordinator/members.c coordinator/round.c \
	coordinator/average.c coordinator/ggs.c coordinator/publish.c coordinator/end.c \
	coordinator/evaluator.c coordinator/ranks.c coordinator/io_retry.c coordinator/coord.c coordinator/guard.c coordinator/prom.c \
	coordinator/coord_int.h
coordinator_libtma_coordinator_a_CPPFLAGS = $(TMA_BASE_CPPFLAGS) $(TMA_INC_COORDINATOR)
pkginclude_HEADERS += coordinator/tma_coordinator.h
TMA_ALL_LIBS += coordinator/libtma_coordinator.a
