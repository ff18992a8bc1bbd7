/*
 * test_trace_api.c - cohort_trace.h, what cohort-trace is built on: parsing
 * dump lines (good, damaged, truncated at every byte, NULL), fingerprints of
 * entries, the history analysis (agreement, a field that differs, an extra
 * call, a missing rank, bad arguments) and the names. Public headers only.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "cohort.h"
#include "cohort_trace.h"
#include "support/support.h"

static const char HDR[] =
    "{\"cohort_trace\":1,\"job\":\"train-42\",\"rank\":3,\"size\":4,\"generation\":2,"
    "\"group\":5,\"host\":\"node7\",\"pid\":4242,\"reason\":\"SIGUSR1\","
    "\"time_us\":1700000000123456,\"capacity\":2048,\"recorded\":19}\n";
static const char ENT[] =
    "{\"seq\":7,\"op\":\"all_reduce\",\"dtype\":\"float32\",\"count\":1024,\"redop\":\"sum\","
    "\"root\":-1,\"tag\":0,\"file\":\"src/train.c\",\"line\":88,\"state\":\"completed\","
    "\"status\":\"COHORT_OK\",\"t_issue_us\":1700000000000100,\"t_start_us\":1700000000000110,"
    "\"t_end_us\":1700000000000350}\r\n";

static cohort_trace_line ln;
static char err[160];

START_TEST(parses_header_and_entry)
{
    ck_assert_int_eq(cohort_trace_parse_line(HDR, sizeof HDR - 1, &ln, err, sizeof err),
                     COHORT_TRACE_HEADER);
    ck_assert_int_eq(ln.kind, COHORT_TRACE_HEADER);
    ck_assert_str_eq(ln.hdr.job, "train-42");
    ck_assert_int_eq(ln.hdr.rank, 3);
    ck_assert_int_eq(ln.hdr.size, 4);
    ck_assert_uint_eq(ln.hdr.generation, 2);
    ck_assert_uint_eq(ln.hdr.group, 5);
    ck_assert_str_eq(ln.hdr.host, "node7");
    ck_assert_int_eq(ln.hdr.pid, 4242);
    ck_assert_str_eq(ln.hdr.reason, "SIGUSR1");
    ck_assert_int_eq(ln.hdr.capacity, 2048);
    ck_assert_uint_eq(ln.hdr.recorded, 19);

    ck_assert_int_eq(cohort_trace_parse_line(ENT, sizeof ENT - 1, &ln, NULL, 0),
                     COHORT_TRACE_ENTRY);
    const cohort_trace_entry *e = &ln.ent;
    ck_assert_uint_eq(e->seq, 7);
    ck_assert_int_eq(e->coll, COHORT_CALL_ALL_REDUCE);
    ck_assert_int_eq(e->dtype, COHORT_FLOAT32);
    ck_assert_int_eq(e->redop, COHORT_SUM);
    ck_assert_uint_eq(e->count, 1024);
    ck_assert_int_eq(e->root, -1);
    ck_assert_str_eq(e->file, "src/train.c");
    ck_assert_int_eq(e->line, 88);
    ck_assert_int_eq(e->state, COHORT_CALL_COMPLETED);
    ck_assert_int_eq(e->status, COHORT_OK);
    ck_assert_uint_eq(e->t_end_us - e->t_issue_us, 250);

    cohort_fingerprint fp;
    cohort_trace_entry_fingerprint(e, 5, 2, &fp);
    ck_assert_uint_eq(fp.seq, 7);
    ck_assert_int_eq(fp.coll, COHORT_CALL_ALL_REDUCE);
    ck_assert_uint_eq(fp.count, 1024);
    ck_assert_uint_eq(fp.group, 5);
    ck_assert_uint_eq(fp.generation, 2);
    ck_assert_ptr_eq(fp.file, e->file);
    ck_assert_int_eq(fp.line, 88);
    cohort_trace_entry_fingerprint(NULL, 0, 0, &fp); /* nothing */
    cohort_trace_entry_fingerprint(e, 0, 0, NULL);

    /* A contract history line is valid, but neither. */
    static const char con[] = "{\"cohort_contract\":1,\"rank\":0}";
    ck_assert_int_eq(cohort_trace_parse_line(con, sizeof con - 1, &ln, err, sizeof err),
                     COHORT_TRACE_OTHER);
}
END_TEST

