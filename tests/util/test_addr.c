/* test_addr.c - the one address parser (src/util/addr.c), what its
 * callers accept on top of it, and the one resolver (src/util/resolve.c). */
#include <arpa/inet.h>
#include <check.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>

#include "cohort.h"
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

/* The public form (cohort_hostport_split): host:port only, nothing
 * written on failure, buffers respected. */
static void hp_bad(const char *s)
{
    char host[64] = "untouched", port[8] = "same";
    ck_assert_msg(cohort_hostport_split(s, host, sizeof host, port, sizeof port) ==
                      COHORT_ERR_INVALID,
                  "'%s' was accepted", s ? s : "(null)");
    ck_assert_str_eq(host, "untouched");
    ck_assert_str_eq(port, "same");
}

START_TEST(public_hostport)
{
    char host[64], port[8];
    ck_assert_int_eq(cohort_hostport_split("node1:29500", host, sizeof host, port, sizeof port),
                     COHORT_OK);
    ck_assert_str_eq(host, "node1");
    ck_assert_str_eq(port, "29500");
    ck_assert_int_eq(cohort_hostport_split("[fe80::1]:0", host, sizeof host, port, sizeof port),
                     COHORT_OK);
    ck_assert_str_eq(host, "fe80::1");
    ck_assert_str_eq(port, "0");
    /* 1-5 digits; the range is the caller's. */
    ck_assert_int_eq(cohort_hostport_split("h:99999", host, sizeof host, port, sizeof port),
                     COHORT_OK);
    ck_assert_str_eq(port, "99999");
    hp_bad(NULL);
    hp_bad("");
    hp_bad("h");            /* no port */
    hp_bad("h:");
    hp_bad("h:x");
    hp_bad("h:123456");
    hp_bad("::1:80");       /* a bare IPv6 literal carries no port */
    hp_bad("tcp://h:1");    /* no scheme */
    hp_bad("h:1/x");        /* no path */
    hp_bad("[::1]junk");
    hp_bad("[[]");
    hp_bad("\xff\xfe:1/\x01");
    char big[100];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    memcpy(big + 90, ":1", 3);
    hp_bad(big); /* host longer than host[64] */
    /* NULL buffers, and buffers too small by one. */
    ck_assert_int_eq(cohort_hostport_split("h:1", NULL, 8, port, sizeof port), COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_hostport_split("h:1", host, sizeof host, NULL, 8), COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_hostport_split("abc:1", host, 3, port, sizeof port),
                     COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_hostport_split("abc:1", host, 4, port, sizeof port), COHORT_OK);
    ck_assert_int_eq(cohort_hostport_split("h:123", host, sizeof host, port, 3),
                     COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_hostport_split("h:123", host, sizeof host, port, 0),
                     COHORT_ERR_INVALID);
}
END_TEST

static int port_of(const struct sockaddr *sa)
{
    return ntohs(sa->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)sa)->sin6_port
                                           : ((const struct sockaddr_in *)sa)->sin_port);
}

