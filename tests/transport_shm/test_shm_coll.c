/*
 * test_shm_coll.c - every shm collective x dtype x op x count x local size,
 * in real forked processes on a real segment, checked exactly against a
 * reference each rank computes independently from every rank's (pure,
 * deterministic) inputs.
 *
 * Buffers start at rotating misalignments (multiples of the element size).
 * Counts: 0, 1, 7, the single-phase all_reduce threshold and one past it,
 * exactly one piece, and several pieces plus an odd remainder; the "tiny"
 * configurations shrink the slot (COHORT_SHM_SLOT_BYTES) so every
 * multi-piece path runs on small buffers. Buffers have guard zones that
 * must stay untouched; in-place forms are tested where the op has them.
 *
 * Float tolerance: none. Inputs are small integers, so every result is
 * exact in every float type regardless of the order of operations and is
 * compared bit-exactly. AVG over the whole group (every harness group) is
 * divided by the segment's fold (shm_coll.h): the exact sum divided once in
 * the type - float16/bfloat16 in float32 before their one rounding.
 */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "group/envtab.h"
#include "harness.h"
#include "reduce/reduce.h"
#include "support/support.h"
#include "coll/shm/shm_coll.h"
#include "transport/shm/shm_cma.h"
#include "transport/shm/shm_mem.h"
#include "transport/shm/shm_seg.h"
#include "util/util.h"

#define GUARD 64
#define GUARD_BYTE 0xA5

static int nranks;
static int me;
static cohort_group *G;
static const char *where;
static char wbuf[256];

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d/%d: %s: check failed (%s:%d) %s: ", me, nranks, where,        \
                    __FILE__, __LINE__, #cond);                                                    \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define OK(expr)                                                                                   \
    do {                                                                                           \
        cohort_status st_ = (expr);                                                                \
        CHECK(st_ == COHORT_OK, "%s: %s", cohort_status_name(st_), G->err.msg);                   \
    } while (0)

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int is_float(int dt) { return dt >= COHORT_FLOAT16; }
static int is_signed(int dt)
{
    return dt == COHORT_INT8 || dt == COHORT_INT32 || dt == COHORT_INT64 || is_float(dt);
}
static int bits_of(int dt) { return (int)th_dtype_size(dt) * 8; }

/* ---- values: rank r's input element i, as an exact integer ---- */

static int64_t val(int dt, int op, int r, size_t i, uint64_t salt)
{
    uint64_t h = mix(salt * 1000003u + (uint64_t)r * 7919u + i);
    switch (op) {
    case COHORT_SUM:
    case COHORT_AVG: return is_signed(dt) ? (int64_t)(h % 9) - 4 : (int64_t)(h % 9);
    case COHORT_PROD:
        /* at most two ranks contribute 2 for any i: |product| <= 4 */
        if ((i + (size_t)r + salt) % 4 == 0)
            return 2;
        return is_signed(dt) && h % 5 == 0 ? -1 : 1;
    case COHORT_MIN:
    case COHORT_MAX: return is_signed(dt) ? (int64_t)(h % 101) - 50 : (int64_t)(h % 101);
    default: /* bit ops: full width */
        return bits_of(dt) == 64 ? (int64_t)h : (int64_t)(h & ((1ull << bits_of(dt)) - 1));
    }
}

/* Independent float16 decode (the encoder of exact small integers below is
 * trivially correct; the decoder must not be the code under test). */
static double f16_dec(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? INFINITY : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}
static double bf16_dec(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static void store_val(void *p, size_t i, int dt, int64_t v)
{
    switch (dt) {
    case COHORT_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case COHORT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case COHORT_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case COHORT_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case COHORT_INT64: ((int64_t *)p)[i] = v; break;
    case COHORT_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case COHORT_FLOAT16: ((uint16_t *)p)[i] = coh_f32_to_f16((float)v); break;
    case COHORT_BFLOAT16: ((uint16_t *)p)[i] = coh_f32_to_bf16((float)v); break;
    case COHORT_FLOAT32: ((float *)p)[i] = (float)v; break;
    case COHORT_FLOAT64: ((double *)p)[i] = (double)v; break;
    }
}

static double load_f(const void *p, size_t i, int dt)
{
    switch (dt) {
    case COHORT_FLOAT16: return f16_dec(((const uint16_t *)p)[i]);
    case COHORT_BFLOAT16: return bf16_dec(((const uint16_t *)p)[i]);
    case COHORT_FLOAT32: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
    }
}

static uint64_t load_bits(const void *p, size_t i, int dt)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)p + i * th_dtype_size(dt), th_dtype_size(dt));
    return v;
}

static uint64_t mask_of(int dt) { return bits_of(dt) == 64 ? ~0ull : (1ull << bits_of(dt)) - 1; }

/* Checks element i of `got` against the reduction over the given ranks'
 * inputs (element index `src_i` of each). */
static void check_reduced(const void *got, size_t i, int dt, int op, size_t src_i, uint64_t salt)
{
    if (is_float(dt)) {
        double acc = (double)val(dt, op, 0, src_i, salt);
        for (int r = 1; r < nranks; r++) {
            double v = (double)val(dt, op, r, src_i, salt);
            switch (op) {
            case COHORT_SUM:
            case COHORT_AVG: acc += v; break;
            case COHORT_PROD: acc *= v; break;
            case COHORT_MIN: acc = v < acc ? v : acc; break;
            default: acc = v > acc ? v : acc; break;
            }
        }
        /* AVG over the whole group (every harness group): the segment's
         * fold divides the exact sum once - float16/bfloat16 the float32
         * sum before their one rounding, float32 and float64 in the type */
        if (op == COHORT_AVG && (dt == COHORT_FLOAT16 || dt == COHORT_BFLOAT16)) {
            float m = (float)acc / (float)nranks;
            acc = dt == COHORT_FLOAT16 ? f16_dec(coh_f32_to_f16(m)) : bf16_dec(coh_f32_to_bf16(m));
        } else if (op == COHORT_AVG && dt == COHORT_FLOAT32) {
            acc = (double)((float)acc / (float)nranks);
        } else if (op == COHORT_AVG) {
            acc = acc / (double)nranks;
        }
        double g = load_f(got, i, dt);
        CHECK(g == acc, "elem %zu: got %.9g want %.9g", i, g, acc);
        return;
    }
    uint64_t m = mask_of(dt);
    uint64_t acc = (uint64_t)val(dt, op, 0, src_i, salt) & m;
    for (int r = 1; r < nranks; r++) {
        uint64_t v = (uint64_t)val(dt, op, r, src_i, salt) & m;
        switch (op) {
        case COHORT_SUM: acc = (acc + v) & m; break;
        case COHORT_PROD: acc = (acc * v) & m; break;
        case COHORT_MIN:
        case COHORT_MAX: {
            int64_t a = (int64_t)val(dt, op, 0, src_i, salt);
            for (int q = 1; q < nranks; q++) {
                int64_t b = (int64_t)val(dt, op, q, src_i, salt);
                a = op == COHORT_MIN ? (b < a ? b : a) : (b > a ? b : a);
            }
            acc = (uint64_t)a & m;
            r = nranks;
            break;
        }
        case COHORT_BAND: acc &= v; break;
        case COHORT_BOR: acc |= v; break;
        default: acc ^= v; break;
        }
    }
    uint64_t g = load_bits(got, i, dt);
    CHECK(g == acc, "elem %zu: got %#llx want %#llx", i, (unsigned long long)g,
          (unsigned long long)acc);
}

static uint8_t byte_of(int from, int to, size_t i, uint64_t salt)
{
    return (uint8_t)mix(salt * 31u + (uint64_t)from * 1000003u + (uint64_t)to * 7919u + i);
}

/* ---- buffers with guard zones ---- */

typedef struct gbuf {
    unsigned char *base;
    size_t len, off;
} gbuf;

/* Buffers start at a rotating misalignment (a multiple of the element
 * size) so copies see every head/tail shape against the 64-byte slots. */
static unsigned mis_ctr;
static size_t mis_unit = 1;

static unsigned char *galloc(gbuf *b, size_t len)
{
    static const size_t mis[] = {0, 1, 3, 8, 13};
    b->len = len;
    b->off = GUARD + mis[mis_ctr++ % 5] * mis_unit;
    b->base = malloc(len + b->off + GUARD);
    CHECK(b->base, "malloc %zu", len);
    memset(b->base, GUARD_BYTE, len + b->off + GUARD);
    return b->base + b->off;
}

static void gcheck(gbuf *b, const char *name)
{
    for (size_t i = 0; i < b->off; i++)
        CHECK(b->base[i] == GUARD_BYTE, "%s: guard before the buffer overwritten at -%zu", name,
              b->off - i);
    for (size_t i = 0; i < GUARD; i++)
        CHECK(b->base[b->off + b->len + i] == GUARD_BYTE,
              "%s: guard after the buffer overwritten at +%zu", name, i);
    free(b->base);
}

static void untouched(const unsigned char *p, size_t len, const char *name)
{
    for (size_t i = 0; i < len; i++)
        CHECK(p[i] == GUARD_BYTE, "%s byte %zu written", name, i);
}

/* ---- the collectives ---- */

static uint64_t salt_ctr;

/* inplace: 0 separate, 1 send == recv, 2 send == recv on rank 0 only */
static void t_all_reduce(int dt, int op, size_t count, int inplace)
{
    size_t es = th_dtype_size(dt);
    uint64_t salt = ++salt_ctr;
    gbuf bs, br;
    unsigned char *send = galloc(&bs, count * es);
    inplace = inplace == 1 || (inplace == 2 && me == 0);
    unsigned char *recv = inplace ? send : galloc(&br, count * es);
    for (size_t i = 0; i < count; i++)
        store_val(send, i, dt, val(dt, op, me, i, salt));
    coh_call c = th_call(G, COH_COLL_ALL_REDUCE, dt, op, -1, count);
    OK(coh_shm_all_reduce(G->shm, &c, send, recv, count));
    for (size_t i = 0; i < count; i++)
        check_reduced(recv, i, dt, op, i, salt);
    gcheck(&bs, "send");
    if (!inplace)
        gcheck(&br, "recv");
}

/* t_all_reduce, and whether it took the single copy (three phases: open,
 * middle, close; the two-copy path takes two per piece, after the open
 * phase where it fell back) */
static void t_ar_path(int dt, int op, size_t count, int inplace, int single)
{
    uint32_t ph = G->shm->phase;
    uint64_t k = G->shm->ar_singles;
    t_all_reduce(dt, op, count, inplace);
    /* single copy: open, middle, close; two copies after the open phase or
     * without it: any number (2 a piece) */
    CHECK(G->shm->ar_singles - k == (single != 0) && (!single || G->shm->phase - ph == 3),
          "all_reduce %s of %zu B in place %d: %u phases, single copy expected %d",
          th_dtype_name(dt), count * th_dtype_size(dt), inplace, G->shm->phase - ph, single);
}

static void t_reduce(int dt, int op, size_t count, int inplace, int root)
{
    size_t es = th_dtype_size(dt);
    uint64_t salt = ++salt_ctr;
    gbuf bs, br;
    unsigned char *send = galloc(&bs, count * es);
    unsigned char *recv = inplace && me == root ? send : galloc(&br, count * es);
    for (size_t i = 0; i < count; i++)
        store_val(send, i, dt, val(dt, op, me, i, salt));
    coh_call c = th_call(G, COH_COLL_REDUCE, dt, op, root, count);
    OK(coh_shm_reduce(G->shm, &c, send, recv, count, root));
    if (me == root)
        for (size_t i = 0; i < count; i++)
            check_reduced(recv, i, dt, op, i, salt);
    else
        untouched(recv, count * es, "non-root recv");
    gcheck(&bs, "send");
    if (recv != send)
        gcheck(&br, "recv");
}

static void t_broadcast(int dt, size_t count, int root)
{
    size_t bytes = count * th_dtype_size(dt);
    uint64_t salt = ++salt_ctr;
    gbuf b;
    unsigned char *buf = galloc(&b, bytes);
    if (me == root)
        for (size_t i = 0; i < bytes; i++)
            buf[i] = byte_of(root, 0, i, salt);
    coh_call c = th_call(G, COH_COLL_BROADCAST, dt, -1, root, count);
    OK(coh_shm_broadcast(G->shm, &c, buf, bytes, root));
    for (size_t i = 0; i < bytes; i++)
        CHECK(buf[i] == byte_of(root, 0, i, salt), "byte %zu", i);
    gcheck(&b, "buf");
}

/* inplace: 0 separate, 1 send = recv + me*B, 2 send == recv */
static void t_all_gather(int dt, size_t count, int inplace)
{
    size_t B = count * th_dtype_size(dt);
    uint64_t salt = ++salt_ctr;
    gbuf bs, br;
    unsigned char *recv = galloc(&br, B * nranks);
    unsigned char *send = inplace == 1 ? recv + me * B : inplace == 2 ? recv : galloc(&bs, B);
    for (size_t i = 0; i < B; i++)
        send[i] = byte_of(me, 0, i, salt);
    coh_call c = th_call(G, COH_COLL_ALL_GATHER, dt, -1, -1, count);
    OK(coh_shm_all_gather(G->shm, &c, send, recv, B));
    for (int q = 0; q < nranks; q++)
        for (size_t i = 0; i < B; i++)
            CHECK(recv[q * B + i] == byte_of(q, 0, i, salt), "block %d byte %zu", q, i);
    gcheck(&br, "recv");
    if (!inplace)
        gcheck(&bs, "send");
}

static void t_gather(int dt, size_t count, int inplace, int root)
{
    size_t B = count * th_dtype_size(dt);
    uint64_t salt = ++salt_ctr;
    gbuf bs, br;
    unsigned char *recv = galloc(&br, B * nranks);
    int ip = inplace && me == root;
    unsigned char *send = ip ? recv + me * B : galloc(&bs, B);
    for (size_t i = 0; i < B; i++)
        send[i] = byte_of(me, 0, i, salt);
    coh_call c = th_call(G, COH_COLL_GATHER, dt, -1, root, count);
    OK(coh_shm_gather(G->shm, &c, send, recv, B, root));
    if (me == root) {
        for (int q = 0; q < nranks; q++)
            for (size_t i = 0; i < B; i++)
                CHECK(recv[q * B + i] == byte_of(q, 0, i, salt), "block %d byte %zu", q, i);
    } else {
        untouched(recv, B * nranks, "non-root recv");
    }
    gcheck(&br, "recv");
    if (!ip)
        gcheck(&bs, "send");
}

/* inplace (root): 0 separate, 1 recv = send + root*B, 2 recv == send */
static void t_scatter(int dt, size_t count, int inplace, int root)
{
    size_t B = count * th_dtype_size(dt);
    uint64_t salt = ++salt_ctr;
    gbuf bs, br;
    unsigned char *send = galloc(&bs, B * nranks);
    unsigned char *recv;
    if (me == root)
        for (int q = 0; q < nranks; q++)
            for (size_t i = 0; i < B; i++)
                send[q * B + i] = byte_of(root, q, i, salt);
    int ip = me == root ? inplace : 0;
    recv = ip == 1 ? send + me * B : ip == 2 ? send : galloc(&br, B);
    coh_call c = th_call(G, COH_COLL_SCATTER, dt, -1, root, count);
    OK(coh_shm_scatter(G->shm, &c, me == root ? send : NULL, recv, B, root));
    for (size_t i = 0; i < B; i++)
        CHECK(recv[i] == byte_of(root, me, i, salt), "byte %zu", i);
    if (me != root)
        untouched(send, B * nranks, "non-root send");
    gcheck(&bs, "send");
    if (!ip)
        gcheck(&br, "recv");
}

/* send/recv of B bytes through the pair's channel (the header as coh_p2p
 * builds it) between ranks 2k and 2k+1, the even one first, then back; an
 * odd rank out takes part only in the call count (th_call: every rank's
 * seq stays the same for the collectives after). */
static void t_sendrecv(size_t B)
{
    int partner = me ^ 1;
    for (int dir = 0; dir < 2; dir++) {
        int from = dir ? me | 1 : me & ~1, to = from ^ 1;
        uint64_t salt = ++salt_ctr;
        coh_call c = th_call(G, me == from ? COH_COLL_SEND : COH_COLL_RECV, COHORT_UINT8, -1,
                             partner, B);
        if (partner >= nranks)
            continue;
        gbuf b;
        unsigned char *p = galloc(&b, B);
        coh_hdr h;
        coh_hdr_from_call(&h, G, &c, COH_MSG_P2P, 0, B);
        h.coll = COH_COLL_SEND;
        h.root = to;
        if (me == from) {
            for (size_t i = 0; i < B; i++)
                p[i] = byte_of(from, to, i, salt);
            OK(coh_shm_send(G->shm, &c, to, &h, p, B));
        } else {
            OK(coh_shm_recv(G->shm, &c, from, &h, p, B));
            for (size_t i = 0; i < B; i++)
                CHECK(p[i] == byte_of(from, to, i, salt), "send/recv %zu B: byte %zu", B, i);
        }
        gcheck(&b, "send/recv");
    }
}

/* inplace: 0 separate, 1 recv == send, 2 recv = send + me*blk */
static void t_reduce_scatter(int dt, int op, size_t cpr, int inplace)
{
    size_t es = th_dtype_size(dt), blk = cpr * es;
    uint64_t salt = ++salt_ctr;
    gbuf bs, br;
    unsigned char *send = galloc(&bs, blk * nranks);
    unsigned char *recv = inplace == 1 ? send : inplace == 2 ? send + me * blk : galloc(&br, blk);
    for (size_t i = 0; i < cpr * nranks; i++)
        store_val(send, i, dt, val(dt, op, me, i, salt));
    coh_call c = th_call(G, COH_COLL_REDUCE_SCATTER, dt, op, -1, cpr);
    OK(coh_shm_reduce_scatter(G->shm, &c, send, recv, cpr));
    for (size_t i = 0; i < cpr; i++)
        check_reduced(recv, i, dt, op, me * cpr + i, salt);
    gcheck(&bs, "send");
    if (!inplace)
        gcheck(&br, "recv");
}

