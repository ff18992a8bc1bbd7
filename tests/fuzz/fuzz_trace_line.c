/*
 * fuzz_trace_line.c - libFuzzer target for the flight recorder's dump line
 * parser (src/trace/jsonl.c), which cohort-trace and the contract report run
 * on files and store values they did not write themselves.
 *
 * Properties checked beyond "no crash, no out-of-bounds read" (ASan):
 *  - a parsed line, written back by our own writer, parses again;
 *  - writing and parsing reaches a fixpoint after one round (lossy steps -
 *    cutting long strings, escaping invalid UTF-8 - happen once).
 * The same function replays the checked-in corpus in a normal ctest run
 * (replay_main.c), so every build exercises it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace/jsonl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
    if (!cond)
        abort();
}

/* Writes a parsed record back as a line; returns its length. */
static size_t write_back(const coh_tl_line *l, char *buf, size_t cap)
{
    switch (l->kind) {
    case COH_TL_HEADER:
        return coh_tl_fmt_header(buf, cap, &l->u.hdr);
    case COH_TL_CONTRACT:
        return coh_tl_fmt_contract(buf, cap, &l->u.con);
    case COH_TL_ENTRY: {
        const coh_tl_entry *p = &l->u.ent;
        coh_trace_entry e;
        memset(&e, 0, sizeof e);
        e.call.seq = p->seq;
        e.call.coll = (uint8_t)p->coll;
        e.call.dtype = (uint8_t)p->dtype;
        e.call.redop = (int8_t)p->redop;
        e.call.root = p->root;
        e.call.tag = p->tag;
        e.call.count = p->count;
        e.call.file = p->file;
        e.call.line = p->line;
        e.state = p->state;
        e.status = p->status;
        e.t_issue_us = p->t_issue_us;
        e.t_start_us = p->t_start_us;
        e.t_end_us = p->t_end_us;
        return coh_tl_fmt_entry(buf, cap, &e);
    }
    default:
        return 0;
    }
}

static int same(const coh_tl_line *a, const coh_tl_line *b)
{
    if (a->kind != b->kind)
        return 0;
    switch (a->kind) {
    case COH_TL_HEADER: {
        const coh_tl_header *x = &a->u.hdr, *y = &b->u.hdr;
        return !strcmp(x->job, y->job) && x->rank == y->rank && x->size == y->size &&
               x->generation == y->generation && x->group == y->group &&
               !strcmp(x->host, y->host) && x->pid == y->pid && !strcmp(x->reason, y->reason) &&
               x->time_us == y->time_us && x->capacity == y->capacity &&
               x->recorded == y->recorded;
    }
    case COH_TL_CONTRACT: {
        const coh_tl_contract *x = &a->u.con, *y = &b->u.con;
        return x->rank == y->rank && x->generation == y->generation && x->group == y->group &&
               x->has_detected == y->has_detected &&
               (!x->has_detected || !strcmp(x->detected, y->detected));
    }
    case COH_TL_ENTRY: {
        const coh_tl_entry *x = &a->u.ent, *y = &b->u.ent;
        return x->seq == y->seq && x->coll == y->coll && x->dtype == y->dtype &&
               x->redop == y->redop && x->root == y->root && x->tag == y->tag &&
               x->count == y->count && !strcmp(x->file, y->file) && x->line == y->line &&
               x->state == y->state && x->status == y->status &&
               x->t_issue_us == y->t_issue_us && x->t_start_us == y->t_start_us &&
               x->t_end_us == y->t_end_us;
    }
    default:
        return 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static coh_tl_line a, b, c;
    static char buf[16384], buf2[16384];
    char err[160];
    /* An exact-size copy: a read past `size` is an ASan report. */
    char *in = malloc(size ? size : 1);
    if (!in)
        return 0;
    memcpy(in, data, size);
    int kind = coh_tl_parse(in, size, &a, err, sizeof err);
    /* The public parser (cohort_trace.h) is this one: same verdict, same
     * record. */
    static cohort_trace_line pub;
    int pk = cohort_trace_parse_line(in, size, &pub, NULL, 0);
    free(in);
    must(pk == (kind == COH_TL_HEADER     ? COHORT_TRACE_HEADER
                : kind == COH_TL_ENTRY    ? COHORT_TRACE_ENTRY
                : kind == COH_TL_CONTRACT ? COHORT_TRACE_OTHER
                                          : COHORT_TRACE_INVALID));
    if (kind == COH_TL_ENTRY)
        must(pub.ent.seq == a.u.ent.seq && pub.ent.coll == a.u.ent.coll &&
             pub.ent.count == a.u.ent.count && pub.ent.state == a.u.ent.state &&
             pub.ent.t_end_us == a.u.ent.t_end_us && !strcmp(pub.ent.file, a.u.ent.file));
    if (kind == COH_TL_HEADER)
        must(pub.hdr.rank == a.u.hdr.rank && pub.hdr.time_us == a.u.hdr.time_us &&
             !strcmp(pub.hdr.job, a.u.hdr.job) && !strcmp(pub.hdr.reason, a.u.hdr.reason));
    if (kind == COH_TL_INVALID) {
        must(err[0] != 0); /* every rejection says why */
        return 0;
    }
    /* Status names beyond the table print as "COHORT_ERR_UNKNOWN", which
     * does not parse back: only known statuses round-trip. */
    if (kind == COH_TL_ENTRY && !strcmp(cohort_status_name((cohort_status)a.u.ent.status),
                                        "COHORT_ERR_UNKNOWN"))
        return 0;
    size_t n = write_back(&a, buf, sizeof buf);
    must(n < sizeof buf);
    must(coh_tl_parse(buf, n, &b, err, sizeof err) == kind);
    size_t n2 = write_back(&b, buf2, sizeof buf2);
    must(n2 < sizeof buf2);
    must(coh_tl_parse(buf2, n2, &c, err, sizeof err) == kind);
    must(same(&b, &c));
    return 0;
}
