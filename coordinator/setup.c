/*
 * setup.c: the coordinator's resources, acquired in four phases and
 * released in reverse order.  Each coord_open_* takes its phase's
 * resources in order and, when one fails, releases what it took (its
 * coord_close_*, which accepts a partly opened phase); tma_coordinator_run
 * unwinds the phases before it by labels.
 *
 *   job:    the config (a file is checked before anything talks to etcd),
 *           etcd, the job view, --fresh, --resume's revoking of the
 *           leases a stopped job left, the config from etcd
 *   model:  the graph, the model config, the parameter buffers (with the
 *           weights of "init"), the shard map, the variant's full-graph
 *           trainer
 *   lead:   the transport, the leader lease and its guard, the election
 *   run:    resume or not, the run folder, the config and the "starting"
 *           state in etcd, the evaluator thread
 */
#include "coord_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMP COORD_COMP

/* ------------------------------------------------------------------ job */

/* Any failure but memory is the config's (logged, naming the file or key):
 * TMA_ERR_CONFIG, so the caller can tell a bad config from a failed job. */
static tma_status_t load_config_file(coord_t *c)
{
    tma_status_t st = tma_job_load(c->o->config_path, &c->job);
    if (st == TMA_OK) {
        if (c->o->job)
            snprintf(c->job->name, sizeof c->job->name, "%s", c->o->job);
        /* A graph that is not there is a missing input (exit 1), as in
         * every command that reads one; the rest of the files are config. */
        if (c->job->source == TMA_SOURCE_GRAPH && c->job->graph && access(c->job->graph, R_OK) != 0) {
            tma_log_error(COMP, "cannot read the graph %s (\"graph\" in %s): %s", c->job->graph, c->o->config_path,
                          strerror(errno));
            return TMA_ERR_NOT_FOUND;
        }
        st = tma_job_check_files(c->job);
    }
    return st == TMA_OK || st == TMA_ERR_NOMEM ? st : TMA_ERR_CONFIG;
}

/* From etcd: a standby waits for it for ever, others for 30 s. */
static tma_status_t load_config_etcd(coord_t *c)
{
    tma_status_t st = tma_job_view_wait_config(c->view, c->o->standby ? 1e12 : 30.0, c->stop_flag, &c->job);
    if (st == TMA_ERR_TIMEOUT) {
        tma_log_error(COMP, "job %s has no config in etcd: start the first coordinator with --config",
                      c->jobname);
        return TMA_ERR_NOT_FOUND;
    }
    if (st == TMA_OK)
        st = tma_job_check_files(c->job);
    return st;
}

/* A config file with no token (none in it, no token file, no $TMA_JOB_TOKEN)
 * for a job that etcd already holds, as when a coordinator is restarted with
 * the command that started it: the job's token is the one its workers
 * already use, the one in etcd, not a new one. */
static tma_status_t adopt_token(coord_t *c)
{
    tma_status_t st = tma_job_load_token(c->job);
    if (st != TMA_OK || c->job->token[0])
        return st;
    tma_job_t *prev = NULL;
    if (tma_job_view_wait_config(c->view, 0.0, NULL, &prev) == TMA_OK && prev->token[0]) {
        memcpy(c->job->token, prev->token, sizeof c->job->token);
        c->job->token_src = prev->token_src;
        tma_log_info(COMP, "job %s: using the job token stored with its config in etcd", c->jobname);
    }
    tma_job_destroy(prev);
    return TMA_OK;
}

/* --resume: every process of the job was stopped, so the leases its
 * coordinator and members left (an etcd restarted on its data keeps them
 * for a TTL) belong to nobody: revoked, with their keys, so this
 * coordinator leads at once and deals to the workers that register now.
 * Waits (a few seconds at most) until the view no longer shows them. */
static tma_status_t release_old_leases(coord_t *c)
{
    tma_job_view_snap_t s;
    tma_status_t st = tma_job_view_snapshot(c->view, &s);
    if (st != TMA_OK)
        return st;
    int n = 0;
    if (s.coord_present && s.coord_key_lease > 0 && tma_kv_lease_revoke(c->kv, s.coord_key_lease) == TMA_OK)
        n++;
    for (int i = 0; i < s.n_members; i++)
        n += tma_kv_lease_revoke(c->kv, s.members[i].rec.lease) == TMA_OK;
    if (n)
        tma_log_info(COMP, "--resume: revoked %d lease(s) the job's stopped %s left", n,
                     s.coord_present ? "coordinator and members" : "members");
    for (double end = tma_clock_now() + 10.0; (s.coord_present || s.n_members > 0) && tma_clock_now() < end;) {
        uint64_t seen = s.version;
        tma_job_view_snap_free(&s);
        tma_job_view_wait(c->view, seen, 0.2);
        if ((st = tma_job_view_snapshot(c->view, &s)) != TMA_OK)
            return st;
    }
    tma_job_view_snap_free(&s);
    return TMA_OK;
}

