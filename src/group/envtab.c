/* envtab.c - the one table of COHORT_* variables and the strict checks
 * cohort_init runs over the environment (see envtab.h). */
#include "group/envtab.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "util/util.h"

extern char **environ;

#define MIB (1024l * 1024l)

/* Sorted by topic as in docs/concepts.md. A new variable gets a row here
 * (test_group_env fails otherwise) and a line in the docs. */
static const coh_envvar table[] = {
    /* group identity and rendezvous */
    {"COHORT_STORE", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    {"COHORT_JOB_ID", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    {"COHORT_TOKEN", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    {"COHORT_TOKEN_DIR", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    {"COHORT_PMI", COH_ENV_CHOICE, COH_ENV_LIB, "auto|off", 0, 0},
    {"COHORT_GENERATION", COH_ENV_INT, COH_ENV_LIB, NULL, 1, 0x7fffffff},
    {"COHORT_STORE_BIND", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    {"COHORT_BIND_ADDR", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    /* calls */
    {"COHORT_TIMEOUT", COH_ENV_SECONDS, COH_ENV_LIB, NULL, 0, 10000000},
    {"COHORT_STALL_WARN", COH_ENV_SECONDS, COH_ENV_LIB, NULL, 0, 10000000},
    {"COHORT_TRANSPORT", COH_ENV_CHOICE, COH_ENV_LIB, "auto|shm|tcp", 0, 0},
    {"COHORT_ALGO_", COH_ENV_ALGO, COH_ENV_LIB, NULL, 0, 0},
    {"COHORT_CHUNK_BYTES", COH_ENV_INT, COH_ENV_LIB, NULL, 1, 1l << 40},
    {"COHORT_TCP_OVERSUB", COH_ENV_CHOICE, COH_ENV_LIB, "auto|on|off", 0, 0},
    {"COHORT_DEBUG", COH_ENV_LIST, COH_ENV_LIB, "sync|buffers", 0, 0},
    {"COHORT_CONTRACT", COH_ENV_CHOICE, COH_ENV_LIB, "on|off", 0, 0},
    /* diagnostics */
    {"COHORT_LOG", COH_ENV_CHOICE, COH_ENV_LIB, "off|error|warn|info|debug", 0, 0},
    {"COHORT_TRACE_DIR", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    {"COHORT_TRACE_SIZE", COH_ENV_INT, COH_ENV_LIB, NULL, 1, 1l << 20},
    {"COHORT_TRACE_SIGNAL", COH_ENV_CHOICE, COH_ENV_LIB, "0|1", 0, 0},
    /* transport tuning */
    {"COHORT_SHM_SLOT_BYTES", COH_ENV_INT, COH_ENV_LIB, NULL, 64, 256 * MIB},
    {"COHORT_SHM_SMALL_BYTES", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 256 * MIB},
    {"COHORT_SHM_NT_BYTES", COH_ENV_INT, COH_ENV_LIB, NULL, 0, LONG_MAX},
    {"COHORT_SHM_RING_SLOTS", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 256},
    {"COHORT_SHM_RING_BYTES", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 1024 * 1024},
    {"COHORT_SHM_TINY_SLOTS", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 1024},
    {"COHORT_SHM_TINY_BYTES", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 4096},
    {"COHORT_SHM_P2P_BYTES", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 1024 * 1024},
    {"COHORT_SHM_P2P_STASH_BYTES", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 1024 * 1024 * MIB},
    {"COHORT_SHM_SINGLE_COPY", COH_ENV_CHOICE, COH_ENV_LIB, "auto|on|off|probe-fail", 0, 0},
    {"COHORT_SHM_XCORE", COH_ENV_CHOICE, COH_ENV_LIB, "auto|near|far", 0, 0},
    {"COHORT_SHM_BUSY", COH_ENV_CHOICE, COH_ENV_LIB, "timed|two|single|probe", 0, 0},
    {"COHORT_SHM_SINGLE_COPY_BYTES", COH_ENV_INT, COH_ENV_LIB, NULL, 1, LONG_MAX},
    {"COHORT_SHM_SINGLE_COPY_PROBE_NS", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    {"COHORT_SHM_MEM", COH_ENV_CHOICE, COH_ENV_LIB, "on|off|nosplit|map-fail", 0, 0},
    /* libcohort-heap.so, the preloadable shared heap (src/heap/heap.c) */
    {"COHORT_HEAP_MIN_BYTES", COH_ENV_INT, COH_ENV_LIB, NULL, 4096, 1l << 40},
    {"COHORT_SHM_SPIN_US", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 10000000},
    {"COHORT_CHECK_SPIN_US", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 1000000},
    {"COHORT_CHECK_FASTLOCK", COH_ENV_CHOICE, COH_ENV_LIB, "0|1", 0, 0},
    {"COHORT_SHM_YIELD_US", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 10000000},
    {"COHORT_SHM_RING_DRAIN", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 1},
    {"COHORT_SHM_RING_SPLIT", COH_ENV_CHOICE, COH_ENV_LIB, "auto|on|off", 0, 0},
    {"COHORT_SHM_COMPACT_PACK", COH_ENV_CHOICE, COH_ENV_LIB, "auto|on|off", 0, 0},
    {"COHORT_SHM_HS_LINGER_MS", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 60000},
    {"COHORT_SHM_BAR_SCATTER", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 1},
    {"COHORT_SHM_AR_INLINE", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 1},
    {"COHORT_SHM_PUBLISH", COH_ENV_CHOICE, COH_ENV_LIB, "auto|fence|membarrier", 0, 0},
    {"COHORT_TCP_SPIN_US", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 1000000},
    {"COHORT_TCP_BUFSIZE", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 1l << 30},
    {"COHORT_TCP_SEND_SLICE", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 1l << 30},
    {"COHORT_TCP_DUPLEX_SLICE", COH_ENV_INT, COH_ENV_LIB, NULL, 0, 1l << 30},
    {"COHORT_TCP_CONGESTION", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    {"COHORT_MAX_UNEXPECTED", COH_ENV_INT, COH_ENV_LIB, NULL, 0, LONG_MAX},
    {"COHORT_REDUCE_BASELINE", COH_ENV_CHOICE, COH_ENV_LIB, "1", 0, 0},
    /* etcd backend */
    {"COHORT_ETCD_AUTH", COH_ENV_CHOICE, COH_ENV_LIB, "auto|on|off", 0, 0},
    {"COHORT_ETCD_LEASE_TTL", COH_ENV_INT, COH_ENV_LIB, NULL, 1, 3600},
    {"COHORT_ETCD_REQUEST_TIMEOUT", COH_ENV_INT, COH_ENV_LIB, NULL, 50, 600000},
    {"COHORT_ETCD_CACERT", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    {"COHORT_ETCD_CERT", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    {"COHORT_ETCD_KEY", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    {"COHORT_ETCD_PLUGIN", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    /* libcohort-mpi, the PMPI layer (docs/mpi.md) */
    {"COHORT_MPI", COH_ENV_CHOICE, COH_ENV_LIB, "on|off|1|0", 0, 0},
    {"COHORT_MPI_STATS", COH_ENV_CHOICE, COH_ENV_LIB, "0|1", 0, 0},
    {"COHORT_MPI_STATS_FILE", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    {"COHORT_MPI_STORE_ADDR", COH_ENV_STRING, COH_ENV_LIB, NULL, 0, 0},
    /* cohort.torch, the torch.distributed wrapper (docs/pytorch.md) */
    {"COHORT_TORCH_CHECK", COH_ENV_CHOICE, COH_ENV_LIB, "0|1", 0, 0},
    {"COHORT_TORCH_PREWAIT", COH_ENV_CHOICE, COH_ENV_LIB, "0|1", 0, 0},
    {"COHORT_TORCH_C", COH_ENV_CHOICE, COH_ENV_LIB, "0|1", 0, 0},
    /* fault injection (tests) */
    {"COHORT_FAULT_ALLOC", COH_ENV_INT, COH_ENV_LIB, NULL, -1, LONG_MAX},
    /* set by cohortrun for its workers */
    {"COHORT_RESTART_COUNT", COH_ENV_INT, COH_ENV_LAUNCHER, NULL, 0, INT_MAX},
    {"COHORT_MAX_RESTARTS", COH_ENV_INT, COH_ENV_LAUNCHER, NULL, -1, INT_MAX},
    {"COHORT_NNODES", COH_ENV_INT, COH_ENV_LAUNCHER, NULL, 1, INT_MAX},
    {"COHORT_NODE_RANK", COH_ENV_INT, COH_ENV_LAUNCHER, NULL, 0, INT_MAX},
    /* cohort's own tests and scripts (inherited by the ranks they start) */
    {"COHORT_BUILD_DIR", COH_ENV_STRING, COH_ENV_TOOLS, NULL, 0, 0},
    {"COHORT_SOURCE_DIR", COH_ENV_STRING, COH_ENV_TOOLS, NULL, 0, 0},
    {"COHORT_FULL_MATRIX", COH_ENV_CHOICE, COH_ENV_TOOLS, "0|1", 0, 0},
    {"COHORT_FUZZ_CORPUS", COH_ENV_STRING, COH_ENV_TOOLS, NULL, 0, 0},
    {"COHORT_PERF", COH_ENV_STRING, COH_ENV_TOOLS, NULL, 0, 0},
    {"COHORT_SUITE_LOG", COH_ENV_STRING, COH_ENV_TOOLS, NULL, 0, 0},
    /* the launchers' rank binding (cohortrun, cohort-perf --np) */
    {"COHORT_BIND", COH_ENV_CHOICE, COH_ENV_TOOLS, "auto|core|none", 0, 0},
    {"COHORT_PERF_CLOCK", COH_ENV_CHOICE, COH_ENV_TOOLS, "auto|clock_gettime", 0, 0},
    /* python/setup.py (building the binding) */
    {"COHORT_CMAKE_ARGS", COH_ENV_STRING, COH_ENV_TOOLS, NULL, 0, 0},
    {"COHORT_BUILD_JOBS", COH_ENV_INT, COH_ENV_TOOLS, NULL, 1, 4096},
    {"COHORT_LIB_BUILD_DIR", COH_ENV_STRING, COH_ENV_TOOLS, NULL, 0, 0},
    {NULL, 0, 0, NULL, 0, 0},
};

const coh_envvar *coh_env_table(void) { return table; }

static int is_prefix_row(const coh_envvar *v)
{
    size_t n = strlen(v->name);
    return n && v->name[n - 1] == '_';
}

const coh_envvar *coh_env_lookup(const char *name)
{
    for (const coh_envvar *v = table; v->name; v++) {
        if (is_prefix_row(v) ? !strncmp(name, v->name, strlen(v->name)) && name[strlen(v->name)]
                             : !strcmp(name, v->name))
            return v;
    }
    return NULL;
}

/* Strict decimal integer: optional sign, digits, nothing else (no spaces,
 * no overflow wrapped into range). */
static int parse_long(const char *s, long *out)
{
    if (!s || !(isdigit((unsigned char)s[0]) ||
                ((s[0] == '-' || s[0] == '+') && isdigit((unsigned char)s[1]))))
        return -1;
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = x;
    return 0;
}

int coh_env_int_in(const char *name, long lo, long hi, long *out)
{
    const char *v = coh_env_str(name);
    if (!v)
        return 0;
    long x;
    if (parse_long(v, &x) < 0 || x < lo || x > hi)
        return -1;
    *out = x;
    return 1;
}

static int in_choices(const char *choices, const char *v, size_t vlen)
{
    const char *p = choices;
    while (*p) {
        size_t n = strcspn(p, "|");
        if (n == vlen && !strncmp(p, v, n))
            return 1;
        p += n;
        if (*p)
            p++;
    }
    return 0;
}

/* "a|b|c" -> "a, b or c" */
static void fmt_choices(const char *choices, char *out, size_t len)
{
    size_t pos = 0, total = 1;
    for (const char *c = choices; *c; c++)
        total += *c == '|';
    const char *p = choices;
    for (size_t i = 0; *p && pos < len; i++) {
        size_t n = strcspn(p, "|");
        int w = snprintf(out + pos, len - pos, "%s%.*s",
                         i == 0 ? "" : i + 1 == total ? " or " : ", ", (int)n, p);
        if (w < 0)
            break;
        pos += (size_t)w;
        p += n;
        if (*p)
            p++;
    }
}

/* Case-insensitive edit distance, for the did-you-mean. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64;
    size_t d[64];
    for (size_t j = 0; j <= lb; j++)
        d[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t prev = d[0];
        d[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cur = d[j];
            size_t sub = prev + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            size_t m = COH_MIN(d[j] + 1, d[j - 1] + 1);
            d[j] = COH_MIN(m, sub);
            prev = cur;
        }
    }
    return d[lb];
}

/* The closest known name (prefix families expanded), or NULL. */
static const char *closest(const char *name, char *buf, size_t len)
{
    size_t best = SIZE_MAX;
    const char *best_name = NULL;
    char cand[64];
    for (const coh_envvar *v = table; v->name; v++) {
        if (!is_prefix_row(v)) {
            size_t d = edit_distance(name, v->name);
            if (d < best)
                best = d, best_name = v->name;
            continue;
        }
        for (int coll = 1; coll < COH_COLL_KIND_COUNT; coll++) {
            const char *label = coh_coll_name(coll);
            int n = snprintf(cand, sizeof cand, "%s%s", v->name, label);
            for (int i = (int)strlen(v->name); i < n; i++)
                cand[i] = (char)toupper((unsigned char)cand[i]);
            size_t d = edit_distance(name, cand);
            if (d < best) {
                best = d;
                snprintf(buf, len, "%s", cand);
                best_name = buf;
            }
        }
    }
    size_t limit = COH_MAX((size_t)3, strlen(name) / 4);
    return best <= limit ? best_name : NULL;
}

cohort_status coh_env_check_one(const char *name, const char *value, char *msg, size_t len)
{
    const coh_envvar *v = coh_env_lookup(name);
    char ch[160];
    if (!v) {
        char buf[64];
        const char *near = closest(name, buf, sizeof buf);
        if (near)
            snprintf(msg, len, "%s is not a cohort variable (did you mean %s?); unset it", name,
                     near);
        else
            snprintf(msg, len,
                     "%s is not a cohort variable (docs/concepts.md lists them); unset it", name);
        return COHORT_ERR_INVALID;
    }
    if (!value || !*value)
        return COHORT_OK; /* empty means unset, as for every reader */
    long x = 0;
    switch (v->kind) {
    case COH_ENV_STRING:
        return COHORT_OK;
    case COH_ENV_CHOICE:
        if (in_choices(v->choices, value, strlen(value)))
            return COHORT_OK;
        fmt_choices(v->choices, ch, sizeof ch);
        snprintf(msg, len, "%s='%s': expected %s", name, value, ch);
        return COHORT_ERR_INVALID;
    case COH_ENV_LIST: {
        const char *p = value;
        for (;;) {
            size_t n = strcspn(p, ",");
            if (!in_choices(v->choices, p, n)) {
                fmt_choices(v->choices, ch, sizeof ch);
                snprintf(msg, len, "%s='%s': '%.*s' is not one of %s (a comma-separated list)",
                         name, value, (int)n, p, ch);
                return COHORT_ERR_INVALID;
            }
            p += n;
            if (!*p)
                return COHORT_OK;
            p++;
        }
    }
    case COH_ENV_INT:
        if (parse_long(value, &x) == 0 && x >= v->lo && x <= v->hi)
            return COHORT_OK;
        snprintf(msg, len, "%s='%s': expected an integer in [%ld, %ld]", name, value, v->lo,
                 v->hi);
        return COHORT_ERR_INVALID;
    case COH_ENV_SECONDS: {
        char *end;
        errno = 0;
        double d = strtod(value, &end);
        if (end != value && !*end && !isspace((unsigned char)value[0]) && isfinite(d) && d > 0 &&
            d <= (double)v->hi)
            return COHORT_OK;
        snprintf(msg, len, "%s='%s': expected a positive number of seconds (at most %ld)", name,
                 value, v->hi);
        return COHORT_ERR_INVALID;
    }
    case COH_ENV_ALGO:
        if (coh_coll_check_algo_env(name, value, msg, len) == 0)
            return COHORT_OK;
        if (!strstr(msg, "is not a cohort variable"))
            return COHORT_ERR_INVALID;
        {
            char buf[64];
            const char *near = closest(name, buf, sizeof buf);
            if (near) {
                snprintf(msg, len, "%s is not a cohort variable (did you mean %s?); unset it",
                         name, near);
            }
        }
        return COHORT_ERR_INVALID;
    }
    return COHORT_OK;
}

cohort_status coh_env_check_all(void)
{
    char msg[COH_ERRLEN];
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "COHORT_", 7))
            continue;
        const char *eq = strchr(*e, '=');
        char name[128];
        size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
        if (n >= sizeof name)
            n = sizeof name - 1;
        memcpy(name, *e, n);
        name[n] = 0;
        msg[0] = 0;
        if (coh_env_check_one(name, eq ? eq + 1 : "", msg, sizeof msg) != COHORT_OK)
            return coh_err_set(NULL, COHORT_ERR_INVALID, "environment: %s", msg);
    }
    return COHORT_OK;
}
