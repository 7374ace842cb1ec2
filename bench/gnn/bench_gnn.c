/*
 * bench_gnn.c: measures the GNN engine on one graph: training throughput
 * (positive edges a second, sampling included) with the time split by phase
 * and by op, one evaluation (full-neighbourhood inference + MRR on the
 * validation edges), the sgemm rate this machine reaches on the step's own
 * matrix shapes, and peak RSS; with the CPU time (all threads) beside the
 * wall-clock times, because on a shared machine the CPU time is what tracks
 * the work.  Prints one JSON object (bench/gnn/bench_gnn.sh
 * compares it with the PyTorch implementation).
 *
 *   bench_gnn G.tmag [--config FILE] [--encoder E] [--heads H] [--batch B] [--threads T]
 *             [--warmup W] [--steps N | --seconds S] [--no-eval]
 *             [--device cpu|cuda[:i]] [--sync-timing]
 * --device runs the trainer and the evaluator there (sampling stays on the
 * CPU); --sync-timing makes a device backend finish each op inside its
 * timing, so the per-op times (and the dense products' achieved rate) are
 * the device's, at the cost of throughput (tests/gpu/run.sh runs both).
 */
#include "gnn_backend.h" /* rows_gather, for the gather rate */
#include "cpu/cpu_gemm_int.h" /* the CPU backend's own products, for the sgemm rate */

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* CPU seconds of the whole process (all threads): on a shared machine this
 * tracks the work done better than the wall clock does. */
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static double peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* The best sgemm rate over a few shapes of the step's products: the best
 * of three ways to run one product on `threads` cores, each best of five:
 * OpenBLAS's own threads; the rows in one slice a thread with OpenBLAS
 * single-threaded (what the CPU backend does for tall products without
 * AVX-512); and, where the processor has AVX-512F, the same slices on the
 * backend's own kernels (cpu_gemm.c, what it runs by default there), so
 * that the reference is the fastest product this machine runs, not the
 * one the backend picked.  OpenBLAS's threads alone measured anywhere from
 * 93 to 212 GFLOP/s between processes of one run here, when they shared
 * the cores with the OpenMP team.  The best of each way in rates_p[3]. */
static double sgemm_rate(int64_t m, int64_t n, int64_t k, int threads, double rates_p[3])
{
    float *A = tma_alloc_aligned((size_t)(m * k) * 4), *B = tma_alloc_aligned((size_t)(k * n) * 4),
          *C = tma_alloc_aligned((size_t)(m * n) * 4);
    if (!A || !B || !C)
        return 0;
    for (int64_t i = 0; i < m * k; i++)
        A[i] = (float)(i % 7) * 0.1f;
    for (int64_t i = 0; i < k * n; i++)
        B[i] = (float)(i % 5) * 0.1f;
    const int own = tma_gnn_gemm512_available();
    float *Bp = own ? tma_alloc_aligned(tma_gnn_gemm512_packed_floats(k, n) * 4) : NULL;
    double best = 0;
    for (int way = 0; way < (Bp ? 3 : 2); way++) {
        openblas_set_num_threads(way ? 1 : threads);
        const int64_t slice = (m + threads - 1) / threads;
        double way_best = 0;
        for (int rep = 0; rep < 6; rep++) {
            double t0 = tma_clock_now();
            if (way == 0) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, A, (int)k, B,
                            (int)n, 0.0f, C, (int)n);
            } else {
                if (way == 2) /* the backend packs a weight once per product */
                    tma_gnn_gemm512_pack(0, B, n, k, n, Bp);
#pragma omp parallel for num_threads(threads) schedule(static, 1)
                for (int s = 0; s < threads; s++) {
                    const int64_t r0 = s * slice, rows = TMA_MIN(slice, m - r0);
                    if (rows > 0 && way == 1)
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)k, 1.0f,
                                    A + r0 * k, (int)k, B, (int)n, 0.0f, C + r0 * n, (int)n);
                    else if (rows > 0)
                        tma_gnn_gemm512_nn(rows, n, k, A + r0 * k, k, Bp, 0, C + r0 * n, n, NULL);
                }
            }
            double dt = tma_clock_now() - t0;
            if (rep > 0 && dt > 0)
                way_best = TMA_MAX(way_best, 2.0 * m * n * k / dt);
        }
        rates_p[way] = TMA_MAX(rates_p[way], way_best);
        best = TMA_MAX(best, way_best);
    }
    tma_free_aligned(Bp);
    tma_free_aligned(A);
    tma_free_aligned(B);
    tma_free_aligned(C);
    return best;
}