START_TEST(refuses_bad_lines)
{
    static const char *const bad[] = {"", "\n", "{", "not json", "{\"seq\":1}", "[1,2]",
                                      "{\"seq\":-1,\"op\":\"all_reduce\"}",
                                      "{\"seq\":1,\"op\":\"no_such_op\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        ck_assert_msg(cohort_trace_parse_line(bad[i], strlen(bad[i]), &ln, err, sizeof err) ==
                          COHORT_TRACE_INVALID,
                      "'%s' parsed", bad[i]);
        ck_assert_int_eq(ln.kind, COHORT_TRACE_INVALID);
        ck_assert_msg(err[0], "no reason for '%s'", bad[i]);
    }
    /* Every truncation of a good line, from a heap copy of exactly that
     * length (ASan catches a read past len): a record or a reason, no crash. */
    for (size_t n = 0; n < sizeof ENT - 3; n++) {
        char *c = malloc(n ? n : 1);
        memcpy(c, ENT, n);
        ck_assert_int_eq(cohort_trace_parse_line(c, n, &ln, err, sizeof err),
                         COHORT_TRACE_INVALID);
        free(c);
    }
    /* Garbage bytes, NULs included. */
    unsigned char junk[512];
    unsigned s = 12345;
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (unsigned char)((s = s * 1103515245u + 12345u) >> 16);
        junk[0] = '{';
        int k = cohort_trace_parse_line((const char *)junk, sizeof junk, &ln, NULL, 0);
        ck_assert(k >= COHORT_TRACE_INVALID && k <= COHORT_TRACE_OTHER);
    }
    /* NULL arguments. */
    ck_assert_int_eq(cohort_trace_parse_line(NULL, 5, &ln, err, sizeof err), COHORT_TRACE_INVALID);
    ck_assert_str_eq(err, "NULL line");
    ck_assert_int_eq(cohort_trace_parse_line(ENT, sizeof ENT - 1, NULL, err, sizeof err),
                     COHORT_TRACE_INVALID);
    ck_assert_int_eq(cohort_trace_parse_line(NULL, 0, NULL, NULL, 0), COHORT_TRACE_INVALID);
    /* A tiny err buffer is cut, terminated. */
    char tiny[4];
    ck_assert_int_eq(cohort_trace_parse_line("{", 1, &ln, tiny, sizeof tiny),
                     COHORT_TRACE_INVALID);
    ck_assert_uint_lt(strlen(tiny), sizeof tiny);
}
END_TEST

/* n calls of all_reduce(count) from seq 1, group 0 generation 1. */
static void calls(cohort_fingerprint *fp, int n, uint64_t count)
{
    for (int i = 0; i < n; i++) {
        memset(&fp[i], 0, sizeof fp[i]);
        fp[i].seq = (uint64_t)i + 1;
        fp[i].coll = COHORT_CALL_ALL_REDUCE;
        fp[i].dtype = COHORT_FLOAT32;
        fp[i].redop = COHORT_SUM;
        fp[i].root = -1;
        fp[i].count = count;
        fp[i].generation = 1;
        fp[i].file = "train.c";
        fp[i].line = 10 + i;
    }
}

