/*
 * test_store_proto.c - the wire format, byte for byte. The hex examples here
 * are the ones in docs/store-protocol.md: they are checked against the pure
 * encoder/decoder, against the bytes the real client sends (a fake server
 * with a fixed nonce records them) and against the bytes the real server
 * answers (raw socket). Plus the parser's edge cases.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "store_util.h"

/* "43 53 01 ..." -> bytes; returns the length. */
static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
    size_t n = 0;
    while (*h) {
        if (*h == ' ' || *h == '\n' || *h == '|') {
            h++;
            continue;
        }
        unsigned v;
        ck_assert(sscanf(h, "%2x", &v) == 1);
        ck_assert(n < cap);
        out[n++] = (uint8_t)v;
        h += 2;
    }
    return n;
}

#define ASSERT_BYTES(got, gotlen, hex)                                                             \
    do {                                                                                           \
        uint8_t want_[512];                                                                        \
        size_t wl_ = unhex(hex, want_, sizeof want_);                                              \
        ck_assert_msg((gotlen) == wl_ && !memcmp((got), want_, wl_),                               \
                      "bytes differ from the documented example %s (got %zu bytes)", hex,         \
                      (size_t)(gotlen));                                                           \
    } while (0)

/* ---- the documented examples ---- */
#define EX_HELLO                                                                                   \
    "43 53 01 01 00 00 00 00 20 00 00 00 | 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 11 " \
    "12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f"
/* job "job1", generation 3, token "secret", nonce 00..1f */
#define EX_AUTH                                                                                    \
    "43 53 01 02 00 00 00 00 2c 00 00 00 | 03 00 00 00 | 04 00 00 00 6a 6f 62 31 | 60 42 f7 25 "   \
    "44 9a 92 eb 22 e8 87 a4 d7 70 94 b2 90 1c e7 82 12 7e 0d d5 e5 3d 05 86 bf 82 49 7e"
/* default limits: max_key 4096, max_value 64 MiB, max_frame 64 MiB + 4 KiB + 1 MiB; gen 3 */
#define EX_AUTH_OK                                                                                 \
    "43 53 01 82 00 00 00 00 11 00 00 00 | 00 | 00 10 00 00 | 00 00 00 04 | 00 10 10 04 | 03 00 "  \
    "00 00"
#define EX_SET "43 53 01 10 01 00 00 00 0a 00 00 00 | 01 00 00 00 6b | 01 00 00 00 76"
#define EX_SET_OK "43 53 01 90 01 00 00 00 01 00 00 00 | 00"
#define EX_GET "43 53 01 11 02 00 00 00 06 00 00 00 | 00 | 01 00 00 00 6b"
#define EX_GET_OK "43 53 01 91 02 00 00 00 06 00 00 00 | 00 | 01 00 00 00 76"
#define EX_ADD "43 53 01 12 03 00 00 00 0d 00 00 00 | 01 00 00 00 6e | 05 00 00 00 00 00 00 00"
#define EX_ADD_OK "43 53 01 92 03 00 00 00 09 00 00 00 | 00 | 05 00 00 00 00 00 00 00"
#define EX_WAIT_ANY                                                                                \
    "43 53 01 15 04 00 00 00 0f 00 00 00 | 01 | 02 00 00 00 | 01 00 00 00 61 | 01 00 00 00 62"
#define EX_WAIT_ANY_OK "43 53 01 95 04 00 00 00 05 00 00 00 | 00 | 00 00 00 00"
#define EX_GET_MISSING "43 53 01 11 05 00 00 00 06 00 00 00 | 02 | 01 00 00 00 78"
#define EX_NOT_FOUND                                                                               \
    "43 53 01 91 05 00 00 00 16 00 00 00 | 0b | 11 00 00 00 6b 65 79 20 27 78 27 20 6e 6f 74 20 "  \
    "66 6f 75 6e 64"
#define EX_BARRIER "43 53 01 1c 06 00 00 00 0c 00 00 00 | 04 00 00 00 69 6e 69 74 | 01 00 00 00"
#define EX_BARRIER_OK "43 53 01 9c 06 00 00 00 01 00 00 00 | 00"
#define EX_CANCEL "43 53 01 1d 07 00 00 00 04 00 00 00 | 02 00 00 00"
#define EX_ERROR_PREAUTH                                                                           \
    "43 53 01 7f 00 00 00 00 1f 00 00 00 | 0a | 1a 00 00 00 65 78 70 65 63 74 65 64 20 41 55 54 "  \
    "48 2c 20 67 6f 74 20 6f 70 20 30 78 31 30"

