/*
 * cohort-trace - reads every rank's flight-recorder dump in a directory and
 * says what went wrong: the first call where the ranks' contracts diverge
 * (by majority, with call sites), ranks that are missing or behind and
 * where they stopped, failed calls, send/recv wait cycles. Optionally
 * writes a Chrome/Perfetto timeline.
 *
 *   cohort-trace [--timeline OUT.json] [--quiet] DIR
 *
 * Exit status: 0 consistent, 1 a problem was found, 2 usage or I/O error.
 * Damaged input (truncated or garbage lines, files without a header) is
 * skipped with a warning on stderr, never a crash. The divergence analysis
 * is the library's own (cohort_trace_analyze), so the tool and the
 * COHORT_ERR_CONTRACT messages always agree. Format: docs/trace.md. Public
 * API only (cohort_trace.h).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cohort.h"
#include "cohort_json.h"
#include "cohort_trace.h"

#define MAX_LINE (1 << 20)  /* longer lines are garbage: skipped */
#define MAX_WARN_PER_FILE 5 /* then one summary line per file */

typedef struct dump {
    char path[PATH_MAX];
    cohort_trace_header h;
    cohort_trace_entry *e;
    int n, cap;
    int skipped; /* damaged lines */
    int ignored; /* superseded (older generation, duplicate rank) */
} dump;

static int quiet;

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "cohort-trace: out of memory\n");
        exit(2);
    }
    return q;
}

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cohort-trace: warning: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- reading ---- */

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Reads one dump; returns 0 with d filled, or -1 (warned) to skip it. */
static int read_dump(const char *path, dump *d)
{
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        warn("%s: %s; file skipped", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, have_hdr = 0;
    static cohort_trace_line ln;
    char err[160];
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        int kind;
        if (len > MAX_LINE) {
            kind = COHORT_TRACE_INVALID;
            snprintf(err, sizeof err, "line longer than %d bytes", MAX_LINE);
        } else {
            kind = cohort_trace_parse_line(line, (size_t)len, &ln, err, sizeof err);
        }
        if (!have_hdr) {
            if (kind != COHORT_TRACE_HEADER) {
                warn("%s:%d: not a cohort trace header (%s); file skipped", path, lineno,
                     kind == COHORT_TRACE_INVALID ? err : "another record kind");
                free(line);
                fclose(f);
                return -1;
            }
            d->h = ln.hdr;
            have_hdr = 1;
            continue;
        }
        if (kind != COHORT_TRACE_ENTRY) {
            if (++d->skipped <= MAX_WARN_PER_FILE)
                warn("%s:%d: line skipped: %s", path, lineno,
                     kind == COHORT_TRACE_INVALID ? err : "not an entry");
            continue;
        }
        if (d->n == d->cap) {
            d->cap = d->cap ? d->cap * 2 : 256;
            d->e = xrealloc(d->e, sizeof *d->e * (size_t)d->cap);
        }
        d->e[d->n++] = ln.ent;
    }
    int rerr = ferror(f);
    free(line);
    fclose(f);
    if (rerr) {
        warn("%s: read error; using the %d entries read", path, d->n);
    }
    if (!have_hdr) {
        warn("%s: empty file; skipped", path);
        return -1;
    }
    if (d->skipped > MAX_WARN_PER_FILE)
        warn("%s: %d more damaged lines skipped", path, d->skipped - MAX_WARN_PER_FILE);
    return 0;
}

static int dump_order(const void *x, const void *y)
{
    const dump *a = x, *b = y;
    int c = strcmp(a->h.job, b->h.job);
    if (c)
        return c;
    if (a->h.group != b->h.group)
        return a->h.group < b->h.group ? -1 : 1;
    if (a->h.generation != b->h.generation)
        return a->h.generation > b->h.generation ? -1 : 1; /* newest first */
    if (a->h.rank != b->h.rank)
        return a->h.rank - b->h.rank;
    return a->h.time_us > b->h.time_us ? -1 : a->h.time_us < b->h.time_us; /* latest first */
}

/* ---- analysis of one group ---- */

static int is_p2p(int coll) { return coll == COHORT_CALL_SEND || coll == COHORT_CALL_RECV; }
static int is_coll(int coll) { return coll != COHORT_CALL_NONE && !is_p2p(coll); }
static int unfinished(const cohort_trace_entry *e)
{
    return e->state == COHORT_CALL_ISSUED || e->state == COHORT_CALL_STARTED;
}

