/*
 * cohort-kv - command-line client of the cohort store (like redis-cli or
 * etcdctl). Connects with generation 0 (a tool: never refused as stale and
 * never raises the job's generation).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cohort.h"
#include "store/tcp.h"
#include "store/tokenfile.h"
#include "util/util.h"

/* Exit codes (documented in docs/store.md). */
enum {
    EX_OK = 0,
    EX_NOTFOUND = 1, /* get of an absent key without waiting; delete of an absent key */
    EX_USAGE = 2,
    EX_TIMEOUT = 3,
    EX_AUTH = 4,
    EX_STORE = 5,    /* unreachable, connection lost, server refused */
    EX_OTHER = 6,    /* limits, protocol, anything else */
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cohort-kv [options] COMMAND [ARGS]\n"
            "\n"
            "commands:\n"
            "  set KEY VALUE        VALUE '-' reads it from stdin (binary-safe)\n"
            "  get KEY              prints the value; waits up to --timeout for it\n"
            "  add KEY N            adds N to a counter and prints the result\n"
            "  wait KEY...          waits until every KEY exists\n"
            "  delete KEY\n"
            "  list [PREFIX]        keys, one per line\n"
            "  num-keys\n"
            "  ping                 one round trip to the server\n"
            "  stats                server counters (connections, waiters, keys, memory)\n"
            "  set-generation N     operator: set the job's generation to N (0: the next\n"
            "                       launcher run may start at any); closes the job's\n"
            "                       connections of other generations; prints the old one\n"
            "\n"
            "options (anywhere on the line):\n"
            "  --addr HOST:PORT     store address (default $COHORT_STORE)\n"
            "  --job ID             job id (default $COHORT_JOB_ID)\n"
            "  --token-file FILE    'job_id token' lines or one token (default\n"
            "                       $COHORT_TOKEN)\n"
            "  --timeout MS         how long get/wait wait for keys (get: 0, no wait;\n"
            "                       wait: 60000)\n"
            "  --connect-timeout MS (default 5000)\n"
            "  --raw                get: no newline after the value\n"
            "\n"
            "exit status: 0 ok, 1 key not found, 2 usage, 3 timed out, 4 authentication\n"
            "refused, 5 store unreachable or connection lost, 6 other error\n");
}

/* One exit code per kind of failure, so scripts can tell "not there yet"
 * (1, 3) from "wrong credentials" (4) from "store down" (5) without parsing
 * stderr. */
static int exit_code(cohort_status st)
{
    switch (st) {
    case COHORT_OK:
        return EX_OK;
    case COHORT_ERR_NOT_FOUND:
        return EX_NOTFOUND;
    case COHORT_ERR_TIMEOUT:
        return EX_TIMEOUT;
    case COHORT_ERR_AUTH:
        return EX_AUTH;
    case COHORT_ERR_STORE:
    case COHORT_ERR_PEER_LOST:
        return EX_STORE;
    case COHORT_ERR_INVALID:
        return EX_USAGE;
    default:
        return EX_OTHER;
    }
}

