/*
 * test_analyze.c - the cross-rank contract analysis (coh_contract_analyze,
 * coh_contract_diverge, cohort_validate_fingerprints): every field, majority
 * and ties, missing and lagging ranks, histories shifted both ways, large
 * groups, hostile input. Messages are compared in full: they are a user
 * contract quoted in docs/contract.md.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hist_util.h"
#include "support/support.h"

static char out[COH_ERRLEN];

static int analyze(th_world *w)
{
    memset(out, 0x5a, sizeof out);
    return coh_contract_analyze(w->h, w->n, out, sizeof out);
}

#define EXPECT_REPORT(w, found, text)                                                              \
    do {                                                                                           \
        int f_ = analyze(w);                                                                       \
        ck_assert_msg(f_ == (found), "found=%d, report: %s", f_, out);                             \
        ck_assert_str_eq(out, text);                                                               \
    } while (0)

/* ---- one field differs, with a majority ---- */

START_TEST(count_differs_same_site)
{
    th_world w = th_make(4, 7);
    th_at(&w, 3, 7)->count = 512;
    EXPECT_REPORT(&w, 1,
                  "all_reduce #7 (train.c:88): count differs: ranks 0-2 have 1024, rank 3 has "
                  "512 - look at rank 3's call at train.c:88");
    coh_divergence d;
    unsigned char odd[4];
    ck_assert_int_eq(coh_contract_diverge(w.h, 4, &d, odd), 1);
    ck_assert_int_eq(d.kind, COH_DIV_FIELD);
    ck_assert_int_eq(d.field, COH_FIELD_COUNT);
    ck_assert_uint_eq(d.seq, 7);
    ck_assert_int_eq(d.has_majority, 1);
    ck_assert_int_eq(d.ref_rank, 0);
    ck_assert(!odd[0] && !odd[1] && !odd[2] && odd[3]);
    th_free(&w);
}
END_TEST

START_TEST(count_differs_other_site)
{
    th_world w = th_make(4, 7);
    th_at(&w, 3, 7)->count = 512;
    th_at(&w, 3, 7)->line = 90;
    EXPECT_REPORT(&w, 1,
                  "all_reduce #7 (train.c:88): count differs: ranks 0-2 have 1024, rank 3 has "
                  "512 - look at rank 3's call at train.c:90 (a different call site: an extra or a "
                  "skipped call? check the control flow that led there)");
    th_free(&w);
}
END_TEST

START_TEST(odd_rank_first)
{
    /* The odd rank is rank 0: the majority is named first anyway. */
    th_world w = th_make(5, 3);
    th_at(&w, 0, 3)->count = 7;
    EXPECT_REPORT(&w, 1,
                  "all_reduce #3 (train.c:88): count differs: ranks 1-4 have 1024, rank 0 has 7 "
                  "- look at rank 0's call at train.c:88");
    th_free(&w);
}
END_TEST

/* One test per field: (field, mutate, expected report). */
typedef struct field_case {
    const char *name;
    void (*mutate)(cohort_fingerprint *all, cohort_fingerprint *odd);
    const char *want;
} field_case;

static void m_dtype(cohort_fingerprint *a, cohort_fingerprint *o)
{
    (void)a;
    o->dtype = COHORT_FLOAT64;
}
static void m_op(cohort_fingerprint *a, cohort_fingerprint *o)
{
    (void)a;
    o->coll = COH_COLL_ALL_GATHER;
    o->redop = -1;
}
static void m_redop(cohort_fingerprint *a, cohort_fingerprint *o)
{
    (void)a;
    o->redop = COHORT_MAX;
}
static void m_root(cohort_fingerprint *a, cohort_fingerprint *o)
{
    for (int r = 0; r < 4; r++) {
        a[r].coll = COH_COLL_BROADCAST;
        a[r].redop = -1;
        a[r].root = 0;
    }
    o->root = 2;
}
static void m_peer(cohort_fingerprint *a, cohort_fingerprint *o)
{
    for (int r = 0; r < 4; r++) {
        a[r].coll = COH_COLL_SEND;
        a[r].redop = -1;
        a[r].root = 1;
    }
    o->root = 2;
}
static void m_tag(cohort_fingerprint *a, cohort_fingerprint *o)
{
    for (int r = 0; r < 4; r++) {
        a[r].coll = COH_COLL_SEND;
        a[r].redop = -1;
        a[r].root = 1;
        a[r].tag = 5;
    }
    o->tag = 6;
}
static void m_group(cohort_fingerprint *a, cohort_fingerprint *o)
{
    (void)a;
    o->group = 7;
}
static void m_gen(cohort_fingerprint *a, cohort_fingerprint *o)
{
    (void)a;
    o->generation = 2;
}
static void m_redop_none(cohort_fingerprint *a, cohort_fingerprint *o)
{
    (void)a;
    o->redop = -1;
}
static void m_bad_values(cohort_fingerprint *a, cohort_fingerprint *o)
{
    (void)a;
    o->dtype = 99; /* from a corrupt or future peer: printed, never indexed */
}