static void t_all_to_all(int dt, size_t count, int inplace)
{
    size_t B = count * th_dtype_size(dt);
    uint64_t salt = ++salt_ctr;
    gbuf bs, br;
    unsigned char *send = galloc(&bs, B * nranks);
    unsigned char *recv = inplace ? send : galloc(&br, B * nranks);
    for (int j = 0; j < nranks; j++)
        for (size_t i = 0; i < B; i++)
            send[j * B + i] = byte_of(me, j, i, salt);
    coh_call c = th_call(G, COH_COLL_ALL_TO_ALL, dt, -1, -1, count);
    OK(coh_shm_all_to_all(G->shm, &c, send, recv, B));
    for (int q = 0; q < nranks; q++)
        for (size_t i = 0; i < B; i++)
            CHECK(recv[q * B + i] == byte_of(q, me, i, salt), "block %d byte %zu", q, i);
    gcheck(&bs, "send");
    if (!inplace)
        gcheck(&br, "recv");
}

/* ---- the matrix ---- */

typedef struct cfg {
    int n;
    int tiny;       /* 1: shrunken slot, every dtype and op; 0: 3 dtypes, 3 ops;
                       -1: default slot, float32 sum only */
    const char *env;
} cfg;

static const int all_dt[] = {COHORT_INT32,   COHORT_FLOAT32, COHORT_FLOAT16, COHORT_BFLOAT16,
                             COHORT_FLOAT64, COHORT_UINT8,   COHORT_INT8,    COHORT_UINT32,
                             COHORT_INT64,   COHORT_UINT64};
static const int big_dt[] = {COHORT_FLOAT32, COHORT_BFLOAT16, COHORT_INT64};

static int op_valid(int dt, int op)
{
    if (op == COHORT_AVG)
        return is_float(dt);
    if (op >= COHORT_BAND)
        return !is_float(dt);
    return 1;
}

/* counts around every threshold for an op whose piece is `piece` elements */
static int counts_for(size_t *out, size_t piece, size_t small)
{
    int k = 0;
    out[k++] = 0;
    out[k++] = 1;
    out[k++] = 7;
    if (small > 1) {
        out[k++] = small;
        out[k++] = small + 1;
    }
    out[k++] = piece;
    out[k++] = 3 * piece + 5;
    return k;
}

static int rank_main(int rank, void *arg)
{
    const cfg *cf = arg;
    nranks = cf->n;
    me = rank;
    cohort_status st;
    G = th_group(rank, nranks, 30000, &st);
    if (!G)
        return 1;
    coh_shm *s = G->shm;
    int n = nranks;
    /* The copy path the local ranks agreed on at attach (shm_cma.c). */
    if (cf->env && strstr(cf->env, "COHORT_SHM_SINGLE_COPY=")) {
        int want = (strstr(cf->env, "COHORT_SHM_SINGLE_COPY=on") != NULL ||
                    strstr(cf->env, "PROBE_NS=1000,1000") != NULL ||
                    strstr(cf->env, "PROBE_NS=3000,1000,4000,4000") != NULL) &&
                   n > 1;
        /* auto with 3 or more ranks outnumbering the cpus (3 on a 2-cpu
         * machine): send/recv, gather and scatter by single copy although
         * the probe keeps two copies, the other ops two copies (the "crowd"
         * case) */
        int busy = !want && n > 2 && strstr(cf->env, "COHORT_SHM_SINGLE_COPY=auto") &&
                   n > coh_group_cpus(G);
        CHECK(s->oversub == (n > coh_group_cpus(G)), "oversub %d", s->oversub);
        if (strstr(cf->env, "PROBE_NS="))
            CHECK(strstr(s->copy_info, want   ? "auto: the kernel's copy wins"
                                       : busy ? "the ranks outnumber the cpus"
                                              : "loses to two copies") != NULL,
                  "auto's decision is named: %s", s->copy_info);
        CHECK(s->cma == (want || busy), "single copy %d, expected %d (%s)", s->cma, want || busy,
              s->copy_info);
        /* all_to_all too where more than twice, or where the 64 KiB probe
         * reads the kernel's copy at most 3.0 memcpys (every faked probe
         * of a busy case here: 2 and 3) */
        unsigned long pc = 0, pm = 0;
        const char *pn = strstr(cf->env, "PROBE_NS=");
        int cheap = pn && sscanf(pn, "PROBE_NS=%lu,%lu", &pc, &pm) == 2 && pc <= 3 * pm;
        CHECK(!busy || (shm_cma_use(s, COH_COLL_SEND, 65536) &&
                        shm_cma_use(s, COH_COLL_GATHER, 65536) &&
                        shm_cma_use(s, COH_COLL_SCATTER, 65536) &&
                        !shm_cma_use(s, COH_COLL_BROADCAST, 65536) &&
                        !shm_cma_use(s, COH_COLL_ALL_GATHER, 65536) &&
                        shm_cma_use(s, COH_COLL_REDUCE, 65536) ==
                            (n <= 2 * coh_group_cpus(G) && cheap) &&
                        !shm_cma_use(s, COH_COLL_REDUCE, 196608) &&
                        shm_cma_use(s, COH_COLL_ALL_TO_ALL, 65536) ==
                            (n > 2 * coh_group_cpus(G) || cheap)),
              "ranks outnumbering the cpus: send/recv, gather, scatter, all_to_all if more "
              "than twice or the kernel's copy is cheap, reduce below 192 KiB if cheap and not "
              "more than twice (%s)",
              s->copy_info);
        if (strstr(cf->env, "probe-fail"))
            CHECK(strstr(s->copy_info, "process_vm_readv: Bad address") != NULL,
                  "the probe's failure is named: %s", s->copy_info);
        if (strstr(cf->env, "COHORT_SHM_SINGLE_COPY=off"))
            CHECK(strstr(s->copy_info, "COHORT_SHM_SINGLE_COPY=off") != NULL,
                  "off is named: %s", s->copy_info);
        size_t lo = s->cma_min, hi = s->cma_end;
        if (cf->env && want && strstr(cf->env, "PROBE_NS=")) {
            /* auto's per-size rule (shm_cma_size_rule) from the probe's
             * times at 64 KiB and 256 KiB (slots of 256 KiB: both sizes
             * measured). "3000,1000,4000,4000": ratio 3 at 64 KiB (loses),
             * 1 at 256 KiB (wins): d = 2 cma - 3 memcpy is +3000 and -4000
             * per rank, crossing 0 at 65536 + 196608 x 3/7 = 149797.7 B,
             * rounded up to a page: single copy from 151552 B.
             * "1000,1000,8000,1000": wins at 64 KiB, loses at 256 KiB
             * (d -1000, +13000): below 65536 + 196608 / 14 = 79580.6 B,
             * rounded up: [COHORT_SHM_SINGLE_COPY_BYTES, 81920). */
            size_t want_lo = 1, want_hi = SIZE_MAX;
            if (strstr(cf->env, "PROBE_NS=3000,1000,4000,4000"))
                want_lo = 151552;
            else if (strstr(cf->env, "PROBE_NS=1000,1000,8000,1000"))
                want_lo = 4096, want_hi = 81920;
            where = "auto's per-size rule";
            CHECK(lo == want_lo && hi == want_hi, "single copy for [%zu, %zu), expected [%zu, %zu) (%s)",
                  lo, hi, want_lo, want_hi, s->copy_info);
            /* the path a call takes (the same function the ops ask) at the
             * rule's edges, for every op that has a single copy */
            const int ops[] = {COH_COLL_BROADCAST, COH_COLL_ALL_GATHER, COH_COLL_GATHER,
                               COH_COLL_SCATTER, COH_COLL_ALL_TO_ALL, COH_COLL_SEND};
            for (size_t k = 0; k < COH_ARRAY_LEN(ops); k++) {
                CHECK(!shm_cma_use(s, ops[k], want_lo - 1), "op %d at %zu B", ops[k], want_lo - 1);
                CHECK(shm_cma_use(s, ops[k], want_lo), "op %d at %zu B", ops[k], want_lo);
                if (want_hi != SIZE_MAX) {
                    CHECK(shm_cma_use(s, ops[k], want_hi - 1), "op %d at %zu B", ops[k], want_hi - 1);
                    CHECK(!shm_cma_use(s, ops[k], want_hi), "op %d at %zu B", ops[k], want_hi);
                }
            }
            CHECK(strstr(coh_shm_copy_path(s, COH_COLL_BROADCAST, want_lo), "single copy") != NULL,
                  "copy path at %zu B: %s", want_lo, coh_shm_copy_path(s, COH_COLL_BROADCAST, want_lo));
            /* the edges as real calls: both paths give the right data */
            size_t edge[] = {want_lo - 1, want_lo, want_hi - 1, want_hi};
            for (int k = 0; k < (want_hi == SIZE_MAX ? 2 : 4); k++)
                if (edge[k] >= 1)
                    for (int root = 0; root < n; root += n - 1) {
                        snprintf(wbuf, sizeof wbuf, "broadcast at the rule's edge %zu B root %d",
                                 edge[k], root);
                        where = wbuf;
                        t_broadcast(COHORT_UINT8, edge[k], root);
                    }
            for (int k = 0; k < (want_hi == SIZE_MAX ? 2 : 4); k++)
                if (edge[k] >= 1) {
                    snprintf(wbuf, sizeof wbuf, "all_gather at the rule's edge %zu B", edge[k]);
                    where = wbuf;
                    t_all_gather(COHORT_UINT8, edge[k], 0);
                }
        }
        /* every rank follows the same rule: compare with every other's */
        if (n > 1) {
            uint64_t mine[3] = {(uint64_t)s->cma, lo, hi}, all[8 * 3];
            CHECK(n <= 8, "at most 8 ranks here");
            coh_call c = th_call(G, COH_COLL_ALL_GATHER, COHORT_UINT64, -1, -1, 3);
            where = "all_gather of the copy rule";
            OK(coh_shm_all_gather(s, &c, mine, all, sizeof mine));
            for (int q = 0; q < n; q++)
                CHECK(!memcmp(&all[3 * q], mine, sizeof mine),
                      "rank %d: single copy %d for [%llu, %llu), this rank %d for [%zu, %zu)", q,
                      (int)all[3 * q], (unsigned long long)all[3 * q + 1],
                      (unsigned long long)all[3 * q + 2], s->cma, lo, hi);
        }
        /* the rule's configurations (256 KiB slots) end here: the op
         * matrix with single copy is the =on configurations' job */
        if (strstr(cf->env, "SLOT_BYTES=262144"))
            goto out;
    } else if (n > 1 && s->S >= 4096 && strstr(s->copy_info, "works here")) {
        /* auto: the probe worked, so the decision rests on a measurement
         * (slots under a page are too small to measure with) */
        CHECK(strstr(s->copy_info, "memcpy") != NULL, "auto names its measurement: %s",
              s->copy_info);
    }
    /* The two-copy broadcast's piece boundaries (shm_coll.c bcast_piece:
     * half the message, >= 16 KiB, rounded up to a line, <= the slot):
     * the 16 KiB floor, a half that is not a whole line, two pieces of
     * three quarters of a slot, and the cap (half is a line over the
     * slot) with a 129-byte last piece. */
    if (n > 1 && s->S >= 65536 && !s->cma) {
        const size_t bb[] = {16385, 32767, 32768 + 65, s->S + s->S / 2 + 7, 2 * s->S + 129};
        for (size_t k = 0; k < COH_ARRAY_LEN(bb); k++)
            for (int root = 0; root < n; root += n - 1) {
                snprintf(wbuf, sizeof wbuf, "broadcast piece edge %zu B root %d", bb[k], root);
                where = wbuf;
                t_broadcast(COHORT_UINT8, bb[k], root);
            }
    }
    const int *dts = cf->tiny > 0 ? all_dt : big_dt;
    int ndt = cf->tiny > 0 ? (int)COH_ARRAY_LEN(all_dt) : cf->tiny < 0 ? 1 : (int)COH_ARRAY_LEN(big_dt);
    int roots[2] = {0, n - 1};
    int nroots = n > 1 ? 2 : 1;
    size_t cnt[8];
    for (int d = 0; d < ndt; d++) {
        int dt = dts[d];
        size_t es = th_dtype_size(dt);
        mis_unit = es; /* reductions need element alignment */
        size_t blockp = n > 1 ? (s->S / (size_t)(n - 1) >= 64 ? s->S / (size_t)(n - 1) / 64 * 64
                                                              : s->S / (size_t)(n - 1)) / es
                              : s->S / es;
        /* reductions */
        int nc = counts_for(cnt, s->S / es, s->small_bytes / es);
        for (int op = 0; op < COHORT_OP_COUNT; op++) {
            if (!op_valid(dt, op) || (cf->tiny <= 0 && op != COHORT_SUM && op != COHORT_AVG &&
                                      op != COHORT_MAX) ||
                (cf->tiny < 0 && op != COHORT_SUM))
                continue;
            for (int k = 0; k < nc; k++)
                for (int ip = 0; ip < 2; ip++) {
                    snprintf(wbuf, sizeof wbuf, "all_reduce %s %s count %zu%s",
                             th_dtype_name(dt), cohort_op_name(op) ? cohort_op_name(op) : "",
                             cnt[k], ip ? " in place" : "");
                    where = wbuf;
                    t_all_reduce(dt, op, cnt[k], ip);
                    for (int ri = 0; ri < nroots; ri++) {
                        snprintf(wbuf, sizeof wbuf, "reduce %s op %d count %zu root %d%s",
                                 th_dtype_name(dt), op, cnt[k], roots[ri], ip ? " in place" : "");
                        t_reduce(dt, op, cnt[k], ip, roots[ri]);
                    }
                }
            int nb = counts_for(cnt, blockp ? blockp : 1, 0);
            for (int k = 0; k < nb; k++)
                for (int ip = 0; ip < 3; ip++) {
                    snprintf(wbuf, sizeof wbuf, "reduce_scatter %s op %d count %zu inplace %d",
                             th_dtype_name(dt), op, cnt[k], ip);
                    where = wbuf;
                    t_reduce_scatter(dt, op, cnt[k], ip);
                }
            nc = counts_for(cnt, s->S / es, s->small_bytes / es);
        }
        /* data movement */
        nc = counts_for(cnt, s->S / es, 0);
        for (int k = 0; k < nc; k++) {
            for (int ri = 0; ri < nroots; ri++) {
                snprintf(wbuf, sizeof wbuf, "broadcast %s count %zu root %d", th_dtype_name(dt),
                         cnt[k], roots[ri]);
                where = wbuf;
                t_broadcast(dt, cnt[k], roots[ri]);
                for (int ip = 0; ip < 2; ip++) {
                    snprintf(wbuf, sizeof wbuf, "gather %s count %zu root %d inplace %d",
                             th_dtype_name(dt), cnt[k], roots[ri], ip);
                    t_gather(dt, cnt[k], ip, roots[ri]);
                }
            }
            for (int ip = 0; ip < 3; ip++) {
                snprintf(wbuf, sizeof wbuf, "all_gather %s count %zu inplace %d",
                         th_dtype_name(dt), cnt[k], ip);
                where = wbuf;
                t_all_gather(dt, cnt[k], ip);
            }
        }
        nc = counts_for(cnt, blockp ? blockp : 1, 0);
        for (int k = 0; k < nc; k++) {
            for (int ri = 0; ri < nroots; ri++)
                for (int ip = 0; ip < 3; ip++) {
                    snprintf(wbuf, sizeof wbuf, "scatter %s count %zu root %d inplace %d",
                             th_dtype_name(dt), cnt[k], roots[ri], ip);
                    where = wbuf;
                    t_scatter(dt, cnt[k], ip, roots[ri]);
                }
            for (int ip = 0; ip < 2; ip++) {
                snprintf(wbuf, sizeof wbuf, "all_to_all %s count %zu inplace %d",
                         th_dtype_name(dt), cnt[k], ip);
                where = wbuf;
                t_all_to_all(dt, cnt[k], ip);
            }
        }
        where = "barrier";
        coh_call c = th_call(G, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0);
        OK(coh_shm_barrier(s, &c));
    }
out:
    th_group_free(G);
    th_done(nranks);
    return 0;
}

