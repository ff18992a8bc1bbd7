/*
 * test_store_faults.c - bad input and faults. Raw sockets write garbage,
 * truncated frames, absurd lengths, half frames, wrong versions, malformed
 * payloads; meanwhile good clients keep working and their data stays
 * intact. Fake servers check the client side of version and magic errors.
 * A standalone cohort-store killed with SIGKILL (or stopped) while clients
 * wait must give them COHORT_ERR_STORE (or a timeout), never a hang.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store_util.h"

static cohort_store_server *srv;
static char addr[64];
static int port;
static cohort_store *good;

#define NGOOD 200

/* A server with a short frame timeout and a known data set in job A. */
static void setup(void)
{
    cohort_store_server_opts o;
    memset(&o, 0, sizeof o);
    o.frame_timeout_ms = 400;
    o.auth_timeout_ms = 400;
    o.max_value = 64 * 1024;
    srv = su_server(&o, addr, sizeof addr);
    port = su_port_of(addr);
    good = su_connect(addr, JOB_A, TOK_A);
    for (int i = 0; i < NGOOD; i++) {
        char k[32], v[64];
        snprintf(k, sizeof k, "data/%d", i);
        snprintf(v, sizeof v, "value-%d-%d", i, i * i);
        ST_OK(cohort_store_sets(good, k, v), good);
    }
}

static void teardown(void)
{
    cohort_store_close(good);
    cohort_store_server_stop(srv);
}

/* Every key of the data set is intact and the good client still works. */
static void check_data_intact(cohort_store *s)
{
    for (int i = 0; i < NGOOD; i++) {
        char k[32], v[64], *got = NULL;
        snprintf(k, sizeof k, "data/%d", i);
        snprintf(v, sizeof v, "value-%d-%d", i, i * i);
        ST_OK(cohort_store_gets(s, k, &got, 0), s);
        ck_assert_str_eq(got, v);
        free(got);
    }
    int64_t n;
    ST_OK(cohort_store_num_keys(s, &n), s);
    ck_assert_int_ge(n, NGOOD);
    ST_OK(cohort_store_sets(s, "after", "ok"), s);
}

/* Reads frames until an ERROR frame; returns its status (-1: none). */
static int expect_error_frame(int fd, char *msg, size_t ml, int timeout_ms)
{
    uint8_t buf[4096];
    for (;;) {
        coh_frame_hdr h;
        int n = su_raw_read(fd, &h, buf, sizeof buf, timeout_ms);
        if (n < 0)
            return -1;
        if (h.op == COH_OP_ERROR) {
            coh_reply r;
            char e[64];
            if (coh_proto_decode_reply(&h, buf, &r, e, sizeof e))
                return -1;
            snprintf(msg, ml, "%.*s", (int)r.msg.n, (const char *)r.msg.p);
            return (int)r.status;
        }
    }
}

static int authed_raw(void)
{
    int fd = su_raw_connect(port);
    ck_assert(fd >= 0);
    cohort_status st = su_raw_auth(fd, JOB_A, TOK_A, 0);
    ck_assert_int_eq(st, COHORT_OK);
    return fd;
}

START_TEST(garbage_bytes)
{
    uint32_t seed = 12345;
    for (int round = 0; round < 20; round++) {
        int fd = su_raw_connect(port);
        ck_assert(fd >= 0);
        if (round % 2)
            ck_assert_int_eq(su_raw_auth(fd, JOB_A, TOK_A, 0), COHORT_OK);
        uint8_t junk[1500];
        for (size_t i = 0; i < sizeof junk; i++) {
            seed = seed * 1103515245u + 12345u;
            junk[i] = (uint8_t)(seed >> 16);
        }
        junk[0] = (uint8_t)('C' + 1 + round); /* never the magic */
        su_raw_write(fd, junk, (size_t)(50 + round * 70));
        char msg[256] = "";
        int st = expect_error_frame(fd, msg, sizeof msg, 3000);
        ck_assert_msg(st == COHORT_ERR_PROTOCOL, "round %d: status %d (%s)", round, st, msg);
        ck_assert_msg(strstr(msg, "not a cohort store frame"), "%s", msg);
        ck_assert(su_raw_eof(fd, 3000));
        close(fd);
    }
    check_data_intact(good);
}
END_TEST

