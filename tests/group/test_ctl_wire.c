/* test_ctl_wire.c - the store's abort record (src/group/ctl_wire.c) with
 * garbage: a missing, negative, overflowing or zero call number, a rank
 * outside the group, a huge reason, no NUL, embedded newlines and control
 * bytes, a status out of range. Garbage is refused with a note, or mapped
 * to the generic COHORT_ERR_ABORTED, never a wrong rank. End to end, a
 * group whose store receives such records from a raw client is not
 * poisoned by a refused one, and adopts a mapped one as ABORTED. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/group.h"
#include "contract/fp_record.h"
#include "group/ctl_wire.h"
#include "group/monitor.h"
#include "support/support.h"

static coh_ctl_abort a;
static char err[96];

static int parse(const char *rec, int size)
{
    return coh_ctl_abort_parse(rec, strlen(rec), size, &a, err, sizeof err);
}

START_TEST(well_formed)
{
    ck_assert_int_eq(parse("A 1 4 timed out", 4), 0);
    ck_assert_int_eq(a.from, 1);
    ck_assert_int_eq(a.st, COHORT_ERR_TIMEOUT);
    ck_assert_uint_eq(a.seq, 0);
    ck_assert_str_eq(a.reason, "timed out");
    ck_assert_str_eq(a.note, "");
    ck_assert_int_eq(parse("A 3 2:17 count differs\n  rank 3 has 512", 4), 0);
    ck_assert_int_eq(a.from, 3);
    ck_assert_int_eq(a.st, COHORT_ERR_CONTRACT);
    ck_assert_uint_eq(a.seq, 17);
    ck_assert_str_eq(a.reason, "count differs\n  rank 3 has 512"); /* reports span lines */
    ck_assert_str_eq(a.note, "");
    ck_assert_int_eq(parse("A 0 2:18446744073709551615 max", 1), 0);
    ck_assert_uint_eq(a.seq, UINT64_MAX);
    /* what the poster writes, the reader reads back */
    char rec[COH_ERRLEN + 96];
    int w = coh_ctl_abort_format(rec, sizeof rec, 2, COHORT_ERR_PEER_LOST, 9, "rank 1 lost");
    ck_assert_int_eq(coh_ctl_abort_parse(rec, (size_t)w, 3, &a, err, sizeof err), 0);
    ck_assert(a.from == 2 && a.st == COHORT_ERR_PEER_LOST && a.seq == 9);
    ck_assert_str_eq(a.reason, "rank 1 lost");
}
END_TEST

START_TEST(bad_call_number_names_no_call)
{
    const char *recs[] = {"A 1 2: missing", "A 1 2:-1 negative", "A 1 2:18446744073709551616 over",
                          "A 1 2:99999999999999999999999 over", "A 1 2:0 zero", "A 1 2:12ab junk",
                          "A 1 2:"};
    for (size_t i = 0; i < sizeof recs / sizeof *recs; i++) {
        ck_assert_msg(parse(recs[i], 4) == 0, "%s: %s", recs[i], err);
        ck_assert_msg(a.seq == 0, "%s: seq %llu", recs[i], (unsigned long long)a.seq);
        ck_assert_int_eq(a.from, 1);
        ck_assert_int_eq(a.st, COHORT_ERR_CONTRACT);
        ck_assert_msg(strstr(a.note, "unreadable call number"), "%s: note %s", recs[i], a.note);
    }
}
END_TEST

START_TEST(bad_rank_is_refused)
{
    const char *recs[] = {"A 4 2 size is 4",  "A -1 2 negative",   "A 99999999999999999999 2 x",
                          "A 2147483648 2 x", "A  1 2 two spaces", "A x 2 letters",
                          "A 1x 2 suffix",    "A 1",               "A ",
                          "A",                "",                  "B 1 2 not an abort",
                          "A 1 two status",   "A 1 2x suffix"};
    for (size_t i = 0; i < sizeof recs / sizeof *recs; i++) {
        err[0] = 0;
        ck_assert_msg(parse(recs[i], 4) == -1, "%s accepted (from %d)", recs[i], a.from);
        ck_assert_msg(err[0], "%s: no note", recs[i]);
    }
    ck_assert_int_eq(parse("A 4 2 x", 4), -1);
    ck_assert_str_eq(err, "the rank is outside the group");
}
END_TEST

START_TEST(bad_status_is_aborted)
{
    const char *recs[] = {"A 2 0 ok?", "A 2 14 new", "A 2 -3 neg", "A 2 99999999999999999999 big",
                          "A 2 -0:5 negzero"};
    for (size_t i = 0; i < sizeof recs / sizeof *recs; i++) {
        ck_assert_msg(parse(recs[i], 4) == 0, "%s: %s", recs[i], err);
        ck_assert_int_eq(a.from, 2);
        ck_assert_msg(a.st == COHORT_ERR_ABORTED, "%s: %s", recs[i], cohort_status_name(a.st));
        ck_assert_msg(strstr(a.note, "unknown status"), "%s: %s", recs[i], a.note);
    }
}
END_TEST

