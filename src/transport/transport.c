/* transport.c - attaching a transport to its group: the ops table goes on
 * g->tp (finalize, teardown) and its hook on the failure path. */
#include <stdlib.h>
#include <string.h>

#include "transport/transport.h"

void coh_transport_attach(cohort_group *g, const coh_transport_ops *ops, void *t)
{
    /* Two kinds exist (shm, tcp), each attached once per group. */
    if (g->n_tp >= COH_MAX_TRANSPORTS)
        abort();
    g->tp[g->n_tp++] = (coh_transport_ref){ops, t};
    coh_group_add_hook(g, &ops->hook, t);
}

void coh_transport_detach(cohort_group *g, void *t)
{
    coh_group_remove_hook(g, t);
    int j = 0;
    for (int i = 0; i < g->n_tp; i++)
        if (g->tp[i].t != t)
            g->tp[j++] = g->tp[i];
    g->n_tp = j;
}
