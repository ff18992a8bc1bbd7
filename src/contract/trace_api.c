/* trace_api.c - cohort_trace.h: the dump parser (trace/jsonl.c), the
 * history analysis (analyze.c) and the names (core/names.c) behind the
 * public API, with its argument checks. */
#include <string.h>

#include "cohort_trace.h"
#include "contract/contract.h"
#include "core/group.h"
#include "core/names.h"
#include "trace/jsonl.h"
#include "util/util.h"

/* The public enums are the internal ones, value for value. */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(COHORT_CALL_NONE, COH_COLL_NONE) &&
                   SAME(COHORT_CALL_ALL_REDUCE, COH_COLL_ALL_REDUCE) &&
                   SAME(COHORT_CALL_BROADCAST, COH_COLL_BROADCAST) &&
                   SAME(COHORT_CALL_REDUCE, COH_COLL_REDUCE) &&
                   SAME(COHORT_CALL_ALL_GATHER, COH_COLL_ALL_GATHER) &&
                   SAME(COHORT_CALL_GATHER, COH_COLL_GATHER) &&
                   SAME(COHORT_CALL_SCATTER, COH_COLL_SCATTER) &&
                   SAME(COHORT_CALL_REDUCE_SCATTER, COH_COLL_REDUCE_SCATTER) &&
                   SAME(COHORT_CALL_ALL_TO_ALL, COH_COLL_ALL_TO_ALL) &&
                   SAME(COHORT_CALL_BARRIER, COH_COLL_BARRIER) &&
                   SAME(COHORT_CALL_SEND, COH_COLL_SEND) && SAME(COHORT_CALL_RECV, COH_COLL_RECV) &&
                   SAME(COHORT_CALL_INTERNAL, COH_COLL_INTERNAL) &&
                   SAME(COHORT_CALL_FINALIZE, COH_COLL_FINALIZE) &&
                   SAME(COHORT_CALL_FINALIZE + 1, COH_COLL_KIND_COUNT),
               "cohort_call_kind follows coh_coll");
_Static_assert(SAME(COHORT_CALL_ISSUED, COH_ST_ISSUED) &&
                   SAME(COHORT_CALL_STARTED, COH_ST_STARTED) &&
                   SAME(COHORT_CALL_COMPLETED, COH_ST_COMPLETED) &&
                   SAME(COHORT_CALL_FAILED, COH_ST_FAILED),
               "cohort_call_state follows coh_call_state");
_Static_assert(SAME(COHORT_TRACE_DIV_FIELD, COH_DIV_FIELD) &&
                   SAME(COHORT_TRACE_DIV_EXTRA, COH_DIV_EXTRA) &&
                   SAME(COHORT_TRACE_DIV_SKIPPED, COH_DIV_SKIPPED) &&
                   SAME(COHORT_TRACE_DIV_SHIFTED, COH_DIV_SHIFTED),
               "divergence kinds follow coh_div_kind");

int cohort_trace_parse_line(const char *s, size_t len, cohort_trace_line *out, char *err,
                            size_t errlen)
{
    if (!s || !out) {
        if (err && errlen)
            snprintf(err, errlen, "NULL %s", s ? "output" : "line");
        if (out)
            out->kind = COHORT_TRACE_INVALID;
        return COHORT_TRACE_INVALID;
    }
    /* The union is large (a contract line's text too); parse into it once
     * and copy out what the public record holds. */
    coh_tl_line *ln = coh_malloc(sizeof *ln);
    if (!ln) {
        if (err && errlen)
            snprintf(err, errlen, "out of memory");
        out->kind = COHORT_TRACE_INVALID;
        return COHORT_TRACE_INVALID;
    }
    int k = coh_tl_parse(s, len, ln, err, errlen);
    out->kind = k == COH_TL_HEADER     ? COHORT_TRACE_HEADER
                : k == COH_TL_ENTRY    ? COHORT_TRACE_ENTRY
                : k == COH_TL_CONTRACT ? COHORT_TRACE_OTHER
                                       : COHORT_TRACE_INVALID;
    if (k == COH_TL_HEADER)
        out->hdr = ln->u.hdr;
    else if (k == COH_TL_ENTRY)
        out->ent = ln->u.ent;
    coh_free(ln);
    return out->kind;
}

void cohort_trace_entry_fingerprint(const cohort_trace_entry *e, uint32_t group,
                                    uint32_t generation, cohort_fingerprint *fp)
{
    if (e && fp)
        coh_tl_entry_fp(e, group, generation, fp);
}

int cohort_trace_analyze(const cohort_trace_history *hist, int nranks, char *report,
                         size_t reportlen, cohort_trace_divergence *div, unsigned char *odd)
{
    if (!hist || nranks < 1)
        return -1;
    for (int r = 0; r < nranks; r++)
        if (hist[r].n < 0 || (hist[r].n > 0 && !hist[r].fp))
            return -1;
    coh_hist *h = coh_calloc((size_t)nranks, sizeof *h);
    if (!h)
        return -1;
    /* coh_hist does not write through fp; its field is not const only
     * because the library builds histories in place. */
    for (int r = 0; r < nranks; r++) {
        h[r].n = hist[r].n;
        h[r].fp = (cohort_fingerprint *)(uintptr_t)hist[r].fp;
    }
    coh_divergence d;
    memset(&d, 0, sizeof d);
    int found = coh_contract_diverge(h, nranks, &d, odd);
    if (report && reportlen)
        coh_contract_analyze(h, nranks, report, reportlen);
    coh_free(h);
    if (div) {
        memset(div, 0, sizeof *div);
        div->kind = found ? d.kind : COHORT_TRACE_DIV_NONE;
        div->seq = d.seq;
        div->field = found && d.kind == COH_DIV_FIELD ? coh_field_name(d.field) : "";
        div->has_majority = d.has_majority;
        div->ref_rank = d.ref_rank;
    }
    return found ? 1 : 0;
}

const char *cohort_call_kind_name(int op) { return coh_coll_name(op); }

const char *cohort_call_state_name(int state) { return coh_state_name(state); }
const char *cohort_trace_dtype_name(int dtype) { return coh_dtype_str(dtype); }
const char *cohort_trace_redop_name(int redop) { return coh_redop_str(redop); }
const char *cohort_trace_site(const char *file) { return coh_site_base(file); }

void cohort_trace_format_ranks(char *out, size_t outlen, const int *ranks, int n)
{
    if (!out || !outlen)
        return;
    if (!ranks || n < 0)
        n = 0;
    coh_fmt_ranks(out, outlen, ranks, n);
}
