/*
 * cohort-store - the cohort rendezvous store server, standalone.
 *
 * Prints "listening on HOST:PORT" on stdout (flushed) once it accepts
 * connections, so scripts read readiness instead of sleeping; stops cleanly
 * on SIGTERM or SIGINT (clients see COHORT_ERR_STORE "shutting down").
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort.h"
#include "store/tokenfile.h"
#include "util/util.h"

static volatile int stop_flag;
static volatile int stop_sig;

/* Only sets flags: the server loop sees them when epoll_pwait returns
 * EINTR (the loop unblocks SIGINT/SIGTERM only inside that wait, so there
 * is no window in which the signal is missed). */
static void on_signal(int sig)
{
    stop_sig = sig;
    stop_flag = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cohort-store --listen [HOST:]PORT [--token-file FILE] [options]\n"
            "\n"
            "Runs the cohort store server until SIGTERM or SIGINT.\n"
            "\n"
            "  --listen [HOST:]PORT  address to bind: 127.0.0.1:29500, [::1]:0, 0 (all\n"
            "                        interfaces). Port 0 picks a free port. Prints\n"
            "                        'listening on HOST:PORT' when ready.\n"
            "  --token-file FILE     lines 'job_id token' (several jobs); without it,\n"
            "                        COHORT_JOB_ID and COHORT_TOKEN from the environment\n"
            "  --max-key BYTES       longest key (default 4K)\n"
            "  --max-value BYTES     largest value (default 64M)\n"
            "  --max-clients N       concurrent connections (default 65536)\n"
            "  --max-memory BYTES    keys + values + waiters of all jobs (default 1G)\n"
            "  --frame-timeout MS    close connections stalled mid-frame after MS\n"
            "                        without a byte (default 10000)\n"
            "  --auth-timeout MS     close connections not authenticated MS after they\n"
            "                        were accepted (default 5000)\n"
            "  --max-unauth N        connections authenticating at once (default 1024);\n"
            "                        the oldest is closed to make room\n"
            "  -h, --help\n"
            "\n"
            "Sizes take K, M or G suffixes (powers of 1024).\n"
            "Exit status: 0 after a clean shutdown, 1 on error, 2 on bad usage.\n");
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -1;
    unsigned long long m = 1;
    if (*end == 'K' || *end == 'k')
        m = 1ull << 10;
    else if (*end == 'M' || *end == 'm')
        m = 1ull << 20;
    else if (*end == 'G' || *end == 'g')
        m = 1ull << 30;
    else if (*end)
        return -1;
    if (m > 1 && end[1])
        return -1;
    if (v > SIZE_MAX / m)
        return -1;
    *out = (size_t)(v * m);
    return 0;
}

/* "[HOST:]PORT", "[v6]:PORT". A bare port listens on all IPv4 interfaces. */
static int parse_listen(const char *a, char *host, size_t hl, int *port)
{
    const char *ps;
    if (a[0] == '[') {
        const char *rb = strchr(a, ']');
        if (!rb || rb[1] != ':' || (size_t)(rb - a) > hl)
            return -1;
        snprintf(host, hl, "%.*s", (int)(rb - a - 1), a + 1);
        ps = rb + 2;
    } else {
        const char *c = strrchr(a, ':');
        if (c) {
            if ((size_t)(c - a) >= hl)
                return -1;
            snprintf(host, hl, "%.*s", (int)(c - a), a);
            ps = c + 1;
        } else {
            snprintf(host, hl, "0.0.0.0");
            ps = a;
        }
        if (!host[0])
            snprintf(host, hl, "0.0.0.0");
    }
    char *end;
    long p = strtol(ps, &end, 10);
    if (end == ps || *end || p < 0 || p > 65535)
        return -1;
    *port = (int)p;
    return 0;
}

