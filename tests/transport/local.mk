# tests/transport/: the UCX transport (real UCX endpoints and peer processes).
check_PROGRAMS += tests/transport/test_frame tests/transport/test_transport \
	tests/transport/test_transport_kill tests/transport/test_transport_cycles \
	tests/transport/transport_peer
tests_transport_test_transport_SOURCES = tests/transport/test_transport.c \
	tests/transport/peer_proc.c tests/transport/peer_proc.h
tests_transport_test_transport_kill_SOURCES = tests/transport/test_transport_kill.c \
	tests/transport/peer_proc.c tests/transport/peer_proc.h
tests_transport_test_transport_cycles_SOURCES = tests/transport/test_transport_cycles.c \
	tests/transport/peer_proc.c tests/transport/peer_proc.h
TESTS += tests/transport/test_frame tests/transport/test_transport \
	tests/transport/test_transport_kill tests/transport/test_transport_cycles
# The same tests under AddressSanitizer, and the frame decoder's fuzz run
# (both built with clang inside the test).
dist_check_SCRIPTS += tests/transport/asan.sh tests/transport/fuzz_frame.sh
TESTS += tests/transport/asan.sh tests/transport/fuzz_frame.sh
EXTRA_DIST += tests/fuzz/fuzz_transport_frame.c tests/fuzz/corpus/transport