/* --fresh: removes a finished job's keys of the same name. */
static tma_status_t remove_old_keys(coord_t *c)
{
    tma_job_view_snap_t s;
    tma_status_t st = tma_job_view_snapshot(c->view, &s);
    if (st != TMA_OK)
        return st;
    int live = s.has_coord;
    tma_job_view_snap_free(&s);
    if (live) {
        tma_log_error(COMP, "--fresh: job %s has a running coordinator; stop it first", c->jobname);
        return TMA_ERR_CONFIG;
    }
    char prefix[TMA_KEY_MAX];
    tma_job_prefix(prefix, c->jobname);
    return tma_kv_delete(c->kv, prefix, TMA_KV_PREFIX, NULL);
}

tma_status_t coord_open_job(coord_t *c)
{
    const tma_coordinator_opts_t *o = c->o;
    tma_status_t st;
    /* A config file is checked before anything talks to etcd, so a bad one
     * is refused before the job starts. */
    if (o->config_path && (st = load_config_file(c)) != TMA_OK)
        goto fail;
    const char *jobname = o->job ? o->job : c->job ? c->job->name : NULL;
    if (!jobname) {
        tma_log_error(COMP, "no job name: give --job or a config with \"job\"");
        st = TMA_ERR_CONFIG;
        goto fail;
    }
    snprintf(c->jobname, sizeof c->jobname, "%s", jobname);
    if (o->etcd_check && (st = o->etcd_check(o->etcd_check_arg)) != TMA_OK)
        goto fail;
    if ((st = tma_kv_create(o->kv, &c->kv)) != TMA_OK)
        goto fail;
    if ((st = tma_job_view_start(c->kv, c->jobname, 30.0, &c->view)) != TMA_OK)
        goto fail;
    if (o->fresh && (st = remove_old_keys(c)) != TMA_OK)
        goto fail;
    if (o->resume && (st = release_old_leases(c)) != TMA_OK)
        goto fail;
    /* Without a file the config comes from etcd (a standby, or a resumed job). */
    if (!c->job && (st = load_config_etcd(c)) != TMA_OK)
        goto fail;
    if ((st = adopt_token(c)) != TMA_OK)
        goto fail;
    snprintf(c->job->name, sizeof c->job->name, "%s", c->jobname);
    c->vd = c->job->vd;
    char tag[64];
    snprintf(tag, sizeof tag, "coordinator%s", o->standby ? "-standby" : "");
    tma_log_set_tag(tag);
    return TMA_OK;
fail:
    coord_close_job(c);
    return st;
}

void coord_close_job(coord_t *c)
{
    tma_job_view_stop(c->view);
    c->view = NULL;
    tma_kv_destroy(c->kv);
    c->kv = NULL;
    tma_job_destroy(c->job);
    c->job = NULL;
}

/* ------------------------------------------------------------------ model */

/* The model config the evaluator uses: the job's, with the command line's
 * evaluator device and threads; it reads the weights from host memory
 * whatever the device. */
static tma_status_t model_config(coord_t *c)
{
    c->cfg = c->job->model;
    if (c->o->eval_threads > 0)
        c->cfg.eval_threads = c->o->eval_threads;
    const char *dev = c->o->eval_device ? c->o->eval_device : c->job->eval_device;
    if (!tma_gnn_device_valid(dev)) {
        tma_log_error(COMP, "evaluator device \"%s\": expected cpu, cuda or cuda:N", dev);
        return TMA_ERR_INVALID;
    }
    snprintf(c->cfg.eval_device, sizeof c->cfg.eval_device, "%s", dev);
    return tma_gnn_config_resolve(&c->cfg, c->graph);
}

/* eval.where: "auto" is the workers' ranks for a job of two or more
 * workers with shards whose partition has inference files, else the
 * coordinator; "workers" needs those files.  Decided here, before the
 * config is published, so every role reads the same. */
