/*
 * test_jsonl.c - the dump line parser and writers: round trips of every
 * enum value, the leniencies (unknown keys, numbers for names, CRLF), and
 * rejection with a reason for each kind of damage a dump can suffer
 * (truncation, garbage, wrong types, hostile nesting). Inputs are copied
 * into exact-size heap buffers so ASan catches any read past `len`.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../contract/group_util.h"
#include "support/support.h"
#include "trace/jsonl.h"

static coh_tl_line ln;
static char err[160];

/* Parses s from an exact-size, non-NUL-terminated heap copy. */
static int parse(const char *s)
{
    size_t n = strlen(s);
    char *b = calloc(1, n ? n : 1);
    memcpy(b, s, n);
    int k = coh_tl_parse(b, n, &ln, err, sizeof err);
    free(b);
    return k;
}

#define EXPECT_BAD(line, why)                                                                      \
    do {                                                                                           \
        ck_assert_int_eq(parse(line), COH_TL_INVALID);                                             \
        ck_assert_str_eq(err, why);                                                                \
    } while (0)

static const char *ENTRY =
    "{\"seq\":7,\"op\":\"all_reduce\",\"dtype\":\"float32\",\"count\":1024,\"redop\":\"sum\","
    "\"root\":-1,\"tag\":0,\"file\":\"train.c\",\"line\":88,\"state\":\"completed\","
    "\"status\":\"COHORT_OK\",\"t_issue_us\":1700000000000100,\"t_start_us\":1700000000000110,"
    "\"t_end_us\":1700000000000350}";

START_TEST(entry_fields)
{
    ck_assert_int_eq(parse(ENTRY), COH_TL_ENTRY);
    const coh_tl_entry *e = &ln.u.ent;
    ck_assert_uint_eq(e->seq, 7);
    ck_assert_int_eq(e->coll, COH_COLL_ALL_REDUCE);
    ck_assert_int_eq(e->dtype, COHORT_FLOAT32);
    ck_assert_uint_eq(e->count, 1024);
    ck_assert_int_eq(e->redop, COHORT_SUM);
    ck_assert_int_eq(e->root, -1);
    ck_assert_int_eq(e->tag, 0);
    ck_assert_str_eq(e->file, "train.c");
    ck_assert_int_eq(e->line, 88);
    ck_assert_int_eq(e->state, COH_ST_COMPLETED);
    ck_assert_int_eq(e->status, COHORT_OK);
    ck_assert_uint_eq(e->t_issue_us, 1700000000000100ull);
    ck_assert_uint_eq(e->t_start_us, 1700000000000110ull);
    ck_assert_uint_eq(e->t_end_us, 1700000000000350ull);
    cohort_fingerprint fp;
    coh_tl_entry_fp(e, 3, 2, &fp);
    ck_assert_uint_eq(fp.group, 3);
    ck_assert_uint_eq(fp.generation, 2);
    ck_assert_ptr_eq(fp.file, e->file);
}
END_TEST

START_TEST(header_and_contract)
{
    ck_assert_int_eq(parse("{\"cohort_trace\":1,\"job\":\"train-42\",\"rank\":3,\"size\":4,"
                           "\"generation\":1,\"group\":0,\"host\":\"node7\",\"pid\":4242,"
                           "\"reason\":\"SIGUSR1\",\"time_us\":1700000000123456,\"capacity\":2048,"
                           "\"recorded\":19}\n"),
                     COH_TL_HEADER);
    ck_assert_str_eq(ln.u.hdr.job, "train-42");
    ck_assert_int_eq(ln.u.hdr.rank, 3);
    ck_assert_int_eq(ln.u.hdr.size, 4);
    ck_assert_str_eq(ln.u.hdr.host, "node7");
    ck_assert_int_eq(ln.u.hdr.pid, 4242);
    ck_assert_str_eq(ln.u.hdr.reason, "SIGUSR1");
    ck_assert_uint_eq(ln.u.hdr.time_us, 1700000000123456ull);
    ck_assert_int_eq(ln.u.hdr.capacity, 2048);
    ck_assert_uint_eq(ln.u.hdr.recorded, 19);
    ck_assert_int_eq(parse("{\"cohort_contract\":1,\"rank\":2,\"generation\":4,\"group\":9,"
                           "\"detected\":\"x\"}\r\n"),
                     COH_TL_CONTRACT);
    ck_assert_int_eq(ln.u.con.rank, 2);
    ck_assert_uint_eq(ln.u.con.generation, 4);
    ck_assert_uint_eq(ln.u.con.group, 9);
    ck_assert_int_eq(ln.u.con.has_detected, 1);
    ck_assert_str_eq(ln.u.con.detected, "x");
    ck_assert_int_eq(parse("{\"cohort_contract\":1,\"rank\":0}"), COH_TL_CONTRACT);
    ck_assert_int_eq(ln.u.con.has_detected, 0);
}
END_TEST