static const cfg cfgs[] = {
    {1, 1, "COHORT_SHM_SLOT_BYTES=256;COHORT_SHM_SMALL_BYTES=64"},
    {2, 1, "COHORT_SHM_SLOT_BYTES=256;COHORT_SHM_SMALL_BYTES=64"},
    {3, 1, "COHORT_SHM_SLOT_BYTES=320;COHORT_SHM_SMALL_BYTES=96"},
    {4, 1, "COHORT_SHM_SLOT_BYTES=256;COHORT_SHM_SMALL_BYTES=64"},
    {5, 1, "COHORT_SHM_SLOT_BYTES=448;COHORT_SHM_SMALL_BYTES=64"},
    {8, 1, "COHORT_SHM_SLOT_BYTES=512;COHORT_SHM_SMALL_BYTES=128"},
    {3, 1, "COHORT_SHM_SLOT_BYTES=320;COHORT_SHM_SMALL_BYTES=96;COHORT_CONTRACT=off"},
    /* the ring off: small reduce, gather and scatter on their synchronising
     * paths (with it, every small one above runs on the ring) */
    {3, 1, "COHORT_SHM_SLOT_BYTES=320;COHORT_SHM_SMALL_BYTES=96;COHORT_SHM_RING_SLOTS=0"},
    {4, 1, "COHORT_SHM_SLOT_BYTES=256;COHORT_SHM_SMALL_BYTES=64;COHORT_SHM_RING_SLOTS=0"},
    {3, 1, "COHORT_SHM_SLOT_BYTES=320;COHORT_SHM_SMALL_BYTES=96;COHORT_SHM_NT_BYTES=0"},
    {2, 0, "COHORT_SHM_SLOT_BYTES=65536;COHORT_SHM_NT_BYTES=0"},
    {2, 0, "COHORT_SHM_SLOT_BYTES=65536"},
    {3, 0, "COHORT_SHM_SLOT_BYTES=65536"},
    {5, 0, "COHORT_SHM_SLOT_BYTES=65536"},
    {8, 0, "COHORT_SHM_SLOT_BYTES=65536"},
    /* single copy for every broadcast (1 byte and up), with odd sizes, both
     * roots, the root's share (>= one page per rank) at the 65536 B slots */
    {2, 0, "COHORT_SHM_SLOT_BYTES=65536;COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_SINGLE_COPY_BYTES=1"},
    {3, 0, "COHORT_SHM_SLOT_BYTES=65536;COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_SINGLE_COPY_BYTES=1"},
    {5, 1, "COHORT_SHM_SLOT_BYTES=448;COHORT_SHM_SMALL_BYTES=64;COHORT_SHM_SINGLE_COPY=on;"
           "COHORT_SHM_SINGLE_COPY_BYTES=1"},
    /* single copy for every data-moving op at 4 ranks (odd sizes, pieces
     * shares below a page and above), and at the default threshold (64 KiB:
     * the matrix's 16384-element float32 block is exactly at it) */
    {4, 0, "COHORT_SHM_SLOT_BYTES=65536;COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_SINGLE_COPY_BYTES=1"},
    {4, 1, "COHORT_SHM_SLOT_BYTES=256;COHORT_SHM_SMALL_BYTES=64;COHORT_SHM_SINGLE_COPY=on;"
           "COHORT_SHM_SINGLE_COPY_BYTES=1"},
    {2, 0, "COHORT_SHM_SLOT_BYTES=65536;COHORT_SHM_SINGLE_COPY=on"},
    {3, 1, "COHORT_SHM_SLOT_BYTES=320;COHORT_SHM_SMALL_BYTES=96;COHORT_CONTRACT=off;"
           "COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_SINGLE_COPY_BYTES=1"},
    /* auto decides by the speed probe (its times replaced: this VM's kernel
     * copy always loses): a kernel copy as fast as memcpy turns single copy
     * on for every op, one 2x slower keeps two copies (3 ranks: 2 unbound
     * ranks with a cpu each take single copy for broadcast anyway, the
     * "bound" case) */
    {3, 0, "COHORT_SHM_SLOT_BYTES=65536;COHORT_SHM_SINGLE_COPY=auto;"
           "COHORT_SHM_SINGLE_COPY_BYTES=1;COHORT_SHM_SINGLE_COPY_PROBE_NS=1000,1000"},
    {3, 0, "COHORT_SHM_SLOT_BYTES=65536;COHORT_SHM_SINGLE_COPY=auto;"
           "COHORT_SHM_SINGLE_COPY_BYTES=1;COHORT_SHM_SINGLE_COPY_PROBE_NS=2000,1000"},
    /* auto's per-size rule: the probe's times at 64 KiB and 256 KiB
     * (slots of 256 KiB, so both are measured) replaced; single copy from
     * the crossing up, or below it only (see rank_main, which checks the
     * rule and calls at its edges, then skips the op matrix) */
    {2, -1, "COHORT_SHM_SLOT_BYTES=262144;COHORT_SHM_SINGLE_COPY=auto;"
           "COHORT_SHM_SINGLE_COPY_BYTES=1;COHORT_SHM_SINGLE_COPY_PROBE_NS=3000,1000,4000,4000"},
    {3, -1, "COHORT_SHM_SLOT_BYTES=262144;COHORT_SHM_SINGLE_COPY=auto;"
           "COHORT_SHM_SINGLE_COPY_BYTES=4096;COHORT_SHM_SINGLE_COPY_PROBE_NS=1000,1000,8000,1000"},
    /* off: no probe, two copies */
    {2, 0, "COHORT_SHM_SLOT_BYTES=65536;COHORT_SHM_SINGLE_COPY=off;COHORT_SHM_SINGLE_COPY_BYTES=1"},
    /* the probe fails: two copies, everything still right */
    {3, 0, "COHORT_SHM_SLOT_BYTES=65536;COHORT_SHM_SINGLE_COPY=probe-fail;"
           "COHORT_SHM_SINGLE_COPY_BYTES=1"},
    {4, -1, NULL}, /* defaults */
};

