/*
 * tclock.h - the flight recorder's clock read (coh_trace_us, util.c says how
 * it extrapolates CLOCK_REALTIME from the TSC), with its common case inline:
 * the recorder reads it twice per call, and the out-of-line call with its
 * saved registers was ~10 instructions of each read. Same state, same
 * result; anything but the plain extrapolation goes to coh_trace_us_slow.
 */
#ifndef COH_TCLOCK_H
#define COH_TCLOCK_H

#include <stdatomic.h>
#include <stdint.h>

#define FC_ANCHOR (1ull << 22) /* cycles an anchor serves (util.c) */

typedef struct coh_fc_state {
    _Atomic int mode;      /* 0: not probed, 1: TSC, -1: CLOCK_REALTIME only */
    _Atomic uint32_t seq;  /* odd while the fields below are rewritten */
    _Atomic uint64_t tsc0, ns0, mult;   /* anchor, rate (0: none yet) */
    _Atomic uint64_t rtsc, rns, mcand;  /* rate window start, last window's rate */
} coh_fc_state;

extern coh_fc_state coh_fc;
uint64_t coh_trace_us_slow(void);

static inline uint64_t coh_trace_us_inline(void)
{
#if defined(__x86_64__)
    if (atomic_load_explicit(&coh_fc.mode, memory_order_relaxed) > 0) {
        uint32_t s = atomic_load_explicit(&coh_fc.seq, memory_order_acquire);
        uint64_t t0 = atomic_load_explicit(&coh_fc.tsc0, memory_order_relaxed);
        uint64_t n0 = atomic_load_explicit(&coh_fc.ns0, memory_order_relaxed);
        uint64_t m = atomic_load_explicit(&coh_fc.mult, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (!(s & 1) && m && atomic_load_explicit(&coh_fc.seq, memory_order_relaxed) == s) {
            uint64_t d = __builtin_ia32_rdtsc() - t0; /* huge if behind t0: renew */
            if (d < FC_ANCHOR) /* d < 2^22, m < 2^36: no overflow */
                return (n0 + (d * m >> 32)) / 1000;
        }
    }
#endif
    return coh_trace_us_slow();
}

#endif