static const field_case field_cases[] = {
    {"dtype", m_dtype,
     "all_reduce #7 (train.c:88): dtype differs: ranks 0-2 have float32, rank 3 has float64 - "
     "look at rank 3's call at train.c:88"},
    {"op", m_op,
     "all_reduce #7 (train.c:88): op differs: ranks 0-2 have all_reduce, rank 3 has all_gather "
     "- look at rank 3's call at train.c:88"},
    {"redop", m_redop,
     "all_reduce #7 (train.c:88): reduce op differs: ranks 0-2 have sum, rank 3 has max - look "
     "at rank 3's call at train.c:88"},
    {"root", m_root,
     "broadcast #7 (train.c:88): root differs: ranks 0-2 have 0, rank 3 has 2 - look at rank 3's "
     "call at train.c:88"},
    {"peer", m_peer,
     "send #7 (train.c:88): peer differs: ranks 0-2 have 1, rank 3 has 2 - look at rank 3's call "
     "at train.c:88"},
    {"tag", m_tag,
     "send #7 (train.c:88): tag differs: ranks 0-2 have 5, rank 3 has 6 - look at rank 3's call "
     "at train.c:88"},
    {"group", m_group,
     "all_reduce #7 (train.c:88): group id differs: ranks 0-2 have 0, rank 3 has 7 - look at "
     "rank 3's call at train.c:88"},
    {"generation", m_gen,
     "all_reduce #7 (train.c:88): generation differs: ranks 0-2 have 1, rank 3 has 2 - look at "
     "rank 3's call at train.c:88"},
    {"redop_none", m_redop_none,
     "all_reduce #7 (train.c:88): reduce op differs: ranks 0-2 have sum, rank 3 has none - look "
     "at rank 3's call at train.c:88"},
    {"invalid_dtype", m_bad_values,
     "all_reduce #7 (train.c:88): dtype differs: ranks 0-2 have float32, rank 3 has invalid "
     "dtype 99 - look at rank 3's call at train.c:88"},
};

START_TEST(each_field)
{
    const field_case *fc = &field_cases[_i];
    th_world w = th_make(4, 7);
    cohort_fingerprint at7[4];
    for (int r = 0; r < 4; r++)
        at7[r] = *th_at(&w, r, 7);
    fc->mutate(at7, &at7[3]);
    for (int r = 0; r < 4; r++)
        *th_at(&w, r, 7) = at7[r];
    int f = analyze(&w);
    ck_assert_msg(f == 1, "%s: not found: %s", fc->name, out);
    ck_assert_msg(!strcmp(out, fc->want), "%s:\n got: %s\nwant: %s", fc->name, out, fc->want);
    th_free(&w);
}
END_TEST

START_TEST(several_values)
{
    th_world w = th_make(6, 7);
    th_at(&w, 4, 7)->count = 512;
    th_at(&w, 5, 7)->count = 256;
    th_at(&w, 5, 7)->line = 93;
    EXPECT_REPORT(&w, 1,
                  "all_reduce #7 (train.c:88): count differs: ranks 0-3 have 1024, rank 4 has "
                  "512, rank 5 has 256 - look at the calls of rank 4 (train.c:88), rank 5 "
                  "(train.c:93) (a different call site: an extra or a skipped call? check the "
                  "control flow that led there)");
    th_free(&w);
}
END_TEST

START_TEST(several_fields_headline_first)
{
    /* Rank 2's count and rank 3's dtype differ: the headline is the first
     * field in report order (dtype), the rest is named. */
    th_world w = th_make(6, 7);
    th_at(&w, 2, 7)->count = 3;
    th_at(&w, 3, 7)->dtype = COHORT_FLOAT64;
    EXPECT_REPORT(&w, 1,
                  "all_reduce #7 (train.c:88): dtype differs: ranks 0-2,4-5 have float32, rank 3 "
                  "has float64 (also differs: count) - look at the calls of rank 2 (train.c:88), "
                  "rank 3 (train.c:88)");
    th_free(&w);
}
END_TEST

START_TEST(odd_group_of_several)
{
    th_world w = th_make(8, 4);
    th_at(&w, 1, 4)->dtype = COHORT_INT32;
    th_at(&w, 6, 4)->dtype = COHORT_INT32;
    th_at(&w, 7, 4)->dtype = COHORT_INT32;
    EXPECT_REPORT(&w, 1,
                  "all_reduce #4 (train.c:91): dtype differs: ranks 0,2-5 have float32, ranks "
                  "1,6-7 have int32 - look at the calls of ranks 1,6-7 at train.c:91");
    th_free(&w);
}
END_TEST

