/*
 * report.c - the global mismatch report: after a contract failure every
 * rank publishes its recent collective history in the group's store, reads
 * everyone's (bounded), and rewrites its error with the same majority-based
 * message, so all ranks print one story instead of N local fragments.
 *
 * The value under "contract/<rank>" is JSON Lines (docs/trace.md): a
 * {"cohort_contract":1,...} line with the rank's first-hand mismatch message
 * if it detected one, then one flight-recorder entry line per call, oldest
 * first. Using the dump format means one parser (fuzzed) for both.
 *
 * Bounded: one set, one wait of REPORT_WAIT_MS for all keys, one multi_get
 * of what exists; the rank hosting the store then waits up to
 * REPORT_WAIT_MS for the others to have read (calls that do not wait are
 * bounded by the handle's own timeout).
 */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "contract/contract.h"
#include "trace/jsonl.h"
#include "trace/trace.h"

#define REPORT_HISTORY 16     /* collective calls published per rank */
#define REPORT_WAIT_MS 900    /* for every rank's history to appear (a loaded
                               * 2-core machine needs more than 500 ms) */

static int is_collective(int coll)
{
    return coll != COH_COLL_NONE && coll != COH_COLL_SEND && coll != COH_COLL_RECV;
}

/* This rank's published value; *len its size. NULL on OOM. */
static char *build_entry(cohort_group *g, size_t *len)
{
    static const size_t line_max = 8192;
    coh_trace_entry all[256], *pick[REPORT_HISTORY];
    int n = coh_trace_last(g->trace, all, (int)COH_ARRAY_LEN(all));
    int k = 0;
    for (int i = n - 1; i >= 0 && k < REPORT_HISTORY; i--)
        if (is_collective(all[i].call.coll))
            pick[k++] = &all[i];
    size_t cap = line_max * (size_t)(k + 1);
    char *buf = coh_malloc(cap);
    if (!buf)
        return NULL;
    coh_tl_contract c;
    memset(&c, 0, sizeof c);
    c.version = COH_TL_VERSION;
    c.rank = g->rank;
    c.generation = g->generation;
    c.group = g->id;
    if (atomic_load(&g->contract_state) & COH_CSTATE_DETECTED) {
        pthread_mutex_lock(&g->err_mu);
        snprintf(c.detected, sizeof c.detected, "%s", g->err.msg);
        pthread_mutex_unlock(&g->err_mu);
        c.has_detected = 1;
    }
    size_t pos = coh_tl_fmt_contract(buf, line_max, &c);
    if (pos >= line_max)
        pos = 0; /* cannot happen with a 1 KiB message; stay well-formed */
    for (int i = k - 1; i >= 0; i--) {
        size_t l = coh_tl_fmt_entry(buf + pos, line_max, pick[i]);
        if (l < line_max)
            pos += l;
    }
    *len = pos;
    return buf;
}

/* Parses one rank's value into h and its detected message. h->fp is one
 * allocation holding the fingerprints and, after them, their file names.
 * Returns 0, or -1 if unreadable (the rank then counts as missing). */