START_TEST(header_parse)
{
    uint8_t b[64];
    coh_frame_hdr h;
    size_t n = unhex(EX_SET, b, sizeof b);
    for (size_t i = 0; i < COH_PROTO_HDR; i++)
        ck_assert_int_eq(coh_proto_parse_hdr(b, i, &h), COH_HDR_NEED);
    ck_assert_int_eq(coh_proto_parse_hdr(b, n, &h), COH_HDR_OK);
    ck_assert_uint_eq(h.op, COH_OP_SET);
    ck_assert_uint_eq(h.id, 1);
    ck_assert_uint_eq(h.len, 10);
    b[2] = 2;
    ck_assert_int_eq(coh_proto_parse_hdr(b, n, &h), COH_HDR_BAD_VERSION);
    ck_assert_uint_eq(h.version, 2);
    b[0] = 'G';
    ck_assert_int_eq(coh_proto_parse_hdr(b, n, &h), COH_HDR_BAD_MAGIC);
    uint8_t put[COH_PROTO_HDR];
    coh_proto_put_hdr(put, COH_OP_SET, 1, 10);
    ASSERT_BYTES(put, sizeof put, "43 53 01 10 01 00 00 00 0a 00 00 00");
}
END_TEST

START_TEST(auth_mac_example)
{
    uint8_t nonce[32], mac[32];
    for (int i = 0; i < 32; i++)
        nonce[i] = (uint8_t)i;
    coh_proto_auth_mac(mac, "secret", nonce, (const uint8_t *)"job1", 4, 3);
    ASSERT_BYTES(mac, sizeof mac,
                 "60 42 f7 25 44 9a 92 eb 22 e8 87 a4 d7 70 94 b2 90 1c e7 82 12 7e 0d d5 e5 3d 05 "
                 "86 bf 82 49 7e");
    /* any change of job, generation, nonce or token changes the MAC */
    uint8_t m2[32];
    coh_proto_auth_mac(m2, "secret", nonce, (const uint8_t *)"job1", 4, 4);
    ck_assert(memcmp(mac, m2, 32));
    coh_proto_auth_mac(m2, "secreT", nonce, (const uint8_t *)"job1", 4, 3);
    ck_assert(memcmp(mac, m2, 32));
    coh_proto_auth_mac(m2, "secret", nonce, (const uint8_t *)"job2", 4, 3);
    ck_assert(memcmp(mac, m2, 32));
    nonce[31] ^= 1;
    coh_proto_auth_mac(m2, "secret", nonce, (const uint8_t *)"job1", 4, 3);
    ck_assert(memcmp(mac, m2, 32));
}
END_TEST

static void decode_ok(const char *hex, coh_req *q)
{
    static uint8_t b[512];
    size_t n = unhex(hex, b, sizeof b);
    coh_frame_hdr h;
    ck_assert_int_eq(coh_proto_parse_hdr(b, n, &h), COH_HDR_OK);
    ck_assert_uint_eq(h.len, n - COH_PROTO_HDR);
    coh_proto_limits lim = {4096, 1 << 20};
    char err[256];
    cohort_status st = coh_proto_decode_req(&h, b + COH_PROTO_HDR, &lim, q, err, sizeof err);
    ck_assert_msg(st == COHORT_OK, "%s: %s", hex, err);
}

START_TEST(decode_examples)
{
    coh_req q;
    decode_ok(EX_AUTH, &q);
    ck_assert_uint_eq(q.generation, 3);
    ck_assert(q.job.n == 4 && !memcmp(q.job.p, "job1", 4));
    decode_ok(EX_SET, &q);
    ck_assert(q.key.n == 1 && q.key.p[0] == 'k' && q.val.n == 1 && q.val.p[0] == 'v');
    decode_ok(EX_GET, &q);
    ck_assert(q.flags == 0 && q.key.n == 1);
    decode_ok(EX_ADD, &q);
    ck_assert_int_eq(q.delta, 5);
    decode_ok(EX_WAIT_ANY, &q);
    ck_assert(q.flags == COH_WAITF_ANY && q.n == 2);
    coh_slice k, v;
    coh_req_next(&q, &k, &v);
    ck_assert(k.n == 1 && k.p[0] == 'a');
    coh_req_next(&q, &k, &v);
    ck_assert(k.n == 1 && k.p[0] == 'b');
    decode_ok(EX_GET_MISSING, &q);
    ck_assert_uint_eq(q.flags, COH_WAITF_NOWAIT);
    decode_ok(EX_BARRIER, &q);
    ck_assert(q.n == 1 && q.key.n == 4);
    decode_ok(EX_CANCEL, &q);
    ck_assert_uint_eq(q.target, 2);
}
END_TEST