/* ---- ties: nobody is blamed ---- */

START_TEST(tie_two_ranks)
{
    th_world w = th_make(2, 7);
    th_at(&w, 1, 7)->count = 512;
    th_at(&w, 1, 7)->line = 90;
    EXPECT_REPORT(&w, 1,
                  "all_reduce #7: count differs: rank 0 has 1024 (train.c:88), rank 1 has 512 "
                  "(train.c:90) - no majority, so no rank is blamed: compare the call sites");
    coh_divergence d;
    unsigned char odd[2];
    ck_assert_int_eq(coh_contract_diverge(w.h, 2, &d, odd), 1);
    ck_assert_int_eq(d.has_majority, 0);
    ck_assert_int_eq(d.ref_rank, 0);
    ck_assert(!odd[0] && odd[1]);
    th_free(&w);
}
END_TEST

START_TEST(tie_two_by_two_op)
{
    th_world w = th_make(4, 7);
    for (int r = 2; r < 4; r++) {
        *th_at(&w, r, 7) = th_fp(7, COH_COLL_BARRIER, 0, 95);
    }
    EXPECT_REPORT(&w, 1,
                  "call #7: op differs: ranks 0-1 have all_reduce (train.c:88), ranks 2-3 have "
                  "barrier (train.c:95) - no majority, so no rank is blamed: compare the call "
                  "sites");
    th_free(&w);
}
END_TEST

START_TEST(tie_three_ways)
{
    th_world w = th_make(3, 2);
    th_at(&w, 1, 2)->count = 1;
    th_at(&w, 2, 2)->count = 2;
    EXPECT_REPORT(&w, 1,
                  "all_reduce #2: count differs: rank 0 has 2048 (train.c:91), rank 1 has 1 "
                  "(train.c:91), rank 2 has 2 (train.c:91) - no majority, so no rank is blamed: "
                  "compare the call sites");
    th_free(&w);
}
END_TEST

START_TEST(tie_mixed_sites_in_group)
{
    th_world w = th_make(4, 1);
    th_at(&w, 1, 1)->line = 70; /* same contract, other line: not a difference */
    th_at(&w, 2, 1)->count = 5;
    th_at(&w, 3, 1)->count = 5;
    EXPECT_REPORT(&w, 1,
                  "all_reduce #1: count differs: ranks 0-1 have 1024 (different call sites), "
                  "ranks 2-3 have 5 (train.c:88) - no majority, so no rank is blamed: compare the "
                  "call sites");
    th_free(&w);
}
END_TEST

/* ---- shifted histories (the lesson's Q1) ---- */

START_TEST(extra_call)
{
    /* Ranks 0-2: ..., #7 all_reduce@88, #8 all_reduce@91 (async, queued).
     * Rank 3: ..., #7 barrier@95 (extra), #8 all_reduce@88, #9 all_reduce@91. */
    th_world w = th_make(4, 7);
    for (int r = 0; r < 3; r++)
        th_append(&w, r, th_loop(8, 8));
    *th_at(&w, 3, 7) = th_fp(7, COH_COLL_BARRIER, 0, 95);
    th_append(&w, 3, th_loop(8, 7));
    th_append(&w, 3, th_loop(9, 8));
    EXPECT_REPORT(&w, 1,
                  "rank 3 made an extra call: barrier #7 (train.c:95) where ranks 0-2 called "
                  "all_reduce #7 (train.c:88); the calls after it are misaligned");
    coh_divergence d;
    ck_assert_int_eq(coh_contract_diverge(w.h, 4, &d, NULL), 1);
    ck_assert_int_eq(d.kind, COH_DIV_EXTRA);
    th_free(&w);
}
END_TEST

/* Three distinct calls per iteration: A@88 (1024), B@91 (2048), C@95 (16). */
static cohort_fingerprint abc(uint64_t seq, int k)
{
    switch (k % 3) {
    case 1: return th_fp(seq, COH_COLL_ALL_REDUCE, 1024, 88);
    case 2: return th_fp(seq, COH_COLL_ALL_REDUCE, 2048, 91);
    default: return th_fp(seq, COH_COLL_BROADCAST, 16, 95);
    }
}

START_TEST(skipped_call)
{
    /* Ranks 0-2: #7 A, #8 B, #9 C (async). Rank 3 skipped A: #7 B, #8 C. */
    th_world w = th_make(4, 9);
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 9; i++)
            w.h[r].fp[i] = abc((uint64_t)i + 1, i + 1);
    *th_at(&w, 3, 7) = abc(7, 8);
    *th_at(&w, 3, 8) = abc(8, 9);
    w.h[3].n = 8;
    EXPECT_REPORT(&w, 1,
                  "rank 3 skipped all_reduce #7 (train.c:88): its #7 is all_reduce (train.c:91), "
                  "which ranks 0-2 called as #8; the calls after it are misaligned");
    coh_divergence d;
    ck_assert_int_eq(coh_contract_diverge(w.h, 4, &d, NULL), 1);
    ck_assert_int_eq(d.kind, COH_DIV_SKIPPED);
    th_free(&w);
}
END_TEST

