/*
 * test_trainer.c: the trainer and evaluator as the distributed roles use
 * them: determinism for a seed, step == compute_grads + apply_grads, the
 * parameter and gradient blocks, CPU against the reference backend, graph
 * sets (proportional choice, replacement keeping the weights), learning on
 * a planted-partition graph, and the MRR's tie rule; and the same for the
 * heterogeneous models (rgcn + distmult, gcn + distmult, rgcn + mlp) on a
 * typed SBM, with negatives of the tail's node type and DistMult scoring
 * each evaluation edge with its relation.
 */
#include "tma_test.h"
#include "gnn_int.h"
#include "gnn_testutil.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static tma_gnn_config_t small_config(tma_gnn_encoder_t enc)
{
    return gnn_test_config(enc, 24, 16, 64, 6, 4, 17);
}

static tma_gnn_config_t hetero_config(tma_gnn_encoder_t enc, tma_gnn_decoder_t dec)
{
    tma_gnn_config_t c = small_config(enc);
    c.decoder = dec;
    c.bases = 3;
    return c;
}

static const char *model_name(const tma_gnn_config_t *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s+%s", tma_gnn_encoder_name(c->encoder), tma_gnn_decoder_name(c->decoder));
    return buf;
}

static float *params_of(tma_gnn_trainer_t *tr)
{
    float *p = malloc((size_t)tma_gnn_trainer_param_count(tr) * 4);
    CHECK_OK(tma_gnn_trainer_get_params(tr, p));
    return p;
}

static double max_rel(const float *a, const float *b, int64_t n)
{
    double mx = 1e-30, e = 0;
    for (int64_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(b[i]));
        e = fmax(e, fabs((double)a[i] - b[i]));
    }
    return e / mx;
}

static void check_determinism(tma_graph_t *g, tma_gnn_config_t c)
{
    char name[64];
    model_name(&c, name, sizeof name);
    tma_gnn_trainer_t *a, *b;
    CHECK_OK(tma_gnn_trainer_create(&c, &g, 1, &a));
    CHECK_OK(tma_gnn_trainer_create(&c, &g, 1, &b));
    for (int s = 0; s < 6; s++) {
        float la, lb;
        CHECK_OK(tma_gnn_trainer_step(a, &la));
        /* the other one in two halves */
        CHECK_OK(tma_gnn_trainer_compute_grads(b, &lb));
        CHECK_OK(tma_gnn_trainer_apply_grads(b));
        ASSERT_EQ(la, lb);
    }
    ASSERT_EQ(tma_gnn_trainer_steps(a), 6);
    ASSERT_EQ(tma_gnn_trainer_steps(b), 6);
    int64_t n = tma_gnn_trainer_param_count(a);
    float *pa = params_of(a), *pb = params_of(b);
    CHECK_MSG(memcmp(pa, pb, (size_t)n * 4) == 0, "%s: same seed, different weights", name);
    if (tma_graph_is_typed(g)) {
        /* The relation ids are recorded from the graph; negatives are of the positive tail's type. */
        ASSERT_EQ(tma_gnn_trainer_config(a)->num_rel_ids, 2 * g->num_relations);
        /* RGCN projects each node type's own features first. */
        const tma_gnn_config_t *rc = tma_gnn_trainer_config(a);
        ASSERT_EQ(rc->num_node_types, c.encoder == TMA_GNN_ENCODER_RGCN ? g->num_node_types : 0);
        for (int t = 0; t < rc->num_node_types; t++)
            ASSERT_EQ(rc->type_dims[t], g->type_feat_dim[t]);
        gnn_batch_view_t v;
        gnn_trainer_last_batch(a, &v);
        int wrong = 0;
        for (int64_t k = 2 * (int64_t)c.batch_size; k < (2 + (int64_t)c.negatives) * c.batch_size; k++)
            wrong += g->node_type[v.seeds[k]] != g->node_type[v.seeds[c.batch_size + k % c.batch_size]];
        CHECK_MSG(wrong == 0, "%s: %d negatives not of their tail's type", name, wrong);
    }
    /* Another seed draws other batches. */
    tma_gnn_config_t c2 = c;
    c2.seed = 18;
    tma_gnn_trainer_t *d;
    CHECK_OK(tma_gnn_trainer_create(&c2, &g, 1, &d));
    CHECK_OK(tma_gnn_trainer_set_params(d, params_of(a) /* leaks a copy below */));
    free(pa);
    pa = params_of(a);
    CHECK_OK(tma_gnn_trainer_set_params(d, pa));
    float ld, la;
    CHECK_OK(tma_gnn_trainer_compute_grads(d, &ld));
    CHECK_OK(tma_gnn_trainer_compute_grads(a, &la));
    ASSERT_NE(ld, la);
    free(pa);
    free(pb);
    tma_gnn_trainer_destroy(a);
    tma_gnn_trainer_destroy(b);
    tma_gnn_trainer_destroy(d);
}

