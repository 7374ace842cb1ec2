/*
 * variant.c: the training approaches of the paper as one table of
 * descriptors (ggml's backend registry is the model: one table owns the
 * differences).  Everything that differs between the variants is a field
 * here or a hook below; the coordinator, the worker and the config parser
 * ask the descriptor instead of comparing variants.
 */
#include "tma_job.h"

#include <strings.h>

/* LLCG: correct the average with a few steps on the full graph. */
static tma_status_t llcg_correct(const tma_job_t *job, tma_gnn_trainer_t *server, float *global)
{
    tma_status_t st = tma_gnn_trainer_set_params(server, global);
    for (int k = 0; k < job->llcg_steps && st == TMA_OK; k++)
        st = tma_gnn_trainer_step(server, NULL);
    if (st == TMA_OK)
        st = tma_gnn_trainer_get_params(server, global);
    return st;
}

/* GGS: the coordinator's replica applies the averaged gradients with its
 * Adam; the workers take the resulting parameters (no optimizer state to
 * keep in sync on them). */
static tma_status_t ggs_step(const tma_job_t *job, tma_gnn_trainer_t *server, float *global)
{
    (void)job;
    tma_status_t st = tma_gnn_trainer_set_grads(server, global);
    if (st == TMA_OK)
        st = tma_gnn_trainer_apply_grads(server);
    if (st == TMA_OK)
        st = tma_gnn_trainer_get_params(server, global);
    return st;
}

static const tma_job_variant_desc_t variants[] = {
    [TMA_VARIANT_RANDOMTMA] = {TMA_VARIANT_RANDOMTMA, "randomtma", "random", 1, TMA_AVERAGE_WEIGHTS, TMA_TAG_LOCAL,
                               0, NULL},
    [TMA_VARIANT_SUPERTMA] = {TMA_VARIANT_SUPERTMA, "supertma", "supernode", 1, TMA_AVERAGE_WEIGHTS, TMA_TAG_LOCAL,
                              0, NULL},
    [TMA_VARIANT_PSGD_PA] = {TMA_VARIANT_PSGD_PA, "psgd-pa", "metis", 1, TMA_AVERAGE_WEIGHTS, TMA_TAG_LOCAL, 0,
                             NULL},
    [TMA_VARIANT_LLCG] = {TMA_VARIANT_LLCG, "llcg", "metis", 1, TMA_AVERAGE_WEIGHTS, TMA_TAG_LOCAL, 1,
                          llcg_correct},
    [TMA_VARIANT_GGS] = {TMA_VARIANT_GGS, "ggs", NULL, 0, TMA_AVERAGE_GRADS, TMA_TAG_GRADS, 0, ggs_step},
};

const tma_job_variant_desc_t *tma_job_variant_desc(tma_job_variant_t v)
{
    return (unsigned)v < TMA_ARRAY_LEN(variants) ? &variants[v] : NULL;
}

const char *tma_job_variant_name(tma_job_variant_t v)
{
    const tma_job_variant_desc_t *d = tma_job_variant_desc(v);
    return d ? d->name : "?";
}

tma_status_t tma_job_variant_parse(const char *s, tma_job_variant_t *v_p)
{
    for (size_t i = 0; i < TMA_ARRAY_LEN(variants); i++) {
        if (strcasecmp(s, variants[i].name) == 0) {
            *v_p = variants[i].variant;
            return TMA_OK;
        }
    }
    if (strcasecmp(s, "psgdpa") == 0 || strcasecmp(s, "psgd_pa") == 0) {
        *v_p = TMA_VARIANT_PSGD_PA;
        return TMA_OK;
    }
    return TMA_ERR_INVALID;
}

const char *tma_job_policy_name(tma_job_policy_t p)
{
    return p == TMA_POLICY_REASSIGN ? "reassign" : "continue";
}
