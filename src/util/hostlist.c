/* hostlist.c - Slurm host list expansion (see hostlist.h). */
#include "util/hostlist.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NAME_MAX_LEN 255

typedef struct walk {
    int (*fn)(const char *, void *);
    void *arg;
    long count;
    int stop;
    char *err;
    size_t errlen;
} walk;

static int fail(walk *w, const char *fmt, const char *at)
{
    snprintf(w->err, w->errlen, fmt, at);
    return -1;
}

/* Parses an unsigned decimal of at most 18 digits at *p. */
static int number(const char **p, unsigned long long *v, int *width)
{
    const char *s = *p;
    unsigned long long x = 0;
    int n = 0;
    while (*s >= '0' && *s <= '9') {
        if (++n > 18)
            return -1;
        x = x * 10 + (unsigned)(*s - '0');
        s++;
    }
    if (!n)
        return -1;
    *p = s;
    *v = x;
    *width = n;
    return 0;
}

/* Expands item[0..len) from position i, name[0..nl) built so far. */
static int expand(walk *w, const char *item, size_t len, size_t i, char *name, size_t nl)
{
    /* Copy literal text up to the next bracket. */
    while (i < len && item[i] != '[') {
        if (item[i] == ']')
            return fail(w, "unexpected ']' in host list near '%.40s'", item + i);
        if (nl >= NAME_MAX_LEN)
            return fail(w, "host name longer than 255 bytes near '%.40s'", item);
        name[nl++] = item[i++];
    }
    if (i == len) {
        if (nl == 0)
            return fail(w, "empty host name in host list%s", "");
        name[nl] = 0;
        if (w->count >= COH_HOSTLIST_MAX)
            return fail(w, "host list has more than 1000000 hosts%s", "");
        w->count++;
        if (w->fn && w->fn(name, w->arg))
            w->stop = 1;
        return 0;
    }
    /* A bracket group: [a,b-c,...] */
    const char *close = memchr(item + i, ']', len - i);
    if (!close)
        return fail(w, "unclosed '[' in host list near '%.40s'", item + i);
    size_t end = (size_t)(close - item);
    const char *p = item + i + 1;
    if (p == close)
        return fail(w, "empty '[]' in host list near '%.40s'", item + i);
    while (p < close) {
        unsigned long long lo, hi;
        int lw, hw;
        const char *lo_at = p;
        if (number(&p, &lo, &lw) < 0)
            return fail(w, "expected a number in host list range near '%.40s'", p);
        hi = lo;
        if (*p == '-') {
            p++;
            if (number(&p, &hi, &hw) < 0)
                return fail(w, "expected a number after '-' in host list near '%.40s'", p);
            if (hi < lo)
                return fail(w, "reversed range in host list near '%.40s'", item + i);
            if (hi - lo >= COH_HOSTLIST_MAX)
                return fail(w, "host list range too large near '%.40s'", item + i);
        }
        if (p != close && *p != ',')
            return fail(w, "unexpected character in host list range near '%.40s'", p);
        if (*p == ',') {
            p++;
            if (p == close)
                return fail(w, "trailing ',' in host list range near '%.40s'", item + i);
        }
        /* "01-10": every number padded to the lower bound's width. */
        int pad = (lw > 1 && *lo_at == '0') ? lw : 0;
        for (unsigned long long v = lo; v <= hi && !w->stop; v++) {
            char num[32];
            int k = snprintf(num, sizeof num, "%0*llu", pad, v);
            if (nl + (size_t)k > NAME_MAX_LEN)
                return fail(w, "host name longer than 255 bytes near '%.40s'", item);
            memcpy(name + nl, num, (size_t)k);
            if (expand(w, item, len, end + 1, name, nl + (size_t)k) < 0)
                return -1;
        }
        if (w->stop)
            return 0;
    }
    return 0;
}

long coh_hostlist_expand(const char *expr, int (*fn)(const char *host, void *arg), void *arg,
                         char *err, size_t errlen)
{
    char dummy[8];
    walk w = {fn, arg, 0, 0, err ? err : dummy, err ? errlen : sizeof dummy};
    w.err[0] = 0;
    if (!expr || !*expr) {
        fail(&w, "empty host list%s", "");
        return -1;
    }
    char name[NAME_MAX_LEN + 1];
    const char *s = expr;
    while (*s && !w.stop) {
        /* The item ends at a comma outside brackets. */
        size_t len = 0;
        int depth = 0;
        while (s[len] && (depth || s[len] != ',')) {
            if (s[len] == '[' && depth++)
                return fail(&w, "nested '[' in host list near '%.40s'", s + len), -1;
            if (s[len] == ']' && depth)
                depth--;
            if (s[len] == ' ' || s[len] == '\t' || s[len] == '\n')
                return fail(&w, "white space in host list near '%.40s'", s + len), -1;
            len++;
        }
        if (len == 0)
            return fail(&w, "empty item in host list near '%.40s'", s), -1;
        if (expand(&w, s, len, 0, name, 0) < 0)
            return -1;
        s += len;
        if (*s == ',') {
            s++;
            if (!*s)
                return fail(&w, "trailing ',' in host list%s", ""), -1;
        }
    }
    return w.count;
}

static int take_first(const char *host, void *arg)
{
    char **out = arg;
    snprintf(out[0], (size_t)(uintptr_t)out[1], "%s", host);
    return 1;
}

int coh_hostlist_first(const char *expr, char *out, size_t outlen, char *err, size_t errlen)
{
    char *ctx[2] = {out, (char *)(uintptr_t)outlen};
    if (outlen)
        out[0] = 0;
    long n = coh_hostlist_expand(expr, take_first, ctx, err, errlen);
    return n > 0 ? 0 : -1;
}
