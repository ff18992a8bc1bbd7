/* test_launcher.c - cohortrun end to end on one node: real launcher process,
 * real workers (crun_probe), real signals. Every wait has a deadline and
 * readiness is read from the launcher's output. */
#include <errno.h>
#include <regex.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "support/support.h"

#define DEADLINE 20000

/* Runs cohortrun with args (NULL-terminated after the launcher) to the end. */
#define RUN(p, env, ...)                                                                           \
    do {                                                                                           \
        char *argv_[] = {crun_launcher_path(), __VA_ARGS__, NULL};                                 \
        crun_start((p), argv_, (env));                                                             \
    } while (0)

static void dump(const crun_proc *p)
{
    fprintf(stderr, "---- launcher stdout ----\n%s\n---- launcher stderr ----\n%s\n----\n", p->obuf,
            p->ebuf);
}

#define EXPECT_STATUS(p, want)                                                                     \
    do {                                                                                           \
        int st__ = crun_finish((p), DEADLINE);                                                     \
        if (st__ != (want))                                                                        \
            dump(p);                                                                               \
        ck_assert_int_eq(st__, (want));                                                            \
    } while (0)

/* Value of "NAME=" in a space-separated line. */
static void field(const char *line, const char *name, char *out, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", name);
    const char *q = strstr(line, pat);
    if (!q && !strncmp(line, pat + 1, strlen(pat) - 1))
        q = line - 1;
    out[0] = 0;
    if (!q)
        return;
    q += strlen(pat);
    size_t l = strcspn(q, " \n");
    snprintf(out, len, "%.*s", (int)(l < len ? l : len - 1), q);
}

/* The stdout line of rank r ("[r] ..."), copied into out. */
static int rank_line(const char *buf, int r, char *out, size_t len)
{
    char pfx[32];
    snprintf(pfx, sizeof pfx, "[%d] ", r);
    for (const char *l = buf; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t ll = nl ? (size_t)(nl - l) : strlen(l);
        if (!strncmp(l, pfx, strlen(pfx))) {
            snprintf(out, len, "%.*s", (int)ll, l + strlen(pfx));
            return 1;
        }
        l = nl ? nl + 1 : NULL;
    }
    return 0;
}

static int ephemeral_low(void)
{
    int lo = 32768, hi = 0;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    return lo;
}

START_TEST(env_is_set_for_every_worker)
{
    char jobs[2][128], hashes[2][64];
    for (int run = 0; run < 2; run++) {
        crun_proc p;
        static const char *const env[] = {"TORCHELASTIC_USE_AGENT_STORE=True", NULL};
        RUN(&p, env, "-n", "4", crun_probe_path(), "env");
        EXPECT_STATUS(&p, 0);
        char first_job[128] = "", first_hash[64] = "", first_store[160] = "";
        for (int r = 0; r < 4; r++) {
            char line[2048], v[256];
            ck_assert_msg(rank_line(p.obuf, r, line, sizeof line), "no line from rank %d", r);
            field(line, "RANK", v, sizeof v);
            ck_assert_int_eq(atoi(v), r);
            field(line, "LOCAL_RANK", v, sizeof v);
            ck_assert_int_eq(atoi(v), r);
            field(line, "WORLD_SIZE", v, sizeof v);
            ck_assert_str_eq(v, "4");
            field(line, "LOCAL_WORLD_SIZE", v, sizeof v);
            ck_assert_str_eq(v, "4");
            field(line, "GROUP_RANK", v, sizeof v);
            ck_assert_str_eq(v, "0");
            field(line, "COHORT_GENERATION", v, sizeof v);
            ck_assert_str_eq(v, "1");
            field(line, "COHORT_RESTART_COUNT", v, sizeof v);
            ck_assert_str_eq(v, "0");
            field(line, "MASTER_ADDR", v, sizeof v);
            ck_assert_str_eq(v, "127.0.0.1");
            /* COHORT_STORE is on MASTER_ADDR; MASTER_PORT is a free port for
             * the program's rank 0 (torch.distributed binds it), below the
             * ephemeral range, never the store's; no agent store is
             * announced (an inherited announcement is dropped). */
            char port[32], store[160], want[200];
            field(line, "MASTER_PORT", port, sizeof port);
            field(line, "COHORT_STORE", store, sizeof store);
            snprintf(want, sizeof want, "tcp://127.0.0.1:%s", port);
            ck_assert_str_ne(store, want);
            ck_assert_ptr_nonnull(strstr(store, "tcp://127.0.0.1:"));
            ck_assert_int_ge(atoi(port), 20000);
            ck_assert_int_lt(atoi(port), ephemeral_low());
            field(line, "TORCHELASTIC_USE_AGENT_STORE", v, sizeof v);
            ck_assert_str_eq(v, "(unset)");
            field(line, "token_len", v, sizeof v);
            ck_assert_int_ge(atoi(v), 32);
            field(line, "token_in_cmdline", v, sizeof v);
            ck_assert_str_eq(v, "0");
            char job[128], hash[64];
            field(line, "COHORT_JOB_ID", job, sizeof job);
            field(line, "token_hash", hash, sizeof hash);
            ck_assert_int_gt(strlen(job), 0);
            if (r == 0) {
                snprintf(first_job, sizeof first_job, "%s", job);
                snprintf(first_hash, sizeof first_hash, "%s", hash);
                snprintf(first_store, sizeof first_store, "%s", store);
            } else {
                /* One job: same id, token and store for every rank. */
                ck_assert_str_eq(job, first_job);
                ck_assert_str_eq(hash, first_hash);
                ck_assert_str_eq(store, first_store);
            }
        }
        snprintf(jobs[run], sizeof jobs[run], "%s", first_job);
        snprintf(hashes[run], sizeof hashes[run], "%s", first_hash);
        crun_free(&p);
    }
    /* Fresh identity per launch. */
    ck_assert_str_ne(jobs[0], jobs[1]);
    ck_assert_str_ne(hashes[0], hashes[1]);
}
END_TEST

