/*
 * shm_mem.c - cohort_mem_alloc / cohort_mem_free and the peers' mappings
 * of those regions (shm_mem.h).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "heap/heap.h"
#include "transport/shm/shm_mem.h"
#include "transport/shm/shm_seg.h"

#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

typedef struct mem_region {
    struct mem_region *next;
    const cohort_group *g;
    unsigned char *base;
    size_t size;
    int fd;
    uint64_t id, ino;
} mem_region;

/* Every live region of the process: looked up by the root of a large
 * broadcast (one short walk under the lock; no lookups on small calls). */
static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;
static mem_region *mem_list;
static _Atomic int mem_nlive; /* regions in mem_list: lookups skip the lock at 0 */
static _Atomic uint64_t mem_cnt[3];

void coh_mem_count(int which) { atomic_fetch_add_explicit(&mem_cnt[which], 1, memory_order_relaxed); }

void coh_mem_counts(uint64_t *rooted, uint64_t *read, uint64_t *split)
{
    *rooted = atomic_load(&mem_cnt[COH_MEM_ROOTED]);
    *read = atomic_load(&mem_cnt[COH_MEM_READ]);
    *split = atomic_load(&mem_cnt[COH_MEM_SPLIT]);
}

static void region_free(mem_region *r)
{
    munmap(r->base, r->size);
    close(r->fd);
    coh_free(r);
}

