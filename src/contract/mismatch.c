/*
 * mismatch.c - the local, immediate mismatch message: a transport received
 * a header (message or shm slot) whose contract differs from this rank's
 * own, before touching its payload. The message names both sides with what
 * this rank knows right now; coh_contract_report later replaces it with the
 * global, majority-based report every rank agrees on.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "contract/contract.h"
#include "trace/trace.h"

void coh_hdr_to_fp(const coh_hdr *h, cohort_fingerprint *fp)
{
    memset(fp, 0, sizeof *fp);
    fp->seq = h->seq;
    fp->coll = h->coll;
    fp->dtype = h->dtype;
    fp->redop = h->redop;
    fp->root = h->root;
    fp->tag = h->tag;
    fp->count = h->count;
    fp->group = h->group;
    fp->generation = h->gen;
    fp->line = (int)h->line;
}

/* The sender's call site: the wire carries its line and a hash of
 * "basename:line", so the file can be named when this rank knows it - its
 * own call's file, or one of its recent calls' files in the recorder. */
static void peer_site(cohort_group *g, const coh_call *call, const coh_hdr *got, char *out,
                      size_t len)
{
    if (!got->site && !got->line) {
        snprintf(out, len, "unknown call site");
        return;
    }
    int line = (int)got->line;
    if (call && call->file && coh_site_hash(call->file, line) == got->site) {
        snprintf(out, len, "%s:%d", coh_site_base(call->file), line);
        return;
    }
    if (g && g->trace) {
        coh_trace_entry e[64];
        int n = coh_trace_last(g->trace, e, (int)COH_ARRAY_LEN(e));
        for (int i = n - 1; i >= 0; i--)
            if (e[i].call.file && coh_site_hash(e[i].call.file, line) == got->site) {
                snprintf(out, len, "%s:%d", coh_site_base(e[i].call.file), line);
                return;
            }
    }
    snprintf(out, len, "line %d of a file this rank has not called from", line);
}