/* The CPU backend and the reference backend agree on a whole step. */
static void check_backends(tma_graph_t *g, tma_gnn_config_t c)
{
    char name[64];
    model_name(&c, name, sizeof name);
    tma_gnn_trainer_t *cpu, *ref;
    CHECK_OK(gnn_trainer_create_on("cpu", &c, &g, 1, &cpu));
    CHECK_OK(gnn_trainer_create_on("ref", &c, &g, 1, &ref));
    int64_t n = tma_gnn_trainer_param_count(cpu);
    float *g1 = malloc((size_t)n * 4), *g2 = malloc((size_t)n * 4);
    for (int s = 0; s < 3; s++) {
        float l1, l2;
        CHECK_OK(tma_gnn_trainer_compute_grads(cpu, &l1));
        CHECK_OK(tma_gnn_trainer_compute_grads(ref, &l2));
        CHECK_NEAR(l1, l2, 1e-5 * fabs(l2));
        CHECK_OK(tma_gnn_trainer_get_grads(cpu, g1));
        CHECK_OK(tma_gnn_trainer_get_grads(ref, g2));
        CHECK_MSG(max_rel(g1, g2, n) < 1e-4, "%s step %d: cpu and ref gradients differ by %.3g", name, s,
                  max_rel(g1, g2, n));
        CHECK_OK(tma_gnn_trainer_apply_grads(cpu));
        CHECK_OK(tma_gnn_trainer_apply_grads(ref));
    }
    float *p1 = params_of(cpu), *p2 = params_of(ref);
    ASSERT_LT(max_rel(p1, p2, n), 1e-4);
    free(p1);
    free(p2);
    free(g1);
    free(g2);
    tma_gnn_trainer_destroy(cpu);
    tma_gnn_trainer_destroy(ref);
}

/* 40 steps of c: the mean loss of the last 5 is below that of the first 5. */
static void check_loss_falls(tma_graph_t *g, const tma_gnn_config_t *c, const char *what)
{
    tma_gnn_trainer_t *t;
    CHECK_OK(tma_gnn_trainer_create(c, &g, 1, &t));
    double first = 0, last = 0;
    for (int s = 0; s < 40; s++) {
        float loss;
        CHECK_OK(tma_gnn_trainer_step(t, &loss));
        ASSERT_EQ(isfinite(loss), 1);
        if (s < 5)
            first += loss / 5;
        if (s >= 35)
            last += loss / 5;
    }
    CHECK_MSG(last < first, "%s: loss %.3f -> %.3f", what, first, last);
    tma_gnn_trainer_destroy(t);
}

/* train.negatives: K tails a positive edge, each scored with the edge's
 * head; the loss is the positives' mean and the negatives' mean, one half
 * each, whatever K; deterministic and the same on both backends. */
