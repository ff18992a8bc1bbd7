/* test_auth.c - the handshakes' shared unit (src/util/auth.c): MACs
 * against HMAC-SHA256 computed directly and against the documented store
 * vector, the constant-time comparison, the order of the decision and both
 * generation policies, replay across nonces, fresh nonces. */
#include <check.h>
#include <sodium.h>
#include <stdint.h>
#include <string.h>

#include "util/auth.h"
#include "support/support.h"

static void hmac(uint8_t out[32], const void *key, size_t kl, const void *msg, size_t ml)
{
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, key, kl);
    crypto_auth_hmacsha256_update(&st, msg, ml);
    crypto_auth_hmacsha256_final(&st, out);
}

START_TEST(mac_is_hmac_over_label_nul_and_fields)
{
    ck_assert_int_ge(sodium_init(), 0);
    uint8_t got[32], want[32];
    coh_auth_mac m;
    coh_auth_begin(&m, "tok", 3, "lbl");
    coh_auth_add(&m, "ab", 2);
    coh_auth_add_u32(&m, 0x01020304u);
    coh_auth_end(&m, got);
    static const uint8_t msg[] = {'l', 'b', 'l', 0, 'a', 'b', 4, 3, 2, 1};
    hmac(want, "tok", 3, msg, sizeof msg);
    ck_assert_mem_eq(got, want, 32);
    /* The state held the key: it is wiped. */
    static const coh_auth_mac zero;
    ck_assert_mem_eq(&m, &zero, sizeof m);
    /* No label, NULL key = empty key. */
    coh_auth_begin(&m, NULL, 0, NULL);
    coh_auth_add(&m, "x", 1);
    coh_auth_end(&m, got);
    hmac(want, "", 0, "x", 1);
    ck_assert_mem_eq(got, want, 32);
}
END_TEST

START_TEST(derive_hashes_the_label_without_nul)
{
    uint8_t got[32], want[32];
    coh_auth_derive(got, "secret", "cohort tcp handshake key v1");
    hmac(want, "secret", 6, "cohort tcp handshake key v1", 27);
    ck_assert_mem_eq(got, want, 32);
    coh_auth_derive(got, NULL, "k");
    hmac(want, "", 0, "k", 1);
    ck_assert_mem_eq(got, want, 32);
}
END_TEST

/* docs/store-protocol.md: nonce 00..1f, job "job1", generation 3, token "secret". */
START_TEST(store_vector)
{
    uint8_t nonce[32], got[32];
    for (int i = 0; i < 32; i++)
        nonce[i] = (uint8_t)i;
    coh_auth_mac m;
    coh_auth_begin(&m, "secret", 6, NULL);
    coh_auth_add(&m, nonce, 32);
    coh_auth_add(&m, "job1", 4);
    coh_auth_add_u32(&m, 3);
    coh_auth_end(&m, got);
    static const uint8_t want[32] = {0x60, 0x42, 0xf7, 0x25, 0x44, 0x9a, 0x92, 0xeb,
                                     0x22, 0xe8, 0x87, 0xa4, 0xd7, 0x70, 0x94, 0xb2,
                                     0x90, 0x1c, 0xe7, 0x82, 0x12, 0x7e, 0x0d, 0xd5,
                                     0xe5, 0x3d, 0x05, 0x86, 0xbf, 0x82, 0x49, 0x7e};
    ck_assert_mem_eq(got, want, 32);
}
END_TEST

