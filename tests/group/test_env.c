/* test_env.c - init settings from the environment: every missing or bad
 * variable is named in the error. */
#include <dirent.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "group/envtab.h"
#include "group/group_internal.h"
#include "support/support.h"

static cohort_status init_err(char *msg, size_t len)
{
    cohort_group *g = (cohort_group *)1;
    cohort_status st = cohort_init(&g);
    ck_assert_ptr_null(g);
    snprintf(msg, len, "%s", cohort_last_error(NULL));
    return st;
}

START_TEST(missing_rank_named)
{
    cht_clear_launch_env();
    /* (no variable at all is a lone start: a world of one, test_launch_env) */
    setenv("WORLD_SIZE", "2", 1);
    char m[1024];
    ck_assert_int_eq(init_err(m, sizeof m), COHORT_ERR_INVALID);
    ck_assert_msg(strstr(m, "RANK is not set"), "%s", m);
}
END_TEST

START_TEST(bad_values_named)
{
    struct {
        const char *k, *v, *want;
    } cases[] = {
        {"WORLD_SIZE", "four", "WORLD_SIZE='four' is not an integer"},
        {"RANK", "7", "out of range"},
        {"COHORT_TIMEOUT", "-3", "COHORT_TIMEOUT='-3'"},
        {"COHORT_TRANSPORT", "rdma", "COHORT_TRANSPORT='rdma'"},
        {"COHORT_GENERATION", "0", "COHORT_GENERATION='0'"},
        {"MASTER_PORT", "99999", "MASTER_PORT is out of range"},
        {"COHORT_TOKEN", "", "COHORT_TOKEN is not set"},
        /* issue 13: numbers that used to wrap or slip through */
        {"RANK", "4294967296", "RANK='4294967296' is not an integer in [0, "},
        {"WORLD_SIZE", "4294967297", "WORLD_SIZE='4294967297' is not an integer in [1, "},
        {"RANK", " 1", "RANK=' 1' is not an integer"},
        {"LOCAL_RANK", "-1", "LOCAL_RANK='-1' is not an integer"},
        {"COHORT_TIMEOUT", "nan", "COHORT_TIMEOUT='nan'"},
        {"COHORT_TIMEOUT", "inf", "COHORT_TIMEOUT='inf'"},
        {"COHORT_TIMEOUT", "1e400", "COHORT_TIMEOUT='1e400'"},
        {"COHORT_STALL_WARN", "-nan", "COHORT_STALL_WARN='-nan'"},
        {"COHORT_GENERATION", "4294967297", "COHORT_GENERATION='4294967297'"},
        /* issue 13 / 16: unknown values and names of COHORT_* variables */
        {"COHORT_LOG", "verbose", "COHORT_LOG='verbose': expected off, error, warn, info or debug"},
        {"COHORT_CONTRACT", "of", "COHORT_CONTRACT='of': expected on or off"},
        {"COHORT_TRACE_SIZE", "abc", "COHORT_TRACE_SIZE='abc': expected an integer in [1, "},
        {"COHORT_TRACE_SIZE", "0", "COHORT_TRACE_SIZE='0'"},
        {"COHORT_DEBUG", "syncx", "COHORT_DEBUG='syncx': 'syncx' is not one of sync or buffers"},
        {"COHORT_DEBUG", "sync,bufers", "'bufers' is not one of"},
        {"COHORT_TIMOUT", "5", "COHORT_TIMOUT is not a cohort variable (did you mean COHORT_TIMEOUT?)"},
        {"COHORT_TRANSPROT", "tcp", "did you mean COHORT_TRANSPORT?"},
        {"COHORT_ALGO_ALLREDUCE", "ring", "did you mean COHORT_ALGO_ALL_REDUCE?"},
        {"COHORT_ALGO_ALL_REDUCE", "bogus",
         "COHORT_ALGO_ALL_REDUCE=bogus is not an algorithm for all_reduce; choices: "},
        {"COHORT_ALGO_BARRIER", "ring", "COHORT_ALGO_BARRIER=ring is not an algorithm for barrier"},
        {"COHORT_SHM_SPIN_US", "-5", "COHORT_SHM_SPIN_US='-5'"},
        {"COHORT_SHM_PUBLISH", "fast", "COHORT_SHM_PUBLISH='fast': expected auto, fence or membarrier"},
        {"COHORT_SHM_PUBLISH", "Fence", "COHORT_SHM_PUBLISH='Fence': expected auto, fence or membarrier"},
        {"COHORT_XYZZY_FROBNICATE", "1", "COHORT_XYZZY_FROBNICATE is not a cohort variable"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cht_clear_launch_env();
        setenv("RANK", "1", 1);
        setenv("WORLD_SIZE", "4", 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", "29500", 1);
        setenv("COHORT_TOKEN", "secret", 1);
        setenv(cases[i].k, cases[i].v, 1);
        char m[1024];
        ck_assert_int_eq(init_err(m, sizeof m), COHORT_ERR_INVALID);
        ck_assert_msg(strstr(m, cases[i].want), "case %s=%s: got '%s'", cases[i].k, cases[i].v, m);
        unsetenv(cases[i].k);
    }
}
END_TEST

/* Accepted values of the strict variables resolve. */
START_TEST(strict_env_accepts_valid)
{
    const char *ok[][2] = {{"COHORT_LOG", "off"},           {"COHORT_LOG", "debug"},
                           {"COHORT_CONTRACT", "off"},      {"COHORT_CONTRACT", "on"},
                           {"COHORT_TRACE_SIZE", "16"},     {"COHORT_DEBUG", "sync,buffers"},
                           {"COHORT_ALGO_ALL_REDUCE", "ring"}, {"COHORT_ALGO_BROADCAST", "auto"},
                           {"COHORT_TIMEOUT", "0.25"},      {"COHORT_TRACE_SIGNAL", "0"},
                           {"COHORT_SHM_PUBLISH", "fence"}, {"COHORT_SHM_PUBLISH", "membarrier"},
                           {"COHORT_TIMEOUT", ""}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        cht_clear_launch_env();
        setenv("RANK", "0", 1);
        setenv("WORLD_SIZE", "2", 1);
        setenv("COHORT_STORE", "127.0.0.1:1", 1);
        setenv("COHORT_TOKEN", "t", 1);
        setenv(ok[i][0], ok[i][1], 1);
        coh_settings s;
        cohort_status st = coh_settings_resolve(NULL, &s);
        ck_assert_msg(st == COHORT_OK, "%s=%s: %s", ok[i][0], ok[i][1], cohort_last_error(NULL));
        unsetenv(ok[i][0]);
    }
}
END_TEST

/* One table: every COHORT_* variable the sources read or set (library,
 * cohortrun, tools, tests) has a row, and docs/concepts.md names every
 * variable the library reads. A new variable without a row would fail
 * every cohort_init that inherits it. */
static char headers[1 << 17]; /* public headers: enumerators are not variables */

static void scan_file(const char *path, regex_t *re, char *missing, size_t len)
{
    if (strstr(path, "tests/group/test_env.c"))
        return; /* this file spells unknown names on purpose */
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        const char *p = line;
        regmatch_t m[2];
        while (regexec(re, p, 2, m, 0) == 0) {
            char name[128];
            int n = (int)(m[1].rm_eo - m[1].rm_so);
            snprintf(name, sizeof name, "%.*s", n, p + m[1].rm_so);
            char quoted[130];
            snprintf(quoted, sizeof quoted, " %s", name);
            if (strncmp(name, "COHORT_ERR_", 11) && !coh_env_lookup(name) &&
                !strstr(missing, name) && !strstr(headers, quoted) &&
                strlen(missing) + strlen(name) + strlen(path) + 8 < len) {
                strcat(missing, " ");
                strcat(missing, name);
                strcat(missing, " (");
                strcat(missing, path);
                strcat(missing, ")");
            }
            p += m[0].rm_eo;
        }
    }
    fclose(f);
}

static void scan_dir(const char *dir, regex_t *re, char *missing, size_t len)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        size_t n = strlen(e->d_name);
        if (e->d_type == DT_DIR)
            scan_dir(p, re, missing, len);
        else if (n > 2 && (!strcmp(e->d_name + n - 2, ".c") || !strcmp(e->d_name + n - 2, ".h") ||
                           !strcmp(e->d_name + n - 3, ".sh") || !strcmp(e->d_name + n - 3, ".py")))
            scan_file(p, re, missing, len);
    }
    closedir(d);
}

