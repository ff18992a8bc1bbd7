/* group_internal.h - what the files of src/group share. */
#ifndef COH_GROUP_INTERNAL_H
#define COH_GROUP_INTERNAL_H

#include "core/group.h"

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
    int singleton;  /* started alone: a world of one on a loopback store */
    char token_file[600]; /* rank 0 deletes it once every rank has joined */
    int token_via_store;  /* under torchrun: rank 0 passes the token through the store */
} coh_settings;

cohort_status coh_settings_resolve(const cohort_options *o, coh_settings *s);

/* launch_env.c: what srun/mpirun or a lone start imply (docs/launcher.md). */
int coh_env_slurm_step(void);  /* inside an srun step (Slurm's rank variables count) */
int coh_env_launched(void);    /* some launcher's rank variable is set */
/* MASTER_ADDR from the job (loopback on one node, the step's first host);
 * out empty if it cannot be told. *src names where it came from. */
cohort_status coh_env_master_default(const coh_settings *s, char *out, size_t len,
                                     const char **src);
/* MASTER_PORT from the job's id (0: none); *src names it. */
long coh_env_port_default(const coh_settings *s, const char **src);
/* The job's token through a 0600 file in COHORT_TOKEN_DIR: rank 0 writes
 * it, the others wait for it (bounded by s->timeout_ms). */
cohort_status coh_env_token_exchange(coh_settings *s);
/* torchrun_env.c: torchrun's agent holds MASTER_PORT with its TCPStore
 * (TORCHELASTIC_USE_AGENT_STORE=True): use that store (torch://). */
int coh_env_torchrun_agent_store(void);
cohort_status coh_env_torchrun_store(const cohort_options *o, coh_settings *s);

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
/* The cpus rank r's machine offers the group's ranks on it (*k of them,
 * when k is not NULL), from every rank's host id, online cpu count (0:
 * unknown) and cpu set (a canonical cpulist, group/record.h) as the
 * rendezvous records carry them. With sets (NULL when some record has
 * none: an older library, so every rank falls back alike): the cpus in
 * the union of the sets of the machine's ranks, at most the least online
 * count they report. Without: the least online count, 0 (unknown) when
 * one is unknown. The same answer on every rank of that machine. */
long coh_machine_cpus(int n, const char (*ids)[256], const long *cpus, const char *const *sets,
                      int r, int *k);
/* Whether some machine's ranks outnumber its cpus (coh_machine_cpus; a
 * machine of unknown count is not): the same answer on every rank (init.c;
 * g->oversub). */
int coh_machines_oversub(int n, const char (*ids)[256], const long *cpus,
                         const char *const *sets);

/* For the first caller to hand g's failure to the user (a call, or
 * cohort_finalize; api.c): builds the contract report when the failure is a
 * contract one and returns 1; every later caller gets 0. */
int coh_group_claim_report(cohort_group *g);

#endif
