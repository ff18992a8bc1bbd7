/*
 * tcp.h - extras of the tcp store backend beyond the backend vtable (for the
 * tools and tests; not part of the public API).
 */
#ifndef COH_STORE_TCP_H
#define COH_STORE_TCP_H

#include <stdint.h>

#include "cohort_store.h"

typedef struct coh_store_stats {
    int64_t conns;      /* connections to the server, all jobs */
    int64_t job_conns;  /* authenticated connections of this job */
    int64_t waiters;    /* this job's requests waiting (get/wait/multi_get/barrier) */
    int64_t keys;       /* this job's keys */
    int64_t mem_used;   /* bytes charged to max_memory, all jobs */
    int64_t max_memory;
    uint32_t generation; /* the job's newest generation */
} coh_store_stats;

/* Server counters (STATS op). COHORT_ERR_UNSUPPORTED on a non-tcp handle. */
cohort_status coh_store_tcp_stats(cohort_store *s, coh_store_stats *out);
/* Ping round trip (PING op). */
cohort_status coh_store_tcp_ping(cohort_store *s);
/* Operator command (SET_GEN op; the handle must be connected with generation
 * 0): sets the job's generation to gen and closes the job's connections of
 * any other non-zero generation. *prev (may be NULL) gets the old one. */
cohort_status coh_store_tcp_set_generation(cohort_store *s, uint32_t gen, uint32_t *prev);

#endif