START_TEST(env_table_is_complete)
{
    const char *src = getenv("COHORT_SOURCE_DIR");
    ck_assert_msg(src, "COHORT_SOURCE_DIR is not set (run under ctest)");
    regex_t re;
    /* A read (getenv / coh_env_*("NAME")), or a set ("NAME=..." in a
     * string, setenv("NAME"): what a child process would inherit. */
    ck_assert_int_eq(regcomp(&re,
                             "[\"(](COHORT_[A-Z0-9_]*[A-Z0-9])(=|\")", REG_EXTENDED),
                     0);
    char missing[4096] = "";
    size_t hn = 0;
    const char *hdrs[] = {"cohort.h", "cohort_status.h", "cohort_store.h"};
    for (size_t i = 0; i < 3; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/include/%s", src, hdrs[i]);
        FILE *hf = fopen(p, "r");
        ck_assert_ptr_nonnull(hf);
        hn += fread(headers + hn, 1, sizeof headers - 1 - hn, hf);
        fclose(hf);
    }
    headers[hn] = 0;
    const char *dirs[] = {"src", "tools", "tests", "scripts", "bench", "examples", "mpi", "python"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char d[1024];
        snprintf(d, sizeof d, "%s/%s", src, dirs[i]);
        scan_dir(d, &re, missing, sizeof missing);
    }
    regfree(&re);
    ck_assert_msg(!missing[0], "COHORT_* variables without a row in src/group/envtab.c:%s",
                  missing);
    /* The docs' environment table names every library variable. */
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/concepts.md", src);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    static char doc[1 << 17];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    doc[n] = 0;
    fclose(f);
    for (const coh_envvar *v = coh_env_table(); v->name; v++)
        if (v->user == COH_ENV_LIB)
            ck_assert_msg(strstr(doc, v->name), "docs/concepts.md does not mention %s", v->name);
}
END_TEST

