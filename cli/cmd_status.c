/* cmd_status.c: `tma status --etcd URLS --job NAME`: a live job's state. */
#include "cli_int.h"
#include "tma_fault.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int cli_cmd_status(int argc, char **argv)
{
    cli_etcd_flags_t ef;
    memset(&ef, 0, sizeof ef);
    const char *job = NULL;
    int as_json = 0;
    const cli_opt_t opts[] = {
        CLI_ETCD_OPTS(ef),
        {"job", 0, CLI_STR, &job, "NAME", "the job (required)", NULL},
        {"json", 0, CLI_FLAG, &as_json, NULL, "print one JSON object", NULL},
        {NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    const cli_spec_t spec = {"status", "--etcd URLS --job NAME [--json]",
                             "Shows a job's state from etcd: its coordinator, phase and round, the best round so "
                             "far, the members with the shards they own, and whether they are ready.",
                             opts, 0, 0};
    cli_args_t args;
    if (!cli_args_parse(&spec, argc, argv, &args))
        return args.exit;
    tma_kv_config_t kc;
    int rc = cli_etcd_config("status", &ef, &kc);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!job)
        return cli_usage_error("status", "--job NAME is required");
    tma_kv_t *kv;
    if (tma_kv_create(&kc, &kv) != TMA_OK)
        return CLI_EXIT_RUNTIME;
    tma_job_view_t *v;
    tma_status_t st = tma_job_view_start(kv, job, 0, &v);
    if (st != TMA_OK) {
        tma_kv_destroy(kv);
        return CLI_EXIT_RUNTIME;
    }
    tma_job_view_snap_t s;
    st = tma_job_view_snapshot(v, &s);
    tma_job_view_stop(v);
    if (st != TMA_OK) {
        tma_kv_destroy(kv);
        return CLI_EXIT_RUNTIME;
    }
    if (!s.config && !s.has_state && s.n_members == 0) {
        fprintf(stderr, "tma status: job %s: nothing in etcd under /tma/%s/ (wrong --job or --etcd?)\n", job, job);
        tma_job_view_snap_free(&s);
        tma_kv_destroy(kv);
        return CLI_EXIT_RUNTIME;
    }
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
    tma_job_view_snap_free(&s);
    tma_kv_destroy(kv);
    return CLI_EXIT_OK;
}