START_TEST(skipped_blocking_peer_view)
{
    /* Rank 3 skipped #7 and sits in #7 = the others' #8; the others queued
     * #8 (async) before failing: one shifted pair is enough evidence. */
    th_world w = th_make(4, 8);
    *th_at(&w, 3, 7) = th_loop(7, 8);
    w.h[3].n = 7;
    EXPECT_REPORT(&w, 1,
                  "rank 3 skipped all_reduce #7 (train.c:88): its #7 is all_reduce (train.c:91), "
                  "which ranks 0-2 called as #8; the calls after it are misaligned");
    th_free(&w);
}
END_TEST

START_TEST(same_contract_skip_without_majority_at_divergence)
{
    /* The e2e case under load: rank 3 skipped #4 (line 94), whose contract
     * equals #5 (line 96), so nothing failed at #4. Ranks 0-1 were caught
     * by the abort inside #4 and never reached #5; at #5 only ranks 2 (96)
     * and 3 (barrier, 98) are present - no majority there. The call sites
     * already split at #4 with one (0-2 at 94, 3 at 96): the report must
     * still say rank 3 skipped #4. */
    th_world w = th_make(4, 0);
    for (int r = 0; r < 4; r++)
        for (uint64_t q = 1; q <= 3; q++)
            th_append(&w, r, th_fp(q, COH_COLL_ALL_REDUCE, 16, 51));
    for (int r = 0; r < 3; r++)
        th_append(&w, r, th_fp(4, COH_COLL_ALL_REDUCE, 1024, 94));
    th_append(&w, 2, th_fp(5, COH_COLL_ALL_REDUCE, 1024, 96));
    th_append(&w, 3, th_fp(4, COH_COLL_ALL_REDUCE, 1024, 96));
    th_append(&w, 3, th_fp(5, COH_COLL_BARRIER, 0, 98));
    coh_divergence d;
    ck_assert_int_eq(coh_contract_diverge(w.h, 4, &d, NULL), 1);
    ck_assert_int_eq(d.kind, COH_DIV_SKIPPED);
    ck_assert_int_eq((int)d.seq, 4);
    char out[1024];
    coh_contract_analyze(w.h, 4, out, sizeof out);
    ck_assert_msg(strstr(out, "rank 3 skipped all_reduce #4 (train.c:94)"), "%s", out);
    th_free(&w);
}
END_TEST

START_TEST(shift_direction_ambiguous)
{
    /* A loop of two calls (88, 91): skipping 88 and adding a 91 give the
     * same stream afterwards; both readings are named. */
    th_world w = th_make(4, 9);
    for (int i = 7; i <= 8; i++)
        *th_at(&w, 3, (uint64_t)i) = th_loop((uint64_t)i, (uint64_t)i + 1);
    w.h[3].n = 8;
    EXPECT_REPORT(&w, 1,
                  "rank 3 is one call out of step from #7: it skipped all_reduce #7 (train.c:88), "
                  "or its all_reduce #7 (train.c:91) is an extra call; the calls after it are "
                  "misaligned");
    coh_divergence d;
    ck_assert_int_eq(coh_contract_diverge(w.h, 4, &d, NULL), 1);
    ck_assert_int_eq(d.kind, COH_DIV_SHIFTED);
    th_free(&w);
}
END_TEST

START_TEST(skipped_by_several)
{
    th_world w = th_make(7, 8);
    for (int r = 4; r < 7; r++) {
        *th_at(&w, r, 7) = th_loop(7, 8);
        w.h[r].n = 7;
    }
    EXPECT_REPORT(&w, 1,
                  "ranks 4-6 skipped all_reduce #7 (train.c:88): their #7 is all_reduce "
                  "(train.c:91), which ranks 0-3 called as #8; the calls after it are misaligned");
    th_free(&w);
}
END_TEST

START_TEST(blocking_skip_without_lookahead)
{
    /* Blocking calls: nobody got past #7, so a shift cannot be proven; the
     * differing call site points at the control flow instead of blaming
     * the count. */
    th_world w = th_make(4, 7);
    *th_at(&w, 3, 7) = th_loop(7, 8);
    EXPECT_REPORT(&w, 1,
                  "all_reduce #7 (train.c:88): count differs: ranks 0-2 have 1024, rank 3 has "
                  "2048 - look at rank 3's call at train.c:91 (a different call site: an extra or a "
                  "skipped call? check the control flow that led there)");
    th_free(&w);
}
END_TEST

