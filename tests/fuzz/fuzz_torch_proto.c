/*
 * fuzz_torch_proto.c - libFuzzer target for the TCPStore request parser
 * (src/store/torch_proto.c). The input is a client's byte stream. It is
 * parsed twice: whole, and cut into chunks the way reads arrive (the cut
 * points drawn from the first byte), buffering an unfinished request like
 * the server does. Both must yield the same requests; every slice must lie
 * inside the bytes the request consumed; a NEED must ask for more than is
 * there and no more than the request limit; items must iterate exactly
 * over items_len.
 *
 * Built as a libFuzzer binary with -DCOHORT_FUZZ=ON (clang); the corpus is
 * replayed by fuzz_replay_torch_proto in every ctest run.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "store/torch_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXREQ 64

static const coh_torch_limits lim = {.max_key = 64, .max_value = 1024, .max_items = 16,
                                     .max_request = 4096};

static int in(const coh_slice *s, const uint8_t *p, size_t n)
{
    return s->n == 0 || (s->p >= p && s->p + s->n <= p + n);
}

static void check_req(const coh_torch_req *q, const uint8_t *p, long used)
{
    if (!in(&q->key, p, (size_t)used) || !in(&q->val, p, (size_t)used) ||
        !in(&q->exp, p, (size_t)used))
        __builtin_trap();
    if (q->items) {
        if (q->items < p || q->items + q->items_len > p + used || q->n > lim.max_items)
            __builtin_trap();
        size_t off = 0;
        for (uint64_t i = 0; i < q->n; i++) {
            coh_slice k, v;
            coh_torch_next(q, &off, &k, &v);
            if (k.n > lim.max_key || off > q->items_len)
                __builtin_trap();
        }
        if (off != q->items_len)
            __builtin_trap();
    }
}

/* Parses everything; records op + length of each request; returns count,
 * or -1 - count when the stream ended in a refused request. */
static int parse_all(const uint8_t *p, size_t n, uint8_t *ops, long *lens)
{
    int version = COH_TORCH_UNKNOWN, k = 0;
    while (k < MAXREQ) {
        coh_torch_req q;
        size_t need;
        char err[128];
        long r = coh_torch_parse(p, n, &version, &lim, &q, &need, err, sizeof err);
        if (r == COH_TORCH_BAD)
            return -1 - k;
        if (r == COH_TORCH_NEED) {
            if (need <= n || need > lim.max_request)
                __builtin_trap();
            return k;
        }
        if ((size_t)r > n)
            __builtin_trap();
        check_req(&q, p, r);
        ops[k] = q.op;
        lens[k++] = r;
        p += r;
        n -= (size_t)r;
    }
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t seed = data[0];
    data++;
    size--;
    uint8_t ops1[MAXREQ], ops2[MAXREQ];
    long lens1[MAXREQ], lens2[MAXREQ];
    int k1 = parse_all(data, size, ops1, lens1);
    /* Incremental: chunks of 1 + (seed-driven) bytes into a buffer. */
    static uint8_t buf[1 << 16];
    size_t have = 0, pos = 0, need = 0;
    int version = COH_TORCH_UNKNOWN, k2 = 0, bad = 0;
    while (pos < size && !bad && k2 < MAXREQ) {
        size_t chunk = 1 + (size_t)((seed * 31u + pos * 7u) % 97u);
        if (chunk > size - pos)
            chunk = size - pos;
        if (have + chunk > sizeof buf)
            break;
        memcpy(buf + have, data + pos, chunk);
        have += chunk;
        pos += chunk;
        if (have < need)
            continue;
        size_t off = 0;
        while (k2 < MAXREQ) {
            coh_torch_req q;
            char err[128];
            long r = coh_torch_parse(buf + off, have - off, &version, &lim, &q, &need, err,
                                     sizeof err);
            if (r == COH_TORCH_BAD) {
                bad = 1;
                break;
            }
            if (r == COH_TORCH_NEED)
                break;
            check_req(&q, buf + off, r);
            ops2[k2] = q.op;
            lens2[k2++] = r;
            off += (size_t)r;
            need = 0;
        }
        memmove(buf, buf + off, have - off);
        have -= off;
    }
    if ((pos == size || bad) && k2 < MAXREQ && k1 > -MAXREQ && k1 < MAXREQ) {
        /* Everything fed (or refused): both views agree on the requests,
         * and on whether the stream ends in a refused one. */
        int n1 = k1 < 0 ? -1 - k1 : k1;
        if (n1 != k2 || (k1 < 0) != bad)
            __builtin_trap();
        for (int i = 0; i < k2; i++)
            if (ops1[i] != ops2[i] || lens1[i] != lens2[i])
                __builtin_trap();
    }
    return 0;
}
