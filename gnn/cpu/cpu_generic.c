/* cpu_generic.c: the CPU kernels for the baseline ISA (no AVX2). */
#define CPU_OPS_NAME tma_gnn_cpu_generic_ops
#define CPU_OPS_LABEL "cpu-generic"
#include "cpu_kernels.c"
