/*
 * config.c: the job configuration: parsing, one function a section, with
 * errors that name the key; the defaults (those of the paper); the checks
 * that tie a config to its graph and partition files; and the resolved JSON
 * form that goes into etcd and the run folder.
 */
#include "tma_job.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <libgen.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/rand.h>

#define COMP "job"

void tma_job_destroy(tma_job_t *job)
{
    if (!job)
        return;
    free(job->graph);
    free(job->dataset);
    free(job->partition_dir);
    free(job->partition_node_dir);
    free(job->token_file);
    free(job->init);
    memset(job->token, 0, sizeof job->token);
    cJSON_Delete(job->import_opts);
    cJSON_Delete(job->generate);
    free(job->worker_devices);
    free(job);
}

/* base_dir/path unless path is absolute; base_dir made absolute first. */
static char *resolve_path(const char *base_dir, const char *path)
{
    if (path[0] == '/')
        return strdup(path);
    char cwd[PATH_MAX];
    const char *base = base_dir && *base_dir ? base_dir : ".";
    char *abs_base = realpath(base, NULL);
    if (!abs_base && base[0] == '/')
        abs_base = strdup(base);
    if (!abs_base) {
        if (!getcwd(cwd, sizeof cwd))
            return strdup(path);
        abs_base = tma_path_join(cwd, base);
        if (!abs_base)
            return NULL;
    }
    /* Drop a leading "./" for tidy paths. */
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    char *r = tma_path_join(abs_base, path);
    free(abs_base);
    return r;
}

void tma_job_default_scheme(tma_job_variant_t v, int shards, int64_t nodes, char *out, size_t cap)
{
    const tma_job_variant_desc_t *d = tma_job_variant_desc(v);
    if (!d || !d->scheme) {
        snprintf(out, cap, "%s", "");
    } else if (strcmp(d->scheme, "supernode") == 0) {
        /* N >> M mini-clusters (the paper uses thousands on large graphs):
         * about 50 nodes a cluster, at least 4 a shard, at most 15000. */
        int64_t n = nodes > 0 ? nodes / 50 : 15000;
        if (n < 4 * (int64_t)shards)
            n = 4 * (int64_t)shards;
        if (n > 15000)
            n = 15000;
        snprintf(out, cap, "supernode:%lld", (long long)n);
    } else {
        snprintf(out, cap, "%s", d->scheme);
    }
}

/* Which partition schemes fit which variant: its family ("supernode"
 * with any N). */
static int scheme_fits(const tma_job_variant_desc_t *d, const char *scheme)
{
    if (!d->scheme)
        return 0;
    if (strcmp(d->scheme, "supernode") == 0)
        return strncmp(scheme, "supernode", 9) == 0;
    return strcmp(scheme, d->scheme) == 0;
}

static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= TMA_JOB_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

static const cJSON *section(const cJSON *root, const char *key, const char *ctx, tma_status_t *st)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, key);
    if (s && !cJSON_IsObject(s) && !cJSON_IsNull(s)) {
        tma_log_error(COMP, "%s: \"%s\" must be an object", ctx, key);
        *st = TMA_ERR_CONFIG;
        return NULL;
    }
    return cJSON_IsObject(s) ? s : NULL;
}

static tma_status_t copy_str(char *dst, size_t cap, const char *src, const char *ctx, const char *key)
{
    if (strlen(src) >= cap) {
        tma_log_error(COMP, "%s: \"%s\" is too long (at most %zu characters)", ctx, key, cap - 1);
        return TMA_ERR_CONFIG;
    }
    snprintf(dst, cap, "%s", src);
    return TMA_OK;
}

static tma_status_t parse_device(const char *s, const char *ctx, const char *key)
{
    if (tma_gnn_device_valid(s))
        return TMA_OK;
    tma_log_error(COMP, "%s: %s = \"%s\": a device is \"cpu\", \"cuda\" or \"cuda:N\"", ctx, key, s);
    return TMA_ERR_CONFIG;
}

/* In the section parsers: the job they fill is freed by tma_job_parse when
 * one fails, so they return at the first error. */
#define TRY(expr)                                                                                  \
    do {                                                                                           \
        tma_status_t st_ = (expr);                                                                 \
        if (st_ != TMA_OK)                                                                         \
            return st_;                                                                            \
    } while (0)

#define BAD(...)                                                                                   \
    do {                                                                                           \
        tma_log_error(COMP, __VA_ARGS__);                                                          \
        return TMA_ERR_CONFIG;                                                                     \
    } while (0)

/* The optional object `key` of root into *s_p (NULL when absent). */
static tma_status_t get_section(const cJSON *root, const char *key, const char *ctx, const cJSON **s_p)
{
    tma_status_t st = TMA_OK;
    *s_p = section(root, key, ctx, &st);
    return st;
}