static void check_negatives(tma_graph_t *g)
{
    tma_gnn_config_t c = small_config(TMA_GNN_ENCODER_SAGE);
    c.negatives = 4;
    check_determinism(g, c);
    check_backends(g, c);
    for (int k = 1; k <= 4; k += 3) {
        c.negatives = k;
        tma_gnn_trainer_t *tr;
        CHECK_OK(tma_gnn_trainer_create(&c, &g, 1, &tr));
        float l;
        CHECK_OK(tma_gnn_trainer_compute_grads(tr, &l));
        gnn_batch_view_t v;
        gnn_trainer_last_batch(tr, &v);
        const int64_t B = c.batch_size;
        ASSERT_EQ(v.num_pairs, (1 + k) * B);
        int64_t self = 0, repeated = 0;
        for (int64_t p = 0; p < v.num_pairs; p++) {
            /* Pair p's head is edge p mod B's head; its tail is seed B + p. */
            ASSERT_EQ(v.sample->nodes[v.head[p]], v.seeds[p % B]);
            ASSERT_EQ(v.sample->nodes[v.tail[p]], v.seeds[B + p]);
            if (p >= B) {
                const int64_t t = v.seeds[B + p];
                self += t == v.seeds[p % B] || t == v.seeds[B + p % B];
                repeated += p >= 2 * B && t == v.seeds[p]; /* the same tail as the edge's previous negative */
            }
        }
        CHECK_MSG(self == 0, "%lld negatives are the edge's own head or tail", (long long)self);
        CHECK_MSG(repeated < B / 4 + 1, "K = %d: %lld of the negatives repeat the one before", k, (long long)repeated);
        /* Every weight zero but the last decoder bias b: every logit is b,
         * so the loss is (softplus(-b) + softplus(b)) / 2 under the halves
         * (the mean over all (1 + K)B logits would weigh softplus(b) K times). */
        tma_gnn_layout_t lay;
        CHECK_OK(tma_gnn_layout_build(tma_gnn_trainer_config(tr), &lay));
        float *p = calloc((size_t)lay.total, 4);
        int found = 0;
        for (int i = 0; i < lay.count; i++)
            if (strcmp(lay.params[i].name, "dec.1.bias") == 0) {
                p[lay.params[i].offset] = 2.0f;
                found = 1;
            }
        CHECK(found);
        CHECK_OK(tma_gnn_trainer_set_params(tr, p));
        double loss;
        CHECK_OK(gnn_trainer_recompute(tr, &loss));
        CHECK_NEAR(loss, 0.5 * (log1p(exp(-2.0)) + log1p(exp(2.0))), 1e-5);
        free(p);
        tma_gnn_trainer_destroy(tr);
    }
    /* And it learns. */
    c.negatives = 4;
    check_loss_falls(g, &c, "4 negatives");
}

/* model.dropout: training with it still learns (the loss of its last steps
 * is below that of its first); that the masks follow the seed, so a run is
 * the same run again, is checked through tma train (test_train_cli.sh). */
static void check_dropout(tma_graph_t *g)
{
    tma_gnn_config_t c = small_config(TMA_GNN_ENCODER_SAGE);
    c.dropout = 0.5;
    check_loss_falls(g, &c, "dropout 0.5");
}

/* The optimizer takes the schedule's rate and decoupled weight decay: with
 * warmup_steps 2 the first Adam step moves each parameter by lr/2 (Adam's
 * first step is lr * sign(g), up to eps), and weight decay wd shrinks
 * every weight by lr/2 * wd * p before it (AdamW), given the same gradients. */
static void check_decay_and_schedule(tma_graph_t *g)
{
    tma_gnn_config_t c = small_config(TMA_GNN_ENCODER_GCN);
    c.lr = 0.01;
    c.clip = 0;
    c.lr_schedule.kind = TMA_GNN_LR_COSINE;
    c.lr_schedule.warmup_steps = 2;
    c.lr_schedule.steps = 100;
    tma_gnn_trainer_t *a, *b;
    CHECK_OK(tma_gnn_trainer_create(&c, &g, 1, &a));
    c.weight_decay = 0.5;
    CHECK_OK(tma_gnn_trainer_create(&c, &g, 1, &b));
    int64_t n = tma_gnn_trainer_param_count(a);
    float *p0 = params_of(a), *grads = malloc((size_t)n * 4);
    CHECK_OK(tma_gnn_trainer_compute_grads(a, NULL));
    CHECK_OK(tma_gnn_trainer_get_grads(a, grads));
    CHECK_OK(tma_gnn_trainer_set_grads(b, grads));
    CHECK_OK(tma_gnn_trainer_apply_grads(a));
    CHECK_OK(tma_gnn_trainer_apply_grads(b));
    float *pa = params_of(a), *pb = params_of(b);
    const double lr0 = 0.005; /* step 0 of a 2-step warmup */
    double max_move = 0, worst = 0;
    int64_t moved = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)pa[i] - p0[i];
        max_move = fmax(max_move, fabs(d));
        moved += grads[i] != 0 && fabs(fabs(d) - lr0) < 1e-3 * lr0;
        double want = -lr0 * 0.5 * p0[i]; /* pb - pa */
        worst = fmax(worst, fabs(((double)pb[i] - pa[i]) - want) / (fabs(p0[i]) * 1e-6 + 1e-8));
    }
    ASSERT_LE(max_move, lr0 * 1.001);
    ASSERT_GT(moved, n / 2); /* most parameters moved by exactly lr0 */
    ASSERT_LE(worst, 1.0);   /* pb = pa - lr0 * wd * p0, to float rounding */
    free(p0);
    free(pa);
    free(pb);
    free(grads);
    tma_gnn_trainer_destroy(a);
    tma_gnn_trainer_destroy(b);
}

