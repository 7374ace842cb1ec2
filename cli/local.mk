# cli/: the tma program.  Subcommands live in cli/cmd_*.c.
bin_PROGRAMS += tma
tma_SOURCES = cli/main.c cli/args.c cli/cli_int.h \
	cli/cmd_info.c cli/proc.c cli/etcd_local.c cli/cmd_train.c cli/cmd_eval.c
tma_LDADD = $(TMA_ALL_LIBS) $(TMA_DEP_LIBS)
# The graph commands.
tma_SOURCES += cli/cmd_import.c cli/cmd_gen.c cli/cmd_partition.c
tma_SOURCES += cli/cmd_roles.c cli/cmd_launch.c cli/cmd_status.c cli/cmd_report.c