/* "job", "description", "variant", "workers". */
static tma_status_t parse_identity(tma_job_t *job, const cJSON *root, const char *ctx, const char *base_dir)
{
    (void)base_dir;
    const char *s;
    int64_t i64;
    TRY(tma_json_get_string(root, "job", "", ctx, &s));
    if (*s && !valid_name(s))
        BAD("%s: \"job\" = \"%s\": a job name is 1-127 characters of letters, digits, '.', '_' and '-'",
            ctx, s);
    snprintf(job->name, sizeof job->name, "%s", s);
    TRY(tma_json_get_string(root, "description", "", ctx, &s));

    TRY(tma_json_get_string(root, "variant", "randomtma", ctx, &s));
    if (tma_job_variant_parse(s, &job->variant) != TMA_OK)
        BAD("%s: \"variant\" = \"%s\" is not one of randomtma, supertma, psgd-pa, llcg, ggs", ctx, s);
    job->vd = tma_job_variant_desc(job->variant);
    TRY(tma_json_get_int(root, "workers", 3, 1, TMA_JOB_MAX_WORKERS, ctx, &i64));
    job->workers = (int)i64;
    return TMA_OK;
}

/* The graph: exactly one of "graph", "dataset" (+ "import"), "generate". */
static tma_status_t parse_source(tma_job_t *job, const cJSON *root, const char *ctx, const char *base_dir)
{
    const char *s;
    const cJSON *jg = cJSON_GetObjectItemCaseSensitive(root, "graph");
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(root, "dataset");
    const cJSON *jgen = cJSON_GetObjectItemCaseSensitive(root, "generate");
    int nsrc = (jg != NULL) + (jd != NULL) + (jgen != NULL);
    if (nsrc != 1)
        BAD("%s: give exactly one of \"graph\" (a .tmag file), \"dataset\" (a folder to import) or "
            "\"generate\" (a synthetic graph)%s",
            ctx, nsrc ? "; several were given" : "");
    if (jg) {
        TRY(tma_json_get_string(root, "graph", NULL, ctx, &s));
        if (!*s)
            BAD("%s: \"graph\" is empty", ctx);
        job->source = TMA_SOURCE_GRAPH;
        job->graph = resolve_path(base_dir, s);
    } else if (jd) {
        TRY(tma_json_get_string(root, "dataset", NULL, ctx, &s));
        if (!*s)
            BAD("%s: \"dataset\" is empty", ctx);
        job->source = TMA_SOURCE_DATASET;
        job->dataset = resolve_path(base_dir, s);
    } else {
        if (!cJSON_IsObject(jgen))
            BAD("%s: \"generate\" must be an object such as {\"kind\": \"sbm\", \"nodes\": 5000}", ctx);
        job->source = TMA_SOURCE_GENERATE;
        job->generate = cJSON_Duplicate(jgen, 1);
    }
    const cJSON *jimp = cJSON_GetObjectItemCaseSensitive(root, "import");
    if (jimp) {
        if (!jd)
            BAD("%s: \"import\" options apply only with \"dataset\"", ctx);
        if (!cJSON_IsObject(jimp))
            BAD("%s: \"import\" must be an object", ctx);
        job->import_opts = cJSON_Duplicate(jimp, 1);
    }
    if ((jg && !job->graph) || (jd && !job->dataset) || (jgen && !job->generate) ||
        (jimp && !job->import_opts))
        return TMA_ERR_NOMEM;
    return TMA_OK;
}