START_TEST(resolve_numeric)
{
    struct addrinfo *ai = NULL;
    ck_assert_int_eq(coh_addr_resolve("127.0.0.1", "80", COH_RESOLVE_NUMHOST | COH_RESOLVE_NUMSERV,
                                      &ai), 0);
    ck_assert_ptr_nonnull(ai);
    ck_assert_int_eq(ai->ai_family, AF_INET);
    ck_assert_int_eq(ai->ai_socktype, SOCK_STREAM);
    ck_assert_int_eq(port_of(ai->ai_addr), 80);
    ck_assert_uint_eq(((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    coh_addr_freeinfo(ai);

    ck_assert_int_eq(coh_addr_resolve("::1", "29500", COH_RESOLVE_NUMHOST | COH_RESOLVE_DGRAM, &ai),
                     0);
    ck_assert_int_eq(ai->ai_family, AF_INET6);
    ck_assert_int_eq(ai->ai_socktype, SOCK_DGRAM);
    ck_assert_int_eq(port_of(ai->ai_addr), 29500);
    ck_assert(IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr));
    coh_addr_freeinfo(ai);

    struct sockaddr_storage ss;
    socklen_t sl = 0;
    ck_assert_int_eq(coh_addr_resolve_one("::1", "7", COH_RESOLVE_PREFER_V4, &ss, &sl), 0);
    ck_assert_int_eq(ss.ss_family, AF_INET6); /* no IPv4 address: the first one */
    ck_assert_int_eq(sl, sizeof(struct sockaddr_in6));
    ck_assert_int_eq(port_of((struct sockaddr *)&ss), 7);
}
END_TEST

START_TEST(resolve_localhost)
{
    struct addrinfo *ai = NULL;
    ck_assert_int_eq(coh_addr_resolve("localhost", "1", COH_RESOLVE_NUMSERV, &ai), 0);
    int v4 = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        ck_assert_int_eq(a->ai_socktype, SOCK_STREAM);
        if (a->ai_family == AF_INET) {
            v4 = 1;
            ck_assert_uint_eq(ntohl(((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr) >> 24,
                              127);
        } else {
            ck_assert_int_eq(a->ai_family, AF_INET6);
            ck_assert(IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr));
        }
    }
    coh_addr_freeinfo(ai);
    ck_assert_msg(v4, "localhost has an IPv4 address in /etc/hosts");
    /* The tcp transport's pick: IPv4 even where the system lists ::1 first. */
    struct sockaddr_storage ss;
    socklen_t sl;
    ck_assert_int_eq(coh_addr_resolve_one("localhost", "9", COH_RESOLVE_PREFER_V4, &ss, &sl), 0);
    ck_assert_int_eq(ss.ss_family, AF_INET);
    ck_assert_int_eq(sl, sizeof(struct sockaddr_in));
    ck_assert_int_eq(port_of((struct sockaddr *)&ss), 9);
}
END_TEST

START_TEST(resolve_passive)
{
    struct addrinfo *ai = NULL;
    ck_assert_int_eq(coh_addr_resolve(NULL, "0", COH_RESOLVE_PASSIVE, &ai), 0);
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        if (a->ai_family == AF_INET)
            ck_assert_uint_eq(((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr,
                              htonl(INADDR_ANY));
        else
            ck_assert(IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr));
    }
    coh_addr_freeinfo(ai);
}
END_TEST

/* Each refusal is a specific EAI_* code with gai_strerror's text (the store
 * and tcp messages quote it), never a crash or an empty list. */
START_TEST(resolve_refused)
{
    struct addrinfo *ai = (struct addrinfo *)&ai; /* must be reset to NULL */
    ck_assert_int_eq(coh_addr_resolve("no-such-host.invalid", "1", COH_RESOLVE_NUMHOST, &ai),
                     EAI_NONAME);
    ck_assert_ptr_null(ai);
    ck_assert_str_eq(coh_addr_strerror(EAI_NONAME), gai_strerror(EAI_NONAME));
    ck_assert_int_eq(coh_addr_resolve("999.1.1.1", "1", COH_RESOLVE_NUMHOST, &ai), EAI_NONAME);
    ck_assert_int_eq(coh_addr_resolve("[::1]", "1", COH_RESOLVE_NUMHOST, &ai), EAI_NONAME);
    ck_assert_int_eq(coh_addr_resolve("127.0.0.1", "http", COH_RESOLVE_NUMSERV, &ai), EAI_NONAME);
    ck_assert_ptr_null(ai);
    /* A connect without a host, with no out, or with nothing at all. */
    ck_assert_int_eq(coh_addr_resolve(NULL, "1", 0, &ai), EAI_NONAME);
    ck_assert_int_eq(coh_addr_resolve("", "1", 0, &ai), EAI_NONAME);
    ck_assert_int_eq(coh_addr_resolve("127.0.0.1", "1", 0, NULL), EAI_NONAME);
    ck_assert_int_eq(coh_addr_resolve(NULL, NULL, COH_RESOLVE_PASSIVE, &ai), EAI_NONAME);
    ck_assert_ptr_null(ai);
    struct sockaddr_storage ss;
    socklen_t sl;
    ck_assert_int_eq(coh_addr_resolve_one("", "1", 0, &ss, &sl), EAI_NONAME);
    ck_assert_int_eq(coh_addr_resolve_one("127.0.0.1", "1", 0, NULL, &sl), EAI_NONAME);
    ck_assert_int_eq(coh_addr_resolve_one("127.0.0.1", "1", 0, &ss, NULL), EAI_NONAME);
    coh_addr_freeinfo(NULL);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("addr");
    TCase *tc = tcase_create("split");
    tcase_add_test(tc, forms);
    tcase_add_test(tc, refused);
    tcase_add_test(tc, public_hostport);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("resolve");
    tcase_add_test(tr, resolve_numeric);
    tcase_add_test(tr, resolve_localhost);
    tcase_add_test(tr, resolve_passive);
    tcase_add_test(tr, resolve_refused);
    suite_add_tcase(s, tr);
    return s;
}

COH_TEST_MAIN(make_suite)
