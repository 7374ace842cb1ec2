/* cmd_status.c: `tma status --etcd URLS --job NAME` or `tma status RUN`: a
 * live job's state, once or every second (--watch). */
#include "cli_int.h"
#include "tma_fault.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The last evaluated round of RUN/metrics.jsonl: its round and validation
 * MRR (0 when there is none yet). */
static int last_validation(const char *run_dir, int64_t *round_p, double *mrr_p)
{
    int64_t *rounds = NULL;
    double *times = NULL, *vals = NULL;
    int n = 0, found = 0;
    char *path = run_dir && *run_dir ? tma_job_run_path(run_dir, "metrics.jsonl") : NULL;
    if (path && access(path, R_OK) == 0 && tma_job_run_read_metrics(path, &rounds, &times, &vals, &n) == TMA_OK)
        for (int i = n - 1; i >= 0 && !found; i--)
            if (isfinite(vals[i])) {
                *round_p = rounds[i];
                *mrr_p = vals[i];
                found = 1;
            }
    free(path);
    free(rounds);
    free(times);
    free(vals);
    return found;
}

/* Members in the order a reader looks for them: workers, then backups,
 * each by name (worker-2 before worker-10), then by id. */
static int member_cmp(const void *a, const void *b)
{
    const tma_job_member_rec_t *x = &((const tma_job_view_member_t *)a)->rec;
    const tma_job_member_rec_t *y = &((const tma_job_view_member_t *)b)->rec;
    if (x->backup != y->backup)
        return x->backup - y->backup;
    int c = strverscmp(x->name, y->name);
    return c ? c : (x->id > y->id) - (x->id < y->id);
}

/* One look at the job: printed, or as one JSON object. */
static void render(const char *job, const tma_job_view_snap_t *sp, int as_json)
{
    const tma_job_view_snap_t s = *sp;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "job", job);
    if (s.has_coord) {
        cJSON *c = cJSON_AddObjectToObject(o, "coordinator");
        cJSON_AddStringToObject(c, "address", s.coord.address);
        cJSON_AddNumberToObject(c, "epoch", (double)s.coord_epoch);
        cJSON_AddStringToObject(c, "host", s.coord.host);
        cJSON_AddNumberToObject(c, "pid", s.coord.pid);
    } else {
        cJSON_AddNullToObject(o, "coordinator");
    }
    if (s.has_state) {
        cJSON_AddStringToObject(o, "phase", s.state.phase);
        cJSON_AddNumberToObject(o, "round", (double)s.state.round);
        cJSON_AddNumberToObject(o, "train_elapsed", s.state.train_elapsed);
        if (s.state.best_round >= 0) {
            cJSON_AddNumberToObject(o, "best_round", (double)s.state.best_round);
            cJSON_AddNumberToObject(o, "best_val_mrr", s.state.best_val_mrr);
        }
        cJSON_AddStringToObject(o, "run_dir", s.state.run_dir);
    }
    cJSON_AddNumberToObject(o, "agg_round", (double)s.agg_round);
    cJSON_AddBoolToObject(o, "stop", s.stop);
    cJSON *ms = cJSON_AddArrayToObject(o, "members");
    for (int i = 0; i < s.n_members; i++) {
        const tma_job_member_rec_t *m = &s.members[i].rec;
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "id", m->id);
        cJSON_AddStringToObject(j, "name", m->name);
        cJSON_AddStringToObject(j, "host", m->host);
        cJSON_AddNumberToObject(j, "pid", m->pid);
        cJSON_AddBoolToObject(j, "backup", m->backup);
        cJSON_AddStringToObject(j, "device", m->device);
        const tma_job_view_ready_t *r = tma_job_view_snap_ready(&s, m->id);
        cJSON_AddBoolToObject(j, "ready", r != NULL);
        cJSON *sh = cJSON_AddArrayToObject(j, "shards");
        for (int k = 0; k < s.n_shards; k++)
            if (s.shard_present[k] && s.shards[k].owner == (int64_t)m->id)
                cJSON_AddItemToArray(sh, cJSON_CreateNumber(k));
        cJSON_AddItemToArray(ms, j);
    }
    cJSON *orph = cJSON_AddArrayToObject(o, "orphaned_shards");
    for (int k = 0; k < s.n_shards; k++)
        if (s.shard_present[k] && s.shards[k].owner < 0)
            cJSON_AddItemToArray(orph, cJSON_CreateNumber(k));
    if (as_json) {
        cli_print_json(o);
    } else {
        printf("job %s\n", job);
        if (s.has_coord)
            printf("  coordinator  %s (epoch %llu, pid %d on %s)\n", s.coord.address,
                   (unsigned long long)s.coord_epoch, s.coord.pid, s.coord.host);
        else
            printf("  coordinator  none\n");
        if (s.has_state) {
            printf("  phase        %s, round %lld, %.1f s of training\n", s.state.phase, (long long)s.state.round,
                   s.state.train_elapsed);
            if (s.state.best_round >= 0)
                printf("  best         validation MRR %.4f at round %lld\n", s.state.best_val_mrr,
                       (long long)s.state.best_round);
            printf("  run folder   %s\n", s.state.run_dir);
        }
        int64_t vr;
        double vm;
        if (s.has_state && last_validation(s.state.run_dir, &vr, &vm))
            printf("  validation   MRR %.4f at round %lld (the last evaluated)\n", vm, (long long)vr);
        if (s.stop)
            printf("  stop         set\n");
        printf("  members      %d\n", s.n_members);
        for (int i = 0; i < s.n_members; i++) {
            const tma_job_member_rec_t *m = &s.members[i].rec;
            char shards[256] = "";
            size_t off = 0;
            for (int k = 0; k < s.n_shards && off < sizeof shards - 12; k++)
                if (s.shard_present[k] && s.shards[k].owner == (int64_t)m->id)
                    off += (size_t)snprintf(shards + off, sizeof shards - off, "%s%d", off ? "," : "", k);
            printf("    %4u  %-20s %-16s %s%s shards [%s]\n", m->id, m->name, m->device,
                   tma_job_view_snap_ready(&s, m->id) ? "ready" : "loading", m->backup ? " backup" : "", shards);
        }
        int norph = cJSON_GetArraySize(orph);
        if (norph)
            printf("  orphaned shards: %d\n", norph);
    }
    cJSON_Delete(o);
}

