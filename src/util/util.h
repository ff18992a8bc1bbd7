/*
 * util.h - what several modules share: logging, clocks, error detail,
 * allocation hooks (for OOM tests), small helpers. No module state here.
 */
#ifndef COH_UTIL_H
#define COH_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "cohort.h"

/* ---- logging: COHORT_LOG=error|warn|info|debug, stderr, tagged with rank
 * and time. Default level: warn. */
enum { COH_LOG_OFF = -2, COH_LOG_ERROR = 0, COH_LOG_WARN = 1, COH_LOG_INFO = 2, COH_LOG_DEBUG = 3 };
int coh_log_level(void);
/* The rank printed in log lines of this process (-1: none yet). */
void coh_log_set_rank(int rank);
void coh_log_write(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define COH_LOG(lvl, ...)                                                                          \
    do {                                                                                           \
        if ((lvl) <= coh_log_level())                                                              \
            coh_log_write((lvl), __FILE__, __LINE__, __VA_ARGS__);                                 \
    } while (0)
#define coh_error(...) COH_LOG(COH_LOG_ERROR, __VA_ARGS__)
#define coh_warn(...) COH_LOG(COH_LOG_WARN, __VA_ARGS__)
#define coh_info(...) COH_LOG(COH_LOG_INFO, __VA_ARGS__)
#define coh_debug(...) COH_LOG(COH_LOG_DEBUG, __VA_ARGS__)

/* ---- time ---- */
uint64_t coh_now_ns(void);      /* CLOCK_MONOTONIC */
uint64_t coh_wall_us(void);     /* CLOCK_REALTIME, for logs and traces */
/* CLOCK_REALTIME in us for the flight recorder's per-call stamps: from the
 * TSC where the kernel's clocksource is the TSC (within about a
 * microsecond of coh_wall_us), else coh_wall_us. util.c says how. */
uint64_t coh_trace_us(void);
/* Deadline helpers: timeout_ms < 0 means "never". */
uint64_t coh_deadline_ns(int timeout_ms);
/* ms left until deadline (0 if passed, INT32_MAX-ish if never). */
int coh_ms_left(uint64_t deadline_ns);
/* CLOCK_REALTIME now + ms, for pthread_cond_timedwait (ms >= 0). */
struct timespec;
void coh_abstime_ms(struct timespec *ts, unsigned ms);

/* ---- error detail: one per handle, plus a thread-local one for
 * group-less failures (cohort_last_error(NULL)). */
#define COH_ERRLEN 1024
typedef struct coh_err {
    cohort_status status;
    char msg[COH_ERRLEN];
} coh_err;
/* Records st and a formatted message in e (e may be NULL: thread-local), and
 * returns st so callers can write `return coh_err_set(...)`. */
cohort_status coh_err_set(coh_err *e, cohort_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Same, appending ": <syscall>: <strerror(err)> (errno <err>)". */
cohort_status coh_err_sys(coh_err *e, cohort_status st, const char *syscall, int err,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));
coh_err *coh_tls_err(void);

/* ---- allocation: every library allocation goes through these so tests can
 * inject failures (coh_alloc_fail_after). They never abort. */
void *coh_malloc(size_t n);
void *coh_calloc(size_t n, size_t sz);
void *coh_realloc(void *p, size_t n);
char *coh_strdup(const char *s);
/* Zeroed, aligned to align (a power of two, a multiple of sizeof(void *)):
 * for structs with members aligned beyond malloc's 16 bytes. coh_free. */
void *coh_calloc_aligned(size_t align, size_t sz);
void coh_free(void *p);
/* Test hook: the n-th allocation from now fails (n < 0: never). Also set by
 * COHORT_FAULT_ALLOC=n in the environment (read once). */
void coh_alloc_fail_after(long n);
/* The same, counting only this thread's allocations (a test that means one
 * allocation of the call it makes, not of the group's other threads). */
void coh_alloc_fail_after_here(long n);

/* ---- env ---- */
/* Parses an integer env var; returns 0 if unset (keeps *out), 1 if set and
 * valid, -1 if set but invalid (the caller reports it by name). */
int coh_env_int(const char *name, long *out);
const char *coh_env_str(const char *name); /* NULL if unset or empty */

/* ---- misc ---- */
uint64_t coh_hash64(const void *p, size_t n, uint64_t seed); /* FNV-1a, not for auth */
/* Formats "0-2,5" from a sorted list of ints. */
void coh_fmt_ranks(char *out, size_t outlen, const int *ranks, int n);
/* Fills buf with cryptographically random bytes (getrandom). */
cohort_status coh_random(void *buf, size_t n);

#define COH_MIN(a, b) ((a) < (b) ? (a) : (b))

/* A rare path kept out of line, so the common one around it inlines into
 * a smaller frame (the small-call paths: docs/performance.md). */
#if defined(__GNUC__)
#define COH_COLD __attribute__((noinline, cold))
#else
#define COH_COLD
#endif

/* Out of line but not cold: a large call's path kept out of the function
 * that dispatches small calls, so that one stays a test and a jump. */
#if defined(__GNUC__)
#define COH_NOINLINE __attribute__((noinline))
#else
#define COH_NOINLINE
#endif

/* A small step of those paths forced inline (gcc left some out of line:
 * ~10-20 instructions of frame each, callgrind). Not under TSan: gcc
 * rejects a fence forced inline there (-Werror=tsan). */
#if defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define COH_INLINE inline __attribute__((always_inline))
#else
#define COH_INLINE inline
#endif
#define COH_MAX(a, b) ((a) > (b) ? (a) : (b))
#define COH_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
