/*
 * import_ogb.c: an OGB dataset's official split (split/<name>/train.pt,
 * valid.pt, test.pt: PyTorch pickles), found beside raw/, converted by the
 * tma-ogb-split program in a private temporary folder, read back, checked
 * against the node count and built as given (tma_graph_build_given).
 */
#include "graph_int.h"
#include "import_int.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define COMP "import"

/* ------------------------------------------------------------------ an OGB split (split/<name>/) */

/* The split folder of an OGB dataset: split/<name> under root (the only
 * one, or the one named), in *dir_p; NULL when root has no split/. */
tma_status_t graph_import_find_split(const char *root, const char *name, char **dir_p)
{
    *dir_p = NULL;
    char *base = tma_path_join(root, "split");
    if (!base)
        return TMA_ERR_NOMEM;
    if (!tma_dir_exists(base)) {
        free(base);
        return TMA_OK;
    }
    tma_status_t st = TMA_OK;
    if (name) {
        char *d = tma_path_join(base, name);
        if (d && tma_dir_exists(d)) {
            *dir_p = d;
        } else {
            tma_log_error(COMP, "%s: no split named '%s' in it", base, name);
            free(d);
            st = TMA_ERR_NOT_FOUND;
        }
        free(base);
        return st;
    }
    DIR *dh = opendir(base);
    struct dirent *e;
    int found = 0;
    char first[256] = "";
    while (dh && (e = readdir(dh)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *d = tma_path_join(base, e->d_name);
        if (d && tma_dir_exists(d)) {
            if (found++ == 0) {
                snprintf(first, sizeof first, "%s", e->d_name);
                *dir_p = d;
                d = NULL;
            } else {
                tma_log_error(COMP, "%s holds several splits (%s, %s, ...): choose one with --split NAME", base,
                              first, e->d_name);
                st = TMA_ERR_INVALID;
            }
        }
        free(d);
        if (st != TMA_OK)
            break;
    }
    if (dh)
        closedir(dh);
    if (st == TMA_OK && !found) {
        tma_log_error(COMP, "%s holds no split folder (an OGB split is split/<name>/{train,valid,test}.pt); "
                      "remove it or import with --resplit",
                      base);
        st = TMA_ERR_FORMAT;
    }
    if (st != TMA_OK) {
        free(*dir_p);
        *dir_p = NULL;
    }
    free(base);
    return st;
}

/* Runs the converter: tool DIR OUT --num-nodes N.  Its own message names
 * what is wrong with the .pt files; this one says which step failed. */
static tma_status_t convert_split(const char *tool, const char *python, const char *dir, int64_t nodes,
                                  const char *out)
{
    if (!tool || access(tool, X_OK) != 0) {
        char where[600] = "was not found";
        if (tool)
            snprintf(where, sizeof where, "is not an executable file at %s", tool);
        tma_log_error(COMP,
                      "%s is an official OGB split, read by the converter tma-ogb-split, which %s: it is "
                      "installed beside tma (make install), or set TMA_OGB_SPLIT to its path; --resplit draws "
                      "tma's own split instead",
                      dir, where);
        return TMA_ERR_NOT_FOUND;
    }
    char nbuf[32];
    snprintf(nbuf, sizeof nbuf, "%" PRId64, nodes);
    char *argv[] = {(char *)python, (char *)tool, (char *)dir, (char *)out, "--num-nodes", nbuf, NULL};
    char **args = python ? argv : argv + 1;
    pid_t pid;
    int e = posix_spawnp(&pid, args[0], NULL, NULL, args, environ);
    if (e != 0) {
        tma_log_error(COMP, "%s: cannot run the OGB split converter %s: %s", dir, args[0], strerror(e));
        return TMA_ERR_IO;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            tma_log_error(COMP, "%s: waiting for %s: %s", dir, tool, strerror(errno));
            return TMA_ERR_IO;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return TMA_OK;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        tma_log_error(COMP, "%s: %s could not start (exit 127): it runs under python3, which must be on the PATH "
                      "(or set TMA_PYTHON)", dir, tool);
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
        tma_log_error(COMP, "%s: reading the split needs PyTorch (the converter said which package to install; "
                      "TMA_PYTHON picks the python3 that runs it)", dir);
    else if (WIFEXITED(status))
        tma_log_error(COMP, "%s: the OGB split converter %s refused it (exit %d; its message is above)", dir, tool,
                      WEXITSTATUS(status));
    else
        tma_log_error(COMP, "%s: the OGB split converter %s was killed by signal %d", dir, tool, WTERMSIG(status));
    return WIFEXITED(status) && WEXITSTATUS(status) == 3 ? TMA_ERR_NOT_FOUND : TMA_ERR_FORMAT;
}

/* The converter's output (python/tma_ogb_split.py): magic, five u64 counts,
 * then each evaluation split's sources, targets and negatives (i64).  The
 * file is checked as untrusted: counts, exact size, every id in range. */
typedef struct ogb_split {
    tma_graph_given_split_t sp;
    int64_t train_edges;
    int64_t *pairs; /* [2 * (num_val + num_test)] interleaved (head, tail) */
    tma_mmap_t map;
} ogb_split_t;

#define OGB_SPLIT_MAGIC "TMAOGBS1"

static tma_status_t ids_in_range(const char *dir, const char *file, const char *key, const int64_t *a, int64_t n,
                                 int64_t nodes)
{
    for (int64_t i = 0; i < n; i++) {
        if (a[i] < 0 || a[i] >= nodes) {
            tma_log_error(COMP, "%s/%s: %s[%" PRId64 "] = %" PRId64 " is outside the graph's node ids [0, %" PRId64 ")",
                          dir, file, key, i, a[i], nodes);
            return TMA_ERR_RANGE;
        }
    }
    return TMA_OK;
}

static tma_status_t read_split(const char *path, const char *dir, int64_t nodes, ogb_split_t *o)
{
    tma_status_t st = tma_mmap_open(path, &o->map);
    if (st != TMA_OK)
        return st;
    const unsigned char *p = o->map.data;
    uint64_t h[5];
    if (o->map.size < 8 + sizeof h || memcmp(p, OGB_SPLIT_MAGIC, 8) != 0) {
        tma_log_error(COMP, "%s: the split converter's output %s is not in its format", dir, path);
        return TMA_ERR_FORMAT;
    }
    memcpy(h, p + 8, sizeof h);
    const uint64_t lim = (uint64_t)1 << 40;
    if (h[0] >= lim || h[1] >= lim || h[3] >= lim || h[2] > (1u << 20) || h[4] > (1u << 20) ||
        h[1] * h[2] >= lim || h[3] * h[4] >= lim) {
        tma_log_error(COMP, "%s: the split's counts are out of range", dir);
        return TMA_ERR_FORMAT;
    }
    if (h[2] != h[4]) {
        tma_log_error(COMP, "%s: valid.pt has %" PRIu64 " negatives per edge and test.pt %" PRIu64
                            "; a .tmag holds one count for both",
                      dir, h[2], h[4]);
        return TMA_ERR_FORMAT;
    }
    const int64_t nv = (int64_t)h[1], nt = (int64_t)h[3], K = (int64_t)h[2];
    const uint64_t want = 8 + sizeof h + 8 * (uint64_t)(nv * (2 + K) + nt * (2 + K));
    if (o->map.size != want) {
        tma_log_error(COMP, "%s: the split converter's output %s has %zu bytes, its counts need %" PRIu64, dir, path,
                      o->map.size, want);
        return TMA_ERR_FORMAT;
    }
    const int64_t *a = (const int64_t *)(p + 8 + sizeof h);
    const int64_t *vs = a, *vt = vs + nv, *vn = vt + nv, *ts = vn + nv * K, *tt = ts + nt, *tn = tt + nt;
    if ((st = ids_in_range(dir, "valid.pt", "source_node", vs, nv, nodes)) != TMA_OK ||
        (st = ids_in_range(dir, "valid.pt", "target_node", vt, nv, nodes)) != TMA_OK ||
        (st = ids_in_range(dir, "valid.pt", "target_node_neg (flattened)", vn, nv * K, nodes)) != TMA_OK ||
        (st = ids_in_range(dir, "test.pt", "source_node", ts, nt, nodes)) != TMA_OK ||
        (st = ids_in_range(dir, "test.pt", "target_node", tt, nt, nodes)) != TMA_OK ||
        (st = ids_in_range(dir, "test.pt", "target_node_neg (flattened)", tn, nt * K, nodes)) != TMA_OK)
        return st;
    o->pairs = malloc((size_t)(nv + nt > 0 ? nv + nt : 1) * 2 * sizeof(int64_t));
    if (!o->pairs) {
        tma_log_error(COMP, "%s: out of memory reading the split", dir);
        return TMA_ERR_NOMEM;
    }
    for (int64_t i = 0; i < nv; i++) {
        o->pairs[2 * i] = vs[i];
        o->pairs[2 * i + 1] = vt[i];
    }
    for (int64_t i = 0; i < nt; i++) {
        o->pairs[2 * (nv + i)] = ts[i];
        o->pairs[2 * (nv + i) + 1] = tt[i];
    }
    o->train_edges = (int64_t)h[0];
    o->sp = (tma_graph_given_split_t){nv, nt, o->pairs, o->pairs + 2 * nv, (int32_t)K, vn, tn};
    return TMA_OK;
}

/* Converts DIR's .pt files in a private temporary folder and builds g from
 * the training edges in s and the split as given. */
tma_status_t graph_import_build_with_split(src_data_t *s, tma_graph_t *g, const char *dir, const tma_graph_import_opts_t *o,
                                     tma_graph_import_report_t *rep)
{
    const char *tmp = getenv("TMPDIR");
    char *tdir = tma_strdup_printf("%s/tma-ogb-split-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!tdir)
        return TMA_ERR_NOMEM;
    if (!mkdtemp(tdir)) {
        tma_log_error(COMP, "cannot create a temporary folder %s: %s", tdir, strerror(errno));
        free(tdir);
        return TMA_ERR_IO;
    }
    char *out = tma_path_join(tdir, "split.bin");
    ogb_split_t sp;
    memset(&sp, 0, sizeof sp);
    tma_status_t st = out ? convert_split(o->ogb_split_tool, o->ogb_split_python, dir, g->num_nodes, out) : TMA_ERR_NOMEM;
    if (st == TMA_OK)
        st = read_split(out, dir, g->num_nodes, &sp);
    if (st == TMA_OK) {
        st = tma_graph_build_given(g, &s->edges, &sp.sp, o->build.seed, dir, &rep->build);
        rep->split_train_edges = sp.train_edges;
        snprintf(rep->split_from, sizeof rep->split_from, "%s", dir);
        if (st == TMA_OK && sp.train_edges != rep->build.input_edges)
            tma_log_warn(COMP, "%s/train.pt lists %" PRId64 " training edges but the raw graph has %" PRId64
                               "; tma trains on the raw graph (what OGB's loaders pass messages over)",
                         dir, sp.train_edges, rep->build.input_edges);
    }
    tma_edge_list_free(&s->edges);
    tma_mmap_close(&sp.map);
    free(sp.pairs);
    tma_remove_tree(tdir);
    free(out);
    free(tdir);
    return st;
}