START_TEST(matrix)
{
    const cfg *cf = &cfgs[_i];
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = cf->n, .deadline_ms = 240000, .extra_env = cf->env};
    cht_result r;
    cht_run_ranks(&o, rank_main, (void *)cf, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* The environment table's bounds are the segment's: a value the table
 * lets through must be one the segment takes, and the deepest ring the
 * library picks itself (ranks outnumbering cpus: SHM_MAX_RING_SLOTS) must
 * be one a user can ask for. The table said 64 while the segment took 256
 * (sessions 10-12): COHORT_SHM_RING_SLOTS=128 failed init. */
START_TEST(env_limits)
{
    static const struct {
        const char *name;
        long lo, hi;
    } rows[] = {
        {"COHORT_SHM_RING_SLOTS", 0, SHM_MAX_RING_SLOTS},
        {"COHORT_SHM_RING_BYTES", 0, SHM_MAX_RING_BYTES},
        {"COHORT_SHM_TINY_SLOTS", 0, SHM_MAX_TINY_SLOTS},
        {"COHORT_SHM_TINY_BYTES", 0, SHM_MAX_TINY_BYTES},
        {"COHORT_SHM_P2P_BYTES", 0, SHM_MAX_P2P_BYTES},
        {"COHORT_SHM_SLOT_BYTES", SHM_MIN_SLOT_BYTES, SHM_MAX_SLOT_BYTES},
    };
    char msg[256], v[32];
    for (size_t i = 0; i < COH_ARRAY_LEN(rows); i++) {
        const coh_envvar *e = coh_env_lookup(rows[i].name);
        ck_assert_msg(e != NULL, "%s has no row", rows[i].name);
        ck_assert_msg(e->lo == rows[i].lo && e->hi == rows[i].hi, "%s: table [%ld, %ld], segment [%ld, %ld]",
                      rows[i].name, e->lo, e->hi, rows[i].lo, rows[i].hi);
        snprintf(v, sizeof v, "%ld", rows[i].hi);
        ck_assert_int_eq(coh_env_check_one(rows[i].name, v, msg, sizeof msg), COHORT_OK);
        snprintf(v, sizeof v, "%ld", rows[i].hi + 1);
        ck_assert_int_eq(coh_env_check_one(rows[i].name, v, msg, sizeof msg), COHORT_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(msg, rows[i].name));
    }
}
END_TEST

/* The probe's median reading (shm_cma_median_round): each of the three
 * positions, ratios not times (a slow pair of copies at the same ratio is
 * not an outlier), ties, and times near 2^32 (the products must not wrap). */
START_TEST(probe_median)
{
    ck_assert_int_eq(SHM_CMA_PROBE_ROUNDS, 3);
    /* the cold first reading x3.6 among x2.5 and x2.8: the x2.8 one */
    const uint64_t a1[] = {3600, 2500, 2800}, b1[] = {1000, 1000, 1000};
    ck_assert_int_eq(shm_cma_median_round(a1, b1), 2);
    const uint64_t a2[] = {2500, 3600, 2800};
    ck_assert_int_eq(shm_cma_median_round(a2, b1), 2);
    const uint64_t a3[] = {2800, 2500, 3600};
    ck_assert_int_eq(shm_cma_median_round(a3, b1), 0);
    /* by ratio: 6000/2000 = 3 is the median of 2, 3, 4 though its times
     * are the largest */
    const uint64_t a4[] = {2000, 6000, 4000}, b4[] = {1000, 2000, 1000};
    ck_assert_int_eq(shm_cma_median_round(a4, b4), 1);
    /* ties: all equal -> the middle reading by order; two equal */
    const uint64_t a5[] = {3000, 3000, 3000};
    ck_assert_int_eq(shm_cma_median_round(a5, b1), 1);
    const uint64_t a6[] = {3000, 2000, 3000};
    ck_assert_int_eq(shm_cma_median_round(a6, b1), 0);
    /* times of seconds, under time_copies' 2^32 - 1 cap: the products
     * need 64 bits (ratios 2, 0.25, 0.75: reading 2; with products cut to
     * 32 bits reading 1) */
    const uint64_t G = 1000000000;
    const uint64_t a7[] = {2 * G, G, 3 * G}, b7[] = {G, 4 * G, 4 * G};
    ck_assert_int_eq(shm_cma_median_round(a7, b7), 2);
}
END_TEST

/* auto's per-size rule alone (shm_cma_size_rule): the verdict at each
 * probe size, the interpolated crossing rounded up to a page, the bound's
 * direction, the sums of many ranks, a slot too small for two sizes. */
START_TEST(size_rule)
{
    const uint64_t S = 65536, L = 262144;
    size_t lo, hi;
    shm_cma_size_rule(1000, 1000, 4000, 4000, S, L, &lo, &hi); /* wins at both */
    ck_assert(lo == 0 && hi == SIZE_MAX);
    shm_cma_size_rule(1500, 1000, 6000, 4000, S, L, &lo, &hi); /* exactly 1.5: wins */
    ck_assert(lo == 0 && hi == SIZE_MAX);
    shm_cma_size_rule(1501, 1000, 6001, 4000, S, L, &lo, &hi); /* just over: loses */
    ck_assert(lo == SIZE_MAX && hi == 0);
    /* loses small (d +3000), wins large (d -4000): from 149797.7 -> 151552 */
    shm_cma_size_rule(3000, 1000, 4000, 4000, S, L, &lo, &hi);
    ck_assert_uint_eq(lo, 151552);
    ck_assert(hi == SIZE_MAX);
    /* the same per rank, summed over 8 ranks: the same rule */
    shm_cma_size_rule(8 * 3000, 8 * 1000, 8 * 4000, 8 * 4000, S, L, &lo, &hi);
    ck_assert_uint_eq(lo, 151552);
    /* a crossing on a page: d +1, -1 -> 65536 + 98304 = 163840, kept */
    shm_cma_size_rule(2, 1, 4, 3, S, L, &lo, &hi); /* d = 4-3 = +1, 8-9 = -1 */
    ck_assert_uint_eq(lo, 163840);
    /* wins small, loses large: below the crossing only */
    shm_cma_size_rule(1000, 1000, 8000, 1000, S, L, &lo, &hi);
    ck_assert(lo == 0);
    ck_assert_uint_eq(hi, 81920);
    /* one size measured (slot <= 64 KiB): that verdict for every size */
    shm_cma_size_rule(1000, 1000, 1000, 1000, S, S, &lo, &hi);
    ck_assert(lo == 0 && hi == SIZE_MAX);
    shm_cma_size_rule(1000, 1000, 3000, 1000, S, S, &lo, &hi);
    ck_assert(lo == SIZE_MAX && hi == 0);
    /* huge sums (4096 ranks at UINT32_MAX ns): no overflow, lo in range */
    const uint64_t M = (uint64_t)4096 * UINT32_MAX;
    shm_cma_size_rule(M, M / 2, M / 2, M / 2, S, L, &lo, &hi);
    ck_assert(lo > S && lo <= L && hi == SIZE_MAX);
}
END_TEST

static void t_barrier(void)
{
    coh_call c = th_call(G, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0);
    OK(coh_shm_barrier(G->shm, &c));
}

/* auto with 2 ranks bound to cpus of their own, or both unbound on a
 * machine whose ranks have a cpu each (2 ranks, >= 2 cpus here): broadcast,
 * all_gather, gather, scatter and all_to_all take single copy, each from
 * its own size (shm_cma.c apart_from: broadcast, gather and reduce above
 * the ring's slot back to back (16 KiB + 1 B; at most the slot right after a
 * barrier, below), all_gather and all_to_all 8 KiB a block, scatter 16 KiB
 * a block, all_reduce from 2 MiB and out of place from 256 KiB while
 * the cpus are far apart (COHORT_SHM_XCORE: far bound apart, near
 * unbound), send/recv from 16 KiB, split
 * between the pair), although the probe (its times replaced: the kernel's
 * copy 2x memcpy; 4x unbound, B_UNBOUND, and 2x again, B_CHEAP - near,
 * a call right after a barrier takes the ring, an all_gather of 8-16 KiB
 * a block two copies, and above 4 MiB all_reduce, reduce, reduce_scatter,
 * all_gather from 8 MiB a block and all_to_all from 4 MiB a pair two
 * copies only where the copy is dear; B_FAR_DEAR
 * far and dear) keeps two copies. With COHORT_SHM_SINGLE_COPY_BYTES set
 * (B_USER) every one of the five from that size. Both ranks bound to one
 * cpu: two copies everywhere. The data of every op, at and around its
 * size, in and out of place, through whichever path was chosen. */
enum { B_APART, B_ONE_CPU, B_UNBOUND, B_USER, B_CHEAP, B_FAR_DEAR };
#define B_USER_MIN 12288
static int bound_cpus[2];
/* B_FAR_DEAR: unbound, COHORT_SHM_XCORE=far, the kernel's copy 4x memcpy:
 * the near rules above 4 MiB send nothing to two copies; all_reduce out
 * of place from 32 MiB takes two copies as B_APART (far, cheap) does. */
static void bound_far_dear(coh_shm *s)
{
    CHECK(s->cma && s->xc_adapt == 3 && s->xc_dear, "far and dear: cma %d xc_adapt %d dear %d (%s)",
          s->cma, s->xc_adapt, s->xc_dear, s->copy_info);
    uint64_t twos = s->xc_twos;
    for (int ip = 0; ip < 3; ip++) {
        mis_unit = 4;
        t_ar_path(COHORT_FLOAT32, COHORT_SUM, (32u << 20) / 4, ip, ip != 0);
        t_ar_path(COHORT_FLOAT32, COHORT_SUM, (16u << 20) / 4 + 1027, ip, 1);
        t_ar_path(COHORT_FLOAT32, COHORT_SUM, (2u << 20) / 4 - 1, ip, ip == 0);
    }
    for (int ip = 0; ip < 2; ip++) {
        t_reduce(COHORT_FLOAT32, COHORT_SUM, (8u << 20) / 4 + 1027, ip, 1);
        mis_unit = 1;
        t_all_gather(COHORT_UINT8, 8u << 20, ip);
        mis_unit = 4;
    }
    t_reduce_scatter(COHORT_FLOAT32, COHORT_SUM, (8u << 20) / 8 + 1024, 0);
    mis_unit = 1;
    t_all_to_all(COHORT_UINT8, 4u << 20, 0);
    CHECK(s->xc_twos == twos, "far: %llu calls sent to two copies",
          (unsigned long long)(s->xc_twos - twos));
    /* far where the copy is dear: all_reduce out of place and reduce_scatter
     * from 64 KiB (XC_DEAR_FROM, session 42); in place all_reduce below 2
     * MiB keeps two copies */
    mis_unit = 4;
    for (int ip = 0; ip < 2; ip++) {
        t_ar_path(COHORT_FLOAT32, COHORT_SUM, (64u << 10) / 4, ip, ip == 0);
        t_ar_path(COHORT_FLOAT32, COHORT_SUM, (64u << 10) / 4 - 1, ip, 0);
    }
    CHECK(shm_cma_use(s, COH_COLL_REDUCE_SCATTER, 64u << 10) &&
              !shm_cma_use(s, COH_COLL_REDUCE_SCATTER, (64u << 10) - 1),
          "reduce_scatter from 64 KiB in all (%s)", s->copy_info);
    uint32_t ph = s->phase;
    t_reduce_scatter(COHORT_FLOAT32, COHORT_SUM, (64u << 10) / 8, 0);
    CHECK(s->phase - ph == 2, "reduce_scatter of 64 KiB far: %u phases (single copy: 2)",
          s->phase - ph);
    t_reduce_scatter(COHORT_FLOAT32, COHORT_SUM, (64u << 10) / 8 - 1, 0);
    mis_unit = 1;
    /* the path a block names (cohort_describe's count): 32 KiB a rank is 64 KiB in all */
    CHECK(!strcmp(coh_shm_copy_path(s, COH_COLL_REDUCE_SCATTER, 32u << 10), "single copy (cma)"),
          "reduce_scatter path at 32 KiB a block: %s",
          coh_shm_copy_path(s, COH_COLL_REDUCE_SCATTER, 32u << 10));
    CHECK(!strcmp(coh_shm_copy_path(s, COH_COLL_REDUCE_SCATTER, (32u << 10) - 4),
                  "two copies (segment)"),
          "reduce_scatter path below it: %s",
          coh_shm_copy_path(s, COH_COLL_REDUCE_SCATTER, (32u << 10) - 4));
    CHECK(!strcmp(coh_shm_copy_path(s, COH_COLL_ALL_REDUCE, 64u << 20),
                  "single copy (cma) if any rank is in place, else two copies (segment)"),
          "all_reduce path at 64 MiB: %s", coh_shm_copy_path(s, COH_COLL_ALL_REDUCE, 64u << 20));
    CHECK(!strcmp(coh_shm_copy_path(s, COH_COLL_REDUCE, 8u << 20), "single copy (cma)"),
          "reduce path at 8 MiB: %s", coh_shm_copy_path(s, COH_COLL_REDUCE, 8u << 20));
    /* The ring's verdict fixed far (COHORT_SHM_XCORE=far, xw 2): back to
     * back, broadcast, reduce and gather from 8 KiB up to the ring's slot,
     * and scatter from 8 KiB a block, take the single copy (its open and
     * close phases at least) instead of the ring (one phase); below 8 KiB
     * the ring. Every root; the data checked by t_*. */
    CHECK(s->xw == 2 && strstr(s->copy_info, "back to back from 8192 B (COHORT_SHM_XCORE=far)"),
          "ring verdict fixed far: xw %d (%s)", s->xw, s->copy_info);
    CHECK(!strcmp(coh_shm_copy_path(s, COH_COLL_BROADCAST, 8192),
                  "single copy (cma; COHORT_SHM_XCORE=far)") &&
              strstr(coh_shm_copy_path(s, COH_COLL_BROADCAST, 8191), "right after a barrier"),
          "broadcast path at 8 KiB: %s", coh_shm_copy_path(s, COH_COLL_BROADCAST, 8192));
    static const struct {
        int coll;
        size_t bytes; /* a block for gather and scatter */
    } xw[] = {{COH_COLL_BROADCAST, 8192},  {COH_COLL_BROADCAST, 16384}, {COH_COLL_BROADCAST, 8191},
              {COH_COLL_REDUCE, 8192},     {COH_COLL_REDUCE, 16384},    {COH_COLL_REDUCE, 8188},
              {COH_COLL_GATHER, 8192},     {COH_COLL_GATHER, 8191},     {COH_COLL_SCATTER, 8192},
              {COH_COLL_SCATTER, 12288},   {COH_COLL_SCATTER, 4096}};
    for (int root = 0; root < 2; root++)
        for (size_t k = 0; k < COH_ARRAY_LEN(xw); k++) {
            size_t b = xw[k].bytes;
            uint64_t singles = s->xw_singles;
            t_broadcast(COHORT_UINT8, 64, 0); /* not right after a barrier */
            ph = s->phase;
            switch (xw[k].coll) {
            case COH_COLL_BROADCAST:
                t_broadcast(COHORT_UINT8, b, root);
                break;
            case COH_COLL_REDUCE:
                mis_unit = 4;
                t_reduce(COHORT_FLOAT32, COHORT_SUM, b / 4, 0, root);
                mis_unit = 1;
                break;
            case COH_COLL_GATHER:
                t_gather(COHORT_UINT8, b, 0, root);
                break;
            default:
                t_scatter(COHORT_UINT8, b, 0, root);
            }
            int single = b >= 8192;
            CHECK(single ? s->phase - ph >= 2 : s->phase - ph == 1,
                  "%s of %zu B back to back, far: %u phases, single copy %d",
                  coh_coll_name(xw[k].coll), b, s->phase - ph, single);
            CHECK(s->xw_singles - singles == (uint64_t)single, "%s of %zu B: %llu by the verdict",
                  coh_coll_name(xw[k].coll), b, (unsigned long long)(s->xw_singles - singles));
        }
}
static int bound_main(int rank, void *arg)
{
    int mode = *(const int *)arg, apart = mode != B_ONE_CPU;
    int near_mode = mode == B_UNBOUND || mode == B_CHEAP; /* COHORT_SHM_XCORE=near */
    nranks = 2;
    me = rank;
    where = mode == B_APART     ? "bound apart"
            : mode == B_ONE_CPU ? "bound to one cpu"
            : mode == B_USER    ? "unbound, COHORT_SHM_SINGLE_COPY_BYTES"
            : mode == B_CHEAP   ? "unbound, the kernel's copy cheap"
            : mode == B_FAR_DEAR ? "unbound, far, the kernel's copy dear"
                                : "unbound";
    if (mode == B_APART || mode == B_ONE_CPU) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(bound_cpus[apart ? rank : 0], &one);
        CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity");
    }
    cohort_status st;
    G = th_group(rank, 2, 30000, &st);
    if (!G)
        return 1;
    coh_shm *s = G->shm;
    if (mode == B_FAR_DEAR) { /* only what differs from B_APART (far, cheap) */
        bound_far_dear(s);
        th_group_free(G);
        th_done(2);
        return 0;
    }
    static const struct {
        int coll;
        size_t from;
        size_t to; /* first size not taken (0: none) */
    } ops[] = {{COH_COLL_BROADCAST, 16385, 0}, {COH_COLL_ALL_GATHER, 8192, 0},
               {COH_COLL_GATHER, 16385, 0},    {COH_COLL_SCATTER, 16384, 0},
               {COH_COLL_ALL_TO_ALL, 8192, 0}, {COH_COLL_REDUCE, 16385, 0},
               {COH_COLL_ALL_REDUCE, 256u << 10, 0}, {COH_COLL_SEND, 16384, 0},
               {COH_COLL_REDUCE_SCATTER, 256u << 10, 0}};
    CHECK(s->cma == apart, "single copy %d (%s)", s->cma, s->copy_info);
    for (size_t k = 0; k < COH_ARRAY_LEN(ops); k++) {
        /* where the kernel's copy is dear, all_reduce from 64 KiB
         * (XC_DEAR_FROM, session 42); reduce_scatter from 64 KiB wherever
         * the cross-core verdict runs (XC_RS_FROM, session 47) */
        int from_64k = (s->xc_dear && ops[k].coll == COH_COLL_ALL_REDUCE) ||
                       (s->xc_adapt && ops[k].coll == COH_COLL_REDUCE_SCATTER);
        size_t from = mode == B_USER ? B_USER_MIN : from_64k ? (size_t)64 << 10 : ops[k].from;
        CHECK(shm_cma_use(s, ops[k].coll, from) == apart, "%s at %zu B (%s)",
              coh_coll_name(ops[k].coll), from, s->copy_info);
        size_t to = mode == B_USER ? 0 : ops[k].to;
        CHECK(shm_cma_use(s, ops[k].coll, 1u << 24) == (apart && !to), "%s at 16 MiB",
              coh_coll_name(ops[k].coll));
        CHECK(!to || (shm_cma_use(s, ops[k].coll, to - 1) == apart &&
                      !shm_cma_use(s, ops[k].coll, to)),
              "%s at %zu B", coh_coll_name(ops[k].coll), to);
        CHECK(!shm_cma_use(s, ops[k].coll, from - 1), "%s at %zu B", coh_coll_name(ops[k].coll),
              from - 1);
    }
    CHECK(!apart || s->ar_oop_to == (mode == B_USER ? SIZE_MAX : (size_t)32 << 20),
          "all_reduce out of place ends at %zu B", s->ar_oop_to);
    CHECK(s->xc_dear == (mode == B_UNBOUND), "dear copy %d in mode %d", s->xc_dear, mode);
    if (mode == B_UNBOUND) {
        /* near and dear: all_reduce of 64 KiB opens, then two copies;
         * reduce_scatter by single copy from 64 KiB and below 512 KiB in
         * all, two copies from 512 KiB (XC_RS_NEAR_FROM) */
        uint64_t twos = s->xc_twos;
        mis_unit = 4;
        t_ar_path(COHORT_FLOAT32, COHORT_SUM, (64u << 10) / 4, 0, 0);
        CHECK(s->xc_twos - twos == 1, "all_reduce of 64 KiB near: %llu",
              (unsigned long long)(s->xc_twos - twos));
        static const size_t rs_at[] = {64u << 10, (512u << 10) - 8, 512u << 10};
        for (size_t i = 0; i < COH_ARRAY_LEN(rs_at); i++) {
            uint32_t ph = s->phase;
            twos = s->xc_twos;
            t_reduce_scatter(COHORT_FLOAT32, COHORT_SUM, rs_at[i] / 8, 0);
            int two = rs_at[i] >= (512u << 10);
            CHECK(s->xc_twos - twos == (uint64_t)two && (two || s->phase - ph == 2),
                  "reduce_scatter of %zu B near: %llu to two copies, %u phases", rs_at[i],
                  (unsigned long long)(s->xc_twos - twos), s->phase - ph);
        }
        mis_unit = 1;
    }
    if (mode == B_APART) {
        /* far, the kernel's copy cheap: reduce_scatter of 64 KiB in all
         * (XC_RS_FROM) and up takes the single copy: its open and close
         * phases, nothing sent on to two copies; the data by t_* */
        static const size_t rs_at[] = {64u << 10, 192u << 10};
        mis_unit = 4;
        for (size_t i = 0; i < COH_ARRAY_LEN(rs_at); i++) {
            uint32_t ph = s->phase;
            uint64_t twos = s->xc_twos;
            t_reduce_scatter(COHORT_FLOAT32, COHORT_SUM, rs_at[i] / 8, 0);
            CHECK(s->xc_twos == twos && s->phase - ph == 2,
                  "reduce_scatter of %zu B far: %llu to two copies, %u phases", rs_at[i],
                  (unsigned long long)(s->xc_twos - twos), s->phase - ph);
        }
        mis_unit = 1;
    }
    CHECK(mode != B_APART || strstr(s->copy_info, "bound to cpus") != NULL, "named: %s",
          s->copy_info);
    CHECK(!near_mode || strstr(s->copy_info, "have a cpu each") != NULL, "named: %s",
          s->copy_info);
    CHECK(mode != B_USER || strstr(s->copy_info, "COHORT_SHM_SINGLE_COPY_BYTES") != NULL,
          "named: %s", s->copy_info);
    /* Ring first: apart under auto, broadcast, reduce and gather of up to
     * 16 KiB (the ring's slot) take the ring back to back (one phase), and
     * right after a barrier these and scatter take the single copy (its
     * open and close phases at least) from 4 KiB a block (shm_cma.c
     * BAR_SINGLE_FROM); the user's size rules both; one cpu: the ring
     * always. The path by the phases, the data by t_*. */
    int first = apart && mode != B_USER;
    static const int rooted[] = {COH_COLL_BROADCAST, COH_COLL_REDUCE, COH_COLL_GATHER,
                                 COH_COLL_SCATTER};
    for (size_t k = 0; k < COH_ARRAY_LEN(rooted); k++) {
        int cl = rooted[k];
        size_t want = first ? 4096 : s->cma_from[cl];
        CHECK(s->bar_from[cl] == want, "%s after a barrier from %zu B (want %zu)",
              coh_coll_name(cl), s->bar_from[cl], want);
    }
    CHECK(!first || strstr(coh_shm_copy_path(s, COH_COLL_REDUCE, 16384),
                           mode == B_UNBOUND ? "after a barrier too: COHORT_SHM_XCORE=near"
                                             : "right after a barrier"),
          "reduce path at 16 KiB: %s", coh_shm_copy_path(s, COH_COLL_REDUCE, 16384));
    CHECK(!first || !strstr(coh_shm_copy_path(s, COH_COLL_REDUCE, 4095), "barrier"),
          "reduce path at 4095 B: %s", coh_shm_copy_path(s, COH_COLL_REDUCE, 4095));
    CHECK(!first || strstr(s->copy_info, "right after a barrier these and scatter from 4096 B"),
          "named: %s", s->copy_info);
    static const struct {
        int coll;
        size_t bytes; /* a block for gather and scatter */
        int ip;
    } rc[] = {{COH_COLL_BROADCAST, 16384, 0}, {COH_COLL_REDUCE, 16384, 0},
              {COH_COLL_REDUCE, 16384, 1},    {COH_COLL_GATHER, 16384, 0},
              {COH_COLL_BROADCAST, 4096, 0},  {COH_COLL_REDUCE, 4096, 0},
              {COH_COLL_GATHER, 4096, 0},     {COH_COLL_SCATTER, 4096, 0},
              {COH_COLL_SCATTER, 8192, 1},    {COH_COLL_REDUCE, 6144, 0},
              {COH_COLL_BROADCAST, 4095, 0},  {COH_COLL_REDUCE, 4092, 0},
              {COH_COLL_GATHER, 4095, 0},     {COH_COLL_SCATTER, 4095, 0}};
    for (int root = 0; root < 2; root++)
        for (size_t k = 0; k < COH_ARRAY_LEN(rc); k++)
            for (int after = 0; after < 2; after++) {
                if (after)
                    t_barrier();
                uint32_t ph = s->phase;
                size_t b = rc[k].bytes;
                switch (rc[k].coll) {
                case COH_COLL_BROADCAST:
                    t_broadcast(COHORT_UINT8, b, root);
                    break;
                case COH_COLL_REDUCE:
                    mis_unit = 4;
                    t_reduce(COHORT_FLOAT32, COHORT_SUM, b / 4, rc[k].ip, root);
                    mis_unit = 1;
                    break;
                case COH_COLL_GATHER:
                    t_gather(COHORT_UINT8, b, rc[k].ip, root);
                    break;
                default:
                    t_scatter(COHORT_UINT8, b, rc[k].ip, root);
                }
                /* near where the kernel's copy is dear (the lead's verdict in the
                 * barrier): the ring after it too */
                int single = mode == B_USER ? b >= B_USER_MIN
                                            : first && after && mode != B_UNBOUND && b >= 4096;
                CHECK(single ? s->phase - ph >= 2 : s->phase - ph == 1,
                      "%s of %zu B (root %d, %s a barrier): %u phases, single copy %d",
                      coh_coll_name(rc[k].coll), b, root, after ? "right after" : "not after",
                      s->phase - ph, single);
            }
    /* the same from a cohort_mem_alloc buffer on every rank: right after a
     * barrier the one-copy broadcast from it (shm_mem.h) where the ring
     * took 4-16 KiB before; back to back the ring whatever the buffer */
    unsigned char *mb = NULL;
    OK(cohort_mem_alloc(G, 16384, (void **)&mb));
    for (int root = 0; root < 2; root++)
        for (size_t b = 4096; b <= 16384; b *= 4)
            for (int after = 0; after < 2; after++) {
                uint64_t salt = ++salt_ctr;
                memset(mb, 0xa5, 16384);
                if (me == root)
                    for (size_t i = 0; i < b; i++)
                        mb[i] = byte_of(root, 0, i, salt);
                if (after)
                    t_barrier();
                uint32_t ph = s->phase;
                uint64_t r0[3], r1[3];
                coh_mem_counts(&r0[0], &r0[1], &r0[2]);
                coh_call c = th_call(G, COH_COLL_BROADCAST, COHORT_UINT8, -1, root, b);
                OK(coh_shm_broadcast(s, &c, mb, b, root));
                coh_mem_counts(&r1[0], &r1[1], &r1[2]);
                for (size_t i = 0; i < 16384; i++)
                    CHECK(mb[i] == (i < b ? byte_of(root, 0, i, salt) : 0xa5),
                          "mem broadcast of %zu B (root %d, after %d): byte %zu", b, root, after,
                          i);
                int single = mode == B_USER ? b >= B_USER_MIN : first && after && mode != B_UNBOUND;
                CHECK(single ? s->phase - ph >= 2 : s->phase - ph == 1,
                      "mem broadcast of %zu B (root %d, %s a barrier): %u phases", b, root,
                      after ? "right after" : "not after", s->phase - ph);
                /* the root: by its region exactly when not by the ring */
                CHECK(me != root || r1[COH_MEM_ROOTED] - r0[COH_MEM_ROOTED] == (uint64_t)single,
                      "mem broadcast of %zu B (root %d, after %d): rooted %llu", b, root, after,
                      (unsigned long long)(r1[COH_MEM_ROOTED] - r0[COH_MEM_ROOTED]));
            }
    OK(cohort_mem_free(G, mb));
    /* the data, every root, through whichever path was chosen: just below,
     * at and above each op's size (uint8: count = bytes) */
    for (int root = 0; root < 2; root++) {
        t_broadcast(COHORT_UINT8, 16383, root);
        t_broadcast(COHORT_UINT8, 16384, root);
        t_broadcast(COHORT_UINT8, 3 * 65536 + 5, root);
        uint64_t twos = s->xc_twos;
        t_broadcast(COHORT_UINT8, (1u << 20) + 4099, root); /* near too: single copy (s40) */
        CHECK(s->xc_twos == twos, "broadcast near: %llu",
              (unsigned long long)(s->xc_twos - twos));
        for (int ip = 0; ip < 2; ip++) {
            mis_unit = 4; /* reductions need element alignment */
            t_reduce(COHORT_FLOAT32, COHORT_SUM, 16384 / 4 - 1, ip, root);
            t_reduce(COHORT_FLOAT32, COHORT_SUM, 16384 / 4, ip, root);
            t_reduce(COHORT_INT32, COHORT_MAX, 100000 + 3, ip, root); /* pieces, a tail */
            t_reduce(COHORT_FLOAT32, COHORT_AVG, 40000, ip, root);
            /* the leaf's part: 10/16 and 9/16 splits, several pieces each */
            uint64_t twos = s->xc_twos;
            t_reduce(COHORT_FLOAT32, COHORT_SUM, (1u << 20) / 4 + 1027, ip, root);
            CHECK(s->xc_twos - twos == (uint64_t)near_mode, "reduce near: %llu",
                  (unsigned long long)(s->xc_twos - twos));
            t_reduce(COHORT_INT32, COHORT_SUM, (3u << 20) / 4 + 5, ip, root);
            twos = s->xc_twos; /* near, 256 KiB-1 MiB: the single copy (session 40) */
            t_reduce(COHORT_FLOAT32, COHORT_SUM, (512u << 10) / 4 + 1, ip, root);
            CHECK(s->xc_twos == twos, "reduce of 512 KiB near: %llu",
                  (unsigned long long)(s->xc_twos - twos));
            mis_unit = 2; /* float16 AVG: divided in the fold (the n-rank kernel) */
            t_reduce(COHORT_FLOAT16, COHORT_AVG, 50001, ip, root);
            mis_unit = 1;
            t_reduce(COHORT_UINT8, COHORT_SUM, 70001, ip, root);
            mis_unit = 1;
            t_gather(COHORT_UINT8, 16384, ip, root);
            t_gather(COHORT_UINT8, 40000 + 3, ip, root);
            t_scatter(COHORT_UINT8, 16383, ip, root);
            t_scatter(COHORT_UINT8, 16384, ip, root);
            t_scatter(COHORT_UINT8, 40000 + 3, ip, root);
        }
    }
    for (int ip = 0; ip < 3; ip++) {
        t_all_gather(COHORT_UINT8, 8191, ip);
        uint64_t small = s->xc_twos;
        t_all_gather(COHORT_UINT8, 8192, ip); /* near, a small block: two copies either way */
        t_all_gather(COHORT_UINT8, 16384, ip);
        CHECK(s->xc_twos - small == 2u * (mode == B_UNBOUND),
              "all_gather near, 8-16 KiB (two copies only where the kernel's copy is dear): %llu",
              (unsigned long long)(s->xc_twos - small));
        small = s->xc_twos;
        t_all_gather(COHORT_UINT8, 16385, ip); /* above SHM_XC_AG_OOP_TO: in place only */
        t_all_gather(COHORT_UINT8, 70000 + 1, ip);
        CHECK(s->xc_twos == small, "all_gather near, 16 KiB + 1 and 70001 B: %llu",
              (unsigned long long)(s->xc_twos - small));
        uint64_t twos = s->xc_twos;
        t_all_gather(COHORT_UINT8, (512u << 10) + 4099, ip); /* near, in place: two copies */
        CHECK(s->xc_twos - twos == (near_mode && ip), "all_gather near: %llu",
              (unsigned long long)(s->xc_twos - twos));
    }
    /* above 4 MiB near, where the kernel's copy is dear (session 41):
     * reduce and all_gather from 8 MiB a block take two copies, in place
     * or not; an all_gather block of 4 MiB and a bit keeps the single copy
     * (in place: SHM_XC_AG_BIG; out of place: measured x0.84-1.02) */
    for (int ip = 0; ip < 2; ip++) {
        uint64_t twos = s->xc_twos;
        mis_unit = 4;
        t_reduce(COHORT_FLOAT32, COHORT_SUM, (8u << 20) / 4 + 1027, ip, ip);
        CHECK(s->xc_twos - twos == (mode == B_UNBOUND), "reduce of 8 MiB near: %llu",
              (unsigned long long)(s->xc_twos - twos));
        mis_unit = 1;
        twos = s->xc_twos;
        t_all_gather(COHORT_UINT8, (4u << 20) + 4099, ip);
        CHECK(s->xc_twos == twos, "all_gather of 4 MiB a block near: %llu",
              (unsigned long long)(s->xc_twos - twos));
        t_all_gather(COHORT_UINT8, 8u << 20, ip);
        CHECK(s->xc_twos - twos == (mode == B_UNBOUND), "all_gather of 8 MiB a block near: %llu",
              (unsigned long long)(s->xc_twos - twos));
    }
    CHECK(mode != B_UNBOUND || strstr(coh_shm_copy_path(s, COH_COLL_ALL_REDUCE, 64u << 20),
                                      "two copies (segment; COHORT_SHM_XCORE=near)"),
          "all_reduce path at 64 MiB: %s", coh_shm_copy_path(s, COH_COLL_ALL_REDUCE, 64u << 20));
    CHECK(mode != B_UNBOUND || strstr(coh_shm_copy_path(s, COH_COLL_ALL_GATHER, 8u << 20),
                                      "two copies (segment; COHORT_SHM_XCORE=near)"),
          "all_gather path at 8 MiB a block: %s",
          coh_shm_copy_path(s, COH_COLL_ALL_GATHER, 8u << 20));
    for (int ip = 0; ip < 2; ip++) {
        t_all_to_all(COHORT_UINT8, 8192, ip);
        uint64_t twos = s->xc_twos;
        t_all_to_all(COHORT_UINT8, 70000 + 1, ip);
        /* 64 KiB - 1 MiB a pair, out of place: two copies when near */
        CHECK(s->xc_twos - twos == (near_mode && !ip), "all_to_all near: %llu",
              (unsigned long long)(s->xc_twos - twos));
    }
    /* near above 4 MiB where the kernel's copy is dear (session 41):
     * all_to_all from 4 MiB a pair, reduce_scatter from 4 MiB + 1 in all,
     * out of place (in place both take two copies anyway) */
    {
        uint64_t twos = s->xc_twos;
        t_all_to_all(COHORT_UINT8, (4u << 20) - 4096, 0);
        CHECK(s->xc_twos == twos, "all_to_all of 4 MiB - 4 KiB a pair near: %llu",
              (unsigned long long)(s->xc_twos - twos));
        t_all_to_all(COHORT_UINT8, 4u << 20, 0);
        t_all_to_all(COHORT_UINT8, (4u << 20) + 4096, 0);
        CHECK(s->xc_twos - twos == 2u * (mode == B_UNBOUND),
              "all_to_all of 4 MiB and 4 MiB + 4 KiB a pair near: %llu",
              (unsigned long long)(s->xc_twos - twos));
        twos = s->xc_twos;
        mis_unit = 4;
        t_reduce_scatter(COHORT_FLOAT32, COHORT_SUM, (8u << 20) / 8 + 1024, 0);
        mis_unit = 1;
        CHECK(s->xc_twos - twos == (mode == B_UNBOUND), "reduce_scatter of 8 MiB near: %llu",
              (unsigned long long)(s->xc_twos - twos));
    }
    t_sendrecv(16383);
    t_sendrecv(16384);
    t_sendrecv(3 * 65536 + 5);
    /* reduce_scatter (its size counts every rank's block): just below and
     * at 256 KiB - there the single copy's two phases, open and close -
     * then pieces with a tail, AVG, float16 (the n-rank kernel), 1-byte
     * elements; out of place, in place at the start (rank 1 reduces into
     * its own block and moves it) and in its own block */
    for (int ip = 0; ip < 3; ip++) {
        mis_unit = 4;
        t_reduce_scatter(COHORT_FLOAT32, COHORT_SUM, (256u << 10) / 8 - 1, ip);
        uint32_t ph = s->phase;
        uint64_t twos = s->xc_twos;
        t_reduce_scatter(COHORT_FLOAT32, COHORT_SUM, (256u << 10) / 8, ip);
        /* near and cheap (B_CHEAP): two copies after the open phase
         * (xc_twos), in place too, unless the user's size rules; near and
         * dear (B_UNBOUND): the single copy below 512 KiB (session 42) */
        int near_two = near_mode && !s->xc_dear;
        CHECK(!apart || near_two || (ip && mode != B_USER) || s->phase - ph == 2,
              "reduce_scatter of 256 KiB in place %d: %u phases", ip, s->phase - ph);
        CHECK(s->xc_twos - twos == (uint64_t)near_two, "reduce_scatter near: %llu",
              (unsigned long long)(s->xc_twos - twos));
        t_reduce_scatter(COHORT_INT32, COHORT_MAX, 300001, ip);
        t_reduce_scatter(COHORT_FLOAT32, COHORT_AVG, 40000, ip);
        mis_unit = 2;
        t_reduce_scatter(COHORT_FLOAT16, COHORT_AVG, 50001, ip);
        mis_unit = 1;
        t_reduce_scatter(COHORT_UINT8, COHORT_SUM, 70001, ip);
    }
    /* all_reduce: in and out of place and mixed (rank 0 in place), below
     * and at 2 MiB, slices of pieces with a tail, 1-byte elements, AVG
     * (float16's in the fold, the n-rank kernel); the path by the phases it
     * took (single copy: open, middle, close). From 32 MiB out of place
     * the apart rule falls back to two copies after the open phase unless
     * a rank is in place; the user's size rules every size. */
    CHECK(!apart || mode == B_USER || s->ar_far_to == (2u << 20), "all_reduce far band to %zu B",
          s->ar_far_to);
    CHECK(!apart || mode == B_USER ||
              strstr(coh_shm_copy_path(s, COH_COLL_ALL_REDUCE, 256u << 10),
                     mode == B_APART ? "COHORT_SHM_XCORE=far" : "COHORT_SHM_XCORE=near"),
          "all_reduce path at 256 KiB: %s", coh_shm_copy_path(s, COH_COLL_ALL_REDUCE, 256u << 10));
    for (int ip = 0; ip < 3; ip++) {
        /* near (B_UNBOUND): two copies up to 4 MiB (XC_NEAR_TO) */
        int single_at = apart && !near_mode,
            single_oop32 = apart && ((ip && mode != B_UNBOUND) || mode == B_USER);
        /* 256 KiB - 2 MiB: the user's size, or out of place on both ranks
         * while far (B_APART runs with COHORT_SHM_XCORE=far, B_UNBOUND near) */
        int single_band = mode == B_USER || (mode == B_APART && ip == 0);
        mis_unit = 4;
        t_ar_path(COHORT_FLOAT32, COHORT_SUM, (256u << 10) / 4 - 1, ip, mode == B_USER);
        t_ar_path(COHORT_FLOAT32, COHORT_SUM, (256u << 10) / 4, ip, single_band);
        t_ar_path(COHORT_FLOAT32, COHORT_AVG, (1u << 20) / 4 + 1027, ip, single_band);
        t_ar_path(COHORT_FLOAT32, COHORT_SUM, (2u << 20) / 4 - 1, ip, single_band);
        t_ar_path(COHORT_FLOAT32, COHORT_SUM, (2u << 20) / 4, ip, single_at);
        t_ar_path(COHORT_INT32, COHORT_MAX, (2u << 20) / 4 + 100003, ip, single_at);
        t_ar_path(COHORT_FLOAT32, COHORT_AVG, 600000, ip, single_at);
        mis_unit = 8; /* float64 AVG: summed and halved in one pass (avg2_f64) */
        t_ar_path(COHORT_FLOAT64, COHORT_AVG, 300001, ip, single_at);
        mis_unit = 4;
        t_ar_path(COHORT_FLOAT32, COHORT_SUM, (32u << 20) / 4, ip, single_oop32);
        /* near where the kernel's copy is dear: two copies from 16 MiB in
         * and out of place, the single copy below (session 41, shm_cma.c
         * xc_two_big) */
        uint64_t twos = s->xc_twos;
        t_ar_path(COHORT_FLOAT32, COHORT_SUM, (16u << 20) / 4 + 1027, ip,
                  apart && mode != B_UNBOUND);
        CHECK(s->xc_twos - twos == (mode == B_UNBOUND), "all_reduce of 16 MiB near: %llu",
              (unsigned long long)(s->xc_twos - twos));
        twos = s->xc_twos;
        t_ar_path(COHORT_FLOAT32, COHORT_SUM, (16u << 20) / 4 - 1, ip, apart);
        CHECK(s->xc_twos == twos, "all_reduce of 16 MiB - 4 B near: %llu",
              (unsigned long long)(s->xc_twos - twos));
        mis_unit = 2;
        t_ar_path(COHORT_FLOAT16, COHORT_AVG, (1u << 20) + 5, ip, single_at);
        mis_unit = 1;
        t_ar_path(COHORT_UINT8, COHORT_SUM, (2u << 20) + 1, ip, single_at);
    }
    th_group_free(G);
    th_done(2);
    return 0;
}

