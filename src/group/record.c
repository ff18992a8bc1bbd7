/* record.c - a rank's rendezvous record (record.h). */
#include "group/record.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "util/txt.h"

static int is_sep(char c)
{
    return c == ' ' || c == '\t' || c == '\n';
}

/* A field of one record: printable, no space. */
static int field_ok(const char *f, size_t max)
{
    size_t n = strlen(f);
    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)f[i] <= ' ' || (unsigned char)f[i] == 0x7f)
            return 0;
    return 1;
}

int coh_rdv_record_format(char *buf, size_t len, const coh_rdv_record *r)
{
    if (r->size < 1 || r->pid < 1 || r->cpus < 0 || r->cpus > COH_RDV_CPUS_MAX ||
        !field_ok(r->addr, COH_RDV_ADDR_MAX) || !field_ok(r->id, COH_RDV_ID_MAX) ||
        !field_ok(r->name, COH_RDV_NAME_MAX))
        return -1;
    size_t sl = strnlen(r->cpuset, sizeof r->cpuset);
    long cn, top;
    char why[8];
    if (sl == sizeof r->cpuset ||
        (sl > 0 && coh_cpulist_check(r->cpuset, sl, &cn, &top, why, sizeof why) != 0))
        return -1;
    size_t fl = strnlen(r->cfg, sizeof r->cfg);
    if (fl == sizeof r->cfg || (fl > 0 && coh_rdv_cfg_check(r->cfg, fl, why, sizeof why) != 0))
        return -1;
    /* an unknown cpu set is "-" when the settings follow it */
    int n = snprintf(buf, len, "%d %d %s %s %s %ld%s%s%s%s", r->size, r->pid, r->addr, r->id,
                     r->name, r->cpus, sl || fl ? " " : "", sl ? r->cpuset : fl ? "-" : "",
                     fl ? " " : "", r->cfg);
    return n < 0 || (size_t)n >= len ? -1 : n;
}

static int key_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

static int val_byte(char c)
{
    return key_byte(c) || (c >= 'A' && c <= 'Z') || c == '+' || c == ':' || c == '-';
}

/* The pair at s[*i]: its key [*k, *k + *kl) and value [*v, *v + *vl);
 * *i moves past the pair and its comma. 0, or -1 with a reason. */
static int cfg_pair(const char *s, size_t n, size_t *i, size_t *k, size_t *kl, size_t *v,
                    size_t *vl, char *err, size_t errlen)
{
    size_t b = *i;
    while (*i < n && key_byte(s[*i]))
        (*i)++;
    *k = b, *kl = *i - b;
    if (*kl == 0 || *kl > COH_RDV_CFG_KEY_MAX || *i == n || s[*i] != '=') {
        snprintf(err, errlen,
                 "the settings are not key=value pairs (byte %zu: a key of 1-%d bytes [a-z0-9_.] "
                 "and '=' expected)",
                 b, COH_RDV_CFG_KEY_MAX);
        return -1;
    }
    b = ++*i;
    while (*i < n && val_byte(s[*i]))
        (*i)++;
    *v = b, *vl = *i - b;
    if (*vl > COH_RDV_CFG_VAL_MAX) {
        snprintf(err, errlen, "the settings' value at byte %zu is %zu bytes (at most %d)", b, *vl,
                 COH_RDV_CFG_VAL_MAX);
        return -1;
    }
    if (*i < n) {
        if (s[*i] != ',' || *i + 1 == n) {
            snprintf(err, errlen, "the settings are not key=value pairs (byte %zu: '%c')", *i,
                     (unsigned char)s[*i] > ' ' && (unsigned char)s[*i] < 0x7f ? s[*i] : '?');
            return -1;
        }
        (*i)++;
    }
    return 0;
}

int coh_rdv_cfg_check(const char *s, size_t n, char *err, size_t errlen)
{
    size_t i = 0, keys[COH_RDV_CFG_PAIRS], lens[COH_RDV_CFG_PAIRS];
    int np = 0;
    if (n == 0 || n > COH_RDV_CFG_MAX) {
        snprintf(err, errlen, "the settings are %zu bytes (1 to %d)", n, COH_RDV_CFG_MAX);
        return -1;
    }
    while (i < n) {
        size_t k, kl, v, vl;
        if (cfg_pair(s, n, &i, &k, &kl, &v, &vl, err, errlen) != 0)
            return -1;
        if (np == COH_RDV_CFG_PAIRS) {
            snprintf(err, errlen, "the settings have more than %d pairs", COH_RDV_CFG_PAIRS);
            return -1;
        }
        for (int q = 0; q < np; q++)
            if (lens[q] == kl && !memcmp(s + keys[q], s + k, kl)) {
                snprintf(err, errlen, "the settings name '%.*s' twice", (int)kl, s + k);
                return -1;
            }
        keys[np] = k, lens[np] = kl, np++;
    }
    return 0;
}