START_TEST(equal_sees_every_bit)
{
    uint8_t a[32], b[32];
    for (int i = 0; i < 32; i++)
        a[i] = (uint8_t)(i * 7 + 1);
    memcpy(b, a, 32);
    ck_assert_int_eq(coh_auth_equal(a, b), 1);
    for (int bit = 0; bit < 256; bit++) {
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        ck_assert_int_eq(coh_auth_equal(a, b), 0);
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
}
END_TEST

static void answer(uint8_t mac[32], const char *token, const uint8_t nonce[32], uint32_t gen)
{
    coh_auth_mac m;
    coh_auth_begin(&m, token, strlen(token), "test answer");
    coh_auth_add(&m, nonce, 32);
    coh_auth_add_u32(&m, gen);
    coh_auth_end(&m, mac);
}

START_TEST(judge_order_and_replay)
{
    uint8_t n1[32], n2[32], got[32], want[32];
    ck_assert_int_eq(coh_auth_nonce(n1), COHORT_OK);
    ck_assert_int_eq(coh_auth_nonce(n2), COHORT_OK);
    ck_assert_int_ne(memcmp(n1, n2, 32), 0);
    answer(got, "tok", n1, 5);
    answer(want, "tok", n1, 5);
    ck_assert_int_eq(coh_auth_judge(1, want, got, COH_AUTH_GEN_EXACT, 5, 5), COH_AUTH_OK);
    /* job first, whatever else is wrong */
    ck_assert_int_eq(coh_auth_judge(0, want, got, COH_AUTH_GEN_EXACT, 1, 5), COH_AUTH_WRONG_JOB);
    /* the wrong token */
    answer(got, "other", n1, 5);
    ck_assert_int_eq(coh_auth_judge(1, want, got, COH_AUTH_GEN_EXACT, 5, 5), COH_AUTH_BAD_MAC);
    /* a MAC failure is reported before the generation (unauthenticated) */
    ck_assert_int_eq(coh_auth_judge(1, want, got, COH_AUTH_GEN_EXACT, 1, 5), COH_AUTH_BAD_MAC);
    /* replay: an answer recorded for nonce 1 does not verify on nonce 2 */
    answer(got, "tok", n1, 5);
    answer(want, "tok", n2, 5);
    ck_assert_int_eq(coh_auth_judge(1, want, got, COH_AUTH_GEN_EXACT, 5, 5), COH_AUTH_BAD_MAC);
    /* a stale peer holding the token */
    answer(got, "tok", n1, 4);
    answer(want, "tok", n1, 4);
    ck_assert_int_eq(coh_auth_judge(1, want, got, COH_AUTH_GEN_EXACT, 4, 5), COH_AUTH_STALE_GEN);
    ck_assert_int_eq(coh_auth_status(COH_AUTH_STALE_GEN), COHORT_ERR_AUTH);
    ck_assert_int_eq(coh_auth_status(COH_AUTH_OK), COHORT_OK);
}
END_TEST

START_TEST(generation_policies)
{
    /* exact: peers of one group */
    ck_assert_int_eq(coh_auth_judge_gen(COH_AUTH_GEN_EXACT, 3, 3), COH_AUTH_OK);
    ck_assert_int_eq(coh_auth_judge_gen(COH_AUTH_GEN_EXACT, 2, 3), COH_AUTH_STALE_GEN);
    ck_assert_int_eq(coh_auth_judge_gen(COH_AUTH_GEN_EXACT, 4, 3), COH_AUTH_NEWER_GEN);
    ck_assert_int_eq(coh_auth_judge_gen(COH_AUTH_GEN_EXACT, 0, 3), COH_AUTH_STALE_GEN);
    /* store: tools (0) always, a fresh job takes any, a window of 64 */
    ck_assert_int_eq(coh_auth_judge_gen(COH_AUTH_GEN_STORE, 0, 9), COH_AUTH_OK);
    ck_assert_int_eq(coh_auth_judge_gen(COH_AUTH_GEN_STORE, 0xFFFFFFFFu, 0), COH_AUTH_OK);
    ck_assert_int_eq(coh_auth_judge_gen(COH_AUTH_GEN_STORE, 8, 9), COH_AUTH_STALE_GEN);
    ck_assert_int_eq(coh_auth_judge_gen(COH_AUTH_GEN_STORE, 9, 9), COH_AUTH_OK);
    ck_assert_int_eq(coh_auth_judge_gen(COH_AUTH_GEN_STORE, 9 + COH_AUTH_GEN_MAX_STEP, 9),
                     COH_AUTH_OK);
    ck_assert_int_eq(coh_auth_judge_gen(COH_AUTH_GEN_STORE, 10 + COH_AUTH_GEN_MAX_STEP, 9),
                     COH_AUTH_GEN_SKIP);
    ck_assert_int_eq(coh_auth_judge_gen(COH_AUTH_GEN_STORE, 0xFFFFFFFFu, 0xFFFFFFF0u),
                     COH_AUTH_OK);
    ck_assert_int_eq(coh_auth_judge_gen(COH_AUTH_GEN_STORE, 0xFFFFFFFFu, 1), COH_AUTH_GEN_SKIP);
    for (int v = 0; v <= COH_AUTH_VERDICTS; v++)
        ck_assert_ptr_nonnull(coh_auth_verdict_name((coh_auth_verdict)v));
    ck_assert_str_eq(coh_auth_verdict_name(COH_AUTH_STALE_GEN), "stale generation");
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("auth");
    TCase *tc = tcase_create("auth");
    tcase_add_test(tc, mac_is_hmac_over_label_nul_and_fields);
    tcase_add_test(tc, derive_hashes_the_label_without_nul);
    tcase_add_test(tc, store_vector);
    tcase_add_test(tc, equal_sees_every_bit);
    tcase_add_test(tc, judge_order_and_replay);
    tcase_add_test(tc, generation_policies);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