int main(int argc, char **argv)
{
    const char *listen = NULL, *tokfile = NULL;
    cohort_store_server_opts o;
    memset(&o, 0, sizeof o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        size_t sz;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "cohort-store: %s needs a value (or is unknown)\n", a);
            usage(stderr);
            return 2;
        }
        i++;
        if (!strcmp(a, "--listen")) {
            listen = v;
        } else if (!strcmp(a, "--token-file")) {
            tokfile = v;
        } else if (!strcmp(a, "--max-key") && !parse_size(v, &sz)) {
            o.max_key = sz;
        } else if (!strcmp(a, "--max-value") && !parse_size(v, &sz)) {
            o.max_value = sz;
        } else if (!strcmp(a, "--max-memory") && !parse_size(v, &sz)) {
            o.max_memory = sz;
        } else if (!strcmp(a, "--max-clients") && !parse_size(v, &sz) && sz > 0 &&
                   sz <= 1u << 24) {
            o.max_clients = (int)sz;
        } else if (!strcmp(a, "--frame-timeout") && !parse_size(v, &sz) && sz > 0 &&
                   sz <= 86400000) {
            o.frame_timeout_ms = (int)sz;
        } else if (!strcmp(a, "--auth-timeout") && !parse_size(v, &sz) && sz > 0 &&
                   sz <= 86400000) {
            o.auth_timeout_ms = (int)sz;
        } else if (!strcmp(a, "--max-unauth") && !parse_size(v, &sz) && sz > 0 &&
                   sz <= 1u << 24) {
            o.max_unauth = (int)sz;
        } else {
            fprintf(stderr, "cohort-store: bad option or value: %s %s\n", a, v);
            usage(stderr);
            return 2;
        }
    }
    if (!listen) {
        fprintf(stderr, "cohort-store: --listen is required\n");
        usage(stderr);
        return 2;
    }
    char host[128];
    if (parse_listen(listen, host, sizeof host, &o.port) < 0) {
        fprintf(stderr, "cohort-store: --listen %s: expected [HOST:]PORT or [V6]:PORT\n", listen);
        return 2;
    }
    o.bind_addr = host;

    coh_tokenfile tf;
    memset(&tf, 0, sizeof tf);
    const char *env_job = NULL, *env_tok = NULL;
    if (tokfile) {
        if (coh_tokenfile_read(tokfile, &tf) != COHORT_OK) {
            fprintf(stderr, "cohort-store: %s\n", coh_tls_err()->msg);
            return 1;
        }
        /* The server needs job ids: a bare-token line (fine for cohort-kv)
         * is an error here. */
        for (int i = 0; i < tf.n; i++)
            if (!tf.jobs[i]) {
                fprintf(stderr, "cohort-store: token file %s: every line needs 'job_id token'\n",
                        tokfile);
                coh_tokenfile_free(&tf);
                return 1;
            }
        o.job_ids = (const char *const *)tf.jobs;
        o.tokens = (const char *const *)tf.tokens;
        o.n_jobs = tf.n;
    } else {
        env_job = coh_env_str("COHORT_JOB_ID");
        env_tok = coh_env_str("COHORT_TOKEN");
        if (!env_job || !env_tok) {
            fprintf(stderr, "cohort-store: give --token-file, or set COHORT_JOB_ID and "
                            "COHORT_TOKEN\n");
            return 2;
        }
        o.job_ids = &env_job;
        o.tokens = &env_tok;
        o.n_jobs = 1;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    cohort_store_server *s = NULL;
    cohort_status st = cohort_store_server_create(&s, &o);
    int njobs = o.n_jobs;
    coh_tokenfile_free(&tf);
    if (st != COHORT_OK) {
        fprintf(stderr, "cohort-store: %s\n", coh_tls_err()->msg);
        return 1;
    }
    /* The readiness line: printed only once the socket listens, flushed so
     * a script reading our stdout through a pipe sees it at once. */
    if (strchr(host, ':'))
        printf("listening on [%s]:%d\n", host, cohort_store_server_port(s));
    else
        printf("listening on %s:%d\n", host, cohort_store_server_port(s));
    fflush(stdout);
    fprintf(stderr, "cohort-store: serving %d job%s\n", njobs, njobs == 1 ? "" : "s");
    st = cohort_store_server_run(s, &stop_flag);
    cohort_store_server_stop(s);
    if (st != COHORT_OK) {
        fprintf(stderr, "cohort-store: %s\n", coh_tls_err()->msg);
        return 1;
    }
    fprintf(stderr, "cohort-store: stopped (%s)\n",
            stop_sig == SIGTERM ? "SIGTERM" : stop_sig == SIGINT ? "SIGINT" : "stop");
    return 0;
}