START_TEST(truncated_frames_then_close)
{
    uint8_t f[COH_PROTO_HDR + 20];
    coh_proto_put_hdr(f, COH_OP_AUTH, 0, 100);
    for (size_t cut = 1; cut < sizeof f; cut += 3) {
        int fd = su_raw_connect(port);
        ck_assert(fd >= 0);
        su_raw_write(fd, f, cut);
        close(fd);
    }
    for (size_t cut = 1; cut < 30; cut += 4) {
        int fd = authed_raw();
        uint8_t g[COH_PROTO_HDR + 30] = {0};
        coh_proto_put_hdr(g, COH_OP_SET, 9, 30);
        su_raw_write(fd, g, cut);
        close(fd);
    }
    /* the server is still serving, everything intact, connections released */
    check_data_intact(good);
    ck_assert(su_until(good, su_conns_eq, (void *)1, 5000));
}
END_TEST

START_TEST(huge_length_prefix)
{
    cohort_store_stats before, after;
    ST_OK(cohort_store_get_stats(good, &before), good);
    /* before authentication: refused at the header, nothing allocated */
    int fd = su_raw_connect(port);
    uint8_t h[COH_PROTO_HDR];
    coh_frame_hdr fh;
    uint8_t buf[256];
    ck_assert_int_eq(su_raw_read(fd, &fh, buf, sizeof buf, 3000), COH_PROTO_NONCE);
    coh_proto_put_hdr(h, COH_OP_AUTH, 0, 0xFFFFFFFFu);
    su_raw_write(fd, h, sizeof h);
    char msg[256];
    ck_assert_int_eq(expect_error_frame(fd, msg, sizeof msg, 3000), COHORT_ERR_PROTOCOL);
    ck_assert_msg(strstr(msg, "before authentication"), "%s", msg);
    ck_assert(su_raw_eof(fd, 3000));
    close(fd);
    /* after authentication: answered TOO_LARGE at once, by request id,
     * without waiting for (or buffering) the 4 GiB */
    fd = authed_raw();
    coh_proto_put_hdr(h, COH_OP_SET, 77, 0xFFFFFFFFu);
    double t0 = su_now_ms();
    su_raw_write(fd, h, sizeof h);
    ck_assert(su_raw_read(fd, &fh, buf, sizeof buf, 3000) > 0);
    ck_assert(su_now_ms() - t0 < 2000);
    ck_assert_uint_eq(fh.id, 77);
    ck_assert_uint_eq(buf[0], COHORT_ERR_TOO_LARGE);
    ST_OK(cohort_store_get_stats(good, &after), good);
    ck_assert_int_eq(after.mem_used, before.mem_used);
    close(fd);
    check_data_intact(good);
}
END_TEST

START_TEST(oversized_frame_skipped_connection_usable)
{
    /* max_value 64 KiB -> frame limit 64 KiB + 4 KiB + 1 MiB; send 2 MiB */
    int fd = authed_raw();
    size_t n = 2u << 20;
    uint8_t *f = calloc(1, COH_PROTO_HDR + n);
    coh_proto_put_hdr(f, COH_OP_SET, 5, (uint32_t)n);
    char out[256];
    /* the reply comes before the body is even sent */
    ck_assert_int_eq(su_raw_write(fd, f, COH_PROTO_HDR), 0);
    coh_frame_hdr fh;
    uint8_t buf[512];
    ck_assert(su_raw_read(fd, &fh, buf, sizeof buf, 3000) > 0);
    ck_assert_uint_eq(fh.id, 5);
    ck_assert_uint_eq(buf[0], COHORT_ERR_TOO_LARGE);
    ck_assert_int_eq(su_raw_write(fd, f + COH_PROTO_HDR, n), 0);
    free(f);
    /* the body was skipped: the next frame is understood */
    ck_assert_int_eq(su_raw_call(fd, COH_OP_PING, 6, NULL, 0, out, sizeof out), COHORT_OK);
    /* a value over max_value inside a frame under the limit: clear error, usable */
    coh_wr w;
    coh_wr_init(&w);
    static uint8_t big[70000];
    coh_wr_bytes(&w, "k", 1);
    coh_wr_bytes(&w, big, sizeof big);
    ck_assert_int_eq(su_raw_call(fd, COH_OP_SET, 7, w.p, w.len, out, sizeof out),
                     COHORT_ERR_TOO_LARGE);
    ck_assert_msg(strstr(out, "max_value"), "%s", out);
    coh_wr_free(&w);
    ck_assert_int_eq(su_raw_call(fd, COH_OP_PING, 8, NULL, 0, out, sizeof out), COHORT_OK);
    close(fd);
    check_data_intact(good);
}
END_TEST