/* The launcher exits as soon as the last worker's pipes close, not after
 * the drain bound that only applies to pipes held open by escaped children
 * (a generous bound: 2 cores, other tests in parallel). */
START_TEST(trivial_job_exits_promptly)
{
    for (int i = 0; i < 3; i++) {
        crun_proc p;
        RUN(&p, NULL, "-q", "-n", "2", "true");
        EXPECT_STATUS(&p, 0);
        ck_assert_double_lt(p.t_end - p.t_start, 800);
        crun_free(&p);
    }
}
END_TEST

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

START_TEST(token_file_is_used_and_never_printed)
{
    char dir[256], path[512];
    crun_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/token", dir);
    const char *tok = "s3cr3t-token-0123456789abcdef0123456789";
    FILE *f = fopen(path, "w");
    fprintf(f, "%s\n", tok);
    fclose(f);

    /* World-readable: refused with a clear message (usage-level error). */
    chmod(path, 0644);
    crun_proc p;
    RUN(&p, NULL, "-n", "2", "--token-file", path, "--job-id", "tokjob", crun_probe_path(), "env");
    EXPECT_STATUS(&p, 125);
    ck_assert_ptr_nonnull(strstr(p.ebuf, "chmod 600"));
    crun_free(&p);

    chmod(path, 0600);
    RUN(&p, NULL, "-n", "2", "--token-file", path, "--job-id", "tokjob", crun_probe_path(), "env");
    EXPECT_STATUS(&p, 0);
    char want[64];
    snprintf(want, sizeof want, "token_hash=%016llx", (unsigned long long)fnv(tok));
    ck_assert_int_eq(crun_count(p.obuf, want), 2);
    ck_assert_int_eq(crun_count(p.obuf, "COHORT_JOB_ID=tokjob "), 2);
    ck_assert_int_eq(crun_count(p.obuf, "token_in_cmdline=0"), 2);
    ck_assert_ptr_null(strstr(p.obuf, tok));
    ck_assert_ptr_null(strstr(p.ebuf, tok));
    crun_free(&p);
    crun_rmtree(dir);
}
END_TEST

