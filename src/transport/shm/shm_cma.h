/*
 * shm_cma.h - single copy between the local ranks of a segment: a rank reads
 * a peer's buffer straight from the peer's memory (process_vm_readv, "cross
 * memory attach"), one copy instead of two through the segment.
 *
 * Whether it works is probed at attach, by really reading a word of every
 * peer's private memory (ptrace access rules: Yama's ptrace_scope, uids,
 * dumpability, seccomp, pid namespaces all decide), and the local ranks
 * agree: single copy is used only if every rank could read every other and
 * every rank asked for it (COHORT_SHM_SINGLE_COPY=on: on the development VM
 * the kernel's copy is slower than the pipelined two copies, docs/shm.md).
 * =auto (default) probes and reports; =off skips the probe; =probe-fail
 * makes the probe read an unmapped address (tests of the fallback);
 * COHORT_SHM_SINGLE_COPY_BYTES
 * (default 65536, the lead's value rules) is the smallest call that uses it.
 * The copy path chosen, and why, is in s->copy_info.
 */
#ifndef COH_SHM_CMA_H
#define COH_SHM_CMA_H

#include "transport/shm/shm_seg.h"

/* Before the attach barrier: publish my probe word. */
void shm_cma_publish(coh_shm *s);
/* After the attach barrier and the pidfds: probe every peer, publish my
 * verdict, meet the others (one more barrier phase), set s->cma. */
cohort_status shm_cma_agree(shm_op *o);
/* Copies len bytes at addr in local rank q's memory into dst. Any failure
 * (the peer exited: ESRCH or its pidfd readable afterwards; a bad address:
 * EFAULT) fails the group with a specific message - never partial data
 * reported as success. */
cohort_status shm_cma_read(shm_op *o, int q, void *dst, uint64_t addr, size_t len);

/* Copies len bytes from src into local rank q's memory at addr. Checks
 * first that q is alive (its pidfd), so a recycled pid is not written to. */
cohort_status shm_cma_write(shm_op *o, int q, uint64_t addr, const void *src, size_t len);

/* A peer's buffer as published in its slot for a single-copy call. */
typedef struct shm_cma_desc {
    uint64_t addr;
    uint64_t bytes;
} shm_cma_desc;

#endif