/* The first two cpus this process may run on, into cpu; how many it found
 * (a case that needs two skips with fewer). */
static int first_two_cpus(int cpu[2])
{
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    int k = 0;
    for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
        if (CPU_ISSET(c, &set))
            cpu[k++] = c;
    return k;
}

START_TEST(bound)
{
    if (first_two_cpus(bound_cpus) < 2) {
        fprintf(stderr, "bound: one cpu available, nothing to test\n");
        return;
    }
    static const int modes[6] = {B_APART, B_ONE_CPU, B_UNBOUND, B_USER, B_CHEAP, B_FAR_DEAR};
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 2, .deadline_ms = 60000,
                  .extra_env = modes[_i] == B_USER
                                   ? "COHORT_SHM_SINGLE_COPY=auto;COHORT_SHM_SINGLE_COPY_PROBE_NS="
                                     "2000,1000;COHORT_SHM_SINGLE_COPY_BYTES=12288"
                               : modes[_i] == B_APART
                                   ? "COHORT_SHM_SINGLE_COPY=auto;COHORT_SHM_SINGLE_COPY_PROBE_NS="
                                     "2000,1000;COHORT_SHM_XCORE=far"
                               /* near; the kernel's copy 4x memcpy (dear) or 2x (cheap) */
                               : modes[_i] == B_UNBOUND
                                   ? "COHORT_SHM_SINGLE_COPY=auto;COHORT_SHM_SINGLE_COPY_PROBE_NS="
                                     "4000,1000;COHORT_SHM_XCORE=near"
                               : modes[_i] == B_FAR_DEAR
                                   ? "COHORT_SHM_SINGLE_COPY=auto;COHORT_SHM_SINGLE_COPY_PROBE_NS="
                                     "4000,1000;COHORT_SHM_XCORE=far"
                                   : "COHORT_SHM_SINGLE_COPY=auto;COHORT_SHM_SINGLE_COPY_PROBE_NS="
                                     "2000,1000;COHORT_SHM_XCORE=near"};
    cht_result r;
    cht_run_ranks(&o, bound_main, (void *)&modes[_i], &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* Both ranks hold the same value of v (two all_reduces: min and max). */
static int agreed_u64(uint64_t v)
{
    int64_t x = (int64_t)v, lo = 0, hi = 0;
    coh_call c1 = th_call(G, COH_COLL_ALL_REDUCE, COHORT_INT64, COHORT_MIN, -1, 1);
    OK(coh_shm_all_reduce(G->shm, &c1, &x, &lo, 1));
    coh_call c2 = th_call(G, COH_COLL_ALL_REDUCE, COHORT_INT64, COHORT_MAX, -1, 1);
    OK(coh_shm_all_reduce(G->shm, &c2, &x, &hi, 1));
    return lo == hi && lo == x;
}

/* The ring's verdict back to back (xw 1, shm_cma.c "the ring's verdict"):
 * the first call in the window at or after xw_at runs a probe on both
 * ranks, both take one outcome (the verdict, the calls to the next probe),
 * and each call's path follows it - a path the ranks disagreed on would
 * fail the call. Then the adversary: a rank alone in the probe gives up at
 * the limit, the late one sees it, and both keep the verdict and double
 * the interval, whichever of them came first. */
static void xcore_ring_verdict(coh_shm *s)
{
    CHECK(strlen(s->copy_info) < sizeof s->copy_info - 1, "copy_info cut: %s", s->copy_info);
    CHECK(s->xw == 1 && strstr(s->copy_info, "back to back from 8192 B while far (probed in its calls)"),
          "ring verdict probed: xw %d (%s)", s->xw, s->copy_info);
    CHECK(strstr(coh_shm_copy_path(s, COH_COLL_BROADCAST, 16384), "back to back: the ring's"),
          "broadcast path at 16 KiB: %s", coh_shm_copy_path(s, COH_COLL_BROADCAST, 16384));
    for (int round = 0; round < 3; round++) {
        t_broadcast(COHORT_UINT8, 64, 0);
        s->xw_at = 0; /* a probe due (both ranks, between the same calls) */
        uint64_t probes = s->xw_probes, singles = s->xw_singles;
        uint64_t seq = G->seq + 1; /* the next call's */
        uint32_t ph = s->phase;
        t_broadcast(COHORT_UINT8, 16384, round & 1);
        CHECK(s->xw_probes - probes == 1, "probe in the first call in the window: %llu",
              (unsigned long long)(s->xw_probes - probes));
        /* more than a ring root can run ahead: one word serves every probe */
        CHECK(s->xw_n_min > 2 * (s->ring_k > s->tiny_k ? s->ring_k : s->tiny_k),
              "probes at least %llu calls apart (ring %zu, tiny %zu)",
              (unsigned long long)s->xw_n_min, s->ring_k, s->tiny_k);
        CHECK(s->xw_at == seq + s->xw_n && s->xw_n >= s->xw_n_min && s->xw_n <= (1u << 22),
              "next probe at %llu (seq %llu, every %llu calls)", (unsigned long long)s->xw_at,
              (unsigned long long)seq, (unsigned long long)s->xw_n);
        CHECK(s->xw_far ? s->phase - ph >= 2 : s->phase - ph == 1,
              "broadcast of 16 KiB, verdict far %d: %u phases", s->xw_far, s->phase - ph);
        CHECK(s->xw_singles - singles == (uint64_t)s->xw_far, "by the verdict: %llu",
              (unsigned long long)(s->xw_singles - singles));
        CHECK(agreed_u64((uint64_t)s->xw_far) && agreed_u64(s->xw_at) && agreed_u64(s->xw_n),
              "one outcome: far %d, next at %llu", s->xw_far, (unsigned long long)s->xw_at);
        /* back to back, every rooted op and size around the window's edge,
         * over the next probe: the paths agree (the data is checked) */
        for (int i = 0; i < 40; i++) {
            int root = i & 1;
            t_broadcast(COHORT_UINT8, i % 3 ? 16384 : 8191, root);
            mis_unit = 4;
            t_reduce(COHORT_FLOAT32, COHORT_SUM, i % 3 ? 8192 / 4 : 8188 / 4, 0, root);
            mis_unit = 1;
            t_gather(COHORT_UINT8, 8192, 0, root);
            t_scatter(COHORT_UINT8, i % 2 ? 8192 : 4096, 0, root);
        }
        CHECK(agreed_u64(s->xw_probes) && agreed_u64(s->xw_singles) && agreed_u64(s->xw_at),
              "probes %llu, singles %llu agreed", (unsigned long long)s->xw_probes,
              (unsigned long long)s->xw_singles);
    }
    /* alone: the lead first, then rank 1 */
    for (int who = 0; who < 2; who++) {
        t_barrier();
        int far = s->xw_far;
        uint64_t n = s->xw_n, seq = G->seq + 1000;
        if (me != who)
            usleep(20000);
        uint64_t t0 = coh_now_ns();
        shm_xw_probe(s, seq);
        uint64_t took = coh_now_ns() - t0;
        CHECK(me != who || took >= 900000, "an xw probe alone took %llu ns",
              (unsigned long long)took);
        CHECK(s->xw_far == far && s->xw_n == (n * 2 < (1u << 22) ? n * 2 : 1u << 22) &&
                  s->xw_at == seq + s->xw_n,
              "gave up (%s first): far %d -> %d, every %llu -> %llu calls", who ? "rank 1" : "lead",
              far, s->xw_far, (unsigned long long)n, (unsigned long long)s->xw_n);
        CHECK(agreed_u64((uint64_t)s->xw_far) && agreed_u64(s->xw_n), "one outcome alone");
    }
    /* both there: the lead's verdict decides (a loaded host: retry) */
    for (int tries = 0;; tries++) {
        t_barrier();
        uint64_t n = s->xw_n;
        shm_xw_probe(s, G->seq + 1000);
        int32_t ok = s->xw_n != (n * 2 < (1u << 22) ? n * 2 : 1u << 22), all = 0;
        coh_call c = th_call(G, COH_COLL_ALL_REDUCE, COHORT_INT32, COHORT_MIN, -1, 1);
        OK(coh_shm_all_reduce(s, &c, &ok, &all, 1));
        if (all)
            break;
        CHECK(tries < 100, "no xw probe decided in %d tries", tries);
    }
    CHECK(me || s->xw_far == (s->xc_ns >= 200), "decided: far %d after %u ns", s->xw_far,
          s->xc_ns);
    CHECK(agreed_u64((uint64_t)s->xw_far) && agreed_u64(s->xw_n), "one outcome decided");
    /* the adversary: another local process of the job writes the next
     * probe's outcome first - decided, far, the next probe 0 calls on. Both
     * ranks take it (it is the first writer), and the interval stays at
     * least xw_n_min: no probe in every call. */
    t_barrier();
    if (me == 0) {
        uint64_t ep = (s->xc_epoch + 1) & 0xffffffffu;
        atomic_store(&s->hdr->xw_word, ep << 32 | 1u << 2 | 1u);
    }
    t_barrier();
    uint64_t seq = G->seq + 1000;
    shm_xw_probe(s, seq);
    CHECK(s->xw_far == 1 && s->xw_n == s->xw_n_min && s->xw_at == seq + s->xw_n_min,
          "forged outcome: far %d, every %llu calls (at least %llu)", s->xw_far,
          (unsigned long long)s->xw_n, (unsigned long long)s->xw_n_min);
    CHECK(agreed_u64((uint64_t)s->xw_far) && agreed_u64(s->xw_at), "one forged outcome");
}

/* 2 ranks apart, COHORT_SHM_XCORE=auto: an all_reduce in the band asks
 * for a probe every 10 ms and takes the lead's verdict; both ranks run
 * each probe, the lead measures a sane round trip, and the path follows
 * the verdict the lead had when the call began. Then the adversary: a
 * probe the peer never answers (it sleeps) ends within the limit with no
 * measurement, on either side, and the next probe both ranks run (tokens
 * of a new epoch: the stale ones in the lines cannot match) measures
 * again. */
static void xcore_body(coh_shm *s)
{
    CHECK(s->cma && s->xc_adapt == 1 && s->ar_far_to == (2u << 20), "adaptive: %s",
          s->copy_info);
    CHECK(strstr(coh_shm_copy_path(s, COH_COLL_ALL_REDUCE, 1u << 20), "measure far apart"),
          "path: %s", coh_shm_copy_path(s, COH_COLL_ALL_REDUCE, 1u << 20));
    /* what cohort_describe reports: the lead's verdict, nothing on rank 1 */
    CHECK(me ? !coh_shm_xc_verdict(s)
             : !strcmp(coh_shm_xc_verdict(s) ? coh_shm_xc_verdict(s) : "", "not yet measured"),
          "verdict before a probe: %s", coh_shm_xc_verdict(s) ? coh_shm_xc_verdict(s) : "(none)");
    mis_unit = 4;
    /* a probe the peer is slow to reach may fail (a vCPU the host did not
     * run for a millisecond): the path follows the verdict either way; the
     * joint probes at the end retry until one measures */
    uint64_t epoch = s->xc_epoch, probes = s->xc_probes;
    for (int i = 0; i < 9; i++) {
        /* the lead's verdict for this call (XC_FAR_NS; 0: none yet) */
        int far = s->xc_ns >= 200, near = s->xc_ns && !far;
        uint64_t twos = s->xc_twos;
        if (me == 0)
            t_ar_path(COHORT_FLOAT32, COHORT_SUM, (512u << 10) / 4 + 3, 0, far);
        else
            t_all_reduce(COHORT_FLOAT32, COHORT_SUM, (512u << 10) / 4 + 3, 0);
        CHECK(me || s->xc_twos - twos == (uint64_t)near, "near verdict: %llu",
              (unsigned long long)(s->xc_twos - twos));
        CHECK(s->xc_ns < 1000000, "round trip %u ns", s->xc_ns);
        if (i % 3 == 2)
            usleep(11000); /* the next call is due a probe */
    }
    /* every probe ran on both ranks (agreed; one every 10 ms, the interval
     * doubled after each failed one); whether it measured depends on the
     * host running both vCPUs (below) */
    int64_t ep = (int64_t)(s->xc_epoch - epoch), lo = 0, hi = 0;
    coh_call c1 = th_call(G, COH_COLL_ALL_REDUCE, COHORT_INT64, COHORT_MIN, -1, 1);
    OK(coh_shm_all_reduce(s, &c1, &ep, &lo, 1));
    coh_call c2 = th_call(G, COH_COLL_ALL_REDUCE, COHORT_INT64, COHORT_MAX, -1, 1);
    OK(coh_shm_all_reduce(s, &c2, &ep, &hi, 1));
    CHECK(lo == hi && ep >= 1, "probes run: %lld here, %lld-%lld (%llu measured)", (long long)ep,
          (long long)lo, (long long)hi, (unsigned long long)(s->xc_probes - probes));
    t_all_reduce(COHORT_FLOAT32, COHORT_SUM, (512u << 10) / 4, 1); /* in place: two copies */
    /* Every 16th barrier carries the lead's verdict to the calls right
     * after barriers (bar_near: the ring near, the single copy from 4 KiB
     * far or before a probe measured) and runs a probe when one is due, on
     * both ranks. */
    for (int i = 0; i < 4; i++) {
        usleep(11000); /* a probe due */
        int32_t want = -1; /* the lead's verdict as it entered the verdict barrier */
        for (int k = 0; k < 16; k++) {
            if (s->bar_count % 16 == 0) /* near counts where the kernel's copy is dear */
                want = s->xc_dear && s->xc_ns && s->xc_ns < 200;
            t_barrier();
            int32_t bn = s->bar_near, bmin = 0, bmax = 0;
            uint32_t ph = s->phase;
            t_broadcast(COHORT_UINT8, 8192, k & 1);
            CHECK(bn ? s->phase - ph == 1 : s->phase - ph >= 2,
                  "broadcast after a barrier, near %d: %u phases", bn, s->phase - ph);
            coh_call c3 = th_call(G, COH_COLL_ALL_REDUCE, COHORT_INT32, COHORT_MIN, -1, 1);
            OK(coh_shm_all_reduce(s, &c3, &bn, &bmin, 1));
            coh_call c4 = th_call(G, COH_COLL_ALL_REDUCE, COHORT_INT32, COHORT_MAX, -1, 1);
            OK(coh_shm_all_reduce(s, &c4, &bn, &bmax, 1));
            CHECK(bmin == bmax, "both ranks read the lead's verdict: %d-%d", bmin, bmax);
            CHECK(me || want < 0 || bn == want,
                  "the lead's verdict as it entered the verdict barrier: near %d, want %d", bn,
                  want);
        }
        CHECK(want >= 0 || me, "a verdict barrier in 16");
    }
    /* the probe is the barriers' own: 16 barriers and 1 KiB broadcasts (the
     * ring, no single copy that could probe) 11 ms after the last probe */
    for (int i = 0; i < 3; i++) {
        if (me == 0) { /* due: past the lead's schedule (longer after failed probes) */
            uint64_t now = coh_now_ns();
            usleep((useconds_t)((s->xc_next > now ? (s->xc_next - now) / 1000 : 0) + 1000));
        }
        uint64_t ep0 = s->xc_epoch;
        for (int k = 0; k < 16; k++) {
            t_barrier();
            t_broadcast(COHORT_UINT8, 1024, 0);
        }
        CHECK(s->xc_epoch == ep0 + 1, "16 barriers 11 ms after the last probe ran %llu",
              (unsigned long long)(s->xc_epoch - ep0));
    }
    /* a rank alone in a probe (the lead first, then rank 1) gives up at the
     * limit with no measurement; the peer that comes later sees it gave up
     * and returns at once. The two barriers here are not verdict barriers
     * (every 16th: its probe would reset the failures counted below); the
     * count is the same on both ranks. */
    while (s->bar_count % 16 == 0 || s->bar_count % 16 == 15)
        t_barrier();
    for (int who = 0; who < 2; who++) {
        t_barrier();
        if (me != who)
            usleep(20000);
        uint32_t ns = s->xc_ns;
        uint64_t t0 = coh_now_ns();
        int r = shm_xc_probe(s);
        uint64_t took = coh_now_ns() - t0;
        CHECK(r == (me == who ? -1 : 0), "probe alone: %d", r);
        CHECK(me != who || took >= 900000, "a missed probe took %llu ns", (unsigned long long)took);
        CHECK(me || s->xc_ns == ns, "a failed probe changed the verdict: %u -> %u ns", ns,
              s->xc_ns);
    }
    /* the lead's interval doubled for each (backoff: XC_BACKOFF_MAX) */
    CHECK(me || s->xc_fails >= 2, "lead: %u failed probes in a row", s->xc_fails);
    /* the next probe, both there (new tokens: the old ones cannot match) */
    for (int tries = 0;; tries++) {
        t_barrier();
        int r = shm_xc_probe(s);
        int32_t ok = r == 1 && (me || s->xc_ns > 0), all = 0; /* agreed: both retry or neither */
        coh_call c = th_call(G, COH_COLL_ALL_REDUCE, COHORT_INT32, COHORT_MIN, -1, 1);
        OK(coh_shm_all_reduce(s, &c, &ok, &all, 1));
        if (all)
            break;
        CHECK(tries < 100, "probe after: %d, %u ns", r, s->xc_ns); /* a loaded host: retry */
    }
    CHECK(me || s->xc_fails == 0, "lead: %u failed probes after one measured", s->xc_fails);
    CHECK(me || !strcmp(coh_shm_xc_verdict(s), s->xc_ns >= 200 ? "far" : "near"),
          "verdict after %u ns: %s", s->xc_ns, coh_shm_xc_verdict(s));
    CHECK(s->xw == 0, "the ring's verdict where the kernel's copy is cheap: xw %d", s->xw);
    t_all_reduce(COHORT_FLOAT32, COHORT_AVG, (1u << 20) / 4, 0);
}

/* One rank of an xcore case: the group, the case's body, the group freed. */
typedef struct xcore_case {
    const char *where;
    void (*body)(coh_shm *s);
} xcore_case;

static int xcore_rank(int rank, void *arg)
{
    const xcore_case *x = arg;
    nranks = 2;
    me = rank;
    where = x->where;
    cohort_status st;
    G = th_group(rank, 2, 30000, &st);
    if (!G)
        return 1;
    x->body(G->shm);
    th_group_free(G);
    th_done(2);
    return 0;
}

/* 2 unbound ranks, COHORT_SHM_XCORE=auto, the speed probe faked (probe_ns:
 * the kernel's copy 2x memcpy, cheap, or 4x, dear); nothing to test with
 * one cpu (the ranks are not apart). */
static void xcore_run(const char *name, const xcore_case *x, const char *probe_ns)
{
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    if (CPU_COUNT(&set) < 2) {
        fprintf(stderr, "%s: one cpu available, 2 ranks are not apart\n", name);
        return;
    }
    ck_assert_ptr_nonnull(th_shared_init());
    char env[160];
    snprintf(env, sizeof env,
             "COHORT_SHM_SINGLE_COPY=auto;COHORT_SHM_SINGLE_COPY_PROBE_NS=%s;COHORT_SHM_XCORE=auto",
             probe_ns);
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 2, .deadline_ms = 60000,
                  .extra_env = env};
    cht_result r;
    cht_run_ranks(&o, xcore_rank, (void *)x, &r);
    cht_assert_all_ok(&r);
}