static tma_status_t eval_where(coord_t *c)
{
    int *w = &c->job->model.eval_on_workers;
    if (!c->vd->uses_shards || *w == 0) {
        *w = 0;
        return TMA_OK;
    }
    if (!c->pinfo->inference) {
        if (*w > 0) {
            tma_log_error(COMP, "eval.where \"workers\": the partition in %s has no inference files (an older tma "
                          "partition made it): run tma partition again, or set eval.where \"coordinator\"",
                          c->pinfo->dir);
            return TMA_ERR_CONFIG;
        }
        tma_log_info(COMP, "evaluation on the coordinator: the partition in %s has no inference files (partition it "
                     "again to evaluate on the workers)", c->pinfo->dir);
        *w = 0;
        return TMA_OK;
    }
    /* Ranks compute on the CPU: an evaluator asked on a GPU is the coordinator's. */
    const char *dev = c->o->eval_device ? c->o->eval_device : c->job->eval_device;
    if (strcmp(dev, "cpu") != 0) {
        if (*w > 0) {
            tma_log_error(COMP, "eval.where \"workers\" evaluates on the workers' CPUs, but the evaluator device is "
                          "\"%s\": set eval.where \"coordinator\" for an evaluator on a GPU", dev);
            return TMA_ERR_CONFIG;
        }
        *w = 0;
        return TMA_OK;
    }
    if (*w < 0)
        *w = c->job->workers >= 2;
    return TMA_OK;
}

tma_status_t coord_open_model(coord_t *c)
{
    tma_status_t st;
    if (c->vd->uses_shards && (st = tma_partition_info_load(c->job->partition_dir, &c->pinfo)) != TMA_OK)
        goto fail;
    if ((st = eval_where(c)) != TMA_OK)
        goto fail;
    /* Ranks evaluate: the graph's header is all this process needs, unless
     * the variant trains on the whole graph here (LLCG's correction). */
    if ((st = c->job->model.eval_on_workers > 0 && !c->vd->after_average
                  ? tma_graph_open_header(c->job->graph, &c->graph)
                  : tma_graph_open(c->job->graph, 0, &c->graph)) != TMA_OK)
        goto fail;
    tma_log_info(COMP, "evaluation on %s%s", c->job->model.eval_on_workers > 0 ? "the workers' ranks" : "the coordinator",
                 c->graph->indptr ? "" : ": this process reads the graph's header, not the graph");
    if ((st = model_config(c)) != TMA_OK)
        goto fail;
    c->P = tma_gnn_param_count(&c->cfg);
    c->global = tma_alloc_aligned((size_t)c->P * sizeof(float));
    c->acc = tma_alloc_aligned((size_t)c->P * sizeof(double));
    if (!c->global || !c->acc) {
        st = TMA_ERR_NOMEM;
        goto fail;
    }
    if (c->job->init) {
        /* Round 0's weights: checked now, before anything is written, as
         * every file the config names is (a standby needs it too). */
        float *w = NULL;
        if ((st = tma_job_init_weights(c->job, &c->cfg, &w)) != TMA_OK)
            goto fail;
        memcpy(c->global, w, (size_t)c->P * sizeof(float));
        free(w);
    }
    if (c->vd->uses_shards) {
        if ((st = tma_shard_map_create(c->pinfo->num_shards, c->pinfo->shard_edges, &c->map)) != TMA_OK)
            goto fail;
    } else if ((st = tma_shard_map_create(0, NULL, &c->map)) != TMA_OK) {
        goto fail;
    }
    c->meta_floats = tma_job_msg_meta_floats(c->map.n);
    if (c->vd->after_average) {
        tma_graph_t *g1[1] = {c->graph};
        tma_gnn_config_t scfg = c->cfg;
        if ((st = tma_gnn_trainer_create(&scfg, g1, 1, &c->server)) != TMA_OK)
            goto fail;
        tma_gnn_trainer_reseed(c->server, tma_hash64(c->cfg.seed ^ 0xc0c0));
    }
    return TMA_OK;
fail:
    coord_close_model(c);
    return st;
}

void coord_close_model(coord_t *c)
{
    tma_gnn_trainer_destroy(c->server);
    c->server = NULL;
    tma_shard_map_free(&c->map);
    memset(&c->map, 0, sizeof c->map);
    tma_partition_info_destroy(c->pinfo);
    c->pinfo = NULL;
    tma_free_aligned(c->acc);
    tma_free_aligned(c->global);
    c->acc = NULL;
    c->global = NULL;
    tma_graph_destroy(c->graph);
    c->graph = NULL;
}

