/*
 * cohort-kv - command-line client of the cohort store (like redis-cli or
 * etcdctl). Connects with generation 0 (a tool: never refused as stale and
 * never raises the job's generation).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cohort.h"
#include "cohort_json.h"
#include "cohort_store.h"

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
            "  append KEY VALUE     appends VALUE ('-': stdin) to the value (creates it)\n"
            "  compare-set KEY EXPECTED DESIRED   (also: cas) sets DESIRED if the value is\n"
            "                       EXPECTED (with --absent: if the key does not exist);\n"
            "                       prints the value after; exit 1 if it was not swapped\n"
            "  wait KEY...          waits until every KEY exists\n"
            "  watch KEY            prints the value when the key appears and each time it\n"
            "                       changes (\"(deleted)\" when it goes), until --timeout,\n"
            "                       --count values or Ctrl-C\n"
            "  delete KEY\n"
            "  list [PREFIX]        keys, sorted, one per line\n"
            "  num-keys\n"
            "  ping                 one round trip to the server\n"
            "  stats                server counters (connections, waiters, keys, memory)\n"
            "  set-generation N     operator: set the job's generation to N (0: the next\n"
            "                       launcher run may start at any); closes the job's\n"
            "                       connections of other generations; prints the old one\n"
            "\n"
            "options (anywhere on the line; --opt=value works; '--' ends them):\n"
            "      --addr HOST:PORT     store address (default $COHORT_STORE)\n"
            "      --job ID             job id (default $COHORT_JOB_ID)\n"
            "      --token-file FILE    'job_id token' lines or one token (default\n"
            "                           $COHORT_TOKEN)\n"
            "      --prefix P           every KEY is P + KEY (as a PrefixStore), and list\n"
            "                           shows keys without P\n"
            "      --timeout MS         how long get/wait/watch wait (get: 0, no wait;\n"
            "                           wait: 60000; watch: forever)\n"
            "      --connect-timeout MS (default 5000)\n"
            "      --interval MS        watch: how often it reads the key (default 100)\n"
            "      --count N            watch: exit after N values\n"
            "      --absent             compare-set: expect the key to be missing\n"
            "      --json               results as JSON (one object per line for watch)\n"
            "      --raw                get: no newline after the value\n"
            "  -h, --help, -V, --version\n"
            "\n"
            "exit status: 0 ok, 1 key not found / not swapped, 2 usage, 3 timed out,\n"
            "4 authentication refused, 5 store unreachable or connection lost, 6 other\n"
            "error (docs/tools.md)\n");
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

/* Sorts list output: byte order, shorter first on a common prefix. */
typedef struct kv_key {
    char *k;
    size_t l;
} kv_key;

static int key_cmp(const void *a, const void *b)
{
    const kv_key *x = a, *y = b;
    int c = memcmp(x->k, y->k, x->l < y->l ? x->l : y->l);
    return c ? c : (x->l > y->l) - (x->l < y->l);
}

