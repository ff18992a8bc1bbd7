/*
 * heap.c - libcohort-heap.so, the preloadable shared heap (docs/shm.md,
 * "The shared heap"): LD_PRELOAD=libcohort-heap.so (or cohortrun --heap)
 * and every allocation of COHORT_HEAP_MIN_BYTES (default 1 MiB) or more
 * comes from a sealed memfd mapped shared, as cohort_mem_alloc's regions
 * do, so a broadcast from a buffer that an unchanged program malloc'ed
 * takes the one-copy path (src/coll/shm, bcast_mem_*). Everything smaller,
 * and whatever the heap cannot place, goes to glibc (__libc_malloc & co.).
 *
 * The regions lie inside one range of address space reserved PROT_NONE at
 * load, so free() decides with one compare whether a pointer is ours; a
 * freed region's pages become PROT_NONE again (MAP_FIXED over them) before
 * its place can be reused, so nothing else is ever mapped inside.
 * Bounded: at most `cap` live regions (a descriptor each: a quarter of
 * RLIMIT_NOFILE's soft limit, at most 4096); beyond it, glibc.
 * fork: the child gets its own copy of every region (a new memfd, same
 * address), so neither process sees the other's later writes, as with
 * malloc; the copy costs the child one memcpy of the live regions.
 *
 * No sanitizer: an allocator cannot be preloaded under ASan or TSan.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "heap/heap.h"

#define EXPORT __attribute__((visibility("default")))

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

typedef struct reg {
    uintptr_t base;
    size_t size;
    int fd; /* -1: a fork child's private copy (no memfd could be made) */
    int cached; /* freed, kept mapped for the next allocation of its size */
    uint64_t id, ino;
} reg;

/* Freed regions kept for reuse (their pages stay, as glibc keeps a freed
 * block's): a new region costs 6 system calls and a page fault per page
 * touched (~2 us each here: 470 us for 1 MiB written, against 3 us for
 * glibc's reused block; docs/shm.md "The shared heap"). Regions up to
 * CACHE_MAX_REGION bytes, at most CACHE_MAX of them and CACHE_MAX_BYTES in
 * all (glibc's mmap threshold and trim defaults: 32 and 64 MiB). */
#define CACHE_MAX 16
#define CACHE_MAX_REGION ((size_t)32 << 20)
#define CACHE_MAX_BYTES ((size_t)64 << 20)

/* Set once by the constructor, before any thread of the program: read
 * without the lock. h_span == 0: the heap is off (all glibc). */
static uintptr_t h_lo;
static size_t h_span;
static size_t h_min = SIZE_MAX;
static size_t h_page = 4096;
static size_t (*real_usable)(void *);

static pthread_mutex_t h_mu = PTHREAD_MUTEX_INITIALIZER;
static reg *h_tab; /* [h_cap], sorted by base */
static int h_n, h_cap;
static _Atomic int h_live;   /* h_n, for a look without the lock */
static _Atomic int h_ncached; /* cached regions (in h_tab, counted in h_n) */
static size_t h_cached_bytes;
static _Atomic uint64_t st_allocs, st_reused, st_fallbacks, st_forks;

static void say(const char *msg)
{
    ssize_t r = write(2, msg, strlen(msg));
    (void)r;
}

static inline int in_heap(const void *p) { return (uintptr_t)p - h_lo < h_span; }
static inline int want(size_t n) { return h_span && n >= h_min; }

/* Index of the region holding address a, or -1 (h_mu held). */
static int find(uintptr_t a)
{
    int lo = 0, hi = h_n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (a < h_tab[mid].base)
            hi = mid - 1;
        else if (a - h_tab[mid].base >= h_tab[mid].size)
            lo = mid + 1;
        else
            return mid;
    }
    return -1;
}

/* A sealed memfd of size bytes (fixed size: a peer's mapping never turns
 * into SIGBUS) with its inode and a fresh random id; -1 on failure. */