/* The rate at which the backend gathers rows picked by index from a table
 * far bigger than the caches (256 MiB of rows `width` floats wide, random
 * rows, writing them out included): the memory side of the roofline, on the
 * same threads.  Bytes a second; 0 when out of memory. */
static double gather_rate(tma_gnn_backend_t *be, int64_t width)
{
    const int64_t rows = ((int64_t)256 << 20) / (width * 4), n = rows / 4;
    tma_gnn_tensor_t tx, tid, ty;
    double best = 0;
    if (tma_gnn_tensor_alloc(be, TMA_GNN_F32, rows * width, &tx) != TMA_OK)
        return 0;
    if (tma_gnn_tensor_alloc(be, TMA_GNN_I32, n, &tid) != TMA_OK || tma_gnn_tensor_alloc(be, TMA_GNN_F32, n * width, &ty) != TMA_OK) {
        tma_gnn_tensor_free(&tx);
        return 0;
    }
    float *x = malloc((size_t)(rows * width) * 4);
    int32_t *ids = malloc((size_t)n * 4);
    if (x && ids) {
        tma_rng_t rng;
        tma_rng_seed(&rng, 7, 0);
        for (int64_t i = 0; i < rows * width; i++)
            x[i] = (float)(i % 13);
        for (int64_t i = 0; i < n; i++)
            ids[i] = (int32_t)tma_rng_below(&rng, (uint64_t)rows);
        tma_gnn_tensor_t Xs = tma_gnn_tensor_shape(&tx, rows, width), Is = tma_gnn_tensor_shape(&tid, n, 1),
                         Ys = tma_gnn_tensor_shape(&ty, n, width);
        if (tma_gnn_tensor_upload(&Xs, x) == TMA_OK && tma_gnn_tensor_upload(&Is, ids) == TMA_OK) {
            for (int rep = 0; rep < 4; rep++) {
                double t0 = tma_clock_now();
                if (tma_gnn_op_rows_gather(&Xs, &Is, &Ys) != TMA_OK || tma_gnn_backend_wait(be) != TMA_OK)
                    break;
                double dt = tma_clock_now() - t0;
                if (rep > 0 && dt > 0)
                    best = TMA_MAX(best, 4.0 * (double)(n * width) / dt);
            }
        }
    }
    free(x);
    free(ids);
    tma_gnn_tensor_free(&tx);
    tma_gnn_tensor_free(&tid);
    tma_gnn_tensor_free(&ty);
    return best;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_gnn G.tmag [--config FILE] [--encoder gcn|sage|mlp|gat] [--heads H] [--batch B]\n"
                    "                 [--threads T]\n"
                    "                 [--warmup W] [--steps N | --seconds S] [--no-eval]\n"
                    "                 [--device cpu|cuda[:i]] [--sync-timing]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *graph = NULL, *config = NULL, *encoder = NULL, *device = NULL;
    int64_t batch = 0, threads = -1, warmup = 3, steps = 0, heads = 0;
    double seconds = 0;
    int do_eval = 1, sync_timing = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--no-eval") == 0) {
            do_eval = 0;
            continue;
        }
        if (strcmp(a, "--sync-timing") == 0) {
            sync_timing = 1;
            continue;
        }
        if (a[0] != '-') {
            graph = a;
            continue;
        }
        if (!v)
            return usage();
        i++;
        int bad = 0;
        if (strcmp(a, "--config") == 0)
            config = v;
        else if (strcmp(a, "--device") == 0)
            device = v;
        else if (strcmp(a, "--encoder") == 0)
            encoder = v;
        else if (strcmp(a, "--heads") == 0)
            bad = tma_parse_i64(v, &heads) || heads < 1;
        else if (strcmp(a, "--batch") == 0)
            bad = tma_parse_i64(v, &batch);
        else if (strcmp(a, "--threads") == 0)
            bad = tma_parse_i64(v, &threads);
        else if (strcmp(a, "--warmup") == 0)
            bad = tma_parse_i64(v, &warmup);
        else if (strcmp(a, "--steps") == 0)
            bad = tma_parse_i64(v, &steps);
        else if (strcmp(a, "--seconds") == 0)
            bad = tma_parse_double(v, &seconds);
        else
            return usage();
        if (bad)
            return usage();
    }
    if (!graph)
        return usage();
    if (!steps && !(seconds > 0))
        seconds = 20;

    tma_gnn_config_t cfg;
    if (config ? tma_gnn_config_load(config, &cfg) != TMA_OK : (tma_gnn_config_default(&cfg), 0))
        return 1;
    if (encoder && tma_gnn_encoder_parse(encoder, &cfg.encoder) != TMA_OK)
        return usage();
    if (heads > 0)
        cfg.heads = (int)heads;
    if (batch > 0)
        cfg.batch_size = (int)batch;
    if (threads >= 0)
        cfg.threads = (int)threads;
    if (device) {
        if (!tma_gnn_device_valid(device))
            return usage();
        snprintf(cfg.device, sizeof cfg.device, "%s", device);
        snprintf(cfg.eval_device, sizeof cfg.eval_device, "%s", device);
    }

    double t_load = tma_clock_now();
    tma_graph_t *g;
    if (tma_graph_open(graph, TMA_GRAPH_OPEN_NO_VERIFY, &g) != TMA_OK)
        return 1;
    tma_gnn_trainer_t *tr;
    if (tma_gnn_trainer_create(&cfg, &g, 1, &tr) != TMA_OK)
        return 1;
    t_load = tma_clock_now() - t_load;
    const tma_gnn_config_t *rc = tma_gnn_trainer_config(tr);
    tma_gnn_backend_t *be = tma_gnn_trainer_backend(tr);
    for (int64_t s = 0; s < warmup; s++)
        if (tma_gnn_trainer_step(tr, NULL) != TMA_OK)
            return 1;
    tma_gnn_backend_op_stats_reset(be);
    tma_gnn_backend_set_sync_timing(be, sync_timing);
    tma_gnn_timing_t t0, t1;
    tma_gnn_trainer_timing(tr, &t0);
    double start = tma_clock_now(), elapsed = 0, loss_sum = 0, cpu0 = cpu_seconds();
    int64_t done = 0;
    while (steps ? done < steps : elapsed < seconds) {
        float loss;
        if (tma_gnn_trainer_step(tr, &loss) != TMA_OK)
            return 1;
        loss_sum += loss;
        done++;
        elapsed = tma_clock_now() - start;
    }
    tma_gnn_trainer_timing(tr, &t1);
    const double per = 1.0 / (double)done, cpu_train = cpu_seconds() - cpu0;

    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "impl", "tma");
    cJSON_AddStringToObject(o, "graph", graph);
    cJSON_AddStringToObject(o, "encoder", tma_gnn_encoder_name(rc->encoder));
    cJSON_AddNumberToObject(o, "heads", rc->heads);
    cJSON_AddStringToObject(o, "device", rc->device);
    cJSON_AddBoolToObject(o, "sync_timing", sync_timing);
    cJSON_AddNumberToObject(o, "batch_size", rc->batch_size);
    cJSON_AddNumberToObject(o, "threads", tma_gnn_backend_threads(be));
    cJSON_AddNumberToObject(o, "setup_seconds", t_load);
    cJSON_AddNumberToObject(o, "steps", (double)done);
    /* The model's parameters without the block's alignment padding, as the other sides count them. */
    tma_gnn_layout_t layout;
    int64_t params = 0;
    if (tma_gnn_layout_build(rc, &layout) != TMA_OK)
        return 1;
    for (int i = 0; i < layout.count; i++)
        params += layout.params[i].rows * layout.params[i].cols;
    cJSON_AddNumberToObject(o, "params", (double)params);
    cJSON_AddNumberToObject(o, "mean_loss", loss_sum * per);
    cJSON_AddNumberToObject(o, "edges_per_second", (double)done * rc->batch_size / elapsed);
    cJSON_AddNumberToObject(o, "step_ms", elapsed * per * 1e3);
    cJSON_AddNumberToObject(o, "cpu_ms_per_step", cpu_train * per * 1e3);
    cJSON_AddNumberToObject(o, "sample_ms", (t1.sample - t0.sample) * per * 1e3);
    cJSON_AddNumberToObject(o, "forward_ms", (t1.forward - t0.forward) * per * 1e3);
    cJSON_AddNumberToObject(o, "backward_ms", (t1.backward - t0.backward) * per * 1e3);
    cJSON_AddNumberToObject(o, "optimizer_ms", (t1.optimizer - t0.optimizer) * per * 1e3);
    cJSON_AddNumberToObject(o, "sampled_nodes", (double)(t1.sampled_nodes - t0.sampled_nodes) * per);
    cJSON_AddNumberToObject(o, "sampled_edges", (double)(t1.sampled_edges - t0.sampled_edges) * per);

    /* Time by op, and the dense products against this machine's sgemm rate. */
    tma_gnn_op_stat_t st[64];
    int n = tma_gnn_backend_op_stats(be, st, 64);
    cJSON *ops = cJSON_AddObjectToObject(o, "op_ms_per_step");
    double gemm_flops = 0, gemm_s = 0, gathered = 0;
    for (int i = 0; i < n; i++) {
        cJSON_AddNumberToObject(ops, st[i].name, st[i].seconds * per * 1e3);
        gemm_flops += st[i].flops;
        gathered += st[i].bytes;
        if (st[i].flops > 0)
            gemm_s += st[i].seconds;
    }
    int nt = tma_gnn_backend_threads(be);
    int64_t B = rc->batch_size, Hd = rc->hidden;
    /* OpenBLAS's rate only means something for the CPU backend (tests/gpu/run.sh
     * measures cuBLAS's with bench/gpu/bench_sgemm). */
    double ways[3] = {0, 0, 0}, rate = 0;
    if (strcmp(rc->device, "cpu") == 0) {
        /* (Not inside TMA_MAX, which evaluates the larger argument twice.) */
        const double layer_rate = sgemm_rate(3 * B, Hd, Hd, nt, ways);
        const double decoder_rate = sgemm_rate(2 * B, rc->decoder_hidden, Hd, nt, ways);
        rate = TMA_MAX(layer_rate, decoder_rate);
    }
    cJSON_AddNumberToObject(o, "gemm_gflop_per_step", gemm_flops * per * 1e-9);
    cJSON_AddNumberToObject(o, "gemm_ms_per_step", gemm_s * per * 1e3);
    cJSON_AddNumberToObject(o, "gemm_achieved_gflops", gemm_s > 0 ? gemm_flops / gemm_s * 1e-9 : 0);
    cJSON_AddNumberToObject(o, "sgemm_rate_gflops", rate * 1e-9);
    cJSON_AddNumberToObject(o, "sgemm_rate_openblas_gflops", TMA_MAX(ways[0], ways[1]) * 1e-9);
    cJSON_AddNumberToObject(o, "sgemm_rate_own_gflops", ways[2] * 1e-9);
    cJSON_AddNumberToObject(o, "gemm_ideal_ms_per_step", rate > 0 ? gemm_flops * per / rate * 1e3 : 0);
    /* The step's roofline: its dense FLOPs at the sgemm rate plus the bytes
     * its ops move by row index at the gather rate (both measured here, on
     * the same threads). */
    double bw = strcmp(rc->device, "cpu") != 0 ? 0 : gather_rate(be, Hd);
    double roof_ms = rate > 0 && bw > 0 ? (gemm_flops * per / rate + gathered * per / bw) * 1e3 : 0;
    cJSON_AddNumberToObject(o, "gathered_mb_per_step", gathered * per * 1e-6);
    cJSON_AddNumberToObject(o, "gather_rate_gbs", bw * 1e-9);
    cJSON_AddNumberToObject(o, "roofline_ms_per_step", roof_ms);
    cJSON_AddNumberToObject(o, "step_over_roofline", roof_ms > 0 ? elapsed * per * 1e3 / roof_ms : 0);

    if (do_eval) {
        tma_gnn_evaluator_t *ev;
        double tc = tma_clock_now();
        if (tma_gnn_evaluator_create(rc, g, &ev) != TMA_OK)
            return 1;
        /* Once per job (the locality order among it), not per evaluation. */
        cJSON_AddNumberToObject(o, "eval_setup_seconds", tma_clock_now() - tc);
        tma_gnn_backend_set_sync_timing(tma_gnn_evaluator_backend(ev), sync_timing);
        float *p = malloc((size_t)tma_gnn_trainer_param_count(tr) * 4);
        if (!p || tma_gnn_trainer_get_params(tr, p) != TMA_OK)
            return 1;
        double mrr, infer_s, score_s, te = tma_clock_now(), ce = cpu_seconds();
        if (tma_gnn_evaluator_mrr(ev, p, TMA_GNN_SPLIT_VAL, &mrr) != TMA_OK)
            return 1;
        te = tma_clock_now() - te;
        cJSON_AddNumberToObject(o, "eval_cpu_seconds", cpu_seconds() - ce);
        tma_gnn_evaluator_last_timing(ev, &infer_s, &score_s);
        cJSON_AddNumberToObject(o, "eval_seconds", te);
        cJSON_AddNumberToObject(o, "eval_infer_seconds", infer_s);
        cJSON_AddNumberToObject(o, "eval_score_seconds", score_s);
        cJSON_AddNumberToObject(o, "eval_edges", (double)(rc->eval_max_edges > 0 ? TMA_MIN(rc->eval_max_edges, g->num_val)
                                                                                   : g->num_val));
        cJSON_AddNumberToObject(o, "val_mrr", mrr);
        tma_gnn_op_stat_t es[64];
        int en = tma_gnn_backend_op_stats(tma_gnn_evaluator_backend(ev), es, 64);
        double ef = 0, egs = 0;
        cJSON *eops = cJSON_AddObjectToObject(o, "eval_op_seconds");
        for (int i = 0; i < en; i++) {
            cJSON_AddNumberToObject(eops, es[i].name, es[i].seconds);
            if (es[i].flops > 0) {
                ef += es[i].flops;
                egs += es[i].seconds;
            }
        }
        /* Scoring: the decoder's dense FLOPs (score_mlp, or its matmuls where
         * the backend has no fused op) against the scoring time and the
         * sgemm rate measured above. */
        double sf = 0;
        for (int i = 0; i < en; i++)
            if (strcmp(es[i].name, "score_mlp") == 0)
                sf = es[i].flops;
        if (sf == 0) { /* unfused: every eval matmul after inference is the decoder's */
            const int64_t per_edge = 1 + g->num_negatives, H = rc->hidden, dh = rc->decoder_hidden;
            double ne = cJSON_GetObjectItem(o, "eval_edges")->valuedouble;
            sf = 2.0 * ne * (double)per_edge * ((double)H * dh + (rc->decoder_layers > 2 ? (rc->decoder_layers - 2.0) * dh * dh : 0) + dh);
        }
        cJSON_AddNumberToObject(o, "eval_score_gflop", sf * 1e-9);
        cJSON_AddNumberToObject(o, "eval_score_gflops", score_s > 0 ? sf / score_s * 1e-9 : 0);
        cJSON_AddNumberToObject(o, "eval_score_of_sgemm", score_s > 0 && rate > 0 ? sf / score_s / rate : 0);
        cJSON_AddNumberToObject(o, "eval_gemm_gflop", ef * 1e-9);
        cJSON_AddNumberToObject(o, "eval_gemm_seconds", egs);
        free(p);
        tma_gnn_evaluator_destroy(ev);
    }
    cJSON_AddNumberToObject(o, "peak_rss_mb", peak_rss_mb());
    char *text = cJSON_PrintUnformatted(o);
    printf("%s\n", text);
    cJSON_free(text);
    cJSON_Delete(o);
    tma_gnn_trainer_destroy(tr);
    tma_graph_destroy(g);
    return 0;
}
