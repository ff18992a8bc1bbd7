/*
 * shm_mem.h - buffers the user allocates in shared memory
 * (cohort_mem_alloc), which a local peer maps and copies from once with
 * memcpy: the one-copy broadcast of src/coll/shm (docs/shm.md "Shared user
 * buffers").
 *
 * A region is a sealed memfd (size fixed: a peer's mapping can never turn
 * into SIGBUS), mapped shared by its owner; nothing is in the file system.
 * A peer obtains the descriptor with pidfd_getfd(2) on the owner's pidfd:
 * the kernel allows it under the same ptrace rule (PTRACE_MODE_ATTACH) as
 * process_vm_readv, which the attach probe (shm_cma.c) already tested
 * between every pair of local ranks, so only a process that could read the
 * owner's memory anyway can map it; the descriptor's number, inode and size
 * travel in the owner's slot, inside the job's segment. The peer maps it
 * read-only and caches the mapping (SHM_MEM_CACHE per owner).
 */
#ifndef COH_SHM_MEM_H
#define COH_SHM_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "core/group.h"
#include "transport/shm/shm.h"

/* The root's region, as published in its slot for a one-copy broadcast. */
typedef struct shm_mem_desc {
    uint64_t id;   /* random per region: the readers' cache key */
    uint64_t ino;  /* the memfd's inode, checked after pidfd_getfd */
    uint64_t size; /* the memfd's size (sealed) */
    uint64_t off;  /* the buffer's offset in the region */
    uint64_t bytes;
    int32_t fd;    /* the owner's descriptor number */
    uint32_t heap; /* 1: a region of the preloaded shared heap (not cohort_mem_alloc) */
} shm_mem_desc;

/* 1 and *d filled when [buf, buf + bytes) lies inside one region g
 * allocated with cohort_mem_alloc, or inside one region of the preloaded
 * shared heap (libcohort-heap.so, src/heap/heap.h: malloc'ed buffers of
 * COHORT_HEAP_MIN_BYTES and more). Thread-safe. */
int coh_mem_find(const cohort_group *g, const void *buf, size_t bytes, shm_mem_desc *d);

/* *base: this rank's address of local rank q's region d, mapped on first
 * use (read-only, or read-write when `write`: a root writing a reader's
 * share) and cached. Otherwise records why (coh_tp_fail_set: the descriptor
 * could not be obtained or mapped: permissions, fd limit; not the region
 * announced) and returns that status; the caller fails the group (cs_up). */
cohort_status coh_mem_map(coh_shm *s, int q, const shm_mem_desc *d, const coh_call *c,
                          int write, unsigned char **base);

/* 1 when libcohort-heap.so is preloaded and on: its threshold, live
 * regions and cap. */
int coh_mem_heap(uint64_t *min_bytes, uint64_t *regions, uint64_t *cap);

/* Whether a call takes the one-copy path from (root) or offers (!root)
 * region d. A cohort_mem_alloc region: always. A shared-heap region: when
 * this rank considered it in one of its last SHM_MEM_RECENT such calls (in
 * that role), so the peers likely still hold its mapping; otherwise it is
 * recorded, counted (coh_mem_first) and this call takes the usual path. A
 * program that cycles through more buffers than the peers keep mapped then
 * never maps on every call (slower than the kernel's copy: docs/shm.md
 * "The shared heap", "Many buffers"); one that reuses a buffer pays the
 * usual path once. */
int coh_mem_recent(coh_shm *s, const shm_mem_desc *d, int root);
/* Calls that took the usual path (root) or offered nothing (!root) for a
 * first sighting (coh_mem_recent), in this process. */
uint64_t coh_mem_first(int root);

/* For cohort_describe: 1 and buf filled when the shared heap is loaded
 * (what a broadcast of `bytes` whose root buffer lies in it takes on s). */
int coh_mem_heap_describe(const coh_shm *s, size_t bytes, char *buf, size_t len);

/* Unmaps every cached peer region (segment teardown). */
void coh_mem_unmap_all(coh_shm *s);

/* Frees the regions g still owns (group teardown). */
void coh_mem_release_group(cohort_group *g);

/* Broadcasts that took the one-copy path in this process, as root, as
 * reader, and as a reader whose own buffer was a region, so the root wrote
 * part of it (split) - tests: the path really ran, no silent fallback. */
enum { COH_MEM_ROOTED, COH_MEM_READ, COH_MEM_SPLIT };
void coh_mem_counts(uint64_t *rooted, uint64_t *read, uint64_t *split);
void coh_mem_count(int which);

#endif