START_TEST(round_trip_every_value)
{
    char buf[8192];
    for (int coll = 0; coll < COH_COLL_KIND_COUNT; coll++)
        for (int dt = 0; dt < COHORT_DTYPE_COUNT; dt++)
            for (int op = -1; op < COHORT_OP_COUNT; op++)
                for (int st = COH_ST_ISSUED; st <= COH_ST_FAILED; st++) {
                    coh_trace_entry e;
                    memset(&e, 0, sizeof e);
                    e.call = cht_call((uint64_t)coll * 1000 + (uint64_t)dt, coll, dt, op, dt - 1,
                                     -op, UINT64_MAX - (uint64_t)st, "a/b.c", dt);
                    e.state = st;
                    e.status = (dt + op + 1) % 14;
                    e.t_issue_us = UINT64_MAX;
                    e.t_start_us = 1;
                    size_t n = coh_tl_fmt_entry(buf, sizeof buf, &e);
                    ck_assert_uint_lt(n, sizeof buf);
                    ck_assert_int_eq(buf[n - 1], '\n');
                    ck_assert_int_eq(coh_tl_parse(buf, n, &ln, err, sizeof err), COH_TL_ENTRY);
                    const coh_tl_entry *p = &ln.u.ent;
                    ck_assert_uint_eq(p->seq, e.call.seq);
                    ck_assert_int_eq(p->coll, coll);
                    ck_assert_int_eq(p->dtype, dt);
                    ck_assert_int_eq(p->redop, op);
                    ck_assert_int_eq(p->root, e.call.root);
                    ck_assert_int_eq(p->tag, e.call.tag);
                    ck_assert_uint_eq(p->count, e.call.count);
                    ck_assert_int_eq(p->state, st);
                    ck_assert_int_eq(p->status, e.status);
                    ck_assert_uint_eq(p->t_issue_us, UINT64_MAX);
                    ck_assert_str_eq(p->file, "a/b.c");
                }
    coh_tl_header h;
    memset(&h, 0, sizeof h);
    snprintf(h.job, sizeof h.job, "j\"ob");
    h.rank = 5, h.size = 6, h.generation = UINT32_MAX, h.group = 12, h.pid = 99;
    memset(h.reason, 'r', sizeof h.reason - 1); /* the longest reason fits */
    h.reason[10] = '\n';
    snprintf(h.host, sizeof h.host, "h\\ost");
    h.time_us = 5, h.capacity = 7, h.recorded = 8;
    size_t n = coh_tl_fmt_header(buf, sizeof buf, &h);
    ck_assert_uint_lt(n, sizeof buf);
    ck_assert_int_eq(coh_tl_parse(buf, n, &ln, err, sizeof err), COH_TL_HEADER);
    ck_assert_str_eq(ln.u.hdr.job, h.job);
    ck_assert_str_eq(ln.u.hdr.host, h.host);
    ck_assert_str_eq(ln.u.hdr.reason, h.reason);
    ck_assert_uint_eq(ln.u.hdr.generation, UINT32_MAX);
    coh_tl_contract c;
    memset(&c, 0, sizeof c);
    c.rank = 1, c.has_detected = 1;
    snprintf(c.detected, sizeof c.detected, "all_reduce #7: \"x\"");
    n = coh_tl_fmt_contract(buf, sizeof buf, &c);
    ck_assert_int_eq(coh_tl_parse(buf, n, &ln, err, sizeof err), COH_TL_CONTRACT);
    ck_assert_str_eq(ln.u.con.detected, c.detected);
    /* A too-small buffer: snprintf-style length, NUL-terminated. */
    char small[16];
    n = coh_tl_fmt_contract(small, sizeof small, &c);
    ck_assert_uint_ge(n, sizeof small);
    ck_assert_uint_lt(strlen(small), sizeof small);
}
END_TEST