cohort_status cohort_mem_alloc(cohort_group *g, size_t bytes, void **out)
{
    if (out)
        *out = NULL;
    if (!g || !out || bytes == 0)
        return coh_err_set(g ? &g->last : NULL, COHORT_ERR_INVALID,
                           "cohort_mem_alloc: %s", !g ? "NULL group" : !out ? "NULL out" : "0 bytes");
    long pg = sysconf(_SC_PAGESIZE);
    size_t page = pg > 0 ? (size_t)pg : 4096;
    if (bytes > SIZE_MAX / 2)
        return coh_err_set(&g->last, COHORT_ERR_NOMEM, "cohort_mem_alloc: %zu bytes", bytes);
    size_t size = (bytes + page - 1) / page * page;
    mem_region *r = coh_calloc(1, sizeof *r);
    if (!r)
        return coh_err_set(&g->last, COHORT_ERR_NOMEM, "cohort_mem_alloc: out of memory");
    const char *what = "memfd_create";
    r->fd = (int)syscall(SYS_memfd_create, "cohort-mem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    struct stat sb;
    if (r->fd < 0)
        goto sys_err;
    what = "ftruncate";
    if (ftruncate(r->fd, (off_t)size) < 0)
        goto sys_err;
    /* sealed: no peer's mapping can be cut short under it (SIGBUS) */
    what = "fcntl(F_ADD_SEALS)";
    if (fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        goto sys_err;
    what = "fstat";
    if (fstat(r->fd, &sb) < 0)
        goto sys_err;
    what = "mmap";
    r->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (r->base == MAP_FAILED)
        goto sys_err;
    if (coh_random(&r->id, sizeof r->id) != COHORT_OK) {
        munmap(r->base, size);
        close(r->fd);
        coh_free(r);
        return coh_err_set(&g->last, COHORT_ERR_SYSTEM, "cohort_mem_alloc: getrandom failed");
    }
    r->g = g;
    r->size = size;
    r->ino = (uint64_t)sb.st_ino;
    pthread_mutex_lock(&mem_mu);
    r->next = mem_list;
    mem_list = r;
    atomic_fetch_add(&mem_nlive, 1);
    pthread_mutex_unlock(&mem_mu);
    *out = r->base;
    return COHORT_OK;
sys_err:;
    int e = errno;
    if (r->fd >= 0)
        close(r->fd);
    coh_free(r);
    return coh_err_sys(&g->last, e == ENOMEM || e == ENOSPC ? COHORT_ERR_NOMEM : COHORT_ERR_SYSTEM,
                       what, e, "cohort_mem_alloc of %zu bytes", bytes);
}

cohort_status cohort_mem_free(cohort_group *g, void *p)
{
    if (!p)
        return COHORT_OK;
    if (!g)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_mem_free: NULL group");
    pthread_mutex_lock(&mem_mu);
    mem_region **pp = &mem_list;
    while (*pp && !((*pp)->g == g && (*pp)->base == p))
        pp = &(*pp)->next;
    mem_region *r = *pp;
    if (r) {
        *pp = r->next;
        atomic_fetch_sub(&mem_nlive, 1);
    }
    pthread_mutex_unlock(&mem_mu);
    if (!r)
        return coh_err_set(&g->last, COHORT_ERR_INVALID,
                           "cohort_mem_free: %p is not a cohort_mem_alloc pointer of this group", p);
    region_free(r);
    return COHORT_OK;
}

void coh_mem_release_group(cohort_group *g)
{
    pthread_mutex_lock(&mem_mu);
    for (mem_region **pp = &mem_list; *pp;) {
        mem_region *r = *pp;
        if (r->g == g) {
            *pp = r->next;
            atomic_fetch_sub(&mem_nlive, 1);
            region_free(r);
        } else {
            pp = &r->next;
        }
    }
    pthread_mutex_unlock(&mem_mu);
}

/* The preloaded shared heap's functions (libcohort-heap.so, heap.h), looked
 * up once; NULL when it is not loaded. */
static pthread_once_t heap_once = PTHREAD_ONCE_INIT;
static coh_heap_lookup_fn heap_lookup;
static coh_heap_stats_fn heap_stats;

static void heap_resolve(void)
{
    heap_lookup = (coh_heap_lookup_fn)dlsym(RTLD_DEFAULT, COH_HEAP_LOOKUP);
    heap_stats = (coh_heap_stats_fn)dlsym(RTLD_DEFAULT, COH_HEAP_STATS);
    if (!heap_lookup || !heap_stats)
        heap_lookup = NULL, heap_stats = NULL;
}

int coh_mem_heap(uint64_t *min_bytes, uint64_t *regions, uint64_t *cap)
{
    pthread_once(&heap_once, heap_resolve);
    coh_heap_stats st;
    if (!heap_stats)
        return 0;
    heap_stats(&st);
    if (!st.min_bytes)
        return 0; /* loaded but off (COHORT_HEAP_MIN_BYTES invalid, no reserve) */
    *min_bytes = st.min_bytes;
    *regions = st.regions;
    *cap = st.cap;
    return 1;
}

int coh_mem_heap_describe(const coh_shm *s, size_t bytes, char *buf, size_t len)
{
    uint64_t min, n, cap;
    if (!s || s->n < 2 || !coh_mem_heap(&min, &n, &cap))
        return 0;
    if (s->mem_ok)
        snprintf(buf, len,
                 "one copy where the root's buffer lies in the shared heap, from a region's "
                 "second broadcast (libcohort-heap.so: blocks allocated with >= %llu B%s, %llu "
                 "of at most %llu regions live), else ",
                 (unsigned long long)min, bytes >= min ? "" : ", not a buffer of this size alone",
                 (unsigned long long)n, (unsigned long long)cap);
    else
        snprintf(buf, len,
                 "(libcohort-heap.so loaded, but no one copy: %s) ",
                 s->mem_mode == 0 ? "COHORT_SHM_MEM=off" : "the single-copy probe failed");
    return 1;
}

/* A region of the preloaded shared heap (any group: the heap is the
 * process's). */
static int heap_find(const void *buf, size_t bytes, shm_mem_desc *d)
{
    pthread_once(&heap_once, heap_resolve);
    coh_heap_region r;
    if (!heap_lookup || !heap_lookup(buf, bytes, &r))
        return 0;
    *d = (shm_mem_desc){.id = r.id, .ino = r.ino, .size = r.size, .off = r.off, .bytes = bytes,
                        .fd = r.fd, .heap = 1};
    return 1;
}

static _Atomic uint64_t mem_first[2];

uint64_t coh_mem_first(int root) { return atomic_load(&mem_first[root != 0]); }

int coh_mem_recent(coh_shm *s, const shm_mem_desc *d, int root)
{
    if (!d->heap)
        return 1;
    uint64_t *ids = s->mem_recent[root != 0];
    for (int i = 0; i < SHM_MEM_RECENT; i++)
        if (ids[i] == d->id)
            return 1;
    ids[s->mem_recent_next[root != 0]++ % SHM_MEM_RECENT] = d->id;
    atomic_fetch_add_explicit(&mem_first[root != 0], 1, memory_order_relaxed);
    return 0;
}

int coh_mem_find(const cohort_group *g, const void *buf, size_t bytes, shm_mem_desc *d)
{
    int found = 0;
    uintptr_t a = (uintptr_t)buf;
    if (!buf)
        return 0;
    if (atomic_load_explicit(&mem_nlive, memory_order_relaxed) == 0)
        return heap_find(buf, bytes, d); /* the common case: none from cohort_mem_alloc */
    pthread_mutex_lock(&mem_mu);
    for (mem_region *r = mem_list; r; r = r->next) {
        uintptr_t b = (uintptr_t)r->base;
        if (r->g == g && a >= b && a - b <= r->size && bytes <= r->size - (a - b)) {
            *d = (shm_mem_desc){.id = r->id, .ino = r->ino, .size = r->size, .off = a - b,
                                .bytes = bytes, .fd = r->fd};
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&mem_mu);
    return found || heap_find(buf, bytes, d);
}

/* ---- the readers' side: peers' regions mapped on first use ---- */

/* Mappings kept per peer, the oldest going first: at most SHM_MEM_CACHE of
 * them and SHM_MEM_CACHE_BYTES mapped (one larger mapping alone is kept).
 * A miss costs pidfd_getfd, mmap, the page tables and an munmap, so a
 * program cycling through more buffers than the cache holds pays it on
 * every call (with the shared heap, 1 MiB buffers: 1.5-2x the kernel's
 * copy, docs/shm.md "The shared heap"); a mapping also keeps a freed
 * region's pages alive, so the bytes are bounded. */
#define SHM_MEM_CACHE 128
#define SHM_MEM_CACHE_BYTES ((size_t)256 << 20)

typedef struct mem_map {
    uint64_t id;
    unsigned char *base;
    size_t size;
    int write; /* mapped read-write */
} mem_map;

typedef struct mem_cache {
    mem_map *m;    /* [n * SHM_MEM_CACHE] */
    unsigned *next; /* [n]: the slot the next new mapping of peer q takes */
    size_t *bytes;  /* [n]: bytes mapped of peer q */
} mem_cache;

void coh_mem_unmap_all(coh_shm *s)
{
    mem_cache *mc = s->mem;
    if (!mc)
        return;
    for (size_t i = 0; i < (size_t)s->n * SHM_MEM_CACHE; i++)
        if (mc->m[i].base)
            munmap(mc->m[i].base, mc->m[i].size);
    coh_free(mc->m);
    coh_free(mc->next);
    coh_free(mc->bytes);
    coh_free(mc);
    s->mem = NULL;
}

cohort_status coh_mem_map(coh_shm *s, int q, const shm_mem_desc *d, const coh_call *c,
                          int write, unsigned char **base)
{
    mem_cache *mc = s->mem;
    if (!mc) {
        mc = coh_calloc(1, sizeof *mc);
        if (mc) {
            mc->m = coh_calloc((size_t)s->n * SHM_MEM_CACHE, sizeof *mc->m);
            mc->next = coh_calloc((size_t)s->n, sizeof *mc->next);
            mc->bytes = coh_calloc((size_t)s->n, sizeof *mc->bytes);
        }
        if (!mc || !mc->m || !mc->next || !mc->bytes) {
            if (mc) {
                coh_free(mc->m);
                coh_free(mc->next);
                coh_free(mc->bytes);
                coh_free(mc);
            }
            return coh_tp_fail_set(s->g, COHORT_ERR_NOMEM, "shm broadcast #%llu: out of memory",
                                  (unsigned long long)c->seq);
        }
        s->mem = mc;
    }
    mem_map *m = mc->m + (size_t)q * SHM_MEM_CACHE;
    for (int i = 0; i < SHM_MEM_CACHE; i++)
        if (m[i].base && m[i].id == d->id && m[i].size == d->size) {
            if (write && !m[i].write) { /* mapped for reading: map it again below */
                munmap(m[i].base, m[i].size);
                mc->bytes[q] -= m[i].size;
                m[i].base = NULL;
                break;
            }
            *base = m[i].base;
            return COHORT_OK;
        }
    int peer = s->g->local_ranks[q];
    /* COHORT_SHM_MEM=map-fail: ask for a descriptor the root does not
     * have, so the real failure path runs (tests) */
    int fd = s->pidfd && s->pidfd[q] >= 0
                 ? (int)syscall(SYS_pidfd_getfd, s->pidfd[q], s->mem_mode == 2 ? -1 : d->fd, 0)
                 : (errno = ESRCH, -1);
    int e = errno;
    const char *what = "pidfd_getfd";
    struct stat sb;
    void *p = MAP_FAILED;
    if (fd >= 0) {
        what = "fstat";
        int seals = fcntl(fd, F_GET_SEALS);
        if (fstat(fd, &sb) < 0) {
            e = errno;
        } else if ((uint64_t)sb.st_ino != d->ino || (uint64_t)sb.st_size != d->size ||
                   seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
            close(fd);
            cohort_status ab = shm_check_abort(s); /* a failed root freed it */
            if (ab != COHORT_OK)
                return ab;
            return coh_tp_fail_set(s->g, COHORT_ERR_PROTOCOL,
                           "shm broadcast #%llu: rank %d's descriptor %d is not its sealed "
                           "%llu-byte cohort_mem_alloc region",
                           (unsigned long long)c->seq, peer, (int)d->fd,
                           (unsigned long long)d->size);
        } else {
            what = "mmap";
            p = mmap(NULL, (size_t)d->size, write ? PROT_READ | PROT_WRITE : PROT_READ,
                     MAP_SHARED, fd, 0);
            e = errno;
        }
        close(fd);
    }
    /* A root that failed the group (abort word written first) and then
     * exited or freed its region: its cause is the one to report. */
    cohort_status ab;
    if (p == MAP_FAILED && (ab = shm_check_abort(s)) != COHORT_OK)
        return ab;
    if (p == MAP_FAILED)
        return coh_tp_fail_set(s->g, e == EMFILE || e == ENFILE || e == ENOMEM ? COHORT_ERR_NOMEM : COHORT_ERR_SYSTEM,
                       "shm broadcast #%llu: this rank cannot map %s rank %d's cohort_mem_alloc "
                       "buffer: %s: %s (errno %d)%s",
                       (unsigned long long)c->seq, write ? "reader" : "root", peer, what,
                       strerror(e), e,
                       s->mem_mode == 2 ? " (COHORT_SHM_MEM=map-fail)"
                                        : "; COHORT_SHM_MEM=off on the root takes the copy "
                                          "through the segment instead");
    /* the part this call copies, faulted in at once (not page by page
     * under the copy); best effort: older kernels lack it */
#if defined(MADV_POPULATE_READ) && defined(MADV_POPULATE_WRITE)
    size_t lo = (size_t)d->off & ~(size_t)4095;
    madvise((unsigned char *)p + lo, (size_t)(d->off + d->bytes) - lo,
            write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
#endif
    unsigned k = mc->next[q]++ % SHM_MEM_CACHE;
    /* the oldest mapping goes, and the next oldest while over the bytes */
    for (unsigned i = 0; i < SHM_MEM_CACHE; i++) {
        mem_map *o = &m[(k + i) % SHM_MEM_CACHE];
        if (i > 0 && mc->bytes[q] + (size_t)d->size <= SHM_MEM_CACHE_BYTES)
            break;
        if (o->base) {
            munmap(o->base, o->size);
            mc->bytes[q] -= o->size;
            o->base = NULL;
        }
    }
    m[k] = (mem_map){.id = d->id, .base = p, .size = (size_t)d->size, .write = write};
    mc->bytes[q] += (size_t)d->size;
    *base = p;
    return COHORT_OK;
}