/* Every line is whole, prefixed, on the right stream, in order per rank. */
static void check_lines(const char *buf, const char *kind, int nranks, int nlines, int len)
{
    regex_t re;
    char pat[128];
    snprintf(pat, sizeof pat, "^\\[([0-9]+)\\] %s r=([0-9]+) i=([0-9]+) ([a-z]+)$", kind);
    ck_assert_int_eq(regcomp(&re, pat, REG_EXTENDED), 0);
    int next[64] = {0};
    int total = 0;
    for (const char *l = buf; *l;) {
        const char *nl = strchr(l, '\n');
        ck_assert_msg(nl != NULL, "output does not end with a newline");
        char line[4096];
        size_t ll = (size_t)(nl - l);
        ck_assert_uint_lt(ll, sizeof line);
        memcpy(line, l, ll);
        line[ll] = 0;
        l = nl + 1;
        if (!strncmp(line, "cohortrun: ", 11))
            continue;
        regmatch_t m[5];
        ck_assert_msg(regexec(&re, line, 5, m, 0) == 0, "malformed line: '%s'", line);
        int pr = atoi(line + m[1].rm_so), r = atoi(line + m[2].rm_so), i = atoi(line + m[3].rm_so);
        ck_assert_int_eq(pr, r);
        ck_assert_int_lt(r, nranks);
        ck_assert_int_eq(i, next[r]);
        ck_assert_int_eq(m[4].rm_eo - m[4].rm_so, len);
        next[r]++;
        total++;
    }
    for (int r = 0; r < nranks; r++)
        ck_assert_int_eq(next[r], nlines);
    ck_assert_int_eq(total, nranks * nlines);
    regfree(&re);
}

START_TEST(output_prefixed_whole_lines_streams_apart)
{
    crun_proc p;
    RUN(&p, NULL, "-q", "-n", "4", crun_probe_path(), "lines", "300", "200");
    EXPECT_STATUS(&p, 0);
    check_lines(p.obuf, "out", 4, 300, 200);
    check_lines(p.ebuf, "err", 4, 300, 200);
    crun_free(&p);
}
END_TEST

START_TEST(log_dir_one_file_per_rank_and_stream)
{
    char dir[256], logs[512];
    crun_tmpdir(dir, sizeof dir);
    snprintf(logs, sizeof logs, "%s/sub/logs", dir);
    crun_proc p;
    RUN(&p, NULL, "-q", "-n", "2", "--log-dir", logs, crun_probe_path(), "lines", "5", "10");
    EXPECT_STATUS(&p, 0);
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 2; k++) {
            char path[700], want[128];
            snprintf(path, sizeof path, "%s/rank-%d.%s", logs, r, k ? "err" : "out");
            FILE *f = fopen(path, "r");
            ck_assert_msg(f != NULL, "missing %s", path);
            char buf[4096];
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[n] = 0;
            /* Raw lines: no prefix, the last one completed with a newline. */
            ck_assert_int_eq(crun_count(buf, "\n"), 5);
            snprintf(want, sizeof want, "%s r=%d i=0 ", k ? "err" : "out", r);
            ck_assert_int_eq(strncmp(buf, want, strlen(want)), 0);
            ck_assert_ptr_null(strstr(buf, "["));
            ck_assert_ptr_null(strstr(buf, k ? "out r=" : "err r="));
        }
    crun_free(&p);
    crun_rmtree(dir);
}
END_TEST

START_TEST(log_dir_unusable_is_a_launcher_error)
{
    crun_proc p;
    RUN(&p, NULL, "-n", "2", "--log-dir", "/dev/null/logs", crun_probe_path(), "env");
    EXPECT_STATUS(&p, 125);
    ck_assert_ptr_nonnull(strstr(p.ebuf, "cannot create log directory '/dev/null/logs': Not a directory"));
    ck_assert_ptr_null(strstr(p.obuf, "RANK=")); /* nothing ran */
    crun_free(&p);
}
END_TEST

