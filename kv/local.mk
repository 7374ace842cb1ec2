# kv/: the etcd v3 client (JSON gateway over libcurl, parsed with cJSON).
lib_LIBRARIES += kv/libtma_kv.a
kv_libtma_kv_a_SOURCES = kv/kv_int.h kv/parse.c kv/client.c kv/ops.c kv/lease.c kv/watch.c
kv_libtma_kv_a_CPPFLAGS = $(TMA_BASE_CPPFLAGS) $(TMA_INC_KV)
pkginclude_HEADERS += kv/tma_kv.h
TMA_ALL_LIBS += kv/libtma_kv.a
