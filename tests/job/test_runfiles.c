/* test_runfiles.c: the run folder's files (job/run.c) on a real file system.  A metrics line is
 * written whole or not at all: a write cut short (here by RLIMIT_FSIZE, as a
 * full disk would) leaves the file as it was, so no torn line is left.  The
 * plot: seconds or minutes by the run's length, ticks at round values, the
 * best round and the test MRR marked. */
#include "tma_test.h"
#include "tma_job.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static cJSON *record(int64_t round)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "round", (double)round);
    cJSON_AddNumberToObject(o, "time", 1.5 * (double)round);
    cJSON_AddStringToObject(o, "pad", "a line long enough to be cut short by the file size limit");
    return o;
}

static void test_line_whole_or_nothing(const char *dir)
{
    char *path = tma_path_join(dir, "metrics.jsonl");
    cJSON *r0 = record(0), *r1 = record(1);
    CHECK_OK(tma_job_run_append_line(path, r0));
    off_t size = file_size(path);
    ASSERT_GT(size, 0);

    /* Room for 10 more bytes only: the next line is written in part, then
     * the write fails (EFBIG; SIGXFSZ ignored), like ENOSPC on a full disk. */
    struct rlimit old, lim;
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)size + 10;
    signal(SIGXFSZ, SIG_IGN);
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
    tma_status_t st = tma_job_run_append_line(path, r1);
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
    CHECK_MSG(st != TMA_OK, "an append cut short reported success");
    CHECK_MSG(file_size(path) == size, "a failed append left %lld bytes behind (a torn line)",
              (long long)(file_size(path) - size));

    /* With room again the line goes in, and the file reads back whole. */
    CHECK_OK(tma_job_run_append_line(path, r1));
    int64_t *rounds = NULL;
    double *times = NULL, *vals = NULL;
    int n = 0;
    CHECK_OK(tma_job_run_read_metrics(path, &rounds, &times, &vals, &n));
    CHECK_MSG(n == 2 && rounds && rounds[0] == 0 && rounds[1] == 1, "read back %d line(s)", n);
    free(rounds);
    free(times);
    free(vals);
    cJSON_Delete(r0);
    cJSON_Delete(r1);
    unlink(path);
    free(path);
}

/* The plot of a run of `seconds` into dir/mrr.svg, read back whole (caller frees). */
static char *plot_text(const char *dir, double seconds, const tma_job_run_plot_marks_t *marks)
{
    double t[4] = {0, seconds / 3, 2 * seconds / 3, seconds}, v[4] = {0.01, 0.30, 0.37, 0.33};
    const double *tp = t, *vp = v;
    const char *label = "randomtma";
    int n = 4;
    char *path = tma_path_join(dir, "mrr.svg"), *text = NULL;
    size_t len;
    CHECK_OK(tma_job_run_plot_svg(path, "g: validation MRR", 1, &label, &tp, &vp, &n, marks));
    CHECK_OK(tma_file_read_all(path, &text, &len));
    unlink(path);
    free(path);
    return text;
}

static void test_plot(const char *dir)
{
    /* 100 s: in seconds, ticks 0 20 ... 100; MRR ticks 0 0.1 ... 0.4. */
    tma_job_run_plot_marks_t marks = {2, 200.0 / 3, 0.37, 0.35};
    char *s = plot_text(dir, 100, &marks);
    ASSERT_NOT_NULL(s);
    if (s) {
        CHECK(strstr(s, "training time (seconds)") != NULL);
        CHECK(strstr(s, "text-anchor=\"middle\">20</text>") && strstr(s, "text-anchor=\"middle\">100</text>"));
        CHECK(!strstr(s, "text-anchor=\"middle\">120</text>"));
        CHECK(strstr(s, "text-anchor=\"end\">0.1</text>") && strstr(s, "text-anchor=\"end\">0.4</text>"));
        CHECK(!strstr(s, "text-anchor=\"end\">0.5</text>"));
        CHECK(strstr(s, "best: round 2, 0.3700") != NULL);
        CHECK(strstr(s, "class=\"best\"") != NULL);
        CHECK(strstr(s, "test MRR 0.3500") && strstr(s, "class=\"test\""));
        /* The first point at t = 0 is drawn at the axis's start (x = 70). */
        CHECK(strstr(s, "points=\"70.0,") != NULL);
    }
    free(s);
    /* 10 minutes: in minutes, ticks 0 2 ... 10; no marks without them. */
    s = plot_text(dir, 600, NULL);
    ASSERT_NOT_NULL(s);
    if (s) {
        CHECK(strstr(s, "training time (minutes)") != NULL);
        CHECK(strstr(s, "text-anchor=\"middle\">2</text>") && strstr(s, "text-anchor=\"middle\">10</text>"));
        CHECK(!strstr(s, "best:") && !strstr(s, "test MRR"));
    }
    free(s);
}

int main(void)
{
    char tmpl[] = "/tmp/tma-runfiles-XXXXXX";
    char *dir = mkdtemp(tmpl);
    ASSERT_NOT_NULL(dir);
    if (dir) {
        test_line_whole_or_nothing(dir);
        test_plot(dir);
        rmdir(dir);
    }
    return tma_test_done();
}