START_TEST(half_frame_stall_does_not_block_others)
{
    /* 50 connections hold half a SET frame each, one holds half a header,
     * one never authenticates. */
    enum { NST = 50 };
    int fds[NST + 2];
    for (int i = 0; i < NST; i++) {
        fds[i] = authed_raw();
        uint8_t g[COH_PROTO_HDR + 10] = {0};
        coh_proto_put_hdr(g, COH_OP_SET, 1, 100);
        su_raw_write(fds[i], g, sizeof g);
    }
    fds[NST] = authed_raw();
    uint8_t g[5] = {'C', 'S', 1, COH_OP_SET, 0};
    su_raw_write(fds[NST], g, sizeof g);
    fds[NST + 1] = su_raw_connect(port);
    /* Others are served at full speed meanwhile. */
    double worst = 0;
    for (int i = 0; i < 300; i++) {
        double t0 = su_now_ms();
        char k[32], *v = NULL;
        snprintf(k, sizeof k, "live/%d", i);
        ST_OK(cohort_store_sets(good, k, k), good);
        ST_OK(cohort_store_gets(good, k, &v, 1000), good);
        ck_assert_str_eq(v, k);
        free(v);
        double el = su_now_ms() - t0;
        if (el > worst)
            worst = el;
    }
    ck_assert_msg(worst < 250, "a good client's op took %.1f ms while others stalled", worst);
    /* The stalled connections are closed after the frame timeout. */
    double t0 = su_now_ms();
    for (int i = 0; i < NST + 2; i++) {
        char msg[256] = "";
        int st = expect_error_frame(fds[i], msg, sizeof msg, 5000);
        ck_assert_msg(st == COHORT_ERR_TIMEOUT, "conn %d: status %d (%s)", i, st, msg);
        ck_assert(su_raw_eof(fds[i], 3000));
        close(fds[i]);
    }
    double el = su_now_ms() - t0;
    ck_assert_msg(el < 4000, "stalled connections closed after %.1f ms", el);
    check_data_intact(good);
    ck_assert(su_until(good, su_conns_eq, (void *)1, 5000));
}
END_TEST

START_TEST(wrong_version_server_side)
{
    int fd = su_raw_connect(port);
    coh_frame_hdr fh;
    uint8_t buf[256];
    ck_assert_int_eq(su_raw_read(fd, &fh, buf, sizeof buf, 3000), COH_PROTO_NONCE);
    uint8_t f[COH_PROTO_HDR + 40] = {0};
    coh_proto_put_hdr_v(f, 2, COH_OP_AUTH, 0, 40);
    su_raw_write(fd, f, sizeof f);
    char msg[256];
    ck_assert_int_eq(expect_error_frame(fd, msg, sizeof msg, 3000), COHORT_ERR_PROTOCOL);
    ck_assert_msg(strstr(msg, "version 2 not supported") && strstr(msg, "version 1"), "%s", msg);
    ck_assert(su_raw_eof(fd, 3000));
    close(fd);
    check_data_intact(good);
}
END_TEST