START_TEST(reason_is_bounded_and_printable)
{
    /* no NUL: the parser reads len bytes, never past them */
    char *raw = malloc(7);
    memcpy(raw, "A 1 4 x", 7);
    ck_assert_int_eq(coh_ctl_abort_parse(raw, 7, 4, &a, err, sizeof err), 0);
    ck_assert_str_eq(a.reason, "x");
    ck_assert_int_eq(coh_ctl_abort_parse(raw, 3, 4, &a, err, sizeof err), -1); /* "A 1" */
    free(raw);
    /* a NUL and control bytes inside */
    const char nul[] = "A 1 4 before\0after\r\033[31m\x7f";
    ck_assert_int_eq(coh_ctl_abort_parse(nul, sizeof nul - 1, 4, &a, err, sizeof err), 0);
    ck_assert_str_eq(a.reason, "before?after??[31m?");
    ck_assert(strstr(a.note, "control bytes"));
    /* newlines and tabs stay (contract reports span lines) */
    ck_assert_int_eq(parse("A 1 2:3 line one\n\tline two\n", 4), 0);
    ck_assert_str_eq(a.reason, "line one\n\tline two\n");
    /* huge: cut to the error buffer */
    size_t n = 1 << 20;
    char *big = malloc(n);
    memcpy(big, "A 1 4 ", 6);
    memset(big + 6, 'y', n - 6);
    ck_assert_int_eq(coh_ctl_abort_parse(big, n, 4, &a, err, sizeof err), 0);
    ck_assert_uint_eq(strlen(a.reason), COH_ERRLEN - 1);
    ck_assert(strstr(a.note, "reason cut"));
    free(big);
    /* empty */
    ck_assert_int_eq(parse("A 1 4", 4), 0);
    ck_assert_str_eq(a.reason, "(no reason given)");
    ck_assert_int_eq(parse("A 1 4    ", 4), 0);
    ck_assert_str_eq(a.reason, "(no reason given)");
}
END_TEST

/* ---- end to end: records a raw store client writes into the group's
 * control channel reach every rank's monitor thread ---- */

static cohort_status post_raw(cohort_group *g, const char *rec)
{
    char prefix[64], key[48];
    snprintf(prefix, sizeof prefix, "gen%u/g%u/", g->generation, g->id);
    cohort_store *s = NULL;
    cohort_status st = cohort_store_prefixed(g->store_root, prefix, &s);
    if (st != COHORT_OK)
        return st;
    int64_t k = 0;
    st = cohort_store_add(s, "ctl/n", 5, 1, &k);
    if (st == COHORT_OK) {
        snprintf(key, sizeof key, "ctl/%lld", (long long)k);
        st = cohort_store_set(s, key, strlen(key), rec, strlen(rec));
    }
    cohort_store_close(s);
    return st;
}