static tma_status_t parse_partition(tma_job_t *job, const cJSON *root, const char *ctx, const char *base_dir)
{
    static const char *const keys[] = {"dir", "node_dir", "scheme", "clusterer", "shards", "seed", NULL};
    const cJSON *part;
    const char *s;
    int64_t i64;
    TRY(get_section(root, "partition", ctx, &part));
    if (!job->vd->uses_shards) {
        if (part)
            BAD("%s: \"partition\": variant %s trains every worker on the whole graph and uses no "
                "partition; remove the section",
                ctx, job->vd->name);
        return TMA_OK;
    }
    TRY(tma_json_check_keys(part, keys, "partition"));
    TRY(tma_json_get_int(part, "shards", job->workers, 1, 1 << 20, "partition", &i64));
    job->shards = (int)i64;
    if (job->shards < job->workers)
        BAD("%s: partition.shards = %d is less than workers = %d: every trainer needs a shard", ctx,
            job->shards, job->workers);
    TRY(tma_json_get_int(part, "seed", 0, 0, TMA_GRAPH_MAX_SEED - 1, "partition", &i64));
    job->partition_seed = (uint64_t)i64;
    TRY(tma_json_get_string(part, "scheme", "", "partition", &s));
    if (*s) {
        tma_partition_opts_t po;
        if (tma_partition_scheme_parse(s, &po) != TMA_OK)
            BAD("%s: partition.scheme = \"%s\" is not random, supernode:N or metis", ctx, s);
        if (!scheme_fits(job->vd, s))
            BAD("%s: partition.scheme \"%s\" does not fit variant %s (randomtma uses random, supertma "
                "supernode:N, psgd-pa and llcg metis)",
                ctx, s, job->vd->name);
        TRY(copy_str(job->partition_scheme, sizeof job->partition_scheme, s, ctx, "partition.scheme"));
    }
    TRY(tma_json_get_string(part, "clusterer", "", "partition", &s));
    if (*s) {
        tma_clusterer_t c;
        if (tma_clusterer_parse(s, &c) != TMA_OK)
            BAD("%s: partition.clusterer = \"%s\" is not metis, lp or auto", ctx, s);
        if (c != TMA_CLUSTERER_AUTO && job->variant == TMA_VARIANT_RANDOMTMA)
            BAD("%s: partition.clusterer \"%s\": variant randomtma's random partition uses no clusterer "
                "(it is for supertma, psgd-pa and llcg)",
                ctx, s);
        TRY(copy_str(job->partition_clusterer, sizeof job->partition_clusterer, s, ctx, "partition.clusterer"));
    }
    TRY(tma_json_get_string(part, "dir", "", "partition", &s));
    if (*s) {
        job->partition_dir = resolve_path(base_dir, s);
        if (!job->partition_dir)
            return TMA_ERR_NOMEM;
    }
    /* A path on the workers' nodes, not beside the config: it must not
     * depend on where the coordinator reads the config. */
    TRY(tma_json_get_string(part, "node_dir", "", "partition", &s));
    if (*s) {
        if (s[0] != '/')
            BAD("%s: partition.node_dir = \"%s\" must be an absolute path (the folder on each worker's node)",
                ctx, s);
        if (!(job->partition_node_dir = strdup(s)))
            return TMA_ERR_NOMEM;
    }
    return TMA_OK;
}

static tma_status_t parse_aggregation(tma_job_t *job, const cJSON *root, const char *ctx, const char *base_dir)
{
    static const char *const keys[] = {"interval_seconds", "interval_steps", "weighted", NULL};
    (void)base_dir;
    const cJSON *agg;
    TRY(get_section(root, "aggregation", ctx, &agg));
    TRY(tma_json_check_keys(agg, keys, "aggregation"));
    int has_sec = agg && cJSON_GetObjectItemCaseSensitive(agg, "interval_seconds");
    int has_steps = agg && cJSON_GetObjectItemCaseSensitive(agg, "interval_steps");
    if (has_sec && has_steps)
        BAD("%s: aggregation: give interval_seconds or interval_steps, not both", ctx);
    TRY(tma_json_get_double(agg, "interval_seconds", has_steps ? 0 : 120.0, 0, 1e7, "aggregation",
                            &job->interval_s));
    TRY(tma_json_get_int(agg, "interval_steps", 0, 0, INT64_C(1) << 40, "aggregation", &job->interval_steps));
    if (has_sec && !(job->interval_s > 0))
        BAD("%s: aggregation.interval_seconds must be > 0", ctx);
    if (has_steps && job->interval_steps <= 0)
        BAD("%s: aggregation.interval_steps must be > 0", ctx);
    TRY(tma_json_get_bool(agg, "weighted", 0, "aggregation", &job->weighted));
    return TMA_OK;
}

static tma_status_t parse_duration(tma_job_t *job, const cJSON *root, const char *ctx, const char *base_dir)
{
    static const char *const keys[] = {"train_seconds", "rounds", NULL};
    (void)base_dir;
    const cJSON *dur;
    TRY(get_section(root, "duration", ctx, &dur));
    TRY(tma_json_check_keys(dur, keys, "duration"));
    int has_rounds = dur && cJSON_GetObjectItemCaseSensitive(dur, "rounds");
    TRY(tma_json_get_double(dur, "train_seconds", has_rounds ? 0 : 600.0, 0, 1e8, "duration", &job->train_s));
    TRY(tma_json_get_int(dur, "rounds", 0, 0, INT64_C(1) << 40, "duration", &job->rounds));
    if (!(job->train_s > 0) && job->rounds <= 0)
        BAD("%s: duration: give train_seconds > 0 or rounds > 0", ctx);
    return TMA_OK;
}