int coh_rdv_cfg_get(const char *cfg, const char *key, char *out, size_t outlen)
{
    size_t n = strlen(cfg), i = 0, want = strlen(key);
    char why[8];
    while (i < n) {
        size_t k, kl, v, vl;
        if (cfg_pair(cfg, n, &i, &k, &kl, &v, &vl, why, sizeof why) != 0)
            return 0;
        if (kl == want && !memcmp(cfg + k, key, kl)) {
            if (outlen)
                snprintf(out, outlen, "%.*s", (int)vl, cfg + v);
            return 1;
        }
    }
    return 0;
}

/* The whole token as a canonical decimal within [lo, hi] (util/txt.h). */
static int num(const char *t, size_t n, long lo, long hi, long *out)
{
    size_t k = 0;
    uint64_t v;
    if (coh_txt_u64(t, n, &k, 19, (uint64_t)hi, &v) || k != n || v < (uint64_t)lo)
        return -1;
    *out = (long)v;
    return 0;
}

/* A cpu number of a list at s[*i]: canonical decimal (util/txt.h). */
static int cpu_num(const char *s, size_t n, size_t *i, long *out, char *err, size_t errlen)
{
    uint64_t v;
    size_t b = *i;
    if (coh_txt_u64(s, n, i, 19, UINT64_MAX, &v) != 0) {
        snprintf(err, errlen, "the cpu set is not a cpulist (a cpu number expected at byte %zu)", b);
        return -1;
    }
    if (v >= (uint64_t)COH_RDV_CPUS_MAX) {
        snprintf(err, errlen, "the cpu set names cpu %llu (at most %ld)", (unsigned long long)v,
                 COH_RDV_CPUS_MAX - 1);
        return -1;
    }
    *out = (long)v;
    return 0;
}

int coh_cpulist_check(const char *s, size_t n, long *count, long *top, char *err, size_t errlen)
{
    size_t i = 0;
    long cnt = 0, prev = -1;
    if (n == 0) {
        snprintf(err, errlen, "the cpu set is empty");
        return -1;
    }
    if (n > COH_RDV_CPULIST_MAX) {
        snprintf(err, errlen, "the cpu set is %zu bytes (at most %d)", n, COH_RDV_CPULIST_MAX);
        return -1;
    }
    for (;;) {
        long a, b;
        if (cpu_num(s, n, &i, &a, err, errlen) != 0)
            return -1;
        b = a;
        if (i < n && s[i] == '-') {
            i++;
            if (cpu_num(s, n, &i, &b, err, errlen) != 0)
                return -1;
            if (b <= a) {
                snprintf(err, errlen, "the cpu set's range %ld-%ld is %s", a, b,
                         b < a ? "descending" : "one cpu written as a range (not canonical)");
                return -1;
            }
        }
        if (prev >= 0 && a <= prev + 1) {
            snprintf(err, errlen, "the cpu set's cpu %ld follows cpu %ld (%s)", a, prev,
                     a <= prev ? "not ascending or overlapping" : "touching ranges, not canonical");
            return -1;
        }
        cnt += b - a + 1;
        prev = b;
        if (i == n)
            break;
        if (s[i] != ',' || i + 1 == n) {
            snprintf(err, errlen, "the cpu set is not a cpulist (byte %zu: '%c')", i,
                     (unsigned char)s[i] > ' ' && (unsigned char)s[i] < 0x7f ? s[i] : '?');
            return -1;
        }
        i++;
    }
    *count = cnt;
    *top = prev;
    return 0;
}

void coh_cpulist_or(const char *s, uint64_t *bits)
{
    size_t n = strlen(s), i = 0;
    while (i < n) {
        uint64_t a, b;
        if (coh_txt_u64(s, n, &i, 19, UINT64_MAX, &a) != 0)
            return;
        b = a;
        if (i < n && s[i] == '-') {
            i++;
            if (coh_txt_u64(s, n, &i, 19, UINT64_MAX, &b) != 0)
                return;
        }
        for (uint64_t c = a; c <= b; c++)
            bits[c / 64] |= 1ull << (c % 64);
        if (i < n)
            i++; /* ',' */
    }
}

