/*
 * ratelimit.c - see ratelimit.h.
 */
#include "util/ratelimit.h"

#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t rl_mu = PTHREAD_MUTEX_INITIALIZER;

int coh_ratelimit_take(coh_ratelimit *rl, uint64_t now_ns, uint64_t *more, unsigned *more_s)
{
    const uint64_t win = (uint64_t)COH_RL_WINDOW_S * 1000000000ull;
    *more = 0;
    *more_s = 0;
    pthread_mutex_lock(&rl_mu);
    if (!rl->window_ns || now_ns - rl->window_ns >= win) {
        rl->window_ns = now_ns ? now_ns : 1;
        rl->printed = 0;
    }
    int ok = rl->printed < COH_RL_BURST;
    if (ok) {
        rl->printed++;
        *more = rl->suppressed;
        if (rl->suppressed) {
            uint64_t s = (now_ns - rl->supp_since + 999999999ull) / 1000000000ull;
            *more_s = (unsigned)(s ? s : 1);
        }
        rl->suppressed = 0;
    } else {
        if (!rl->suppressed++)
            rl->supp_since = now_ns;
    }
    pthread_mutex_unlock(&rl_mu);
    return ok;
}

void coh_log_rl(coh_ratelimit *rl, int level, const char *file, int line, const char *fmt, ...)
{
    uint64_t more;
    unsigned secs;
    if (!coh_ratelimit_take(rl, coh_now_ns(), &more, &secs))
        return;
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        msg[0] = 0;
    if (more)
        coh_log_write(level, file, line, "%s (%llu more in the last %u s)", msg,
                      (unsigned long long)more, secs);
    else
        coh_log_write(level, file, line, "%s", msg);
}
