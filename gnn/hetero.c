/*
 * hetero.c: the layers of heterogeneous models, composed from the ops
 * table: the RGCN layer with basis decomposition (forward and backward),
 * the per-node-type input projection (a Linear per node type, through a
 * scatter and gather by type), and the host helpers their inputs need (the
 * per-(node, relation) mean weights of a block, the partition of a node
 * list by type).  DistMult is one op each way (tma_gnn_op_distmult*), so it
 * needs nothing here; and the per-type feature tables the projection reads.
 * docs/model.md, "Heterogeneous ops", gives the formulas and how the
 * trainer and evaluator use them.
 */
#include "gnn_int.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ host helpers */

tma_status_t gnn_rgcn_norm(int64_t num_dst, const int32_t *indptr, const int32_t *rel, int num_rels,
                           int32_t *count, float *weights_p)
{
    if (num_dst < 0 || num_rels < 1)
        return TMA_ERR_INVALID;
    for (int r = 0; r < num_rels; r++)
        count[r] = 0;
    for (int64_t i = 0; i < num_dst; i++) {
        for (int32_t e = indptr[i]; e < indptr[i + 1]; e++) {
            if (rel[e] < 0 || rel[e] >= num_rels)
                return TMA_ERR_INVALID;
            count[rel[e]]++;
        }
        for (int32_t e = indptr[i]; e < indptr[i + 1]; e++)
            weights_p[e] = 1.0f / (float)count[rel[e]];
        /* Reset only what this row touched: O(degree) a row, not O(R). */
        for (int32_t e = indptr[i]; e < indptr[i + 1]; e++)
            count[rel[e]] = 0;
    }
    return TMA_OK;
}

tma_status_t gnn_type_partition(const int32_t *types, int64_t n, int num_types, int32_t *order_p,
                                int64_t *offsets_p)
{
    if (n < 0 || n > INT32_MAX || num_types < 1)
        return TMA_ERR_INVALID;
    for (int t = 0; t <= num_types; t++)
        offsets_p[t] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (types[i] < 0 || types[i] >= num_types)
            return TMA_ERR_INVALID;
        offsets_p[types[i] + 1]++;
    }
    for (int t = 0; t < num_types; t++)
        offsets_p[t + 1] += offsets_p[t];
    /* Stable: positions of one type keep their order.  offsets_p[t] serves
     * as type t's cursor and is restored below. */
    for (int64_t i = 0; i < n; i++)
        order_p[offsets_p[types[i]]++] = (int32_t)i;
    for (int t = num_types; t > 0; t--)
        offsets_p[t] = offsets_p[t - 1];
    offsets_p[0] = 0;
    return TMA_OK;
}

/* ------------------------------------------------------------------ RGCN */

tma_status_t gnn_rgcn_forward(const gnn_rgcn_params_t *P, const tma_gnn_block_t *blk, const tensor_t *rel,
                              const tensor_t *H, tensor_t *T, tensor_t *Z)
{
    /* One wide sgemm projects every source row onto all B bases at once;
     * the aggregation then mixes the bases per edge by a[rel(e)]. */
    tensor_t Hs = tma_gnn_tensor_view(H, 0, blk->num_src, H->cols);
    tensor_t Hd = tma_gnn_tensor_view(H, 0, blk->num_dst, H->cols);
    tma_status_t st = tma_gnn_op_matmul(&Hs, 0, &P->V, 0, 1.0f, 0.0f, T);
    if (st == TMA_OK)
        st = tma_gnn_op_rgcn_aggregate(blk, rel, T, &P->coef, Z);
    if (st == TMA_OK)
        st = tma_gnn_op_matmul(&Hd, 0, &P->W_self, 0, 1.0f, 1.0f, Z);
    if (st == TMA_OK)
        st = tma_gnn_op_add_bias(Z, &P->b);
    return st;
}

tma_status_t gnn_rgcn_backward(const gnn_rgcn_params_t *P, const tma_gnn_block_t *blk, const tensor_t *rel,
                               const tensor_t *t_rel, const tensor_t *H, const tensor_t *T, const tensor_t *dZ,
                               tensor_t *dT, gnn_rgcn_params_t *G, tensor_t *dH)
{
    tensor_t Hs = tma_gnn_tensor_view(H, 0, blk->num_src, H->cols);
    tensor_t Hd = tma_gnn_tensor_view(H, 0, blk->num_dst, H->cols);
    tma_status_t st = tma_gnn_op_rgcn_aggregate_bwd(blk, rel, t_rel, dZ, T, &P->coef, dT, &G->coef);
    if (st == TMA_OK)
        st = tma_gnn_op_matmul(&Hs, 1, dT, 0, 1.0f, 0.0f, &G->V);
    if (st == TMA_OK)
        st = tma_gnn_op_matmul(&Hd, 1, dZ, 0, 1.0f, 0.0f, &G->W_self);
    if (st == TMA_OK)
        st = tma_gnn_op_colsum(dZ, &G->b);
    if (st == TMA_OK && dH) {
        tensor_t dHd = tma_gnn_tensor_view(dH, 0, blk->num_dst, dH->cols);
        st = tma_gnn_op_matmul(dT, 0, &P->V, 1, 1.0f, 0.0f, dH);
        if (st == TMA_OK)
            st = tma_gnn_op_matmul(dZ, 0, &P->W_self, 1, 1.0f, 1.0f, &dHd);
    }
    return st;
}