START_TEST(leniencies)
{
    /* Key order, spacing, unknown keys (any nesting), numbers for names,
     * null redop, a later duplicate winning. */
    ck_assert_int_eq(parse("  { \"future\" : {\"a\":[1,{\"b\":null}],\"c\":true} , \"op\" : 9 ,"
                           " \"seq\" : 1 , \"seq\" : 2 , \"dtype\" : 3 , \"redop\" : null ,"
                           " \"x\":-1.5e3, \"y\":false }  \r\n"),
                     COH_TL_ENTRY);
    ck_assert_uint_eq(ln.u.ent.seq, 2);
    ck_assert_int_eq(ln.u.ent.coll, COH_COLL_BARRIER);
    ck_assert_int_eq(ln.u.ent.dtype, COHORT_UINT32);
    ck_assert_int_eq(ln.u.ent.redop, -1);
    ck_assert_int_eq(ln.u.ent.root, -1); /* defaults */
    ck_assert_str_eq(ln.u.ent.file, "");
    /* Escapes, \u with surrogate pairs, NUL shown as '?'. */
    ck_assert_int_eq(parse("{\"seq\":1,\"op\":\"send\",\"file\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t"
                           "\\u00e9\\ud83d\\ude00\\u0000\"}"),
                     COH_TL_ENTRY);
    ck_assert_str_eq(ln.u.ent.file, "a\"b\\c/d\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80?");
    /* Long strings are cut to the field, never inside a UTF-8 sequence. */
    char big[2048];
    int o = snprintf(big, sizeof big, "{\"seq\":1,\"op\":\"send\",\"file\":\"x");
    for (int i = 0; i < 300; i++)
        o += snprintf(big + o, sizeof big - (size_t)o, "\xc3\xa9");
    snprintf(big + o, sizeof big - (size_t)o, "\"}");
    ck_assert_int_eq(parse(big), COH_TL_ENTRY);
    ck_assert_uint_eq(strlen(ln.u.ent.file), 255);
    ck_assert_int_eq((unsigned char)ln.u.ent.file[254], 0xa9);
    /* An object with nothing we know: invalid, with a reason. */
    EXPECT_BAD("{}", "byte 2: neither a header nor an entry (no \"cohort_trace\", or no "
                     "\"seq\"/\"op\")");
}
END_TEST

