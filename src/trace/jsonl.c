/*
 * jsonl.c - writing and parsing the flight recorder's JSON Lines.
 *
 * The parser accepts exactly one flat JSON object per line: string, integer,
 * true/false/null values; nested objects/arrays are skipped under unknown
 * keys (so later versions may add them) and rejected under known ones.
 * Unknown keys are ignored; a later duplicate key wins. Strings are decoded
 * into fixed buffers and cut (still parsed to the end) when too long.
 * Everything is bounded by `len`: the input need not be NUL-terminated, and
 * nesting is limited so hostile input cannot exhaust the stack.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/names.h"
#include "trace/jsonl.h"

/* ---- writing ---- */

static void put(char *buf, size_t buflen, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void put(char *buf, size_t buflen, size_t *pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n;
    if (*pos < buflen)
        n = vsnprintf(buf + *pos, buflen - *pos, fmt, ap);
    else
        n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        *pos += (size_t)n;
}

size_t coh_tl_fmt_header(char *buf, size_t buflen, const coh_tl_header *h)
{
    size_t pos = 0;
    if (buflen)
        buf[0] = 0;
    put(buf, buflen, &pos, "{\"cohort_trace\":%d,\"job\":", COH_TL_VERSION);
    cohort_json_str(buf, buflen, &pos, h->job);
    put(buf, buflen, &pos, ",\"rank\":%d,\"size\":%d,\"generation\":%" PRIu32 ",\"group\":%" PRIu32
        ",\"host\":", h->rank, h->size, h->generation, h->group);
    cohort_json_str(buf, buflen, &pos, h->host);
    put(buf, buflen, &pos, ",\"pid\":%ld,\"reason\":", h->pid);
    cohort_json_str(buf, buflen, &pos, h->reason);
    put(buf, buflen, &pos, ",\"time_us\":%" PRIu64 ",\"capacity\":%d,\"recorded\":%" PRIu64 "}\n",
        h->time_us, h->capacity, h->recorded);
    return pos;
}

size_t coh_tl_fmt_entry(char *buf, size_t buflen, const coh_trace_entry *e)
{
    const coh_call *c = &e->call;
    size_t pos = 0;
    if (buflen)
        buf[0] = 0;
    put(buf, buflen, &pos, "{\"seq\":%" PRIu64 ",\"op\":\"%s\",\"dtype\":\"%s\",\"count\":%" PRIu64
        ",\"redop\":", c->seq, coh_coll_name(c->coll), coh_dtype_str(c->dtype), c->count);
    if (c->redop < 0)
        put(buf, buflen, &pos, "null");
    else
        put(buf, buflen, &pos, "\"%s\"", coh_redop_str(c->redop));
    put(buf, buflen, &pos, ",\"root\":%d,\"tag\":%d,\"file\":", (int)c->root, (int)c->tag);
    /* Keep the tail of very long paths: the basename is what reports use. */
    const char *f = c->file ? c->file : "";
    size_t fl = strlen(f);
    cohort_json_str(buf, buflen, &pos, fl > 255 ? f + fl - 255 : f);
    put(buf, buflen, &pos, ",\"line\":%d,\"state\":\"%s\",\"status\":\"%s\",\"t_issue_us\":%" PRIu64
        ",\"t_start_us\":%" PRIu64 ",\"t_end_us\":%" PRIu64 "}\n", c->line,
        coh_state_name(e->state), cohort_status_name((cohort_status)e->status), e->t_issue_us,
        e->t_start_us, e->t_end_us);
    return pos;
}

size_t coh_tl_fmt_contract(char *buf, size_t buflen, const coh_tl_contract *c)
{
    size_t pos = 0;
    if (buflen)
        buf[0] = 0;
    put(buf, buflen, &pos, "{\"cohort_contract\":%d,\"rank\":%d,\"generation\":%" PRIu32
        ",\"group\":%" PRIu32, COH_TL_VERSION, c->rank, c->generation, c->group);
    if (c->has_detected) {
        put(buf, buflen, &pos, ",\"detected\":");
        cohort_json_str(buf, buflen, &pos, c->detected);
    }
    put(buf, buflen, &pos, "}\n");
    return pos;
}

void coh_tl_entry_fp(const coh_tl_entry *e, uint32_t group, uint32_t generation,
                     cohort_fingerprint *fp)
{
    memset(fp, 0, sizeof *fp);
    fp->seq = e->seq;
    fp->coll = e->coll;
    fp->dtype = e->dtype;
    fp->redop = e->redop;
    fp->root = e->root;
    fp->tag = e->tag;
    fp->count = e->count;
    fp->group = group;
    fp->generation = generation;
    fp->file = e->file;
    fp->line = e->line;
}

/* ---- parsing ---- */

typedef struct jp {
    const char *s;
    size_t len, i;
    char *err;
    size_t errlen;
    int failed;
} jp;

/* Value of one member, as the dispatcher sees it. */
enum { JV_STR, JV_NUM, JV_BOOL, JV_NULL, JV_NESTED };
typedef struct jv {
    int type;
    char str[COH_ERRLEN]; /* decoded (cut at sizeof str - 1) */
    int neg, integral, overflow;
    uint64_t mag;         /* |value| of an integral number */
    int b;
} jv;

static int jp_fail(jp *p, const char *what)
{
    if (!p->failed && p->err && p->errlen)
        snprintf(p->err, p->errlen, "byte %zu: %s", p->i, what);
    p->failed = 1;
    return -1;
}

static void jp_ws(jp *p)
{
    while (p->i < p->len &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\r' || p->s[p->i] == '\n'))
        p->i++;
}

static int jp_lit(jp *p, const char *lit)
{
    size_t n = strlen(lit);
    if (p->len - p->i < n || memcmp(p->s + p->i, lit, n))
        return jp_fail(p, "invalid literal");
    p->i += n;
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int jp_hex4(jp *p, unsigned *out)
{
    if (p->len - p->i < 4)
        return jp_fail(p, "truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(p->s[p->i + (size_t)k]);
        if (h < 0)
            return jp_fail(p, "bad \\u escape");
        v = v << 4 | (unsigned)h;
    }
    p->i += 4;
    *out = v;
    return 0;
}

static void out_byte(char *out, size_t cap, size_t *o, unsigned char c)
{
    if (*o + 1 < cap)
        out[(*o)++] = (char)c;
}

static void out_utf8(char *out, size_t cap, size_t *o, unsigned cp)
{
    /* Never let a partial sequence through when cut: write all or nothing. */
    unsigned char b[4];
    size_t k;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp, k = 1;
    } else if (cp < 0x800) {
        b[0] = (unsigned char)(0xc0 | cp >> 6), b[1] = (unsigned char)(0x80 | (cp & 0x3f)), k = 2;
    } else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xe0 | cp >> 12);
        b[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        b[2] = (unsigned char)(0x80 | (cp & 0x3f));
        k = 3;
    } else {
        b[0] = (unsigned char)(0xf0 | cp >> 18);
        b[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
        b[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        b[3] = (unsigned char)(0x80 | (cp & 0x3f));
        k = 4;
    }
    if (*o + k < cap)
        for (size_t j = 0; j < k; j++)
            out[(*o)++] = (char)b[j];
}

/* Parses a string literal at p->i into out (NUL-terminated, cut to cap). */
static int jp_string(jp *p, char *out, size_t cap)
{
    size_t o = 0;
    if (p->i >= p->len || p->s[p->i] != '"')
        return jp_fail(p, "expected '\"'");
    p->i++;
    for (;;) {
        if (p->i >= p->len)
            return jp_fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c == '"')
            break;
        if (c < 0x20)
            return jp_fail(p, "control character in string");
        if (c != '\\') {
            out_byte(out, cap, &o, c);
            continue;
        }
        if (p->i >= p->len)
            return jp_fail(p, "truncated escape");
        char e = p->s[p->i++];
        unsigned cp;
        switch (e) {
        case '"': case '\\': case '/':
            out_byte(out, cap, &o, (unsigned char)e);
            break;
        case 'b': out_byte(out, cap, &o, '\b'); break;
        case 'f': out_byte(out, cap, &o, '\f'); break;
        case 'n': out_byte(out, cap, &o, '\n'); break;
        case 'r': out_byte(out, cap, &o, '\r'); break;
        case 't': out_byte(out, cap, &o, '\t'); break;
        case 'u':
            if (jp_hex4(p, &cp) < 0)
                return -1;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                unsigned lo;
                if (p->len - p->i < 6 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
                    return jp_fail(p, "lone surrogate in \\u escape");
                p->i += 2;
                if (jp_hex4(p, &lo) < 0)
                    return -1;
                if (lo < 0xdc00 || lo > 0xdfff)
                    return jp_fail(p, "bad surrogate pair");
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                return jp_fail(p, "lone surrogate in \\u escape");
            }
            /* C strings cannot hold NUL: show it. */
            out_utf8(out, cap, &o, cp ? cp : '?');
            break;
        default:
            return jp_fail(p, "bad escape");
        }
    }
    if (cap)
        out[o] = 0;
    return 0;
}

static int jp_number(jp *p, jv *v)
{
    v->type = JV_NUM;
    v->neg = 0;
    v->integral = 1;
    v->overflow = 0;
    v->mag = 0;
    if (p->i < p->len && p->s[p->i] == '-') {
        v->neg = 1;
        p->i++;
    }
    size_t d0 = p->i;
    while (p->i < p->len && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        unsigned dg = (unsigned)(p->s[p->i] - '0');
        if (v->mag > (UINT64_MAX - dg) / 10)
            v->overflow = 1;
        else
            v->mag = v->mag * 10 + dg;
        p->i++;
    }
    if (p->i == d0)
        return jp_fail(p, "bad number");
    if (p->i < p->len && p->s[p->i] == '.') {
        v->integral = 0;
        p->i++;
        size_t f0 = p->i;
        while (p->i < p->len && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
        if (p->i == f0)
            return jp_fail(p, "bad number");
    }
    if (p->i < p->len && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        v->integral = 0;
        p->i++;
        if (p->i < p->len && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        size_t e0 = p->i;
        while (p->i < p->len && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
        if (p->i == e0)
            return jp_fail(p, "bad number");
    }
    return 0;
}

static int jp_value(jp *p, jv *v, int depth);

/* Skips a nested object or array (values discarded). */
static int jp_nested(jp *p, int depth)
{
    if (depth > 32)
        return jp_fail(p, "nested too deep");
    char open = p->s[p->i++];
    char close = open == '{' ? '}' : ']';
    jp_ws(p);
    if (p->i < p->len && p->s[p->i] == close) {
        p->i++;
        return 0;
    }
    static _Thread_local jv scratch; /* values below are discarded */
    for (;;) {
        jp_ws(p);
        if (open == '{') {
            char key[8];
            if (jp_string(p, key, sizeof key) < 0)
                return -1;
            jp_ws(p);
            if (p->i >= p->len || p->s[p->i] != ':')
                return jp_fail(p, "expected ':'");
            p->i++;
            jp_ws(p);
        }
        if (jp_value(p, &scratch, depth + 1) < 0)
            return -1;
        jp_ws(p);
        if (p->i >= p->len)
            return jp_fail(p, "unterminated object or array");
        if (p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->s[p->i] == close) {
            p->i++;
            return 0;
        }
        return jp_fail(p, "expected ',' or end of object/array");
    }
}

static int jp_value(jp *p, jv *v, int depth)
{
    if (p->i >= p->len)
        return jp_fail(p, "expected a value");
    char c = p->s[p->i];
    if (c == '"') {
        v->type = JV_STR;
        return jp_string(p, v->str, sizeof v->str);
    }
    if (c == '-' || (c >= '0' && c <= '9'))
        return jp_number(p, v);
    if (c == 't') {
        v->type = JV_BOOL, v->b = 1;
        return jp_lit(p, "true");
    }
    if (c == 'f') {
        v->type = JV_BOOL, v->b = 0;
        return jp_lit(p, "false");
    }
    if (c == 'n') {
        v->type = JV_NULL;
        return jp_lit(p, "null");
    }
    if (c == '{' || c == '[') {
        v->type = JV_NESTED;
        return jp_nested(p, depth);
    }
    return jp_fail(p, "expected a value");
}

/* ---- member dispatch ---- */

enum {
    HAVE_TRACE = 1 << 0, HAVE_CONTRACT = 1 << 1, HAVE_SEQ = 1 << 2, HAVE_OP = 1 << 3,
    HAVE_RANK = 1 << 4, HAVE_SIZE = 1 << 5,
};

typedef struct acc {
    coh_tl_header h;
    coh_tl_entry e;
    coh_tl_contract c;
    unsigned have;
} acc;

static int want_int(jp *p, const jv *v, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    char m[96];
    if (v->type != JV_NUM || !v->integral || v->overflow) {
        snprintf(m, sizeof m, "\"%s\": expected an integer", key);
        return jp_fail(p, m);
    }
    /* |value| beyond INT64_MAX is out of every range we accept. */
    if (v->mag > (uint64_t)INT64_MAX) {
        snprintf(m, sizeof m, "\"%s\": out of range", key);
        return jp_fail(p, m);
    }
    int64_t x = v->neg ? -(int64_t)v->mag : (int64_t)v->mag;
    if (x < lo || x > hi) {
        snprintf(m, sizeof m, "\"%s\": out of range", key);
        return jp_fail(p, m);
    }
    *out = x;
    return 0;
}

static int want_u64(jp *p, const jv *v, const char *key, uint64_t *out)
{
    char m[96];
    if (v->type != JV_NUM || !v->integral || v->overflow || (v->neg && v->mag)) {
        snprintf(m, sizeof m, "\"%s\": expected an unsigned integer", key);
        return jp_fail(p, m);
    }
    *out = v->mag;
    return 0;
}

static int want_str(jp *p, const jv *v, const char *key, char *out, size_t cap)
{
    if (v->type != JV_STR) {
        char m[96];
        snprintf(m, sizeof m, "\"%s\": expected a string", key);
        return jp_fail(p, m);
    }
    /* Cut to the field's size, never inside a UTF-8 sequence. */
    size_t n = strnlen(v->str, sizeof v->str);
    if (n >= cap) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)v->str[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(out, v->str, n);
    out[n] = 0;
    return 0;
}

/* A name or its number: "all_reduce" or 1. */
static int want_enum(jp *p, const jv *v, const char *key, int (*from)(const char *), int lo,
                     int hi, int *out)
{
    char m[160];
    if (v->type == JV_STR) {
        int x = from(v->str);
        if (x < lo || x > hi) {
            snprintf(m, sizeof m, "\"%s\": unknown value \"%.64s\"", key, v->str);
            return jp_fail(p, m);
        }
        *out = x;
        return 0;
    }
    int64_t x;
    if (want_int(p, v, key, lo, hi, &x) < 0)
        return -1;
    *out = (int)x;
    return 0;
}

static int member(jp *p, acc *a, const char *k, const jv *v)
{
    int64_t x;
    if (v->type == JV_NESTED) {
        /* Unknown keys may hold anything; known keys never hold nesting. */
        static const char *const known[] = {
            "cohort_trace", "cohort_contract", "job", "rank", "size", "generation", "group",
            "host", "pid", "reason", "time_us", "capacity", "recorded", "detected", "seq", "op",
            "dtype", "count", "redop", "root", "tag", "file", "line", "state", "status",
            "t_issue_us", "t_start_us", "t_end_us"};
        for (size_t i = 0; i < COH_ARRAY_LEN(known); i++)
            if (!strcmp(k, known[i])) {
                char m[96];
                snprintf(m, sizeof m, "\"%s\": unexpected object or array", k);
                return jp_fail(p, m);
            }
        return 0;
    }
    if (!strcmp(k, "cohort_trace")) {
        if (want_int(p, v, k, 1, 1000000, &x) < 0)
            return -1;
        a->h.version = (int)x;
        a->have |= HAVE_TRACE;
    } else if (!strcmp(k, "cohort_contract")) {
        if (want_int(p, v, k, 1, 1000000, &x) < 0)
            return -1;
        a->c.version = (int)x;
        a->have |= HAVE_CONTRACT;
    } else if (!strcmp(k, "job")) {
        return want_str(p, v, k, a->h.job, sizeof a->h.job);
    } else if (!strcmp(k, "rank")) {
        if (want_int(p, v, k, 0, INT32_MAX - 1, &x) < 0)
            return -1;
        a->h.rank = a->c.rank = (int)x;
        a->have |= HAVE_RANK;
    } else if (!strcmp(k, "size")) {
        if (want_int(p, v, k, 1, INT32_MAX, &x) < 0)
            return -1;
        a->h.size = (int)x;
        a->have |= HAVE_SIZE;
    } else if (!strcmp(k, "generation")) {
        if (want_int(p, v, k, 0, UINT32_MAX, &x) < 0)
            return -1;
        a->h.generation = a->c.generation = (uint32_t)x;
    } else if (!strcmp(k, "group")) {
        if (want_int(p, v, k, 0, UINT32_MAX, &x) < 0)
            return -1;
        a->h.group = a->c.group = (uint32_t)x;
    } else if (!strcmp(k, "host")) {
        return want_str(p, v, k, a->h.host, sizeof a->h.host);
    } else if (!strcmp(k, "pid")) {
        if (want_int(p, v, k, 0, INT32_MAX, &x) < 0)
            return -1;
        a->h.pid = (long)x;
    } else if (!strcmp(k, "reason")) {
        return want_str(p, v, k, a->h.reason, sizeof a->h.reason);
    } else if (!strcmp(k, "time_us")) {
        return want_u64(p, v, k, &a->h.time_us);
    } else if (!strcmp(k, "capacity")) {
        if (want_int(p, v, k, 0, INT32_MAX, &x) < 0)
            return -1;
        a->h.capacity = (int)x;
    } else if (!strcmp(k, "recorded")) {
        return want_u64(p, v, k, &a->h.recorded);
    } else if (!strcmp(k, "detected")) {
        a->c.has_detected = 1;
        return want_str(p, v, k, a->c.detected, sizeof a->c.detected);
    } else if (!strcmp(k, "seq")) {
        if (want_u64(p, v, k, &a->e.seq) < 0)
            return -1;
        a->have |= HAVE_SEQ;
    } else if (!strcmp(k, "op")) {
        if (want_enum(p, v, k, coh_coll_from_name, 0, COH_COLL_KIND_COUNT - 1, &a->e.coll) < 0)
            return -1;
        a->have |= HAVE_OP;
    } else if (!strcmp(k, "dtype")) {
        return want_enum(p, v, k, coh_dtype_from_name, 0, COHORT_DTYPE_COUNT - 1, &a->e.dtype);
    } else if (!strcmp(k, "count")) {
        return want_u64(p, v, k, &a->e.count);
    } else if (!strcmp(k, "redop")) {
        if (v->type == JV_NULL) {
            a->e.redop = -1;
            return 0;
        }
        return want_enum(p, v, k, coh_redop_from_name, -1, COHORT_OP_COUNT - 1, &a->e.redop);
    } else if (!strcmp(k, "root")) {
        if (want_int(p, v, k, -1, INT32_MAX, &x) < 0)
            return -1;
        a->e.root = (int)x;
    } else if (!strcmp(k, "tag")) {
        if (want_int(p, v, k, INT32_MIN, INT32_MAX, &x) < 0)
            return -1;
        a->e.tag = (int)x;
    } else if (!strcmp(k, "file")) {
        return want_str(p, v, k, a->e.file, sizeof a->e.file);
    } else if (!strcmp(k, "line")) {
        if (want_int(p, v, k, 0, INT32_MAX, &x) < 0)
            return -1;
        a->e.line = (int)x;
    } else if (!strcmp(k, "state")) {
        return want_enum(p, v, k, coh_state_from_name, 0, COH_ST_FAILED, &a->e.state);
    } else if (!strcmp(k, "status")) {
        return want_enum(p, v, k, coh_status_from_name, 0, 1000, &a->e.status);
    } else if (!strcmp(k, "t_issue_us")) {
        return want_u64(p, v, k, &a->e.t_issue_us);
    } else if (!strcmp(k, "t_start_us")) {
        return want_u64(p, v, k, &a->e.t_start_us);
    } else if (!strcmp(k, "t_end_us")) {
        return want_u64(p, v, k, &a->e.t_end_us);
    }
    return 0;
}

int coh_tl_parse(const char *s, size_t len, coh_tl_line *out, char *err, size_t errlen)
{
    jp p = {.s = s, .len = s ? len : 0, .err = err, .errlen = errlen};
    /* The value buffers are large; keep them off small thread stacks. */
    static _Thread_local acc a;
    static _Thread_local jv v;
    memset(&a, 0, sizeof a);
    a.e.redop = -1;
    a.e.root = -1;
    if (err && errlen)
        err[0] = 0;
    out->kind = COH_TL_INVALID;

    jp_ws(&p);
    if (p.i >= p.len) {
        jp_fail(&p, "empty line");
        return COH_TL_INVALID;
    }
    if (p.s[p.i] != '{') {
        jp_fail(&p, "expected '{'");
        return COH_TL_INVALID;
    }
    p.i++;
    jp_ws(&p);
    if (p.i < p.len && p.s[p.i] == '}') {
        p.i++;
    } else {
        for (;;) {
            char key[64];
            jp_ws(&p);
            if (jp_string(&p, key, sizeof key) < 0)
                return COH_TL_INVALID;
            jp_ws(&p);
            if (p.i >= p.len || p.s[p.i] != ':') {
                jp_fail(&p, "expected ':'");
                return COH_TL_INVALID;
            }
            p.i++;
            jp_ws(&p);
            if (jp_value(&p, &v, 1) < 0 || member(&p, &a, key, &v) < 0)
                return COH_TL_INVALID;
            jp_ws(&p);
            if (p.i >= p.len) {
                jp_fail(&p, "unterminated object (truncated line?)");
                return COH_TL_INVALID;
            }
            if (p.s[p.i] == ',') {
                p.i++;
                continue;
            }
            if (p.s[p.i] == '}') {
                p.i++;
                break;
            }
            jp_fail(&p, "expected ',' or '}'");
            return COH_TL_INVALID;
        }
    }
    jp_ws(&p);
    if (p.i != p.len) {
        jp_fail(&p, "garbage after the object");
        return COH_TL_INVALID;
    }

    if (a.have & HAVE_TRACE) {
        if ((a.have & (HAVE_RANK | HAVE_SIZE)) != (HAVE_RANK | HAVE_SIZE)) {
            jp_fail(&p, "header without \"rank\" and \"size\"");
            return COH_TL_INVALID;
        }
        if (a.h.rank >= a.h.size) {
            jp_fail(&p, "header: \"rank\" is not below \"size\"");
            return COH_TL_INVALID;
        }
        out->kind = COH_TL_HEADER;
        out->u.hdr = a.h;
    } else if (a.have & HAVE_CONTRACT) {
        if (!(a.have & HAVE_RANK)) {
            jp_fail(&p, "contract history without \"rank\"");
            return COH_TL_INVALID;
        }
        out->kind = COH_TL_CONTRACT;
        out->u.con = a.c;
    } else if ((a.have & (HAVE_SEQ | HAVE_OP)) == (HAVE_SEQ | HAVE_OP)) {
        out->kind = COH_TL_ENTRY;
        out->u.ent = a.e;
    } else {
        jp_fail(&p, "neither a header nor an entry (no \"cohort_trace\", or no \"seq\"/\"op\")");
    }
    return out->kind;
}
