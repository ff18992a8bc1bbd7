/*
 * check_wire.c - the checker's formats that cross processes through the
 * store (docs/check.md): a fingerprint record, a group's history, a
 * published position, the failure record. The parsers take bytes another
 * process wrote and are fuzzed (tests/fuzz/fuzz_check_wire.c): every field
 * is bounded, nothing is trusted to be NUL-terminated.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check_int.h"

/* ---- record: 80 bytes, little-endian u64/i32 fields ---- */

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#define REC_MAGIC 0x31524b43u /* "CKR1" */

size_t coh_chk_rec_encode(const chk_rec *r, unsigned char out[80])
{
    put64(out, REC_MAGIC);
    put64(out + 8, (uint64_t)(uint32_t)r->reader | (uint64_t)(uint32_t)r->root << 32);
    put64(out + 16, r->gid);
    put64(out + 24, r->seq);
    put64(out + 32, r->op_hash);
    put64(out + 40, r->sig_hash);
    put64(out + 48, r->count);
    put64(out + 56, r->redop_hash);
    put64(out + 64, r->args_hash);
    put64(out + 72, 0);
    return 80;
}

int coh_chk_rec_decode(const void *buf, size_t len, chk_rec *r)
{
    const unsigned char *p = buf;
    if (!buf || len != 80 || get64(p) != REC_MAGIC || get64(p + 72) != 0)
        return -1;
    uint64_t rr = get64(p + 8);
    r->reader = (int32_t)(uint32_t)rr;
    r->root = (int32_t)(uint32_t)(rr >> 32);
    r->gid = get64(p + 16);
    r->seq = get64(p + 24);
    r->op_hash = get64(p + 32);
    r->sig_hash = get64(p + 40);
    r->count = get64(p + 48);
    r->redop_hash = get64(p + 56);
    r->args_hash = get64(p + 64);
    return r->reader < 0 || r->seq == 0 ? -1 : 0;
}

/* ---- text helpers ---- */

