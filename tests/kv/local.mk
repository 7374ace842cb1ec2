# tests/kv/: the etcd client.  The parser test needs no server; the others
# start real etcd members (tests/tma_test_etcd.c).  All run under valgrind.
check_PROGRAMS += tests/kv/test_kv_parse
TESTS += tests/kv/test_kv_parse

# The response-parser fuzz target, built with clang and run for 20 s.
dist_check_SCRIPTS += tests/kv/test_fuzz_kv.sh
TESTS += tests/kv/test_fuzz_kv.sh
EXTRA_DIST += tests/kv/fuzz_kv.c tests/kv/make_corpus.sh tests/fuzz/corpus/kv

# Against real etcd members.
KV_TEST_UTIL = tests/kv/kv_test_util.c tests/kv/kv_test_util.h
KV_ETCD_TESTS = tests/kv/test_kv_ops tests/kv/test_kv_watch tests/kv/test_kv_cluster tests/kv/test_kv_secure
check_PROGRAMS += $(KV_ETCD_TESTS)
TESTS += $(KV_ETCD_TESTS)
tests_kv_test_kv_ops_SOURCES = tests/kv/test_kv_ops.c $(KV_TEST_UTIL)
tests_kv_test_kv_watch_SOURCES = tests/kv/test_kv_watch.c $(KV_TEST_UTIL)
tests_kv_test_kv_cluster_SOURCES = tests/kv/test_kv_cluster.c $(KV_TEST_UTIL)
tests_kv_test_kv_secure_SOURCES = tests/kv/test_kv_secure.c $(KV_TEST_UTIL)

# The etcd helpers in tests/lib.sh for shell tests.
dist_check_SCRIPTS += tests/kv/test_etcd_helper.sh
TESTS += tests/kv/test_etcd_helper.sh
