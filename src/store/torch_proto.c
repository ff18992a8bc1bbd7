/* torch_proto.c - parsing PyTorch TCPStore requests (see torch_proto.h).
 * Pure: no I/O, no global state. */
#include "store/torch_proto.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* A cursor over one request. A field that is not all there yet records how
 * far the buffer must reach (need) so the caller does not re-parse a large
 * value on every read; a field over a limit is an error at once, before the
 * bytes it announces are waited for. */
typedef struct cur {
    const uint8_t *p;
    size_t n, off, need;
    const coh_torch_limits *lim;
    char *err;
    size_t errlen;
} cur;

enum { C_OK = 1, C_NEED = 0, C_BAD = -1 };

static int take(cur *c, size_t k)
{
    if (k > c->n - c->off) {
        c->need = c->off + k;
        if (c->need > c->lim->max_request) {
            snprintf(c->err, c->errlen, "request of at least %zu bytes is over the limit (%" PRIu64
                     " bytes)", c->need, c->lim->max_request);
            return C_BAD;
        }
        return C_NEED;
    }
    return C_OK;
}

static int rd_u32(cur *c, uint32_t *v)
{
    int r = take(c, 4);
    if (r == C_OK) {
        *v = coh_get_u32(c->p + c->off);
        c->off += 4;
    }
    return r;
}

static int rd_u64(cur *c, uint64_t *v)
{
    int r = take(c, 8);
    if (r == C_OK) {
        *v = coh_get_u64(c->p + c->off);
        c->off += 8;
    }
    return r;
}

/* u64 length + bytes, the length checked against max before waiting. */
static int rd_str(cur *c, coh_slice *s, uint64_t max, const char *what)
{
    uint64_t len;
    int r = rd_u64(c, &len);
    if (r != C_OK)
        return r;
    if (len > max) {
        snprintf(c->err, c->errlen, "%s of %" PRIu64 " bytes is over the limit (%" PRIu64 ")",
                 what, len, max);
        return C_BAD;
    }
    if ((r = take(c, (size_t)len)) != C_OK)
        return r;
    s->p = c->p + c->off;
    s->n = (uint32_t)len;
    c->off += (size_t)len;
    return C_OK;
}

/* u64 count, then count keys (and values when pairs). */
static int rd_items(cur *c, coh_torch_req *q, int pairs)
{
    int r = rd_u64(c, &q->n);
    if (r != C_OK)
        return r;
    if (q->n > c->lim->max_items) {
        snprintf(c->err, c->errlen, "%" PRIu64 " keys in one request is over the limit (%" PRIu64
                 ")", q->n, c->lim->max_items);
        return C_BAD;
    }
    size_t start = c->off;
    for (uint64_t i = 0; i < q->n; i++) {
        coh_slice k, v;
        if ((r = rd_str(c, &k, c->lim->max_key, "key")) != C_OK)
            return r;
        if (pairs && (r = rd_str(c, &v, c->lim->max_value, "value")) != C_OK)
            return r;
    }
    q->items = c->p + start;
    q->items_len = c->off - start;
    return C_OK;
}

/* torch 1.x op byte -> TQ_* (0xff: none). */
static uint8_t v1_op(uint8_t b)
{
    static const uint8_t map[] = {TQ_SET,   TQ_CAS,      TQ_GET,       TQ_ADD,   TQ_CHECK,
                                  TQ_WAIT,  TQ_NUM_KEYS, TQ_WATCH_KEY, TQ_DELETE};
    return b < sizeof map ? map[b] : 0xff;
}