START_TEST(shift_ambiguous_falls_back)
{
    /* Every call identical: an extra call looks like both shifts; no claim
     * is made that cannot be told apart, the field report stands. */
    th_world w = th_make(3, 6);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < w.h[r].n; i++)
            w.h[r].fp[i] = th_fp((uint64_t)i + 1, COH_COLL_ALL_REDUCE, 8, 10);
    *th_at(&w, 2, 3) = th_fp(3, COH_COLL_BARRIER, 0, 11);
    EXPECT_REPORT(&w, 1,
                  "all_reduce #3 (train.c:10): op differs: ranks 0-1 have all_reduce, rank 2 has "
                  "barrier - look at rank 2's call at train.c:11 "
                  "(a different call site: an extra or a skipped call? check the control flow "
                  "that led there)");
    th_free(&w);
}
END_TEST

START_TEST(shift_needs_matching_sites)
{
    /* Rank 3's later calls match the others' shifted contracts but from
     * other lines: not proof of a shift. */
    th_world w = th_make(4, 7);
    for (int r = 0; r < 3; r++)
        th_append(&w, r, th_loop(8, 8));
    *th_at(&w, 3, 7) = th_fp(7, COH_COLL_BARRIER, 0, 95);
    cohort_fingerprint f = th_loop(8, 7);
    f.line = 200;
    th_append(&w, 3, f);
    int found = analyze(&w);
    ck_assert_int_eq(found, 1);
    ck_assert_msg(!strncmp(out, "all_reduce #7 (train.c:88): op differs:", 39), "%s", out);
    th_free(&w);
}
END_TEST

/* ---- missing and lagging ranks ---- */

START_TEST(missing_and_behind)
{
    th_world w = th_make(6, 7);
    th_at(&w, 3, 7)->count = 512;
    th_missing(&w, 5);
    w.h[4].n = 5; /* stopped after #5 */
    EXPECT_REPORT(&w, 1,
                  "all_reduce #7 (train.c:88): count differs: ranks 0-2 have 1024, rank 3 has "
                  "512 - look at rank 3's call at train.c:88; no history from rank 5; rank 4 did "
                  "not reach #7 (its last call: #5 all_reduce at train.c:88)");
    th_free(&w);
}
END_TEST

START_TEST(no_divergence)
{
    th_world w = th_make(4, 7);
    EXPECT_REPORT(&w, 0, "no divergence in calls #1-#7");
    coh_divergence d;
    unsigned char odd[4] = {9, 9, 9, 9};
    ck_assert_int_eq(coh_contract_diverge(w.h, 4, &d, odd), 0);
    ck_assert_int_eq(d.kind, COH_DIV_NONE);
    ck_assert(!odd[0] && !odd[1] && !odd[2] && !odd[3]);
    th_free(&w);
}
END_TEST

START_TEST(no_divergence_with_gaps)
{
    th_world w = th_make(5, 7);
    th_missing(&w, 1);
    th_missing(&w, 2);
    w.h[3].n = 0; /* answered, no calls */
    w.h[4].n = 6;
    EXPECT_REPORT(&w, 0,
                  "no divergence in calls #1-#6; no history from ranks 1-2; rank 3 made no calls "
                  "yet; rank 4 did not reach #7 (its last call: #6 all_reduce at train.c:91)");
    th_free(&w);
}
END_TEST

START_TEST(everybody_missing)
{
    th_world w = th_make(3, 2);
    for (int r = 0; r < 3; r++)
        th_missing(&w, r);
    EXPECT_REPORT(&w, 0, "no common calls to compare; no history from ranks 0-2");
    th_free(&w);
}
END_TEST

START_TEST(windows_do_not_overlap)
{
    th_world w = th_make(2, 32);
    /* rank 0 kept #1-#16, rank 1 #17-#32 */
    w.h[0].n = 16;
    memmove(w.h[1].fp, w.h[1].fp + 16, 16 * sizeof(cohort_fingerprint));
    w.h[1].n = 16;
    EXPECT_REPORT(&w, 0,
                  "no common calls to compare; rank 0 did not reach #32 (its last call: #16 "
                  "all_reduce at train.c:91)");
    th_free(&w);
}
END_TEST

START_TEST(unsorted_and_duplicate_records)
{
    /* Order is not relied on; a later record of the same seq wins. */
    th_world w = th_make(3, 5);
    cohort_fingerprint tmp = w.h[1].fp[0];
    w.h[1].fp[0] = w.h[1].fp[4];
    w.h[1].fp[4] = tmp;
    cohort_fingerprint stale = *th_at(&w, 2, 3);
    stale.count = 99;
    w.h[2].fp[w.h[2].n] = w.h[2].fp[2];    /* #3 again, correct, last */
    w.h[2].fp[2] = stale;                  /* an older, wrong record of #3 */
    w.h[2].n++;
    EXPECT_REPORT(&w, 0, "no divergence in calls #1-#5");
    th_free(&w);
}
END_TEST