START_TEST(decode_rejects)
{
    coh_proto_limits lim = {8, 16};
    char err[256];
    coh_req q;
    coh_frame_hdr h = {.version = 1, .op = COH_OP_SET, .id = 1};
    uint8_t p[64] = {0};
    /* key over the limit: TOO_LARGE, naming the limit */
    coh_put_u32(p, 9);
    coh_put_u32(p + 13, 0);
    h.len = 17;
    ck_assert_int_eq(coh_proto_decode_req(&h, p, &lim, &q, err, sizeof err),
                     COHORT_ERR_TOO_LARGE);
    ck_assert(strstr(err, "max_key"));
    /* value over the limit */
    coh_put_u32(p, 1);
    coh_put_u32(p + 5, 17);
    h.len = 5 + 4 + 17;
    ck_assert_int_eq(coh_proto_decode_req(&h, p, &lim, &q, err, sizeof err),
                     COHORT_ERR_TOO_LARGE);
    ck_assert(strstr(err, "max_value"));
    /* every truncation of a valid SET is malformed */
    coh_put_u32(p, 1);
    coh_put_u32(p + 5, 2);
    for (uint32_t n = 0; n < 11; n++) {
        h.len = n;
        ck_assert_int_eq(coh_proto_decode_req(&h, p, &lim, &q, err, sizeof err),
                         COHORT_ERR_PROTOCOL);
    }
    h.len = 11;
    ck_assert_int_eq(coh_proto_decode_req(&h, p, &lim, &q, err, sizeof err), COHORT_OK);
    h.len = 12; /* trailing byte */
    ck_assert_int_eq(coh_proto_decode_req(&h, p, &lim, &q, err, sizeof err),
                     COHORT_ERR_PROTOCOL);
    /* counts that cannot fit */
    h.op = COH_OP_MULTI_SET;
    coh_put_u32(p, 0x40000000u);
    h.len = 8;
    ck_assert_int_eq(coh_proto_decode_req(&h, p, &lim, &q, err, sizeof err),
                     COHORT_ERR_PROTOCOL);
    /* AUTH: empty job id */
    h.op = COH_OP_AUTH;
    memset(p, 0, sizeof p);
    h.len = 4 + 4 + 32;
    ck_assert_int_eq(coh_proto_decode_req(&h, p, &lim, &q, err, sizeof err),
                     COHORT_ERR_PROTOCOL);
    /* unknown op, reply ops as requests */
    h.op = 0x42;
    h.len = 0;
    ck_assert_int_eq(coh_proto_decode_req(&h, p, &lim, &q, err, sizeof err),
                     COHORT_ERR_PROTOCOL);
    h.op = COH_OP_SET | COH_PROTO_REPLY;
    ck_assert_int_eq(coh_proto_decode_req(&h, p, &lim, &q, err, sizeof err),
                     COHORT_ERR_PROTOCOL);
}
END_TEST

START_TEST(reply_decode)
{
    uint8_t b[256];
    size_t n = unhex(EX_NOT_FOUND, b, sizeof b);
    coh_frame_hdr h;
    ck_assert_int_eq(coh_proto_parse_hdr(b, n, &h), COH_HDR_OK);
    coh_reply r;
    char err[128];
    ck_assert_int_eq(coh_proto_decode_reply(&h, b + COH_PROTO_HDR, &r, err, sizeof err),
                     COHORT_OK);
    ck_assert_int_eq(r.status, COHORT_ERR_NOT_FOUND);
    ck_assert(r.msg.n == 17 && !memcmp(r.msg.p, "key 'x' not found", 17));
    /* unknown status, empty payload, junk after the message */
    uint8_t p[8] = {200};
    h.len = 1;
    ck_assert_int_eq(coh_proto_decode_reply(&h, p, &r, err, sizeof err), COHORT_ERR_PROTOCOL);
    h.len = 0;
    ck_assert_int_eq(coh_proto_decode_reply(&h, p, &r, err, sizeof err), COHORT_ERR_PROTOCOL);
    p[0] = COHORT_ERR_STORE;
    coh_put_u32(p + 1, 1);
    p[5] = 'x';
    h.len = 7;
    ck_assert_int_eq(coh_proto_decode_reply(&h, p, &r, err, sizeof err), COHORT_ERR_PROTOCOL);
}
END_TEST