START_TEST(analysis)
{
    cohort_fingerprint a[3][4];
    cohort_trace_history h[3];
    for (int r = 0; r < 3; r++) {
        calls(a[r], 4, 1024);
        h[r].n = 4;
        h[r].fp = a[r];
    }
    char rep[2048];
    cohort_trace_divergence d;
    unsigned char odd[3];
    ck_assert_int_eq(cohort_trace_analyze(h, 3, rep, sizeof rep, &d, odd), 0);
    ck_assert_int_eq(d.kind, COHORT_TRACE_DIV_NONE);
    ck_assert_str_eq(d.field, "");
    ck_assert(!odd[0] && !odd[1] && !odd[2]);
    ck_assert_msg(rep[0], "no summary");

    /* Rank 2's third call has another count: the majority blames it. */
    a[2][2].count = 512;
    ck_assert_int_eq(cohort_trace_analyze(h, 3, rep, sizeof rep, &d, odd), 1);
    ck_assert_int_eq(d.kind, COHORT_TRACE_DIV_FIELD);
    ck_assert_uint_eq(d.seq, 3);
    ck_assert_str_eq(d.field, "count");
    ck_assert_int_eq(d.has_majority, 1);
    ck_assert_int_ne(d.ref_rank, 2);
    ck_assert(!odd[0] && !odd[1] && odd[2]);
    ck_assert_msg(strstr(rep, "512") && strstr(rep, "1024") && strstr(rep, "rank 2"), "%s", rep);
    /* Optional outputs may be NULL; a short report buffer is cut. */
    ck_assert_int_eq(cohort_trace_analyze(h, 3, NULL, 0, NULL, NULL), 1);
    char small[16];
    ck_assert_int_eq(cohort_trace_analyze(h, 3, small, sizeof small, NULL, NULL), 1);
    ck_assert_uint_lt(strlen(small), sizeof small);
    a[2][2].count = 1024;

    /* Rank 1 made an extra call before the others' third. */
    cohort_fingerprint x[5];
    calls(x, 5, 1024);
    x[2].coll = COHORT_CALL_BARRIER;
    x[2].dtype = 0;
    x[2].count = 0;
    x[2].redop = -1;
    for (int i = 3; i < 5; i++)
        x[i].count = 1024;
    h[1].n = 5;
    h[1].fp = x;
    ck_assert_int_eq(cohort_trace_analyze(h, 3, rep, sizeof rep, &d, odd), 1);
    ck_assert(odd[1] && !odd[0] && !odd[2]);
    ck_assert_int_ne(d.kind, COHORT_TRACE_DIV_NONE);
    h[1].n = 4;
    h[1].fp = a[1];

    /* A missing rank (no dump) is not a divergence; the summary names it. */
    h[0].fp = NULL;
    h[0].n = 0;
    ck_assert_int_eq(cohort_trace_analyze(h, 3, rep, sizeof rep, &d, odd), 0);
    ck_assert_msg(strstr(rep, "0"), "%s", rep);
    h[0].n = 4;
    h[0].fp = a[0];

    /* Bad arguments. */
    ck_assert_int_eq(cohort_trace_analyze(NULL, 3, rep, sizeof rep, &d, odd), -1);
    ck_assert_int_eq(cohort_trace_analyze(h, 0, rep, sizeof rep, &d, odd), -1);
    ck_assert_int_eq(cohort_trace_analyze(h, -2, rep, sizeof rep, &d, odd), -1);
    h[1].n = -1;
    ck_assert_int_eq(cohort_trace_analyze(h, 3, rep, sizeof rep, &d, odd), -1);
    h[1].n = 2;
    h[1].fp = NULL;
    ck_assert_int_eq(cohort_trace_analyze(h, 3, rep, sizeof rep, &d, odd), -1);
}
END_TEST

START_TEST(names)
{
    ck_assert_str_eq(cohort_call_kind_name(COHORT_CALL_ALL_REDUCE), "all_reduce");
    ck_assert_str_eq(cohort_call_kind_name(COHORT_CALL_RECV), "recv");
    ck_assert_str_eq(cohort_call_kind_name(-1), "unknown_op");
    ck_assert_str_eq(cohort_call_kind_name(1000), "unknown_op");
    ck_assert_str_eq(cohort_call_state_name(COHORT_CALL_FAILED), "failed");
    ck_assert_str_eq(cohort_call_state_name(COHORT_CALL_ISSUED), "issued");
    ck_assert_str_eq(cohort_call_state_name(99), "unknown");
    ck_assert_str_eq(cohort_trace_dtype_name(COHORT_FLOAT32), "float32");
    ck_assert_str_eq(cohort_trace_dtype_name(-5), "invalid_dtype");
    ck_assert_str_eq(cohort_trace_redop_name(COHORT_SUM), "sum");
    ck_assert_str_eq(cohort_trace_redop_name(-1), "none");
    ck_assert_str_eq(cohort_trace_redop_name(77), "invalid_op");
    ck_assert_str_eq(cohort_trace_site("/a/b/train.c"), "train.c");
    ck_assert_str_eq(cohort_trace_site("train.c"), "train.c");
    ck_assert_str_eq(cohort_trace_site(""), "?");
    ck_assert_str_eq(cohort_trace_site(NULL), "?");

    char out[32];
    int r[] = {0, 1, 2, 5, 7, 8};
    cohort_trace_format_ranks(out, sizeof out, r, 6);
    ck_assert_str_eq(out, "0-2,5,7-8");
    cohort_trace_format_ranks(out, 4, r, 6); /* cut, terminated */
    ck_assert_uint_lt(strlen(out), 4);
    cohort_trace_format_ranks(out, sizeof out, NULL, 3);
    ck_assert_str_eq(out, "");
    cohort_trace_format_ranks(out, sizeof out, r, -1);
    ck_assert_str_eq(out, "");
    out[0] = 'x';
    cohort_trace_format_ranks(out, 0, r, 6); /* no room: nothing written */
    ck_assert_int_eq(out[0], 'x');
    cohort_trace_format_ranks(NULL, 10, r, 6);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("trace_api");
    TCase *t = tcase_create("api");
    tcase_add_test(t, parses_header_and_entry);
    tcase_add_test(t, refuses_bad_lines);
    tcase_add_test(t, analysis);
    tcase_add_test(t, names);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(make_suite)
