# tests/slurm/: the shipped batch scripts on a real single-host Slurm (a minute or two).
TESTS += tests/slurm/test_slurm.sh
EXTRA_DIST += tests/slurm/test_slurm.sh