/* A fake server: accepts one connection, sends `greeting`, records the
 * first 12 bytes the client sends back. */
typedef struct fake {
    int lfd;
    int port;
    uint8_t greeting[64];
    size_t glen;
    uint8_t got[COH_PROTO_HDR];
    int gotn;
} fake;

static void *fake_server(void *p)
{
    fake *f = p;
    int c = accept(f->lfd, NULL, NULL);
    if (c < 0)
        return NULL;
    su_raw_write(c, f->greeting, f->glen);
    struct pollfd pf = {.fd = c, .events = POLLIN};
    while (f->gotn < COH_PROTO_HDR && poll(&pf, 1, 3000) > 0) {
        ssize_t r = recv(c, f->got + f->gotn, (size_t)(COH_PROTO_HDR - f->gotn), 0);
        if (r <= 0)
            break;
        f->gotn += (int)r;
    }
    close(c);
    return NULL;
}

static void fake_listen(fake *f)
{
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    ck_assert(bind(f->lfd, (struct sockaddr *)&a, sizeof a) == 0);
    ck_assert(listen(f->lfd, 4) == 0);
    getsockname(f->lfd, (struct sockaddr *)&a, &l);
    f->port = ntohs(a.sin_port);
}

START_TEST(wrong_version_client_side)
{
    fake f;
    memset(&f, 0, sizeof f);
    fake_listen(&f);
    coh_proto_put_hdr_v(f.greeting, 9, COH_OP_HELLO, 0, COH_PROTO_NONCE);
    f.glen = COH_PROTO_HDR + COH_PROTO_NONCE;
    pthread_t th;
    pthread_create(&th, NULL, fake_server, &f);
    char a2[64];
    snprintf(a2, sizeof a2, "127.0.0.1:%d", f.port);
    cohort_store *c = NULL;
    ST_EXPECT(cohort_store_connect(&c, a2, JOB_A, TOK_A, 3000), COHORT_ERR_PROTOCOL, NULL);
    ck_assert_msg(strstr(coh_tls_err()->msg, "version 9") &&
                      strstr(coh_tls_err()->msg, "version 1"),
                  "%s", coh_tls_err()->msg);
    pthread_join(th, NULL);
    /* the client told the server which version it speaks */
    ck_assert_int_eq(f.gotn, COH_PROTO_HDR);
    ck_assert_uint_eq(f.got[0], 'C');
    ck_assert_uint_eq(f.got[2], COH_PROTO_VERSION);
    close(f.lfd);
}
END_TEST

START_TEST(not_a_store_server)
{
    fake f;
    memset(&f, 0, sizeof f);
    fake_listen(&f);
    const char *http = "HTTP/1.1 400 Bad Request\r\n\r\n";
    memcpy(f.greeting, http, strlen(http));
    f.glen = strlen(http);
    pthread_t th;
    pthread_create(&th, NULL, fake_server, &f);
    char a2[64];
    snprintf(a2, sizeof a2, "127.0.0.1:%d", f.port);
    cohort_store *c = NULL;
    double t0 = su_now_ms();
    ST_EXPECT(cohort_store_connect(&c, a2, JOB_A, TOK_A, 3000), COHORT_ERR_PROTOCOL, NULL);
    ck_assert(su_now_ms() - t0 < 2000); /* final: no retries until the deadline */
    ck_assert_msg(strstr(coh_tls_err()->msg, "not a cohort store server"), "%s",
                  coh_tls_err()->msg);
    pthread_join(th, NULL);
    close(f.lfd);
}
END_TEST

