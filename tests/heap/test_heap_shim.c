/* test_heap_shim.c - libcohort-heap.so (src/heap/heap.c) preloaded into a
 * real process (ctest sets LD_PRELOAD and COHORT_HEAP_MIN_BYTES=65536):
 * every allocator entry point below and above the threshold (which block
 * lands in a shared region, contents kept across realloc both ways, calloc
 * zeroed even where a dirty region was freed, alignment up to 2 MiB,
 * usable sizes), a freed region's place reused with a new id, many threads
 * allocating and freeing at once, the cap on live regions (then glibc,
 * never a failed allocation), and fork (the child's regions are its own).
 * Not a Check binary: Check's fork per test would run the fork path for
 * every case. Exit 0 ok, 1 a check failed, 77 the heap is not preloaded. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heap/heap.h"

static coh_heap_lookup_fn lookup;
static coh_heap_stats_fn stats;
static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static size_t MIN; /* the threshold in force */

__attribute__((noinline)) static int shared(const void *p, size_t n)
{
    coh_heap_region r;
    return lookup(p, n, &r);
}

/* regions in use (not the freed ones kept for reuse) */
static uint64_t live(void)
{
    coh_heap_stats s;
    stats(&s);
    return s.regions - s.cached;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31u + seed);
}

static int same(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 31u + seed))
            return 0;
    return 1;
}

static void t_threshold(void)
{
    uint64_t base = live();
    void *small = malloc(MIN - 1), *big = malloc(MIN);
    CHECK(small && big, "malloc");
    CHECK(!shared(small, 1), "a block below the threshold is glibc's");
    CHECK(shared(big, MIN), "a block at the threshold is shared");
    CHECK(((uintptr_t)big & 4095) == 0, "regions start on a page");
    coh_heap_region r;
    CHECK(lookup((char *)big + 100, MIN - 100, &r) && r.off == 100 && r.size >= MIN,
          "interior buffer: off %llu size %llu", (unsigned long long)r.off,
          (unsigned long long)r.size);
    CHECK(!lookup(big, r.size + 1, &r), "a buffer running past its region is not shared");
    /* the descriptor the peers get: a sealed memfd of that inode and size */
    CHECK(lookup(big, MIN, &r), "lookup");
    struct stat sb;
    CHECK(fstat(r.fd, &sb) == 0 && (uint64_t)sb.st_ino == r.ino && (uint64_t)sb.st_size == r.size,
          "fd %d inode/size", r.fd);
    int seals = fcntl(r.fd, F_GET_SEALS);
    CHECK(seals >= 0 && (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW),
          "seals %d", seals);
    CHECK(malloc_usable_size(big) >= MIN && malloc_usable_size(small) >= MIN - 1,
          "usable sizes %zu %zu", malloc_usable_size(big), malloc_usable_size(small));
    CHECK(live() == base + 1, "one region more: %llu vs %llu", (unsigned long long)live(),
          (unsigned long long)base);
    /* freed: not shared any more; the place is reused with a new id */
    uint64_t id = r.id;
    fill(big, MIN, 7);
    volatile uintptr_t was = (uintptr_t)big;
    free(big);
    CHECK(!shared((void *)was, 1), "a freed region is not offered");
    CHECK(live() == base, "region count back");
    /* a freed region is kept (its pages stay) and serves the next
     * allocation of its size: the same memory, so the same id */
    coh_heap_stats s0, s1;
    stats(&s0);
    unsigned char *again = malloc(MIN);
    stats(&s1);
    CHECK(again == (unsigned char *)was && lookup(again, MIN, &r) && r.id == id &&
              s1.reused == s0.reused + 1,
          "a cached region reused: %p vs %p", (void *)again, (void *)was);
    free(again);
    /* regions above 32 MiB are released on free: the place is reused by
     * a new region, with a new id */
    size_t big2 = (size_t)40 << 20;
    unsigned char *h1 = malloc(big2);
    CHECK(h1 && lookup(h1, big2, &r), "a 40 MiB region");
    uint64_t id1 = r.id;
    volatile uintptr_t w1 = (uintptr_t)h1;
    free(h1);
    unsigned char *h2 = malloc(big2);
    CHECK(h2 && (uintptr_t)h2 == w1 && lookup(h2, big2, &r) && r.id != id1,
          "a new region in a released one's place gets a new id");
    free(h2);
    /* calloc: zeros, also in the place of a dirty freed region */
    unsigned char *z = calloc(MIN / 8, 8);
    CHECK(z && shared(z, MIN), "calloc above the threshold is shared");
    size_t nz = 0;
    for (size_t i = 0; z && i < MIN; i++)
        nz += z[i] != 0;
    CHECK(nz == 0, "calloc left %zu non-zero bytes", nz);
    free(z);
    volatile size_t huge = SIZE_MAX / 2; /* an overflowing product, unseen by the compiler */
    errno = 0;
    CHECK(calloc(huge, 4) == NULL && errno == ENOMEM, "calloc overflow");
    CHECK(reallocarray(NULL, huge, 4) == NULL && errno == ENOMEM, "reallocarray overflow");
    free(small);
    free(NULL);
}

