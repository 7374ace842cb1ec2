# fault/: how a job survives failures: leases kept across etcd outages,
# membership, shard policies and fencing, and failure injection.
lib_LIBRARIES += fault/libtma_fault.a
fault_libtma_fault_a_SOURCES = fault/member.c fault/policy.c fault/inject.c fault/lease.c
pkginclude_HEADERS += fault/tma_fault.h
TMA_ALL_LIBS += fault/libtma_fault.a
