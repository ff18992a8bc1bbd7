/* cases.c - see cases.h. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/group.h"
#include "reduce/reduce.h"
#include "support/support.h"

int cc_full(void)
{
    const char *e = getenv("COHORT_FULL_MATRIX");
    return e && *e && strcmp(e, "0") != 0;
}

static int is_float(int dt) { return dt >= COHORT_FLOAT16; }
static int is_signed(int dt)
{
    return dt == COHORT_INT8 || dt == COHORT_INT32 || dt == COHORT_INT64;
}

/* The value rank r contributes at element j of a reduction, as an integer
 * (bit ops: any 64-bit pattern). */
static int64_t ival(int r, size_t j, int op)
{
    static const int64_t pm[] = {-2, -1, 1, 2};
    switch (op) {
    case COHORT_PROD: return pm[((size_t)r * 3 + j) % 4];
    case COHORT_MIN:
    case COHORT_MAX: return (int64_t)(((size_t)r * 13 + j * 5) % 29) - 14;
    case COHORT_BAND:
    case COHORT_BOR:
    case COHORT_BXOR: return (int64_t)cht_mix(((uint64_t)r << 40) ^ j);
    default: return (int64_t)(((size_t)r * 7 + j * 3) % 17) - 8;
    }
}

/* Stores integer-valued x (or its low bits) in dtype representation. */
static void store(void *p, int dt, double x, uint64_t bits)
{
    switch (dt) {
    case COHORT_FLOAT32: {
        float f = (float)x;
        memcpy(p, &f, 4);
        break;
    }
    case COHORT_FLOAT64: memcpy(p, &x, 8); break;
    case COHORT_FLOAT16: {
        uint16_t h = coh_f32_to_f16((float)x);
        memcpy(p, &h, 2);
        break;
    }
    case COHORT_BFLOAT16: {
        uint16_t h = coh_f32_to_bf16((float)x);
        memcpy(p, &h, 2);
        break;
    }
    default: memcpy(p, &bits, cohort_dtype_size((cohort_dtype)dt)); /* little-endian */
    }
}

static void put_input(void *p, int dt, int r, size_t j, int op)
{
    int64_t v = ival(r, j, op);
    store(p, dt, (double)v, (uint64_t)v);
}

/* Reference reduction of element j over ranks 0..n-1, in dtype repr. */
static void ref_reduce(void *out, int dt, int op, int n, size_t j)
{
    if (is_float(dt)) {
        double acc = (double)ival(0, j, op);
        for (int r = 1; r < n; r++) {
            double v = (double)ival(r, j, op);
            switch (op) {
            case COHORT_PROD: acc *= v; break;
            case COHORT_MIN: acc = v < acc ? v : acc; break;
            case COHORT_MAX: acc = v > acc ? v : acc; break;
            default: acc += v;
            }
        }
        if (op == COHORT_AVG)
            acc /= n; /* rounded once to double, then to the dtype: exact enough
                       * (53 >= 2*24+2: the two roundings equal one) */
        store(out, dt, acc, 0);
        return;
    }
    int bitsz = 8 * (int)cohort_dtype_size((cohort_dtype)dt);
    uint64_t mask = bitsz == 64 ? ~0ull : (1ull << bitsz) - 1;
    uint64_t acc = (uint64_t)ival(0, j, op) & mask;
    for (int r = 1; r < n; r++) {
        uint64_t v = (uint64_t)ival(r, j, op) & mask;
        /* signed view by sign extension */
        int64_t sa = (int64_t)(acc << (64 - bitsz)) >> (64 - bitsz);
        int64_t sv = (int64_t)(v << (64 - bitsz)) >> (64 - bitsz);
        int lt = is_signed(dt) ? sv < sa : v < acc;
        int gt = is_signed(dt) ? sv > sa : v > acc;
        switch (op) {
        case COHORT_SUM: acc = (acc + v) & mask; break;
        case COHORT_PROD: acc = (acc * v) & mask; break;
        case COHORT_MIN: acc = lt ? v : acc; break;
        case COHORT_MAX: acc = gt ? v : acc; break;
        case COHORT_BAND: acc &= v; break;
        case COHORT_BOR: acc |= v; break;
        case COHORT_BXOR: acc ^= v; break;
        }
    }
    memcpy(out, &acc, (size_t)bitsz / 8);
}

