/*
 * test_tools_perf.c - end-to-end smoke tests of cohort-perf: the real binary,
 * real forked ranks, real transports.
 *
 * The table is read the way scripts read nccl-tests' output: a regular
 * expression per row (size, count, type, redop, root, then time, algbw,
 * busbw, #wrong for out-of-place and in-place) and the "# Avg bus bandwidth"
 * footer - see also nccl_parse.py, the same in Python.
 *
 * - every collective, tiny sweep, checked, on 2 and 3 ranks: exit 0, a row
 *   per op and size, #wrong 0 in both variants;
 * - --json: the document parses and holds what the table would;
 * - --debug-corrupt flips one received byte: the check must fail (exit 1,
 *   #wrong > 0, "FAILED" footer, the element named on stderr);
 * - -a / --percentiles: the time column and p50 describe the same samples
 *   (regression: the time column could come out below p50);
 * - ranks from the environment (as cohortrun/torchrun start them) work too;
 * - bad arguments are refused with a message, not a crash;
 * - binding (tools/common/bind.h): with COHORT_BIND=auto ranks that fit on
 *   the cores get one each, an oversubscribed job none; by default none -
 *   each rank's own affinity, as cohort-perf reports it, under --np and
 *   under cohortrun;
 * - ranks outnumbering the cpus their affinity gives them together (the
 *   union of their cpu sets): the deep rings, and the "# cohort:" lines say
 *   "ranks outnumber cpus" - under sched_setaffinity and under the real
 *   `taskset -c C` (2 ranks on one cpu: oversubscribed; on two: not).
 */
#include <errno.h>
#include <regex.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/support.h"

#if PERF_TEST_JANSSON
#include <jansson.h>
#endif

#define TOOL_DEADLINE_MS 45000

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = 0;
    fclose(f);
    return b;
}

typedef struct run_out {
    int status; /* exit code, 128+signal, or -1 if killed at the deadline */
    char *out, *err;
} run_out;

/* Runs argv (argv[0] = the tool path) in its own process group with stdout
 * and stderr in temp files; kills the group at the deadline. */
static void run_tool(char *const argv[], run_out *r)
{
    char outp[] = "/tmp/cohort-perf-test-out.XXXXXX", errp[] = "/tmp/cohort-perf-test-err.XXXXXX";
    int ofd = mkstemp(outp), efd = mkstemp(errp);
    ck_assert(ofd >= 0 && efd >= 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        dup2(ofd, 1);
        dup2(efd, 2);
        execv(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    double t0 = cht_now_ms();
    int st = 0;
    r->status = -1;
    for (;;) {
        pid_t p = waitpid(pid, &st, WNOHANG);
        if (p == pid) {
            r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        if (cht_now_ms() - t0 > TOOL_DEADLINE_MS) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        }
        /* Polling cadence for the child's exit only, not synchronisation. */
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(-pid, SIGKILL); /* leftovers of the group, if any */
    close(ofd);
    close(efd);
    r->out = slurp(outp);
    r->err = slurp(errp);
    unlink(outp);
    unlink(errp);
}

/* The last max bytes of s: Check's messages have a bounded size. */
static const char *tail(const char *s, size_t max)
{
    size_t l = strlen(s);
    return l > max ? s + l - max : s;
}
#define T(s) tail((s), 1500)

static void run_free(run_out *r)
{
    free(r->out);
    free(r->err);
}

static const char *const ALL_OPS[] = {"all_reduce", "broadcast",      "reduce",     "all_gather",
                                      "gather",     "scatter",        "reduce_scatter",
                                      "all_to_all", "barrier",        "sendrecv",   NULL};

/* One row of nccl-tests' table, as its parsers see it. */
typedef struct nrow {
    char coll[32];
    long size, count, root;
    char type[16], redop[16];
    double time[2], algbw[2], busbw[2];
    long wrong[2]; /* -1: N/A */
    int nfields;
} nrow;

/* The regular expression scripts use on nccl-tests output (13 fields). */
#define NUM "([0-9.]+(e[+-][0-9]+)?)"
static const char ROW_RE[] = "^ *([0-9]+) +([0-9]+) +([a-z0-9]+) +([a-z]+) +(-?[0-9]+) +" NUM
                             " +" NUM " +" NUM " +([0-9]+|N/A) +" NUM " +" NUM " +" NUM
                             " +([0-9]+|N/A)";

/* Parses every table row of out (sections start at "# Collective: X").
 * Returns the row count; *avg_busbw from the footer (-1 if absent). */
static int parse_nccl(const char *out, nrow *rows, int max, double *avg_busbw, int *oob_ok)
{
    regex_t re;
    ck_assert_int_eq(regcomp(&re, ROW_RE, REG_EXTENDED), 0);
    int n = 0;
    char coll[32] = "?";
    *avg_busbw = -1;
    *oob_ok = -1;
    for (const char *p = out; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
        regmatch_t m[32];
        if (sscanf(line, "# Collective: %31s", coll) == 1) {
        } else if (sscanf(line, "# Avg bus bandwidth : %lf", avg_busbw) == 1) {
        } else if (!strncmp(line, "# Out of bounds values : ", 25)) {
            *oob_ok = strstr(line, " OK") != NULL;
        } else if (n < max && regexec(&re, line, 32, m, 0) == 0) {
            nrow *r = &rows[n++];
            memset(r, 0, sizeof *r);
            snprintf(r->coll, sizeof r->coll, "%s", coll);
            char f[20][64];
            /* groups: 1 size 2 count 3 type 4 redop 5 root, 6 time(7) 8 algbw(9)
             * 10 busbw(11) 12 wrong, 13 time(14) 15 algbw(16) 17 busbw(18) 19 wrong */
            for (int g = 1; g <= 19; g++)
                snprintf(f[g], sizeof f[g], "%.*s", (int)(m[g].rm_eo - m[g].rm_so),
                         line + m[g].rm_so);
            r->size = atol(f[1]);
            r->count = atol(f[2]);
            snprintf(r->type, sizeof r->type, "%s", f[3]);
            snprintf(r->redop, sizeof r->redop, "%s", f[4]);
            r->root = atol(f[5]);
            r->time[0] = atof(f[6]);
            r->algbw[0] = atof(f[8]);
            r->busbw[0] = atof(f[10]);
            r->wrong[0] = strcmp(f[12], "N/A") ? atol(f[12]) : -1;
            r->time[1] = atof(f[13]);
            r->algbw[1] = atof(f[15]);
            r->busbw[1] = atof(f[17]);
            r->wrong[1] = strcmp(f[19], "N/A") ? atol(f[19]) : -1;
            /* extra columns (--percentiles) after the 13 */
            r->nfields = 13;
            for (const char *q = line + m[0].rm_eo; *q;) {
                while (*q == ' ')
                    q++;
                if (!*q)
                    break;
                r->nfields++;
                while (*q && *q != ' ')
                    q++;
            }
        }
        p = nl ? nl + 1 : NULL;
    }
    regfree(&re);
    return n;
}

static int rows_of(const nrow *rows, int n, const char *coll, int *wrong_rows)
{
    int k = 0;
    *wrong_rows = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].coll, coll)) {
            k++;
            *wrong_rows += rows[i].wrong[0] > 0 || rows[i].wrong[1] > 0;
        }
    return k;
}

