# bench/gnn/: the GNN engine against PyTorch and DGL (built by `make bench`, not by `make` or `make check`).
EXTRA_PROGRAMS += bench/gnn/bench_gnn
bench_gnn_bench_gnn_LDADD = $(TMA_BENCH_LDADD)
EXTRA_DIST += bench/gnn/bench_gnn.sh bench/gnn/torch_gnn.py bench/gnn/dgl_gnn.py bench/gnn/dgl_env.sh bench/gnn/gnn_args.py \
	bench/gnn/quality.sh bench/gnn/regularise.sh bench/gnn/quality_steps.sh
