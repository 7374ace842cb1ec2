/*
 * import_typed.c: the typed layouts of `tma import` (docs/graphs.md):
 * MovieLens 100K as GroupLens ships it (u.data, u.user, u.item,
 * u.occupation, u.genre), and tma's generic typed text layout (a
 * node_types.txt of `node type_name` lines and an edges.txt of
 * `u v relation_name` lines).  Both build a typed graph (node types, each
 * relation stored with its inverse, per-type feature widths zero-padded
 * into one width) through the shared builder, which draws the split and the
 * negatives of the tail's type.  Every bad line is an error naming the file
 * and line.
 */
#include "import_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define COMP "import"

/* ------------------------------------------------------------------ names */

/* A list of distinct names, each with its index (first appearance order). */
typedef struct name_list {
    char **name;
    int32_t count, cap;
} name_list_t;

static void names_free(name_list_t *l)
{
    for (int32_t i = 0; i < l->count; i++)
        free(l->name[i]);
    free(l->name);
    memset(l, 0, sizeof *l);
}

/* The index of `nm`, adding it when new (at most `limit` names); -1 without
 * memory, -2 beyond the limit.  Linear: the lists are short (types). */
static int32_t names_index(name_list_t *l, const char *nm, int32_t limit)
{
    for (int32_t i = 0; i < l->count; i++)
        if (strcmp(l->name[i], nm) == 0)
            return i;
    if (l->count >= limit)
        return -2;
    if (l->count == l->cap) {
        int32_t cap = l->cap ? 2 * l->cap : 8;
        char **n = realloc(l->name, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        l->name = n;
        l->cap = cap;
    }
    if (!(l->name[l->count] = strdup(nm)))
        return -1;
    return l->count++;
}

/* The graph's names section: the node type names, then the relation names. */
static tma_status_t set_names(tma_graph_t *g, const name_list_t *types, const name_list_t *rels)
{
    size_t bytes = 0;
    for (int32_t i = 0; i < types->count; i++)
        bytes += strlen(types->name[i]) + 1;
    for (int32_t i = 0; i < rels->count; i++)
        bytes += strlen(rels->name[i]) + 1;
    char *buf = tma_graph_alloc(g, bytes), *p = buf;
    if (!buf)
        return TMA_ERR_NOMEM;
    for (int l = 0; l < 2; l++) {
        const name_list_t *nl = l ? rels : types;
        for (int32_t i = 0; i < nl->count; i++) {
            size_t n = strlen(nl->name[i]) + 1;
            memcpy(p, nl->name[i], n);
            p += n;
        }
    }
    g->names = buf;
    g->names_bytes = (int64_t)bytes;
    return TMA_OK;
}

/* ------------------------------------------------------------------ line helpers */

static int data_line(const char *line)
{
    while (*line == ' ' || *line == '\t')
        line++;
    return *line && *line != '#' && *line != '%';
}

/* Splits line at '|' into at most `max` fields (empty ones kept); returns
 * the field count, or max + 1 when there are more. */
static int split_bar(char *line, char **f, int max)
{
    int n = 0;
    for (char *p = line;;) {
        if (n == max)
            return max + 1;
        f[n++] = p;
        char *bar = strchr(p, '|');
        if (!bar)
            return n;
        *bar = '\0';
        p = bar + 1;
    }
}

static tma_status_t bad_line(const graph_text_reader_t *tr, const char *msg, const char *tok)
{
    if (tok)
        tma_log_error(COMP, "%s:%" PRId64 ": %s: '%s'", tr->path, tr->line, msg, tok);
    else
        tma_log_error(COMP, "%s:%" PRId64 ": %s", tr->path, tr->line, msg);
    return TMA_ERR_FORMAT;
}

/* Splits line into exactly `want` fields (separated by spaces, tabs or
 * commas) in tok[want]; too few or too many is an error naming `expected`. */
static tma_status_t fields_exact(const graph_text_reader_t *tr, char *line, char **tok, int want, const char *expected)
{
    int nf = 0;
    char *p = line, *extra;
    while (nf < want && (tok[nf] = graph_text_field(&p)) != NULL)
        nf++;
    if (nf < want || (extra = graph_text_field(&p)) != NULL) {
        tma_log_error(COMP, "%s:%" PRId64 ": too %s fields: expected %s", tr->path, tr->line,
                      nf < want ? "few" : "many", expected);
        return TMA_ERR_FORMAT;
    }
    return TMA_OK;
}

/* An id in [1, max] (MovieLens ids are 1-based). */
static tma_status_t parse_id1(const graph_text_reader_t *tr, const char *tok, const char *what, int64_t max,
                              int64_t *id_p)
{
    int64_t v;
    tma_status_t st = graph_text_parse_id(tr, tok, what, &v);
    if (st != TMA_OK)
        return st;
    if (v < 1 || v > max) {
        tma_log_error(COMP, "%s:%" PRId64 ": %s %" PRId64 " is outside [1, %" PRId64 "]", tr->path, tr->line, what,
                      v, max);
        return TMA_ERR_RANGE;
    }
    *id_p = v;
    return TMA_OK;
}

/* Calls each(ctx, tr, line) on every data line of dir/base (blank and
 * comment lines skipped), then each(ctx, tr, NULL) once at the end for the
 * checks of the whole file, while the reader still names it. */
typedef tma_status_t (*line_fn)(void *ctx, const graph_text_reader_t *tr, char *line);

static tma_status_t each_line(const char *dir, const char *base, line_fn each, void *ctx)
{
    char *path = tma_path_join(dir, base);
    if (!path)
        return TMA_ERR_NOMEM;
    graph_text_reader_t tr;
    tma_status_t st = graph_text_open(&tr, path);
    free(path);
    if (st != TMA_OK)
        return st;
    char *line;
    size_t len;
    int r;
    while (st == TMA_OK && (r = graph_text_next(&tr, &line, &len)) > 0)
        if (data_line(line))
            st = each(ctx, &tr, line);
    if (st == TMA_OK && r < 0)
        st = r;
    if (st == TMA_OK)
        st = each(ctx, &tr, NULL);
    graph_text_close(&tr);
    return st;
}

/* Grows an array of `esize`-byte records to hold index i (the new ones
 * zeroed). */
static tma_status_t grow(void **arr, int64_t *cap, int64_t i, size_t esize)
{
    if (i < *cap)
        return TMA_OK;
    int64_t n = *cap ? *cap : 1024;
    while (n <= i)
        n *= 2;
    void *p = realloc(*arr, (size_t)n * esize);
    if (!p) {
        tma_log_error(COMP, "out of memory");
        return TMA_ERR_NOMEM;
    }
    memset((char *)p + (size_t)*cap * esize, 0, (size_t)(n - *cap) * esize);
    *arr = p;
    *cap = n;
    return TMA_OK;
}

/* ------------------------------------------------------------------ MovieLens 100K */

#define ML_MAX_IDS 10000000
#define ML_RATINGS 5

typedef struct ml_user {
    int32_t seen;
    int32_t age;
    int32_t gender; /* 0 M, 1 F */
    int32_t occupation;
} ml_user_t;

typedef struct ml_movie {
    int32_t seen;
    int32_t year; /* 0: no release date */
} ml_movie_t;

typedef struct ml_data {
    name_list_t occupations, genres;
    int indexed; /* the names file being read is `name|index` (u.genre) */
    name_list_t *names;
    ml_user_t *users;
    int64_t num_users, users_cap;
    ml_movie_t *movies;
    uint8_t *genre_flags; /* [movies_cap x genres] */
    char **fields;        /* [5 + genres + 1]: one u.item line split */
    int64_t num_movies, movies_cap;
    tma_edge_list_t el;
} ml_data_t;

static void ml_free(ml_data_t *d)
{
    names_free(&d->occupations);
    names_free(&d->genres);
    free(d->users);
    free(d->movies);
    free(d->genre_flags);
    free(d->fields);
    tma_edge_list_free(&d->el);
}

/* A file of records with ids 1..count, at its end: the first missing id
 * (`missing`, 0-based, or -1), or no record at all, is an error. */
static tma_status_t ml_ids_complete(const graph_text_reader_t *tr, const char *what, int64_t count, int64_t missing)
{
    if (missing >= 0) {
        tma_log_error(COMP, "%s: %s %" PRId64 " is missing (ids must run 1..%" PRId64 ")", tr->path, what,
                      missing + 1, count);
        return TMA_ERR_FORMAT;
    }
    if (count == 0) {
        tma_log_error(COMP, "%s: empty file: no %ss in it", tr->path, what);
        return TMA_ERR_FORMAT;
    }
    return TMA_OK;
}

/* u.occupation: one name a line; u.genre: `name|index`, the index being
 * the line's order. */
static tma_status_t ml_name_line(void *ctx, const graph_text_reader_t *tr, char *line)
{
    ml_data_t *d = ctx;
    name_list_t *l = d->names;
    if (!line) {
        if (l->count > 0)
            return TMA_OK;
        tma_log_error(COMP, "%s: empty file: no names in it", tr->path);
        return TMA_ERR_FORMAT;
    }
    char *f[3] = {0};
    int nf = split_bar(line, f, 2);
    if (nf != (d->indexed ? 2 : 1) || !*f[0])
        return bad_line(tr, d->indexed ? "expected 'name|index'" : "expected one name a line", line);
    int32_t before = l->count;
    int32_t i = names_index(l, f[0], 1 << 16);
    if (i < 0)
        return i == -1 ? TMA_ERR_NOMEM : bad_line(tr, "too many names", NULL);
    if (i < before)
        return bad_line(tr, "name given twice", f[0]);
    if (d->indexed) {
        int64_t idx;
        tma_status_t st = graph_text_parse_id(tr, f[1], "genre index", &idx);
        if (st != TMA_OK)
            return st;
        if (idx != i)
            return bad_line(tr, "genre index out of order (genres are numbered 0, 1, ... by line)", f[1]);
    }
    return TMA_OK;
}

/* u.user: `id|age|gender|occupation|zip`. */
static tma_status_t ml_user_line(void *ctx, const graph_text_reader_t *tr, char *line)
{
    ml_data_t *d = ctx;
    if (!line) {
        int64_t missing = -1;
        for (int64_t i = d->num_users - 1; i >= 0; i--)
            missing = d->users[i].seen ? missing : i;
        return ml_ids_complete(tr, "user", d->num_users, missing);
    }
    char *f[6] = {0};
    if (split_bar(line, f, 5) != 5)
        return bad_line(tr, "expected 'id|age|gender|occupation|zip'", NULL);
    int64_t id, age;
    tma_status_t st;
    if ((st = parse_id1(tr, f[0], "user id", ML_MAX_IDS, &id)) != TMA_OK ||
        (st = graph_text_parse_id(tr, f[1], "age", &age)) != TMA_OK)
        return st;
    if (age > 200)
        return bad_line(tr, "age is not a plausible age", f[1]);
    int gender = strcmp(f[2], "M") == 0 ? 0 : strcmp(f[2], "F") == 0 ? 1 : -1;
    if (gender < 0)
        return bad_line(tr, "gender is neither M nor F", f[2]);
    int32_t occ = -1;
    for (int32_t i = 0; i < d->occupations.count; i++)
        if (strcmp(d->occupations.name[i], f[3]) == 0)
            occ = i;
    if (occ < 0)
        return bad_line(tr, "occupation is not listed in u.occupation", f[3]);
    if ((st = grow((void **)&d->users, &d->users_cap, id - 1, sizeof *d->users)) != TMA_OK)
        return st;
    ml_user_t *u = &d->users[id - 1];
    if (u->seen)
        return bad_line(tr, "user id given twice", f[0]);
    *u = (ml_user_t){1, (int32_t)age, gender, occ};
    d->num_users = id > d->num_users ? id : d->num_users;
    return TMA_OK;
}

/* The year of a release date `dd-Mon-yyyy`; 0 for an empty date. */
static tma_status_t ml_year(const graph_text_reader_t *tr, const char *date, int32_t *year_p)
{
    size_t n = strlen(date);
    *year_p = 0;
    if (n == 0)
        return TMA_OK;
    int64_t y;
    if (n < 4 || (n > 4 && date[n - 5] != '-') || graph_text_parse_id(tr, date + n - 4, "release year", &y) != TMA_OK ||
        y < 1000 || y > 9999)
        return bad_line(tr, "release date is not 'dd-Mon-yyyy'", date);
    *year_p = (int32_t)y;
    return TMA_OK;
}

/* u.item: `id|title|release date|video release date|url|g_0|...|g_{G-1}`. */
static tma_status_t ml_movie_line(void *ctx, const graph_text_reader_t *tr, char *line)
{
    ml_data_t *d = ctx;
    if (!line) {
        int64_t missing = -1;
        for (int64_t i = d->num_movies - 1; i >= 0; i--)
            missing = d->movies[i].seen ? missing : i;
        return ml_ids_complete(tr, "movie", d->num_movies, missing);
    }
    const int G = d->genres.count, want = 5 + G;
    char **f = d->fields;
    int nf = split_bar(line, f, want);
    if (nf != want) {
        tma_log_error(COMP, "%s:%" PRId64 ": too %s fields: expected 'id|title|release date|video release date|url' "
                      "and %d genre flags (u.genre lists %d genres)",
                      tr->path, tr->line, nf > want ? "many" : "few", G, G);
        return TMA_ERR_FORMAT;
    }
    int64_t id;
    int32_t year;
    tma_status_t st;
    if ((st = parse_id1(tr, f[0], "movie id", ML_MAX_IDS, &id)) != TMA_OK || (st = ml_year(tr, f[2], &year)) != TMA_OK)
        return st;
    int64_t cap = d->movies_cap;
    if ((st = grow((void **)&d->movies, &d->movies_cap, id - 1, sizeof *d->movies)) != TMA_OK)
        return st;
    if (d->movies_cap != cap) {
        uint8_t *gf = realloc(d->genre_flags, (size_t)d->movies_cap * (size_t)G);
        if (!gf)
            return TMA_ERR_NOMEM;
        d->genre_flags = gf;
    }
    ml_movie_t *m = &d->movies[id - 1];
    if (m->seen)
        return bad_line(tr, "movie id given twice", f[0]);
    for (int j = 0; j < G; j++) {
        if (strcmp(f[5 + j], "0") != 0 && strcmp(f[5 + j], "1") != 0) {
            tma_log_error(COMP, "%s:%" PRId64 ": genre flag %d (%s) is '%s', not 0 or 1", tr->path, tr->line, j,
                          d->genres.name[j], f[5 + j]);
            return TMA_ERR_FORMAT;
        }
        d->genre_flags[(id - 1) * G + j] = f[5 + j][0] == '1';
    }
    *m = (ml_movie_t){1, year};
    d->num_movies = id > d->num_movies ? id : d->num_movies;
    return TMA_OK;
}

/* u.data: `user item rating timestamp` (tab-separated): edge user -> movie
 * of relation rating - 1. */
static tma_status_t ml_rating_line(void *ctx, const graph_text_reader_t *tr, char *line)
{
    ml_data_t *d = ctx;
    if (!line) {
        if (d->el.count > 0)
            return TMA_OK;
        tma_log_error(COMP, "%s: empty file: no ratings in it", tr->path);
        return TMA_ERR_FORMAT;
    }
    char *tok[4];
    int64_t u, m, rating, ts;
    tma_status_t st;
    if ((st = fields_exact(tr, line, tok, 4, "'user item rating timestamp'")) != TMA_OK ||
        (st = parse_id1(tr, tok[0], "user id", d->num_users, &u)) != TMA_OK ||
        (st = parse_id1(tr, tok[1], "movie id", d->num_movies, &m)) != TMA_OK ||
        (st = parse_id1(tr, tok[2], "rating", ML_RATINGS, &rating)) != TMA_OK ||
        (st = graph_text_parse_id(tr, tok[3], "timestamp", &ts)) != TMA_OK)
        return st;
    return tma_edge_list_push_rel(&d->el, u - 1, d->num_users + m - 1, (int32_t)(rating - 1));
}

/* Reads the five files in dependency order. */
static tma_status_t ml_read(const char *dir, ml_data_t *d)
{
    tma_status_t st;
    d->names = &d->occupations;
    d->indexed = 0;
    if ((st = each_line(dir, "u.occupation", ml_name_line, d)) != TMA_OK)
        return st;
    d->names = &d->genres;
    d->indexed = 1;
    if ((st = each_line(dir, "u.genre", ml_name_line, d)) != TMA_OK)
        return st;
    if (!(d->fields = malloc((size_t)(5 + d->genres.count + 1) * sizeof *d->fields)))
        return TMA_ERR_NOMEM;
    if ((st = each_line(dir, "u.user", ml_user_line, d)) != TMA_OK ||
        (st = each_line(dir, "u.item", ml_movie_line, d)) != TMA_OK)
        return st;
    return each_line(dir, "u.data", ml_rating_line, d);
}

int graph_import_is_movielens(const char *dir)
{
    static const char *const need[] = {"u.data", "u.user", "u.item"};
    for (size_t i = 0; i < sizeof need / sizeof *need; i++) {
        char *p = tma_path_join(dir, need[i]);
        int ok = p && tma_file_exists(p);
        free(p);
        if (!ok)
            return 0;
    }
    return 1;
}

/* (x - lo) / (hi - lo), 0 when hi == lo. */
static float scaled(double x, double lo, double hi)
{
    return hi > lo ? (float)((x - lo) / (hi - lo)) : 0.0f;
}

tma_status_t graph_import_movielens(const char *dir, const tma_graph_import_opts_t *o, tma_graph_t *g,
                                  tma_graph_import_report_t *rep)
{
    ml_data_t d;
    memset(&d, 0, sizeof d);
    tma_status_t st;
    if (o->feat_dim > 0) {
        tma_log_error(COMP, "%s: MovieLens features are stored as they are (per type, zero-padded); --feat-dim does "
                      "not apply", dir);
        return TMA_ERR_INVALID;
    }
    if ((st = ml_read(dir, &d)) != TMA_OK)
        goto done;

    /* Users first (0..U-1), then movies (U..U+M-1). */
    const int64_t U = d.num_users, M = d.num_movies, n = U + M;
    const int32_t O = d.occupations.count, G = d.genres.count;
    const int32_t wu = 1 + 2 + O, wm = G + 1, D = wu > wm ? wu : wm;
    g->num_nodes = n;
    int32_t *type = tma_graph_alloc(g, (size_t)n * sizeof(int32_t));
    int32_t *width = tma_graph_alloc(g, 2 * sizeof(int32_t));
    float *x = tma_graph_alloc(g, (size_t)n * (size_t)D * sizeof(float));
    if (!type || !width || !x) {
        st = TMA_ERR_NOMEM;
        goto done;
    }
    memset(x, 0, (size_t)n * (size_t)D * sizeof(float));
    double amin = 1e9, amax = -1e9, ymin = 1e9, ymax = -1e9;
    for (int64_t i = 0; i < U; i++) {
        double a = d.users[i].age;
        amin = a < amin ? a : amin;
        amax = a > amax ? a : amax;
    }
    for (int64_t i = 0; i < M; i++) {
        if (d.movies[i].year) {
            ymin = d.movies[i].year < ymin ? d.movies[i].year : ymin;
            ymax = d.movies[i].year > ymax ? d.movies[i].year : ymax;
        }
    }
    /* User: [age scaled to [0, 1], M, F, occupation one-hot]. */
    for (int64_t i = 0; i < U; i++) {
        float *row = x + i * D;
        type[i] = 0;
        row[0] = scaled(d.users[i].age, amin, amax);
        row[1 + d.users[i].gender] = 1.0f;
        row[3 + d.users[i].occupation] = 1.0f;
    }
    /* Movie: [genre flags, release year scaled to [0, 1] (0 without a date)]. */
    for (int64_t i = 0; i < M; i++) {
        float *row = x + (U + i) * D;
        type[U + i] = 1;
        for (int32_t j = 0; j < G; j++)
            row[j] = d.genre_flags[i * G + j];
        row[G] = d.movies[i].year ? scaled(d.movies[i].year, ymin, ymax) : 0.0f;
    }
    width[0] = wu;
    width[1] = wm;
    g->features = x;
    g->feature_dim = D;
    g->num_node_types = 2;
    g->num_relations = ML_RATINGS;
    g->node_type = type;
    g->type_feat_dim = width;
    name_list_t tn = {0}, rn = {0};
    static const char *const tnames[] = {"user", "movie"};
    char rname[16];
    int oom = 0;
    for (int i = 0; i < 2; i++)
        oom |= names_index(&tn, tnames[i], 2) < 0;
    for (int i = 1; i <= ML_RATINGS; i++) {
        snprintf(rname, sizeof rname, "rating%d", i);
        oom |= names_index(&rn, rname, ML_RATINGS) < 0;
    }
    st = oom ? TMA_ERR_NOMEM : set_names(g, &tn, &rn);
    names_free(&tn);
    names_free(&rn);
    if (st != TMA_OK)
        goto done;
    st = tma_graph_build(g, &d.el, &o->build, &rep->build);
    rep->features = TMA_FEAT_STORED;
    rep->input_feature_dim = D;
done:
    ml_free(&d);
    return st;
}

/* ------------------------------------------------------------------ generic typed text */

int graph_import_is_typed_text(const char *dir)
{
    char *p = tma_path_join(dir, "node_types.txt");
    int ok = p && tma_file_exists(p);
    free(p);
    return ok;
}

typedef struct typed_data {
    name_list_t types, rels;
    int32_t *type; /* [cap]: each node's type, -1 where none was given */
    int64_t cap, n;
    tma_edge_list_t el;
} typed_data_t;

/* node_types.txt: `node type_name`. */
static tma_status_t node_type_line(void *ctx, const graph_text_reader_t *tr, char *line)
{
    typed_data_t *d = ctx;
    if (!line) {
        for (int64_t v = 0; v < d->n; v++) {
            if (d->type[v] < 0) {
                tma_log_error(COMP, "%s: node %" PRId64 " has no type (every id 0..%" PRId64 " needs one)", tr->path,
                              v, d->n - 1);
                return TMA_ERR_FORMAT;
            }
        }
        if (d->n > 0)
            return TMA_OK;
        tma_log_error(COMP, "%s: empty file: no 'node type_name' lines in it", tr->path);
        return TMA_ERR_FORMAT;
    }
    char *tok[2];
    int64_t v;
    tma_status_t st;
    if ((st = fields_exact(tr, line, tok, 2, "'node type_name'")) != TMA_OK ||
        (st = graph_text_parse_id(tr, tok[0], "node id", &v)) != TMA_OK)
        return st;
    if (v >= ((int64_t)1 << 40))
        return bad_line(tr, "node id is too large", tok[0]);
    int32_t t = names_index(&d->types, tok[1], TMA_GRAPH_MAX_NODE_TYPES);
    if (t < 0)
        return t == -1 ? TMA_ERR_NOMEM : bad_line(tr, "too many node types", tok[1]);
    int64_t cap = d->cap;
    if ((st = grow((void **)&d->type, &d->cap, v, sizeof *d->type)) != TMA_OK)
        return st;
    for (int64_t i = cap; i < d->cap; i++)
        d->type[i] = -1;
    if (d->type[v] >= 0 && d->type[v] != t) {
        tma_log_error(COMP, "%s:%" PRId64 ": node %" PRId64 " is given type '%s' after type '%s'", tr->path, tr->line,
                      v, tok[1], d->types.name[d->type[v]]);
        return TMA_ERR_FORMAT;
    }
    d->type[v] = t;
    d->n = v + 1 > d->n ? v + 1 : d->n;
    return TMA_OK;
}

/* edges.txt: `u v relation_name`, both nodes typed. */
static tma_status_t typed_edge_line(void *ctx, const graph_text_reader_t *tr, char *line)
{
    typed_data_t *d = ctx;
    if (!line) {
        if (d->el.count > 0)
            return TMA_OK;
        tma_log_error(COMP, "%s: empty file: no 'u v relation_name' lines in it", tr->path);
        return TMA_ERR_FORMAT;
    }
    char *tok[3];
    int64_t u, v;
    tma_status_t st;
    if ((st = fields_exact(tr, line, tok, 3, "'u v relation_name'")) != TMA_OK ||
        (st = graph_text_parse_id(tr, tok[0], "node id", &u)) != TMA_OK ||
        (st = graph_text_parse_id(tr, tok[1], "node id", &v)) != TMA_OK)
        return st;
    if (u >= d->n || v >= d->n) {
        tma_log_error(COMP, "%s:%" PRId64 ": node %" PRId64 " has no type in node_types.txt (%" PRId64 " typed nodes)",
                      tr->path, tr->line, u >= d->n ? u : v, d->n);
        return TMA_ERR_RANGE;
    }
    int32_t r = names_index(&d->rels, tok[2], TMA_GRAPH_MAX_RELATIONS);
    if (r < 0)
        return r == -1 ? TMA_ERR_NOMEM : bad_line(tr, "too many relations", tok[2]);
    return tma_edge_list_push_rel(&d->el, u, v, r);
}

tma_status_t graph_import_typed_text(const char *dir, const tma_graph_import_opts_t *o, tma_graph_t *g,
                                   tma_graph_import_report_t *rep)
{
    typed_data_t d;
    memset(&d, 0, sizeof d);
    tma_status_t st;
    if ((st = each_line(dir, "node_types.txt", node_type_line, &d)) != TMA_OK ||
        (st = each_line(dir, "edges.txt", typed_edge_line, &d)) != TMA_OK)
        goto done;
    /* Features: the default ones (the seeded projection of one-hot ids),
     * every type at the full width. */
    const int64_t n = d.n;
    const int32_t D = o->feat_dim > 0 ? o->feat_dim : TMA_GRAPH_DEFAULT_FEAT_DIM;
    g->num_nodes = n;
    float *x = tma_graph_alloc(g, (size_t)n * (size_t)D * sizeof(float));
    int32_t *type = tma_graph_alloc(g, (size_t)n * sizeof(int32_t));
    int32_t *width = tma_graph_alloc(g, (size_t)d.types.count * sizeof(int32_t));
    if (!x || !type || !width) {
        st = TMA_ERR_NOMEM;
        goto done;
    }
    graph_feat_random_ids(x, n, D, graph_feat_seed(o->build.seed));
    memcpy(type, d.type, (size_t)n * sizeof(int32_t));
    for (int32_t t = 0; t < d.types.count; t++)
        width[t] = D;
    g->features = x;
    g->feature_dim = D;
    g->num_node_types = d.types.count;
    g->num_relations = d.rels.count;
    g->node_type = type;
    g->type_feat_dim = width;
    if ((st = set_names(g, &d.types, &d.rels)) != TMA_OK)
        goto done;
    rep->features = TMA_FEAT_DEFAULT;
    st = tma_graph_build(g, &d.el, &o->build, &rep->build);
done:
    tma_edge_list_free(&d.el);
    free(d.type);
    names_free(&d.types);
    names_free(&d.rels);
    return st;
}