#define MAXROWS 512

/* --coll all, checked, on 2 and 3 ranks: 3 sizes per op (1 for barrier). */
START_TEST(test_all_ops_check)
{
    int n = _i == 0 ? 2 : 3;
    char nb[8];
    snprintf(nb, sizeof nb, "%d", n);
    char *argv[] = {(char *)cht_tool("cohort-perf"), "--np", nb, "--coll", "all", "--sizes",
                    "8,1000,65536", "-n", "3", "-w", "1", "--deadline", "40", "-d", "int32",
                    "--memory", NULL};
    run_out r;
    run_tool(argv, &r);
    ck_assert_msg(r.status == 0, "cohort-perf --np %d exited %d\nstdout:\n%s\nstderr:\n%s", n,
                  r.status, T(r.out), T(r.err));
    static nrow rows[MAXROWS];
    double avg;
    int oob;
    int nr = parse_nccl(r.out, rows, MAXROWS, &avg, &oob);
    for (int i = 0; ALL_OPS[i]; i++) {
        int wrong;
        int k = rows_of(rows, nr, ALL_OPS[i], &wrong);
        int want = !strcmp(ALL_OPS[i], "barrier") ? 1 : 3;
        ck_assert_msg(k == want, "%s: %d rows, want %d\n%s", ALL_OPS[i], k, want, T(r.out));
        ck_assert_msg(wrong == 0, "%s: wrong rows\n%s\n%s", ALL_OPS[i], T(r.out), T(r.err));
    }
    for (int i = 0; i < nr; i++) {
        /* nccl-tests' conventions: "int32", -1 for rootless ops, "none" when no reduction */
        int barrier = !strcmp(rows[i].coll, "barrier");
        ck_assert_str_eq(rows[i].type, barrier ? "none" : "int32");
        int rooted = !strcmp(rows[i].coll, "broadcast") || !strcmp(rows[i].coll, "reduce") ||
                     !strcmp(rows[i].coll, "gather") || !strcmp(rows[i].coll, "scatter");
        ck_assert_int_eq(rows[i].root, rooted ? 0 : -1);
        int reducing = !strcmp(rows[i].coll, "all_reduce") || !strcmp(rows[i].coll, "reduce") ||
                       !strcmp(rows[i].coll, "reduce_scatter");
        ck_assert_str_eq(rows[i].redop, reducing ? "sum" : "none");
        ck_assert_msg(rows[i].time[0] > 0 && rows[i].time[1] > 0, "row %d: no time", i);
        /* checked: a number, not N/A (barrier and in-place sendrecv have nothing to check) */
        if (!barrier)
            ck_assert_int_eq(rows[i].wrong[0], 0);
    }
    ck_assert_msg(avg > 0 && oob == 1, "footer: avg %g oob %d\n%s", avg, oob, T(r.out));
    ck_assert_msg(strstr(r.out, "rss_init"), "no memory report:\n%s", T(r.out));
    run_free(&r);
}
END_TEST