/* Payload byte b of element j of rank r's block (non-reducing ops). */
static unsigned char pbyte(int r, size_t j, size_t b)
{
    return (unsigned char)(cht_mix(((uint64_t)r << 48) ^ (j << 4) ^ b) >> 24);
}
static void put_payload(unsigned char *p, size_t es, int r, size_t j)
{
    for (size_t b = 0; b < es; b++)
        p[b] = pbyte(r, j, b);
}

static const char *coll_label(int coll)
{
    static const char *names[] = {"none",    "all_reduce", "broadcast",      "reduce",
                                  "all_gather", "gather",  "scatter",        "reduce_scatter",
                                  "all_to_all", "barrier", "send",           "recv"};
    return coll >= 0 && coll < (int)(sizeof names / sizeof names[0]) ? names[coll] : "?";
}

void cc_describe(const cc_case *k, char *out, size_t len)
{
    snprintf(out, len, "%s %s%s%s count=%zu root=%d%s", coll_label(k->coll),
             cohort_dtype_name((cohort_dtype)k->dtype), k->op >= 0 ? " " : "",
             k->op >= 0 ? cohort_op_name((cohort_op)k->op) : "", k->count, k->root,
             k->inplace ? " inplace" : "");
}

/* Compares element-wise; on mismatch writes which element and both values. */
static int expect(const unsigned char *got, const unsigned char *want, size_t nelem, size_t es,
                  const char *what, char *msg, size_t len)
{
    for (size_t i = 0; i < nelem; i++)
        if (memcmp(got + i * es, want + i * es, es)) {
            uint64_t g = 0, w = 0;
            memcpy(&g, got + i * es, es < 8 ? es : 8);
            memcpy(&w, want + i * es, es < 8 ? es : 8);
            snprintf(msg, len, "%s: element %zu is 0x%llx, want 0x%llx", what, i,
                     (unsigned long long)g, (unsigned long long)w);
            return 1;
        }
    return 0;
}

