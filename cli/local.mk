# cli/: the tma program.  Subcommands live in cli/cmd_*.c.
bin_PROGRAMS += tma
tma_SOURCES = cli/main.c cli/args.c cli/cli_int.h \
	cli/cmd_info.c cli/proc.c cli/etcd_local.c cli/cmd_train.c cli/cmd_eval.c
tma_LDADD = $(TMA_ALL_LIBS) $(TMA_DEP_LIBS)
# The graph commands.
tma_SOURCES += cli/cmd_import.c cli/cmd_gen.c cli/cmd_partition.c
tma_SOURCES += cli/cmd_roles.c cli/cmd_launch.c cli/launch_resume.c cli/cmd_status.c cli/cmd_report.c cli/cmd_export.c

# make install: the bash completion, and a man page for tma and each command
# made from the --help texts by help2man (skipped, with a configure notice,
# when help2man is missing).
dist_bashcompletion_DATA = cli/bash-completion/tma
TMA_MAN_CMDS = info import gen partition train eval export launch coordinator worker status report
if HAVE_HELP2MAN
man1_MANS = man/tma.1 man/tma-info.1 man/tma-import.1 man/tma-gen.1 man/tma-partition.1 \
	man/tma-train.1 man/tma-eval.1 man/tma-export.1 man/tma-launch.1 man/tma-coordinator.1 man/tma-worker.1 \
	man/tma-status.1 man/tma-report.1
$(man1_MANS): man/.stamp
# One rule for every page: help2man runs a page's command through a
# two-line wrapper; its NAME line is the command's summary in `tma --help`.
# tma.1's commands and exit codes (subsections of help2man's DESCRIPTION)
# become sections of their own.
man/.stamp: tma$(EXEEXT) $(top_srcdir)/cli/local.mk
	$(AM_V_GEN)$(MKDIR_P) man && \
	printf '[SEE ALSO]\nThe documents named docs/NAME.md in this page are installed as $(docdir)/NAME.md, with README.md.\n' \
	  > man/see-also.h2m && \
	$(HELP2MAN) --no-info --include=man/see-also.h2m --version-string=$(VERSION) --output=man/tma.1 \
	  --name="GNN link prediction on large graphs, with time-based model aggregation" ./tma$(EXEEXT) && \
	sed -e 's/^\.SS "Commands:"/.SH COMMANDS/' -e 's/^\.SS "Exit status (every command):"/.SH "EXIT STATUS"/' \
	  man/tma.1 > man/tma.1.tmp && mv man/tma.1.tmp man/tma.1 && \
	for c in $(TMA_MAN_CMDS); do \
	  printf '#!/bin/sh\nexec "%s" %s "$$@"\n' "$(abs_builddir)/tma$(EXEEXT)" "$$c" > man/tma-$$c && \
	  chmod +x man/tma-$$c && \
	  name=`./tma$(EXEEXT) --help | sed -n "s/^  $$c  *//p"` && \
	  $(HELP2MAN) --no-info --include=man/see-also.h2m --version-string=$(VERSION) --name="$$name" \
	    --output=man/tma-$$c.1 \
	    man/tma-$$c || exit 1; \
	done && touch $@
CLEANFILES += $(man1_MANS) man/.stamp man/see-also.h2m man/tma-info man/tma-import man/tma-gen man/tma-partition \
	man/tma-train man/tma-eval man/tma-export man/tma-launch man/tma-coordinator man/tma-worker man/tma-status \
	man/tma-report
endif
# tma-ogb-split: the converter `tma import` runs for an OGB dataset's official
# split (PyTorch .pt files); built beside tma and installed beside it.  Its
# interpreter is the Python configure found with torch (TORCH_PYTHON, when
# that is a path), else python3 on the PATH; TMA_PYTHON overrides either.
bin_SCRIPTS = tma-ogb-split
tma-ogb-split: $(top_srcdir)/python/tma_ogb_split.py Makefile
	$(AM_V_GEN)case '$(TORCH_PYTHON)' in \
	  /*) sed '1s|^#!.*|#!$(TORCH_PYTHON)|' $(top_srcdir)/python/tma_ogb_split.py > $@ ;; \
	  *) cp $(top_srcdir)/python/tma_ogb_split.py $@ ;; \
	esac && chmod +x $@
CLEANFILES += tma-ogb-split
EXTRA_DIST += python/tma_ogb_split.py