/* Appends s with tabs, newlines and other control bytes as spaces. */
static size_t put_text(char *out, size_t cap, size_t pos, const char *s)
{
    for (; s && *s && pos + 1 < cap; s++)
        out[pos++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? ' ' : *s;
    if (pos < cap)
        out[pos] = 0;
    return pos;
}

static size_t put_raw(char *out, size_t cap, size_t pos, char ch)
{
    if (pos + 1 < cap) {
        out[pos++] = ch;
        out[pos] = 0;
    }
    return pos;
}

/* A bounded cursor over untrusted bytes. */
typedef struct cur {
    const char *p, *end;
} cur;

static int eat_u64(cur *c, int base, uint64_t *v)
{
    uint64_t x = 0;
    int n = 0;
    while (c->p < c->end) {
        int d;
        char ch = *c->p;
        if (ch >= '0' && ch <= '9')
            d = ch - '0';
        else if (base == 16 && ch >= 'a' && ch <= 'f')
            d = ch - 'a' + 10;
        else
            break;
        if (x > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            return -1;
        x = x * (uint64_t)base + (uint64_t)d;
        c->p++;
        n++;
    }
    if (!n || n > 20)
        return -1;
    *v = x;
    return 0;
}

static int eat_int(cur *c, int *v)
{
    int neg = 0;
    if (c->p < c->end && *c->p == '-') {
        neg = 1;
        c->p++;
    }
    uint64_t x;
    if (eat_u64(c, 10, &x) || x > (uint64_t)INT32_MAX)
        return -1;
    *v = neg ? -(int)x : (int)x;
    return 0;
}

static int eat_ch(cur *c, char ch)
{
    if (c->p >= c->end || *c->p != ch)
        return -1;
    c->p++;
    return 0;
}

/* Copies up to the next tab/newline (or end) into out (truncated). */
/* A text field, up to a tab or newline. Control bytes (NUL included) read
 * as spaces, as put_text writes them: these strings end up in reports on
 * terminals, and a parsed field formats back to the same bytes. */
static void eat_field(cur *c, char *out, size_t cap)
{
    size_t n = 0;
    while (c->p < c->end && *c->p != '\t' && *c->p != '\n') {
        unsigned char ch = (unsigned char)*c->p;
        if (n + 1 < cap)
            out[n++] = (ch < 0x20 || ch == 0x7f) ? ' ' : (char)ch;
        c->p++;
    }
    out[n] = 0;
}

/* ---- history ---- */

#define HIST_MAGIC "cohort-check-hist 1 "

char *coh_chk_hist_format(const cohort_check_group *g, const char *const *sites, size_t *len)
{
    size_t cap = 256 + (size_t)CHK_HIST * (160 + 2 * CHK_OP_MAX + 2 * CHK_TEXT_MAX + CHK_SITE_MAX);
    char *out = coh_malloc(cap);
    if (!out)
        return NULL;
    int k = 0;
    for (int i = 0; i < CHK_HIST; i++)
        if (g->seq >= (uint64_t)i + 1 && g->hist[(g->seq - (uint64_t)i) % CHK_HIST].f.seq ==
                                             g->seq - (uint64_t)i)
            k++;
        else
            break;
    size_t pos = (size_t)snprintf(out, cap, HIST_MAGIC "%016" PRIx64 " %d %d ", g->id, g->me, k);
    pos = put_text(out, cap, pos, g->name);
    pos += (size_t)snprintf(out + pos, cap - pos, "\n");
    for (int i = k - 1; i >= 0 && pos < cap; i--) {
        uint64_t s = g->seq - (uint64_t)i;
        const chk_hent *e = &g->hist[s % CHK_HIST];
        const char *site = sites ? sites[s % CHK_HIST] : NULL;
        char file[CHK_SITE_MAX];
        int line = e->line;
        /* The site as file:line is split back into its parts. */
        if (site && site[0]) {
            snprintf(file, sizeof file, "%s", site);
            char *colon = strrchr(file, ':');
            if (colon && colon[1]) {
                *colon = 0;
                line = atoi(colon + 1);
            }
        } else {
            snprintf(file, sizeof file, "%s", e->file ? e->file : "");
        }
        pos += (size_t)snprintf(out + pos, cap - pos,
                                "%" PRIu64 " %" PRIx64 " %" PRIx64 " %" PRIu64 " %" PRIx64 " %d %" PRIx64
                                " %d\t",
                                e->f.seq, e->f.op_hash, e->f.sig_hash, e->f.count, e->f.redop_hash,
                                e->f.root, e->f.args_hash, line);
        pos = put_text(out, cap, pos, e->op);
        pos = put_raw(out, cap, pos, '\t');
        pos = put_text(out, cap, pos, e->sig);
        pos = put_raw(out, cap, pos, '\t');
        pos = put_text(out, cap, pos, e->redop);
        pos = put_raw(out, cap, pos, '\t');
        pos = put_text(out, cap, pos, e->args);
        pos = put_raw(out, cap, pos, '\t');
        pos = put_text(out, cap, pos, file);
        pos = put_raw(out, cap, pos, '\n');
    }
    if (pos >= cap)
        pos = cap - 1;
    *len = pos;
    return out;
}

int coh_chk_hist_parse(const char *v, size_t len, uint64_t *gid, int *member, chk_hline **out,
                       int *n, char *why, size_t whylen)
{
    *out = NULL;
    *n = 0;
    size_t ml = strlen(HIST_MAGIC);
    if (!v || len < ml || memcmp(v, HIST_MAGIC, ml)) {
        snprintf(why, whylen, "not a checker history");
        return -1;
    }
    cur c = {v + ml, v + len};
    int k;
    if (eat_u64(&c, 16, gid) || eat_ch(&c, ' ') || eat_int(&c, member) || eat_ch(&c, ' ') ||
        eat_int(&c, &k) || eat_ch(&c, ' ') || *member < 0 || k < 0 || k > CHK_HIST) {
        snprintf(why, whylen, "bad history header");
        return -1;
    }
    char name[64];
    eat_field(&c, name, sizeof name);
    if (eat_ch(&c, '\n')) {
        snprintf(why, whylen, "bad history header");
        return -1;
    }
    chk_hline *h = coh_calloc((size_t)(k ? k : 1), sizeof *h);
    if (!h) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    for (int i = 0; i < k; i++) {
        chk_hline *e = &h[i];
        if (eat_u64(&c, 10, &e->f.seq) || eat_ch(&c, ' ') || eat_u64(&c, 16, &e->f.op_hash) ||
            eat_ch(&c, ' ') || eat_u64(&c, 16, &e->f.sig_hash) || eat_ch(&c, ' ') ||
            eat_u64(&c, 10, &e->f.count) || eat_ch(&c, ' ') ||
            eat_u64(&c, 16, &e->f.redop_hash) || eat_ch(&c, ' ') || eat_int(&c, &e->f.root) ||
            eat_ch(&c, ' ') || eat_u64(&c, 16, &e->f.args_hash) || eat_ch(&c, ' ') ||
            eat_int(&c, &e->line) || eat_ch(&c, '\t')) {
            snprintf(why, whylen, "bad history entry %d", i);
            coh_free(h);
            return -1;
        }
        eat_field(&c, e->op, sizeof e->op);
        int bad = eat_ch(&c, '\t');
        eat_field(&c, e->sig, sizeof e->sig);
        bad |= eat_ch(&c, '\t');
        eat_field(&c, e->redop, sizeof e->redop);
        bad |= eat_ch(&c, '\t');
        eat_field(&c, e->args, sizeof e->args);
        bad |= eat_ch(&c, '\t');
        eat_field(&c, e->file, sizeof e->file);
        bad |= eat_ch(&c, '\n');
        if (bad || (i && e->f.seq != h[i - 1].f.seq + 1)) {
            snprintf(why, whylen, "bad history entry %d", i);
            coh_free(h);
            return -1;
        }
    }
    *out = h;
    *n = k;
    return 0;
}

/* ---- position ---- */

#define POS_MAGIC "cohort-check-pos 1 "
/* state peer tag is_send gid seq episode age last_gid last_seq last_end, then
 * four tab-separated strings */

size_t coh_chk_pos_format(const chk_pos *p, char *out, size_t len)
{
    size_t pos = (size_t)snprintf(
        out, len, POS_MAGIC "%d %d %d %d %" PRIx64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIx64
                            " %" PRIu64 " %" PRIu64 "\t",
        p->state, p->peer, p->tag, p->is_send, p->gid, p->seq, p->episode, p->start_ns, p->last_gid, p->last_seq,
        p->last_end_ns);
    if (pos >= len)
        return len ? len - 1 : 0;
    pos = put_text(out, len, pos, p->op);
    pos = put_raw(out, len, pos, '\t');
    pos = put_text(out, len, pos, p->site);
    pos = put_raw(out, len, pos, '\t');
    pos = put_text(out, len, pos, p->last_op);
    pos = put_raw(out, len, pos, '\t');
    pos = put_text(out, len, pos, p->last_site);
    return pos;
}

int coh_chk_pos_parse(const char *v, size_t len, chk_pos *p)
{
    memset(p, 0, sizeof *p);
    size_t ml = strlen(POS_MAGIC);
    if (!v || len < ml || memcmp(v, POS_MAGIC, ml))
        return -1;
    cur c = {v + ml, v + len};
    if (eat_int(&c, &p->state) || eat_ch(&c, ' ') || eat_int(&c, &p->peer) || eat_ch(&c, ' ') ||
        eat_int(&c, &p->tag) || eat_ch(&c, ' ') || eat_int(&c, &p->is_send) || eat_ch(&c, ' ') ||
        eat_u64(&c, 16, &p->gid) || eat_ch(&c, ' ') || eat_u64(&c, 10, &p->seq) ||
        eat_ch(&c, ' ') || eat_u64(&c, 10, &p->episode) || eat_ch(&c, ' ') ||
        eat_u64(&c, 10, &p->start_ns) || eat_ch(&c, ' ') || eat_u64(&c, 16, &p->last_gid) ||
        eat_ch(&c, ' ') || eat_u64(&c, 10, &p->last_seq) || eat_ch(&c, ' ') ||
        eat_u64(&c, 10, &p->last_end_ns) || eat_ch(&c, '\t'))
        return -1;
    if (p->state < CHK_POS_IDLE || p->state > CHK_POS_WAIT || p->is_send < 0 || p->is_send > 1)
        return -1;
    eat_field(&c, p->op, sizeof p->op);
    if (eat_ch(&c, '\t'))
        return -1;
    eat_field(&c, p->site, sizeof p->site);
    if (eat_ch(&c, '\t'))
        return -1;
    eat_field(&c, p->last_op, sizeof p->last_op);
    if (eat_ch(&c, '\t'))
        return -1;
    eat_field(&c, p->last_site, sizeof p->last_site);
    return c.p == c.end ? 0 : -1;
}

/* ---- failure record ---- */

int coh_chk_fail_parse(const char *v, size_t len, int *kind, uint64_t *gid, uint64_t *seq,
                       int *member, const char **text)
{
    if (!v || len < 2 || v[1] != ' ')
        return -1;
    cur c = {v + 2, v + len};
    *gid = 0, *seq = 0, *member = -1;
    if (v[0] == 'M') {
        *kind = COHORT_CHECK_MISMATCH;
        if (eat_u64(&c, 16, gid) || eat_ch(&c, ' ') || eat_u64(&c, 10, seq) || eat_ch(&c, ' ') ||
            eat_int(&c, member) || eat_ch(&c, ' ') || *member < 0)
            return -1;
    } else if (v[0] == 'R') {
        if (eat_int(&c, kind) || eat_ch(&c, ' ') || *kind < COHORT_CHECK_MISMATCH ||
            *kind > COHORT_CHECK_ABORTED || *kind == COHORT_CHECK_STALL)
            return -1;
    } else {
        return -1;
    }
    *text = c.p; /* the rest, up to len (not NUL-terminated) */
    return 0;
}