START_TEST(failure_exit_code_one_summary_with_stderr_tail)
{
    crun_proc p;
    RUN(&p, NULL, "-n", "4", crun_probe_path(), "exit", "3", "2", "15");
    EXPECT_STATUS(&p, 3);
    ck_assert_int_eq(crun_count(p.ebuf, "failed first"), 1);
    ck_assert_ptr_nonnull(strstr(p.ebuf, "cohortrun: rank 2 failed first: exited with code 3"));
    /* The tail: the last 10 lines, oldest first, not the 5 before them. */
    ck_assert_ptr_nonnull(strstr(p.ebuf, "cohortrun: | rank 2 err line 6\n"));
    ck_assert_ptr_nonnull(strstr(p.ebuf, "cohortrun: | rank 2 err line 15\n"));
    ck_assert_ptr_null(strstr(p.ebuf, "cohortrun: | rank 2 err line 5\n"));
    ck_assert(strstr(p.ebuf, "| rank 2 err line 6\n") < strstr(p.ebuf, "| rank 2 err line 15\n"));
    /* The stream itself went through with prefixes. */
    ck_assert_ptr_nonnull(strstr(p.ebuf, "[2] rank 2 err line 1\n"));
    ck_assert_ptr_nonnull(strstr(p.ebuf, "stopped 3 other worker(s)"));
    /* The others died of SIGTERM at once: no grace period spent. */
    ck_assert_double_lt(p.t_end - p.t_start, 2500);
    crun_free(&p);
}
END_TEST

START_TEST(worker_signal_gives_128_plus_signal)
{
    crun_proc p;
    RUN(&p, NULL, "-n", "3", crun_probe_path(), "raise", "11", "1");
    EXPECT_STATUS(&p, 128 + 11);
    ck_assert_ptr_nonnull(strstr(p.ebuf, "rank 1 failed first: was killed by signal 11 (SIGSEGV)"));
    ck_assert_ptr_nonnull(strstr(p.ebuf, "cohortrun: | about to raise 11"));
    ck_assert_int_eq(crun_count(p.ebuf, "failed first"), 1);
    crun_free(&p);
}
END_TEST

/* Reads DIR/pids-<r> for n ranks: worker pid, grandchild pid. */
static void read_pids(const char *dir, int n, pid_t *pids)
{
    for (int r = 0; r < n; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/pids-%d", dir, r);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f != NULL, "no pid file for rank %d", r);
        int a, b;
        ck_assert_int_eq(fscanf(f, "%d %d", &a, &b), 2);
        fclose(f);
        pids[2 * r] = a;
        pids[2 * r + 1] = b;
    }
}

START_TEST(stubborn_workers_get_sigkill_after_grace)
{
    char dir[256];
    crun_tmpdir(dir, sizeof dir);
    const char *env[] = {"PROBE_STUBBORN=1", NULL};
    crun_proc p;
    RUN(&p, env, "-n", "3", "--grace-ms", "400", crun_probe_path(), "pids", dir);
    ck_assert(crun_wait_text(&p, "ready", 3, 0, DEADLINE));
    pid_t pids[6];
    read_pids(dir, 3, pids);
    double t0 = crun_now_ms();
    kill(pids[0], SIGKILL);
    EXPECT_STATUS(&p, 128 + SIGKILL);
    double took = p.t_end - t0;
    ck_assert_double_ge(took, 400);
    ck_assert_double_lt(took, 5000);
    ck_assert_ptr_nonnull(strstr(p.ebuf, "stopped 2 other worker(s) on this node with SIGTERM, "
                                         "2 of them needed SIGKILL after 400 ms"));
    for (int i = 0; i < 6; i++)
        ck_assert(crun_pid_gone(pids[i], 5000));
    crun_free(&p);
    crun_rmtree(dir);
}
END_TEST

static void check_forward(int sig, const char *want_line)
{
    crun_proc p;
    RUN(&p, NULL, "-n", "3", crun_probe_path(), "trap");
    ck_assert(crun_wait_text(&p, "ready", 3, 0, DEADLINE));
    kill(p.pid, sig);
    EXPECT_STATUS(&p, 128 + sig);
    ck_assert_int_eq(crun_count(p.obuf, want_line), 3);
    ck_assert_int_eq(crun_count(p.ebuf, "failed first"), 0);
    crun_free(&p);
}

START_TEST(sigint_and_sigterm_reach_every_worker)
{
    check_forward(SIGINT, "got signal 2\n");
    check_forward(SIGTERM, "got signal 15\n");
    check_forward(SIGHUP, "got signal 1\n");
}
END_TEST

