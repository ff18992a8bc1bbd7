/* test_launch_env.c - what srun, mpirun and a lone start imply for init
 * (src/group/launch_env.c, src/util/hostlist.c):
 *
 * - Slurm host lists expand as `scontrol show hostnames` does; malformed
 *   ones are refused with a reason;
 * - a program started alone runs as a world of one (real init, collectives,
 *   finalize), also from a Slurm batch script (which is not an srun step);
 * - MASTER_ADDR/MASTER_PORT come from the job: loopback when every rank is
 *   on this node, the step's first host otherwise, a port from the job id;
 * - without COHORT_TOKEN, ranks of an srun step share a fresh token through a
 *   0600 file in COHORT_TOKEN_DIR (real forked ranks, real init), the file is
 *   gone after init, and unsafe directories, planted files and a missing
 *   writer are refused within bounded time. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "group/group_internal.h"
#include "support/support.h"
#include "util/hostlist.h"

/* ---- host lists ---- */

static int collect(const char *h, void *arg)
{
    char *out = arg;
    strcat(out, h);
    strcat(out, " ");
    return 0;
}

START_TEST(hostlist_expands_like_scontrol)
{
    static const char *const cases[][2] = {
        {"node[01-03,7],gpu5", "node01 node02 node03 node7 gpu5 "},
        {"n[9-11]", "n9 n10 n11 "},
        {"h[001-003]", "h001 h002 h003 "},
        {"a[1-2]b[08-09]", "a1b08 a1b09 a2b08 a2b09 "},
        {"rack[1-2]-n[1]", "rack1-n1 rack2-n1 "},
        {"single", "single "},
        {"x[5],y,z[0-1]", "x5 y z0 z1 "},
        {"c[098-101]", "c098 c099 c100 c101 "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[512] = "", err[160];
        long n = coh_hostlist_expand(cases[i][0], collect, out, err, sizeof err);
        ck_assert_msg(n > 0, "%s: %s", cases[i][0], err);
        ck_assert_msg(!strcmp(out, cases[i][1]), "%s -> '%s', want '%s'", cases[i][0], out,
                      cases[i][1]);
    }
    char first[64], err[160];
    ck_assert_int_eq(coh_hostlist_first("gpu[12-40],cpu1", first, sizeof first, err, sizeof err),
                     0);
    ck_assert_str_eq(first, "gpu12");
    /* counting without a callback, and stopping early */
    ck_assert_int_eq(coh_hostlist_expand("n[1-1000],m[1-24]", NULL, NULL, err, sizeof err), 1024);
}
END_TEST

START_TEST(hostlist_refuses_malformed)
{
    static const char *const bad[][2] = {
        {"n[1-", "unclosed"},         {"n[]", "empty '[]'"},       {"n[3-1]", "reversed"},
        {"n[a]", "expected a number"}, {"a,,b", "empty item"},     {"a,", "trailing ','"},
        {"n[1]]", "unexpected ']'"},  {"a b", "white space"},      {"n[[1]]", "nested"},
        {"n[1,]", "trailing ','"},    {"n[1-x]", "after '-'"},     {"", "empty host list"},
        {"n[0-99999999]", "too large"}, {"n[1;2]", "unexpected character"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[160] = "";
        long n = coh_hostlist_expand(bad[i][0], NULL, NULL, err, sizeof err);
        ck_assert_msg(n == -1 && strstr(err, bad[i][1]), "'%s': n=%ld err='%s' (want '%s')",
                      bad[i][0], n, err, bad[i][1]);
    }
    /* a host name past 255 bytes */
    char longname[400];
    memset(longname, 'a', 300);
    longname[300] = 0;
    char err[160];
    ck_assert_int_eq(coh_hostlist_expand(longname, NULL, NULL, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "longer than 255"));
}
END_TEST

/* ---- a lone start ---- */

START_TEST(lone_program_is_world_of_one)
{
    cht_clear_launch_env();
    coh_settings s;
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    ck_assert_int_eq(s.singleton, 1);
    ck_assert_int_eq(s.rank, 0);
    ck_assert_int_eq(s.size, 1);
    ck_assert_int_eq(s.host_store, 1);
    ck_assert_int_eq(strlen(s.token), 64);
    /* The real thing: init, collectives, finalize. */
    cohort_group *g = NULL;
    ck_assert_msg(cohort_init(&g) == COHORT_OK, "%s", cohort_last_error(NULL));
    ck_assert_int_eq(cohort_rank(g), 0);
    ck_assert_int_eq(cohort_size(g), 1);
    float x[4] = {1, 2, 3, 4}, y[4];
    ck_assert_int_eq(cohort_all_reduce(g, x, y, 4, COHORT_FLOAT32, COHORT_SUM), COHORT_OK);
    ck_assert(y[3] == 4);
    ck_assert_int_eq(cohort_barrier(g), COHORT_OK);
    ck_assert_int_eq(cohort_finalize(g), COHORT_OK);
    /* Half a launch is still an error that names what is missing. */
    setenv("WORLD_SIZE", "4", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_ERR_INVALID);
    ck_assert_msg(strstr(cohort_last_error(NULL), "RANK is not set"), "%s",
                  cohort_last_error(NULL));
}
END_TEST

/* A Slurm batch script has SLURM_PROCID/SLURM_NTASKS of the allocation but
 * is one process: not task 0 of 4 waiting for three others. */
START_TEST(batch_script_is_not_a_step)
{
    cht_clear_launch_env();
    setenv("SLURM_JOB_ID", "812", 1);
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_JOB_NODELIST", "node[1-2]", 1);
    coh_settings s;
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    ck_assert_int_eq(s.size, 1);
    ck_assert_int_eq(s.singleton, 1);
    /* the batch step's reserved id is not a step either */
    setenv("SLURM_STEP_ID", "4294967294", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    ck_assert_int_eq(s.size, 1);
    /* inside srun it is task 0 of 4 */
    setenv("SLURM_STEP_ID", "0", 1);
    setenv("COHORT_TOKEN", "t", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    ck_assert_int_eq(s.size, 4);
}
END_TEST

/* ---- MASTER_ADDR / MASTER_PORT from the job ---- */

START_TEST(master_from_the_job)
{
    coh_settings s;
    cht_clear_launch_env();
    setenv("SLURM_JOB_ID", "77", 1);
    setenv("SLURM_STEP_ID", "2", 1);
    setenv("SLURM_PROCID", "1", 1);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_STEP_NUM_NODES", "2", 1);
    setenv("SLURM_JOB_NODELIST", "gpu[1-9]", 1);
    setenv("SLURM_STEP_NODELIST", "gpu[07-08]", 1);
    setenv("COHORT_TOKEN", "t", 1);
    ck_assert_msg(coh_settings_resolve(NULL, &s) == COHORT_OK, "%s", cohort_last_error(NULL));
    int port = 20000 + (77 + 7919 * 2) % 12000;
    char want[64];
    snprintf(want, sizeof want, "gpu07:%d", port);
    ck_assert_str_eq(s.store_addr, want);
    ck_assert_int_eq(s.host_store, 0);
    /* one node: loopback, whatever the node is called */
    setenv("SLURM_STEP_NUM_NODES", "1", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    ck_assert_str_eq(s.store_addr, want);
    /* rank 0 not on the first node (another distribution): rank 0 says so */
    setenv("SLURM_STEP_NUM_NODES", "2", 1);
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURMD_NODENAME", "gpu08", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_ERR_INVALID);
    ck_assert_msg(strstr(cohort_last_error(NULL), "rank 0 runs on gpu08, not on gpu07"), "%s",
                  cohort_last_error(NULL));
    setenv("SLURMD_NODENAME", "gpu07", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    ck_assert_int_eq(s.host_store, 1);
    unsetenv("SLURMD_NODENAME");
    setenv("SLURM_PROCID", "1", 1);
    setenv("SLURM_STEP_NUM_NODES", "1", 1);
    /* MASTER_ADDR given wins */
    setenv("MASTER_ADDR", "head", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    ck_assert_int_eq(strncmp(s.store_addr, "head:", 5), 0);
    unsetenv("MASTER_ADDR");
    /* a malformed node list is named */
    setenv("SLURM_STEP_NUM_NODES", "2", 1);
    setenv("SLURM_STEP_NODELIST", "gpu[07-", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_ERR_INVALID);
    ck_assert_msg(strstr(cohort_last_error(NULL), "SLURM_STEP_NODELIST='gpu[07-'"), "%s",
                  cohort_last_error(NULL));

    /* Open MPI, every rank on this node: loopback, port from its job id. */
    cht_clear_launch_env();
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    setenv("OMPI_MCA_ess_base_jobid", "1660747777", 1);
    setenv("COHORT_TOKEN", "t", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    snprintf(want, sizeof want, "127.0.0.1:%d", 20000 + 1660747777 % 12000);
    ck_assert_str_eq(s.store_addr, want);
    /* ... on several nodes it cannot know rank 0's host: says what to set */
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_ERR_INVALID);
    ck_assert_msg(strstr(cohort_last_error(NULL), "set MASTER_ADDR"), "%s",
                  cohort_last_error(NULL));
}
END_TEST

/* ---- the token through a shared 0600 file ---- */

static char tokdir[256];

static void slurm_rank_env(int rank, int n, const char *job)
{
    cht_clear_launch_env();
    char b[32];
    setenv("SLURM_JOB_ID", job, 1);
    setenv("SLURM_STEP_ID", "0", 1);
    snprintf(b, sizeof b, "%d", rank);
    setenv("SLURM_PROCID", b, 1);
    setenv("SLURM_LOCALID", b, 1);
    snprintf(b, sizeof b, "%d", n);
    setenv("SLURM_NTASKS", b, 1);
    setenv("SLURM_STEP_NUM_NODES", "1", 1);
    setenv("SLURM_STEP_NODELIST", "localhost", 1);
    setenv("COHORT_TOKEN_DIR", tokdir, 1);
    setenv("COHORT_TIMEOUT", "20", 1);
}

typedef struct step {
    int n;
    const char *job;
} step;

/* One rank of an "srun step": a real init + all_reduce + finalize. */
static int step_rank(int r, void *arg)
{
    const step *sp = arg;
    slurm_rank_env(r, sp->n, sp->job);
    cohort_group *g;
    if (cohort_init(&g) != COHORT_OK) {
        fprintf(stderr, "rank %d: %s\n", r, cohort_last_error(NULL));
        return 2;
    }
    int v = r + 1, sum = 0;
    if (cohort_all_reduce(g, &v, &sum, 1, COHORT_INT32, COHORT_SUM) != COHORT_OK ||
        sum != sp->n * (sp->n + 1) / 2)
        return 3;
    return cohort_finalize(g) == COHORT_OK ? 0 : 4;
}

/* Forks n ranks of the step (killed after 30 s); returns the number of
 * ranks that exited 0. */
static int run_step(int n, const char *job)
{
    step sp = {n, job};
    cht_result res;
    ck_assert_int_ge(cht_spawn(n, 30000, 0, step_rank, NULL, &sp, &res), 0);
    int ok = 0;
    for (int r = 0; r < n; r++)
        ok += res.status[r] == 0 && !res.hung[r];
    return ok;
}

static int dir_entries(const char *d)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", d);
    return system(cmd) != 0;
}

START_TEST(token_shared_through_private_file)
{
    snprintf(tokdir, sizeof tokdir, "/tmp/cohort-tok-%d", (int)getpid());
    mkdir(tokdir, 0700);
    char job[32];
    /* a job id of our own: the port derived from it is ours too */
    snprintf(job, sizeof job, "%d", 100000 + (int)(getpid() % 100000));
    ck_assert_int_eq(run_step(3, job), 3);
    /* rank 0 removed the secret once every rank had joined */
    ck_assert_msg(!dir_entries(tokdir), "token file left in %s", tokdir);

    /* The file rank 0 writes: mode 0600, one line, 64 hex digits; the
     * others read exactly it (resolve only, no init). */
    slurm_rank_env(0, 2, "555");
    coh_settings s0, s1;
    ck_assert_msg(coh_settings_resolve(NULL, &s0) == COHORT_OK, "%s", cohort_last_error(NULL));
    struct stat st;
    ck_assert_int_eq(stat(s0.token_file, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(strlen(s0.token), 64);
    slurm_rank_env(1, 2, "555");
    ck_assert_int_eq(coh_settings_resolve(NULL, &s1), COHORT_OK);
    ck_assert_str_eq(s0.token, s1.token);
    ck_assert_str_eq(s0.token_file, s1.token_file);
    /* a file others may read is refused, never used */
    chmod(s0.token_file, 0644);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s1), COHORT_ERR_INVALID);
    ck_assert_msg(strstr(cohort_last_error(NULL), "mode 0600: refused"), "%s",
                  cohort_last_error(NULL));
    unlink(s0.token_file);

    /* rank 0 whose init fails after writing the token (its store port is
     * taken) removes the file too: no secret left behind on a failure */
    int busy = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    ck_assert(busy >= 0 && bind(busy, (struct sockaddr *)&sa, sizeof sa) == 0 &&
              listen(busy, 1) == 0 && getsockname(busy, (struct sockaddr *)&sa, &sl) == 0);
    char port[16];
    snprintf(port, sizeof port, "%d", ntohs(sa.sin_port));
    slurm_rank_env(0, 2, "556");
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", port, 1);
    cohort_group *g = NULL;
    ck_assert_int_ne(cohort_init(&g), COHORT_OK);
    ck_assert_msg(strstr(cohort_last_error(NULL), "could not host the store"), "%s",
                  cohort_last_error(NULL));
    close(busy);
    ck_assert_msg(!dir_entries(tokdir), "token file left in %s after a failed init", tokdir);
    slurm_rank_env(1, 2, "555");

    /* no writer: a bounded wait that names the file and the remedy */
    setenv("COHORT_TIMEOUT", "0.3", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s1), COHORT_ERR_TIMEOUT);
    ck_assert_msg(strstr(cohort_last_error(NULL), "slurm-555.0.0.token") &&
                      strstr(cohort_last_error(NULL), "every node"),
                  "%s", cohort_last_error(NULL));

    /* a directory others can enter is refused */
    chmod(tokdir, 0755);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s1), COHORT_ERR_INVALID);
    ck_assert_msg(strstr(cohort_last_error(NULL), "chmod 700"), "%s", cohort_last_error(NULL));
    rmdir(tokdir);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("launch_env");
    TCase *tc = tcase_create("launch_env");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, hostlist_expands_like_scontrol);
    tcase_add_test(tc, hostlist_refuses_malformed);
    tcase_add_test(tc, lone_program_is_world_of_one);
    tcase_add_test(tc, batch_script_is_not_a_step);
    tcase_add_test(tc, master_from_the_job);
    tcase_add_test(tc, token_shared_through_private_file);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
