/* ctl_wire.c - parsing and writing the store's abort record (ctl_wire.h). */
#include "group/ctl_wire.h"

#include <stdio.h>
#include <string.h>

#include "core/group.h"

static int bad(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "%s", what);
    return -1;
}

static int digit(char c) { return c >= '0' && c <= '9'; }

static void add_note(coh_ctl_abort *a, const char *what)
{
    size_t o = strlen(a->note);
    snprintf(a->note + o, sizeof a->note - o, "%s%s", o ? "; " : "", what);
}

int coh_ctl_abort_parse(const char *rec, size_t len, int size, coh_ctl_abort *a, char *err,
                        size_t errlen)
{
    memset(a, 0, offsetof(coh_ctl_abort, reason));
    a->reason[0] = 0;
    a->note[0] = 0;
    size_t i = 0;
    if (len < 2 || rec[0] != 'A' || rec[1] != ' ')
        return bad(err, errlen, "not an abort record (\"A <rank> <status>...\")");
    i = 2;
    /* rank: plain decimal, at most 9 digits (no sign, no overflow) */
    long r = 0;
    size_t s0 = i;
    while (i < len && digit(rec[i]) && i - s0 < 10)
        r = r * 10 + (rec[i++] - '0');
    if (i == s0 || i - s0 > 9 || (i < len && rec[i] != ' '))
        return bad(err, errlen, "the rank is not a decimal number");
    if (r >= size)
        return bad(err, errlen, "the rank is outside the group");
    a->from = (int)r;
    if (i >= len || rec[i] != ' ')
        return bad(err, errlen, "no status after the rank");
    i++;
    /* status: a decimal with an optional '-'; unknown values are ABORTED */
    int neg = 0;
    if (i < len && rec[i] == '-') {
        neg = 1;
        i++;
    }
    long st = 0;
    s0 = i;
    while (i < len && digit(rec[i])) {
        if (st < 1000000)
            st = st * 10 + (rec[i] - '0');
        i++;
    }
    if (i == s0 || (i < len && rec[i] != ' ' && rec[i] != ':'))
        return bad(err, errlen, "the status is not a decimal number");
    if (neg || st < COHORT_ERR_INVALID || st > COHORT_ERR_UNSUPPORTED) {
        a->st = COHORT_ERR_ABORTED;
        add_note(a, "unknown status, taken as COHORT_ERR_ABORTED");
    } else {
        a->st = (cohort_status)st;
    }
    /* ":<seq>": 1..UINT64_MAX, else the failure names no call */
    if (i < len && rec[i] == ':') {
        i++;
        uint64_t q = 0;
        int ok = 1;
        s0 = i;
        while (i < len && digit(rec[i])) {
            unsigned d = (unsigned)(rec[i] - '0');
            if (q > (UINT64_MAX - d) / 10)
                ok = 0;
            else
                q = q * 10 + d;
            i++;
        }
        if (i == s0 || q == 0)
            ok = 0;
        while (i < len && rec[i] != ' ') /* the rest of a malformed number */
            i++, ok = 0;
        if (ok)
            a->seq = q;
        else
            add_note(a, "unreadable call number, dropped");
    }
    while (i < len && rec[i] == ' ')
        i++;
    size_t n = len - i, cap = sizeof a->reason - 1;
    if (n > cap) {
        n = cap;
        add_note(a, "reason cut to 1023 bytes");
    }
    int ctl = 0;
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)rec[i + k];
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
            c = '?';
            ctl = 1;
        }
        a->reason[k] = (char)c;
    }
    a->reason[n] = 0;
    if (ctl)
        add_note(a, "control bytes in the reason replaced by '?'");
    if (!n)
        snprintf(a->reason, sizeof a->reason, "(no reason given)");
    return 0;
}

int coh_ctl_abort_format(char *out, size_t len, int rank, cohort_status st, uint64_t seq,
                         const char *reason)
{
    if (seq)
        return snprintf(out, len, "A %d %d:%llu %s", rank, (int)st, (unsigned long long)seq,
                        reason);
    return snprintf(out, len, "A %d %d %s", rank, (int)st, reason);
}

/* A plain decimal token at rec[*i] (no sign, at most maxd digits, value <=
 * hi); advances *i past it. */
static int dec(const char *rec, size_t len, size_t *i, int maxd, uint64_t hi, uint64_t *out)
{
    size_t s0 = *i;
    uint64_t v = 0;
    while (*i < len && digit(rec[*i])) {
        if ((int)(*i - s0) >= maxd)
            return -1;
        uint64_t d = (uint64_t)(rec[*i] - '0');
        if (d > hi || v > (hi - d) / 10)
            return -1;
        v = v * 10 + d;
        (*i)++;
    }
    if (*i == s0)
        return -1;
    *out = v;
    return 0;
}