static tma_status_t parse_llcg(tma_job_t *job, const cJSON *root, const char *ctx, const char *base_dir)
{
    static const char *const keys[] = {"correction_steps", NULL};
    (void)base_dir;
    const cJSON *llcg;
    int64_t i64;
    TRY(get_section(root, "llcg", ctx, &llcg));
    if (llcg && !job->vd->corrects)
        BAD("%s: \"llcg\" applies to variant llcg only (this job is %s)", ctx, job->vd->name);
    TRY(tma_json_check_keys(llcg, keys, "llcg"));
    TRY(tma_json_get_int(llcg, "correction_steps", 5, 1, 1 << 20, "llcg", &i64));
    job->llcg_steps = (int)i64;
    return TMA_OK;
}

/* fault.absent_shards: the paper's F >= 1 drill. */
static tma_status_t parse_absent(tma_job_t *job, const cJSON *abs, const char *ctx)
{
    if (!cJSON_IsArray(abs) || cJSON_GetArraySize(abs) > (int)TMA_ARRAY_LEN(job->absent_shards))
        BAD("%s: fault.absent_shards must be a list of at most %d shard numbers", ctx,
            (int)TMA_ARRAY_LEN(job->absent_shards));
    for (const cJSON *it = abs->child; it; it = it->next) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= job->shards ||
            it->valuedouble != (double)(int)it->valuedouble)
            BAD("%s: fault.absent_shards: each entry is a shard number in [0, %d)", ctx, job->shards);
        job->absent_shards[job->n_absent++] = (int32_t)it->valuedouble;
    }
    if (!job->vd->uses_shards && job->n_absent)
        BAD("%s: fault.absent_shards needs shards; variant %s has none", ctx, job->vd->name);
    if (job->n_absent >= job->workers)
        BAD("%s: fault.absent_shards leaves no worker (workers = %d)", ctx, job->workers);
    return TMA_OK;
}

static tma_status_t parse_fault(tma_job_t *job, const cJSON *root, const char *ctx, const char *base_dir)
{
    static const char *const keys[] = {"on_failure", "start_timeout", "lease_ttl", "round_deadline",
                                       "suspect_grace", "absent_shards", NULL};
    (void)base_dir;
    const cJSON *fault;
    const char *s;
    TRY(get_section(root, "fault", ctx, &fault));
    TRY(tma_json_check_keys(fault, keys, "fault"));
    TRY(tma_json_get_string(fault, "on_failure", "continue", "fault", &s));
    if (strcmp(s, "continue") == 0)
        job->on_failure = TMA_POLICY_CONTINUE;
    else if (strcmp(s, "reassign") == 0)
        job->on_failure = TMA_POLICY_REASSIGN;
    else
        BAD("%s: fault.on_failure = \"%s\" is not continue or reassign", ctx, s);
    TRY(tma_json_get_double(fault, "start_timeout", 60.0, 0.1, 1e6, "fault", &job->start_timeout));
    TRY(tma_json_get_int(fault, "lease_ttl", 5, 2, 3600, "fault", &job->lease_ttl));
    TRY(tma_json_get_double(fault, "round_deadline", 30.0, 0.1, 1e6, "fault", &job->round_deadline));
    TRY(tma_json_get_double(fault, "suspect_grace", 1.0, 0.0, 1e6, "fault", &job->suspect_grace));
    const cJSON *abs = fault ? cJSON_GetObjectItemCaseSensitive(fault, "absent_shards") : NULL;
    return abs ? parse_absent(job, abs, ctx) : TMA_OK;
}

static tma_status_t parse_transport(tma_job_t *job, const cJSON *root, const char *ctx, const char *base_dir)
{
    static const char *const keys[] = {"token", "token_file", "host", NULL};
    const cJSON *tr;
    const char *s;
    TRY(get_section(root, "transport", ctx, &tr));
    TRY(tma_json_check_keys(tr, keys, "transport"));
    TRY(tma_json_get_string(tr, "token", "", "transport", &s));
    /* A run folder's config shows "(hidden)": that is no token. */
    if (strcmp(s, TMA_JOB_TOKEN_HIDDEN) != 0) {
        TRY(copy_str(job->token, sizeof job->token, s, ctx, "transport.token"));
        job->token_src = s[0] ? TMA_JOB_TOKEN_CONFIG : TMA_JOB_TOKEN_NONE;
    }
    TRY(tma_json_get_string(tr, "token_file", "", "transport", &s));
    if (s[0] && job->token_src == TMA_JOB_TOKEN_CONFIG)
        BAD("%s: give transport.token or transport.token_file, not both", ctx);
    if (s[0] && !(job->token_file = resolve_path(base_dir, s)))
        return TMA_ERR_NOMEM;
    TRY(tma_json_get_string(tr, "host", "auto", "transport", &s));
    if (!*s)
        BAD("%s: transport.host is empty (use \"auto\" or an address of this machine)", ctx);
    TRY(copy_str(job->host, sizeof job->host, s, ctx, "transport.host"));
    return TMA_OK;
}

