/*
 * xcore_floor.c - the floor of a 2-rank broadcast's copy when the data was
 * last written on the other core, next to memcpy_floor's same-core copy.
 * Two processes pinned to cpu A and cpu B share an anonymous mapping. Per
 * round the writer (on A) stores a new value into every line of the
 * source, then the reader (on B) copies it; only the reader's copy is
 * timed. Rows:
 *   same      memcpy on B from B's own cached buffer (memcpy_floor's floor)
 *   xcore     memcpy on B from a shared buffer A rewrote this round
 *   xcore-ro  the same, A did not rewrite it (lines stay shared: what a
 *             benchmark loop that never rewrites the root's buffer sees)
 *   cma       process_vm_readv on B from A's private buffer A rewrote
 *   cma-ro    the same, not rewritten
 *   split     A rewrote the source; A copies the second half into B's
 *             (shared) destination while B copies the first: the time until
 *             both are done (two cores moving the lines at once)
 * plus the cache-line round trip A<->B (c2c.c's measure) before and after.
 *
 *   xcore_floor [SIZE [ROUNDS [CPU_A CPU_B]]]   default 1 MiB, 300, 0 1
 * Prints "row SIZE p50_us p99_us min_us" per row.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "timing.h"

static void pin(int cpu)
{
    cpu_set_t m;
    CPU_ZERO(&m);
    CPU_SET(cpu, &m);
    if (sched_setaffinity(0, sizeof m, &m) != 0)
        perror("sched_setaffinity");
}

typedef struct {
    _Alignas(64) _Atomic uint64_t a; /* the writer's turn counter */
    _Alignas(64) _Atomic uint64_t b; /* the reader's */
    _Alignas(64) _Atomic uint64_t d; /* the writer's half of split done */
    _Alignas(64) _Atomic uint64_t mode;
    _Atomic uint64_t priv; /* address of A's private buffer */
    _Atomic int pid;
} ctl;

static void wait_eq(_Atomic uint64_t *w, uint64_t v)
{
    while (atomic_load_explicit(w, memory_order_acquire) != v)
        __builtin_ia32_pause();
}

enum { M_PING, M_XCORE, M_XCORE_RO, M_CMA, M_CMA_RO, M_SPLIT, M_END };

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : (1u << 20);
    int rounds = argc > 2 ? atoi(argv[2]) : 300;
    int ca = argc > 4 ? atoi(argv[3]) : 0, cb = argc > 4 ? atoi(argv[4]) : 1;
    size_t pn = (n + 4095) & ~(size_t)4095;
    ctl *c = mmap(NULL, sizeof(ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    unsigned char *sh = mmap(NULL, pn, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    unsigned char *shd = mmap(NULL, pn, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED || sh == MAP_FAILED || shd == MAP_FAILED)
        return perror("mmap"), 1;
    memset(sh, 1, pn);
    memset(shd, 1, pn);
    pid_t pid = fork();
    if (pid == 0) { /* A: the writer */
        pin(ca);
        unsigned char *priv = aligned_alloc(4096, pn);
        memset(priv, 3, pn);
        atomic_store(&c->priv, (uint64_t)(uintptr_t)priv);
        atomic_store(&c->pid, getpid());
        for (uint64_t t = 1;; t++) {
            wait_eq(&c->b, t); /* B asks for turn t with c->mode set */
            int m = (int)atomic_load(&c->mode);
            if (m == M_END)
                _exit(0);
            if (m == M_XCORE || m == M_SPLIT)
                memset(sh, (int)(t & 0xff), n);
            if (m == M_CMA)
                memset(priv, (int)(t & 0xff), n);
            atomic_store_explicit(&c->a, t, memory_order_release);
            if (m == M_SPLIT) {
                memcpy(shd + n / 2, sh + n / 2, n - n / 2);
                atomic_store_explicit(&c->d, t, memory_order_release);
            }
        }
    }
    pin(cb);
    while (!atomic_load(&c->pid))
        ;
    unsigned char *dst = aligned_alloc(4096, pn), *own = aligned_alloc(4096, pn);
    double *t = malloc(sizeof(double) * (size_t)rounds);
    memset(dst, 2, pn);
    memset(own, 2, pn);
    uint64_t turn = 0;
    const char *names[] = {"c2c-rt-ns", "xcore", "xcore-ro", "cma", "cma-ro", "split"};
    int order[] = {M_PING, -1, M_XCORE, M_XCORE_RO, M_CMA, M_CMA_RO, M_SPLIT, M_PING};
    for (size_t oi = 0; oi < sizeof order / sizeof *order; oi++) {
        int m = order[oi];
        for (int i = -20; i < rounds; i++) {
            double dt;
            if (m == -1) { /* same core */
                double t0 = now_us();
                memcpy(dst, own, n);
                __asm__ volatile("" ::"r"(dst) : "memory");
                dt = now_us() - t0;
            } else {
                atomic_store(&c->mode, (uint64_t)m);
                turn++;
                double t0 = now_us();
                atomic_store_explicit(&c->b, turn, memory_order_release);
                wait_eq(&c->a, turn); /* a ping when m == M_PING */
                if (m == M_PING) {
                    dt = (now_us() - t0) * 1e3;
                } else {
                    t0 = now_us();
                    if (m == M_XCORE || m == M_XCORE_RO) {
                        memcpy(dst, sh, n);
                    } else if (m == M_SPLIT) {
                        memcpy(shd, sh, n / 2);
                        wait_eq(&c->d, turn);
                    } else {
                        struct iovec l = {dst, n}, r = {(void *)(uintptr_t)atomic_load(&c->priv), n};
                        if (process_vm_readv(atomic_load(&c->pid), &l, 1, &r, 1, 0) != (ssize_t)n)
                            return perror("process_vm_readv"), 1;
                    }
                    __asm__ volatile("" ::"r"(dst) : "memory");
                    dt = now_us() - t0;
                }
            }
            if (i >= 0)
                t[i] = dt;
        }
        qsort(t, (size_t)rounds, sizeof *t, cmp_double);
        printf("%-9s %zu %.2f %.2f %.2f\n", m == -1 ? "same" : names[m], n, t[rounds / 2],
               t[(size_t)rounds * 99 / 100], t[0]);
        fflush(stdout);
    }
    atomic_store(&c->mode, M_END);
    atomic_store(&c->b, turn + 1);
    waitpid(pid, NULL, 0);
    return 0;
}
