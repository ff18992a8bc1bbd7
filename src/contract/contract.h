/*
 * contract.h - per-call fingerprints, their comparison on every received
 * message / slot, and the cross-rank mismatch report.
 *
 * Detection is local and immediate (a header that differs from my own
 * contract). The report is global: after the group is aborted every rank
 * publishes its recent call history (fingerprints + call sites) under
 * "contract/<rank>" in the group's store namespace, reads everyone's, and
 * builds the same majority-based message, e.g.
 *   all_reduce #7 (train.c:88): count differs: ranks 0-2 have 1024, rank 3 has 512
 * or, when one rank ran ahead / fell behind, names the first seq where the
 * histories diverge and the call sites on each side.
 */
#ifndef COH_CONTRACT_H
#define COH_CONTRACT_H

#include "cohort.h"
#include "group/group.h"
#include "transport/transport.h"

/* Contract fields, in the order they are reported. */
enum coh_field {
    COH_FIELD_NONE = 0,
    COH_FIELD_GROUP,
    COH_FIELD_GENERATION,
    COH_FIELD_SEQ,
    COH_FIELD_OP,      /* collective kind */
    COH_FIELD_DTYPE,
    COH_FIELD_COUNT,
    COH_FIELD_REDOP,
    COH_FIELD_ROOT,    /* root or peer */
    COH_FIELD_TAG,
    COH_FIELD_STEP,    /* same call, different algorithm step: internal bug */
};
const char *coh_field_name(int f);

/* Compares a received header with the expected one (kind, group, gen, seq,
 * coll, dtype, count, redop, root, tag, step, len). Returns COH_FIELD_NONE
 * when they agree, else the first differing field. Inline: it runs on every
 * message. */
static inline int coh_hdr_match(const coh_hdr *exp, const coh_hdr *got)
{
    if (got->group != exp->group)
        return COH_FIELD_GROUP;
    if (got->gen != exp->gen)
        return COH_FIELD_GENERATION;
    if (got->seq != exp->seq)
        return COH_FIELD_SEQ;
    if (got->coll != exp->coll)
        return COH_FIELD_OP;
    if (got->dtype != exp->dtype)
        return COH_FIELD_DTYPE;
    if (got->count != exp->count)
        return COH_FIELD_COUNT;
    if (got->redop != exp->redop)
        return COH_FIELD_REDOP;
    if (got->root != exp->root)
        return COH_FIELD_ROOT;
    if (got->tag != exp->tag)
        return COH_FIELD_TAG;
    if (got->step != exp->step || got->len != exp->len)
        return COH_FIELD_STEP;
    return COH_FIELD_NONE;
}

/* Called by a transport that received `got` from `peer` while expecting
 * `exp` for `call`: fails the group with COHORT_ERR_CONTRACT and a first,
 * local message (the global report replaces it when it is ready). Returns
 * COHORT_ERR_CONTRACT. */
cohort_status coh_contract_mismatch(cohort_group *g, const coh_call *call, int peer,
                                    const coh_hdr *exp, const coh_hdr *got);

/* Called once the group is poisoned with COHORT_ERR_CONTRACT (on every rank,
 * by whoever returns the error to the user): publishes this rank's history,
 * gathers the others' (bounded wait, ~500 ms), and rewrites g->err with the
 * majority report. Idempotent. */
void coh_contract_report(cohort_group *g);

/* Builds the majority report from per-rank histories (pure; unit-tested).
 * hist[r] is rank r's last calls (oldest first) or NULL if rank r did not
 * answer. */
typedef struct coh_hist {
    int n;                 /* entries */
    cohort_fingerprint *fp;
} coh_hist;
void coh_contract_analyze(const coh_hist *hist, int nranks, char *out, size_t outlen);

#endif