/* Blocks in and out: averaging gradients between two trainers (synchronous
 * SGD) keeps them in lock step; setting parameters replaces the weights. */
static void check_blocks(tma_graph_t *g)
{
    tma_gnn_config_t c = small_config(TMA_GNN_ENCODER_SAGE);
    tma_gnn_trainer_t *a, *b;
    CHECK_OK(tma_gnn_trainer_create(&c, &g, 1, &a));
    c.seed = 99; /* other batches, other initial weights */
    CHECK_OK(tma_gnn_trainer_create(&c, &g, 1, &b));
    int64_t n = tma_gnn_trainer_param_count(a);
    ASSERT_EQ(n, tma_gnn_param_count(tma_gnn_trainer_config(a)));
    float *pa = params_of(a), *pb = params_of(b);
    ASSERT_NE(memcmp(pa, pb, (size_t)n * 4), 0);
    CHECK_OK(tma_gnn_trainer_set_params(b, pa));
    float *ga = malloc((size_t)n * 4), *gb = malloc((size_t)n * 4);
    for (int s = 0; s < 3; s++) {
        CHECK_OK(tma_gnn_trainer_compute_grads(a, NULL));
        CHECK_OK(tma_gnn_trainer_compute_grads(b, NULL));
        CHECK_OK(tma_gnn_trainer_get_grads(a, ga));
        CHECK_OK(tma_gnn_trainer_get_grads(b, gb));
        for (int64_t i = 0; i < n; i++)
            ga[i] = 0.5f * (ga[i] + gb[i]);
        CHECK_OK(tma_gnn_trainer_set_grads(a, ga));
        CHECK_OK(tma_gnn_trainer_set_grads(b, ga));
        CHECK_OK(tma_gnn_trainer_apply_grads(a));
        CHECK_OK(tma_gnn_trainer_apply_grads(b));
    }
    free(pa);
    free(pb);
    pa = params_of(a);
    pb = params_of(b);
    ASSERT_EQ(memcmp(pa, pb, (size_t)n * 4), 0);
    free(pa);
    free(pb);
    free(ga);
    free(gb);
    tma_gnn_trainer_destroy(a);
    tma_gnn_trainer_destroy(b);
}

/* Several graphs: batches come from each in proportion to its training
 * edges; replacing the set keeps the weights and the step count. */
static void check_graph_sets(void)
{
    gnn_test_graph_opts_t o;
    gnn_test_graph_defaults(&o);
    o.nodes = 200;
    o.avg_degree = 4;
    tma_graph_t *g1 = gnn_test_graph(&o);
    o.nodes = 300;
    o.avg_degree = 12;
    o.seed = 5;
    tma_graph_t *g2 = gnn_test_graph(&o);
    tma_graph_t *both[2] = {g1, g2};
    tma_gnn_config_t c = small_config(TMA_GNN_ENCODER_GCN);
    c.batch_size = 8;
    tma_gnn_trainer_t *tr;
    CHECK_OK(tma_gnn_trainer_create(&c, both, 2, &tr));
    int hits[2] = {0, 0};
    const int trials = 600;
    for (int s = 0; s < trials; s++) {
        CHECK_OK(tma_gnn_trainer_compute_grads(tr, NULL));
        gnn_batch_view_t bv;
        gnn_trainer_last_batch(tr, &bv);
        hits[bv.graph_index]++;
        /* the pairs point at the seeds they were drawn for */
        const tma_graph_t *g = both[bv.graph_index];
        for (int64_t p = 0; p < c.batch_size; p++) {
            int64_t u = bv.sample->nodes[bv.head[p]], v = bv.sample->nodes[bv.tail[p]];
            ASSERT_EQ(u, bv.seeds[p]);
            ASSERT_EQ(v, bv.seeds[c.batch_size + p]);
            CHECK(tma_graph_has_edge(g, u, v));
            int64_t t = bv.sample->nodes[bv.tail[c.batch_size + p]];
            ASSERT_NE(t, u);
            ASSERT_NE(t, v);
            ASSERT_LT(t, g->num_nodes);
        }
    }
    double want = (double)g1->num_train_edges / (double)(g1->num_train_edges + g2->num_train_edges);
    double got = (double)hits[0] / trials;
    CHECK_MSG(fabs(got - want) < 5 * sqrt(want * (1 - want) / trials), "graph 0 chosen %.3f, expected %.3f", got,
              want);
    int64_t n = tma_gnn_trainer_param_count(tr);
    CHECK_OK(tma_gnn_trainer_apply_grads(tr));
    float *before = params_of(tr);
    CHECK_OK(tma_gnn_trainer_set_graphs(tr, &g2, 1));
    float *after = params_of(tr);
    ASSERT_EQ(memcmp(before, after, (size_t)n * 4), 0);
    ASSERT_EQ(tma_gnn_trainer_steps(tr), 1);
    for (int s = 0; s < 5; s++) {
        CHECK_OK(tma_gnn_trainer_step(tr, NULL));
        gnn_batch_view_t bv;
        gnn_trainer_last_batch(tr, &bv);
        ASSERT_EQ(bv.graph_index, 0);
    }
    ASSERT_EQ(tma_gnn_trainer_steps(tr), 6);
    free(before);
    free(after);

    /* Features of another width are refused. */
    o.feature_dim = 7;
    tma_graph_t *g3 = gnn_test_graph(&o);
    tma_graph_t *mixed[2] = {g1, g3};
    tma_gnn_trainer_t *bad = NULL;
    CHECK_STATUS(tma_gnn_trainer_create(&c, mixed, 2, &bad), TMA_ERR_MISMATCH);
    ASSERT_NULL(bad);
    c.feature_dim = 9;
    CHECK_STATUS(tma_gnn_trainer_create(&c, &g1, 1, &bad), TMA_ERR_MISMATCH);
    tma_gnn_trainer_destroy(tr);
    tma_graph_destroy(g1);
    tma_graph_destroy(g2);
    tma_graph_destroy(g3);
}

