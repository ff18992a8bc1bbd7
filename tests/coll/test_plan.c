/*
 * test_plan.c - the partition and schedule arithmetic of src/coll/plan.c,
 * checked by brute force against the properties the algorithms rely on.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll_int.h"
#include "support/support.h"

/* Blocks tile [0, count) in order, lengths differ by at most one, longer
 * ones first. */
START_TEST(test_blocks)
{
    for (int n = 1; n <= 17; n++)
        for (size_t count = 0; count <= 70; count++) {
            size_t pos = 0, mn = SIZE_MAX, mx = 0;
            for (int b = 0; b < n; b++) {
                ck_assert_uint_eq(coh_blk_off(count, n, b), pos);
                size_t l = coh_blk_len(count, n, b);
                if (b > 0)
                    ck_assert_uint_le(l, coh_blk_len(count, n, b - 1));
                pos += l;
                mn = l < mn ? l : mn;
                mx = l > mx ? l : mx;
            }
            ck_assert_uint_eq(pos, count);
            ck_assert_uint_eq(coh_blk_off(count, n, n), count);
            ck_assert_uint_le(mx - mn, 1);
        }
    /* large counts do not overflow */
    size_t big = (size_t)1 << 40;
    ck_assert_uint_eq(coh_blk_off(big + 3, 4, 4), big + 3);
}
END_TEST

START_TEST(test_pieces_and_chunks)
{
    ck_assert_uint_eq(coh_npieces(0, 8), 0);
    ck_assert_uint_eq(coh_npieces(1, 8), 1);
    ck_assert_uint_eq(coh_npieces(8, 8), 1);
    ck_assert_uint_eq(coh_npieces(9, 8), 2);
    /* chunk bytes below one element still make progress */
    ck_assert_uint_eq(coh_chunk_elems(3, 8, 100, 4), 1);
    ck_assert_uint_eq(coh_chunk_elems(4096, 4, 100, 4), 1024);
    /* step numbers stay below 2^32: rounds * pieces fits */
    size_t huge = (size_t)1 << 40;
    for (int rounds = 1; rounds <= 4096; rounds *= 4) {
        size_t ce = coh_chunk_elems(1, 1, huge, rounds);
        ck_assert_uint_le((uint64_t)coh_npieces(huge, ce) * (uint64_t)rounds, UINT32_MAX);
    }
}
END_TEST

/* The tree broadcast's piece plan (coh_tree_bcast_plan): with 2 members one
 * piece up to COH_BC_ONE_PIECE_MAX bytes, even pieces up to COH_BC_GATE_MIN,
 * above it up to COH_BC_GATE_MAX an eager first piece and the rest gated,
 * even pieces again above that; even pieces at any other
 * member count, for tree_rdv (gated) and whenever COHORT_CHUNK_BYTES is set
 * (not gated). */
