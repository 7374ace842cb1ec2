# fault/: how a job survives failures: leases kept across etcd outages,
# membership, shard policies and fencing, and failure injection.
lib_LIBRARIES += fault/libtma_fault.a
fault_libtma_fault_a_SOURCES = fault/member.c fault/policy.c fault/inject.c fault/lease.c
fault_libtma_fault_a_CPPFLAGS = $(TMA_BASE_CPPFLAGS) $(TMA_INC_FAULT)
pkginclude_HEADERS += fault/tma_fault.h
TMA_ALL_LIBS += fault/libtma_fault.a