/* A constant decoder scores every candidate alike: each positive ties with
 * all its negatives and ranks last, so MRR = 1 / (negatives + 1); under the
 * mean rule (OGB's) it ranks 1 + negatives / 2, and Hits@K follows. */
static void check_ties(tma_graph_t *g)
{
    tma_gnn_config_t c = small_config(TMA_GNN_ENCODER_GCN);
    tma_gnn_evaluator_t *ev;
    CHECK_OK(tma_gnn_evaluator_create(&c, g, &ev));
    tma_gnn_config_t rc = c;
    CHECK_OK(tma_gnn_config_resolve(&rc, g));
    tma_gnn_layout_t lay;
    CHECK_OK(tma_gnn_layout_build(&rc, &lay));
    float *p = calloc((size_t)lay.total, 4);
    CHECK_OK(tma_gnn_params_init(&rc, 1, p));
    for (int i = 0; i < lay.count; i++)
        if (strncmp(lay.params[i].name, "dec.", 4) == 0 && strstr(lay.params[i].name, "weight"))
            memset(p + lay.params[i].offset, 0, (size_t)(lay.params[i].rows * lay.params[i].cols) * 4);
    double mrr;
    CHECK_OK(tma_gnn_evaluator_mrr(ev, p, TMA_GNN_SPLIT_TEST, &mrr));
    CHECK_NEAR(mrr, 1.0 / (g->num_negatives + 1), 1e-12);
    tma_gnn_evaluator_destroy(ev);

    const int K = g->num_negatives;
    c.eval_ties = TMA_GNN_TIES_MEAN;
    c.eval_num_hits = 2;
    c.eval_hits[0] = K / 2;     /* below the mean rank 1 + K/2: no hit */
    c.eval_hits[1] = (K + 3) / 2; /* at or just above it: every edge a hit */
    CHECK_OK(tma_gnn_evaluator_create(&c, g, &ev));
    tma_gnn_metrics_t m;
    CHECK_OK(tma_gnn_evaluator_metrics(ev, p, TMA_GNN_SPLIT_TEST, &m));
    ASSERT_EQ(m.ties, TMA_GNN_TIES_MEAN);
    ASSERT_EQ(m.edges, g->num_test);
    CHECK_NEAR(m.mrr, 1.0 / (1.0 + K / 2.0), 1e-12);
    CHECK_NEAR(m.mrr_pessimistic, 1.0 / (K + 1), 1e-12);
    CHECK_NEAR(m.hits[0], 0.0, 0);
    CHECK_NEAR(m.hits[1], 1.0, 0);
    free(p);
    tma_gnn_evaluator_destroy(ev);
}

typedef struct eval_job {
    tma_gnn_evaluator_t *ev;
    const float *params;
    double mrr;
    tma_status_t st;
} eval_job_t;