/* ------------------------------------------------------------------ per-type input projection */

tma_status_t gnn_type_project_forward(const gnn_type_proj_t *tp, const tensor_t *W, const tensor_t *bias,
                                      tensor_t *S, tensor_t *out)
{
    tma_status_t st = TMA_OK;
    for (int t = 0; t < tp->num_types && st == TMA_OK; t++) {
        int64_t o = tp->offsets[t], n = tp->offsets[t + 1] - o;
        if (n == 0)
            continue;
        tensor_t St = tma_gnn_tensor_view(S, o * S->cols, n, S->cols);
        tensor_t ids = tma_gnn_tensor_view(tp->ids, o, n, 1);
        st = tma_gnn_op_feat_matmul(tp->feats[t], &ids, &W[t], 0.0f, &St);
        if (st == TMA_OK)
            st = tma_gnn_op_add_bias(&St, &bias[t]);
    }
    if (st == TMA_OK)
        st = tma_gnn_op_rows_scatter(S, tp->order, out);
    return st;
}

tma_status_t gnn_type_project_backward(const gnn_type_proj_t *tp, const tensor_t *dOut, tensor_t *dS, tensor_t *dW,
                                       tensor_t *dbias)
{
    tma_status_t st = tma_gnn_op_rows_gather(dOut, tp->order, dS);
    for (int t = 0; t < tp->num_types && st == TMA_OK; t++) {
        int64_t o = tp->offsets[t], n = tp->offsets[t + 1] - o;
        if (n == 0) {
            /* A type absent from the batch gets zero gradients. */
            st = tma_gnn_op_fill(&dW[t], 0.0f);
            if (st == TMA_OK)
                st = tma_gnn_op_fill(&dbias[t], 0.0f);
            continue;
        }
        tensor_t dSt = tma_gnn_tensor_view(dS, o * dS->cols, n, dS->cols);
        tensor_t ids = tma_gnn_tensor_view(tp->ids, o, n, 1);
        st = tma_gnn_op_feat_matmul_grad(tp->feats[t], &ids, &dSt, &dW[t]);
        if (st == TMA_OK)
            st = tma_gnn_op_colsum(&dSt, &dbias[t]);
    }
    return st;
}

/* ------------------------------------------------------------------ per-type feature tables */

tma_status_t gnn_type_feats_create(tma_gnn_backend_t *b, const tma_gnn_config_t *cfg, const tma_graph_t *g,
                                   gnn_type_feats_t *tf_p)
{
    gnn_type_feats_t tf;
    memset(&tf, 0, sizeof tf);
    tf.num_types = cfg->num_node_types;
    tma_status_t st = TMA_OK;
    int64_t count[TMA_GNN_MAX_TYPES] = {0};
    if (!(tf.row = malloc((size_t)TMA_MAX(g->num_nodes, 1) * sizeof *tf.row)))
        st = TMA_ERR_NOMEM;
    for (int64_t v = 0; v < g->num_nodes && st == TMA_OK; v++)
        tf.row[v] = count[g->node_type[v]]++;
    for (int t = 0; t < tf.num_types && st == TMA_OK; t++) {
        const int64_t d = cfg->type_dims[t], n = TMA_MAX(count[t], 1);
        if (!(tf.host[t] = calloc((size_t)(n * d), sizeof(float)))) {
            st = TMA_ERR_NOMEM;
            break;
        }
        for (int64_t v = 0; v < g->num_nodes; v++)
            if (g->node_type[v] == t)
                tma_feat_widen((const char *)g->features + (size_t)v * tma_graph_feat_row_bytes(g), g->feat_dtype,
                               (size_t)d, tf.host[t] + tf.row[v] * d);
        st = tma_gnn_feat_create(b, tf.host[t], TMA_FEAT_F32, n, d, 0, &tf.feats[t]);
    }
    if (st != TMA_OK) {
        gnn_type_feats_destroy(b, &tf);
        return st;
    }
    *tf_p = tf;
    return TMA_OK;
}

void gnn_type_feats_destroy(tma_gnn_backend_t *b, gnn_type_feats_t *tf)
{
    for (int t = 0; t < TMA_GNN_MAX_TYPES; t++) {
        tma_gnn_feat_destroy(b, tf->feats[t]);
        free(tf->host[t]);
    }
    free(tf->row);
    memset(tf, 0, sizeof *tf);
}

tma_status_t gnn_type_feats_order(const gnn_type_feats_t *tf, const int64_t *nodes, const int32_t *types,
                                  int64_t n, int32_t *order_p, int64_t *offsets_p, int64_t *ids_p)
{
    tma_status_t st = gnn_type_partition(types, n, tf->num_types, order_p, offsets_p);
    for (int64_t k = 0; k < n && st == TMA_OK; k++)
        ids_p[k] = tf->row[nodes ? nodes[order_p[k]] : order_p[k]];
    return st;
}