/* ------------------------------------------------------------------ leadership */

static tma_status_t open_transport(coord_t *c)
{
    tma_status_t st = tma_job_ensure_token(c->job);
    if (st != TMA_OK)
        return st;
    tma_transport_config_t tc;
    tma_transport_config_init(&tc);
    char listen[300];
    tma_job_listen_address(c->job, 0, listen, sizeof listen);
    tc.job = c->job->name;
    tc.token = c->job->token[0] ? c->job->token : NULL;
    tc.self_id = TMA_COORD_PEER;
    tc.listen = listen;
    return tma_transport_create(&tc, &c->tr);
}

/* A coordinator record bound to no lease was written by something other
 * than a coordinator (a leader's own record always carries its lease, and a
 * live leader writes it again as soon as it sees it changed): no lease will
 * ever lapse to remove it.  Deletes it if it is still the same write. */
static void remove_unleased(coord_t *c, const char *key, int64_t mod_revision, double waited)
{
    tma_kv_cmp_t cmp = {key, TMA_KV_CMP_MOD, TMA_KV_EQUAL, mod_revision, NULL, 0};
    tma_kv_op_t op;
    memset(&op, 0, sizeof op);
    op.type = TMA_KV_OP_DELETE;
    op.key = key;
    tma_kv_txn_t txn = {&cmp, 1, &op, 1, NULL, 0};
    tma_kv_result_t res;
    memset(&res, 0, sizeof res);
    tma_status_t st = tma_kv_txn(c->kv, &txn, &res);
    if (st == TMA_OK && res.succeeded)
        tma_log_warn(COMP, "job %s: %s held a record bound to no lease for %.0f s (no coordinator wrote it; "
                           "a leader would have written its own again): removed it to lead the job",
                     c->job->name, key, waited);
    else if (st != TMA_OK)
        tma_log_warn(COMP, "job %s: removing the unleased record %s failed (%s); trying again", c->job->name, key,
                     tma_status_str(st));
    tma_kv_result_free(&res);
}

/* Leader election: create the coordinator key with our lease, waiting for a
 * current leader's lease to lapse (a standby waits for ever, others up to
 * twice the lease TTL plus a little).  A record bound to no lease that
 * stays so longer than the lease TTL (and a little) is removed: nothing
 * else would ever remove it.  Sets c->epoch. */
static tma_status_t campaign(coord_t *c)
{
    char key[TMA_KEY_MAX];
    tma_job_key(key, c->job->name, TMA_KEY_COORDINATOR);
    tma_job_coord_rec_t rec;
    memset(&rec, 0, sizeof rec);
    snprintf(rec.address, sizeof rec.address, "%s", tma_transport_address(c->tr));
    rec.lease = c->lease;
    rec.pid = (int)getpid();
    gethostname(rec.host, sizeof rec.host - 1);
    c->leader = rec;
    char *val = tma_job_coord_rec_encode(&rec);
    if (!val)
        return TMA_ERR_NOMEM;
    double give_up = tma_clock_now() + 2.0 * (double)c->job->lease_ttl + 5.0;
    double unleased_grace = (double)c->job->lease_ttl + 2.0, unleased_since = 0;
    int64_t unleased_rev = 0;
    int said = 0;
    tma_status_t st;
    for (;;) {
        tma_kv_result_t cur;
        memset(&cur, 0, sizeof cur);
        st = tma_kv_put_if_absent(c->kv, key, val, strlen(val), c->lease, &cur);
        if (st == TMA_OK) {
            c->epoch = (uint64_t)cur.pairs[0].create_revision;
            tma_kv_result_free(&cur);
            break;
        }
        if (st == TMA_ERR_COMPARE_FAILED) {
            if (cur.n_pairs && cur.pairs[0].lease == 0) {
                double now = tma_clock_now();
                if (cur.pairs[0].mod_revision != unleased_rev) {
                    tma_log_warn(COMP, "job %s: %s holds a record bound to no lease (not a coordinator's); removing it "
                                       "unless a leader writes its own within %.0f s",
                                 c->job->name, key, unleased_grace);
                    unleased_rev = cur.pairs[0].mod_revision;
                    unleased_since = now;
                    said = 1;
                } else if (now - unleased_since > unleased_grace) {
                    remove_unleased(c, key, unleased_rev, now - unleased_since);
                    unleased_rev = 0;
                    tma_kv_result_free(&cur);
                    continue;
                }
            } else {
                unleased_rev = 0;
            }
            if (!said) {
                tma_job_coord_rec_t other;
                if (cur.n_pairs &&
                    tma_job_coord_rec_decode(key, cur.pairs[0].value, cur.pairs[0].value_len, &other) == TMA_OK)
                    tma_log_info(COMP, "job %s has a leader (pid %d on %s at %s); %s", c->job->name, other.pid,
                                 other.host, other.address,
                                 c->o->standby ? "standing by to take over" : "waiting for its lease to lapse");
                said = 1;
            }
            tma_kv_result_free(&cur);
            if (!c->o->standby && tma_clock_now() > give_up) {
                tma_log_error(COMP, "job %s: another coordinator is running; use --standby to wait for it, or "
                                    "another job name",
                              c->job->name);
                st = TMA_ERR_UNAVAILABLE;
                break;
            }
        } else if (tma_status_group(st) != TMA_GROUP_PEER) {
            break;
        }
        if (coord_stopping(c)) {
            st = TMA_ERR_CANCELLED;
            break;
        }
        tma_job_view_wait(c->view, tma_job_view_wait(c->view, 0, 0), 0.5);
    }
    free(val);
    return st;
}