START_TEST(malformed_payloads_answered)
{
    int fd = authed_raw();
    char out[256];
    /* key length runs past the payload */
    uint8_t p1[8];
    coh_put_u32(p1, 1000);
    memcpy(p1 + 4, "abcd", 4);
    ck_assert_int_eq(su_raw_call(fd, COH_OP_SET, 1, p1, sizeof p1, out, sizeof out),
                     COHORT_ERR_PROTOCOL);
    ck_assert_msg(strstr(out, "truncated"), "%s", out);
    /* a count the payload cannot hold */
    uint8_t p2[8];
    coh_put_u32(p2, 0xFFFFFFFFu);
    coh_put_u32(p2 + 4, 0);
    ck_assert_int_eq(su_raw_call(fd, COH_OP_CHECK, 2, p2, sizeof p2, out, sizeof out),
                     COHORT_ERR_PROTOCOL);
    ck_assert_msg(strstr(out, "does not fit"), "%s", out);
    /* trailing bytes */
    uint8_t p3[9] = {0};
    ck_assert_int_eq(su_raw_call(fd, COH_OP_DELETE, 3, p3, sizeof p3, out, sizeof out),
                     COHORT_ERR_PROTOCOL);
    /* unknown op */
    ck_assert_int_eq(su_raw_call(fd, 0x55, 4, NULL, 0, out, sizeof out), COHORT_ERR_PROTOCOL);
    ck_assert_msg(strstr(out, "unknown request op 0x55"), "%s", out);
    /* a second AUTH */
    ck_assert_int_eq(su_raw_call(fd, COH_OP_AUTH, 5, p3, 0, out, sizeof out),
                     COHORT_ERR_PROTOCOL);
    /* BARRIER of 0 */
    uint8_t p4[9];
    coh_put_u32(p4, 1);
    p4[4] = 'b';
    coh_put_u32(p4 + 5, 0);
    ck_assert_int_eq(su_raw_call(fd, COH_OP_BARRIER, 6, p4, sizeof p4, out, sizeof out),
                     COHORT_ERR_PROTOCOL);
    /* the connection is still usable */
    ck_assert_int_eq(su_raw_call(fd, COH_OP_PING, 7, NULL, 0, out, sizeof out), COHORT_OK);
    close(fd);
    check_data_intact(good);
}
END_TEST

START_TEST(random_frames_after_auth)
{
    /* Well-framed requests with random ops and payloads: each gets an
     * answer or is ignored (CANCEL), never a crash or a lost frame. */
    int fd = authed_raw();
    uint32_t seed = 99;
    uint8_t f[COH_PROTO_HDR + 64];
    static const uint8_t ops[] = {COH_OP_SET, COH_OP_GET, COH_OP_ADD, COH_OP_CAS,
                                  COH_OP_CHECK, COH_OP_WAIT, COH_OP_DELETE, COH_OP_NUM_KEYS,
                                  COH_OP_LIST, COH_OP_MULTI_GET, COH_OP_MULTI_SET,
                                  COH_OP_APPEND, COH_OP_BARRIER, COH_OP_CANCEL, 0x33};
    for (int i = 0; i < 3000; i++) {
        seed = seed * 1664525u + 1013904223u;
        uint32_t len = (seed >> 8) % 64;
        for (uint32_t j = 0; j < len; j++) {
            seed = seed * 1664525u + 1013904223u;
            f[COH_PROTO_HDR + j] = (uint8_t)(seed >> 24) & ((seed & 1) ? 0x03 : 0xff);
        }
        coh_proto_put_hdr(f, ops[(seed >> 4) % sizeof ops], (uint32_t)i + 100, len);
        ck_assert_int_eq(su_raw_write(fd, f, COH_PROTO_HDR + len), 0);
        /* drain replies now and then so the server keeps reading */
        if (i % 100 == 99) {
            char out[64];
            ck_assert_int_eq(su_raw_call(fd, COH_OP_PING, 1u << 30, NULL, 0, out, sizeof out),
                             COHORT_OK);
        }
    }
    char out[64];
    ck_assert_int_eq(su_raw_call(fd, COH_OP_PING, (1u << 30) + 1, NULL, 0, out, sizeof out),
                     COHORT_OK);
    close(fd);
    check_data_intact(good);
}
END_TEST