static int make_fd(size_t size, uint64_t *ino, uint64_t *id)
{
    int fd = (int)syscall(SYS_memfd_create, "cohort-heap", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    struct stat sb;
    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)size) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0 ||
        fstat(fd, &sb) < 0 || syscall(SYS_getrandom, id, sizeof *id, 0) != (long)sizeof *id) {
        close(fd);
        return -1;
    }
    *ino = (uint64_t)sb.st_ino;
    return fd;
}

static void protect_none(uintptr_t base, size_t size)
{
    /* MAP_FIXED replaces the region's pages in one step: the range never
     * has a hole another mmap could take */
    if (mmap((void *)base, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
             -1, 0) == MAP_FAILED)
        say("libcohort-heap: cannot return a freed region's pages to the reserve\n");
}

/* Drops region i from the table (h_mu held): its pages back to PROT_NONE
 * (before the place can be reused); returns its descriptor, for the
 * caller to close after unlocking. */
static int release_locked(int i)
{
    reg r = h_tab[i];
    protect_none(r.base, r.size);
    if (r.cached) {
        h_cached_bytes -= r.size;
        atomic_fetch_sub_explicit(&h_ncached, 1, memory_order_relaxed);
    }
    memmove(h_tab + i, h_tab + i + 1, (size_t)(h_n - i - 1) * sizeof *h_tab);
    h_n--;
    atomic_store_explicit(&h_live, h_n, memory_order_relaxed);
    return r.fd;
}

/* A cached region for size bytes aligned to align, at most twice the size
 * (the smallest that fits), taken out of the cache; NULL if none. */
static void *cache_take(size_t size, size_t align)
{
    void *out = NULL;
    pthread_mutex_lock(&h_mu);
    int best = -1;
    for (int i = 0; i < h_n; i++) {
        reg *r = &h_tab[i];
        if (r->cached && r->size >= size && r->size / 2 <= size && !(r->base & (align - 1)) &&
            (best < 0 || r->size < h_tab[best].size))
            best = i;
    }
    if (best >= 0) {
        h_tab[best].cached = 0;
        h_cached_bytes -= h_tab[best].size;
        atomic_fetch_sub_explicit(&h_ncached, 1, memory_order_relaxed);
        out = (void *)h_tab[best].base;
    }
    pthread_mutex_unlock(&h_mu);
    return out;
}

/* A region of at least n bytes aligned to align (a power of two), or NULL
 * (the caller then asks glibc). *dirty: 1 when it is a reused region (not
 * zeroed). */