static void *eval_thread(void *arg)
{
    eval_job_t *j = arg;
    j->st = tma_gnn_evaluator_mrr(j->ev, j->params, TMA_GNN_SPLIT_VAL, &j->mrr);
    return NULL;
}

/* Training on a planted partition lifts MRR well above the untrained
 * model's; evaluation from another thread while training goes on gives the
 * same answer; the CPU and reference evaluators agree. */
static void check_learning(tma_graph_t *g, tma_gnn_config_t c, int steps, double floor, double ratio, double gain)
{
    char name[64];
    model_name(&c, name, sizeof name);
    tma_gnn_trainer_t *tr;
    tma_gnn_evaluator_t *ev, *ref;
    CHECK_OK(tma_gnn_trainer_create(&c, &g, 1, &tr));
    CHECK_OK(tma_gnn_evaluator_create(&c, g, &ev));
    CHECK_OK(gnn_evaluator_create_on("ref", &c, g, &ref));
    float *p0 = params_of(tr);
    double m0, m1, mr;
    CHECK_OK(tma_gnn_evaluator_mrr(ev, p0, TMA_GNN_SPLIT_VAL, &m0));
    CHECK_OK(tma_gnn_evaluator_mrr(ref, p0, TMA_GNN_SPLIT_VAL, &mr));
    CHECK_NEAR(m0, mr, 1e-9);
    float first = 0, last = 0;
    for (int s = 0; s < steps; s++) {
        float l;
        CHECK_OK(tma_gnn_trainer_step(tr, &l));
        if (s < 10)
            first += l / 10;
        if (s >= steps - 10)
            last += l / 10;
    }
    float *p1 = params_of(tr);
    eval_job_t job = {ev, p1, 0, TMA_ERR_INTERNAL};
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, eval_thread, &job), 0);
    for (int s = 0; s < 5; s++)
        CHECK_OK(tma_gnn_trainer_step(tr, NULL));
    ASSERT_EQ(pthread_join(th, NULL), 0);
    CHECK_OK(job.st);
    CHECK_OK(tma_gnn_evaluator_mrr(ev, p1, TMA_GNN_SPLIT_VAL, &m1));
    ASSERT_EQ(m1, job.mrr);
    CHECK_OK(tma_gnn_evaluator_mrr(ref, p1, TMA_GNN_SPLIT_VAL, &mr));
    CHECK_NEAR(m1, mr, 1e-9);
    fprintf(stderr, "%s: loss %.3f -> %.3f, validation MRR %.3f -> %.3f\n", name, first, last, m0, m1);
    ASSERT_LT(last, first);
    CHECK_MSG(m1 > ratio * m0 && m1 > m0 + gain && m1 > floor, "%s did not learn: MRR %.3f -> %.3f", name, m0, m1);
    free(p0);
    free(p1);
    tma_gnn_evaluator_destroy(ev);
    tma_gnn_evaluator_destroy(ref);
    tma_gnn_trainer_destroy(tr);
}

/* DistMult scores an evaluation edge and its negatives with the edge's
 * relation: scaling relation r's diagonal by r + 1 scales exactly those
 * scores (and keeps the ranks). */
static void check_relation_used(tma_graph_t *g)
{
    tma_gnn_config_t c = hetero_config(TMA_GNN_ENCODER_GCN, TMA_GNN_DECODER_DISTMULT);
    tma_gnn_evaluator_t *ev;
    CHECK_OK(tma_gnn_evaluator_create(&c, g, &ev));
    CHECK_OK(tma_gnn_config_resolve(&c, g));
    tma_gnn_layout_t lay;
    CHECK_OK(tma_gnn_layout_build(&c, &lay));
    float *p = malloc((size_t)lay.total * 4);
    CHECK_OK(tma_gnn_params_init(&c, 3, p));
    const tma_gnn_param_info_t *d = &lay.params[lay.count - 1];
    ASSERT_STR_EQ(d->name, "dec.relation");
    int64_t ne = tma_gnn_evaluator_edges(ev, TMA_GNN_SPLIT_VAL), per = 1 + g->num_negatives;
    float *s1 = malloc((size_t)(ne * per) * 4), *s2 = malloc((size_t)(ne * per) * 4);
    double m1, m2;
    CHECK_OK(tma_gnn_evaluator_scores(ev, p, TMA_GNN_SPLIT_VAL, s1, &m1));
    for (int64_t r = 0; r < d->rows; r++)
        for (int64_t k = 0; k < d->cols; k++)
            p[d->offset + r * d->cols + k] *= (float)(r + 1);
    CHECK_OK(tma_gnn_evaluator_scores(ev, p, TMA_GNN_SPLIT_VAL, s2, &m2));
    int bad = 0;
    for (int64_t i = 0; i < ne * per; i++) {
        float f = (float)(g->val_rel[i / per] + 1);
        bad += fabsf(s2[i] - f * s1[i]) > 1e-4f * (1 + fabsf(s2[i]));
    }
    CHECK_MSG(bad == 0, "%d DistMult scores do not follow their edge's relation", bad);
    CHECK_NEAR(m1, m2, 1e-12);
    free(s1);
    free(s2);
    free(p);
    tma_gnn_evaluator_destroy(ev);
}