START_TEST(frames_before_auth_refused)
{
    int fd = su_raw_connect(port);
    coh_frame_hdr fh;
    uint8_t buf[256];
    ck_assert_int_eq(su_raw_read(fd, &fh, buf, sizeof buf, 3000), COH_PROTO_NONCE);
    uint8_t f[COH_PROTO_HDR + 10] = {0};
    coh_proto_put_hdr(f, COH_OP_SET, 1, 10);
    su_raw_write(fd, f, sizeof f);
    char msg[256];
    ck_assert_int_eq(expect_error_frame(fd, msg, sizeof msg, 3000), COHORT_ERR_PROTOCOL);
    ck_assert_msg(strstr(msg, "expected AUTH"), "%s", msg);
    ck_assert(su_raw_eof(fd, 3000));
    close(fd);
    /* an AUTH with a bad MAC from a raw client */
    fd = su_raw_connect(port);
    ck_assert_int_eq(su_raw_auth(fd, JOB_A, "bad", 0), COHORT_ERR_AUTH);
    ck_assert(su_raw_eof(fd, 3000));
    close(fd);
    check_data_intact(good);
}
END_TEST

typedef struct stoparg {
    cohort_store *s;
    cohort_status st;
    double t_done;
} stoparg;

static void *stop_waiter(void *p)
{
    stoparg *a = p;
    char *v = NULL;
    a->st = cohort_store_gets(a->s, "never", &v, 20000);
    a->t_done = su_now_ms();
    free(v);
    return NULL;
}

START_TEST(embedded_stop_fails_waiters)
{
    cohort_store *w = su_connect(addr, JOB_A, TOK_A);
    stoparg a = {.s = w};
    pthread_t th;
    pthread_create(&th, NULL, stop_waiter, &a);
    ck_assert(su_until(good, su_waiters_eq, (void *)1, 5000));
    double t0 = su_now_ms();
    cohort_store_server_stop(srv);
    pthread_join(th, NULL);
    ck_assert_int_eq(a.st, COHORT_ERR_STORE);
    ck_assert(a.t_done - t0 < 2000);
    ck_assert_msg(strstr(cohort_store_last_error(w), "shutting down") &&
                      strstr(cohort_store_last_error(w), addr),
                  "%s", cohort_store_last_error(w));
    ST_EXPECT(cohort_store_sets(w, "k", "v"), COHORT_ERR_STORE, w);
    cohort_store_close(w);
    /* teardown stops a server: give it a fresh one */
    srv = su_server(NULL, addr, sizeof addr);
}
END_TEST

/* ---- standalone server killed / stopped ---- */

static int child_waiter(const char *a, int kind, int fd_ready)
{
    cohort_store *s = NULL;
    CHILD_OK(cohort_store_connect(&s, a, JOB_A, TOK_A, 5000), NULL);
    char b = 1;
    RANK_CHECK(write(fd_ready, &b, 1) == 1, "ready pipe");
    double t0 = su_now_ms();
    cohort_status st;
    char *v = NULL;
    if (kind == 0) {
        st = cohort_store_gets(s, "never", &v, 30000);
    } else if (kind == 1) {
        st = cohort_store_barrier(s, "never", 100, 30000);
    } else {
        const void *k[] = {"a", "b"};
        size_t kl[] = {1, 1};
        st = cohort_store_wait(s, k, kl, 2, 30000);
    }
    double el = su_now_ms() - t0;
    RANK_CHECK(st == COHORT_ERR_STORE, "pending call: %s: %s", cohort_status_name(st),
               cohort_store_last_error(s));
    RANK_CHECK(el < 10000, "took %.0f ms", el);
    RANK_CHECK(strstr(cohort_store_last_error(s), a) != NULL, "no address in: %s",
               cohort_store_last_error(s));
    /* later calls fail at once too */
    t0 = su_now_ms();
    st = cohort_store_sets(s, "k", "v");
    RANK_CHECK(st == COHORT_ERR_STORE, "later call: %s", cohort_status_name(st));
    RANK_CHECK(su_now_ms() - t0 < 1000, "later call took %.0f ms", su_now_ms() - t0);
    RANK_CHECK(strstr(cohort_store_last_error(s), a) != NULL, "%s", cohort_store_last_error(s));
    cohort_store_close(s);
    return 0;
}