/* A reduction dtype/op matrix, nccl-tests' names (-d float, -o max) and
 * cohort's, one size each; -d/-o lists and "all". */
START_TEST(test_dtypes_check)
{
    static const char *const combos[][2] = {{"float", "sum"},      {"double", "max"},
                                            {"half", "sum"},       {"bfloat16", "min"},
                                            {"int8", "prod"},      {"uint64", "bxor"},
                                            {"float32", "avg"},    {"int32,float", "sum,max"},
                                            {"all", "all"}};
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
        char *argv[] = {(char *)cht_tool("cohort-perf"), "--np", "3", "--coll",
                        "all_reduce,reduce_scatter", "--sizes", "96,12000", "-n",
                        "2", "-w", "0", "-d", (char *)combos[i][0], "-o",
                        (char *)combos[i][1], "--deadline", "40", NULL};
        run_out r;
        run_tool(argv, &r);
        ck_assert_msg(r.status == 0, "%s/%s exited %d\n%s\n%s", combos[i][0], combos[i][1],
                      r.status, T(r.out), T(r.err));
        static nrow rows[MAXROWS];
        double avg;
        int oob;
        int nr = parse_nccl(r.out, rows, MAXROWS, &avg, &oob);
        ck_assert_msg(nr >= 4 && oob == 1, "%s/%s: %d rows\n%s", combos[i][0], combos[i][1], nr,
                      T(r.out));
        if (i == 0)
            ck_assert_str_eq(rows[0].type, "float");
        if (i == 2)
            ck_assert_str_eq(rows[0].type, "half");
        if (i == 7)
            ck_assert_int_eq(nr, 2 * 2 * 2 * 2); /* 2 dtypes x 2 ops x 2 colls x 2 sizes */
        run_free(&r);
    }
}
END_TEST

/* The check must be able to fail: one flipped byte in one rank's output. */
START_TEST(test_corrupt_detected)
{
    static const char *const ops[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter",
                                      "sendrecv"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char *argv[] = {(char *)cht_tool("cohort-perf"), "--np", "2", "--coll", (char *)ops[i],
                        "--debug-corrupt", "--sizes", "64", "-n", "2", "--deadline", "40",
                        NULL};
        run_out r;
        run_tool(argv, &r);
        ck_assert_msg(r.status == 1, "%s with --debug-corrupt exited %d, want 1\n%s\n%s", ops[i],
                      r.status, T(r.out), T(r.err));
        static nrow rows[MAXROWS];
        double avg;
        int oob;
        int nr = parse_nccl(r.out, rows, MAXROWS, &avg, &oob);
        ck_assert_msg(nr == 1 && rows[0].wrong[0] > 0 && oob == 0, "%s: %d rows\n%s", ops[i], nr,
                      T(r.out));
        ck_assert_msg(strstr(r.out, "# Out of bounds values : ") && strstr(r.out, "FAILED"),
                      "%s\n", T(r.out));
        ck_assert_msg(strstr(r.err, "CHECK FAILED") && strstr(r.err, "element 0"),
                      "%s: stderr does not name the element:\n%s", ops[i], T(r.err));
        run_free(&r);
    }
    /* -c 0: not checked, #wrong reads N/A (as nccl-tests prints it). */
    char *argv[] = {(char *)cht_tool("cohort-perf"), "--np", "2", "-c", "0", "--sizes", "64",
                    "-n", "2", "--deadline", "40", NULL};
    run_out r;
    run_tool(argv, &r);
    ck_assert_msg(r.status == 0, "%s\n%s", T(r.out), T(r.err));
    static nrow rows[MAXROWS];
    double avg;
    int oob;
    ck_assert_int_eq(parse_nccl(r.out, rows, MAXROWS, &avg, &oob), 1);
    ck_assert_int_eq(rows[0].wrong[0], -1);
    ck_assert_int_eq(rows[0].wrong[1], -1);
    run_free(&r);
}
END_TEST