static void on_lease_lost(void *arg, tma_status_t why)
{
    coord_t *c = arg;
    tma_log_error(COMP, "the leader lease %llx is lost (%s): fenced", (unsigned long long)c->lease,
                  tma_status_str(why));
    __atomic_store_n(&c->lease_lost, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&c->fenced, 1, __ATOMIC_SEQ_CST);
    tma_job_view_poke(c->view);
}

/* The data plane first, then leadership. */
tma_status_t coord_lead(coord_t *c)
{
    tma_status_t st;
    if ((st = open_transport(c)) != TMA_OK)
        goto fail;
    if ((st = tma_kv_lease_grant(c->kv, c->job->lease_ttl, &c->lease, NULL)) != TMA_OK)
        goto fail;
    if ((st = tma_lease_guard_start(c->kv, c->lease, on_lease_lost, c, &c->lease_guard)) != TMA_OK)
        goto fail;
    if ((st = campaign(c)) != TMA_OK)
        goto fail;
    tma_log_info(COMP, "leading job %s (epoch %llu) at %s", c->job->name, (unsigned long long)c->epoch,
                 tma_transport_address(c->tr));
    char why[512];
    if (tma_transport_explain_route(tma_transport_address(c->tr), why, sizeof why))
        tma_log_warn(COMP, "workers will not be able to connect to %s: %s", tma_transport_address(c->tr), why);
    return TMA_OK;
fail:
    coord_step_down(c);
    return st;
}

/* Also releases the slots (their buffers are posted on the transport).  A
 * fenced coordinator leaves its lease alone: it is another's job now. */
void coord_step_down(coord_t *c)
{
    for (int i = 0; i < c->n_slots; i++) {
        if (c->slots[i].used)
            coord_slot_release(c, &c->slots[i]);
        tma_free_aligned(c->slots[i].buf);
        free(c->slots[i].shards);
    }
    free(c->slots);
    free(c->contrib);
    c->slots = NULL;
    c->contrib = NULL;
    c->n_slots = c->cap_slots = 0;
    tma_transport_destroy(c->tr);
    c->tr = NULL;
    if (c->lease) {
        tma_lease_guard_stop(c->lease_guard);
        if (!__atomic_load_n(&c->fenced, __ATOMIC_SEQ_CST))
            tma_kv_lease_revoke(c->kv, c->lease);
    }
    c->lease_guard = NULL;
    c->lease = 0;
}

/* ------------------------------------------------------------------ run folder */

/* The run folder: a resumed job keeps its own; else --run-dir or
 * runs/<job>.  Made absolute. */
static tma_status_t open_run_dir(coord_t *c)
{
    if (c->resume)
        c->run_dir = strdup(c->prev.run_dir);
    else if (c->o->run_dir)
        c->run_dir = strdup(c->o->run_dir);
    else
        c->run_dir = tma_strdup_printf("runs/%s", c->job->name);
    if (!c->run_dir)
        return TMA_ERR_NOMEM;
    char *abs;
    tma_status_t st = tma_job_run_make_dir(c->run_dir, &abs);
    if (st != TMA_OK)
        return st;
    free(c->run_dir);
    c->run_dir = abs;
    /* Round 0's; a takeover names the checkpoint it resumes from. */
    c->checkpoint_path = coord_checkpoint_path(c->run_dir, 0, c->epoch);
    c->metrics_path = tma_job_run_path(c->run_dir, "metrics.jsonl");
    c->result_path = tma_job_run_path(c->run_dir, "result.json");
    return c->checkpoint_path && c->metrics_path && c->result_path ? TMA_OK : TMA_ERR_NOMEM;
}

