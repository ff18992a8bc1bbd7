/* test_pmi.c - the launcher PMI client of src/group/pmi.c against a fake
 * MPICH launcher (a thread answering PMI-1 on a socketpair handed over as
 * PMI_FD, as Hydra's proxy does):
 *
 * - rank 0 runs init, get_my_kvsname, puts its host and a fresh 64-hex
 *   token, barrier, finalize; a whole cohort_init takes its token from there
 *   and the job id from the kvsname;
 * - rank 1 takes rank 0's host and token from get replies;
 * - malformed replies, a refusal (rc != 0), an over-long line, a closed
 *   connection, a launcher that never answers the barrier, a bad PMI_FD all
 *   fail with their own message, within COHORT_TIMEOUT;
 * - no PMI in a process with an MPI library loaded, nor where PMIx's
 *   variables have no server behind them (the fallback's error);
 * - a failed init (no master across nodes) leaves no token file behind. */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "group/group_internal.h"
#include "group/pmi.h"
#include "support/support.h"

/* ---- the fake launcher ---- */

enum fault { OK, GARBAGE, REFUSE_PUT, LONG_LINE, CLOSE_AT_BARRIER, SILENT_BARRIER, WRONG_CMD };

typedef struct fake {
    int fd;
    enum fault fault;
    char log[4096]; /* the requests seen, one per line */
    pthread_t th;
} fake;

static void reply(fake *f, const char *s) { ck_assert(write(f->fd, s, strlen(s)) == (ssize_t)strlen(s)); }

static void *serve(void *arg)
{
    fake *f = arg;
    char buf[4096];
    size_t have = 0;
    for (;;) {
        ssize_t n = read(f->fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        char *nl;
        while ((nl = memchr(buf, '\n', have))) {
            *nl = 0;
            size_t ll = strlen(f->log);
            snprintf(f->log + ll, sizeof f->log - ll, "%s\n", buf);
            const char *cmd = buf;
            if (!strncmp(cmd, "cmd=init ", 9)) {
                reply(f, f->fault == GARBAGE ? "cmd=response_to_init rc\n"
                                             : "cmd=response_to_init pmi_version=1 "
                                               "pmi_subversion=1 rc=0\n");
            } else if (!strcmp(cmd, "cmd=get_my_kvsname")) {
                reply(f, "cmd=my_kvsname kvsname=kvs_4242_0_123456_cn-a\n");
            } else if (!strncmp(cmd, "cmd=put ", 8)) {
                reply(f, f->fault == REFUSE_PUT ? "cmd=put_result rc=-1 msg=kvs_full\n"
                                                : "cmd=put_result rc=0 msg=success\n");
            } else if (!strcmp(cmd, "cmd=barrier_in")) {
                if (f->fault == CLOSE_AT_BARRIER) {
                    close(f->fd);
                    return NULL;
                }
                if (f->fault == SILENT_BARRIER)
                    continue;
                if (f->fault == LONG_LINE) {
                    char big[3000];
                    memset(big, 'x', sizeof big);
                    ck_assert(write(f->fd, big, sizeof big) == (ssize_t)sizeof big);
                    continue;
                }
                reply(f, f->fault == WRONG_CMD ? "cmd=barrier_in\n" : "cmd=barrier_out\n");
            } else if (!strncmp(cmd, "cmd=get ", 8)) {
                if (strstr(cmd, "key=cohort-master"))
                    reply(f, "cmd=get_result rc=0 msg=success value=cn-a\n");
                else if (strstr(cmd, "key=cohort-token"))
                    reply(f, "cmd=get_result rc=0 msg=success "
                             "value=00112233445566778899aabbccddeeff\n");
                else
                    reply(f, "cmd=get_result rc=-1 msg=key_not_found\n");
            } else if (!strcmp(cmd, "cmd=finalize")) {
                reply(f, "cmd=finalize_ack\n");
            } else {
                reply(f, "cmd=unknown rc=-1\n");
            }
            have -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, have);
        }
    }
    return NULL;
}

/* Starts the fake and sets PMI_FD/PMI_RANK/PMI_SIZE (as Hydra's proxy). */
static void fake_start(fake *f, enum fault fault, int rank, int size)
{
    memset(f, 0, sizeof *f);
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    f->fd = sv[0];
    f->fault = fault;
    char v[32];
    snprintf(v, sizeof v, "%d", sv[1]);
    setenv("PMI_FD", v, 1);
    snprintf(v, sizeof v, "%d", rank);
    setenv("PMI_RANK", v, 1);
    snprintf(v, sizeof v, "%d", size);
    setenv("PMI_SIZE", v, 1);
    ck_assert_int_eq(pthread_create(&f->th, NULL, serve, f), 0);
}

static void fake_stop(fake *f, int finalized)
{
    /* after a finalize the client closed its end (its number may be reused
     * by now) and the server sees EOF; else shut the client's end here */
    if (!finalized)
        shutdown(atoi(getenv("PMI_FD")), SHUT_RDWR);
    pthread_join(f->th, NULL);
    if (f->fault != CLOSE_AT_BARRIER)
        close(f->fd);
}