static tma_status_t parse_devices(tma_job_t *job, const cJSON *root, const char *ctx, const char *base_dir)
{
    static const char *const keys[] = {"evaluator", "workers", NULL};
    (void)base_dir;
    const cJSON *dev;
    const char *s;
    TRY(get_section(root, "devices", ctx, &dev));
    TRY(tma_json_check_keys(dev, keys, "devices"));
    TRY(tma_json_get_string(dev, "evaluator", "cpu", "devices", &s));
    TRY(parse_device(s, ctx, "devices.evaluator"));
    TRY(copy_str(job->eval_device, sizeof job->eval_device, s, ctx, "devices.evaluator"));
    const cJSON *wd = dev ? cJSON_GetObjectItemCaseSensitive(dev, "workers") : NULL;
    if (wd && !cJSON_IsArray(wd) && !cJSON_IsString(wd))
        BAD("%s: devices.workers must be a device name or a list such as [\"cuda:0\", \"cuda:1\"]", ctx);
    int nd = wd && cJSON_IsArray(wd) ? cJSON_GetArraySize(wd) : 1;
    if (nd < 1)
        BAD("%s: devices.workers is an empty list", ctx);
    job->worker_devices = calloc((size_t)nd, sizeof *job->worker_devices);
    if (!job->worker_devices)
        return TMA_ERR_NOMEM;
    job->n_worker_devices = nd;
    for (int i = 0; i < nd; i++) {
        const cJSON *d = !wd ? NULL : cJSON_IsArray(wd) ? cJSON_GetArrayItem(wd, i) : wd;
        const char *name = d ? (cJSON_IsString(d) ? d->valuestring : NULL) : "cpu";
        if (!name)
            BAD("%s: devices.workers[%d] must be a string", ctx, i);
        TRY(parse_device(name, ctx, "devices.workers"));
        TRY(copy_str(job->worker_devices[i], sizeof job->worker_devices[i], name, ctx, "devices.workers"));
    }
    return TMA_OK;
}

/* Model, training and evaluation settings (gnn/ parses them), and "init":
 * the weights round 0 starts from. */
static tma_status_t parse_model(tma_job_t *job, const cJSON *root, const char *ctx, const char *base_dir)
{
    const cJSON *model, *train, *eval;
    const char *s;
    TRY(tma_json_get_string(root, "init", "", ctx, &s));
    if (*s && !(job->init = resolve_path(base_dir, s)))
        return TMA_ERR_NOMEM;
    TRY(get_section(root, "model", ctx, &model));
    TRY(get_section(root, "train", ctx, &train));
    TRY(get_section(root, "eval", ctx, &eval));
    TRY(tma_gnn_config_from_sections(model, train, eval, ctx, &job->model));
    /* Ranks evaluate the nodes of the shards they own: a variant without shards has none. */
    if (job->model.eval_on_workers > 0 && !job->vd->uses_shards)
        BAD("%s: eval.where \"workers\" needs shards, and %s trains every worker on the whole graph: use "
            "\"where\": \"coordinator\"", ctx, tma_job_variant_name(job->variant));
    return TMA_OK;
}

/* "metrics" (job/tb.c: shared with tma train). */
static tma_status_t parse_metrics(tma_job_t *job, const cJSON *root, const char *ctx, const char *base_dir)
{
    (void)base_dir;
    return tma_job_run_metrics_section(root, ctx, &job->tensorboard, job->metrics_listen, sizeof job->metrics_listen);
}

typedef tma_status_t (*section_fn)(tma_job_t *job, const cJSON *root, const char *ctx, const char *base_dir);

/* The sections in the order they are checked (the first error is the one
 * reported). */
static const section_fn sections[] = {
    parse_identity, parse_source,    parse_partition, parse_aggregation, parse_duration,
    parse_llcg,     parse_fault,     parse_transport, parse_devices,     parse_model, parse_metrics,
};

tma_status_t tma_job_parse(const cJSON *root, const char *ctx, const char *base_dir, tma_job_t **job_p)
{
    static const char *const top_keys[] = {"job", "description", "variant", "workers", "graph", "dataset",
                                           "import", "generate", "partition", "aggregation", "duration",
                                           "llcg", "model", "train", "eval", "init", "fault", "transport",
                                           "devices", "metrics", NULL};
    if (!cJSON_IsObject(root)) {
        tma_log_error(COMP, "%s: a job config is a JSON object", ctx);
        return TMA_ERR_CONFIG;
    }
    tma_job_t *job = calloc(1, sizeof *job);
    if (!job)
        return TMA_ERR_NOMEM;
    tma_status_t st = tma_json_check_keys(root, top_keys, ctx);
    for (size_t i = 0; i < TMA_ARRAY_LEN(sections) && st == TMA_OK; i++)
        st = sections[i](job, root, ctx, base_dir);
    if (st != TMA_OK) {
        tma_job_destroy(job);
        return st;
    }
    *job_p = job;
    return TMA_OK;
}

