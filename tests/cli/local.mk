# The tma program as installed: make install's man pages and bash completion.
TESTS += tests/cli/test_install.sh
EXTRA_DIST += tests/cli/test_install.sh
