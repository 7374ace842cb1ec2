/*
 * model_kinds.c: the table of encoder and decoder kinds.  Every other file
 * asks a kind's descriptor (gnn_encoder_of, gnn_decoder_of) what it needs
 * instead of naming the kind: this is the one place that maps the config's
 * enum values to descriptors and names.
 */
#include "gnn_int.h"

#include <string.h>

static const gnn_encoder_desc_t *const encoders[] = {
    [TMA_GNN_ENCODER_GCN] = &gnn_encoder_gcn,
    [TMA_GNN_ENCODER_SAGE] = &gnn_encoder_sage,
    [TMA_GNN_ENCODER_MLP] = &gnn_encoder_mlp,
    [TMA_GNN_ENCODER_RGCN] = &gnn_encoder_rgcn,
    [TMA_GNN_ENCODER_GAT] = &gnn_encoder_gat,
};

static const gnn_decoder_desc_t *const decoders[] = {
    [TMA_GNN_DECODER_MLP] = &gnn_decoder_mlp,
    [TMA_GNN_DECODER_DISTMULT] = &gnn_decoder_distmult,
    [TMA_GNN_DECODER_DOT] = &gnn_decoder_dot,
};

const gnn_encoder_desc_t *gnn_encoder_of(const tma_gnn_config_t *cfg)
{
    return (unsigned)cfg->encoder < TMA_ARRAY_LEN(encoders) ? encoders[cfg->encoder] : NULL;
}

const gnn_decoder_desc_t *gnn_decoder_of(const tma_gnn_config_t *cfg)
{
    return (unsigned)cfg->decoder < TMA_ARRAY_LEN(decoders) ? decoders[cfg->decoder] : NULL;
}

const char *tma_gnn_encoder_name(tma_gnn_encoder_t e)
{
    return (unsigned)e < TMA_ARRAY_LEN(encoders) ? encoders[e]->name : "?";
}

const char *tma_gnn_decoder_name(tma_gnn_decoder_t d)
{
    return (unsigned)d < TMA_ARRAY_LEN(decoders) ? decoders[d]->name : "?";
}

tma_status_t tma_gnn_encoder_parse(const char *name, tma_gnn_encoder_t *e_p)
{
    for (size_t i = 0; name && i < TMA_ARRAY_LEN(encoders); i++) {
        if (strcmp(name, encoders[i]->name) == 0) {
            *e_p = (tma_gnn_encoder_t)i;
            return TMA_OK;
        }
    }
    return TMA_ERR_CONFIG;
}

tma_status_t tma_gnn_decoder_parse(const char *name, tma_gnn_decoder_t *d_p)
{
    for (size_t i = 0; name && i < TMA_ARRAY_LEN(decoders); i++) {
        if (strcmp(name, decoders[i]->name) == 0) {
            *d_p = (tma_gnn_decoder_t)i;
            return TMA_OK;
        }
    }
    return TMA_ERR_CONFIG;
}

int gnn_decoder_named(const tma_gnn_config_t *cfg) { return cfg->decoder != TMA_GNN_DECODER_MLP; }

void tma_gnn_config_default_kinds(tma_gnn_config_t *cfg)
{
    cfg->encoder = TMA_GNN_ENCODER_GCN;
    cfg->decoder = TMA_GNN_DECODER_MLP;
}
