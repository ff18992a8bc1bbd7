/*
 * layer.h - libcohort-mpi, the PMPI interposition layer (docs/mpi.md).
 *
 * Built once per MPI implementation (the ABIs differ): the same sources
 * against Open MPI's and MPICH's mpi.h give libcohort-mpi-openmpi.so and
 * libcohort-mpi-mpich.so. Each MPI_* function here announces the call's
 * fingerprint to the cohort checker (include/cohort_check.h), calls the
 * PMPI_* entry point, and has the call compared with the neighbour's.
 *
 * Lock order: the layer's own locks (types cache, comm registry) are
 * leaves; none is held across a PMPI call or a checker call.
 */
#ifndef COHORT_MPI_LAYER_H
#define COHORT_MPI_LAYER_H

#include <mpi.h>
#include <stdint.h>

#include "cohort.h"
#include "cohort_check.h"

/* Exit codes passed to MPI_Abort (documented in docs/mpi.md). */
#define CM_EXIT_MISMATCH 71 /* members disagree on a collective */
#define CM_EXIT_TIMEOUT 73  /* COHORT_TIMEOUT passed in a call */
#define CM_EXIT_DEADLOCK 74 /* blocking send/recv wait on each other in a cycle */
#define CM_EXIT_ABORTED 75  /* the layer's own machinery failed */

/* What the layer knows about a communicator (cached as an attribute). */
typedef struct cm_comm {
    cohort_check_group *grp;
    int n;          /* size */
    int *world;     /* [n] world ranks */
    uint64_t id;
    uint64_t children; /* communicators made from this one so far */
    char name[64];
    /* 1: the layer's error handler is installed, standing for
     * MPI_ERRORS_ARE_FATAL (so a backend error raised by a mismatched call
     * is explained first); 0: the program installed its own. */
    int own_eh;
} cm_comm;

/* The layer's thread-local state, in the initial-exec model: the layer
 * comes in with the program (LD_PRELOAD or linked ahead of the MPI
 * library: its interposition needs that), so its few bytes sit in the
 * static TLS block and an access is one register-relative load. Compiled
 * as position-independent code without it, each access was a
 * __tls_get_addr call, three to four per MPI call (callgrind,
 * 2026-12-02). A dlopen of the layer (which would not interpose anyway)
 * draws on glibc's reserve of static TLS for such libraries. */
#define CM_TLS _Thread_local __attribute__((tls_model("initial-exec")))

/* The checked call in progress on this thread (for the error handler);
 * one thread-local object: one TLS address lookup per call, not two. */
typedef struct cm_cur_call {
    cm_comm *comm;
    uint64_t seq;
#ifdef COHORT_MPI_SELFTIME
    uint64_t t_enter, t_pre; /* ticks: wrapper entered, about to call PMPI */
#endif
} cm_cur_call;
extern CM_TLS cm_cur_call cm_cur;

/* A datatype's type signature: the flattened basic types as a primitive
 * unit repeated m times (see types.c). */
typedef struct cm_sig {
    uint64_t hash; /* of the unit */
    const char *text; /* readable unit, owned by the cache */
    uint64_t m;    /* units per element of the datatype */
} cm_sig;

extern cohort_check *cm_chk;   /* NULL: the layer is off (pass-through) */
extern int cm_world_rank;

/* The communicator's entry; NULL when unchecked (layer off,
 * intercommunicator, MPI_COMM_NULL). Registers a communicator that was
 * made by a call the layer does not intercept. */
cm_comm *cm_comm_get(MPI_Comm comm);
/* After a communicator-making collective on parent returned newcomm. */
void cm_comm_made(cm_comm *parent, MPI_Comm newcomm, const char *how);

/* The datatype's signature (cached per handle). */
void cm_type_sig(MPI_Datatype dt, cm_sig *out);
void cm_type_forget(MPI_Datatype dt);
/* "MPI_SUM", "user-defined op" (string literals). */
const char *cm_op_name(MPI_Op op);

/* Ends the job with the report (once per process): prints it, then
 * MPI_Abort with the event's exit code. */
void cm_fatal(int kind, const char *text);
/* A checker call failed: the report is ready; end the job. */
void cm_failed(cohort_status st);

/* A return address as "file:line" (or "function (object)"); 0 if unknown. */
int cm_resolve_site(const void *pc, char *out, size_t len);

/* COHORT_MPI_SELFTIME builds (bench/mpi/selftime.sh, never the default):
 * the layer's own time per checked collective, outside PMPI, printed at
 * MPI_Finalize. */
void cm_selftime_report(void);

/* The call's fingerprint helpers (coll.c). */
#define CM_PC() __builtin_extract_return_addr(__builtin_return_address(0))

#endif
