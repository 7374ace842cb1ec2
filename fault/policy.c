/*
 * policy.c: the shard map and the recovery policies as pure functions, so
 * every decision the coordinator takes on a failure or a join can be tested
 * without processes.  Shards are the unit of ownership (docs/architecture.md): a union
 * of random shards is again a random partition, so moving whole shards never
 * needs a re-partition.
 */
#include "tma_fault.h"

#include <stdlib.h>
#include <string.h>

tma_status_t tma_shard_map_create(int n, const int64_t *edges, tma_shard_map_t *map_p)
{
    tma_shard_map_t m;
    memset(&m, 0, sizeof m);
    m.n = n;
    m.owner = malloc((size_t)(n > 0 ? n : 1) * sizeof *m.owner);
    m.edges = malloc((size_t)(n > 0 ? n : 1) * sizeof *m.edges);
    if (!m.owner || !m.edges) {
        free(m.owner);
        free(m.edges);
        return TMA_ERR_NOMEM;
    }
    for (int k = 0; k < n; k++) {
        m.owner[k] = -1;
        m.edges[k] = edges ? edges[k] : 1;
    }
    *map_p = m;
    return TMA_OK;
}

void tma_shard_map_free(tma_shard_map_t *map)
{
    if (!map)
        return;
    free(map->owner);
    free(map->edges);
    free(map->refusals);
    memset(map, 0, sizeof *map);
}

int tma_shard_map_count(const tma_shard_map_t *map, int64_t member, int64_t *edges_p)
{
    int c = 0;
    int64_t e = 0;
    for (int k = 0; k < map->n; k++) {
        if (map->owner[k] == member) {
            c++;
            e += map->edges[k];
        }
    }
    if (edges_p)
        *edges_p = e;
    return c;
}

int tma_shard_map_refused(const tma_shard_map_t *map, int32_t shard, int64_t member)
{
    for (int i = 0; i < map->n_refusals; i++)
        if (map->refusals[i].shard == shard && map->refusals[i].member == member)
            return 1;
    return 0;
}

int tma_shard_map_refuse(tma_shard_map_t *map, int32_t shard, int64_t member)
{
    if (tma_shard_map_refused(map, shard, member))
        return 0;
    if (map->n_refusals == map->cap_refusals) {
        int cap = map->cap_refusals ? 2 * map->cap_refusals : 8;
        tma_shard_refusal_t *r = realloc(map->refusals, (size_t)cap * sizeof *r);
        if (!r)
            return -1;
        map->refusals = r;
        map->cap_refusals = cap;
    }
    map->refusals[map->n_refusals++] = (tma_shard_refusal_t){shard, member};
    return 1;
}

void tma_shard_map_forget(tma_shard_map_t *map, int64_t member)
{
    int j = 0;
    for (int i = 0; i < map->n_refusals; i++)
        if (map->refusals[i].member != member)
            map->refusals[j++] = map->refusals[i];
    map->n_refusals = j;
}