static void *heap_alloc(size_t n, size_t align, int *dirty)
{
    *dirty = 0;
    if (align < h_page)
        align = h_page;
    if (n > h_span || align > h_span / 2)
        return NULL;
    size_t size = (n + h_page - 1) & ~(h_page - 1);
    if (size == 0)
        size = h_page;
    if (atomic_load_explicit(&h_ncached, memory_order_relaxed) > 0) {
        void *p = cache_take(size, align);
        if (p) {
            *dirty = 1;
            atomic_fetch_add_explicit(&st_reused, 1, memory_order_relaxed);
            return p;
        }
    }
    if (atomic_load_explicit(&h_live, memory_order_relaxed) >= h_cap &&
        atomic_load_explicit(&h_ncached, memory_order_relaxed) == 0)
        return NULL; /* racy look: rechecked under the lock */
    uint64_t ino, id;
    int fd = make_fd(size, &ino, &id);
    if (fd < 0)
        return NULL;
    void *out = NULL;
    int drop = -1; /* a cached region released to stay under the cap */
    pthread_mutex_lock(&h_mu);
    if (h_n >= h_cap)
        for (int i = 0; i < h_n; i++)
            if (h_tab[i].cached) {
                drop = release_locked(i);
                break;
            }
    if (h_n < h_cap) {
        /* first fit among the gaps between regions (sorted by base) */
        uintptr_t cur = h_lo, end = h_lo + h_span;
        for (int i = 0; i <= h_n; i++) {
            uintptr_t stop = i < h_n ? h_tab[i].base : end;
            uintptr_t c = (cur + align - 1) & ~(uintptr_t)(align - 1);
            if (c >= cur && c <= stop && stop - c >= size) {
                if (mmap((void *)c, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
                    MAP_FAILED) {
                    protect_none(c, size); /* a failed MAP_FIXED may leave a hole */
                    break;
                }
                memmove(h_tab + i + 1, h_tab + i, (size_t)(h_n - i) * sizeof *h_tab);
                h_tab[i] = (reg){.base = c, .size = size, .fd = fd, .id = id, .ino = ino};
                h_n++;
                atomic_store_explicit(&h_live, h_n, memory_order_relaxed);
                out = (void *)c;
                break;
            }
            if (i < h_n)
                cur = h_tab[i].base + h_tab[i].size;
        }
    }
    pthread_mutex_unlock(&h_mu);
    if (drop >= 0)
        close(drop);
    if (!out)
        close(fd);
    else
        atomic_fetch_add_explicit(&st_allocs, 1, memory_order_relaxed);
    return out;
}

static void bad_pointer(const char *fn)
{
    say("libcohort-heap: ");
    say(fn);
    say("(): invalid pointer (not the start of a live region)\n");
    abort();
}

/* The usable size of region pointer p (the start of a live region). */
static size_t heap_size(void *p, const char *fn)
{
    pthread_mutex_lock(&h_mu);
    int i = find((uintptr_t)p);
    size_t s = i >= 0 && h_tab[i].base == (uintptr_t)p && !h_tab[i].cached ? h_tab[i].size : 0;
    pthread_mutex_unlock(&h_mu);
    if (!s)
        bad_pointer(fn);
    return s;
}

static void heap_free(void *p, const char *fn)
{
    pthread_mutex_lock(&h_mu);
    int i = find((uintptr_t)p);
    if (i < 0 || h_tab[i].base != (uintptr_t)p || h_tab[i].cached) { /* also a double free */
        pthread_mutex_unlock(&h_mu);
        bad_pointer(fn);
    }
    reg *r = &h_tab[i];
    if (r->fd >= 0 && r->size <= CACHE_MAX_REGION &&
        atomic_load_explicit(&h_ncached, memory_order_relaxed) < CACHE_MAX &&
        h_cached_bytes + r->size <= CACHE_MAX_BYTES) {
        r->cached = 1;
        h_cached_bytes += r->size;
        atomic_fetch_add_explicit(&h_ncached, 1, memory_order_relaxed);
        pthread_mutex_unlock(&h_mu);
        return;
    }
    int fd = release_locked(i);
    pthread_mutex_unlock(&h_mu);
    if (fd >= 0)
        close(fd);
}

static void *fallback(size_t n)
{
    atomic_fetch_add_explicit(&st_fallbacks, 1, memory_order_relaxed);
    return __libc_malloc(n);
}

/* ---- the interposed allocator ---- */

EXPORT void *malloc(size_t n)
{
    int dirty;
    if (want(n)) {
        void *p = heap_alloc(n, h_page, &dirty);
        return p ? p : fallback(n);
    }
    return __libc_malloc(n);
}

EXPORT void free(void *p)
{
    if (in_heap(p))
        heap_free(p, "free");
    else
        __libc_free(p);
}

EXPORT void *calloc(size_t a, size_t b)
{
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    int dirty;
    if (want(n)) {
        void *p = heap_alloc(n, h_page, &dirty); /* a new memfd reads as zeros */
        if (p) {
            if (dirty)
                memset(p, 0, n);
            return p;
        }
        atomic_fetch_add_explicit(&st_fallbacks, 1, memory_order_relaxed);
    }
    return __libc_calloc(a, b);
}

EXPORT void *realloc(void *p, size_t n)
{
    if (!p)
        return malloc(n);
    if (in_heap(p)) {
        if (n == 0) { /* glibc: frees, returns NULL */
            heap_free(p, "realloc");
            return NULL;
        }
        size_t have = heap_size(p, "realloc");
        /* in place while it stays a heap size and uses at least half */
        if (n <= have && want(n) && n >= have / 2)
            return p;
        int dirty;
        void *q = want(n) ? heap_alloc(n, h_page, &dirty) : NULL;
        if (!q)
            q = want(n) ? fallback(n) : __libc_malloc(n);
        if (!q)
            return NULL; /* p untouched */
        memcpy(q, p, n < have ? n : have);
        heap_free(p, "realloc");
        return q;
    }
    if (!want(n) || !real_usable)
        return __libc_realloc(p, n);
    int dirty;
    void *q = heap_alloc(n, h_page, &dirty);
    if (!q) {
        atomic_fetch_add_explicit(&st_fallbacks, 1, memory_order_relaxed);
        return __libc_realloc(p, n);
    }
    size_t old = real_usable(p);
    memcpy(q, p, old < n ? old : n);
    __libc_free(p);
    return q;
}

EXPORT void *reallocarray(void *p, size_t a, size_t b)
{
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, n);
}