START_TEST(test_tree_bcast_plan)
{
    const size_t K = 256 << 10, M = COH_BC_ONE_PIECE_MAX, G = COH_BC_GATE_MIN,
                 X = COH_BC_GATE_MAX, E = COH_BC_EAGER_BYTES;
    const size_t sizes[] = {1,     4096,  K,       K + 1, M - 1,    M,       M + 1,
                            G - 1, G,     G + 1,   4 << 20, X - 1,  X,       X + 1,
                            16 << 20, 64 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t b = sizes[i];
        coh_bc_plan p = coh_tree_bcast_plan(K, 0, 2, 0, b);
        if (b <= M) {
            ck_assert_uint_eq(p.first, b);
            ck_assert_uint_eq(p.piece, b);
            ck_assert_int_eq(p.rdv, 0);
            ck_assert_uint_eq(coh_bc_plan_pieces(&p, b), 1);
        } else if (b <= G || b > X) {
            ck_assert(p.first == K && p.piece == K && !p.rdv);
            ck_assert_uint_eq(coh_bc_plan_pieces(&p, b), (b + K - 1) / K);
        } else {
            ck_assert_uint_eq(p.first, E);
            ck_assert_uint_eq(p.piece, b - E);
            ck_assert_int_eq(p.rdv, 1);
            ck_assert_uint_eq(coh_bc_plan_pieces(&p, b), 2);
        }
        size_t even = (b + K - 1) / K;
        for (int n = 3; n <= 8; n++) {
            p = coh_tree_bcast_plan(K, 0, n, 0, b);
            ck_assert(p.first == K && p.piece == K && !p.rdv);
            ck_assert_uint_eq(coh_bc_plan_pieces(&p, b), even);
        }
        p = coh_tree_bcast_plan(K, 0, 2, 1, b); /* tree_rdv */
        ck_assert(p.first == K && p.piece == K && p.rdv);
        ck_assert_uint_eq(coh_bc_plan_pieces(&p, b), even);
        p = coh_tree_bcast_plan(K, 1, 2, 0, b); /* the knob set */
        ck_assert(p.first == K && p.piece == K && !p.rdv);
        ck_assert_uint_eq(coh_bc_plan_pieces(&p, b), even);
        p = coh_tree_bcast_plan(64, 1, 2, 0, b);
        ck_assert_uint_eq(coh_bc_plan_pieces(&p, b), (b + 63) / 64);
    }
    /* a set knob larger than the message: one piece */
    coh_bc_plan p = coh_tree_bcast_plan(4 * M, 1, 2, 0, M + 1);
    ck_assert_uint_eq(coh_bc_plan_pieces(&p, M + 1), 1);
    ck_assert_uint_eq(coh_bc_plan_pieces(&p, 0), 0);
    /* the step-number bound still holds for even pieces */
    size_t huge = (size_t)1 << 40;
    p = coh_tree_bcast_plan(1, 1, 2, 0, huge);
    ck_assert_uint_le((uint64_t)coh_bc_plan_pieces(&p, huge) * 32, UINT32_MAX);
}
END_TEST

/* The fold maps the members that stay in onto 0..p-1 bijectively, and each
 * even member below 2*extra pairs with the odd one above it. */
START_TEST(test_fold)
{
    for (int n = 1; n <= 70; n++) {
        int p = coh_pof2(n);
        ck_assert_int_le(p, n);
        ck_assert_int_gt(2 * p, n);
        ck_assert_int_eq(p & (p - 1), 0);
        int seen[128] = {0}, in = 0;
        for (int r = 0; r < n; r++) {
            int v = coh_fold_vrank(r, n);
            if (v < 0) {
                ck_assert_int_eq(r % 2, 0);
                ck_assert_int_lt(r, 2 * (n - p));
                ck_assert_int_ge(coh_fold_vrank(r + 1, n), 0);
                continue;
            }
            ck_assert_int_lt(v, p);
            ck_assert(!seen[v]);
            seen[v] = 1;
            in++;
            ck_assert_int_eq(coh_fold_real(v, n), r);
        }
        ck_assert_int_eq(in, p);
    }
}
END_TEST

/* Recursive halving: in every round, partners split their common window
 * into two halves and each keeps the half holding its own block; after
 * log2(p) rounds the window is the member's block alone. */
START_TEST(test_halving_windows)
{
    for (int p = 1; p <= 64; p *= 2) {
        int L = coh_ilog2((unsigned)p);
        for (int v = 0; v < p; v++) {
            int lo, hi;
            coh_rh_window(v, p, 0, &lo, &hi);
            ck_assert(lo == 0 && hi == p);
            for (int k = 0; k < L; k++) {
                int pv = v ^ (p >> (k + 1)), a, b, pa, pb, na, nb, qa, qb;
                coh_rh_window(v, p, k, &a, &b);
                coh_rh_window(pv, p, k, &pa, &pb);
                ck_assert(a == pa && b == pb); /* same window before the round */
                coh_rh_window(v, p, k + 1, &na, &nb);
                coh_rh_window(pv, p, k + 1, &qa, &qb);
                ck_assert(na >= a && nb <= b && nb - na == (b - a) / 2);
                ck_assert(v >= na && v < nb);
                /* the two halves are disjoint and cover the window */
                ck_assert((na == qb || qa == nb) && (nb - na) + (qb - qa) == b - a);
            }
            coh_rh_window(v, p, L, &lo, &hi);
            ck_assert(lo == v && hi == v + 1);
        }
    }
}
END_TEST