static int parse_entry(const char *v, size_t vl, int rank, coh_hist *h, char *detected,
                       size_t dlen, char *why, size_t whylen)
{
    size_t nl = 1;
    for (size_t i = 0; i < vl; i++)
        nl += v[i] == '\n';
    char *block = coh_malloc(nl * (sizeof(cohort_fingerprint) + 256));
    coh_tl_line *ln = coh_malloc(sizeof *ln);
    if (!block || !ln) {
        coh_free(block), coh_free(ln);
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    cohort_fingerprint *fp = (cohort_fingerprint *)block;
    char(*files)[256] = (char(*)[256])(block + nl * sizeof(cohort_fingerprint));
    int n = 0, have_hdr = 0;
    uint32_t group = 0, gen = 0;
    for (size_t i = 0; i < vl;) {
        size_t j = i;
        while (j < vl && v[j] != '\n')
            j++;
        char err[128];
        int kind = coh_tl_parse(v + i, j - i, ln, err, sizeof err);
        if (!have_hdr) {
            if (kind != COH_TL_CONTRACT || ln->u.con.rank != rank) {
                snprintf(why, whylen, "unreadable history (%s)",
                         kind == COH_TL_INVALID ? err : "wrong first line");
                coh_free(block), coh_free(ln);
                return -1;
            }
            have_hdr = 1;
            group = ln->u.con.group;
            gen = ln->u.con.generation;
            if (ln->u.con.has_detected)
                snprintf(detected, dlen, "%s", ln->u.con.detected);
        } else if (kind == COH_TL_ENTRY && (size_t)n < nl) {
            snprintf(files[n], sizeof files[n], "%s", ln->u.ent.file);
            coh_tl_entry_fp(&ln->u.ent, group, gen, &fp[n]);
            fp[n].file = files[n];
            n++;
        }
        i = j + 1;
    }
    coh_free(ln);
    if (!have_hdr) {
        snprintf(why, whylen, "empty value");
        coh_free(block);
        return -1;
    }
    h->fp = fp;
    h->n = n;
    return 0;
}

static void set_msg(cohort_group *g, const char *msg)
{
    pthread_mutex_lock(&g->err_mu);
    if (g->err.status == COHORT_ERR_CONTRACT)
        snprintf(g->err.msg, sizeof g->err.msg, "%s", msg);
    if (g->last.status == COHORT_ERR_CONTRACT)
        snprintf(g->last.msg, sizeof g->last.msg, "%s", msg);
    pthread_mutex_unlock(&g->err_mu);
}

/* out = head + tail, cutting head (marked "...") so that tail always
 * survives: the reason a report is missing matters more than the end of a
 * long message. */
static void join_fit(char *out, size_t cap, const char *head, const char *tail)
{
    size_t hl = strlen(head), tl = strlen(tail);
    if (tl >= cap)
        tl = cap - 1;
    size_t room = cap - 1 - tl;
    if (hl > room) {
        hl = room > 3 ? room - 3 : 0;
        memcpy(out, head, hl);
        memcpy(out + hl, "...", room - hl);
        hl = room;
    } else {
        memcpy(out, head, hl);
    }
    memcpy(out + hl, tail, tl);
    out[hl + tl] = 0;
}

/* Keeps the local message and says why the global one is missing. */
static void keep_local(cohort_group *g, const char *why)
{
    char msg[COH_ERRLEN], head[COH_ERRLEN], tail[600];
    pthread_mutex_lock(&g->err_mu);
    memcpy(head, g->err.msg, sizeof head);
    pthread_mutex_unlock(&g->err_mu);
    head[sizeof head - 1] = 0;
    snprintf(tail, sizeof tail, " (no global report: %.560s)", why);
    join_fit(msg, sizeof msg, head, tail);
    set_msg(g, msg);
    coh_error("group %u: %s: %s", g->id, cohort_status_name(COHORT_ERR_CONTRACT), msg);
}

/* 1 if this process hosts the job's store (the embedded server of world
 * rank 0; sub-groups share their world's). */
static int hosts_store(const cohort_group *g)
{
    for (; g; g = g->parent)
        if (g->server)
            return 1;
    return 0;
}

/* Says "read" and, on the rank that hosts the store, waits (bounded) until
 * every rank that published has read too: that rank returning to the user
 * and finalizing would take the store, and the others' reports, with it. */
static void readers_done(cohort_group *g, const int *present, int npresent)
{
    char key[48];
    snprintf(key, sizeof key, "contract/read/%d", g->rank);
    if (cohort_store_set(g->store, key, strlen(key), "1", 1) != COHORT_OK || !hosts_store(g))
        return;
    char(*k)[48] = coh_calloc((size_t)npresent, sizeof *k);
    const void **kp = coh_calloc((size_t)npresent, sizeof *kp);
    size_t *kl = coh_calloc((size_t)npresent, sizeof *kl);
    if (k && kp && kl) {
        for (int i = 0; i < npresent; i++) {
            snprintf(k[i], sizeof k[i], "contract/read/%d", present[i]);
            kp[i] = k[i];
            kl[i] = strlen(k[i]);
        }
        cohort_status st = cohort_store_wait(g->store, kp, kl, npresent, REPORT_WAIT_MS);
        coh_debug("contract report: store host waiting for readers: %s", cohort_status_name(st));
    }
    coh_free(k), coh_free(kp), coh_free(kl);
}

/* The report as data (cohort_error_info_get): the first divergence, each
 * rank's value and call site at that seq, the blamed ranks. */
static void attach_detail(cohort_group *g, const coh_hist *hist, int n)
{
    coh_divergence dv;
    unsigned char *odd = coh_calloc((size_t)n, 1);
    coh_err_detail *d = odd ? coh_err_detail_new(n) : NULL;
    if (!d || !coh_contract_diverge(hist, n, &dv, odd)) {
        coh_free(odd);
        coh_err_detail_free(d);
        return;
    }
    static const char *const kinds[] = {"", "mismatch", "extra", "skipped", "shifted"};
    d->status = COHORT_ERR_CONTRACT;
    snprintf(d->kind, sizeof d->kind, "%s",
             dv.kind >= 0 && dv.kind < (int)COH_ARRAY_LEN(kinds) ? kinds[dv.kind] : "");
    d->seq = dv.seq;
    if (dv.kind == COH_DIV_FIELD)
        snprintf(d->field, sizeof d->field, "%s", coh_field_name(dv.field));
    for (int r = 0; r < n; r++) {
        for (int i = 0; hist[r].fp && i < hist[r].n; i++) {
            const cohort_fingerprint *fp = &hist[r].fp[i];
            if (fp->seq != dv.seq)
                continue;
            if (dv.kind == COH_DIV_FIELD)
                coh_contract_fmt_value(dv.field, fp, d->values[r], sizeof d->values[r]);
            else /* extra / skipped / shifted: which call each rank made there */
                snprintf(d->values[r], sizeof d->values[r], "%s", coh_coll_name(fp->coll));
            snprintf(d->files[r], sizeof d->files[r], "%s", fp->file ? fp->file : "");
            d->lines[r] = fp->line;
            if (r == dv.ref_rank || !d->call[0])
                snprintf(d->call, sizeof d->call, "%s", coh_coll_name(fp->coll));
            break;
        }
        d->culprit[r] = dv.has_majority && odd[r];
    }
    coh_free(odd);
    coh_err_detail_attach(g, d, 1);
}

static void build_report(cohort_group *g)
{
    if (!g->store) {
        keep_local(g, "the group has no store");
        return;
    }
    int n = g->size;
    size_t vlen = 0;
    char *mine = build_entry(g, &vlen);
    if (!mine) {
        keep_local(g, "out of memory");
        return;
    }
    char key[48];
    snprintf(key, sizeof key, "contract/%d", g->rank);
    cohort_status st = cohort_store_set(g->store, key, strlen(key), mine, vlen);
    coh_free(mine);
    if (st != COHORT_OK) {
        char why[512];
        snprintf(why, sizeof why, "publishing this rank's history failed: %s: %s",
                 cohort_status_name(st), cohort_store_last_error(g->store));
        keep_local(g, why);
        return;
    }

    coh_hist *hist = coh_calloc((size_t)n, sizeof *hist);
    char (*keys)[48] = coh_calloc((size_t)n, sizeof *keys);
    const void **kp = coh_calloc((size_t)n, sizeof *kp);
    size_t *kl = coh_calloc((size_t)n, sizeof *kl);
    int *present = coh_calloc((size_t)n, sizeof *present);
    char *detected = coh_malloc(COH_ERRLEN);
    char *report = coh_malloc(COH_ERRLEN);
    if (!hist || !keys || !kp || !kl || !present || !detected || !report) {
        coh_free(hist), coh_free(keys), coh_free(kp), coh_free(kl), coh_free(present),
            coh_free(detected), coh_free(report);
        keep_local(g, "out of memory");
        return;
    }
    for (int r = 0; r < n; r++) {
        snprintf(keys[r], sizeof keys[r], "contract/%d", r);
        kp[r] = keys[r];
        kl[r] = strlen(keys[r]);
    }
    /* One bounded wait for everybody; TIMEOUT just means someone is slow
     * or dead, and is reported per rank below. */
    st = cohort_store_wait(g->store, kp, kl, n, REPORT_WAIT_MS);
    coh_debug("contract report: waiting for %d histories: %s", n, cohort_status_name(st));
    int store_dead = st != COHORT_OK && st != COHORT_ERR_TIMEOUT;
    int first_detector = -1;
    char store_why[256] = "";
    if (store_dead)
        snprintf(store_why, sizeof store_why, "%s: %s", cohort_status_name(st),
                 cohort_store_last_error(g->store));
    /* Which keys exist: all of them when the wait succeeded, else one
     * listing (one round trip, whatever the group size). */
    unsigned char *exists = coh_calloc((size_t)n, 1);
    if (!exists) {
        store_dead = 1;
        snprintf(store_why, sizeof store_why, "out of memory");
    } else if (!store_dead && st == COHORT_OK) {
        memset(exists, 1, (size_t)n);
    } else if (!store_dead) {
        char **names = NULL;
        size_t *nl = NULL;
        int cnt = 0;
        cohort_status ls = cohort_store_list(g->store, "contract/", &names, &nl, &cnt);
        if (ls != COHORT_OK) {
            store_dead = 1;
            snprintf(store_why, sizeof store_why, "%s: %s", cohort_status_name(ls),
                     cohort_store_last_error(g->store));
        }
        for (int i = 0; i < cnt; i++) {
            /* "contract/<rank>" only (not "contract/read/<rank>") */
            const char *p = names[i] + strlen("contract/");
            char *end = NULL;
            long r = strtol(p, &end, 10);
            if (nl[i] > strlen("contract/") && end && !*end && end != p && r >= 0 && r < n)
                exists[r] = 1;
            free(names[i]);
        }
        free(names);
        free(nl);
    }
    int nhave = 0;
    for (int r = 0; r < n && !store_dead; r++) {
        if (!exists[r]) {
            coh_debug("contract report: no history from rank %d within %d ms", r, REPORT_WAIT_MS);
            continue;
        }
        /* the present keys, compacted to the front */
        kp[nhave] = keys[r];
        kl[nhave] = strlen(keys[r]);
        present[nhave++] = r;
    }
    coh_free(exists);
    /* One round trip for all values: the window in which the store's host
     * may already be leaving stays small. */
    void **vals = NULL;
    size_t *vlens = NULL;
    if (!store_dead && nhave) {
        vals = coh_calloc((size_t)nhave, sizeof *vals);
        vlens = coh_calloc((size_t)nhave, sizeof *vlens);
        if (!vals || !vlens) {
            coh_free(vals), coh_free(vlens);
            vals = NULL, vlens = NULL;
            nhave = 0;
        } else {
            cohort_status ms = cohort_store_multi_get(g->store, kp, kl, nhave, vals, vlens, 1000);
            if (ms != COHORT_OK) {
                store_dead = 1;
                snprintf(store_why, sizeof store_why, "%s: %s", cohort_status_name(ms),
                         cohort_store_last_error(g->store));
            }
        }
    }
    for (int i = 0; i < nhave && !store_dead; i++) {
        int r = present[i];
        char why[160];
        detected[0] = 0;
        if (parse_entry(vals[i], vlens[i], r, &hist[r], detected, COH_ERRLEN, why, sizeof why) != 0)
            coh_warn("contract report: rank %d's history: %s", r, why);
        else if (detected[0] && first_detector < 0) {
            /* The lowest rank that saw the mismatch first-hand. */
            first_detector = r;
            snprintf(report, COH_ERRLEN, "%s", detected);
        }
    }
    for (int i = 0; vals && i < nhave; i++)
        free(vals[i]); /* the store hands out malloc'd values */
    coh_free(vals), coh_free(vlens);
    if (!store_dead)
        readers_done(g, present, nhave);
    if (store_dead) {
        char why[512];
        snprintf(why, sizeof why, "reading the other ranks' histories failed: %s", store_why);
        keep_local(g, why);
    } else {
        char *analysis = coh_malloc(COH_ERRLEN);
        char *final = coh_malloc(COH_ERRLEN);
        if (!analysis || !final) {
            keep_local(g, "out of memory");
        } else {
            int found = coh_contract_analyze(hist, n, analysis, COH_ERRLEN);
            if (found) {
                snprintf(final, COH_ERRLEN, "%s", analysis);
                attach_detail(g, hist, n);
            }
            else {
                /* The collectives agree (a send/recv mismatch, or a header
                 * from another group/generation): the first-hand message of
                 * the lowest rank that saw it is the story, else our own. */
                char head[COH_ERRLEN + 32], tail[COH_ERRLEN + 8];
                if (first_detector >= 0) {
                    snprintf(head, sizeof head, "rank %d reported: %s", first_detector, report);
                } else {
                    pthread_mutex_lock(&g->err_mu);
                    memcpy(head, g->err.msg, COH_ERRLEN);
                    pthread_mutex_unlock(&g->err_mu);
                    head[COH_ERRLEN - 1] = 0;
                }
                snprintf(tail, sizeof tail, " (%s)", analysis);
                join_fit(final, COH_ERRLEN, head, tail);
            }
            set_msg(g, final);
            /* The one line a contract failure logs on each rank; the dump
             * is rewritten with it (the first one, written when the
             * failure was seen, had only the first-hand message). */
            coh_error("group %u: %s: %s", g->id, cohort_status_name(COHORT_ERR_CONTRACT), final);
            if (g->trace)
                coh_trace_dump(g, NULL, final);
        }
        coh_free(analysis), coh_free(final);
    }
    for (int r = 0; r < n; r++)
        coh_free(hist[r].fp);
    coh_free(hist);
    coh_free(keys), coh_free(kp), coh_free(kl), coh_free(present), coh_free(detected),
        coh_free(report);
}

void coh_contract_report(cohort_group *g)
{
    if (!g || coh_group_poisoned(g) != COHORT_ERR_CONTRACT)
        return;
    int s = atomic_load(&g->contract_state);
    for (;;) {
        if (s & COH_CSTATE_DONE)
            return;
        if (s & COH_CSTATE_BUSY) {
            /* Another thread builds it: wait for it (bounded by its own
             * budget plus slack) so this caller also returns the global
             * message. Polling is fine here: once per error, ~2 s at most. */
            uint64_t dl = coh_deadline_ns(3 * REPORT_WAIT_MS + 1500);
            while (!(atomic_load(&g->contract_state) & COH_CSTATE_DONE) && coh_ms_left(dl) > 0) {
                struct timespec ts = {0, 2 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            return;
        }
        if (atomic_compare_exchange_weak(&g->contract_state, &s, s | COH_CSTATE_BUSY))
            break;
    }
    build_report(g);
    atomic_fetch_or(&g->contract_state, COH_CSTATE_DONE);
    atomic_fetch_and(&g->contract_state, ~COH_CSTATE_BUSY);
}
