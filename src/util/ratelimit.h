/*
 * ratelimit.h - rate-limited log lines: a flood of one cause (4000 bad
 * connections, a client hammering a limit) writes a few lines and then one
 * line with a count, instead of one line per event.
 *
 * Each call site is one cause and owns one limiter (the macros declare a
 * static one). A limiter lets COH_RL_BURST lines through per COH_RL_WINDOW_S
 * window; the rest are counted, and the next line let through says
 * "(N more in the last S s)". Thread-safe (one mutex, taken only for lines
 * the log level would print).
 */
#ifndef COH_RATELIMIT_H
#define COH_RATELIMIT_H

#include <stdint.h>

#include "util/util.h"

#define COH_RL_WINDOW_S 10
#define COH_RL_BURST 3

typedef struct coh_ratelimit {
    uint64_t window_ns;  /* start of the current window (0: none yet) */
    uint32_t printed;    /* lines let through in this window */
    uint64_t suppressed; /* lines dropped since the last one let through */
    uint64_t supp_since; /* when the first of those was dropped */
} coh_ratelimit;

/* Decides for one event at now_ns: returns 1 if its line is to be written
 * (then *more = lines dropped before it and *more_s = over how many seconds,
 * both 0 if none), 0 if it is to be counted and dropped. */
int coh_ratelimit_take(coh_ratelimit *rl, uint64_t now_ns, uint64_t *more, unsigned *more_s);

/* Writes the line if rl lets it through, with the count appended. */
void coh_log_rl(coh_ratelimit *rl, int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define COH_LOG_RL(lvl, ...)                                                                       \
    do {                                                                                           \
        static coh_ratelimit coh_rl_;                                                              \
        if ((lvl) <= coh_log_level())                                                              \
            coh_log_rl(&coh_rl_, (lvl), __FILE__, __LINE__, __VA_ARGS__);                          \
    } while (0)
#define coh_warn_rl(...) COH_LOG_RL(COH_LOG_WARN, __VA_ARGS__)
#define coh_info_rl(...) COH_LOG_RL(COH_LOG_INFO, __VA_ARGS__)

#endif