/* eval.node_order "locality" renames the embedding tables' rows, not the
 * numbers: every score and every exported embedding is the one id order
 * gives, with several inference chunks (37 rows each) and on a graph whose
 * order moves most nodes. */
static void check_node_order(tma_graph_t *g, tma_gnn_config_t c)
{
    const int64_t N = g->num_nodes;
    int32_t *node = malloc((size_t)N * 4), *pos = malloc((size_t)N * 4);
    CHECK_OK(tma_graph_locality_order(g, 1024, node, pos));
    int64_t moved = 0;
    for (int64_t v = 0; v < N; v++)
        moved += pos[v] != v;
    CHECK_MSG(moved > N / 2, "the locality order moves only %lld of %lld nodes", (long long)moved, (long long)N);
    free(node);
    free(pos);
    /* Id order, the locality order, the locality order with its blocks
     * built at every inference instead of once (eval.block_cache_mb = 0),
     * and with the dense features read in place instead of copied into the
     * locality order (eval.feature_copy_mb = 0). */
    enum { NEV = 4 };
    tma_gnn_evaluator_t *ev[NEV];
    for (int i = 0; i < NEV; i++) {
        c.eval_locality = i > 0;
        c.eval_block_cache_mb = i == 2 ? 0 : 256;
        c.eval_feature_copy_mb = i == 3 ? 0 : 1024;
        CHECK_OK(tma_gnn_evaluator_create(&c, g, &ev[i]));
        gnn_evaluator_set_chunk_rows(ev[i], 37);
    }
    CHECK_OK(tma_gnn_config_resolve(&c, g));
    tma_gnn_layout_t lay;
    CHECK_OK(tma_gnn_layout_build(&c, &lay));
    float *p = malloc((size_t)lay.total * 4);
    CHECK_OK(tma_gnn_params_init(&c, 5, p));
    const int64_t ne = tma_gnn_evaluator_edges(ev[0], TMA_GNN_SPLIT_VAL), per = 1 + g->num_negatives;
    float *s[NEV], *emb[NEV];
    double mrr[NEV];
    for (int i = 0; i < NEV; i++) {
        s[i] = malloc((size_t)(ne * per) * 4);
        emb[i] = malloc((size_t)(N * c.hidden) * 4);
        CHECK_OK(tma_gnn_evaluator_scores(ev[i], p, TMA_GNN_SPLIT_VAL, s[i], &mrr[i]));
        CHECK_OK(tma_gnn_evaluator_embeddings(ev[i], p, emb[i]));
    }
    char name[64];
    double es = max_rel(s[1], s[0], ne * per), ee = max_rel(emb[1], emb[0], N * c.hidden);
    CHECK_MSG(es < 1e-5 && ee < 1e-5, "%s: locality order differs from id order (scores %.2g, embeddings %.2g)",
              model_name(&c, name, sizeof name), es, ee);
    CHECK_NEAR(mrr[1], mrr[0], 1e-3);
    /* The same blocks, built once or at every inference: the same numbers. */
    CHECK_MSG(memcmp(s[2], s[1], (size_t)(ne * per) * 4) == 0 && memcmp(emb[2], emb[1], (size_t)(N * c.hidden) * 4) == 0,
              "%s: blocks built once and at every inference give different numbers", name);
    /* The features copied or read in place: the same numbers. */
    CHECK_MSG(memcmp(s[3], s[1], (size_t)(ne * per) * 4) == 0 && memcmp(emb[3], emb[1], (size_t)(N * c.hidden) * 4) == 0,
              "%s: features read in place and copied give different numbers", name);
    for (int i = 0; i < NEV; i++) {
        free(s[i]);
        free(emb[i]);
        tma_gnn_evaluator_destroy(ev[i]);
    }
    free(p);
}

