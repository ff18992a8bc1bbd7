/* proto.c - encode/decode of store frames. Pure: no I/O, no global state. */
#include "store/proto.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "util/auth.h"
#include "util/util.h"

/* The header is decoded before it is judged, so a caller that gets
 * BAD_VERSION can still say which version the peer speaks. Magic is checked
 * first: a stream that is not ours is refused before its "length" means
 * anything. */
int coh_proto_parse_hdr(const uint8_t *p, size_t n, coh_frame_hdr *h)
{
    if (n < COH_PROTO_HDR)
        return COH_HDR_NEED;
    h->version = p[2];
    h->op = p[3];
    h->id = coh_get_u32(p + 4);
    h->len = coh_get_u32(p + 8);
    if (p[0] != COH_PROTO_MAGIC0 || p[1] != COH_PROTO_MAGIC1)
        return COH_HDR_BAD_MAGIC;
    if (p[2] != COH_PROTO_VERSION)
        return COH_HDR_BAD_VERSION;
    return COH_HDR_OK;
}

void coh_proto_put_hdr_v(uint8_t *p, uint8_t version, uint8_t op, uint32_t id, uint32_t len)
{
    p[0] = COH_PROTO_MAGIC0;
    p[1] = COH_PROTO_MAGIC1;
    p[2] = version;
    p[3] = op;
    coh_put_u32(p + 4, id);
    coh_put_u32(p + 8, len);
}

void coh_proto_put_hdr(uint8_t *p, uint8_t op, uint32_t id, uint32_t len)
{
    coh_proto_put_hdr_v(p, COH_PROTO_VERSION, op, id, len);
}

/* Names for log lines and error messages. Reply ops share the request's
 * name table; anything else is "unknown op" (the caller prints the byte). */
const char *coh_proto_op_name(uint8_t op)
{
    static const char *names[] = {
        [COH_OP_HELLO] = "HELLO",         [COH_OP_AUTH] = "AUTH",
        [COH_OP_SET] = "SET",             [COH_OP_GET] = "GET",
        [COH_OP_ADD] = "ADD",             [COH_OP_CAS] = "COMPARE_SET",
        [COH_OP_CHECK] = "CHECK",         [COH_OP_WAIT] = "WAIT",
        [COH_OP_DELETE] = "DELETE",       [COH_OP_NUM_KEYS] = "NUM_KEYS",
        [COH_OP_LIST] = "LIST",           [COH_OP_MULTI_GET] = "MULTI_GET",
        [COH_OP_MULTI_SET] = "MULTI_SET", [COH_OP_APPEND] = "APPEND",
        [COH_OP_BARRIER] = "BARRIER",     [COH_OP_CANCEL] = "CANCEL",
        [COH_OP_PING] = "PING",           [COH_OP_STATS] = "STATS",
        [COH_OP_SET_NOREPLY] = "SET_NOREPLY", [COH_OP_SET_GEN] = "SET_GEN",
        [COH_OP_ERROR] = "ERROR",
    };
    uint8_t base = op & 0x7F;
    if (op == COH_OP_ERROR)
        return "ERROR";
    if (base < COH_ARRAY_LEN(names) && names[base])
        return (op & COH_PROTO_REPLY) ? "reply" : names[base];
    return "unknown op";
}

/* ---- reader ----
 * Every read checks the bytes left before touching them and sets a sticky
 * error instead of failing loudly: decoders read a whole request and test
 * r.err once at the end, which keeps each decoder a straight line. */

