/*
 * launch_resume.c: what `tma launch --resume RUN` needs beside the phases of
 * cmd_launch.c: the job that ran in RUN (its job.json), checked to be one
 * that can go on and, when a config is given too, to be that config's job;
 * and the wait for the new leader, before which no worker starts (one would
 * obey the `stop` an interrupted run left, which only the new leader's
 * epoch makes stale).  The job's progress itself is in the etcd the launch
 * kept, not in these files: docs/distributed.md, "Resuming a launch".
 */
#include "cli_int.h"
#include "tma_job.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The first place where two JSON values differ, as a dotted key path into
 * path (objects are walked key by key; anything else compares whole); *a_p
 * and *b_p get the two values there (NULL: absent on that side).  1 when
 * they differ. */
static int first_diff(const cJSON *a, const cJSON *b, char *path, size_t cap, const cJSON **a_p, const cJSON **b_p)
{
    if (!cJSON_IsObject(a) || !cJSON_IsObject(b)) {
        *a_p = a;
        *b_p = b;
        return !cJSON_Compare(a, b, 1);
    }
    size_t len = strlen(path);
    for (int pass = 0; pass < 2; pass++) {
        for (const cJSON *it = (pass ? b : a)->child; it; it = it->next) {
            const cJSON *other = cJSON_GetObjectItemCaseSensitive(pass ? a : b, it->string);
            if (pass && other)
                continue; /* compared in the first pass */
            snprintf(path + len, cap - len, "%s%s", len ? "." : "", it->string);
            if (!other || first_diff(pass ? other : it, pass ? it : other, path, cap, a_p, b_p)) {
                if (!other) {
                    *a_p = pass ? NULL : it;
                    *b_p = pass ? it : NULL;
                }
                return 1;
            }
        }
    }
    path[len] = '\0';
    return 0;
}

/* A job as JSON without what a run folder's job.json resolves differently
 * from the config it came from: the graph's source (a dataset or generator
 * became RUN/graph.tmag), the partition's folder and scheme, the transport
 * (a token shown hidden, the host "auto" made 127.0.0.1). */
static cJSON *comparable(const tma_job_t *job)
{
    static const char *const drop[] = {"graph", "dataset", "import", "generate", "transport"};
    cJSON *o = tma_job_to_json(job);
    for (size_t i = 0; o && i < TMA_ARRAY_LEN(drop); i++)
        cJSON_DeleteItemFromObjectCaseSensitive(o, drop[i]);
    cJSON *p = o ? cJSON_GetObjectItemCaseSensitive(o, "partition") : NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(p, "dir");
    cJSON_DeleteItemFromObjectCaseSensitive(p, "scheme");
    return o;
}

/* The config given beside --resume must be the job that ran: its name, then
 * every key but those comparable() drops.  CLI_EXIT_OK, or a usage error
 * naming the first key that differs. */
