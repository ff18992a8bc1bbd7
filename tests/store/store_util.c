/* store_util.c - see store_util.h. */
#include "store_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double su_now_ms(void) { return (double)coh_now_ns() / 1e6; }

cohort_store_server *su_server(const cohort_store_server_opts *o, char *addr, size_t alen)
{
    static const char *jobs[] = {JOB_A, JOB_B};
    static const char *toks[] = {TOK_A, TOK_B};
    cohort_store_server_opts x;
    if (o)
        x = *o;
    else
        memset(&x, 0, sizeof x);
    x.bind_addr = "127.0.0.1";
    x.port = 0;
    x.job_ids = jobs;
    x.tokens = toks;
    x.n_jobs = 2;
    cohort_store_server *s = NULL;
    cohort_status st = cohort_store_server_start(&s, &x);
    ck_assert_msg(st == COHORT_OK, "server start: %s", coh_tls_err()->msg);
    snprintf(addr, alen, "127.0.0.1:%d", cohort_store_server_port(s));
    return s;
}

cohort_store *su_connect_gen(const char *addr, const char *job, const char *tok, uint32_t gen)
{
    cohort_store *s = NULL;
    cohort_status st = coh_store_connect_gen(&s, addr, job, tok, gen, 5000);
    ck_assert_msg(st == COHORT_OK, "connect %s as %s: %s: %s", addr, job,
                  cohort_status_name(st), coh_tls_err()->msg);
    cohort_store_set_timeout(s, 10000);
    return s;
}

cohort_store *su_connect(const char *addr, const char *job, const char *tok)
{
    return su_connect_gen(addr, job, tok, 0);
}

int su_until(cohort_store *s, int (*pred)(const cohort_store_stats *, void *), void *arg,
             int timeout_ms)
{
    uint64_t dl = coh_deadline_ns(timeout_ms);
    for (;;) {
        cohort_store_stats x;
        if (cohort_store_get_stats(s, &x) == COHORT_OK && pred(&x, arg))
            return 1;
        if (coh_ms_left(dl) == 0)
            return 0;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

int su_waiters_eq(const cohort_store_stats *st, void *n) { return st->waiters == (intptr_t)n; }
int su_conns_eq(const cohort_store_stats *st, void *n) { return st->conns == (intptr_t)n; }

const char *su_token_file(void)
{
    static char path[256];
    snprintf(path, sizeof path, "/tmp/cohort-store-test-%d.tok", (int)getpid());
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "token file %s: %s", path, strerror(errno));
    fprintf(f, "# test jobs\n%s %s\n%s %s\n", JOB_A, TOK_A, JOB_B, TOK_B);
    fclose(f);
    chmod(path, 0600);
    return path;
}

pid_t su_spawn_store(const char *const *args, char *addr, size_t alen, const char *errpath)
{
    int pfd[2];
    if (pipe(pfd) < 0)
        return -1;
    fflush(NULL);
    pid_t p = fork();
    if (p < 0)
        return -1;
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        if (errpath) {
            int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd >= 0) {
                dup2(fd, 2);
                close(fd);
            }
        }
        const char *argv[32];
        int n = 0;
        argv[n++] = cht_tool("cohort-store");
        for (int i = 0; args[i] && n < 31; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    /* Readiness is the "listening on" line, not a sleep. */
    char line[256];
    size_t len = 0;
    double t0 = su_now_ms();
    while (len < sizeof line - 1 && su_now_ms() - t0 < 10000) {
        struct pollfd pf = {.fd = pfd[0], .events = POLLIN};
        if (poll(&pf, 1, 10000) <= 0)
            break;
        ssize_t r = read(pfd[0], line + len, 1);
        if (r <= 0)
            break;
        if (line[len] == '\n')
            break;
        len++;
    }
    line[len] = 0;
    close(pfd[0]);
    const char *c = strrchr(line, ':');
    if (strncmp(line, "listening on ", 13) || !c) {
        kill(p, SIGKILL);
        return -1;
    }
    snprintf(addr, alen, "127.0.0.1:%s", c + 1);
    return p;
}

int su_port_of(const char *addr) { return atoi(strrchr(addr, ':') + 1); }

int su_raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int read_n(int fd, uint8_t *p, size_t n, uint64_t dl)
{
    size_t off = 0;
    while (off < n) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = poll(&pf, 1, coh_ms_left(dl));
        if (r == 0)
            return -2;
        if (r < 0 && errno == EINTR)
            continue;
        ssize_t k = recv(fd, p + off, n - off, 0);
        if (k <= 0)
            return -1;
        off += (size_t)k;
    }
    return 0;
}

