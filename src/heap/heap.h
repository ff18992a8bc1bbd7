/*
 * heap.h - what libcohort-heap.so (src/heap/heap.c, the preloadable shared
 * heap) and libcohort agree on. libcohort looks the functions up by name
 * (dlsym(RTLD_DEFAULT), src/transport/shm/shm_mem.c) and finds them only
 * when the heap was preloaded (LD_PRELOAD, cohortrun --heap); the "_v1" in
 * the names is the layout of these structs, so a library and a heap of
 * different layouts never meet.
 */
#ifndef COH_HEAP_H
#define COH_HEAP_H

#include <stddef.h>
#include <stdint.h>

/* A region of the heap holding [buf, buf + bytes): a sealed memfd mapped
 * shared at base, as cohort_mem_alloc's (shm_mem_desc carries the same). */
typedef struct coh_heap_region {
    uint64_t id;   /* random per region (a peer's cache key) */
    uint64_t ino;  /* the memfd's inode */
    uint64_t size; /* the memfd's size (sealed) */
    uint64_t off;  /* buf - the region's base */
    int32_t fd;    /* the descriptor in this process */
    uint32_t pad;
} coh_heap_region;

typedef struct coh_heap_stats {
    uint64_t min_bytes; /* allocations from this size come from the heap */
    uint64_t regions;   /* regions, cached ones included (a descriptor each) */
    uint64_t cached;    /* freed regions kept for reuse */
    uint64_t cached_bytes;
    uint64_t reused;    /* allocations served from the cache */
    uint64_t cap;       /* most live regions; beyond it: glibc */
    uint64_t allocs;    /* regions made since the start */
    uint64_t fallbacks; /* allocations >= min_bytes that went to glibc
                         * (cap reached, reserve full, a system call failed) */
    uint64_t forks;     /* regions copied into a fork child (this process
                         * as the child) */
    uint64_t reserve;   /* bytes of address space reserved for the heap */
} coh_heap_stats;

#define COH_HEAP_LOOKUP "cohort_heap_lookup_v1"
#define COH_HEAP_STATS "cohort_heap_stats_v1"

/* 1 and *r filled when [buf, buf + bytes) lies inside one region. */
typedef int (*coh_heap_lookup_fn)(const void *buf, size_t bytes, coh_heap_region *r);
typedef void (*coh_heap_stats_fn)(coh_heap_stats *s);

#endif
