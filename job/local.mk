# job/: what both roles share about one job: the config (parsed section by
# section), the variant descriptors, the etcd keys and records, the data
# plane's tags and meta block, the job view, and the run folder (run.c).
lib_LIBRARIES += job/libtma_job.a
job_libtma_job_a_SOURCES = job/config.c job/variant.c job/keys.c job/records.c job/wire.c job/view.c job/run.c job/tb.c
job_libtma_job_a_CPPFLAGS = $(TMA_BASE_CPPFLAGS) $(TMA_INC_JOB)
pkginclude_HEADERS += job/tma_job.h
TMA_ALL_LIBS += job/libtma_job.a
