/* pmi.h - asking the MPI launcher that started this process for what its
 * environment does not say: where rank 0 runs and a fresh job secret from
 * rank 0 (docs/launcher.md "Across nodes with mpirun or mpiexec"). Open
 * MPI's mpirun answers through PMIx (libpmix, dlopen'ed at run time, never
 * linked), MPICH's Hydra through PMI-1 over the inherited PMI_FD. */
#ifndef COH_PMI_H
#define COH_PMI_H

#include <stddef.h>

#include "cohort.h"

typedef struct coh_pmi_result {
    const char *via;   /* "PMIx" or "PMI-1" */
    char job[64];      /* the launcher's job key: PMIx namespace, Hydra kvsname */
    char master[256];  /* rank 0's host as the launcher names it */
    char token[72];    /* rank 0's fresh secret (hex), "" if not asked */
} coh_pmi_result;

/* Whether a PMI exchange is possible here; if not, *why says why (for the
 * error a caller gives when nothing else can stand in). */
int coh_pmi_available(const char **why);

/* Every rank of the job calls this once with the same want_token: rank 0
 * publishes its host and (want_token) a fresh secret, all ranks wait for
 * each other (bounded by timeout_ms) and read rank 0's. A second call in
 * the same process returns the first one's result. COHORT_OK;
 * COHORT_ERR_UNSUPPORTED (recorded, why) when the launcher turns out to have
 * no PMI to ask after all (PMIx_Init finds no server): the caller falls back
 * as if coh_pmi_available had said no; any other error is the job's. */
cohort_status coh_pmi_exchange(int rank, int size, int want_token, int timeout_ms,
                               coh_pmi_result *out);

#endif
