check_PROGRAMS += tests/common/test_common
TESTS += tests/common/test_common