START_TEST(counter_parsing)
{
    int64_t v;
    ck_assert(coh_proto_parse_i64((const uint8_t *)"0", 1, &v) == 0 && v == 0);
    ck_assert(coh_proto_parse_i64((const uint8_t *)"-42", 3, &v) == 0 && v == -42);
    ck_assert(coh_proto_parse_i64((const uint8_t *)"9223372036854775807", 19, &v) == 0 &&
              v == INT64_MAX);
    ck_assert(coh_proto_parse_i64((const uint8_t *)"-9223372036854775808", 20, &v) == 0 &&
              v == INT64_MIN);
    ck_assert(coh_proto_parse_i64((const uint8_t *)"9223372036854775808", 19, &v) < 0);
    ck_assert(coh_proto_parse_i64((const uint8_t *)"-9223372036854775809", 20, &v) < 0);
    ck_assert(coh_proto_parse_i64((const uint8_t *)"", 0, &v) < 0);
    ck_assert(coh_proto_parse_i64((const uint8_t *)"-", 1, &v) < 0);
    ck_assert(coh_proto_parse_i64((const uint8_t *)" 1", 2, &v) < 0);
    ck_assert(coh_proto_parse_i64((const uint8_t *)"+1", 2, &v) < 0);
    ck_assert(coh_proto_parse_i64((const uint8_t *)"1x", 2, &v) < 0);
    ck_assert(coh_proto_parse_i64((const uint8_t *)"1\0", 2, &v) < 0);
}
END_TEST

/* ---- the real server answers with exactly the documented bytes ---- */

static void raw_exchange(int fd, const char *req, const char *want_reply)
{
    uint8_t b[512];
    size_t n = unhex(req, b, sizeof b);
    ck_assert_int_eq(su_raw_write(fd, b, n), 0);
    if (!want_reply)
        return;
    coh_frame_hdr h;
    uint8_t body[512];
    int r = su_raw_read(fd, &h, body, sizeof body, 5000);
    ck_assert(r >= 0);
    uint8_t all[600];
    coh_proto_put_hdr_v(all, h.version, h.op, h.id, h.len);
    memcpy(all + COH_PROTO_HDR, body, (size_t)r);
    ASSERT_BYTES(all, COH_PROTO_HDR + (size_t)r, want_reply);
}

START_TEST(server_bytes_match_examples)
{
    static const char *jobs[] = {"job1"}, *toks[] = {"secret"};
    cohort_store_server_opts o;
    memset(&o, 0, sizeof o);
    o.bind_addr = "127.0.0.1";
    o.job_ids = jobs;
    o.tokens = toks;
    o.n_jobs = 1;
    cohort_store_server *s = NULL;
    ST_OK(cohort_store_server_start(&s, &o), NULL);
    int fd = su_raw_connect(cohort_store_server_port(s));
    /* the server's nonce is random: authenticate with the real MAC, then
     * check the AUTH reply bytes */
    coh_frame_hdr h;
    uint8_t nonce[64];
    ck_assert_int_eq(su_raw_read(fd, &h, nonce, sizeof nonce, 5000), 32);
    ck_assert_uint_eq(h.op, COH_OP_HELLO);
    uint8_t a[128];
    size_t an = unhex(EX_AUTH, a, sizeof a);
    coh_proto_auth_mac(a + an - 32, "secret", nonce, (const uint8_t *)"job1", 4, 3);
    ck_assert_int_eq(su_raw_write(fd, a, an), 0);
    uint8_t body[64];
    int r = su_raw_read(fd, &h, body, sizeof body, 5000);
    uint8_t all[128];
    coh_proto_put_hdr(all, h.op, h.id, h.len);
    memcpy(all + COH_PROTO_HDR, body, (size_t)r);
    ASSERT_BYTES(all, COH_PROTO_HDR + (size_t)r, EX_AUTH_OK);
    raw_exchange(fd, EX_SET, EX_SET_OK);
    raw_exchange(fd, EX_GET, EX_GET_OK);
    raw_exchange(fd, EX_ADD, EX_ADD_OK);
    raw_exchange(fd, "43 53 01 10 09 00 00 00 0a 00 00 00 01 00 00 00 61 01 00 00 00 31", NULL);
    /* set "a" (id 9) makes the WAIT-any below answer with index 0 */
    raw_exchange(fd, "", "43 53 01 90 09 00 00 00 01 00 00 00 00");
    raw_exchange(fd, EX_WAIT_ANY, EX_WAIT_ANY_OK);
    raw_exchange(fd, EX_GET_MISSING, EX_NOT_FOUND);
    raw_exchange(fd, EX_CANCEL, NULL); /* no reply; the next one is in step */
    raw_exchange(fd, EX_BARRIER, EX_BARRIER_OK);
    close(fd);
    /* an ERROR frame: a request before AUTH */
    fd = su_raw_connect(cohort_store_server_port(s));
    ck_assert_int_eq(su_raw_read(fd, &h, nonce, sizeof nonce, 5000), 32);
    raw_exchange(fd, EX_SET, EX_ERROR_PREAUTH);
    close(fd);
    cohort_store_server_stop(s);
}
END_TEST

