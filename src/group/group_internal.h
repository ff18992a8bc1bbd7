/* group_internal.h - what the files of src/group share. */
#ifndef COH_GROUP_INTERNAL_H
#define COH_GROUP_INTERNAL_H

#include "group/group.h"

/* Settings resolved from options + environment (env.c). */
typedef struct coh_settings {
    int rank, size, local_rank;
    const char *rank_src, *size_src; /* which variable gave them, for messages */
    char job_id[64];
    char token[256];
    uint32_t generation;
    int timeout_ms, stall_warn_ms;
    int force_transport;
    int debug_sync, debug_buffers, check_contract;
    char store_addr[256];
    int store_port;
    int host_store; /* this rank starts the embedded server */
} coh_settings;

cohort_status coh_settings_resolve(const cohort_options *o, coh_settings *s);

/* Allocates a group shell with settings copied in (no I/O). */
cohort_group *coh_group_alloc(int rank, int size);
/* Rendezvous of g (rank/size/ids set, g->store_root connected): publishes
 * this rank, learns the others, builds topology, shm and tcp. */
cohort_status coh_group_rendezvous(cohort_group *g);
/* Frees everything g owns (not the parent's). */
void coh_group_free(cohort_group *g);

/* Host identity: hostname + network namespace + boot id, so ranks in
 * different namespaces are different hosts. */
void coh_host_identity(char *id, size_t idlen, char *name, size_t namelen);

#endif