int coh_cpulist_self(char *buf, size_t len)
{
    int out = -1;
    for (size_t ncpu = 1024; ncpu <= (size_t)COH_RDV_CPUS_MAX; ncpu *= 2) {
        cpu_set_t *set = CPU_ALLOC(ncpu);
        if (!set)
            return -1;
        size_t sz = CPU_ALLOC_SIZE(ncpu);
        CPU_ZERO_S(sz, set);
        if (sched_getaffinity(0, sz, set) != 0) {
            CPU_FREE(set);
            if (errno == EINVAL)
                continue; /* the kernel's mask is larger */
            return -1;
        }
        size_t used = 0;
        long a = -1;
        int ok = 1;
        /* CPU_ALLOC_SIZE rounds up: bits past ncpu are zero */
        for (long c = 0; c <= (long)ncpu && ok; c++) {
            int on = c < (long)ncpu && CPU_ISSET_S((size_t)c, sz, set);
            if (on && a < 0)
                a = c;
            if (!on && a >= 0) {
                int w = c - 1 == a ? snprintf(buf + used, len - used, "%s%ld", used ? "," : "", a)
                                   : snprintf(buf + used, len - used, "%s%ld-%ld",
                                              used ? "," : "", a, c - 1);
                if (w < 0 || (size_t)w >= len - used || used + (size_t)w > COH_RDV_CPULIST_MAX)
                    ok = 0;
                else
                    used += (size_t)w;
                a = -1;
            }
        }
        CPU_FREE(set);
        if (ok && used > 0)
            out = (int)used;
        return out;
    }
    return -1;
}

int coh_rdv_record_parse(const char *s, size_t len, coh_rdv_record *r, char *err, size_t errlen)
{
    static const char *names[] = {"world size", "pid",     "address", "host id",
                                  "host name",  "cpu count", "cpu set", "settings"};
    static const size_t maxes[] = {10, 10, COH_RDV_ADDR_MAX, COH_RDV_ID_MAX, COH_RDV_NAME_MAX, 7,
                                   COH_RDV_CPULIST_MAX, COH_RDV_CFG_MAX};
    memset(r, 0, sizeof *r);
    size_t i = 0;
    int k = 0;
    for (size_t c = 0; c < len; c++) {
        unsigned char b = (unsigned char)s[c];
        if ((b < ' ' && !is_sep((char)b)) || b == 0x7f) {
            snprintf(err, errlen, "a control byte (0x%02x) at offset %zu", b, c);
            return -1;
        }
    }
    while (k < 8) {
        while (i < len && is_sep(s[i]))
            i++;
        if (i == len)
            break;
        size_t b = i;
        while (i < len && !is_sep(s[i]))
            i++;
        const char *t = s + b;
        size_t n = i - b;
        if (n > maxes[k]) {
            snprintf(err, errlen, "the %s is %zu bytes (at most %zu)", names[k], n, maxes[k]);
            return -1;
        }
        long v = 0;
        switch (k) {
        case 0:
        case 1:
            if (num(t, n, 1, 2147483647L, &v) != 0) {
                snprintf(err, errlen, "the %s is not a number from 1 to 2147483647", names[k]);
                return -1;
            }
            if (k == 0)
                r->size = (int)v;
            else
                r->pid = (int)v;
            break;
        case 2:
            memcpy(r->addr, t, n);
            break;
        case 3:
            memcpy(r->id, t, n);
            break;
        case 4:
            memcpy(r->name, t, n);
            break;
        case 5:
            if (num(t, n, 0, COH_RDV_CPUS_MAX, &v) != 0) {
                snprintf(err, errlen, "the cpu count is not a number from 0 to %ld",
                         COH_RDV_CPUS_MAX);
                return -1;
            }
            r->cpus = v;
            break;
        case 6:
            if (n == 1 && t[0] == '-')
                break; /* unknown, the settings follow */
            if (coh_cpulist_check(t, n, &r->cpuset_n, &r->cpuset_top, err, errlen) != 0)
                return -1;
            memcpy(r->cpuset, t, n);
            break;
        case 7:
            if (coh_rdv_cfg_check(t, n, err, errlen) != 0)
                return -1;
            memcpy(r->cfg, t, n);
            break;
        }
        k++;
    }
    if (k < 5) {
        snprintf(err, errlen, "%d of its 5 fields (size pid address host-id host-name)", k);
        return -1;
    }
    return 0;
}