/* A fresh job: the resolved config and the "starting" state in etcd (agg
 * and stop cleared), config.json in the run folder, no metrics yet. */
static tma_status_t publish_job(coord_t *c)
{
    cJSON *cfgjson = tma_job_to_json(c->job), *shared = tma_job_to_etcd_json(c->job);
    char *text = shared ? cJSON_PrintUnformatted(shared) : NULL;
    cJSON_Delete(shared);
    if (!cfgjson) {
        cJSON_free(text);
        return TMA_ERR_NOMEM;
    }
    char ckey[TMA_KEY_MAX], skey[TMA_KEY_MAX], akey[TMA_KEY_MAX], stkey[TMA_KEY_MAX];
    tma_job_key(ckey, c->job->name, TMA_KEY_CONFIG);
    tma_job_key(skey, c->job->name, TMA_KEY_STATE);
    tma_job_key(akey, c->job->name, TMA_KEY_AGG);
    tma_job_key(stkey, c->job->name, TMA_KEY_STOP);
    char *sv = coord_state_encode(c, "starting", 0, 0.0, -1, 0);
    const char *keys[4] = {ckey, skey, akey, stkey};
    char *vals[4] = {text, sv, NULL, NULL};
    tma_status_t st = text && sv ? coord_guarded_put(c, 4, keys, vals, 1) : TMA_ERR_NOMEM;
    if (text) /* it may hold the token */
        memset(text, 0, strlen(text));
    cJSON_free(text);
    free(sv);
    char *cfgpath = tma_job_run_path(c->run_dir, "config.json");
    if (st == TMA_OK)
        st = tma_json_write_file(cfgpath, cfgjson);
    free(cfgpath);
    unlink(c->metrics_path);
    cJSON_Delete(cfgjson);
    return st;
}

tma_status_t coord_open_run(coord_t *c)
{
    tma_status_t st;
    if ((st = coord_resume_check(c)) != TMA_OK)
        goto fail;
    if ((st = open_run_dir(c)) != TMA_OK)
        goto fail;
    if ((st = coord_prom_create(c->job, c->kv, &c->prom)) != TMA_OK)
        goto fail;
    if (!c->resume && (st = publish_job(c)) != TMA_OK)
        goto fail;
    coord_prom_phase(c->prom, c->resume ? c->prev.phase : "starting", c->epoch);
    coord_eval_cfg_t ec = {&c->cfg, c->graph, c->run_dir, c->kv, c->job->name, c->epoch, &c->fenced, c->stop_flag,
                           -1, 0, 0, {c->job->train_s, c->job->rounds, c->job->workers}, &c->inj,
                           c->job->tensorboard, c->prom, NULL, 0};
    coord_ranks_cfg_t rc = {c->job->name, c->job->token[0] ? c->job->token : NULL, c->view, &c->cfg,
                            c->pinfo ? c->pinfo->num_shards : 0, c->graph->num_val, c->graph->num_test,
                            c->graph->num_negatives, c->epoch, &c->fenced, c->stop_flag};
    if (c->cfg.eval_on_workers > 0)
        ec.ranks = &rc;
    if (c->resume && (st = coord_resume_metrics(c, &ec)) != TMA_OK)
        goto fail;
    if (c->resume)
        ec.first_round = c->prev.round + 1;
    if ((st = coord_eval_create(&ec, &c->ev)) != TMA_OK)
        goto fail;
    return TMA_OK;
fail:
    coord_close_run(c);
    return st;
}

void coord_close_run(coord_t *c)
{
    coord_eval_destroy(c->ev);
    c->ev = NULL;
    coord_prom_destroy(c->prom);
    c->prom = NULL;
    free(c->result_path);
    free(c->metrics_path);
    free(c->checkpoint_path);
    free(c->checkpoint_prev);
    free(c->run_dir);
    c->result_path = c->metrics_path = c->checkpoint_path = c->checkpoint_prev = c->run_dir = NULL;
}