int cc_check(int rank, int n, const cc_case *k, cc_issue_fn issue, void *ctx, char *msg,
             size_t len)
{
    size_t es = cohort_dtype_size((cohort_dtype)k->dtype), c = k->count;
    size_t per = c * es, all = per * (size_t)n;
    /* sizes of send and recv for this rank (in place: one buffer, the larger) */
    size_t ssz = per, rsz = per;
    switch (k->coll) {
    case COH_COLL_ALL_GATHER: rsz = all; break;
    case COH_COLL_GATHER: rsz = all; break;
    case COH_COLL_SCATTER: ssz = all; break;
    case COH_COLL_REDUCE_SCATTER: ssz = all; break;
    case COH_COLL_ALL_TO_ALL: ssz = rsz = all; break;
    case COH_COLL_BARRIER: ssz = rsz = 0; break;
    }
    size_t bsz = ssz > rsz ? ssz : rsz;
    unsigned char *sbuf = malloc(bsz + 1), *rbuf = malloc(bsz + 1), *want = malloc(bsz + 1);
    if (!sbuf || !rbuf || !want) {
        snprintf(msg, len, "test out of memory");
        free(sbuf);
        free(rbuf);
        free(want);
        return 1;
    }
    memset(rbuf, 0xA5, bsz + 1);
    memset(sbuf, 0x5A, bsz + 1);
    int reducing = k->op >= 0;
    int root = k->root, me = rank;
    /* inputs: the full vector a reduction reads, or this rank's blocks */
    unsigned char *in = k->inplace ? rbuf : sbuf;
    switch (k->coll) {
    case COH_COLL_ALL_REDUCE:
    case COH_COLL_REDUCE:
        for (size_t j = 0; j < c; j++)
            put_input(in + j * es, k->dtype, me, j, k->op);
        break;
    case COH_COLL_REDUCE_SCATTER:
        for (size_t j = 0; j < c * (size_t)n; j++)
            put_input(in + j * es, k->dtype, me, j, k->op);
        break;
    case COH_COLL_BROADCAST:
        if (me == root)
            for (size_t j = 0; j < c; j++)
                put_payload(rbuf + j * es, es, root, j);
        break;
    case COH_COLL_ALL_GATHER:
    case COH_COLL_GATHER: {
        /* in place: the own block sits in its slot of recv */
        unsigned char *p = k->inplace ? rbuf + (size_t)me * per : sbuf;
        for (size_t j = 0; j < c; j++)
            put_payload(p + j * es, es, me, j);
        break;
    }
    case COH_COLL_SCATTER:
        if (me == root)
            for (int d = 0; d < n; d++)
                for (size_t j = 0; j < c; j++)
                    put_payload(in + ((size_t)d * c + j) * es, es, root * 1000 + d, j);
        break;
    case COH_COLL_ALL_TO_ALL:
        /* block d of rank me's input goes to rank d */
        for (int d = 0; d < n; d++)
            for (size_t j = 0; j < c; j++)
                put_payload(in + ((size_t)d * c + j) * es, es, me * 1000 + d, j);
        break;
    }
    /* in place only where the rank has both buffers */
    int ip = k->inplace;
    if ((k->coll == COH_COLL_GATHER || k->coll == COH_COLL_SCATTER || k->coll == COH_COLL_REDUCE) &&
        me != root)
        ip = 0;
    if (ip == 0 && k->inplace && (k->coll == COH_COLL_REDUCE))
        for (size_t j = 0; j < c; j++) /* non-root: input lives in send */
            put_input(sbuf + j * es, k->dtype, me, j, k->op);
    if (ip == 0 && k->inplace && k->coll == COH_COLL_GATHER)
        for (size_t j = 0; j < c; j++)
            put_payload(sbuf + j * es, es, me, j);
    const void *send = ip ? (const void *)rbuf : sbuf;
    if (k->coll == COH_COLL_BROADCAST)
        send = rbuf;
    cohort_status st = issue(ctx, k, send, rbuf);
    char desc[160];
    cc_describe(k, desc, sizeof desc);
    if (st != COHORT_OK) {
        snprintf(msg, len, "%s: rank %d: %s", desc, me, cohort_status_name(st));
        free(sbuf);
        free(rbuf);
        free(want);
        return 1;
    }
    /* expected output of this rank */
    size_t nout = 0; /* elements to compare */
    switch (k->coll) {
    case COH_COLL_ALL_REDUCE:
        for (size_t j = 0; j < c; j++)
            ref_reduce(want + j * es, k->dtype, k->op, n, j);
        nout = c;
        break;
    case COH_COLL_REDUCE:
        if (me == root) {
            for (size_t j = 0; j < c; j++)
                ref_reduce(want + j * es, k->dtype, k->op, n, j);
            nout = c;
        }
        break;
    case COH_COLL_REDUCE_SCATTER:
        for (size_t j = 0; j < c; j++)
            ref_reduce(want + j * es, k->dtype, k->op, n, (size_t)me * c + j);
        nout = c;
        break;
    case COH_COLL_BROADCAST:
        for (size_t j = 0; j < c; j++)
            put_payload(want + j * es, es, root, j);
        nout = c;
        break;
    case COH_COLL_ALL_GATHER:
        for (int r = 0; r < n; r++)
            for (size_t j = 0; j < c; j++)
                put_payload(want + ((size_t)r * c + j) * es, es, r, j);
        nout = c * (size_t)n;
        break;
    case COH_COLL_GATHER:
        if (me == root) {
            for (int r = 0; r < n; r++)
                for (size_t j = 0; j < c; j++)
                    put_payload(want + ((size_t)r * c + j) * es, es, r, j);
            nout = c * (size_t)n;
        }
        break;
    case COH_COLL_SCATTER:
        /* in place too: the root's own block lands at the start of recv */
        for (size_t j = 0; j < c; j++)
            put_payload(want + j * es, es, root * 1000 + me, j);
        nout = c;
        break;
    case COH_COLL_ALL_TO_ALL:
        for (int s = 0; s < n; s++)
            for (size_t j = 0; j < c; j++)
                put_payload(want + ((size_t)s * c + j) * es, es, s * 1000 + me, j);
        nout = c * (size_t)n;
        break;
    }
    int bad = expect(rbuf, want, nout, es, desc, msg, len);
    /* nothing written past the output (or into recv at all where there is
     * none); in-place inputs beyond the output are the caller's */
    if (!bad && !k->inplace) {
        size_t from = nout * es;
        if (k->coll == COH_COLL_GATHER && me != root)
            from = 0;
        for (size_t b = from; b < bsz + 1 && !bad; b++)
            if (rbuf[b] != 0xA5) {
                snprintf(msg, len, "%s: rank %d: byte %zu of recv written (output is %zu bytes)",
                         desc, me, b, nout * es);
                bad = 1;
            }
    }
    if (bad && strncmp(msg, desc, strlen(desc)) == 0) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "rank %d of %d: %s", me, n, msg);
        snprintf(msg, len, "%s", tmp);
    }
    (void)reducing;
    free(sbuf);
    free(rbuf);
    free(want);
    return bad;
}

