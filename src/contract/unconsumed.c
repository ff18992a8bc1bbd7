/* unconsumed.c - the verdict on a message no call of this rank took (still
 * queued when its sender said goodbye at cohort_finalize). The contract
 * judges it, reading this rank's own calls from the flight recorder, so the
 * transport that found the message neither reads the recorder nor writes
 * contract messages; it records the verdict (transport/transport.h). */
#include <stdio.h>
#include <string.h>

#include "contract/contract.h"
#include "trace/trace.h"

/* The collective call numbered seq in this rank's flight recorder
 * (send/recv number their own): 1 and *out, else 0. *last: the newest
 * collective call recorded (0: none). */
static int find_coll(cohort_group *g, uint64_t seq, coh_call *out, uint64_t *last)
{
    uint64_t rec = coh_trace_recorded(g->trace);
    uint64_t cap = (uint64_t)coh_trace_capacity(g->trace);
    *last = 0;
    for (uint64_t i = rec; i > 0 && rec - i < cap; i--) {
        coh_trace_entry e;
        if (!coh_trace_read(g->trace, i - 1, &e) || e.call.coll == COH_COLL_SEND ||
            e.call.coll == COH_COLL_RECV)
            continue;
        if (!*last)
            *last = e.call.seq;
        if (e.call.seq < seq)
            break;
        if (e.call.seq == seq) {
            *out = e.call;
            return 1;
        }
    }
    return 0;
}

int coh_contract_finished(cohort_group *g, const coh_hdr *h, coh_call *call, coh_hdr *exp)
{
    uint64_t last;
    if (h->kind != COH_MSG_COLL || !find_coll(g, h->seq, call, &last))
        return 0;
    coh_hdr_from_call(exp, g, call, h->kind, h->step, h->len);
    int f = coh_hdr_match(exp, h);
    return f != COH_FIELD_NONE && f != COH_FIELD_SEQ && f != COH_FIELD_STEP;
}

int coh_contract_unconsumed(cohort_group *g, const coh_hdr *h, coh_call *call, coh_hdr *exp,
                            char *msg, size_t len)
{
    if (h->kind == COH_MSG_P2P) {
        snprintf(msg, len,
                 "send #%llu from rank %d to rank %d (tag %d, %llu bytes, rank %d's line %u) was "
                 "never received: rank %d finalized without the matching cohort_recv",
                 (unsigned long long)h->seq, h->src, g->rank, h->tag, (unsigned long long)h->len,
                 h->src, h->line, g->rank);
        return 0;
    }
    uint64_t last;
    coh_call c;
    if (find_coll(g, h->seq, &c, &last)) {
        coh_hdr_from_call(exp, g, &c, h->kind, h->step, h->len);
        if (coh_hdr_match(exp, h) != COH_FIELD_NONE) {
            *call = c;
            return 1;
        }
        snprintf(msg, len,
                 "%s #%llu (%s:%d): rank %d sent this rank a message for it (step %u, %llu bytes) "
                 "that the call never received",
                 coh_coll_name(c.coll), (unsigned long long)c.seq, c.file ? c.file : "?",
                 c.line, h->src, h->step,
                 (unsigned long long)h->len);
        return 0;
    }
    if (h->seq > last)
        snprintf(msg, len,
                 "rank %d sent %s #%llu (its line %u), but this rank's last call was #%llu: rank "
                 "%d made more calls than this rank (an extra call on its side, or a skipped one "
                 "here)",
                 h->src, coh_coll_name(h->coll), (unsigned long long)h->seq, h->line,
                 (unsigned long long)last, h->src);
    else
        snprintf(msg, len, "rank %d sent %s #%llu (its line %u) that no call of this rank received",
                 h->src, coh_coll_name(h->coll), (unsigned long long)h->seq, h->line);
    return 0;
}