START_TEST(xcore)
{
    static const xcore_case x = {"unbound, COHORT_SHM_XCORE=auto", xcore_body};
    xcore_run("xcore", &x, "2000,1000");
}
END_TEST

START_TEST(xcore_ring)
{
    static const xcore_case x = {"unbound, COHORT_SHM_XCORE=auto, the kernel's copy dear",
                                 xcore_ring_verdict};
    xcore_run("xcore_ring", &x, "4000,1000");
}
END_TEST

/* ---- the lead's timed verdict (shm_cma.c "the lead's timed verdict") ----
 *
 * 4 and 3 ranks pinned to 2 cpus (so on any machine with 2), the kernel's copy
 * dear (the probe faked at 4 memcpys) or cheap (2): broadcast above its
 * pieces, reduce from 32 KiB and all_to_all from 16 KiB a pair take the
 * path of the lead's timed verdict, each class first on the path the
 * probe's rules give its smallest size (dear: two copies; cheap: the
 * single copy for all_to_all and reduce of 32-192 KiB). Every call's path
 * is read from the op's single-copy counter and must be the class's agreed
 * bit XOR the agreed exploring schedule; the data of every call is
 * checked; every rank must hold one outcome. Then a decision forced by the
 * lead's table, a decision the lead misses (the others give up at the
 * limit: the paths stay, the interval doubles), and a forged word. */
static int busy_cpu[2];
typedef struct busy_case {
    int n, cheap;
} busy_case;

/* one call of the window, its path checked against the verdict */
static void ov_call(coh_shm *s, int coll, size_t bytes, int root, int inplace)
{
    int k = shm_ov_class(coll, bytes);
    uint32_t i = s->ov_cnt[k];
    uint64_t *ctr = coll == COH_COLL_BROADCAST ? &s->bc_singles
                    : coll == COH_COLL_REDUCE  ? &s->red_singles
                    : coll == COH_COLL_ALL_REDUCE ? &s->ar_singles
                                                  : &s->a2a_singles;
    uint64_t n0 = *ctr;
    mis_unit = coll == COH_COLL_REDUCE || coll == COH_COLL_ALL_REDUCE ? 4 : 1;
    if (coll == COH_COLL_BROADCAST)
        t_broadcast(COHORT_UINT8, bytes, root);
    else if (coll == COH_COLL_REDUCE)
        t_reduce(COHORT_FLOAT32, COHORT_SUM, bytes / 4, inplace, root);
    else if (coll == COH_COLL_ALL_REDUCE)
        t_all_reduce(COHORT_FLOAT32, COHORT_SUM, bytes / 4, inplace);
    else
        t_all_to_all(COHORT_UINT8, bytes, inplace);
    mis_unit = 1;
    int want = (int)(s->ov_bits >> k & 1u) ^ shm_ov_explore(i);
    /* an all_to_all in place leaves the single copy after its open phase */
    int took = coll == COH_COLL_ALL_TO_ALL && inplace ? want : (int)(*ctr - n0);
    CHECK(s->ov_ans == want && took == want && s->ov_cnt[k] == i + 1,
          "op %d of %zu B (class %d, call %u, bits %llx): path %d, took %d, want %d", coll, bytes,
          k, i, (unsigned long long)s->ov_bits, s->ov_ans, took, want);
}

static int ov_agreed(coh_shm *s)
{
    return agreed_u64(s->ov_bits) && agreed_u64(s->ov_w) && agreed_u64(s->ov_at) &&
           agreed_u64(s->ov_n) && agreed_u64(s->ov_ep) && agreed_u64(s->ov_singles) &&
           agreed_u64(s->ov_gaveup);
}

static void ov_fake(coh_shm *s, int k, uint32_t single_ns, uint32_t two_ns)
{
    for (int j = 0; j < SHM_OV_KEEP; j++)
        s->ov_smp[k][1][j] = single_ns, s->ov_smp[k][0][j] = two_ns;
    s->ov_nsmp[k][0] = s->ov_nsmp[k][1] = SHM_OV_KEEP;
}

