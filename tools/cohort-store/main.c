/*
 * cohort-store - the cohort rendezvous store server, standalone.
 *
 * Prints "listening on HOST:PORT" on stdout (flushed) once it accepts
 * connections, so scripts read readiness instead of sleeping; stops cleanly
 * on SIGTERM or SIGINT (clients see COHORT_ERR_STORE "shutting down").
 */
#include <errno.h>
#include <sys/random.h>
#include <sys/types.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cohort.h"
#include "cohort_store.h"

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
            "  --max-memory BYTES    everything the server holds, all jobs (default 1G)\n"
            "  --max-job-memory BYTES  one job's keys, values, waiters, requests\n"
            "                        arriving and replies queued (default: max-memory\n"
            "                        divided by the number of jobs)\n"
            "  --max-conn-memory BYTES  one connection's request arriving and replies\n"
            "                        queued (default: largest request + 8M)\n"
            "  --frame-timeout MS    close connections stalled mid-frame after MS\n"
            "                        without a byte (default 10000)\n"
            "  --auth-timeout MS     close connections not authenticated MS after they\n"
            "                        were accepted (default 5000)\n"
            "  --max-unauth N        connections authenticating at once (default 1024);\n"
            "                        the oldest is closed to make room\n"
            "  --torch-listen [HOST:]PORT\n"
            "                        also serve PyTorch's TCPStore protocol (torch 1.13\n"
            "                        and 2.x) there; a bare PORT binds 127.0.0.1. Its\n"
            "                        clients do NOT authenticate (docs/torch-store.md)\n"
            "  --torch-job ID        the job whose keys TCPStore clients use (default: the\n"
            "                        only job; without jobs, a job 'torch' is made)\n"
            "  --torch-allow-remote  let --torch-listen bind a non-loopback address\n"
            "  -h, --help, -V, --version\n"
            "options take --opt value or --opt=value\n"
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
    const char *listen = NULL, *tokfile = NULL, *tlisten = NULL, *tjob = NULL;
    int tremote = 0;
    cohort_store_server_opts o;
    memset(&o, 0, sizeof o);
    enum {
        O_LISTEN = 256,
        O_TOKEN_FILE,
        O_MAX_KEY,
        O_MAX_VALUE,
        O_MAX_MEMORY,
        O_MAX_CLIENTS,
        O_FRAME_TIMEOUT,
        O_AUTH_TIMEOUT,
        O_MAX_UNAUTH,
        O_MAX_JOB_MEMORY,
        O_MAX_CONN_MEMORY,
        O_TORCH_LISTEN,
        O_TORCH_JOB,
        O_TORCH_REMOTE,
    };
    static const struct option lo[] = {
        {"listen", required_argument, 0, O_LISTEN},
        {"token-file", required_argument, 0, O_TOKEN_FILE},
        {"max-key", required_argument, 0, O_MAX_KEY},
        {"max-value", required_argument, 0, O_MAX_VALUE},
        {"max-memory", required_argument, 0, O_MAX_MEMORY},
        {"max-clients", required_argument, 0, O_MAX_CLIENTS},
        {"frame-timeout", required_argument, 0, O_FRAME_TIMEOUT},
        {"auth-timeout", required_argument, 0, O_AUTH_TIMEOUT},
        {"max-unauth", required_argument, 0, O_MAX_UNAUTH},
        {"max-job-memory", required_argument, 0, O_MAX_JOB_MEMORY},
        {"max-conn-memory", required_argument, 0, O_MAX_CONN_MEMORY},
        {"torch-listen", required_argument, 0, O_TORCH_LISTEN},
        {"torch-job", required_argument, 0, O_TORCH_JOB},
        {"torch-allow-remote", no_argument, 0, O_TORCH_REMOTE},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0},
    };
    int c, idx = -1;
    opterr = 0;
    while ((idx = -1, c = getopt_long(argc, argv, ":hV", lo, &idx)) != -1) {
        size_t sz = 0;
        int ok = 1;
        if (c >= O_MAX_KEY && c <= O_MAX_CONN_MEMORY)
            ok = !parse_size(optarg, &sz);
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            cli_version("cohort-store");
            return 0;
        case O_LISTEN:
            listen = optarg;
            break;
        case O_TOKEN_FILE:
            tokfile = optarg;
            break;
        case O_TORCH_LISTEN:
            tlisten = optarg;
            break;
        case O_TORCH_JOB:
            tjob = optarg;
            break;
        case O_TORCH_REMOTE:
            tremote = 1;
            break;
        case O_MAX_KEY:
            o.max_key = sz;
            break;
        case O_MAX_VALUE:
            o.max_value = sz;
            break;
        case O_MAX_MEMORY:
            o.max_memory = sz;
            break;
        case O_MAX_JOB_MEMORY:
            ok = ok && sz > 0;
            o.max_job_memory = sz;
            break;
        case O_MAX_CONN_MEMORY:
            ok = ok && sz > 0;
            o.max_conn_memory = sz;
            break;
        case O_MAX_CLIENTS:
            ok = ok && sz > 0 && sz <= 1u << 24;
            o.max_clients = (int)sz;
            break;
        case O_FRAME_TIMEOUT:
            ok = ok && sz > 0 && sz <= 86400000;
            o.frame_timeout_ms = (int)sz;
            break;
        case O_AUTH_TIMEOUT:
            ok = ok && sz > 0 && sz <= 86400000;
            o.auth_timeout_ms = (int)sz;
            break;
        case O_MAX_UNAUTH:
            ok = ok && sz > 0 && sz <= 1u << 24;
            o.max_unauth = (int)sz;
            break;
        default:
            return cli_opt_error("cohort-store", c, argv, lo);
        }
        if (!ok) {
            fprintf(stderr, "cohort-store: bad option or value: --%s %s\n",
                    idx >= 0 ? lo[idx].name : "?", optarg);
            fprintf(stderr, "Try 'cohort-store --help'.\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cohort-store: unexpected argument '%s'\n", argv[optind]);
        fprintf(stderr, "Try 'cohort-store --help'.\n");
        return 2;
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
    /* TCPStore clients cannot authenticate: loopback unless told otherwise. */
    char thost[128];
    int tport = 0;
    if (tlisten) {
        if (!strchr(tlisten, ':') && tlisten[0] != '[') {
            snprintf(thost, sizeof thost, "127.0.0.1");
            char *end;
            long p = strtol(tlisten, &end, 10);
            if (end == tlisten || *end || p < 0 || p > 65535) {
                fprintf(stderr, "cohort-store: --torch-listen %s: expected [HOST:]PORT\n", tlisten);
                return 2;
            }
            tport = (int)p;
        } else if (parse_listen(tlisten, thost, sizeof thost, &tport) < 0) {
            fprintf(stderr, "cohort-store: --torch-listen %s: expected [HOST:]PORT or [V6]:PORT\n",
                    tlisten);
            return 2;
        }
        int loop = !strncmp(thost, "127.", 4) || !strcmp(thost, "::1") ||
                   !strcmp(thost, "localhost");
        if (!loop && !tremote) {
            fprintf(stderr,
                    "cohort-store: --torch-listen %s is not a loopback address: TCPStore clients "
                    "do not authenticate, so anyone who reaches it can read and change the job's "
                    "keys. Add --torch-allow-remote to accept that.\n",
                    tlisten);
            return 2;
        }
    } else if (tjob || tremote) {
        fprintf(stderr, "cohort-store: --torch-job / --torch-allow-remote need --torch-listen\n");
        return 2;
    }
    char torch_tok[65] = "";
    const char *torch_jobname = "torch", *torch_tokp = torch_tok;

    cohort_store_tokenfile *tf = NULL;
    const char *env_job = NULL, *env_tok = NULL;
    if (tokfile) {
        if (cohort_store_tokenfile_read(tokfile, &tf) != COHORT_OK) {
            fprintf(stderr, "cohort-store: %s\n", cohort_last_error(NULL));
            return 1;
        }
        /* The server needs job ids: a bare-token line (fine for cohort-kv)
         * is an error here. */
        o.job_ids = cohort_store_tokenfile_jobs(tf);
        o.tokens = cohort_store_tokenfile_tokens(tf);
        o.n_jobs = cohort_store_tokenfile_count(tf);
        for (int i = 0; i < o.n_jobs; i++)
            if (!o.job_ids[i]) {
                fprintf(stderr, "cohort-store: token file %s: every line needs 'job_id token'\n",
                        tokfile);
                cohort_store_tokenfile_free(tf);
                return 1;
            }
    } else {
        env_job = cli_env("COHORT_JOB_ID");
        env_tok = cli_env("COHORT_TOKEN");
        if ((!env_job || !env_tok) && tlisten) {
            /* TCPStore only: one job whose token nobody knows (cohort clients
             * cannot join it; TCPStore clients need none). */
            unsigned char rb[32];
            if (getrandom(rb, sizeof rb, 0) != (ssize_t)sizeof rb) {
                fprintf(stderr, "cohort-store: getrandom: %s\n", strerror(errno));
                return 1;
            }
            for (int k = 0; k < 32; k++)
                snprintf(torch_tok + 2 * (k % 32), 3, "%02x", rb[k]);
            env_job = tjob ? tjob : torch_jobname;
            env_tok = torch_tokp;
        }
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
    cohort_store_tokenfile_free(tf);
    if (st != COHORT_OK) {
        fprintf(stderr, "cohort-store: %s\n", cohort_last_error(NULL));
        return 1;
    }
    if (tlisten && cohort_store_server_torch_listen(s, thost, tport, tjob) != COHORT_OK) {
        fprintf(stderr, "cohort-store: %s\n", cohort_last_error(NULL));
        cohort_store_server_stop(s);
        return 1;
    }
    /* The readiness line: printed only once the socket listens, flushed so
     * a script reading our stdout through a pipe sees it at once. */
    if (strchr(host, ':'))
        printf("listening on [%s]:%d\n", host, cohort_store_server_port(s));
    else
        printf("listening on %s:%d\n", host, cohort_store_server_port(s));
    if (tlisten)
        printf(strchr(thost, ':') ? "torch listening on [%s]:%d\n" : "torch listening on %s:%d\n",
               thost, cohort_store_server_torch_port(s));
    fflush(stdout);
    fprintf(stderr, "cohort-store: serving %d job%s\n", njobs, njobs == 1 ? "" : "s");
    st = cohort_store_server_run(s, &stop_flag);
    cohort_store_server_stop(s);
    if (st != COHORT_OK) {
        fprintf(stderr, "cohort-store: %s\n", cohort_last_error(NULL));
        return 1;
    }
    fprintf(stderr, "cohort-store: stopped (%s)\n",
            stop_sig == SIGTERM ? "SIGTERM" : stop_sig == SIGINT ? "SIGINT" : "stop");
    return 0;
}
