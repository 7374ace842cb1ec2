# common/: status codes, logging, RNG, clocks, CRC32C, files, JSON helpers, CPU counts,
# numpy's .npy/.npz (written).
lib_LIBRARIES += common/libtma_common.a
common_libtma_common_a_SOURCES = \
	common/status.c common/log.c common/rng.c common/clock.c \
	common/crc32c.c common/file.c common/json.c common/npy.c common/cpus.c common/mem.c \
	common/tfevents.c common/half.c
common_libtma_common_a_CPPFLAGS = $(TMA_BASE_CPPFLAGS) $(TMA_INC_COMMON)
pkginclude_HEADERS += common/tma_common.h
TMA_ALL_LIBS += common/libtma_common.a