static int hex64(const char *t)
{
    if (strlen(t) != 64)
        return 0;
    for (int i = 0; i < 64; i++)
        if (!strchr("0123456789abcdef", t[i]))
            return 0;
    return 1;
}

START_TEST(rank0_publishes_host_and_token)
{
    cht_clear_launch_env();
    fake f;
    fake_start(&f, OK, 0, 2);
    setenv("MPIR_CVAR_CH3_INTERFACE_HOSTNAME", "cn-a", 1);
    const char *why;
    ck_assert_int_eq(coh_pmi_available(&why), 1);
    coh_pmi_result r;
    cohort_status st = coh_pmi_exchange(0, 2, 1, 5000, &r);
    ck_assert_msg(st == COHORT_OK, "%s", cohort_last_error(NULL));
    fake_stop(&f, 1);
    ck_assert_str_eq(r.via, "PMI-1");
    ck_assert_str_eq(r.master, "cn-a");
    ck_assert_str_eq(r.job, "kvs_4242_0_123456_cn-a");
    ck_assert_msg(hex64(r.token), "token '%s' is not 64 hex digits", r.token);
    char want[1024];
    snprintf(want, sizeof want,
             "cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_my_kvsname\n"
             "cmd=put kvsname=kvs_4242_0_123456_cn-a key=cohort-master value=cn-a\n"
             "cmd=put kvsname=kvs_4242_0_123456_cn-a key=cohort-token value=%s\n"
             "cmd=barrier_in\ncmd=finalize\n",
             r.token);
    ck_assert_str_eq(f.log, want);
    /* a second call in the process: the first result, no traffic */
    coh_pmi_result r2;
    ck_assert_int_eq(coh_pmi_exchange(0, 2, 1, 5000, &r2), COHORT_OK);
    ck_assert_str_eq(r2.token, r.token);
}
END_TEST

START_TEST(rank1_reads_rank0s)
{
    cht_clear_launch_env();
    fake f;
    fake_start(&f, OK, 1, 2);
    coh_pmi_result r;
    cohort_status st = coh_pmi_exchange(1, 2, 1, 5000, &r);
    ck_assert_msg(st == COHORT_OK, "%s", cohort_last_error(NULL));
    fake_stop(&f, 1);
    ck_assert_str_eq(r.master, "cn-a");
    ck_assert_str_eq(r.token, "00112233445566778899aabbccddeeff");
    ck_assert_ptr_null(strstr(f.log, "cmd=put"));
    ck_assert_ptr_nonnull(strstr(f.log, "cmd=barrier_in\ncmd=get kvsname=kvs_4242_0_123456_cn-a "
                                        "key=cohort-master\ncmd=get kvsname=kvs_4242_0_123456_"
                                        "cn-a key=cohort-token\ncmd=finalize\n"));
}
END_TEST

/* A whole cohort_init, a world of one on one node: the token from PMI (no
 * COHORT_TOKEN, an unusable COHORT_TOKEN_DIR), the job id from the kvsname. */
START_TEST(init_takes_token_and_job_from_pmi)
{
    cht_clear_launch_env();
    fake f;
    fake_start(&f, OK, 0, 1);
    setenv("MPI_LOCALNRANKS", "1", 1);
    setenv("COHORT_TOKEN_DIR", "/proc/no-such-dir", 1);
    setenv("COHORT_TIMEOUT", "10", 1);
    cohort_group *g = NULL;
    cohort_status st = cohort_init(&g);
    ck_assert_msg(st == COHORT_OK, "%s", cohort_last_error(NULL));
    fake_stop(&f, 1);
    ck_assert_ptr_nonnull(strstr(f.log, "key=cohort-token"));
    ck_assert_ptr_null(getenv("COHORT_TOKEN"));
    ck_assert_int_eq(cohort_barrier(g), COHORT_OK);
    ck_assert_int_eq(cohort_finalize(g), COHORT_OK);
}
END_TEST

/* Each bad launcher: status, a phrase of the message, bounded time. */
static void bad_launcher(enum fault fault, cohort_status want, const char *phrase)
{
    cht_clear_launch_env();
    fake f;
    fake_start(&f, fault, 0, 2);
    coh_pmi_result r;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    cohort_status st = coh_pmi_exchange(0, 2, 1, 1000, &r);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
    const char *msg = cohort_last_error(NULL);
    ck_assert_msg(st == want, "fault %d: status %d, want %d: %s", fault, st, want, msg);
    ck_assert_msg(strstr(msg, phrase), "fault %d: '%s' lacks '%s'", fault, msg, phrase);
    ck_assert_msg(s < 5, "fault %d took %.1f s", fault, s);
    fake_stop(&f, 0);
}

START_TEST(bad_launchers_fail_clearly)
{
    bad_launcher(GARBAGE, COHORT_ERR_PROTOCOL, "malformed PMI reply");
    bad_launcher(REFUSE_PUT, COHORT_ERR_INVALID, "refused (cmd=put_result rc=-1 msg=kvs_full)");
    bad_launcher(LONG_LINE, COHORT_ERR_PROTOCOL, "longer than 2048 bytes");
    bad_launcher(CLOSE_AT_BARRIER, COHORT_ERR_INVALID, "closed PMI_FD");
    bad_launcher(SILENT_BARRIER, COHORT_ERR_TIMEOUT, "waited COHORT_TIMEOUT");
    bad_launcher(WRONG_CMD, COHORT_ERR_PROTOCOL, "answered cmd=barrier_in where cmd=barrier_out");
}
END_TEST