static int cmp_live(const void *a, const void *b)
{
    const tma_live_member_t *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int move(tma_shard_map_t *map, int k, int64_t to, tma_shard_move_t *moves, int n)
{
    moves[n].shard = k;
    moves[n].from = map->owner[k];
    moves[n].to = to;
    map->owner[k] = to;
    return n + 1;
}

int tma_policy_initial_absent(tma_shard_map_t *map, const tma_live_member_t *live, int n_live, int workers,
                              const int32_t *absent, int n_absent, tma_shard_move_t *moves)
{
    tma_live_member_t *sorted = malloc((size_t)(n_live > 0 ? n_live : 1) * sizeof *sorted);
    if (!sorted)
        return 0;
    int m = 0;
    for (int i = 0; i < n_live; i++)
        if (!live[i].backup)
            sorted[m++] = live[i];
    qsort(sorted, (size_t)m, sizeof *sorted, cmp_live);
    /* Trainer slot i is the i-th member by id; the present shards go to
     * slots round-robin; slots past the members that came stay vacant and
     * their shards orphaned, as do absent shards. */
    int slots = workers - n_absent;
    int n = 0, j = 0;
    for (int k = 0; k < map->n && slots > 0; k++) {
        int is_absent = 0;
        for (int a = 0; a < n_absent; a++)
            is_absent |= absent[a] == k;
        if (is_absent)
            continue;
        int slot = j++ % slots;
        if (slot < m && map->owner[k] != (int64_t)sorted[slot].id)
            n = move(map, k, sorted[slot].id, moves, n);
    }
    free(sorted);
    return n;
}

int tma_policy_initial(tma_shard_map_t *map, const tma_live_member_t *live, int n_live, int workers,
                       tma_shard_move_t *moves)
{
    return tma_policy_initial_absent(map, live, n_live, workers, NULL, 0, moves);
}

/* Who takes shard k from `from` (which keeps nothing of it): a backup that
 * owns nothing yet, lowest id first, else the least-loaded live member;
 * never a member that refused k.  -1: nobody. */
static int64_t pick_taker(const tma_shard_map_t *map, int k, int64_t from, const tma_live_member_t *live, int n_live)
{
    int64_t to = -1;
    for (int i = 0; i < n_live; i++) {
        if (live[i].id == from || !live[i].backup || tma_shard_map_count(map, live[i].id, NULL) > 0 ||
            tma_shard_map_refused(map, k, live[i].id))
            continue;
        if (to < 0 || live[i].id < to)
            to = live[i].id;
    }
    if (to >= 0)
        return to;
    int64_t best = -1;
    for (int i = 0; i < n_live; i++) {
        if (live[i].id == from || tma_shard_map_refused(map, k, live[i].id))
            continue;
        int64_t e;
        int c = tma_shard_map_count(map, live[i].id, &e);
        if (c == 0 && live[i].backup)
            e = 0;
        if (best < 0 || e < best || (e == best && live[i].id < to)) {
            best = e;
            to = live[i].id;
        }
    }
    return to;
}

int tma_policy_lost(tma_shard_map_t *map, int64_t lost, tma_job_policy_t policy, const tma_live_member_t *live,
                    int n_live, tma_shard_move_t *moves)
{
    int n = 0;
    for (int k = 0; k < map->n; k++) {
        if (map->owner[k] != lost)
            continue;
        int64_t to = policy == TMA_POLICY_REASSIGN ? pick_taker(map, k, lost, live, n_live) : -1;
        n = move(map, k, to, moves, n);
    }
    return n;
}

int tma_policy_refused(tma_shard_map_t *map, int32_t shard, const tma_live_member_t *live, int n_live,
                       tma_shard_move_t *moves)
{
    if (shard < 0 || shard >= map->n || map->owner[shard] < 0 ||
        !tma_shard_map_refused(map, shard, map->owner[shard]))
        return 0;
    return move(map, shard, pick_taker(map, shard, map->owner[shard], live, n_live), moves, 0);
}

int tma_policy_joined(tma_shard_map_t *map, int64_t joined, int backup, tma_job_policy_t policy,
                      tma_shard_move_t *moves)
{
    int n = 0;
    if (tma_shard_map_count(map, joined, NULL) > 0)
        return 0;
    for (int k = 0; k < map->n; k++) {
        if (map->owner[k] >= 0 || tma_shard_map_refused(map, k, joined))
            continue;
        n = move(map, k, joined, moves, n);
        if (!(backup && policy == TMA_POLICY_REASSIGN))
            return n;
    }
    if (n > 0 || backup)
        return n;
    /* No orphan: take one shard from the member that owns the most. */
    int64_t donor = -1;
    int most = 1;
    for (int k = 0; k < map->n; k++) {
        int c = tma_shard_map_count(map, map->owner[k], NULL);
        if (map->owner[k] >= 0 && (c > most || (c == most && donor >= 0 && map->owner[k] < donor))) {
            most = c;
            donor = map->owner[k];
        }
    }
    if (donor < 0)
        return 0;
    for (int k = map->n - 1; k >= 0; k--)
        if (map->owner[k] == donor && !tma_shard_map_refused(map, k, joined))
            return move(map, k, joined, moves, 0);
    return 0;
}
