/*
 * fuzz_hostlist.c - libFuzzer target for the Slurm host list expander
 * (src/util/hostlist.c, fed from SLURM_*_NODELIST) and the JSON string
 * writer (src/util/json.c, fed any bytes: labels, keys, store values).
 *
 * Properties beyond "no crash, no out-of-bounds access":
 *  - every expanded host is 1..255 bytes without ',', '[' or ']', and the
 *    count returned is the number of callbacks;
 *  - the hosts joined by ',' expand again to the same hosts (a fixpoint);
 *  - the JSON writer's output for any bytes is a quoted string of valid
 *    UTF-8 with no raw control byte and no unescaped quote, and the bounded
 *    and FILE writers agree.
 * The checked-in corpus replays in every normal ctest run (replay_main.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hostlist.h"
#include "cohort_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
    if (!cond)
        abort();
}

#define MAX_HOSTS 2000

typedef struct acc {
    char *joined;
    size_t len, cap;
    long n;
} acc;

static int take(const char *h, void *arg)
{
    acc *a = arg;
    size_t l = strlen(h);
    must(l >= 1 && l <= 255);
    must(!strpbrk(h, ",[]"));
    if (a->len + l + 2 > a->cap) {
        a->cap = (a->len + l + 2) * 2;
        a->joined = realloc(a->joined, a->cap);
        must(a->joined != NULL);
    }
    if (a->len)
        a->joined[a->len++] = ',';
    memcpy(a->joined + a->len, h, l + 1);
    a->len += l;
    return ++a->n >= MAX_HOSTS; /* bounded work per input */
}

static size_t utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n)
            return 0;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
        i += k;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 512)
        return 0;
    char *s = malloc(size + 1);
    must(s != NULL);
    memcpy(s, data, size);
    s[size] = 0;

    /* host lists */
    acc a = {0};
    char err[160];
    long n = coh_hostlist_expand(s, take, &a, err, sizeof err);
    must(n == -1 ? err[0] != 0 : n == a.n);
    if (n > 0 && n < MAX_HOSTS) {
        acc b = {0};
        must(coh_hostlist_expand(a.joined, take, &b, err, sizeof err) == n);
        must(b.len == a.len && !memcmp(a.joined, b.joined, a.len));
        free(b.joined);
    }
    free(a.joined);

    /* JSON strings: the bounded writer and the FILE writer, same bytes */
    size_t cap = size * 6 + 3, pos = 0;
    char *buf = malloc(cap + 1);
    must(buf != NULL);
    cohort_json_strn(buf, cap + 1, &pos, data, size);
    must(pos <= cap && strlen(buf) == pos);
    must(pos >= 2 && buf[0] == '"' && buf[pos - 1] == '"');
    must(utf8_ok((const unsigned char *)buf, pos));
    for (size_t i = 1; i + 1 < pos; i++) {
        must((unsigned char)buf[i] >= 0x20);
        if (buf[i] == '\\')
            i++; /* the escaped character */
        else
            must(buf[i] != '"');
    }
    char *mem = NULL;
    size_t memlen = 0;
    FILE *f = open_memstream(&mem, &memlen);
    must(f != NULL);
    cohort_json_fputn(f, data, size);
    fclose(f);
    must(memlen == pos && !memcmp(mem, buf, pos));
    free(mem);
    free(buf);
    free(s);
    return 0;
}
