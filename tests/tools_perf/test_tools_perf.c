/*
 * test_tools_perf.c - end-to-end smoke tests of cohort-perf: the real binary,
 * real forked ranks, real transports.
 *
 * - every collective, tiny sweep, --check, on 2 and 3 ranks: exit 0, a row
 *   per op and size, every row "ok";
 * - --json: the document parses and holds what the table would;
 * - --debug-corrupt flips one received byte: --check must fail (exit 1,
 *   FAIL rows, the element named on stderr), so the check is shown able to fail;
 * - ranks from the environment (as cohortrun/torchrun start them) work too;
 * - bad arguments are refused with a message, not a crash.
 */
#include <errno.h>
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

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

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
    double t0 = now_ms();
    int st = 0;
    r->status = -1;
    for (;;) {
        pid_t p = waitpid(pid, &st, WNOHANG);
        if (p == pid) {
            r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        if (now_ms() - t0 > TOOL_DEADLINE_MS) {
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

/* Counts table rows of op (lines starting with "op "). */
static int rows_of(const char *out, const char *op, int *ok, int *fail)
{
    int n = 0;
    size_t l = strlen(op);
    *ok = *fail = 0;
    for (const char *p = out; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > l && !strncmp(p, op, l) && p[l] == ' ') {
            n++;
            char line[512];
            snprintf(line, sizeof line, "%.*s", (int)len, p);
            if (strstr(line, " ok"))
                (*ok)++;
            if (strstr(line, "FAIL"))
                (*fail)++;
        }
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

/* -o all with --check on 2 and 3 ranks: 3 sizes per op (1 for barrier). */
START_TEST(test_all_ops_check)
{
    int n = _i == 0 ? 2 : 3;
    char nb[8];
    snprintf(nb, sizeof nb, "%d", n);
    char *argv[] = {(char *)cht_tool("cohort-perf"), "-n", nb, "-o", "all", "--check", "--sizes",
                    "8,1000,65536", "--iters", "3", "--warmup", "1", "--deadline", "40",
                    "-d", "int32", NULL};
    run_out r;
    run_tool(argv, &r);
    ck_assert_msg(r.status == 0, "cohort-perf -n %d exited %d\nstdout:\n%s\nstderr:\n%s", n,
                  r.status, T(r.out), T(r.err));
    for (int i = 0; ALL_OPS[i]; i++) {
        int ok, fail;
        int rows = rows_of(r.out, ALL_OPS[i], &ok, &fail);
        int want = !strcmp(ALL_OPS[i], "barrier") ? 1 : 3;
        ck_assert_msg(rows == want, "%s: %d rows, want %d\n%s", ALL_OPS[i], rows, want, T(r.out));
        ck_assert_msg(fail == 0, "%s: FAIL rows\n%s\n%s", ALL_OPS[i], T(r.out), T(r.err));
        if (strcmp(ALL_OPS[i], "barrier"))
            ck_assert_msg(ok == want, "%s: %d ok of %d\n%s", ALL_OPS[i], ok, want, T(r.out));
    }
    ck_assert_msg(strstr(r.out, "rss_init"), "no memory report:\n%s", T(r.out));
    run_free(&r);
}
END_TEST

/* A reduction dtype/op matrix on float and half types, one size each. */
START_TEST(test_dtypes_check)
{
    static const char *const combos[][2] = {{"float32", "sum"}, {"float64", "max"},
                                            {"float16", "sum"}, {"bfloat16", "min"},
                                            {"int8", "prod"},   {"uint64", "bxor"},
                                            {"float32", "avg"}};
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
        char *argv[] = {(char *)cht_tool("cohort-perf"), "-n", "3", "-o",
                        "all_reduce,reduce_scatter", "--check", "--sizes", "96,12000", "--iters",
                        "2", "--warmup", "0", "-d", (char *)combos[i][0], "-r",
                        (char *)combos[i][1], "--deadline", "40", NULL};
        run_out r;
        run_tool(argv, &r);
        ck_assert_msg(r.status == 0, "%s/%s exited %d\n%s\n%s", combos[i][0], combos[i][1],
                      r.status, T(r.out), T(r.err));
        ck_assert_msg(!strstr(r.out, "FAIL"), "%s/%s:\n%s", combos[i][0], combos[i][1], T(r.out));
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
        char *argv[] = {(char *)cht_tool("cohort-perf"), "-n", "2", "-o", (char *)ops[i], "--check",
                        "--debug-corrupt", "--sizes", "64", "--iters", "2", "--deadline", "40",
                        NULL};
        run_out r;
        run_tool(argv, &r);
        ck_assert_msg(r.status == 1, "%s with --debug-corrupt exited %d, want 1\n%s\n%s", ops[i],
                      r.status, T(r.out), T(r.err));
        int ok, fail;
        rows_of(r.out, ops[i], &ok, &fail);
        ck_assert_msg(fail == 1, "%s: %d FAIL rows\n%s", ops[i], fail, T(r.out));
        ck_assert_msg(strstr(r.err, "CHECK FAILED") && strstr(r.err, "element 0"),
                      "%s: stderr does not name the element:\n%s", ops[i], T(r.err));
        run_free(&r);
    }
}
END_TEST

#if PERF_TEST_JANSSON
START_TEST(test_json_parses)
{
    char *argv[] = {(char *)cht_tool("cohort-perf"), "-n", "2", "-o",
                    "all_reduce,all_gather,barrier", "--check", "--sizes", "8,4096", "--iters",
                    "3", "--json", "-l", "json \"test\" \xff\xfe\x01\t\xc3\xa9", "--deadline", "40",
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
    char *argv[] = {(char *)cht_tool("cohort-perf"), "-o", "all_reduce,sendrecv", "--check",
                    "--sizes", "8,65536", "--iters", "3", NULL};
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
    int ok, fail;
    ck_assert_msg(rows_of(text, "all_reduce", &ok, &fail) == 2 && ok == 2, "%s", T(text));
    ck_assert_msg(rows_of(text, "sendrecv", &ok, &fail) == 2 && ok == 2, "%s", T(text));
    ck_assert_msg(strstr(text, "ranks 2"), "%s", T(text));
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
    char *argv[] = {run, "-n", "2", (char *)cht_tool("cohort-perf"), "-o", "all_reduce,barrier",
                    "--check", "--sizes", "8,65536", "--iters", "3", NULL};
    run_out r;
    run_tool(argv, &r);
    ck_assert_msg(r.status == 0, "cohortrun exited %d\n%s\n%s", r.status, T(r.out), T(r.err));
    /* cohortrun prefixes each line with the rank: "[0] all_reduce ..." */
    int rows = 0;
    for (const char *p = r.out; (p = strstr(p, "all_reduce ")); p++)
        rows += strstr(p, "\n") && memmem(p, (size_t)(strchr(p, '\n') - p), " ok", 3) != NULL;
    ck_assert_msg(rows == 2, "%d ok all_reduce rows\n%s", rows, T(r.out));
    run_free(&r);
}
END_TEST

START_TEST(test_bad_args)
{
    static const char *const bad[][3] = {{"-o", "allreduse", NULL},  {"-d", "float128", NULL},
                                         {"-r", "avg", "-dint32"},   {"-f", "1", NULL},
                                         {"--sizes", "12Q", NULL},   {"--transport", "ib", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[8] = {(char *)cht_tool("cohort-perf"), "-n", "1"};
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

static Suite *suite(void)
{
    Suite *s = suite_create("tools_perf");
    TCase *tc = tcase_create("smoke");
    tcase_set_timeout(tc, 50);
    tcase_add_loop_test(tc, test_all_ops_check, 0, 2);
    tcase_add_test(tc, test_dtypes_check);
    tcase_add_test(tc, test_corrupt_detected);
#if PERF_TEST_JANSSON
    tcase_add_test(tc, test_json_parses);
#endif
    tcase_add_test(tc, test_env_ranks);
    tcase_add_test(tc, test_under_cohortrun);
    tcase_add_test(tc, test_bad_args);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
