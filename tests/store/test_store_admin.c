/*
 * test_store_admin.c - the store's administration API that the tools use
 * (cohort_store.h, since 0.3): token files, the server's counters, ping,
 * the torch listener's setup. Good files and a real server, then bad input:
 * NULL arguments, missing and garbage files, out-of-range ports.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_util.h"

static char path[128];

/* Writes len bytes of text into a fresh private file; returns its path. */
static const char *file_of(const char *text, size_t len)
{
    snprintf(path, sizeof path, "/tmp/cohort-admin-test-%d.tok", (int)getpid());
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    fclose(f);
    chmod(path, 0600);
    return path;
}
#define FILE_OF(s) file_of((s), sizeof(s) - 1)

static void teardown(void) { unlink(path); }

START_TEST(tokenfile_reads_jobs_and_bare_tokens)
{
    cohort_store_tokenfile *tf = NULL;
    ck_assert_int_eq(cohort_store_tokenfile_read(
                         FILE_OF("# jobs\n\n  jobA\ttok-a \njobB tok-b\r\n# end\n"), &tf),
                     COHORT_OK);
    ck_assert_int_eq(cohort_store_tokenfile_count(tf), 2);
    const char *const *j = cohort_store_tokenfile_jobs(tf);
    const char *const *t = cohort_store_tokenfile_tokens(tf);
    ck_assert_str_eq(j[0], "jobA");
    ck_assert_str_eq(t[0], "tok-a");
    ck_assert_str_eq(j[1], "jobB");
    ck_assert_str_eq(t[1], "tok-b");
    ck_assert_str_eq(cohort_store_tokenfile_find(tf, "jobB"), "tok-b");
    ck_assert_ptr_null(cohort_store_tokenfile_find(tf, "jobC"));
    ck_assert_ptr_null(cohort_store_tokenfile_find(tf, NULL));
    cohort_store_tokenfile_free(tf);

    /* A bare token serves any job (cohort-kv with --job). */
    ck_assert_int_eq(cohort_store_tokenfile_read(FILE_OF("just-a-token\n"), &tf), COHORT_OK);
    ck_assert_int_eq(cohort_store_tokenfile_count(tf), 1);
    ck_assert_ptr_null(cohort_store_tokenfile_jobs(tf)[0]);
    ck_assert_str_eq(cohort_store_tokenfile_find(tf, "anyjob"), "just-a-token");
    ck_assert_str_eq(cohort_store_tokenfile_find(tf, NULL), "just-a-token");
    cohort_store_tokenfile_free(tf);

    /* No trailing newline. */
    ck_assert_int_eq(cohort_store_tokenfile_read(FILE_OF("j t"), &tf), COHORT_OK);
    ck_assert_str_eq(cohort_store_tokenfile_find(tf, "j"), "t");
    cohort_store_tokenfile_free(tf);
}
END_TEST

static void refused(const char *p, cohort_status want, const char *msg_part)
{
    cohort_store_tokenfile *tf = (cohort_store_tokenfile *)&tf; /* must become NULL */
    ck_assert_int_eq(cohort_store_tokenfile_read(p, &tf), want);
    ck_assert_ptr_null(tf);
    ck_assert_msg(strstr(cohort_last_error(NULL), msg_part) != NULL, "'%s' lacks '%s'",
                  cohort_last_error(NULL), msg_part);
}

START_TEST(tokenfile_refuses_bad_input)
{
    refused(FILE_OF("jobA tok extra\n"), COHORT_ERR_INVALID, ":1: expected 'job_id token'");
    refused(FILE_OF("jobA tok\n\njobB tok b\n"), COHORT_ERR_INVALID, ":3:");
    refused(FILE_OF(""), COHORT_ERR_INVALID, "holds no token");
    refused(FILE_OF("# only a comment\n\n   \n"), COHORT_ERR_INVALID, "holds no token");
    refused("/nonexistent/cohort.tok", COHORT_ERR_SYSTEM, "/nonexistent/cohort.tok");
    refused("/", COHORT_ERR_SYSTEM, "Is a directory"); /* opens, but does not read */
    refused(NULL, COHORT_ERR_INVALID, "NULL");
    ck_assert_int_eq(cohort_store_tokenfile_read(FILE_OF("j t\n"), NULL), COHORT_ERR_INVALID);

    /* A line over 4 KiB. */
    static char big[6000];
    memset(big, 'x', sizeof big - 2);
    big[sizeof big - 2] = '\n';
    refused(file_of(big, sizeof big - 1), COHORT_ERR_INVALID, "line too long");

    /* Garbage bytes: NULs, control and high bytes split into words like
     * anything else; the read neither crashes nor runs past the data. */
    static const char junk[] = "\x01\x02\xff \x00\x7f\n\xfe\xfd\xfc\n";
    cohort_store_tokenfile *tf = NULL;
    cohort_status st = cohort_store_tokenfile_read(file_of(junk, sizeof junk - 1), &tf);
    ck_assert(st == COHORT_OK || st == COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_store_tokenfile_count(tf) > 0, st == COHORT_OK);
    cohort_store_tokenfile_free(tf);

    /* NULL handles. */
    ck_assert_int_eq(cohort_store_tokenfile_count(NULL), 0);
    ck_assert_ptr_null(cohort_store_tokenfile_jobs(NULL));
    ck_assert_ptr_null(cohort_store_tokenfile_tokens(NULL));
    ck_assert_ptr_null(cohort_store_tokenfile_find(NULL, "j"));
    cohort_store_tokenfile_free(NULL);
}
END_TEST

