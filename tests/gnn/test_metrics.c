/* test_metrics.c: the ranking metrics (tma_gnn_metrics_*) on scores whose
 * MRR, Hits@K and ROC AUC are worked out by hand here, ties and NaN
 * included; the AUC is the mean over edges of each edge's own AUC. */
#include "tma_test.h"
#include "tma_gnn.h"

#include <math.h>
#include <string.h>

/* Four edges, each the positive's score and then its 4 negatives'. */
static const float rows[4][5] = {
    /* 1 below, 2 ties, 1 above: AUC (1 + 2/2) / 4 = 0.5; rank 1 + 1 + 2 = 4 (pessimistic), 1 + 1 + 1 = 3 (mean) */
    {0.5f, 0.1f, 0.5f, 0.9f, 0.5f},
    /* 3 below, 1 above: AUC 0.75; rank 2 under both rules */
    {2.0f, 1.0f, 0.0f, -1.0f, 3.0f},
    /* a NaN negative counts above; 1 tie, 2 below: AUC (2 + 1/2) / 4 = 0.625; rank 3 or 2.5 */
    {1.0f, NAN, 1.0f, 0.0f, 0.0f},
    /* all tied (a constant model): AUC 0.5; rank 5 or 3 */
    {1.0f, 1.0f, 1.0f, 1.0f, 1.0f},
};

static tma_gnn_metrics_t ranked(tma_gnn_ties_t ties, int split)
{
    tma_gnn_config_t c;
    tma_gnn_config_default(&c);
    c.eval_ties = ties;
    c.eval_num_hits = 2;
    c.eval_hits[0] = 2;
    c.eval_hits[1] = 3;
    tma_gnn_metrics_t m;
    tma_gnn_metrics_init(&m, &c);
    /* In two chunks or one: the sums do not care. */
    tma_gnn_metrics_add(&m, rows[0], split, 5);
    tma_gnn_metrics_add(&m, rows[split], 4 - split, 5);
    tma_gnn_metrics_finish(&m);
    return m;
}

int main(void)
{
    for (int split = 1; split <= 3; split += 2) {
        tma_gnn_metrics_t p = ranked(TMA_GNN_TIES_PESSIMISTIC, split), m = ranked(TMA_GNN_TIES_MEAN, split);
        ASSERT_EQ(p.edges, 4);
        /* AUC: (0.5 + 0.75 + 0.625 + 0.5) / 4, whichever tie rule ranks. */
        CHECK_NEAR(p.auc, 0.59375, 1e-15);
        CHECK_NEAR(m.auc, 0.59375, 1e-15);
        CHECK_NEAR(p.mrr, (1 / 4.0 + 1 / 2.0 + 1 / 3.0 + 1 / 5.0) / 4, 1e-15);
        CHECK_NEAR(m.mrr, (1 / 3.0 + 1 / 2.0 + 1 / 2.5 + 1 / 3.0) / 4, 1e-15);
        CHECK_NEAR(p.hits[0], 0.25, 0); /* ranks 4, 2, 3, 5: one within 2 */
        CHECK_NEAR(p.hits[1], 0.5, 0);
        CHECK_NEAR(m.hits[0], 0.25, 0); /* ranks 3, 2, 2.5, 3 */
        CHECK_NEAR(m.hits[1], 1.0, 0);
    }
    /* Recorded beside the MRR and Hits@K: "<prefix>auc"; left out when unknown (a device ranked alone). */
    tma_gnn_metrics_t p = ranked(TMA_GNN_TIES_PESSIMISTIC, 2);
    cJSON *o = cJSON_CreateObject();
    tma_gnn_metrics_json(&p, "val_", o);
    CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "val_auc")), 0.59375, 1e-15);
    CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "val_hits@3")), 0.5, 0);
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(o, "ties")), "pessimistic");
    cJSON_Delete(o);
    p.auc = NAN;
    o = cJSON_CreateObject();
    tma_gnn_metrics_json(&p, "test_", o);
    CHECK(!cJSON_GetObjectItem(o, "test_auc") && cJSON_GetObjectItem(o, "test_hits@2"));
    cJSON_Delete(o);
    /* A perfect and a reversed ranking: AUC 1 and 0. */
    const float perfect[2][3] = {{5.0f, 1.0f, 2.0f}, {-1.0f, 0.0f, 3.0f}};
    tma_gnn_config_t c;
    tma_gnn_config_default(&c);
    tma_gnn_metrics_t q;
    tma_gnn_metrics_init(&q, &c);
    tma_gnn_metrics_add(&q, perfect[0], 1, 3);
    tma_gnn_metrics_finish(&q);
    CHECK_NEAR(q.auc, 1.0, 0);
    tma_gnn_metrics_init(&q, &c);
    tma_gnn_metrics_add(&q, perfect[1], 1, 3);
    tma_gnn_metrics_finish(&q);
    CHECK_NEAR(q.auc, 0.0, 0);
    return tma_test_done();
}