int cc_check_float_identity(int rank, int n, size_t count, cc_issue_fn issue, void *ctx, char *msg,
                            size_t len)
{
    for (int pass = 0; pass < 2; pass++) {
        int dt = pass == 0 ? COHORT_FLOAT32 : COHORT_BFLOAT16;
        size_t es = cohort_dtype_size((cohort_dtype)dt);
        unsigned char *buf = malloc(count * es + 1);
        double *ref = calloc(count + 1, sizeof(double)), *mag = calloc(count + 1, sizeof(double));
        if (!buf || !ref || !mag) {
            free(buf);
            free(ref);
            free(mag);
            snprintf(msg, len, "test out of memory");
            return 1;
        }
        /* every rank's values are known to every rank: the reference sums
         * them in double */
        for (int r = 0; r < n; r++)
            for (size_t j = 0; j < count; j++) {
                double v = ((double)(cht_mix(((uint64_t)r << 32) ^ j) % 2000001) - 1000000.0) / 4096.0;
                float f = (float)v;
                if (dt == COHORT_BFLOAT16)
                    f = coh_bf16_to_f32(coh_f32_to_bf16(f));
                ref[j] += f;
                mag[j] += fabs(f);
                if (r == rank)
                    store(buf + j * es, dt, f, 0);
            }
        cc_case k = {COH_COLL_ALL_REDUCE, dt, COHORT_SUM, count, -1, 1};
        cohort_status st = issue(ctx, &k, buf, buf);
        if (st != COHORT_OK) {
            snprintf(msg, len, "random %s all_reduce: %s", cohort_dtype_name((cohort_dtype)dt),
                     cohort_status_name(st));
            free(buf);
            free(ref);
            free(mag);
            return 1;
        }
        /* float32: each of the n-1 additions rounds once (2^-24 relative to
         * the partial sum <= sum|x|); bfloat16 adds a rounding to 8 bits per
         * combine (2^-8) */
        double eps = dt == COHORT_FLOAT32 ? ldexp(1.0, -23) : ldexp(1.0, -7);
        uint64_t h = 1469598103934665603ull;
        for (size_t j = 0; j < count; j++) {
            float got;
            if (dt == COHORT_FLOAT32)
                memcpy(&got, buf + j * 4, 4);
            else {
                uint16_t b;
                memcpy(&b, buf + j * 2, 2);
                got = coh_bf16_to_f32(b);
            }
            if (fabs((double)got - ref[j]) > (double)n * eps * mag[j]) {
                snprintf(msg, len, "random %s all_reduce rank %d element %zu: %.9g, want %.9g",
                         cohort_dtype_name((cohort_dtype)dt), rank, j, (double)got, ref[j]);
                free(buf);
                free(ref);
                free(mag);
                return 1;
            }
            for (size_t b = 0; b < es; b++)
                h = (h ^ buf[j * es + b]) * 1099511628211ull;
        }
        free(buf);
        free(ref);
        free(mag);
        /* every rank must hold the same bits */
        uint64_t *hs = malloc(sizeof(uint64_t) * (size_t)n);
        if (!hs) {
            snprintf(msg, len, "test out of memory");
            return 1;
        }
        cc_case ag = {COH_COLL_ALL_GATHER, COHORT_UINT64, -1, 1, -1, 0};
        st = issue(ctx, &ag, &h, hs);
        int bad = st != COHORT_OK;
        for (int r = 0; r < n && !bad; r++)
            if (hs[r] != h) {
                snprintf(msg, len, "random %s all_reduce: rank %d's result differs from rank %d's",
                         cohort_dtype_name((cohort_dtype)dt), r, rank);
                bad = 1;
            }
        if (st != COHORT_OK)
            snprintf(msg, len, "hash all_gather: %s", cohort_status_name(st));
        free(hs);
        if (bad)
            return 1;
    }
    return 0;
}