/* A value as text: raw bytes, or a JSON object line. */
static int print_value(int json, const char *event, const char *key, const void *v, size_t vl,
                       int raw)
{
    if (!json)
        return write_all(v, vl) < 0 || (!raw && write_all("\n", 1) < 0) ? -1 : 0;
    fputs("{\"key\": ", stdout);
    cohort_json_fputs(stdout, key);
    if (event)
        printf(", \"event\": \"%s\"", event);
    fputs(", \"value\": ", stdout);
    if (v)
        cohort_json_fputn(stdout, v, vl);
    else
        fputs("null", stdout);
    fputs("}\n", stdout);
    return fflush(stdout) == 0 ? 0 : -1;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static volatile sig_atomic_t stop_watch;
static void on_signal(int sig)
{
    (void)sig;
    stop_watch = 1;
}

/* watch: the server wakes a blocked wait when the key appears; changes of
 * an existing value are read every interval (a change and its revert
 * within one interval are not seen). */
static cohort_status watch(cohort_store *h, const char *key, int json, long long timeout,
                           long long interval, long long count)
{
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int64_t dl = timeout >= 0 ? now_ms() + timeout : 0;
    void *last = NULL;
    size_t lastl = 0;
    int have = 0;
    long long shown = 0;
    cohort_status st = COHORT_OK;
    size_t kl = strlen(key);
    while (!stop_watch && (count <= 0 || shown < count)) {
        int64_t left = timeout >= 0 ? dl - now_ms() : 1000;
        if (timeout >= 0 && left <= 0)
            return have || shown ? COHORT_OK : COHORT_ERR_TIMEOUT;
        void *v = NULL;
        size_t vl = 0;
        if (!have) {
            /* block (in slices, for Ctrl-C) until the key exists */
            const void *kp = key;
            st = cohort_store_wait(h, &kp, &kl, 1, left < 1000 ? (int)left : 1000);
            if (st == COHORT_ERR_TIMEOUT)
                continue;
            if (st != COHORT_OK)
                break;
        }
        st = cohort_store_get(h, key, kl, &v, &vl, 0);
        if (st == COHORT_ERR_TIMEOUT || st == COHORT_ERR_NOT_FOUND) {
            if (have) {
                if (json)
                    print_value(json, "deleted", key, NULL, 0, 0);
                else
                    printf("(deleted)\n"), fflush(stdout);
                shown++;
                free(last);
                last = NULL;
                have = 0;
            }
            st = COHORT_OK;
            continue;
        }
        if (st != COHORT_OK)
            break;
        if (!have || vl != lastl || memcmp(v, last, vl)) {
            print_value(json, have ? "changed" : "set", key, v, vl, 0);
            fflush(stdout);
            shown++;
            free(last);
            last = v;
            lastl = vl;
            have = 1;
        } else {
            free(v);
        }
        struct timespec ts = {(time_t)(interval / 1000), (long)(interval % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    free(last);
    return st;
}

static int looks_negative(const char *a)
{
    return a[0] == '-' && a[1] >= '0' && a[1] <= '9';
}

int main(int argc, char **argv)
{
    const char *addr = cli_env("COHORT_STORE");
    const char *job = cli_env("COHORT_JOB_ID");
    const char *tokfile = NULL, *prefix = NULL;
    long long timeout = -2, ctimeout = 5000, interval = 100, count = 0;
    int raw = 0, json = 0, absent = 0;
    const char *pos[64];
    int npos = 0;
    enum {
        O_ADDR = 256,
        O_JOB,
        O_TOKEN_FILE,
        O_TIMEOUT,
        O_CTIMEOUT,
        O_RAW,
        O_JSON,
        O_PREFIX,
        O_INTERVAL,
        O_COUNT,
        O_ABSENT,
    };
    static const struct option lo[] = {
        {"addr", required_argument, 0, O_ADDR},
        {"job", required_argument, 0, O_JOB},
        {"token-file", required_argument, 0, O_TOKEN_FILE},
        {"timeout", required_argument, 0, O_TIMEOUT},
        {"connect-timeout", required_argument, 0, O_CTIMEOUT},
        {"raw", no_argument, 0, O_RAW},
        {"json", no_argument, 0, O_JSON},
        {"prefix", required_argument, 0, O_PREFIX},
        {"interval", required_argument, 0, O_INTERVAL},
        {"count", required_argument, 0, O_COUNT},
        {"absent", no_argument, 0, O_ABSENT},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0},
    };
    /* Options may come anywhere ("get K --timeout 5000", as in redis-cli);
     * a negative number is an argument ("add K -1"), "--" ends options. */
    opterr = 0;
    optind = 1;
    while (optind < argc) {
        const char *a = argv[optind];
        if (!strcmp(a, "--")) {
            for (optind++; optind < argc && npos < 64; optind++)
                pos[npos++] = argv[optind];
            break;
        }
        if (a[0] != '-' || !a[1] || looks_negative(a)) {
            if (npos == (int)(sizeof pos / sizeof pos[0])) {
                fprintf(stderr, "cohort-kv: too many arguments\n");
                return EX_USAGE;
            }
            pos[npos++] = a;
            optind++;
            continue;
        }
        int c = getopt_long(argc, argv, "+:hV", lo, NULL);
        if (c == -1)
            break;
        long long *num = NULL;
        long long min = 0;
        switch (c) {
        case 'h':
            usage(stdout);
            return EX_OK;
        case 'V':
            cli_version("cohort-kv");
            return EX_OK;
        case O_ADDR:
            addr = optarg;
            break;
        case O_JOB:
            job = optarg;
            break;
        case O_TOKEN_FILE:
            tokfile = optarg;
            break;
        case O_PREFIX:
            prefix = optarg;
            break;
        case O_RAW:
            raw = 1;
            break;
        case O_JSON:
            json = 1;
            break;
        case O_ABSENT:
            absent = 1;
            break;
        case O_TIMEOUT:
            num = &timeout;
            break;
        case O_CTIMEOUT:
            num = &ctimeout;
            break;
        case O_INTERVAL:
            num = &interval;
            min = 1;
            break;
        case O_COUNT:
            num = &count;
            min = 1;
            break;
        default:
            return cli_opt_error("cohort-kv", c, argv, lo);
        }
        if (num && (parse_int(optarg, num) < 0 || *num < min || *num > 2147483647)) {
            fprintf(stderr, "cohort-kv: %s: '%s' is not an integer in [%lld, 2147483647]\n",
                    argv[optind - 1], optarg, min);
            return EX_USAGE;
        }
    }
    if (npos == 0) {
        usage(stderr);
        return EX_USAGE;
    }
    const char *cmd = pos[0];
    if (!strcmp(cmd, "cas"))
        cmd = "compare-set";
    int nargs = npos - 1;
    const char *const *args = pos + 1;
    struct {
        const char *name;
        int min, max;
    } cmds[] = {{"set", 2, 2},          {"get", 1, 1},         {"add", 2, 2},
                {"append", 2, 2},       {"compare-set", 2, 3}, {"wait", 1, 63},
                {"watch", 1, 1},        {"delete", 1, 1},      {"list", 0, 1},
                {"num-keys", 0, 0},     {"ping", 0, 0},        {"stats", 0, 0},
                {"set-generation", 1, 1}};
    int known = 0;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(cmd, cmds[i].name)) {
            known = 1;
            int want_min = cmds[i].min, want_max = cmds[i].max;
            if (!strcmp(cmd, "compare-set"))
                want_min = want_max = absent ? 2 : 3;
            if (nargs < want_min || nargs > want_max) {
                fprintf(stderr, "cohort-kv: %s takes %d..%d arguments, got %d\n", cmd, want_min,
                        want_max, nargs);
                return EX_USAGE;
            }
        }
    if (!known) {
        const char *best = NULL;
        size_t bd = (size_t)-1;
        for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
            size_t d = cli_distance(cmd, strlen(cmd), cmds[i].name, strlen(cmds[i].name));
            if (d < bd)
                bd = d, best = cmds[i].name;
        }
        if (bd <= 2)
            fprintf(stderr, "cohort-kv: unknown command '%s' (did you mean '%s'?)\n", cmd, best);
        else
            fprintf(stderr, "cohort-kv: unknown command '%s'\n", cmd);
        fprintf(stderr, "Try 'cohort-kv --help'.\n");
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
    cohort_store_tokenfile *tf = NULL;
    const char *token = NULL;
    if (tokfile) {
        if (cohort_store_tokenfile_read(tokfile, &tf) != COHORT_OK) {
            fprintf(stderr, "cohort-kv: %s\n", cohort_last_error(NULL));
            return EX_USAGE;
        }
        token = cohort_store_tokenfile_find(tf, job);
        if (!token) {
            fprintf(stderr, "cohort-kv: token file %s has no token for job '%s'\n", tokfile, job);
            cohort_store_tokenfile_free(tf);
            return EX_USAGE;
        }
    } else {
        token = cli_env("COHORT_TOKEN");
        if (!token) {
            fprintf(stderr, "cohort-kv: no token (--token-file or COHORT_TOKEN)\n");
            return EX_USAGE;
        }
    }

    cohort_store *s = NULL, *h = NULL;
    cohort_status st = cohort_store_connect(&s, addr, job, token, (int)ctimeout);
    cohort_store_tokenfile_free(tf);
    if (st != COHORT_OK) {
        fprintf(stderr, "cohort-kv: %s\n", cohort_last_error(NULL));
        return exit_code(st);
    }
    h = s;
    if (prefix && (st = cohort_store_prefixed(s, prefix, &h)) != COHORT_OK) {
        fprintf(stderr, "cohort-kv: --prefix: %s\n", cohort_store_last_error(s));
        cohort_store_close(s);
        return exit_code(st);
    }
    int rc = EX_OK;
    if (!strcmp(cmd, "set") || !strcmp(cmd, "append")) {
        char *buf = NULL;
        size_t len = strlen(args[1]);
        if (!strcmp(args[1], "-") && read_stdin(&buf, &len) < 0) {
            fprintf(stderr, "cohort-kv: reading stdin: %s\n", strerror(errno));
            rc = EX_OTHER;
            goto out;
        }
        if (!strcmp(cmd, "set"))
            st = cohort_store_set(h, args[0], strlen(args[0]), buf ? buf : args[1], len);
        else
            st = cohort_store_append(h, args[0], strlen(args[0]), buf ? buf : args[1], len);
        free(buf);
    } else if (!strcmp(cmd, "get")) {
        void *v = NULL;
        size_t vl = 0;
        /* Default: no waiting, so "get" of an absent key answers at once
         * (exit 1) instead of hanging a script. */
        st = cohort_store_get(h, args[0], strlen(args[0]), &v, &vl,
                              timeout == -2 ? 0 : (int)timeout);
        if (st == COHORT_OK) {
            if (print_value(json, NULL, args[0], v, vl, raw) < 0)
                rc = EX_OTHER;
            free(v);
        }
    } else if (!strcmp(cmd, "add")) {
        long long d;
        if (parse_int(args[1], &d) < 0) {
            fprintf(stderr, "cohort-kv: add: '%s' is not an integer\n", args[1]);
            rc = EX_USAGE;
            goto out;
        }
        int64_t r = 0;
        st = cohort_store_add(h, args[0], strlen(args[0]), d, &r);
        if (st == COHORT_OK && json) {
            fputs("{\"key\": ", stdout);
            cohort_json_fputs(stdout, args[0]);
            printf(", \"value\": %lld}\n", (long long)r);
        } else if (st == COHORT_OK) {
            printf("%lld\n", (long long)r);
        }
    } else if (!strcmp(cmd, "compare-set")) {
        const char *exp = absent ? NULL : args[1];
        const char *des = args[absent ? 1 : 2];
        void *cur = NULL;
        size_t curl = 0;
        st = cohort_store_compare_set(h, args[0], strlen(args[0]), exp, exp ? strlen(exp) : 0,
                                      des, strlen(des), &cur, &curl);
        if (st == COHORT_OK) {
            int swapped = cur && curl == strlen(des) && !memcmp(cur, des, curl);
            /* (the value was already DESIRED: it is what the caller wanted) */
            if (json) {
                fputs("{\"key\": ", stdout);
                cohort_json_fputs(stdout, args[0]);
                printf(", \"swapped\": %s, \"value\": ", swapped ? "true" : "false");
                if (cur)
                    cohort_json_fputn(stdout, cur, curl);
                else
                    fputs("null", stdout);
                fputs("}\n", stdout);
            } else if (cur && (write_all(cur, curl) < 0 || write_all("\n", 1) < 0)) {
                rc = EX_OTHER;
            }
            if (!swapped && rc == EX_OK)
                rc = EX_NOTFOUND;
            free(cur);
        }
    } else if (!strcmp(cmd, "wait")) {
        const void *ks[63];
        size_t kl[63];
        for (int i = 0; i < nargs; i++) {
            ks[i] = args[i];
            kl[i] = strlen(args[i]);
        }
        st = cohort_store_wait(h, ks, kl, nargs, timeout == -2 ? 60000 : (int)timeout);
    } else if (!strcmp(cmd, "watch")) {
        st = watch(h, args[0], json, timeout == -2 ? -1 : timeout, interval, count);
    } else if (!strcmp(cmd, "delete")) {
        int d = 0;
        st = cohort_store_delete(h, args[0], strlen(args[0]), &d);
        if (st == COHORT_OK && !d) {
            fprintf(stderr, "cohort-kv: delete: key '%s' not found\n", args[0]);
            rc = EX_NOTFOUND;
        }
    } else if (!strcmp(cmd, "list")) {
        char **ks = NULL;
        size_t *kl = NULL;
        int n = 0;
        st = cohort_store_list(h, nargs ? args[0] : "", &ks, &kl, &n);
        kv_key *sorted = n > 0 ? malloc((size_t)n * sizeof *sorted) : NULL;
        for (int i = 0; sorted && i < n; i++)
            sorted[i] = (kv_key){ks[i], kl[i]};
        if (sorted)
            qsort(sorted, (size_t)n, sizeof *sorted, key_cmp);
        if (st == COHORT_OK && json)
            fputs("[", stdout);
        for (int i = 0; st == COHORT_OK && i < n; i++) {
            const kv_key *k = sorted ? &sorted[i] : &(kv_key){ks[i], kl[i]};
            if (json) {
                fputs(i ? ", " : "", stdout);
                cohort_json_fputn(stdout, k->k, k->l);
            } else if (write_all(k->k, k->l) < 0 || write_all("\n", 1) < 0) {
                rc = EX_OTHER;
            }
        }
        if (st == COHORT_OK && json)
            fputs("]\n", stdout);
        for (int i = 0; i < n; i++)
            free(ks[i]);
        free(sorted);
        free(ks);
        free(kl);
    } else if (!strcmp(cmd, "num-keys")) {
        int64_t n = 0;
        st = cohort_store_num_keys(h, &n);
        if (st == COHORT_OK)
            printf(json ? "{\"keys\": %lld}\n" : "%lld\n", (long long)n);
    } else if (!strcmp(cmd, "ping")) {
        st = cohort_store_ping(s);
        if (st == COHORT_OK)
            printf(json ? "{\"ok\": true}\n" : "ok\n");
    } else if (!strcmp(cmd, "set-generation")) {
        char *end;
        errno = 0;
        unsigned long g = strtoul(args[0], &end, 10);
        if (errno || end == args[0] || *end || args[0][0] == '-' || g > UINT32_MAX) {
            fprintf(stderr, "cohort-kv: set-generation: '%s' is not a generation (0..%u)\n",
                    args[0], UINT32_MAX);
            rc = EX_USAGE;
            goto out;
        }
        uint32_t prev = 0;
        st = cohort_store_set_generation(s, (uint32_t)g, &prev);
        if (st == COHORT_OK)
            printf(json ? "{\"previous\": %u}\n" : "%u\n", prev);
    } else if (!strcmp(cmd, "stats")) {
        cohort_store_stats x;
        st = cohort_store_get_stats(s, &x);
        if (st == COHORT_OK)
            printf(json ? "{\"connections\": %lld, \"job_connections\": %lld, \"waiters\": %lld, "
                          "\"keys\": %lld, \"mem_used\": %lld, \"max_memory\": %lld, "
                          "\"generation\": %u}\n"
                        : "connections %lld\njob_connections %lld\nwaiters %lld\nkeys %lld\n"
                          "mem_used %lld\nmax_memory %lld\ngeneration %u\n",
                   (long long)x.conns, (long long)x.job_conns, (long long)x.waiters,
                   (long long)x.keys, (long long)x.mem_used, (long long)x.max_memory,
                   x.generation);
    }
    if (st != COHORT_OK) {
        fprintf(stderr, "cohort-kv: %s\n", cohort_store_last_error(h));
        rc = exit_code(st);
    }
out:
    if (h != s)
        cohort_store_close(h);
    cohort_store_close(s);
    fflush(stdout);
    return rc;
}