/* RUN: a launched job's run folder: the job's name (job.json) and, unless
 * --etcd was given, its private etcd (etcd/client-url). */
static int from_run_folder(const char *run, cli_etcd_flags_t *ef, char *job, size_t cap, char *url, size_t ucap)
{
    char *jp = tma_path_join(run, "job.json"), *up = tma_path_join(run, "etcd/client-url");
    cJSON *j = NULL;
    if (jp && access(jp, R_OK) == 0)
        (void)tma_json_load_file(jp, &j);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "job");
    int rc = CLI_EXIT_OK;
    if (!cJSON_IsString(name) || strlen(name->valuestring) >= cap) {
        fprintf(stderr, "tma status: %s is not a launched job's run folder (no job name in its job.json)\n", run);
        rc = CLI_EXIT_USAGE;
    } else {
        snprintf(job, cap, "%s", name->valuestring);
    }
    if (rc == CLI_EXIT_OK && !ef->endpoints) {
        size_t len = 0;
        char *u = NULL;
        if (!up || access(up, R_OK) != 0 || tma_file_read_all(up, &u, &len) != TMA_OK)
            len = 0;
        char *res = tma_path_join(run, "result.json");
        int ended = res && access(res, F_OK) == 0;
        if ((!u || len == 0 || len >= ucap) && ended) {
            fprintf(stderr, "tma status: the launch of %s has ended (its private etcd with it): the results are in "
                            "%s\n", run, res);
            rc = CLI_EXIT_RUNTIME;
        } else if (!u || len == 0 || len >= ucap) {
            fprintf(stderr, "tma status: %s has no private etcd address (etcd/client-url): the launch used an "
                            "etcd of its own; pass --etcd URL\n", run);
            rc = CLI_EXIT_USAGE;
        } else {
            memcpy(url, u, len);
            url[len] = '\0';
            ef->endpoints = url;
        }
        free(res);
        free(u);
    }
    cJSON_Delete(j);
    free(jp);
    free(up);
    return rc;
}