/* Half the last printed digit of a value of the table (fmt_num, width 7). */
static double shown_half_unit(double v)
{
    return v < 1e4 ? 0.005 : v < 1e5 ? 0.05 : v < 1e7 ? 0.5 : v * 0.05;
}

/* What cohort-perf promises about time (each rank's mean) and p50/p99/max
 * (each rank's nearest-rank percentiles of the same samples), all combined
 * over ranks by the same -a (rank 0's, mean, min, max - each monotone and
 * positively homogeneous, so a bound that holds per rank in one statistic
 * holds for the combination):
 *   p50 <= p99 <= max, and time <= max (a mean is within its samples);
 *   time >= p50 * (n - k + 1) / n with k = ceil(n / 2): the samples from
 *   the k-th smallest on are >= p50 (16 iterations: time >= 9/16 p50).
 * Not promised: time >= p50. A mean can be below its median: one rank's 16
 * samples {0.02 x 7, 3.0 x 8, 3.5} (7 quick calls, 8 turns of the 3 ms
 * skew, one quick call preempted 3.5 ms by the loaded machine) have p50 3.0
 * and mean 1.73 - the assertion this test had before failed like that
 * under load (CI, 2 cores).
 * Regression it keeps: the time column was the max over ranks of each
 * rank's mean while p50 was the median of the per-iteration slowest rank -
 * two distributions; with the ranks taking turns being "preempted" 3 ms
 * after a call (--debug-skew), each rank's times are half ~0, half ~3 ms,
 * the per-iteration slowest always ~3 ms: time ~p50 / 2 < 9/16 p50. */
START_TEST(test_time_consistent_with_percentiles)
{
    static const char *const avg_modes[] = {"3", "1", "0", "2"};
    for (int a = 0; a < 4; a++) {
        char *argv[] = {(char *)cht_tool("cohort-perf"), "--np", "2", "--sizes", "8,4096", "-n",
                        "16", "-w", "0", "--debug-skew", "3", "--percentiles", "-a",
                        (char *)avg_modes[a], "--deadline", "40", NULL};
        run_out r;
        run_tool(argv, &r);
        ck_assert_msg(r.status == 0, "%s\n%s", T(r.out), T(r.err));
        static nrow rows[MAXROWS];
        double avg;
        int oob;
        int nr = parse_nccl(r.out, rows, MAXROWS, &avg, &oob);
        ck_assert_int_eq(nr, 2);
        for (int i = 0; i < nr; i++) {
            /* 13 nccl-tests fields, then p50/p99/max per variant */
            ck_assert_int_eq(rows[i].nfields, 19);
            /* re-read the row with the extra columns */
            const char *line = strstr(r.out, "\n           8 ");
            if (i == 1)
                line = strstr(r.out, "\n        4096 ");
            ck_assert_ptr_nonnull(line);
            double t, p50, p99, mx, ipt, x;
            long size, count, root, wrong, ipwrong;
            double alg, bus;
            char type[16], redop[16];
            ck_assert_int_eq(sscanf(line, "%ld %ld %15s %15s %ld %lf %lf %lf %ld %lf %lf %lf %ld "
                                          "%lf %lf %lf",
                                    &size, &count, type, redop, &root, &t, &alg, &bus, &wrong, &ipt,
                                    &x, &x, &ipwrong, &p50, &p99, &mx),
                             16);
            /* the order of printed values is the order of the values
             * (rounding is monotone); the ratio bound allows for rounding */
            const double n = 16, k = 8;
            ck_assert_msg(t > 0 && p50 <= p99 && p99 <= mx && t <= mx &&
                              t + shown_half_unit(t) >=
                                  (p50 - shown_half_unit(p50)) * (n - k + 1) / n,
                          "-a %s: time %.2f p50 %.2f p99 %.2f max %.2f\n%s", avg_modes[a], t, p50,
                          p99, mx, T(r.out));
        }
        run_free(&r);
    }
}
END_TEST

