# cli/: the tma program.  Subcommands live in cli/cmd_*.c.
bin_PROGRAMS += tma
tma_SOURCES = cli/main.c cli/args.c cli/cli_int.h \
	cli/cmd_info.c cli/proc.c cli/etcd_local.c cli/cmd_train.c cli/cmd_eval.c
tma_LDADD = $(TMA_ALL_LIBS) $(TMA_DEP_LIBS)
# The graph commands.
tma_SOURCES += cli/cmd_import.c cli/cmd_gen.c cli/cmd_partition.c
tma_SOURCES += cli/cmd_roles.c cli/cmd_launch.c cli/cmd_status.c cli/cmd_report.c
# tma-ogb-split: the converter `tma import` runs for an OGB dataset's official
# split (PyTorch .pt files); built beside tma and installed beside it.
bin_SCRIPTS = tma-ogb-split
tma-ogb-split: $(top_srcdir)/python/tma_ogb_split.py
	$(AM_V_GEN)cp $(top_srcdir)/python/tma_ogb_split.py $@ && chmod +x $@
CLEANFILES += tma-ogb-split
EXTRA_DIST += python/tma_ogb_split.py