const uint8_t *coh_rd_raw(coh_rd *r, size_t len)
{
    if (r->err || r->n < len) {
        r->err = 1;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += len;
    r->n -= len;
    return p;
}

uint8_t coh_rd_u8(coh_rd *r)
{
    const uint8_t *p = coh_rd_raw(r, 1);
    return p ? p[0] : 0;
}

uint32_t coh_rd_u32(coh_rd *r)
{
    const uint8_t *p = coh_rd_raw(r, 4);
    return p ? coh_get_u32(p) : 0;
}

int64_t coh_rd_i64(coh_rd *r)
{
    const uint8_t *p = coh_rd_raw(r, 8);
    return p ? (int64_t)coh_get_u64(p) : 0;
}

const uint8_t *coh_rd_bytes(coh_rd *r, uint32_t *len)
{
    uint32_t n = coh_rd_u32(r);
    const uint8_t *p = coh_rd_raw(r, n);
    *len = p ? n : 0;
    /* A zero-length value must still read as "present": point at the cursor. */
    return p ? p : NULL;
}

/* ---- writer ----
 * Growth doubles (amortised O(1) appends); a failed allocation sets a
 * sticky oom flag so encoders need no error check per field. The caller
 * tests w->oom once before sending. */

void coh_wr_init(coh_wr *w) { memset(w, 0, sizeof *w); }

void coh_wr_free(coh_wr *w)
{
    coh_free(w->p);
    coh_wr_init(w);
}

int coh_wr_reserve(coh_wr *w, size_t more)
{
    if (w->oom)
        return -1;
    if (more > SIZE_MAX / 2 - w->len) {
        w->oom = 1;
        return -1;
    }
    if (w->len + more <= w->cap)
        return 0;
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + more)
        cap *= 2;
    uint8_t *np = coh_realloc(w->p, cap);
    if (!np) {
        w->oom = 1;
        return -1;
    }
    w->p = np;
    w->cap = cap;
    return 0;
}

void coh_wr_raw(coh_wr *w, const void *p, size_t n)
{
    if (coh_wr_reserve(w, n) < 0)
        return;
    if (n)
        memcpy(w->p + w->len, p, n);
    w->len += n;
}

void coh_wr_u8(coh_wr *w, uint8_t v) { coh_wr_raw(w, &v, 1); }

void coh_wr_u32(coh_wr *w, uint32_t v)
{
    uint8_t b[4];
    coh_put_u32(b, v);
    coh_wr_raw(w, b, 4);
}

void coh_wr_i64(coh_wr *w, int64_t v)
{
    uint8_t b[8];
    coh_put_u64(b, (uint64_t)v);
    coh_wr_raw(w, b, 8);
}

void coh_wr_bytes(coh_wr *w, const void *p, size_t n)
{
    /* Callers check lengths against the limits (< 4 GiB) before encoding. */
    coh_wr_u32(w, (uint32_t)n);
    coh_wr_raw(w, p, n);
}

/* The header is written last because the payload length is only known
 * then; begin reserves its 12 bytes, end fills them in place. */
size_t coh_wr_begin_frame(coh_wr *w)
{
    size_t start = w->len;
    uint8_t z[COH_PROTO_HDR] = {0};
    coh_wr_raw(w, z, sizeof z);
    return start;
}

void coh_wr_end_frame(coh_wr *w, size_t start, uint8_t op, uint32_t id)
{
    if (w->oom)
        return;
    coh_proto_put_hdr(w->p + start, op, id, (uint32_t)(w->len - start - COH_PROTO_HDR));
}

/* ---- request decoding ----
 * The decoder is the only code that interprets request bytes. It validates
 * the entire payload (every length, every count, no trailing bytes) before
 * the server acts on any of it, so a handler never sees half-valid input and
 * a malformed request changes nothing. Limits are checked here too, so the
 * reply names the limit that was exceeded (COHORT_ERR_TOO_LARGE) instead of
 * a generic protocol error. */

#define FAIL(st, ...) (snprintf(err, errlen, __VA_ARGS__), (st))

static cohort_status check_key(const coh_slice *k, const coh_proto_limits *lim, const char *what,
                               char *err, size_t errlen)
{
    if (k->n > lim->max_key)
        return FAIL(COHORT_ERR_TOO_LARGE, "%s of %u bytes is over the server's max_key (%u bytes)",
                    what, k->n, lim->max_key);
    return COHORT_OK;
}

static cohort_status check_val(uint32_t n, const coh_proto_limits *lim, char *err, size_t errlen)
{
    if (n > lim->max_value)
        return FAIL(COHORT_ERR_TOO_LARGE,
                    "value of %u bytes is over the server's max_value (%u bytes)", n,
                    lim->max_value);
    return COHORT_OK;
}

/* bytes field -> slice pointing into the payload (no copy). */
static int rd_slice(coh_rd *r, coh_slice *s)
{
    s->p = coh_rd_bytes(r, &s->n);
    return r->err ? -1 : 0;
}