START_TEST(interrupt_escalates_after_grace_or_second_signal)
{
    crun_proc p;
    /* Grace period: SIGKILL after 300 ms. */
    RUN(&p, NULL, "-n", "2", "--grace-ms", "300", crun_probe_path(), "stubborn");
    ck_assert(crun_wait_text(&p, "ready", 2, 0, DEADLINE));
    double t0 = crun_now_ms();
    kill(p.pid, SIGTERM);
    EXPECT_STATUS(&p, 128 + SIGTERM);
    ck_assert_double_ge(p.t_end - t0, 300);
    ck_assert_double_lt(p.t_end - t0, 5000);
    crun_free(&p);

    /* Second Ctrl-C: no waiting for a long grace period. */
    RUN(&p, NULL, "-n", "2", "--grace-ms", "600000", crun_probe_path(), "stubborn");
    ck_assert(crun_wait_text(&p, "ready", 2, 0, DEADLINE));
    kill(p.pid, SIGINT);
    ck_assert(crun_wait_text(&p, "got SIGINT", 1, 1, DEADLINE));
    t0 = crun_now_ms();
    kill(p.pid, SIGINT);
    EXPECT_STATUS(&p, 128 + SIGINT);
    ck_assert_double_lt(p.t_end - t0, 5000);
    ck_assert_ptr_nonnull(strstr(p.ebuf, "second SIGINT"));
    crun_free(&p);
}
END_TEST

/* kill -9 of the launcher: every worker and every worker's child is gone
 * within a bound (PDEATHSIG for the workers, the guard for their children). */
START_TEST(kill9_of_launcher_leaves_no_orphan)
{
    char dir[256];
    crun_tmpdir(dir, sizeof dir);
    crun_proc p;
    RUN(&p, NULL, "-n", "3", crun_probe_path(), "pids", dir);
    ck_assert(crun_wait_text(&p, "ready", 3, 0, DEADLINE));
    pid_t pids[6];
    read_pids(dir, 3, pids);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(kill(pids[i], 0), 0);
    kill(p.pid, SIGKILL);
    crun_finish(&p, DEADLINE);
    ck_assert_int_eq(p.status, 128 + SIGKILL);
    for (int i = 0; i < 6; i++)
        ck_assert_msg(crun_pid_gone(pids[i], 5000), "%s pid %d survived kill -9 of cohortrun",
                      i % 2 ? "grandchild" : "worker", (int)pids[i]);
    crun_free(&p);
    crun_rmtree(dir);
}
END_TEST

/* After a normal failure, nothing a worker started survives either. */
START_TEST(failure_teardown_kills_worker_children)
{
    char dir[256];
    crun_tmpdir(dir, sizeof dir);
    crun_proc p;
    RUN(&p, NULL, "-n", "2", "--grace-ms", "200", crun_probe_path(), "pids", dir);
    ck_assert(crun_wait_text(&p, "ready", 2, 0, DEADLINE));
    pid_t pids[4];
    read_pids(dir, 2, pids);
    kill(pids[0], SIGKILL); /* rank 0 dies; its grandchild must not stay */
    EXPECT_STATUS(&p, 128 + SIGKILL);
    ck_assert_ptr_nonnull(strstr(p.ebuf, "rank 0 failed first: was killed by signal 9 (SIGKILL)"));
    for (int i = 0; i < 4; i++)
        ck_assert_msg(crun_pid_gone(pids[i], 5000), "pid %d survived the teardown", (int)pids[i]);
    crun_free(&p);
    crun_rmtree(dir);
}
END_TEST

START_TEST(restarts_new_generation_until_success)
{
    crun_proc p;
    RUN(&p, NULL, "-n", "3", "--max-restarts", "2", crun_probe_path(), "flaky", "1", "2");
    EXPECT_STATUS(&p, 0);
    /* Ranks of a failing generation may be stopped before they print; the
     * failing rank always prints, and the last generation completes. */
    ck_assert_ptr_nonnull(strstr(p.obuf, "[1] generation 1 restart 0\n"));
    ck_assert_ptr_nonnull(strstr(p.obuf, "[1] generation 2 restart 1\n"));
    ck_assert_int_eq(crun_count(p.obuf, "generation 3 restart 2\n"), 3);
    ck_assert_int_eq(crun_count(p.ebuf, "failed first"), 2);
    ck_assert_ptr_nonnull(strstr(p.ebuf, "restart 1 of 2, generation 2"));
    ck_assert_ptr_nonnull(strstr(p.ebuf, "restart 2 of 2, generation 3"));
    crun_free(&p);
}
END_TEST