static int pow2(size_t a) { return a && !(a & (a - 1)); }

EXPORT void *memalign(size_t align, size_t n)
{
    if (want(n) && pow2(align)) {
        int dirty;
        void *p = heap_alloc(n, align, &dirty);
        if (p)
            return p;
        atomic_fetch_add_explicit(&st_fallbacks, 1, memory_order_relaxed);
    }
    return __libc_memalign(align, n);
}

EXPORT void *aligned_alloc(size_t align, size_t n) { return memalign(align, n); }

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (!pow2(align) || align % sizeof(void *))
        return EINVAL;
    int e = errno;
    void *p = memalign(align, n);
    if (!p)
        return ENOMEM;
    errno = e; /* posix_memalign leaves errno alone */
    *out = p;
    return 0;
}

EXPORT void *valloc(size_t n)
{
    int dirty;
    if (want(n)) {
        void *p = heap_alloc(n, h_page, &dirty);
        if (p)
            return p;
        atomic_fetch_add_explicit(&st_fallbacks, 1, memory_order_relaxed);
    }
    return __libc_valloc(n);
}

EXPORT void *pvalloc(size_t n)
{
    int dirty;
    if (want(n)) {
        void *p = heap_alloc(n, h_page, &dirty);
        if (p)
            return p;
        atomic_fetch_add_explicit(&st_fallbacks, 1, memory_order_relaxed);
    }
    return __libc_pvalloc(n);
}

EXPORT size_t malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    if (in_heap(p))
        return heap_size(p, "malloc_usable_size");
    return real_usable ? real_usable(p) : 0;
}

/* ---- what libcohort asks (heap.h) ---- */

EXPORT int cohort_heap_lookup_v1(const void *buf, size_t bytes, coh_heap_region *r)
{
    uintptr_t a = (uintptr_t)buf;
    if (!buf || !in_heap(buf))
        return 0;
    int found = 0;
    pthread_mutex_lock(&h_mu);
    int i = find(a);
    if (i >= 0 && h_tab[i].fd >= 0 && !h_tab[i].cached && bytes <= h_tab[i].size - (a - h_tab[i].base)) {
        *r = (coh_heap_region){.id = h_tab[i].id, .ino = h_tab[i].ino, .size = h_tab[i].size,
                               .off = a - h_tab[i].base, .fd = h_tab[i].fd};
        found = 1;
    }
    pthread_mutex_unlock(&h_mu);
    return found;
}

EXPORT void cohort_heap_stats_v1(coh_heap_stats *s)
{
    pthread_mutex_lock(&h_mu);
    *s = (coh_heap_stats){.min_bytes = h_span ? h_min : 0, .regions = (uint64_t)h_n,
                          .cached = (uint64_t)atomic_load(&h_ncached),
                          .cached_bytes = h_cached_bytes, .reused = atomic_load(&st_reused),
                          .cap = (uint64_t)h_cap, .allocs = atomic_load(&st_allocs),
                          .fallbacks = atomic_load(&st_fallbacks),
                          .forks = atomic_load(&st_forks), .reserve = h_span};
    pthread_mutex_unlock(&h_mu);
}