static int busy_main(int rank, void *arg)
{
    const busy_case *bcase = arg;
    const int cheap = bcase->cheap;
    nranks = bcase->n;
    me = rank;
    where = cheap ? nranks == 3 ? "3 ranks on 2 cpus, the kernel's copy cheap, COHORT_SHM_BUSY=timed"
                                : "4 ranks on 2 cpus, the kernel's copy cheap, COHORT_SHM_BUSY=timed"
            : nranks == 3 ? "3 ranks on 2 cpus, the kernel's copy dear, COHORT_SHM_BUSY=timed"
                          : "4 ranks on 2 cpus, the kernel's copy dear, COHORT_SHM_BUSY=timed";
    cpu_set_t two;
    CPU_ZERO(&two);
    CPU_SET(busy_cpu[0], &two);
    CPU_SET(busy_cpu[1], &two);
    CHECK(sched_setaffinity(0, sizeof two, &two) == 0, "sched_setaffinity");
    cohort_status st;
    G = th_group(rank, nranks, 60000, &st);
    if (!G)
        return 1;
    coh_shm *s = G->shm;
    const size_t K64 = 65536, pieces = COH_MIN(s->ring_k / 4, SHM_PIECES_MAX) * s->ring_bytes;
    CHECK(s->oversub && s->ov == 1 && strstr(s->copy_info, "whichever the lead's own calls") &&
              strstr(s->copy_info, cheap ? "each size starts on the path the rules above give it"
                                         : "each size starts on two copies"),
          "timed verdict %d: %s", s->ov, s->copy_info);
    /* the longest copy_info there is (the cheap window's), whole, with room
     * for its numbers to grow (the probe's times, measuring's us, a larger
     * ring's sizes: 64 B more digits than the faked probe's here) */
    CHECK(strlen(s->copy_info) + 64 < sizeof s->copy_info, "copy_info near its %zu B: %zu B: %s",
          sizeof s->copy_info, strlen(s->copy_info), s->copy_info);
    CHECK(s->ov_from[COH_COLL_BROADCAST] == COH_MAX(K64, pieces + 1) &&
              s->ov_from[COH_COLL_REDUCE] == 32768 && s->ov_from[COH_COLL_ALL_REDUCE] == SIZE_MAX &&
              s->ov_from[COH_COLL_ALL_TO_ALL] == 16384 && s->ov_from[COH_COLL_GATHER] == SIZE_MAX,
          "window from %zu / %zu / %zu / %zu", s->ov_from[COH_COLL_BROADCAST],
          s->ov_from[COH_COLL_REDUCE], s->ov_from[COH_COLL_ALL_REDUCE],
          s->ov_from[COH_COLL_ALL_TO_ALL]);
    const size_t bc = s->ov_from[COH_COLL_BROADCAST];
    CHECK(!shm_ring_pieces(s, bc) && shm_ring_pieces(s, bc - 1), "pieces end at %zu B", bc - 1);
    /* the seeds: a class starts on the probe's rule at its smallest size */
    uint64_t seed = 0;
    for (int k = 0; k < SHM_OV_CLASSES; k++) {
        int op = k / SHM_OV_SIZES, sz = k % SHM_OV_SIZES;
        size_t lo = op == 1 ? (size_t)32768 << sz : op == 3 ? (size_t)16384 << sz : K64 << sz;
        if (cheap && (op == 3 || (op == 1 && lo < 196608)))
            seed |= (uint64_t)1 << k;
        CHECK(shm_ov_class_lo(k) == lo && shm_ov_class(shm_ov_class_coll(k), lo) == k &&
                  (sz == 0 || shm_ov_class(shm_ov_class_coll(k), lo - 1) == k - 1),
              "class %d: from %zu B, op %d", k, shm_ov_class_lo(k), shm_ov_class_coll(k));
    }
    CHECK(s->ov_bits == seed, "seeded %llx, want %llx", (unsigned long long)s->ov_bits,
          (unsigned long long)seed);
    CHECK(strstr(coh_shm_copy_path(s, COH_COLL_ALL_TO_ALL, K64),
                 cheap ? "single copy (cma) now" : "two copies (segment) now") &&
              strstr(coh_shm_copy_path(s, COH_COLL_REDUCE, 32768),
                     cheap ? "single copy (cma) now" : "two copies (segment) now") &&
              strstr(coh_shm_copy_path(s, COH_COLL_REDUCE, 4 * K64), "two copies (segment) now") &&
              strstr(coh_shm_copy_path(s, COH_COLL_BROADCAST, bc), "two copies (segment) now"),
          "paths before a decision: %s", coh_shm_copy_path(s, COH_COLL_ALL_TO_ALL, K64));
    CHECK(!strstr(coh_shm_copy_path(s, COH_COLL_ALL_REDUCE, K64), " now"),
          "all_reduce is not in the window: %s", coh_shm_copy_path(s, COH_COLL_ALL_REDUCE, K64));
    /* the classes: powers of two from 64 KiB, reduce's from 32 KiB,
     * all_to_all's from 16 KiB a pair */
    CHECK(shm_ov_class(COH_COLL_ALL_TO_ALL, 16384) == 3 * SHM_OV_SIZES &&
              shm_ov_class(COH_COLL_ALL_TO_ALL, 32767) == 3 * SHM_OV_SIZES &&
              shm_ov_class(COH_COLL_ALL_TO_ALL, 32768) == 3 * SHM_OV_SIZES + 1 &&
              shm_ov_class(COH_COLL_ALL_TO_ALL, SIZE_MAX) == 4 * SHM_OV_SIZES - 1 &&
              shm_ov_class(COH_COLL_BROADCAST, K64) == 0 &&
              shm_ov_class(COH_COLL_BROADCAST, 2 * K64 - 1) == 0 &&
              shm_ov_class(COH_COLL_REDUCE, 32768) == SHM_OV_SIZES &&
              shm_ov_class(COH_COLL_REDUCE, K64 - 1) == SHM_OV_SIZES &&
              shm_ov_class(COH_COLL_REDUCE, 2 * K64) == SHM_OV_SIZES + 2 &&
              shm_ov_class(COH_COLL_ALL_REDUCE, (size_t)1 << 26) == 3 * SHM_OV_SIZES - 1,
          "classes");
    /* below the window: not counted */
    t_all_to_all(COHORT_UINT8, 16383, 0);
    t_broadcast(COHORT_UINT8, bc - 1, 0);
    mis_unit = 4;
    t_all_reduce(COHORT_FLOAT32, COHORT_SUM, K64 / 4 - 1, 0);
    t_reduce(COHORT_FLOAT32, COHORT_SUM, 32768 / 4 - 1, 0, 1);
    mis_unit = 1;
    CHECK(s->ov_w == 0, "calls below the window counted: %llu", (unsigned long long)s->ov_w);
    /* the first calls of a class: its seed's path, then a run of 8 on the
     * other, before any decision; the lead times a run's calls from its
     * fifth (the first carry the other path's state): 4 of the run, none
     * of call 0 */
    for (int i = 0; i < 9; i++)
        ov_call(s, COH_COLL_ALL_TO_ALL, K64, 0, 0);
    CHECK(s->a2a_singles == (cheap ? 1u : 8u) && s->ov_decisions == 0,
          "first calls: %llu single, %llu decisions", (unsigned long long)s->a2a_singles,
          (unsigned long long)s->ov_decisions);
    int k0 = shm_ov_class(COH_COLL_ALL_TO_ALL, K64);
    CHECK(me != 0 || (s->ov_nsmp[k0][!cheap] == 4 && s->ov_nsmp[k0][cheap] == 0),
          "the lead's times after the first run: %u two copies, %u single", s->ov_nsmp[k0][0],
          s->ov_nsmp[k0][1]);
    /* every op, sizes across classes, roots, in place: decisions come at
     * the agreed calls and every path follows the outcome */
    static const size_t sz[] = {65536, 196608 + 4096, 1u << 20};
    for (int round = 0; round < 6; round++) {
        for (size_t z = 0; z < COH_ARRAY_LEN(sz); z++) {
            int root = (round + (int)z) % nranks, ip = round & 1;
            ov_call(s, COH_COLL_BROADCAST, COH_MAX(sz[z], bc), root, 0);
            ov_call(s, COH_COLL_REDUCE, sz[z], root, ip);
            ov_call(s, COH_COLL_REDUCE, sz[z] / 2, (root + 1) % nranks, !ip); /* from 32 KiB */
            uint64_t ar = s->ar_singles, w = s->ov_w;
            mis_unit = 4;
            t_all_reduce(COHORT_FLOAT32, COHORT_SUM, sz[z] / 4, ip);
            mis_unit = 1;
            CHECK(s->ar_singles == ar && s->ov_w == w, "all_reduce of %zu B counted or single",
                  sz[z]);
            ov_call(s, COH_COLL_ALL_TO_ALL, sz[z], 0, ip);
            ov_call(s, COH_COLL_ALL_TO_ALL, sz[z] + 4100, 0, 0);
            ov_call(s, COH_COLL_ALL_TO_ALL, sz[z] / 4, 0, ip); /* 16 KiB a pair and up */
        }
        /* calls outside the window between them do not count */
        uint64_t w = s->ov_w;
        t_gather(COHORT_UINT8, K64, 0, round % nranks);
        mis_unit = 4;
        t_all_reduce(COHORT_FLOAT32, COHORT_SUM, 1000, 0);
        mis_unit = 1;
        CHECK(s->ov_w == w, "calls outside the window counted");
        CHECK(ov_agreed(s), "one outcome: bits %llx, window call %llu, next at %llu",
              (unsigned long long)s->ov_bits, (unsigned long long)s->ov_w,
              (unsigned long long)s->ov_at);
    }
    CHECK(s->ov_decisions >= 2 && s->ov_at > s->ov_w && s->ov_n >= 8 && s->ov_n <= 1024,
          "%llu decisions, next at %llu of %llu, every %llu", (unsigned long long)s->ov_decisions,
          (unsigned long long)s->ov_at, (unsigned long long)s->ov_w, (unsigned long long)s->ov_n);
    /* a decision the lead's table forces: all_to_all of 64 KiB a pair to
     * the path it is not on, two copies for broadcast of 1 MiB (median of
     * 5: one real call's time cannot move it) */
    int kar = shm_ov_class(COH_COLL_ALL_TO_ALL, K64), kbc = shm_ov_class(COH_COLL_BROADCAST, 1u << 20);
    uint64_t kar_bit = s->ov_bits >> kar & 1u;
    /* and reduce of 256 KiB, the other path x0.9 of its own: the path
     * moves only for a median at least 1/8 faster, so it stays */
    int krd = shm_ov_class(COH_COLL_REDUCE, 4 * K64);
    uint64_t krd_bit = s->ov_bits >> krd & 1u;
    if (me == 0) {
        ov_fake(s, kar, kar_bit ? 900000 : 1000, kar_bit ? 1000 : 900000);
        ov_fake(s, kbc, 900000, 1000);
        ov_fake(s, krd, krd_bit ? 100000 : 90000, krd_bit ? 90000 : 100000);
    }
    s->ov_at = s->ov_w; /* due at the next window call, on every rank */
    uint64_t dec = s->ov_decisions;
    ov_call(s, COH_COLL_ALL_TO_ALL, K64, 0, 0);
    CHECK(s->ov_decisions == dec + 1 && (s->ov_bits >> kar & 1u) == !kar_bit &&
              !(s->ov_bits >> kbc & 1u),
          "forced: bits %llx", (unsigned long long)s->ov_bits);
    CHECK((s->ov_bits >> krd & 1u) == krd_bit, "reduce moved for a path only x0.9: bits %llx",
          (unsigned long long)s->ov_bits);
    CHECK(strstr(coh_shm_copy_path(s, COH_COLL_ALL_TO_ALL, K64),
                 kar_bit ? "two copies (segment) now" : "single copy (cma) now"),
          "path: %s", coh_shm_copy_path(s, COH_COLL_ALL_TO_ALL, K64));
    for (int i = 0; i < 20; i++) {
        ov_call(s, COH_COLL_ALL_TO_ALL, K64, 0, i & 1);
        ov_call(s, COH_COLL_BROADCAST, 1u << 20, i % nranks, 0);
    }
    CHECK(ov_agreed(s), "one forced outcome");
    /* the lead misses a decision: the others wait the limit, give up, and
     * the lead, coming late, takes "gave up" too */
    t_barrier();
    uint64_t bits = s->ov_bits, n = s->ov_n, gave = s->ov_gaveup;
    if (me == 0)
        usleep(60000);
    uint64_t t0 = coh_now_ns();
    shm_ov_decide(s);
    uint64_t t1 = coh_now_ns();
    /* Nobody gives up before the limit: the first "gave up" is written by
     * a rank that waited its whole 20 ms, and another waiter may stop on
     * reading it - less than its own 20 ms when it began later (3 ranks
     * under ASan: 18.5 ms). So the earliest end among the waiters is at
     * least the limit after the earliest start (one clock: CLOCK_MONOTONIC
     * on one host). */
    uint64_t mine[2] = {me ? t0 : UINT64_MAX, me ? t1 : UINT64_MAX}, first[2] = {0, 0};
    coh_call cg = th_call(G, COH_COLL_ALL_REDUCE, COHORT_UINT64, COHORT_MIN, -1, 2);
    OK(coh_shm_all_reduce(s, &cg, mine, first, 2));
    CHECK(first[1] - first[0] >= 19000000, "gave up %llu ns after the first waiter began",
          (unsigned long long)(first[1] - first[0]));
    CHECK(s->ov_bits == bits && s->ov_n == (n * 2 < 1024 ? n * 2 : 1024) &&
              s->ov_gaveup == gave + 1 && s->ov_at == s->ov_w + s->ov_n,
          "gave up: bits %llx -> %llx, every %llu -> %llu", (unsigned long long)bits,
          (unsigned long long)s->ov_bits, (unsigned long long)n, (unsigned long long)s->ov_n);
    CHECK(ov_agreed(s), "one outcome, gave up");
    /* both there: the lead decides (a descheduled lead: retry) */
    for (int tries = 0;; tries++) {
        t_barrier();
        uint64_t g0 = s->ov_gaveup;
        shm_ov_decide(s);
        int32_t ok = s->ov_gaveup == g0, all = 0;
        coh_call c = th_call(G, COH_COLL_ALL_REDUCE, COHORT_INT32, COHORT_MIN, -1, 1);
        OK(coh_shm_all_reduce(s, &c, &ok, &all, 1));
        if (all)
            break;
        CHECK(tries < 50, "no decision in %d tries", tries);
    }
    CHECK(ov_agreed(s), "one outcome decided");
    /* the adversary: another local process writes the next decision first -
     * decided, every class single, code 0. Every rank takes it (the first
     * writer); the interval stays at least 8 window calls. */
    t_barrier();
    if (me == 0) {
        uint64_t ep = (s->ov_ep + 1) & 0xffffu;
        atomic_store(&s->hdr->ov_word, ep << 48 | (uint64_t)1 << 47 | (((uint64_t)1 << 44) - 1));
    }
    t_barrier();
    shm_ov_decide(s);
    CHECK(s->ov_bits == (((uint64_t)1 << SHM_OV_CLASSES) - 1) && s->ov_n == 8 &&
              s->ov_at == s->ov_w + 8,
          "forged: bits %llx, every %llu", (unsigned long long)s->ov_bits,
          (unsigned long long)s->ov_n);
    CHECK(ov_agreed(s), "one forged outcome");
    for (int i = 0; i < 12; i++)
        ov_call(s, i & 1 ? COH_COLL_REDUCE : COH_COLL_ALL_TO_ALL, K64, i % nranks, 0);
    CHECK(ov_agreed(s), "one outcome after the forged one");
    th_group_free(G);
    th_done(nranks);
    return 0;
}

