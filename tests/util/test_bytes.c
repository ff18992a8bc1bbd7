/* test_bytes.c - the small copy of util/bytes.h: coh_small_copy (<= 32
 * bytes), every length. */
#include <check.h>
#include <string.h>

#include "cohort.h"
#include "util/bytes.h"
#include "support/support.h"

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed * 131u + i * 7u + 1u);
}

START_TEST(small_every_length)
{
    unsigned char src[64], dst[64], want[64];
    for (size_t n = 0; n <= 32; n++) {
        fill(src, sizeof src, (unsigned)n);
        memset(dst, 0x55, sizeof dst);
        memcpy(want, dst, sizeof want);
        memcpy(want + 8, src + 3, n);
        coh_small_copy(dst + 8, src + 3, n);
        ck_assert_msg(memcmp(dst, want, sizeof dst) == 0, "n %zu", n);
    }
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("bytes");
    TCase *tc = tcase_create("copies");
    tcase_add_test(tc, small_every_length);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