/* A program whose rank 0 binds MASTER_PORT itself (torch.distributed's
 * env:// and TCPStore(is_master=rank == 0) do): the port is free, in every
 * generation, and a restarted generation gets a port of its own. Before,
 * MASTER_PORT was the launcher's store ("address already in use"). */
START_TEST(rank0_binds_master_port_in_every_generation)
{
    crun_proc p;
    RUN(&p, NULL, "-n", "3", "--max-restarts", "1", crun_probe_path(), "master", "2");
    EXPECT_STATUS(&p, 0);
    ck_assert_int_eq(crun_count(p.obuf, "master ok gen 2 port"), 3);
    const char *g1 = strstr(p.obuf, "master ok gen 1 port "), *g2 = strstr(p.obuf, "master ok gen 2 port ");
    ck_assert_ptr_nonnull(g1);
    ck_assert_ptr_nonnull(g2);
    ck_assert_int_ne(atoi(g1 + strlen("master ok gen 1 port ")), atoi(g2 + strlen("master ok gen 2 port ")));
    crun_free(&p);
    /* --master-port names it, in every generation. */
    RUN(&p, NULL, "-n", "2", "--master-port", "29517", "--max-restarts", "1", crun_probe_path(),
        "master", "1");
    EXPECT_STATUS(&p, 0);
    ck_assert_int_eq(crun_count(p.obuf, "master ok gen 2 port 29517\n"), 2);
    crun_free(&p);
}
END_TEST

/* A launcher started with SIGINT, SIGTERM, SIGHUP and SIGQUIT ignored (a
 * shell's background job, nohup, some CI runners) starts its workers with
 * them at their defaults. Before, the workers inherited SIG_IGN: the
 * launcher's SIGINT to stop them did nothing, and Python ranks never saw
 * KeyboardInterrupt (test_group.py's SIGINT tests hung to COHORT_TIMEOUT). */
START_TEST(workers_start_with_default_signal_dispositions)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "trap '' INT TERM HUP QUIT PIPE; exec '%s' -n 2 '%s' sigs",
             crun_launcher_path(), crun_probe_path());
    char *argv[] = {(char *)"/bin/sh", (char *)"-c", cmd, NULL};
    crun_proc p;
    crun_start(&p, argv, NULL);
    EXPECT_STATUS(&p, 0);
    ck_assert_int_eq(crun_count(p.obuf, "ignored:.\n"), 2);
    crun_free(&p);
}
END_TEST

START_TEST(restarts_exhausted_returns_failure)
{
    crun_proc p;
    RUN(&p, NULL, "-n", "2", "--max-restarts", "1", crun_probe_path(), "flaky", "0", "5");
    EXPECT_STATUS(&p, 9);
    ck_assert_int_eq(crun_count(p.obuf, "generation 3"), 0);
    ck_assert_ptr_nonnull(strstr(p.obuf, "[0] generation 2 restart 1\n"));
    ck_assert_ptr_nonnull(strstr(p.ebuf, "no restart left (--max-restarts 1); exiting with code 9"));
    ck_assert_ptr_nonnull(strstr(p.ebuf, "cohortrun: | flaky failure in generation 2"));
    crun_free(&p);
}
END_TEST

START_TEST(program_not_found_or_not_executable)
{
    crun_proc p;
    RUN(&p, NULL, "-n", "2", "no-such-program-xyz");
    EXPECT_STATUS(&p, 127);
    ck_assert_ptr_nonnull(strstr(p.ebuf, "command not found"));
    crun_free(&p);

    RUN(&p, NULL, "-n", "2", "./no/such/path");
    EXPECT_STATUS(&p, 127);
    ck_assert_ptr_nonnull(strstr(p.ebuf, "No such file or directory"));
    crun_free(&p);

    char dir[256], path[512];
    crun_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/not-exec", dir);
    FILE *f = fopen(path, "w");
    fputs("#!/bin/sh\nexit 0\n", f);
    fclose(f);
    chmod(path, 0644);
    RUN(&p, NULL, "-n", "2", "--max-restarts", "3", path);
    EXPECT_STATUS(&p, 126);
    ck_assert_ptr_nonnull(strstr(p.ebuf, "Permission denied"));
    ck_assert_int_eq(crun_count(p.ebuf, "cannot execute"), 1);
    crun_free(&p);
    crun_rmtree(dir);
}
END_TEST