static void t_realloc(void)
{
    uint64_t base = live();
    size_t s0 = MIN / 4;
    unsigned char *p = malloc(s0);
    fill(p, s0, 1);
    CHECK(!shared(p, 1), "small start");
    p = realloc(p, 3 * MIN); /* glibc -> heap */
    CHECK(p && shared(p, 3 * MIN) && same(p, s0, 1), "grown across the threshold, contents kept");
    fill(p, 3 * MIN, 2);
    unsigned char *q = realloc(p, 2 * MIN); /* shrink, stays: in place */
    CHECK(q == p && same(q, 2 * MIN, 2), "shrunk in place");
    p = realloc(q, 5 * MIN); /* heap -> bigger heap */
    CHECK(p && shared(p, 5 * MIN) && same(p, 2 * MIN, 2), "grown in the heap, contents kept");
    fill(p, 5 * MIN, 3);
    p = realloc(p, MIN); /* much smaller: moves to a fitting region */
    CHECK(p && shared(p, MIN) && malloc_usable_size(p) < 5 * MIN && same(p, MIN, 3),
          "shrunk to a smaller region, usable %zu", malloc_usable_size(p));
    p = realloc(p, 100); /* heap -> glibc */
    CHECK(p && !shared(p, 1) && same(p, 100, 3), "shrunk across the threshold, contents kept");
    free(p);
    p = realloc(NULL, 2 * MIN);
    CHECK(p && shared(p, 2 * MIN), "realloc(NULL) above the threshold");
    CHECK(realloc(p, 0) == NULL, "realloc(p, 0) frees");
    p = reallocarray(NULL, MIN, 2);
    CHECK(p && shared(p, 2 * MIN), "reallocarray above the threshold");
    free(p);
    CHECK(live() == base, "every region freed: %llu vs %llu", (unsigned long long)live(),
          (unsigned long long)base);
}

static void t_align(void)
{
    uint64_t base = live();
    void *p = NULL;
    CHECK(posix_memalign(&p, (size_t)2 << 20, 3 * MIN) == 0 && ((uintptr_t)p & ((2u << 20) - 1)) == 0 &&
              shared(p, 3 * MIN),
          "posix_memalign(2 MiB) %p", p);
    free(p);
    p = NULL;
    CHECK(posix_memalign(&p, 64, MIN) == 0 && ((uintptr_t)p & 63) == 0 && shared(p, MIN),
          "posix_memalign(64)");
    free(p);
    CHECK(posix_memalign(&p, 24, MIN) == EINVAL, "posix_memalign: not a power of two");
    CHECK(posix_memalign(&p, 2, MIN) == EINVAL, "posix_memalign: below sizeof(void *)");
    p = aligned_alloc(1 << 16, 2 * MIN);
    CHECK(p && ((uintptr_t)p & 0xffff) == 0 && shared(p, 2 * MIN), "aligned_alloc(64 KiB)");
    free(p);
    p = memalign(8192, MIN);
    CHECK(p && ((uintptr_t)p & 8191) == 0 && shared(p, MIN), "memalign(8192)");
    free(p);
    p = memalign(8192, 100);
    CHECK(p && ((uintptr_t)p & 8191) == 0 && !shared(p, 1), "small memalign: glibc's");
    free(p);
    p = valloc(MIN);
    CHECK(p && ((uintptr_t)p & 4095) == 0 && shared(p, MIN), "valloc");
    free(p);
    p = pvalloc(MIN + 1);
    CHECK(p && ((uintptr_t)p & 4095) == 0 && shared(p, MIN + 1) && malloc_usable_size(p) >= MIN + 4096,
          "pvalloc");
    free(p);
    CHECK(live() == base, "every region freed");
}