int cli_cmd_status(int argc, char **argv)
{
    cli_etcd_flags_t ef;
    memset(&ef, 0, sizeof ef);
    const char *job = NULL;
    int as_json = 0, watch = 0;
    const cli_opt_t opts[] = {
        CLI_ETCD_OPTS(ef),
        {"job", 0, CLI_STR, &job, "NAME", "the job (required without RUN)", NULL},
        {"json", 0, CLI_FLAG, &as_json, NULL, "print one JSON object (one a line with --watch)", NULL},
        {"watch", 'w', CLI_FLAG, &watch, NULL, "look again every second until the job ends or Ctrl-C", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {"status", "RUN | --etcd URLS --job NAME [--watch] [--json]",
                             "Shows a job's state from etcd: its coordinator, phase and round, the training time, "
                             "the best and the last validation, the members by name with the shards they own, "
                             "and whether they are ready. RUN, a run folder of tma launch, finds the job and its "
                             "private etcd itself (while the launch runs).",
                             opts, 0, 1};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;
    char jobbuf[TMA_JOB_NAME_MAX + 1], url[1200];
    if (args.npos == 1) {
        int rc = from_run_folder(args.pos[0], &ef, jobbuf, sizeof jobbuf, url, sizeof url);
        if (rc != CLI_EXIT_OK)
            return rc;
        if (job && strcmp(job, jobbuf) != 0)
            return cli_usage_error("status", "--job %s: the run folder %s is job %s", job, args.pos[0], jobbuf);
        job = jobbuf;
    }
    if (!ef.endpoints && !job)
        return cli_usage_error("status", "give a run folder of tma launch, or --etcd URLS and --job NAME");
    tma_kv_config_t kc;
    int rc = cli_etcd_config("status", &ef, &kc);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!job)
        return cli_usage_error("status", "--job NAME is required");
    tma_kv_t *kv;
    if (tma_kv_create(&kc, &kv) != TMA_OK)
        return CLI_EXIT_RUNTIME;
    volatile sig_atomic_t stop = 0;
    if (watch)
        cli_install_stop_handler(&stop);
    tma_job_view_t *v;
    tma_status_t st = tma_job_view_start(kv, job, 0, &v);
    if (st != TMA_OK) {
        if (args.npos == 1)
            fprintf(stderr, "tma status: the private etcd of %s does not answer: has the launch ended? (its "
                            "results are in the folder)\n", args.pos[0]);
        tma_kv_destroy(kv);
        return CLI_EXIT_RUNTIME;
    }
    rc = CLI_EXIT_OK;
    for (uint64_t seen = 0;;) {
        tma_job_view_snap_t s;
        if ((st = tma_job_view_snapshot(v, &s)) != TMA_OK) {
            rc = CLI_EXIT_RUNTIME;
            break;
        }
        if (!s.config && !s.has_state && s.n_members == 0) {
            fprintf(stderr, "tma status: job %s: nothing in etcd under /tma/%s/ (wrong --job or --etcd?)\n", job,
                    job);
            tma_job_view_snap_free(&s);
            rc = CLI_EXIT_RUNTIME;
            break;
        }
        if (watch && !as_json && isatty(STDOUT_FILENO))
            printf("\033[H\033[2J"); /* a fresh screen each second */
        else if (watch && seen && !as_json)
            printf("\n");
        qsort(s.members, (size_t)s.n_members, sizeof *s.members, member_cmp);
        render(job, &s, as_json);
        fflush(stdout);
        int ended = s.has_state && (strcmp(s.state.phase, "done") == 0 || strcmp(s.state.phase, "failed") == 0);
        seen = s.version;
        tma_job_view_snap_free(&s);
        if (!watch || ended || stop)
            break;
        for (int i = 0; i < 10 && !stop; i++)
            tma_sleep(0.1);
        if (stop)
            break;
    }
    tma_job_view_stop(v);
    tma_kv_destroy(kv);
    return rc;
}
