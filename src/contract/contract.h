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
#include "core/group.h"
#include "core/names.h"
#include "contract/hdr.h"


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

/* g->contract_state bits. */
#define COH_CSTATE_BUSY 1     /* a thread is building the global report */
#define COH_CSTATE_DONE 2     /* the global report replaced g->err */
#define COH_CSTATE_DETECTED 4 /* this rank detected the mismatch itself (first failure) */

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

/* Whether collective message h belongs to a call this rank has finished
 * (its flight recorder holds call number h->seq) and differs from it in a
 * field other than seq and step: 1 with that call and the header it
 * expected (*exp), so the transport names the field at that call. */
int coh_contract_finished(cohort_group *g, const coh_hdr *h, coh_call *call, coh_hdr *exp);
/* A message h (from h->src) that no call of this rank took: still queued
 * when its sender said goodbye at cohort_finalize (unconsumed.c). Judged
 * against this rank's own call of h->seq while the flight recorder still
 * has it: returns 1 when that call's header (*exp, built from *call)
 * differs from h - report it as a mismatch (coh_contract_mismatch) - else
 * 0 with the report in msg (COHORT_ERR_CONTRACT). Changes no state. */
int coh_contract_unconsumed(cohort_group *g, const coh_hdr *h, coh_call *call, coh_hdr *exp,
                            char *msg, size_t len);

/* COHORT_DEBUG=sync (dsync.c): before collective c, publishes this rank's
 * fingerprint in the group's store and compares every rank's (each waited
 * for within the call's timeout). A divergence fails the group with
 * COHORT_ERR_CONTRACT naming the ranks' values; a rank that never arrives,
 * with COHORT_ERR_TIMEOUT. Send/recv and groups without a store pass. */
cohort_status coh_contract_debug_sync(cohort_group *g, const coh_call *c);

/* Builds the majority report from per-rank histories (pure; unit-tested).
 * hist[r] is rank r's last calls (oldest first; the order is not relied
 * on) or, with fp == NULL, a rank that did not answer (fp != NULL with
 * n == 0: answered, no calls yet). Histories are aligned by seq, so pass
 * collectives only (send/recv seqs are per pair). Returns 1 when the
 * histories diverge (out: the report), 0 when they agree (out: a short
 * summary naming missing ranks and ranks that did not reach the others'
 * last call). Message formats: docs/contract.md. */
typedef struct coh_hist {
    int n;                 /* entries */
    cohort_fingerprint *fp;
} coh_hist;
int coh_contract_analyze(const coh_hist *hist, int nranks, char *out, size_t outlen);

/* The same analysis over calls that are not cohort's own (src/check: MPI,
 * torch): coll, dtype, redop and tag hold indices into the caller's name
 * tables instead of cohort enums, printed through `names`; field[] relabels
 * fields (NULL: the default label). Send/recv wording is never used. */
typedef struct coh_contract_names {
    const char *(*op)(void *arg, int coll);
    const char *(*dtype)(void *arg, int dtype);
    const char *(*redop)(void *arg, int redop);
    const char *(*tag)(void *arg, int tag);
    const char *field[COH_FIELD_STEP + 1];
    void *arg;
} coh_contract_names;
int coh_contract_analyze_names(const coh_hist *hist, int nranks, const coh_contract_names *names,
                               char *out, size_t outlen);

/* The first divergence, as data (for cohort-trace's timeline). */
enum coh_div_kind {
    COH_DIV_NONE = 0,
    COH_DIV_FIELD,    /* ranks made different calls at `seq`; `field` is the first difference */
    COH_DIV_EXTRA,    /* the odd ranks made an extra call at `seq` */
    COH_DIV_SKIPPED,  /* the odd ranks skipped the majority's call at `seq` */
    COH_DIV_SHIFTED,  /* one call out of step, direction unprovable (repetitive calls) */
};
typedef struct coh_divergence {
    int kind;         /* coh_div_kind */
    uint64_t seq;
    int field;        /* coh_field */
    int has_majority; /* 0: a tie, nobody is blamed */
    int ref_rank;     /* a rank of the majority (the lowest rank on a tie) */
} coh_divergence;
/* Fills d and, if odd != NULL (nranks bytes), odd[r] = 1 for the ranks the
 * report blames (every rank outside the majority; on a tie every rank that
 * differs from ref_rank). Returns 1 if the histories diverge. Pure. */
int coh_contract_diverge(const coh_hist *hist, int nranks, coh_divergence *d,
                         unsigned char *odd);

/* One field's value as reports print it: "1024", "float32", "sum",
 * "none" (root -1 / no reduce op), "#7" (seq). */
void coh_contract_fmt_value(int field, const cohort_fingerprint *fp, char *out, size_t len);
/* A received header as a fingerprint (no call site). */
void coh_hdr_to_fp(const coh_hdr *h, cohort_fingerprint *fp);

#endif
