/* gnn_testutil.c: see gnn_testutil.h. */
#include "gnn_testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gnn_test_graph_defaults(gnn_test_graph_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->nodes = 300;
    o->communities = 4;
    o->avg_degree = 8;
    o->homophily = 0.9;
    o->feature_dim = 24;
    o->sparse = 0;
    o->val = 30;
    o->test = 30;
    o->negatives = 50;
    o->seed = 1;
}

static int cmp_pair(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

static int has_pair(const int64_t *pairs, int64_t n, int64_t a, int64_t b)
{
    int64_t key[2] = {a < b ? a : b, a < b ? b : a};
    return bsearch(key, pairs, (size_t)n, 2 * sizeof(int64_t), cmp_pair) != NULL;
}

static void die(const char *what)
{
    fprintf(stderr, "gnn_test_graph: %s\n", what);
    exit(99);
}

tma_graph_t *gnn_test_typed_graph(int64_t nodes, int classes, double noise, int types, int relations,
                                  int feature_dim, int64_t val, int negatives, uint64_t seed)
{
    tma_gen_sbm_opts_t o = {nodes, classes, 10.0, 0.9, feature_dim, noise, seed, TMA_FEAT_F32};
    tma_gen_typed_opts_t t = {types, relations};
    tma_graph_build_opts_t b;
    tma_graph_build_opts_init(&b);
    b.val = b.test = (double)val;
    b.negatives = negatives;
    b.seed = seed;
    tma_graph_t *g = NULL;
    tma_gen_report_t rep;
    if (tma_graph_gen_sbm_typed(&o, &t, &b, &g, &rep) != TMA_OK)
        die("typed SBM generation failed");
    return g;
}

tma_graph_t *gnn_test_graph(const gnn_test_graph_opts_t *o)
{
    const int64_t n = o->nodes;
    const int k = o->communities;
    tma_rng_t rng;
    tma_rng_seed(&rng, o->seed, 77);

    /* Undirected edges: each node draws avg_degree/2 partners. */
    int64_t want = (int64_t)(n * o->avg_degree / 2);
    int64_t *pairs = malloc((size_t)(want + 1) * 2 * sizeof(int64_t));
    if (!pairs)
        die("out of memory");
    int64_t m = 0;
    for (int64_t i = 0; i < want; i++) {
        int64_t a = (int64_t)tma_rng_below(&rng, (uint64_t)n), b;
        if (tma_rng_uniform(&rng) < o->homophily) {
            /* same community: a + k * r (mod n rounded to the community) */
            int64_t per = (n - a % k + k - 1) / k;
            b = a % k + k * (int64_t)tma_rng_below(&rng, (uint64_t)per);
        } else {
            b = (int64_t)tma_rng_below(&rng, (uint64_t)n);
        }
        if (a == b || b >= n)
            continue;
        pairs[2 * m] = a < b ? a : b;
        pairs[2 * m + 1] = a < b ? b : a;
        m++;
    }
    qsort(pairs, (size_t)m, 2 * sizeof(int64_t), cmp_pair);
    int64_t u = 0;
    for (int64_t i = 0; i < m; i++)
        if (u == 0 || cmp_pair(pairs + 2 * i, pairs + 2 * (u - 1)) != 0) {
            pairs[2 * u] = pairs[2 * i];
            pairs[2 * u + 1] = pairs[2 * i + 1];
            u++;
        }
    m = u;
    if (o->val + o->test >= m)
        die("not enough edges for the split");

    /* Shuffle a permutation of edge indices for the split. */
    int64_t *perm = malloc((size_t)m * sizeof *perm);
    for (int64_t i = 0; i < m; i++)
        perm[i] = i;
    tma_rng_shuffle_i64(&rng, perm, m);
    char *is_eval = calloc((size_t)m, 1);
    for (int64_t i = 0; i < o->val + o->test; i++)
        is_eval[perm[i]] = 1;

    tma_graph_t *g;
    if (tma_graph_create(&g) != TMA_OK)
        die("create failed");
    const int64_t mt = m - o->val - o->test;
    int64_t *indptr = tma_graph_alloc(g, (size_t)(n + 1) * 8);
    int64_t *indices = tma_graph_alloc(g, (size_t)(2 * mt + 1) * 8);
    int64_t *deg = calloc((size_t)n, sizeof *deg);
    for (int64_t i = 0; i < m; i++)
        if (!is_eval[i]) {
            deg[pairs[2 * i]]++;
            deg[pairs[2 * i + 1]]++;
        }
    indptr[0] = 0;
    for (int64_t v = 0; v < n; v++)
        indptr[v + 1] = indptr[v] + deg[v];
    memset(deg, 0, (size_t)n * sizeof *deg);
    /* pairs are sorted by (a, b): filling rows in pair order keeps each row sorted
     * only for the b side, so sort the rows afterwards. */
    for (int64_t i = 0; i < m; i++)
        if (!is_eval[i]) {
            int64_t a = pairs[2 * i], b = pairs[2 * i + 1];
            indices[indptr[a] + deg[a]++] = b;
            indices[indptr[b] + deg[b]++] = a;
        }
    for (int64_t v = 0; v < n; v++) {
        int64_t *row = indices + indptr[v];
        int64_t d = indptr[v + 1] - indptr[v];
        for (int64_t x = 1; x < d; x++)
            for (int64_t y = x; y > 0 && row[y - 1] > row[y]; y--) {
                int64_t t = row[y];
                row[y] = row[y - 1];
                row[y - 1] = t;
            }
    }
    g->num_nodes = n;
    g->num_edges = m;
    g->num_train_edges = mt;
    g->indptr = indptr;
    g->indices = indices;

    /* Features. */
    const int F = o->feature_dim;
    float *x = tma_graph_alloc(g, (size_t)(n * F + 1) * 4);
    for (int64_t v = 0; v < n; v++) {
        int c = (int)(v % k);
        for (int j = 0; j < F; j++) {
            float val;
            if (o->sparse) {
                double p = (j % k == c) ? 0.12 : 0.02;
                val = tma_rng_uniform(&rng) < p ? 1.0f : 0.0f;
            } else {
                val = (float)((j % k == c ? 1.0 : 0.0) + 0.5 * tma_rng_normal(&rng));
            }
            x[v * F + j] = val;
        }
    }
    g->feature_dim = F;
    g->features = x;
    int32_t *lab = tma_graph_alloc(g, (size_t)n * 4);
    for (int64_t v = 0; v < n; v++)
        lab[v] = (int32_t)(v % k);
    g->labels = lab;
    g->num_classes = k;

    /* Evaluation edges and negatives (not u, not a neighbour of u in the full graph). */
    int64_t *ve = tma_graph_alloc(g, (size_t)(2 * o->val + 1) * 8);
    int64_t *te = tma_graph_alloc(g, (size_t)(2 * o->test + 1) * 8);
    int64_t *vn = tma_graph_alloc(g, (size_t)(o->val * o->negatives + 1) * 8);
    int64_t *tn = tma_graph_alloc(g, (size_t)(o->test * o->negatives + 1) * 8);
    for (int64_t i = 0; i < o->val + o->test; i++) {
        int is_val = i < o->val;
        int64_t *e = is_val ? ve + 2 * i : te + 2 * (i - o->val);
        int64_t *ng = is_val ? vn + i * o->negatives : tn + (i - o->val) * o->negatives;
        int64_t a = pairs[2 * perm[i]], b = pairs[2 * perm[i] + 1];
        if (tma_rng_uniform(&rng) < 0.5) {
            int64_t t = a;
            a = b;
            b = t;
        }
        e[0] = a;
        e[1] = b;
        for (int j = 0; j < o->negatives; j++) {
            int64_t t;
            do
                t = (int64_t)tma_rng_below(&rng, (uint64_t)n);
            while (t == a || has_pair(pairs, m, a, t));
            ng[j] = t;
        }
    }
    g->num_val = o->val;
    g->num_test = o->test;
    g->val_edges = ve;
    g->test_edges = te;
    g->num_negatives = o->negatives;
    g->val_neg = vn;
    g->test_neg = tn;
    g->split_seed = o->seed;
    free(pairs);
    free(perm);
    free(is_eval);
    free(deg);
    if (tma_graph_validate(g, "test graph") != TMA_OK)
        die("the generated graph is invalid");
    return g;
}

void gnn_test_transpose(int64_t n_dst, int64_t n_src, const int32_t *ip, const int32_t *ix, const float *w,
                        const int32_t *rel, int32_t *tp, int32_t *ti, float *tw, int32_t *trel)
{
    int64_t q = 0;
    for (int64_t j = 0; j < n_src; j++) {
        tp[j] = (int32_t)q;
        for (int64_t i = 0; i < n_dst; i++)
            for (int32_t e = ip[i]; e < ip[i + 1]; e++) {
                if (ix[e] != j)
                    continue;
                ti[q] = (int32_t)i;
                if (w)
                    tw[q] = w[e];
                if (rel)
                    trel[q] = rel[e];
                q++;
            }
    }
    tp[n_src] = (int32_t)q;
}

tma_gnn_config_t gnn_test_config(tma_gnn_encoder_t enc, int hidden, int decoder_hidden, int batch_size, int f0, int f1,
                                 uint64_t seed)
{
    tma_gnn_config_t c;
    tma_gnn_config_default(&c);
    c.encoder = enc;
    c.hidden = hidden;
    c.decoder_hidden = decoder_hidden;
    c.batch_size = batch_size;
    c.fanouts[0] = f0;
    c.fanouts[1] = f1;
    c.lr = 0.01;
    c.threads = 2;
    c.seed = seed;
    return c;
}

void gnn_test_sample_alloc(const tma_graph_sampler_t *sp, int layers, int64_t max_seeds, int typed,
                           tma_graph_sample_t *s)
{
    tma_graph_sample_bounds_t b;
    tma_graph_sampler_bounds(sp, &b);
    memset(s, 0, sizeof *s);
    s->nodes = calloc((size_t)b.max_nodes, sizeof(int64_t));
    s->seed_local = calloc((size_t)max_seeds, sizeof(int32_t));
    if (typed)
        s->node_type = calloc((size_t)b.max_nodes, sizeof(int32_t));
    for (int l = 0; l < layers; l++) {
        tma_graph_block_t *k = &s->blocks[l];
        size_t edges = (size_t)b.max_edges[l] + 1;
        k->indptr = calloc((size_t)b.max_dst[l] + 1, sizeof(int32_t));
        k->indices = calloc(edges, sizeof(int32_t));
        k->weights = calloc(edges, sizeof(float));
        k->t_indptr = calloc((size_t)b.max_src[l] + 1, sizeof(int32_t));
        k->t_indices = calloc(edges, sizeof(int32_t));
        k->t_weights = calloc(edges, sizeof(float));
        if (typed) {
            k->rel = calloc(edges, sizeof(int32_t));
            k->t_rel = calloc(edges, sizeof(int32_t));
        }
    }
}

void gnn_test_sample_free(tma_graph_sample_t *s)
{
    free(s->nodes);
    free(s->seed_local);
    free(s->node_type);
    for (int l = 0; l < TMA_GRAPH_MAX_LAYERS; l++) {
        tma_graph_block_t *k = &s->blocks[l];
        free(k->indptr);
        free(k->indices);
        free(k->weights);
        free(k->rel);
        free(k->t_indptr);
        free(k->t_indices);
        free(k->t_weights);
        free(k->t_rel);
    }
}

void gnn_test_dump(const char *dir, const char *name, const void *data, size_t bytes)
{
    char *path = tma_path_join(dir, name);
    FILE *f = path ? fopen(path, "wb") : NULL;
    if (!f || (bytes && fwrite(data, 1, bytes, f) != bytes)) {
        fprintf(stderr, "cannot write %s\n", path ? path : name);
        exit(99);
    }
    fclose(f);
    free(path);
}

void gnn_test_dump_json(const char *dir, const char *name, const cJSON *o)
{
    char *text = cJSON_Print(o);
    if (!text) {
        fprintf(stderr, "cannot print %s\n", name);
        exit(99);
    }
    gnn_test_dump(dir, name, text, strlen(text));
    cJSON_free(text);
}

tma_partition_info_t *gnn_test_partition(const char *dir, int64_t nodes, int32_t shards, uint64_t seed)
{
    gnn_test_graph_opts_t o;
    gnn_test_graph_defaults(&o);
    o.nodes = nodes;
    tma_graph_t *g = gnn_test_graph(&o), *gf = NULL;
    char *gpath = tma_path_join(dir, "g.tmag"), *pdir = tma_path_join(dir, "part");
    tma_partition_opts_t po = {.scheme = TMA_PARTITION_RANDOM, .num_shards = shards, .seed = seed};
    tma_partition_result_t *res = NULL;
    tma_partition_info_t *pinfo = NULL;
    tma_status_t st = g && gpath && pdir ? tma_graph_write(g, gpath) : TMA_ERR_NOMEM;
    st = st ? st : tma_graph_open(gpath, 0, &gf);
    st = st ? st : tma_partition_run(gf, gpath, &po, pdir, &res);
    st = st ? st : tma_partition_info_load(pdir, &pinfo);
    if (st != TMA_OK) {
        fprintf(stderr, "cannot partition a test graph in %s: %s\n", dir, tma_status_str(st));
        exit(99);
    }
    tma_partition_result_destroy(res);
    tma_graph_destroy(gf);
    tma_graph_destroy(g);
    free(gpath);
    free(pdir);
    return pinfo;
}