START_TEST(slurm_and_ompi_names)
{
    coh_settings s;
    cht_clear_launch_env();
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_JOB_ID", "4242", 1);
    setenv("SLURM_STEP_ID", "0", 1); /* inside an srun step */
    setenv("MASTER_ADDR", "node1", 1);
    setenv("COHORT_TOKEN", "t", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    ck_assert_int_eq(s.rank, 3);
    ck_assert_int_eq(s.size, 8);
    ck_assert_str_eq(s.job_id, "4242");
    ck_assert_int_eq(s.store_port, 20000 + 4242 % 12000);
    cht_clear_launch_env();
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("COHORT_STORE", "tcp://10.0.0.1:4000", 1);
    setenv("COHORT_TOKEN", "t", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    ck_assert_int_eq(s.rank, 1);
    ck_assert_int_eq(s.size, 2);
    ck_assert_int_eq(s.host_store, 0);
    ck_assert_str_eq(s.store_addr, "tcp://10.0.0.1:4000");
    /* torchrun names win over launcher names */
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    ck_assert_int_eq(s.rank, 0);
}
END_TEST

START_TEST(options_override_env)
{
    cht_clear_launch_env();
    cohort_options o;
    cohort_options_init(&o);
    o.rank = 2;
    o.world_size = 3;
    o.store_url = "127.0.0.1:1";
    o.token = "tok";
    o.timeout_ms = 1500;
    o.transport = "tcp";
    coh_settings s;
    ck_assert_int_eq(coh_settings_resolve(&o, &s), COHORT_OK);
    ck_assert_int_eq(s.rank, 2);
    ck_assert_int_eq(s.timeout_ms, 1500);
    ck_assert_int_eq(s.force_transport, 2);
}
END_TEST

START_TEST(store_unreachable_times_out_with_address)
{
    cht_clear_launch_env();
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("COHORT_TOKEN", "t", 1);
    setenv("COHORT_TIMEOUT", "0.5", 1);
    char url[64];
    snprintf(url, sizeof url, "127.0.0.1:%d", cht_free_port());
    setenv("COHORT_STORE", url, 1);
    char m[1024];
    cohort_status st = init_err(m, sizeof m);
    ck_assert_msg(st == COHORT_ERR_STORE || st == COHORT_ERR_TIMEOUT, "%s: %s",
                  cohort_status_name(st), m);
    ck_assert_msg(strstr(m, url), "message does not name the store address: %s", m);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("group_env");
    TCase *tc = tcase_create("env");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, missing_rank_named);
    tcase_add_test(tc, bad_values_named);
    tcase_add_test(tc, strict_env_accepts_valid);
    tcase_add_test(tc, env_table_is_complete);
    tcase_add_test(tc, slurm_and_ompi_names);
    tcase_add_test(tc, options_override_env);
    tcase_add_test(tc, store_unreachable_times_out_with_address);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
