# fault/: the job config, etcd keys and records, membership, the job view,
# shard policies, fencing and failure injection (shared by both roles).
lib_LIBRARIES += fault/libtma_fault.a
fault_libtma_fault_a_SOURCES = fault/job.c fault/records.c fault/view.c fault/member.c \
	fault/policy.c fault/inject.c fault/lease.c
pkginclude_HEADERS += fault/tma_fault.h
TMA_ALL_LIBS += fault/libtma_fault.a
