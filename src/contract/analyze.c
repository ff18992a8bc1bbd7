/*
 * analyze.c - the cross-rank contract analysis: align every rank's recent
 * calls by seq, find the first seq where they differ, and say who is odd.
 *
 * Pure functions (no group, no I/O) so every report format is unit-tested
 * and cohort-trace reuses them on dumps. Rules:
 *  - Ranks are grouped by their whole contract at the first differing seq.
 *    The largest group is the majority; with two or more largest groups
 *    there is no majority and nobody is blamed (a tie is reported as one).
 *  - With one odd group, its later calls are compared with the majority's
 *    shifted by one seq in both directions: an exact match (fingerprint and
 *    call site, at least one call compared) means the odd ranks made an
 *    extra call or skipped one, which is what the lesson's Q1 false
 *    attribution hides - the error shows up in a later call while the cause
 *    is an earlier one.
 *  - Otherwise the first differing field (group, generation, op, dtype,
 *    count, reduce op, root/peer, tag) is the headline and every value is
 *    listed with its ranks.
 * Message formats are a contract with users and tests (docs/contract.md).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"

/* ---- a truncation-safe string builder ---- */

typedef struct sb {
    char *b;
    size_t cap, len; /* len may exceed cap: the text was cut */
} sb;

static void sb_printf(sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(sb *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n;
    if (s->len < s->cap)
        n = vsnprintf(s->b + s->len, s->cap - s->len, fmt, ap);
    else
        n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        s->len += (size_t)n;
}

/* "rank 3" / "ranks 0-2,5" (rank lists are sorted ascending). */
static void sb_ranks(sb *s, const int *r, int n)
{
    char tmp[256];
    coh_fmt_ranks(tmp, sizeof tmp, r, n);
    /* coh_fmt_ranks stops at the buffer's end: mark the cut. */
    size_t l = strlen(tmp);
    if (l >= sizeof tmp - 1)
        snprintf(tmp + sizeof tmp - 5, 5, "...");
    sb_printf(s, "%s %s", n == 1 ? "rank" : "ranks", tmp);
}

/* ---- field access ---- */

/* Names of values that are not cohort's own (src/check's external calls):
 * set for the duration of coh_contract_analyze_names on this thread. */
static _Thread_local const coh_contract_names *tl_names;

static int is_p2p(int coll)
{
    return !tl_names && (coll == COH_COLL_SEND || coll == COH_COLL_RECV);
}

static const char *op_str(int coll)
{
    if (tl_names && tl_names->op)
        return tl_names->op(tl_names->arg, coll);
    return coh_coll_name(coll);
}

/* Compares contracts up to (not including) the call site. */
static int fp_cmp(const cohort_fingerprint *a, const cohort_fingerprint *b, int with_seq)
{
#define CMP(x)                                                                                     \
    if (a->x != b->x)                                                                              \
        return a->x < b->x ? -1 : 1;
    CMP(group)
    CMP(generation)
    if (with_seq) {
        CMP(seq)
    }
    CMP(coll)
    CMP(dtype)
    CMP(count)
    CMP(redop)
    CMP(root)
    CMP(tag)
#undef CMP
    return 0;
}

static int field_differs(int f, const cohort_fingerprint *a, const cohort_fingerprint *b)
{
    switch (f) {
    case COH_FIELD_GROUP: return a->group != b->group;
    case COH_FIELD_GENERATION: return a->generation != b->generation;
    case COH_FIELD_SEQ: return a->seq != b->seq;
    case COH_FIELD_OP: return a->coll != b->coll;
    case COH_FIELD_DTYPE: return a->dtype != b->dtype;
    case COH_FIELD_COUNT: return a->count != b->count;
    case COH_FIELD_REDOP: return a->redop != b->redop;
    case COH_FIELD_ROOT: return a->root != b->root;
    case COH_FIELD_TAG: return a->tag != b->tag;
    default: return 0;
    }
}

void coh_contract_fmt_value(int f, const cohort_fingerprint *fp, char *out, size_t len)
{
    switch (f) {
    case COH_FIELD_GROUP: snprintf(out, len, "%" PRIu32, fp->group); break;
    case COH_FIELD_GENERATION: snprintf(out, len, "%" PRIu32, fp->generation); break;
    case COH_FIELD_SEQ: snprintf(out, len, "#%" PRIu64, fp->seq); break;
    case COH_FIELD_OP: snprintf(out, len, "%s", op_str(fp->coll)); break;
    case COH_FIELD_DTYPE:
        if (tl_names && tl_names->dtype)
            snprintf(out, len, "%s", tl_names->dtype(tl_names->arg, fp->dtype));
        else if (fp->dtype >= 0 && fp->dtype < COHORT_DTYPE_COUNT)
            snprintf(out, len, "%s", coh_dtype_str(fp->dtype));
        else
            snprintf(out, len, "invalid dtype %d", fp->dtype);
        break;
    case COH_FIELD_COUNT: snprintf(out, len, "%" PRIu64, fp->count); break;
    case COH_FIELD_REDOP:
        if (tl_names && tl_names->redop)
            snprintf(out, len, "%s", tl_names->redop(tl_names->arg, fp->redop));
        else if (fp->redop >= -1 && fp->redop < COHORT_OP_COUNT)
            snprintf(out, len, "%s", coh_redop_str(fp->redop));
        else
            snprintf(out, len, "invalid reduce op %d", fp->redop);
        break;
    case COH_FIELD_ROOT:
        if (fp->root < 0)
            snprintf(out, len, "none");
        else
            snprintf(out, len, "%d", fp->root);
        break;
    case COH_FIELD_TAG:
        if (tl_names && tl_names->tag)
            snprintf(out, len, "%s", tl_names->tag(tl_names->arg, fp->tag));
        else
            snprintf(out, len, "%d", fp->tag);
        break;
    default: snprintf(out, len, "?"); break;
    }
}

/* The field's name in a sentence; "root" is "peer" for send/recv. */
static const char *field_label(int f, const cohort_fingerprint *ref)
{
    if (f == COH_FIELD_ROOT && is_p2p(ref->coll))
        return "peer";
    if (tl_names && f >= 0 && f < (int)COH_ARRAY_LEN(tl_names->field) && tl_names->field[f])
        return tl_names->field[f];
    return coh_field_name(f);
}

static int site_known(const cohort_fingerprint *fp) { return fp->file && fp->file[0]; }

static void sb_site(sb *s, const cohort_fingerprint *fp)
{
    if (site_known(fp))
        sb_printf(s, "%s:%d", coh_site_base(fp->file), fp->line);
    else
        sb_printf(s, "unknown call site");
}

static int same_site(const cohort_fingerprint *a, const cohort_fingerprint *b)
{
    return coh_site_equal(a->file, a->line, b->file, b->line);
}

/* ---- one call's comparison (the core of both entry points) ---- */

typedef struct member {
    const cohort_fingerprint *fp;
    int rank;
    int cls; /* contract class index */
} member;

static _Thread_local int tl_with_seq; /* qsort has no context argument */

static int member_cmp(const void *x, const void *y)
{
    const member *a = x, *b = y;
    int c = fp_cmp(a->fp, b->fp, tl_with_seq);
    if (c)
        return c;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

static int rank_cmp(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return a < b ? -1 : a > b;
}

/* The ranks present at one call, partitioned by contract. */
typedef struct call_view {
    member *m;       /* [n], sorted by class then rank */
    int n;
    int ncls;
    int *cls_start;  /* [ncls + 1] */
    int ref_cls;     /* majority class, or the lowest rank's class on a tie */
    int has_majority;
    int first_field; /* first field where some class differs from ref */
    unsigned also;   /* bit f: field f differs somewhere too (besides first_field) */
} call_view;

static void view_free(call_view *v)
{
    coh_free(v->m);
    coh_free(v->cls_start);
    memset(v, 0, sizeof *v);
}

/* Builds the view; m is owned by v afterwards. Returns -1 on OOM. */
static int view_build(call_view *v, member *m, int n, int with_seq)
{
    memset(v, 0, sizeof *v);
    v->m = m;
    v->n = n;
    tl_with_seq = with_seq;
    qsort(m, (size_t)n, sizeof *m, member_cmp);
    v->cls_start = coh_malloc(sizeof(int) * (size_t)(n + 1));
    if (!v->cls_start)
        return -1;
    for (int i = 0; i < n; i++) {
        if (i == 0 || fp_cmp(m[i - 1].fp, m[i].fp, with_seq))
            v->cls_start[v->ncls++] = i;
        m[i].cls = v->ncls - 1;
    }
    v->cls_start[v->ncls] = n;
    /* Majority: the unique largest class. */
    int best = -1, best_n = 0, tie = 0, lowest_rank = -1, lowest_cls = 0;
    for (int c = 0; c < v->ncls; c++) {
        int sz = v->cls_start[c + 1] - v->cls_start[c];
        if (sz > best_n) {
            best = c, best_n = sz, tie = 0;
        } else if (sz == best_n) {
            tie = 1;
        }
        int r0 = m[v->cls_start[c]].rank; /* lowest rank of the class */
        if (lowest_rank < 0 || r0 < lowest_rank)
            lowest_rank = r0, lowest_cls = c;
    }
    v->has_majority = v->ncls > 1 && !tie;
    v->ref_cls = v->ncls == 1 ? 0 : (v->has_majority ? best : lowest_cls);
    v->first_field = COH_FIELD_NONE;
    v->also = 0;
    const cohort_fingerprint *ref = m[v->cls_start[v->ref_cls]].fp;
    for (int f = COH_FIELD_GROUP; f <= COH_FIELD_TAG; f++) {
        if (f == COH_FIELD_SEQ && !with_seq)
            continue;
        for (int c = 0; c < v->ncls; c++)
            if (field_differs(f, ref, m[v->cls_start[c]].fp)) {
                if (v->first_field == COH_FIELD_NONE)
                    v->first_field = f;
                else if (f != v->first_field)
                    v->also |= 1u << f;
                break;
            }
    }
    return 0;
}

static const cohort_fingerprint *cls_fp(const call_view *v, int c)
{
    return v->m[v->cls_start[c]].fp;
}

/* Sorted ranks of class c into out; returns the count. */
static int cls_ranks(const call_view *v, int c, int *out)
{
    int k = 0;
    for (int i = v->cls_start[c]; i < v->cls_start[c + 1]; i++)
        out[k++] = v->m[i].rank;
    return k; /* members of a class are sorted by rank already */
}

/* Appends " (site)" for a set of members if they share one call site, or
 * " (different call sites)". idx: member indices. */
static void sb_common_site(sb *s, const call_view *v, const int *idx, int n, const char *open,
                           const char *close)
{
    const cohort_fingerprint *a = v->m[idx[0]].fp;
    int known = 0;
    for (int i = 0; i < n; i++)
        known |= site_known(v->m[idx[i]].fp);
    if (!known)
        return; /* e.g. cohort_validate_fingerprints without call sites */
    for (int i = 1; i < n; i++)
        if (!same_site(a, v->m[idx[i]].fp)) {
            sb_printf(s, "%sdifferent call sites%s", open, close);
            return;
        }
    sb_printf(s, "%s", open);
    sb_site(s, a);
    sb_printf(s, "%s", close);
}

static _Thread_local const call_view *tl_view; /* for the comparators below */
static _Thread_local int tl_field;

/* Orders one field's values (any total order will do: it only groups). */
static int field_cmp(int f, const cohort_fingerprint *a, const cohort_fingerprint *b)
{
#define CMPF(x) return a->x < b->x ? -1 : a->x > b->x
    switch (f) {
    case COH_FIELD_GROUP: CMPF(group);
    case COH_FIELD_GENERATION: CMPF(generation);
    case COH_FIELD_SEQ: CMPF(seq);
    case COH_FIELD_OP: CMPF(coll);
    case COH_FIELD_DTYPE: CMPF(dtype);
    case COH_FIELD_COUNT: CMPF(count);
    case COH_FIELD_REDOP: CMPF(redop);
    case COH_FIELD_ROOT: CMPF(root);
    case COH_FIELD_TAG: CMPF(tag);
    default: return 0;
    }
#undef CMPF
}

/* Member indices by (tl_field's value, rank). */
static int member_field_cmp(const void *x, const void *y)
{
    const member *a = &tl_view->m[*(const int *)x], *b = &tl_view->m[*(const int *)y];
    int c = field_cmp(tl_field, a->fp, b->fp);
    if (c)
        return c;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

/* Classes by their lowest rank (a class's members are in rank order). */
static int cls_rank_cmp(const void *x, const void *y)
{
    int a = tl_view->m[tl_view->cls_start[*(const int *)x]].rank;
    int b = tl_view->m[tl_view->cls_start[*(const int *)y]].rank;
    return a < b ? -1 : a > b;
}

/* A value group: members that share the headline field's value. */
typedef struct vgroup {
    int *idx;   /* member indices */
    int n;
    int lowest; /* lowest rank */
    int has_ref;
} vgroup;

static int vgroup_cmp(const void *x, const void *y)
{
    const vgroup *a = x, *b = y;
    if (a->has_ref != b->has_ref)
        return b->has_ref - a->has_ref;
    if (a->n != b->n)
        return b->n - a->n;
    return a->lowest - b->lowest;
}

#define MAX_LISTED 6 /* value groups / odd groups spelled out before "and N more" */

/* The field report for one call: headline field, every value with its
 * ranks, and where to look. Returns -1 on OOM. */
static int report_field(sb *s, const call_view *v)
{
    const cohort_fingerprint *ref = cls_fp(v, v->ref_cls);
    int f = v->first_field;
    int n = v->n;
    int *ranks = coh_malloc(sizeof(int) * (size_t)n * 2);
    vgroup *g = coh_calloc((size_t)n, sizeof *g);
    int *idx = coh_malloc(sizeof(int) * (size_t)n);
    if (!ranks || !g || !idx) {
        coh_free(ranks), coh_free(g), coh_free(idx);
        return -1;
    }

    /* Prefix: the majority's call; on a tie only what all ranks share. */
    int same_op = 1;
    for (int c = 0; c < v->ncls; c++)
        if (cls_fp(v, c)->coll != ref->coll)
            same_op = 0;
    if (v->has_majority || same_op)
        sb_printf(s, "%s #%" PRIu64, op_str(ref->coll), ref->seq);
    else
        sb_printf(s, "call #%" PRIu64, ref->seq);
    if (v->has_majority && site_known(ref)) {
        sb_printf(s, " (");
        sb_site(s, ref);
        sb_printf(s, ")");
    }
    sb_printf(s, ": %s differs: ", field_label(f, ref));

    /* Group members by the headline field's value: sort member indices by
     * (value, rank), then runs of equal values are the groups. */
    for (int i = 0; i < n; i++)
        idx[i] = i;
    tl_view = v;
    tl_field = f;
    qsort(idx, (size_t)n, sizeof *idx, member_field_cmp);
    int ng = 0;
    for (int i = 0; i < n; i++) {
        if (i == 0 || field_cmp(f, v->m[idx[i - 1]].fp, v->m[idx[i]].fp)) {
            g[ng].idx = idx + i;
            g[ng].lowest = v->m[idx[i]].rank; /* sorted by rank within a value */
            ng++;
        }
        vgroup *cur = &g[ng - 1];
        cur->n++;
        if (v->m[idx[i]].cls == v->ref_cls)
            cur->has_ref = 1;
    }
    /* The majority's value first; on a tie no side goes first: by size,
     * then rank order. */
    if (!v->has_majority)
        for (int k = 0; k < ng; k++)
            g[k].has_ref = 0;
    qsort(g, (size_t)ng, sizeof *g, vgroup_cmp);

    for (int k = 0; k < ng && k < MAX_LISTED; k++) {
        int nr = 0;
        for (int i = 0; i < g[k].n; i++)
            ranks[nr++] = v->m[g[k].idx[i]].rank;
        qsort(ranks, (size_t)nr, sizeof *ranks, rank_cmp);
        char val[96];
        coh_contract_fmt_value(f, v->m[g[k].idx[0]].fp, val, sizeof val);
        if (k)
            sb_printf(s, ", ");
        sb_ranks(s, ranks, nr);
        sb_printf(s, " %s %s", nr == 1 ? "has" : "have", val);
        if (!v->has_majority)
            sb_common_site(s, v, g[k].idx, g[k].n, " (", ")");
    }
    if (ng > MAX_LISTED) {
        int rest = 0;
        for (int k = MAX_LISTED; k < ng; k++)
            rest += g[k].n;
        sb_printf(s, ", and %d more ranks with %d other values", rest, ng - MAX_LISTED);
    }
    /* Another op's dtype/count/reduce op are not comparable: naming them
     * would be noise (a barrier has no count). */
    if (v->also && f != COH_FIELD_OP) {
        sb_printf(s, " (also differs:");
        int first = 1;
        for (int ff = COH_FIELD_GROUP; ff <= COH_FIELD_TAG; ff++)
            if (v->also & (1u << ff)) {
                sb_printf(s, "%s %s", first ? "" : ",", field_label(ff, ref));
                first = 0;
            }
        sb_printf(s, ")");
    }

    if (!v->has_majority) {
        sb_printf(s, " - no majority, so no rank is blamed: compare the call sites");
        coh_free(ranks), coh_free(g), coh_free(idx);
        return 0;
    }

    /* Odd ranks that are all in cohort_finalize left the group: say so
     * instead of pointing at a call site inside cohort. */
    {
        int nfin = 0, nodd = 0;
        for (int i = 0; i < n; i++)
            if (v->m[i].cls != v->ref_cls) {
                nodd++;
                if (v->m[i].fp->coll == COH_COLL_FINALIZE)
                    ranks[nfin++] = v->m[i].rank;
            }
        if (nodd && nfin == nodd) {
            qsort(ranks, (size_t)nfin, sizeof *ranks, rank_cmp);
            sb_printf(s, " - ");
            sb_ranks(s, ranks, nfin);
            sb_printf(s, " left the group (called cohort_finalize) instead of making this call; "
                         "finalize is collective: every rank makes the same calls before it");
            coh_free(ranks), coh_free(g), coh_free(idx);
            return 0;
        }
    }

    /* Where to look: the odd ranks, grouped by class and call site. */
    int nodd_groups = 0, any_other_site = 0;
    int *tmp = ranks + n;
    sb_printf(s, " - look at ");
    /* Count (class, site) subgroups of the odd ranks first. */
    /* Odd classes in rank order (classes themselves are in contract order):
     * reuse the value-group index buffer, no longer needed. */
    int *order = idx;
    for (int c = 0; c < v->ncls; c++)
        order[c] = c;
    tl_view = v;
    qsort(order, (size_t)v->ncls, sizeof *order, cls_rank_cmp);
    for (int pass = 0; pass < 2; pass++) {
        int listed = 0, more = 0;
        for (int oc = 0; oc < v->ncls; oc++) {
            int c = order[oc];
            if (c == v->ref_cls)
                continue;
            /* members of class c, split by call site */
            int start = v->cls_start[c], end = v->cls_start[c + 1];
            unsigned char *done = (unsigned char *)ranks; /* first half reused as flags */
            memset(done, 0, (size_t)(end - start));
            for (int i = start; i < end; i++) {
                if (done[i - start])
                    continue;
                int nr = 0;
                for (int j = i; j < end; j++)
                    if (!done[j - start] && same_site(v->m[i].fp, v->m[j].fp)) {
                        done[j - start] = 1;
                        tmp[nr++] = v->m[j].rank;
                    }
                if (site_known(v->m[i].fp) && site_known(ref) && !same_site(v->m[i].fp, ref))
                    any_other_site = 1;
                if (pass == 0) {
                    nodd_groups++;
                    continue;
                }
                if (listed >= MAX_LISTED) {
                    more += nr;
                    continue;
                }
                if (nodd_groups == 1) {
                    if (nr == 1)
                        sb_printf(s, "rank %d's call", tmp[0]);
                    else {
                        sb_printf(s, "the calls of ");
                        sb_ranks(s, tmp, nr);
                    }
                    if (site_known(v->m[i].fp)) {
                        sb_printf(s, " at ");
                        sb_site(s, v->m[i].fp);
                    }
                } else {
                    sb_printf(s, "%s", listed ? ", " : "the calls of ");
                    sb_ranks(s, tmp, nr);
                    sb_printf(s, " (");
                    sb_site(s, v->m[i].fp);
                    sb_printf(s, ")");
                }
                listed++;
            }
        }
        if (pass == 1 && more)
            sb_printf(s, ", and %d more ranks", more);
    }
    if (any_other_site)
        /* The odd ranks reached this call from another line: the differing
         * field is a symptom, the cause is the control flow that led there,
         * maybe a call skipped or added earlier (lesson Q1). */
        sb_printf(s, " (a different call site: an extra or a skipped call? check the control "
                     "flow that led there)");
    coh_free(ranks), coh_free(g), coh_free(idx);
    return 0;
}

/* ---- histories ---- */

typedef struct rhist {
    const cohort_fingerprint **e; /* sorted by seq, one per seq */
    int n;
    int missing;
    int cur;                      /* cursor for the ascending walk */
} rhist;

typedef struct pidx {
    const cohort_fingerprint *fp;
    int pos;
} pidx;

static int pidx_cmp(const void *x, const void *y)
{
    const pidx *a = x, *b = y;
    if (a->fp->seq != b->fp->seq)
        return a->fp->seq < b->fp->seq ? -1 : 1;
    return a->pos - b->pos;
}

static void hists_free(rhist *h, int n)
{
    if (!h)
        return;
    for (int r = 0; r < n; r++)
        coh_free(h[r].e);
    coh_free(h);
}

/* Sorted, de-duplicated (last wins) per-rank views. NULL on OOM. */
static rhist *hists_build(const coh_hist *hist, int nranks)
{
    rhist *h = coh_calloc((size_t)nranks, sizeof *h);
    if (!h)
        return NULL;
    for (int r = 0; r < nranks; r++) {
        if (!hist[r].fp || hist[r].n < 0) {
            h[r].missing = 1;
            continue;
        }
        int n = hist[r].n;
        pidx *p = coh_malloc(sizeof *p * (size_t)(n ? n : 1));
        h[r].e = coh_malloc(sizeof *h[r].e * (size_t)(n ? n : 1));
        if (!p || !h[r].e) {
            coh_free(p);
            hists_free(h, nranks);
            return NULL;
        }
        for (int i = 0; i < n; i++)
            p[i] = (pidx){&hist[r].fp[i], i};
        qsort(p, (size_t)n, sizeof *p, pidx_cmp);
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (k && h[r].e[k - 1]->seq == p[i].fp->seq)
                h[r].e[k - 1] = p[i].fp; /* a later record of the same call wins */
            else
                h[r].e[k++] = p[i].fp;
        }
        h[r].n = k;
        coh_free(p);
    }
    return h;
}

static const cohort_fingerprint *hist_at(const rhist *h, uint64_t seq)
{
    int lo = 0, hi = h->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        uint64_t s = h->e[mid]->seq;
        if (s == seq)
            return h->e[mid];
        if (s < seq)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

/* Does rank o's history, shifted by `shift` seqs, equal rank m's after d?
 * shift = +1: o[d+k] == m[d+k-1] for k >= 1 (o made an extra call at d);
 * shift = -1: o[d+k] == m[d+k+1] for k >= 0 (o skipped m's call at d);
 * shift = 0:  o[d+k] == m[d+k]   for k >= 1 (no shift: only call d differs).
 * Returns 1 if every pair compared matches (contract and call site), 0 if
 * one differs, -1 if no pair could be compared. */
static int shifted_match(const rhist *o, const rhist *m, uint64_t d, int shift)
{
    int compared = 0;
    for (int i = 0; i < o->n; i++) {
        const cohort_fingerprint *a = o->e[i];
        if (a->seq < d + (shift >= 0 ? 1u : 0u))
            continue;
        uint64_t ms = a->seq - (uint64_t)(int64_t)shift;
        const cohort_fingerprint *b = hist_at(m, ms);
        if (!b)
            continue;
        if (fp_cmp(a, b, 0) || !same_site(a, b))
            return 0;
        compared++;
    }
    return compared ? 1 : -1;
}

/* Classifies one odd class against the majority's lowest rank: extra,
 * skipped, either (periodic code: both shifts fit), or no provable shift.
 * A shift needs positive evidence (a shifted pair that matches) and must
 * not be explained as well by the plain alignment (the calls after d
 * agree unshifted: then only call d differs - a substitution). */
static int classify_shift(const rhist *h, const call_view *v, int odd_cls, int ref_rank,
                          uint64_t d)
{
    const rhist *ref = &h[ref_rank];
    int extra = 1, skipped = 1;
    for (int i = v->cls_start[odd_cls]; i < v->cls_start[odd_cls + 1]; i++) {
        const rhist *o = &h[v->m[i].rank];
        if (shifted_match(o, ref, d, 0) == 1)
            return COH_DIV_FIELD;
        extra = extra && shifted_match(o, ref, d, +1) == 1;
        skipped = skipped && shifted_match(o, ref, d, -1) == 1;
    }
    if (extra && skipped)
        return COH_DIV_SHIFTED;
    if (extra)
        return COH_DIV_EXTRA;
    if (skipped)
        return COH_DIV_SKIPPED;
    return COH_DIV_FIELD;
}

/* forward: the state find_divergence fills */
typedef struct div_state div_state;
static void earlier_shift(const rhist *h, div_state *st, int odd_cls, uint64_t d);

struct div_state {
    coh_divergence d;
    call_view v;     /* the view at d.seq (valid when d.kind != NONE) */
    uint64_t lo, hi; /* seqs compared (no divergence) */
    int compared;    /* some seq had two ranks */
};

/* The lesson's false attribution: an extra or skipped call whose contract
 * happens to equal the call it pairs with passes unnoticed, and the error
 * surfaces one or more calls later. If the contracts first differ at d but
 * the odd ranks' call sites already differed from the majority's at an
 * earlier seq with equal contracts, test the shift hypotheses from there:
 * the report then names the call that really diverged. */
static void earlier_shift(const rhist *h, div_state *st, int odd_cls, uint64_t d)
{
    const call_view *v = &st->v;
    const rhist *ref = &h[st->d.ref_rank];
    for (uint64_t s0 = st->lo; s0 < d; s0++) {
        const cohort_fingerprint *rf = hist_at(ref, s0);
        if (!rf || !site_known(rf))
            continue;
        int all_differ = 1;
        for (int i = v->cls_start[odd_cls]; i < v->cls_start[odd_cls + 1] && all_differ; i++) {
            const cohort_fingerprint *of = hist_at(&h[v->m[i].rank], s0);
            all_differ = of && site_known(of) && !same_site(of, rf);
        }
        if (!all_differ)
            continue;
        int k = classify_shift(h, v, odd_cls, st->d.ref_rank, s0);
        if (k != COH_DIV_FIELD) {
            st->d.seq = s0;
            st->d.kind = k;
        }
        return; /* only the first site divergence can be the cause */
    }
}

/* A view of seq s0 whose two classes are call sites, not contracts: the
 * ranks at the majority's site (class 0, the reference) and the others.
 * Used when the contracts first differ at a seq where too few ranks are
 * present to have a majority (the others were caught by the abort one call
 * earlier), but the call sites already split at s0 with one. */
static int site_view(const rhist *h, int nranks, uint64_t s0, call_view *v)
{
    memset(v, 0, sizeof *v);
    member *m = coh_malloc(sizeof *m * (size_t)(nranks ? nranks : 1));
    int *cs = coh_malloc(sizeof(int) * 3);
    if (!m || !cs) {
        coh_free(m), coh_free(cs);
        return -1;
    }
    int n = 0;
    const cohort_fingerprint *maj = NULL;
    /* majority site: the site shared by more than half the present ranks */
    for (int r = 0; r < nranks && !maj; r++) {
        const cohort_fingerprint *a = h[r].missing ? NULL : hist_at(&h[r], s0);
        if (!a || !site_known(a))
            continue;
        int same = 0, present = 0;
        for (int q = 0; q < nranks; q++) {
            const cohort_fingerprint *b = h[q].missing ? NULL : hist_at(&h[q], s0);
            if (b) {
                present++;
                same += site_known(b) && same_site(a, b);
            }
        }
        if (2 * same > present)
            maj = a;
    }
    if (!maj) {
        coh_free(m), coh_free(cs);
        return 0;
    }
    for (int pass = 0; pass < 2; pass++)
        for (int r = 0; r < nranks; r++) {
            const cohort_fingerprint *b = h[r].missing ? NULL : hist_at(&h[r], s0);
            if (b && (site_known(b) && same_site(maj, b)) == (pass == 0))
                m[n++] = (member){b, r, pass};
        }
    int n0 = 0;
    while (n0 < n && m[n0].cls == 0)
        n0++;
    if (n0 == n) {
        coh_free(m), coh_free(cs);
        return 0;
    }
    cs[0] = 0, cs[1] = n0, cs[2] = n;
    v->m = m, v->n = n, v->ncls = 2, v->cls_start = cs, v->ref_cls = 0, v->has_majority = 1;
    v->first_field = COH_FIELD_NONE;
    return 1;
}

/* The contracts first differ at d without a majority: look for the first
 * earlier seq where the call sites split with one, and test the shift
 * hypotheses from there (see earlier_shift). */
static void site_shift(const rhist *h, int nranks, div_state *st, uint64_t d)
{
    for (uint64_t s0 = st->lo; s0 < d; s0++) {
        call_view v;
        int r = site_view(h, nranks, s0, &v);
        if (r < 0)
            return;
        if (r == 0)
            continue;
        /* Reference: the majority rank that got furthest - it holds the
         * calls the shifted ranks' later calls must match. */
        int ref_rank = v.m[0].rank;
        uint64_t far = 0;
        for (int i = v.cls_start[0]; i < v.cls_start[1]; i++) {
            const rhist *rh = &h[v.m[i].rank];
            uint64_t last = rh->n ? rh->e[rh->n - 1]->seq : 0;
            if (last > far) {
                far = last;
                ref_rank = v.m[i].rank;
            }
        }
        int k = classify_shift(h, &v, 1, ref_rank, s0);
        if (k == COH_DIV_FIELD) {
            view_free(&v);
            return;
        }
        view_free(&st->v);
        st->v = v;
        st->d.seq = s0;
        st->d.kind = k;
        st->d.ref_rank = ref_rank;
        st->d.has_majority = 1;
        return;
    }
}

/* Finds the first divergence. Returns 1 found, 0 none, -1 OOM. */
static int find_divergence(rhist *h, int nranks, div_state *st)
{
    memset(st, 0, sizeof *st);
    member *m = coh_malloc(sizeof *m * (size_t)(nranks ? nranks : 1));
    if (!m)
        return -1;
    for (int r = 0; r < nranks; r++)
        h[r].cur = 0;
    for (;;) {
        /* Next seq: the smallest at any cursor (an ascending k-way merge). */
        uint64_t s = UINT64_MAX;
        int any = 0;
        for (int r = 0; r < nranks; r++)
            if (!h[r].missing && h[r].cur < h[r].n) {
                uint64_t q = h[r].e[h[r].cur]->seq;
                if (!any || q < s)
                    s = q;
                any = 1;
            }
        if (!any)
            break;
        int n = 0;
        for (int r = 0; r < nranks; r++)
            if (!h[r].missing && h[r].cur < h[r].n && h[r].e[h[r].cur]->seq == s) {
                m[n++] = (member){h[r].e[h[r].cur], r, 0};
                h[r].cur++;
            }
        if (n < 2)
            continue;
        if (!st->compared)
            st->lo = s;
        st->hi = s;
        st->compared = 1;
        /* Fast path: everybody agrees with the first. */
        int agree = 1;
        for (int i = 1; i < n && agree; i++)
            if (fp_cmp(m[0].fp, m[i].fp, 0))
                agree = 0;
        if (agree)
            continue;
        member *mm = coh_malloc(sizeof *mm * (size_t)n);
        if (!mm) {
            coh_free(m);
            return -1;
        }
        memcpy(mm, m, sizeof *mm * (size_t)n);
        coh_free(m);
        if (view_build(&st->v, mm, n, 0) < 0) {
            view_free(&st->v);
            return -1;
        }
        st->d.seq = s;
        st->d.has_majority = st->v.has_majority;
        st->d.ref_rank = st->v.m[st->v.cls_start[st->v.ref_cls]].rank;
        st->d.field = st->v.first_field;
        st->d.kind = COH_DIV_FIELD;
        if (st->v.has_majority && st->v.ncls == 2) {
            int odd_cls = st->v.ref_cls == 0 ? 1 : 0;
            st->d.kind = classify_shift(h, &st->v, odd_cls, st->d.ref_rank, s);
            if (st->d.kind == COH_DIV_FIELD)
                earlier_shift(h, st, odd_cls, s);
        } else {
            site_shift(h, nranks, st, s);
        }
        return 1;
    }
    coh_free(m);
    return 0;
}

/* "; no history from rank 5; rank 4 did not reach #7 (its last call: #5
 * all_reduce at train.c:80)". `upto`: the seq the others reached. */
static void notes(sb *s, const rhist *h, int nranks, uint64_t upto, int have_upto)
{
    int *r = coh_malloc(sizeof(int) * (size_t)(nranks ? nranks : 1));
    if (!r)
        return;
    int k = 0;
    for (int i = 0; i < nranks; i++)
        if (h[i].missing)
            r[k++] = i;
    if (k) {
        sb_printf(s, "; no history from ");
        sb_ranks(s, r, k);
    }
    k = 0;
    for (int i = 0; i < nranks; i++)
        if (!h[i].missing && h[i].n == 0)
            r[k++] = i;
    if (k) {
        sb_printf(s, "; ");
        sb_ranks(s, r, k);
        sb_printf(s, " made no calls yet");
    }
    if (have_upto) {
        int listed = 0, more = 0;
        for (int i = 0; i < nranks; i++) {
            if (h[i].missing || h[i].n == 0)
                continue;
            const cohort_fingerprint *last = h[i].e[h[i].n - 1];
            if (last->seq >= upto)
                continue;
            if (listed >= 4) {
                more++;
                continue;
            }
            sb_printf(s, "; rank %d did not reach #%" PRIu64 " (its last call: #%" PRIu64 " %s at ",
                      i, upto, last->seq, op_str(last->coll));
            sb_site(s, last);
            sb_printf(s, ")");
            listed++;
        }
        if (more)
            sb_printf(s, "; %d more ranks did not reach #%" PRIu64, more, upto);
    }
    coh_free(r);
}

static void report_shift(sb *s, const div_state *st, const rhist *h)
{
    const call_view *v = &st->v;
    int odd_cls = v->ref_cls == 0 ? 1 : 0;
    int *odd = coh_malloc(sizeof(int) * (size_t)v->n);
    int *maj = coh_malloc(sizeof(int) * (size_t)v->n);
    if (!odd || !maj) {
        coh_free(odd), coh_free(maj);
        sb_printf(s, "contract analysis: out of memory");
        return;
    }
    int no = cls_ranks(v, odd_cls, odd), nm = cls_ranks(v, v->ref_cls, maj);
    /* Each side's lowest rank's own record names the call site. */
    const cohort_fingerprint *of = hist_at(&h[odd[0]], st->d.seq);
    const cohort_fingerprint *mf = hist_at(&h[maj[0]], st->d.seq);
    sb_ranks(s, odd, no);
    if (st->d.kind == COH_DIV_EXTRA) {
        sb_printf(s, " made an extra call: %s #%" PRIu64 " (", op_str(of->coll), of->seq);
        sb_site(s, of);
        sb_printf(s, ") where ");
        sb_ranks(s, maj, nm);
        sb_printf(s, " called %s #%" PRIu64 " (", op_str(mf->coll), mf->seq);
        sb_site(s, mf);
        sb_printf(s, "); the calls after it are misaligned");
    } else if (st->d.kind == COH_DIV_SHIFTED) {
        /* Repetitive code (a loop of the same calls) makes a skipped call
         * and an extra one look the same afterwards: say both. */
        sb_printf(s, " %s one call out of step from #%" PRIu64 ": %s skipped %s #%" PRIu64 " (",
                  no == 1 ? "is" : "are", st->d.seq, no == 1 ? "it" : "they",
                  op_str(mf->coll), mf->seq);
        sb_site(s, mf);
        sb_printf(s, "), or %s %s #%" PRIu64 " (", no == 1 ? "its" : "their",
                  op_str(of->coll), of->seq);
        sb_site(s, of);
        sb_printf(s, ") is an extra call; the calls after it are misaligned");
    } else {
        const cohort_fingerprint *next = hist_at(&h[maj[0]], st->d.seq + 1);
        sb_printf(s, " skipped %s #%" PRIu64 " (", op_str(mf->coll), mf->seq);
        sb_site(s, mf);
        sb_printf(s, "): %s #%" PRIu64 " is %s (", no == 1 ? "its" : "their", of->seq,
                  op_str(of->coll));
        sb_site(s, of);
        sb_printf(s, "), which ");
        sb_ranks(s, maj, nm);
        sb_printf(s, " called as #%" PRIu64 "; the calls after it are misaligned",
                  next ? next->seq : st->d.seq + 1);
    }
    coh_free(odd), coh_free(maj);
}

int coh_contract_diverge(const coh_hist *hist, int nranks, coh_divergence *d,
                         unsigned char *odd)
{
    memset(d, 0, sizeof *d);
    if (odd && nranks > 0)
        memset(odd, 0, (size_t)nranks);
    if (!hist || nranks <= 0)
        return 0;
    rhist *h = hists_build(hist, nranks);
    if (!h)
        return 0;
    div_state st;
    int found = find_divergence(h, nranks, &st);
    if (found == 1) {
        *d = st.d;
        if (odd)
            for (int i = 0; i < st.v.n; i++)
                if (st.v.m[i].cls != st.v.ref_cls)
                    odd[st.v.m[i].rank] = 1;
        view_free(&st.v);
    }
    hists_free(h, nranks);
    return found == 1;
}

int coh_contract_analyze(const coh_hist *hist, int nranks, char *out, size_t outlen)
{
    char dummy[1];
    sb s = {out ? out : dummy, out ? outlen : 1, 0};
    s.b[0] = 0;
    if (!hist || nranks <= 0) {
        sb_printf(&s, "no histories to compare");
        return 0;
    }
    rhist *h = hists_build(hist, nranks);
    if (!h) {
        sb_printf(&s, "contract analysis: out of memory");
        return 0;
    }
    div_state st;
    int found = find_divergence(h, nranks, &st);
    if (found < 0) {
        sb_printf(&s, "contract analysis: out of memory");
    } else if (found == 1) {
        if (st.d.kind == COH_DIV_FIELD) {
            if (report_field(&s, &st.v) < 0)
                sb_printf(&s, "contract analysis: out of memory");
        } else {
            report_shift(&s, &st, h);
        }
        notes(&s, h, nranks, st.d.seq, 1);
        view_free(&st.v);
    } else {
        /* No divergence: say what was compared, and who is not there. */
        uint64_t top = 0;
        int have_top = 0;
        for (int r = 0; r < nranks; r++)
            if (!h[r].missing && h[r].n) {
                uint64_t q = h[r].e[h[r].n - 1]->seq;
                if (!have_top || q > top)
                    top = q;
                have_top = 1;
            }
        if (st.compared)
            sb_printf(&s, "no divergence in calls #%" PRIu64 "-#%" PRIu64, st.lo, st.hi);
        else
            sb_printf(&s, "no common calls to compare");
        notes(&s, h, nranks, top, have_top);
    }
    hists_free(h, nranks);
    if (out && outlen && s.len >= outlen && outlen > 4)
        memcpy(out + outlen - 4, "...", 4); /* make a cut visible */
    return found == 1;
}

int coh_contract_analyze_names(const coh_hist *hist, int nranks, const coh_contract_names *names,
                               char *out, size_t outlen)
{
    const coh_contract_names *saved = tl_names;
    tl_names = names;
    int r = coh_contract_analyze(hist, nranks, out, outlen);
    tl_names = saved;
    return r;
}

cohort_status cohort_validate_fingerprints(const cohort_fingerprint *by_rank, int n, char *msg,
                                           size_t msglen)
{
    char dummy[1];
    sb s = {msg && msglen ? msg : dummy, msg && msglen ? msglen : 1, 0};
    s.b[0] = 0;
    if (!by_rank || n <= 0) {
        sb_printf(&s, "cohort_validate_fingerprints: empty process group (n = %d)", n);
        return COHORT_ERR_INVALID;
    }
    member *m = coh_malloc(sizeof *m * (size_t)n);
    if (!m) {
        sb_printf(&s, "cohort_validate_fingerprints: out of memory");
        return COHORT_ERR_NOMEM;
    }
    for (int r = 0; r < n; r++)
        m[r] = (member){&by_rank[r], r, 0};
    call_view v;
    /* One call per rank: seq is compared like any other field. */
    if (view_build(&v, m, n, 1) < 0) {
        view_free(&v);
        sb_printf(&s, "cohort_validate_fingerprints: out of memory");
        return COHORT_ERR_NOMEM;
    }
    cohort_status st = COHORT_OK;
    if (v.ncls > 1) {
        st = COHORT_ERR_CONTRACT;
        if (report_field(&s, &v) < 0) {
            s.len = 0;
            s.b[0] = 0;
            sb_printf(&s, "cohort_validate_fingerprints: out of memory");
            st = COHORT_ERR_NOMEM;
        }
    }
    view_free(&v);
    if (msg && msglen && s.len >= msglen && msglen > 4)
        memcpy(msg + msglen - 4, "...", 4);
    return st;
}
