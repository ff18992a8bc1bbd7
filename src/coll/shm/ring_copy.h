/*
 * ring_copy.h - the shm collectives' copy of 33-64 bytes out of (or into) a
 * ring slot another core has just written.
 */
#ifndef COH_COLL_SHM_RING_COPY_H
#define COH_COLL_SHM_RING_COPY_H

#include <stddef.h>

/* 33-64 bytes by 16-byte moves; any other length by memmove (overlap is
 * safe at every length). On an Intel host two 32-byte loads of a line the
 * peer core just wrote cost ~0.1 us more than four 16-byte ones (2 ranks,
 * session 18: reduce and gather of 64 B 0.17-0.23 -> 0.09 us; docs/shm.md
 * "Ring copies of 33-64 B"). In a file of its own, out of line: inline in
 * shm_coll.c the same code changed how GCC compiled the whole file and
 * moved 1-2 KiB broadcasts x1.3-1.9. */
void coh_copy_narrow(void *dst, const void *src, size_t n);

#endif
