# transport/: the UCX tensor transport (listener, endpoints, framed tensors, peer failures).
lib_LIBRARIES += transport/libtma_transport.a
transport_libtma_transport_a_SOURCES = transport/frame.c transport/transport.c \
	transport/transport_int.h
pkginclude_HEADERS += transport/tma_transport.h
TMA_ALL_LIBS += transport/libtma_transport.a