START_TEST(first_divergence_wins)
{
    th_world w = th_make(4, 9);
    th_at(&w, 1, 4)->redop = COHORT_MIN;
    th_at(&w, 2, 8)->count = 1;
    EXPECT_REPORT(&w, 1,
                  "all_reduce #4 (train.c:91): reduce op differs: ranks 0,2-3 have sum, rank 1 "
                  "has min - look at rank 1's call at train.c:91");
    th_free(&w);
}
END_TEST

/* ---- large groups ---- */

START_TEST(large_group_one_odd)
{
    const int n = 4096;
    th_world w = th_make(n, 3);
    th_at(&w, 1234, 3)->count = 512;
    th_missing(&w, 4000);
    EXPECT_REPORT(&w, 1,
                  "all_reduce #3 (train.c:88): count differs: ranks 0-1233,1235-3999,4001-4095 "
                  "have 1024, rank 1234 has 512 - look at rank 1234's call at train.c:88; no "
                  "history from rank 4000");
    th_free(&w);
}
END_TEST

START_TEST(large_group_many_values)
{
    /* 10000 ranks, every odd rank has its own count: the report lists a
     * few and counts the rest, and stays within the buffer. */
    const int n = 10000;
    th_world w = th_make(n, 1);
    for (int r = 1; r < n; r += 2)
        w.h[r].fp[0].count = (uint64_t)r;
    int f = analyze(&w);
    ck_assert_int_eq(f, 1);
    ck_assert_msg(!strncmp(out,
                           "all_reduce #1 (train.c:88): count differs: ranks 0,2,4,6,8,10,12,14,"
                           "16,18,",
                           69),
                  "%s", out);
    ck_assert_msg(strstr(out, "and 4995 more ranks with 4995 other values"), "%s", out);
    ck_assert_uint_lt(strlen(out), sizeof out);
    th_free(&w);
}
END_TEST

START_TEST(large_group_tie)
{
    const int n = 2048;
    th_world w = th_make(n, 2);
    for (int r = n / 2; r < n; r++)
        th_at(&w, r, 2)->dtype = COHORT_BFLOAT16;
    int f = analyze(&w);
    ck_assert_int_eq(f, 1);
    ck_assert_msg(strstr(out, "ranks 0-1023 have float32 (train.c:91), ranks 1024-2047 have ") &&
                      strstr(out, "no majority"),
                  "%s", out);
    th_free(&w);
}
END_TEST

/* ---- robustness ---- */

START_TEST(small_buffers)
{
    th_world w = th_make(4, 7);
    th_at(&w, 3, 7)->count = 512;
    size_t full = (analyze(&w), strlen(out));
    for (size_t len = 1; len < full + 20; len++) {
        char *b = malloc(len);
        coh_contract_analyze(w.h, 4, b, len);
        ck_assert_uint_lt(strlen(b), len);
        if (len > 4 && len <= full) /* a cut is visible */
            ck_assert_str_eq(b + strlen(b) - 3, "...");
        if (len > full)
            ck_assert_str_eq(b, out);
        free(b);
    }
    ck_assert_int_eq(coh_contract_analyze(w.h, 4, NULL, 0), 1);
    th_free(&w);
}
END_TEST

START_TEST(degenerate_inputs)
{
    char b[64];
    ck_assert_int_eq(coh_contract_analyze(NULL, 3, b, sizeof b), 0);
    ck_assert_str_eq(b, "no histories to compare");
    th_world w = th_make(1, 3);
    ck_assert_int_eq(coh_contract_analyze(w.h, 0, b, sizeof b), 0);
    ck_assert_int_eq(coh_contract_analyze(w.h, 1, b, sizeof b), 0);
    ck_assert_str_eq(b, "no common calls to compare");
    th_free(&w);
}
END_TEST

START_TEST(oom_is_reported)
{
    th_world w = th_make(4, 7);
    th_at(&w, 3, 7)->count = 512;
    /* Fail each allocation in turn: a message, never a crash. */
    for (long k = 0; k < 12; k++) {
        coh_alloc_fail_after(k);
        int f = analyze(&w);
        coh_alloc_fail_after(-1);
        ck_assert_msg(f == 1 || !strcmp(out, "contract analysis: out of memory"), "%ld: %s", k,
                      out);
    }
    th_free(&w);
}
END_TEST

/* ---- cohort_validate_fingerprints: the lesson's validate_collective ---- */

