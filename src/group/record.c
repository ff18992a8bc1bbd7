/* record.c - a rank's rendezvous record (record.h). */
#include "group/record.h"

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
    int n = snprintf(buf, len, "%d %d %s %s %s %ld", r->size, r->pid, r->addr, r->id, r->name,
                     r->cpus);
    return n < 0 || (size_t)n >= len ? -1 : n;
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

int coh_rdv_record_parse(const char *s, size_t len, coh_rdv_record *r, char *err, size_t errlen)
{
    static const char *names[] = {"world size", "pid", "address", "host id", "host name", "cpu count"};
    static const size_t maxes[] = {10, 10, COH_RDV_ADDR_MAX, COH_RDV_ID_MAX, COH_RDV_NAME_MAX, 7};
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
    while (k < 6) {
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
        }
        k++;
    }
    if (k < 5) {
        snprintf(err, errlen, "%d of its 5 fields (size pid address host-id host-name)", k);
        return -1;
    }
    return 0;
}
