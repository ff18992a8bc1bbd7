/* txt.c - bounded token readers for store text records (txt.h). */
#include "util/txt.h"

int coh_txt_u64(const char *rec, size_t len, size_t *i, int maxd, uint64_t hi, uint64_t *out)
{
    size_t s0 = *i, k = *i;
    uint64_t v = 0;
    while (k < len && rec[k] >= '0' && rec[k] <= '9') {
        if ((int)(k - s0) >= maxd)
            return -1;
        uint64_t d = (uint64_t)(rec[k] - '0');
        if (d > hi || v > (hi - d) / 10)
            return -1;
        v = v * 10 + d;
        k++;
    }
    if (k == s0 || (k - s0 > 1 && rec[s0] == '0'))
        return -1; /* empty, or not canonical ("007") */
    *i = k;
    *out = v;
    return 0;
}

int coh_txt_i64(const char *rec, size_t len, size_t *i, int64_t lo, int64_t hi, int64_t *out)
{
    size_t k = *i;
    int neg = k < len && rec[k] == '-';
    if (neg && lo >= 0)
        return -1;
    if (neg)
        k++;
    /* the magnitude's bound: -lo for a negative value (no overflow at INT64_MIN) */
    uint64_t bound = neg ? (uint64_t)(-(lo + 1)) + 1 : (hi < 0 ? 0 : (uint64_t)hi);
    uint64_t v;
    if (coh_txt_u64(rec, len, &k, 19, bound, &v) || (neg && v == 0))
        return -1;
    int64_t x = neg ? -(int64_t)(v - 1) - 1 : (int64_t)v;
    if (x < lo || x > hi)
        return -1;
    *i = k;
    *out = x;
    return 0;
}

int coh_txt_sep(const char *rec, size_t len, size_t *i)
{
    if (*i >= len || rec[*i] != ' ')
        return -1;
    (*i)++;
    return 0;
}

size_t coh_txt_rest(const char *rec, size_t len, size_t i, char *out, size_t outlen)
{
    size_t n = 0;
    for (; i < len && n + 1 < outlen; i++) {
        unsigned char c = (unsigned char)rec[i];
        out[n++] = (c < ' ' || c == 0x7f) ? '?' : (char)c;
    }
    if (outlen)
        out[n] = 0;
    return n;
}