/* The rest of the record from i as a file name: cut to fit, control bytes
 * as '?'. Returns its length. */
static size_t rest_file(const char *rec, size_t len, size_t i, char *out, size_t outlen)
{
    size_t n = 0;
    for (; i < len && n < outlen - 1; i++) {
        unsigned char c = (unsigned char)rec[i];
        out[n++] = (c < ' ' || c == 0x7f) ? '?' : (char)c;
    }
    out[n] = 0;
    return n;
}

static int sep(const char *rec, size_t len, size_t *i)
{
    if (*i >= len || rec[*i] != ' ')
        return -1;
    (*i)++;
    return 0;
}

int coh_ctl_state_parse(const char *rec, size_t len, int size, coh_ctl_state *s, char *err,
                        size_t errlen)
{
    memset(s, 0, sizeof *s);
    size_t i = 0;
    uint64_t v;
    if (dec(rec, len, &i, 20, UINT64_MAX, &s->last) || sep(rec, len, &i))
        return bad(err, errlen, "the last completed call is not a decimal number");
    if (dec(rec, len, &i, 20, UINT64_MAX, &s->seq) || sep(rec, len, &i))
        return bad(err, errlen, "the current call is not a decimal number");
    if (dec(rec, len, &i, 3, COH_COLL_KIND_COUNT - 1, &v) || sep(rec, len, &i))
        return bad(err, errlen, "the operation is not a known one");
    s->coll = (int)v;
    if (i + 1 < len && rec[i] == '-' && rec[i + 1] == '1') {
        s->peer = -1;
        i += 2;
    } else if (dec(rec, len, &i, 10, (uint64_t)(size > 0 ? size - 1 : 0), &v) == 0 && size > 0) {
        s->peer = (int)v;
    } else {
        return bad(err, errlen, "the peer is not -1 or a rank of the group");
    }
    if (sep(rec, len, &i))
        return bad(err, errlen, "the peer is not -1 or a rank of the group");
    if (s->peer >= 0 && s->coll != COH_COLL_SEND && s->coll != COH_COLL_RECV)
        return bad(err, errlen, "a peer for an operation that is not a send or recv");
    if (dec(rec, len, &i, 10, 2147483647u, &v) || sep(rec, len, &i))
        return bad(err, errlen, "the line is not a decimal number");
    s->line = (int)v;
    if (rest_file(rec, len, i, s->file, sizeof s->file) == 0)
        return bad(err, errlen, "no file");
    return 0;
}

/* A signed plain decimal within [lo, hi]. */
static int sdec(const char *rec, size_t len, size_t *i, int64_t lo, int64_t hi, int64_t *out)
{
    int neg = *i < len && rec[*i] == '-';
    if (neg && lo >= 0)
        return -1;
    if (neg)
        (*i)++;
    uint64_t v;
    if (dec(rec, len, i, 19, neg ? (uint64_t)(-(lo + 1)) + 1 : (uint64_t)hi, &v))
        return -1;
    if (neg && v == 0)
        return -1; /* "-0" */
    *out = neg ? -(int64_t)(v - 1) - 1 : (int64_t)v;
    return *out < lo || *out > hi ? -1 : 0;
}

int coh_ctl_fp_parse(const char *rec, size_t len, coh_ctl_fp *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    size_t i = 0;
    int64_t v;
    uint64_t u;
    static const char *what[] = {"operation", "data type", "count", "reduce op", "root", "tag", "line"};
    for (int k = 0; k < 7; k++) {
        int r;
        switch (k) {
        case 0:
        case 1:
            r = sdec(rec, len, &i, 0, 255, &v);
            break;
        case 2:
            r = dec(rec, len, &i, 20, UINT64_MAX, &u);
            break;
        case 3:
            r = sdec(rec, len, &i, -128, 127, &v);
            break;
        case 4:
        case 5:
            r = sdec(rec, len, &i, INT32_MIN, INT32_MAX, &v);
            break;
        default:
            r = sdec(rec, len, &i, 0, INT32_MAX, &v);
            break;
        }
        if (r || sep(rec, len, &i)) {
            snprintf(err, errlen, "the %s is not a number in its range", what[k]);
            return -1;
        }
        switch (k) {
        case 0: f->coll = (int)v; break;
        case 1: f->dtype = (int)v; break;
        case 2: f->count = u; break;
        case 3: f->redop = (int)v; break;
        case 4: f->root = (int32_t)v; break;
        case 5: f->tag = (int32_t)v; break;
        default: f->line = (int)v; break;
        }
    }
    if (rest_file(rec, len, i, f->file, sizeof f->file) == 0)
        return bad(err, errlen, "no file");
    return 0;
}