START_TEST(stats_ping_generation)
{
    char addr[64];
    cohort_store_server *srv = su_server(NULL, addr, sizeof addr);
    cohort_store *s = su_connect(addr, JOB_A, TOK_A);
    ST_OK(cohort_store_ping(s), s);
    ST_OK(cohort_store_sets(s, "k1", "v"), s);
    ST_OK(cohort_store_sets(s, "k2", "v"), s);
    cohort_store_stats x;
    memset(&x, 0xff, sizeof x);
    ST_OK(cohort_store_get_stats(s, &x), s);
    ck_assert_int_eq(x.keys, 2);
    ck_assert_int_ge(x.job_conns, 1);
    ck_assert_int_ge(x.conns, x.job_conns);
    ck_assert_int_gt(x.mem_used, 0);
    ck_assert_int_ge(x.max_memory, x.mem_used);
    /* An operator's handle (generation 0) moves the job's generation. */
    uint32_t prev = 99;
    ST_OK(cohort_store_set_generation(s, 4, &prev), s);
    ck_assert_uint_eq(prev, 0);
    ST_OK(cohort_store_set_generation(s, 5, NULL), s);
    ST_OK(cohort_store_get_stats(s, &x), s);
    ck_assert_uint_eq(x.generation, 5);

    /* Bad arguments. */
    ST_EXPECT(cohort_store_get_stats(s, NULL), COHORT_ERR_INVALID, NULL);
    ST_EXPECT(cohort_store_get_stats(NULL, &x), COHORT_ERR_INVALID, NULL);
    ST_EXPECT(cohort_store_ping(NULL), COHORT_ERR_INVALID, NULL);
    ST_EXPECT(cohort_store_set_generation(NULL, 1, &prev), COHORT_ERR_INVALID, NULL);
    /* A prefixed view is still a tcp handle. */
    cohort_store *v = NULL;
    ST_OK(cohort_store_prefixed(s, "p/", &v), s);
    ST_OK(cohort_store_ping(v), v);
    cohort_store_close(v);
    cohort_store_close(s);

    /* After the server is gone: an error, not a hang or a crash. */
    s = su_connect(addr, JOB_A, TOK_A);
    cohort_store_server_stop(srv);
    cohort_store_set_timeout(s, 2000);
    ck_assert_int_ne(cohort_store_ping(s), COHORT_OK);
    ck_assert_int_ne(cohort_store_get_stats(s, &x), COHORT_OK);
    cohort_store_close(s);
}
END_TEST

static cohort_store_server *created(int njobs)
{
    static const char *const jobs[] = {JOB_A, JOB_B}, *const toks[] = {TOK_A, TOK_B};
    cohort_store_server_opts o;
    memset(&o, 0, sizeof o);
    o.bind_addr = "127.0.0.1";
    o.job_ids = jobs;
    o.tokens = toks;
    o.n_jobs = njobs;
    cohort_store_server *s = NULL;
    ck_assert_int_eq(cohort_store_server_create(&s, &o), COHORT_OK);
    return s;
}

START_TEST(torch_listener_setup)
{
    ck_assert_int_eq(cohort_store_server_torch_port(NULL), 0);
    ck_assert_int_eq(cohort_store_server_torch_listen(NULL, "127.0.0.1", 0, NULL),
                     COHORT_ERR_INVALID);

    cohort_store_server *s = created(2);
    ck_assert_int_eq(cohort_store_server_torch_port(s), 0);
    /* Two jobs: the listener must name one, and one that exists. */
    ck_assert_int_eq(cohort_store_server_torch_listen(s, "127.0.0.1", 0, NULL),
                     COHORT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(cohort_last_error(NULL), "name the job"));
    ck_assert_int_eq(cohort_store_server_torch_listen(s, "127.0.0.1", 0, "nojob"),
                     COHORT_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(cohort_last_error(NULL), "no job 'nojob'"));
    ck_assert_int_eq(cohort_store_server_torch_listen(s, "127.0.0.1", -1, JOB_B),
                     COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_store_server_torch_listen(s, "127.0.0.1", 65536, JOB_B),
                     COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_store_server_torch_listen(s, "no.such.host.invalid", 0, JOB_B),
                     COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_store_server_torch_port(s), 0);
    ck_assert_int_eq(cohort_store_server_torch_listen(s, "127.0.0.1", 0, JOB_B), COHORT_OK);
    int port = cohort_store_server_torch_port(s);
    ck_assert_int_gt(port, 0);
    ck_assert_int_ne(port, cohort_store_server_port(s));
    /* Once only. */
    ck_assert_int_eq(cohort_store_server_torch_listen(s, "127.0.0.1", 0, JOB_B),
                     COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_store_server_torch_port(s), port);
    /* It listens: a TCP connect succeeds. */
    int fd = su_raw_connect(port);
    ck_assert_int_ge(fd, 0);
    close(fd);
    cohort_store_server_stop(s);

    /* One job: NULL names it; a port in use is a system error. */
    s = created(1);
    ck_assert_int_eq(cohort_store_server_torch_listen(s, "127.0.0.1", 0, NULL), COHORT_OK);
    cohort_store_server *s2 = created(1);
    ck_assert_int_eq(
        cohort_store_server_torch_listen(s2, "127.0.0.1", cohort_store_server_torch_port(s), NULL),
        COHORT_ERR_SYSTEM);
    cohort_store_server_stop(s2);
    cohort_store_server_stop(s);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("store_admin");
    TCase *t = tcase_create("admin");
    tcase_add_checked_fixture(t, NULL, teardown);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, tokenfile_reads_jobs_and_bare_tokens);
    tcase_add_test(t, tokenfile_refuses_bad_input);
    tcase_add_test(t, stats_ping_generation);
    tcase_add_test(t, torch_listener_setup);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(make_suite)
