/*
 * test_store_tools.c - cohort-store and cohort-kv end to end, as real
 * processes: readiness line, SIGTERM/SIGINT shutdown, option errors, every
 * cohort-kv command and its exit codes.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_util.h"

/* Runs a tool with args (NULL-terminated), optional stdin bytes and extra
 * environment "K=V" (or NULL); captures stdout/stderr; returns the exit
 * code (128+signal if killed, -1 if it did not finish in timeout_ms). */
typedef struct run {
    char out[8192];
    size_t outlen;
    char err[8192];
    int rc;
} run;

static int run_tool(run *r, const char *tool, const char *const *args, const void *in,
                    size_t inlen, const char *env, int timeout_ms)
{
    memset(r, 0, sizeof *r);
    int po[2], pe[2], pi[2];
    ck_assert(pipe(po) == 0 && pipe(pe) == 0 && pipe(pi) == 0);
    fflush(NULL);
    pid_t p = fork();
    ck_assert(p >= 0);
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(pi[0], 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(pi[1]);
        close(po[0]);
        close(pe[0]);
        if (env) {
            char *e = strdup(env), *eq = strchr(e, '=');
            *eq = 0;
            setenv(e, eq + 1, 1);
        }
        const char *argv[40];
        int n = 0;
        argv[n++] = cht_tool(tool);
        for (int i = 0; args[i] && n < 39; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(pi[0]);
    close(po[1]);
    close(pe[1]);
    /* stdin data fits in the pipe buffer (tests send < 64 KiB) */
    for (size_t off = 0; off < inlen;) {
        ssize_t w = write(pi[1], (const char *)in + off, inlen - off);
        ck_assert(w > 0);
        off += (size_t)w;
    }
    close(pi[1]);
    size_t el = 0;
    double t0 = su_now_ms();
    int open_fds = 2;
    while (open_fds > 0 && su_now_ms() - t0 < timeout_ms) {
        struct pollfd pf[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
        if (poll(pf, 2, 100) <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP)) || pf[i].fd < 0)
                continue;
            char *dst = i ? r->err + el : r->out + r->outlen;
            size_t cap = i ? sizeof r->err - 1 - el : sizeof r->out - 1 - r->outlen;
            ssize_t k = read(pf[i].fd, dst, cap ? cap : 1);
            if (k <= 0) {
                close(i ? pe[0] : po[0]);
                if (i)
                    pe[0] = -1;
                else
                    po[0] = -1;
                open_fds--;
                continue;
            }
            if (i)
                el += (size_t)k;
            else
                r->outlen += (size_t)k;
        }
    }
    int st;
    while (su_now_ms() - t0 < timeout_ms && waitpid(p, &st, WNOHANG) == 0) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (waitpid(p, &st, WNOHANG) == 0) {
        kill(p, SIGKILL);
        waitpid(p, &st, 0);
        r->rc = -1;
    } else {
        r->rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    if (po[0] >= 0)
        close(po[0]);
    if (pe[0] >= 0)
        close(pe[0]);
    r->out[r->outlen] = 0;
    r->err[el] = 0;
    return r->rc;
}

/* ---- cohort-store ---- */

typedef struct gwait {
    const char *addr;
    cohort_status st;
    char err[512];
} gwait;

static void *getter(void *p)
{
    gwait *g = p;
    cohort_store *s = su_connect(g->addr, JOB_A, TOK_A);
    char *v = NULL;
    g->st = cohort_store_gets(s, "never", &v, 20000);
    snprintf(g->err, sizeof g->err, "%s", cohort_store_last_error(s));
    free(v);
    cohort_store_close(s);
    return NULL;
}

static void shutdown_by(int sig, const char *name)
{
    char errpath[128];
    snprintf(errpath, sizeof errpath, "/tmp/cohort-store-test-%d.err", (int)getpid());
    const char *args[] = {"--listen", "127.0.0.1:0", "--token-file", su_token_file(), NULL};
    char a[64];
    pid_t sp = su_spawn_store(args, a, sizeof a, errpath);
    ck_assert(sp > 0);
    gwait g = {.addr = a};
    pthread_t th;
    pthread_create(&th, NULL, getter, &g);
    cohort_store *obs = su_connect(a, JOB_A, TOK_A);
    ck_assert(su_until(obs, su_waiters_eq, (void *)1, 5000));
    ck_assert(kill(sp, sig) == 0);
    double t0 = su_now_ms();
    int st;
    ck_assert(waitpid(sp, &st, 0) == sp);
    ck_assert(su_now_ms() - t0 < 5000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cohort-store exit status %d", st);
    pthread_join(th, NULL);
    ck_assert_int_eq(g.st, COHORT_ERR_STORE);
    ck_assert_msg(strstr(g.err, "shutting down"), "%s", g.err);
    char buf[4096] = "";
    FILE *f = fopen(errpath, "r");
    ck_assert(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(errpath);
    ck_assert_msg(strstr(buf, name), "stderr: %s", buf);
    cohort_store_close(obs);
}

START_TEST(store_sigterm_shutdown) { shutdown_by(SIGTERM, "stopped (SIGTERM)"); }
END_TEST

START_TEST(store_sigint_shutdown) { shutdown_by(SIGINT, "stopped (SIGINT)"); }
END_TEST

START_TEST(store_bad_usage)
{
    run r;
    const char *a1[] = {NULL};
    ck_assert_int_eq(run_tool(&r, "cohort-store", a1, NULL, 0, NULL, 5000), 2);
    ck_assert(strstr(r.err, "--listen is required"));
    const char *a2[] = {"--listen", "1.2.3:x", "--token-file", su_token_file(), NULL};
    ck_assert_int_eq(run_tool(&r, "cohort-store", a2, NULL, 0, NULL, 5000), 2);
    const char *a3[] = {"--listen", "127.0.0.1:0", "--max-value", "12Q", NULL};
    ck_assert_int_eq(run_tool(&r, "cohort-store", a3, NULL, 0, NULL, 5000), 2);
    /* a token file line with three words names the line */
    char path[128];
    snprintf(path, sizeof path, "/tmp/cohort-store-bad-%d.tok", (int)getpid());
    FILE *f = fopen(path, "w");
    fprintf(f, "jobA tokA\njobB tokB extra\n");
    fclose(f);
    chmod(path, 0600);
    const char *a4[] = {"--listen", "127.0.0.1:0", "--token-file", path, NULL};
    ck_assert_int_eq(run_tool(&r, "cohort-store", a4, NULL, 0, NULL, 5000), 1);
    ck_assert_msg(strstr(r.err, ":2:"), "%s", r.err);
    unlink(path);
    const char *a5[] = {"--listen", "127.0.0.1:0", "--token-file", "/nonexistent/tok", NULL};
    ck_assert_int_eq(run_tool(&r, "cohort-store", a5, NULL, 0, NULL, 5000), 1);
    ck_assert(strstr(r.err, "No such file"));
    const char *a6[] = {"--help", NULL};
    ck_assert_int_eq(run_tool(&r, "cohort-store", a6, NULL, 0, NULL, 5000), 0);
    ck_assert(strstr(r.out, "usage"));
}
END_TEST

START_TEST(store_env_job_and_limits)
{
    /* job from the environment; limits from the command line */
    setenv("COHORT_JOB_ID", "envjob", 1);
    setenv("COHORT_TOKEN", "envtok", 1);
    const char *args[] = {"--listen", "127.0.0.1:0", "--max-key", "16", "--max-value", "1K",
                          "--max-memory", "1M", "--max-clients", "100", NULL};
    char a[64];
    pid_t sp = su_spawn_store(args, a, sizeof a, "/dev/null");
    unsetenv("COHORT_JOB_ID");
    unsetenv("COHORT_TOKEN");
    ck_assert(sp > 0);
    cohort_store *s = su_connect(a, "envjob", "envtok");
    ST_EXPECT(cohort_store_sets(s, "a-key-longer-than-16", "v"), COHORT_ERR_TOO_LARGE, s);
    static char v[1025];
    ST_EXPECT(cohort_store_set(s, "k", 1, v, 1025), COHORT_ERR_TOO_LARGE, s);
    ST_OK(cohort_store_set(s, "k", 1, v, 1024), s);
    cohort_store_stats x;
    ST_OK(cohort_store_get_stats(s, &x), s);
    ck_assert_int_eq(x.max_memory, 1 << 20);
    cohort_store_close(s);
    kill(sp, SIGTERM);
    int st;
    waitpid(sp, &st, 0);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

/* ---- cohort-kv ---- */

static pid_t kv_srv;
static char kv_addr[64];

static void kv_setup(void)
{
    const char *args[] = {"--listen", "127.0.0.1:0", "--token-file", su_token_file(), NULL};
    kv_srv = su_spawn_store(args, kv_addr, sizeof kv_addr, "/dev/null");
    ck_assert(kv_srv > 0);
}

static void kv_teardown(void)
{
    kill(kv_srv, SIGKILL);
    waitpid(kv_srv, NULL, 0);
}

/* cohort-kv --addr A --job jobA --token-file F <cmd...> */
static int kv(run *r, const char *const *cmd, const void *in, size_t inlen, const char *env)
{
    const char *args[40] = {"--addr", kv_addr, "--job", JOB_A, "--token-file", su_token_file()};
    int n = 6;
    for (int i = 0; cmd[i] && n < 39; i++)
        args[n++] = cmd[i];
    args[n] = NULL;
    return run_tool(r, "cohort-kv", args, in, inlen, env, 20000);
}

#define KV(r, ...) kv(r, (const char *const[]){__VA_ARGS__, NULL}, NULL, 0, NULL)

START_TEST(kv_commands)
{
    run r;
    ck_assert_int_eq(KV(&r, "set", "foo", "bar"), 0);
    ck_assert_int_eq(KV(&r, "get", "foo"), 0);
    ck_assert_str_eq(r.out, "bar\n");
    ck_assert_int_eq(KV(&r, "add", "ctr", "5"), 0);
    ck_assert_str_eq(r.out, "5\n");
    ck_assert_int_eq(KV(&r, "add", "ctr", "-7"), 0);
    ck_assert_str_eq(r.out, "-2\n");
    ck_assert_int_eq(KV(&r, "set", "dir/a", "1"), 0);
    ck_assert_int_eq(KV(&r, "set", "dir/b", "2"), 0);
    ck_assert_int_eq(KV(&r, "list", "dir/"), 0);
    ck_assert_msg(!strcmp(r.out, "dir/a\ndir/b\n") || !strcmp(r.out, "dir/b\ndir/a\n"), "%s",
                  r.out);
    ck_assert_int_eq(KV(&r, "num-keys"), 0);
    ck_assert_str_eq(r.out, "4\n");
    ck_assert_int_eq(KV(&r, "delete", "dir/a"), 0);
    ck_assert_int_eq(KV(&r, "delete", "dir/a"), 1); /* not found */
    ck_assert_int_eq(KV(&r, "wait", "foo", "dir/b"), 0);
    ck_assert_int_eq(KV(&r, "ping"), 0);
    ck_assert_str_eq(r.out, "ok\n");
    ck_assert_int_eq(KV(&r, "stats"), 0);
    ck_assert_msg(strstr(r.out, "keys 3\n"), "%s", r.out);
    /* exit codes */
    ck_assert_int_eq(KV(&r, "get", "missing"), 1);
    ck_assert(strstr(r.err, "not found"));
    ck_assert_int_eq(KV(&r, "get", "missing", "--timeout", "200"), 3);
    ck_assert(strstr(r.err, "timed out"));
    ck_assert_int_eq(KV(&r, "wait", "missing", "--timeout", "100"), 3);
    ck_assert_int_eq(KV(&r, "frobnicate"), 2);
    ck_assert_int_eq(KV(&r, "get"), 2);
    ck_assert_int_eq(KV(&r, "add", "ctr", "x"), 2);
    ck_assert_int_eq(KV(&r, "set", "txt", "abc"), 0);
    ck_assert_int_eq(KV(&r, "add", "txt", "1"), 2); /* refused by the server: INVALID */
    ck_assert(strstr(r.err, "not a decimal"));
}
END_TEST

/* The operator's way back from a runaway generation. */
START_TEST(kv_set_generation)
{
    run r;
    cohort_store *g5 = su_connect_gen(kv_addr, JOB_A, TOK_A, 5);
    cohort_store *x = NULL;
    ck_assert_int_eq(coh_store_connect_gen(&x, kv_addr, JOB_A, TOK_A, 200, 2000),
                     COHORT_ERR_AUTH);
    ck_assert_int_eq(KV(&r, "set-generation", "0"), 0);
    ck_assert_str_eq(r.out, "5\n");
    /* generation 5's connection was closed; a new run may start anywhere */
    ck_assert_int_eq(cohort_store_sets(g5, "k", "v"), COHORT_ERR_AUTH);
    cohort_store *g200 = su_connect_gen(kv_addr, JOB_A, TOK_A, 200);
    ck_assert_int_eq(cohort_store_sets(g200, "k", "v"), COHORT_OK);
    ck_assert_int_eq(KV(&r, "set-generation", "x"), 2);
    ck_assert_int_eq(KV(&r, "set-generation", "4294967296"), 2);
    ck_assert_int_eq(KV(&r, "stats"), 0);
    ck_assert_msg(strstr(r.out, "generation 200\n"), "%s", r.out);
    cohort_store_close(g200);
    cohort_store_close(g5);
}
END_TEST

START_TEST(kv_binary_stdin_and_env_token)
{
    uint8_t data[5000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 13);
    run r;
    ck_assert_int_eq(kv(&r, (const char *const[]){"set", "bin", "-", NULL}, data, sizeof data,
                        NULL),
                     0);
    ck_assert_int_eq(KV(&r, "get", "bin", "--raw"), 0);
    ck_assert_uint_eq(r.outlen, sizeof data);
    ck_assert(!memcmp(r.out, data, sizeof data));
    /* token from COHORT_TOKEN instead of a file */
    const char *a[] = {"--addr", kv_addr, "--job", JOB_B, "set", "k", "v", NULL};
    ck_assert_int_eq(run_tool(&r, "cohort-kv", a, NULL, 0, "COHORT_TOKEN=" TOK_B, 10000), 0);
    const char *a2[] = {"--addr", kv_addr, "--job", JOB_B, "num-keys", NULL};
    ck_assert_int_eq(run_tool(&r, "cohort-kv", a2, NULL, 0, "COHORT_TOKEN=" TOK_B, 10000), 0);
    ck_assert_str_eq(r.out, "1\n"); /* job B sees only its own key */
}
END_TEST

START_TEST(kv_auth_and_unreachable)
{
    run r;
    const char *a[] = {"--addr", kv_addr, "--job", JOB_A, "get", "foo", NULL};
    ck_assert_int_eq(run_tool(&r, "cohort-kv", a, NULL, 0, "COHORT_TOKEN=wrong", 10000), 4);
    ck_assert_msg(strstr(r.err, "wrong token"), "%s", r.err);
    char dead[64];
    snprintf(dead, sizeof dead, "127.0.0.1:%d", cht_free_port());
    const char *b[] = {"--addr", dead, "--job", JOB_A, "--connect-timeout", "200", "ping", NULL};
    ck_assert_int_eq(run_tool(&r, "cohort-kv", b, NULL, 0, "COHORT_TOKEN=x", 10000), 5);
    ck_assert_msg(strstr(r.err, dead), "%s", r.err);
    const char *c[] = {"ping", NULL};
    ck_assert_int_eq(run_tool(&r, "cohort-kv", c, NULL, 0, NULL, 10000), 2);
}
END_TEST

typedef struct kvwait {
    run r;
    int rc;
} kvwait;

static void *kv_waiter(void *p)
{
    kvwait *w = p;
    w->rc = KV(&w->r, "wait", "signal", "--timeout", "15000");
    return NULL;
}

START_TEST(kv_wait_woken_by_kv_set)
{
    kvwait w;
    pthread_t th;
    pthread_create(&th, NULL, kv_waiter, &w);
    cohort_store *obs = su_connect(kv_addr, JOB_A, TOK_A);
    ck_assert(su_until(obs, su_waiters_eq, (void *)1, 10000));
    run r;
    ck_assert_int_eq(KV(&r, "set", "signal", "go"), 0);
    pthread_join(th, NULL);
    ck_assert_msg(w.rc == 0, "wait exit %d: %s", w.rc, w.r.err);
    cohort_store_close(obs);
}
END_TEST

/* What issue 16 added: compare-set, append, watch, --prefix, --json, sorted
 * list, --opt=value, --help/--version, "did you mean". */
START_TEST(kv_cas_append_watch_prefix_json)
{
    run r;
    /* compare-set: create only if absent, swap only on the expected value */
    ck_assert_int_eq(KV(&r, "compare-set", "--absent", "lock", "me"), 0);
    ck_assert_str_eq(r.out, "me\n");
    ck_assert_int_eq(KV(&r, "cas", "--absent", "lock", "you"), 1); /* taken: not swapped */
    ck_assert_str_eq(r.out, "me\n");
    ck_assert_int_eq(KV(&r, "cas", "lock", "nope", "you"), 1);
    ck_assert_int_eq(KV(&r, "cas", "lock", "me", "you"), 0);
    ck_assert_str_eq(r.out, "you\n");
    ck_assert_int_eq(KV(&r, "--json", "cas", "lock", "you", "x\"y"), 0);
    ck_assert_str_eq(r.out, "{\"key\": \"lock\", \"swapped\": true, \"value\": \"x\\\"y\"}\n");
    /* append creates, then appends */
    ck_assert_int_eq(KV(&r, "append", "log", "a"), 0);
    ck_assert_int_eq(KV(&r, "append", "log", "bc"), 0);
    ck_assert_int_eq(KV(&r, "get", "log"), 0);
    ck_assert_str_eq(r.out, "abc\n");
    /* list is sorted */
    ck_assert_int_eq(KV(&r, "set", "s/c", "1"), 0);
    ck_assert_int_eq(KV(&r, "set", "s/a", "1"), 0);
    ck_assert_int_eq(KV(&r, "set", "s/b", "1"), 0);
    ck_assert_int_eq(KV(&r, "set", "s/aa", "1"), 0);
    ck_assert_int_eq(KV(&r, "list", "s/"), 0);
    ck_assert_str_eq(r.out, "s/a\ns/aa\ns/b\ns/c\n");
    ck_assert_int_eq(KV(&r, "list", "s/", "--json"), 0);
    ck_assert_str_eq(r.out, "[\"s/a\", \"s/aa\", \"s/b\", \"s/c\"]\n");
    /* --prefix: a namespace, as torch's PrefixStore */
    ck_assert_int_eq(KV(&r, "--prefix=exp1/", "set", "k", "v1"), 0);
    ck_assert_int_eq(KV(&r, "get", "exp1/k"), 0);
    ck_assert_str_eq(r.out, "v1\n");
    ck_assert_int_eq(KV(&r, "--prefix", "exp1/", "get", "k"), 0);
    ck_assert_str_eq(r.out, "v1\n");
    ck_assert_int_eq(KV(&r, "--prefix", "exp1/", "list"), 0);
    ck_assert_str_eq(r.out, "k\n");
    /* --json get: binary-safe, valid JSON for any bytes */
    ck_assert_int_eq(KV(&r, "set", "weird", "\xff\x01q"), 0);
    ck_assert_int_eq(KV(&r, "get", "weird", "--json"), 0);
    ck_assert_str_eq(r.out, "{\"key\": \"weird\", \"value\": \"\\u00ff\\u0001q\"}\n");
    ck_assert_int_eq(KV(&r, "--json", "add", "n", "-3"), 0);
    ck_assert_str_eq(r.out, "{\"key\": \"n\", \"value\": -3}\n");
    ck_assert_int_eq(KV(&r, "--json", "stats"), 0);
    ck_assert_msg(strstr(r.out, "\"keys\": ") && r.out[0] == '{', "%s", r.out);
    /* --timeout=value, a negative number as an argument, '--' */
    ck_assert_int_eq(KV(&r, "get", "absent", "--timeout=100"), 3);
    ck_assert_int_eq(KV(&r, "--", "set", "--odd", "v"), 0);
    ck_assert_int_eq(KV(&r, "get", "--", "--odd"), 0);
    ck_assert_str_eq(r.out, "v\n");
    /* did you mean */
    ck_assert_int_eq(KV(&r, "--timout", "5", "get", "k"), 2);
    ck_assert_msg(strstr(r.err, "did you mean '--timeout'"), "%s", r.err);
    ck_assert_int_eq(KV(&r, "lsit"), 2);
    ck_assert_msg(strstr(r.err, "did you mean 'list'"), "%s", r.err);

    /* watch: appears, changes, goes - each seen once */
    pid_t w = fork();
    if (w == 0) {
        struct timespec d = {0, 400 * 1000000L};
        run rr;
        nanosleep(&d, NULL);
        KV(&rr, "set", "w", "one");
        nanosleep(&d, NULL);
        KV(&rr, "set", "w", "two");
        nanosleep(&d, NULL);
        KV(&rr, "delete", "w");
        _exit(0);
    }
    ck_assert_int_eq(KV(&r, "watch", "w", "--count", "3", "--interval", "20", "--timeout",
                        "15000"),
                     0);
    waitpid(w, NULL, 0);
    ck_assert_str_eq(r.out, "one\ntwo\n(deleted)\n");
    /* nothing comes: the timeout, exit 3 */
    ck_assert_int_eq(KV(&r, "watch", "never", "--timeout", "200"), 3);
}
END_TEST

START_TEST(tools_help_and_version)
{
    static const char *const tools[] = {"cohort-kv", "cohort-store", "cohortrun", "cohort-perf",
                                        "cohort-trace", "cohort-soak"};
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        run r;
        const char *h[] = {"--help", NULL}, *v[] = {"--version", NULL}, *b[] = {"--bogus-opt", NULL};
        ck_assert_msg(run_tool(&r, tools[i], h, NULL, 0, NULL, 10000) == 0, "%s --help", tools[i]);
        ck_assert_msg(strstr(r.out, "usage:") || strstr(r.out, "Usage:"), "%s --help: %s",
                      tools[i], r.out);
        ck_assert_msg(run_tool(&r, tools[i], v, NULL, 0, NULL, 10000) == 0, "%s --version",
                      tools[i]);
        char want[64];
        snprintf(want, sizeof want, "%s %d.%d.%d\n", tools[i], COHORT_VERSION_MAJOR,
                 COHORT_VERSION_MINOR, COHORT_VERSION_PATCH);
        ck_assert_msg(!strcmp(r.out, want), "%s --version: '%s'", tools[i], r.out);
        ck_assert_msg(run_tool(&r, tools[i], b, NULL, 0, NULL, 10000) == 2, "%s --bogus-opt",
                      tools[i]);
        ck_assert_msg(strstr(r.err, "unknown option '--bogus-opt'") && strstr(r.err, "--help"),
                      "%s: %s", tools[i], r.err);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("store_tools");
    TCase *t = tcase_create("cohort_store");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, store_sigterm_shutdown);
    tcase_add_test(t, store_sigint_shutdown);
    tcase_add_test(t, store_bad_usage);
    tcase_add_test(t, store_env_job_and_limits);
    suite_add_tcase(s, t);
    TCase *k = tcase_create("cohort_kv");
    tcase_add_checked_fixture(k, kv_setup, kv_teardown);
    tcase_set_timeout(k, 60);
    tcase_add_test(k, kv_commands);
    tcase_add_test(k, kv_set_generation);
    tcase_add_test(k, kv_binary_stdin_and_env_token);
    tcase_add_test(k, kv_auth_and_unreachable);
    tcase_add_test(k, kv_wait_woken_by_kv_set);
    tcase_add_test(k, kv_cas_append_watch_prefix_json);
    tcase_add_test(k, tools_help_and_version);
    suite_add_tcase(s, k);
    return s;
}

COH_TEST_MAIN(suite)