long coh_torch_parse(const uint8_t *p, size_t n, int *version, const coh_torch_limits *lim,
                     coh_torch_req *q, size_t *need, char *err, size_t errlen)
{
    cur c = {.p = p, .n = n, .lim = lim, .err = err, .errlen = errlen};
    memset(q, 0, sizeof *q);
    *need = 0;
    if (errlen)
        err[0] = 0;
    if (n == 0) {
        *need = 1;
        return COH_TORCH_NEED;
    }
    if (*version == COH_TORCH_UNKNOWN) {
        /* torch 2.x always opens with VALIDATE (0) + magic. For torch 1.x a
         * leading 0 is SET, whose u64 key length would have to be over 1 GiB
         * to begin with the magic's bytes: the two cannot be confused. */
        if (p[0] != 0) {
            *version = COH_TORCH_V1;
        } else if (n < 5) {
            *need = 5;
            return COH_TORCH_NEED;
        } else {
            *version = coh_get_u32(p + 1) == COH_TORCH_MAGIC ? COH_TORCH_V2 : COH_TORCH_V1;
        }
    }
    uint8_t b = p[c.off++];
    uint8_t op = *version == COH_TORCH_V1 ? v1_op(b) : (b < TQ_WATCH_KEY ? b : 0xff);
    if (op == 0xff) {
        snprintf(err, errlen, "unknown torch %d.x store op %u", *version, b);
        return COH_TORCH_BAD;
    }
    q->op = op;
    int r = C_OK;
    switch (op) {
    case TQ_VALIDATE:
    case TQ_PING:
        r = rd_u32(&c, &q->u32);
        break;
    case TQ_SET:
    case TQ_APPEND:
    case TQ_QUEUE_PUSH:
        if ((r = rd_str(&c, &q->key, lim->max_key, "key")) == C_OK)
            r = rd_str(&c, &q->val, lim->max_value, "value");
        break;
    case TQ_CAS:
        if ((r = rd_str(&c, &q->key, lim->max_key, "key")) == C_OK &&
            (r = rd_str(&c, &q->exp, lim->max_value, "expected value")) == C_OK)
            r = rd_str(&c, &q->val, lim->max_value, "desired value");
        break;
    case TQ_GET:
    case TQ_DELETE:
    case TQ_QUEUE_POP:
    case TQ_QUEUE_LEN:
    case TQ_WATCH_KEY:
        r = rd_str(&c, &q->key, lim->max_key, "key");
        break;
    case TQ_ADD:
    case TQ_BARRIER: {
        uint64_t v = 0;
        if ((r = rd_str(&c, &q->key, lim->max_key, "key")) == C_OK &&
            (r = rd_u64(&c, &v)) == C_OK)
            memcpy(&q->num, &v, sizeof v);
        break;
    }
    case TQ_CHECK:
    case TQ_WAIT:
    case TQ_MULTI_GET:
        r = rd_items(&c, q, 0);
        break;
    case TQ_MULTI_SET:
        r = rd_items(&c, q, 1);
        break;
    case TQ_NUM_KEYS:
    case TQ_CANCEL_WAIT:
    case TQ_LIST_KEYS:
        break;
    default:
        break;
    }
    if (r == C_BAD)
        return COH_TORCH_BAD;
    if (r == C_NEED) {
        *need = c.need;
        return COH_TORCH_NEED;
    }
    if (c.off > lim->max_request) {
        snprintf(err, errlen, "request of %zu bytes is over the limit (%" PRIu64 " bytes)", c.off,
                 lim->max_request);
        return COH_TORCH_BAD;
    }
    return (long)c.off;
}

void coh_torch_next(const coh_torch_req *r, size_t *off, coh_slice *key, coh_slice *val)
{
    const uint8_t *p = r->items + *off;
    uint64_t kl = coh_get_u64(p);
    key->p = p + 8;
    key->n = (uint32_t)kl;
    *off += 8 + (size_t)kl;
    if (r->op == TQ_MULTI_SET) {
        p = r->items + *off;
        uint64_t vl = coh_get_u64(p);
        val->p = p + 8;
        val->n = (uint32_t)vl;
        *off += 8 + (size_t)vl;
    }
}

const char *coh_torch_op_name(uint8_t op)
{
    static const char *names[TQ_NOPS] = {
        "VALIDATE",   "SET",        "COMPARE_SET", "GET",        "ADD",       "CHECK",
        "WAIT",       "GETNUMKEYS", "DELETE_KEY",  "APPEND",     "MULTI_GET", "MULTI_SET",
        "CANCEL_WAIT", "PING",      "QUEUE_PUSH",  "QUEUE_POP",  "QUEUE_LEN", "LIST_KEYS",
        "BARRIER",    "WATCH_KEY"};
    return op < TQ_NOPS ? names[op] : "unknown";
}