START_TEST(usage_errors_exit_2)
{
    static const char *cases[][6] = {
        {"-n", "2", NULL},
        {"-n", "0", "true", NULL},
        {"-n", "x", "true", NULL},
        {"--nnodes", "2", "--node-rank", "2", "true", NULL},
        {"--nnodes", "2", "true", NULL},
        {"--nnodes", "2", "--master", "127.0.0.1:0", "true", NULL},
        {"--master", "nocolon", "true", NULL},
        {"--bogus", "true", NULL},
    };
    static const char *why[] = {
        "no program given", "not an integer", "not an integer", "not below --nnodes",
        "needs --master", "port 0 is only allowed", "not HOST:PORT", "unknown option",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[8] = {crun_launcher_path()};
        for (int k = 0; cases[i][k]; k++)
            argv[k + 1] = (char *)cases[i][k];
        crun_proc p;
        crun_start(&p, argv, NULL);
        EXPECT_STATUS(&p, 2);
        ck_assert_msg(strstr(p.ebuf, why[i]) != NULL, "case %zu: '%s' not in: %s", i, why[i],
                      p.ebuf);
        crun_free(&p);
    }
    /* A multi-node job without a token is refused before anything starts. */
    const char *env[] = {"COHORT_TOKEN=", NULL};
    crun_proc p;
    RUN(&p, env, "--nnodes", "2", "--master", "127.0.0.1:1", "--job-id", "j", "true");
    EXPECT_STATUS(&p, 2);
    ck_assert_ptr_nonnull(strstr(p.ebuf, "needs its token"));
    crun_free(&p);
}
END_TEST

/* What torchrun and mpirun users type: -np, underscore and dash spellings,
 * --opt=value, --standalone, --master-addr/--master-port, --rdzv-endpoint,
 * a .py program run by python3; typos get "did you mean". */