cohort_status coh_contract_mismatch(cohort_group *g, const coh_call *call, int peer,
                                    const coh_hdr *exp, const coh_hdr *got)
{
    if (!g || !exp || !got)
        return coh_err_set(NULL, COHORT_ERR_CONTRACT,
                           "contract mismatch reported without a group or headers");
    char msg[COH_ERRLEN], mine[300], theirs[300], a[96], b[96];
    int field = coh_hdr_match(exp, got);
    cohort_fingerprint ef, gf;
    coh_hdr_to_fp(exp, &ef);
    coh_hdr_to_fp(got, &gf);
    /* This rank's side: the expected header is what it compared. */
    if (call && call->file)
        snprintf(mine, sizeof mine, "%s:%d", coh_site_base(call->file), call->line);
    else
        snprintf(mine, sizeof mine, "unknown call site");
    peer_site(g, call, got, theirs, sizeof theirs);
    const char *op = coh_coll_name(exp->coll);
    const int p2p = exp->coll == COH_COLL_SEND || exp->coll == COH_COLL_RECV;

    switch (field) {
    case COH_FIELD_SEQ:
        /* The lesson's Q1: the ranks are not in the same call at all. */
        snprintf(msg, sizeof msg,
                 "%s #%" PRIu64 " (%s): sequence number differs: rank %d is at #%" PRIu64
                 " (%s, %s) while this rank (%d) waits in #%" PRIu64
                 "; one of them skipped or added a call before this one",
                 op, exp->seq, mine, peer, got->seq, coh_coll_name(got->coll), theirs, g->rank,
                 exp->seq);
        break;
    case COH_FIELD_STEP:
        snprintf(msg, sizeof msg,
                 "%s #%" PRIu64 " (%s): algorithm step differs: this rank (%d) expected step %" PRIu32
                 " with %" PRIu64 " bytes, rank %d sent step %" PRIu32 " with %" PRIu64
                 " bytes - the ranks chose different algorithms for the same call, though the "
                 "rendezvous found the settings that choose them equal: a cohort bug, please "
                 "report it",
                 op, exp->seq, mine, g->rank, exp->step, exp->len, peer, got->step, got->len);
        break;
    case COH_FIELD_NONE:
        snprintf(msg, sizeof msg,
                 "%s #%" PRIu64 " (%s): contract mismatch reported for rank %d although the "
                 "headers agree - a cohort bug: please report it",
                 op, exp->seq, mine, peer);
        break;
    default: {
        coh_contract_fmt_value(field, &ef, a, sizeof a);
        coh_contract_fmt_value(field, &gf, b, sizeof b);
        const char *hint = "";
        if (field == COH_FIELD_GENERATION)
            hint = " - a process from another generation of the job (a restarted rank talking "
                   "to a stale one?)";
        else if (field == COH_FIELD_GROUP)
            hint = " - the message belongs to another group";
        snprintf(msg, sizeof msg,
                 "%s #%" PRIu64 " (%s): %s differs: this rank (%d) has %s, rank %d sent %s (%s)%s",
                 op, exp->seq, mine,
                 field == COH_FIELD_ROOT && p2p ? "peer" : coh_field_name(field), g->rank, a,
                 peer, b, theirs, hint);
        break;
    }
    }

    /* The collective call that failed: a rank that reaches it late is
     * still a party to it (coh_group_entry). Every field after seq differs
     * only between calls of the same number. When the seqs differ the
     * ranks are out of step from the lower number on: the rank at the
     * lower number is inside that call, the one at the higher number has
     * passed it (its own call of that number did not talk to the other
     * side: the calls differ) and gets the failure in the later call it is
     * in, never entering the lower number again - so the lower number is
     * the failed call on every rank. A group or generation mismatch is
     * another group's message (its number means nothing here), and
     * send/recv numbers count per pair: none is recorded, a late rank gets
     * COHORT_ERR_ABORTED with the report. */
    const int coll = !p2p && exp->kind == COH_MSG_COLL && got->kind == COH_MSG_COLL &&
                     field != COH_FIELD_GROUP && field != COH_FIELD_GENERATION;
    uint64_t seq = !coll                     ? 0
                   : field != COH_FIELD_SEQ ? exp->seq
                                            : COH_MIN(exp->seq, got->seq);
    coh_group_fail_at(g, COHORT_ERR_CONTRACT, seq, "%s", msg);
    /* The same, as data (cohort_error_info_get): this rank's view until the
     * global report replaces it. */
    coh_err_detail *d = coh_err_detail_new(g->size);
    if (d) {
        d->status = COHORT_ERR_CONTRACT;
        snprintf(d->kind, sizeof d->kind, "local");
        snprintf(d->call, sizeof d->call, "%s", op);
        d->seq = exp->seq;
        snprintf(d->field, sizeof d->field, "%s",
                 field == COH_FIELD_NONE                ? ""
                 : field == COH_FIELD_ROOT && p2p       ? "peer"
                                                        : coh_field_name(field));
        if (field != COH_FIELD_NONE && field != COH_FIELD_STEP && peer >= 0 && peer < g->size) {
            coh_contract_fmt_value(field, &ef, d->values[g->rank], sizeof d->values[0]);
            coh_contract_fmt_value(field, &gf, d->values[peer], sizeof d->values[0]);
        }
        if (call && call->file) {
            snprintf(d->files[g->rank], sizeof d->files[0], "%s", call->file);
            d->lines[g->rank] = call->line;
        }
        coh_err_detail_attach(g, d, 0);
    }
    /* Was this the group's first failure? Then this rank saw the mismatch
     * itself, and its message is evidence for the global report. */
    pthread_mutex_lock(&g->err_mu);
    int first = g->err.status == COHORT_ERR_CONTRACT && !strcmp(g->err.msg, msg);
    pthread_mutex_unlock(&g->err_mu);
    if (first)
        atomic_fetch_or(&g->contract_state, COH_CSTATE_DETECTED);
    return COHORT_ERR_CONTRACT;
}