/* Binomial tree: parent/children agree, levels are distinct per parent,
 * subtrees are contiguous and partition the ranks, every rank reachable. */
START_TEST(test_tree)
{
    for (int n = 1; n <= 70; n++) {
        int count_parent[128] = {0};
        for (int vr = 0; vr < n; vr++) {
            int ch[32], k = coh_tree_children(vr, n, ch), sum = 1, lvls = 0;
            for (int i = 0; i < k; i++) {
                ck_assert_int_eq(coh_tree_parent(ch[i], n), vr);
                int lvl = coh_ilog2((unsigned)(ch[i] - vr));
                ck_assert_int_eq(1 << lvl, ch[i] - vr);
                ck_assert(!(lvls & (1 << lvl)));
                lvls |= 1 << lvl;
                if (i > 0)
                    ck_assert_int_gt(ch[i], ch[i - 1]);
                /* the child's subtree starts where it is and is inside mine */
                ck_assert_int_le(ch[i] + coh_tree_subtree(ch[i], n), vr + coh_tree_subtree(vr, n));
                sum += coh_tree_subtree(ch[i], n);
            }
            ck_assert_int_eq(sum, coh_tree_subtree(vr, n));
            int par = coh_tree_parent(vr, n);
            if (vr == 0)
                ck_assert_int_eq(par, -1);
            else {
                ck_assert(par >= 0 && par < vr);
                count_parent[vr]++;
            }
        }
        ck_assert_int_eq(coh_tree_subtree(0, n), n);
        /* depth is floor(log2 n) */
        int depth = 0;
        for (int vr = 0; vr < n; vr++) {
            int d = 0;
            for (int x = vr; x > 0; x = coh_tree_parent(x, n))
                d++;
            depth = d > depth ? d : depth;
        }
        ck_assert_int_eq(depth, coh_ilog2((unsigned)n));
    }
}
END_TEST

/* Bruck: the rounds gather exactly n blocks. */
START_TEST(test_bruck)
{
    for (int n = 1; n <= 70; n++) {
        int have = 1;
        for (int k = 0; k < coh_clog2(n); k++) {
            ck_assert_int_eq(1 << k, have); /* round k starts with 2^k blocks */
            have += coh_bruck_blocks(n, k);
        }
        ck_assert_int_eq(have, n);
    }
}
END_TEST

/* The ring schedules: in reduce-scatter step s member me sends block
 * me+k-s and receives me+k-s-1, which is what its left neighbour sends;
 * every block passes through every member once; the final owners are
 * me+1 (all_reduce, k=0) and me (reduce_scatter, k=-1). */
START_TEST(test_ring_schedule)
{
    for (int n = 1; n <= 12; n++)
        for (int k = -1; k <= 0; k++)
            for (int me = 0; me < n; me++) {
                int got[16] = {0};
                for (int s = 0; s < n - 1; s++) {
                    int sb = coh_mod(me + k - s, n), rb = coh_mod(me + k - s - 1, n);
                    int left = coh_mod(me - 1, n);
                    ck_assert_int_eq(rb, coh_mod(left + k - s, n));
                    got[rb]++;
                    if (s > 0) /* what I send now is what I reduced last step */
                        ck_assert_int_eq(sb, coh_mod(me + k - (s - 1) - 1, n));
                }
                if (n > 1) {
                    int last = coh_mod(me + k - (n - 2) - 1, n);
                    ck_assert_int_eq(last, coh_mod(me + k + 1, n));
                    for (int b = 0; b < n; b++)
                        ck_assert_int_eq(got[b], b == coh_mod(me + k, n) ? 0 : 1);
                }
            }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("coll_plan");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_blocks);
    tcase_add_test(tc, test_pieces_and_chunks);
    tcase_add_test(tc, test_tree_bcast_plan);
    tcase_add_test(tc, test_fold);
    tcase_add_test(tc, test_halving_windows);
    tcase_add_test(tc, test_tree);
    tcase_add_test(tc, test_bruck);
    tcase_add_test(tc, test_ring_schedule);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(suite)
