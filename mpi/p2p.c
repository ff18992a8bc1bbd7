/*
 * p2p.c - blocking point-to-point calls publish what they wait for, so the
 * checker can report a cycle of ranks waiting on each other (docs/check.md,
 * "Deadlock"). MPI's matching is untouched: the call goes to PMPI as is.
 */
#include "layer.h"

static void wait_begin(cm_comm *cc, int peer, int tag, int is_send, const char *op,
                       const void *pc)
{
    int w = peer >= 0 && peer < cc->n ? cc->world[peer] : -1;
    cohort_check_wait_begin(cm_chk, cc->grp, w, tag == MPI_ANY_TAG ? -1 : tag, is_send, op, NULL,
                            0, pc);
}

#define P2P(name, peer, tag, is_send, pcall)                                                       \
    cm_comm *cc = (peer) == MPI_PROC_NULL ? NULL : cm_comm_get(comm);                             \
    if (!cc)                                                                                       \
        return pcall;                                                                              \
    wait_begin(cc, (peer) == MPI_ANY_SOURCE ? -1 : (peer), tag, is_send, name, CM_PC());           \
    int rc = pcall;                                                                                \
    cohort_check_wait_end(cm_chk);                                                                 \
    return rc;

int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
    P2P("MPI_Send", dest, tag, 1, PMPI_Send(buf, count, datatype, dest, tag, comm));
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
    P2P("MPI_Ssend", dest, tag, 1, PMPI_Ssend(buf, count, datatype, dest, tag, comm));
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
    P2P("MPI_Rsend", dest, tag, 1, PMPI_Rsend(buf, count, datatype, dest, tag, comm));
}

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    P2P("MPI_Recv", source, tag, 0, PMPI_Recv(buf, count, datatype, source, tag, comm, status));
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    P2P("MPI_Probe", source, tag, 0, PMPI_Probe(source, tag, comm, status));
}
