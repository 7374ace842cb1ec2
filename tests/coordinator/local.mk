# Distributed jobs end to end: real etcd, UCX and tma processes.
EXTRA_DIST += tests/coordinator/dist_lib.sh
TESTS += tests/coordinator/test_job_cora.sh
TESTS += tests/coordinator/test_eval_ranks.sh tests/coordinator/test_job_determinism.sh tests/coordinator/test_step_rounds.sh
TESTS += tests/coordinator/test_job_bad_config.sh
TESTS += tests/coordinator/test_job_netns.sh
TESTS += tests/coordinator/test_job_variants.sh
TESTS += tests/coordinator/test_launch.sh tests/coordinator/test_launch_hetero.sh
TESTS += tests/coordinator/test_launch_negatives.sh
TESTS += tests/coordinator/test_threads_devices.sh
TESTS += tests/coordinator/test_launch_security.sh tests/coordinator/test_launch_secure_etcd.sh
TESTS += tests/coordinator/test_job_node_local.sh
TESTS += tests/coordinator/test_prometheus.sh
TESTS += tests/coordinator/test_job_init.sh
EXTRA_DIST += tests/coordinator/test_eval_ranks.sh tests/coordinator/test_job_cora.sh tests/coordinator/test_job_determinism.sh tests/coordinator/test_step_rounds.sh \
	tests/coordinator/test_job_bad_config.sh tests/coordinator/test_job_netns.sh \
	tests/coordinator/test_job_variants.sh tests/coordinator/test_launch.sh tests/coordinator/test_launch_hetero.sh \
	tests/coordinator/test_threads_devices.sh \
	tests/coordinator/test_launch_security.sh tests/coordinator/test_launch_secure_etcd.sh \
	tests/coordinator/test_job_node_local.sh tests/coordinator/test_launch_negatives.sh \
	tests/coordinator/test_prometheus.sh tests/coordinator/test_job_init.sh

# The average, a pure function, on its own.
check_PROGRAMS += tests/coordinator/test_average
TESTS += tests/coordinator/test_average
