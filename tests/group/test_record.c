/*
 * test_record.c - the rendezvous record (src/group/record.c): what a rank
 * publishes under rank/<r> and every rank parses back.
 *   - the parser's rules, case by case: the old five-field and current
 *     six-field records, fields from a newer library ignored; refused:
 *     a too-long token (the old sscanf %127s split it into the next field),
 *     numbers that overflow, carry a sign or leading zeros, control bytes
 *     and NULs, too few fields, a cpu count out of range;
 *   - the seventh field, the rank's cpu set as a canonical cpulist: good
 *     lists with their counts; refused (naming the field): overlapping,
 *     descending, touching, out-of-range, malformed and too-long lists; a
 *     record without it reads as "" (the group falls back to the count);
 *   - the eighth field, the settings every rank must share (key=value
 *     pairs): good fields and their values; refused (naming the field):
 *     not pairs, empty or upper-case keys, a key twice, too many pairs,
 *     too long a key, value or field; "-" for an unknown cpu set before it;
 *   - format and parse round trip; format refuses a field with a space;
 *   - end to end: a "rank" that publishes a malformed record makes the
 *     real rank's cohort_init fail with COHORT_ERR_PROTOCOL naming the rank
 *     and the field, within the timeout - never a misread peer.
 */
#include <check.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cohort.h"
#include "cohort_store.h"
#include "group/record.h"
#include "support/support.h"

static int parse(const char *s, coh_rdv_record *r, char *why)
{
    return coh_rdv_record_parse(s, strlen(s), r, why, 128);
}

START_TEST(accepts_old_current_and_newer_records)
{
    coh_rdv_record r;
    char why[128];
    ck_assert_int_eq(parse("4 1234 127.0.0.1:5000 h/boot/netns:1 h", &r, why), 0);
    ck_assert_int_eq(r.size, 4);
    ck_assert_int_eq(r.pid, 1234);
    ck_assert_str_eq(r.addr, "127.0.0.1:5000");
    ck_assert_str_eq(r.id, "h/boot/netns:1");
    ck_assert_str_eq(r.name, "h");
    ck_assert_int_eq(r.cpus, 0); /* an older record: unknown */
    ck_assert_int_eq(parse("4 1234 - h/b/netns:1 h 2", &r, why), 0);
    ck_assert_int_eq(r.cpus, 2);
    ck_assert_str_eq(r.cpuset, ""); /* no cpu set: the group falls back to the count */
    ck_assert_int_eq(r.cpuset_n, 0);
    ck_assert_int_eq(parse("  2\t99 a:1 i n 0 0-1 k=v extra fields\n", &r, why), 0);
    ck_assert_str_eq(r.cfg, "k=v");
    ck_assert_int_eq(r.size, 2);
    ck_assert_int_eq(r.cpus, 0);
    ck_assert_str_eq(r.cpuset, "0-1");
    ck_assert_int_eq(parse("2147483647 2147483647 a i n 1048576", &r, why), 0);
    ck_assert_int_eq(r.size, 2147483647);
    ck_assert_int_eq(r.cpus, 1048576);
}
END_TEST