#if PERF_TEST_JANSSON
START_TEST(test_json_parses)
{
    char *argv[] = {(char *)cht_tool("cohort-perf"), "--np", "2", "--coll",
                    "all_reduce,all_gather,barrier", "--sizes", "8,4096", "-n",
                    "3", "--in-place", "no", "--json", "-l", "json \"test\" \xff\xfe\x01\t\xc3\xa9", "--deadline", "40",
                    NULL};
    run_out r;
    run_tool(argv, &r);
    ck_assert_msg(r.status == 0, "exit %d\n%s\n%s", r.status, T(r.out), T(r.err));
    json_error_t e;
    json_t *doc = json_loads(r.out, 0, &e);
    ck_assert_msg(doc, "JSON does not parse: %s at line %d:\n%s", e.text, e.line, T(r.out));
    ck_assert_str_eq(json_string_value(json_object_get(doc, "tool")), "cohort-perf");
    /* Invalid UTF-8 (ff fe) and control bytes in the label still give valid
     * JSON (jansson refuses invalid UTF-8): the bytes come back as U+00FF,
     * U+00FE; valid UTF-8 (c3 a9) as is. */
    ck_assert_str_eq(json_string_value(json_object_get(doc, "label")),
                     "json \"test\" \xc3\xbf\xc3\xbe\x01\t\xc3\xa9");
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "ranks")), 2);
    ck_assert(json_is_false(json_object_get(doc, "failed")));
    json_t *res = json_object_get(doc, "results");
    ck_assert_msg(json_is_array(res) && json_array_size(res) == 5, "results: %zu entries",
                  json_array_size(res));
    size_t i;
    json_t *row;
    json_array_foreach(res, i, row)
    {
        const char *op = json_string_value(json_object_get(row, "op"));
        ck_assert(op);
        ck_assert_int_eq(json_integer_value(json_object_get(row, "iters")), 3);
        double avg = json_number_value(json_object_get(row, "avg_us"));
        double p50 = json_number_value(json_object_get(row, "p50_us"));
        double mx = json_number_value(json_object_get(row, "max_us"));
        ck_assert_msg(avg > 0 && p50 > 0 && mx >= p50, "%s: avg %g p50 %g max %g", op, avg, p50,
                      mx);
        if (strcmp(op, "barrier")) {
            ck_assert_str_eq(json_string_value(json_object_get(row, "check")), "ok");
            ck_assert(json_number_value(json_object_get(row, "busbw_GBs")) > 0);
        }
    }
    json_t *mem = json_object_get(doc, "memory_kib");
    ck_assert(json_is_array(mem) && json_array_size(mem) == 2);
    json_array_foreach(mem, i, row)
    {
        ck_assert_int_eq(json_integer_value(json_object_get(row, "rank")), (json_int_t)i);
        ck_assert(json_integer_value(json_object_get(row, "rss_end")) > 0);
    }
    json_decref(doc);
    run_free(&r);
}
END_TEST
#endif

/* Ranks started by someone else (RANK/WORLD_SIZE/MASTER_ADDR in the
 * environment, rank 0 hosting the store), as cohortrun or torchrun do. */
static int env_rank(int rank, void *arg)
{
    const char *out = arg;
    if (rank == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            return 99;
        dup2(fd, 1);
        close(fd);
    }
    char *argv[] = {(char *)cht_tool("cohort-perf"), "--coll", "all_reduce,sendrecv", "--sizes",
                    "8,65536", "-n", "3", NULL};
    execv(argv[0], argv);
    return 127;
}

START_TEST(test_env_ranks)
{
    char out[] = "/tmp/cohort-perf-test-env.XXXXXX";
    int fd = mkstemp(out);
    ck_assert(fd >= 0);
    close(fd);
    cht_opts o = {.nranks = 2, .deadline_ms = 40000, .store_mode = CHT_STORE_RANK0};
    cht_result res;
    cht_run_ranks(&o, env_rank, out, &res);
    char *text = slurp(out);
    unlink(out);
    if (res.status[0] || res.status[1] || res.hung[0] || res.hung[1])
        fprintf(stderr, "rank 0 output:\n%s\n", text);
    cht_assert_all_ok(&res);
    static nrow rows[MAXROWS];
    double avg;
    int oob, wrong;
    int nr = parse_nccl(text, rows, MAXROWS, &avg, &oob);
    ck_assert_msg(rows_of(rows, nr, "all_reduce", &wrong) == 2 && !wrong, "%s", T(text));
    ck_assert_msg(rows_of(rows, nr, "sendrecv", &wrong) == 2 && !wrong, "%s", T(text));
    ck_assert_msg(strstr(text, "ranks 2") && strstr(text, "#  Rank  1 Group  0 Pid"), "%s",
                  T(text));
    free(text);
}
END_TEST

/* Under the launcher users run it with: cohortrun -n 2 cohort-perf ... */
START_TEST(test_under_cohortrun)
{
    char run[1024];
    snprintf(run, sizeof run, "%s", cht_tool("cohortrun"));
    if (access(run, X_OK) != 0) {
        fprintf(stderr, "test_under_cohortrun: %s not built; skipped\n", run);
        return;
    }
    char *argv[] = {run, "-n", "2", (char *)cht_tool("cohort-perf"), "--coll",
                    "all_reduce,barrier", "--sizes", "8,65536", "-n", "3", NULL};
    run_out r;
    run_tool(argv, &r);
    ck_assert_msg(r.status == 0, "cohortrun exited %d\n%s\n%s", r.status, T(r.out), T(r.err));
    /* cohortrun prefixes each line with the rank ("[0] "): strip it, as a
     * script would, then parse. */
    char *plain = strdup(r.out);
    size_t w = 0;
    for (const char *p = r.out; *p;) {
        if (!strncmp(p, "[0] ", 4))
            p += 4;
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) + 1 : strlen(p);
        memmove(plain + w, p, l);
        w += l;
        p += l;
    }
    plain[w] = 0;
    static nrow rows[MAXROWS];
    double avg;
    int oob, wrong;
    int nr = parse_nccl(plain, rows, MAXROWS, &avg, &oob);
    ck_assert_msg(rows_of(rows, nr, "all_reduce", &wrong) == 2 && !wrong, "%s", T(plain));
    ck_assert_msg(rows_of(rows, nr, "barrier", &wrong) == 1, "%s", T(plain));
    free(plain);
    run_free(&r);
}
END_TEST