cohort_status coh_proto_decode_req(const coh_frame_hdr *h, const uint8_t *payload,
                                   const coh_proto_limits *lim, coh_req *q, char *err,
                                   size_t errlen)
{
    memset(q, 0, sizeof *q);
    q->op = h->op;
    q->id = h->id;
    coh_rd r;
    coh_rd_init(&r, payload, h->len);
    cohort_status st = COHORT_OK;
    const char *opn = coh_proto_op_name(h->op);
    switch (h->op) {
    case COH_OP_AUTH:
        q->generation = coh_rd_u32(&r);
        if (rd_slice(&r, &q->job) < 0)
            break;
        q->mac = coh_rd_raw(&r, COH_PROTO_MAC);
        if (!r.err && (q->job.n == 0 || q->job.n > COH_PROTO_MAX_JOB))
            return FAIL(COHORT_ERR_PROTOCOL, "AUTH: job id of %u bytes (1..%d allowed)",
                        q->job.n, COH_PROTO_MAX_JOB);
        break;
    case COH_OP_SET:
    case COH_OP_SET_NOREPLY:
    case COH_OP_APPEND:
        if (rd_slice(&r, &q->key) < 0 || rd_slice(&r, &q->val) < 0)
            break;
        if ((st = check_key(&q->key, lim, "key", err, errlen)) ||
            (st = check_val(q->val.n, lim, err, errlen)))
            return st;
        break;
    case COH_OP_GET:
        q->flags = coh_rd_u8(&r);
        if (rd_slice(&r, &q->key) < 0)
            break;
        if ((st = check_key(&q->key, lim, "key", err, errlen)))
            return st;
        break;
    case COH_OP_DELETE:
        if (rd_slice(&r, &q->key) < 0)
            break;
        if ((st = check_key(&q->key, lim, "key", err, errlen)))
            return st;
        break;
    case COH_OP_NUM_KEYS:
    case COH_OP_LIST:
        if (rd_slice(&r, &q->key) < 0)
            break;
        if ((st = check_key(&q->key, lim, "prefix", err, errlen)))
            return st;
        break;
    case COH_OP_ADD:
        if (rd_slice(&r, &q->key) < 0)
            break;
        q->delta = coh_rd_i64(&r);
        if (!r.err && (st = check_key(&q->key, lim, "key", err, errlen)))
            return st;
        break;
    case COH_OP_CAS:
        if (rd_slice(&r, &q->key) < 0 || rd_slice(&r, &q->exp) < 0 || rd_slice(&r, &q->val) < 0)
            break;
        if ((st = check_key(&q->key, lim, "key", err, errlen)) ||
            (st = check_val(q->val.n, lim, err, errlen)))
            return st;
        break;
    case COH_OP_WAIT:
    case COH_OP_MULTI_GET:
    case COH_OP_CHECK:
    case COH_OP_MULTI_SET: {
        if (h->op != COH_OP_CHECK && h->op != COH_OP_MULTI_SET)
            q->flags = coh_rd_u8(&r);
        q->n = coh_rd_u32(&r);
        if (r.err)
            break;
        /* Each item takes at least 4 bytes (8 for pairs): a count the payload
         * cannot hold is rejected before anything is sized by it. */
        size_t per = h->op == COH_OP_MULTI_SET ? 8 : 4;
        if (q->n > r.n / per)
            return FAIL(COHORT_ERR_PROTOCOL, "%s: count %u does not fit in %zu payload bytes",
                        opn, q->n, r.n);
        q->items = r;
        for (uint32_t i = 0; i < q->n; i++) {
            coh_slice k, v;
            if (rd_slice(&r, &k) < 0)
                break;
            if ((st = check_key(&k, lim, "key", err, errlen)))
                return st;
            if (h->op == COH_OP_MULTI_SET) {
                if (rd_slice(&r, &v) < 0)
                    break;
                if ((st = check_val(v.n, lim, err, errlen)))
                    return st;
            }
        }
        if (!r.err)
            q->items.n -= r.n; /* the items' extent, so trailing bytes stay detectable */
        break;
    }
    case COH_OP_BARRIER:
        if (rd_slice(&r, &q->key) < 0)
            break;
        q->n = coh_rd_u32(&r);
        if (r.err)
            break;
        if ((st = check_key(&q->key, lim, "barrier name", err, errlen)))
            return st;
        if (q->n == 0)
            return FAIL(COHORT_ERR_PROTOCOL, "BARRIER: 0 participants");
        break;
    case COH_OP_CANCEL:
        q->target = coh_rd_u32(&r);
        break;
    case COH_OP_SET_GEN:
        q->generation = coh_rd_u32(&r);
        break;
    case COH_OP_PING:
    case COH_OP_STATS:
        break;
    default:
        return FAIL(COHORT_ERR_PROTOCOL, "unknown request op 0x%02x", h->op);
    }
    if (r.err)
        return FAIL(COHORT_ERR_PROTOCOL, "%s: payload of %u bytes is truncated or malformed", opn,
                    h->len);
    if (r.n != 0)
        return FAIL(COHORT_ERR_PROTOCOL, "%s: %zu unexpected trailing payload bytes", opn, r.n);
    return COHORT_OK;
}

