/*
 * futex.h - waiting on a 32-bit word in memory shared between processes.
 *
 * Shared (not FUTEX_PRIVATE) futexes: the sleeper and the waker are ranks
 * in different processes mapping the same segment. A wait returns on a
 * wake-up, when *word != val, on a signal or at the timeout; callers
 * recheck their condition in every case.
 */
#ifndef COH_UTIL_FUTEX_H
#define COH_UTIL_FUTEX_H

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline void coh_futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleeps while *word == val, at most ns nanoseconds. */
static inline void coh_futex_wait_ns(_Atomic uint32_t *word, uint32_t val, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

static inline void coh_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

#endif
