/*
 * probe_rounds.c - how steady shm attach's speed probe is: two processes
 * read each other's 64 KiB buffer by process_vm_readv and copy their own by
 * memcpy, the best of 3 of each, as shm_cma.c's time_copies does, and print
 * the summed ratio (kernel's copy / memcpy) of each of ROUNDS readings.
 *
 *   probe_rounds [ROUNDS [SYNC]]   default 7 readings; SYNC 1 (default): a
 *                                  barrier and 1 ms between readings, 0:
 *                                  back to back, each process on its own
 *
 * Prints one line per launch: the ratios in order. Run it many times
 * (bench/compare/probe_dist.sh does, with cohort's own attach beside it):
 * the first reading runs cold and reads higher than the rest, and without
 * the barrier a process that finishes first leaves the other to read
 * alone, lower (docs/performance.md, "Session 47").
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

#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

#define LEN (64 << 10)
#define MAX_ROUNDS 64

struct shared {
    _Atomic int go[MAX_ROUNDS], done[MAX_ROUNDS];
    uint64_t buf[2];
    pid_t pid[2];
    uint64_t cma[2][MAX_ROUNDS], cpy[2][MAX_ROUNDS];
};

static void meet(_Atomic int *w)
{
    atomic_fetch_add(w, 1);
    while (atomic_load(w) < 2)
        sched_yield();
}

static void rank(struct shared *s, int me, int rounds, int sync)
{
    unsigned char *src = aligned_alloc(4096, LEN), *dst = aligned_alloc(4096, LEN);
    if (!src || !dst)
        _exit(1);
    memset(src, me + 1, LEN);
    memset(dst, 0, LEN);
    s->buf[me] = (uint64_t)(uintptr_t)src;
    s->pid[me] = getpid();
    meet(&s->go[0]);
    int q = 1 - me;
    for (int r = 0; r < rounds; r++) {
        if (r && sync)
            meet(&s->go[r]);
        uint64_t bc = UINT64_MAX, bp = UINT64_MAX;
        for (int i = 0; i < 3; i++) {
            struct iovec l = {dst, LEN}, rr = {(void *)(uintptr_t)s->buf[q], LEN};
            uint64_t t0 = now_ns();
            if (process_vm_readv(s->pid[q], &l, 1, &rr, 1, 0) != LEN) {
                perror("process_vm_readv");
                _exit(1);
            }
            uint64_t t1 = now_ns();
            bc = t1 - t0 < bc ? t1 - t0 : bc;
            memcpy(dst, src, LEN);
            __asm__ volatile("" : : "r"(dst) : "memory");
            uint64_t t2 = now_ns();
            bp = t2 - t1 < bp ? t2 - t1 : bp;
        }
        s->cma[me][r] = bc;
        s->cpy[me][r] = bp;
        if (sync) {
            meet(&s->done[r]);
            usleep(1000);
        }
    }
    /* stay until the other has read my buffer for the last time, asleep
     * (a spinning wait would take the cpu its copies run on) */
    atomic_fetch_add(&s->done[MAX_ROUNDS - 1], 1);
    while (atomic_load(&s->done[MAX_ROUNDS - 1]) < 2)
        usleep(100);
    _exit(0);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 7, sync = argc > 2 ? atoi(argv[2]) : 1;
    if (rounds < 1 || rounds >= MAX_ROUNDS) {
        fprintf(stderr, "usage: probe_rounds [ROUNDS (1-%d) [SYNC 0|1]]\n", MAX_ROUNDS - 1);
        return 2;
    }
    struct shared *s =
        mmap(0, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        return 1;
    memset(s, 0, sizeof *s);
    for (int me = 0; me < 2; me++)
        if (!fork())
            rank(s, me, rounds, sync);
    int st, bad = 0;
    while (wait(&st) > 0)
        bad |= !WIFEXITED(st) || WEXITSTATUS(st);
    if (bad)
        return 1;
    for (int r = 0; r < rounds; r++)
        printf("%.2f%c",
               (double)(s->cma[0][r] + s->cma[1][r]) / (double)(s->cpy[0][r] + s->cpy[1][r]),
               r + 1 < rounds ? ' ' : '\n');
    return 0;
}