#define NTHR 8
#define ITERS 400

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    unsigned char *held[8] = {0};
    size_t sz[8] = {0};
    long bad = 0;
    for (int i = 0; i < ITERS; i++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 8) % 8);
        if (held[k]) {
            if (held[k][0] != (unsigned char)k || held[k][sz[k] - 1] != (unsigned char)(k + 1) ||
                (sz[k] >= MIN) != shared(held[k], sz[k]))
                bad++;
            if (seed & 0x10000) {
                free(held[k]);
                held[k] = NULL;
                continue;
            }
            size_t n = (seed >> 4) % (3 * MIN) + 1;
            unsigned char *q = realloc(held[k], n);
            if (!q) {
                bad++;
                continue;
            }
            if (q[0] != (unsigned char)k)
                bad++;
            held[k] = q;
            sz[k] = n;
        } else {
            sz[k] = (seed >> 4) % (3 * MIN) + 1;
            held[k] = (seed & 0x20000) ? calloc(1, sz[k]) : malloc(sz[k]);
            if (!held[k]) {
                bad++;
                continue;
            }
        }
        held[k][0] = (unsigned char)k;
        held[k][sz[k] - 1] = (unsigned char)(k + 1);
    }
    for (int k = 0; k < 8; k++)
        free(held[k]);
    return (void *)bad;
}

static void t_threads(void)
{
    uint64_t base = live();
    pthread_t t[NTHR];
    for (int i = 0; i < NTHR; i++)
        CHECK(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1)) == 0, "thread");
    long bad = 0;
    for (int i = 0; i < NTHR; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += (long)r;
    }
    CHECK(bad == 0, "%ld blocks lost their contents or their place", bad);
    CHECK(live() == base, "every region freed after the threads: %llu vs %llu",
          (unsigned long long)live(), (unsigned long long)base);
}

/* a double free of a region, or free of a pointer inside one, aborts
 * (as glibc does), never corrupts the table */
static void t_bad_free(void)
{
    for (int k = 0; k < 2; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            close(2); /* the abort message is expected */
            void *volatile p = malloc(MIN); /* volatile: the compiler sees no misuse */
            if (k == 0) {
                free(p);
                free(p);
            } else {
                volatile uintptr_t q = (uintptr_t)p + 4096;
                free((void *)q);
            }
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "%s: status %d",
              k ? "interior free" : "double free", st);
    }
}