/* --prewarm: the 8-byte all_reduces before the first row last at least as
 * long as asked (the slowest rank's time decides), the header says how
 * long, and 0 turns them off. */
START_TEST(test_prewarm)
{
    const char *pw = _i ? "0.6" : "0";
    char *argv[] = {(char *)cht_tool("cohort-perf"), "--np", "2", "--coll", "broadcast", "--sizes",
                    "8", "-n", "3", "-w", "1", "--deadline", "40", "--prewarm", (char *)pw, NULL};
    run_out r;
    double t0 = cht_now_ms();
    run_tool(argv, &r);
    double ms = cht_now_ms() - t0;
    ck_assert_msg(r.status == 0, "--prewarm %s: exit %d\n%s\n%s", pw, r.status, T(r.out), T(r.err));
    char want[32];
    snprintf(want, sizeof want, "prewarm %s s", pw);
    ck_assert_msg(strstr(r.out, want), "no \"%s\" in the header:\n%s", want, T(r.out));
    if (_i)
        ck_assert_msg(ms >= 600, "--prewarm 0.6: the run took %.0f ms", ms);
    run_free(&r);
}
END_TEST

START_TEST(test_bad_args)
{
    static const char *const bad[][3] = {
        {"--coll", "allreduse", NULL}, {"-d", "float128", NULL},  {"-o", "avg", "-dint32"},
        {"-f", "1", NULL},             {"--sizes", "12Q", NULL}, {"--transport", "ib", NULL},
        {"-g", "2", NULL},             {"-t", "4", NULL},        {"-a", "4", NULL},
        {"--bogus", NULL},             {"--minbyte=8", "-i", "1"}, {"-G", "1", NULL},
        {"--prewarm", "-1", NULL},     {"--prewarm", "61", NULL}, {"--prewarm", "0.2s", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[8] = {(char *)cht_tool("cohort-perf"), "--np", "1"};
        int k = 3;
        for (int j = 0; j < 3 && bad[i][j]; j++)
            argv[k++] = (char *)bad[i][j];
        argv[k] = NULL;
        run_out r;
        run_tool(argv, &r);
        ck_assert_msg(r.status == 2, "%s %s: exit %d, want 2\n%s", bad[i][0], bad[i][1], r.status,
                      T(r.err));
        ck_assert_msg(strstr(r.err, "cohort-perf:"), "%s %s: no message:\n%s", bad[i][0],
                      bad[i][1], T(r.err));
        run_free(&r);
    }
}
END_TEST

/* The "# cohort: binding ...: rank 0 cpus 0, rank 1 cpus 1" line: each
 * rank's cpu list into cpus[r]; returns the ranks found. */
static int binding_of(const char *out, char cpus[][64], int max)
{
    const char *l = strstr(out, "# cohort: binding");
    if (!l)
        return 0;
    const char *end = strchr(l, '\n');
    int n = 0;
    for (const char *p = strstr(l, " rank "); p && (!end || p < end) && n < max;
         p = strstr(p + 1, " rank ")) {
        int r;
        char c[64];
        if (sscanf(p, " rank %d cpus %63[0-9,-]", &r, c) != 2 || r != n)
            return -1;
        snprintf(cpus[n++], 64, "%s", c);
    }
    return n;
}

/* The lowest cpu of cpu's core (sysfs), or cpu. */
static int core_of(int cpu)
{
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu);
    FILE *f = fopen(path, "r");
    int first = cpu;
    if (f) {
        if (fscanf(f, "%d", &first) != 1)
            first = cpu;
        fclose(f);
    }
    return first;
}

static void run_binding(const char *launcher, int np, const char *bind_env, run_out *r)
{
    char nps[16];
    snprintf(nps, sizeof nps, "%d", np);
    if (bind_env)
        setenv("COHORT_BIND", bind_env, 1);
    else
        unsetenv("COHORT_BIND");
    char *perf = (char *)cht_tool("cohort-perf");
    char *argv_np[] = {perf, "--np", nps, "--coll", "barrier", "-n", "2", NULL};
    char *argv_run[] = {(char *)launcher, "-q", "-n", nps, perf, "--coll", "barrier", "-n", "2",
                        NULL};
    run_tool(launcher ? argv_run : argv_np, r);
    unsetenv("COHORT_BIND");
    ck_assert_msg(r->status == 0, "%s np %d: exit %d\n%s\n%s", launcher ? "cohortrun" : "--np", np,
                  r->status, T(r->out), T(r->err));
}

