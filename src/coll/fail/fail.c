/* fail.c - the owner's side of the transport seam: a transport reports a
 * failure as a returned status plus a record (transport/transport.h) and
 * never changes group state; the code that called it turns the record into
 * the group's failure here. Its own module (below coll/shm and coll, above
 * the transports) so that every caller of a transport can reach it. */
#include "coll/fail/fail.h"
#include "contract/contract.h"
#include "transport/transport.h"

cohort_status coh_coll_transport_failed(cohort_group *g, cohort_status st)
{
    coh_tp_fail f;
    if (!coh_tp_fail_take(g, &f))
        return st;
    switch (f.kind) {
    case COH_TPF_PEER_LOST:
        return coh_group_peer_lost(g, f.peer, f.msg);
    case COH_TPF_REMOTE_ABORT: {
        coh_group_remote_abort_at(g, f.st, f.msg, f.seq);
        int p = coh_group_poisoned(g);
        return p ? (cohort_status)p : f.st;
    }
    case COH_TPF_MISMATCH:
        return coh_contract_mismatch(g, f.has_call ? &f.call : NULL, f.peer, &f.exp, &f.got);
    default:
        return coh_group_fail(g, f.st, "%s", f.msg);
    }
}
