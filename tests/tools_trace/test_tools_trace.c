/*
 * test_tools_trace.c - cohort-trace end to end: the real binary on the
 * checked-in dumps of tests/tools_trace/data (regenerate with make_data.py),
 * on a dump written by the library itself, and on bad usage. Checks exit
 * codes, the report lines users read, warnings for damaged input, and the
 * --timeline output (valid JSON with the expected events, checked by
 * python3's json module).
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../contract/group_util.h"
#include "support/support.h"

static char out[1 << 16], err[1 << 16];

static char *slurp_fd(int fd, char *buf, size_t cap)
{
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, buf, cap - 1);
    buf[n > 0 ? n : 0] = 0;
    close(fd);
    return buf;
}

/* Runs cohort-trace with args (NULL-terminated); returns its exit code,
 * stdout in `out`, stderr in `err`. */
static int run_tool(const char *a1, const char *a2, const char *a3, const char *a4)
{
    char fo[] = "/tmp/ct-outXXXXXX", fe[] = "/tmp/ct-errXXXXXX";
    int o = mkstemp(fo), e = mkstemp(fe);
    ck_assert(o >= 0 && e >= 0);
    unlink(fo);
    unlink(fe);
    const char *tool = cht_tool("cohort-trace");
    pid_t p = fork();
    ck_assert(p >= 0);
    if (p == 0) {
        dup2(o, 1);
        dup2(e, 2);
        const char *argv[] = {tool, a1, a2, a3, a4, NULL};
        execv(tool, (char *const *)argv);
        _exit(127);
    }
    int st;
    ck_assert_int_eq(waitpid(p, &st, 0), p);
    slurp_fd(o, out, sizeof out);
    slurp_fd(e, err, sizeof err);
    ck_assert_msg(WIFEXITED(st), "cohort-trace died: status %d; stderr: %s", st, err);
    return WEXITSTATUS(st);
}

static const char *data(const char *scenario)
{
    static _Thread_local char p[1024];
    const char *src = getenv("COHORT_SOURCE_DIR");
    snprintf(p, sizeof p, "%s/tests/tools_trace/data/%s", src ? src : ".", scenario);
    return p;
}

#define HAS(hay, needle) ck_assert_msg(strstr(hay, needle), "missing: %s\n--- in:\n%s", needle, hay)
#define HASNT(hay, needle) ck_assert_msg(!strstr(hay, needle), "unexpected: %s\n--- in:\n%s", needle, hay)