/* COHORT_BIND=auto, Open MPI's default: one core per rank while the ranks
 * fit on the cores, no binding when they outnumber them (pinned, an
 * oversubscribed job's ranks could not escape each other); unset: nobody
 * bound. The test restricts itself to 2 cpus first, so that
 * "oversubscribed" is 3 ranks on any machine. */
START_TEST(test_binding)
{
    cpu_set_t all;
    ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
    if (CPU_COUNT(&all) < 2) {
        fprintf(stderr, "test_binding: fewer than 2 cpus; skipped\n");
        return;
    }
    cpu_set_t two;
    CPU_ZERO(&two);
    int c0 = -1, c1 = -1;
    for (int c = 0; c < CPU_SETSIZE && c1 < 0; c++)
        if (CPU_ISSET(c, &all)) {
            if (c0 < 0)
                c0 = c;
            else
                c1 = c;
        }
    CPU_SET(c0, &two);
    CPU_SET(c1, &two);
    ck_assert_int_eq(sched_setaffinity(0, sizeof two, &two), 0);
    char both[32], one0[16], one1[16];
    snprintf(both, sizeof both, c1 == c0 + 1 ? "%d-%d" : "%d,%d", c0, c1);
    snprintf(one0, sizeof one0, "%d", c0);
    snprintf(one1, sizeof one1, "%d", c1);
    int smt = core_of(c0) == core_of(c1);
    char run[1024];
    snprintf(run, sizeof run, "%s", cht_tool("cohortrun"));
    int have_run = access(run, X_OK) == 0;
    for (int l = 0; l < 1 + have_run; l++) {
        const char *launcher = l ? run : NULL;
        char cpus[8][64];
        run_out r;
        /* 2 ranks on 2 cores: bound, one each (unless the two cpus are SMT
         * siblings of one core: then they do not fit and stay unbound) */
        run_binding(launcher, 2, "auto", &r);
        ck_assert_int_eq(binding_of(r.out, cpus, 8), 2);
        ck_assert_str_eq(cpus[0], smt ? both : one0);
        ck_assert_str_eq(cpus[1], smt ? both : one1);
        run_free(&r);
        /* 3 ranks on 2 cores: nobody bound */
        run_binding(launcher, 3, "auto", &r);
        ck_assert_msg(binding_of(r.out, cpus, 8) == 3, "%s", T(r.out));
        for (int k = 0; k < 3; k++)
            ck_assert_msg(!strcmp(cpus[k], both), "oversubscribed rank %d bound to %s (allowed %s)",
                          k, cpus[k], both);
        run_free(&r);
        /* COHORT_BIND=none and the default: nobody bound */
        for (int k = 0; k < 2; k++) {
            run_binding(launcher, 2, k ? NULL : "none", &r);
            ck_assert_int_eq(binding_of(r.out, cpus, 8), 2);
            ck_assert_str_eq(cpus[0], both);
            ck_assert_str_eq(cpus[1], both);
            ck_assert_msg(launcher || strstr(r.out, k ? "binding none (default)"
                                                      : "binding none (COHORT_BIND)"),
                          "%s", T(r.out));
            run_free(&r);
        }
        /* the option wins over the environment */
        if (!launcher) {
            setenv("COHORT_BIND", "none", 1);
            char *argv[] = {(char *)cht_tool("cohort-perf"), "--np", "2", "--bind", "auto",
                            "--coll", "barrier", "-n", "2", NULL};
            run_tool(argv, &r);
            unsetenv("COHORT_BIND");
            ck_assert_msg(r.status == 0, "%s", T(r.err));
            ck_assert_int_eq(binding_of(r.out, cpus, 8), 2);
            ck_assert_str_eq(cpus[0], smt ? both : one0);
            run_free(&r);
        }
    }
    ck_assert_int_eq(sched_setaffinity(0, sizeof all, &all), 0);
}
END_TEST

/* Ranks outnumbering the cpus get the deepest broadcast rings (K = 256,
 * KT = 1024: every turn of a reader ends in a wait for its root, and a turn
 * holds at most K calls), the others the defaults (KT 128; K 8, or 64 for
 * 2 ranks where a core's L2 holds twice 64 slots of 16 KiB: docs/shm.md
 * "The ring's depth") - as the lead's segment says through
 * cohort_describe. 2 ranks on 1 cpu against 2 ranks on 2 cpus. */
