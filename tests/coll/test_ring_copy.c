/* test_ring_copy.c - coh_copy_narrow (src/coll/shm/ring_copy.c): 33-64
 * bytes by 16-byte moves, any other length by memmove; every length and
 * alignment, overlapping buffers included. */
#include <check.h>
#include <string.h>

#include "cohort.h"
#include "coll/shm/ring_copy.h"
#include "support/support.h"

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed * 131u + i * 7u + 1u);
}

START_TEST(narrow_every_length_and_alignment)
{
    unsigned char src[256], dst[256], want[256];
    for (size_t n = 0; n <= 100; n++)
        for (size_t so = 0; so < 16; so++)
            for (size_t dof = 0; dof < 16; dof += 3) {
                fill(src, sizeof src, (unsigned)(n + so));
                memset(dst, 0xEE, sizeof dst);
                memcpy(want, dst, sizeof want);
                memcpy(want + 64 + dof, src + so, n);
                coh_copy_narrow(dst + 64 + dof, src + so, n);
                ck_assert_msg(memcmp(dst, want, sizeof dst) == 0,
                              "n %zu, src +%zu, dst +%zu: wrong bytes or a write outside", n, so,
                              dof);
            }
}
END_TEST

START_TEST(narrow_overlap_is_memmove)
{
    unsigned char buf[160], want[160];
    for (size_t n = 0; n <= 64; n++)
        for (int shift = -20; shift <= 20; shift++) {
            fill(buf, sizeof buf, (unsigned)n);
            memcpy(want, buf, sizeof want);
            memmove(want + 48 + shift, want + 48, n);
            coh_copy_narrow(buf + 48 + shift, buf + 48, n);
            ck_assert_msg(memcmp(buf, want, sizeof buf) == 0, "n %zu shift %d", n, shift);
        }
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("ring_copy");
    TCase *tc = tcase_create("copies");
    tcase_add_test(tc, narrow_every_length_and_alignment);
    tcase_add_test(tc, narrow_overlap_is_memmove);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
