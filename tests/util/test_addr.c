/* test_addr.c - the one address parser (src/util/addr.c) and what its
 * callers accept on top of it. */
#include <check.h>
#include <string.h>

#include "util/addr.h"
#include "support/support.h"

static coh_addr ok(const char *s)
{
    coh_addr a;
    ck_assert_msg(coh_addr_split(s, &a) == 0, "'%s' should split", s);
    return a;
}

static void bad(const char *s)
{
    coh_addr a;
    ck_assert_msg(coh_addr_split(s, &a) == -1, "'%s' should not split", s);
}

START_TEST(forms)
{
    coh_addr a = ok("127.0.0.1:29500");
    ck_assert_str_eq(a.host, "127.0.0.1");
    ck_assert_str_eq(a.port, "29500");
    ck_assert_str_eq(a.scheme, "");
    ck_assert_ptr_null(a.rest);
    ck_assert_int_eq(coh_addr_port(&a, 1), 29500);
    a = ok("tcp://node-3:7");
    ck_assert_str_eq(a.scheme, "tcp");
    ck_assert_str_eq(a.host, "node-3");
    ck_assert_int_eq(coh_addr_port(&a, 1), 7);
    a = ok("[::1]:5");
    ck_assert_str_eq(a.host, "::1");
    ck_assert_str_eq(a.port, "5");
    ck_assert_int_eq(a.bare_v6, 0);
    a = ok("[fe80::1]");
    ck_assert_str_eq(a.host, "fe80::1");
    ck_assert_str_eq(a.port, "");
    a = ok("fe80::1");
    ck_assert_int_eq(a.bare_v6, 1);
    ck_assert_str_eq(a.host, "fe80::1");
    ck_assert_str_eq(a.port, "");
    a = ok("etcd://a:1/prefix/x");
    ck_assert_str_eq(a.scheme, "etcd");
    ck_assert_str_eq(a.host, "a");
    ck_assert_str_eq(a.rest, "/prefix/x");
    a = ok("localhost");
    ck_assert_str_eq(a.port, "");
    ck_assert_int_eq(coh_addr_port(&a, 0), -1);
}
END_TEST

START_TEST(refused)
{
    bad("");
    bad(":5");
    bad("h:");
    bad("h:x");
    bad("h:123456");
    bad("[::1]junk");
    bad("[[]"); /* libFuzzer: parsed as the host "[", which did not split back */
    bad("h[x]:5");
    bad("[::1");
    bad("://h:1");
    bad("a/b://h:1");
    bad("tcp://");
    bad("tcp:///x");
    coh_addr a = ok("h:0");
    ck_assert_int_eq(coh_addr_port(&a, 1), -1);
    ck_assert_int_eq(coh_addr_port(&a, 0), 0);
    a = ok("h:65536");
    ck_assert_int_eq(coh_addr_port(&a, 0), -1);
    char longhost[300];
    memset(longhost, 'a', sizeof longhost - 1);
    longhost[sizeof longhost - 1] = 0;
    bad(longhost);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("addr");
    TCase *tc = tcase_create("split");
    tcase_add_test(tc, forms);
    tcase_add_test(tc, refused);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