static void check_hetero(void)
{
    /* Noisy features: the graph has to carry the classes. */
    tma_graph_t *g = gnn_test_typed_graph(600, 20, 3.0, 2, 3, 12, 60, 30, 5);
    ASSERT_EQ(g->num_node_types, 2);
    const tma_gnn_config_t models[] = {
        hetero_config(TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_DISTMULT),
        hetero_config(TMA_GNN_ENCODER_GCN, TMA_GNN_DECODER_DISTMULT),
        hetero_config(TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_MLP),
    };
    for (size_t i = 0; i < TMA_ARRAY_LEN(models); i++) {
        check_determinism(g, models[i]);
        check_backends(g, models[i]);
    }
    /* Several negatives on a typed graph: each of its tail's type, each with the edge's relation. */
    tma_gnn_config_t kn = hetero_config(TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_DISTMULT);
    kn.negatives = 3;
    check_determinism(g, kn);
    check_backends(g, kn);
    /* The dot decoder on a typed graph: no relation ids on the pairs. */
    check_backends(g, hetero_config(TMA_GNN_ENCODER_RGCN, TMA_GNN_DECODER_DOT));
    check_relation_used(g);
    /* Clearly above the untrained model (whose features already rank some
     * edges: GCN's propagation of noisy centroids). */
    for (size_t i = 0; i < TMA_ARRAY_LEN(models); i++)
        check_learning(g, models[i], 200, 0.4, 1.0, 0.1);
    tma_graph_destroy(g);
}

int main(void)
{
    tma_log_set_level(TMA_LOG_ERROR);
    gnn_test_graph_opts_t o;
    gnn_test_graph_defaults(&o);
    tma_graph_t *g = gnn_test_graph(&o);
    o.sparse = 1;
    o.feature_dim = 120;
    tma_graph_t *gs = gnn_test_graph(&o);
    double t0 = tma_clock_now();
    for (int e = 0; e < 3; e++) {
        check_determinism(g, small_config((tma_gnn_encoder_t)e));
        check_determinism(gs, small_config((tma_gnn_encoder_t)e));
        check_backends(g, small_config((tma_gnn_encoder_t)e));
        check_backends(gs, small_config((tma_gnn_encoder_t)e));
        /* The dot decoder: CPU against the reference, dense and sparse. */
        tma_gnn_config_t dot = small_config((tma_gnn_encoder_t)e);
        dot.decoder = TMA_GNN_DECODER_DOT;
        check_backends(g, dot);
        check_backends(gs, dot);
    }
    check_determinism(g, hetero_config(TMA_GNN_ENCODER_SAGE, TMA_GNN_DECODER_DOT));
    double t1 = tma_clock_now();
    check_dropout(g);
    check_negatives(g);
    check_decay_and_schedule(g);
    check_blocks(g);
    for (int e = 0; e < 2; e++) { /* GCN and SAGE: the encoders that aggregate */
        check_node_order(g, small_config((tma_gnn_encoder_t)e));
        check_node_order(gs, small_config((tma_gnn_encoder_t)e));
    }
    check_graph_sets();
    check_ties(g);
    double t2 = tma_clock_now();
    o.sparse = 0;
    o.nodes = 600;
    o.communities = 20;
    o.avg_degree = 10;
    o.feature_dim = 40;
    o.val = o.test = 60;
    tma_graph_t *gl = gnn_test_graph(&o);
    /* The features carry the community weakly, so the graph-agnostic MLP gets less far. */
    for (int e = 0; e < 3; e++)
        check_learning(gl, small_config((tma_gnn_encoder_t)e), 150, e == TMA_GNN_ENCODER_MLP ? 0.15 : 0.4, 2.0, 0.0);
    check_learning(gl, hetero_config(TMA_GNN_ENCODER_SAGE, TMA_GNN_DECODER_DOT), 150, 0.4, 2.0, 0.0);
    tma_graph_destroy(gl);
    double t3 = tma_clock_now();
    check_hetero();
    fprintf(stderr, "seconds: backends %.1f, blocks and graph sets %.1f, learning %.1f, heterogeneous %.1f\n",
            t1 - t0, t2 - t1, t3 - t2, tma_clock_now() - t3);
    tma_graph_destroy(g);
    tma_graph_destroy(gs);
    return tma_test_done();
}