START_TEST(consistent)
{
    ck_assert_int_eq(run_tool(data("consistent"), NULL, NULL, NULL), 0);
    HAS(out, "job train-42, group 0, generation 1: 4 ranks, 4 dumps\n");
    HAS(out, "dump reason: SIGUSR1\n");
    HAS(out, "contracts: no divergence in calls #1-#12\n");
    HAS(out, "  rank 2 (node1, pid 1002): last completed all_reduce #12 (train.c:91); no pending "
             "call\n");
    HAS(out, "result: consistent\n");
    ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(count_mismatch)
{
    ck_assert_int_eq(run_tool(data("count_mismatch"), NULL, NULL, NULL), 1);
    HAS(out, "first divergence: all_reduce #7 (train.c:88): count differs: ranks 0-2 have 1024, "
             "rank 3 has 512 - look at rank 3's call at train.c:90 (a different call site: an extra "
             "or a skipped call? check the control flow that led there)\n");
    HAS(out, "  rank 3 (node1, pid 1003): last completed all_reduce #6 (train.c:91); no pending "
             "call; failed all_reduce #7 (train.c:90) with COHORT_ERR_CONTRACT\n");
    HAS(out, "result: PROBLEM (divergence, failed calls)\n");
}
END_TEST

START_TEST(extra_call)
{
    ck_assert_int_eq(run_tool(data("extra_call"), NULL, NULL, NULL), 1);
    HAS(out, "first divergence: rank 3 made an extra call: barrier #7 (train.c:95) where ranks 0-2 "
             "called all_reduce #7 (train.c:88); the calls after it are misaligned\n");
}
END_TEST

START_TEST(missing_rank)
{
    ck_assert_int_eq(run_tool(data("missing_rank"), NULL, NULL, NULL), 1);
    HAS(out, "4 ranks, 3 dumps\n");
    HAS(out, "dump reason: rank 2 (host node1, pid 1002) lost: connection closed\n");
    HAS(out, "contracts: no divergence in calls #1-#7; no history from rank 2\n");
    HAS(out, "  rank 2: no dump (missing: dead, killed before dumping, or COHORT_TRACE_DIR not set "
             "there)\n");
    HAS(out, "missing: rank 2 (no dump)\n");
    HAS(out, "result: PROBLEM (missing ranks, failed calls)\n");
}
END_TEST

START_TEST(truncated)
{
    /* Damaged input is skipped with a warning per line, never fatal. */
    ck_assert_int_eq(run_tool(data("truncated"), NULL, NULL, NULL), 0);
    HAS(err, "notes.jsonl:1: not a cohort trace header (byte 0: expected '{'); file skipped\n");
    HAS(err, "train-42-rank1.jsonl:7: line skipped: byte 0: expected '{'\n");
    HAS(err, "train-42-rank1.jsonl:14: line skipped: byte 131: expected a value\n");
    HAS(out, "4 ranks, 4 dumps\n");
    HAS(out, "contracts: no divergence in calls #1-#12; rank 1 did not reach #12 (its last call: "
             "#11 all_reduce at train.c:88)\n");
    HAS(out, "result: consistent\n");
}
END_TEST

START_TEST(stall)
{
    ck_assert_int_eq(run_tool(data("stall"), NULL, NULL, NULL), 1);
    HAS(out, "  rank 0 (node1, pid 1000): last completed all_reduce #6 (train.c:91); pending "
             "all_reduce #7 (train.c:88), running for 0.130 s at dump\n");
    HAS(out, "stall: ranks 0-2 wait in all_reduce #7 (train.c:88); rank 3 never issued #7:\n"
             "  rank 3 stopped after all_reduce #6 (train.c:91); no pending call\n");
    HAS(out, "result: PROBLEM (stall)\n");
}
END_TEST

START_TEST(p2p_deadlock)
{
    ck_assert_int_eq(run_tool(data("p2p_deadlock"), NULL, NULL, NULL), 1);
    HAS(out, "deadlock: send/recv wait cycle: rank 0 in recv #1 from rank 1 (tag 3, pipe.c:20) -> "
             "rank 1 in recv #1 from rank 0 (tag 3, pipe.c:20) -> rank 0\n");
    HAS(out, "result: PROBLEM (send/recv deadlock)\n");
}
END_TEST

START_TEST(usage_errors)
{
    ck_assert_int_eq(run_tool(NULL, NULL, NULL, NULL), 2);
    HAS(err, "usage: cohort-trace [--timeline OUT.json] [--quiet] DIR\n");
    ck_assert_int_eq(run_tool("--bogus", "x", NULL, NULL), 2);
    HAS(err, "cohort-trace: unknown option '--bogus'\nTry 'cohort-trace --help'.\n");
    ck_assert_int_eq(run_tool("/nonexistent/dumps", NULL, NULL, NULL), 2);
    HAS(err, "cohort-trace: /nonexistent/dumps: No such file or directory\n");
    ck_assert_int_eq(run_tool(data("consistent"), "--timeline", NULL, NULL), 2);
    HAS(err, "cohort-trace: option '--timeline' needs a value\n");
    ck_assert_int_eq(run_tool("--timeline", "/nonexistent/t.json", data("consistent"), NULL), 2);
    HAS(err, "cohort-trace: /nonexistent/t.json: No such file or directory\n");
    ck_assert_int_eq(run_tool(data("consistent"), data("stall"), NULL, NULL), 2);
    HAS(err, "one directory only");
    /* A directory without dumps is an I/O error, not "consistent". */
    char dir[] = "/tmp/ct-emptyXXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(run_tool(dir, NULL, NULL, NULL), 2);
    HAS(err, "no readable dumps (*.jsonl)\n");
    rmdir(dir);
    ck_assert_int_eq(run_tool("--help", NULL, NULL, NULL), 0);
    HAS(out, "Exit status: 0 consistent, 1 problem found, 2 usage or I/O error.\n");
}
END_TEST

/* Validates a timeline with python3's json module and checks its events.
 * `checks` is Python run with `ev` bound to the event list. */
static void check_timeline(const char *path, const char *checks)
{
    char script[4096];
    snprintf(script, sizeof script,
             "import json,sys\n"
             "doc=json.load(open(sys.argv[1]))\n"
             "ev=doc['traceEvents']\n"
             "assert doc['displayTimeUnit']=='ms'\n"
             "for e in ev:\n"
             "  assert e['ph'] in ('M','X','i'), e\n"
             "  assert isinstance(e['pid'],int)\n"
             "  if e['ph']=='X': assert e['dur']>=0 and e['ts']>=0, e\n"
             "%s\n",
             checks);
    char spath[] = "/tmp/ct-checkXXXXXX";
    int fd = mkstemp(spath);
    ck_assert(fd >= 0);
    ck_assert_int_eq(write(fd, script, strlen(script)), (ssize_t)strlen(script));
    close(fd);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 %s %s 2>&1", spath, path);
    FILE *p = popen(cmd, "r");
    char msg[4096] = "";
    size_t n = fread(msg, 1, sizeof msg - 1, p);
    msg[n] = 0;
    int rc = pclose(p);
    unlink(spath);
    ck_assert_msg(rc == 0, "timeline check failed: %s", msg);
    /* And the generic validator users would reach for. */
    snprintf(cmd, sizeof cmd, "python3 -m json.tool %s > /dev/null", path);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(timeline_mismatch)
{
    char path[] = "/tmp/ct-timelineXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ck_assert_int_eq(run_tool("--timeline", path, data("count_mismatch"), NULL), 1);
    HAS(out, "timeline: ");
    check_timeline(path,
                   "x=[e for e in ev if e['ph']=='X']\n"
                   "assert len(x)==28, len(x)\n" /* 4 ranks x 7 calls */
                   "names=[e['args']['name'] for e in ev if e['name']=='process_name']\n"
                   "assert names==['rank %d (node1, pid %d)'%(r,1000+r) for r in range(4)], names\n"
                   "mm=[e for e in ev if e['ph']=='i' and e['name'].startswith('mismatch')]\n"
                   "assert [(e['pid'],e['name']) for e in mm]==[(3,'mismatch: count')], mm\n"
                   "assert 'count differs' in mm[0]['args']['detail']\n"
                   "s7=[e for e in x if e['pid']==3 and e['args']['seq']==7][0]\n"
                   "assert s7['args']['site']=='train.c:90' and s7['args']['state']=='failed'\n"
                   "assert min(e['ts'] for e in x)==0\n"
                   "dumps=[e for e in ev if e['ph']=='i' and e['name']=='dump']\n"
                   "assert len(dumps)==4\n");
    unlink(path);
}
END_TEST

START_TEST(timeline_stall_and_missing)
{
    char path[] = "/tmp/ct-timelineXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ck_assert_int_eq(run_tool("--timeline", path, data("stall"), NULL), 1);
    check_timeline(path,
                   "st=[e['pid'] for e in ev if e['ph']=='i' and e['name']=='stall']\n"
                   "assert st==[0,1,2], st\n"
                   "p=[e for e in ev if e['ph']=='X' and e['args']['state']=='pending at dump']\n"
                   "assert len(p)==3 and all(e['dur']>0 for e in p), p\n");
    ck_assert_int_eq(run_tool("--timeline", path, data("missing_rank"), NULL), 1);
    check_timeline(path,
                   "names=[e['args']['name'] for e in ev if e['name']=='process_name']\n"
                   "assert 'rank 2 (no dump)' in names, names\n");
    ck_assert_int_eq(run_tool("--timeline", path, data("p2p_deadlock"), NULL), 1);
    check_timeline(path, "assert any(e['ph']=='X' and e['tid']==1 and e['cat']=='p2p' for e in ev)\n");
    unlink(path);
}
END_TEST

START_TEST(dump_from_library)
{
    /* Dumps written by the library itself, with the fields, names and
     * escaping only the writer produces (awkward job and file names). */
    char dir[] = "/tmp/ct-libXXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (int r = 0; r < 3; r++) {
        cohort_group *g = tg_make(r, 3);
        snprintf(g->job_id, sizeof g->job_id, "job \"x\"");
        ck_assert_int_eq(coh_trace_create(&g->trace, 64), COHORT_OK);
        for (uint64_t s = 1; s <= 5; s++) {
            uint64_t count = (r == 1 && s == 5) ? 7 : 100;
            coh_call c = cht_call(s, COH_COLL_REDUCE_SCATTER, COHORT_BFLOAT16, COHORT_MAX, -1, 0,
                                 count, "dir/m\xc3\xa9trics \"q\".c", 40 + (int)s);
            uint64_t i = coh_trace_issue(g->trace, &c);
            coh_trace_start(g->trace, i);
            coh_trace_end(g->trace, i, s == 5 ? COHORT_ERR_CONTRACT : COHORT_OK);
        }
        ck_assert_int_eq(coh_trace_dump(g, dir, "contract \"report\""), COHORT_OK);
        cht_group_free(g);
    }
    ck_assert_int_eq(run_tool(dir, NULL, NULL, NULL), 1);
    HAS(out, "job job \"x\", group 0, generation 1: 3 ranks, 3 dumps\n");
    HAS(out, "first divergence: reduce_scatter #5 (m\xc3\xa9trics \"q\".c:45): count differs: "
             "ranks 0,2 have 100, rank 1 has 7 - look at rank 1's call at m\xc3\xa9trics "
             "\"q\".c:45\n");
    ck_assert_str_eq(err, "");
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[1024];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}
END_TEST

START_TEST(generations_and_groups)
{
    /* A directory with an older generation's dump and a second group: the
     * old one is ignored with a warning, each group is analysed alone. */
    char dir[] = "/tmp/ct-genXXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (int gen = 1; gen <= 2; gen++)
        for (int r = 0; r < 2; r++) {
            if (gen == 1 && r == 1)
                continue; /* only rank 0 left a dump in generation 1 */
            cohort_group *g = tg_make(r, 2);
            g->generation = (uint32_t)gen;
            snprintf(g->job_id, sizeof g->job_id, "gen%d", gen); /* distinct file names */
            ck_assert_int_eq(coh_trace_create(&g->trace, 8), COHORT_OK);
            coh_call c = cht_call(1, COH_COLL_BARRIER, 0, -1, -1, 0, 0, "b.c", 1);
            coh_trace_end(g->trace, coh_trace_issue(g->trace, &c), COHORT_OK);
            ck_assert_int_eq(coh_trace_dump(g, dir, "x"), COHORT_OK);
            cht_group_free(g);
        }
    /* Same job for all: rewrite the job names so the generations collide. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sed -i 's/\"job\":\"gen[12]\"/\"job\":\"j\"/' %s/*.jsonl", dir);
    ck_assert_int_eq(system(cmd), 0);
    cohort_group *g = tg_make(0, 1);
    g->id = 5;
    snprintf(g->job_id, sizeof g->job_id, "j");
    ck_assert_int_eq(coh_trace_dump(g, dir, "x"), COHORT_OK);
    cht_group_free(g);

    ck_assert_int_eq(run_tool(dir, NULL, NULL, NULL), 0);
    HAS(err, "gen1-rank0.jsonl: generation 1 is older than 2; ignored\n");
    HAS(out, "job j, group 0, generation 2: 2 ranks, 2 dumps\n");
    HAS(out, "job j, group 5, generation 1: 1 rank, 1 dump\n");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tools_trace");
    TCase *t = tcase_create("report");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, consistent);
    tcase_add_test(t, count_mismatch);
    tcase_add_test(t, extra_call);
    tcase_add_test(t, missing_rank);
    tcase_add_test(t, truncated);
    tcase_add_test(t, stall);
    tcase_add_test(t, p2p_deadlock);
    tcase_add_test(t, usage_errors);
    tcase_add_test(t, dump_from_library);
    tcase_add_test(t, generations_and_groups);
    suite_add_tcase(s, t);
    t = tcase_create("timeline");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, timeline_mismatch);
    tcase_add_test(t, timeline_stall_and_missing);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
