/* util.c - logging, clocks, error detail, allocation hooks, env parsing, small copies. */
#include "util.h"
#include "util/bytes.h"
#include "util/tclock.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- logging ---- */

static atomic_int log_level = -1;
static atomic_int log_rank = -1;

int coh_log_level(void)
{
    int l = atomic_load_explicit(&log_level, memory_order_relaxed);
    if (l != -1)
        return l;
    const char *e = getenv("COHORT_LOG");
    l = COH_LOG_WARN;
    if (e) {
        if (!strcmp(e, "off"))
            l = COH_LOG_OFF; /* below every level: nothing is written */
        else if (!strcmp(e, "error"))
            l = COH_LOG_ERROR;
        else if (!strcmp(e, "warn"))
            l = COH_LOG_WARN;
        else if (!strcmp(e, "info"))
            l = COH_LOG_INFO;
        else if (!strcmp(e, "debug"))
            l = COH_LOG_DEBUG;
    }
    atomic_store(&log_level, l);
    return l;
}

void coh_log_set_rank(int rank) { atomic_store(&log_rank, rank); }

void coh_log_write(int level, const char *file, int line, const char *fmt, ...)
{
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    char buf[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    int r = atomic_load(&log_rank);
    /* Source locations are for cohort's developers: only at debug level. */
    char where[96] = "";
    if (coh_log_level() >= COH_LOG_DEBUG)
        snprintf(where, sizeof where, " %s:%d", base, line);
    int n;
    if (r >= 0)
        n = snprintf(buf, sizeof buf, "cohort %02d:%02d:%02d.%06ld rank %d %s%s: ", tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000, r, names[level], where);
    else
        n = snprintf(buf, sizeof buf, "cohort %02d:%02d:%02d.%06ld pid %d %s%s: ", tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000, (int)getpid(), names[level], where);
    if (n < 0 || (size_t)n >= sizeof buf)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    buf[len++] = '\n';
    /* One write per line so lines of concurrent ranks do not interleave. */
    ssize_t w = write(2, buf, len);
    (void)w;
}

/* ---- time ---- */

uint64_t coh_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t coh_wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

/* ---- the flight recorder's clock ----
 * Two CLOCK_REALTIME reads per call (issue, end) were the trace's largest
 * cost in an 8 B collective: the vDSO's ordered TSC read, seqlock and
 * scaling, ~40 ns each here (docs/performance.md, "Small calls: the fast
 * path"). Where the kernel's clocksource is the TSC (it judged the TSC
 * stable and in step across CPUs), coh_trace_us extrapolates CLOCK_REALTIME
 * from an anchor (tsc0, ns0) with a rate in ns per cycle << 32. The anchor
 * is renewed once it is FC_ANCHOR cycles old (about 1.4 ms at 3 GHz), so
 * a rate error of 1e-5 costs at most tens of ns; the rate is measured over
 * windows of at least FC_RATE cycles and used only after two consecutive
 * windows agree within 1/1024 (a clock step inside a window is not taken
 * for a rate). Anything in doubt reads CLOCK_REALTIME: no rate yet, another
 * thread renewing, an anchor pair that straddled a preemption. A seqlock
 * of relaxed atomics keeps readers in several threads race free. */
#define FC_RATE (1ull << 26)
#define FC_PAIR_MAX 2000 /* cycles between the two TSC reads around clock_gettime */

/* the state (util/tclock.h, where the read's fast path is inline) */
coh_fc_state coh_fc;
#define fc coh_fc

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
#include <x86intrin.h>

static int fc_probe(void)
{
    int mode = -1;
    char buf[16] = "";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (f) {
        if (fgets(buf, sizeof buf, f) && !strcmp(buf, "tsc\n"))
            mode = 1;
        fclose(f);
    }
    atomic_store_explicit(&fc.mode, mode, memory_order_relaxed);
    return mode;
}

/* A new anchor (and, every FC_RATE cycles, a rate); returns now in ns. */
static uint64_t fc_renew(uint32_t s)
{
    if (!atomic_compare_exchange_strong_explicit(&fc.seq, &s, s + 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return realtime_ns(); /* another thread is renewing */
    atomic_thread_fence(memory_order_release); /* readers see odd before the fields change */
    uint64_t a = __rdtsc();
    uint64_t n = realtime_ns();
    uint64_t b = __rdtsc();
    if (b - a <= FC_PAIR_MAX) {
        uint64_t t = a + (b - a) / 2;
        uint64_t rt = atomic_load_explicit(&fc.rtsc, memory_order_relaxed);
        uint64_t rn = atomic_load_explicit(&fc.rns, memory_order_relaxed);
        if (!rt || t < rt || n < rn) { /* first window, or the TSC or the clock went back */
            atomic_store_explicit(&fc.rtsc, t, memory_order_relaxed);
            atomic_store_explicit(&fc.rns, n, memory_order_relaxed);
        } else if (t - rt >= FC_RATE) {
            unsigned __int128 q = ((unsigned __int128)(n - rn) << 32) / (t - rt);
            uint64_t m = q > UINT64_MAX ? 0 : (uint64_t)q;
            uint64_t c = atomic_load_explicit(&fc.mcand, memory_order_relaxed);
            /* 0.1 to 8 GHz, and the same rate as the last window's */
            if (m > (1ull << 29) && m < (10ull << 32) && c &&
                (m > c ? m - c : c - m) <= c / 1024)
                atomic_store_explicit(&fc.mult, m, memory_order_relaxed);
            atomic_store_explicit(&fc.mcand, m, memory_order_relaxed);
            atomic_store_explicit(&fc.rtsc, t, memory_order_relaxed);
            atomic_store_explicit(&fc.rns, n, memory_order_relaxed);
        }
        atomic_store_explicit(&fc.tsc0, t, memory_order_relaxed);
        atomic_store_explicit(&fc.ns0, n, memory_order_relaxed);
    }
    atomic_store_explicit(&fc.seq, s + 2, memory_order_release);
    return n;
}
#endif

/* The read when the inline fast path (tclock.h) cannot extrapolate: not
 * probed yet, no TSC clocksource, a renewal due or under way, no rate yet. */
uint64_t coh_trace_us_slow(void)
{
#if defined(__x86_64__)
    int mode = atomic_load_explicit(&fc.mode, memory_order_relaxed);
    if (!mode)
        mode = fc_probe();
    if (mode > 0) {
        uint32_t s = atomic_load_explicit(&fc.seq, memory_order_acquire);
        uint64_t t0 = atomic_load_explicit(&fc.tsc0, memory_order_relaxed);
        uint64_t n0 = atomic_load_explicit(&fc.ns0, memory_order_relaxed);
        uint64_t m = atomic_load_explicit(&fc.mult, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (!(s & 1) && atomic_load_explicit(&fc.seq, memory_order_relaxed) == s) {
            uint64_t d = __rdtsc() - t0; /* huge if the TSC is behind t0: renewed */
            if (d >= FC_ANCHOR)
                return fc_renew(s) / 1000;
            if (m) /* d < 2^22, m < 2^36: no overflow */
                return (n0 + (d * m >> 32)) / 1000;
        }
    }
#endif
    return realtime_ns() / 1000;
}

uint64_t coh_trace_us(void) { return coh_trace_us_inline(); }

uint64_t coh_deadline_ns(int timeout_ms)
{
    if (timeout_ms < 0)
        return UINT64_MAX;
    return coh_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

void coh_abstime_ms(struct timespec *ts, unsigned ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

int coh_ms_left(uint64_t deadline_ns)
{
    if (deadline_ns == UINT64_MAX)
        return INT_MAX;
    uint64_t now = coh_now_ns();
    if (now >= deadline_ns)
        return 0;
    uint64_t ms = (deadline_ns - now + 999999ull) / 1000000ull;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* ---- errors ---- */

static _Thread_local coh_err tls_err;

coh_err *coh_tls_err(void) { return &tls_err; }

static cohort_status err_vset(coh_err *e, cohort_status st, const char *fmt, va_list ap)
{
    if (!e)
        e = &tls_err;
    e->status = st;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return st;
}

cohort_status coh_err_set(coh_err *e, cohort_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vset(e, st, fmt, ap);
    va_end(ap);
    return st;
}

cohort_status coh_err_sys(coh_err *e, cohort_status st, const char *syscall, int err,
                          const char *fmt, ...)
{
    if (!e)
        e = &tls_err;
    va_list ap;
    va_start(ap, fmt);
    err_vset(e, st, fmt, ap);
    va_end(ap);
    size_t n = strlen(e->msg);
    char eb[128];
    const char *es = strerror_r(err, eb, sizeof eb);
    snprintf(e->msg + n, sizeof e->msg - n, ": %s: %s (errno %d)", syscall, es, err);
    return st;
}

/* ---- allocation ---- */

static atomic_long alloc_countdown = -2; /* -2: env not read yet, -1: off */
static _Thread_local long alloc_countdown_here = -1; /* this thread's, -1: off */

static int alloc_should_fail(void)
{
    long h = alloc_countdown_here;
    if (h >= 0) {
        alloc_countdown_here = h - 1;
        if (h == 0)
            return 1;
    }
    long c = atomic_load_explicit(&alloc_countdown, memory_order_relaxed);
    if (c == -1)
        return 0;
    if (c == -2) {
        long v = -1;
        const char *e = getenv("COHORT_FAULT_ALLOC");
        if (e && *e)
            v = strtol(e, NULL, 10);
        long expect = -2;
        atomic_compare_exchange_strong(&alloc_countdown, &expect, v);
        if (v < 0)
            return 0;
    }
    long old = atomic_fetch_sub(&alloc_countdown, 1);
    if (old == 0) {
        atomic_store(&alloc_countdown, -1);
        return 1;
    }
    if (old < 0)
        atomic_store(&alloc_countdown, -1);
    return 0;
}

void coh_alloc_fail_after(long n) { atomic_store(&alloc_countdown, n < 0 ? -1 : n); }
void coh_alloc_fail_after_here(long n) { alloc_countdown_here = n < 0 ? -1 : n; }

void *coh_malloc(size_t n) { return alloc_should_fail() ? NULL : malloc(n ? n : 1); }
void *coh_calloc(size_t n, size_t sz) { return alloc_should_fail() ? NULL : calloc(n ? n : 1, sz ? sz : 1); }
void *coh_realloc(void *p, size_t n) { return alloc_should_fail() ? NULL : realloc(p, n ? n : 1); }
void *coh_calloc_aligned(size_t align, size_t sz)
{
    void *p = NULL;
    if (alloc_should_fail() || posix_memalign(&p, align, sz ? sz : 1) != 0)
        return NULL;
    memset(p, 0, sz ? sz : 1);
    return p;
}
void coh_free(void *p) { free(p); }
char *coh_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = coh_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* ---- env ---- */

const char *coh_env_str(const char *name)
{
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}

int coh_env_int(const char *name, long *out)
{
    const char *v = coh_env_str(name);
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end)
        return -1;
    *out = x;
    return 1;
}

/* ---- misc ---- */

uint64_t coh_hash64(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

void coh_fmt_ranks(char *out, size_t outlen, const int *r, int n)
{
    size_t pos = 0;
    out[0] = 0;
    for (int i = 0; i < n && pos < outlen; i++) {
        int j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1)
            j++;
        int w;
        if (j > i)
            w = snprintf(out + pos, outlen - pos, "%s%d-%d", pos ? "," : "", r[i], r[j]);
        else
            w = snprintf(out + pos, outlen - pos, "%s%d", pos ? "," : "", r[i]);
        if (w < 0)
            break;
        pos += (size_t)w;
        i = j;
    }
}

cohort_status coh_random(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return coh_err_sys(NULL, COHORT_ERR_SYSTEM, "getrandom", errno, "random bytes");
        }
        p += r;
        n -= (size_t)r;
    }
    return COHORT_OK;
}