static void lesson_calls(cohort_fingerprint *by, int n)
{
    /* ("all_reduce", 1024, "fp16", 7) on every rank, no call sites. */
    for (int r = 0; r < n; r++) {
        memset(&by[r], 0, sizeof by[r]);
        by[r].seq = 7;
        by[r].coll = COH_COLL_ALL_REDUCE;
        by[r].dtype = COHORT_FLOAT16;
        by[r].redop = COHORT_SUM;
        by[r].root = -1;
        by[r].count = 1024;
        by[r].generation = 1;
    }
}

START_TEST(validate_ok)
{
    cohort_fingerprint by[4];
    char msg[256] = "junk";
    lesson_calls(by, 4);
    ck_assert_int_eq(cohort_validate_fingerprints(by, 4, msg, sizeof msg), COHORT_OK);
    ck_assert_str_eq(msg, "");
    /* One rank is trivially consistent (the lesson's boundary input). */
    ck_assert_int_eq(cohort_validate_fingerprints(by, 1, msg, sizeof msg), COHORT_OK);
    /* Different call sites alone are not a contract difference. */
    by[2].file = "a.c";
    by[2].line = 3;
    ck_assert_int_eq(cohort_validate_fingerprints(by, 4, NULL, 0), COHORT_OK);
}
END_TEST

START_TEST(validate_lesson_bad)
{
    cohort_fingerprint by[4];
    char msg[256];
    lesson_calls(by, 4);
    by[3].count = 512;
    ck_assert_int_eq(cohort_validate_fingerprints(by, 4, msg, sizeof msg), COHORT_ERR_CONTRACT);
    ck_assert_str_eq(msg, "all_reduce #7: count differs: ranks 0-2 have 1024, rank 3 has 512 - "
                          "look at rank 3's call");
}
END_TEST

START_TEST(validate_seq)
{
    cohort_fingerprint by[4];
    char msg[256];
    lesson_calls(by, 4);
    by[0].seq = 8;
    by[0].file = "train.c";
    by[0].line = 91;
    ck_assert_int_eq(cohort_validate_fingerprints(by, 4, msg, sizeof msg), COHORT_ERR_CONTRACT);
    ck_assert_str_eq(msg, "all_reduce #7: sequence number differs: ranks 1-3 have #7, rank 0 has "
                          "#8 - look at rank 0's call at train.c:91");
}
END_TEST

START_TEST(validate_tie_and_sites)
{
    cohort_fingerprint by[2];
    char msg[256];
    lesson_calls(by, 2);
    by[0].file = "x/train.c", by[0].line = 88;
    by[1].file = "y/train.c", by[1].line = 90;
    by[1].dtype = COHORT_BFLOAT16;
    ck_assert_int_eq(cohort_validate_fingerprints(by, 2, msg, sizeof msg), COHORT_ERR_CONTRACT);
    ck_assert_str_eq(msg, "all_reduce #7: dtype differs: rank 0 has float16 (train.c:88), rank 1 "
                          "has bfloat16 (train.c:90) - no majority, so no rank is blamed: compare "
                          "the call sites");
}
END_TEST

START_TEST(validate_invalid)
{
    char msg[128];
    cohort_fingerprint by[1];
    lesson_calls(by, 1);
    ck_assert_int_eq(cohort_validate_fingerprints(NULL, 4, msg, sizeof msg), COHORT_ERR_INVALID);
    ck_assert_str_eq(msg, "cohort_validate_fingerprints: empty process group (n = 4)");
    ck_assert_int_eq(cohort_validate_fingerprints(by, 0, msg, sizeof msg), COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_validate_fingerprints(by, -3, NULL, 0), COHORT_ERR_INVALID);
}
END_TEST

START_TEST(validate_large)
{
    const int n = 5000;
    cohort_fingerprint *by = calloc((size_t)n, sizeof *by);
    lesson_calls(by, n);
    char msg[512];
    ck_assert_int_eq(cohort_validate_fingerprints(by, n, msg, sizeof msg), COHORT_OK);
    by[4999].root = 3;
    ck_assert_int_eq(cohort_validate_fingerprints(by, n, msg, sizeof msg), COHORT_ERR_CONTRACT);
    ck_assert_str_eq(msg, "all_reduce #7: root differs: ranks 0-4998 have none, rank 4999 has 3 "
                          "- look at rank 4999's call");
    free(by);
}
END_TEST

/* ---- names ---- */