tma_status_t tma_job_load(const char *path, tma_job_t **job_p)
{
    cJSON *root;
    tma_status_t st = tma_json_load_file(path, &root);
    if (st != TMA_OK)
        return st;
    char *copy = strdup(path);
    if (!copy) {
        cJSON_Delete(root);
        return TMA_ERR_NOMEM;
    }
    char *dir = dirname(copy);
    tma_job_t *job;
    st = tma_job_parse(root, path, dir, &job);
    cJSON_Delete(root);
    free(copy);
    if (st != TMA_OK)
        return st;
    if (!job->name[0]) {
        /* The file name without .json names the job by default. */
        char *c2 = strdup(path);
        if (!c2) {
            tma_job_destroy(job);
            return TMA_ERR_NOMEM;
        }
        char *base = basename(c2);
        char *dot = strrchr(base, '.');
        if (dot && strcmp(dot, ".json") == 0)
            *dot = '\0';
        for (char *p = base; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-')
                *p = '-';
        snprintf(job->name, sizeof job->name, "%s", *base ? base : "job");
        free(c2);
    }
    *job_p = job;
    return TMA_OK;
}

tma_status_t tma_job_check_files(tma_job_t *job)
{
    if (job->source != TMA_SOURCE_GRAPH || !job->graph) {
        tma_log_error(COMP, "job %s: the graph is given as a %s; only `tma launch` prepares those: run "
                            "tma import / tma gen and tma partition first, or use tma launch",
                      job->name, job->source == TMA_SOURCE_DATASET ? "dataset folder" : "generator");
        return TMA_ERR_CONFIG;
    }
    tma_graph_t *g;
    tma_status_t st = tma_graph_open_header(job->graph, &g);
    if (st != TMA_OK)
        return st;
    uint64_t graph_id = g->graph_id;
    int kind = g->kind;
    int64_t nval = g->num_val;
    tma_graph_destroy(g);
    if (kind != TMA_GRAPH_FULL) {
        tma_log_error(COMP, "%s: this is a shard, not a whole graph; \"graph\" names the graph that was "
                            "partitioned",
                      job->graph);
        return TMA_ERR_CONFIG;
    }
    if (nval <= 0) {
        tma_log_error(COMP, "%s: the graph has no validation edges to evaluate on; re-import it with --val",
                      job->graph);
        return TMA_ERR_CONFIG;
    }
    if (!job->vd->uses_shards)
        return TMA_OK;
    if (!job->partition_dir) {
        tma_log_error(COMP, "job %s: no partition.dir; run tma partition (or use tma launch, which makes "
                            "one)",
                      job->name);
        return TMA_ERR_CONFIG;
    }
    tma_partition_info_t *pi;
    st = tma_partition_info_load(job->partition_dir, &pi);
    if (st != TMA_OK) {
        if (st == TMA_ERR_NOT_FOUND)
            tma_log_error(COMP, "%s: no partition.json: the partition is missing or incomplete",
                          job->partition_dir);
        return st;
    }
    st = TMA_OK;
    char scheme[64];
    if (strcmp(pi->scheme, "supernode") == 0)
        snprintf(scheme, sizeof scheme, "supernode:%lld", (long long)pi->num_clusters);
    else
        snprintf(scheme, sizeof scheme, "%s", pi->scheme);
    if (pi->graph_id != graph_id) {
        tma_log_error(COMP, "%s: the partition was made from another graph (%s), not %s", job->partition_dir,
                      pi->graph_path ? pi->graph_path : "?", job->graph);
        st = TMA_ERR_MISMATCH;
    } else if (!scheme_fits(job->vd, scheme)) {
        tma_log_error(COMP, "%s: a %s partition does not fit variant %s (randomtma uses random, supertma "
                            "supernode:N, psgd-pa and llcg metis)",
                      job->partition_dir, scheme, job->vd->name);
        st = TMA_ERR_CONFIG;
    } else if (job->partition_scheme[0] && strcmp(job->partition_scheme, scheme) != 0) {
        tma_log_error(COMP, "%s: the folder holds a %s partition but the config asks for %s",
                      job->partition_dir, scheme, job->partition_scheme);
        st = TMA_ERR_CONFIG;
    } else if (pi->num_shards < job->workers) {
        tma_log_error(COMP, "%s: %d shards for %d workers: more trainers than shards", job->partition_dir,
                      pi->num_shards, job->workers);
        st = TMA_ERR_CONFIG;
    } else {
        job->shards = pi->num_shards;
        snprintf(job->partition_scheme, sizeof job->partition_scheme, "%s", scheme);
        job->partition_seed = pi->seed;
    }
    tma_partition_info_destroy(pi);
    return st;
}

tma_status_t tma_job_init_weights(const tma_job_t *job, const tma_gnn_config_t *cfg, float **params_p)
{
    float *w = NULL;
    tma_status_t st = tma_gnn_weights_read(job->init, cfg, NULL, &w, NULL, NULL);
    if (st == TMA_ERR_MISMATCH) {
        tma_log_error(COMP, "job %s: \"init\" names weights of another model (above): give weights of the job's "
                            "model, or leave \"init\" out",
                      job->name);
        st = TMA_ERR_CONFIG;
    }
    if (st != TMA_OK) {
        free(w);
        return st;
    }
    *params_p = w;
    return TMA_OK;
}

cJSON *tma_job_to_json(const tma_job_t *job)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "job", job->name);
    cJSON_AddStringToObject(o, "variant", tma_job_variant_name(job->variant));
    cJSON_AddNumberToObject(o, "workers", job->workers);
    switch (job->source) {
    case TMA_SOURCE_GRAPH: cJSON_AddStringToObject(o, "graph", job->graph); break;
    case TMA_SOURCE_DATASET:
        cJSON_AddStringToObject(o, "dataset", job->dataset);
        if (job->import_opts)
            cJSON_AddItemToObject(o, "import", cJSON_Duplicate(job->import_opts, 1));
        break;
    case TMA_SOURCE_GENERATE: cJSON_AddItemToObject(o, "generate", cJSON_Duplicate(job->generate, 1)); break;
    }
    if (job->vd->uses_shards) {
        cJSON *p = cJSON_AddObjectToObject(o, "partition");
        if (job->partition_dir)
            cJSON_AddStringToObject(p, "dir", job->partition_dir);
        if (job->partition_node_dir)
            cJSON_AddStringToObject(p, "node_dir", job->partition_node_dir);
        if (job->partition_scheme[0])
            cJSON_AddStringToObject(p, "scheme", job->partition_scheme);
        if (job->partition_clusterer[0])
            cJSON_AddStringToObject(p, "clusterer", job->partition_clusterer);
        cJSON_AddNumberToObject(p, "shards", job->shards);
        cJSON_AddNumberToObject(p, "seed", (double)job->partition_seed);
    }
    cJSON *a = cJSON_AddObjectToObject(o, "aggregation");
    if (job->interval_steps > 0)
        cJSON_AddNumberToObject(a, "interval_steps", (double)job->interval_steps);
    else
        cJSON_AddNumberToObject(a, "interval_seconds", job->interval_s);
    cJSON_AddBoolToObject(a, "weighted", job->weighted);
    cJSON *d = cJSON_AddObjectToObject(o, "duration");
    if (job->train_s > 0)
        cJSON_AddNumberToObject(d, "train_seconds", job->train_s);
    if (job->rounds > 0)
        cJSON_AddNumberToObject(d, "rounds", (double)job->rounds);
    if (job->vd->corrects)
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "llcg"), "correction_steps", job->llcg_steps);
    cJSON *f = cJSON_AddObjectToObject(o, "fault");
    cJSON_AddStringToObject(f, "on_failure", tma_job_policy_name(job->on_failure));
    cJSON_AddNumberToObject(f, "start_timeout", job->start_timeout);
    cJSON_AddNumberToObject(f, "lease_ttl", (double)job->lease_ttl);
    cJSON_AddNumberToObject(f, "round_deadline", job->round_deadline);
    cJSON_AddNumberToObject(f, "suspect_grace", job->suspect_grace);
    if (job->n_absent) {
        cJSON *abs = cJSON_AddArrayToObject(f, "absent_shards");
        for (int i = 0; i < job->n_absent; i++)
            cJSON_AddItemToArray(abs, cJSON_CreateNumber(job->absent_shards[i]));
    }
    cJSON *t = cJSON_AddObjectToObject(o, "transport");
    if (job->token[0])
        cJSON_AddStringToObject(t, "token", TMA_JOB_TOKEN_HIDDEN);
    if (job->token_file)
        cJSON_AddStringToObject(t, "token_file", job->token_file);
    cJSON_AddStringToObject(t, "host", job->host);
    cJSON *dv = cJSON_AddObjectToObject(o, "devices");
    cJSON_AddStringToObject(dv, "evaluator", job->eval_device);
    cJSON *wl = cJSON_AddArrayToObject(dv, "workers");
    for (int i = 0; i < job->n_worker_devices; i++)
        cJSON_AddItemToArray(wl, cJSON_CreateString(job->worker_devices[i]));
    cJSON *mt = cJSON_AddObjectToObject(o, "metrics");
    cJSON_AddBoolToObject(mt, "tensorboard", job->tensorboard);
    if (job->metrics_listen[0])
        cJSON_AddStringToObject(mt, "listen", job->metrics_listen);
    if (job->init)
        cJSON_AddStringToObject(o, "init", job->init);
    cJSON *m = tma_gnn_config_to_json(&job->model);
    if (m) {
        /* model, train and eval sections side by side with the rest. */
        for (cJSON *it = m->child; it;) {
            cJSON *next = it->next;
            cJSON_AddItemToObject(o, it->string, cJSON_DetachItemViaPointer(m, it));
            it = next;
        }
        cJSON_Delete(m);
    }
    return o;
}

