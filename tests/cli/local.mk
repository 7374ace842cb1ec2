# The tma program as installed: make install's man pages and bash completion;
# run folders that are never overwritten by surprise.
TESTS += tests/cli/test_install.sh tests/cli/test_run_folder.sh tests/cli/test_launch_etcd.sh tests/cli/test_report.sh \
	tests/cli/test_status_run.sh tests/cli/test_launch_resume.sh tests/cli/test_launch_names.sh tests/cli/test_train_progress.sh
EXTRA_DIST += tests/cli/test_install.sh tests/cli/test_run_folder.sh tests/cli/test_launch_etcd.sh tests/cli/test_report.sh \
	tests/cli/test_status_run.sh tests/cli/test_launch_resume.sh tests/cli/test_launch_names.sh tests/cli/test_train_progress.sh