/* Iterating a request that coh_proto_decode_req accepted cannot run past
 * the items: the decoder walked the same cursor once already. */
void coh_req_next(coh_req *q, coh_slice *key, coh_slice *val)
{
    rd_slice(&q->items, key);
    if (q->op == COH_OP_MULTI_SET)
        rd_slice(&q->items, val);
}

/* ---- replies ----
 * A reply's status byte is checked against the known range so that a
 * newer server's unknown status becomes a clear protocol error on an older
 * client rather than a number cast into an enum it does not have. */

cohort_status coh_proto_decode_reply(const coh_frame_hdr *h, const uint8_t *payload,
                                     coh_reply *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->op = h->op & 0x7F;
    out->id = h->id;
    coh_rd r;
    coh_rd_init(&r, payload, h->len);
    uint8_t st = coh_rd_u8(&r);
    if (r.err)
        return FAIL(COHORT_ERR_PROTOCOL, "reply to request %u has an empty payload", h->id);
    if (st > COHORT_ERR_UNSUPPORTED)
        return FAIL(COHORT_ERR_PROTOCOL, "reply to request %u carries unknown status %u", h->id,
                    st);
    out->status = (cohort_status)st;
    if (st != COHORT_OK) {
        out->msg.p = coh_rd_bytes(&r, &out->msg.n);
        if (r.err || r.n)
            return FAIL(COHORT_ERR_PROTOCOL, "error reply to request %u is malformed", h->id);
    }
    out->body = r;
    return COHORT_OK;
}

/* ---- auth ----
 * The MAC binds the token to this connection's nonce (no replay on another
 * connection) and to the job and generation the client claims (they cannot
 * be swapped by a man in the middle without the token). The job id needs no
 * length prefix: the nonce before it and the generation after it have fixed
 * sizes. */

void coh_proto_auth_mac(uint8_t mac[COH_PROTO_MAC], const char *token,
                        const uint8_t nonce[COH_PROTO_NONCE], const uint8_t *job, size_t joblen,
                        uint32_t generation)
{
    /* No label: this MAC predates the others and is keyed by the token
     * itself, whose other uses all hash a label first. */
    coh_auth_mac m;
    coh_auth_begin(&m, token, strlen(token), NULL);
    coh_auth_add(&m, nonce, COH_PROTO_NONCE);
    coh_auth_add(&m, job, joblen);
    coh_auth_add_u32(&m, generation);
    coh_auth_end(&m, mac);
}

int coh_proto_parse_i64(const uint8_t *p, size_t n, int64_t *out)
{
    /* Counters are stored as ASCII decimal so that get() and cohort-kv show
     * them readably; at most 20 chars ("-9223372036854775808"). */
    if (n == 0 || n > 20)
        return -1;
    size_t i = p[0] == '-' ? 1 : 0;
    if (i == n)
        return -1;
    /* Accumulate negatively so INT64_MIN parses without overflow. */
    int64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        int d = p[i] - '0';
        if (v < (INT64_MIN + d) / 10)
            return -1;
        v = v * 10 - d;
    }
    if (p[0] != '-') {
        if (v == INT64_MIN)
            return -1;
        v = -v;
    }
    *out = v;
    return 0;
}