/* ---- the real client sends exactly the documented bytes ---- */

typedef struct fakesrv {
    int lfd, port;
    int ok;
    char why[256];
} fakesrv;

static int fs_expect(int c, const char *hex, fakesrv *f, const char *what)
{
    uint8_t want[512], got[512];
    size_t n = unhex(hex, want, sizeof want);
    size_t off = 0;
    while (off < n) {
        struct pollfd pf = {.fd = c, .events = POLLIN};
        if (poll(&pf, 1, 5000) <= 0)
            break;
        ssize_t r = recv(c, got + off, n - off, 0);
        if (r <= 0)
            break;
        off += (size_t)r;
    }
    if (off != n || memcmp(got, want, n)) {
        snprintf(f->why, sizeof f->why, "client's %s differs from the example (%zu bytes)", what,
                 off);
        return -1;
    }
    return 0;
}

static void *fake_thread(void *p)
{
    fakesrv *f = p;
    int c = accept(f->lfd, NULL, NULL);
    uint8_t b[512];
    size_t n = unhex(EX_HELLO, b, sizeof b);
    su_raw_write(c, b, n);
    if (fs_expect(c, EX_AUTH, f, "AUTH") == 0) {
        n = unhex(EX_AUTH_OK, b, sizeof b);
        su_raw_write(c, b, n);
        if (fs_expect(c, EX_SET, f, "SET") == 0) {
            n = unhex(EX_SET_OK, b, sizeof b);
            su_raw_write(c, b, n);
            if (fs_expect(c, EX_GET, f, "GET") == 0) {
                n = unhex(EX_GET_OK, b, sizeof b);
                su_raw_write(c, b, n);
                f->ok = 1;
            }
        }
    }
    su_raw_eof(c, 5000);
    close(c);
    return NULL;
}

START_TEST(client_bytes_match_examples)
{
    fakesrv f;
    memset(&f, 0, sizeof f);
    f.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    ck_assert(bind(f.lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(f.lfd, 1) == 0);
    getsockname(f.lfd, (struct sockaddr *)&a, &l);
    pthread_t th;
    pthread_create(&th, NULL, fake_thread, &f);
    char ad[64];
    snprintf(ad, sizeof ad, "127.0.0.1:%d", ntohs(a.sin_port));
    cohort_store *s = NULL;
    ST_OK(coh_store_connect_gen(&s, ad, "job1", "secret", 3, 5000), NULL);
    ST_OK(cohort_store_sets(s, "k", "v"), s); /* request id 1 */
    char *v = NULL;
    ST_OK(cohort_store_gets(s, "k", &v, -1), s); /* id 2, waiting get: flags 0 */
    ck_assert_str_eq(v, "v");
    free(v);
    cohort_store_close(s);
    pthread_join(th, NULL);
    ck_assert_msg(f.ok, "%s", f.why);
    close(f.lfd);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("store_proto");
    TCase *t = tcase_create("proto");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, header_parse);
    tcase_add_test(t, auth_mac_example);
    tcase_add_test(t, decode_examples);
    tcase_add_test(t, decode_rejects);
    tcase_add_test(t, reply_decode);
    tcase_add_test(t, counter_parsing);
    tcase_add_test(t, server_bytes_match_examples);
    tcase_add_test(t, client_bytes_match_examples);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