typedef struct rank_state {
    dump *d;                      /* NULL: missing */
    const cohort_trace_entry *last_done;  /* newest completed collective */
    const cohort_trace_entry *pending;    /* oldest unfinished call (any kind) */
    const cohort_trace_entry *pend_coll;  /* oldest unfinished collective */
    const cohort_trace_entry *failed;     /* oldest failed call */
    uint64_t max_issued;            /* highest collective seq issued */
    int has_issued;
} rank_state;

static void site(char *out, size_t len, const cohort_trace_entry *e)
{
    snprintf(out, len, "%s:%d", e->file[0] ? cohort_trace_site(e->file) : "?", e->line);
}

/* "all_reduce #7 (train.c:88)", "recv #3 from rank 2 (tag 5, p2p.c:40)" */
static void describe(char *out, size_t len, const cohort_trace_entry *e)
{
    char s[300];
    site(s, sizeof s, e);
    if (e->coll == COHORT_CALL_RECV)
        snprintf(out, len, "recv #%" PRIu64 " from rank %d (tag %d, %s)", e->seq, e->root, e->tag,
                 s);
    else if (e->coll == COHORT_CALL_SEND)
        snprintf(out, len, "send #%" PRIu64 " to rank %d (tag %d, %s)", e->seq, e->root, e->tag, s);
    else
        snprintf(out, len, "%s #%" PRIu64 " (%s)", cohort_call_kind_name(e->coll), e->seq, s);
}

static void fmt_ranks(char *out, size_t len, const int *r, int n)
{
    char tmp[512];
    cohort_trace_format_ranks(tmp, sizeof tmp, r, n);
    snprintf(out, len, "%s %s", n == 1 ? "rank" : "ranks", tmp);
}

static double secs(uint64_t a, uint64_t b) { return b > a ? (double)(b - a) / 1e6 : 0.0; }

typedef struct group_result {
    int problems;
    cohort_trace_divergence div;
    unsigned char *odd;
    char report[4096];
} group_result;

/* ---- timeline ---- */

typedef struct tl {
    FILE *f;
    int first;
    uint64_t t0;
    int pid_base; /* several groups in one timeline: rows pid_base + rank */
    uint32_t group;
} tl;

static void tl_event_begin(tl *t)
{
    fputs(t->first ? "\n" : ",\n", t->f);
    t->first = 0;
}

static void tl_str(tl *t, const char *s)
{
    static char buf[16384];
    size_t pos = 0;
    cohort_json_str(buf, sizeof buf, &pos, s);
    if (pos >= sizeof buf) {
        /* Cut: keep it valid JSON. */
        char cut[4096];
        snprintf(cut, sizeof cut, "%.4000s", s);
        pos = 0;
        cohort_json_str(buf, sizeof buf, &pos, cut);
    }
    fputs(buf, t->f);
}

static uint64_t rel(const tl *t, uint64_t us) { return us > t->t0 ? us - t->t0 : 0; }