static int same_job(const char *run, const tma_job_t *ran, const char *config)
{
    tma_job_t *given = NULL;
    tma_status_t st = tma_job_load(config, &given);
    if (st != TMA_OK)
        return st == TMA_ERR_NOMEM ? CLI_EXIT_RUNTIME : CLI_EXIT_USAGE; /* named the file or key */
    int rc = CLI_EXIT_OK;
    cJSON *a = NULL, *b = NULL;
    if (strcmp(given->name, ran->name) != 0) {
        fprintf(stderr, "tma launch: %s holds a run of job %s, not of job %s (%s): resume it with tma launch "
                        "--resume %s, or give its own config\n",
                run, ran->name, given->name, config, run);
        rc = CLI_EXIT_USAGE;
    } else if (!(a = comparable(ran)) || !(b = comparable(given))) {
        rc = CLI_EXIT_RUNTIME;
    } else {
        char path[256] = "";
        const cJSON *va = NULL, *vb = NULL;
        if (first_diff(a, b, path, sizeof path, &va, &vb)) {
            char *ta = va ? cJSON_PrintUnformatted(va) : NULL, *tb = vb ? cJSON_PrintUnformatted(vb) : NULL;
            fprintf(stderr, "tma launch: %s is not the config of the run in %s: \"%s\" is %s there, %s in %s (the "
                            "flags of the first launch, such as --workers, count too); resume with the run's own "
                            "config: tma launch --resume %s\n",
                    config, run, path, ta ? ta : "absent", tb ? tb : "absent", config, run);
            cJSON_free(ta);
            cJSON_free(tb);
            rc = CLI_EXIT_USAGE;
        }
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    tma_job_destroy(given);
    return rc;
}

/* A run that ended by its budget (result.json says why it stopped) is
 * finished; an interrupted or failed one, or one killed before its result,
 * is not. */
static int finished(const char *run)
{
    char *path = tma_path_join(run, "result.json");
    cJSON *res = NULL;
    int done = 0;
    if (path && tma_file_exists(path) && tma_json_load_file(path, &res) == TMA_OK) {
        const cJSON *why = cJSON_GetObjectItemCaseSensitive(res, "stopped");
        done = cJSON_IsString(why) && strcmp(why->valuestring, "interrupted") != 0 &&
               strcmp(why->valuestring, "failed") != 0;
        if (done)
            fprintf(stderr, "tma launch: the run in %s finished (stopped by %s; results in %s): nothing to resume\n",
                    run, why->valuestring, path);
    }
    cJSON_Delete(res);
    free(path);
    return done;
}

int cli_launch_resume_job(const char *run, const char *config, tma_job_t **job_p)
{
    struct stat sb;
    if (stat(run, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "tma launch: --resume %s: no such run folder\n", run);
        return CLI_EXIT_USAGE;
    }
    char *path = tma_path_join(run, "job.json");
    if (!path)
        return CLI_EXIT_RUNTIME;
    if (!tma_file_exists(path)) {
        fprintf(stderr, "tma launch: %s: missing: %s holds no run of tma launch that can be resumed\n", path, run);
        free(path);
        return CLI_EXIT_USAGE;
    }
    tma_job_t *job = NULL;
    tma_status_t st = tma_job_load(path, &job);
    free(path);
    int rc = st == TMA_OK ? CLI_EXIT_OK : st == TMA_ERR_NOMEM ? CLI_EXIT_RUNTIME : CLI_EXIT_USAGE;
    if (rc == CLI_EXIT_OK && finished(run))
        rc = CLI_EXIT_USAGE;
    if (rc == CLI_EXIT_OK && config)
        rc = same_job(run, job, config);
    if (rc != CLI_EXIT_OK) {
        tma_job_destroy(job);
        return rc;
    }
    *job_p = job;
    return CLI_EXIT_OK;
}

/* The create revision of the job's coordinator key (its leader's epoch), 0
 * when there is none. */
static tma_status_t leader_epoch(tma_kv_t *kv, const char *job, uint64_t *epoch_p)
{
    char key[TMA_KEY_MAX];
    tma_job_key(key, job, TMA_KEY_COORDINATOR);
    tma_kv_result_t res;
    memset(&res, 0, sizeof res);
    tma_status_t st = tma_kv_get(kv, key, &res);
    *epoch_p = st == TMA_OK && res.n_pairs == 1 ? (uint64_t)res.pairs[0].create_revision : 0;
    tma_kv_result_free(&res);
    return st == TMA_ERR_NOT_FOUND ? TMA_OK : st;
}

tma_status_t cli_launch_leader_epoch(const tma_kv_config_t *kc, const char *job, uint64_t *epoch_p)
{
    tma_kv_t *kv;
    tma_status_t st = tma_kv_create(kc, &kv);
    if (st == TMA_OK)
        st = leader_epoch(kv, job, epoch_p);
    if (st != TMA_OK)
        fprintf(stderr, "tma launch: cannot read job %s's coordinator key in etcd: %s\n", job, tma_status_str(st));
    tma_kv_destroy(kv);
    return st;
}

tma_status_t cli_launch_await_leader(const tma_kv_config_t *kc, const char *job, uint64_t old, cli_proc_t *coord,
                                     volatile sig_atomic_t *stop)
{
    tma_kv_t *kv;
    tma_status_t st = tma_kv_create(kc, &kv);
    uint64_t epoch = old;
    while (st == TMA_OK && epoch <= old) {
        if (*stop) {
            st = TMA_ERR_CANCELLED;
        } else if (!cli_proc_poll(coord)) {
            /* It refused the job (exit 2: it said why in its log) or failed. */
            st = cli_proc_exit_code(coord) == CLI_EXIT_USAGE ? TMA_ERR_CONFIG : TMA_ERR_IO;
        } else {
            tma_sleep(0.1);
            if (leader_epoch(kv, job, &epoch) != TMA_OK)
                epoch = old; /* etcd busy: ask again */
        }
    }
    tma_kv_destroy(kv);
    return st;
}