START_TEST(torchrun_and_mpirun_spellings)
{
    static const char *const show = "echo RANK=$RANK WORLD_SIZE=$WORLD_SIZE MASTER_ADDR=$MASTER_ADDR"
                                    " MASTER_PORT=$MASTER_PORT GROUP_RANK=$GROUP_RANK";
    struct {
        const char *args[8];
        int world;
        const char *port; /* expected MASTER_PORT, NULL: any */
    } ok[] = {
        {{"-np", "2"}, 2, NULL},
        {{"-np3"}, 3, NULL},
        {{"--nproc_per_node", "2"}, 2, NULL},
        {{"--nproc_per_node=2", "--standalone"}, 2, NULL},
        {{"--nproc-per-node=2", "--nnodes=1:1", "--node_rank=0", "--max_restarts=0"}, 2, NULL},
        {{"-n", "1", "--master_addr", "127.0.0.1", "--master_port", "0"}, 1, NULL},
        {{"-n", "1", "--master-addr=127.0.0.1"}, 1, "29500"},
        {{"-n", "1", "--rdzv-backend", "c10d", "--rdzv_endpoint", "127.0.0.1"}, 1, "29400"},
        {{"-n", "1", "--rdzv_backend=static", "--rdzv-endpoint=127.0.0.1:0", "--rdzv_id=tj"}, 1,
         NULL},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char *argv[16] = {crun_launcher_path()};
        int k = 1;
        for (int j = 0; ok[i].args[j]; j++)
            argv[k++] = (char *)ok[i].args[j];
        argv[k++] = (char *)"/bin/sh";
        argv[k++] = (char *)"-c";
        argv[k++] = (char *)show;
        crun_proc p;
        crun_start(&p, argv, NULL);
        EXPECT_STATUS(&p, 0);
        for (int r = 0; r < ok[i].world; r++) {
            char line[1024], v[64];
            ck_assert_msg(rank_line(p.obuf, r, line, sizeof line), "case %zu: no rank %d", i, r);
            field(line, "RANK", v, sizeof v);
            ck_assert_int_eq(atoi(v), r);
            field(line, "WORLD_SIZE", v, sizeof v);
            ck_assert_int_eq(atoi(v), ok[i].world);
            field(line, "MASTER_ADDR", v, sizeof v);
            ck_assert_str_eq(v, "127.0.0.1");
            field(line, "MASTER_PORT", v, sizeof v);
            if (ok[i].port)
                ck_assert_str_eq(v, ok[i].port);
            else
                ck_assert_int_gt(atoi(v), 0);
        }
        ck_assert_int_eq(rank_line(p.obuf, ok[i].world, (char[8]){0}, 8), 0);
        crun_free(&p);
    }

    /* A Python script runs under python3, as with torchrun. */
    char dir[256], py[300];
    crun_tmpdir(dir, sizeof dir);
    snprintf(py, sizeof py, "%s/t.py", dir);
    FILE *f = fopen(py, "w");
    ck_assert_ptr_nonnull(f);
    fputs("import os\nprint('py rank', os.environ['RANK'])\n", f);
    fclose(f);
    crun_proc p;
    RUN(&p, NULL, "--nproc_per_node", "2", py);
    EXPECT_STATUS(&p, 0);
    ck_assert_ptr_nonnull(strstr(p.obuf, "[0] py rank 0"));
    ck_assert_ptr_nonnull(strstr(p.obuf, "[1] py rank 1"));
    crun_free(&p);
    /* --no-python runs it as it is: not executable -> 126. */
    RUN(&p, NULL, "--no_python", "-n", "1", py);
    EXPECT_STATUS(&p, 126);
    crun_free(&p);
    crun_rmtree(dir);

    /* Refusals name the option and the nearest real one. */
    static const char *bad[][5] = {
        {"--nproc-per-nodes", "2", "true"},
        {"--master-adress", "h", "true"},
        {"--max_restrats", "1", "true"},
        {"--nnodes", "1:4", "true"},
        {"--rdzv-backend", "etcd", "true"},
        {"--standalone", "--master", "127.0.0.1:1", "true"},
        {"--rdzv_conf", "timeout=5", "true"},
        {"-np", NULL},
    };
    static const char *why[] = {
        "unknown option '--nproc-per-nodes' (did you mean '--nproc-per-node'?)",
        "unknown option '--master-adress' (did you mean '--master-addr'?)",
        "(did you mean '--max_restarts'?)",
        "elastic node counts",
        "--store etcd://",
        "give the master once",
        "torchrun option cohortrun has no equivalent",
        "'-np' needs a value",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[8] = {crun_launcher_path()};
        for (int k = 0; bad[i][k]; k++)
            argv[k + 1] = (char *)bad[i][k];
        crun_start(&p, argv, NULL);
        EXPECT_STATUS(&p, 2);
        ck_assert_msg(strstr(p.ebuf, why[i]) != NULL, "case %zu: '%s' not in: %s", i, why[i],
                      p.ebuf);
        crun_free(&p);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("launcher");
    TCase *t = tcase_create("single_node");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, env_is_set_for_every_worker);
    tcase_add_test(t, trivial_job_exits_promptly);
    tcase_add_test(t, token_file_is_used_and_never_printed);
    tcase_add_test(t, output_prefixed_whole_lines_streams_apart);
    tcase_add_test(t, log_dir_one_file_per_rank_and_stream);
    tcase_add_test(t, log_dir_unusable_is_a_launcher_error);
    tcase_add_test(t, failure_exit_code_one_summary_with_stderr_tail);
    tcase_add_test(t, worker_signal_gives_128_plus_signal);
    tcase_add_test(t, stubborn_workers_get_sigkill_after_grace);
    tcase_add_test(t, sigint_and_sigterm_reach_every_worker);
    tcase_add_test(t, interrupt_escalates_after_grace_or_second_signal);
    tcase_add_test(t, kill9_of_launcher_leaves_no_orphan);
    tcase_add_test(t, failure_teardown_kills_worker_children);
    tcase_add_test(t, restarts_new_generation_until_success);
    tcase_add_test(t, rank0_binds_master_port_in_every_generation);
    tcase_add_test(t, workers_start_with_default_signal_dispositions);
    tcase_add_test(t, restarts_exhausted_returns_failure);
    tcase_add_test(t, program_not_found_or_not_executable);
    tcase_add_test(t, usage_errors_exit_2);
    tcase_add_test(t, torchrun_and_mpirun_spellings);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