START_TEST(test_oversubscribed_rings)
{
    cpu_set_t all;
    ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
    if (CPU_COUNT(&all) < 2) {
        fprintf(stderr, "test_oversubscribed_rings: fewer than 2 cpus; skipped\n");
        return;
    }
    for (int over = 0; over < 2; over++) {
        cpu_set_t use;
        CPU_ZERO(&use);
        for (int c = 0, k = 0; c < CPU_SETSIZE && k < (over ? 1 : 2); c++)
            if (CPU_ISSET(c, &all)) {
                CPU_SET(c, &use);
                k++;
            }
        ck_assert_int_eq(sched_setaffinity(0, sizeof use, &use), 0);
        unsetenv("COHORT_BIND");
        char *argv[] = {(char *)cht_tool("cohort-perf"), "--np", "2", "--coll", "broadcast",
                        "--sizes", "8,4096", "-n", "300", NULL};
        run_out r;
        run_tool(argv, &r);
        ck_assert_int_eq(sched_setaffinity(0, sizeof all, &all), 0);
        ck_assert_msg(r.status == 0, "%s\n%s", T(r.out), T(r.err));
        long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        const char *k = over ? "(256 slots of 16384 B"
                        : l2 >= 2 * 64 * 16384 ? "(64 slots of 16384 B"
                                               : "(8 slots of 16384 B";
        ck_assert_msg(strstr(r.out, over ? "(1024 slots of 256 B" : "(128 slots of 256 B") &&
                          strstr(r.out, k),
                      "%s ranks on %d cpus:\n%s", "2", over ? 1 : 2, T(r.out));
        /* and the header says what the rules counted */
        ck_assert_msg(strstr(r.out, over ? "this machine: 2 ranks on 1 cpus (their cpu sets): "
                                           "ranks outnumber cpus)"
                                         : "this machine: 2 ranks on 2 cpus (their cpu sets))"),
                      "%s", T(r.out));
        run_free(&r);
    }
}
END_TEST

/* The launch habit itself: `taskset -c C cohort-perf --np 2` (both ranks
 * inherit the one cpu) - oversubscribed, said in the "# cohort:" lines;
 * the two cpus C,D: not. The ranks' cpu sets decide, not the online cpus. */
START_TEST(test_taskset)
{
    const char *ts = access("/usr/bin/taskset", X_OK) == 0 ? "/usr/bin/taskset"
                     : access("/bin/taskset", X_OK) == 0   ? "/bin/taskset"
                                                            : NULL;
    cpu_set_t all;
    ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
    if (!ts || CPU_COUNT(&all) < 2) {
        fprintf(stderr, "test_taskset: no taskset or fewer than 2 cpus; skipped\n");
        return;
    }
    int c0 = -1, c1 = -1;
    for (int c = 0; c < CPU_SETSIZE && c1 < 0; c++)
        if (CPU_ISSET(c, &all)) {
            if (c0 < 0)
                c0 = c;
            else
                c1 = c;
        }
    unsetenv("COHORT_BIND");
    for (int over = 0; over < 2; over++) {
        char list[32];
        if (over)
            snprintf(list, sizeof list, "%d", c0);
        else
            snprintf(list, sizeof list, "%d,%d", c0, c1);
        char *argv[] = {(char *)ts, "-c", list, (char *)cht_tool("cohort-perf"), "--np", "2",
                        "--coll", "all_reduce", "--sizes", "8", "-n", "20", NULL};
        run_out r;
        run_tool(argv, &r);
        ck_assert_msg(r.status == 0, "%s\n%s", T(r.out), T(r.err));
        ck_assert_msg(strstr(r.out, over ? "2 ranks on 1 cpus (their cpu sets): ranks outnumber "
                                           "cpus)"
                                         : "2 ranks on 2 cpus (their cpu sets))"),
                      "taskset -c %s:\n%s", list, T(r.out));
        run_free(&r);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tools_perf");
    TCase *tc = tcase_create("smoke");
    tcase_set_timeout(tc, 50);
    tcase_add_loop_test(tc, test_all_ops_check, 0, 2);
    tcase_add_test(tc, test_dtypes_check);
    tcase_add_test(tc, test_corrupt_detected);
    tcase_add_test(tc, test_time_consistent_with_percentiles);
#if PERF_TEST_JANSSON
    tcase_add_test(tc, test_json_parses);
#endif
    tcase_add_test(tc, test_env_ranks);
    tcase_add_test(tc, test_under_cohortrun);
    tcase_add_test(tc, test_bad_args);
    tcase_add_loop_test(tc, test_prewarm, 0, 2);
    tcase_add_test(tc, test_binding);
    tcase_add_test(tc, test_oversubscribed_rings);
    tcase_add_test(tc, test_taskset);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(suite)