START_TEST(names)
{
    ck_assert_str_eq(coh_coll_name(COH_COLL_ALL_REDUCE), "all_reduce");
    ck_assert_str_eq(coh_coll_name(COH_COLL_REDUCE_SCATTER), "reduce_scatter");
    ck_assert_str_eq(coh_coll_name(-1), "unknown_op");
    ck_assert_str_eq(coh_coll_name(200), "unknown_op");
    for (int c = 0; c < COH_COLL_KIND_COUNT; c++)
        ck_assert_int_eq(coh_coll_from_name(coh_coll_name(c)), c);
    ck_assert_int_eq(coh_coll_from_name("allreduce"), -1);
    ck_assert_str_eq(coh_field_name(COH_FIELD_COUNT), "count");
    ck_assert_str_eq(coh_field_name(COH_FIELD_REDOP), "reduce op");
    ck_assert_str_eq(coh_field_name(COH_FIELD_STEP), "algorithm step");
    ck_assert_str_eq(coh_field_name(99), "unknown field");
    for (int d = 0; d < COHORT_DTYPE_COUNT; d++)
        ck_assert_int_eq(coh_dtype_from_name(coh_dtype_str(d)), d);
    ck_assert_str_eq(coh_dtype_str(-1), "invalid_dtype");
    ck_assert_str_eq(coh_dtype_str(COHORT_FLOAT32), "float32");
    for (int o = -1; o < COHORT_OP_COUNT; o++)
        ck_assert_int_eq(coh_redop_from_name(coh_redop_str(o)), o);
    ck_assert_str_eq(coh_redop_str(COHORT_SUM), "sum");
    ck_assert_int_eq(coh_redop_from_name("nope"), -2);
    ck_assert_int_eq(coh_status_from_name("COHORT_ERR_CONTRACT"), COHORT_ERR_CONTRACT);
    ck_assert_int_eq(coh_status_from_name("COHORT_OK"), COHORT_OK);
    ck_assert_int_eq(coh_status_from_name("nope"), -1);
    ck_assert_str_eq(coh_site_base("/a/b/train.c"), "train.c");
    ck_assert_str_eq(coh_site_base("train.c"), "train.c");
    ck_assert_str_eq(coh_site_base(NULL), "?");
    ck_assert_uint_eq(coh_site_hash("/a/train.c", 88), coh_site_hash("/other/train.c", 88));
    ck_assert_uint_ne(coh_site_hash("train.c", 88), coh_site_hash("train.c", 89));
    ck_assert_uint_ne(coh_site_hash("train.c", 88), coh_site_hash("model.c", 88));
    ck_assert(coh_site_equal("/x/a.c", 3, "a.c", 3));
    ck_assert(!coh_site_equal("/x/a.c", 3, "a.c", 4));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("contract_analyze");
    TCase *t = tcase_create("fields");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, count_differs_same_site);
    tcase_add_test(t, count_differs_other_site);
    tcase_add_test(t, odd_rank_first);
    tcase_add_loop_test(t, each_field, 0, (int)(sizeof field_cases / sizeof field_cases[0]));
    tcase_add_test(t, several_values);
    tcase_add_test(t, several_fields_headline_first);
    tcase_add_test(t, odd_group_of_several);
    suite_add_tcase(s, t);

    t = tcase_create("ties");
    tcase_add_test(t, tie_two_ranks);
    tcase_add_test(t, tie_two_by_two_op);
    tcase_add_test(t, tie_three_ways);
    tcase_add_test(t, tie_mixed_sites_in_group);
    suite_add_tcase(s, t);

    t = tcase_create("shifted");
    tcase_add_test(t, extra_call);
    tcase_add_test(t, skipped_call);
    tcase_add_test(t, skipped_blocking_peer_view);
    tcase_add_test(t, same_contract_skip_without_majority_at_divergence);
    tcase_add_test(t, shift_direction_ambiguous);
    tcase_add_test(t, skipped_by_several);
    tcase_add_test(t, blocking_skip_without_lookahead);
    tcase_add_test(t, shift_ambiguous_falls_back);
    tcase_add_test(t, shift_needs_matching_sites);
    suite_add_tcase(s, t);

    t = tcase_create("gaps");
    tcase_add_test(t, missing_and_behind);
    tcase_add_test(t, no_divergence);
    tcase_add_test(t, no_divergence_with_gaps);
    tcase_add_test(t, everybody_missing);
    tcase_add_test(t, windows_do_not_overlap);
    tcase_add_test(t, unsorted_and_duplicate_records);
    tcase_add_test(t, first_divergence_wins);
    suite_add_tcase(s, t);

    t = tcase_create("large");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, large_group_one_odd);
    tcase_add_test(t, large_group_many_values);
    tcase_add_test(t, large_group_tie);
    suite_add_tcase(s, t);

    t = tcase_create("robust");
    tcase_add_test(t, small_buffers);
    tcase_add_test(t, degenerate_inputs);
    tcase_add_test(t, oom_is_reported);
    suite_add_tcase(s, t);

    t = tcase_create("validate");
    tcase_add_test(t, validate_ok);
    tcase_add_test(t, validate_lesson_bad);
    tcase_add_test(t, validate_seq);
    tcase_add_test(t, validate_tie_and_sites);
    tcase_add_test(t, validate_invalid);
    tcase_add_test(t, validate_large);
    tcase_add_test(t, names);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
