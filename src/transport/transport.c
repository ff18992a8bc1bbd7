/* transport.c - attaching a transport to its group: the ops table goes on
 * g->tp (finalize, teardown) and its hook on the failure path; and the
 * record of a failure a transport found, which its caller acts on. */
#include <stdarg.h>
#include <stdio.h>
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

/* ---- failure records ---- */

static _Thread_local coh_tp_fail rec;

static void rec_start(cohort_group *g, int kind, cohort_status st, int peer)
{
    rec.g = g;
    rec.kind = kind;
    rec.st = st;
    rec.peer = peer;
    rec.seq = 0;
    rec.msg[0] = 0;
}

cohort_status coh_tp_fail_set(cohort_group *g, cohort_status st, const char *fmt, ...)
{
    rec_start(g, COH_TPF_FAIL, st, -1);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rec.msg, sizeof rec.msg, fmt, ap);
    va_end(ap);
    return st;
}

cohort_status coh_tp_peer_lost(cohort_group *g, int peer, const char *how)
{
    rec_start(g, COH_TPF_PEER_LOST, COHORT_ERR_PEER_LOST, peer);
    snprintf(rec.msg, sizeof rec.msg, "%s", how);
    return COHORT_ERR_PEER_LOST;
}

cohort_status coh_tp_remote_abort(cohort_group *g, cohort_status st, const char *reason)
{
    return coh_tp_remote_abort_at(g, st, reason, 0);
}

cohort_status coh_tp_remote_abort_at(cohort_group *g, cohort_status st, const char *reason,
                                     uint64_t seq)
{
    rec_start(g, COH_TPF_REMOTE_ABORT, st, -1);
    snprintf(rec.msg, sizeof rec.msg, "%s", reason);
    rec.seq = seq;
    return st;
}

cohort_status coh_tp_mismatch(cohort_group *g, const coh_call *call, int peer,
                              const coh_hdr *exp, const coh_hdr *got)
{
    rec_start(g, COH_TPF_MISMATCH, COHORT_ERR_CONTRACT, peer);
    rec.has_call = call != NULL;
    if (call)
        rec.call = *call;
    rec.exp = *exp;
    rec.got = *got;
    return COHORT_ERR_CONTRACT;
}

int coh_tp_fail_take(cohort_group *g, coh_tp_fail *out)
{
    if (!rec.g || rec.g != g)
        return 0;
    *out = rec;
    rec.g = NULL;
    return 1;
}

const char *coh_tp_fail_reason(cohort_group *g)
{
    if (rec.g == g && rec.msg[0])
        return rec.msg;
    return g->err.msg[0] ? g->err.msg : "";
}