START_TEST(server_killed_while_clients_wait)
{
    const char *args[] = {"--listen", "127.0.0.1:0", "--token-file", su_token_file(), NULL};
    char a2[64];
    pid_t sp = su_spawn_store(args, a2, sizeof a2, "/dev/null");
    ck_assert(sp > 0);
    enum { NC = 9 };
    int rp[2];
    ck_assert(pipe(rp) == 0);
    fflush(NULL);
    pid_t kids[NC];
    for (int i = 0; i < NC; i++) {
        kids[i] = fork();
        if (kids[i] == 0)
            _exit(child_waiter(a2, i % 3, rp[1]));
    }
    for (int i = 0; i < NC; i++) {
        char b;
        ck_assert(read(rp[0], &b, 1) == 1);
    }
    cohort_store *obs = su_connect(a2, JOB_A, TOK_A);
    ck_assert(su_until(obs, su_waiters_eq, (void *)NC, 10000));
    ck_assert(kill(sp, SIGKILL) == 0);
    waitpid(sp, NULL, 0);
    /* the observer is a pending-less client: its next call fails too */
    ST_EXPECT(cohort_store_sets(obs, "k", "v"), COHORT_ERR_STORE, obs);
    double t0 = su_now_ms();
    for (int i = 0; i < NC; i++) {
        int st;
        ck_assert(waitpid(kids[i], &st, 0) == kids[i]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client %d: status %d", i, st);
    }
    ck_assert(su_now_ms() - t0 < 15000);
    cohort_store_close(obs);
}
END_TEST

START_TEST(server_stopped_gives_timeout_not_hang)
{
    const char *args[] = {"--listen", "127.0.0.1:0", "--token-file", su_token_file(), NULL};
    char a2[64];
    pid_t sp = su_spawn_store(args, a2, sizeof a2, "/dev/null");
    ck_assert(sp > 0);
    cohort_store *s = su_connect(a2, JOB_A, TOK_A);
    ST_OK(cohort_store_sets(s, "k", "v"), s);
    kill(sp, SIGSTOP);
    char *v = NULL;
    double t0 = su_now_ms();
    ST_EXPECT(cohort_store_gets(s, "k", &v, 300), COHORT_ERR_TIMEOUT, s);
    ck_assert(su_now_ms() - t0 < 3000);
    cohort_store_set_timeout(s, 300);
    ST_EXPECT(cohort_store_sets(s, "k2", "v"), COHORT_ERR_TIMEOUT, s);
    kill(sp, SIGCONT);
    /* once it runs again the connection is in step: late replies dropped */
    cohort_store_set_timeout(s, 10000);
    ST_OK(cohort_store_gets(s, "k2", &v, 5000), s);
    ck_assert_str_eq(v, "v");
    free(v);
    ST_OK(cohort_store_gets(s, "k", &v, 5000), s);
    ck_assert_str_eq(v, "v");
    free(v);
    cohort_store_close(s);
    kill(sp, SIGKILL);
    waitpid(sp, NULL, 0);
}
END_TEST

/* ---- allocation failures (COHORT_FAULT_ALLOC / coh_alloc_fail_after) ---- */

static int client_ops(const char *a)
{
    cohort_store *s = NULL;
    cohort_status st = cohort_store_connect(&s, a, JOB_A, TOK_A, 2000);
    if (st != COHORT_OK)
        return st == COHORT_ERR_NOMEM || st == COHORT_ERR_STORE ? 0 : 10 + (int)st;
    char *v = NULL;
    const void *ks[2] = {"x", "y"};
    size_t kl[2] = {1, 1};
    void *vs[2];
    size_t vls[2];
    int64_t r;
    cohort_status sts[5];
    sts[0] = cohort_store_sets(s, "x", "1");
    sts[1] = cohort_store_gets(s, "x", &v, 0);
    sts[2] = cohort_store_add(s, "y", 1, 1, &r);
    sts[3] = cohort_store_multi_get(s, ks, kl, 2, vs, vls, 0);
    cohort_store *view = NULL;
    sts[4] = cohort_store_prefixed(s, "p/", &view);
    cohort_store_close(view);
    free(v);
    if (sts[3] == COHORT_OK) {
        free(vs[0]);
        free(vs[1]);
    }
    cohort_store_close(s);
    for (int i = 0; i < 5; i++)
        if (sts[i] != COHORT_OK && sts[i] != COHORT_ERR_NOMEM && sts[i] != COHORT_ERR_STORE &&
            sts[i] != COHORT_ERR_NOT_FOUND)
            return 20 + i;
    return 0;
}

START_TEST(client_allocation_failures)
{
    /* The n-th allocation of the client fails, for every n along the path:
     * each call returns a status (NOMEM where it hit), never crashes. */
    for (long n = 0; n < 120; n++) {
        fflush(NULL);
        pid_t p = fork();
        if (p == 0) {
            coh_alloc_fail_after(n);
            int rc = client_ops(addr);
            coh_alloc_fail_after(-1);
            _exit(rc);
        }
        int st;
        ck_assert(waitpid(p, &st, 0) == p);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fail_after %ld: status %d", n, st);
    }
    check_data_intact(good);
}
END_TEST

START_TEST(server_allocation_failures)
{
    /* cohort-store with its n-th allocation failing: it refuses to start
     * with a message, or serves with NOMEM errors; it never crashes. */
    const char *args[] = {"--listen", "127.0.0.1:0", "--token-file", su_token_file(), NULL};
    int served = 0;
    for (int n = 0; n < 60; n += (n < 20 ? 1 : 3)) {
        char env[64], a[64];
        snprintf(env, sizeof env, "%d", n);
        setenv("COHORT_FAULT_ALLOC", env, 1);
        pid_t sp = su_spawn_store(args, a, sizeof a, "/dev/null");
        unsetenv("COHORT_FAULT_ALLOC");
        if (sp < 0)
            continue; /* refused to start (checked below by exit status) */
        served++;
        fflush(NULL);
        pid_t p = fork();
        if (p == 0)
            _exit(client_ops(a));
        int st;
        ck_assert(waitpid(p, &st, 0) == p);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client vs fail_after %d: %d", n,
                      st);
        /* still alive, and stops cleanly */
        ck_assert_msg(waitpid(sp, &st, WNOHANG) == 0, "cohort-store died (fail_after %d)", n);
        kill(sp, SIGTERM);
        ck_assert(waitpid(sp, &st, 0) == sp);
        ck_assert_msg(WIFEXITED(st), "cohort-store signalled %d (fail_after %d)", st, n);
    }
    ck_assert(served > 10);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("store_faults");
    TCase *t = tcase_create("bad_input");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, garbage_bytes);
    tcase_add_test(t, truncated_frames_then_close);
    tcase_add_test(t, huge_length_prefix);
    tcase_add_test(t, oversized_frame_skipped_connection_usable);
    tcase_add_test(t, half_frame_stall_does_not_block_others);
    tcase_add_test(t, wrong_version_server_side);
    tcase_add_test(t, wrong_version_client_side);
    tcase_add_test(t, not_a_store_server);
    tcase_add_test(t, malformed_payloads_answered);
    tcase_add_test(t, random_frames_after_auth);
    tcase_add_test(t, frames_before_auth_refused);
    tcase_add_test(t, embedded_stop_fails_waiters);
    tcase_add_test(t, client_allocation_failures);
    suite_add_tcase(s, t);
    TCase *d = tcase_create("server_death");
    tcase_set_timeout(d, 60);
    tcase_add_test(d, server_killed_while_clients_wait);
    tcase_add_test(d, server_stopped_gives_timeout_not_hang);
    tcase_add_test(d, server_allocation_failures);
    suite_add_tcase(s, d);
    return s;
}

COH_TEST_MAIN(suite)