/* ---- fork: the child's regions become its own ---- */

static void fork_prepare(void) { pthread_mutex_lock(&h_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&h_mu); }

static void fork_child(void)
{
    for (int i = 0; i < h_n;)
        if (h_tab[i].cached)
            close(release_locked(i)); /* the parent's cache: nothing to copy */
        else
            i++;
    for (int i = 0; i < h_n; i++) {
        reg *r = &h_tab[i];
        uint64_t ino, id;
        int fd = make_fd(r->size, &ino, &id);
        void *tmp = MAP_FAILED;
        if (fd >= 0) {
            tmp = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (tmp == MAP_FAILED) {
                close(fd);
            } else {
                memcpy(tmp, (void *)r->base, r->size);
                if (mmap((void *)r->base, r->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                         fd, 0) == MAP_FAILED) {
                    say("libcohort-heap: fork child cannot map its heap copy in place\n");
                    abort();
                }
                munmap(tmp, r->size);
            }
        }
        if (tmp == MAP_FAILED) {
            /* no memfd: a private anonymous copy moved in place (freeable,
             * never offered to peers) */
            void *a = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (a == MAP_FAILED) {
                say("libcohort-heap: fork child cannot copy its heap; it would share the "
                    "parent's memory\n");
                abort();
            }
            memcpy(a, (void *)r->base, r->size);
            if (mremap(a, r->size, r->size, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)r->base) ==
                MAP_FAILED) {
                say("libcohort-heap: fork child cannot move its heap copy in place\n");
                abort();
            }
            fd = -1;
            ino = id = 0;
        }
        close(r->fd);
        r->fd = fd;
        r->ino = ino;
        r->id = id;
        atomic_fetch_add_explicit(&st_forks, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&h_mu);
}

/* ---- load ---- */

__attribute__((constructor(101))) static void heap_init(void)
{
    size_t min = (size_t)1 << 20;
    const char *v = getenv("COHORT_HEAP_MIN_BYTES");
    if (v && *v) {
        char *end = NULL;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end || *v < '0' || *v > '9' || x < 4096 || x > (1ull << 40)) {
            say("libcohort-heap: COHORT_HEAP_MIN_BYTES is not a decimal in [4096, 2^40]; "
                "the shared heap is off\n");
            return;
        }
        min = (size_t)x;
    }
    long pg = sysconf(_SC_PAGESIZE);
    h_page = pg > 0 ? (size_t)pg : 4096;
    struct rlimit rl;
    long cap = 4096;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 4 < (rlim_t)cap)
        cap = (long)(rl.rlim_cur / 4);
    if (cap < 1)
        return;
    void *t = mmap(NULL, (size_t)cap * sizeof(reg), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED)
        return;
    /* the reserve: 1 TiB of address space (no memory), less where the
     * address space is limited (ulimit -v), at least 1 GiB */
    void *lo = MAP_FAILED;
    size_t span;
    for (span = (size_t)1 << 40; span >= (size_t)1 << 30; span >>= 1) {
        lo = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (lo != MAP_FAILED)
            break;
    }
    if (lo == MAP_FAILED) {
        munmap(t, (size_t)cap * sizeof(reg));
        say("libcohort-heap: cannot reserve address space; the shared heap is off\n");
        return;
    }
    real_usable = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0) {
        munmap(lo, span);
        munmap(t, (size_t)cap * sizeof(reg));
        say("libcohort-heap: pthread_atfork failed; the shared heap is off\n");
        return;
    }
    h_tab = t;
    h_cap = (int)cap;
    h_lo = (uintptr_t)lo;
    h_min = min;
    h_span = span; /* last: from here on, allocations may come from the heap */
}
