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

int tma_policy_lost(tma_shard_map_t *map, int64_t lost, tma_job_policy_t policy, const tma_live_member_t *live,
                    int n_live, tma_shard_move_t *moves)
{
    int n = 0;
    for (int k = 0; k < map->n; k++) {
        if (map->owner[k] != lost)
            continue;
        int64_t to = -1;
        if (policy == TMA_POLICY_REASSIGN) {
            /* A backup that owns nothing yet, lowest id first ... */
            for (int i = 0; i < n_live; i++) {
                if (live[i].id == lost || !live[i].backup || tma_shard_map_count(map, live[i].id, NULL) > 0)
                    continue;
                if (to < 0 || live[i].id < to)
                    to = live[i].id;
            }
            /* ... else the least-loaded live member. */
            if (to < 0) {
                int64_t best = -1;
                for (int i = 0; i < n_live; i++) {
                    if (live[i].id == lost)
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
            }
        }
        n = move(map, k, to, moves, n);
    }
    return n;
}

int tma_policy_joined(tma_shard_map_t *map, int64_t joined, int backup, tma_job_policy_t policy,
                      tma_shard_move_t *moves)
{
    int n = 0;
    if (tma_shard_map_count(map, joined, NULL) > 0)
        return 0;
    for (int k = 0; k < map->n; k++) {
        if (map->owner[k] >= 0)
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
        if (map->owner[k] == donor)
            return move(map, k, joined, moves, 0);
    return 0;
}
