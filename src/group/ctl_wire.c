/* ctl_wire.c - parsing and writing the store's abort record (ctl_wire.h). */
#include "group/ctl_wire.h"

#include <stdio.h>
#include <string.h>

#include "core/group.h"
#include "util/txt.h"

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

int coh_ctl_state_parse(const char *rec, size_t len, int size, coh_ctl_state *s, char *err,
                        size_t errlen)
{
    memset(s, 0, sizeof *s);
    size_t i = 0;
    uint64_t v;
    if (coh_txt_u64(rec, len, &i, 20, UINT64_MAX, &s->last) || coh_txt_sep(rec, len, &i))
        return bad(err, errlen, "the last completed call is not a decimal number");
    if (coh_txt_u64(rec, len, &i, 20, UINT64_MAX, &s->seq) || coh_txt_sep(rec, len, &i))
        return bad(err, errlen, "the current call is not a decimal number");
    if (coh_txt_u64(rec, len, &i, 3, COH_COLL_KIND_COUNT - 1, &v) || coh_txt_sep(rec, len, &i))
        return bad(err, errlen, "the operation is not a known one");
    s->coll = (int)v;
    int64_t p;
    if (size < 1 || coh_txt_i64(rec, len, &i, -1, size - 1, &p) || coh_txt_sep(rec, len, &i))
        return bad(err, errlen, "the peer is not -1 or a rank of the group");
    s->peer = (int)p;
    if (s->peer >= 0 && s->coll != COH_COLL_SEND && s->coll != COH_COLL_RECV)
        return bad(err, errlen, "a peer for an operation that is not a send or recv");
    if (coh_txt_u64(rec, len, &i, 10, 2147483647u, &v) || coh_txt_sep(rec, len, &i))
        return bad(err, errlen, "the line is not a decimal number");
    s->line = (int)v;
    if (coh_txt_rest(rec, len, i, s->file, sizeof s->file) == 0)
        return bad(err, errlen, "no file");
    return 0;
}