static void tl_call(tl *t, int rank, const dump *d, const cohort_trace_entry *e)
{
    uint64_t begin = e->t_issue_us ? e->t_issue_us : e->t_start_us;
    if (!begin)
        return;
    uint64_t end = e->t_end_us ? e->t_end_us : d->h.time_us; /* pending: up to the dump */
    if (end < begin)
        end = begin;
    char name[128], s[300];
    snprintf(name, sizeof name, "%s #%" PRIu64, cohort_call_kind_name(e->coll), e->seq);
    site(s, sizeof s, e);
    tl_event_begin(t);
    fprintf(t->f, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", is_p2p(e->coll) ? "p2p" : "collective");
    tl_str(t, name);
    fprintf(t->f, ",\"pid\":%d,\"tid\":%d,\"ts\":%" PRIu64 ",\"dur\":%" PRIu64 ",\"args\":{",
            t->pid_base + rank, is_p2p(e->coll) ? 1 : 0, rel(t, begin), end - begin);
    fprintf(t->f, "\"seq\":%" PRIu64 ",\"count\":%" PRIu64 ",\"dtype\":\"%s\",\"redop\":\"%s\","
            "\"root\":%d,\"tag\":%d,\"site\":", e->seq, e->count, cohort_trace_dtype_name(e->dtype),
            cohort_trace_redop_name(e->redop), e->root, e->tag);
    tl_str(t, s);
    fprintf(t->f, ",\"state\":\"%s\",\"status\":\"%s\",\"queued_us\":%" PRIu64 "}}",
            unfinished(e) ? "pending at dump" : cohort_call_state_name(e->state),
            cohort_status_name((cohort_status)e->status),
            e->t_start_us > e->t_issue_us ? e->t_start_us - e->t_issue_us : 0);
}

static void tl_instant(tl *t, int rank, uint64_t ts, const char *name, const char *detail)
{
    tl_event_begin(t);
    fprintf(t->f, "{\"ph\":\"i\",\"s\":\"p\",\"cat\":\"cohort\",\"name\":");
    tl_str(t, name);
    fprintf(t->f, ",\"pid\":%d,\"tid\":0,\"ts\":%" PRIu64 ",\"args\":{\"detail\":",
            t->pid_base + rank, rel(t, ts));
    tl_str(t, detail);
    fputs("}}", t->f);
}

static void tl_meta(tl *t, int rank, const dump *d)
{
    char name[300], grp[32] = "";
    if (t->pid_base)
        snprintf(grp, sizeof grp, "group %" PRIu32 " ", t->group);
    if (d)
        snprintf(name, sizeof name, "%srank %d (%s, pid %ld)", grp, rank, d->h.host, d->h.pid);
    else
        snprintf(name, sizeof name, "%srank %d (no dump)", grp, rank);
    rank += t->pid_base;
    tl_event_begin(t);
    fprintf(t->f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":", rank);
    tl_str(t, name);
    fputs("}}", t->f);
    tl_event_begin(t);
    fprintf(t->f, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":"
            "{\"sort_index\":%d}}", rank, rank);
    for (int tid = 0; tid < 2; tid++) {
        tl_event_begin(t);
        fprintf(t->f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":"
                "{\"name\":\"%s\"}}", rank, tid, tid ? "send/recv" : "collectives");
    }
}

/* ---- one group ---- */

static int analyze_group(dump **by_rank, int size, const char *job, uint32_t group, uint32_t gen,
                         tl *timeline)
{
    int problems = 0; /* P_* bits */
    rank_state *rs = calloc((size_t)size, sizeof *rs);
    cohort_trace_history *hist = calloc((size_t)size, sizeof *hist);
    cohort_fingerprint **fps = calloc((size_t)size, sizeof *fps);
    int *tmp = calloc((size_t)size + 1, sizeof *tmp);
    unsigned char *odd = calloc((size_t)size, 1);
    if (!rs || !hist || !fps || !tmp || !odd) {
        fprintf(stderr, "cohort-trace: out of memory\n");
        exit(2);
    }
    int ndumps = 0;
    for (int r = 0; r < size; r++) {
        rank_state *s = &rs[r];
        s->d = by_rank[r];
        if (!s->d)
            continue;
        ndumps++;
        dump *d = s->d;
        fps[r] = calloc((size_t)d->n + 1, sizeof(cohort_fingerprint));
        hist[r].fp = fps[r];
        if (!fps[r]) {
            fprintf(stderr, "cohort-trace: out of memory\n");
            exit(2);
        }
        for (int i = 0; i < d->n; i++) {
            const cohort_trace_entry *e = &d->e[i];
            if (is_coll(e->coll)) {
                cohort_trace_entry_fingerprint(e, d->h.group, d->h.generation,
                                               &fps[r][hist[r].n++]);
                if (!s->has_issued || e->seq > s->max_issued)
                    s->max_issued = e->seq;
                s->has_issued = 1;
                if (e->state == COHORT_CALL_COMPLETED &&
                    (!s->last_done || e->seq > s->last_done->seq))
                    s->last_done = e;
                if (unfinished(e) && !s->pend_coll)
                    s->pend_coll = e;
            }
            if (unfinished(e) && !s->pending)
                s->pending = e;
            if (e->state == COHORT_CALL_FAILED && !s->failed)
                s->failed = e;
        }
    }

    printf("job %s, group %" PRIu32 ", generation %" PRIu32 ": %d rank%s, %d dump%s\n", job, group,
           gen, size, size == 1 ? "" : "s", ndumps, ndumps == 1 ? "" : "s");
    /* The dump reason: once if every rank has the same (the usual case:
     * the global contract report, or SIGUSR1), else per rank below. */
    const char *reason = NULL;
    int same_reason = 1;
    for (int r = 0; r < size; r++)
        if (rs[r].d) {
            if (!reason)
                reason = rs[r].d->h.reason;
            else if (strcmp(reason, rs[r].d->h.reason))
                same_reason = 0;
        }
    if (same_reason && reason && reason[0])
        printf("dump reason: %s\n", reason);
    enum { P_DIV = 1, P_MISSING = 2, P_STALL = 4, P_CYCLE = 8, P_FAILED = 16 };

    /* 1. The first divergence, by the library's own analysis. */
    char report[COHORT_TRACE_TEXT * 4];
    cohort_trace_divergence div;
    int found = cohort_trace_analyze(hist, size, report, sizeof report, &div, odd) == 1;
    if (found) {
        problems |= P_DIV;
        printf("first divergence: %s\n", report);
    } else {
        printf("contracts: %s\n", report);
    }

    /* 2. Where every rank is. */
    int nmissing = 0;
    printf("ranks:\n");
    for (int r = 0; r < size; r++) {
        rank_state *s = &rs[r];
        char a[400], b[400];
        if (!s->d) {
            tmp[nmissing++] = r;
            printf("  rank %d: no dump (missing: dead, killed before dumping, or "
                   "COHORT_TRACE_DIR not set there)\n", r);
            continue;
        }
        printf("  rank %d (%s, pid %ld): ", r, s->d->h.host, s->d->h.pid);
        if (s->last_done) {
            describe(a, sizeof a, s->last_done);
            printf("last completed %s", a);
        } else {
            printf("no completed collective");
        }
        if (s->pending) {
            describe(b, sizeof b, s->pending);
            printf("; pending %s, %s for %.3f s at dump", b,
                   s->pending->state == COHORT_CALL_STARTED ? "running" : "queued",
                   secs(s->pending->t_issue_us, s->d->h.time_us));
        } else {
            printf("; no pending call");
        }
        if (s->failed) {
            describe(b, sizeof b, s->failed);
            printf("; failed %s with %s", b, cohort_status_name((cohort_status)s->failed->status));
        }
        if (s->d->h.recorded > (uint64_t)s->d->h.capacity && s->d->h.capacity > 0)
            printf(" [oldest %" PRIu64 " calls overwritten]",
                   s->d->h.recorded - (uint64_t)s->d->h.capacity);
        printf("\n");
        if (!same_reason && s->d->h.reason[0] && !quiet)
            printf("    dump reason: %s\n", s->d->h.reason);
    }
    if (nmissing) {
        char rl[600];
        fmt_ranks(rl, sizeof rl, tmp, nmissing);
        printf("missing: %s (no dump)\n", rl);
        problems |= P_MISSING;
    }

    /* 3. Stalls: a rank waits in collective #s that others never issued. */
    for (int r = 0; r < size; r++) {
        rank_state *s = &rs[r];
        if (!s->d || !s->pend_coll)
            continue;
        uint64_t want = s->pend_coll->seq;
        int nb = 0;
        for (int q = 0; q < size; q++)
            if (rs[q].d && q != r && (!rs[q].has_issued || rs[q].max_issued < want))
                tmp[nb++] = q;
        if (!nb)
            continue;
        /* Report each waited-for set once: from its lowest waiting rank. */
        int first = 1;
        for (int p = 0; p < r; p++)
            if (rs[p].d && rs[p].pend_coll && rs[p].pend_coll->seq == want)
                first = 0;
        if (!first)
            continue;
        int nw = 0;
        int *waiters = calloc((size_t)size, sizeof *waiters);
        for (int p = 0; p < size; p++)
            if (rs[p].d && rs[p].pend_coll && rs[p].pend_coll->seq == want)
                waiters[nw++] = p;
        char wl[600], bl[600], what[400];
        fmt_ranks(wl, sizeof wl, waiters, nw);
        fmt_ranks(bl, sizeof bl, tmp, nb);
        describe(what, sizeof what, s->pend_coll);
        printf("stall: %s wait%s in %s; %s never issued #%" PRIu64 ":\n", wl, nw == 1 ? "s" : "",
               what, bl, want);
        for (int i = 0; i < nb; i++) {
            rank_state *b = &rs[tmp[i]];
            char x[400] = "no completed collective", y[400] = "no pending call";
            if (b->last_done)
                describe(x, sizeof x, b->last_done);
            if (b->pending)
                describe(y, sizeof y, b->pending);
            printf("  rank %d stopped after %s; %s%s\n", tmp[i], x, b->pending ? "pending " : "",
                   y);
        }
        if (timeline)
            for (int i = 0; i < nw; i++) {
                char det[1100];
                snprintf(det, sizeof det, "waits in %s for %s", what, bl);
                tl_instant(timeline, waiters[i], rs[waiters[i]].d->h.time_us, "stall", det);
            }
        free(waiters);
        problems |= P_STALL;
    }

    /* 4. Send/recv wait cycles: each rank waits on at most one peer (its
     * oldest pending call), so follow the edges. */
    for (int r = 0; r < size; r++) {
        int len = 0, cur = r;
        while (len <= size && rs[cur].d && rs[cur].pending && is_p2p(rs[cur].pending->coll)) {
            int nxt = rs[cur].pending->root;
            if (nxt < 0 || nxt >= size)
                break;
            tmp[len++] = cur;
            cur = nxt;
            if (cur == r)
                break;
        }
        if (cur != r || len < 2)
            continue;
        /* Print each cycle once: from its lowest rank. */
        int lowest = 1;
        for (int i = 0; i < len; i++)
            if (tmp[i] < r)
                lowest = 0;
        if (!lowest)
            continue;
        printf("deadlock: send/recv wait cycle");
        for (int i = 0; i < len; i++) {
            char what[400];
            describe(what, sizeof what, rs[tmp[i]].pending);
            printf("%s rank %d in %s", i ? " ->" : ":", tmp[i], what);
        }
        printf(" -> rank %d\n", r);
        problems |= P_CYCLE;
    }

    /* 5. Failed calls are problems even when the histories agree. */
    for (int r = 0; r < size; r++)
        if (rs[r].d && rs[r].failed)
            problems |= P_FAILED;

    /* Timeline: slices per call, instants where it went wrong. */
    if (timeline) {
        for (int r = 0; r < size; r++) {
            tl_meta(timeline, r, rs[r].d);
            if (!rs[r].d)
                continue;
            const dump *d = rs[r].d;
            for (int i = 0; i < d->n; i++)
                tl_call(timeline, r, d, &d->e[i]);
            char det[COHORT_TRACE_TEXT + 32];
            snprintf(det, sizeof det, "%s", d->h.reason);
            tl_instant(timeline, r, d->h.time_us, "dump", det);
            if (found && odd[r]) {
                const cohort_trace_entry *at = NULL;
                for (int i = 0; i < d->n; i++)
                    if (is_coll(d->e[i].coll) && d->e[i].seq == div.seq)
                        at = &d->e[i];
                if (at) {
                    char nm[96];
                    snprintf(nm, sizeof nm, "mismatch: %s",
                             div.kind == COHORT_TRACE_DIV_EXTRA     ? "extra call"
                             : div.kind == COHORT_TRACE_DIV_SKIPPED ? "skipped call"
                             : div.kind == COHORT_TRACE_DIV_SHIFTED ? "out of step"
                                                           : div.field);
                    tl_instant(timeline, r, at->t_issue_us, nm, report);
                }
            }
        }
    }

    if (!problems) {
        printf("result: consistent\n\n");
    } else {
        static const char *const what[] = {"divergence", "missing ranks", "stall",
                                           "send/recv deadlock", "failed calls"};
        printf("result: PROBLEM (");
        for (int b = 0, k = 0; b < 5; b++)
            if (problems & (1 << b))
                printf("%s%s", k++ ? ", " : "", what[b]);
        printf(")\n\n");
    }
    for (int r = 0; r < size; r++)
        free(fps[r]);
    free(fps);
    free(hist);
    free(rs);
    free(tmp);
    free(odd);
    return problems;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: cohort-trace [--timeline OUT.json] [--quiet] DIR\n"
               "       cohort-trace -h|--help, -V|--version\n"
               "Reads every rank's flight-recorder dump (*.jsonl, written on errors,\n"
               "timeouts, SIGUSR1 or cohort_trace_dump into COHORT_TRACE_DIR) and reports\n"
               "the first divergence between ranks, missing or stalled ranks and where they\n"
               "stopped. --timeline writes a Chrome/Perfetto trace (open it in\n"
               "ui.perfetto.dev or chrome://tracing).\n"
               "Exit status: 0 consistent, 1 problem found, 2 usage or I/O error.\n");
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *timeline_path = NULL;
    static const struct option lo[] = {
        {"timeline", required_argument, 0, 't'},
        {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0},
    };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":qhV", lo, NULL)) != -1) {
        switch (c) {
        case 't':
            timeline_path = optarg;
            break;
        case 'q':
            quiet = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            cli_version("cohort-trace");
            return 0;
        default:
            return cli_opt_error("cohort-trace", c, argv, lo);
        }
    }
    for (int i = optind; i < argc; i++) {
        if (dir) {
            fprintf(stderr, "cohort-trace: one directory only (got %s and %s)\n", dir, argv[i]);
            return 2;
        }
        dir = argv[i];
    }
    if (!dir) {
        usage(stderr);
        return 2;
    }
    DIR *dd = opendir(dir);
    if (!dd) {
        fprintf(stderr, "cohort-trace: %s: %s\n", dir, strerror(errno));
        return 2;
    }
    dump *dumps = NULL;
    int nd = 0, cd = 0;
    struct dirent *de;
    while ((de = readdir(dd))) {
        /* Hidden files are the recorder's temporaries. */
        if (de->d_name[0] == '.' || !ends_with(de->d_name, ".jsonl"))
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (nd == cd) {
            cd = cd ? cd * 2 : 16;
            dumps = xrealloc(dumps, sizeof *dumps * (size_t)cd);
        }
        if (read_dump(path, &dumps[nd]) == 0)
            nd++;
    }
    closedir(dd);
    if (!nd) {
        fprintf(stderr, "cohort-trace: %s: no readable dumps (*.jsonl)\n", dir);
        free(dumps);
        return 2;
    }
    qsort(dumps, (size_t)nd, sizeof *dumps, dump_order);

    tl timeline = {0};
    if (timeline_path) {
        timeline.f = fopen(timeline_path, "w");
        if (!timeline.f) {
            fprintf(stderr, "cohort-trace: %s: %s\n", timeline_path, strerror(errno));
            for (int i = 0; i < nd; i++)
                free(dumps[i].e);
            free(dumps);
            return 2;
        }
        timeline.first = 1;
        timeline.t0 = UINT64_MAX;
        for (int i = 0; i < nd; i++)
            for (int k = 0; k < dumps[i].n; k++)
                if (dumps[i].e[k].t_issue_us && dumps[i].e[k].t_issue_us < timeline.t0)
                    timeline.t0 = dumps[i].e[k].t_issue_us;
        if (timeline.t0 == UINT64_MAX)
            timeline.t0 = 0;
        fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", timeline.f);
    }

    /* One analysis per (job, group), newest generation only. */
    int problems = 0;
    for (int i = 0; i < nd;) {
        int j = i;
        while (j < nd && !strcmp(dumps[j].h.job, dumps[i].h.job) &&
               dumps[j].h.group == dumps[i].h.group)
            j++;
        uint32_t gen = dumps[i].h.generation;
        int size = 0;
        for (int k = i; k < j; k++) {
            if (dumps[k].h.generation != gen) {
                dumps[k].ignored = 1;
                warn("%s: generation %" PRIu32 " is older than %" PRIu32 "; ignored",
                     dumps[k].path, dumps[k].h.generation, gen);
                continue;
            }
            if (dumps[k].h.size > size)
                size = dumps[k].h.size;
        }
        dump **by_rank = calloc((size_t)size, sizeof *by_rank);
        if (!by_rank) {
            fprintf(stderr, "cohort-trace: out of memory\n");
            return 2;
        }
        for (int k = i; k < j; k++) {
            if (dumps[k].ignored)
                continue;
            if (dumps[k].h.size != size)
                warn("%s: says the group has %d ranks, other dumps say %d", dumps[k].path,
                     dumps[k].h.size, size);
            if (by_rank[dumps[k].h.rank]) {
                warn("%s: a second dump of rank %d; using the later %s", dumps[k].path,
                     dumps[k].h.rank, by_rank[dumps[k].h.rank]->path);
                continue;
            }
            by_rank[dumps[k].h.rank] = &dumps[k];
        }
        timeline.group = dumps[i].h.group;
        problems |= analyze_group(by_rank, size, dumps[i].h.job, dumps[i].h.group, gen,
                                  timeline.f ? &timeline : NULL);
        timeline.pid_base += 100000; /* next group: its own rows */
        free(by_rank);
        i = j;
    }

    int rc = problems ? 1 : 0;
    if (timeline.f) {
        fputs("\n]}\n", timeline.f);
        if (fclose(timeline.f) != 0) {
            fprintf(stderr, "cohort-trace: %s: %s\n", timeline_path, strerror(errno));
            rc = 2;
        } else if (!quiet) {
            printf("timeline: %s\n", timeline_path);
        }
    }
    for (int i = 0; i < nd; i++)
        free(dumps[i].e);
    free(dumps);
    return rc;
}
