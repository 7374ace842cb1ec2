# tests/slurm/: the shipped batch scripts on a real single-host Slurm (about 75 s here).
TESTS += tests/slurm/test_slurm.sh
EXTRA_DIST += tests/slurm/test_slurm.sh