START_TEST(damage)
{
    EXPECT_BAD("", "byte 0: empty line");
    EXPECT_BAD("   \n", "byte 4: empty line");
    EXPECT_BAD("[1,2]", "byte 0: expected '{'");
    EXPECT_BAD("garbage", "byte 0: expected '{'");
    EXPECT_BAD("{\"seq\":7,\"op\":\"all_re", "byte 21: unterminated string");
    EXPECT_BAD("{\"seq\":7,\"op\":\"all_reduce\"", "byte 26: unterminated object (truncated line?)");
    EXPECT_BAD("{\"seq\":7,\"op\":\"all_reduce\",", "byte 27: expected '\"'");
    EXPECT_BAD("{\"seq\":7,\"op\":", "byte 14: expected a value");
    EXPECT_BAD("{\"seq\" 7}", "byte 7: expected ':'");
    EXPECT_BAD("{\"seq\":7 \"op\":1}", "byte 9: expected ',' or '}'");
    EXPECT_BAD("{\"seq\":7,\"op\":1}x", "byte 16: garbage after the object");
    EXPECT_BAD("{\"seq\":7,\"op\":1}{\"seq\":8,\"op\":1}", "byte 16: garbage after the object");
    EXPECT_BAD("{\"seq\":-1,\"op\":1}", "byte 9: \"seq\": expected an unsigned integer");
    EXPECT_BAD("{\"seq\":1.5,\"op\":1}", "byte 10: \"seq\": expected an unsigned integer");
    EXPECT_BAD("{\"seq\":99999999999999999999,\"op\":1}",
               "byte 27: \"seq\": expected an unsigned integer");
    EXPECT_BAD("{\"seq\":\"7\",\"op\":1}", "byte 10: \"seq\": expected an unsigned integer");
    EXPECT_BAD("{\"seq\":1,\"op\":\"allreduce\"}", "byte 25: \"op\": unknown value \"allreduce\"");
    EXPECT_BAD("{\"seq\":1,\"op\":99}", "byte 16: \"op\": out of range");
    EXPECT_BAD("{\"seq\":1,\"op\":1,\"dtype\":\"fp33\"}", "byte 30: \"dtype\": unknown value \"fp33\"");
    EXPECT_BAD("{\"seq\":1,\"op\":1,\"root\":-2}", "byte 25: \"root\": out of range");
    EXPECT_BAD("{\"seq\":1,\"op\":1,\"line\":3000000000}", "byte 33: \"line\": out of range");
    EXPECT_BAD("{\"seq\":1,\"op\":1,\"state\":\"done\"}", "byte 30: \"state\": unknown value \"done\"");
    EXPECT_BAD("{\"seq\":1,\"op\":1,\"file\":7}", "byte 24: \"file\": expected a string");
    EXPECT_BAD("{\"seq\":1,\"op\":1,\"file\":[\"a\"]}", "byte 28: \"file\": unexpected object or array");
    EXPECT_BAD("{\"seq\":1,\"op\":\"a\x01\"}", "byte 17: control character in string");
    EXPECT_BAD("{\"seq\":1,\"op\":\"\\q\"}", "byte 17: bad escape");
    EXPECT_BAD("{\"seq\":1,\"op\":\"\\u12\"}", "byte 17: bad \\u escape");
    EXPECT_BAD("{\"seq\":1,\"op\":\"\\ud800x\"}", "byte 21: lone surrogate in \\u escape");
    EXPECT_BAD("{\"seq\":1,\"op\":\"\\udc00\"}", "byte 21: lone surrogate in \\u escape");
    EXPECT_BAD("{\"seq\":1,\"op\":tru}", "byte 14: invalid literal");
    EXPECT_BAD("{\"seq\":1,\"op\":-}", "byte 15: bad number");
    EXPECT_BAD("{\"seq\":1,\"op\":1.}", "byte 16: bad number");
    EXPECT_BAD("{\"seq\":1,\"op\":1e}", "byte 16: bad number");
    EXPECT_BAD("{\"cohort_trace\":1,\"rank\":4,\"size\":4}",
               "byte 36: header: \"rank\" is not below \"size\"");
    EXPECT_BAD("{\"cohort_trace\":1,\"rank\":0}", "byte 27: header without \"rank\" and \"size\"");
    EXPECT_BAD("{\"cohort_contract\":1}", "byte 21: contract history without \"rank\"");
    EXPECT_BAD("{\"cohort_trace\":0,\"rank\":0,\"size\":1}", "byte 17: \"cohort_trace\": out of range");
    /* NUL bytes inside a line are just bad bytes. */
    char nul[] = "{\"seq\":1,\0\"op\":1}";
    ck_assert_int_eq(coh_tl_parse(nul, sizeof nul - 1, &ln, err, sizeof err), COH_TL_INVALID);
    ck_assert_str_eq(err, "byte 9: expected '\"'");
    /* No error buffer is fine; NULL input with len 0 is an empty line. */
    ck_assert_int_eq(coh_tl_parse("x", 1, &ln, NULL, 0), COH_TL_INVALID);
    ck_assert_int_eq(coh_tl_parse(NULL, 5, &ln, err, sizeof err), COH_TL_INVALID);
    ck_assert_str_eq(err, "byte 0: empty line");
}
END_TEST

START_TEST(hostile_nesting)
{
    /* Deep nesting under an unknown key is refused without recursion
     * blowing the stack. */
    size_t depth = 100000;
    char *s = malloc(depth * 2 + 64);
    size_t o = (size_t)sprintf(s, "{\"seq\":1,\"op\":1,\"x\":");
    for (size_t i = 0; i < depth; i++)
        s[o++] = '[';
    for (size_t i = 0; i < depth; i++)
        s[o++] = ']';
    s[o++] = '}';
    s[o] = 0;
    ck_assert_int_eq(parse(s), COH_TL_INVALID);
    ck_assert_str_eq(err, "byte 52: nested too deep");
    free(s);
    /* 32 levels are fine. */
    ck_assert_int_eq(parse("{\"seq\":1,\"op\":1,\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]"
                           "]]]]]]]]]]]]]]]]]]]}"),
                     COH_TL_ENTRY);
}
END_TEST

