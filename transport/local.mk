# transport/: the UCX tensor transport (listener, endpoints, framed tensors, peer failures).
# transport_int.h says which file holds which concern.
lib_LIBRARIES += transport/libtma_transport.a
transport_libtma_transport_a_SOURCES = transport/transport.c transport/progress.c \
	transport/conn.c transport/rx.c transport/send.c transport/frame.c transport/reach.c transport/auth.c \
	transport/transport_int.h
transport_libtma_transport_a_CPPFLAGS = $(TMA_BASE_CPPFLAGS) $(TMA_INC_TRANSPORT)
pkginclude_HEADERS += transport/tma_transport.h
TMA_ALL_LIBS += transport/libtma_transport.a