int cc_matrix(int coll, int n, int full, size_t chunk_bytes, cc_case *out, int max)
{
    static const int red_def[][2] = {{COHORT_FLOAT32, COHORT_SUM},
                                     {COHORT_BFLOAT16, COHORT_AVG},
                                     /* divided in the fold by shm and direct */
                                     {COHORT_FLOAT32, COHORT_AVG},
                                     {COHORT_INT64, COHORT_MAX},
                                     {COHORT_UINT8, COHORT_BXOR}};
    static const int mov_def[] = {COHORT_INT8, COHORT_FLOAT16, COHORT_FLOAT64};
    int pairs[COHORT_DTYPE_COUNT * COHORT_OP_COUNT][2], np = 0;
    int reducing = coll == COH_COLL_ALL_REDUCE || coll == COH_COLL_REDUCE ||
                   coll == COH_COLL_REDUCE_SCATTER;
    if (coll == COH_COLL_BARRIER) {
        pairs[np][0] = COHORT_UINT8;
        pairs[np++][1] = -1;
    } else if (reducing) {
        if (full) {
            for (int d = 0; d < COHORT_DTYPE_COUNT; d++)
                for (int o = 0; o < COHORT_OP_COUNT; o++)
                    if (coh_op_valid((cohort_dtype)d, (cohort_op)o)) {
                        pairs[np][0] = d;
                        pairs[np++][1] = o;
                    }
        } else {
            for (size_t i = 0; i < sizeof red_def / sizeof red_def[0]; i++) {
                pairs[np][0] = red_def[i][0];
                pairs[np++][1] = red_def[i][1];
            }
        }
    } else {
        int nd = full ? COHORT_DTYPE_COUNT : (int)(sizeof mov_def / sizeof mov_def[0]);
        for (int i = 0; i < nd; i++) {
            pairs[np][0] = full ? i : mov_def[i];
            pairs[np++][1] = -1;
        }
    }
    int rooted = coll == COH_COLL_BROADCAST || coll == COH_COLL_REDUCE ||
                 coll == COH_COLL_GATHER || coll == COH_COLL_SCATTER;
    int nc = 0;
    for (int p = 0; p < np; p++) {
        size_t es = cohort_dtype_size((cohort_dtype)pairs[p][0]);
        size_t ce = chunk_bytes / es ? chunk_bytes / es : 1;
        size_t counts[] = {0, 1, 7, ce, 5 * ce + 3};
        int ncounts = coll == COH_COLL_BARRIER ? 1 : 5;
        for (int ci = 0; ci < ncounts; ci++) {
            int roots[2] = {n - 1, 0}, nroots = rooted && full && n > 1 ? 2 : 1;
            for (int ri = 0; ri < nroots; ri++)
                for (int ip = 0; ip < 2; ip++) {
                    /* default: in place for the multi-chunk count only */
                    if (ip && (coll == COH_COLL_BARRIER || coll == COH_COLL_BROADCAST ||
                               (!full && ci != 4)))
                        continue;
                    if (nc >= max)
                        return nc;
                    cc_case *k = &out[nc++];
                    k->coll = coll;
                    k->dtype = pairs[p][0];
                    k->op = pairs[p][1];
                    k->count = counts[ci];
                    k->root = rooted ? roots[ri] : -1;
                    k->inplace = ip;
                }
        }
    }
    return nc;
}