START_TEST(busy_timed)
{
    if (first_two_cpus(busy_cpu) < 2) {
        fprintf(stderr, "busy_timed: one cpu available, the ranks would be crowded on it\n");
        return;
    }
    ck_assert_ptr_nonnull(th_shared_init());
    static const busy_case bc[4] = {{4, 0}, {3, 0}, {4, 1}, {3, 1}};
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = bc[_i].n, .deadline_ms = 120000,
                  .extra_env = bc[_i].cheap
                                   ? "COHORT_SHM_SINGLE_COPY=auto;COHORT_SHM_SINGLE_COPY_PROBE_NS="
                                     "2000,1000;COHORT_SHM_BUSY=timed"
                                   : "COHORT_SHM_SINGLE_COPY=auto;COHORT_SHM_SINGLE_COPY_PROBE_NS="
                                     "4000,1000;COHORT_SHM_BUSY=timed"};
    cht_result r;
    cht_run_ranks(&o, busy_main, (void *)&bc[_i], &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* auto with more than 2 ranks a cpu (every rank pinned to one cpu, so
 * this holds on any machine): all_to_all takes single copy from
 * COHORT_SHM_SINGLE_COPY_BYTES (default 64 KiB per rank block) although
 * the probe (its times replaced: the kernel's copy 2x memcpy) keeps two
 * copies, and send/recv, gather and scatter (the ranks outnumber the cpus:
 * a leaf reads its block whole; gather and scatter from just above the
 * ring's slot); every other op keeps two copies, and the
 * data are right at 8 ranks through it (blocks at, above and below the
 * threshold, in place: two copies after the open phase; send/recv between
 * the pairs; gather and scatter from each root). 3 ranks with the affinity
 * left as it is (>= 2 cpus): not crowded; send/recv, gather and scatter
 * take the single copy where 3 ranks outnumber the cpus, and all_to_all
 * too where the faked probe makes the kernel's copy cheap (2 memcpys), not
 * where it is dear (4); COHORT_SHM_BUSY=probe where cheap keeps those rules
 * from the timed verdict, which they only seed by default (busy_timed). */
enum { C_PINNED5, C_PINNED8, C_FREE3, C_FREE3_DEAR, C_FREE5 };
static int crowd_cpu, crowd_cpus;
static int crowd_main(int rank, void *arg)
{
    int mode = *(const int *)arg, pinned = mode == C_PINNED5 || mode == C_PINNED8;
    nranks = mode == C_PINNED8 ? 8 : mode == C_PINNED5 || mode == C_FREE5 ? 5 : 3;
    /* 5 ranks with the affinity as given: crowded on 2 cpus (up to 4 a cpu) */
    int crowded = pinned || (mode == C_FREE5 && nranks > 2 * crowd_cpus);
    /* the faked probe: the kernel's copy 2 memcpys (cheap), or 4 (dear) */
    int cheap = mode != C_FREE3_DEAR;
    me = rank;
    where = pinned ? "crowded on one cpu" : mode == C_FREE5 ? "5 ranks, cpus as given" : "3 ranks, cpus as given";
    if (pinned) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(crowd_cpu, &one);
        CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity");
    }
    cohort_status st;
    G = th_group(rank, nranks, 60000, &st);
    if (!G)
        return 1;
    coh_shm *s = G->shm;
    const size_t min = 65536;
    int busy = crowded || nranks > crowd_cpus; /* the ranks outnumber the cpus */
    CHECK(s->cma == busy, "single copy %d (%s)", s->cma, s->copy_info);
    /* send/recv from 24 KiB where 2 ranks a cpu and the copy cheap (shm_cma.c
     * P2P_BUSY_FROM), else from 64 KiB */
    const size_t p2p_from = busy && !crowded && cheap ? 24576 : min;
    CHECK(shm_cma_use(s, COH_COLL_SEND, p2p_from) == busy &&
              !shm_cma_use(s, COH_COLL_SEND, p2p_from - 1),
          "send/recv at %zu B (%s)", p2p_from, s->copy_info);
    CHECK(p2p_from == min || strstr(s->copy_info, "send/recv from 24576 B") != NULL, "named: %s",
          s->copy_info);
    CHECK(!busy || strstr(coh_shm_copy_path(s, COH_COLL_SEND, min), "the receiver reads it"),
          "send/recv path: %s", coh_shm_copy_path(s, COH_COLL_SEND, min));
    /* all_to_all: crowded, or busy with the kernel's copy cheap; from 16
     * KiB a pair not crowded, 32 KiB crowded up to 4 ranks a cpu, 64 KiB
     * beyond (the pinned modes: 5 and 8 ranks on one cpu; both cheap here:
     * shm_cma.c A2A_CROWD_FROM, A2A_BUSY_FROM) */
    int a2a = crowded || (busy && cheap);
    const size_t a2a_from = !crowded ? 16384 : nranks <= 4 * coh_group_cpus(G) ? 32768 : min;
    CHECK(shm_cma_use(s, COH_COLL_ALL_TO_ALL, a2a_from) == a2a &&
              shm_cma_use(s, COH_COLL_ALL_TO_ALL, min) == a2a,
          "all_to_all at %zu B (%s)", a2a_from, s->copy_info);
    CHECK(!shm_cma_use(s, COH_COLL_ALL_TO_ALL, a2a_from - 1), "all_to_all at %zu B",
          a2a_from - 1);
    CHECK(strcmp(coh_shm_copy_path(s, COH_COLL_ALL_TO_ALL, a2a_from),
                 a2a                                                     ? "single copy (cma)"
                 : s->ov == 2 && a2a_from >= s->ov_from[COH_COLL_ALL_TO_ALL]
                     ? "two copies (segment; COHORT_SHM_BUSY=two)"
                     : "two copies (segment)") == 0,
          "path at %zu B: %s", a2a_from, coh_shm_copy_path(s, COH_COLL_ALL_TO_ALL, a2a_from));
    CHECK(!(busy && !crowded && cheap) || strstr(s->copy_info, "at most 3.0 memcpys") != NULL,
          "named: %s", s->copy_info);
    CHECK(!a2a || a2a_from == min ||
              strstr(s->copy_info, crowded ? "all_to_all from 32768 B a pair"
                                           : "all_to_all from 16384 B a pair") != NULL,
          "named: %s", s->copy_info);
    CHECK(!strcmp(coh_shm_copy_path(s, COH_COLL_ALL_TO_ALL, a2a_from - 1), "two copies (segment)"),
          "path at %zu B", a2a_from - 1);
    /* 3 ranks on 2 cpus: the timed verdict's ops, fixed at two copies
     * where the copy is dear (COHORT_SHM_BUSY=two), the probe's rules alone
     * where cheap (=probe: no verdict; these rules seed it, busy_timed) */
    CHECK(s->ov == (busy && !crowded && !cheap ? 2 : 0), "timed verdict %d (%s)", s->ov,
          s->copy_info);
    static const int others[] = {COH_COLL_BROADCAST, COH_COLL_ALL_GATHER, COH_COLL_REDUCE};
    for (size_t k = 0; k < COH_ARRAY_LEN(others); k++)
        CHECK(!shm_cma_use(s, others[k], 4 * min), "op %d: two copies (%s)", others[k],
              s->copy_info);
    /* reduce: 32-192 KiB where 3 ranks outnumber the cpus and the kernel's
     * copy is cheap (shm_cma.c red_busy), not crowded, not dear */
    int red = busy && !crowded && cheap;
    const size_t rlo = 32768, rhi = 196608;
    CHECK(shm_cma_use(s, COH_COLL_REDUCE, rlo) == red && !shm_cma_use(s, COH_COLL_REDUCE, rlo - 1) &&
              shm_cma_use(s, COH_COLL_REDUCE, rhi - 1) == red &&
              !shm_cma_use(s, COH_COLL_REDUCE, rhi),
          "reduce band (%s)", s->copy_info);
    CHECK(!red || strstr(s->copy_info, "reduce of 32768-196607 B") != NULL, "named: %s",
          s->copy_info);
    /* gather and scatter: from just above the ring's slot */
    const size_t gs = s->ring_bytes + 1;
    CHECK(s->ring_k && s->ring_bytes < min, "the ring: %zu slots of %zu B", s->ring_k,
          s->ring_bytes);
    CHECK(!busy || (s->cma_from[COH_COLL_GATHER] == gs && s->cma_from[COH_COLL_SCATTER] == gs),
          "rooted from %zu / %zu", s->cma_from[COH_COLL_GATHER], s->cma_from[COH_COLL_SCATTER]);
    static const int rooted[] = {COH_COLL_GATHER, COH_COLL_SCATTER};
    for (size_t k = 0; k < COH_ARRAY_LEN(rooted); k++) {
        CHECK(shm_cma_use(s, rooted[k], gs) == busy && !shm_cma_use(s, rooted[k], gs - 1) &&
                  shm_cma_use(s, rooted[k], min) == busy,
              "op %d at %zu B a block (%s)", rooted[k], gs, s->copy_info);
        CHECK(strcmp(coh_shm_copy_path(s, rooted[k], gs),
                     busy ? "single copy (cma)" : "two copies (segment)") == 0,
              "op %d path: %s", rooted[k], coh_shm_copy_path(s, rooted[k], gs));
    }
    CHECK(!busy || strstr(s->copy_info, "above the ring's slot") != NULL, "named: %s",
          s->copy_info);
    CHECK(!crowded || strstr(s->copy_info, "outnumber twice the cpus") != NULL, "named: %s",
          s->copy_info);
    if (mode != C_PINNED5) {
        t_all_to_all(COHORT_UINT8, a2a_from - 1, 0);
        t_all_to_all(COHORT_UINT8, a2a_from, 0);
        t_all_to_all(COHORT_UINT8, a2a_from, 1);
        t_all_to_all(COHORT_UINT8, min, 0);
        t_all_to_all(COHORT_UINT8, min + 4099, 0);
        t_all_to_all(COHORT_FLOAT32, min / 4 - 3, 0);
        t_all_to_all(COHORT_UINT8, min + 1, 1);
        t_all_to_all(COHORT_UINT8, 3 * min, 0);
    }
    t_sendrecv(p2p_from - 1);
    t_sendrecv(p2p_from);
    t_sendrecv(min - 1);
    t_sendrecv(min);
    t_sendrecv(3 * min + 5);
    /* reduce around the band's ends, each root, in place too: the root
     * alone below 64 KiB, the leaves' parts from there (red_share); the
     * path by red_singles */
    int rroots[] = {0, nranks - 1};
    for (int ri = 0; ri < 2; ri++)
        for (int ip = 0; ip < 2; ip++) {
            static const size_t rb[] = {32764, 32768, 65536 + 4100, 131072, 196604, 196608};
            for (size_t k = 0; k < COH_ARRAY_LEN(rb); k++) {
                uint64_t n0 = s->red_singles;
                mis_unit = 4;
                t_reduce(COHORT_FLOAT32, COHORT_SUM, rb[k] / 4, ip, rroots[ri]);
                mis_unit = 1;
                int single = red && rb[k] >= rlo && rb[k] < rhi;
                CHECK(s->red_singles - n0 == (uint64_t)single,
                      "reduce of %zu B (root %d, in place %d): single copy %llu, want %d", rb[k],
                      rroots[ri], ip, (unsigned long long)(s->red_singles - n0), single);
            }
            mis_unit = 4;
            t_reduce(COHORT_INT32, COHORT_MAX, 50001, ip, rroots[ri]);
            t_reduce(COHORT_FLOAT32, COHORT_AVG, 40000, ip, rroots[ri]);
            mis_unit = 1;
        }
    /* gather and scatter at, below and above the size, each root, in place
     * too: the single copy where the ranks outnumber the cpus */
    int roots[] = {0, nranks - 1};
    for (int ri = 0; ri < 2; ri++)
        for (int ip = 0; ip < 3; ip++) { /* scatter's 2: recv == send at the root */
            if (ip < 2) {
                t_gather(COHORT_UINT8, min, ip, roots[ri]);
                t_gather(COHORT_UINT8, gs, ip, roots[ri]);
                t_gather(COHORT_UINT8, gs - 1, ip, roots[ri]);
                t_gather(COHORT_FLOAT32, gs / 4 + 1027, ip, roots[ri]);
            }
            t_scatter(COHORT_UINT8, min, ip, roots[ri]);
            t_scatter(COHORT_UINT8, gs, ip, roots[ri]);
            t_scatter(COHORT_UINT8, gs - 1, ip, roots[ri]);
            t_scatter(COHORT_FLOAT32, gs / 4 + 1027, ip, roots[ri]);
        }
    th_group_free(G);
    th_done(nranks);
    return 0;
}

START_TEST(crowd)
{
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    int k = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) {
            if (!k)
                crowd_cpu = c;
            k++;
        }
    crowd_cpus = k;
    static const int modes[5] = {C_PINNED5, C_PINNED8, C_FREE3, C_FREE3_DEAR, C_FREE5};
    if ((modes[_i] == C_FREE3 || modes[_i] == C_FREE3_DEAR || modes[_i] == C_FREE5) && k < 2) {
        fprintf(stderr, "crowd: one cpu available, the free ranks would be pinned-like\n");
        return;
    }
    int n = modes[_i] == C_PINNED8 ? 8 : modes[_i] == C_PINNED5 || modes[_i] == C_FREE5 ? 5 : 3;
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = n, .deadline_ms = 120000,
                  .extra_env = modes[_i] == C_FREE3_DEAR
                                   ? "COHORT_SHM_SINGLE_COPY=auto;COHORT_SHM_SINGLE_COPY_PROBE_NS=4000,1000;"
                                     "COHORT_SHM_BUSY=two"
                                   : "COHORT_SHM_SINGLE_COPY=auto;COHORT_SHM_SINGLE_COPY_PROBE_NS=2000,1000;"
                                     "COHORT_SHM_BUSY=probe"};
    cht_result r;
    cht_run_ranks(&o, crowd_main, (void *)&modes[_i], &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* The probe's readings at attach: all ranks auto (each publishes the
 * median of 3 readings, and copy_info says so), or one rank with the
 * single copy off or its probe failing while the others measure - attach
 * completes on every rank, they agree on two copies, each names why, and
 * the data is right. */
static int probe_rounds_main(int rank, void *arg)
{
    int odd = *(const int *)arg; /* 0 none; 1 rank 0 off; 2 rank 2 probe-fail */
    me = rank;
    nranks = 3;
    where = "probe_rounds";
    if ((odd == 1 && rank == 0) || (odd == 2 && rank == 2))
        setenv("COHORT_SHM_SINGLE_COPY", odd == 1 ? "off" : "probe-fail", 1);
    OK(cohort_init(&G));
    coh_shm *s = G->shm;
    CHECK(s != NULL, "no segment");
    if (!odd) /* mem_ok: every rank could read every peer, so all measured */
        CHECK(!s->mem_ok || strstr(s->copy_info, "each the median of 3 readings") != NULL,
              "the readings are named: %s", s->copy_info);
    else {
        CHECK(!s->cma && !s->mem_ok, "single copy although a rank cannot: %s", s->copy_info);
        const char *why = rank == (odd == 1 ? 0 : 2)
                              ? (odd == 1 ? "COHORT_SHM_SINGLE_COPY=off" : "Bad address")
                          : odd == 1 ? "rank 0 could not read every peer"
                                     : "rank 2 could not read every peer";
        CHECK(strstr(s->copy_info, why) != NULL, "why is named (%s): %s", why, s->copy_info);
    }
    size_t n = (size_t)96 << 10; /* 384 KiB of uint32: past every single-copy bound */
    uint32_t *b = malloc(n * sizeof *b);
    CHECK(b != NULL, "malloc");
    for (int i = 0; i < 6; i++) {
        int root = i % 3;
        for (size_t j = 0; j < n; j++)
            b[j] = rank == root ? (uint32_t)(mix((uint64_t)i << 32 | j)) : 0;
        OK(cohort_broadcast(G, b, n, COHORT_UINT32, root));
        for (size_t j = 0; j < n; j++)
            CHECK(b[j] == (uint32_t)mix((uint64_t)i << 32 | j), "broadcast %d at %zu", i, j);
    }
    free(b);
    OK(cohort_finalize(G));
    return 0;
}

START_TEST(probe_rounds)
{
    static const int odd[3] = {0, 1, 2};
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 3, .deadline_ms = 60000,
                  .extra_env = "COHORT_SHM_SINGLE_COPY=auto"};
    cht_result r;
    cht_run_ranks(&o, probe_rounds_main, (void *)&odd[_i], &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* The cheap limit's edge (A2A_CHEAP_X10): 3 ranks outnumbering the cpus,
 * the probe's 64 KiB reading faked at exactly 3.0 memcpys (cheap: the busy
 * all_to_all takes the single copy from 16 KiB a pair) and at 3.001 (dear:
 * two copies). */
static int cheap_edge_main(int rank, void *arg)
{
    int dear = *(const int *)arg;
    me = rank;
    nranks = 3;
    where = dear ? "cheap_edge 3.001" : "cheap_edge 3.0";
    OK(cohort_init(&G));
    coh_shm *s = G->shm;
    CHECK(s != NULL, "no segment");
    if (!s->oversub && rank == 0)
        fprintf(stderr, "cheap_edge: 3 ranks do not outnumber the cpus here: not checked\n");
    if (s->mem_ok && s->oversub) { /* every rank could read every peer */
        CHECK(shm_cma_use(s, COH_COLL_ALL_TO_ALL, 65536) == !dear, "all_to_all 64 KiB: %s",
              s->copy_info);
        CHECK((strstr(s->copy_info, "at most 3.0 memcpys") == NULL) == dear, "named: %s",
              s->copy_info);
    }
    OK(cohort_finalize(G));
    return 0;
}

START_TEST(cheap_edge)
{
    static const int dear[2] = {0, 1};
#define CHEAP_EDGE_ENV(ns) "COHORT_SHM_SINGLE_COPY=auto;COHORT_SHM_BUSY=probe;" \
                           "COHORT_SHM_SINGLE_COPY_PROBE_NS=" ns "," ns
    static const char *const env[2] = {CHEAP_EDGE_ENV("3000,1000"), CHEAP_EDGE_ENV("3001,1000")};
#undef CHEAP_EDGE_ENV
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 3, .deadline_ms = 60000,
                  .extra_env = env[_i]};
    cht_result r;
    cht_run_ranks(&o, cheap_edge_main, (void *)&dear[_i], &r);
    cht_assert_all_ok(&r);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("shm_coll");
    TCase *tu = tcase_create("size_rule");
    tcase_add_test(tu, size_rule);
    tcase_add_test(tu, probe_median);
    tcase_add_loop_test(tu, probe_rounds, 0, 3);
    tcase_add_loop_test(tu, cheap_edge, 0, 2);
    tcase_set_timeout(tu, 60); /* probe_rounds: 3 ranks under a sanitizer */
    tcase_add_test(tu, env_limits);
    suite_add_tcase(s, tu);
    TCase *tb = tcase_create("bound");
    tcase_add_loop_test(tb, bound, 0, 6);
    tcase_add_test(tb, xcore);
    tcase_add_test(tb, xcore_ring);
    tcase_set_timeout(tb, 90);
    suite_add_tcase(s, tb);
    TCase *tw = tcase_create("crowd");
    tcase_add_loop_test(tw, crowd, 0, 5);
    tcase_add_loop_test(tw, busy_timed, 0, 4);
    tcase_set_timeout(tw, 150);
    suite_add_tcase(s, tw);
    TCase *tc = tcase_create("matrix");
    tcase_add_loop_test(tc, matrix, 0, (int)COH_ARRAY_LEN(cfgs));
    tcase_set_timeout(tc, 250);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