cJSON *tma_job_to_etcd_json(const tma_job_t *job)
{
    cJSON *o = tma_job_to_json(job);
    if (!o || !job->token[0] ||
        (job->token_src != TMA_JOB_TOKEN_CONFIG && job->token_src != TMA_JOB_TOKEN_GENERATED))
        return o;
    cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "transport");
    cJSON *tok = cJSON_CreateString(job->token);
    if (!tok || !cJSON_ReplaceItemInObjectCaseSensitive(t, "token", tok)) {
        cJSON_Delete(tok);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Reads a token file that only its owner (this user) can read. */
static tma_status_t read_token_file(tma_job_t *job)
{
    const char *path = job->token_file;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        tma_log_error(COMP, "transport.token_file %s: cannot open it: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return TMA_ERR_CONFIG;
    }
    tma_status_t st = TMA_ERR_CONFIG;
    char buf[sizeof job->token + 2];
    ssize_t n = 0;
    if (!S_ISREG(sb.st_mode)) {
        tma_log_error(COMP, "transport.token_file %s: not a regular file", path);
    } else if (sb.st_uid != geteuid() || (sb.st_mode & 077)) {
        tma_log_error(COMP,
                      "transport.token_file %s: it must belong to this user and be readable by no one "
                      "else (chmod 600 %s)",
                      path, path);
    } else if ((n = read(fd, buf, sizeof buf - 1)) < 0) {
        tma_log_error(COMP, "transport.token_file %s: %s", path, strerror(errno));
    } else {
        buf[n] = '\0';
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
            buf[--n] = '\0';
        if (n == 0 || (size_t)n >= sizeof job->token || memchr(buf, '\0', (size_t)n))
            tma_log_error(COMP, "transport.token_file %s: expected one line of 1 to %zu bytes", path,
                          sizeof job->token - 1);
        else {
            memcpy(job->token, buf, (size_t)n + 1);
            job->token_src = TMA_JOB_TOKEN_FILE;
            st = TMA_OK;
        }
    }
    memset(buf, 0, sizeof buf);
    close(fd);
    return st;
}

tma_status_t tma_job_load_token(tma_job_t *job)
{
    if (job->token[0])
        return TMA_OK;
    if (job->token_file)
        return read_token_file(job);
    const char *env = getenv("TMA_JOB_TOKEN");
    if (env && *env) {
        if (strlen(env) >= sizeof job->token) {
            tma_log_error(COMP, "TMA_JOB_TOKEN: longer than %zu bytes", sizeof job->token - 1);
            return TMA_ERR_CONFIG;
        }
        snprintf(job->token, sizeof job->token, "%s", env);
        job->token_src = TMA_JOB_TOKEN_ENV;
    }
    return TMA_OK;
}

tma_status_t tma_job_ensure_token(tma_job_t *job)
{
    tma_status_t st = tma_job_load_token(job);
    if (st != TMA_OK || job->token[0])
        return st;
    unsigned char raw[16];
    if (RAND_bytes(raw, sizeof raw) != 1) {
        tma_log_error(COMP, "OpenSSL's RAND_bytes gave no random bytes for the job token");
        return TMA_ERR_UNAVAILABLE;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(job->token + 2 * i, sizeof job->token - 2 * i, "%02x", raw[i]);
    memset(raw, 0, sizeof raw);
    job->token_src = TMA_JOB_TOKEN_GENERATED;
    return TMA_OK;
}

void tma_job_listen_address(const tma_job_t *job, int worker, char *out, size_t cap)
{
    /* A worker binds transport.host only when it is a loopback address (one
     * machine); elsewhere the coordinator's address is not its own. */
    if (strcmp(job->host, "auto") != 0 && (!worker || strncmp(job->host, "127.", 4) == 0)) {
        snprintf(out, cap, "%s:0", job->host);
        return;
    }
    snprintf(out, cap, "127.0.0.1:0");
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) != 0)
        return;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
            !(i->ifa_flags & IFF_UP))
            continue;
        char host[64];
        if (getnameinfo(i->ifa_addr, sizeof(struct sockaddr_in), host, sizeof host, NULL, 0, NI_NUMERICHOST) == 0) {
            snprintf(out, cap, "%s:0", host);
            break;
        }
    }
    freeifaddrs(ifa);
}