static void t_fork(void)
{
    unsigned char *p = malloc(2 * MIN);
    coh_heap_region pr, cr;
    CHECK(p && lookup(p, 2 * MIN, &pr), "a region");
    memset(p, 'A', 2 * MIN);
    int go[2], back[2];
    CHECK(pipe(go) == 0 && pipe(back) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        int ok = p[0] == 'A' && p[2 * MIN - 1] == 'A';      /* inherited contents */
        ok &= lookup(p, 2 * MIN, &cr) && cr.id != pr.id && cr.ino != pr.ino; /* its own */
        coh_heap_stats s;
        stats(&s);
        ok &= s.forks >= 1;
        memset(p, 'C', 2 * MIN); /* must not reach the parent */
        if (write(back[1], "x", 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(3);
        ok &= p[0] == 'C' && p[MIN] == 'C'; /* the parent's 'P' did not reach here */
        free(p);
        _exit(ok ? 0 : 2);
    }
    char c;
    CHECK(pid > 0 && read(back[0], &c, 1) == 1, "child ran");
    CHECK(p[0] == 'A' && p[MIN] == 'A', "the child's writes did not reach the parent: %c", p[0]);
    memset(p, 'P', 2 * MIN);
    CHECK(write(go[1], "x", 1) == 1, "pipe");
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    CHECK(lookup(p, 2 * MIN, &cr) && cr.id == pr.id, "the parent's region unchanged");
    free(p);
    close(go[0]), close(go[1]), close(back[0]), close(back[1]);
}

/* Run in a child exec'd with RLIMIT_NOFILE 64: cap 16 live regions. */
static int t_cap(void)
{
    coh_heap_stats s;
    stats(&s);
    CHECK(s.cap == 16, "cap %llu with 64 descriptors", (unsigned long long)s.cap);
    void *p[24];
    for (int i = 0; i < 24; i++) {
        p[i] = malloc(MIN);
        CHECK(p[i], "an allocation beyond the cap still succeeds (glibc)");
        memset(p[i], i, MIN);
        CHECK(shared(p[i], MIN) == (i < 16), "block %d shared %d", i, shared(p[i], MIN));
    }
    stats(&s);
    CHECK(s.regions == 16 && s.fallbacks >= 8, "regions %llu fallbacks %llu",
          (unsigned long long)s.regions, (unsigned long long)s.fallbacks);
    free(p[3]);
    void *q = malloc(MIN); /* room again */
    CHECK(q && shared(q, MIN), "a region again once one is freed");
    free(q);
    for (int i = 0; i < 24; i++)
        if (i != 3)
            free(p[i]);
    stats(&s);
    CHECK(s.regions == s.cached, "all freed: %llu regions, %llu cached",
          (unsigned long long)s.regions, (unsigned long long)s.cached);
    /* at the cap with only cached regions that do not fit: they make room */
    CHECK(s.cached == 16, "16 cached: %llu", (unsigned long long)s.cached);
    for (int i = 0; i < 16; i++) {
        p[i] = malloc(4 * MIN);
        CHECK(p[i] && shared(p[i], 4 * MIN), "block %d: a cached region released for it", i);
    }
    for (int i = 0; i < 16; i++)
        free(p[i]);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    lookup = (coh_heap_lookup_fn)dlsym(RTLD_DEFAULT, COH_HEAP_LOOKUP);
    stats = (coh_heap_stats_fn)dlsym(RTLD_DEFAULT, COH_HEAP_STATS);
    if (!lookup || !stats) {
        fprintf(stderr, "test_heap_shim: libcohort-heap.so is not preloaded (LD_PRELOAD)\n");
        return 77;
    }
    coh_heap_stats s;
    stats(&s);
    const char *v = getenv("COHORT_HEAP_MIN_BYTES");
    MIN = v ? (size_t)strtoull(v, NULL, 10) : (size_t)1 << 20;
    if (s.min_bytes != MIN) {
        fprintf(stderr, "test_heap_shim: the heap's threshold %llu, expected %zu\n",
                (unsigned long long)s.min_bytes, MIN);
        return 1;
    }
    if (argc > 1 && !strcmp(argv[1], "cap"))
        return t_cap();
    t_threshold();
    t_realloc();
    t_align();
    t_threads();
    t_bad_free();
    t_fork();
    /* the cap: the same program with 64 descriptors (cap = a quarter) */
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(4);
        rl.rlim_cur = 64; /* the soft limit only: the hard one may be lower than ours */
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(4);
        execl("/proc/self/exe", argv[0], "cap", (char *)NULL);
        _exit(5);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cap run: status %d", st);
    if (failures)
        fprintf(stderr, "test_heap_shim: %d checks failed\n", failures);
    else
        printf("test_heap_shim: ok\n");
    return failures ? 1 : 0;
}