START_TEST(writer_escapes)
{
    char buf[256];
    size_t pos = 0;
    cohort_json_str(buf, sizeof buf, &pos, "a\"\\\n\t\r\x01\x7f\xff\xc3\xa9\xe2\x82");
    ck_assert_str_eq(buf, "\"a\\\"\\\\\\n\\t\\r\\u0001\x7f\\u00ff\xc3\xa9\\u00e2\\u0082\"");
    ck_assert_uint_eq(pos, strlen(buf));
    /* Overlong encodings and surrogates are not UTF-8 either. */
    pos = 0;
    cohort_json_str(buf, sizeof buf, &pos, "\xc0\xaf\xed\xa0\x80");
    ck_assert_str_eq(buf, "\"\\u00c0\\u00af\\u00ed\\u00a0\\u0080\"");
    /* Cut output stays terminated; pos counts what was needed. */
    char tiny[4];
    pos = 0;
    cohort_json_str(tiny, sizeof tiny, &pos, "abcdef");
    ck_assert_uint_eq(pos, 8);
    ck_assert_uint_lt(strlen(tiny), sizeof tiny);
    pos = 0;
    cohort_json_str(buf, sizeof buf, &pos, NULL);
    ck_assert_str_eq(buf, "\"\"");
    /* 4-byte UTF-8 passes; past U+10FFFF, truncated and lone lead bytes
     * do not; NUL bytes inside a counted string become \u0000. */
    pos = 0;
    cohort_json_strn(buf, sizeof buf, &pos, "\xf0\x9f\x98\x80|\xf4\x90\x80\x80|\xf0\x9f|\x00\x1f", 15);
    ck_assert_str_eq(buf, "\"\xf0\x9f\x98\x80|\\u00f4\\u0090\\u0080\\u0080|\\u00f0\\u009f|"
                          "\\u0000\\u001f\"");
    /* The FILE writer writes the same bytes, never cut. */
    char *mem = NULL;
    size_t memlen = 0;
    FILE *f = open_memstream(&mem, &memlen);
    ck_assert_ptr_nonnull(f);
    cohort_json_fputs(f, "a\"\\\n\t\r\x01\x7f\xff\xc3\xa9\xe2\x82");
    fclose(f);
    ck_assert_str_eq(mem, "\"a\\\"\\\\\\n\\t\\r\\u0001\x7f\\u00ff\xc3\xa9\\u00e2\\u0082\"");
    free(mem);
    /* Public API (cohort_json.h): bad arguments do nothing or only measure. */
    cohort_json_str(buf, sizeof buf, NULL, "x"); /* no pos: nothing */
    cohort_json_fputs(NULL, "x");                /* no FILE: nothing */
    cohort_json_fputn(NULL, NULL, 5);
    pos = 0;
    cohort_json_strn(NULL, 100, &pos, "ab\n", 3); /* no buffer: measures */
    ck_assert_uint_eq(pos, 6);
    pos = 0;
    cohort_json_strn(buf, sizeof buf, &pos, NULL, 7); /* NULL bytes: "" */
    ck_assert_str_eq(buf, "\"\"");
    pos = 0;
    cohort_json_str(buf, 0, &pos, "abc"); /* buflen 0: measures */
    ck_assert_uint_eq(pos, 5);
}
END_TEST

START_TEST(long_file_keeps_tail)
{
    char path[600], buf[4096];
    memset(path, 'd', sizeof path);
    memcpy(path + sizeof path - 12, "/deep/last.c", 12);
    path[sizeof path - 1] = 0; /* "...ddd/deep/last." */
    memcpy(path + sizeof path - 8, "/last.c", 8);
    coh_trace_entry e;
    memset(&e, 0, sizeof e);
    e.call = cht_call(1, COH_COLL_BARRIER, 0, -1, -1, 0, 0, path, 1);
    size_t n = coh_tl_fmt_entry(buf, sizeof buf, &e);
    ck_assert_int_eq(coh_tl_parse(buf, n, &ln, err, sizeof err), COH_TL_ENTRY);
    ck_assert_uint_eq(strlen(ln.u.ent.file), 255);
    ck_assert_str_eq(coh_site_base(ln.u.ent.file), "last.c");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("jsonl");
    TCase *t = tcase_create("parse");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, entry_fields);
    tcase_add_test(t, header_and_contract);
    tcase_add_test(t, round_trip_every_value);
    tcase_add_test(t, leniencies);
    tcase_add_test(t, damage);
    tcase_add_test(t, hostile_nesting);
    tcase_add_test(t, writer_escapes);
    tcase_add_test(t, long_file_keeps_tail);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