static int rank_garbage(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float f[64], out[64];
    RANK_PASS(cohort_all_reduce(g, f, out, 16, COHORT_FLOAT32, COHORT_SUM), g);
    if (rank == 0) {
        /* each would blame a rank that is not in the group, or is no record */
        const char *refused[] = {"A 7 2:2 rank 7 of 2", "A -1 2 x", "A 4294967297 2 wraps to 1",
                                 "A 1x 4 x", "A  1 4 x", ""};
        for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
            RANK_CHECK(post_raw(g, refused[i]) == COHORT_OK, "post: %s", cohort_last_error(g));
    }
    RANK_PASS(cohort_barrier(g), g);
    /* every rank's monitor has now read them (bounded wait) */
    RANK_CHECK(coh_monitor_sync(g, 10000) == COHORT_OK, "monitor did not catch up");
    RANK_CHECK(!coh_group_poisoned(g), "a refused record poisoned the group: %s",
               cohort_last_error(g));
    RANK_PASS(cohort_all_reduce(g, f, out, 16, COHORT_FLOAT32, COHORT_SUM), g);
    RANK_PASS(cohort_barrier(g), g);
    /* an unknown status from a rank in the group: the generic ABORTED */
    if (rank == 0)
        RANK_CHECK(post_raw(g, "A 0 0:3 status zero") == COHORT_OK, "post");
    if (rank == 1) {
        /* waits for the record, not for a fixed time */
        double t0 = cht_now_ms(), bound = 10000 * cht_time_scale();
        while (!coh_group_poisoned(g)) {
            RANK_CHECK(cht_now_ms() - t0 < bound, "the record did not arrive in %.0f ms", bound);
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
        RANK_CHECK(coh_group_poisoned(g) == COHORT_ERR_ABORTED, "poisoned %d",
                   coh_group_poisoned(g));
        cohort_status st = cohort_barrier(g);
        RANK_CHECK(st == COHORT_ERR_ABORTED, "got %s: %s", cohort_status_name(st),
                   cohort_last_error(g));
        RANK_CHECK(strstr(cohort_last_error(g), "status zero"), "%s", cohort_last_error(g));
    }
    cohort_finalize(g);
    return 0;
}

START_TEST(garbage_records_in_the_store)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 30000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    cht_run_ranks(&o, rank_garbage, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* The state record a stall report reads (ctl_wire.h): its peer is followed
 * as an index through the ranks' waits, so anything outside the group is
 * refused rather than used. */
START_TEST(state_record_bounds)
{
    coh_ctl_state st;
    char err[96];
#define SP(str, size) coh_ctl_state_parse(str, strlen(str), size, &st, err, sizeof err)
    ck_assert_int_eq(SP("3 4 1 -1 40 a.c", 4), 0);
    ck_assert(st.last == 3 && st.seq == 4 && st.coll == 1 && st.peer == -1 && st.line == 40);
    ck_assert_str_eq(st.file, "a.c");
    ck_assert_int_eq(SP("7 0 0 -1 0 -", 4), 0); /* not in a call */
    ck_assert_int_eq(SP("5 6 11 3 52 dir with spaces/b.c", 4), 0);
    ck_assert_int_eq(st.peer, 3);
    ck_assert_str_eq(st.file, "dir with spaces/b.c");
    ck_assert_int_eq(SP("18446744073709551615 1 10 0 1 x", 2), 0);
    ck_assert(st.last == UINT64_MAX);
    static const char *bad[] = {
        "5 6 11 4 52 b.c",          /* peer == size */
        "5 6 11 1000000 52 b.c",    /* far outside: was an out-of-bounds index */
        "5 6 11 -2 52 b.c",
        "5 6 11 2147483648 52 b.c",
        "5 6 1 2 52 b.c",           /* a peer for a collective */
        "5 6 200 -1 52 b.c",        /* unknown operation */
        "18446744073709551616 1 1 -1 1 x", /* overflow */
        "-5 6 1 -1 52 b.c",
        "5 6 1 -1 -3 b.c",
        "5 6 1 -1 52 ",             /* no file */
        "5 6 1 -1",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(SP(bad[i], 4) == -1, "accepted '%s'", bad[i]);
    /* control bytes in the file become '?', and it is cut to 255 bytes */
    ck_assert_int_eq(SP("1 2 1 -1 3 a\x1b[2Jb\n", 4), 0);
    ck_assert_str_eq(st.file, "a?[2Jb?");
    char big[600];
    int o = snprintf(big, sizeof big, "1 2 1 -1 3 ");
    memset(big + o, 'f', sizeof big - (size_t)o - 1);
    big[sizeof big - 1] = 0;
    ck_assert_int_eq(SP(big, 4), 0);
    ck_assert_uint_eq(strlen(st.file), 255);
#undef SP
}
END_TEST

/* The fingerprint record of the out-of-band probe: every number within its
 * field's type (sscanf's %d was undefined on overflow). */
START_TEST(fp_record_bounds)
{
    coh_fp_record f;
    char err[96];
#define FP(str) coh_fp_record_parse(str, strlen(str), &f, err, sizeof err)
    ck_assert_int_eq(FP("1 7 1024 0 -1 0 40 my dir/a.c"), 0);
    ck_assert(f.coll == 1 && f.dtype == 7 && f.count == 1024 && f.redop == 0 && f.root == -1 &&
              f.tag == 0 && f.line == 40);
    ck_assert_str_eq(f.file, "my dir/a.c");
    ck_assert_int_eq(FP("255 255 18446744073709551615 -128 -2147483648 2147483647 2147483647 x"), 0);
    ck_assert(f.root == INT32_MIN && f.tag == INT32_MAX && f.redop == -128);
    static const char *bad[] = {
        "256 7 1 0 -1 0 40 a.c",
        "1 -1 1 0 -1 0 40 a.c",
        "1 7 18446744073709551616 0 -1 0 40 a.c",
        "1 7 1 128 -1 0 40 a.c",
        "1 7 1 0 -2147483649 0 40 a.c",
        "1 7 1 0 -1 2147483648 40 a.c",
        "1 7 1 0 -1 0 -40 a.c",
        "1 7 1 -0 -1 0 40 a.c",
        "1 7 1 0 -1 0 40",
        "1 7 1 0 -1 0 40 ",
        "1  7 1 0 -1 0 40 a.c",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(FP(bad[i]) == -1, "accepted '%s'", bad[i]);
#undef FP
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("ctl_wire");
    TCase *tc = tcase_create("ctl_wire");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, well_formed);
    tcase_add_test(tc, bad_call_number_names_no_call);
    tcase_add_test(tc, bad_rank_is_refused);
    tcase_add_test(tc, bad_status_is_aborted);
    tcase_add_test(tc, reason_is_bounded_and_printable);
    tcase_add_test(tc, state_record_bounds);
    tcase_add_test(tc, fp_record_bounds);
    cht_add_per_transport(tc, garbage_records_in_the_store);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