START_TEST(bad_pmi_fd)
{
    cht_clear_launch_env();
    setenv("PMI_FD", "987", 1);
    setenv("PMI_RANK", "0", 1);
    coh_pmi_result r;
    ck_assert_int_eq(coh_pmi_exchange(0, 2, 1, 1000, &r), COHORT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(cohort_last_error(NULL), "PMI_FD='987' is not an open file"));
}
END_TEST

START_TEST(off_and_absent)
{
    cht_clear_launch_env();
    const char *why;
    ck_assert_int_eq(coh_pmi_available(&why), 0);
    ck_assert_ptr_nonnull(strstr(why, "neither PMIx"));
    setenv("PMI_FD", "3", 1);
    setenv("PMI_RANK", "0", 1);
    ck_assert_int_eq(coh_pmi_available(&why), 1);
    setenv("COHORT_PMI", "off", 1);
    ck_assert_int_eq(coh_pmi_available(&why), 0);
    ck_assert_str_eq(why, "COHORT_PMI=off");
}
END_TEST

/* An MPI library in the process owns the launcher's connection. */
START_TEST(not_with_mpi_loaded)
{
    cht_clear_launch_env();
    setenv("PMI_FD", "3", 1);
    setenv("PMI_RANK", "0", 1);
    void *h = dlopen("libmpi.so.40", RTLD_LAZY | RTLD_LOCAL);
    if (!h)
        h = dlopen("libmpi.so.12", RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "no libmpi to load: skipped\n");
        return;
    }
    const char *why;
    ck_assert_int_eq(coh_pmi_available(&why), 0);
    ck_assert_msg(strstr(why, "MPI library loaded (libmpi"), "%s", why);
}
END_TEST

/* Regression: across nodes with no PMI and no MASTER_ADDR, init failed
 * after rank 0 had written the token file, leaving it behind. */
START_TEST(failed_init_leaves_no_token_file)
{
    cht_clear_launch_env();
    char dir[128];
    snprintf(dir, sizeof dir, "/tmp/cohort-pmi-tok-%d", (int)getpid());
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    setenv("COHORT_TOKEN_DIR", dir, 1);
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1", 1);
    setenv("OMPI_MCA_ess_base_jobid", "777", 1);
    setenv("COHORT_PMI", "off", 1);
    cohort_group *g = NULL;
    ck_assert_int_eq(cohort_init(&g), COHORT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(cohort_last_error(NULL), "no launcher PMI: COHORT_PMI=off"));
    int left = rmdir(dir);
    if (left) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
    }
    ck_assert_msg(left == 0, "a token file was left in %s", dir);
}
END_TEST

/* Stale PMIx variables (no server behind them, as in a program started from
 * inside another job's rank): no PMI after all, the fallback's error. */
START_TEST(pmix_without_server_falls_back)
{
    cht_clear_launch_env();
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1", 1);
    setenv("OMPI_MCA_ess_base_jobid", "778", 1);
    setenv("PMIX_NAMESPACE", "778", 1);
    setenv("PMIX_RANK", "0", 1);
    setenv("PMIX_SERVER_URI41", "prterun-x-1@0.0;tcp4://127.0.0.1:1", 1);
    const char *why;
    if (!coh_pmi_available(&why)) {
        fprintf(stderr, "no libpmix (%s): skipped\n", why);
        return;
    }
    coh_pmi_result r;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    ck_assert_int_eq(coh_pmi_exchange(0, 2, 1, 5000, &r), COHORT_ERR_UNSUPPORTED);
    clock_gettime(CLOCK_MONOTONIC, &b);
    ck_assert_ptr_nonnull(strstr(cohort_last_error(NULL), "no PMIx server answered"));
    ck_assert(b.tv_sec - a.tv_sec < 5);
    cohort_group *g = NULL;
    ck_assert_int_eq(cohort_init(&g), COHORT_ERR_INVALID);
    const char *msg = cohort_last_error(NULL);
    ck_assert_msg(strstr(msg, "no launcher PMI: PMIx_Init failed") && strstr(msg, "set MASTER_ADDR"),
                  "%s", msg);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("pmi");
    TCase *tc = tcase_create("pmi");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, rank0_publishes_host_and_token);
    tcase_add_test(tc, rank1_reads_rank0s);
    tcase_add_test(tc, init_takes_token_and_job_from_pmi);
    tcase_add_test(tc, bad_launchers_fail_clearly);
    tcase_add_test(tc, bad_pmi_fd);
    tcase_add_test(tc, off_and_absent);
    tcase_add_test(tc, not_with_mpi_loaded);
    tcase_add_test(tc, failed_init_leaves_no_token_file);
    tcase_add_test(tc, pmix_without_server_falls_back);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