int su_raw_read(int fd, coh_frame_hdr *h, uint8_t *buf, size_t cap, int timeout_ms)
{
    uint64_t dl = coh_deadline_ns(timeout_ms);
    uint8_t hb[COH_PROTO_HDR];
    int r = read_n(fd, hb, sizeof hb, dl);
    if (r)
        return r;
    coh_proto_parse_hdr(hb, sizeof hb, h);
    if (h->len > cap)
        return -3;
    r = read_n(fd, buf, h->len, dl);
    return r ? r : (int)h->len;
}

int su_raw_eof(int fd, int timeout_ms)
{
    uint64_t dl = coh_deadline_ns(timeout_ms);
    uint8_t b[4096];
    for (;;) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = poll(&pf, 1, coh_ms_left(dl));
        if (r == 0)
            return 0;
        if (r < 0 && errno == EINTR)
            continue;
        ssize_t k = recv(fd, b, sizeof b, 0);
        if (k <= 0)
            return 1;
    }
}

int su_raw_write(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

cohort_status su_raw_auth(int fd, const char *job, const char *tok, uint32_t gen)
{
    coh_frame_hdr h;
    uint8_t buf[1024];
    int n = su_raw_read(fd, &h, buf, sizeof buf, 5000);
    if (n != COH_PROTO_NONCE || h.op != COH_OP_HELLO)
        return COHORT_ERR_PROTOCOL;
    coh_wr w;
    coh_wr_init(&w);
    size_t at = coh_wr_begin_frame(&w);
    coh_wr_u32(&w, gen);
    coh_wr_bytes(&w, job, strlen(job));
    uint8_t mac[COH_PROTO_MAC];
    coh_proto_auth_mac(mac, tok, buf, (const uint8_t *)job, strlen(job), gen);
    coh_wr_raw(&w, mac, sizeof mac);
    coh_wr_end_frame(&w, at, COH_OP_AUTH, 0);
    int wr = su_raw_write(fd, w.p, w.len);
    coh_wr_free(&w);
    if (wr < 0)
        return COHORT_ERR_STORE;
    n = su_raw_read(fd, &h, buf, sizeof buf, 5000);
    if (n < 1)
        return COHORT_ERR_STORE;
    return (cohort_status)buf[0];
}

cohort_status su_raw_call(int fd, uint8_t op, uint32_t id, const void *payload, size_t n,
                          char *out, size_t outlen)
{
    uint8_t hb[COH_PROTO_HDR];
    coh_proto_put_hdr(hb, op, id, (uint32_t)n);
    if (su_raw_write(fd, hb, sizeof hb) < 0 || (n && su_raw_write(fd, payload, n) < 0))
        return COHORT_ERR_STORE;
    static uint8_t buf[1 << 20];
    for (;;) {
        coh_frame_hdr h;
        int r = su_raw_read(fd, &h, buf, sizeof buf, 5000);
        if (r < 1)
            return r == -2 ? COHORT_ERR_TIMEOUT : COHORT_ERR_STORE;
        if (h.op == COH_OP_ERROR || h.id == id) {
            coh_reply rep;
            char err[128];
            if (coh_proto_decode_reply(&h, buf, &rep, err, sizeof err) != COHORT_OK)
                return COHORT_ERR_PROTOCOL;
            if (out && outlen) {
                const uint8_t *p = rep.status ? rep.msg.p : rep.body.p;
                size_t l = rep.status ? rep.msg.n : rep.body.n;
                l = l < outlen - 1 ? l : outlen - 1;
                memcpy(out, p, l);
                out[l] = 0;
            }
            if (h.op == COH_OP_ERROR && rep.status == COHORT_OK)
                return COHORT_ERR_PROTOCOL;
            return rep.status;
        }
    }
}