/* The seventh field: the rank's cpu set as a canonical cpulist. */
START_TEST(cpu_set_field)
{
    coh_rdv_record r;
    char why[128], s[4096];
    static const struct {
        const char *list;
        long n, top;
    } good[] = {
        {"0", 1, 0},
        {"5", 1, 5},
        {"0-3,8,10-11", 7, 11},
        {"0,2,4,6", 4, 6},
        {"1-63", 63, 63},
        {"0,1048575", 2, 1048575},
        {"1048574-1048575", 2, 1048575},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        snprintf(s, sizeof s, "4 1234 a:1 h/b/netns:1 h 64 %s", good[i].list);
        ck_assert_msg(parse(s, &r, why) == 0, "'%s': %s", good[i].list, why);
        ck_assert_str_eq(r.cpuset, good[i].list);
        ck_assert_int_eq(r.cpuset_n, good[i].n);
        ck_assert_int_eq(r.cpuset_top, good[i].top);
        ck_assert_int_eq(r.cpus, 64);
    }
    /* refused, each naming the field and why */
    static const struct {
        const char *list, *why;
    } bad[] = {
        {"0-3,2", "not ascending or overlapping"},     /* overlap */
        {"0-3,3-5", "not ascending or overlapping"},   /* overlap at an end */
        {"4,2", "not ascending or overlapping"},       /* descending order */
        {"3,3", "not ascending or overlapping"},       /* twice */
        {"3-1", "descending"},                         /* a descending range */
        {"2-2", "one cpu written as a range"},
        {"0-1,2", "touching ranges"},                  /* canonical lists merge them */
        {"1048576", "names cpu 1048576"},              /* out of range */
        {"0-1048576", "names cpu 1048576"},
        {"99999999999999999999", "cpu number expected"},
        {"-1", "cpu number expected"},
        {"01", "not a cpulist"},                        /* a leading zero */
        {"0,", "not a cpulist"},
        {",0", "cpu number expected"},
        {"0,,1", "cpu number expected"},
        {"0-", "cpu number expected"},
        {"0--3", "cpu number expected"},
        {"0-3x", "not a cpulist"},
        {"a", "cpu number expected"},
        {"0;1", "not a cpulist"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(s, sizeof s, "2 10 a h/b/netns:1 h 2 %s", bad[i].list);
        why[0] = 0;
        ck_assert_msg(parse(s, &r, why) == -1, "accepted '%s'", bad[i].list);
        ck_assert_msg(strstr(why, "cpu set") && strstr(why, bad[i].why), "'%s': %s", bad[i].list,
                      why);
    }
    /* too long: the field is bounded (COH_RDV_CPULIST_MAX bytes) */
    char list[2048];
    size_t k = 0;
    for (long c = 0; k < COH_RDV_CPULIST_MAX + 8; c += 2)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%ld", c ? "," : "", c);
    snprintf(s, sizeof s, "2 10 a h/b/netns:1 h 2 %s", list);
    ck_assert_int_eq(parse(s, &r, why), -1);
    ck_assert_msg(strstr(why, "cpu set is") && strstr(why, "at most 1023"), "%s", why);
    /* the longest whole list that fits: accepted, and formats back */
    list[COH_RDV_CPULIST_MAX] = 0;
    *strrchr(list, ',') = 0;
    snprintf(s, sizeof s, "2 10 a h/b/netns:1 h 2 %s", list);
    ck_assert_msg(parse(s, &r, why) == 0, "%s", why);
    ck_assert_uint_gt(strlen(r.cpuset), COH_RDV_CPULIST_MAX - 8);
    char buf[COH_RDV_RECORD_MAX + 1];
    ck_assert_int_gt(coh_rdv_record_format(buf, sizeof buf, &r), 0);
    /* coh_cpulist_or sets exactly the listed cpus */
    uint64_t bits[2] = {0, 0};
    coh_cpulist_or("0-3,8,10-11,64,66-67", bits);
    ck_assert_uint_eq(bits[0], 0xd0full); /* 0-3, 8, 10-11 */
    ck_assert_uint_eq(bits[1], 0xdull);
    /* this process's own set: a list the parser takes, as many cpus as its mask */
    char self[COH_RDV_CPULIST_MAX + 1];
    int sl = coh_cpulist_self(self, sizeof self);
    ck_assert_int_gt(sl, 0);
    long cnt, top;
    ck_assert_msg(coh_cpulist_check(self, (size_t)sl, &cnt, &top, why, sizeof why) == 0, "%s: %s",
                  self, why);
    cpu_set_t mask;
    ck_assert_int_eq(sched_getaffinity(0, sizeof mask, &mask), 0);
    ck_assert_int_eq(cnt, CPU_COUNT(&mask));
    ck_assert_int_eq(coh_cpulist_self(self, 2), -1); /* too short a buffer */
}
END_TEST

START_TEST(refuses_what_does_not_fit)
{
    coh_rdv_record r;
    char why[128], s[1024];
    /* An address longer than its field: refused, not split into the next. */
    char longa[COH_RDV_ADDR_MAX + 2];
    memset(longa, 'a', sizeof longa - 1);
    longa[sizeof longa - 1] = 0;
    snprintf(s, sizeof s, "2 10 %s id name 2", longa);
    ck_assert_int_eq(parse(s, &r, why), -1);
    ck_assert_msg(strstr(why, "address") != NULL, "%s", why);
    char longid[COH_RDV_ID_MAX + 2];
    memset(longid, 'i', sizeof longid - 1);
    longid[sizeof longid - 1] = 0;
    snprintf(s, sizeof s, "2 10 a %s name 2", longid);
    ck_assert_int_eq(parse(s, &r, why), -1);
    ck_assert_msg(strstr(why, "host id") != NULL, "%s", why);
    static const char *bad[] = {
        "",
        "   ",
        "2 10 a id",                      /* four fields */
        "2147483648 10 a id n",           /* size overflows int */
        "99999999999999999999 10 a i n", /* and long */
        "0 10 a i n",                     /* size 0 */
        "-2 10 a i n",                    /* sign */
        "+2 10 a i n",
        "02 10 a i n",                    /* leading zero */
        "2 -1 a i n",                     /* pid */
        "2 0 a i n",
        "2 1x a i n",
        "2 10 a i n -1",                  /* cpu count */
        "2 10 a i n 1048577",
        "2 10 a i n two",
        "2 10 a\x01 i n",                 /* control byte */
        "2 10 a i\x7f n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(parse(bad[i], &r, why) == -1, "accepted '%s'", bad[i]);
    /* A NUL inside the value (the store's values are bytes). */
    static const char nul[] = "2 10 a\0b i n 2";
    ck_assert_int_eq(coh_rdv_record_parse(nul, sizeof nul - 1, &r, why, sizeof why), -1);
    /* len bounds the parse: what follows is not read. */
    ck_assert_int_eq(coh_rdv_record_parse("2 10 a i n 2 junk", 12, &r, why, sizeof why), 0);
    ck_assert_int_eq(r.cpus, 2);
}
END_TEST

/* The eighth field: key=value pairs (agree.c writes them). */
START_TEST(settings_field)
{
    coh_rdv_record r;
    char why[128], v[80], s[2400];
    ck_assert_int_eq(parse("2 10 a i n 2 0-1 transport=auto,contract=on,algo.all_reduce=ring", &r,
                           why), 0);
    ck_assert_str_eq(r.cpuset, "0-1");
    ck_assert_str_eq(r.cfg, "transport=auto,contract=on,algo.all_reduce=ring");
    ck_assert_int_eq(coh_rdv_cfg_get(r.cfg, "contract", v, sizeof v), 1);
    ck_assert_str_eq(v, "on");
    ck_assert_int_eq(coh_rdv_cfg_get(r.cfg, "algo.all_reduce", v, sizeof v), 1);
    ck_assert_str_eq(v, "ring");
    ck_assert_int_eq(coh_rdv_cfg_get(r.cfg, "algo", v, sizeof v), 0); /* a prefix is not a key */
    ck_assert_int_eq(coh_rdv_cfg_get(r.cfg, "transport.", v, sizeof v), 0);
    /* "-": no cpu set, the settings follow; an empty value; every value byte */
    ck_assert_int_eq(parse("2 10 a i n 2 - chunk=,x_1.y=A-z_0.9+:-", &r, why), 0);
    ck_assert_str_eq(r.cpuset, "");
    ck_assert_int_eq(r.cpuset_n, 0);
    ck_assert_int_eq(coh_rdv_cfg_get(r.cfg, "chunk", v, sizeof v), 1);
    ck_assert_str_eq(v, "");
    ck_assert_int_eq(coh_rdv_cfg_get(r.cfg, "x_1.y", v, sizeof v), 1);
    ck_assert_str_eq(v, "A-z_0.9+:-");
    /* the most pairs, the longest key and value */
    size_t at = (size_t)snprintf(s, sizeof s, "2 10 a i n 2 -");
    for (int i = 0; i < COH_RDV_CFG_PAIRS; i++)
        at += (size_t)snprintf(s + at, sizeof s - at, "%sk%d=%d", i ? "," : " ", i, i);
    ck_assert_int_eq(parse(s, &r, why), 0);
    ck_assert_int_eq(coh_rdv_cfg_get(r.cfg, "k31", v, sizeof v), 1);
    ck_assert_str_eq(v, "31");
    snprintf(s + at, sizeof s - at, ",k32=32"); /* one pair too many */
    ck_assert_int_eq(parse(s, &r, why), -1);
    ck_assert_msg(strstr(why, "more than 32 pairs"), "%s", why);
    char key[COH_RDV_CFG_KEY_MAX + 2], val[COH_RDV_CFG_VAL_MAX + 2];
    memset(key, 'k', sizeof key - 1), key[sizeof key - 1] = 0;
    memset(val, 'v', sizeof val - 1), val[sizeof val - 1] = 0;
    snprintf(s, sizeof s, "2 10 a i n 2 - %s=1", key + 1);
    ck_assert_int_eq(parse(s, &r, why), 0);
    snprintf(s, sizeof s, "2 10 a i n 2 - %s=1", key);
    ck_assert_int_eq(parse(s, &r, why), -1);
    snprintf(s, sizeof s, "2 10 a i n 2 - k=%s", val + 1);
    ck_assert_int_eq(parse(s, &r, why), 0);
    snprintf(s, sizeof s, "2 10 a i n 2 - k=%s", val);
    ck_assert_int_eq(parse(s, &r, why), -1);
    ck_assert_msg(strstr(why, "65 bytes"), "%s", why);
    /* a field longer than its bound, though each pair fits */
    at = (size_t)snprintf(s, sizeof s, "2 10 a i n 2 - ");
    for (int i = 0; at < 20 + COH_RDV_CFG_MAX; i++)
        at += (size_t)snprintf(s + at, sizeof s - at, "%sk%d=%s", i ? "," : "", i, val + 10);
    ck_assert_int_eq(parse(s, &r, why), -1);
    ck_assert_msg(strstr(why, "settings is"), "%s", why);
    static const char *bad[] = {
        "k",          "=v",        "k=v,",      ",k=v",       "k=v,,j=w", "K=v",
        "k=v=w",      "k=v;j=w",   "k=v,k=w",   "a=1,b=2,a=3", "k-x=1",   "k=v,j",
        "k=\"v\"",  "k=v/w",     "k.=v,k.=w",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(s, sizeof s, "2 10 a i n 2 0 %s", bad[i]);
        ck_assert_msg(parse(s, &r, why) == -1, "accepted '%s'", bad[i]);
        ck_assert_msg(strstr(why, "settings"), "'%s': %s", bad[i], why);
        ck_assert_int_eq(coh_rdv_cfg_check(bad[i], strlen(bad[i]), why, sizeof why), -1);
    }
    ck_assert_int_eq(coh_rdv_cfg_check("", 0, why, sizeof why), -1);
}
END_TEST

START_TEST(round_trip)
{
    coh_rdv_record a = {.size = 8, .pid = 4242, .cpus = 64}, b;
    snprintf(a.addr, sizeof a.addr, "[fe80::1%%eth0]:65535");
    snprintf(a.id, sizeof a.id, "host/0b5e/netns:4026531992");
    snprintf(a.name, sizeof a.name, "host[netns:4026531992]");
    char buf[640], why[128];
    int n = coh_rdv_record_format(buf, sizeof buf, &a);
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(coh_rdv_record_parse(buf, (size_t)n, &b, why, sizeof why), 0);
    ck_assert_mem_eq(&a, &b, sizeof a);
    /* with a cpu set: the seventh field, and back */
    snprintf(a.cpuset, sizeof a.cpuset, "0-3,8,10-11");
    a.cpuset_n = 7, a.cpuset_top = 11;
    n = coh_rdv_record_format(buf, sizeof buf, &a);
    ck_assert_int_gt(n, 0);
    ck_assert_msg(strstr(buf, " 64 0-3,8,10-11"), "%s", buf);
    ck_assert_int_eq(coh_rdv_record_parse(buf, (size_t)n, &b, why, sizeof why), 0);
    ck_assert_mem_eq(&a, &b, sizeof a);
    snprintf(a.cpuset, sizeof a.cpuset, "3,1"); /* not canonical: refused */
    ck_assert_int_eq(coh_rdv_record_format(buf, sizeof buf, &a), -1);
    a.cpuset[0] = 0, a.cpuset_n = 0, a.cpuset_top = 0;
    snprintf(a.name, sizeof a.name, "two words");
    ck_assert_int_eq(coh_rdv_record_format(buf, sizeof buf, &a), -1);
    snprintf(a.name, sizeof a.name, "n");
    ck_assert_int_eq(coh_rdv_record_format(buf, 8, &a), -1); /* too short a buffer */
    /* the settings: after the cpu set, or after "-" without one */
    memset(a.cpuset, 0, sizeof a.cpuset); /* whole fields: the parse leaves zeros */
    memset(a.name, 0, sizeof a.name);
    a.name[0] = 'n';
    snprintf(a.cfg, sizeof a.cfg, "transport=tcp,algo.broadcast=tree");
    char big[COH_RDV_RECORD_MAX + 1];
    n = coh_rdv_record_format(big, sizeof big, &a);
    ck_assert_int_gt(n, 0);
    ck_assert_msg(strstr(big, " 64 - transport=tcp,algo.broadcast=tree"), "%s", big);
    ck_assert_int_eq(coh_rdv_record_parse(big, (size_t)n, &b, why, sizeof why), 0);
    ck_assert_mem_eq(&a, &b, sizeof a);
    snprintf(a.cpuset, sizeof a.cpuset, "1"), a.cpuset_n = 1, a.cpuset_top = 1;
    n = coh_rdv_record_format(big, sizeof big, &a);
    ck_assert_msg(strstr(big, " 64 1 transport=tcp,"), "%s", big);
    ck_assert_int_eq(coh_rdv_record_parse(big, (size_t)n, &b, why, sizeof why), 0);
    ck_assert_mem_eq(&a, &b, sizeof a);
    snprintf(a.cfg, sizeof a.cfg, "transport=tcp,transport=shm"); /* refused */
    ck_assert_int_eq(coh_rdv_record_format(big, sizeof big, &a), -1);
    a.cfg[0] = 0;
    a.cpus = -1;
    ck_assert_int_eq(coh_rdv_record_format(buf, sizeof buf, &a), -1);
}
END_TEST

/* ---- end to end: a malformed record from "rank 1" ---- */

static const char *bad_values[] = {
    /* an address one byte too long, then a size that overflows int, then a
     * record with a control byte */
    "2 10 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa id n 2",
    "4294967298 10 127.0.0.1:1 id n 2",
    "2 10 127.0.0.1:1 i\x02" "d n 2",
    /* a cpu set out of order */
    "2 10 127.0.0.1:1 id n 2 4-7,0-3",
    /* settings naming a key twice */
    "2 10 127.0.0.1:1 id n 2 0-1 transport=tcp,transport=shm",
};
static const char *bad_field[] = {"address", "world size", "control byte", "cpu set",
                                  "settings"};

/* The store runs in a process of its own (CHT_STORE_PARENT): forking the
 * ranks from a process with a server thread can deadlock a child in the
 * allocator (ASan's), which once hung the fake rank here (session 13). */
static int rank_fake_or_real(int rank, void *arg)
{
    int k = *(const int *)arg;
    if (rank == 1) {
        /* Not a cohort rank: it claims rank 1 and publishes garbage, with
         * the job's address and credentials from its environment. */
        const char *url = getenv("COHORT_STORE"), *job = getenv("COHORT_JOB_ID"),
                   *tok = getenv("COHORT_TOKEN");
        RANK_CHECK(url && job && tok && strncmp(url, "tcp://", 6) == 0, "store environment: %s",
                   url ? url : "(none)");
        cohort_store *s = NULL;
        RANK_PASS(cohort_store_connect(&s, url + 6, job, tok, 5000), NULL);
        int64_t v = 0;
        RANK_PASS(cohort_store_add(s, "gen1/g0/join/1", 14, 1, &v), NULL);
        const char *val = bad_values[k];
        RANK_PASS(cohort_store_set(s, "gen1/g0/rank/1", 14, val, strlen(val)), NULL);
        cohort_store_close(s);
        return 0;
    }
    cohort_group *g = NULL;
    double t0 = cht_now_ms();
    cohort_status st = cohort_init(&g);
    double dt = cht_now_ms() - t0;
    const char *msg = cohort_last_error(NULL);
    RANK_CHECK(st == COHORT_ERR_PROTOCOL, "init with a malformed peer record: %s: %s",
               cohort_status_name(st), msg);
    RANK_CHECK(strstr(msg, "malformed record for rank 1") && strstr(msg, bad_field[k]), "%s",
               msg);
    RANK_CHECK(dt < 5000 * cht_time_scale(), "init took %.0f ms", dt);
    return 0;
}

START_TEST(malformed_peer_record_fails_init)
{
    for (int k = 0; k < (int)(sizeof bad_values / sizeof bad_values[0]); k++) {
        cht_opts o = {.nranks = 2, .deadline_ms = 60000, .store_mode = CHT_STORE_PARENT,
                      .extra_env = "COHORT_TIMEOUT=10"};
        cht_result r;
        cht_run_ranks(&o, rank_fake_or_real, &k, &r);
        cht_assert_all_ok(&r);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("record");
    TCase *t = tcase_create("record");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, accepts_old_current_and_newer_records);
    tcase_add_test(t, refuses_what_does_not_fit);
    tcase_add_test(t, cpu_set_field);
    tcase_add_test(t, settings_field);
    tcase_add_test(t, round_trip);
    tcase_add_test(t, malformed_peer_record_fails_init);
    suite_add_tcase(s, t);
    return cht_run_suite(s);
}