static int parse_int(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

/* "set KEY -": the value is stdin, read whole (binary-safe). */
static int read_stdin(char **buf, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    if (!b)
        return -1;
    for (;;) {
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                return -1;
            }
            b = nb;
        }
        ssize_t r = read(0, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(b);
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    *buf = b;
    *len = n;
    return 0;
}

static int write_all(const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(1, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *addr = coh_env_str("COHORT_STORE");
    const char *job = coh_env_str("COHORT_JOB_ID");
    const char *tokfile = NULL;
    long long timeout = -2, ctimeout = 5000;
    int raw = 0;
    const char *pos[64];
    int npos = 0;
    /* Options may come anywhere ("get K --timeout 5000", as in redis-cli);
     * everything else is the command and its arguments. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return EX_OK;
        }
        if (!strcmp(a, "--raw")) {
            raw = 1;
            continue;
        }
        if (!strncmp(a, "--", 2) && a[2]) {
            if (i + 1 >= argc) {
                fprintf(stderr, "cohort-kv: %s needs a value\n", a);
                return EX_USAGE;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--addr"))
                addr = v;
            else if (!strcmp(a, "--job"))
                job = v;
            else if (!strcmp(a, "--token-file"))
                tokfile = v;
            else if (!strcmp(a, "--timeout") && !parse_int(v, &timeout) && timeout >= 0 &&
                     timeout <= 2147483647)
                ;
            else if (!strcmp(a, "--connect-timeout") && !parse_int(v, &ctimeout) &&
                     ctimeout >= 0 && ctimeout <= 2147483647)
                ;
            else {
                fprintf(stderr, "cohort-kv: bad option or value: %s %s\n", a, v);
                return EX_USAGE;
            }
            continue;
        }
        if (npos == (int)(sizeof pos / sizeof pos[0])) {
            fprintf(stderr, "cohort-kv: too many arguments\n");
            return EX_USAGE;
        }
        pos[npos++] = a;
    }
    if (npos == 0) {
        usage(stderr);
        return EX_USAGE;
    }
    const char *cmd = pos[0];
    int nargs = npos - 1;
    const char *const *args = pos + 1;
    struct {
        const char *name;
        int min, max;
    } cmds[] = {{"set", 2, 2},  {"get", 1, 1},    {"add", 2, 2},      {"wait", 1, 63},
                {"delete", 1, 1}, {"list", 0, 1}, {"num-keys", 0, 0}, {"ping", 0, 0},
                {"stats", 0, 0}, {"set-generation", 1, 1}};
    int known = 0;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(cmd, cmds[i].name)) {
            known = 1;
            if (nargs < cmds[i].min || nargs > cmds[i].max) {
                fprintf(stderr, "cohort-kv: %s takes %d..%d arguments, got %d\n", cmd,
                        cmds[i].min, cmds[i].max, nargs);
                return EX_USAGE;
            }
        }
    if (!known) {
        fprintf(stderr, "cohort-kv: unknown command '%s'\n", cmd);
        usage(stderr);
        return EX_USAGE;
    }
    if (!addr) {
        fprintf(stderr, "cohort-kv: no store address (--addr or COHORT_STORE)\n");
        return EX_USAGE;
    }
    if (!job) {
        fprintf(stderr, "cohort-kv: no job id (--job or COHORT_JOB_ID)\n");
        return EX_USAGE;
    }
    /* The token comes from a file (never from argv: it would show in ps) or
     * from the environment. */
    coh_tokenfile tf;
    memset(&tf, 0, sizeof tf);
    const char *token = NULL;
    if (tokfile) {
        if (coh_tokenfile_read(tokfile, &tf) != COHORT_OK) {
            fprintf(stderr, "cohort-kv: %s\n", coh_tls_err()->msg);
            return EX_USAGE;
        }
        token = coh_tokenfile_find(&tf, job);
        if (!token) {
            fprintf(stderr, "cohort-kv: token file %s has no token for job '%s'\n", tokfile, job);
            coh_tokenfile_free(&tf);
            return EX_USAGE;
        }
    } else {
        token = coh_env_str("COHORT_TOKEN");
        if (!token) {
            fprintf(stderr, "cohort-kv: no token (--token-file or COHORT_TOKEN)\n");
            return EX_USAGE;
        }
    }

    cohort_store *s = NULL;
    cohort_status st = cohort_store_connect(&s, addr, job, token, (int)ctimeout);
    coh_tokenfile_free(&tf);
    if (st != COHORT_OK) {
        fprintf(stderr, "cohort-kv: %s\n", coh_tls_err()->msg);
        return exit_code(st);
    }
    int rc = EX_OK;
    if (!strcmp(cmd, "set")) {
        char *buf = NULL;
        size_t len = strlen(args[1]);
        if (!strcmp(args[1], "-") && read_stdin(&buf, &len) < 0) {
            fprintf(stderr, "cohort-kv: reading stdin: %s\n", strerror(errno));
            cohort_store_close(s);
            return EX_OTHER;
        }
        st = cohort_store_set(s, args[0], strlen(args[0]), buf ? buf : args[1], len);
        free(buf);
    } else if (!strcmp(cmd, "get")) {
        void *v = NULL;
        size_t vl = 0;
        /* Default: no waiting, so "get" of an absent key answers at once
         * (exit 1) instead of hanging a script. */
        st = cohort_store_get(s, args[0], strlen(args[0]), &v, &vl,
                              timeout == -2 ? 0 : (int)timeout);
        if (st == COHORT_OK) {
            if (write_all(v, vl) < 0 || (!raw && write_all("\n", 1) < 0))
                rc = EX_OTHER;
            free(v);
        }
    } else if (!strcmp(cmd, "add")) {
        long long d;
        if (parse_int(args[1], &d) < 0) {
            fprintf(stderr, "cohort-kv: add: '%s' is not an integer\n", args[1]);
            cohort_store_close(s);
            return EX_USAGE;
        }
        int64_t r = 0;
        st = cohort_store_add(s, args[0], strlen(args[0]), d, &r);
        if (st == COHORT_OK)
            printf("%lld\n", (long long)r);
    } else if (!strcmp(cmd, "wait")) {
        const void *ks[63];
        size_t kl[63];
        for (int i = 0; i < nargs; i++) {
            ks[i] = args[i];
            kl[i] = strlen(args[i]);
        }
        st = cohort_store_wait(s, ks, kl, nargs, timeout == -2 ? 60000 : (int)timeout);
    } else if (!strcmp(cmd, "delete")) {
        int d = 0;
        st = cohort_store_delete(s, args[0], strlen(args[0]), &d);
        if (st == COHORT_OK && !d) {
            fprintf(stderr, "cohort-kv: delete: key '%s' not found\n", args[0]);
            rc = EX_NOTFOUND;
        }
    } else if (!strcmp(cmd, "list")) {
        char **ks = NULL;
        size_t *kl = NULL;
        int n = 0;
        st = cohort_store_list(s, nargs ? args[0] : "", &ks, &kl, &n);
        for (int i = 0; i < n; i++) {
            if (write_all(ks[i], kl[i]) < 0 || write_all("\n", 1) < 0)
                rc = EX_OTHER;
            free(ks[i]);
        }
        free(ks);
        free(kl);
    } else if (!strcmp(cmd, "num-keys")) {
        int64_t n = 0;
        st = cohort_store_num_keys(s, &n);
        if (st == COHORT_OK)
            printf("%lld\n", (long long)n);
    } else if (!strcmp(cmd, "ping")) {
        st = coh_store_tcp_ping(s);
        if (st == COHORT_OK)
            printf("ok\n");
    } else if (!strcmp(cmd, "set-generation")) {
        char *end;
        errno = 0;
        unsigned long g = strtoul(args[0], &end, 10);
        if (errno || end == args[0] || *end || args[0][0] == '-' || g > UINT32_MAX) {
            fprintf(stderr, "cohort-kv: set-generation: '%s' is not a generation (0..%u)\n",
                    args[0], UINT32_MAX);
            cohort_store_close(s);
            return EX_USAGE;
        }
        uint32_t prev = 0;
        st = coh_store_tcp_set_generation(s, (uint32_t)g, &prev);
        if (st == COHORT_OK)
            printf("%u\n", prev);
    } else if (!strcmp(cmd, "stats")) {
        coh_store_stats x;
        st = coh_store_tcp_stats(s, &x);
        if (st == COHORT_OK)
            printf("connections %lld\njob_connections %lld\nwaiters %lld\nkeys %lld\n"
                   "mem_used %lld\nmax_memory %lld\ngeneration %u\n",
                   (long long)x.conns, (long long)x.job_conns, (long long)x.waiters,
                   (long long)x.keys, (long long)x.mem_used, (long long)x.max_memory,
                   x.generation);
    }
    if (st != COHORT_OK) {
        fprintf(stderr, "cohort-kv: %s\n", cohort_store_last_error(s));
        rc = exit_code(st);
    }
    cohort_store_close(s);
    fflush(stdout);
    return rc;
}
